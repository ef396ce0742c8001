#include "kube/controller.h"

#include <atomic>
#include <map>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/manager.h"
#include "test/fakes/fake_clock.h"
#include "test/fakes/memory_kube_client.h"
#include "test/kube/informer_test_util.h"

namespace kruise::kube {
namespace {

using kruise::testing::FakeClock;
using kruise::testing::MemoryKubeClient;
using ::testing::ElementsAre;
using testing_util::Eventually;
using testing_util::MakePod;
using testing_util::PodResource;

// Records reconciles; results are scripted per key (default OK). Detects concurrent reconciles of
// one key.
class RecordingReconciler : public Reconciler {
 public:
  absl::StatusOr<Result> Reconcile(const Request& req) override {
    const std::string key = req.Key();
    {
      absl::MutexLock lock(&mu_);
      if (!active_.insert(key).second) concurrent_ = true;
      ++counts_[key];
      order_.push_back(key);
    }
    if (hook_) hook_(req);
    absl::StatusOr<Result> res = Result{};
    absl::MutexLock lock(&mu_);
    auto it = script_.find(key);
    if (it != script_.end() && !it->second.empty()) {
      res = it->second.front();
      it->second.erase(it->second.begin());
    }
    active_.erase(key);
    return res;
  }
  void Script(const std::string& key, std::vector<absl::StatusOr<Result>> results) {
    absl::MutexLock lock(&mu_);
    script_[key] = std::move(results);
  }
  int Count(const std::string& key) {
    absl::MutexLock lock(&mu_);
    return counts_[key];
  }
  int Total() {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(order_.size());
  }
  bool concurrent() {
    absl::MutexLock lock(&mu_);
    return concurrent_;
  }
  std::function<void(const Request&)> hook_;

 private:
  absl::Mutex mu_;
  std::set<std::string> active_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> counts_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> order_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<absl::StatusOr<Result>>> script_ ABSL_GUARDED_BY(mu_);
  bool concurrent_ ABSL_GUARDED_BY(mu_) = false;
};

TEST(RequestTest, KeyRoundTrip) {
  EXPECT_EQ((Request{"ns", "a"}).Key(), "ns/a");
  EXPECT_EQ(Request::FromKey("ns/a"), (Request{"ns", "a"}));
  EXPECT_EQ(Request::FromKey("node-1"), (Request{"", "node-1"}));
}

TEST(TerminalErrorTest, MarksStatus) {
  absl::Status st = TerminalError(absl::InvalidArgumentError("bad spec"));
  EXPECT_TRUE(IsTerminal(st));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(IsTerminal(absl::InvalidArgumentError("bad spec")));
}

TEST(MapperTest, OwnerAndPredicates) {
  Json pod = MakePod("ns", "p", "", "uid-1");
  EXPECT_THAT(EnqueueOwner("ReplicaSet")(pod), ElementsAre(Request{"ns", "rs"}));
  EXPECT_TRUE(EnqueueOwner("ReplicaSet", true, "batch")(pod).empty());
  EXPECT_TRUE(EnqueueOwner("CloneSet")(pod).empty());
  EXPECT_THAT(EnqueueSelf()(pod), ElementsAre(Request{"ns", "p"}));
  Json a = pod, b = pod;
  a["metadata"]["generation"] = 1;
  b["metadata"]["generation"] = 1;
  b["status"]["phase"] = "Running";
  EXPECT_FALSE(GenerationChanged().update(a, b));
  b["metadata"]["generation"] = 2;
  EXPECT_TRUE(GenerationChanged().update(a, b));
  EXPECT_FALSE(LabelsChanged().update(a, b));
  b["metadata"]["labels"]["x"] = "1";
  EXPECT_TRUE(LabelsChanged().update(a, b));
}

ControllerOptions Opts(Clock* clock, int workers = 1,
                       absl::Duration base_delay = absl::Milliseconds(5)) {
  ControllerOptions o;
  o.clock = clock;
  o.workers = workers;
  o.rate_limiter.base_delay = base_delay;
  o.rate_limiter.max_delay = absl::Minutes(1);
  return o;
}

ManagerOptions MOpts(Clock* clock, std::optional<LeaderElectionConfig> le = std::nullopt) {
  ManagerOptions o;
  o.clock = clock;
  o.leader_election = std::move(le);
  return o;
}

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    InformerOptions o;
    o.resource = PodResource();
    informer_ = std::make_unique<Informer>(&client_, &clock_, o);
  }
  void TearDown() override {
    stop_.request_stop();
    if (runner_.joinable()) runner_.join();
    informer_->Stop();
  }
  Controller& Make(const std::string& name, ControllerOptions opts) {
    c_ = std::make_unique<Controller>(name, &rec_, opts);
    return *c_;
  }
  void Run(Controller* c) {
    informer_->Start();
    runner_ = std::thread([c, token = stop_.get_token()] { c->Start(token); });
  }
  void Create(const Json& pod) {
    ASSERT_TRUE(client_.Create(PodResource(), pod["metadata"]["namespace"], pod).ok());
  }

