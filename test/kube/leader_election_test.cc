#include "kube/leader_election.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"
#include "test/fakes/fake_clock.h"
#include "test/fakes/memory_kube_client.h"
#include "test/kube/informer_test_util.h"

namespace kruise::kube {
namespace {

using kruise::testing::FakeClock;
using kruise::testing::MemoryKubeClient;
using testing_util::Eventually;

class LeaderElectionTest : public ::testing::Test {
 protected:
  struct Candidate {
    std::unique_ptr<LeaderElector> elector;
    std::jthread thread;
    std::atomic<bool> started{false};
    std::atomic<bool> stopped{false};
    std::atomic<int> result{-1};  // Run()'s return value once it returned
    std::string new_leader;
  };

  LeaderElectionConfig Config(const std::string& id, Candidate* c) {
    LeaderElectionConfig cfg;
    cfg.identity = id;
    cfg.lease_namespace = "kruise-system";
    cfg.lease_name = "kruise-manager";
    cfg.clock = &clock_;
    cfg.callbacks.on_started_leading = [c](std::stop_token) { c->started = true; };
    cfg.callbacks.on_stopped_leading = [c] { c->stopped = true; };
    return cfg;
  }

  std::unique_ptr<Candidate> StartCandidate(const std::string& id) {
    auto c = std::make_unique<Candidate>();
    auto e = LeaderElector::Create(&client_, Config(id, c.get()));
    EXPECT_TRUE(e.ok()) << e.status();
    c->elector = std::move(*e);
    Candidate* raw = c.get();
    c->thread = std::jthread(
        [raw](std::stop_token stop) { raw->result = raw->elector->Run(stop) ? 1 : 0; });
    return c;
  }

  Json Lease() { return *client_.Get(LeaseResource(), "kruise-system", "kruise-manager"); }

  // Advances the clock by `d` in 100 ms slices, each once `n` threads are parked on it (small
  // slices keep a just-woken thread that has not unregistered yet from skipping much time).
  void Step(absl::Duration d, int n = 1) {
    for (absl::Duration done; done < d; done += absl::Milliseconds(100)) {
      ASSERT_TRUE(Eventually([&] { return clock_.waiters() >= n; }));
      clock_.Advance(absl::Milliseconds(100));
    }
  }
  // Ticks the clock in 100 ms slices (when `n` threads are parked) until `pred` holds.
  bool AdvanceUntil(const std::function<bool()>& pred, int n = 1) {
    return Eventually(pred, absl::Seconds(20), [&] {
      if (clock_.waiters() >= n) clock_.Advance(absl::Milliseconds(100));
    });
  }

