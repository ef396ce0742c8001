#include "test/fakes/fake_clock.h"

#include <iterator>


namespace kruise::testing {

FakeClock::FakeClock(absl::Time start) : now_ns_(absl::ToUnixNanos(start)) {}

absl::Time FakeClock::Now() const { return absl::FromUnixNanos(now_ns_.load()); }

bool FakeClock::AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                                  absl::Time deadline) {
  // Lock order is waiters_mu_ -> waiter's mu (see WakeAll), so (un)registration happens with `mu`
  // briefly released; Await releases it while waiting anyway.
  mu->Unlock();
  {
    absl::MutexLock lock(&waiters_mu_);
    waiters_.insert(mu);
    deadlines_.insert(deadline);
  }
  mu->Lock();
  struct Args {
    const absl::Condition* cond;
    const FakeClock* clock;
    absl::Time deadline;
  } args{&cond, this, deadline};
  mu->Await(absl::Condition(
      +[](Args* a) { return a->cond->Eval() || a->clock->Now() >= a->deadline; }, &args));
  mu->Unlock();
  {
    absl::MutexLock lock(&waiters_mu_);
    waiters_.erase(waiters_.find(mu));
    deadlines_.erase(deadlines_.find(deadline));
  }
  mu->Lock();
  return cond.Eval();
}

void FakeClock::Advance(absl::Duration d) {
  now_ns_.fetch_add(absl::ToInt64Nanoseconds(d));
  WakeAll();
}

void FakeClock::SetTime(absl::Time t) {
  now_ns_.store(absl::ToUnixNanos(t));
  WakeAll();
}

int FakeClock::waiters() const {
  absl::MutexLock lock(&waiters_mu_);
  return static_cast<int>(waiters_.size());
}

int FakeClock::parked() const {
  const absl::Time now = Now();
  absl::MutexLock lock(&waiters_mu_);
  return static_cast<int>(
      std::distance(deadlines_.upper_bound(now), deadlines_.end()));
}

void FakeClock::WakeAll() {
  // Holding waiters_mu_ keeps every registered mutex alive while we touch it. Releasing a mutex
  // makes absl re-evaluate the conditions of the threads waiting on it.
  absl::MutexLock lock(&waiters_mu_);
  for (absl::Mutex* m : std::set<absl::Mutex*>(waiters_.begin(), waiters_.end())) {
    m->Lock();
    m->Unlock();
  }
}

}  // namespace kruise::testing
