#include "manager/workloadspread/ws_core.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/object.h"

namespace kruise::manager::workloadspread {
namespace {

using kube::Json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

const absl::Time kNow = absl::FromUnixSeconds(1700000000);  // 2023-11-14T22:13:20Z

std::string At(absl::Duration ago) { return kube::FormatRfc3339(kNow - ago); }

// The 0.10 release blog's example, made concrete: a CloneSet, 30% in zone-a, the rest in zone-b.
Json Blog() {
  return Json::parse(R"({
    "apiVersion": "apps.kruise.io/v1alpha1", "kind": "WorkloadSpread",
    "metadata": {"name": "workloadspread-demo", "namespace": "default", "generation": 1},
    "spec": {
      "targetRef": {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "workload-xxx"},
      "subsets": [
        {"name": "subset-a", "maxReplicas": "30%", "requiredNodeSelectorTerm": {"matchExpressions": [
          {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}]}},
        {"name": "subset-b", "requiredNodeSelectorTerm": {"matchExpressions": [
          {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-b"]}]}}
      ]
    }
  })");
}

Json With(const Json& base, const std::string& patch) {
  Json p = base;
  p.merge_patch(Json::parse(patch));
  return p;
}

// Three subsets a (max 2), b (max 2), c (no max) over a Deployment.
Json Abc(const std::string& extra = "{}") {
  return With(Json::parse(R"({
    "metadata": {"name": "ws", "namespace": "default", "generation": 3, "resourceVersion": "10"},
    "spec": {
      "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
      "subsets": [
        {"name": "a", "maxReplicas": 2, "requiredNodeSelectorTerm": {"matchExpressions": [
          {"key": "zone", "operator": "In", "values": ["a"]}]}},
        {"name": "b", "maxReplicas": 2, "requiredNodeSelectorTerm": {"matchExpressions": [
          {"key": "zone", "operator": "In", "values": ["b"]}]}},
        {"name": "c", "tolerations": [{"key": "virtual", "operator": "Exists", "effect": "NoSchedule"}]}
      ]
    }
  })"),
              extra);
}

WorkloadSpread MustParse(const Json& j) {
  auto w = ParseWorkloadSpread(j);
  EXPECT_TRUE(w.ok()) << w.status();
  return w.ok() ? *w : WorkloadSpread{};
}

std::string Problems(const Json& j, const Json* old = nullptr) {
  return absl::StrJoin(WorkloadSpreadProblems(j, old), "; ");
}

// A pod of the workload, in `subset` of WorkloadSpread "ws" when non-empty.
Json Pod(const std::string& name, const std::string& subset = "", const std::string& extra = "{}") {
  Json pod = Json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"namespace": "default", "labels": {"app": "web"},
                 "creationTimestamp": "2023-11-14T22:00:00Z",
                 "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8",
                                      "uid": "rs-uid", "controller": true}]},
    "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}], "nodeName": "n1"},
    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True",
                                                   "lastTransitionTime": "2023-11-14T22:01:00Z"}]}
  })");
  pod["metadata"]["name"] = name;
  if (!subset.empty()) {
    pod["metadata"]["annotations"][kMatchedWorkloadSpreadAnnotation] =
        MatchedAnnotationValue("ws", subset, "");
  }
  pod.merge_patch(Json::parse(extra));
  return pod;
}

// ---- Validation -----------------------------------------------------------------------------

TEST(WorkloadSpreadValidationTest, ValidObjects) {
  EXPECT_EQ(Problems(Blog()), "");
  EXPECT_EQ(Problems(Abc()), "");
  for (
      const char* patch : {
          // The blog's integer form, over a Deployment.
          R"({"spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment"},
               "subsets": [{"name": "subset-a", "maxReplicas": 10}, {"name": "subset-b"}]}})",
          R"({"spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "ReplicaSet"}}})",
          R"({"spec": {"targetRef": {"apiVersion": "batch/v1", "kind": "Job"}}})",
          R"({"spec": {"targetRef": {"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet"},
               "subsets": [{"name": "a", "maxReplicas": 3}, {"name": "b"}]}})",
          R"({"spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet"},
               "subsets": [{"name": "a", "maxReplicas": 3}, {"name": "b"}]}})",
          // One subset (OpenKruise 1.x), percentages adding to 100.
          R"({"spec": {"subsets": [{"name": "only", "patch": {"metadata": {"labels": {"x": "y"}}}}]}})",
          R"({"spec": {"subsets": [{"name": "a", "maxReplicas": "40%"}, {"name": "b", "maxReplicas": "60%"}]}})",
          R"({"spec": {"scheduleStrategy": {"type": "Fixed"}}})",
          R"({"spec": {"scheduleStrategy": {"type": "Adaptive", "adaptive": {"rescheduleCriticalSeconds": 295}}}})",
          R"({"spec": {"scheduleStrategy": {"type": "Adaptive", "adaptive": {"rescheduleCriticalSeconds": 0,
               "disableSimulationSchedule": true}}}})",
      }) {
    EXPECT_EQ(Problems(With(Blog(), patch)), "") << patch;
  }
  // Every kind of term, toleration and patch Kubernetes accepts.
  const Json rich = With(Blog(), R"({"spec": {"subsets": [
    {"name": "a", "maxReplicas": "100%",
     "requiredNodeSelectorTerm": {
       "matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["x"]},
                            {"key": "gpu", "operator": "Exists"},
                            {"key": "cpu", "operator": "Gt", "values": ["8"]}],
       "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]},
     "preferredNodeSelectorTerms": [{"weight": 100, "preference": {"matchExpressions": [
       {"key": "example.com/disk", "operator": "DoesNotExist"}]}}],
     "tolerations": [{"operator": "Exists"},
                     {"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute",
                      "tolerationSeconds": 30},
                     {"key": "k2", "value": "v2", "effect": "PreferNoSchedule"}],
     "patch": {"metadata": {"labels": {"zone": "a"}, "finalizers": ["x/y"]},
               "spec": {"containers": [{"name": "main", "env": [{"name": "ZONE", "value": "a"}],
                                        "resources": {"limits": {"cpu": "2"}}}],
                        "volumes": [{"name": "data", "emptyDir": {}}]}}},
    {"name": "b"}]}})");
  EXPECT_EQ(Problems(rich), "");
}

