#include "kube/rate_limiter.h"

#include <algorithm>
#include <cmath>

namespace kruise::kube {

ItemExponentialRateLimiter::ItemExponentialRateLimiter(absl::Duration base,
                                                       absl::Duration max_delay)
    : base_(base), max_(max_delay) {}

absl::Duration ItemExponentialRateLimiter::When(const std::string& item) {
  int exp;
  {
    absl::MutexLock lock(&mu_);
    exp = failures_[item]++;
  }
  // Compute in floating point so that large exponents saturate instead of overflowing.
  const double seconds = absl::ToDoubleSeconds(base_) * std::pow(2.0, std::min(exp, 1000));
  if (!std::isfinite(seconds) || seconds >= absl::ToDoubleSeconds(max_)) return max_;
  return absl::Seconds(seconds);
}

void ItemExponentialRateLimiter::Forget(const std::string& item) {
  absl::MutexLock lock(&mu_);
  failures_.erase(item);
}

int ItemExponentialRateLimiter::NumRequeues(const std::string& item) {
  absl::MutexLock lock(&mu_);
  auto it = failures_.find(item);
  return it == failures_.end() ? 0 : it->second;
}

BucketRateLimiter::BucketRateLimiter(Clock* clock, double qps, int burst)
    : bucket_(qps, burst, clock, /*zero_qps_means_unlimited=*/false) {}

absl::Duration BucketRateLimiter::When(const std::string&) { return bucket_.Reserve(); }

MaxOfRateLimiter::MaxOfRateLimiter(std::vector<std::unique_ptr<RateLimiter>> limiters)
    : limiters_(std::move(limiters)) {}

absl::Duration MaxOfRateLimiter::When(const std::string& item) {
  absl::Duration d = absl::ZeroDuration();
  for (auto& l : limiters_) d = std::max(d, l->When(item));
  return d;
}

void MaxOfRateLimiter::Forget(const std::string& item) {
  for (auto& l : limiters_) l->Forget(item);
}

int MaxOfRateLimiter::NumRequeues(const std::string& item) {
  int n = 0;
  for (auto& l : limiters_) n = std::max(n, l->NumRequeues(item));
  return n;
}

std::unique_ptr<RateLimiter> DefaultControllerRateLimiter(Clock* clock,
                                                          const RateLimiterOptions& opts) {
  std::vector<std::unique_ptr<RateLimiter>> v;
  v.push_back(std::make_unique<ItemExponentialRateLimiter>(opts.base_delay, opts.max_delay));
  v.push_back(std::make_unique<BucketRateLimiter>(clock, opts.qps, opts.burst));
  return std::make_unique<MaxOfRateLimiter>(std::move(v));
}

}  // namespace kruise::kube