  FakeClock clock_;
  MemoryKubeClient client_{&clock_};
  std::unique_ptr<Informer> informer_;
  // Outlive the runner thread (joined in TearDown).
  RecordingReconciler rec_;
  std::unique_ptr<Controller> c_;
  std::stop_source stop_;
  std::thread runner_;
};

TEST_F(ControllerTest, ReconcilesEveryObjectAndEveryChange) {
  Create(MakePod("ns", "a"));
  Create(MakePod("ns", "b"));
  RecordingReconciler& rec = rec_;
  Controller& c = Make("pods", Opts(&clock_, 2));
  c.Watch(informer_.get(), EnqueueSelf());
  Run(&c);
  ASSERT_TRUE(Eventually([&] { return rec.Count("ns/a") == 1 && rec.Count("ns/b") == 1; }));
  ASSERT_TRUE(client_.WaitForWatches(1, absl::Seconds(10)));
  Json a = *client_.Get(PodResource(), "ns", "a");
  a["metadata"]["labels"]["v"] = "2";
  ASSERT_TRUE(client_.Update(PodResource(), "ns", a).ok());
  ASSERT_TRUE(Eventually([&] { return rec.Count("ns/a") == 2; }));
  ASSERT_TRUE(client_.Delete(PodResource(), "ns", "b").ok());
  ASSERT_TRUE(Eventually([&] { return rec.Count("ns/b") == 2; }));
  EXPECT_EQ(c.stats().success, 4u);
}

TEST_F(ControllerTest, ErrorsAreRetriedWithBackoffAndTerminalErrorsAreNot) {
  RecordingReconciler& rec = rec_;
  rec.Script("ns/flaky", {absl::UnavailableError("x"), absl::UnavailableError("x"), Result{}});
  rec.Script("ns/bad", {TerminalError(absl::InvalidArgumentError("bad spec"))});
  Controller& c = Make("pods", Opts(&clock_, 1, absl::Seconds(1)));
  c.Watch(informer_.get(), EnqueueSelf());
  Create(MakePod("ns", "flaky"));
  Create(MakePod("ns", "bad"));
  Run(&c);
  ASSERT_TRUE(Eventually([&] { return rec.Count("ns/flaky") == 1 && rec.Count("ns/bad") == 1; }));
  ASSERT_TRUE(Eventually([&] { return c.queue().NumDelayed() == 1; }));
  EXPECT_EQ(c.queue().NumRequeues("ns/flaky"), 1);
  clock_.Advance(absl::Seconds(1));  // first retry after 1 s
  ASSERT_TRUE(Eventually([&] { return rec.Count("ns/flaky") == 2; }));
  ASSERT_TRUE(Eventually([&] { return c.queue().NumDelayed() == 1; }));
  clock_.Advance(absl::Seconds(1));  // second needs 2 s
  EXPECT_EQ(rec.Count("ns/flaky"), 2);
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(Eventually([&] { return rec.Count("ns/flaky") == 3; }));
  ASSERT_TRUE(Eventually([&] { return c.stats().success == 1; }));
  EXPECT_EQ(c.queue().NumRequeues("ns/flaky"), 0);  // forgotten after success
  clock_.Advance(absl::Hours(1));
  EXPECT_EQ(rec.Count("ns/bad"), 1);
  EXPECT_EQ(c.stats().terminal, 1u);
  EXPECT_EQ(c.stats().errors, 2u);
}