TEST(WorkloadSpreadValidationTest, InvalidObjects) {
  struct Case {
    const char* patch;
    const char* problem;
  };
  for (
      const Case& c : std::vector<Case>{
          {R"({"spec": {"targetRef": null}})", "spec.targetRef: Required value"},
          {R"({"spec": {"targetRef": {"name": ""}}})",
           "apiVersion, kind and name are all required"},
          {R"({"spec": {"targetRef": {"kind": "DaemonSet"}}})",
           "spec.targetRef.kind: Unsupported value: \"DaemonSet\""},
          {R"({"spec": {"targetRef": {"apiVersion": "apps/v1"}}})",
           "spec.targetRef.apiVersion: Invalid value: \"apps/v1\": a CloneSet is in API group "
           "apps.kruise.io"},
          {R"({"spec": {"targetRef": {"apiVersion": "extensions/v1beta1", "kind": "Deployment"}}})",
           "a Deployment is in API group apps"},
          {R"({"spec": {"targetRef": {"apiVersion": "a/b/c"}}})",
           "spec.targetRef.apiVersion: Invalid value: \"a/b/c\""},
          {R"({"spec": {"subsets": []}})", "spec.subsets: Required value: at least one subset"},
          {R"({"spec": {"subsets": {"name": "a"}}})", "spec.subsets: must be a list"},
          {R"({"spec": {"subsets": [{"name": "a"}, {"name": "a"}]}})",
           "spec.subsets[1].name: Duplicate value: \"a\""},
          {R"({"spec": {"subsets": [{"maxReplicas": 1}, {"name": "b"}]}})",
           "spec.subsets[0].name: Required value"},
          {R"({"spec": {"subsets": [{"name": "a", "requiredNodeSelectorTerm": {"matchExpressions": [
               {"key": "zone", "operator": "In"}]}}]}})",
           "spec.subsets[0].requiredNodeSelectorTerm.matchExpressions[0].values: Required value"},
          {R"({"spec": {"subsets": [{"name": "a", "requiredNodeSelectorTerm": {"matchExpressions": [
               {"key": "zone", "operator": "Exists", "values": ["x"]}]}}]}})",
           "matchExpressions[0].values: Forbidden"},
          {R"({"spec": {"subsets": [{"name": "a", "requiredNodeSelectorTerm": {"matchExpressions": [
               {"key": "zone", "operator": "Gt", "values": ["1", "2"]}]}}]}})",
           "must be specified single value when `operator` is 'Lt' or 'Gt'"},
          {R"({"spec": {"subsets": [{"name": "a", "requiredNodeSelectorTerm": {"matchExpressions": [
               {"key": "zone", "operator": "Near", "values": ["x"]}]}}]}})",
           "matchExpressions[0].operator: Invalid value: \"Near\": not a valid selector operator"},
          {R"({"spec": {"subsets": [{"name": "a", "requiredNodeSelectorTerm": {"matchExpressions": [
               {"key": "bad key!", "operator": "Exists"}]}}]}})",
           "matchExpressions[0].key: Invalid value: \"bad key!\""},
          {R"({"spec": {"subsets": [{"name": "a", "requiredNodeSelectorTerm": {"matchFields": [
               {"key": "metadata.labels", "operator": "In", "values": ["x"]}]}}]}})",
           "matchFields[0].key: Invalid value: \"metadata.labels\": not a valid field selector "
           "key"},
          {R"({"spec": {"subsets": [{"name": "a", "requiredNodeSelectorTerm": {"matchFields": [
               {"key": "metadata.name", "operator": "In", "values": ["x", "y"]}]}}]}})",
           "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"},
          {R"({"spec": {"subsets": [{"name": "a", "preferredNodeSelectorTerms": [
               {"weight": 0, "preference": {}}]}]}})",
           "spec.subsets[0].preferredNodeSelectorTerms[0].weight: Invalid value: 0: must be in "
           "the range 1-100"},
          {R"({"spec": {"subsets": [{"name": "a", "preferredNodeSelectorTerms": [{"weight": 5}]}]}})",
           "preferredNodeSelectorTerms[0].preference: Required value"},
          {R"({"spec": {"subsets": [{"name": "a", "tolerations": [{"operator": "Equal", "value": "v"}]}]}})",
           "tolerations[0].operator: Invalid value: \"Equal\": operator must be Exists when `key` "
           "is "
           "empty"},
          {R"({"spec": {"subsets": [{"name": "a", "tolerations": [{"key": "k", "tolerationSeconds": 5,
               "effect": "NoSchedule"}]}]}})",
           "tolerations[0].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when "
           "`tolerationSeconds` is set"},
          {R"({"spec": {"subsets": [{"name": "a", "tolerations": [{"key": "k", "operator": "Exists",
               "value": "v"}]}]}})",
           "value must be empty when `operator` is 'Exists'"},
          {R"({"spec": {"subsets": [{"name": "a", "tolerations": [{"key": "k", "operator": "Like"}]}]}})",
           "tolerations[0].operator: Unsupported value: \"Like\""},
          {R"({"spec": {"subsets": [{"name": "a", "tolerations": [{"key": "k", "effect": "Evict"}]}]}})",
           "tolerations[0].effect: Unsupported value: \"Evict\""},
          {R"({"spec": {"subsets": [{"name": "a", "patch": "labels"}]}})",
           "spec.subsets[0].patch: Invalid value: must be an object"},
          {R"({"spec": {"subsets": [{"name": "a", "patch": {"spec": {"containers": [{"image": "x"}]}}}]}})",
           "spec.subsets[0].patch: Invalid value: spec.containers: element {\"image\":\"x\"} does "
           "not "
           "contain declared merge key \"name\""},
          {R"({"spec": {"subsets": [{"name": "a", "maxReplicas": -1}, {"name": "b"}]}})",
           "spec.subsets[0].maxReplicas: Invalid value: -1: must be an integer >= 0 or a "
           "percentage"},
          {R"({"spec": {"subsets": [{"name": "a", "maxReplicas": "ten"}, {"name": "b"}]}})",
           "spec.subsets[0].maxReplicas: Invalid value: \"ten\""},
          {R"({"spec": {"subsets": [{"name": "a", "maxReplicas": "30%"}, {"name": "b", "maxReplicas": 3},
               {"name": "c"}]}})",
           "spec.subsets[1].maxReplicas: Invalid value: 3: every subset's maxReplicas must be of "
           "one "
           "type"},
          {R"({"spec": {"subsets": [{"name": "a", "maxReplicas": "70%"}, {"name": "b", "maxReplicas": "40%"},
               {"name": "c"}]}})",
           "spec.subsets[1].maxReplicas: Invalid value: \"40%\": the subsets' maxReplicas add up "
           "to "
           "more than 100%"},
          {R"({"spec": {"subsets": [{"name": "a", "maxReplicas": "30%"}, {"name": "b", "maxReplicas": "30%"}]}})",
           "spec.subsets[0].maxReplicas: Invalid value: the percentages add up to 60%"},
          {R"({"spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet"}}})",
           "spec.subsets[0].maxReplicas: Invalid value: \"30%\": must be an integer for a "
           "StatefulSet"},
          {R"({"spec": {"scheduleStrategy": {"type": "Random"}}})",
           "spec.scheduleStrategy.type: Unsupported value: \"Random\""},
          {R"({"spec": {"scheduleStrategy": {"adaptive": {"rescheduleCriticalSeconds": 30}}}})",
           "spec.scheduleStrategy.type: Invalid value: \"\": must be Adaptive when "
           "scheduleStrategy.adaptive is set"},
          {R"({"spec": {"scheduleStrategy": {"type": "Adaptive", "adaptive": {"rescheduleCriticalSeconds": 296}}}})",
           "spec.scheduleStrategy.adaptive.rescheduleCriticalSeconds: Invalid value: 296: must be "
           "between 0 and 295"},
          {R"({"spec": {"scheduleStrategy": {"type": "Adaptive", "adaptive": {"rescheduleCriticalSeconds": -1}}}})",
           "rescheduleCriticalSeconds: Invalid value: -1"},
          {R"({"spec": {"subsets": [{"name": "a", "maxReplicas": 1}, {"name": "b", "maxReplicas": 1}],
               "scheduleStrategy": {"type": "Adaptive", "adaptive": {}}}})",
           "spec.scheduleStrategy.adaptive: Invalid value: the last subset must have no "
           "maxReplicas"},
          {R"({"metadata": {"name": "Bad_Name"}})", "metadata.name"},
          {R"({"spec": "x"})", "spec: must be an object"},
      }) {
    EXPECT_THAT(Problems(With(Blog(), c.patch)), HasSubstr(c.problem)) << c.patch;
    EXPECT_FALSE(ParseWorkloadSpread(With(Blog(), c.patch)).ok()) << c.patch;
  }
  // Three subsets share 295 s: at most 147 each.
  EXPECT_THAT(Problems(Abc(R"({"spec": {"subsets": [{"name": "a", "maxReplicas": 1}, {"name": "b",
      "maxReplicas": 1}, {"name": "c"}], "scheduleStrategy": {"type": "Adaptive", "adaptive": {
      "rescheduleCriticalSeconds": 148}}}})")),
              HasSubstr("must be between 0 and 147"));
  EXPECT_THAT(Problems(Json::array()), HasSubstr("must be a JSON object"));
  EXPECT_THAT(Problems(Json::parse(R"({"spec": {"subsets": [1, null, "x"]}})")),
              HasSubstr("spec.subsets[0]: must be a subset object"));
}

