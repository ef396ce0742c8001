// WorkloadSpread controller against the fake API server: real REST client and informers (the pod
// informer with the shared cache's transform, so Deployment pods are cache stubs), event
// recorder, fake clock; the test calls Reconcile itself, so every step is deterministic.

#include "manager/workloadspread/ws_controller.h"

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/manager.h"
#include "kube/object.h"
#include "kube/resources.h"
#include "manager/workloadspread/ws_webhook.h"
#include "test/fakes/apiserver/fake_apiserver.h"
#include "test/fakes/apiserver/fake_cluster_test.h"
#include "test/fakes/fake_clock.h"
#include "test/kube/informer_test_util.h"

namespace kruise::manager::workloadspread {
namespace controller_test {

using kube::Json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
constexpr char kWs[] = "workloadspreads.apps.kruise.io";
constexpr char kCloneSets[] = "clonesets.apps.kruise.io";
constexpr char kDeployments[] = "deployments.apps";
constexpr char kNs[] = "team";

class WsControllerTest : public testing::FakeClusterTest {
 protected:
  void SetUp() override {
    StartCluster({{"apps.kruise.io", "v1alpha1", "workloadspreads", "WorkloadSpread", true, true}});
    ASSERT_FALSE(HasFatalFailure());
    StartRecorder();
  }

  // Informers as the controller group makes them (the CloneSet and Deployment caches only), then
  // the reconciler; call after seeding.
  void Start() {
    inf_.workloadspreads = AddInformer(WorkloadSpreadInformerOptions());
    inf_.pods = AddInformer(SharedInformers::PodOptions());
    for (const WsTargetKind& k : WsTargetKinds()) {
      if (k.Key() == "apps.kruise.io/CloneSet")
        inf_.targets[k.Key()] = AddInformer(WsTargetInformerOptions(k));
      if (k.Key() == "apps/Deployment")
        inf_.targets[k.Key()] = AddInformer(WsTargetInformerOptions(k));
    }
    WsReconcilerOptions ro;
    ro.clock = &clock_;
    reconciler_ =
        std::make_unique<WorkloadSpreadReconciler>(client_.get(), inf_, recorder_.get(), ro);
    reconciler_->ObserveThrough(inf_.pods);
    SyncInformers();
  }

  // Waits until every running informer holds what the server holds.
  void Sync() {
    const std::vector<std::pair<std::string, kube::Informer*>> caches = {
        {kWs, inf_.workloadspreads},
        {"pods", inf_.pods},
        {kCloneSets, inf_.targets["apps.kruise.io/CloneSet"]},
        {kDeployments, inf_.targets["apps/Deployment"]}};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      bool same = true;
      for (const auto& [resource, informer] : caches) {
        if (stopped_.count(informer) > 0) continue;
        std::vector<Json> objs = server_->List(resource);
        for (const Json& o : objs) {
          auto cached = informer->store().Get(kube::StoreKey(o));
          if (cached == nullptr || kube::ResourceVersion(*cached) != kube::ResourceVersion(o)) {
            same = false;
          }
        }
        if (informer->store().size() != objs.size() || !informer->HandlersCaughtUp()) same = false;
      }
      if (same) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // polling against a deadline
    }
    FAIL() << "informers did not catch up";
  }

  void StopCache(kube::Informer* informer) {
    informer->RequestStop();
    informer->Stop();
    stopped_.insert(informer);
  }

  absl::StatusOr<kube::Result> Reconcile(bool sync = true) {
    if (sync) Sync();
    return reconciler_->Reconcile({kNs, "ws"});
  }

  Json SeedWorkload(const std::string& resource, const std::string& api_version,
                    const std::string& kind, const std::string& name, int replicas) {
    Json w = {{"apiVersion", api_version},
              {"kind", kind},
              {"metadata", {{"name", name}, {"namespace", kNs}}},
              {"spec",
               {{"replicas", replicas},
                {"selector", {{"matchLabels", {{"app", name}}}}},
                {"template", Json::object()}}}};
    auto stored = server_->Seed(resource, w);
    EXPECT_TRUE(stored.ok()) << stored.status();
    return stored.ok() ? *stored : Json();
  }

  static Json ControllerRef(const std::string& api_version, const std::string& kind,
                            const std::string& name, const std::string& uid) {
    return {{"apiVersion", api_version},
            {"kind", kind},
            {"name", name},
            {"uid", uid},
            {"controller", true}};
  }

