#include "manager/daemonset/ads_plan.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kruise::manager::daemonset {
// Named, not anonymous: this file shares a unity-build unit with ads_admission_test.cc.
namespace plan_test {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const absl::Time kNow = absl::FromUnixSeconds(1'700'000'000);
constexpr char kNew[] = "rev-new";
constexpr char kOld[] = "rev-old";

NodeView Node(const std::string& name, std::map<std::string, std::string> labels = {},
              std::vector<Taint> taints = {}) {
  return NodeView{name, std::move(labels), std::move(taints)};
}

// A Running pod on `node`, created `age_s` seconds ago, Ready for as long.
AdsPod Pod(const std::string& name, const std::string& node, const std::string& revision,
           bool ready = true, int age_s = 100) {
  AdsPod p;
  p.name = name;
  p.node = node;
  p.scheduled = true;
  p.revision = revision;
  p.phase = "Running";
  p.ready = ready;
  p.created = kNow - absl::Seconds(age_s);
  if (ready) p.ready_since = p.created;
  return p;
}

AdsSpec Spec(const std::string& daemonset_spec_patch = "{}") {
  Json ds = Json::parse(R"({"metadata": {"name": "agent"}, "spec": {
      "selector": {"matchLabels": {"app": "agent"}},
      "template": {"metadata": {"labels": {"app": "agent"}},
                   "spec": {"containers": [{"name": "main", "image": "agent:1"}]}}}})");
  ds["spec"].merge_patch(Json::parse(daemonset_spec_patch));
  absl::StatusOr<AdsSpec> spec = ParseAdsSpec(ds);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : AdsSpec{};
}

DaemonPlacement Placement(const std::string& pod_spec = "{}") {
  absl::StatusOr<DaemonPlacement> p = ParsePlacement(Json{{"spec", Json::parse(pod_spec)}});
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : DaemonPlacement{};
}

std::vector<std::string> Names(const std::vector<PodAction>& actions) {
  std::vector<std::string> out;
  for (const PodAction& a : actions) out.push_back(a.pod);
  return out;
}

// ---- Eligibility ------------------------------------------------------------------------------