TEST(WorkloadSpreadValidationTest, TargetRefIsImmutable) {
  const Json old = Blog();
  EXPECT_EQ(Problems(With(Blog(), R"({"spec": {"subsets": [{"name": "x"}]}})"), &old), "");
  // Another version of the same group is the same workload.
  EXPECT_EQ(
      Problems(With(Blog(), R"({"spec": {"targetRef": {"apiVersion": "apps.kruise.io/v1beta1"}}})"),
               &old),
      "");
  EXPECT_THAT(Problems(With(Blog(), R"({"spec": {"targetRef": {"name": "other"}}})"), &old),
              HasSubstr("spec.targetRef: Forbidden: targetRef cannot change"));
}

TEST(WorkloadSpreadValidationTest, OneWorkloadSpreadPerWorkload) {
  const Json mine = Blog();
  const Json same_name = Blog();
  const Json other = With(Blog(), R"({"metadata": {"name": "other"},
      "spec": {"targetRef": {"apiVersion": "apps.kruise.io/v1beta1"}}})");
  const Json unrelated =
      With(Blog(), R"({"metadata": {"name": "x"}, "spec": {"targetRef": {"name": "y"}}})");
  EXPECT_THAT(WorkloadSpreadConflicts(mine, {&same_name, &unrelated}), IsEmpty());
  EXPECT_THAT(
      WorkloadSpreadConflicts(mine, {&unrelated, &other}),
      ElementsAre(HasSubstr("spec.targetRef: Invalid value: {\"apiVersion\":\"apps.kruise.io/"
                            "v1alpha1\",\"kind\":\"CloneSet\",\"name\":\"workload-xxx\"}: the "
                            "workload already has WorkloadSpread other")));
}

TEST(WorkloadSpreadValidationTest, Warnings) {
  EXPECT_THAT(WorkloadSpreadWarnings(Blog()), IsEmpty());
  EXPECT_THAT(WorkloadSpreadWarnings(With(Blog(), R"({"spec": {"subsets": [
      {"name": "a", "requiredNodeSelectorTerm": {"matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["x", "y"]}]}},
      {"name": "b", "requiredNodeSelectorTerm": {"matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["y", "x"]}]}}]}})")),
              ElementsAre(HasSubstr("spec.subsets[0] (a) has no maxReplicas: with the Fixed "
                                    "strategy the subsets after it never get a pod"),
                          "spec.subsets[0] (a) and spec.subsets[1] (b) require the same nodes: "
                          "they are one topology domain"));
  // Adaptive: the later subsets take the pods the first cannot schedule.
  EXPECT_THAT(
      WorkloadSpreadWarnings(With(Blog(), R"({"spec": {"subsets": [{"name": "a"}, {"name": "b"}],
      "scheduleStrategy": {"type": "Adaptive"}}})")),
      IsEmpty());
  EXPECT_THAT(WorkloadSpreadWarnings(Json("x")), IsEmpty());
}

TEST(WorkloadSpreadValidationTest, ParsesTypedFields) {
  WorkloadSpread w = MustParse(With(Abc(), R"({
    "spec": {"scheduleStrategy": {"type": "Adaptive", "adaptive": {"rescheduleCriticalSeconds": 60}}},
    "status": {"observedGeneration": 2, "subsetStatuses": [
      {"name": "a", "replicas": 2, "missingReplicas": 0,
       "creatingPods": {"p1": "2023-11-14T22:13:00Z"}, "deletingPods": {"p2": "garbage"},
       "conditions": [{"type": "Schedulable", "status": "False",
                       "lastTransitionTime": "2023-11-14T22:10:00Z"}]},
      {"name": "c", "replicas": 1, "missingReplicas": -1}]}})"));
  EXPECT_EQ(w.namespace_, "default");
  EXPECT_EQ(w.name, "ws");
  EXPECT_EQ(w.generation, 3);
  EXPECT_EQ(w.resource_version, "10");
  EXPECT_EQ(w.target_ref.Group(), "apps");
  EXPECT_EQ(w.target_ref.kind, "Deployment");
  ASSERT_EQ(w.subsets.size(), 3u);
  EXPECT_EQ(w.subsets[0].max_replicas->value, 2);
  EXPECT_FALSE(w.subsets[2].max_replicas.has_value());
  EXPECT_EQ(w.subsets[2].tolerations.size(), 1u);
  EXPECT_TRUE(w.subsets[2].required_term.is_null());
  EXPECT_TRUE(w.adaptive);
  EXPECT_EQ(w.reschedule_critical_seconds, 60);
  EXPECT_TRUE(w.UsesDeletionCost());
  ASSERT_EQ(w.status.subsets.size(), 2u);
  EXPECT_THAT(w.status.subsets[0].creating_pods, ElementsAre(Pair("p1", kNow - absl::Seconds(20))));
  EXPECT_THAT(w.status.subsets[0].deleting_pods, ElementsAre(Pair("p2", absl::InfinitePast())));
  EXPECT_TRUE(w.status.subsets[0].Unschedulable());
  EXPECT_EQ(w.status.subsets[1].missing_replicas, -1);
  // Round trip through ToJson (the unparsable time is written as the epoch).
  Json obj = Abc();
  obj["status"] = w.status.ToJson();
  EXPECT_EQ(obj["status"]["subsetStatuses"][0]["deletingPods"]["p2"], "1970-01-01T00:00:00Z");
  WorkloadSpread again = MustParse(obj);
  EXPECT_EQ(again.status.subsets[0].conditions, w.status.subsets[0].conditions);
  EXPECT_EQ(again.status.subsets[1], w.status.subsets[1]);
  EXPECT_EQ(WorkloadSpreadStatus{}.ToJson(), Json::parse(R"({"observedGeneration": 0})"));
  // Not Adaptive: no rescheduling, whatever adaptive says... (invalid anyway) and Fixed.
  EXPECT_EQ(MustParse(Blog()).reschedule_critical_seconds, 0);
  EXPECT_FALSE(MustParse(With(Blog(), R"({"spec": {"targetRef": {"apiVersion": "batch/v1",
      "kind": "Job"}}})"))
                   .UsesDeletionCost());
}

// ---- Which pods -------------------------------------------------------------------------------

TEST(WorkloadSpreadTargetTest, PodOwnerChain) {
  const WorkloadSpread deploy = MustParse(Abc());
  const Json pod = Pod("web-5d8-x");
  const Json rs = Json::parse(R"({"apiVersion": "apps/v1", "kind": "ReplicaSet",
      "metadata": {"name": "web-5d8", "uid": "rs-uid", "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d-uid", "controller": true}]}})");
  EXPECT_TRUE(PodCanBeSpread(pod));
  EXPECT_TRUE(NeedsOwnerLookup(deploy.target_ref, *kube::ControllerOf(pod)));
  EXPECT_FALSE(PodMatchesTarget(deploy.target_ref, pod, nullptr));  // not looked up yet
  EXPECT_TRUE(PodMatchesTarget(deploy.target_ref, pod, &rs));
  // A ReplicaSet of that name but another uid (recreated) is not the pod's owner.
  const Json recreated = With(rs, R"({"metadata": {"uid": "new"}})");
  EXPECT_FALSE(PodMatchesTarget(deploy.target_ref, pod, &recreated));
  const Json orphan = With(rs, R"({"metadata": {"ownerReferences": null}})");
  EXPECT_FALSE(PodMatchesTarget(deploy.target_ref, pod, &orphan));
  EXPECT_FALSE(PodMatchesTarget(TargetRef{"apps/v1", "Deployment", "other"}, pod, &rs));

  // The ReplicaSet itself as target: no lookup.
  const TargetRef rs_ref{"apps/v1", "ReplicaSet", "web-5d8"};
  EXPECT_FALSE(NeedsOwnerLookup(rs_ref, *kube::ControllerOf(pod)));
  EXPECT_TRUE(PodMatchesTarget(rs_ref, pod, nullptr));
  EXPECT_TRUE(
      OwnerIsTarget(TargetRef{"apps/v2", "ReplicaSet", "web-5d8"}, *kube::ControllerOf(pod)));

  // CloneSet, Job, StatefulSet (either group) own pods; finished or deleting pods are left alone.
  const Json cs_pod = Pod("cs-x", "", R"({"metadata": {"ownerReferences": [{"apiVersion":
      "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "workload-xxx", "uid": "u", "controller": true}]}})");
  EXPECT_TRUE(PodMatchesTarget(MustParse(Blog()).target_ref, cs_pod, nullptr));
  for (const char* owner : {R"({"apiVersion": "batch/v1", "kind": "Job"})",
                            R"({"apiVersion": "apps/v1", "kind": "StatefulSet"})",
                            R"({"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet"})"}) {
    Json p = cs_pod;
    p["metadata"]["ownerReferences"][0].merge_patch(Json::parse(owner));
    EXPECT_TRUE(PodCanBeSpread(p)) << owner;
  }
  for (const char* bad : {
           R"({"metadata": {"ownerReferences": null}})",
           R"({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
               "name": "d", "uid": "u", "controller": true}]}})",
           R"({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
               "name": "d", "uid": "u"}]}})",
           R"({"status": {"phase": "Succeeded"}})",
           R"({"metadata": {"deletionTimestamp": "2023-11-14T22:00:00Z"}})",
       }) {
    EXPECT_FALSE(PodCanBeSpread(With(pod, bad))) << bad;
  }
  EXPECT_FALSE(PodCanBeSpread(Json("pod")));
}