TEST_F(ControllerTest, RequeueAfterChecksAgainLater) {
  RecordingReconciler& rec = rec_;
  rec.Script("ns/a", {Result{absl::Minutes(5)}});
  Controller& c = Make("pods", Opts(&clock_));
  c.Watch(informer_.get(), EnqueueSelf());
  Create(MakePod("ns", "a"));
  Run(&c);
  ASSERT_TRUE(Eventually([&] { return c.queue().NumDelayed() == 1; }));
  clock_.Advance(absl::Minutes(4));
  EXPECT_EQ(rec.Count("ns/a"), 1);
  clock_.Advance(absl::Minutes(1));
  ASSERT_TRUE(Eventually([&] { return rec.Count("ns/a") == 2; }));
  EXPECT_EQ(c.stats().requeue_after, 1u);
}

TEST_F(ControllerTest, OwnerMappingWithPredicates) {
  RecordingReconciler& rec = rec_;
  Controller& c = Make("replicasets", Opts(&clock_));
  c.Watch(informer_.get(), EnqueueOwner("ReplicaSet"), {GenerationChanged()});
  Json pod = MakePod("ns", "p", "", "uid-rs");
  pod["metadata"]["generation"] = 1;
  Create(pod);
  Run(&c);
  ASSERT_TRUE(Eventually([&] { return rec.Count("ns/rs") == 1; }));
  ASSERT_TRUE(client_.WaitForWatches(1, absl::Seconds(10)));
  // A status-only change (generation unchanged) is filtered out...
  Json p = *client_.Get(PodResource(), "ns", "p");
  p["status"]["phase"] = "Running";
  ASSERT_TRUE(client_.Update(PodResource(), "ns", p).ok());
  // ...a spec change passes. Events are delivered in order, so once this one is reconciled the
  // filtered one would have been too.
  p = *client_.Get(PodResource(), "ns", "p");
  p["metadata"]["generation"] = 2;
  ASSERT_TRUE(client_.Update(PodResource(), "ns", p).ok());
  ASSERT_TRUE(Eventually([&] { return rec.Count("ns/rs") == 2; }))
      << "informer stats: events=" << informer_->stats().events
      << " watches=" << informer_->stats().watches << " lists=" << informer_->stats().lists
      << " queue len=" << c.queue().Len() << " processing=" << c.queue().NumProcessing()
      << " delayed=" << c.queue().NumDelayed()
      << " gen=" << (*informer_->store().Get("ns/p"))["metadata"].value("generation", 0);
  EXPECT_EQ(rec.Count("ns/p"), 0);
  EXPECT_EQ(rec.Total(), 2);
}

TEST_F(ControllerTest, ManyWorkersNeverReconcileOneKeyConcurrently) {
  RecordingReconciler& rec = rec_;
  std::atomic<int> in_flight{0}, max_in_flight{0};
  rec.hook_ = [&](const Request&) {
    int now = ++in_flight;
    int prev = max_in_flight.load();
    while (now > prev && !max_in_flight.compare_exchange_weak(prev, now)) {
    }
    std::this_thread::yield();
    --in_flight;
  };
  Controller& c = Make("pods", Opts(&clock_, 4));
  c.Watch(informer_.get(), EnqueueSelf());
  for (int i = 0; i < 10; ++i) Create(MakePod("ns", "p" + std::to_string(i)));
  Run(&c);
  ASSERT_TRUE(Eventually([&] { return rec.Total() >= 10; }));
  for (int round = 0; round < 200; ++round)
    c.Enqueue(Request{"ns", "p" + std::to_string(round % 10)});
  ASSERT_TRUE(Eventually([&] { return c.queue().Len() == 0 && c.queue().NumProcessing() == 0; }));
  EXPECT_FALSE(rec.concurrent());
  EXPECT_LE(max_in_flight.load(), 4);
}

// ---- Manager ----

class RecordingRunnable : public Runnable {
 public:
  RecordingRunnable(std::string name, bool leader, std::vector<std::string>* log, absl::Mutex* mu)
      : name_(std::move(name)), leader_(leader), log_(log), mu_(mu) {}
  void Start(std::stop_token stop) override {
    {
      absl::MutexLock lock(mu_);
      log_->push_back("start " + name_);
    }
    absl::Mutex m;
    bool done = false;
    std::stop_callback cb(stop, [&] {
      absl::MutexLock l(&m);
      done = true;
    });
    {
      absl::MutexLock l(&m);
      m.Await(absl::Condition(&done));
    }
    absl::MutexLock lock(mu_);
    log_->push_back("stop " + name_);
  }
  bool NeedLeaderElection() const override { return leader_; }
  std::string Name() const override { return name_; }