TEST(AdsNodeEligibilityTest, Table) {
  struct Case {
    const char* name;
    const char* pod_spec;
    NodeView node;
    bool should_run;
    bool should_continue;
  };
  const Taint kCustomNoSchedule{"dedicated", "db", "NoSchedule"};
  const Taint kCustomNoExecute{"dedicated", "db", "NoExecute"};
  const Case cases[] = {
      {"no constraints", "{}", Node("n1"), true, true},
      {"nodeSelector matches", R"({"nodeSelector": {"pool": "a"}})",
       Node("n1", {{"pool", "a"}, {"x", "y"}}), true, true},
      {"nodeSelector value differs", R"({"nodeSelector": {"pool": "a"}})",
       Node("n1", {{"pool", "b"}}), false, false},
      {"nodeSelector label missing", R"({"nodeSelector": {"pool": "a"}})", Node("n1"), false,
       false},
      {"template names another node", R"({"nodeName": "n2"})", Node("n1"), false, false},
      {"template names this node", R"({"nodeName": "n1"})", Node("n1"), true, true},
      {"affinity In",
       R"({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
           {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In",
           "values": ["z1", "z2"]}]}]}}}})",
       Node("n1", {{"zone", "z2"}}), true, true},
      {"affinity NotIn (label absent matches)", R"({"affinity": {"nodeAffinity":
           {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
           {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["z1"]}]}]}}}})",
       Node("n1"), true, true},
      {"affinity DoesNotExist", R"({"affinity": {"nodeAffinity":
           {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
           {"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}]}}}})",
       Node("n1", {{"gpu", "1"}}), false, false},
      {"affinity Gt", R"({"affinity": {"nodeAffinity":
           {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
           {"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["8"]}]}]}}}})",
       Node("n1", {{"cores", "16"}}), true, true},
      {"affinity Lt on a non-integer label", R"({"affinity": {"nodeAffinity":
           {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
           {"matchExpressions": [{"key": "cores", "operator": "Lt", "values": ["8"]}]}]}}}})",
       Node("n1", {{"cores", "many"}}), false, false},
      {"terms are ORed", R"({"affinity": {"nodeAffinity":
           {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
           {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z9"]}]},
           {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}})",
       Node("n1", {{"zone", "z1"}}), true, true},
      {"an empty term matches nothing", R"({"affinity": {"nodeAffinity":
           {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}}})",
       Node("n1"), false, false},
      {"no terms match nothing", R"({"affinity": {"nodeAffinity":
           {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}})",
       Node("n1"), false, false},
      {"a malformed term matches nothing", R"({"affinity": {"nodeAffinity":
           {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
           {"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["z1"]}]}]}}}})",
       Node("n1", {{"zone", "z1"}}), false, false},
      {"matchFields on another key is malformed", R"({"affinity": {"nodeAffinity":
           {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
           {"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["n1"]}]}]}}}})",
       Node("n1"), false, false},
      {"preferred affinity is ignored", R"({"affinity": {"nodeAffinity":
           {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference":
           {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z9"]}]}}]}}})",
       Node("n1"), true, true},
      {"untolerated NoSchedule: keep a running pod, create none", "{}",
       Node("n1", {}, {kCustomNoSchedule}), false, true},
      {"untolerated NoExecute: nothing may run", "{}", Node("n1", {}, {kCustomNoExecute}), false,
       false},
      {"PreferNoSchedule never matters", "{}",
       Node("n1", {}, {{"dedicated", "db", "PreferNoSchedule"}}), true, true},
      {"Equal toleration with the value",
       R"({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db"}]})",
       Node("n1", {}, {kCustomNoExecute}), true, true},
      {"Equal toleration with another value",
       R"({"tolerations": [{"key": "dedicated", "value": "web"}]})",
       Node("n1", {}, {kCustomNoExecute}), false, false},
      {"NoSchedule toleration leaves the NoExecute taint",
       R"({"tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]})",
       Node("n1", {}, {kCustomNoSchedule, kCustomNoExecute}), false, false},
      {"empty key with Exists tolerates everything", R"({"tolerations": [{"operator": "Exists"}]})",
       Node("n1", {}, {kCustomNoSchedule, kCustomNoExecute}), true, true},
      {"daemon toleration: not-ready NoExecute", "{}",
       Node("n1", {}, {{"node.kubernetes.io/not-ready", "", "NoExecute"}}), true, true},
      {"daemon toleration: unreachable NoExecute", "{}",
       Node("n1", {}, {{"node.kubernetes.io/unreachable", "", "NoExecute"}}), true, true},
      {"daemon toleration: disk-pressure, memory-pressure, pid-pressure, unschedulable", "{}",
       Node("n1", {},
            {{"node.kubernetes.io/disk-pressure", "", "NoSchedule"},
             {"node.kubernetes.io/memory-pressure", "", "NoSchedule"},
             {"node.kubernetes.io/pid-pressure", "", "NoSchedule"},
             {"node.kubernetes.io/unschedulable", "", "NoSchedule"}}),
       true, true},
      {"not-ready NoSchedule is not a daemon toleration", "{}",
       Node("n1", {}, {{"node.kubernetes.io/not-ready", "", "NoSchedule"}}), false, true},
      {"network-unavailable without hostNetwork", "{}",
       Node("n1", {}, {{"node.kubernetes.io/network-unavailable", "", "NoSchedule"}}), false, true},
      {"network-unavailable with hostNetwork", R"({"hostNetwork": true})",
       Node("n1", {}, {{"node.kubernetes.io/network-unavailable", "", "NoSchedule"}}), true, true},
  };
  for (const Case& c : cases) {
    const Eligibility e = NodeShouldRunDaemonPod(Placement(c.pod_spec), c.node);
    EXPECT_EQ(e.should_run, c.should_run) << c.name << ": " << e.reason;
    EXPECT_EQ(e.should_continue_running, c.should_continue) << c.name << ": " << e.reason;
    EXPECT_EQ(e.reason.empty(), c.should_run) << c.name;
  }
}

