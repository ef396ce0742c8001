#include "kube/throttle.h"

#include <algorithm>

namespace kruise::kube {

TokenBucket::TokenBucket(double qps, int burst, Clock* clock, bool zero_qps_means_unlimited)
    : qps_(qps),
      burst_(std::max(1, burst)),
      clock_(clock),
      unlimited_(qps <= 0 && zero_qps_means_unlimited),
      tokens_(burst_),
      last_(clock->Now()) {}

absl::Duration TokenBucket::Reserve() {
  if (unlimited_) return absl::ZeroDuration();
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  if (now > last_) {
    tokens_ = std::min(burst_, tokens_ + absl::ToDoubleSeconds(now - last_) * std::max(0.0, qps_));
    last_ = now;
  }
  tokens_ -= 1;
  if (tokens_ >= 0) return absl::ZeroDuration();
  if (qps_ <= 0) return absl::InfiniteDuration();
  return absl::Seconds(-tokens_ / qps_);
}

bool TokenBucket::Wait(absl::Time deadline) {
  absl::Duration d = Reserve();
  if (d <= absl::ZeroDuration()) return true;
  const absl::Time until = clock_->Now() + d;
  if (until > deadline) {
    absl::MutexLock lock(&mu_);
    tokens_ += 1;
    return false;
  }
  clock_->SleepUntil(until);
  return true;
}

}  // namespace kruise::kube
