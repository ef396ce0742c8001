#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "test/e2e/testbed_util.h"

namespace kruise::bench {

// One way of pulling an image into the test bed's containerd (namespace k8s.io), e.g. our CRI
// client or `ctr images pull`. Blocking; returns when the image is pulled and unpacked.
struct Puller {
  std::string name;
  std::function<absl::Status(const std::string& ref)> pull;
};

// Makes an image cold again: removes it (and every name sharing its blobs) and waits until
// containerd's garbage collector dropped all its blobs from the content store. Blocking, bounded by
// a deadline.
using ColdFn =
    std::function<absl::Status(const std::string& ref, const testing::TestbedImage& image)>;

struct PullBenchResult {
  std::string image;
  std::vector<std::vector<double>> seconds;  // per puller, in run order
  std::vector<double> medians;               // per puller
};

// Pulls `ref` once per puller as a warm-up, then `runs` times per puller alternating between them,
// calling `make_cold` before every pull (including the warm-up). Errors abort the benchmark.
absl::StatusOr<PullBenchResult> RunPullBench(const std::string& ref,
                                             const testing::TestbedImage& image,
                                             const std::vector<Puller>& pullers, int runs,
                                             const ColdFn& make_cold);

// Median of `values` (not empty).
double Median(std::vector<double> values);

}  // namespace kruise::bench
