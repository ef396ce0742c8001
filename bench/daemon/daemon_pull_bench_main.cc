// daemon_pull_bench: a cold image pull through kruise-daemon (NodeImage tag set -> image present in
// containerd) vs a bare CRI PullImage (generated gRPC stub) vs `ctr images pull`, on the CRI test
// bed's containerd and registry (scripts/testbed). The daemon runs as a child process against the
// in-process fake API server, with --socket-file pointing at the test bed's containerd.
//
// Every pull starts cold: the image is removed under every name and the benchmark waits until
// none of its blobs is left in containerd's content store. Run it with bench/daemon/run.sh.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/daemon/daemon_harness.h"
#include "bench/our_puller.h"
#include "bench/pull_bench.h"
#include "cri/grpc_cri.h"
#include "kube/resources.h"
#include "kube/rest_client.h"
#include "test/e2e/testbed_env.h"
#include "test/e2e/testbed_util.h"
#include "test/fakes/apiserver/fake_apiserver.h"

namespace kruise::bench {
namespace {

using Json = nlohmann::json;
using testing::TestbedImage;

absl::Status RunCtr(const std::vector<std::string>& ctr, std::vector<std::string> args,
                    std::string* out) {
  std::vector<std::string> argv = ctr;
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<int> rc = testing::RunCommand(argv, out);
  if (!rc.ok()) return rc.status();
  if (*rc != 0) return absl::UnknownError(absl::StrCat("ctr ", args[0], " failed: ", *out));
  return absl::OkStatus();
}

// Drops every name in k8s.io that refers to the image (its manifest digest or config id), then
// waits until containerd's garbage collector removed all of its blobs.
absl::Status MakeCold(const std::vector<std::string>& ctr, OurPuller* cri, const std::string& ref,
                      const TestbedImage& image) {
  if (absl::Status s = cri->Remove(ref); !s.ok()) return s;
  std::string listing;
  if (absl::Status s = RunCtr(ctr, {"images", "ls"}, &listing); !s.ok()) return s;
  for (absl::string_view line : absl::StrSplit(listing, '\n', absl::SkipWhitespace())) {
    std::vector<std::string> cols = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (cols.size() < 3 || cols[0] == "REF") continue;
    if (cols[2] != image.blobs[0] && cols[0] != image.blobs[1]) continue;
    std::string out;
    if (absl::Status s = RunCtr(ctr, {"images", "rm", "--sync", cols[0]}, &out); !s.ok()) return s;
  }
  absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (true) {
    auto content = testing::ContentDigests(ctr);
    bool left = !content.ok();
    if (content.ok()) {
      for (const std::string& blob : image.blobs) left = left || content->count(blob) > 0;
    }
    if (!left) return absl::OkStatus();
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError("blobs of " + image.name_tag +
                                         " still present after 60 s");
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
}

int Main(int argc, char** argv) {
  CLI::App app{"Cold pulls: kruise-daemon (NodeImage) vs bare CRI PullImage vs ctr images pull"};
  std::string daemon;
  int runs = 5;
  std::vector<std::string> images{"10m", "100m"};
  std::string log_file = "/tmp/daemon-pull-bench-daemon.log";
  app.add_option("--daemon", daemon, "kruise-daemon binary")->required();
  app.add_option("--runs", runs, "timed pulls per puller and image (after one warm-up)");
  app.add_option("--images", images, "sized images of the test bed (10m, 100m)");
  app.add_option("--daemon-log", log_file, "the daemon's output")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  auto env = testing::TestbedEnv::Load();
  if (!env.ok()) {
    std::fprintf(stderr, "no test bed: %s (run scripts/testbed/up)\n",
                 env.status().ToString().c_str());
    return 2;
  }
  const std::vector<std::string> ctr = testing::SplitCommandLine(env->Get("KRUISE_TESTBED_CTR"));
  const std::string socket = env->Get("KRUISE_TESTBED_CRI_SOCKET");
  auto catalog = testing::ReadImagesFile(env->Get("KRUISE_TESTBED_IMAGES_FILE"));
  auto ours = MakeOurPuller(socket);
  auto bare = MakeBareGrpcPuller(socket);
  auto channel = cri::DialCri("unix://" + socket);
  if (!catalog.ok() || !ours.ok() || !bare.ok() || !channel.ok()) {
    std::fprintf(stderr, "test bed: %s %s %s\n", catalog.status().ToString().c_str(),
                 ours.status().ToString().c_str(), bare.status().ToString().c_str());
    return 2;
  }
  cri::GrpcImageService image_service(*channel);

  testing::FakeApiServer api;
  if (absl::Status s = api.Start(); !s.ok()) {
    std::fprintf(stderr, "fake API server: %s\n", s.ToString().c_str());
    return 2;
  }
  std::string dir = "/tmp/daemon-pull-bench-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return 2;
  (void)WriteKubeconfig(dir + "/kubeconfig", api.base_url());
  kube::RestConfig config;
  config.host = api.base_url();
  config.qps = 0;
  auto client = kube::RestKubeClient::Create(config);
  if (!client.ok()) return 2;
  const std::string node = "bench-node";
  Json obj = {{"apiVersion", "apps.kruise.io/v1alpha1"},
              {"kind", "NodeImage"},
              {"metadata", {{"name", node}}},
              {"spec", {{"images", Json::object()}}}};
  if (auto c = (*client)->Create(kube::resources::NodeImages(), "", obj); !c.ok()) return 2;

  DaemonProcess::Options dopts;
  dopts.binary = daemon;
  dopts.node_name = node;
  dopts.kubeconfig = dir + "/kubeconfig";
  dopts.socket = socket;
  dopts.log_file = log_file;
  auto proc = DaemonProcess::Start(dopts);
  if (!proc.ok()) {
    std::fprintf(stderr, "%s\n", proc.status().ToString().c_str());
    return 2;
  }
  if (absl::Status s = (*proc)->WaitReady(absl::Seconds(60)); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 2;
  }

  int64_t version = 0;
  std::vector<Puller> pullers;
  pullers.push_back(
      {"daemon (NodeImage)", [&](const std::string& ref) -> absl::Status {
         size_t colon = ref.rfind(':');
         std::string name = ref.substr(0, colon);
         std::string tag = ref.substr(colon + 1);
         ++version;
         Json patch = {
             {"spec",
              {{"images",
                {{name, {{"tags", Json::array({{{"tag", tag}, {"version", version}}})}}}}}}}};
         auto p = (*client)->Patch(kube::resources::NodeImages(), "", node, kube::PatchType::kMerge,
                                   patch);
         if (!p.ok()) return p.status();
         absl::Time deadline = absl::Now() + absl::Minutes(5);
         while (absl::Now() < deadline) {
           auto st = image_service.ImageStatus(ref);
           if (st.ok() && st->has_value()) return absl::OkStatus();
           absl::SleepFor(absl::Milliseconds(2));
         }
         return absl::DeadlineExceededError("daemon did not pull " + ref);
       }});
  pullers.push_back(
      {"bare CRI PullImage", [&](const std::string& ref) { return (*bare)->Pull(ref); }});
  pullers.push_back({"ctr images pull", [&](const std::string& ref) {
                       std::string out;
                       return RunCtr(ctr, {"images", "pull", "--plain-http", ref}, &out);
                     }});
  ColdFn cold = [&](const std::string& ref, const TestbedImage& image) -> absl::Status {
    // First drop the image from the NodeImage, so the daemon cannot pull it again on a later
    // sync while the other pullers run (such a re-pull raced with them once).
    Json drop = {{"spec", {{"images", {{ref.substr(0, ref.rfind(':')), nullptr}}}}}};
    auto d =
        (*client)->Patch(kube::resources::NodeImages(), "", node, kube::PatchType::kMerge, drop);
    if (!d.ok()) return d.status();
    return MakeCold(ctr, ours->get(), ref, image);
  };

  std::printf("%-28s %4s %12s %12s %12s %12s %12s\n", "image", "runs", "daemon p50 s", "bare p50 s",
              "ctr p50 s", "daemon/bare", "daemon/ctr");
  int rc = 0;
  for (const std::string& size : images) {
    const TestbedImage* image = nullptr;
    for (const TestbedImage& c : *catalog) {
      if (c.name_tag == "sized:" + size) image = &c;
    }
    if (image == nullptr) {
      std::fprintf(stderr, "sized:%s is not in the test bed\n", size.c_str());
      rc = 2;
      break;
    }
    const std::string ref = env->Get("KRUISE_TESTBED_REGISTRY") + "/sized:" + size;
    auto result = RunPullBench(ref, *image, pullers, runs, cold);
    if (!result.ok()) {
      std::fprintf(stderr, "%s: %s (daemon log %s)\n", ref.c_str(),
                   result.status().ToString().c_str(), log_file.c_str());
      rc = 1;
      break;
    }
    const auto& m = result->medians;
    std::printf("%-28s %4d %12.3f %12.3f %12.3f %12.3f %12.3f\n", ref.c_str(), runs, m[0], m[1],
                m[2], m[0] / m[1], m[0] / m[2]);
    for (size_t i = 0; i < pullers.size(); ++i) {
      std::printf("    %-20s", pullers[i].name.c_str());
      for (double s : result->seconds[i]) std::printf(" %.3f", s);
      std::printf("\n");
    }
  }
  auto mem = ReadMemory((*proc)->pid());
  if (mem.ok()) {
    std::printf(
        "kruise-daemon after the pulls (real containerd): VmRSS %.1f MiB, RssAnon %.1f MiB\n",
        mem->rss_kib / 1024.0, mem->rss_anon_kib / 1024.0);
  }
  (*proc)->Stop();
  std::string rm = "rm -rf " + dir;
  (void)std::system(rm.c_str());
  return rc;
}

}  // namespace
}  // namespace kruise::bench

int main(int argc, char** argv) { return kruise::bench::Main(argc, argv); }