  // A running, ready pod of `owner` placed in `subset` of WorkloadSpread "ws".
  static Json Pod(const std::string& name, const Json& owner, const std::string& subset,
                  bool ready = true) {
    return {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata",
             {{"name", name},
              {"namespace", kNs},
              {"labels", {{"app", "web"}, {"pod-template-hash", "h1"}}},
              {"annotations",
               {{kMatchedWorkloadSpreadAnnotation, MatchedAnnotationValue("ws", subset, "")}}},
              {"ownerReferences", Json::array({owner})}}},
            {"spec",
             {{"nodeName", "node-1"}, {"containers", {{{"name", "app"}, {"image", "nginx:1"}}}}}},
            {"status",
             {{"phase", "Running"},
              {"conditions",
               {{{"type", "PodScheduled"}, {"status", "True"}},
                {{"type", "Ready"},
                 {"status", ready ? "True" : "False"},
                 {"lastTransitionTime", "2027-01-01T00:00:00Z"}}}}}}};
  }

  // A Pending pod the scheduler could not place.
  static Json UnschedulablePod(const std::string& name, const Json& owner,
                               const std::string& subset) {
    Json pod = Pod(name, owner, subset, false);
    pod["spec"].erase("nodeName");
    pod["status"] = {{"phase", "Pending"},
                     {"conditions",
                      {{{"type", "PodScheduled"},
                        {"status", "False"},
                        {"reason", "Unschedulable"},
                        {"message", "0/3 nodes are available"}}}}};
    return pod;
  }

  void SeedPod(const Json& pod) {
    auto stored = server_->Seed("pods", pod);
    ASSERT_TRUE(stored.ok()) << stored.status();
  }

  // Subset "a" (maxReplicas `a_max`) then "b" (no limit) over `target`.
  Json SeedWs(const Json& target, const Json& a_max, const Json& status = nullptr,
              const Json& strategy = nullptr) {
    Json ws = {
        {"apiVersion", "apps.kruise.io/v1alpha1"},
        {"kind", "WorkloadSpread"},
        {"metadata", {{"name", "ws"}, {"namespace", kNs}}},
        {"spec",
         {{"targetRef", target},
          {"subsets",
           {{{"name", "a"},
             {"maxReplicas", a_max},
             {"requiredNodeSelectorTerm",
              {{"matchExpressions", {{{"key", "zone"}, {"operator", "In"}, {"values", {"a"}}}}}}}},
            {{"name", "b"},
             {"requiredNodeSelectorTerm",
              {{"matchExpressions",
                {{{"key", "zone"}, {"operator", "In"}, {"values", {"b"}}}}}}}}}}}}};
    if (!strategy.is_null()) ws["spec"]["scheduleStrategy"] = strategy;
    if (!status.is_null()) ws["status"] = status;
    auto stored = server_->Seed(kWs, ws);
    EXPECT_TRUE(stored.ok()) << stored.status();
    return stored.ok() ? *stored : Json();
  }

  Json Ws() { return *server_->Get(kWs, kNs, "ws"); }
  Json SubsetStatus(const std::string& name) {
    const Json ws = Ws();
    const Json* list = kube::FindPath(ws, {"status", "subsetStatuses"});
    if (list == nullptr || !list->is_array()) return nullptr;
    for (const Json& s : *list) {
      if (s.value("name", "") == name) return s;
    }
    return nullptr;
  }
  std::string Cost(const std::string& pod) {
    auto p = server_->Get("pods", kNs, pod);
    if (!p.ok()) return "<gone>";
    return kube::Annotation(*p, kPodDeletionCostAnnotation).value_or("<none>");
  }
  // Waits for an event of `reason` whose message names `text` (the recorder writes
  // asynchronously).
  bool EventSeen(const std::string& reason, const std::string& text) {
    return kube::testing_util::Eventually([&] {
      for (const Json& e : server_->List("events", kNs)) {
        if (e.value("reason", "") == reason &&
            e.value("message", "").find(text) != std::string::npos) {
          return true;
        }
      }
      return false;
    });
  }

  WsInformers inf_;
  std::set<kube::Informer*> stopped_;
  std::unique_ptr<WorkloadSpreadReconciler> reconciler_;
};

const Json kCloneSetTarget = {
    {"apiVersion", "apps.kruise.io/v1alpha1"}, {"kind", "CloneSet"}, {"name", "web"}};

