#include "manager/statefulset/asts_plan.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kruise::manager::statefulset {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const absl::Time kNow = absl::FromUnixSeconds(10000);
constexpr char kNew[] = "web-new";
constexpr char kOld[] = "web-old";

// A Running, Ready pod of set "web" at `revision`, ready for a long time.
AstsPod Pod(int ordinal, const std::string& revision = kNew) {
  AstsPod p;
  p.name = "web-" + std::to_string(ordinal);
  p.ordinal = ordinal;
  p.revision = revision;
  p.scheduled = true;
  p.phase = "Running";
  p.ready = true;
  p.ready_since = kNow - absl::Hours(1);
  p.created = kNow - absl::Hours(2);
  return p;
}
AstsPod Unready(AstsPod p) {
  p.ready = false;
  p.ready_since = absl::InfinitePast();
  return p;
}
AstsPod Terminating(AstsPod p) {
  p.terminating = true;
  return p;
}
std::vector<AstsPod> Pods(int from, int to, const std::string& revision = kNew) {
  std::vector<AstsPod> out;
  for (int i = from; i < to; ++i) out.push_back(Pod(i, revision));
  return out;
}

AstsSpec Spec(int replicas, bool parallel) {
  AstsSpec s;
  s.replicas = replicas;
  s.parallel = parallel;
  return s;
}

std::vector<int> Ordinals(const std::vector<Creation>& c) {
  std::vector<int> out;
  for (const Creation& x : c) out.push_back(x.ordinal);
  return out;
}

ScalePlan Scale(const AstsSpec& spec, const std::vector<AstsPod>& pods) {
  absl::StatusOr<ScalePlan> plan = PlanScale(spec, pods, kNew, kNow);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : ScalePlan{};
}

UpdatePlan Update(const AstsSpec& spec, const std::vector<AstsPod>& pods) {
  absl::StatusOr<UpdatePlan> plan = PlanUpdate(spec, pods, kNew, Scale(spec, pods), kNow);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : UpdatePlan{};
}

// ---- reserveOrdinals and the owned ordinals

TEST(AstsReserveOrdinals, Parses) {
  struct Case {
    const char* json;
    std::set<int> want;
  } cases[] = {
      {"null", {}},
      {"[]", {}},
      {"[1, 3]", {1, 3}},
      {"[\"2-4\"]", {2, 3, 4}},
      {"[\"2-2\"]", {2}},
      {"[1, \"3-5\", 4, 1]", {1, 3, 4, 5}},  // duplicates and overlaps merge, as a set
      {"[0, \"10-12\", \"11-13\"]", {0, 10, 11, 12, 13}},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::set<int>> got = ParseReserveOrdinals(Json::parse(c.json));
    ASSERT_TRUE(got.ok()) << c.json << ": " << got.status();
    EXPECT_EQ(*got, c.want) << c.json;
  }
}

TEST(AstsReserveOrdinals, RejectsWithReadableErrors) {
  struct Case {
    const char* json;
    const char* message;
  } cases[] = {
      {"[-1]", "reserveOrdinals[0]: -1 is negative"},
      {"[1, \"5-3\"]", "reserveOrdinals[1]: range \"5-3\" starts after it ends"},
      {"[\"3\"]", "reserveOrdinals[0]: \"3\" is not a range \"a-b\""},
      {"[\"a-b\"]", "\"a-b\" is not a range"},
      {"[\"1-2-3\"]", "\"1-2-3\" is not a range"},
      {"[\"-1-3\"]", "\"-1-3\" is not a range"},
      {"[\" 1-3\"]", "\" 1-3\" is not a range"},
      {"[\"1-99999999999\"]", "is not a range"},
      {"[1.5]", "reserveOrdinals[0]: want an integer or a range \"a-b\", got 1.5"},
      {"[true]", "want an integer or a range"},
      {"{\"a\": 1}", "reserveOrdinals: want a list"},
      {"\"1-3\"", "reserveOrdinals: want a list"},
      {"[\"0-100000\"]", "names more than 100000 ordinals"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::set<int>> got = ParseReserveOrdinals(Json::parse(c.json));
    ASSERT_FALSE(got.ok()) << c.json;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(c.message)) << c.json;
  }
}

