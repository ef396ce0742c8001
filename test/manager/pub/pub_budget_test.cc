#include "manager/pub/pub_budget.h"

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/object.h"

namespace kruise::manager::pub {
namespace {

using kube::Json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;

const absl::Time kNow = absl::FromUnixSeconds(1700000000);

// The 0.10 release blog's PUB: pods app=web, at most 25% unavailable.
Json Valid() {
  return Json::parse(R"({
    "apiVersion": "policy.kruise.io/v1alpha1", "kind": "PodUnavailableBudget",
    "metadata": {"name": "web-pub", "namespace": "default", "generation": 2},
    "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": "25%"}
  })");
}

Json With(const std::string& patch) {
  Json p = Valid();
  p.merge_patch(Json::parse(patch));
  return p;
}

Pub MustParse(const Json& j) {
  auto p = ParsePub(j);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : Pub{};
}

std::string Problems(const Json& j, const Json* old = nullptr) {
  return absl::StrJoin(PubProblems(j, old), "; ");
}

// ---- Validation -----------------------------------------------------------------------------

TEST(PubValidationTest, ValidObjects) {
  for (
      const char* patch : {
          R"({})",
          R"({"spec": {"maxUnavailable": 0}})",
          R"({"spec": {"maxUnavailable": "100%"}})",
          R"({"spec": {"maxUnavailable": null, "minAvailable": 3}})",
          R"({"spec": {"maxUnavailable": null, "minAvailable": "0%"}})",
          R"({"spec": {"selector": null, "targetRef": {"apiVersion": "apps.kruise.io/v1alpha1",
               "kind": "CloneSet", "name": "web"}}})",
          R"({"spec": {"selector": null, "targetRef": {"apiVersion": "v1", "kind": "ReplicationController",
               "name": "rc"}}})",
          R"({"spec": {"selector": {"matchLabels": null, "matchExpressions": [
               {"key": "app", "operator": "In", "values": ["web"]}]}}})",
          R"({"metadata": {"annotations": {"kruise.io/pub-protect-operations": "DELETE,EVICT",
               "pub.kruise.io/protect-total-replicas": "10"}}})",
      }) {
    EXPECT_EQ(Problems(With(patch)), "") << patch;
  }
}

TEST(PubValidationTest, InvalidObjects) {
  struct Case {
    const char* patch;
    const char* problem;
  };
  for (
      const Case& c : std::vector<Case>{
          {R"({"spec": {"selector": null}})", "spec: one of selector and targetRef is required"},
          {R"({"spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}}})",
           "spec: selector and targetRef are mutually exclusive"},
          {R"({"spec": {"selector": {"matchLabels": null}}})",
           "spec.selector: Invalid value: {}: empty selector is not valid"},
          {R"({"spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}})",
           "spec.selector: Invalid value"},
          {R"({"spec": {"selector": null, "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment"}}})",
           "spec.targetRef.name: Required value"},
          {R"({"spec": {"selector": null, "targetRef": {"apiVersion": "a/b/c", "kind": "K", "name": "n"}}})",
           "spec.targetRef.apiVersion: Invalid value: \"a/b/c\""},
          {R"({"spec": {"selector": null, "targetRef": "web"}})",
           "spec.targetRef: must be an object"},
          {R"({"spec": {"maxUnavailable": null}})",
           "spec: one of maxUnavailable and minAvailable is required"},
          {R"({"spec": {"minAvailable": 1}})",
           "spec: maxUnavailable and minAvailable are mutually exclusive"},
          {R"({"spec": {"maxUnavailable": -1}})",
           "spec.maxUnavailable: Invalid value: -1: must be greater than or equal to 0"},
          {R"({"spec": {"maxUnavailable": "120%"}})",
           "spec.maxUnavailable: Invalid value: \"120%\": must not be greater than 100%"},
          {R"({"spec": {"maxUnavailable": "-5%"}})",
           "spec.maxUnavailable: Invalid value: \"-5%\": must be an integer or percentage"},
          {R"({"spec": {"maxUnavailable": "5"}})",
           "spec.maxUnavailable: Invalid value: \"5\": must be an integer or percentage"},
          {R"({"spec": {"maxUnavailable": null, "minAvailable": 1.5}})",
           "spec.minAvailable: Invalid value: 1.5: must be an integer or percentage"},
          {R"({"metadata": {"annotations": {"kruise.io/pub-protect-operations": "DELETE,RESTART"}}})",
           "metadata.annotations[kruise.io/pub-protect-operations]: Unsupported value: "
           "\"RESTART\""},
          {R"({"metadata": {"annotations": {"pub.kruise.io/protect-total-replicas": "ten"}}})",
           "metadata.annotations[pub.kruise.io/protect-total-replicas]: Invalid value: \"ten\""},
          {R"({"spec": "x"})", "spec: must be an object"},
      }) {
    EXPECT_THAT(Problems(With(c.patch)), HasSubstr(c.problem)) << c.patch;
    EXPECT_FALSE(ParsePub(With(c.patch)).ok()) << c.patch;
  }
  EXPECT_THAT(Problems(Json::array()), HasSubstr("must be a JSON object"));
}

