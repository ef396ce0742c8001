// Fault timelines for leader election with a write fence (issue 33, part 1): two replicas, each
// with its own view of one API server; the leader's calls hang or its whole process freezes; a
// table checks that the two never act at once, that a deposed leader's writes never land after
// its successor starts, and that it notices and stops.
//
// "Acting" is judged by the write fence (kube/write_fence.h), which is what stands between a
// replica's controllers and the API server: a fence open on both replicas at one instant would let
// two leaders write.

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kube/call_deadline.h"
#include "kube/leader_election.h"
#include "kube/resources.h"
#include "kube/write_fence.h"
#include "test/fakes/fake_clock.h"
#include "test/fakes/memory_kube_client.h"
#include "test/kube/informer_test_util.h"

namespace kruise::kube {
namespace {

using kruise::testing::FakeClock;
using kruise::testing::MemoryKubeClient;
using testing_util::Eventually;

// One replica's connection to the API server. Calls matching a hang rule wait on the fake clock
// until the rule's end or the caller's ScopedCallDeadline, whichever is first (as RestKubeClient
// gives up at the deadline; a call cut off there does not take effect). Calls matching a freeze rule
// stop their thread until Thaw(), without time passing for it: a SIGSTOPped process.
class FaultyClient final : public KubeClient {
 public:
  FaultyClient(KubeClient* inner, FakeClock* clock) : inner_(inner), clock_(clock) {}

  void Hang(const std::string& verb, const std::string& resource) {
    absl::MutexLock lock(&mu_);
    hangs_.push_back({verb, resource});
  }
  void Freeze(const std::string& verb, const std::string& resource) {
    absl::MutexLock lock(&mu_);
    freeze_ = {verb, resource};
  }
  void Heal() {
    absl::MutexLock lock(&mu_);
    hangs_.clear();
    freeze_ = {};
    healed_ = true;
  }
  int frozen() const {
    absl::MutexLock lock(&mu_);
    return frozen_;
  }
  // Writes that reached the server: (fake time, "verb resource/name").
  std::vector<std::pair<absl::Time, std::string>> Landed() const {
    absl::MutexLock lock(&mu_);
    return landed_;
  }

  absl::StatusOr<Json> Get(const Resource& r, const std::string& ns,
                           const std::string& name) override {
    return Call("get", r, name, [&] { return inner_->Get(r, ns, name); });
  }
  absl::StatusOr<ListResult> List(const Resource& r, const std::string& ns,
                                  const ListOptions& opts) override {
    return Call("list", r, "", [&] { return inner_->List(r, ns, opts); });
  }
  absl::StatusOr<Json> Create(const Resource& r, const std::string& ns, const Json& obj) override {
    return Call("create", r, obj["metadata"].value("name", ""),
                [&] { return inner_->Create(r, ns, obj); });
  }
  absl::StatusOr<Json> Update(const Resource& r, const std::string& ns, const Json& obj,
                              const std::string& sub) override {
    return Call("update", r, obj["metadata"].value("name", ""),
                [&] { return inner_->Update(r, ns, obj, sub); });
  }
  absl::StatusOr<Json> Patch(const Resource& r, const std::string& ns, const std::string& name,
                             PatchType type, const Json& patch, const std::string& sub) override {
    return Call("patch", r, name, [&] { return inner_->Patch(r, ns, name, type, patch, sub); });
  }
  absl::Status Delete(const Resource& r, const std::string& ns, const std::string& name,
                      const DeleteOptions& opts) override {
    return Call("delete", r, name, [&] { return inner_->Delete(r, ns, name, opts); });
  }
  absl::Status Watch(const Resource& r, const std::string& ns, const ListOptions& opts,
                     const WatchHandler& handler, WatchCanceller* canceller) override {
    return inner_->Watch(r, ns, opts, handler, canceller);
  }

 private:
  struct Rule {
    std::string verb, resource;
    bool Matches(const std::string& v, const Resource& r) const {
      return !verb.empty() && verb == v && resource == r.resource;
    }
  };

  template <typename F>
  auto Call(const std::string& verb, const Resource& r, const std::string& name, F&& call)
      -> decltype(call()) {
    const std::optional<absl::Time> deadline = CurrentCallDeadline();
    {
      absl::MutexLock lock(&mu_);
      if (freeze_.Matches(verb, r)) {
        ++frozen_;
        mu_.Await(absl::Condition(&healed_));
        --frozen_;
      }
      bool hangs = false;
      for (const Rule& h : hangs_) hangs = hangs || h.Matches(verb, r);
      if (hangs) {
        auto healed = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return healed_; };
        clock_->AwaitWithDeadline(&mu_, absl::Condition(&healed),
                                  deadline.value_or(absl::InfiniteFuture()));
        if (!healed_) return CallDeadlineExceeded(absl::StrCat(verb, " ", r.resource));
      }
    }
    auto result = call();
    if (result.ok() && verb != "get" && verb != "list") {
      absl::MutexLock lock(&mu_);
      landed_.emplace_back(clock_->Now(), absl::StrCat(verb, " ", r.resource, "/", name));
    }
    return result;
  }