 private:
  std::string name_;
  bool leader_;
  std::vector<std::string>* log_;
  absl::Mutex* mu_;
};

class ManagerTest : public ::testing::Test {
 protected:
  std::vector<std::string> Log() {
    absl::MutexLock lock(&mu_);
    return log_;
  }
  bool Logged(const std::string& s) {
    auto l = Log();
    return std::find(l.begin(), l.end(), s) != l.end();
  }
  FakeClock clock_;
  MemoryKubeClient client_{&clock_};
  absl::Mutex mu_;
  std::vector<std::string> log_;
};

TEST_F(ManagerTest, StartsInOrderAndStopsInReverse) {
  ASSERT_TRUE(client_.Create(PodResource(), "ns", MakePod("ns", "a")).ok());
  InformerOptions o;
  o.resource = PodResource();
  Informer inf(&client_, &clock_, o);
  RecordingRunnable webhook("webhook", false, &log_, &mu_);
  RecordingRunnable ctrl("controller", true, &log_, &mu_);
  Gate gate("webhook-ready");
  Manager m(&client_, MOpts(&clock_));
  m.AddInformer(&inf);
  m.Add(&ctrl);
  m.Add(&webhook);
  m.AddGate(&gate);
  std::stop_source stop;
  std::atomic<int> rc{-1};
  std::thread t([&] { rc = m.Run(stop.get_token()); });
  ASSERT_TRUE(Eventually([&] { return Logged("start webhook"); }));
  EXPECT_TRUE(inf.HasSynced());  // caches first
  // The controller waits for the gate.
  EXPECT_FALSE(Logged("start controller"));
  gate.Open();
  ASSERT_TRUE(Eventually([&] { return Logged("start controller"); }));
  EXPECT_TRUE(m.Elected());
  stop.request_stop();
  t.join();
  EXPECT_EQ(rc.load(), 0);
  EXPECT_THAT(Log(),
              ElementsAre("start webhook", "start controller", "stop controller", "stop webhook"));
}

TEST_F(ManagerTest, OnlyOneOfTwoReplicasLeadsAndLosingTheLeaseExitsNonZero) {
  LeaderElectionConfig le;
  le.lease_namespace = "kruise-system";
  le.lease_name = "kruise-manager";
  le.identity = "m1";
  RecordingRunnable c1("c1", true, &log_, &mu_);
  RecordingRunnable c2("c2", true, &log_, &mu_);
  Manager m1(&client_, MOpts(&clock_, le));
  le.identity = "m2";
  Manager m2(&client_, MOpts(&clock_, le));
  m1.Add(&c1);
  m2.Add(&c2);
  std::stop_source s1, s2;
  std::atomic<int> rc1{-1}, rc2{-1};
  std::thread t1([&] { rc1 = m1.Run(s1.get_token()); });
  ASSERT_TRUE(Eventually([&] { return Logged("start c1"); }));
  std::thread t2([&] { rc2 = m2.Run(s2.get_token()); });
  auto tick = [&](int n) {
    return [&, n] {
      if (clock_.waiters() >= n) clock_.Advance(absl::Milliseconds(100));
    };
  };
  const absl::Time t0 = clock_.Now();
  ASSERT_TRUE(Eventually([&] { return clock_.Now() - t0 >= absl::Seconds(20); }, absl::Seconds(20),
                         tick(2)));
  ASSERT_TRUE(Eventually([&] { return clock_.waiters() >= 2; }));
  EXPECT_TRUE(m1.IsLeader());
  EXPECT_FALSE(m2.IsLeader());
  EXPECT_FALSE(Logged("start c2"));

  // m1 can no longer renew (its writes fail); m2's too, but m2 is only reading... make only
  // updates fail: m1 loses the lease after the renew deadline and exits with 1.
  client_.InjectError("update", absl::UnavailableError("partition"), -1);
  ASSERT_TRUE(Eventually([&] { return rc1.load() >= 0; }, absl::Seconds(20), tick(2)));
  t1.join();
  EXPECT_EQ(rc1.load(), 1);
  EXPECT_TRUE(Logged("stop c1"));
  // Once the API works again m2 takes over after the lease expires.
  client_.ClearErrors();
  ASSERT_TRUE(Eventually([&] { return Logged("start c2"); }, absl::Seconds(20), tick(1)));
  s2.request_stop();
  t2.join();
  EXPECT_EQ(rc2.load(), 0);
}

}  // namespace
}  // namespace kruise::kube