TEST(AdsNodeEligibilityTest, DaemonTolerationsAddedOnce) {
  EXPECT_EQ(DaemonPodTolerations(false).size(), 6u);
  EXPECT_EQ(DaemonPodTolerations(true).size(), 7u);
  const DaemonPlacement p = Placement(R"({"tolerations": [
      {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
      {"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}]})");
  EXPECT_EQ(p.tolerations.size(), 7u);  // the template's two, plus five daemon ones
  EXPECT_EQ(p.tolerations[1].key, "dedicated");
}

TEST(AdsNodeEligibilityTest, MistypedTemplateIsAnError) {
  EXPECT_FALSE(ParsePlacement(Json::parse(R"({"spec": {"nodeSelector": ["a"]}})")).ok());
  EXPECT_FALSE(ParsePlacement(Json::parse(R"({"spec": {"tolerations": {"a": 1}}})")).ok());
  EXPECT_FALSE(ParsePlacement(Json::parse(R"({"spec": 4})")).ok());
  EXPECT_TRUE(ParsePlacement(Json::parse(R"(null)")).ok());
}

// ---- Reading ----------------------------------------------------------------------------------

TEST(AdsPlanTest, ViewPodAndNode) {
  absl::StatusOr<AdsPod> pod = ViewPod(Json::parse(R"({
    "metadata": {"name": "agent-x", "creationTimestamp": "2024-01-01T00:00:00Z",
                 "labels": {"controller-revision-hash": "rev-1",
                            "lifecycle.apps.kruise.io/state": "PreparingDelete"},
                 "finalizers": ["example.io/hold"]},
    "spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
             {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
              "values": ["node-7"]}]}]}}},
             "readinessGates": [{"conditionType": "InPlaceUpdateReady"}]},
    "status": {"phase": "Pending", "conditions": [{"type": "InPlaceUpdateReady", "status": "False"}]}
  })"));
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ(pod->node, "node-7");
  EXPECT_FALSE(pod->scheduled);
  EXPECT_EQ(pod->revision, "rev-1");
  EXPECT_EQ(pod->lifecycle_state, "PreparingDelete");
  EXPECT_THAT(pod->finalizers, ElementsAre("example.io/hold"));
  EXPECT_TRUE(pod->in_place_gate);
  EXPECT_TRUE(pod->in_place_not_ready);
  EXPECT_FALSE(ViewPod(Json::parse(R"({"status": {"conditions": [{"type": 3}]}})")).ok());

  NodeView node = ViewNode(Json::parse(R"({"metadata": {"name": "n1", "labels": {"a": "b"}},
      "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}, 5]}})"));
  EXPECT_EQ(node.name, "n1");
  ASSERT_EQ(node.taints.size(), 1u);
  EXPECT_EQ(node.taints[0].effect, "NoSchedule");
}

TEST(AdsPlanTest, ParseSpecAndNumbers) {
  AdsSpec s = Spec();
  EXPECT_FALSE(s.on_delete);
  EXPECT_FALSE(s.in_place_if_possible);
  EXPECT_EQ(s.max_unavailable, 1);
  absl::StatusOr<ScaledNumbers> n = ScaleNumbers(s, 10);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->max_unavailable, 1);
  EXPECT_EQ(n->max_surge, 0);
  EXPECT_EQ(n->burst_replicas, 250);

  s = Spec(R"({"burstReplicas": "50%", "updateStrategy": {"rollingUpdate": {
      "maxUnavailable": "25%", "partition": "30%"}}})");
  n = ScaleNumbers(s, 10);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->max_unavailable, 3);  // rounded up
  EXPECT_EQ(n->partition, 3);
  EXPECT_EQ(n->burst_replicas, 5);  // rounded down

  s = Spec(R"({"updateStrategy": {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": "0%"}}})");
  EXPECT_EQ(ScaleNumbers(s, 4)->max_unavailable, 1);  // both 0 reads as maxUnavailable 1

  // Surging reads as Standard with maxSurge 1; the v1alpha1 annotation turns on partitioned
  // scaling; a preDelete hook is read.
  Json ds = Json::parse(R"({"metadata": {"name": "a", "annotations": {
      "daemonset.kruise.io/progressive-create-pod": "true"}}, "spec": {
      "updateStrategy": {"rollingUpdate": {"rollingUpdateType": "Surging"}},
      "lifecycle": {"preDelete": {"labelsHandler": {"hold": "true"}}}}})");
  absl::StatusOr<AdsSpec> parsed = ParseAdsSpec(ds);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->max_surge, 1);
  EXPECT_EQ(parsed->max_unavailable, 0);
  EXPECT_TRUE(parsed->partitioned_scaling);
  ASSERT_TRUE(parsed->pre_delete.has_value());
  EXPECT_EQ(parsed->pre_delete->labels_handler.at("hold"), "true");

  EXPECT_FALSE(ParseAdsSpec(Json::parse(R"({"spec": {"minReadySeconds": "x"}})")).ok());
  EXPECT_FALSE(
      ParseAdsSpec(Json::parse(R"({"spec": {"updateStrategy": {"type": "Other"}}})")).ok());
  EXPECT_FALSE(ParseAdsSpec(Json::parse(R"([1])")).ok());
}

