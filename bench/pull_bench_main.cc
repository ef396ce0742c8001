// pull_bench: cold pulls of the test bed's sized images through our CRI client vs `ctr images
// pull`.
//
// Every pull starts cold: before it, the image is removed under every name (CRI RemoveImage, then
// `ctr images rm --sync` of any name left pointing at the same manifest or config) and the
// benchmark waits until none of the image's blobs is left in containerd's content store. Needs a
// running test bed (scripts/testbed/up); bench/run-pull-bench.sh starts one.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "bench/our_puller.h"
#include "bench/pull_bench.h"
#include "test/e2e/testbed_env.h"
#include "test/e2e/testbed_util.h"

namespace kruise::bench {
namespace {

using testing::TestbedImage;

// Removes every image name in k8s.io that points at `image`'s manifest, or is its config digest.
absl::Status RemoveAllNames(const std::vector<std::string>& ctr, const TestbedImage& image) {
  std::vector<std::string> argv = ctr;
  argv.insert(argv.end(), {"images", "ls"});
  std::string out;
  absl::StatusOr<int> rc = testing::RunCommand(argv, &out);
  if (!rc.ok()) {
    return rc.status();
  }
  if (*rc != 0) {
    return absl::UnavailableError("ctr images ls failed: " + out);
  }
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipWhitespace())) {
    std::vector<std::string> cols = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (cols.size() < 3 || cols[0] == "REF") {
      continue;
    }
    if (cols[2] == image.blobs[0] || cols[0] == image.blobs[1]) {
      std::vector<std::string> rm = ctr;
      rm.insert(rm.end(), {"images", "rm", "--sync", cols[0]});
      std::string rm_out;
      absl::StatusOr<int> rm_rc = testing::RunCommand(rm, &rm_out);
      if (!rm_rc.ok() || *rm_rc != 0) {
        return absl::UnavailableError("ctr images rm " + cols[0] + " failed: " + rm_out);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status WaitContentGone(const std::vector<std::string>& ctr, const TestbedImage& image) {
  std::string left;
  const bool gone = testing::WaitFor(
      [&] {
        absl::StatusOr<std::set<std::string>> content = testing::ContentDigests(ctr);
        if (!content.ok()) {
          left = content.status().ToString();
          return false;
        }
        left.clear();
        for (const std::string& blob : image.blobs) {
          if (content->count(blob) > 0) {
            left += " " + blob;
          }
        }
        return left.empty();
      },
      absl::Seconds(60), absl::Milliseconds(50));
  if (!gone) {
    return absl::DeadlineExceededError("content still present 60 s after removing " +
                                       image.name_tag + ":" + left +
                                       " (does another image share these layers?)");
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  CLI::App app{"Cold-pull benchmark: our CRI client vs ctr images pull"};
  int runs = 5;
  std::vector<std::string> images{"10m", "100m"};
  app.add_option("--runs", runs, "timed pulls per puller and image (after one warm-up)")
      ->check(CLI::Range(1, 100));
  app.add_option("--images", images, "sized images to pull (10m, 100m)");
  bool with_bare = true;
  app.add_flag("!--no-bare", with_bare, "skip the bare gRPC stub baseline");
  CLI11_PARSE(app, argc, argv);

  absl::StatusOr<testing::TestbedEnv> env = testing::TestbedEnv::Load();
  if (!env.ok()) {
    std::fprintf(stderr, "no test bed: %s (run scripts/testbed/up)\n",
                 env.status().ToString().c_str());
    return 2;
  }
  const std::vector<std::string> ctr = testing::SplitCommandLine(env->Get("KRUISE_TESTBED_CTR"));
  absl::StatusOr<std::vector<TestbedImage>> catalog =
      testing::ReadImagesFile(env->Get("KRUISE_TESTBED_IMAGES_FILE"));
  if (!catalog.ok()) {
    std::fprintf(stderr, "%s\n", catalog.status().ToString().c_str());
    return 2;
  }
  absl::StatusOr<std::unique_ptr<OurPuller>> ours =
      MakeOurPuller(env->Get("KRUISE_TESTBED_CRI_SOCKET"));
  if (!ours.ok()) {
    std::fprintf(stderr, "CRI client: %s\n", ours.status().ToString().c_str());
    return 2;
  }

  absl::StatusOr<std::unique_ptr<OurPuller>> bare =
      MakeBareGrpcPuller(env->Get("KRUISE_TESTBED_CRI_SOCKET"));
  if (!bare.ok()) {
    std::fprintf(stderr, "bare gRPC: %s\n", bare.status().ToString().c_str());
    return 2;
  }

  // Index 0: ours, 1: ctr, 2: bare gRPC stub.
  std::vector<Puller> pullers;
  pullers.push_back({"ours (CRI)", [&](const std::string& ref) { return (*ours)->Pull(ref); }});
  pullers.push_back({"ctr pull", [&](const std::string& ref) {
                       std::vector<std::string> args = ctr;
                       args.insert(args.end(), {"images", "pull", "--plain-http", ref});
                       std::string out;
                       absl::StatusOr<int> rc = testing::RunCommand(args, &out);
                       if (!rc.ok()) {
                         return rc.status();
                       }
                       return *rc == 0 ? absl::OkStatus()
                                       : absl::UnknownError("ctr images pull failed: " + out);
                     }});
  if (with_bare) {
    pullers.push_back({"bare gRPC", [&](const std::string& ref) { return (*bare)->Pull(ref); }});
  }
  ColdFn make_cold = [&](const std::string& ref, const TestbedImage& image) -> absl::Status {
    if (absl::Status s = (*ours)->Remove(ref); !s.ok()) {
      return s;
    }
    if (absl::Status s = RemoveAllNames(ctr, image); !s.ok()) {
      return s;
    }
    return WaitContentGone(ctr, image);
  };

  std::printf("%-30s %5s %11s %11s %11s %9s %10s\n", "image", "runs", "ours p50 s", "ctr p50 s",
              "bare p50 s", "ours/ctr", "ours/bare");
  int rc = 0;
  for (const std::string& size : images) {
    const TestbedImage* image = nullptr;
    for (const TestbedImage& candidate : *catalog) {
      if (candidate.name_tag == "sized:" + size) {
        image = &candidate;
      }
    }
    if (image == nullptr) {
      std::fprintf(stderr, "sized:%s is not in the test bed\n", size.c_str());
      return 2;
    }
    const std::string ref = env->Get("KRUISE_TESTBED_REGISTRY") + "/sized:" + size;
    absl::StatusOr<PullBenchResult> result = RunPullBench(ref, *image, pullers, runs, make_cold);
    if (!result.ok()) {
      std::fprintf(stderr, "%s: %s\n", ref.c_str(), result.status().ToString().c_str());
      return 1;
    }
    const double ratio = result->medians[0] / result->medians[1];
    const double bare_median = with_bare ? result->medians[2] : 0;
    std::printf("%-30s %5d %11.3f %11.3f %11.3f %9.2f %10.2f\n", ref.c_str(), runs,
                result->medians[0], result->medians[1], bare_median, ratio,
                with_bare ? result->medians[0] / bare_median : 0.0);
    for (size_t i = 0; i < pullers.size(); ++i) {
      std::printf("    %-12s", pullers[i].name.c_str());
      for (double s : result->seconds[i]) {
        std::printf(" %.3f", s);
      }
      std::printf("\n");
    }
    if (ratio > 1.05) {
      std::printf("    ratio %.2f exceeds the 1.05 target\n", ratio);
      rc = 3;
    }
  }
  return rc;
}

}  // namespace
}  // namespace kruise::bench

int main(int argc, char** argv) { return kruise::bench::Main(argc, argv); }
