// Advanced StatefulSet controller against the fake API server: real REST client and informers,
// fake clock; the test plays the kubelet and calls Reconcile itself, so every step is
// deterministic. The fixture follows test/manager/cloneset/cloneset_controller_test.cc (its
// helpers live in that file; the few used here are copied, adapted to ordinals).

#include "manager/statefulset/asts_controller.h"

#include <memory>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/informer.h"
#include "kube/object.h"
#include "kube/rest_client.h"
#include "manager/inplace/inplace_update.h"
#include "manager/inplace/predownload.h"
#include "test/fakes/apiserver/fake_apiserver.h"
#include "test/fakes/apiserver/fake_cluster_test.h"
#include "test/fakes/fake_clock.h"
#include "test/manager/inplace/fake_disruption_gate.h"

namespace kruise::manager::statefulset {
namespace {

using kube::Json;
constexpr char kSets[] = "statefulsets.apps.kruise.io";
constexpr char kRevisions[] = "controllerrevisions.apps";
constexpr char kPvcs[] = "persistentvolumeclaims";
constexpr char kJobs[] = "imagepulljobs.apps.kruise.io";

class AstsControllerTest : public testing::FakeClusterTest {
 protected:
  void SetUp() override {
    StartCluster({{"apps.kruise.io", "v1beta1", "statefulsets", "StatefulSet", true, true}});
    ASSERT_FALSE(HasFatalFailure());
    for (kube::InformerOptions& o : AstsInformerOptions()) {
      AddInformer(o);
    }
    AstsInformers inf{informers_[0].get(), informers_[1].get(), informers_[2].get(),
                      informers_[3].get()};
    AstsReconcilerOptions ro;
    if (pre_download_) {
      inf.image_pull_jobs = AddInformer(inplace::PreDownloadJobInformerOptions());
      ro.pre_download_images = true;
    }
    ro.clock = &clock_;
    ro.disruption_gate = gate_;
    ro.auto_resize_pvc = auto_resize_pvc_;
    if (gate_ != nullptr) StartRecorder();
    reconciler_ = std::make_unique<AstsReconciler>(client_.get(), inf, recorder_.get(), ro);
    reconciler_->ObserveThrough(inf.pods);
    SyncInformers();
  }

  static Json Template(const std::string& image, bool gate = false) {
    Json t = {{"metadata", {{"labels", {{"app", "db"}}}}},
              {"spec", {{"containers", {{{"name", "main"}, {"image", image}}}}}}};
    if (gate) {
      t["spec"]["readinessGates"] = {{{"conditionType", inplace::kInPlaceUpdateReadyCondition}}};
    }
    return t;
  }

  void CreateSet(int replicas, Json extra = Json::object(), bool gate = false) {
    Json s = {{"apiVersion", "apps.kruise.io/v1beta1"},
              {"kind", "StatefulSet"},
              {"metadata", {{"name", "db"}, {"namespace", "default"}, {"generation", 1}}},
              {"spec",
               {{"replicas", replicas},
                {"serviceName", "db-headless"},
                {"selector", {{"matchLabels", {{"app", "db"}}}}},
                {"template", Template("registry.local/db:v1", gate)}}}};
    s["spec"].merge_patch(extra);
    ASSERT_TRUE(server_->Seed(kSets, s).ok());
  }

  void PatchSpec(const Json& spec_patch) {
    Json s = Set();
    s["spec"].merge_patch(spec_patch);
    s["metadata"]["generation"] = kube::Generation(s) + 1;
    ASSERT_TRUE(server_->Put(kSets, s).ok());
  }

  // Waits until every informer holds what the server holds.
  void Sync() {
    std::vector<std::string> names = {kSets, "pods", kRevisions, kPvcs};
    if (pre_download_) names.push_back(kJobs);
    absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      bool same = true;
      for (size_t i = 0; i < names.size() && same; ++i) {
        std::vector<Json> objs = server_->List(names[i]);
        for (const Json& o : objs) {
          auto cached = informers_[i]->store().Get(kube::StoreKey(o));
          if (cached == nullptr || kube::ResourceVersion(*cached) != kube::ResourceVersion(o)) {
            same = false;
          }
        }
        if (informers_[i]->store().size() != objs.size()) same = false;
        if (!informers_[i]->HandlersCaughtUp()) same = false;
      }
      if (same) return;
      absl::SleepFor(absl::Milliseconds(2));  // polling the cache against a deadline
    }
    FAIL() << "informers did not catch up";
  }

  absl::StatusOr<kube::Result> RawReconcile(bool sync = true) {
    if (sync) Sync();
    return reconciler_->Reconcile({"default", "db"});
  }
  kube::Result Reconcile(bool sync = true) {
    auto r = RawReconcile(sync);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : kube::Result{};
  }

  std::set<std::string> PodNames() {
    std::set<std::string> out;
    for (const Json& p : server_->List("pods", "default")) out.insert(kube::Name(p));
    return out;
  }
  Json Pod(const std::string& name) { return *server_->Get("pods", "default", name); }
  Json Set() { return *server_->Get(kSets, "default", "db"); }