TEST_F(WsControllerTest, CloneSetStatusAndDeletionCosts) {
  const Json cs = SeedWorkload(kCloneSets, "apps.kruise.io/v1alpha1", "CloneSet", "web", 5);
  const Json owner = ControllerRef("apps.kruise.io/v1alpha1", "CloneSet", "web", kube::Uid(cs));
  // Subset a holds 3 pods for 2 places: a-2 (not ready) is the one to go first.
  SeedPod(Pod("a-0", owner, "a"));
  SeedPod(Pod("a-1", owner, "a"));
  SeedPod(Pod("a-2", owner, "a", /*ready=*/false));
  SeedPod(Pod("b-0", owner, "b"));
  // Names this WorkloadSpread but belongs to another CloneSet: not counted, not touched.
  SeedPod(Pod("other-0", ControllerRef("apps.kruise.io/v1alpha1", "CloneSet", "other", "u2"), "b"));
  SeedWs(kCloneSetTarget, 2);
  Start();
  auto r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->requeue_after, absl::ZeroDuration());  // nothing expires
  const Json status = Ws()["status"];
  EXPECT_EQ(status["observedGeneration"], 1);
  EXPECT_EQ(SubsetStatus("a")["replicas"], 3);
  EXPECT_EQ(SubsetStatus("a")["missingReplicas"], 0);
  EXPECT_EQ(SubsetStatus("b")["replicas"], 1);
  EXPECT_EQ(SubsetStatus("b")["missingReplicas"], -1);
  EXPECT_FALSE(SubsetStatus("a").contains("conditions"));  // not Adaptive
  // Subset 0 of 2: 200 within maxReplicas, -100 beyond; subset 1: 100.
  EXPECT_EQ(Cost("a-0"), "200");
  EXPECT_EQ(Cost("a-1"), "200");
  EXPECT_EQ(Cost("a-2"), "-100");
  EXPECT_EQ(Cost("b-0"), "100");
  EXPECT_EQ(Cost("other-0"), "<none>");

  // Nothing changed: no pod patch, no status write.
  server_->ClearRequests();
  r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(server_->RequestCount("PATCH"), 0);

  // a-0 goes: subset a has room again, a-2 is within the limit now.
  ASSERT_TRUE(server_->Remove("pods", kNs, "a-0").ok());
  r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(SubsetStatus("a")["replicas"], 2);
  EXPECT_EQ(SubsetStatus("a")["missingReplicas"], 0);
  EXPECT_EQ(Cost("a-2"), "200");
}

TEST_F(WsControllerTest, DeploymentPodsFromCacheStubsAndPercentages) {
  const Json d = SeedWorkload(kDeployments, "apps/v1", "Deployment", "web", 4);
  const Json rs = ControllerRef("apps/v1", "ReplicaSet", "web-h1", "rs-uid");
  SeedPod(Pod("web-1", rs, "a"));
  SeedPod(Pod("web-2", rs, "b", /*ready=*/false));
  // A ReplicaSet of another Deployment ("api-h1" does not end in the pod's hash for "web").
  SeedPod(Pod("api-1", ControllerRef("apps/v1", "ReplicaSet", "api-h1", "rs2"), "a"));
  SeedWs({{"apiVersion", "apps/v1"}, {"kind", "Deployment"}, {"name", "web"}}, "75%");
  Start();
  // The shared cache keeps only stubs of these pods, with what the controller reads.
  auto cached = inf_.pods->store().Get(kNs, "web-2");
  ASSERT_NE(cached, nullptr);
  EXPECT_EQ(kube::FindPath(*cached, {"spec", "containers"}), nullptr);
  ASSERT_TRUE(kube::ControllerOf(*cached).has_value());
  EXPECT_EQ(kube::ControllerOf(*cached)->name, "web-h1");
  // Ready (web-2 is not ready); PodScheduled only while it is not True.
  EXPECT_EQ((*cached)["status"]["conditions"], Json::parse(R"([{"type": "Ready", "status": "False",
                             "lastTransitionTime": "2027-01-01T00:00:00Z"}])"));

  auto r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  // 75% of 4, rounded up: 3 places in a, one taken.
  EXPECT_EQ(SubsetStatus("a")["replicas"], 1);
  EXPECT_EQ(SubsetStatus("a")["missingReplicas"], 2);
  EXPECT_EQ(SubsetStatus("b")["replicas"], 1);
  EXPECT_EQ(Cost("web-1"), "200");
  EXPECT_EQ(Cost("web-2"), "100");
  EXPECT_EQ(Cost("api-1"), "<none>");

  // Scaled to 8: 6 places in a.
  Json scaled = *server_->Get(kDeployments, kNs, "web");
  scaled["spec"]["replicas"] = 8;
  ASSERT_TRUE(server_->Put(kDeployments, scaled).ok());
  r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(SubsetStatus("a")["missingReplicas"], 5);
  (void)d;
}

