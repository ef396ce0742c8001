#include "kube/workqueue.h"

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"
#include "kube/rate_limiter.h"
#include "test/fakes/fake_clock.h"
#include "test/kube/informer_test_util.h"

namespace kruise::kube {
namespace {

using kruise::testing::FakeClock;

using testing_util::Eventually;

TEST(RateLimiterTest, ItemExponentialDoublesAndCaps) {
  ItemExponentialRateLimiter rl(absl::Milliseconds(5), absl::Seconds(1));
  EXPECT_EQ(rl.When("a"), absl::Milliseconds(5));
  EXPECT_EQ(rl.When("a"), absl::Milliseconds(10));
  EXPECT_EQ(rl.When("a"), absl::Milliseconds(20));
  EXPECT_EQ(rl.When("b"), absl::Milliseconds(5));  // per item
  EXPECT_EQ(rl.NumRequeues("a"), 3);
  for (int i = 0; i < 100; ++i) rl.When("a");
  EXPECT_EQ(rl.When("a"), absl::Seconds(1));
  rl.Forget("a");
  EXPECT_EQ(rl.NumRequeues("a"), 0);
  EXPECT_EQ(rl.When("a"), absl::Milliseconds(5));
}

TEST(RateLimiterTest, BucketAllowsBurstThenSpacesAtQps) {
  FakeClock clock;
  BucketRateLimiter rl(&clock, /*qps=*/10, /*burst=*/3);
  EXPECT_EQ(rl.When("x"), absl::ZeroDuration());
  EXPECT_EQ(rl.When("y"), absl::ZeroDuration());
  EXPECT_EQ(rl.When("z"), absl::ZeroDuration());
  EXPECT_EQ(rl.When("x"), absl::Milliseconds(100));
  EXPECT_EQ(rl.When("x"), absl::Milliseconds(200));
  clock.Advance(absl::Seconds(10));  // refills to burst, not beyond
  EXPECT_EQ(rl.When("x"), absl::ZeroDuration());
  EXPECT_EQ(rl.When("x"), absl::ZeroDuration());
  EXPECT_EQ(rl.When("x"), absl::ZeroDuration());
  EXPECT_GT(rl.When("x"), absl::ZeroDuration());
}

TEST(RateLimiterTest, DefaultIsMaxOfBoth) {
  FakeClock clock;
  auto rl = DefaultControllerRateLimiter(&clock, {.base_delay = absl::Milliseconds(5),
                                                  .max_delay = absl::Seconds(1000),
                                                  .qps = 10,
                                                  .burst = 1});
  EXPECT_EQ(rl->When("a"), absl::Milliseconds(5));    // exponential dominates
  EXPECT_EQ(rl->When("b"), absl::Milliseconds(100));  // bucket dominates
  EXPECT_EQ(rl->NumRequeues("a"), 1);
  rl->Forget("a");
  EXPECT_EQ(rl->NumRequeues("a"), 0);
}

TEST(WorkQueueTest, DeduplicatesQueuedKeys) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.Add("a");
  q.Add("b");
  q.Add("a");
  EXPECT_EQ(q.Len(), 2);
  EXPECT_EQ(q.Get(), "a");
  EXPECT_EQ(q.Get(), "b");
  EXPECT_EQ(q.Len(), 0);
}

TEST(WorkQueueTest, ReAddWhileProcessingIsDeferredUntilDone) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.Add("a");
  auto k = q.Get();
  ASSERT_EQ(k, "a");
  q.Add("a");
  q.Add("a");
  EXPECT_EQ(q.Len(), 0);  // not handed out while processing
  EXPECT_EQ(q.GetUntil(clock.Now()), std::nullopt);
  q.Done("a");
  EXPECT_EQ(q.Len(), 1);  // exactly once
  EXPECT_EQ(q.Get(), "a");
  q.Done("a");
  EXPECT_EQ(q.Len(), 0);
}

TEST(WorkQueueTest, AddAfterWaitsForTheClock) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.AddAfter("late", absl::Seconds(10));
  q.AddAfter("late", absl::Seconds(20));  // later duplicate ignored
  q.AddAfter("early", absl::Seconds(5));
  EXPECT_EQ(q.Len(), 0);
  EXPECT_EQ(q.NumDelayed(), 2);
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(q.Len(), 1);
  EXPECT_EQ(q.Get(), "early");
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(q.Get(), "late");
  EXPECT_EQ(q.NumDelayed(), 0);
}