  // The kubelet: scheduled, running and ready (unless a gate condition says otherwise).
  void MakeReady(const std::string& name) {
    Json pod = Pod(name);
    pod["spec"]["nodeName"] = "node-a";
    Json& status = pod["status"];
    status["phase"] = "Running";
    Json conds = Json::array();
    bool gates_ok = true;
    if (status.contains("conditions")) {
      for (const Json& c : status["conditions"]) {
        if (c["type"] == "Ready") continue;
        conds.push_back(c);
        if (c["status"] != "True") gates_ok = false;
      }
    }
    conds.push_back({{"type", "Ready"},
                     {"status", gates_ok ? "True" : "False"},
                     {"lastTransitionTime", kube::FormatRfc3339(clock_.Now())}});
    status["conditions"] = conds;
    if (!status.contains("containerStatuses")) {
      status["containerStatuses"] = {
          {{"name", "main"},
           {"ready", true},
           {"restartCount", 0},
           {"image", pod["spec"]["containers"][0]["image"]},
           {"imageID", "sha256:aaa"},
           {"containerID", "containerd://" + name + "-0"},
           {"state", {{"running", {{"startedAt", "2020-01-01T00:00:00Z"}}}}}}};
    }
    ASSERT_TRUE(server_->Put("pods", pod).ok());
  }
  void MakeAllReady() {
    for (const std::string& n : PodNames()) MakeReady(n);
  }

  // The kubelet restarts a container whose image changed.
  void RestartChanged(const std::string& name) {
    Json pod = Pod(name);
    Json& cs = pod["status"]["containerStatuses"][0];
    if (cs["image"] == pod["spec"]["containers"][0]["image"]) return;
    cs["image"] = pod["spec"]["containers"][0]["image"];
    cs["restartCount"] = cs["restartCount"].get<int>() + 1;
    cs["containerID"] =
        "containerd://" + name + "-" + std::to_string(cs["restartCount"].get<int>());
    clock_.Advance(absl::Seconds(2));
    cs["state"] = {{"running", {{"startedAt", kube::FormatRfc3339(clock_.Now())}}}};
    ASSERT_TRUE(server_->Put("pods", pod).ok());
  }