TEST_F(WsControllerTest, StatusWriteKeepsWhatTheWebhookRecordedMeanwhile) {
  const Json cs = SeedWorkload(kCloneSets, "apps.kruise.io/v1alpha1", "CloneSet", "web", 3);
  const Json owner = ControllerRef("apps.kruise.io/v1alpha1", "CloneSet", "web", kube::Uid(cs));
  SeedPod(Pod("a-0", owner, "a"));
  // The status from before a-0 was counted.
  SeedWs(kCloneSetTarget, 2,
         {{"observedGeneration", 1},
          {"subsetStatuses",
           {{{"name", "a"}, {"replicas", 0}, {"missingReplicas", 2}},
            {{"name", "b"}, {"replicas", 0}, {"missingReplicas", -1}}}}});
  Start();
  // The WorkloadSpread cache stops here: what the webhook writes next is not in it.
  StopCache(inf_.workloadspreads);
  Json ws = Ws();
  const std::string at = kube::FormatRfc3339(clock_.Now());
  // The webhook placed pod a-new in subset a.
  ws["status"] = {
      {"observedGeneration", 1},
      {"subsetStatuses",
       {{{"name", "a"}, {"replicas", 0}, {"missingReplicas", 1}, {"creatingPods", {{"a-new", at}}}},
        {{"name", "b"}, {"replicas", 0}, {"missingReplicas", -1}}}}};
  ASSERT_TRUE(server_->Put(kWs, ws).ok());
  server_->ClearRequests();
  auto r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  // The stale write was refused (422), the fresh object re-read and the entry kept.
  EXPECT_EQ(server_->RequestCount("PATCH", "/workloadspreads/ws/status"), 2);
  const Json a = SubsetStatus("a");
  EXPECT_EQ(a["creatingPods"], Json({{"a-new", at}}));
  EXPECT_EQ(a["replicas"], 1);
  EXPECT_EQ(a["missingReplicas"], 0);  // a-0 and the pod being created
  // The entry expires in 30 s: looked at again one second after.
  EXPECT_EQ(r->requeue_after, absl::Seconds(31));
}

TEST_F(WsControllerTest, ConflictOnStatusWriteIsRetried) {
  const Json cs = SeedWorkload(kCloneSets, "apps.kruise.io/v1alpha1", "CloneSet", "web", 3);
  const Json owner = ControllerRef("apps.kruise.io/v1alpha1", "CloneSet", "web", kube::Uid(cs));
  SeedPod(Pod("a-0", owner, "a"));
  SeedWs(kCloneSetTarget, 2);
  Start();
  testing::FakeFailure conflict;
  conflict.method = "PATCH";
  conflict.path_substring = "/workloadspreads/ws/status";
  conflict.http_code = 409;
  server_->FailNext(conflict);
  server_->ClearRequests();
  auto r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(server_->RequestCount("PATCH", "/workloadspreads/ws/status"), 2);
  EXPECT_EQ(SubsetStatus("a")["missingReplicas"], 1);

  // Conflicting on every attempt: an error (the rate-limited requeue), nothing half-written.
  Json reset = Ws();
  reset.erase("status");
  ASSERT_TRUE(server_->Put(kWs, reset).ok());
  conflict.count = 100;
  server_->FailNext(conflict);
  r = Reconcile();
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(Ws().contains("status"));
}

TEST_F(WsControllerTest, ExpiredRecordsAreDroppedWithEvents) {
  const Json cs = SeedWorkload(kCloneSets, "apps.kruise.io/v1alpha1", "CloneSet", "web", 3);
  const Json owner = ControllerRef("apps.kruise.io/v1alpha1", "CloneSet", "web", kube::Uid(cs));
  SeedPod(Pod("a-0", owner, "a"));
  const absl::Time now = clock_.Now();
  SeedWs(kCloneSetTarget, 2,
         {{"observedGeneration", 1},
          {"subsetStatuses",
           {{{"name", "a"},
             {"replicas", 1},
             {"missingReplicas", 0},
             {"creatingPods", {{"never-came", kube::FormatRfc3339(now - absl::Seconds(31))}}},
             {"deletingPods", {{"a-0", kube::FormatRfc3339(now - absl::Seconds(16))}}}},
            {{"name", "b"}, {"replicas", 0}, {"missingReplicas", -1}}}}});
  Start();
  auto r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  const Json a = SubsetStatus("a");
  EXPECT_FALSE(a.contains("creatingPods"));
  EXPECT_FALSE(a.contains("deletingPods"));
  EXPECT_EQ(a["missingReplicas"], 1);
  EXPECT_TRUE(EventSeen("CreatePodFailed", "never-came"));
  EXPECT_TRUE(EventSeen("DeletePodFailed", "a-0"));
}