// ---- Scale ------------------------------------------------------------------------------------

TEST(AdsScalePlanTest, CreatesOnEligibleNodesAndDeletesElsewhere) {
  const std::vector<NodeView> nodes = {
      Node("a", {{"pool", "x"}}),
      Node("b", {{"pool", "x"}}),
      Node("c", {{"pool", "y"}}),                             // selector mismatch
      Node("d", {{"pool", "x"}}, {{"k", "", "NoSchedule"}}),  // keeps its pod
      Node("e", {{"pool", "x"}}, {{"k", "", "NoExecute"}}),   // evicts its pod
  };
  const std::vector<AdsPod> pods = {Pod("pa", "a", kNew), Pod("pc", "c", kNew),
                                    Pod("pd", "d", kNew), Pod("pe", "e", kNew)};
  absl::StatusOr<ScalePlan> plan =
      PlanScale(Spec(), Placement(R"({"nodeSelector": {"pool": "x"}})"), nodes, pods, kNew, kNow);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->desired_number_scheduled, 2);
  EXPECT_THAT(plan->create, ElementsAre("b"));
  EXPECT_THAT(plan->deletions.remove,
              ElementsAre(PodAction{"pc", "c", DeleteReason::kNotEligible},
                          PodAction{"pe", "e", DeleteReason::kNotEligible}));
}

TEST(AdsScalePlanTest, PerNodeCleanup) {
  AdsPod young = Pod("young", "a", kNew, true, 10);
  AdsPod old = Pod("old", "a", kNew, true, 500);
  AdsPod unscheduled = Pod("unscheduled", "a", kNew, false, 900);
  unscheduled.scheduled = false;
  AdsPod failed = Pod("failed", "b", kNew, false);
  failed.phase = "Failed";
  AdsPod failed_c = Pod("failed-c", "c", kNew, false);
  failed_c.phase = "Failed";
  AdsPod released = Pod("released", "d", kNew);
  released.lifecycle_state = "PreparingDelete";
  AdsPod going = Pod("going", "e", kNew);
  going.terminating = true;
  AdsPod orphan = Pod("orphan", "gone", kNew, false);
  orphan.scheduled = false;
  AdsPod stranded = Pod("stranded", "gone2", kNew);  // scheduled: PodGC's business
  const std::vector<NodeView> nodes = {Node("a"), Node("b"), Node("c"), Node("d"), Node("e")};
  absl::StatusOr<ScalePlan> plan =
      PlanScale(Spec(), Placement(), nodes,
                {young, old, unscheduled, failed, failed_c, released, going, orphan, stranded},
                kNew, kNow, /*failed_backoff=*/{"c"});
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Duplicates on a: the oldest scheduled pod stays. A node whose only pod is terminating waits.
  EXPECT_THAT(plan->create, IsEmpty());
  EXPECT_THAT(plan->deletions.remove,
              ElementsAre(PodAction{"young", "a", DeleteReason::kExcess},
                          PodAction{"unscheduled", "a", DeleteReason::kExcess},
                          PodAction{"failed", "b", DeleteReason::kFailed},
                          PodAction{"released", "d", DeleteReason::kPreparingDelete},
                          PodAction{"orphan", "gone", DeleteReason::kNodeGone}));
}