  inplace::DisruptionGate* gate_ = nullptr;  // set before SetUp (then events are recorded)
  bool auto_resize_pvc_ = false;             // StatefulSetAutoResizePVCGate, set before SetUp
  bool pre_download_ = false;                // PreDownloadImageForInPlaceUpdate, before SetUp
  std::unique_ptr<AstsReconciler> reconciler_;
};

using ::testing::ElementsAre;

TEST_F(AstsControllerTest, OrderedReadyCreatesOneAtATimeWithIdentity) {
  CreateSet(3);
  Reconcile();
  EXPECT_THAT(PodNames(), ElementsAre("db-0"));
  Json pod = Pod("db-0");
  EXPECT_EQ(pod["spec"]["hostname"], "db-0");
  EXPECT_EQ(pod["spec"]["subdomain"], "db-headless");
  EXPECT_EQ(kube::Label(pod, kPodNameLabel), "db-0");
  EXPECT_EQ(kube::Label(pod, kPodIndexLabel), "0");
  EXPECT_EQ(kube::Label(pod, "app"), "db");
  auto owner = kube::ControllerOf(pod);
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(owner->uid, kube::Uid(Set()));
  auto revisions = server_->List(kRevisions, "default");
  ASSERT_EQ(revisions.size(), 1u);
  EXPECT_EQ(kube::Label(pod, "controller-revision-hash"), kube::Name(revisions[0]));
  EXPECT_THAT(kube::Name(revisions[0]), ::testing::StartsWith("db-"));

  Reconcile();
  EXPECT_THAT(PodNames(), ElementsAre("db-0")) << "waits for db-0 to be ready";
  MakeReady("db-0");
  Reconcile();
  EXPECT_THAT(PodNames(), ElementsAre("db-0", "db-1"));
  MakeReady("db-1");
  Reconcile();
  MakeReady("db-2");
  Reconcile();
  Json status = Set()["status"];
  EXPECT_EQ(status["replicas"], 3);
  EXPECT_EQ(status["readyReplicas"], 3);
  EXPECT_EQ(status["availableReplicas"], 3);
  EXPECT_EQ(status["currentReplicas"], 3);
  EXPECT_EQ(status["updatedReplicas"], 3);
  EXPECT_EQ(status["updatedReadyReplicas"], 3);
  EXPECT_EQ(status["updatedAvailableReplicas"], 3);
  EXPECT_EQ(status["observedGeneration"], 1);
  EXPECT_EQ(status["currentRevision"], status["updateRevision"]);
  EXPECT_EQ(status["labelSelector"], "app=db");
  EXPECT_EQ(status["collisionCount"], 0);
}

TEST_F(AstsControllerTest, ParallelScaleUpHonoursScaleMaxUnavailable) {
  CreateSet(5, {{"podManagementPolicy", "Parallel"}, {"scaleStrategy", {{"maxUnavailable", 2}}}});
  Reconcile();
  EXPECT_EQ(PodNames().size(), 2u);
  Reconcile();
  EXPECT_EQ(PodNames().size(), 2u) << "two not ready: the budget is spent";
  MakeAllReady();
  Reconcile();
  EXPECT_EQ(PodNames().size(), 4u);
  MakeAllReady();
  Reconcile();
  EXPECT_EQ(PodNames().size(), 5u);
}

TEST_F(AstsControllerTest, ReserveOrdinalsAreSkipped) {
  CreateSet(3, {{"podManagementPolicy", "Parallel"}, {"reserveOrdinals", {1}}});
  Reconcile();
  EXPECT_THAT(PodNames(), ElementsAre("db-0", "db-2", "db-3"));
  // Reserving an ordinal that has a pod condemns it; the next free one is created.
  MakeAllReady();
  PatchSpec({{"reserveOrdinals", {1, 2}}});
  Reconcile();
  Reconcile();
  EXPECT_THAT(PodNames(), ElementsAre("db-0", "db-3", "db-4"));
}

TEST_F(AstsControllerTest, PvcsCreatedFirstAndRetentionPolicy) {
  CreateSet(2, {{"podManagementPolicy", "Parallel"},
                {"persistentVolumeClaimRetentionPolicy",
                 {{"whenScaled", "Delete"}, {"whenDeleted", "Delete"}}},
                {"volumeClaimTemplates",
                 {{{"metadata", {{"name", "data"}}},
                   {"spec",
                    {{"accessModes", {"ReadWriteOnce"}},
                     {"resources", {{"requests", {{"storage", "1Gi"}}}}}}}}}}});
  Reconcile();
  ASSERT_EQ(PodNames().size(), 2u);
  for (const std::string ord : {"0", "1"}) {
    auto pvc = server_->Get(kPvcs, "default", "data-db-" + ord);
    ASSERT_TRUE(pvc.ok()) << ord;
    EXPECT_EQ(kube::Label(*pvc, "app"), "db");
    ASSERT_EQ(kube::OwnerReferences(*pvc).size(), 1u) << "whenDeleted Delete: owned by the set";
    EXPECT_EQ(kube::OwnerReferences(*pvc)[0].uid, kube::Uid(Set()));
    Json pod = Pod("db-" + ord);
    bool mounted = false;
    for (const Json& v : pod["spec"]["volumes"]) {
      mounted |= v["name"] == "data" && v["persistentVolumeClaim"]["claimName"] == "data-db-" + ord;
    }
    EXPECT_TRUE(mounted) << ord;
  }
  MakeAllReady();
  PatchSpec({{"replicas", 1}});
  Reconcile();
  EXPECT_THAT(PodNames(), ElementsAre("db-0"));
  EXPECT_FALSE(server_->Get(kPvcs, "default", "data-db-1").ok())
      << "whenScaled Delete: the condemned pod's claim goes with it";
  EXPECT_TRUE(server_->Get(kPvcs, "default", "data-db-0").ok());

  // whenDeleted Retain takes the set's reference away; whenScaled Retain keeps claims.
  PatchSpec({{"replicas", 2},
             {"persistentVolumeClaimRetentionPolicy",
              {{"whenScaled", "Retain"}, {"whenDeleted", "Retain"}}}});
  Reconcile();
  Reconcile();
  EXPECT_TRUE(kube::OwnerReferences(*server_->Get(kPvcs, "default", "data-db-0")).empty());
  MakeAllReady();
  PatchSpec({{"replicas", 1}});
  Reconcile();
  EXPECT_THAT(PodNames(), ElementsAre("db-0"));
  EXPECT_TRUE(server_->Get(kPvcs, "default", "data-db-1").ok()) << "whenScaled Retain";
}

TEST_F(AstsControllerTest, ScaleDownHighestOrdinalFirst) {
  CreateSet(3, {{"podManagementPolicy", "Parallel"}});
  Reconcile();
  MakeAllReady();
  Reconcile();
  PatchSpec({{"replicas", 1}, {"podManagementPolicy", "OrderedReady"}});
  Reconcile();
  EXPECT_THAT(PodNames(), ElementsAre("db-0", "db-1"));
  Reconcile();
  EXPECT_THAT(PodNames(), ElementsAre("db-0"));
  Reconcile();  // status counts what the cache holds when a round starts
  EXPECT_EQ(Set()["status"]["replicas"], 1);
}

TEST_F(AstsControllerTest, ReCreateRollingUpdateWithPartition) {
  CreateSet(3, {{"podManagementPolicy", "Parallel"}});
  Reconcile();
  MakeAllReady();
  Reconcile();
  const std::string old_rev = Set()["status"]["currentRevision"];
  const std::string old_uid0 = kube::Uid(Pod("db-0"));
  PatchSpec({{"template", Template("registry.local/db:v2")},
             {"updateStrategy", {{"rollingUpdate", {{"partition", 1}}}}}});
  Reconcile();
  EXPECT_THAT(PodNames(), ElementsAre("db-0", "db-1")) << "db-2 first, one at a time";
  Reconcile();
  ASSERT_THAT(PodNames(), ElementsAre("db-0", "db-1", "db-2"));
  const std::string new_rev = Set()["status"]["updateRevision"];
  EXPECT_NE(new_rev, old_rev);
  EXPECT_EQ(kube::Label(Pod("db-2"), "controller-revision-hash"), new_rev);
  EXPECT_EQ(Pod("db-2")["spec"]["containers"][0]["image"], "registry.local/db:v2");
  Reconcile();
  EXPECT_THAT(PodNames(), ElementsAre("db-0", "db-1", "db-2")) << "db-2 not ready yet";
  MakeReady("db-2");
  Reconcile();
  Reconcile();
  MakeReady("db-1");
  Reconcile();
  Reconcile();
  EXPECT_EQ(kube::Label(Pod("db-1"), "controller-revision-hash"), new_rev);
  EXPECT_EQ(kube::Label(Pod("db-0"), "controller-revision-hash"), old_rev) << "partition 1";
  EXPECT_EQ(kube::Uid(Pod("db-0")), old_uid0);
  Json status = Set()["status"];
  EXPECT_EQ(status["updatedReplicas"], 2);
  EXPECT_EQ(status["currentReplicas"], 1);
  EXPECT_EQ(status["currentRevision"], old_rev);
}

TEST_F(AstsControllerTest, InPlaceUpdateKeepsThePod) {
  CreateSet(2,
            {{"podManagementPolicy", "Parallel"},
             {"updateStrategy", {{"rollingUpdate", {{"podUpdatePolicy", "InPlaceIfPossible"}}}}}},
            /*gate=*/true);
  Reconcile();
  Reconcile();  // the gate's condition starts True
  const Json* gate = nullptr;
  Json pod = Pod("db-1");
  for (const Json& c : pod["status"]["conditions"]) {
    if (c["type"] == inplace::kInPlaceUpdateReadyCondition) gate = &c;
  }
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ((*gate)["status"], "True");
  MakeAllReady();
  Reconcile();
  const std::string uid1 = kube::Uid(Pod("db-1"));
  PatchSpec({{"template", Template("registry.local/db:v2", true)}});
  Reconcile();
  pod = Pod("db-1");
  EXPECT_EQ(kube::Uid(pod), uid1) << "same pod";
  EXPECT_EQ(pod["spec"]["containers"][0]["image"], "registry.local/db:v2");
  EXPECT_EQ(kube::Label(pod, "controller-revision-hash"), Set()["status"]["updateRevision"]);
  EXPECT_EQ(kube::Label(pod, "lifecycle.apps.kruise.io/state"), "Updating");
  EXPECT_EQ(kube::Label(Pod("db-0"), "controller-revision-hash"),
            Set()["status"]["currentRevision"])
      << "maxUnavailable 1: db-0 waits";
  RestartChanged("db-1");
  Reconcile();
  pod = Pod("db-1");
  EXPECT_EQ(kube::Label(pod, "lifecycle.apps.kruise.io/state"), "Normal");
  for (const Json& c : pod["status"]["conditions"]) {
    if (c["type"] == inplace::kInPlaceUpdateReadyCondition) {
      EXPECT_EQ(c["status"], "True");
    }
  }
  MakeReady("db-1");
  Reconcile();
  RestartChanged("db-0");
  Reconcile();
  MakeAllReady();
  Reconcile();
  EXPECT_EQ(Pod("db-0")["spec"]["containers"][0]["image"], "registry.local/db:v2");
  Json status = Set()["status"];
  EXPECT_EQ(status["updatedReadyReplicas"], 2);
  EXPECT_EQ(status["currentRevision"], status["updateRevision"]);
}

TEST_F(AstsControllerTest, CreateAnswered409IsNotRetriedBlindly) {
  // A pod of the set's name that is not the set's (no owner, other labels).
  Json foreign = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", "db-0"}, {"namespace", "default"}, {"labels", {{"app", "other"}}}}},
      {"spec", {{"containers", {{{"name", "c"}, {"image", "x"}}}}}}};
  ASSERT_TRUE(server_->Seed("pods", foreign).ok());
  CreateSet(1);
  auto r = RawReconcile();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(server_->RequestCount("POST", "/pods"), 1);
  EXPECT_EQ(PodNames().size(), 1u);
  EXPECT_EQ(Set()["status"]["conditions"][0]["type"], "FailedScale");
  EXPECT_THAT(Set()["status"]["conditions"][0]["message"].get<std::string>(),
              ::testing::HasSubstr("not owned"));
}

