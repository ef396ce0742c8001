#pragma once

// Clock: the only way our code reads time or waits for it, so tests can drive time (FakeClock in
// test/fakes/fake_clock.h).

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kruise {

// Thread-safe. Implementations must be usable from any thread.
class Clock {
 public:
  virtual ~Clock() = default;

  // Wall-clock time (used for API timestamps and deadlines alike).
  virtual absl::Time Now() const = 0;

  // Blocks, with `mu` held by the caller, until `cond` holds or this clock reaches `deadline`.
  // Releases `mu` while waiting (absl::Mutex::AwaitWithDeadline semantics). Returns whether `cond`
  // holds. Whoever makes `cond` true must do so under `mu`.
  virtual bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                                 absl::Time deadline) = 0;

  // Sleeps until `deadline` on this clock. Prefer AwaitWithDeadline where a wake-up is possible.
  void SleepUntil(absl::Time deadline);
  void SleepFor(absl::Duration d) { SleepUntil(Now() + d); }

  // The process-wide real clock.
  static Clock* Real();
};

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                         absl::Time deadline) override {
    return mu->AwaitWithDeadline(cond, deadline);
  }
};

}  // namespace kruise