TEST(AdsScalePlanTest, BurstReplicasCapsCreatesAndDeletes) {
  std::vector<NodeView> nodes;
  std::vector<AdsPod> pods;
  for (int i = 0; i < 6; ++i) nodes.push_back(Node(absl::StrCat("n", i)));
  for (int i = 0; i < 4; ++i) pods.push_back(Pod(absl::StrCat("x", i), "n0", kNew, true, 100 + i));
  absl::StatusOr<ScalePlan> plan =
      PlanScale(Spec(R"({"burstReplicas": 2})"), Placement(), nodes, pods, kNew, kNow);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->create_wanted, 5);
  EXPECT_THAT(plan->create, ElementsAre("n1", "n2"));
  EXPECT_THAT(Names(plan->deletions.remove), ElementsAre("x2", "x1"));  // x3 is the oldest
}

TEST(AdsScalePlanTest, PartitionedScaling) {
  std::vector<NodeView> nodes = {Node("e"), Node("d"), Node("c"), Node("b"), Node("a")};
  const std::vector<AdsPod> pods = {Pod("pa", "a", kNew)};
  // desired 5, one node at the update revision, partition 2: two more pods, first by name.
  absl::StatusOr<ScalePlan> plan = PlanScale(Spec(R"({"scaleStrategy": {"partitionedScaling": true},
               "updateStrategy": {"rollingUpdate": {"partition": 2}}})"),
                                             Placement(), nodes, pods, kNew, kNow);
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->create, ElementsAre("b", "c"));
  // Without partitioned scaling every node gets a pod, sorted by name because partition != 0.
  plan = PlanScale(Spec(R"({"updateStrategy": {"rollingUpdate": {"partition": 2}}})"), Placement(),
                   nodes, pods, kNew, kNow);
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->create, ElementsAre("b", "c", "d", "e"));
  // Partition 0: node order as given.
  plan = PlanScale(Spec(R"({"scaleStrategy": {"partitionedScaling": true}})"), Placement(), nodes,
                   pods, kNew, kNow);
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->create, ElementsAre("e", "d", "c", "b"));
  // Partition at least the desired number: nothing is created.
  plan = PlanScale(Spec(R"({"scaleStrategy": {"partitionedScaling": true},
                           "updateStrategy": {"rollingUpdate": {"partition": "100%"}}})"),
                   Placement(), nodes, pods, kNew, kNow);
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->create, IsEmpty());
}

TEST(AdsScalePlanTest, PreDeleteHookHoldsPods) {
  const AdsSpec spec = Spec(R"({"lifecycle": {"preDelete": {
      "labelsHandler": {"hold": "true"}, "finalizersHandler": ["example.io/hold"]}}})");
  AdsPod labelled = Pod("labelled", "c", kNew);
  labelled.labels["hold"] = "true";
  AdsPod finalized = Pod("finalized", "c", kNew, true, 50);
  finalized.finalizers = {"example.io/hold"};
  AdsPod waiting = Pod("waiting", "c", kNew, true, 40);
  waiting.labels["hold"] = "true";
  waiting.lifecycle_state = "PreparingDelete";
  AdsPod free = Pod("free", "c", kNew, true, 30);
  free.labels["hold"] = "false";
  const std::vector<NodeView> nodes = {Node("c", {}, {{"k", "", "NoExecute"}})};
  absl::StatusOr<ScalePlan> plan =
      PlanScale(spec, Placement(), nodes, {labelled, finalized, waiting, free}, kNew, kNow);
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(Names(plan->deletions.prepare_delete), ElementsAre("labelled", "finalized"));
  EXPECT_THAT(Names(plan->deletions.remove), ElementsAre("free"));
}