TEST_F(AstsControllerTest, StaleCacheNeverCreatesOrDeletesTwice) {
  CreateSet(2, {{"podManagementPolicy", "Parallel"}});
  Reconcile();
  Reconcile(/*sync=*/false);
  Reconcile(/*sync=*/false);
  EXPECT_EQ(server_->RequestCount("POST", "/pods"), 2);
  MakeAllReady();
  Reconcile();
  PatchSpec({{"replicas", 1}});
  Sync();
  Reconcile(false);
  Reconcile(false);
  EXPECT_EQ(server_->RequestCount("DELETE", "/pods/db-1"), 1);
  Reconcile();
  EXPECT_THAT(PodNames(), ElementsAre("db-0"));
  // A new reconciler (a new leader) on the same state creates nothing new.
  AstsReconcilerOptions ro;
  ro.clock = &clock_;
  AstsReconciler fresh(
      client_.get(),
      {informers_[0].get(), informers_[1].get(), informers_[2].get(), informers_[3].get()}, nullptr,
      ro);
  Sync();
  ASSERT_TRUE(fresh.Reconcile({"default", "db"}).ok());
  EXPECT_EQ(server_->RequestCount("POST", "/pods"), 2);
}

// ---- Lifecycle hooks (workload::lifecycle) ----------------------------------------------------