TEST(AstsOrdinals, OwnedOrdinalsSkipReservedFromStart) {
  struct Case {
    int replicas;
    int start;
    std::set<int> reserved;
    std::vector<int> want;
  } cases[] = {
      {3, 0, {}, {0, 1, 2}},
      {0, 0, {1}, {}},
      {3, 0, {1}, {0, 2, 3}},
      {2, 0, {0, 1}, {2, 3}},
      // OpenKruise's own example: replicas 4, start 2, reserved {1, 3}: 2, 4, 5, 6.
      {4, 2, {1, 3}, {2, 4, 5, 6}},
      {3, 5, {}, {5, 6, 7}},
      {3, 5, {5, 6, 7}, {8, 9, 10}},
      {2, 0, {4, 5}, {0, 1}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(OwnedOrdinals(c.replicas, c.start, c.reserved), c.want)
        << c.replicas << " from " << c.start;
  }
}

TEST(AstsOrdinals, OrdinalOfPodName) {
  EXPECT_EQ(OrdinalOf("web", "web-0"), 0);
  EXPECT_EQ(OrdinalOf("web", "web-12"), 12);
  EXPECT_EQ(OrdinalOf("web-1", "web-1-2"), 2);
  EXPECT_EQ(OrdinalOf("web", "web-1-2"), -1);
  EXPECT_EQ(OrdinalOf("web", "web"), -1);
  EXPECT_EQ(OrdinalOf("web", "web-"), -1);
  EXPECT_EQ(OrdinalOf("web", "web-x"), -1);
  EXPECT_EQ(OrdinalOf("web", "webx-1"), -1);
  EXPECT_EQ(OrdinalOf("web", "web-2147483647"), 2147483647);
  EXPECT_EQ(OrdinalOf("web", "web-2147483648"), -1);
}

// ---- spec and numbers

TEST(AstsSpecParse, DefaultsAndFields) {
  absl::StatusOr<AstsSpec> d = ParseAstsSpec(Json::parse(R"({"spec": {}})"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->replicas, 1);
  EXPECT_FALSE(d->parallel);
  EXPECT_FALSE(d->on_delete);
  EXPECT_EQ(d->partition, 0);
  EXPECT_EQ(d->max_unavailable, Json(1));
  EXPECT_EQ(d->pod_update_policy, "ReCreate");
  EXPECT_TRUE(d->scale_max_unavailable.is_null());

  absl::StatusOr<AstsSpec> s = ParseAstsSpec(Json::parse(R"({"spec": {
      "replicas": 5, "ordinals": {"start": 3}, "reserveOrdinals": [4, "6-7"],
      "podManagementPolicy": "Parallel", "scaleStrategy": {"maxUnavailable": "10%"},
      "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {
        "partition": 2, "maxUnavailable": "50%", "podUpdatePolicy": "InPlaceIfPossible",
        "paused": true, "minReadySeconds": 30,
        "unorderedUpdate": {"priorityStrategy": {"weightPriority": []}}}}}})"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->replicas, 5);
  EXPECT_EQ(s->ordinals_start, 3);
  EXPECT_EQ(s->reserve_ordinals, (std::set<int>{4, 6, 7}));
  EXPECT_TRUE(s->parallel);
  EXPECT_EQ(s->scale_max_unavailable, Json("10%"));
  EXPECT_EQ(s->partition, 2);
  EXPECT_EQ(s->max_unavailable, Json("50%"));
  EXPECT_EQ(s->pod_update_policy, "InPlaceIfPossible");
  EXPECT_TRUE(s->paused);
  EXPECT_TRUE(s->unordered);
  EXPECT_TRUE(s->priority_strategy.is_object());
  EXPECT_EQ(s->min_ready_seconds, 30);
}

TEST(AstsSpecParse, Errors) {
  struct Case {
    const char* json;
    const char* message;
  } cases[] = {
      {R"({"spec": {"replicas": "3"}})", "spec.replicas: want an integer"},
      {R"({"spec": {"replicas": -1}})", "spec.replicas: -1 is out of range"},
      {R"({"spec": {"podManagementPolicy": "Burst"}})",
       "spec.podManagementPolicy: \"Burst\" is not one of OrderedReady, Parallel"},
      {R"({"spec": {"updateStrategy": {"type": "Partition"}}})", "spec.updateStrategy.type"},
      {R"({"spec": {"updateStrategy": {"rollingUpdate": {"partition": -2}}}})",
       "spec.updateStrategy.rollingUpdate.partition: -2 is out of range"},
      {R"({"spec": {"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlace"}}}})",
       "podUpdatePolicy: \"InPlace\" is not one of ReCreate, InPlaceIfPossible, InPlaceOnly"},
      {R"({"spec": {"updateStrategy": {"rollingUpdate": {"paused": "yes"}}}})",
       "paused: want a boolean"},
      {R"({"spec": {"reserveOrdinals": [-3]}})", "spec: reserveOrdinals[0]: -3 is negative"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<AstsSpec> got = ParseAstsSpec(Json::parse(c.json));
    ASSERT_FALSE(got.ok()) << c.json;
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(c.message)) << c.json;
  }
}