TEST(AdsScalePlanTest, SurgeKeepsOneOldAndOneNewPod) {
  const AdsSpec spec =
      Spec(R"({"minReadySeconds": 30, "updateStrategy": {"rollingUpdate": {"maxSurge": 1}}})");
  const std::vector<NodeView> nodes = {Node("a"), Node("b"), Node("c"), Node("d"), Node("e")};
  const std::vector<AdsPod> pods = {
      Pod("a-old", "a", kOld),        Pod("a-new", "a", kNew, true, 60),   // new available
      Pod("b-old", "b", kOld),        Pod("b-new", "b", kNew, true, 10),   // new ready 10s of 30
      Pod("c-old", "c", kOld, false), Pod("c-new", "c", kNew, false),      // old not ready
      Pod("d-old", "d", kOld),        Pod("d-old2", "d", kOld, true, 50),  // extra old pod
  };
  absl::StatusOr<ScalePlan> plan = PlanScale(spec, Placement(), nodes, pods, kNew, kNow);
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->create, ElementsAre("e"));
  EXPECT_THAT(plan->deletions.remove, ElementsAre(PodAction{"a-old", "a", DeleteReason::kUpdate},
                                                  PodAction{"c-old", "c", DeleteReason::kUpdate},
                                                  PodAction{"d-old2", "d", DeleteReason::kExcess}));
  EXPECT_EQ(plan->recheck_after, absl::Seconds(20));
}

// ---- Update -----------------------------------------------------------------------------------

// Nodes n1..n<count>, each with an available pod at `revision`.
std::pair<std::vector<NodeView>, std::vector<AdsPod>> Cluster(int count,
                                                              const std::string& revision) {
  std::vector<NodeView> nodes;
  std::vector<AdsPod> pods;
  for (int i = 1; i <= count; ++i) {
    const std::string n = absl::StrCat("n", i);
    nodes.push_back(Node(n, {{"pool", i % 2 == 0 ? "even" : "odd"}}));
    pods.push_back(Pod("p" + n, n, revision));
  }
  return {nodes, pods};
}

absl::StatusOr<UpdatePlan> Update(const AdsSpec& spec, const std::vector<NodeView>& nodes,
                                  const std::vector<AdsPod>& pods,
                                  const std::map<std::string, Json>& templates = {}) {
  return PlanUpdate(spec, Placement(), nodes, pods, kNew, templates, kNow);
}

TEST(AdsUpdatePlanTest, StandardMaxUnavailable) {
  auto [nodes, pods] = Cluster(4, kOld);
  absl::StatusOr<UpdatePlan> plan = Update(Spec(), nodes, pods);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->scope, ElementsAre("n4", "n3", "n2", "n1"));  // highest name first
  EXPECT_THAT(plan->deletions.remove, ElementsAre(PodAction{"pn4", "n4", DeleteReason::kUpdate}));

  // n4 replaced by a new pod that is not ready yet: the budget of 1 is spent.
  pods[3] = Pod("pn4-new", "n4", kNew, false);
  plan = Update(Spec(), nodes, pods);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->unavailable, 1);
  EXPECT_THAT(plan->deletions.remove, IsEmpty());

  // maxUnavailable 50% of 4 = 2: one more. An old pod that is not available goes at once.
  pods[0] = Pod("pn1", "n1", kOld, false);
  plan = Update(Spec(R"({"updateStrategy": {"rollingUpdate": {"maxUnavailable": "50%"}}})"), nodes,
                pods);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->numbers.max_unavailable, 2);
  EXPECT_THAT(Names(plan->deletions.remove), ElementsAre("pn1", "pn3"));

  // A node with no pod counts unavailable.
  pods.erase(pods.begin() + 1);  // n2's pod
  plan =
      Update(Spec(R"({"updateStrategy": {"rollingUpdate": {"maxUnavailable": 2}}})"), nodes, pods);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->unavailable, 2);
  EXPECT_THAT(Names(plan->deletions.remove), ElementsAre("pn1"));
}

