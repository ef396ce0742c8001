#include "common/clock.h"

namespace kruise {
namespace {
const bool kNever = false;
}  // namespace

void Clock::SleepUntil(absl::Time deadline) {
  absl::Mutex mu;
  absl::MutexLock lock(&mu);
  AwaitWithDeadline(&mu, absl::Condition(&kNever), deadline);
}

Clock* Clock::Real() {
  static RealClock* clock = new RealClock();
  return clock;
}

}  // namespace kruise