  KubeClient* const inner_;
  FakeClock* const clock_;
  mutable absl::Mutex mu_;
  std::vector<Rule> hangs_ ABSL_GUARDED_BY(mu_);
  Rule freeze_ ABSL_GUARDED_BY(mu_);
  bool healed_ ABSL_GUARDED_BY(mu_) = false;
  int frozen_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::pair<absl::Time, std::string>> landed_ ABSL_GUARDED_BY(mu_);
};

Resource ConfigMaps() { return {"", "v1", "configmaps", "ConfigMap", true}; }

class LeaderFenceTest : public ::testing::Test {
 protected:
  struct Replica {
    Replica(const std::string& id, KubeClient* server, FakeClock* clock)
        : faulty(server, clock), fence(clock), writes(&faulty, &fence), identity(id) {}
    FaultyClient faulty;
    WriteFence fence;
    FencedKubeClient writes;  // what its controllers write through
    std::string identity;
    std::unique_ptr<LeaderElector> elector;
    std::jthread thread;
    std::atomic<bool> started{false};
    std::atomic<bool> lost{false};
    std::atomic<int> result{-1};
  };

  std::unique_ptr<Replica> Start(const std::string& id) {
    auto r = std::make_unique<Replica>(id, &server_, &clock_);
    LeaderElectionConfig cfg;
    cfg.identity = id;
    cfg.clock = &clock_;
    cfg.fence = &r->fence;
    Replica* raw = r.get();
    cfg.callbacks.on_started_leading = [raw](std::stop_token) { raw->started = true; };
    cfg.callbacks.on_lost = [raw] { raw->lost = true; };
    auto e = LeaderElector::Create(&r->faulty, cfg);
    EXPECT_TRUE(e.ok()) << e.status();
    r->elector = std::move(*e);
    r->thread = std::jthread(
        [raw](std::stop_token stop) { raw->result = raw->elector->Run(stop) ? 1 : 0; });
    return r;
  }

  // What a replica's controllers do all the time: write. Through the fence.
  absl::Status ControllerWrite(Replica* r) {
    Json cm = {{"metadata", {{"name", absl::StrCat(r->identity, "-", ++writes_)}}}};
    return r->writes.Create(ConfigMaps(), "default", cm).status();
  }

  // Threads that park on the clock between ticks: b's elector, a's while it runs and is not
  // frozen, and `extra` others.
  static int Parked(Replica* a, int extra = 0) {
    return 1 + (a->result.load() < 0 && a->faulty.frozen() == 0 ? 1 : 0) + extra;
  }

  // One 100 ms tick once every running thread waits on the clock; checks the invariant after it.
  void Tick(Replica* a, Replica* b, const std::function<int()>& extra = [] { return 0; }) {
    ASSERT_TRUE(Eventually([&] { return clock_.parked() >= Parked(a, extra()); }))
        << "threads parked on the clock: " << clock_.parked() << ", want "
        << Parked(a, extra());
    clock_.Advance(absl::Milliseconds(100));
    ASSERT_FALSE(a->fence.IsOpen() && b->fence.IsOpen())
        << "both replicas may write at " << absl::FormatTime(clock_.Now());
  }