TEST(PubValidationTest, SelectorAndTargetRefAreImmutable) {
  const Json old = Valid();
  EXPECT_EQ(Problems(With(R"({"spec": {"maxUnavailable": 1}})"), &old), "");
  EXPECT_THAT(Problems(With(R"({"spec": {"selector": {"matchLabels": {"app": "db"}}}})"), &old),
              HasSubstr("spec.selector: Forbidden: selector cannot be modified"));
  const Json by_ref = With(R"({"spec": {"selector": null, "targetRef": {"apiVersion": "apps/v1",
      "kind": "Deployment", "name": "a"}}})");
  const Json renamed = With(R"({"spec": {"selector": null, "targetRef": {"apiVersion": "apps/v1",
      "kind": "Deployment", "name": "b"}}})");
  EXPECT_THAT(Problems(renamed, &by_ref), HasSubstr("spec.targetRef: Forbidden"));
  EXPECT_THAT(Problems(by_ref, &old), HasSubstr("spec.selector: Forbidden"));
}

TEST(PubValidationTest, ParsesTypedFields) {
  Pub p = MustParse(With(R"({
    "metadata": {"resourceVersion": "7", "annotations": {"kruise.io/pub-protect-operations": "EVICT",
                                                          "pub.kruise.io/protect-total-replicas": "9"}},
    "status": {"observedGeneration": 2, "unavailableAllowed": 1, "currentAvailable": 4,
               "desiredAvailable": 3, "totalReplicas": 4,
               "disruptedPods": {"a": "2023-11-14T22:13:20Z", "b": "garbage"},
               "unavailablePods": {"c": "2023-11-14T22:13:00Z"}}})"));
  EXPECT_EQ(p.namespace_, "default");
  EXPECT_EQ(p.name, "web-pub");
  EXPECT_EQ(p.generation, 2);
  EXPECT_EQ(p.resource_version, "7");
  ASSERT_TRUE(p.selector.has_value());
  EXPECT_TRUE(p.selector->Matches({{"app", "web"}}));
  EXPECT_FALSE(p.target_ref.has_value());
  ASSERT_TRUE(p.max_unavailable.has_value());
  EXPECT_TRUE(p.max_unavailable->percent);
  EXPECT_EQ(p.max_unavailable->value, 25);
  EXPECT_FALSE(p.min_available.has_value());
  EXPECT_EQ(p.protect_operations, std::set<Operation>{Operation::kEvict});
  EXPECT_EQ(p.protect_total_replicas, 9);
  EXPECT_EQ(p.status.unavailable_allowed, 1);
  EXPECT_EQ(p.status.current_available, 4);
  EXPECT_THAT(p.status.disrupted_pods,
              ElementsAre(Pair("a", kNow), Pair("b", absl::InfinitePast())));
  EXPECT_THAT(p.status.unavailable_pods, ElementsAre(Pair("c", kNow - absl::Seconds(20))));

  Pub all = MustParse(Valid());
  EXPECT_EQ(all.protect_operations,
            (std::set<Operation>{Operation::kDelete, Operation::kEvict, Operation::kUpdate}));
  EXPECT_EQ(all.status, PubStatus{});
}