// ---- Subset choice --------------------------------------------------------------------------

// `ws` with status.subsetStatuses from (name, missingReplicas) pairs.
WorkloadSpread WithMissing(WorkloadSpread ws, std::vector<std::pair<std::string, int>> missing) {
  ws.status.subsets.clear();
  for (const auto& [name, m] : missing) {
    SubsetStatus s;
    s.name = name;
    s.missing_replicas = m;
    ws.status.subsets.push_back(s);
  }
  return ws;
}

TEST(WorkloadSpreadChooseTest, FillsSubsetsInOrder) {
  WorkloadSpread ws = WithMissing(MustParse(Abc()), {{"a", 2}, {"b", 2}, {"c", -1}});
  std::vector<std::string> got;
  // Seven pods created one after another, each choice written before the next (as the webhook's
  // resourceVersion-guarded write makes them).
  for (int i = 0; i < 7; ++i) {
    SubsetChoice c = ChooseSubset(ws, Pod(absl::StrCat("p", i)), "", kNow);
    got.push_back(c.subset);
    if (c.new_status) ws.status = *c.new_status;
  }
  EXPECT_THAT(got, ElementsAre("a", "a", "b", "b", "c", "c", "c"));
  EXPECT_THAT(ws.status.subsets[0].creating_pods,
              UnorderedElementsAre(Pair("p0", kNow), Pair("p1", kNow)));
  EXPECT_EQ(ws.status.subsets[0].missing_replicas, 0);
  EXPECT_THAT(ws.status.subsets[1].creating_pods,
              UnorderedElementsAre(Pair("p2", kNow), Pair("p3", kNow)));
  // No maxReplicas: nothing recorded, nothing to write.
  EXPECT_THAT(ws.status.subsets[2].creating_pods, IsEmpty());
  EXPECT_EQ(ws.status.subsets[2].missing_replicas, -1);
}

TEST(WorkloadSpreadChooseTest, ConcurrentCreationsRetryOnTheWrittenStatus) {
  // Two admissions read the same status (resourceVersion 10) with one place left in "a": both
  // choose "a", the first write wins, the second's resourceVersion test fails and it chooses
  // again on the status the first wrote.
  const WorkloadSpread read = WithMissing(MustParse(Abc()), {{"a", 1}, {"b", 2}, {"c", -1}});
  SubsetChoice first = ChooseSubset(read, Pod("p1"), "", kNow);
  SubsetChoice second = ChooseSubset(read, Pod("p2"), "", kNow);
  EXPECT_EQ(first.subset, "a");
  EXPECT_EQ(second.subset, "a");
  WorkloadSpread fresh = read;
  fresh.status = *first.new_status;
  SubsetChoice retried = ChooseSubset(fresh, Pod("p2"), "", kNow);
  EXPECT_EQ(retried.subset, "b");
  EXPECT_EQ(retried.new_status->subsets[0].missing_replicas, 0);
  EXPECT_EQ(retried.new_status->subsets[1].missing_replicas, 1);
}

TEST(WorkloadSpreadChooseTest, Cases) {
  const WorkloadSpread abc = MustParse(Abc());
  struct Case {
    const char* name;
    WorkloadSpread ws;
    Json pod;
    std::string want;
    bool writes;
  };
  WorkloadSpread unschedulable = WithMissing(abc, {{"a", 2}, {"b", 2}, {"c", -1}});
  unschedulable.status.subsets[0].conditions.push_back({kSubsetSchedulable, "False", kNow, "", ""});
  WorkloadSpread recorded = WithMissing(abc, {{"a", 0}, {"b", 2}, {"c", -1}});
  recorded.status.subsets[0].creating_pods["p"] = kNow - absl::Seconds(1);
  WorkloadSpread deleting = WithMissing(abc, {{"a", 1}, {"b", 2}, {"c", -1}});
  deleting.status.subsets[1].deleting_pods["p"] = kNow - absl::Seconds(1);
  WorkloadSpread stale = WithMissing(abc, {{"gone", 5}, {"b", 2}, {"c", -1}});
  WorkloadSpread bounded = MustParse(With(
      Abc(),
      R"({"spec": {"subsets": [{"name": "a", "maxReplicas": 2}, {"name": "b", "maxReplicas": 2}]}})"));
  WorkloadSpread single = MustParse(With(Abc(), R"({"spec": {"subsets": [{"name": "only"}]}})"));
  for (Case& c : std::vector<Case>{
           {"unschedulable subset skipped", unschedulable, Pod("p"), "b", true},
           {"retried admission keeps its subset", recorded, Pod("p"), "a", false},
           {"a pod being deleted is recorded already", deleting, Pod("p"), "b", false},
           {"status subset no longer in spec skipped", stale, Pod("p"), "b", true},
           {"all full: pod let through unchanged", WithMissing(bounded, {{"a", 0}, {"b", 0}}),
            Pod("p"), "", false},
           {"no status yet (controller not run): nothing", abc, Pod("p"), "", false},
           {"one subset without maxReplicas: no status needed", single, Pod("p"), "only", false},
       }) {
    SubsetChoice got = ChooseSubset(c.ws, c.pod, "gen-uid", kNow);
    EXPECT_EQ(got.subset, c.want) << c.name;
    EXPECT_EQ(got.new_status.has_value(), c.writes) << c.name;
    EXPECT_EQ(got.generated_uid, "") << c.name;
  }
}

TEST(WorkloadSpreadChooseTest, PodWithoutNameIsRecordedUnderGeneratedUid) {
  const WorkloadSpread ws = WithMissing(MustParse(Abc()), {{"a", 2}, {"b", 2}, {"c", -1}});
  Json pod = Pod("");
  pod["metadata"].erase("name");
  pod["metadata"]["generateName"] = "web-5d8-";
  SubsetChoice c = ChooseSubset(ws, pod, "0b5e-uid", kNow);
  EXPECT_EQ(c.subset, "a");
  EXPECT_EQ(c.generated_uid, "0b5e-uid");
  EXPECT_THAT(c.new_status->subsets[0].creating_pods, ElementsAre(Pair("0b5e-uid", kNow)));
  EXPECT_EQ(c.new_status->subsets[0].missing_replicas, 1);
}

