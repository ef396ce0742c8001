// Advanced DaemonSet controller against the fake API server: real REST client and informers
// (the manager's pod transform, the controller's node transform), fake clock; the test plays the
// scheduler and the kubelet and calls Reconcile itself, so every step is deterministic. The
// fixture follows test/manager/statefulset/asts_controller_test.cc.

#include "manager/daemonset/ads_controller.h"

#include <map>
#include <memory>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/informer.h"
#include "kube/object.h"
#include "kube/rest_client.h"
#include "manager/inplace/disruption_gate.h"
#include "manager/inplace/inplace_update.h"
#include "manager/inplace/predownload.h"
#include "test/fakes/apiserver/fake_apiserver.h"
#include "test/fakes/apiserver/fake_cluster_test.h"
#include "test/fakes/fake_clock.h"
#include "test/manager/inplace/fake_disruption_gate.h"

namespace kruise::manager::daemonset {
namespace {

using kube::Json;
using ::testing::ElementsAre;
constexpr char kSets[] = "daemonsets.apps.kruise.io";
constexpr char kRevisions[] = "controllerrevisions.apps";
constexpr char kJobs[] = "imagepulljobs.apps.kruise.io";

class AdsControllerTest : public testing::FakeClusterTest {
 protected:
  void SetUp() override {
    StartCluster({{"apps.kruise.io", "v1beta1", "daemonsets", "DaemonSet", true, true}});
    ASSERT_FALSE(HasFatalFailure());
    for (const std::string n : {"node-a", "node-b", "node-c"}) AddNode(n);
    for (kube::InformerOptions& o : AdsInformerOptions()) {
      AddInformer(o);
    }
    if (pre_download_) AddInformer(inplace::PreDownloadJobInformerOptions());
    if (gate_ != nullptr) StartRecorder();
    reconciler_ = NewReconciler();
    reconciler_->ObserveThrough(informers_[1].get());
    SyncInformers();
  }

  std::unique_ptr<AdsReconciler> NewReconciler() {
    AdsInformers inf{informers_[0].get(), informers_[1].get(), informers_[2].get(),
                     informers_[3].get()};
    AdsReconcilerOptions ro;
    ro.clock = &clock_;
    if (pre_download_) {
      inf.image_pull_jobs = informers_[4].get();
      ro.pre_download_images = true;
    }
    ro.disruption_gate = gate_;
    ro.disruption_gate_deletes = gate_deletes_;
    return std::make_unique<AdsReconciler>(client_.get(), inf, recorder_.get(), ro);
  }