TEST(AstsNumbers, RoundDownAtLeastOne) {
  struct Case {
    Json max_unavailable;
    Json scale_max_unavailable;
    int replicas;
    int want;
    std::optional<int> want_scale;
  } cases[] = {
      {1, nullptr, 5, 1, std::nullopt},
      {3, 2, 5, 3, 2},
      {"50%", "50%", 5, 2, 2},      // 2.5 rounds down
      {"10%", "10%", 5, 1, 1},      // 0.5 rounds down to 0, then at least 1
      {"10%", "10%", 100, 10, 10},  // the 0.10 blog's example
      {0, 0, 5, 1, 1},
  };
  for (const Case& c : cases) {
    AstsSpec s = Spec(c.replicas, true);
    s.max_unavailable = c.max_unavailable;
    s.scale_max_unavailable = c.scale_max_unavailable;
    absl::StatusOr<ScaledNumbers> n = ScaleNumbers(s);
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(n->max_unavailable, c.want) << c.max_unavailable;
    EXPECT_EQ(n->scale_max_unavailable, c.want_scale) << c.scale_max_unavailable;
  }
  AstsSpec bad = Spec(5, true);
  bad.scale_max_unavailable = "ten";
  absl::StatusOr<ScaledNumbers> n = ScaleNumbers(bad);
  ASSERT_FALSE(n.ok());
  EXPECT_THAT(std::string(n.status().message()), HasSubstr("spec.scaleStrategy.maxUnavailable"));
}

TEST(AstsAvailability, MinReadySeconds) {
  AstsPod p = Pod(0);
  p.ready_since = kNow - absl::Seconds(4);
  absl::Duration wait;
  EXPECT_TRUE(IsAvailable(p, 0, kNow, &wait));
  EXPECT_FALSE(IsAvailable(p, 10, kNow, &wait));
  EXPECT_EQ(wait, absl::Seconds(6));
  EXPECT_TRUE(IsAvailable(p, 4, kNow, &wait));
  p.lifecycle_state = "PreparingUpdate";
  EXPECT_FALSE(IsAvailable(p, 0, kNow));
  EXPECT_FALSE(IsHealthy(p));
  p.lifecycle_state = "Normal";
  EXPECT_TRUE(IsHealthy(p));
  EXPECT_FALSE(IsHealthy(Terminating(p)));
  EXPECT_TRUE(IsAvailable(Terminating(p), 0, kNow));  // availability does not look at deletion
}

TEST(AstsViewPod, ReadsLabelsAndDeletion) {
  absl::StatusOr<AstsPod> p = ViewPod(Json::parse(R"({
      "metadata": {"name": "web-3", "deletionTimestamp": "2024-05-01T10:00:00Z",
        "labels": {"controller-revision-hash": "web-abc",
                   "lifecycle.apps.kruise.io/state": "PreparingDelete",
                   "apps.kruise.io/specified-delete": "true"}},
      "status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2024-05-01T09:00:00Z"}]}})"),
                                      "web");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->ordinal, 3);
  EXPECT_EQ(p->revision, "web-abc");
  EXPECT_EQ(p->lifecycle_state, "PreparingDelete");
  EXPECT_TRUE(p->specified_delete);
  EXPECT_TRUE(p->terminating);
  EXPECT_TRUE(p->ready);
}

// ---- scale up

TEST(AstsScale, OrderedReadyCreatesOneAtATimeInOrder) {
  const AstsSpec spec = Spec(3, false);
  ScalePlan p = Scale(spec, {});
  EXPECT_THAT(Ordinals(p.create), ElementsAre(0));
  EXPECT_TRUE(p.round_ends);

  // Pod 0 exists but is not ready yet: nothing is created.
  p = Scale(spec, {Unready(Pod(0))});
  EXPECT_THAT(p.create, IsEmpty());
  EXPECT_TRUE(p.round_ends);
  EXPECT_THAT(p.waiting, HasSubstr("web-0"));

  AstsPod pending = Unready(Pod(0));
  pending.phase = "Pending";
  EXPECT_THAT(Scale(spec, {pending}).create, IsEmpty());

  p = Scale(spec, {Pod(0)});
  EXPECT_THAT(Ordinals(p.create), ElementsAre(1));
  p = Scale(spec, Pods(0, 2));
  EXPECT_THAT(Ordinals(p.create), ElementsAre(2));
  p = Scale(spec, Pods(0, 3));
  EXPECT_THAT(p.create, IsEmpty());
  EXPECT_FALSE(p.round_ends);

  // A missing pod in the middle is recreated before anything above it is looked at.
  p = Scale(spec, {Pod(0), Pod(2)});
  EXPECT_THAT(Ordinals(p.create), ElementsAre(1));
}