  FakeClock clock_{absl::FromUnixMicros(1'700'000'000'123'456)};
  MemoryKubeClient client_{&clock_};
};

TEST(LeaderElectionConfigTest, ValidatesTimings) {
  MemoryKubeClient client;
  LeaderElectionConfig cfg;
  cfg.identity = "a";
  EXPECT_TRUE(LeaderElector::Create(&client, cfg).ok());
  cfg.renew_deadline = cfg.lease_duration;
  EXPECT_FALSE(LeaderElector::Create(&client, cfg).ok());
  cfg.renew_deadline = absl::Seconds(2);
  cfg.retry_period = absl::Seconds(2);  // renew must exceed 1.2 * retry
  EXPECT_FALSE(LeaderElector::Create(&client, cfg).ok());
  cfg.identity = "";
  cfg.renew_deadline = absl::Seconds(10);
  auto e = LeaderElector::Create(&client, cfg);
  ASSERT_TRUE(e.ok());
  EXPECT_NE((*e)->identity().find('_'), std::string::npos);  // hostname_suffix
}

TEST(LeaderElectionConfigTest, IdentityIsBaseOrHostnamePlusARandomSuffix) {
  std::string a = DefaultLeaderIdentity("kruise-manager-7d9f-abcde");
  std::string b = DefaultLeaderIdentity("kruise-manager-7d9f-abcde");
  EXPECT_EQ(a.rfind("kruise-manager-7d9f-abcde_", 0), 0u) << a;
  EXPECT_EQ(a.size(), std::string("kruise-manager-7d9f-abcde_").size() + 8);
  EXPECT_NE(a, b);  // two processes of one pod (a restart) are two candidates
  std::string host = DefaultLeaderIdentity();
  EXPECT_GT(host.size(), 9u);
  EXPECT_EQ(host[host.size() - 9], '_');
}

TEST(LeaderElectionConfigTest, MicroTimeFormat) {
  const absl::Time t = absl::FromUnixMicros(1'700'000'000'123'456);
  EXPECT_EQ(FormatMicroTime(t), "2023-11-14T22:13:20.123456Z");
  auto back = ParseMicroTime("2023-11-14T22:13:20.123456Z");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, t);
  EXPECT_FALSE(ParseMicroTime("yesterday").ok());
}

TEST_F(LeaderElectionTest, AcquiresAbsentLeaseThenRenews) {
  auto a = StartCandidate("a");
  ASSERT_TRUE(Eventually([&] { return a->started.load(); }));
  EXPECT_TRUE(a->elector->IsLeader());
  Json lease = Lease();
  EXPECT_EQ(lease["spec"]["holderIdentity"], "a");
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 15);
  EXPECT_EQ(lease["spec"]["leaseTransitions"], 0);
  EXPECT_EQ(lease["spec"]["renewTime"], FormatMicroTime(clock_.Now()));
  const std::string acquired = lease["spec"]["acquireTime"];

  Step(absl::Seconds(2));
  ASSERT_TRUE(
      Eventually([&] { return Lease()["spec"]["renewTime"] == FormatMicroTime(clock_.Now()); }));
  EXPECT_EQ(Lease()["spec"]["acquireTime"], acquired);  // renewal keeps acquireTime
  EXPECT_EQ(Lease()["spec"]["holderIdentity"], "a");
  a->thread.request_stop();
  a->thread.join();
  EXPECT_EQ(a->result.load(), 1);
  EXPECT_TRUE(a->stopped.load());
  // Released on clean stop: a successor need not wait for expiry.
  EXPECT_EQ(Lease()["spec"]["holderIdentity"], "");
  EXPECT_EQ(Lease()["spec"]["leaseDurationSeconds"], 1);
  EXPECT_EQ(Lease()["spec"]["renewTime"], FormatMicroTime(clock_.Now()));
}

TEST_F(LeaderElectionTest, LosesLeadershipWhenRenewalFailsPastDeadline) {
  auto a = StartCandidate("a");
  ASSERT_TRUE(Eventually([&] { return a->started.load(); }));
  client_.InjectError("update", absl::UnavailableError("apiserver down"), -1);
  // Renewal rounds retry every 2 s; after 10 s (the renew deadline) leadership is lost.
  const absl::Time start = clock_.Now();
  ASSERT_TRUE(AdvanceUntil([&] { return a->result.load() >= 0; }));
  // At the renew deadline (10 s) after the last successful renewal, which was at `start`: not
  // later (the fence closes then), not earlier.
  EXPECT_GE(clock_.Now() - start, absl::Seconds(10));
  EXPECT_LE(clock_.Now() - start, absl::Seconds(13));
  EXPECT_EQ(a->result.load(), 0);
  EXPECT_TRUE(a->stopped.load());
  EXPECT_FALSE(a->elector->IsLeader());
  // Lost leases are not released (the API is unreachable anyway): the holder stays "a".
  client_.ClearErrors();
  EXPECT_EQ(Lease()["spec"]["holderIdentity"], "a");
}

TEST_F(LeaderElectionTest, TwoCandidatesOnlyOneLeadsAndReleaseHandsOverAtOnce) {
  auto a = StartCandidate("a");
  ASSERT_TRUE(Eventually([&] { return a->started.load(); }));
  auto b = StartCandidate("b");
  // b parks waiting to retry; a parks waiting to renew. 20 s (> lease duration) pass in 100 ms
  // slices, but never more than 3 s past a's last renewal: on a loaded machine a's thread may not
  // have run yet, and a starved leader must not look like a dead one (the waiter count alone can
  // include a thread that just woke).
  for (absl::Duration done; done < absl::Seconds(20); done += absl::Milliseconds(100)) {
    ASSERT_TRUE(Eventually([&] {
      if (clock_.waiters() < 2) return false;
      absl::StatusOr<absl::Time> renewed =
          ParseMicroTime(Lease()["spec"].value("renewTime", std::string()));
      return renewed.ok() && clock_.Now() - *renewed < absl::Seconds(3);
    }));
    clock_.Advance(absl::Milliseconds(100));
  }
  ASSERT_TRUE(Eventually([&] { return clock_.waiters() >= 2; }));
  EXPECT_TRUE(a->elector->IsLeader());
  EXPECT_FALSE(b->elector->IsLeader());
  EXPECT_FALSE(b->started.load());
  EXPECT_EQ(b->elector->GetLeader(), "a");

  // a stops cleanly and releases: b takes over on its next retry, long before 15 s.
  const absl::Time released = clock_.Now();
  a->thread.request_stop();
  a->thread.join();
  ASSERT_TRUE(AdvanceUntil([&] { return b->started.load(); }));
  // One retry period (2 s, jittered) plus the slices ticked before `started` is seen; a lease
  // that was not released would take the lease duration (15 s).
  EXPECT_LE(clock_.Now() - released, absl::Seconds(5));
  EXPECT_EQ(Lease()["spec"]["holderIdentity"], "b");
  EXPECT_EQ(Lease()["spec"]["leaseTransitions"], 1);
  b->thread.request_stop();
}

TEST_F(LeaderElectionTest, TakesOverExpiredLeaseByObservationTime) {
  // A crashed leader: its lease claims a renewTime far in the future, which must not matter.
  Json lease = {{"metadata", {{"name", "kruise-manager"}}},
                {"spec",
                 {{"holderIdentity", "crashed"},
                  {"leaseDurationSeconds", 15},
                  {"renewTime", FormatMicroTime(clock_.Now() + absl::Hours(24))},
                  {"leaseTransitions", 4}}}};
  ASSERT_TRUE(client_.Create(LeaseResource(), "kruise-system", lease).ok());
  auto b = StartCandidate("b");
  // Not expired until 15 s after b first observed it.
  Step(absl::Seconds(12));
  EXPECT_FALSE(b->started.load());
  EXPECT_EQ(b->elector->GetLeader(), "crashed");
  ASSERT_TRUE(AdvanceUntil([&] { return b->started.load(); }));
  // Expired 15 s after the first observation; retries are at most 2.4 s apart.
  EXPECT_LE(clock_.Now() - absl::FromUnixMicros(1'700'000'000'123'456), absl::Seconds(18));
  EXPECT_EQ(Lease()["spec"]["holderIdentity"], "b");
  EXPECT_EQ(Lease()["spec"]["leaseTransitions"], 5);
  b->thread.request_stop();
}

}  // namespace
}  // namespace kruise::kube
