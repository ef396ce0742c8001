#pragma once

// Rate limiters for work queues: how long an item should wait before it is retried.
//
//   ItemExponentialRateLimiter  per-item exponential backoff (base * 2^failures, capped)
//   BucketRateLimiter           global token bucket (qps, burst) shared by every item
//   MaxOfRateLimiter            the largest delay of several limiters
//   DefaultControllerRateLimiter()  max(exponential 5 ms -> 1000 s, bucket 10 qps / burst 100)
//
// Thread-safety: every limiter is safe for concurrent use. Nothing blocks: When() only computes a
// delay (the bucket reserves a token, possibly in the future).

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "kube/throttle.h"

namespace kruise::kube {

class RateLimiter {
 public:
  virtual ~RateLimiter() = default;
  // The delay before `item` may be processed again; counts as one more failure of `item`.
  virtual absl::Duration When(const std::string& item) = 0;
  // Stops tracking `item` (call after it succeeded): its backoff starts over.
  virtual void Forget(const std::string& item) = 0;
  // How many times When() was called for `item` since it was last forgotten.
  virtual int NumRequeues(const std::string& item) = 0;
};

// base * 2^(failures), capped at `max_delay`.
class ItemExponentialRateLimiter final : public RateLimiter {
 public:
  explicit ItemExponentialRateLimiter(absl::Duration base = absl::Milliseconds(5),
                                      absl::Duration max_delay = absl::Seconds(1000));
  absl::Duration When(const std::string& item) override;
  void Forget(const std::string& item) override;
  int NumRequeues(const std::string& item) override;

 private:
  const absl::Duration base_;
  const absl::Duration max_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, int> failures_ ABSL_GUARDED_BY(mu_);
};

// A token bucket of `burst` tokens refilled at `qps` per second (the client's TokenBucket). Each
// When() reserves one token and returns how long until that token exists (0 while the bucket is
// not empty; infinite when qps <= 0 and the burst is spent). Not per item: Forget() is a no-op and
// NumRequeues() is 0.
class BucketRateLimiter final : public RateLimiter {
 public:
  BucketRateLimiter(Clock* clock, double qps = 10, int burst = 100);
  absl::Duration When(const std::string& item) override;
  void Forget(const std::string&) override {}
  int NumRequeues(const std::string&) override { return 0; }

 private:
  TokenBucket bucket_;
};

// The maximum delay of its limiters; NumRequeues is the maximum of theirs.
class MaxOfRateLimiter final : public RateLimiter {
 public:
  explicit MaxOfRateLimiter(std::vector<std::unique_ptr<RateLimiter>> limiters);
  absl::Duration When(const std::string& item) override;
  void Forget(const std::string& item) override;
  int NumRequeues(const std::string& item) override;

 private:
  std::vector<std::unique_ptr<RateLimiter>> limiters_;
};

struct RateLimiterOptions {
  absl::Duration base_delay = absl::Milliseconds(5);
  absl::Duration max_delay = absl::Seconds(1000);
  double qps = 10;
  int burst = 100;
};

// max(ItemExponentialRateLimiter(base, max), BucketRateLimiter(qps, burst)).
std::unique_ptr<RateLimiter> DefaultControllerRateLimiter(Clock* clock,
                                                          const RateLimiterOptions& opts = {});

}  // namespace kruise::kube