TEST_F(WsControllerTest, AdaptiveDeletesPodsUnschedulableTooLongOnce) {
  const Json cs = SeedWorkload(kCloneSets, "apps.kruise.io/v1alpha1", "CloneSet", "web", 3);
  const Json owner = ControllerRef("apps.kruise.io/v1alpha1", "CloneSet", "web", kube::Uid(cs));
  SeedPod(Pod("a-0", owner, "a"));
  SeedPod(UnschedulablePod("a-1", owner, "a"));
  SeedWs(kCloneSetTarget, 2, nullptr,
         {{"type", "Adaptive"}, {"adaptive", {{"rescheduleCriticalSeconds", 10}}}});
  Start();
  auto r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  // Not critical yet: both subsets Schedulable, looked at again when a-1 turns critical.
  EXPECT_EQ(SubsetStatus("a")["conditions"][0]["status"], "True");
  EXPECT_EQ(SubsetStatus("b")["conditions"][0]["status"], "True");
  EXPECT_EQ(r->requeue_after, absl::Seconds(11));
  EXPECT_EQ(Cost("a-1"), "200");

  clock_.Advance(absl::Seconds(11));
  server_->ClearRequests();
  r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Cost("a-1"), "<gone>");
  const Json a = SubsetStatus("a");
  EXPECT_EQ(a["conditions"][0]["type"], "Schedulable");
  EXPECT_EQ(a["conditions"][0]["status"], "False");
  // The subset was marked unschedulable before the pod went (the webhook then places the
  // replacement elsewhere).
  std::vector<std::string> order;
  for (const testing::RecordedRequest& q : server_->Requests()) {
    if (q.method == "PATCH" && q.path.find("/workloadspreads/ws/status") != std::string::npos) {
      order.push_back("status");
    }
    if (q.method == "DELETE" && q.path.find("/pods/a-1") != std::string::npos) {
      order.push_back("delete");
    }
  }
  EXPECT_THAT(order, ElementsAre("status", "delete"));
  EXPECT_TRUE(EventSeen("RescheduledPod", "a-1"));
  // The pod's deletion brings the next round: a stays unschedulable for 5 minutes.
  r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(SubsetStatus("a")["conditions"][0]["status"], "False");
  EXPECT_EQ(r->requeue_after, absl::Seconds(301));
  clock_.Advance(absl::Seconds(301));
  r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(SubsetStatus("a")["conditions"][0]["status"], "True");
  EXPECT_EQ(SubsetStatus("a")["replicas"], 1);
}

TEST_F(WsControllerTest, AdaptiveNeverDeletesTwiceOnAStaleCache) {
  const Json cs = SeedWorkload(kCloneSets, "apps.kruise.io/v1alpha1", "CloneSet", "web", 3);
  const Json owner = ControllerRef("apps.kruise.io/v1alpha1", "CloneSet", "web", kube::Uid(cs));
  SeedPod(UnschedulablePod("a-0", owner, "a"));
  SeedWs(kCloneSetTarget, 2, nullptr,
         {{"type", "Adaptive"}, {"adaptive", {{"rescheduleCriticalSeconds", 10}}}});
  Start();
  clock_.Advance(absl::Seconds(11));
  Sync();
  // The pod cache stops: it will keep showing a-0 after its deletion.
  StopCache(inf_.pods);
  server_->ClearRequests();
  auto r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  // A replacement with the same name (a new uid) appears; the stale cache still shows the old.
  SeedPod(UnschedulablePod("a-0", owner, "a"));
  r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(server_->RequestCount("DELETE", "/pods/a-0"), 1);
  EXPECT_TRUE(server_->Get("pods", kNs, "a-0").ok());
}

TEST_F(WsControllerTest, MissingWorkloadCountsNothing) {
  SeedWs(kCloneSetTarget, 2);
  Start();
  auto r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(SubsetStatus("a")["replicas"], 0);
  EXPECT_EQ(SubsetStatus("a")["missingReplicas"], 2);
}