TEST(PubStatusTest, ToJson) {
  PubStatus s{.observed_generation = 3,
              .unavailable_allowed = 1,
              .current_available = 5,
              .desired_available = 4,
              .total_replicas = 5};
  EXPECT_EQ(s.ToJson(), Json::parse(R"({"observedGeneration": 3, "unavailableAllowed": 1,
      "currentAvailable": 5, "desiredAvailable": 4, "totalReplicas": 5})"));
  s.disrupted_pods["a"] = kNow + absl::Milliseconds(900);
  s.unavailable_pods["b"] = kNow;
  const Json j = s.ToJson();
  EXPECT_EQ(j["disruptedPods"], Json::parse(R"({"a": "2023-11-14T22:13:20Z"})"));
  EXPECT_EQ(j["unavailablePods"], Json::parse(R"({"b": "2023-11-14T22:13:20Z"})"));
  // Round trip through the object.
  Json obj = Valid();
  obj["status"] = j;
  EXPECT_EQ(MustParse(obj).status.unavailable_pods, s.unavailable_pods);
}

// ---- Pod facts --------------------------------------------------------------------------------

Json RunningPod(const std::string& name) {
  Json pod = Json::parse(R"({
    "metadata": {"name": "", "labels": {"app": "web"}},
    "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]},
    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
               "containerStatuses": [{"name": "main", "containerID": "containerd://c1",
                                      "imageID": "docker.io/library/nginx@sha256:aaa", "restartCount": 0}]}
  })");
  pod["metadata"]["name"] = name;
  return pod;
}

TEST(PubPodFactsTest, FromPod) {
  PodFacts f = PodFactsOf(RunningPod("p"));
  EXPECT_EQ(f.name, "p");
  EXPECT_TRUE(f.active);
  EXPECT_TRUE(f.ready);
  EXPECT_TRUE(f.consistent);
  EXPECT_FALSE(f.no_protect);

  Json pod = RunningPod("p");
  pod["status"]["conditions"][0]["status"] = "False";
  EXPECT_FALSE(PodFactsOf(pod).ready);
  pod = RunningPod("p");
  pod["status"]["phase"] = "Pending";
  EXPECT_FALSE(PodFactsOf(pod).ready);
  pod = RunningPod("p");
  pod["metadata"]["labels"]["unavailable-pod.kruise.io/drain"] = "true";
  EXPECT_FALSE(PodFactsOf(pod).ready);
  pod = RunningPod("p");
  pod["metadata"]["deletionTimestamp"] = "2023-11-14T22:13:20Z";
  EXPECT_FALSE(PodFactsOf(pod).active);
  pod = RunningPod("p");
  pod["status"]["phase"] = "Succeeded";
  EXPECT_FALSE(PodFactsOf(pod).active);
  pod = RunningPod("p");
  pod["metadata"]["annotations"]["pub.kruise.io/no-protect"] = "true";
  EXPECT_TRUE(PodFactsOf(pod).no_protect);
}

TEST(PubPodFactsTest, ConsistentDigestsAndInPlaceUpdates) {
  Json pod = RunningPod("p");
  pod["spec"]["containers"][0]["image"] = "nginx@sha256:aaa";
  EXPECT_TRUE(PodFactsOf(pod).consistent);
  pod["spec"]["containers"][0]["image"] = "nginx@sha256:bbb";  // patched, not yet restarted
  EXPECT_FALSE(PodFactsOf(pod).consistent);

  // An in-place update recorded before the patch to nginx:1.26: consistent once the kubelet has
  // restarted the container.
  pod = RunningPod("p");
  pod["spec"]["containers"][0]["image"] = "nginx:1.26";
  pod["metadata"]["annotations"]["apps.kruise.io/inplace-update-state"] =
      R"({"revision":"r2","updateTimestamp":"2023-11-14T22:13:20Z","lastContainerStatuses":)"
      R"({"main":{"imageID":"docker.io/library/nginx@sha256:aaa","containerID":"containerd://c1"}}})";
  EXPECT_FALSE(PodFactsOf(pod).consistent);
  pod["status"]["containerStatuses"][0]["containerID"] = "containerd://c2";
  pod["status"]["containerStatuses"][0]["restartCount"] = 1;
  EXPECT_TRUE(PodFactsOf(pod).consistent);
}