TEST(AstsScale, OrderedReadyLetsTheUpdateStepReachAHookHeldPod) {
  const AstsSpec spec = Spec(3, false);
  for (const char* state : {"PreparingUpdate", "PreparingDelete"}) {
    AstsPod held = Pod(0, kOld);
    held.lifecycle_state = state;
    ScalePlan p = Scale(spec, {held, Pod(1, kOld)});
    EXPECT_THAT(p.create, IsEmpty()) << state;
    EXPECT_FALSE(p.round_ends) << state << ": the update step must run to release it";
    EXPECT_THAT(p.waiting, HasSubstr("lifecycle hook")) << state;
  }
  // Other lifecycle states still end the round (the pod moves on by itself).
  for (const char* state : {"PreparingNormal", "Updated", "Updating"}) {
    AstsPod p0 = Pod(0);
    p0.lifecycle_state = state;
    EXPECT_TRUE(Scale(spec, {p0}).round_ends) << state;
  }
}

TEST(AstsScale, OrderedReadyWaitsForMinReadySeconds) {
  AstsSpec spec = Spec(2, false);
  spec.min_ready_seconds = 10;
  AstsPod p0 = Pod(0);
  p0.ready_since = kNow - absl::Seconds(3);
  ScalePlan p = Scale(spec, {p0});
  EXPECT_THAT(p.create, IsEmpty());
  EXPECT_EQ(p.recheck_after, absl::Seconds(7));
  p0.ready_since = kNow - absl::Seconds(10);
  EXPECT_THAT(Ordinals(Scale(spec, {p0}).create), ElementsAre(1));
}

TEST(AstsScale, OrderedReadyWithStartAndReserved) {
  AstsSpec spec = Spec(3, false);
  spec.ordinals_start = 2;
  spec.reserve_ordinals = {3};
  EXPECT_THAT(Ordinals(Scale(spec, {}).create), ElementsAre(2));
  EXPECT_THAT(Ordinals(Scale(spec, {Pod(2)}).create), ElementsAre(4));
  EXPECT_THAT(Ordinals(Scale(spec, {Pod(2), Pod(4)}).create), ElementsAre(5));
}

TEST(AstsScale, ParallelCreatesAllAtOnce) {
  AstsSpec spec = Spec(4, true);
  spec.reserve_ordinals = {1};
  ScalePlan p = Scale(spec, {Unready(Pod(0))});
  EXPECT_THAT(Ordinals(p.create), ElementsAre(2, 3, 4));
  EXPECT_FALSE(p.round_ends);
  EXPECT_THAT(p.remove, IsEmpty());
}

TEST(AstsScale, ParallelScaleMaxUnavailableCountsCreatingAndUnavailablePods) {
  AstsSpec spec = Spec(5, true);
  spec.scale_max_unavailable = 2;
  // Nothing yet: two are created, then the budget is spent.
  ScalePlan p = Scale(spec, {});
  EXPECT_THAT(Ordinals(p.create), ElementsAre(0, 1));
  EXPECT_FALSE(p.round_ends);  // the update still runs
  // Both created and not ready: nothing more.
  EXPECT_THAT(Scale(spec, {Unready(Pod(0)), Unready(Pod(1))}).create, IsEmpty());
  // One became available: one more.
  EXPECT_THAT(Ordinals(Scale(spec, {Pod(0), Unready(Pod(1))}).create), ElementsAre(2));
  // A terminating pod counts too.
  EXPECT_THAT(Ordinals(Scale(spec, {Pod(0), Terminating(Pod(1))}).create), ElementsAre(2));
  EXPECT_THAT(Scale(spec, {Pod(0), Terminating(Unready(Pod(1)))}).create, IsEmpty());
  // Percent of replicas rounded down, at least 1: 30% of 5 is 1.
  spec.scale_max_unavailable = "30%";
  EXPECT_THAT(Ordinals(Scale(spec, {}).create), ElementsAre(0));
  // OrderedReady ignores the field (the webhook only allows it with Parallel).
  AstsSpec ordered = Spec(5, false);
  ordered.scale_max_unavailable = 3;
  EXPECT_THAT(Ordinals(Scale(ordered, {}).create), ElementsAre(0));
}