// A template whose pods carry both readiness gates, as the pod webhook and an in-place set have.
Json GatedTemplate(const std::string& image) {
  Json t = {{"metadata", {{"labels", {{"app", "db"}}}}},
            {"spec",
             {{"containers", {{{"name", "main"}, {"image", image}}}},
              {"readinessGates",
               {{{"conditionType", inplace::kInPlaceUpdateReadyCondition}},
                {{"conditionType", "KruisePodReady"}}}}}}};
  return t;
}

std::string State(const Json& pod) {
  return kube::Label(pod, "lifecycle.apps.kruise.io/state").value_or("");
}

Json Condition(const Json& pod, const std::string& type) {
  for (const Json& c : pod["status"]["conditions"]) {
    if (c["type"] == type) return c;
  }
  return Json();
}

class AstsLifecycleTest : public AstsControllerTest {
 protected:
  void SetLabel(const std::string& pod_name, const std::string& key, const char* value) {
    Json pod = Pod(pod_name);
    if (value == nullptr) {
      pod["metadata"]["labels"].erase(key);
    } else {
      pod["metadata"]["labels"][key] = value;
    }
    ASSERT_TRUE(server_->Put("pods", pod).ok());
  }
};

TEST_F(AstsLifecycleTest, PreDeleteHoldsScaleDownAndRecreateUntilTheHookGoes) {
  CreateSet(
      2, {{"podManagementPolicy", "Parallel"},
          {"template", GatedTemplate("registry.local/db:v1")},
          {"lifecycle",
           {{"preDelete", {{"labelsHandler", {{"hold", "true"}}}, {"markPodNotReady", true}}}}}});
  Reconcile();
  Reconcile();  // gates start True
  MakeAllReady();
  Reconcile();
  EXPECT_EQ(State(Pod("db-1")), "Normal");
  SetLabel("db-1", "hold", "true");
  PatchSpec({{"replicas", 1}});
  Reconcile();
  Reconcile();
  EXPECT_THAT(PodNames(), ElementsAre("db-0", "db-1")) << "the hook holds db-1";
  EXPECT_EQ(server_->RequestCount("DELETE", "/pods/db-1"), 0);
  Json pod = Pod("db-1");
  EXPECT_EQ(State(pod), "PreparingDelete");
  EXPECT_EQ(Condition(pod, "KruisePodReady")["status"], "False") << "markPodNotReady";
  EXPECT_EQ(Condition(pod, "KruisePodReady")["reason"], "PreparingDelete");
  SetLabel("db-1", "hold", "false");  // another value is not the hook
  Reconcile();
  EXPECT_THAT(PodNames(), ElementsAre("db-0"));
  EXPECT_EQ(server_->RequestCount("DELETE", "/pods/db-1"), 1);

  // A recreate update is a delete too.
  SetLabel("db-0", "hold", "true");
  const std::string uid0 = kube::Uid(Pod("db-0"));
  PatchSpec({{"template", GatedTemplate("registry.local/db:v2")}});
  Reconcile();
  Reconcile();
  EXPECT_EQ(kube::Uid(Pod("db-0")), uid0);
  EXPECT_EQ(State(Pod("db-0")), "PreparingDelete");
  SetLabel("db-0", "hold", nullptr);
  Reconcile();
  Reconcile();  // the replacement, at the new revision
  ASSERT_THAT(PodNames(), ElementsAre("db-0"));
  EXPECT_NE(kube::Uid(Pod("db-0")), uid0);
  EXPECT_EQ(Pod("db-0")["spec"]["containers"][0]["image"], "registry.local/db:v2");
  EXPECT_EQ(State(Pod("db-0")), "Normal");
}

TEST_F(AstsLifecycleTest, ScaleDownCalledOffBringsAPreparingDeletePodBack) {
  CreateSet(2, {{"podManagementPolicy", "Parallel"},
                {"lifecycle", {{"preDelete", {{"labelsHandler", {{"hold", "true"}}}}}}}});
  Reconcile();
  Reconcile();
  MakeAllReady();
  Reconcile();
  SetLabel("db-1", "hold", "true");
  const std::string uid = kube::Uid(Pod("db-1"));
  PatchSpec({{"replicas", 1}});
  Reconcile();
  EXPECT_EQ(State(Pod("db-1")), "PreparingDelete");
  PatchSpec({{"replicas", 2}});
  Reconcile();
  EXPECT_EQ(State(Pod("db-1")), "Normal");
  EXPECT_EQ(kube::Uid(Pod("db-1")), uid);
  SetLabel("db-1", "hold", nullptr);
  Reconcile();
  Reconcile();
  EXPECT_THAT(PodNames(), ElementsAre("db-0", "db-1"));
  EXPECT_EQ(kube::Uid(Pod("db-1")), uid) << "never deleted";
}