TEST(PubPodFactsTest, UpdateMakesUnavailable) {
  const Json old_pod = RunningPod("p");
  Json pod = old_pod;
  pod["metadata"]["labels"]["tier"] = "front";
  pod["metadata"]["annotations"]["note"] = "x";
  EXPECT_FALSE(UpdateMakesUnavailable(old_pod, pod));
  pod["spec"]["containers"][0]["image"] = "nginx:1.26";
  EXPECT_TRUE(UpdateMakesUnavailable(old_pod, pod));
  pod = old_pod;
  pod["metadata"]["labels"]["unavailable-pod.kruise.io/offline"] = "true";
  EXPECT_TRUE(UpdateMakesUnavailable(old_pod, pod));
  EXPECT_FALSE(UpdateMakesUnavailable(pod, pod));  // already there
}

// ---- Budget ---------------------------------------------------------------------------------

std::vector<PodFacts> ReadyPods(int n) {
  std::vector<PodFacts> pods;
  for (int i = 0; i < n; ++i) pods.push_back({.name = "p" + std::to_string(i), .ready = true});
  return pods;
}

TEST(PubBudgetTest, Arithmetic) {
  struct Case {
    const char* spec;  // merged into Valid()'s spec
    int pods;
    std::optional<int32_t> replicas;
    int32_t total, desired, current, allowed;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"maxUnavailable": 2})", 10, std::nullopt, 10, 8, 10, 2},
           {R"({"maxUnavailable": "25%"})", 10, std::nullopt, 10, 7, 10,
            3},  // 2.5 -> 3 unavailable
           {R"({"maxUnavailable": "100%"})", 4, std::nullopt, 4, 0, 4, 4},
           {R"({"maxUnavailable": 0})", 4, std::nullopt, 4, 4, 4, 0},
           {R"({"maxUnavailable": 5})", 3, std::nullopt, 3, 0, 3, 3},  // never below 0
           {R"({"maxUnavailable": null, "minAvailable": 3})", 5, std::nullopt, 5, 3, 5, 2},
           {R"({"maxUnavailable": null, "minAvailable": "50%"})", 5, std::nullopt, 5, 3, 5,
            2},  // 2.5 -> 3
           {R"({"maxUnavailable": null, "minAvailable": 7})", 5, std::nullopt, 5, 7, 5, 0},
           {R"({"maxUnavailable": "25%"})", 0, std::nullopt, 0, 0, 0, 0},  // empty
           {R"({"maxUnavailable": 1})", 3, 5, 5, 4, 3, 0},                 // the workload wants 5
           {R"({"maxUnavailable": "50%"})", 4, 8, 8, 4, 4, 0},
       }) {
    Json obj = Valid();
    obj["spec"].merge_patch(Json::parse(c.spec));
    PubStatus s = ComputeStatus(MustParse(obj), ReadyPods(c.pods), c.replicas, kNow);
    EXPECT_EQ(s.total_replicas, c.total) << c.spec << " pods " << c.pods;
    EXPECT_EQ(s.desired_available, c.desired) << c.spec << " pods " << c.pods;
    EXPECT_EQ(s.current_available, c.current) << c.spec << " pods " << c.pods;
    EXPECT_EQ(s.unavailable_allowed, c.allowed) << c.spec << " pods " << c.pods;
    EXPECT_EQ(s.observed_generation, 2);
  }
}