// The OpenKruise 0.10 blog: replicas 100, Parallel, scaleStrategy.maxUnavailable 10%. Pods are
// created in parallel, but never more than 10 are unavailable; run rounds against a toy kubelet
// that makes a pod ready three rounds after it was created.
TEST(AstsScale, BlogExampleNeverMoreThanTenUnavailable) {
  absl::StatusOr<AstsSpec> spec = ParseAstsSpec(Json::parse(R"({"spec": {
      "replicas": 100, "podManagementPolicy": "Parallel",
      "scaleStrategy": {"maxUnavailable": "10%"}}})"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::map<int, int> created_round;  // ordinal -> round it was created in
  int max_created_in_a_round = 0;
  int round = 0;
  for (;
       round < 200 && !(created_round.size() == 100 && round > created_round.rbegin()->second + 3);
       ++round) {
    std::vector<AstsPod> pods;
    int unavailable = 0;
    for (const auto& [ord, r] : created_round) {
      pods.push_back(round - r >= 3 ? Pod(ord) : Unready(Pod(ord)));
      if (round - r < 3) ++unavailable;
    }
    ASSERT_LE(unavailable, 10) << "round " << round;
    absl::StatusOr<ScalePlan> plan = PlanScale(*spec, pods, kNew, kNow);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ASSERT_LE(unavailable + static_cast<int>(plan->create.size()), 10) << "round " << round;
    max_created_in_a_round =
        std::max(max_created_in_a_round, static_cast<int>(plan->create.size()));
    for (const Creation& c : plan->create) created_round[c.ordinal] = round;
  }
  EXPECT_EQ(created_round.size(), 100u);
  EXPECT_EQ(max_created_in_a_round, 10);  // parallel, not one by one
  EXPECT_LT(round, 60);
}

TEST(AstsScale, FailedPodIsDeletedAndTheRoundEnds) {
  for (bool parallel : {false, true}) {
    AstsSpec spec = Spec(3, parallel);
    AstsPod failed = Pod(1);
    failed.phase = "Failed";
    ScalePlan p = Scale(spec, {Pod(0), failed});
    EXPECT_THAT(p.remove, ElementsAre(1)) << parallel;
    EXPECT_THAT(p.create, IsEmpty()) << parallel;
    EXPECT_TRUE(p.round_ends);
    failed.phase = "Succeeded";
    EXPECT_THAT(Scale(spec, {Pod(0), failed}).remove, ElementsAre(1));
    // Already being deleted: wait for it to go.
    p = Scale(spec, {Pod(0), Terminating(failed)});
    EXPECT_THAT(p.remove, IsEmpty());
    EXPECT_TRUE(p.round_ends);
  }
}

// ---- scale down and condemned pods

TEST(AstsScale, OrderedReadyScalesDownFromTheHighestOneAtATime) {
  const AstsSpec spec = Spec(3, false);
  ScalePlan p = Scale(spec, Pods(0, 5));
  EXPECT_THAT(p.remove, ElementsAre(4));
  EXPECT_TRUE(p.round_ends);
  p = Scale(spec, {Pod(0), Pod(1), Pod(2), Pod(3), Terminating(Pod(4))});
  EXPECT_THAT(p.remove, IsEmpty());
  EXPECT_TRUE(p.round_ends);
  EXPECT_THAT(Scale(spec, Pods(0, 4)).remove, ElementsAre(3));
  EXPECT_THAT(Scale(spec, Pods(0, 3)).remove, IsEmpty());
  // An unready pod among the kept ones blocks the scale-down.
  EXPECT_THAT(Scale(spec, {Pod(0), Unready(Pod(1)), Pod(2), Pod(3)}).remove, IsEmpty());
  // The lowest unhealthy pod may go; one above it that is unhealthy waits.
  EXPECT_THAT(Scale(spec, {Pod(0), Pod(1), Pod(2), Unready(Pod(3))}).remove, ElementsAre(3));
  EXPECT_THAT(Scale(spec, {Pod(0), Pod(1), Pod(2), Unready(Pod(3)), Pod(4)}).remove,
              ElementsAre(4));
  EXPECT_THAT(Scale(spec, {Pod(0), Pod(1), Pod(2), Unready(Pod(3)), Unready(Pod(4))}).remove,
              IsEmpty());
}

TEST(AstsScale, ParallelDeletesAllCondemned) {
  const AstsSpec spec = Spec(2, true);
  ScalePlan p = Scale(spec, {Pod(0), Pod(1), Unready(Pod(2)), Terminating(Pod(3)), Pod(4)});
  EXPECT_THAT(p.remove, ElementsAre(4, 2));
  EXPECT_FALSE(p.round_ends);
}

