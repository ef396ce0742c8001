#pragma once

// FakeClock: a Clock whose time moves only when a test calls Advance()/SetTime(). Waiters blocked
// in AwaitWithDeadline wake when their deadline is passed by Advance or their condition holds.

#include <atomic>
#include <set>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"

namespace kruise::testing {

class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000));

  absl::Time Now() const override;
  bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                         absl::Time deadline) override;

  // Moves time forward and wakes waiters whose deadline has passed.
  void Advance(absl::Duration d);
  void SetTime(absl::Time t);

  // Number of threads currently blocked in AwaitWithDeadline (lets a test wait until the code
  // under test is parked on a timer before advancing).
  int waiters() const;
  // Of those, the ones whose deadline is still ahead: a waiter that the last Advance made due but
  // that has not run yet is not counted (waiters() still counts it), so a test that advances
  // once `parked()` threads are parked never runs ahead of a thread that has work to do.
  int parked() const;

 private:
  void WakeAll();

  std::atomic<int64_t> now_ns_;
  mutable absl::Mutex waiters_mu_;
  std::multiset<absl::Mutex*> waiters_ ABSL_GUARDED_BY(waiters_mu_);
  std::multiset<absl::Time> deadlines_ ABSL_GUARDED_BY(waiters_mu_);
};

}  // namespace kruise::testing