TEST(AdsUpdatePlanTest, PartitionKeepsTheLowestNames) {
  auto [nodes, pods] = Cluster(5, kOld);
  const AdsSpec spec =
      Spec(R"({"updateStrategy": {"rollingUpdate": {"partition": 3, "maxUnavailable": 5}}})");
  absl::StatusOr<UpdatePlan> plan = Update(spec, nodes, pods);
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->scope, ElementsAre("n5", "n4"));
  EXPECT_THAT(Names(plan->deletions.remove), ElementsAre("pn5", "pn4"));
  // Once n5 and n4 run the update revision nothing else is touched.
  pods[4] = Pod("pn5-new", "n5", kNew);
  pods[3] = Pod("pn4-new", "n4", kNew);
  plan = Update(spec, nodes, pods);
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->scope, ElementsAre("n5", "n4"));
  EXPECT_THAT(plan->deletions.remove, IsEmpty());
  // Partition as large as the cluster: nothing.
  plan = Update(Spec(R"({"updateStrategy": {"rollingUpdate": {"partition": 9}}})"), nodes, pods);
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->scope, IsEmpty());
}

TEST(AdsUpdatePlanTest, SelectorUpdatesOnlyMatchingNodes) {
  auto [nodes, pods] = Cluster(5, kOld);
  pods[0] = Pod("pn1-new", "n1", kNew);  // already updated: first in scope, not selected
  const AdsSpec spec = Spec(R"({"updateStrategy": {"rollingUpdate": {
      "selector": {"matchLabels": {"pool": "even"}}, "maxUnavailable": 10}}})");
  absl::StatusOr<UpdatePlan> plan = Update(spec, nodes, pods);
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->scope, ElementsAre("n1", "n4", "n2"));
  EXPECT_THAT(Names(plan->deletions.remove), ElementsAre("pn4", "pn2"));
  // With a partition, the selected nodes come after those already updated.
  const AdsSpec with_partition = Spec(R"({"updateStrategy": {"rollingUpdate": {
      "selector": {"matchLabels": {"pool": "even"}}, "maxUnavailable": 10, "partition": 3}}})");
  plan = Update(with_partition, nodes, pods);
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->scope, ElementsAre("n1", "n4"));
  EXPECT_THAT(Names(plan->deletions.remove), ElementsAre("pn4"));
}

TEST(AdsUpdatePlanTest, PausedOnDeleteAndIneligibleNodes) {
  auto [nodes, pods] = Cluster(3, kOld);
  for (const char* patch : {R"({"updateStrategy": {"rollingUpdate": {"paused": true}}})",
                            R"({"updateStrategy": {"type": "OnDelete"}})"}) {
    absl::StatusOr<UpdatePlan> plan = Update(Spec(patch), nodes, pods);
    ASSERT_TRUE(plan.ok());
    EXPECT_THAT(plan->scope, IsEmpty()) << patch;
    EXPECT_THAT(plan->deletions.remove, IsEmpty()) << patch;
  }
  // A node that may not get a pod (NoSchedule taint) is out of scope and spends no budget.
  nodes[2].taints.push_back({"k", "", "NoSchedule"});
  absl::StatusOr<UpdatePlan> plan = Update(Spec(), nodes, pods);
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->scope, ElementsAre("n2", "n1"));
  EXPECT_THAT(Names(plan->deletions.remove), ElementsAre("pn2"));
}

TEST(AdsUpdatePlanTest, Surge) {
  auto [nodes, pods] = Cluster(4, kOld);
  const AdsSpec spec = Spec(R"({"updateStrategy": {"rollingUpdate": {"maxSurge": 1}}})");
  absl::StatusOr<UpdatePlan> plan = Update(spec, nodes, pods);
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->create, ElementsAre("n4"));  // new pod first
  EXPECT_THAT(plan->deletions.remove, IsEmpty());

  // The new pod on n4 is not available yet: a pending surge; n2's old pod is unavailable, so it
  // gets its new pod at once, beyond maxSurge.
  pods.push_back(Pod("pn4-new", "n4", kNew, false));
  pods[1] = Pod("pn2", "n2", kOld, false);
  plan = Update(spec, nodes, pods);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->surging, 1);
  EXPECT_THAT(plan->create, ElementsAre("n2"));

  // Available now: the old pod goes, and the next node surges.
  pods.back() = Pod("pn4-new", "n4", kNew);
  pods[1] = Pod("pn2", "n2", kOld);
  plan = Update(spec, nodes, pods);
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->deletions.remove, ElementsAre(PodAction{"pn4", "n4", DeleteReason::kUpdate}));
  EXPECT_THAT(plan->create, ElementsAre("n3"));
}

