#include <atomic>
#include <thread>

#include "gtest/gtest.h"
#include "kube/throttle.h"
#include "test/fakes/fake_clock.h"

namespace kruise::kube {
namespace {

TEST(TokenBucketTest, BurstThenRate) {
  testing::FakeClock clock;
  TokenBucket tb(10, 3, &clock);
  EXPECT_EQ(tb.Reserve(), absl::ZeroDuration());
  EXPECT_EQ(tb.Reserve(), absl::ZeroDuration());
  EXPECT_EQ(tb.Reserve(), absl::ZeroDuration());
  // Empty: each further request waits one more 1/qps slot.
  EXPECT_EQ(tb.Reserve(), absl::Milliseconds(100));
  EXPECT_EQ(tb.Reserve(), absl::Milliseconds(200));
  clock.Advance(absl::Seconds(10));
  // Refilled, but never above the burst.
  EXPECT_EQ(tb.Reserve(), absl::ZeroDuration());
  EXPECT_EQ(tb.Reserve(), absl::ZeroDuration());
  EXPECT_EQ(tb.Reserve(), absl::ZeroDuration());
  EXPECT_GT(tb.Reserve(), absl::ZeroDuration());
}

TEST(TokenBucketTest, UnlimitedWhenQpsNotPositive) {
  testing::FakeClock clock;
  TokenBucket tb(0, 1, &clock);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(tb.Reserve(), absl::ZeroDuration());
}

TEST(TokenBucketTest, WaitBlocksOnTheClock) {
  testing::FakeClock clock;
  TokenBucket tb(2, 1, &clock);
  ASSERT_TRUE(tb.Wait());
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    EXPECT_TRUE(tb.Wait());
    done = true;
  });
  // Wait (bounded) until the waiter is parked on the fake clock.
  const absl::Time limit = absl::Now() + absl::Seconds(10);
  while (clock.waiters() == 0 && absl::Now() < limit) std::this_thread::yield();
  ASSERT_EQ(clock.waiters(), 1);
  EXPECT_FALSE(done.load());
  clock.Advance(absl::Milliseconds(500));
  waiter.join();
  EXPECT_TRUE(done.load());
}

TEST(TokenBucketTest, WaitGivesUpPastDeadline) {
  testing::FakeClock clock;
  TokenBucket tb(1, 1, &clock);
  ASSERT_TRUE(tb.Wait());
  EXPECT_FALSE(tb.Wait(clock.Now() + absl::Milliseconds(100)));
  // The token was given back: the next reservation waits one slot, not two.
  EXPECT_EQ(tb.Reserve(), absl::Seconds(1));
}

}  // namespace
}  // namespace kruise::kube