  void AddNode(const std::string& name, Json taints = Json::array()) {
    Json node = {{"apiVersion", "v1"},
                 {"kind", "Node"},
                 {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
                 {"spec", {{"taints", taints}}},
                 {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
    ASSERT_TRUE(server_->Seed("nodes", node).ok());
  }
  void SetTaints(const std::string& name, Json taints) {
    Json node = *server_->Get("nodes", "", name);
    node["spec"]["taints"] = std::move(taints);
    ASSERT_TRUE(server_->Put("nodes", node).ok());
  }

  static Json Template(const std::string& image) {
    return {{"metadata", {{"labels", {{"app", "agent"}}}}},
            {"spec", {{"containers", {{{"name", "main"}, {"image", image}}}}}}};
  }

  void CreateSet(Json extra = Json::object()) {
    Json s = {{"apiVersion", "apps.kruise.io/v1beta1"},
              {"kind", "DaemonSet"},
              {"metadata", {{"name", "agent"}, {"namespace", "default"}, {"generation", 1}}},
              {"spec",
               {{"selector", {{"matchLabels", {{"app", "agent"}}}}},
                {"template", Template("registry.local/agent:v1")}}}};
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
    std::vector<std::string> names = {kSets, "pods", kRevisions, "nodes"};
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
    return reconciler_->Reconcile({"default", "agent"});
  }
  kube::Result Reconcile(bool sync = true) {
    auto r = RawReconcile(sync);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : kube::Result{};
  }

  std::vector<Json> Pods() { return server_->List("pods", "default"); }
  // node -> pod names aimed at it (by the affinity the controller wrote).
  std::map<std::string, std::vector<std::string>> PodsByNode() {
    std::map<std::string, std::vector<std::string>> out;
    for (const Json& p : Pods()) out[TargetOf(p)].push_back(kube::Name(p));
    return out;
  }
  static std::string TargetOf(const Json& pod) {
    return pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
              ["nodeSelectorTerms"][0]["matchFields"][0]["values"][0];
  }
  std::string PodOn(const std::string& node) {
    auto by_node = PodsByNode();
    EXPECT_EQ(by_node[node].size(), 1u) << node;
    return by_node[node].empty() ? "" : by_node[node][0];
  }
  Json Pod(const std::string& name) { return *server_->Get("pods", "default", name); }
  Json Set() { return *server_->Get(kSets, "default", "agent"); }

  // The scheduler and the kubelet: bound to its node, running and ready (unless a gate condition
  // says otherwise).
  void MakeReady(const std::string& name) {
    Json pod = Pod(name);
    pod["spec"]["nodeName"] = TargetOf(pod);
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
    for (const Json& p : Pods()) {
      if (kube::GetString(p, {"status", "phase"}) != "Running") MakeReady(kube::Name(p));
    }
  }

  // The kubelet restarts a container whose image changed.
  void RestartChanged(const std::string& name) {
    Json pod = Pod(name);
    Json& cs = pod["status"]["containerStatuses"][0];
    if (cs["image"] == pod["spec"]["containers"][0]["image"]) return;
    cs["image"] = pod["spec"]["containers"][0]["image"];
    cs["imageID"] = "sha256:bbb";
    cs["restartCount"] = cs["restartCount"].get<int>() + 1;
    cs["containerID"] =
        "containerd://" + name + "-" + std::to_string(cs["restartCount"].get<int>());
    clock_.Advance(absl::Seconds(2));
    cs["state"] = {{"running", {{"startedAt", kube::FormatRfc3339(clock_.Now())}}}};
    ASSERT_TRUE(server_->Put("pods", pod).ok());
  }

  std::string Revision(const Json& pod) {
    return kube::Label(pod, "controller-revision-hash").value_or("");
  }

  // The KruisePodReady condition as "status/reason", or "none".
  std::string KruiseReady(const std::string& name) {
    Json pod = Pod(name);
    for (const Json& c : pod["status"].value("conditions", Json::array())) {
      if (c["type"] == "KruisePodReady") {
        return c["status"].get<std::string>() + "/" + c.value("reason", "");
      }
    }
    return "none";
  }

  std::vector<Json> Events(const std::string& reason) {
    EXPECT_TRUE(recorder_->WaitIdle(absl::Seconds(10)));
    std::vector<Json> out;
    for (const Json& e : server_->List("events")) {
      if (e.value("reason", "") == reason) out.push_back(e);
    }
    return out;
  }

  // Rolls every pod to the update revision (the kubelet restarting changed containers, pods
  // becoming ready), at most `rounds` reconciles.
  void RollOut(int rounds = 12) {
    for (int i = 0; i < rounds; ++i) {
      const std::string rev = Set()["status"].value("updateRevision", "");
      bool done = Pods().size() == 3;
      for (const Json& p : Pods()) done = done && Revision(p) == rev;
      if (done && Set()["status"].value("updatedNumberScheduled", 0) == 3) return;
      for (const Json& p : Pods()) {
        if (kube::GetString(p, {"status", "phase"}) == "Running") RestartChanged(kube::Name(p));
      }
      MakeAllReady();
      Reconcile();
    }
    FAIL() << "the rollout did not finish";
  }

  bool pre_download_ = false;                // set before SetUp
  inplace::DisruptionGate* gate_ = nullptr;  // set before SetUp (then events are recorded)
  bool gate_deletes_ = true;                 // set before SetUp
  std::unique_ptr<AdsReconciler> reconciler_;
};

TEST_F(AdsControllerTest, OnePodPerEligibleNode) {
  CreateSet();
  Reconcile();
  auto by_node = PodsByNode();
  ASSERT_EQ(by_node.size(), 3u);
  for (const std::string n : {"node-a", "node-b", "node-c"}) EXPECT_EQ(by_node[n].size(), 1u) << n;
  auto revisions = server_->List(kRevisions, "default");
  ASSERT_EQ(revisions.size(), 1u);
  const std::string hash = kube::Label(revisions[0], "controller-revision-hash").value_or("");
  EXPECT_EQ(kube::Name(revisions[0]), "agent-" + hash);
  Json pod = Pods()[0];
  EXPECT_EQ(Revision(pod), hash);
  EXPECT_EQ(kube::Label(pod, "app"), "agent");
  EXPECT_THAT(kube::Name(pod), ::testing::StartsWith("agent-"));
  auto owner = kube::ControllerOf(pod);
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(owner->uid, kube::Uid(Set()));
  EXPECT_EQ(owner->kind, "DaemonSet");
  std::set<std::string> tolerated;
  for (const Json& t : pod["spec"]["tolerations"]) tolerated.insert(t["key"].get<std::string>());
  EXPECT_TRUE(tolerated.count("node.kubernetes.io/not-ready"));
  EXPECT_TRUE(tolerated.count("node.kubernetes.io/unschedulable"));
  EXPECT_FALSE(tolerated.count("node.kubernetes.io/network-unavailable")) << "no hostNetwork";
  EXPECT_FALSE(pod["spec"].contains("readinessGates")) << "Standard: no InPlaceUpdateReady gate";

  // A node added later gets its pod; nothing else changes.
  MakeAllReady();
  AddNode("node-d");
  Reconcile();
  by_node = PodsByNode();
  EXPECT_EQ(by_node.size(), 4u);
  EXPECT_EQ(server_->RequestCount("POST", "/pods"), 4);
}

TEST_F(AdsControllerTest, TaintsKeepOrRemovePods) {
  SetTaints("node-c", {{{"key", "dedicated"}, {"value", "db"}, {"effect", "NoSchedule"}}});
  CreateSet();
  Reconcile();
  auto by_node = PodsByNode();
  EXPECT_EQ(by_node.count("node-c"), 0u) << "NoSchedule taint not tolerated: no pod";
  EXPECT_EQ(by_node.size(), 2u);
  MakeAllReady();
  // A NoSchedule taint on a node that runs a pod keeps it; NoExecute removes it.
  SetTaints("node-b", {{{"key", "maintenance"}, {"effect", "NoSchedule"}}});
  Reconcile();
  EXPECT_EQ(PodsByNode().count("node-b"), 1u);
  SetTaints("node-a", {{{"key", "maintenance"}, {"effect", "NoExecute"}}});
  Reconcile();
  by_node = PodsByNode();
  EXPECT_EQ(by_node.count("node-a"), 0u) << "NoExecute taint: pod removed";
  EXPECT_EQ(by_node.count("node-b"), 1u);
  Reconcile();
  Json status = Set()["status"];
  EXPECT_EQ(status["desiredNumberScheduled"], 0) << "no node is free of untolerated taints";
  EXPECT_EQ(status["numberMisscheduled"], 1) << "node-b still runs one";
  // A template toleration lets pods back on.
  PatchSpec({{"template",
              {{"spec", {{"tolerations", {{{"key", "maintenance"}, {"operator", "Exists"}}}}}}}}});
  Reconcile();
  by_node = PodsByNode();
  EXPECT_EQ(by_node.count("node-a"), 1u);
  EXPECT_EQ(by_node.count("node-c"), 0u);
}

TEST_F(AdsControllerTest, BurstReplicasCapsCreationsPerRound) {
  CreateSet({{"burstReplicas", 1}});
  Reconcile();
  EXPECT_EQ(Pods().size(), 1u);
  Reconcile();
  EXPECT_EQ(Pods().size(), 2u);
  Reconcile();
  EXPECT_EQ(Pods().size(), 3u);
  Reconcile();
  EXPECT_EQ(Pods().size(), 3u);
  EXPECT_EQ(server_->RequestCount("POST", "/pods"), 3);
}

TEST_F(AdsControllerTest, StandardRollingUpdateWithMaxUnavailableAndPartition) {
  CreateSet({{"updateStrategy",
              {{"type", "RollingUpdate"},
               {"rollingUpdate", {{"rollingUpdateType", "Standard"}, {"maxUnavailable", 1}}}}}});
  Reconcile();
  MakeAllReady();
  Reconcile();
  const std::string old_rev = Set()["status"]["updateRevision"];
  const std::string pod_a = PodOn("node-a");
  PatchSpec({{"template", Template("registry.local/agent:v2")},
             {"updateStrategy", {{"rollingUpdate", {{"partition", 1}}}}}});
  Reconcile();
  const std::string new_rev = Set()["status"]["updateRevision"];
  EXPECT_NE(new_rev, old_rev);
  EXPECT_EQ(PodsByNode().count("node-c"), 0u) << "node-c (highest name) first: deleted";
  EXPECT_EQ(Pods().size(), 2u) << "maxUnavailable 1";
  Reconcile();
  ASSERT_EQ(PodsByNode().count("node-c"), 1u);
  const std::string pod_c = PodOn("node-c");
  EXPECT_EQ(Revision(Pod(pod_c)), new_rev);
  EXPECT_EQ(Pod(pod_c)["spec"]["containers"][0]["image"], "registry.local/agent:v2");
  Reconcile();
  EXPECT_EQ(Pods().size(), 3u) << "node-c's new pod is not available: node-b waits";
  MakeReady(pod_c);
  Reconcile();
  EXPECT_EQ(PodsByNode().count("node-b"), 0u);
  Reconcile();
  MakeAllReady();
  Reconcile();
  Reconcile();
  EXPECT_EQ(Revision(Pod(PodOn("node-b"))), new_rev);
  EXPECT_EQ(PodOn("node-a"), pod_a) << "partition 1: node-a keeps its old pod";
  EXPECT_EQ(Revision(Pod(pod_a)), old_rev);
  Json status = Set()["status"];
  EXPECT_EQ(status["updatedNumberScheduled"], 2);
  EXPECT_EQ(status["numberAvailable"], 3);
  // Partition 0 finishes the rollout.
  PatchSpec({{"updateStrategy", {{"rollingUpdate", {{"partition", 0}}}}}});
  Reconcile();
  Reconcile();
  MakeAllReady();
  Reconcile();
  EXPECT_EQ(Revision(Pod(PodOn("node-a"))), new_rev);
  EXPECT_EQ(Set()["status"]["updatedNumberScheduled"], 3);
}

TEST_F(AdsControllerTest, SurgeStartsTheNewPodBeforeDeletingTheOld) {
  CreateSet({{"updateStrategy",
              {{"rollingUpdate",
                {{"rollingUpdateType", "Standard"}, {"maxSurge", 1}, {"maxUnavailable", 0}}}}}});
  Reconcile();
  MakeAllReady();
  Reconcile();
  const std::string old_c = PodOn("node-c");
  PatchSpec({{"template", Template("registry.local/agent:v2")}});
  Reconcile();
  auto by_node = PodsByNode();
  ASSERT_EQ(by_node["node-c"].size(), 2u) << "a surge pod next to the old one";
  EXPECT_EQ(by_node["node-b"].size(), 1u) << "maxSurge 1";
  Reconcile();
  EXPECT_EQ(PodsByNode()["node-c"].size(), 2u) << "the new pod is not ready: the old one stays";
  std::string new_c;
  by_node = PodsByNode();
  for (const std::string& n : by_node["node-c"]) {
    if (n != old_c) new_c = n;
  }
  MakeReady(new_c);
  Reconcile();
  EXPECT_THAT(PodsByNode()["node-c"], ElementsAre(new_c)) << "old pod deleted once new available";
  for (int i = 0; i < 6; ++i) {
    MakeAllReady();
    Reconcile();
  }
  const std::string new_rev = Set()["status"]["updateRevision"];
  for (const Json& p : Pods()) EXPECT_EQ(Revision(p), new_rev);
  EXPECT_EQ(Pods().size(), 3u);
  EXPECT_EQ(Set()["status"]["updatedNumberScheduled"], 3);
}

TEST_F(AdsControllerTest, InPlaceUpdateKeepsThePod) {
  CreateSet(
      {{"updateStrategy", {{"rollingUpdate", {{"rollingUpdateType", "InPlaceIfPossible"}}}}}});
  Reconcile();
  Json pod = Pods()[0];
  ASSERT_TRUE(pod["spec"].contains("readinessGates"));
  EXPECT_EQ(pod["spec"]["readinessGates"][0]["conditionType"],
            inplace::kInPlaceUpdateReadyCondition);
  Reconcile();  // the gate's condition starts True
  MakeAllReady();
  Reconcile();
  const std::string pod_c = PodOn("node-c");
  const std::string uid_c = kube::Uid(Pod(pod_c));
  PatchSpec({{"template", Template("registry.local/agent:v2")}});
  Reconcile();
  pod = Pod(pod_c);
  EXPECT_EQ(kube::Uid(pod), uid_c) << "same pod";
  EXPECT_EQ(pod["spec"]["containers"][0]["image"], "registry.local/agent:v2");
  EXPECT_EQ(Revision(pod), Set()["status"]["updateRevision"]);
  EXPECT_EQ(kube::Label(pod, "lifecycle.apps.kruise.io/state"), "Updating");
  EXPECT_EQ(Pods().size(), 3u) << "nothing deleted";
  RestartChanged(pod_c);
  Reconcile();
  pod = Pod(pod_c);
  EXPECT_EQ(kube::Label(pod, "lifecycle.apps.kruise.io/state"), "Normal");
  for (const Json& c : pod["status"]["conditions"]) {
    if (c["type"] == inplace::kInPlaceUpdateReadyCondition) {
      EXPECT_EQ(c["status"], "True");
    }
  }
  for (int i = 0; i < 6; ++i) {
    for (const Json& p : Pods()) RestartChanged(kube::Name(p));
    for (const Json& p : Pods()) MakeReady(kube::Name(p));
    Reconcile();
  }
  for (const Json& p : Pods()) {
    EXPECT_EQ(p["spec"]["containers"][0]["image"], "registry.local/agent:v2");
  }
  EXPECT_EQ(server_->RequestCount("POST", "/pods"), 3) << "never recreated";
  EXPECT_EQ(Set()["status"]["updatedNumberScheduled"], 3);
}

TEST_F(AdsControllerTest, StaleCacheNeverPutsASecondPodOnANode) {
  CreateSet();
  Reconcile();
  Reconcile(/*sync=*/false);
  Reconcile(/*sync=*/false);
  EXPECT_EQ(server_->RequestCount("POST", "/pods"), 3);
  // The pods are not scheduled yet (no spec.nodeName): the cache still knows their node from
  // their affinity, so a new leader with a synced cache creates nothing.
  auto fresh = NewReconciler();
  Sync();
  ASSERT_TRUE(fresh->Reconcile({"default", "agent"}).ok());
  EXPECT_EQ(server_->RequestCount("POST", "/pods"), 3);
  // Deletions are not repeated either.
  MakeAllReady();
  SetTaints("node-a", {{{"key", "gone"}, {"effect", "NoExecute"}}});
  Reconcile();
  Reconcile(false);
  Reconcile(false);
  EXPECT_EQ(PodsByNode().count("node-a"), 0u);
  EXPECT_EQ(server_->RequestCount("DELETE", "/pods/"), 1);
}

TEST_F(AdsControllerTest, StatusCounts) {
  CreateSet({{"minReadySeconds", 30}});
  Reconcile();
  Reconcile();
  Json status = Set()["status"];
  EXPECT_EQ(status["desiredNumberScheduled"], 3);
  EXPECT_EQ(status["currentNumberScheduled"], 3);
  EXPECT_EQ(status["numberReady"], 0);
  EXPECT_EQ(status["numberAvailable"], 0);
  EXPECT_EQ(status["numberUnavailable"], 3);
  EXPECT_EQ(status["updatedNumberScheduled"], 3);
  EXPECT_EQ(status["numberMisscheduled"], 0);
  EXPECT_EQ(status["observedGeneration"], 1);
  EXPECT_EQ(status["updateRevision"], Revision(Pods()[0]));
  EXPECT_EQ(status["daemonSetHash"], status["updateRevision"]);
  MakeReady(PodOn("node-a"));
  MakeReady(PodOn("node-b"));
  kube::Result r = Reconcile();
  EXPECT_EQ(r.requeue_after, absl::Seconds(30)) << "rechecks when minReadySeconds has passed";
  status = Set()["status"];
  EXPECT_EQ(status["numberReady"], 2);
  EXPECT_EQ(status["numberAvailable"], 0) << "minReadySeconds 30";
  clock_.Advance(absl::Seconds(31));
  Reconcile();
  status = Set()["status"];
  EXPECT_EQ(status["numberAvailable"], 2);
  EXPECT_EQ(status["numberUnavailable"], 1);
}

TEST_F(AdsControllerTest, PreDeleteHookHoldsThePodInPreparingDelete) {
  CreateSet({{"lifecycle", {{"preDelete", {{"labelsHandler", {{"hold", "true"}}}}}}}});
  Reconcile();
  MakeAllReady();
  const std::string pod_a = PodOn("node-a");
  Json pod = Pod(pod_a);
  pod["metadata"]["labels"]["hold"] = "true";
  ASSERT_TRUE(server_->Put("pods", pod).ok());
  SetTaints("node-a", {{{"key", "gone"}, {"effect", "NoExecute"}}});
  Reconcile();
  EXPECT_EQ(kube::Label(Pod(pod_a), "lifecycle.apps.kruise.io/state"), "PreparingDelete");
  Reconcile();
  EXPECT_EQ(PodOn("node-a"), pod_a) << "held while the hook label is there";
  pod = Pod(pod_a);
  pod["metadata"]["labels"].erase("hold");
  ASSERT_TRUE(server_->Put("pods", pod).ok());
  Reconcile();
  EXPECT_EQ(PodsByNode().count("node-a"), 0u) << "released: deleted";
}

TEST_F(AdsControllerTest, FailedPodIsReplacedWithBackoff) {
  CreateSet();
  Reconcile();
  MakeAllReady();
  Reconcile();
  auto fail = [&](const std::string& name) {
    Json pod = Pod(name);
    pod["status"]["phase"] = "Failed";
    ASSERT_TRUE(server_->Put("pods", pod).ok());
  };
  const std::string first = PodOn("node-b");
  fail(first);
  Reconcile();
  EXPECT_EQ(PodsByNode().count("node-b"), 0u) << "a failed pod is deleted";
  Reconcile();
  const std::string second = PodOn("node-b");
  EXPECT_NE(second, first);
  MakeReady(second);
  fail(second);
  kube::Result r = Reconcile();
  EXPECT_EQ(PodOn("node-b"), second) << "in backoff: kept for now";
  EXPECT_GT(r.requeue_after, absl::ZeroDuration());
  clock_.Advance(r.requeue_after);
  Reconcile();
  EXPECT_EQ(PodsByNode().count("node-b"), 0u) << "backoff over";
}

// preDelete with markPodNotReady: the pod the hook holds is taken out of endpoints through the
// KruisePodReady condition before it is deleted, as OpenKruise's syncWithPreparingDelete.
TEST_F(AdsControllerTest, PreDeleteMarkPodNotReadyBeforeDeletion) {
  CreateSet(
      {{"lifecycle",
        {{"preDelete", {{"labelsHandler", {{"hold", "true"}}}, {"markPodNotReady", true}}}}}});
  Reconcile();
  for (const Json& p : Pods()) {  // the pod webhook's gate, and the hook's owner's label
    Json pod = Pod(kube::Name(p));
    pod["spec"]["readinessGates"] = {{{"conditionType", "KruisePodReady"}}};
    pod["metadata"]["labels"]["hold"] = "true";
    ASSERT_TRUE(server_->Put("pods", pod).ok());
  }
  Reconcile();  // the gate's condition starts True
  MakeAllReady();
  for (const Json& p : Pods()) EXPECT_EQ(KruiseReady(kube::Name(p)), "True/");
  const std::string pod_a = PodOn("node-a");
  SetTaints("node-a", {{{"key", "gone"}, {"effect", "NoExecute"}}});
  Reconcile();
  EXPECT_EQ(kube::Label(Pod(pod_a), "lifecycle.apps.kruise.io/state"), "PreparingDelete");
  EXPECT_EQ(KruiseReady(pod_a), "False/PreparingDelete");
  Reconcile();
  EXPECT_EQ(PodOn("node-a"), pod_a) << "held while the hook label is there";
  EXPECT_EQ(KruiseReady(pod_a), "False/PreparingDelete");
  // A pod a round left in PreparingDelete without the condition (it stopped between the two
  // patches): the next round takes it out of endpoints too.
  const std::string pod_b = PodOn("node-b");
  Json b = Pod(pod_b);
  b["metadata"]["labels"]["lifecycle.apps.kruise.io/state"] = "PreparingDelete";
  ASSERT_TRUE(server_->Put("pods", b).ok());
  Reconcile();
  EXPECT_EQ(KruiseReady(pod_b), "False/PreparingDelete");
  EXPECT_EQ(KruiseReady(PodOn("node-c")), "True/") << "the others stay ready";
  // The hook lets go: deleted.
  Json a = Pod(pod_a);
  a["metadata"]["labels"].erase("hold");
  ASSERT_TRUE(server_->Put("pods", a).ok());
  Reconcile();
  EXPECT_FALSE(server_->Get("pods", "default", pod_a).ok());
}

// PreDownloadImageForDaemonSetUpdate: one ImagePullJob per changed image, once per revision, for
// the nodes whose pod is not at the new revision; gone once every pod is.
class AdsPreDownloadTest : public AdsControllerTest {
 protected:
  AdsPreDownloadTest() { pre_download_ = true; }
};

TEST_F(AdsPreDownloadTest, OneJobPerRevisionForThePodsNotYetUpdated) {
  CreateSet({{"updateStrategy",
              {{"type", "RollingUpdate"},
               {"rollingUpdate", {{"rollingUpdateType", "Standard"}, {"maxUnavailable", 1}}}}}});
  Json set = Set();
  set["metadata"]["annotations"] = {{inplace::kImagePreDownloadParallelismAnnotation, "2"},
                                    {inplace::kImagePreDownloadTimeoutAnnotation, "120"}};
  ASSERT_TRUE(server_->Put(kSets, set).ok());
  Reconcile();
  MakeAllReady();
  Reconcile();
  EXPECT_TRUE(server_->List(kJobs).empty()) << "one revision: nothing to warm";
  const std::string old_hash = Set()["status"]["updateRevision"];
  const std::string old_pod = PodOn("node-a");
  Json tmpl = Template("registry.local/agent:v2");
  tmpl["spec"]["imagePullSecrets"] = {{{"name", "regcred"}}};
  PatchSpec({{"template", tmpl}});
  Reconcile();
  const std::string hash = Set()["status"]["updateRevision"];
  ASSERT_NE(hash, old_hash);
  std::vector<Json> jobs = server_->List(kJobs, "default");
  ASSERT_EQ(jobs.size(), 1u);
  const Json& job = jobs[0];
  EXPECT_EQ(kube::Name(job), "agent-" + hash + "-main");
  auto owner = kube::ControllerOf(job);
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(owner->kind, "DaemonSet");
  EXPECT_EQ(owner->uid, kube::Uid(Set()));
  EXPECT_EQ(kube::Label(job, "controller-revision-hash"), hash);
  EXPECT_EQ(job["spec"]["image"], "registry.local/agent:v2");
  EXPECT_EQ(job["spec"]["parallelism"], 2);
  EXPECT_EQ(job["spec"]["pullPolicy"], Json({{"timeoutSeconds", 120}, {"backoffLimit", 1}}));
  EXPECT_EQ(job["spec"]["pullSecrets"], Json({"regcred"}));
  // The set's pods whose controller-revision-hash is neither the revision's name nor its hash.
  const Json& selector = job["spec"]["podSelector"];
  EXPECT_EQ(selector["matchLabels"], Json({{"app", "agent"}}));
  EXPECT_EQ(selector["matchExpressions"][0]["operator"], "NotIn");
  EXPECT_EQ(selector["matchExpressions"][0]["values"], Json({"agent-" + hash, hash}));
  auto parsed = kube::LabelSelector::FromJson(selector);
  ASSERT_TRUE(parsed.ok());
  EXPECT_TRUE(parsed->MatchesObject(Pod(old_pod))) << "an old pod's node is warmed";
  EXPECT_FALSE(parsed->Matches({{"app", "agent"}, {"controller-revision-hash", hash}}));
  auto rev = server_->Get(kRevisions, "default", "agent-" + hash);
  ASSERT_TRUE(rev.ok());
  EXPECT_EQ(kube::Label(*rev, inplace::kImagePreDownloadCreatedLabel), "true");
  // Once per revision: a job removed (its TTL, or by hand) is not made again.
  ASSERT_TRUE(server_->Remove(kJobs, "default", kube::Name(job)).ok());
  Reconcile();
  EXPECT_TRUE(server_->List(kJobs).empty());
  EXPECT_EQ(server_->RequestCount("POST", "/imagepulljobs"), 1);
  // A job still there when every pod is at the new revision is deleted.
  ASSERT_TRUE(server_->Seed(kJobs, job).ok());
  RollOut();
  Reconcile();
  EXPECT_TRUE(server_->List(kJobs).empty());
}

// apps.kruise.io/image-predownload-min-updated-ready-pods: the jobs wait for that many updated
// pods to be ready (a canary first).
TEST_F(AdsPreDownloadTest, MinUpdatedReadyPodsHoldsTheJobsBack) {
  CreateSet({{"updateStrategy",
              {{"rollingUpdate", {{"rollingUpdateType", "Standard"}, {"maxUnavailable", 1}}}}}});
  Json set = Set();
  set["metadata"]["annotations"] = {{inplace::kImagePreDownloadMinUpdatedReadyPodsAnnotation, "1"}};
  ASSERT_TRUE(server_->Put(kSets, set).ok());
  Reconcile();
  MakeAllReady();
  Reconcile();
  PatchSpec({{"template", Template("registry.local/agent:v2")}});
  Reconcile();  // node-c's old pod deleted
  Reconcile();  // its new pod created
  EXPECT_TRUE(server_->List(kJobs).empty()) << "no updated pod ready yet";
  const std::string hash = Set()["status"]["updateRevision"];
  EXPECT_FALSE(kube::Label(*server_->Get(kRevisions, "default", "agent-" + hash),
                           inplace::kImagePreDownloadCreatedLabel)
                   .has_value());
  MakeReady(PodOn("node-c"));
  Reconcile();
  std::vector<Json> jobs = server_->List(kJobs, "default");
  ASSERT_EQ(jobs.size(), 1u) << "the canary is ready";
  EXPECT_EQ(kube::Name(jobs[0]), "agent-" + hash + "-main");
}

TEST_F(AdsPreDownloadTest, OneBatchSetsAreMarkedIgnored) {
  // One eligible node, maxUnavailable 1: every pod updates in one batch.
  SetTaints("node-b", {{{"key", "dedicated"}, {"effect", "NoSchedule"}}});
  SetTaints("node-c", {{{"key", "dedicated"}, {"effect", "NoSchedule"}}});
  CreateSet({{"updateStrategy",
              {{"rollingUpdate", {{"rollingUpdateType", "Standard"}, {"maxUnavailable", 1}}}}}});
  Reconcile();
  MakeAllReady();
  Reconcile();
  PatchSpec({{"template", Template("registry.local/agent:v2")}});
  Reconcile();
  EXPECT_TRUE(server_->List(kJobs).empty());
  const std::string hash = Set()["status"]["updateRevision"];
  auto rev = server_->Get(kRevisions, "default", "agent-" + hash);
  ASSERT_TRUE(rev.ok());
  EXPECT_EQ(kube::Label(*rev, inplace::kImagePreDownloadIgnoredLabel), "true");
  EXPECT_FALSE(kube::Label(*rev, inplace::kImagePreDownloadCreatedLabel).has_value());
}

// The PodUnavailableBudget (issue 17), through a stand-in gate: each pod the update takes down is
// put to it first; a denial holds the update, a later allow continues it.
class AdsPubTest : public AdsControllerTest {
 protected:
  AdsPubTest() { gate_ = &fake_gate_; }
  testing::FakeDisruptionGate fake_gate_;
};

TEST_F(AdsPubTest, DenialHoldsTheStandardUpdateUntilAllowed) {
  CreateSet({{"updateStrategy",
              {{"rollingUpdate", {{"rollingUpdateType", "Standard"}, {"maxUnavailable", 1}}}}}});
  Reconcile();
  MakeAllReady();
  Reconcile();
  EXPECT_THAT(fake_gate_.TakeAsked(), ::testing::IsEmpty()) << "nothing to update yet";
  const std::string pod_c = PodOn("node-c");
  PatchSpec({{"template", Template("registry.local/agent:v2")}});
  const int64_t deletes = server_->RequestCount("DELETE", "/pods/");
  EXPECT_EQ(Reconcile().requeue_after, inplace::kDisruptionRetry);
  EXPECT_THAT(fake_gate_.TakeAsked(), ElementsAre(pod_c));
  EXPECT_EQ(server_->RequestCount("DELETE", "/pods/"), deletes);
  EXPECT_EQ(PodOn("node-c"), pod_c);
  std::vector<Json> events = Events(inplace::kDisruptionDeniedReason);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "Warning");
  EXPECT_EQ(events[0]["involvedObject"]["kind"], "DaemonSet");
  EXPECT_THAT(events[0]["message"].get<std::string>(), ::testing::HasSubstr(pod_c));
  EXPECT_THAT(events[0]["message"].get<std::string>(),
              ::testing::HasSubstr("PodUnavailableBudget web-pub"));
  EXPECT_EQ(Reconcile().requeue_after, inplace::kDisruptionRetry) << "still held";
  EXPECT_EQ(PodOn("node-c"), pod_c);
  // The budget frees: the update goes on where it stopped.
  fake_gate_.SetBudget(1);
  Reconcile();
  EXPECT_EQ(PodsByNode().count("node-c"), 0u) << "allowed: deleted for the new revision";
  fake_gate_.TakeAsked();
  fake_gate_.SetBudget(2);
  RollOut();
  const std::string rev = Set()["status"]["updateRevision"];
  for (const Json& p : Pods()) EXPECT_EQ(Revision(p), rev);
  EXPECT_EQ(fake_gate_.TakeAsked().size(), 2u) << "each of the other two pods asked once";
}

TEST_F(AdsPubTest, DenialHoldsTheInPlaceUpdate) {
  CreateSet(
      {{"updateStrategy", {{"rollingUpdate", {{"rollingUpdateType", "InPlaceIfPossible"}}}}}});
  Reconcile();
  Reconcile();
  MakeAllReady();
  Reconcile();
  const std::string pod_c = PodOn("node-c");
  PatchSpec({{"template", Template("registry.local/agent:v2")}});
  const int64_t patches = server_->RequestCount("PATCH", "/pods/");
  EXPECT_EQ(Reconcile().requeue_after, inplace::kDisruptionRetry);
  EXPECT_THAT(fake_gate_.TakeAsked(), ElementsAre(pod_c));
  EXPECT_EQ(server_->RequestCount("PATCH", "/pods/"), patches) << "not touched";
  EXPECT_EQ(Pod(pod_c)["spec"]["containers"][0]["image"], "registry.local/agent:v1");
  fake_gate_.SetBudget(1);
  Reconcile();
  EXPECT_EQ(Pod(pod_c)["spec"]["containers"][0]["image"], "registry.local/agent:v2");
  EXPECT_EQ(Revision(Pod(pod_c)), Set()["status"]["updateRevision"]);
  EXPECT_EQ(Pods().size(), 3u) << "updated in place, nothing deleted";
}

// Only the update asks: a pod whose node no longer takes it is deleted without asking (its
// DELETE still meets the PUB webhook, as any client's).
TEST_F(AdsPubTest, ScaleDeletionsDoNotAsk) {
  CreateSet();
  Reconcile();
  MakeAllReady();
  Reconcile();
  SetTaints("node-a", {{{"key", "gone"}, {"effect", "NoExecute"}}});
  Reconcile();
  EXPECT_EQ(PodsByNode().count("node-a"), 0u);
  EXPECT_THAT(fake_gate_.TakeAsked(), ::testing::IsEmpty());
}

// Without PodUnavailableBudgetDeleteGate nobody guards pod DELETE: only in-place updates ask.
class AdsPubUpdateOnlyTest : public AdsPubTest {
 protected:
  AdsPubUpdateOnlyTest() { gate_deletes_ = false; }
};

TEST_F(AdsPubUpdateOnlyTest, StandardDeletionsDoNotAsk) {
  CreateSet({{"updateStrategy",
              {{"rollingUpdate", {{"rollingUpdateType", "Standard"}, {"maxUnavailable", 1}}}}}});
  Reconcile();
  MakeAllReady();
  Reconcile();
  PatchSpec({{"template", Template("registry.local/agent:v2")}});
  Reconcile();
  EXPECT_EQ(PodsByNode().count("node-c"), 0u) << "deleted with the budget spent";
  EXPECT_THAT(fake_gate_.TakeAsked(), ::testing::IsEmpty());
}

}  // namespace
}  // namespace kruise::manager::daemonset