TEST(PubBudgetTest, CountsOnlyActiveReadyConsistentPods) {
  std::vector<PodFacts> pods = ReadyPods(6);
  pods[0].ready = false;
  pods[1].consistent = false;
  pods[2].active = false;  // being deleted: neither available nor counted in the total
  PubStatus s = ComputeStatus(MustParse(With(R"({"spec": {"maxUnavailable": 1}})")), pods,
                              std::nullopt, kNow);
  EXPECT_EQ(s.total_replicas, 5);
  EXPECT_EQ(s.desired_available, 4);
  EXPECT_EQ(s.current_available, 3);
  EXPECT_EQ(s.unavailable_allowed, 0);
}

TEST(PubBudgetTest, ProtectTotalReplicasAnnotationWins) {
  Pub p = MustParse(
      With(R"({"metadata": {"annotations": {"pub.kruise.io/protect-total-replicas": "20"}},
                             "spec": {"maxUnavailable": "10%"}})"));
  PubStatus s = ComputeStatus(p, ReadyPods(19), 10, kNow);
  EXPECT_EQ(s.total_replicas, 20);
  EXPECT_EQ(s.desired_available, 18);
  EXPECT_EQ(s.unavailable_allowed, 1);
}

TEST(PubBudgetTest, ExpiresRecords) {
  Pub p = MustParse(With(R"({"spec": {"maxUnavailable": 1}})"));
  p.status.disrupted_pods = {{"p0", kNow - absl::Seconds(19)},     // kept until now+1s
                             {"p1", kNow - absl::Seconds(21)},     // still there: not deleted
                             {"p2", kNow - absl::Seconds(20)},     // exactly 20 s: kept
                             {"gone", kNow - absl::Seconds(1)},    // pod no longer listed
                             {"p5", kNow - absl::Seconds(1)}};     // pod being deleted
  p.status.unavailable_pods = {{"p3", kNow - absl::Seconds(9)},    // kept until now+1s
                               {"p4", kNow - absl::Seconds(11)}};  // expired
  std::vector<PodFacts> pods = ReadyPods(6);
  pods[5].active = false;
  std::optional<absl::Time> recheck;
  std::vector<std::string> not_deleted;
  PubStatus s = ComputeStatus(p, pods, std::nullopt, kNow, &recheck, &not_deleted);
  EXPECT_THAT(s.disrupted_pods, ElementsAre(Pair("p0", kNow - absl::Seconds(19)),
                                            Pair("p2", kNow - absl::Seconds(20))));
  EXPECT_THAT(s.unavailable_pods, ElementsAre(Pair("p3", kNow - absl::Seconds(9))));
  EXPECT_THAT(not_deleted, ElementsAre("p1"));
  EXPECT_EQ(recheck, kNow);  // p2's entry expires first
  // p0, p2, p3 recorded; p5 inactive: p1 and p4 count again.
  EXPECT_EQ(s.total_replicas, 5);
  EXPECT_EQ(s.current_available, 2);
  EXPECT_EQ(s.desired_available, 4);
  EXPECT_EQ(s.unavailable_allowed, 0);

  std::optional<absl::Time> none = kNow;
  PubStatus later = ComputeStatus(p, pods, std::nullopt, kNow + absl::Seconds(2), &none);
  EXPECT_THAT(later.disrupted_pods, IsEmpty());
  EXPECT_THAT(later.unavailable_pods, IsEmpty());
  EXPECT_EQ(none, std::nullopt);
  EXPECT_EQ(later.current_available, 5);
}

// ---- Admission --------------------------------------------------------------------------------

// A computed PUB over 4 ready pods, maxUnavailable 1: one disruption allowed.
Pub Budgeted() {
  Pub p = MustParse(With(R"({"spec": {"maxUnavailable": 1}})"));
  p.status = ComputeStatus(p, ReadyPods(4), std::nullopt, kNow);
  EXPECT_EQ(p.status.unavailable_allowed, 1);
  return p;
}

const PodFacts kReady{.name = "p0", .ready = true};