TEST(WorkloadSpreadChooseTest, StatefulSetByOrdinal) {
  WorkloadSpread ws =
      MustParse(With(Blog(), R"({"spec": {"targetRef": {"apiVersion": "apps.kruise.io/v1beta1",
      "kind": "StatefulSet", "name": "db"}, "subsets": [{"name": "a", "maxReplicas": 2},
      {"name": "b", "maxReplicas": 1}, {"name": "c"}]}})"));
  std::vector<std::string> got;
  for (const char* name : {"db-0", "db-1", "db-2", "db-3", "db-10", "db", "db-x"}) {
    SubsetChoice c = ChooseSubset(ws, Pod(name), "", kNow);
    EXPECT_FALSE(c.new_status.has_value()) << name;
    got.push_back(c.subset);
  }
  EXPECT_THAT(got, ElementsAre("a", "a", "b", "c", "c", "a", "a"));
  // An unschedulable subset gives its ordinals to the next ones.
  ws.status = WithMissing(ws, {{"a", 0}, {"b", 0}, {"c", -1}}).status;
  ws.status.subsets[0].conditions.push_back({kSubsetSchedulable, "False", kNow, "", ""});
  EXPECT_EQ(ChooseSubset(ws, Pod("db-0"), "", kNow).subset, "b");
  EXPECT_EQ(ChooseSubset(ws, Pod("db-1"), "", kNow).subset, "c");
}

TEST(WorkloadSpreadChooseTest, RecordDeletion) {
  WorkloadSpread ws = WithMissing(MustParse(Abc()), {{"a", 0}, {"b", 1}, {"c", -1}});
  std::optional<WorkloadSpreadStatus> st = RecordDeletion(ws, Pod("p", "a"), kNow);
  ASSERT_TRUE(st.has_value());
  EXPECT_THAT(st->subsets[0].deleting_pods, ElementsAre(Pair("p", kNow)));
  EXPECT_EQ(st->subsets[0].missing_replicas, 1);
  ws.status = *st;
  EXPECT_FALSE(RecordDeletion(ws, Pod("p", "a"), kNow).has_value());  // recorded already
  EXPECT_FALSE(RecordDeletion(ws, Pod("q", "c"), kNow).has_value());  // no maxReplicas
  EXPECT_FALSE(RecordDeletion(ws, Pod("q"), kNow).has_value());       // not spread
  EXPECT_FALSE(RecordDeletion(ws, Pod("q", "gone"), kNow).has_value());
  EXPECT_FALSE(RecordDeletion(ws, Pod("q", "b", R"({"status": {"phase": "Failed"}})"), kNow));
  Json other = Pod("q");
  other["metadata"]["annotations"][kMatchedWorkloadSpreadAnnotation] =
      MatchedAnnotationValue("other-ws", "b", "");
  EXPECT_FALSE(RecordDeletion(ws, other, kNow).has_value());
}

TEST(WorkloadSpreadChooseTest, MatchedAnnotation) {
  EXPECT_EQ(MatchedAnnotationValue("ws", "subset-a", ""), R"({"name":"ws","subset":"subset-a"})");
  EXPECT_EQ(MatchedAnnotationValue("ws", "a<b>&", "u-1"),
            R"({"name":"ws","subset":"a\u003cb\u003e\u0026","uid":"u-1"})");
  Json pod = Pod("p");
  pod["metadata"]["annotations"][kMatchedWorkloadSpreadAnnotation] =
      MatchedAnnotationValue("ws", "a<b>&", "u-1");
  std::optional<MatchedWorkloadSpread> m = MatchedOf(pod);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->name, "ws");
  EXPECT_EQ(m->subset, "a<b>&");
  EXPECT_EQ(m->uid, "u-1");
  for (const char* bad : {"", "{", "[]", R"({"subset": "a"})", R"({"name": 1})"}) {
    pod["metadata"]["annotations"][kMatchedWorkloadSpreadAnnotation] = bad;
    EXPECT_FALSE(MatchedOf(pod).has_value()) << bad;
  }
}

// ---- Injection ------------------------------------------------------------------------------

Json Apply(const Json& pod, const Json& ops) {
  try {
    return pod.patch(ops);
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what() << " applying " << ops.dump();
    return Json();
  }
}

TEST(WorkloadSpreadInjectionTest, OpsAppliedGiveTheInjectedPod) {
  const WorkloadSpread ws = MustParse(With(Abc(), R"({"spec": {"subsets": [
    {"name": "a", "maxReplicas": 2,
     "requiredNodeSelectorTerm": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
     "preferredNodeSelectorTerms": [{"weight": 10, "preference": {"matchExpressions": [
       {"key": "disk", "operator": "In", "values": ["ssd"]}]}}],
     "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}],
     "patch": {"metadata": {"labels": {"deploy/zone": "a"}},
               "spec": {"containers": [{"name": "main", "env": [{"name": "ZONE", "value": "a"}],
                                        "resources": {"limits": {"cpu": "2"}}}]}}},
    {"name": "c"}]}})"));
  const Json pod = Pod("p", "", R"({"metadata": {"annotations": {"keep": "me"}},
      "spec": {"tolerations": [{"key": "t", "operator": "Exists"}],
               "containers": [{"name": "main", "image": "nginx:1.25",
                               "env": [{"name": "A", "value": "1"}]},
                              {"name": "side", "image": "busybox"}]}})");
  absl::StatusOr<Json> ops = PlanSubsetInjection(pod, ws, "a", "");
  ASSERT_TRUE(ops.ok()) << ops.status();
  const Json want = With(pod, R"({
    "metadata": {"labels": {"deploy/zone": "a"},
                 "annotations": {"apps.kruise.io/matched-workloadspread": "{\"name\":\"ws\",\"subset\":\"a\"}"}},
    "spec": {
      "tolerations": [{"key": "t", "operator": "Exists"},
                      {"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}],
      "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
          {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "preference": {
          "matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}},
      "containers": [{"name": "main", "image": "nginx:1.25",
                      "env": [{"name": "A", "value": "1"}, {"name": "ZONE", "value": "a"}],
                      "resources": {"limits": {"cpu": "2"}}},
                     {"name": "side", "image": "busybox"}]}})");
  EXPECT_EQ(Apply(pod, *ops), want) << ops->dump(1);
  // Small operations: nothing outside what the subset touches, no list replaced whole.
  std::vector<std::string> paths;
  for (const Json& op : *ops)
    paths.push_back(absl::StrCat(op["op"].get<std::string>(), " ", op["path"].get<std::string>()));
  for (const std::string& p : paths) {
    EXPECT_THAT(p,
                ::testing::AnyOf(HasSubstr("/spec/tolerations/"), HasSubstr("/spec/affinity"),
                                 HasSubstr("/spec/containers/0/"), HasSubstr("/metadata/labels/"),
                                 HasSubstr("/metadata/annotations/")))
        << p;
  }
}

TEST(WorkloadSpreadInjectionTest, RequiredTermIsAndedIntoEveryExistingTerm) {
  const WorkloadSpread ws = MustParse(With(Abc(), R"({"spec": {"subsets": [
    {"name": "a", "requiredNodeSelectorTerm": {
       "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}],
       "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["bad-node"]}]}}]}})"));
  const Json pod = Pod("p", "", R"({"spec": {"affinity": {"nodeAffinity": {
      "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "arch", "operator": "In", "values": ["amd64"]}]},
        {"matchExpressions": [{"key": "arch", "operator": "In", "values": ["arm64"]}]}]}},
      "podAntiAffinity": {"x": 1}}}})");
  absl::StatusOr<Json> ops = PlanSubsetInjection(pod, ws, "a", "uid-1");
  ASSERT_TRUE(ops.ok()) << ops.status();
  const Json got = Apply(pod, *ops);
  EXPECT_EQ(got["spec"]["affinity"], Json::parse(R"({"nodeAffinity": {
      "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "arch", "operator": "In", "values": ["amd64"]},
                              {"key": "zone", "operator": "In", "values": ["a"]}],
         "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["bad-node"]}]},
        {"matchExpressions": [{"key": "arch", "operator": "In", "values": ["arm64"]},
                              {"key": "zone", "operator": "In", "values": ["a"]}],
         "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["bad-node"]}]}]}},
      "podAntiAffinity": {"x": 1}})"));
  EXPECT_EQ(got["metadata"]["annotations"][kMatchedWorkloadSpreadAnnotation],
            R"({"name":"ws","subset":"a","uid":"uid-1"})");
}