TEST_F(AstsLifecycleTest, OrderedReadyRecreateWaitsForThePreDeleteHook) {
  CreateSet(2, {{"lifecycle", {{"preDelete", {{"finalizersHandler", {"example.com/hold"}}}}}}});
  for (int i = 0; i < 4; ++i) {
    Reconcile();
    MakeAllReady();
  }
  ASSERT_THAT(PodNames(), ElementsAre("db-0", "db-1"));
  Json pod = Pod("db-1");
  pod["metadata"]["finalizers"] = {"example.com/hold"};
  ASSERT_TRUE(server_->Put("pods", pod).ok());
  const std::string uid = kube::Uid(Pod("db-1"));
  PatchSpec({{"template", Template("registry.local/db:v2")}});
  Reconcile();
  Reconcile();
  EXPECT_EQ(State(Pod("db-1")), "PreparingDelete");
  EXPECT_EQ(kube::Uid(Pod("db-1")), uid);
  pod = Pod("db-1");
  pod["metadata"].erase("finalizers");
  ASSERT_TRUE(server_->Put("pods", pod).ok());
  Reconcile();  // the hook is gone: deleted, though OrderedReady saw an unavailable pod
  Reconcile();
  ASSERT_TRUE(PodNames().count("db-1"));
  EXPECT_NE(kube::Uid(Pod("db-1")), uid);
  EXPECT_EQ(Pod("db-1")["spec"]["containers"][0]["image"], "registry.local/db:v2");
}

TEST_F(AstsLifecycleTest, InPlaceUpdateHookHoldsPreparingUpdateThenUpdatedThenNormal) {
  CreateSet(1, {{"template", GatedTemplate("registry.local/db:v1")},
                {"updateStrategy", {{"rollingUpdate", {{"podUpdatePolicy", "InPlaceIfPossible"}}}}},
                {"lifecycle",
                 {{"inPlaceUpdate",
                   {{"labelsHandler", {{"hold-update", "true"}}}, {"markPodNotReady", true}}}}}});
  Reconcile();
  Reconcile();
  MakeAllReady();
  Reconcile();
  SetLabel("db-0", "hold-update", "true");
  const std::string uid = kube::Uid(Pod("db-0"));
  PatchSpec({{"template", GatedTemplate("registry.local/db:v2")}});
  Reconcile();
  Reconcile();
  Json pod = Pod("db-0");
  EXPECT_EQ(State(pod), "PreparingUpdate");
  EXPECT_EQ(pod["spec"]["containers"][0]["image"], "registry.local/db:v1") << "held";
  EXPECT_EQ(Condition(pod, "KruisePodReady")["status"], "False");
  EXPECT_EQ(Condition(pod, "KruisePodReady")["reason"], "PreparingUpdate");

  SetLabel("db-0", "hold-update", nullptr);  // the hook's owner is done
  Reconcile();
  pod = Pod("db-0");
  EXPECT_EQ(kube::Uid(pod), uid);
  EXPECT_EQ(State(pod), "Updating");
  EXPECT_EQ(pod["spec"]["containers"][0]["image"], "registry.local/db:v2");
  RestartChanged("db-0");
  Reconcile();
  EXPECT_EQ(State(Pod("db-0")), "Updated") << "the hook is not back on the pod yet";
  Reconcile();
  EXPECT_EQ(Condition(Pod("db-0"), "KruisePodReady")["status"], "True") << "ready once Updated";
  SetLabel("db-0", "hold-update", "true");
  Reconcile();
  EXPECT_EQ(State(Pod("db-0")), "Normal");
  EXPECT_EQ(kube::Label(Pod("db-0"), "controller-revision-hash"),
            Set()["status"]["updateRevision"]);
}

TEST_F(AstsLifecycleTest, PreNormalHoldsANewPodInPreparingNormal) {
  CreateSet(2, {{"lifecycle", {{"preNormal", {{"labelsHandler", {{"warm", "true"}}}}}}}});
  Reconcile();
  ASSERT_THAT(PodNames(), ElementsAre("db-0"));
  EXPECT_EQ(State(Pod("db-0")), "PreparingNormal");
  MakeReady("db-0");
  Reconcile();
  Reconcile();
  EXPECT_THAT(PodNames(), ElementsAre("db-0")) << "OrderedReady waits for Normal";
  SetLabel("db-0", "warm", "true");
  Reconcile();
  EXPECT_EQ(State(Pod("db-0")), "Normal");
  Reconcile();
  EXPECT_THAT(PodNames(), ElementsAre("db-0", "db-1"));

  // A template that carries the hook already starts Normal.
  Json t = Template("registry.local/db:v1");
  t["metadata"]["labels"]["warm"] = "true";
  PatchSpec({{"template", t}, {"replicas", 3}});
  MakeReady("db-1");
  SetLabel("db-1", "warm", "true");
  Reconcile();  // db-1 to Normal
  Reconcile();
  Reconcile();
  ASSERT_TRUE(PodNames().count("db-2"));
  EXPECT_EQ(State(Pod("db-2")), "Normal");
}

// ---- volumeClaimTemplates: status.volumeClaims, volumeClaimUpdateStrategy
// ------------------------

Json DataTemplate(const std::string& size) {
  return {
      {"metadata", {{"name", "data"}}},
      {"spec",
       {{"accessModes", {"ReadWriteOnce"}}, {"resources", {{"requests", {{"storage", size}}}}}}}};
}

