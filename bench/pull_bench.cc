#include "bench/pull_bench.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"

namespace kruise::bench {
namespace {

absl::StatusOr<double> TimedPull(const Puller& puller, const std::string& ref) {
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = puller.pull(ref);
  const auto end = std::chrono::steady_clock::now();
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat(puller.name, " pull of ", ref, ": ", status.message()));
  }
  return std::chrono::duration<double>(end - start).count();
}

}  // namespace

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

absl::StatusOr<PullBenchResult> RunPullBench(const std::string& ref,
                                             const testing::TestbedImage& image,
                                             const std::vector<Puller>& pullers, int runs,
                                             const ColdFn& make_cold) {
  if (pullers.empty() || runs < 1) {
    return absl::InvalidArgumentError("need at least one puller and one run");
  }
  PullBenchResult result;
  result.image = ref;
  result.seconds.resize(pullers.size());
  // Warm-up: page cache of the registry's blobs, connections, binaries.
  for (const Puller& puller : pullers) {
    if (absl::Status s = make_cold(ref, image); !s.ok()) {
      return s;
    }
    if (absl::StatusOr<double> t = TimedPull(puller, ref); !t.ok()) {
      return t.status();
    }
  }
  for (int run = 0; run < runs; ++run) {
    // Alternate the order so neither puller always follows the other.
    for (size_t k = 0; k < pullers.size(); ++k) {
      const size_t i = run % 2 == 0 ? k : pullers.size() - 1 - k;
      if (absl::Status s = make_cold(ref, image); !s.ok()) {
        return s;
      }
      absl::StatusOr<double> t = TimedPull(pullers[i], ref);
      if (!t.ok()) {
        return t.status();
      }
      result.seconds[i].push_back(*t);
    }
  }
  if (absl::Status s = make_cold(ref, image); !s.ok()) {
    return s;
  }
  for (const std::vector<double>& times : result.seconds) {
    result.medians.push_back(Median(times));
  }
  return result;
}

}  // namespace kruise::bench