TEST(WorkloadSpreadInjectionTest, BarePodsAndSubsetsWithoutTerms) {
  const WorkloadSpread ws = MustParse(Abc());
  // No metadata, no affinity, no tolerations: whole objects are added.
  const Json bare = Json::parse(R"({"spec": {"containers": [{"name": "main", "image": "x"}]}})");
  absl::StatusOr<Json> ops = PlanSubsetInjection(bare, ws, "c", "");
  ASSERT_TRUE(ops.ok()) << ops.status();
  EXPECT_EQ(Apply(bare, *ops), Json::parse(R"({
      "metadata": {"annotations": {"apps.kruise.io/matched-workloadspread": "{\"name\":\"ws\",\"subset\":\"c\"}"}},
      "spec": {"containers": [{"name": "main", "image": "x"}],
               "tolerations": [{"key": "virtual", "operator": "Exists", "effect": "NoSchedule"}]}})"));
  // A subset with nothing but its name only records the annotation (no empty affinity).
  const WorkloadSpread plain = MustParse(With(Abc(), R"({"spec": {"subsets": [{"name": "x"}]}})"));
  ops = PlanSubsetInjection(Pod("p"), plain, "x", "");
  ASSERT_TRUE(ops.ok());
  ASSERT_EQ(ops->size(), 1u);
  EXPECT_EQ((*ops)[0]["path"], "/metadata/annotations");
}

// Found by test/fuzz/ws_strategic_merge.cc: the operations were planned against the members the
// patch names, so a "$patch": "replace" of spec (or metadata, or the pod) left the members it
// drops in place, unlike the strategic merge of the whole pod.
TEST(WorkloadSpreadInjectionTest, ReplaceDirectiveDropsWhatThePatchDoesNotName) {
  const Json pod = Pod("p", "", R"({"metadata": {"labels": {"app": "web"}},
      "spec": {"containers": [{"name": "main", "image": "x"}], "nodeName": "n1"},
      "status": {"phase": "Pending"}})");
  for (const char* patch : {R"({"spec": {"$patch": "replace", "nodeSelector": {"zone": "a"}}})",
                            R"({"metadata": {"$patch": "replace", "labels": {"only": "this"}}})",
                            R"({"$patch": "replace", "spec": {"nodeSelector": {"zone": "a"}}})"}) {
    WorkloadSpread ws;
    ws.name = "ws";
    Subset subset;
    subset.name = "a";
    subset.patch = Json::parse(patch);
    ws.subsets.push_back(subset);
    absl::StatusOr<Json> ops = PlanSubsetInjection(pod, ws, "a", "");
    ASSERT_TRUE(ops.ok()) << ops.status();
    Json want = pod;
    ASSERT_TRUE(StrategicMergePod(&want, subset.patch).ok()) << patch;
    want["metadata"]["annotations"][kMatchedWorkloadSpreadAnnotation] =
        R"({"name":"ws","subset":"a"})";
    EXPECT_EQ(Apply(pod, *ops), want) << patch << "\n" << ops->dump(1);
  }
}