TEST(AstsScale, ReservedAndOutOfRangeOrdinalsAreCondemned) {
  AstsSpec spec = Spec(3, true);
  spec.ordinals_start = 1;
  spec.reserve_ordinals = {2};
  // Owned: 1, 3, 4. Pod 0 is below start, 2 is reserved, 5 is past the end.
  ScalePlan p = Scale(spec, {Pod(0), Pod(1), Pod(2), Pod(3), Pod(5)});
  EXPECT_THAT(Ordinals(p.create), ElementsAre(4));
  EXPECT_THAT(p.remove, ElementsAre(5, 2, 0));
  // OrderedReady creates the missing one first; condemned pods wait for a later round.
  spec.parallel = false;
  p = Scale(spec, {Pod(0), Pod(1), Pod(2), Pod(3), Pod(5)});
  EXPECT_THAT(Ordinals(p.create), ElementsAre(4));
  EXPECT_THAT(p.remove, IsEmpty());
  EXPECT_THAT(Scale(spec, {Pod(0), Pod(1), Pod(2), Pod(3), Pod(4), Pod(5)}).remove, ElementsAre(5));
}

// ---- the revision of new pods

TEST(AstsScale, NewPodsUnderThePartitionGetTheCurrentRevision) {
  AstsSpec spec = Spec(4, true);
  spec.partition = 2;
  spec.reserve_ordinals = {1};
  ScalePlan p = Scale(spec, {});
  // Owned 0, 2, 3, 4: the first two owned ordinals stay at the current revision.
  EXPECT_THAT(p.create, ElementsAre(Creation{0, true}, Creation{2, true}, Creation{3, false},
                                    Creation{4, false}));
  // Unordered: a count of pods not at the update revision, whichever they are.
  spec.unordered = true;
  p = Scale(spec, {Pod(3, kOld), Pod(4, kNew)});
  EXPECT_THAT(p.create, ElementsAre(Creation{0, true}, Creation{2, false}));
  // OnDelete: always the update revision.
  spec.unordered = false;
  spec.on_delete = true;
  EXPECT_THAT(Scale(spec, {}).create, ElementsAre(Creation{0, false}, Creation{2, false},
                                                  Creation{3, false}, Creation{4, false}));
}

// ---- rolling update

TEST(AstsUpdate, OrderedFromTheHighestOrdinalDownToThePartition) {
  AstsSpec spec = Spec(5, false);
  spec.partition = 2;
  std::vector<AstsPod> pods = Pods(0, 5, kOld);
  EXPECT_THAT(Update(spec, pods).update, ElementsAre(4));
  pods[4] = Unready(Pod(4, kNew));  // recreated, not ready yet
  // OrderedReady's scale walk waits for pod 4 too; the update does not run.
  EXPECT_THAT(Update(spec, pods).update, IsEmpty());
  pods[4] = Pod(4, kNew);
  EXPECT_THAT(Update(spec, pods).update, ElementsAre(3));
  pods[3] = Pod(3, kNew);
  EXPECT_THAT(Update(spec, pods).update, ElementsAre(2));
  pods[2] = Pod(2, kNew);
  // 0 and 1 stay at the old revision.
  EXPECT_THAT(Update(spec, pods).update, IsEmpty());
  spec.partition = 0;
  EXPECT_THAT(Update(spec, pods).update, ElementsAre(1));
}

TEST(AstsUpdate, PartitionCountsOwnedOrdinalsFromStart) {
  AstsSpec spec = Spec(4, true);
  spec.ordinals_start = 2;
  spec.reserve_ordinals = {3};
  spec.partition = 1;
  spec.max_unavailable = 10;
  // Owned 2, 4, 5, 6: 2 keeps the current revision.
  std::vector<AstsPod> pods = {Pod(2, kOld), Pod(4, kOld), Pod(5, kOld), Pod(6, kOld)};
  EXPECT_THAT(Update(spec, pods).update, ElementsAre(6, 5, 4));
  spec.partition = 3;
  EXPECT_THAT(Update(spec, pods).update, ElementsAre(6));
  spec.partition = 4;
  EXPECT_THAT(Update(spec, pods).update, IsEmpty());
  spec.partition = 9;
  EXPECT_THAT(Update(spec, pods).update, IsEmpty());
}

TEST(AstsUpdate, MaxUnavailableRollsInParallel) {
  AstsSpec spec = Spec(6, true);
  spec.max_unavailable = 3;
  std::vector<AstsPod> pods = Pods(0, 6, kOld);
  UpdatePlan u = Update(spec, pods);
  EXPECT_THAT(u.update, ElementsAre(5, 4, 3));
  EXPECT_THAT(u.unavailable, ElementsAre(3, 4, 5));
  // "50%" of 6 is 3 too.
  spec.max_unavailable = "50%";
  EXPECT_THAT(Update(spec, pods).update, ElementsAre(5, 4, 3));
  // An unavailable pod elsewhere uses up budget; the walk stops at the first blocked pod.
  spec.max_unavailable = 3;
  pods[1] = Unready(Pod(1, kOld));
  EXPECT_THAT(Update(spec, pods).update, ElementsAre(5, 4));
  // Updated pods that are not yet ready count as unavailable.
  pods = Pods(0, 6, kOld);
  pods[5] = Unready(Pod(5, kNew));
  pods[4] = Pod(4, kNew);
  EXPECT_THAT(Update(spec, pods).update, ElementsAre(3, 2));
  // An in-place update that has not completed counts even when the pod looks ready.
  pods[5] = Pod(5, kNew);
  pods[5].update_incomplete = true;
  EXPECT_THAT(Update(spec, pods).update, ElementsAre(3, 2));
}