TEST(PubAdmissionTest, SpendsTheBudgetPerOperation) {
  for (Operation op : {Operation::kDelete, Operation::kEvict, Operation::kUpdate}) {
    Decision d = DecideDisruption(Budgeted(), kReady, op, /*dry_run=*/false, kNow);
    EXPECT_TRUE(d.allowed) << OperationName(op);
    ASSERT_TRUE(d.new_status.has_value()) << OperationName(op);
    EXPECT_EQ(d.new_status->unavailable_allowed, 0);
    const auto& recorded =
        op == Operation::kUpdate ? d.new_status->unavailable_pods : d.new_status->disrupted_pods;
    const auto& other =
        op == Operation::kUpdate ? d.new_status->disrupted_pods : d.new_status->unavailable_pods;
    EXPECT_THAT(recorded, ElementsAre(Pair("p0", kNow))) << OperationName(op);
    EXPECT_THAT(other, IsEmpty()) << OperationName(op);
  }
}

TEST(PubAdmissionTest, DeniesWhenSpent) {
  Pub p = Budgeted();
  Decision first = DecideDisruption(p, kReady, Operation::kDelete, false, kNow);
  ASSERT_TRUE(first.new_status.has_value());
  p.status = *first.new_status;
  Decision second =
      DecideDisruption(p, {.name = "p1", .ready = true}, Operation::kEvict, false, kNow);
  EXPECT_FALSE(second.allowed);
  EXPECT_FALSE(second.new_status.has_value());
  EXPECT_THAT(second.message,
              HasSubstr("podunavailablebudget.policy.kruise.io \"web-pub\" is forbidden: pub "
                        "unavailable allowed is negative"));
  EXPECT_THAT(second.message, HasSubstr("EVICT of pod p1"));
  // The pod already recorded costs nothing (a retried delete, a second update).
  Decision again = DecideDisruption(p, kReady, Operation::kUpdate, false, kNow);
  EXPECT_TRUE(again.allowed);
  EXPECT_FALSE(again.new_status.has_value());
}

TEST(PubAdmissionTest, FreeCases) {
  Pub spent = Budgeted();
  spent.status.unavailable_allowed = 0;
  struct Case {
    const char* what;
    PodFacts pod;
    Pub pub;
  };
  Pub no_desired = spent;
  no_desired.status.desired_available = 0;
  Pub evict_only = spent;
  evict_only.protect_operations = {Operation::kEvict};
  for (const Case& c : std::vector<Case>{
           {"not ready", {.name = "p0", .ready = false}, spent},
           {"not consistent", {.name = "p0", .ready = true, .consistent = false}, spent},
           {"no-protect", {.name = "p0", .ready = true, .no_protect = true}, spent},
           {"desiredAvailable 0", kReady, no_desired},
           {"DELETE not protected", kReady, evict_only},
           {"not computed yet", kReady, MustParse(Valid())},
       }) {
    Decision d = DecideDisruption(c.pub, c.pod, Operation::kDelete, false, kNow);
    EXPECT_TRUE(d.allowed) << c.what;
    EXPECT_FALSE(d.new_status.has_value()) << c.what;
  }
  EXPECT_FALSE(DecideDisruption(evict_only, kReady, Operation::kEvict, false, kNow).allowed);
}

TEST(PubAdmissionTest, DryRunSpendsNothing) {
  Decision d = DecideDisruption(Budgeted(), kReady, Operation::kDelete, /*dry_run=*/true, kNow);
  EXPECT_TRUE(d.allowed);
  EXPECT_FALSE(d.new_status.has_value());
  Pub spent = Budgeted();
  spent.status.unavailable_allowed = 0;
  EXPECT_FALSE(DecideDisruption(spent, kReady, Operation::kDelete, true, kNow).allowed);
}

TEST(PubAdmissionTest, TooManyUnconfirmedRecords) {
  Pub p = Budgeted();
  p.status.unavailable_allowed = 5000;
  for (size_t i = 0; i <= kMaxRecordedPods; ++i) {
    p.status.disrupted_pods["x" + std::to_string(i)] = kNow;
  }
  Decision d = DecideDisruption(p, kReady, Operation::kDelete, false, kNow);
  EXPECT_FALSE(d.allowed);
  EXPECT_THAT(d.message, HasSubstr("map too big"));
}

}  // namespace
}  // namespace kruise::manager::pub