TEST(WorkloadSpreadInjectionTest, Errors) {
  const WorkloadSpread ws = MustParse(Abc());
  EXPECT_EQ(PlanSubsetInjection(Pod("p"), ws, "nope", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(PlanSubsetInjection(Json("pod"), ws, "a", "").ok());
  EXPECT_THAT(std::string(PlanSubsetInjection(With(Pod("p"), R"({"spec": {"tolerations": "all"}})"),
                                              ws, "c", "")
                              .status()
                              .message()),
              HasSubstr("spec.tolerations has the wrong type"));
  EXPECT_FALSE(PlanSubsetInjection(With(Pod("p"), R"({"spec": {"affinity": {"nodeAffinity": 3}}})"),
                                   ws, "a", "")
                   .ok());
  EXPECT_FALSE(
      PlanSubsetInjection(With(Pod("p"), R"({"metadata": {"annotations": "x"}})"), ws, "a", "")
          .ok());
}

TEST(WorkloadSpreadInjectionTest, StrategicMergePod) {
  Json pod = Pod("p", "", R"({"metadata": {"finalizers": ["a"], "labels": {"drop": "me"}},
      "spec": {"volumes": [{"name": "v1", "emptyDir": {}}, {"name": "v2", "emptyDir": {}}],
               "containers": [{"name": "main", "image": "nginx", "ports": [{"containerPort": 80}],
                               "volumeMounts": [{"name": "v1", "mountPath": "/a"}]}],
               "tolerations": [{"key": "old", "operator": "Exists"}],
               "securityContext": {"runAsUser": 1}}})");
  ASSERT_TRUE(StrategicMergePod(&pod, Json::parse(R"({
      "metadata": {"finalizers": ["b", "a"], "labels": {"drop": null, "new": "1"}},
      "spec": {"volumes": [{"name": "v2", "$patch": "delete"}, {"name": "v3", "emptyDir": {}}],
               "containers": [{"name": "main", "ports": [{"containerPort": 80, "name": "http"},
                                                         {"containerPort": 443}],
                               "volumeMounts": [{"mountPath": "/a", "readOnly": true}]},
                              {"name": "extra", "image": "busybox"}],
               "tolerations": [{"key": "new", "operator": "Exists"}],
               "securityContext": {"$patch": "replace", "runAsGroup": 2},
               "$setElementOrder/containers": [{"name": "main"}]}})"))
                  .ok());
  EXPECT_EQ(pod["metadata"]["finalizers"], Json::parse(R"(["a", "b"])"));
  EXPECT_EQ(pod["metadata"]["labels"], Json::parse(R"({"app": "web", "new": "1"})"));
  EXPECT_EQ(pod["spec"]["volumes"], Json::parse(R"([{"name": "v1", "emptyDir": {}},
                                                    {"name": "v3", "emptyDir": {}}])"));
  EXPECT_EQ(pod["spec"]["containers"], Json::parse(R"([
      {"name": "main", "image": "nginx", "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 443}],
       "volumeMounts": [{"name": "v1", "mountPath": "/a", "readOnly": true}]},
      {"name": "extra", "image": "busybox"}])"));
  // No merge key: replaced.
  EXPECT_EQ(pod["spec"]["tolerations"], Json::parse(R"([{"key": "new", "operator": "Exists"}])"));
  EXPECT_EQ(pod["spec"]["securityContext"], Json::parse(R"({"runAsGroup": 2})"));
  EXPECT_FALSE(pod["spec"].contains("$setElementOrder/containers"));
  // Errors leave the pod as it was.
  const Json before = pod;
  EXPECT_FALSE(
      StrategicMergePod(&pod, Json::parse(R"({"spec": {"containers": [{"image": "x"}]}})")).ok());
  EXPECT_FALSE(StrategicMergePod(&pod, Json::parse(R"([1])")).ok());
  EXPECT_EQ(pod, before);
  EXPECT_FALSE(StrategicMergePod(nullptr, Json::object()).ok());
}

// ---- Controller: status ---------------------------------------------------------------------

TEST(WorkloadSpreadStatusTest, PercentMaxReplicasRoundsUp) {
  const WorkloadSpread ws = MustParse(Blog());
  for (const auto& [replicas, want] :
       std::vector<std::pair<int, int>>{{10, 3}, {11, 4}, {1, 1}, {0, 0}, {100, 30}}) {
    StatusPlan plan = ComputeStatus(ws, {}, replicas, kNow);
    ASSERT_EQ(plan.status.subsets.size(), 2u);
    EXPECT_EQ(plan.status.subsets[0].missing_replicas, want) << replicas;
    EXPECT_EQ(plan.status.subsets[1].missing_replicas, -1) << replicas;
  }
}

TEST(WorkloadSpreadStatusTest, CountsPodsAndExpiresRecords) {
  WorkloadSpread ws = WithMissing(MustParse(Abc()), {{"a", 0}, {"b", 0}, {"c", -1}});
  SubsetStatus& a = ws.status.subsets[0];
  a.creating_pods = {{"seen", kNow - absl::Seconds(5)},      // its pod exists now
                     {"uid-7", kNow - absl::Seconds(5)},     // a generateName pod, seen
                     {"pending", kNow - absl::Seconds(10)},  // not seen yet: kept
                     {"lost", kNow - absl::Seconds(31)}};    // never created
  a.deleting_pods = {{"going", kNow - absl::Seconds(10)},    // still there: kept
                     {"stuck", kNow - absl::Seconds(16)},    // still there after 15 s
                     {"gone", kNow - absl::Seconds(1)}};     // no pod: dropped
  Json uid_pod = Pod("web-abc", "");
  uid_pod["metadata"]["annotations"][kMatchedWorkloadSpreadAnnotation] =
      MatchedAnnotationValue("ws", "a", "uid-7");
  const std::vector<Json> pods = {
      Pod("seen", "a"),
      uid_pod,
      Pod("going", "a"),
      Pod("stuck", "a"),
      Pod("done", "a", R"({"status": {"phase": "Succeeded"}})"),
      Pod("b1", "b"),
      Pod("c1", "c"),
      Pod("c2", "c"),
      Pod("stranger"),               // no annotation: not counted
      Pod("old-subset", "removed"),  // subset no longer in spec
  };
  StatusPlan plan = ComputeStatus(ws, pods, 6, kNow);
  EXPECT_EQ(plan.status.observed_generation, 3);
  ASSERT_EQ(plan.status.subsets.size(), 3u);
  const SubsetStatus& sa = plan.status.subsets[0];
  EXPECT_EQ(sa.name, "a");
  EXPECT_EQ(sa.replicas, 4);  // seen, web-abc, going, stuck
  // max 2, 4 active pods -> 0; "going" counts as gone -> 1; "pending" as created -> 0.
  EXPECT_EQ(sa.missing_replicas, 0);
  EXPECT_THAT(sa.creating_pods, ElementsAre(Pair("pending", kNow - absl::Seconds(10))));
  EXPECT_THAT(sa.deleting_pods, ElementsAre(Pair("going", kNow - absl::Seconds(10))));
  EXPECT_THAT(plan.not_created, ElementsAre("lost"));
  EXPECT_THAT(plan.not_deleted, ElementsAre("stuck"));
  EXPECT_EQ(plan.recheck, kNow + absl::Seconds(5));  // "going" expires first (15 - 10)
  EXPECT_EQ(plan.status.subsets[1].replicas, 1);
  EXPECT_EQ(plan.status.subsets[1].missing_replicas, 1);
  EXPECT_EQ(plan.status.subsets[2].replicas, 2);
  EXPECT_EQ(plan.status.subsets[2].missing_replicas, -1);
  EXPECT_THAT(plan.pods_to_delete, IsEmpty());
  EXPECT_TRUE(plan.status.subsets[0].conditions.empty());  // Fixed: no condition

  // A subset below its limit: a deleting pod gives its place back, a creating one takes one.
  ws.status.subsets[1].deleting_pods = {{"b1", kNow}};
  ws.status.subsets[1].creating_pods = {{"b2", kNow}, {"b3", kNow}};
  plan = ComputeStatus(ws, pods, 6, kNow);
  EXPECT_EQ(plan.status.subsets[1].missing_replicas, 0);  // 2 - 1 + 1 - 2
}

// ---- Controller: Adaptive -------------------------------------------------------------------

Json Unschedulable(const std::string& name, const std::string& subset, absl::Duration age) {
  Json pod = Pod(name, subset);
  pod["metadata"]["creationTimestamp"] = At(age);
  pod["spec"].erase("nodeName");
  pod["status"] = Json::parse(R"({"phase": "Pending", "conditions": [
      {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]})");
  return pod;
}

TEST(WorkloadSpreadAdaptiveTest, ReschedulesPodsStuckInASubset) {
  WorkloadSpread ws = MustParse(Abc(R"({"spec": {"scheduleStrategy": {"type": "Adaptive",
      "adaptive": {"rescheduleCriticalSeconds": 30}}}})"));
  const std::vector<Json> pods = {
      Pod("a1", "a"),
      Unschedulable("a2", "a", absl::Seconds(31)),  // critical: deleted
      Unschedulable("b1", "b", absl::Seconds(20)),  // not yet: recheck in 10 s
      Unschedulable("c1", "c", absl::Minutes(5)),   // last subset: never rescheduled
      With(Unschedulable("a3", "a", absl::Minutes(1)), R"({"metadata": {"deletionTimestamp":
          "2023-11-14T22:13:00Z"}})"),
  };
  StatusPlan plan = ComputeStatus(ws, pods, 6, kNow);
  EXPECT_THAT(plan.pods_to_delete, ElementsAre("a2"));
  EXPECT_EQ(plan.recheck, kNow + absl::Seconds(10));
  ASSERT_EQ(plan.status.subsets.size(), 3u);
  EXPECT_EQ(plan.status.subsets[0].conditions,
            std::vector<SubsetCondition>({{kSubsetSchedulable, "False", kNow, "", ""}}));
  EXPECT_EQ(plan.status.subsets[1].conditions,
            std::vector<SubsetCondition>({{kSubsetSchedulable, "True", kNow, "", ""}}));
  EXPECT_EQ(plan.status.subsets[2].conditions,
            std::vector<SubsetCondition>({{kSubsetSchedulable, "True", kNow, "", ""}}));

  // The webhook now skips "a": the recreated pod lands in "b".
  WorkloadSpread next = ws;
  next.status = plan.status;
  next.status.subsets[0].missing_replicas = 1;
  EXPECT_EQ(ChooseSubset(next, Pod("a2-again"), "", kNow).subset, "b");

  // Still unschedulable pods later: False keeps its time. Then 5 minutes after it became False,
  // with no stuck pod left, "a" is schedulable again.
  const absl::Time later = kNow + absl::Seconds(100);
  plan = ComputeStatus(next, pods, 6, later);
  EXPECT_EQ(plan.status.subsets[0].conditions[0].last_transition_time, kNow);
  next.status = plan.status;
  const std::vector<Json> healthy = {Pod("a1", "a")};
  plan = ComputeStatus(next, healthy, 6, kNow + absl::Seconds(200));
  EXPECT_EQ(plan.status.subsets[0].conditions[0].status, "False");
  EXPECT_EQ(plan.recheck, kNow + kMaxScheduledFailedDuration);
  plan = ComputeStatus(next, healthy, 6, kNow + absl::Seconds(301));
  EXPECT_EQ(plan.status.subsets[0].conditions,
            std::vector<SubsetCondition>(
                {{kSubsetSchedulable, "True", kNow + absl::Seconds(301), "", ""}}));
  EXPECT_THAT(plan.pods_to_delete, IsEmpty());

  // Back to Fixed (or rescheduleCriticalSeconds 0): the condition goes.
  WorkloadSpread fixed = MustParse(Abc());
  fixed.status = next.status;
  plan = ComputeStatus(fixed, pods, 6, kNow);
  for (const SubsetStatus& s : plan.status.subsets) EXPECT_TRUE(s.conditions.empty());
  EXPECT_THAT(plan.pods_to_delete, IsEmpty());
}