TEST(AstsUpdate, UpdatingAnUnavailablePodCostsNothing) {
  AstsSpec spec = Spec(4, true);
  std::vector<AstsPod> pods = Pods(0, 4, kOld);
  pods[3] = Unready(Pod(3, kOld));
  EXPECT_THAT(Update(spec, pods).update, ElementsAre(3));
  pods[2] = Unready(Pod(2, kOld));
  EXPECT_THAT(Update(spec, pods).update, ElementsAre(3, 2));
  // A terminating pod is left alone (it counts as unavailable).
  pods[3] = Terminating(Pod(3, kOld));
  EXPECT_THAT(Update(spec, pods).update, ElementsAre(2));
}

TEST(AstsUpdate, MinReadySecondsKeepsUpdatedPodsUnavailable) {
  AstsSpec spec = Spec(3, true);
  spec.min_ready_seconds = 30;
  std::vector<AstsPod> pods = Pods(0, 3, kOld);
  pods[2] = Pod(2, kNew);
  pods[2].ready_since = kNow - absl::Seconds(10);
  UpdatePlan u = Update(spec, pods);
  EXPECT_THAT(u.update, IsEmpty());
  EXPECT_EQ(u.recheck_after, absl::Seconds(20));
  pods[2].ready_since = kNow - absl::Seconds(30);
  EXPECT_THAT(Update(spec, pods).update, ElementsAre(1));
}

TEST(AstsUpdate, PausedOnDeleteAndEndedRoundsUpdateNothing) {
  AstsSpec spec = Spec(3, true);
  spec.max_unavailable = 3;
  const std::vector<AstsPod> pods = Pods(0, 3, kOld);
  spec.paused = true;
  EXPECT_THAT(Update(spec, pods).update, IsEmpty());
  // Paused stops updates, not scaling.
  EXPECT_THAT(Ordinals(Scale(spec, Pods(0, 2, kOld)).create), ElementsAre(2));
  spec.paused = false;
  spec.on_delete = true;
  EXPECT_THAT(Update(spec, pods).update, IsEmpty());
  spec.on_delete = false;
  AstsPod failed = Pod(0, kOld);
  failed.phase = "Failed";
  EXPECT_THAT(Update(spec, {failed, Pod(1, kOld), Pod(2, kOld)}).update, IsEmpty());
  EXPECT_THAT(Update(spec, pods).update, ElementsAre(2, 1, 0));
}

TEST(AstsUpdate, CreatedAndMissingPodsCountAsUnavailable) {
  AstsSpec spec = Spec(4, true);
  spec.max_unavailable = 2;
  // Pod 3 is created this round: one unit of budget is left for the old pods.
  std::vector<AstsPod> pods = Pods(0, 3, kOld);
  EXPECT_THAT(Update(spec, pods).update, ElementsAre(2));
}

TEST(AstsUpdate, UnorderedFollowsPriorityThenCutsAtPartition) {
  AstsSpec spec = Spec(5, true);
  spec.unordered = true;
  spec.max_unavailable = 5;
  spec.partition = 2;
  spec.priority_strategy = Json::parse(R"({"weightPriority": [
      {"weight": 50, "matchSelector": {"matchLabels": {"tier": "canary"}}}]})");
  std::vector<AstsPod> pods = Pods(0, 5, kOld);
  pods[1].labels["tier"] = "canary";
  EXPECT_THAT(Update(spec, pods).update, ElementsAre(1, 4, 3));
  // Already updated pods use up the partition's room first.
  pods[0] = Pod(0, kNew);
  EXPECT_THAT(Update(spec, pods).update, ElementsAre(1, 4));
  // Without a priority strategy: highest ordinal first.
  spec.priority_strategy = nullptr;
  pods = Pods(0, 5, kOld);
  EXPECT_THAT(Update(spec, pods).update, ElementsAre(4, 3, 2));
}