class AstsClaimsTest : public AstsControllerTest {
 protected:
  AstsClaimsTest() { auto_resize_pvc_ = true; }
  Json Claim(const std::string& name) { return *server_->Get(kPvcs, "default", name); }
  // The CSI driver and the kubelet: the volume has what the claim asks.
  void Provision(const std::string& name) {
    Json c = Claim(name);
    c["status"]["phase"] = "Bound";
    c["status"]["capacity"]["storage"] = c["spec"]["resources"]["requests"]["storage"];
    ASSERT_TRUE(server_->Put(kPvcs, c).ok());
  }
  Json VolumeClaimsStatus() { return Set()["status"]["volumeClaims"]; }
};

TEST_F(AstsClaimsTest, StatusCountsCompatibleAndReadyClaims) {
  CreateSet(2,
            {{"podManagementPolicy", "Parallel"}, {"volumeClaimTemplates", {DataTemplate("1Gi")}}});
  Reconcile();
  Reconcile();
  EXPECT_EQ(VolumeClaimsStatus(), Json::parse(R"([{"volumeClaimName": "data",
      "compatibleReplicas": 2, "compatibleReadyReplicas": 0}])"));
  Provision("data-db-0");
  Reconcile();
  EXPECT_EQ(VolumeClaimsStatus()[0]["compatibleReadyReplicas"], 1);
  // The template grows: no claim is compatible any more (the gate is on, but the strategy is
  // OnDelete, so nothing is resized).
  PatchSpec({{"volumeClaimTemplates", {DataTemplate("2Gi")}},
             {"volumeClaimUpdateStrategy", {{"type", "OnDelete"}}}});
  Reconcile();
  EXPECT_EQ(VolumeClaimsStatus()[0]["compatibleReplicas"], 0);
  EXPECT_EQ(Claim("data-db-0")["spec"]["resources"]["requests"]["storage"], "1Gi");
}

TEST_F(AstsClaimsTest, OnPodRollingUpdateExpandsTheClaimBeforeRecreatingThePod) {
  CreateSet(1, {{"volumeClaimTemplates", {DataTemplate("1Gi")}},
                {"volumeClaimUpdateStrategy", {{"type", "OnPodRollingUpdate"}}}});
  Reconcile();
  Reconcile();
  Provision("data-db-0");
  MakeAllReady();
  Reconcile();
  const std::string uid = kube::Uid(Pod("db-0"));
  const std::string claim_uid = kube::Uid(Claim("data-db-0"));
  PatchSpec({{"template", Template("registry.local/db:v2")},
             {"volumeClaimTemplates", {DataTemplate("2Gi")}}});
  Reconcile();
  EXPECT_EQ(Claim("data-db-0")["spec"]["resources"]["requests"]["storage"], "2Gi");
  EXPECT_EQ(kube::Uid(Pod("db-0")), uid) << "the pod waits for the volume to grow";
  Reconcile();
  EXPECT_EQ(kube::Uid(Pod("db-0")), uid);
  Provision("data-db-0");
  Reconcile();  // the recreate update
  Reconcile();  // the replacement
  ASSERT_THAT(PodNames(), ElementsAre("db-0"));
  EXPECT_NE(kube::Uid(Pod("db-0")), uid);
  EXPECT_EQ(Pod("db-0")["spec"]["containers"][0]["image"], "registry.local/db:v2");
  EXPECT_EQ(kube::Uid(Claim("data-db-0")), claim_uid) << "the claim is kept, only grown";
  Reconcile();  // status counts the pods the round starts with
  EXPECT_EQ(VolumeClaimsStatus()[0]["compatibleReadyReplicas"], 1);
}

TEST_F(AstsClaimsTest, OnPodRollingUpdateNeverTouchesAClaimThatDiffersInMoreThanSize) {
  CreateSet(1, {{"volumeClaimTemplates", {DataTemplate("1Gi")}},
                {"volumeClaimUpdateStrategy", {{"type", "OnPodRollingUpdate"}}}});
  Reconcile();
  Reconcile();
  Provision("data-db-0");
  MakeAllReady();
  Reconcile();
  const std::string uid = kube::Uid(Pod("db-0"));
  Json other = DataTemplate("1Gi");
  other["spec"]["accessModes"] = {"ReadWriteMany"};
  PatchSpec({{"template", Template("registry.local/db:v2")}, {"volumeClaimTemplates", {other}}});
  auto r = RawReconcile();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(kube::Uid(Pod("db-0")), uid) << "the pod keeps running on its volume";
  EXPECT_EQ(server_->RequestCount("DELETE", "/persistentvolumeclaims/data-db-0"), 0);
  EXPECT_EQ(Claim("data-db-0")["spec"]["accessModes"], Json::array({"ReadWriteOnce"}));
  EXPECT_THAT(Set()["status"]["conditions"][0]["message"].get<std::string>(),
              ::testing::HasSubstr("delete it"));
}

// ---- Image pre-download before in-place updates (PreDownloadImageForInPlaceUpdate) -------------

class AstsPreDownloadTest : public AstsControllerTest {
 protected:
  AstsPreDownloadTest() { pre_download_ = true; }
  void CreateInPlaceSet(int replicas, const char* policy) {
    CreateSet(replicas,
              {{"podManagementPolicy", "Parallel"},
               {"updateStrategy", {{"rollingUpdate", {{"podUpdatePolicy", policy}}}}}},
              /*gate=*/true);
    Reconcile();
    Reconcile();
    MakeAllReady();
    Reconcile();
  }
};

