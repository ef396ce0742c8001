#pragma once

// TokenBucket: the client-side request throttle of RestKubeClient (client-go's QPS/burst).
// Tokens refill at `qps` per second up to `burst`; every request takes one, waiting when the bucket
// is empty. Waiting reserves the token first, so concurrent callers queue fairly.
//
// Thread-safe. Wait() blocks on the injected clock.

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace kruise::kube {

class TokenBucket {
 public:
  // burst < 1 is treated as 1. qps <= 0 disables throttling, unless `zero_qps_means_unlimited`
  // is false: then the burst is all there is and a spent bucket answers an infinite wait (the
  // work queue's bucket limiter).
  TokenBucket(double qps, int burst, Clock* clock, bool zero_qps_means_unlimited = true);

  // Takes a token and returns how long the caller must wait before using it (zero when one was
  // available). Does not block.
  absl::Duration Reserve();

  // Reserve() then wait on the clock. Returns false (and gives the token back) when the wait would
  // end after `deadline`.
  bool Wait(absl::Time deadline = absl::InfiniteFuture());

 private:
  const double qps_;
  const double burst_;
  Clock* const clock_;
  const bool unlimited_;
  absl::Mutex mu_;
  double tokens_ ABSL_GUARDED_BY(mu_);
  absl::Time last_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kruise::kube