// ---- Controller: deletion cost --------------------------------------------------------------

std::vector<Json> PodsIn(const std::string& subset, int n) {
  std::vector<Json> out;
  for (int i = 0; i < n; ++i) out.push_back(Pod(absl::StrCat(subset, i), subset));
  return out;
}

std::map<std::string, int> CostsBySubset(const std::map<std::string, int>& costs) {
  // "<subset>:<cost>" -> how many pods.
  std::map<std::string, int> out;
  for (const auto& [pod, cost] : costs) ++out[absl::StrCat(pod.substr(0, 1), ":", cost)];
  return out;
}

TEST(WorkloadSpreadDeletionCostTest, UserManualExamples) {
  const WorkloadSpread ws = MustParse(Abc(R"({"spec": {"subsets": [{"name": "a", "maxReplicas": 10},
      {"name": "b", "maxReplicas": 10}, {"name": "c"}]}})"));
  std::vector<Json> pods;
  for (const char* s : {"a", "b", "c"}) {
    for (Json& p : PodsIn(s, 10)) pods.push_back(std::move(p));
  }
  // Within their limits: the last subset goes first (c -> b -> a).
  EXPECT_THAT(CostsBySubset(DeletionCosts(ws, pods, 30)),
              ElementsAre(Pair("a:300", 10), Pair("b:200", 10), Pair("c:100", 10)));
  pods.clear();
  for (const char* s : {"a", "b", "c"}) {
    for (Json& p : PodsIn(s, 20)) pods.push_back(std::move(p));
  }
  // Beyond them: the extra pods of a and b first, then c, b, a.
  EXPECT_THAT(CostsBySubset(DeletionCosts(ws, pods, 60)),
              ElementsAre(Pair("a:-100", 10), Pair("a:300", 10), Pair("b:-200", 10),
                          Pair("b:200", 10), Pair("c:100", 20)));
}

TEST(WorkloadSpreadDeletionCostTest, ExtraPodsChosenInActivePodsOrder) {
  const WorkloadSpread ws = MustParse(Abc());  // a and b: max 2
  const std::vector<Json> pods = {
      Pod("old-ready", "a"),
      Pod("unassigned", "a", R"({"spec": {"nodeName": null}, "status": {"phase": "Pending",
          "conditions": null}})"),
      Pod("not-ready", "a",
          R"({"status": {"conditions": [{"type": "Ready", "status": "False"}]}})"),
      Pod("newer-ready", "a", R"({"status": {"conditions": [{"type": "Ready", "status": "True",
          "lastTransitionTime": "2023-11-14T22:10:00Z"}]}})"),
      Pod("restarts", "a",
          R"({"status": {"containerStatuses": [{"name": "main", "restartCount": 4}]}})"),
      Pod("finished", "a", R"({"status": {"phase": "Failed"}})"),
      Pod("b-only", "b"),
  };
  EXPECT_THAT(DeletionCosts(ws, pods, 5),
              ElementsAre(Pair("b-only", 200), Pair("newer-ready", -100), Pair("not-ready", -100),
                          Pair("old-ready", 300), Pair("restarts", 300), Pair("unassigned", -100)));
  // Of two equally ready pods, the one with more restarts goes first.
  EXPECT_THAT(DeletionCosts(ws, {Pod("x", "a"), Pod("y", "a"), Pod("restarts", "a", R"({"status":
      {"containerStatuses": [{"name": "main", "restartCount": 1}]}})")},
                            5),
              ElementsAre(Pair("restarts", -100), Pair("x", 300), Pair("y", 300)));
  // Percentages scale with the replicas, rounded up.
  const WorkloadSpread blog = MustParse(Blog());
  std::vector<Json> cs_pods;
  for (int i = 0; i < 5; ++i) {
    Json p = Pod(absl::StrCat("p", i));
    p["metadata"]["annotations"][kMatchedWorkloadSpreadAnnotation] =
        MatchedAnnotationValue("workloadspread-demo", "subset-a", "");
    cs_pods.push_back(p);
  }
  int negative = 0;
  for (const auto& [pod, cost] : DeletionCosts(blog, cs_pods, 10)) negative += cost < 0;
  EXPECT_EQ(negative, 2);  // 30% of 10 = 3 kept
  // Jobs and StatefulSets get no deletion cost.
  EXPECT_THAT(
      DeletionCosts(MustParse(With(Blog(), R"({"spec": {"targetRef": {"apiVersion": "batch/v1",
      "kind": "Job"}}})")),
                    cs_pods, 10),
      IsEmpty());
}

// ---- Any JSON ---------------------------------------------------------------------------------

TEST(WorkloadSpreadRobustnessTest, NeverThrowsWhateverTheJson) {
  const std::vector<Json> odd = {
      Json(),
      Json(1),
      Json("x"),
      Json::array(),
      Json::object(),
      Json::parse(R"({"metadata": 1, "spec": {"targetRef": [], "subsets": [{"name": 1,
          "requiredNodeSelectorTerm": {"matchExpressions": "x", "matchFields": [1, {"values": 3}]},
          "preferredNodeSelectorTerms": [1, {"weight": "x", "preference": []}],
          "tolerations": [1, {"key": 2, "tolerationSeconds": "x"}], "patch": {"spec": {"containers": 1}},
          "maxReplicas": {"a": 1}}], "scheduleStrategy": {"type": 1, "adaptive": {"rescheduleCriticalSeconds": 1e40}}},
          "status": {"subsetStatuses": [1, {"name": 2, "creatingPods": [], "conditions": [1, {"type": 3}]}]}})"),
      Json::parse(R"({"status": {"phase": 1, "conditions": {"a": 1}, "containerStatuses": [1]},
          "metadata": {"annotations": {"apps.kruise.io/matched-workloadspread": "{\"name\":\"ws\",\"subset\":\"a\"}"},
                       "ownerReferences": 5, "creationTimestamp": 7}, "spec": []})"),
  };
  WorkloadSpread ws =
      WithMissing(MustParse(Abc(R"({"spec": {"scheduleStrategy": {"type": "Adaptive",
      "adaptive": {"rescheduleCriticalSeconds": 30}}}})")),
                  {{"a", 1}, {"b", 1}, {"c", -1}});
  for (const Json& j : odd) {
    EXPECT_NO_THROW({
      (void)WorkloadSpreadProblems(j, &j);
      (void)WorkloadSpreadWarnings(j);
      (void)WorkloadSpreadConflicts(j, {&j, nullptr});
      (void)ParseWorkloadSpread(j);
      (void)PodCanBeSpread(j);
      (void)PodMatchesTarget(ws.target_ref, j, &j);
      (void)ChooseSubset(ws, j, "u", kNow);
      (void)RecordDeletion(ws, j, kNow);
      (void)MatchedOf(j);
      for (const char* subset : {"a", "c"}) (void)PlanSubsetInjection(j, ws, subset, "");
      Json target = j;
      (void)StrategicMergePod(&target, j);
      (void)ComputeStatus(ws, odd, 3, kNow);
      (void)DeletionCosts(ws, odd, 3);
    }) << j.dump();
  }
  EXPECT_EQ(MatchedAnnotationValue("w\xff", "s", ""),
            "{\"name\":\"w\xef\xbf\xbd\",\"subset\":\"s\"}");
}

}  // namespace
}  // namespace kruise::manager::workloadspread