TEST(WorkQueueTest, BlockedGetWakesWhenDelayExpires) {
  FakeClock clock;
  WorkQueue q(&clock);
  std::optional<std::string> got;
  std::atomic<bool> done{false};
  std::thread t([&] {
    got = q.Get();
    done = true;
  });
  ASSERT_TRUE(Eventually([&] { return clock.waiters() == 1; }));
  q.AddAfter("k", absl::Seconds(3));
  // The waiter re-arms with the new deadline.
  ASSERT_TRUE(Eventually([&] { return clock.waiters() == 1; }));
  EXPECT_FALSE(done.load());
  clock.Advance(absl::Seconds(3));
  ASSERT_TRUE(Eventually([&] { return done.load(); }));
  t.join();
  EXPECT_EQ(got, "k");
}

TEST(WorkQueueTest, RateLimitedAddUsesBackoff) {
  FakeClock clock;
  WorkQueue q(&clock,
              std::make_unique<ItemExponentialRateLimiter>(absl::Seconds(1), absl::Seconds(60)));
  q.AddRateLimited("a");
  q.AddRateLimited("a");  // second failure: 2 s, but the pending 1 s add wins
  EXPECT_EQ(q.NumRequeues("a"), 2);
  clock.Advance(absl::Milliseconds(999));
  EXPECT_EQ(q.Len(), 0);
  clock.Advance(absl::Milliseconds(1));
  EXPECT_EQ(q.Len(), 1);
  q.Forget("a");
  EXPECT_EQ(q.NumRequeues("a"), 0);
}

TEST(WorkQueueTest, ShutDownReleasesBlockedGetters) {
  FakeClock clock;
  WorkQueue q(&clock);
  std::vector<std::thread> threads;
  std::atomic<int> nulls{0};
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&] {
      if (!q.Get().has_value()) ++nulls;
    });
  }
  ASSERT_TRUE(Eventually([&] { return clock.waiters() == 3; }));
  q.ShutDown();
  for (auto& t : threads) t.join();
  EXPECT_EQ(nulls.load(), 3);
  q.Add("ignored");
  EXPECT_EQ(q.Len(), 0);
  EXPECT_TRUE(q.ShuttingDown());
}

TEST(WorkQueueTest, ShutDownHandsOutRemainingKeysFirst) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.Add("a");
  q.ShutDown();
  EXPECT_EQ(q.Get(), "a");
  EXPECT_EQ(q.Get(), std::nullopt);
}

TEST(WorkQueueTest, ShutDownWithDrainWaitsForProcessing) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.Add("a");
  ASSERT_EQ(q.Get(), "a");
  std::atomic<bool> drained{false};
  std::thread t([&] {
    q.ShutDownWithDrain();
    drained = true;
  });
  ASSERT_TRUE(Eventually([&] { return q.ShuttingDown(); }));
  EXPECT_FALSE(drained.load());
  q.Done("a");
  t.join();
  EXPECT_TRUE(drained.load());
}

// Many producers and workers: no key is ever processed by two workers at once, and every key
// added is processed at least once after its last add.
TEST(WorkQueueTest, ConcurrentWorkersNeverShareAKey) {
  WorkQueue q(Clock::Real());
  constexpr int kKeys = 20;
  constexpr int kAddsPerProducer = 2000;
  absl::Mutex mu;
  std::set<std::string> in_flight;
  bool violation = false;
  std::atomic<int> processed{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      while (auto k = q.Get()) {
        {
          absl::MutexLock lock(&mu);
          if (!in_flight.insert(*k).second) violation = true;
        }
        ++processed;
        {
          absl::MutexLock lock(&mu);
          in_flight.erase(*k);
        }
        q.Done(*k);
      }
    });
  }
  std::vector<std::thread> producers;
  for (int p = 0; p < 3; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kAddsPerProducer; ++i) q.Add("k" + std::to_string((i + p) % kKeys));
    });
  }
  for (auto& t : producers) t.join();
  q.ShutDownWithDrain();
  for (auto& t : workers) t.join();
  EXPECT_FALSE(violation);
  EXPECT_GE(processed.load(), kKeys);
  EXPECT_LE(processed.load(), 3 * kAddsPerProducer);
  EXPECT_EQ(q.Len(), 0);
}

}  // namespace
}  // namespace kruise::kube