TEST(WsPodFactsChangedTest, OnlyWhatTheControllerReads) {
  Json pod = {{"metadata", {{"name", "p"}, {"resourceVersion", "1"}}},
              {"status", {{"phase", "Running"}, {"podIP", "10.0.0.1"}}}};
  Json other = pod;
  other["metadata"]["resourceVersion"] = "2";
  other["status"]["podIP"] = "10.0.0.2";
  EXPECT_FALSE(WsPodFactsChanged(pod, other));
  other["status"]["conditions"] = {{{"type", "Ready"}, {"status", "True"}}};
  EXPECT_TRUE(WsPodFactsChanged(pod, other));
  other = pod;
  other["metadata"]["annotations"] = {{kPodDeletionCostAnnotation, "100"}};
  EXPECT_TRUE(WsPodFactsChanged(pod, other));
}

TEST(CompactWorkloadTest, KeepsReplicasAndIdentity) {
  Json d = {{"apiVersion", "apps/v1"},
            {"kind", "Deployment"},
            {"metadata",
             {{"name", "web"},
              {"namespace", "team"},
              {"uid", "u1"},
              {"resourceVersion", "7"},
              {"labels", {{"a", "b"}}}}},
            {"spec", {{"replicas", 3}, {"template", {{"spec", Json::object()}}}}},
            {"status", {{"replicas", 3}}}};
  CompactWorkloadForWorkloadSpread(d);
  EXPECT_EQ(d, Json::parse(R"({"apiVersion":"apps/v1","kind":"Deployment",
      "metadata":{"name":"web","namespace":"team","uid":"u1","resourceVersion":"7"},
      "spec":{"replicas":3}})"));
}

// ---- The controller group, run by a kube::Manager (event-driven, no Reconcile by hand) ---------

class WsGroupTest : public WsControllerTest {
 protected:
  void TearDown() override {
    stop_.request_stop();
    if (runner_.joinable()) runner_.join();
    group_.reset();
    manager_.reset();
    WsControllerTest::TearDown();
  }
  void StartManager() {
    kube::ManagerOptions mo;
    mo.clock = &clock_;
    manager_ = std::make_unique<kube::Manager>(client_.get(), mo);
    ControllerContext ctx;
    ctx.client = client_.get();
    ctx.manager = manager_.get();
    ctx.recorder = recorder_.get();
    ctx.clock = &clock_;
    group_ = NewWorkloadSpreadControllerGroup();
    ASSERT_TRUE(group_->Register(ctx).ok());
    runner_ = std::thread([this] { manager_->Run(stop_.get_token()); });
  }
  // Polls `check` against a deadline (the controller runs on its own threads).
  static bool Eventually(const std::function<bool()>& check) {
    return kube::testing_util::Eventually(check);
  }
  int Missing(const std::string& subset) {
    const Json s = SubsetStatus(subset);
    return s.is_object() ? s.value("missingReplicas", -100) : -100;
  }

  std::unique_ptr<kube::Manager> manager_;
  std::unique_ptr<ControllerGroup> group_;
  std::stop_source stop_;
  std::thread runner_;
};

TEST_F(WsGroupTest, PodAndWorkloadEventsReachTheStatus) {
  const Json cs = SeedWorkload(kCloneSets, "apps.kruise.io/v1alpha1", "CloneSet", "web", 4);
  const Json owner = ControllerRef("apps.kruise.io/v1alpha1", "CloneSet", "web", kube::Uid(cs));
  SeedPod(Pod("a-0", owner, "a"));
  SeedWs(kCloneSetTarget, "50%");
  StartManager();
  // The first status: 2 places in a (50% of 4), one taken.
  ASSERT_TRUE(Eventually([&] { return Missing("a") == 1; })) << Ws().dump();
  EXPECT_EQ(Cost("a-0"), "200");
  // A pod event.
  SeedPod(Pod("a-1", owner, "a"));
  ASSERT_TRUE(Eventually([&] { return Missing("a") == 0; })) << Ws().dump();
  // The CloneSet scaled to 8: 4 places in a.
  Json scaled = *server_->Get(kCloneSets, kNs, "web");
  scaled["spec"]["replicas"] = 8;
  ASSERT_TRUE(server_->Put(kCloneSets, scaled).ok());
  ASSERT_TRUE(Eventually([&] { return Missing("a") == 2; })) << Ws().dump();
}

}  // namespace controller_test
}  // namespace kruise::manager::workloadspread