TEST_F(AstsPreDownloadTest, OneJobPerChangedImageOncePerRevisionGoneWhenDone) {
  CreateInPlaceSet(4, "InPlaceIfPossible");
  EXPECT_TRUE(server_->List(kJobs).empty()) << "no update, no job";
  const std::string old_rev = Set()["status"]["currentRevision"];
  PatchSpec({{"template", Template("registry.local/db:v2", true)}});
  Reconcile();
  auto jobs = server_->List(kJobs, "default");
  ASSERT_EQ(jobs.size(), 1u);
  const std::string update_rev = Set()["status"]["updateRevision"];
  EXPECT_EQ(kube::Name(jobs[0]), update_rev + "-main");
  EXPECT_EQ(jobs[0]["spec"]["image"], "registry.local/db:v2");
  EXPECT_EQ(kube::ControllerOf(jobs[0])->uid, kube::Uid(Set()));
  EXPECT_EQ(kube::Label(*server_->Get(kRevisions, "default", update_rev),
                        inplace::kImagePreDownloadCreatedLabel),
            "true");
  // Once only: a removed job (its TTL) is not made again.
  ASSERT_TRUE(server_->Remove(kJobs, "default", kube::Name(jobs[0])).ok());
  Reconcile();
  EXPECT_TRUE(server_->List(kJobs).empty());
  // Back to the old template before any pod moved: one revision again, the jobs go.
  ASSERT_TRUE(server_->Seed(kJobs, jobs[0]).ok());
  PatchSpec({{"template", Template("registry.local/db:v1", true)}});
  Reconcile();
  ASSERT_EQ(Set()["status"]["updateRevision"], old_rev);
  Reconcile();
  EXPECT_TRUE(server_->List(kJobs).empty());
}

TEST_F(AstsPreDownloadTest, ReCreateIsMarkedIgnored) {
  CreateInPlaceSet(4, "ReCreate");
  PatchSpec({{"template", Template("registry.local/db:v2", true)}});
  Reconcile();
  EXPECT_TRUE(server_->List(kJobs).empty());
  auto rev = server_->Get(kRevisions, "default", Set()["status"]["updateRevision"]);
  ASSERT_TRUE(rev.ok());
  EXPECT_EQ(kube::Label(*rev, inplace::kImagePreDownloadIgnoredLabel), "true");
}

// The PodUnavailableBudget (issue 17), through a stand-in gate: an in-place update is put to it
// first; a denial leaves the pod alone for the round.
class AstsPubTest : public AstsControllerTest {
 protected:
  AstsPubTest() { gate_ = &fake_gate_; }
  testing::FakeDisruptionGate fake_gate_;
};

TEST_F(AstsPubTest, SpentBudgetHoldsTheInPlaceUpdateUntilItFrees) {
  CreateSet(
      2,
      {{"podManagementPolicy", "Parallel"},
       {"updateStrategy",
        {{"rollingUpdate", {{"podUpdatePolicy", "InPlaceIfPossible"}, {"maxUnavailable", 2}}}}}},
      /*gate=*/true);
  Reconcile();
  Reconcile();
  MakeAllReady();
  Reconcile();
  const std::string uid1 = kube::Uid(Pod("db-1"));
  PatchSpec({{"template", Template("registry.local/db:v2", true)}});

  const int64_t pod_patches = server_->RequestCount("PATCH", "/pods/");
  kube::Result r = Reconcile();
  EXPECT_EQ(r.requeue_after, inplace::kDisruptionRetry);
  EXPECT_EQ(fake_gate_.TakeAsked(), std::vector<std::string>{"db-1"}) << "the round stops there";
  EXPECT_EQ(server_->RequestCount("PATCH", "/pods/"), pod_patches) << "no pod touched";
  for (const std::string& n : PodNames()) {
    EXPECT_EQ(Pod(n)["spec"]["containers"][0]["image"], "registry.local/db:v1");
  }
  ASSERT_TRUE(recorder_->WaitIdle(absl::Seconds(10)));
  int denied = 0;
  for (const Json& e : server_->List("events")) {
    if (e.value("reason", "") != inplace::kDisruptionDeniedReason) continue;
    ++denied;
    EXPECT_EQ(e["type"], "Warning");
    EXPECT_EQ(e["involvedObject"]["kind"], "StatefulSet");
    EXPECT_THAT(e["message"].get<std::string>(),
                ::testing::HasSubstr("pod(s) db-1 held by PodUnavailableBudget web-pub"));
  }
  EXPECT_EQ(denied, 1);

  // One pod's worth frees: db-1 is updated in place (same pod), db-0 waits for the budget.
  fake_gate_.SetBudget(1);
  Reconcile();
  Json pod = Pod("db-1");
  EXPECT_EQ(kube::Uid(pod), uid1);
  EXPECT_EQ(pod["spec"]["containers"][0]["image"], "registry.local/db:v2");
  EXPECT_EQ(Pod("db-0")["spec"]["containers"][0]["image"], "registry.local/db:v1");
  EXPECT_EQ(fake_gate_.TakeAsked(), (std::vector<std::string>{"db-1", "db-0"}));
}

}  // namespace
}  // namespace kruise::manager::statefulset
