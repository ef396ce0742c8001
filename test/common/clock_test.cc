#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "test/fakes/fake_clock.h"

namespace kruise {
namespace {

using testing::FakeClock;

TEST(FakeClock, AdvanceMovesNow) {
  FakeClock clock;
  absl::Time t0 = clock.Now();
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(clock.Now() - t0, absl::Seconds(5));
}

TEST(FakeClock, SleeperWakesOnlyWhenDeadlinePassed) {
  FakeClock clock;
  absl::Notification woke;
  std::thread sleeper([&] {
    clock.SleepFor(absl::Seconds(10));
    woke.Notify();
  });
  // Wait (real time, bounded) until the sleeper is parked on the fake clock.
  absl::Time real_deadline = absl::Now() + absl::Seconds(10);
  while (clock.waiters() == 0 && absl::Now() < real_deadline) std::this_thread::yield();
  ASSERT_EQ(clock.waiters(), 1);
  clock.Advance(absl::Seconds(9));
  EXPECT_FALSE(woke.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(woke.WaitForNotificationWithTimeout(absl::Seconds(10)));
  sleeper.join();
}

TEST(FakeClock, ConditionWakesBeforeDeadline) {
  FakeClock clock;
  absl::Mutex mu;
  bool ready = false;
  std::thread setter([&] {
    absl::MutexLock lock(&mu);
    ready = true;
  });
  absl::MutexLock lock(&mu);
  EXPECT_TRUE(clock.AwaitWithDeadline(&mu, absl::Condition(&ready), clock.Now() + absl::Hours(1)));
  setter.join();
}

TEST(RealClock, AwaitTimesOut) {
  absl::Mutex mu;
  bool never = false;
  absl::MutexLock lock(&mu);
  EXPECT_FALSE(Clock::Real()->AwaitWithDeadline(&mu, absl::Condition(&never),
                                                absl::Now() + absl::Milliseconds(5)));
}

}  // namespace
}  // namespace kruise