TEST(AdsUpdatePlanTest, InPlaceIfPossible) {
  const Json old_template = Json::parse(R"({"metadata": {"labels": {"app": "agent"}},
      "spec": {"containers": [{"name": "main", "image": "agent:1"}]}})");
  Json image_only = old_template;
  image_only["spec"]["containers"][0]["image"] = "agent:2";
  Json env_change = image_only;
  env_change["spec"]["containers"][0]["env"] = Json::parse(R"([{"name": "A", "value": "1"}])");
  auto [nodes, pods] = Cluster(3, kOld);
  for (AdsPod& p : pods) p.in_place_gate = true;
  pods[1].in_place_gate = false;  // n2: created before InPlaceIfPossible, no gate
  const AdsSpec spec = Spec(R"({"updateStrategy": {"rollingUpdate": {
      "rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": 3}}})");

  absl::StatusOr<UpdatePlan> plan =
      Update(spec, nodes, pods, {{kOld, old_template}, {kNew, image_only}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->in_place.size(), 2u);
  EXPECT_EQ(plan->in_place[0].pod, "pn3");
  EXPECT_EQ(plan->in_place[1].pod, "pn1");
  EXPECT_EQ(plan->in_place[0].update.revision, kNew);
  EXPECT_EQ(plan->in_place[0].update.container_images.at("main"), "agent:2");
  EXPECT_THAT(Names(plan->deletions.remove), ElementsAre("pn2"));

  // Anything but images and metadata changed: every pod is replaced.
  plan = Update(spec, nodes, pods, {{kOld, old_template}, {kNew, env_change}});
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->in_place, IsEmpty());
  EXPECT_THAT(Names(plan->deletions.remove), ElementsAre("pn3", "pn2", "pn1"));

  // The pod's revision is unknown: replaced.
  plan = Update(spec, nodes, pods, {{kNew, image_only}});
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->in_place, IsEmpty());
  EXPECT_EQ(plan->deletions.remove.size(), 3u);

  // burstReplicas caps the in-place updates too.
  const AdsSpec burst1 = Spec(R"({"burstReplicas": 1, "updateStrategy": {"rollingUpdate": {
      "rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": 3}}})");
  plan = Update(burst1, nodes, pods, {{kOld, old_template}, {kNew, image_only}});
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->in_place.size(), 1u);
}

// ---- Status -------------------------------------------------------------------------------------

TEST(AdsStatusTest, Counts) {
  const AdsSpec spec = Spec(R"({"minReadySeconds": 60})");
  std::vector<NodeView> nodes = {Node("a"), Node("b"), Node("c"), Node("d"),
                                 Node("e", {}, {{"k", "", "NoSchedule"}})};
  AdsPod gated = Pod("pc", "c", kNew, true, 500);
  gated.in_place_gate = true;
  gated.in_place_not_ready = true;
  const std::vector<AdsPod> pods = {
      Pod("pa", "a", kNew, true, 500),
      Pod("pa2", "a", kOld, false, 5),  // oldest speaks
      Pod("pb", "b", kOld, true, 30),   // ready, not available
      gated,
      Pod("pe", "e", kOld),  // misscheduled
  };
  const StatusCounts c = CountStatus(spec, Placement(), nodes, pods, kNew, kNow);
  EXPECT_EQ(c, (StatusCounts{.desired_number_scheduled = 4,
                             .current_number_scheduled = 3,
                             .number_misscheduled = 1,
                             .number_ready = 3,
                             .updated_number_scheduled = 2,
                             .number_available = 1,
                             .number_unavailable = 3}));
}

}  // namespace plan_test
}  // namespace kruise::manager::daemonset