TEST(AstsUpdate, SpecifiedDeleteIgnoresPartitionButNotMaxUnavailable) {
  AstsSpec spec = Spec(4, true);
  spec.partition = 4;
  std::vector<AstsPod> pods = Pods(0, 4, kOld);
  pods[0].specified_delete = true;
  pods[2].specified_delete = true;
  UpdatePlan u = Update(spec, pods);
  EXPECT_THAT(u.specified_delete, ElementsAre(2));  // maxUnavailable 1: one at a time
  EXPECT_THAT(u.update, IsEmpty());
  pods[3] = Unready(pods[3]);
  pods[3].specified_delete = true;
  // 3 is unavailable already and goes; 2 would be a second unavailable pod.
  EXPECT_THAT(Update(spec, pods).specified_delete, ElementsAre(3));
  spec.partition = 0;
  spec.max_unavailable = 4;
  pods = Pods(0, 4, kOld);
  pods[2].specified_delete = true;
  u = Update(spec, pods);
  EXPECT_THAT(u.specified_delete, ElementsAre(2));
  EXPECT_THAT(u.update, ElementsAre(3, 1, 0));  // 2 is deleted, not updated
}

TEST(AstsClaims, ParseQuantity) {
  EXPECT_EQ(ParseQuantity("10Gi"), 10.0L * 1073741824.0L);
  EXPECT_EQ(ParseQuantity("1.5Gi"), 1.5L * 1073741824.0L);
  EXPECT_EQ(ParseQuantity("500M"), 5e8L);
  EXPECT_EQ(ParseQuantity("2e3"), 2000.0L);
  EXPECT_EQ(ParseQuantity("1024"), 1024.0L);
  EXPECT_NEAR(static_cast<double>(*ParseQuantity("100m")), 0.1, 1e-12);
  EXPECT_FALSE(ParseQuantity("").has_value());
  EXPECT_FALSE(ParseQuantity("Gi").has_value());
  EXPECT_FALSE(ParseQuantity("10Xi").has_value());
  EXPECT_FALSE(ParseQuantity(".").has_value());
  EXPECT_LT(*ParseQuantity("1G"), *ParseQuantity("1Gi"));
}

TEST(AstsClaims, CompareClaimTable) {
  auto vct = [](const char* size, const char* sc) {
    Json t = {
        {"spec",
         {{"accessModes", {"ReadWriteOnce"}}, {"resources", {{"requests", {{"storage", size}}}}}}}};
    if (sc != nullptr) t["spec"]["storageClassName"] = sc;
    return t;
  };
  auto claim = [&](const char* size, const char* capacity, const char* sc) {
    Json c = vct(size, sc);
    if (capacity != nullptr) c["status"] = {{"capacity", {{"storage", capacity}}}};
    return c;
  };
  struct Case {
    const char* name;
    Json claim;
    Json tmpl;
    bool other_diff, compatible, ready, needs_expand, resize_done;
  };
  Json pending = claim("20Gi", "10Gi", "fast");
  pending["status"]["conditions"] = {{{"type", "FileSystemResizePending"}, {"status", "True"}}};
  Json other_modes = claim("10Gi", "10Gi", "fast");
  other_modes["spec"]["accessModes"] = {"ReadWriteMany"};
  const std::vector<Case> cases = {
      {"same size, bound", claim("10Gi", "10Gi", "fast"), vct("10Gi", "fast"), false, true, true,
       false, true},
      {"larger than the template", claim("20Gi", "20Gi", "fast"), vct("10Gi", "fast"), false, true,
       true, false, true},
      {"template grew", claim("10Gi", "10Gi", "fast"), vct("20Gi", "fast"), false, false, false,
       true, false},
      {"expanded, not yet by the CSI driver", claim("20Gi", "10Gi", "fast"), vct("20Gi", "fast"),
       false, true, false, false, false},
      {"expanded, file system resize pending", pending, vct("20Gi", "fast"), false, true, false,
       false, true},
      {"another storage class", claim("10Gi", "10Gi", "slow"), vct("10Gi", "fast"), true, false,
       false, false, false},
      {"template without a class (the default)", claim("10Gi", "10Gi", "fast"),
       vct("10Gi", nullptr), false, true, true, false, true},
      {"other access modes", other_modes, vct("10Gi", "fast"), true, false, false, false, false},
      {"unbound", claim("10Gi", nullptr, "fast"), vct("10Gi", "fast"), false, true, false, false,
       false},
  };
  for (const Case& c : cases) {
    ClaimCheck got = CompareClaim(c.claim, c.tmpl);
    EXPECT_EQ(got.other_diff, c.other_diff) << c.name;
    EXPECT_EQ(got.compatible, c.compatible) << c.name;
    EXPECT_EQ(got.ready, c.ready) << c.name;
    EXPECT_EQ(got.needs_expand, c.needs_expand) << c.name;
    EXPECT_EQ(got.resize_done, c.resize_done) << c.name;
  }
}

}  // namespace
}  // namespace kruise::manager::statefulset