  FakeClock clock_{absl::FromUnixMicros(1'700'000'000'123'456)};
  MemoryKubeClient server_{&clock_};
  int writes_ = 0;
};

struct Timeline {
  const char* name;
  enum { kHang, kFreeze } fault;
  const char* verb;  // of the leader's lease calls that hang or freeze
};

class LeaderFenceTimelineTest : public LeaderFenceTest,
                                public ::testing::WithParamInterface<Timeline> {};

TEST_P(LeaderFenceTimelineTest, NeverTwoActingLeadersAndNoLateWrite) {
  const Timeline& tl = GetParam();
  auto a = Start("a");
  ASSERT_TRUE(Eventually([&] { return a->started.load(); }));
  auto b = Start("b");
  for (int i = 0; i < 30; ++i) Tick(a.get(), b.get());  // 3 s of both running; a renews
  ASSERT_TRUE(a->elector->IsLeader());
  ASSERT_TRUE(ControllerWrite(a.get()).ok());
  ASSERT_FALSE(b->started.load());

  ASSERT_TRUE(Eventually([&] { return clock_.parked() >= 2; }));  // nothing in flight
  const absl::Time fault_at = clock_.Now();
  const absl::Time a_fence_end = a->fence.until();
  if (tl.fault == Timeline::kHang) {
    a->faulty.Hang(tl.verb, "leases");
  } else {
    a->faulty.Freeze(tl.verb, "leases");
  }
  // a's controllers keep writing every tick while b waits for the lease to expire. A frozen a
  // does not run at all: its writes are tried only when it thaws, below.
  // A frozen a stops at its next renewal.
  for (int i = 0; i < 50 && tl.fault == Timeline::kFreeze && a->faulty.frozen() == 0; ++i) {
    Tick(a.get(), b.get());
  }
  if (tl.fault == Timeline::kFreeze) {
    ASSERT_EQ(a->faulty.frozen(), 1);
  }
  // b acts from the moment its fence opens (its on_started_leading thread may start later).
  absl::Time b_acts = absl::InfiniteFuture();
  for (int i = 0; i < 400 && b_acts == absl::InfiniteFuture(); ++i) {
    if (tl.fault == Timeline::kHang) (void)ControllerWrite(a.get());
    Tick(a.get(), b.get());
    if (b->fence.IsOpen()) b_acts = clock_.Now();
  }
  ASSERT_NE(b_acts, absl::InfiniteFuture())
      << "b never took over; lease " << server_.Get(LeaseResource(), "kruise-system", "kruise-manager")->dump()
      << ", a's result " << a->result.load() << ", fault at " << absl::FormatTime(fault_at)
      << ", now " << absl::FormatTime(clock_.Now());
  // b took over once the lease was unchanged for leaseDuration (15 s) after its last renewal.
  EXPECT_GE(b_acts - fault_at, absl::Seconds(11));
  EXPECT_LE(b_acts - fault_at, absl::Seconds(21));
  // a's fence ended no later than renew_deadline (10 s) after its last renewal started, at least
  // leaseDuration - renewDeadline before b started.
  EXPECT_LE(a_fence_end, fault_at + absl::Seconds(10));
  EXPECT_GE(b_acts - a_fence_end, absl::Seconds(5));
  for (const auto& [at, what] : a->faulty.Landed()) {
    EXPECT_LT(at, a_fence_end) << what << " landed after a's fence";
  }
  if (tl.fault == Timeline::kHang) {
    // a noticed by itself, at its fence, and said so.
    EXPECT_TRUE(a->lost.load());
    EXPECT_EQ(a->result.load(), 0);
  }

  // a comes back (its calls answer again, or the process thaws). Before its elector has run at
  // all, its controllers' stale caches try to write: refused by the fence.
  const size_t landed = a->faulty.Landed().size();
  absl::Status late = ControllerWrite(a.get());
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition) << late;
  EXPECT_NE(late.message().find("not the leader"), std::string::npos) << late;
  a->faulty.Heal();
  // Its elector sees b's lease (or its own term over) and stops without touching the lease.
  ASSERT_TRUE(Eventually([&] { return a->result.load() == 0; }, absl::Seconds(10), [&] {
    if (clock_.parked() >= Parked(a.get())) clock_.Advance(absl::Milliseconds(100));
  }));
  EXPECT_TRUE(a->lost.load());
  EXPECT_FALSE(a->fence.IsOpen());
  EXPECT_EQ(a->faulty.Landed().size(), landed) << "a wrote after it came back";
  auto lease = server_.Get(LeaseResource(), "kruise-system", "kruise-manager");
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "b");
  EXPECT_TRUE(b->elector->IsLeader());
  EXPECT_TRUE(b->fence.IsOpen());
  b->thread.request_stop();
}

INSTANTIATE_TEST_SUITE_P(
    Faults, LeaderFenceTimelineTest,
    ::testing::Values(Timeline{"LeaseGetHangs", Timeline::kHang, "get"},
                      Timeline{"LeaseUpdateHangs", Timeline::kHang, "update"},
                      Timeline{"FrozenInLeaseGet", Timeline::kFreeze, "get"},
                      Timeline{"FrozenInLeaseUpdate", Timeline::kFreeze, "update"}),
    [](const ::testing::TestParamInfo<Timeline>& info) { return std::string(info.param.name); });

// A controller write that is stuck in flight (the API server does not answer it) when the lease
// term ends is cut off at the fence and never takes effect, even though the server would have
// answered it later.
TEST_F(LeaderFenceTest, WriteBlockedInFlightIsCutOffAtTheFence) {
  auto a = Start("a");
  ASSERT_TRUE(Eventually([&] { return a->started.load(); }));
  auto b = Start("b");
  for (int i = 0; i < 10; ++i) Tick(a.get(), b.get());
  ASSERT_TRUE(Eventually([&] { return clock_.parked() >= 2; }));  // nothing in flight
  const absl::Time a_fence_end = a->fence.until();
  a->faulty.Hang("get", "leases");         // a cannot renew,
  a->faulty.Hang("create", "configmaps");  // and the API server holds its write.
  absl::Status write_result;
  std::atomic<bool> write_done{false};
  std::thread writer([&] {
    write_result = ControllerWrite(a.get());
    write_done = true;
  });
  absl::Time b_acts = absl::InfiniteFuture();
  for (int i = 0; i < 300 && b_acts == absl::InfiniteFuture(); ++i) {
    Tick(a.get(), b.get(), [&] { return write_done ? 0 : 1; });  // the writer parks too
    if (b->fence.IsOpen()) b_acts = clock_.Now();
  }
  writer.join();
  ASSERT_NE(b_acts, absl::InfiniteFuture());
  EXPECT_EQ(write_result.code(), absl::StatusCode::kFailedPrecondition) << write_result;
  EXPECT_NE(write_result.message().find("cut off at the fence"), std::string::npos)
      << write_result;
  EXPECT_LE(a_fence_end, b_acts - absl::Seconds(5));
  for (const auto& [at, what] : a->faulty.Landed()) {
    EXPECT_NE(what.rfind("create configmaps", 0), 0u) << what << " landed";
  }
  EXPECT_TRUE(server_.Objects(ConfigMaps()).empty());
  a->faulty.Heal();
  b->thread.request_stop();
}

TEST(WriteFenceTest, OpensExtendsAndCloses) {
  FakeClock clock;
  WriteFence fence(&clock);
  EXPECT_FALSE(fence.IsOpen());
  EXPECT_NE(fence.Check().message().find("does not hold the lease"), std::string::npos);
  fence.ExtendTo(clock.Now() + absl::Seconds(10));
  EXPECT_TRUE(fence.IsOpen());
  fence.ExtendTo(clock.Now() + absl::Seconds(5));  // never moves backwards while open
  EXPECT_EQ(fence.until(), clock.Now() + absl::Seconds(10));
  clock.Advance(absl::Seconds(10));
  EXPECT_FALSE(fence.IsOpen());
  EXPECT_NE(fence.Check().message().find("fence passed 0"), std::string::npos) << fence.Check();
  fence.ExtendTo(clock.Now() + absl::Seconds(1));
  EXPECT_TRUE(fence.IsOpen());
  fence.Close();
  EXPECT_FALSE(fence.IsOpen());
}

TEST(WriteFenceTest, FencedClientPassesReadsAndRefusesWritesWhenClosed) {
  FakeClock clock;
  MemoryKubeClient server(&clock);
  WriteFence fence(&clock);
  FencedKubeClient client(&server, &fence);
  Json cm = {{"metadata", {{"name", "x"}}}};
  auto refused = client.Create(ConfigMaps(), "default", cm);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(server.CallCount("create"), 0);
  EXPECT_EQ(fence.refused(), 1);
  fence.ExtendTo(clock.Now() + absl::Seconds(10));
  ASSERT_TRUE(client.Create(ConfigMaps(), "default", cm).ok());
  EXPECT_TRUE(client.Patch(ConfigMaps(), "default", "x", PatchType::kMerge,
                           {{"data", {{"a", "b"}}}})
                  .ok());
  clock.Advance(absl::Seconds(11));
  EXPECT_TRUE(client.Get(ConfigMaps(), "default", "x").ok());  // reads are never fenced
  EXPECT_TRUE(client.List(ConfigMaps(), "default", {}).ok());
  EXPECT_EQ(client.Delete(ConfigMaps(), "default", "x").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(client.Patch(ConfigMaps(), "default", "x", PatchType::kMerge, {{"data", nullptr}})
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(server.CallCount("delete"), 0);
}

TEST(CallDeadlineTest, ScopesNestAndTheEarliestWins) {
  EXPECT_FALSE(CurrentCallDeadline().has_value());
  const absl::Time t = absl::FromUnixSeconds(100);
  {
    ScopedCallDeadline outer(t);
    EXPECT_EQ(CurrentCallDeadline(), t);
    {
      ScopedCallDeadline later(t + absl::Seconds(5));
      EXPECT_EQ(CurrentCallDeadline(), t);
      ScopedCallDeadline earlier(t - absl::Seconds(5));
      EXPECT_EQ(CurrentCallDeadline(), t - absl::Seconds(5));
    }
    EXPECT_EQ(CurrentCallDeadline(), t);
    std::thread([] { EXPECT_FALSE(CurrentCallDeadline().has_value()); }).join();  // per thread
  }
  EXPECT_FALSE(CurrentCallDeadline().has_value());
}

}  // namespace
}  // namespace kruise::kube
