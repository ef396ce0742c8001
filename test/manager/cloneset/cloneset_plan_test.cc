#include "manager/cloneset/cloneset_plan.h"

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "manager/cloneset/cloneset_api.h"

namespace kruise::manager::cloneset {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A ready, available, scheduled, running pod.
PodView Pod(const std::string& name, bool updated) {
  PodView p;
  p.name = name;
  p.updated = updated;
  p.scheduled = true;
  p.node = "n1";
  p.phase = "Running";
  p.ready = p.update_ready = p.ready_long_enough = p.available = true;
  p.ready_since = absl::FromUnixSeconds(1000);
  p.created = absl::FromUnixSeconds(900);
  return p;
}
PodView NotReady(PodView p) {
  p.ready = p.update_ready = p.ready_long_enough = p.available = false;
  return p;
}
PodView Specified(PodView p) {
  p.specified_delete = true;
  return p;
}
PodView State(PodView p, const char* state) {
  p.lifecycle_state = state;
  if (std::string(state) != kStateNormal) p.available = false;
  return p;
}
std::vector<PodView> Pods(int updated, int old) {
  std::vector<PodView> out;
  for (int i = 0; i < updated; ++i) out.push_back(Pod("new-" + std::to_string(i), true));
  for (int i = 0; i < old; ++i) out.push_back(Pod("old-" + std::to_string(i), false));
  return out;
}

CloneSetSpec Spec(int replicas, Json partition = 0, Json max_unavailable = "20%",
                  Json max_surge = 0) {
  CloneSetSpec s;
  s.replicas = replicas;
  s.partition = partition;
  s.max_unavailable = max_unavailable;
  s.max_surge = max_surge;
  return s;
}
ScaledNumbers Numbers(const CloneSetSpec& s) {
  auto n = ScaleNumbers(s);
  EXPECT_TRUE(n.ok()) << n.status();
  return n.value_or(ScaledNumbers{});
}
Diffs DiffsFor(const CloneSetSpec& s, const std::vector<PodView>& pods) {
  return CalculateDiffs(s, Numbers(s), pods);
}

// ---- ParseCloneSetSpec ----------------------------------------------------------------------

TEST(ParseCloneSetSpec, Defaults) {
  auto s = ParseCloneSetSpec(Json::parse(R"({"spec": {}})"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->replicas, 1);
  EXPECT_EQ(s->update_type, "ReCreate");
  EXPECT_EQ(s->partition, 0);
  EXPECT_EQ(s->max_unavailable, "20%");
  EXPECT_EQ(s->max_surge, 0);
  EXPECT_TRUE(s->scale_max_unavailable.is_null());
  EXPECT_EQ(s->revision_history_limit, 10);
  EXPECT_FALSE(s->pre_delete.has_value());
}

TEST(ParseCloneSetSpec, ReadsEveryField) {
  auto s = ParseCloneSetSpec(Json::parse(R"({"spec": {
    "replicas": 5, "minReadySeconds": 3, "revisionHistoryLimit": 2,
    "scaleStrategy": {"podsToDelete": ["a", "b"], "maxUnavailable": "10%"},
    "updateStrategy": {"type": "InPlaceIfPossible", "partition": "40%", "maxUnavailable": 2,
                       "maxSurge": "50%", "paused": true,
                       "inPlaceUpdateStrategy": {"gracePeriodSeconds": 10}},
    "lifecycle": {"preDelete": {"finalizersHandler": ["example.com/hook"],
                                "markPodNotReady": true},
                  "inPlaceUpdate": {"labelsHandler": {"example.com/ready": "true"}}}}})"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->replicas, 5);
  EXPECT_EQ(s->min_ready_seconds, 3);
  EXPECT_EQ(s->revision_history_limit, 2);
  EXPECT_THAT(s->pods_to_delete, ElementsAre("a", "b"));
  EXPECT_EQ(s->scale_max_unavailable, "10%");
  EXPECT_EQ(s->update_type, "InPlaceIfPossible");
  EXPECT_EQ(s->partition, "40%");
  EXPECT_EQ(s->max_unavailable, 2);
  EXPECT_TRUE(s->paused);
  EXPECT_EQ(s->grace_period_seconds, 10);
  ASSERT_TRUE(s->pre_delete.has_value());
  EXPECT_THAT(s->pre_delete->finalizers_handler, ElementsAre("example.com/hook"));
  EXPECT_TRUE(s->pre_delete->mark_pod_not_ready);
  ASSERT_TRUE(s->in_place_update.has_value());
  EXPECT_EQ(s->in_place_update->labels_handler.at("example.com/ready"), "true");
}

TEST(ParseCloneSetSpec, WrongTypesNameTheField) {
  struct Case {
    const char* spec;
    const char* field;
  } cases[] = {
      {R"({"replicas": "3"})", "spec.replicas"},
      {R"({"replicas": -1})", "spec.replicas"},
      {R"({"updateStrategy": {"partition": 1.5}})", "spec.updateStrategy.partition"},
      {R"({"updateStrategy": {"maxSurge": true}})", "spec.updateStrategy.maxSurge"},
      {R"({"updateStrategy": {"paused": "yes"}})", "spec.updateStrategy.paused"},
      {R"({"scaleStrategy": {"podsToDelete": "a"}})", "spec.scaleStrategy.podsToDelete"},
      {R"({"lifecycle": {"preDelete": {"labelsHandler": {"a": 1}}}})",
       "spec.lifecycle.preDelete.labelsHandler"},
  };
  for (const Case& c : cases) {
    auto s = ParseCloneSetSpec(Json{{"spec", Json::parse(c.spec)}});
    ASSERT_FALSE(s.ok()) << c.spec;
    EXPECT_THAT(std::string(s.status().message()), ::testing::HasSubstr(c.field)) << c.spec;
  }
  EXPECT_FALSE(ParseCloneSetSpec(Json::parse(R"({"spec": []})")).ok());
}

// ---- ScaleNumbers ---------------------------------------------------------------------------

TEST(ScaleNumbers, PartitionRounding) {
  struct Case {
    int replicas;
    Json partition;
    int want;
  } cases[] = {
      {10, 3, 3},       {10, "30%", 3},  {10, "25%", 3},  // percent rounds up
      {3, "99%", 2},    {3, "100%", 3},  {1, "99%", 1},   // < 100% leaves one to update
      {5, 8, 5},        {0, "50%", 0},   {10, "0%", 0},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Numbers(Spec(c.replicas, c.partition)).partition, c.want)
        << c.replicas << " " << c.partition;
  }
}

TEST(ScaleNumbers, MaxUnavailableRoundsDownWithSurge) {
  EXPECT_EQ(Numbers(Spec(10, 0, "25%", 0)).max_unavailable, 3);  // up
  EXPECT_EQ(Numbers(Spec(10, 0, "25%", 1)).max_unavailable, 2);  // down
  EXPECT_EQ(Numbers(Spec(10, 0, "20%", "15%")).max_surge, 2);    // surge rounds up
  CloneSetSpec paused = Spec(10, 0, "20%", 3);
  paused.paused = true;
  EXPECT_EQ(Numbers(paused).max_surge, 0);
  EXPECT_EQ(Numbers(Spec(4)).max_unavailable, 1);  // 20% of 4 rounded up
  CloneSetSpec scale = Spec(10);
  EXPECT_EQ(Numbers(scale).scale_max_unavailable, INT_MAX);
  scale.scale_max_unavailable = "15%";
  EXPECT_EQ(Numbers(scale).scale_max_unavailable, 2);
  EXPECT_FALSE(ScaleNumbers(Spec(10, "abc")).ok());
}

// ---- CalculateDiffs (cases after OpenKruise's table) ----------------------------------------

TEST(CalculateDiffs, Table) {
  struct Case {
    const char* name;
    CloneSetSpec spec;
    std::vector<PodView> pods;
    Diffs want;
  };
  std::vector<Case> cases = {
      {"empty", Spec(0, 0, 1), {}, {}},
      {"scale up from nothing", Spec(5, 0, 1), {}, {.scale_up = 5, .scale_up_limit = 5}},
      {"scale up the rest", Spec(5, 0, 1), Pods(3, 0), {.scale_up = 2, .scale_up_limit = 2}},
      {"nothing to do", Spec(5, 0, 1), Pods(5, 0), {}},
      {"scale down", Spec(3, 0, 1), Pods(5, 0),
       {.scale_down = 2, .delete_ready_limit = 3}},
      {"update old pods", Spec(5, 0, 1), Pods(0, 5), {.update = 5, .update_max_unavailable = 1}},
      {"partition keeps two", Spec(5, 2, 1), Pods(0, 5),
       {.update = 3, .update_max_unavailable = 1}},
      {"partition reached", Spec(5, 2, 1), Pods(3, 2), {}},
      {"scale up keeps the partition at the old revision", Spec(5, 3, 1), Pods(0, 1),
       {.scale_up = 4, .scale_up_old_revision = 2, .scale_up_limit = 4}},
      {"scale down old revision first", Spec(3, 0, 1), Pods(2, 3),
       {.scale_down = 2, .scale_down_old_revision = 3, .delete_ready_limit = 3, .update = 1,
        .update_max_unavailable = 3}},
      {"surge for recreate update", Spec(5, 0, 1, 1), Pods(0, 5),
       {.scale_up = 1, .scale_up_limit = 1, .use_surge = 1, .update = 5,
        .update_max_unavailable = 1}},
      {"surge used: delete an old one", Spec(5, 0, 1, 1),
       [] {
         auto p = Pods(1, 5);
         return p;
       }(),
       {.scale_down = 0, .use_surge = 1, .update = 4, .update_max_unavailable = 2}},
      {"specified delete without surge", Spec(5, 0, 1),
       [] {
         auto p = Pods(5, 0);
         p[0] = Specified(p[0]);
         return p;
       }(),
       {.delete_ready_limit = 1}},
      {"specified delete within maxUnavailable: no surge", Spec(5, 0, 1, 1),
       [] {
         auto p = Pods(5, 0);
         p[0] = Specified(p[0]);
         return p;
       }(),
       {.delete_ready_limit = 1}},
      {"specified delete with surge creates first", Spec(5, 0, 0, 1),
       [] {
         auto p = Pods(5, 0);
         p[0] = Specified(p[0]);
         return p;
       }(),
       {.scale_up = 1, .scale_up_limit = 1, .delete_ready_limit = 0, .use_surge = 1}},
      {"unavailable pods count against the scale limit",
       [] {
         CloneSetSpec s = Spec(6, 0, 1);
         s.scale_max_unavailable = 2;
         return s;
       }(),
       [] {
         auto p = Pods(2, 0);
         p[0] = NotReady(p[0]);
         return p;
       }(),
       {.scale_up = 4, .scale_up_limit = 1}},
      {"preparing-delete pods count as unavailable", Spec(3, 0, 1),
       [] {
         auto p = Pods(3, 0);
         p[0] = State(p[0], kStatePreparingDelete);
         return p;
       }(),
       {}},
  };
  for (const Case& c : cases) {
    Diffs got = DiffsFor(c.spec, c.pods);
    EXPECT_EQ(got.scale_up, c.want.scale_up) << c.name;
    EXPECT_EQ(got.scale_up_old_revision, c.want.scale_up_old_revision) << c.name;
    EXPECT_EQ(got.scale_up_limit, c.want.scale_up_limit) << c.name;
    EXPECT_EQ(got.scale_down, c.want.scale_down) << c.name;
    EXPECT_EQ(got.scale_down_old_revision, c.want.scale_down_old_revision) << c.name;
    EXPECT_EQ(got.delete_ready_limit, c.want.delete_ready_limit) << c.name;
    EXPECT_EQ(got.use_surge, c.want.use_surge) << c.name;
    EXPECT_EQ(got.update, c.want.update) << c.name;
    EXPECT_EQ(got.update_max_unavailable, c.want.update_max_unavailable) << c.name;
  }
}

// ---- Deletion order -------------------------------------------------------------------------

TEST(ChoosePodsToDelete, ActivePodsOrder) {
  std::vector<PodView> pods = Pods(0, 6);
  pods[0].name = "ready-old";
  pods[1] = NotReady(pods[1]);
  pods[1].name = "not-ready";
  pods[2].scheduled = false;
  pods[2].phase = "Pending";
  pods[2] = NotReady(pods[2]);
  pods[2].name = "unscheduled";
  pods[3].phase = "Pending";
  pods[3] = NotReady(pods[3]);
  pods[3].name = "pending";
  pods[4].name = "ready-newer";
  pods[4].ready_since = absl::FromUnixSeconds(2000);
  pods[5].name = "restarted";
  pods[5].restarts = 4;
  auto order = ChoosePodsToDelete(pods, 6, 6, {});
  std::vector<std::string> names;
  for (size_t i : order) names.push_back(pods[i].name);
  EXPECT_THAT(names, ElementsAre("unscheduled", "pending", "not-ready", "ready-newer",
                                 "restarted", "ready-old"));
}

TEST(ChoosePodsToDelete, CostThenRank) {
  std::vector<PodView> pods = Pods(0, 3);
  pods[0].deletion_cost = 10;
  pods[1].deletion_cost = -5;
  // Rank only matters between equal costs.
  auto order = ChoosePodsToDelete(pods, 2, 3, {0, 0, 0});
  EXPECT_THAT(order, ElementsAre(1, 2));
  pods[1].deletion_cost = 0;
  order = ChoosePodsToDelete(pods, 1, 3, {0, 1, 7});
  EXPECT_THAT(order, ElementsAre(2));
}

TEST(ChoosePodsToDelete, OldRevisionFirstThenUpdated) {
  std::vector<PodView> pods = Pods(2, 2);  // 0,1 updated; 2,3 old
  EXPECT_THAT(ChoosePodsToDelete(pods, 3, 2, {}), ::testing::UnorderedElementsAre(2, 3, 0));
  auto order = ChoosePodsToDelete(pods, 2, 0, {});
  for (size_t i : order) EXPECT_TRUE(pods[i].updated);
  // Asked for more old pods than there are: the rest comes from the updated ones.
  EXPECT_EQ(ChoosePodsToDelete(pods, 3, 3, {}).size(), 3u);
}

TEST(SpreadRanks, NodeCrowdingWithoutConstraints) {
  std::vector<PodView> pods = Pods(0, 4);
  pods[0].node = pods[1].node = pods[2].node = "a";
  pods[3].node = "b";
  EXPECT_THAT(SpreadRanks(pods, {}, nullptr), ElementsAre(3, 3, 3, 1));
}

TEST(SpreadRanks, TopologyDomains) {
  std::vector<PodView> pods = Pods(0, 5);
  pods[0].node = "n1";  // zone-a
  pods[1].node = "n2";  // zone-a
  pods[2].node = "n3";  // zone-b
  pods[3].node = "n4";  // no zone label
  pods[4].scheduled = false;
  pods[4].node = "";
  auto zone = [](const std::string& node, const std::string& key) -> std::optional<std::string> {
    if (key != "topology.kubernetes.io/zone") return std::nullopt;
    if (node == "n1" || node == "n2") return "zone-a";
    if (node == "n3") return "zone-b";
    return std::nullopt;
  };
  auto ranks = SpreadRanks(pods, {"topology.kubernetes.io/zone"}, zone);
  EXPECT_THAT(ranks, ElementsAre(2, 2, 1, 0, 0));
  // Scale down by one takes a pod of the crowded zone.
  auto order = ChoosePodsToDelete(pods, 1, 5, ranks);
  // The unscheduled pod goes first regardless of rank; then zone-a.
  EXPECT_THAT(order, ElementsAre(4));
  order = ChoosePodsToDelete(std::vector<PodView>(pods.begin(), pods.begin() + 4), 1, 4,
                             std::vector<int>(ranks.begin(), ranks.begin() + 4));
  ASSERT_EQ(order.size(), 1u);
  EXPECT_TRUE(order[0] == 0 || order[0] == 1);
}

// ---- PlanScale ------------------------------------------------------------------------------

TEST(PlanScale, CreatesWithinTheLimit) {
  CloneSetSpec s = Spec(5, 2, 1);
  s.scale_max_unavailable = 2;
  std::vector<PodView> pods;
  auto plan = PlanScale(s, Numbers(s), DiffsFor(s, pods), pods, {});
  EXPECT_EQ(plan.create, 2);
  EXPECT_EQ(plan.create_old_revision, 2);
  EXPECT_THAT(plan.remove, IsEmpty());
}

TEST(PlanScale, SpecifiedDeletesRespectTheReadyLimit) {
  CloneSetSpec s = Spec(5, 0, 1);
  auto pods = Pods(5, 0);
  pods[1] = Specified(pods[1]);
  pods[3] = Specified(pods[3]);
  auto plan = PlanScale(s, Numbers(s), DiffsFor(s, pods), pods, {});
  EXPECT_THAT(plan.remove, ElementsAre(1));  // maxUnavailable 1: one ready pod at a time
  pods[3] = NotReady(pods[3]);
  plan = PlanScale(s, Numbers(s), DiffsFor(s, pods), pods, {});
  EXPECT_THAT(plan.remove, ElementsAre(1, 3));  // a not-ready pod costs no budget
}

TEST(PlanScale, PreparingDeleteGoesWhenTheHookIsGone) {
  CloneSetSpec s = Spec(2, 0, 1);
  s.pre_delete = LifecycleHook();
  s.pre_delete->finalizers_handler = {"example.com/hold"};
  auto pods = Pods(3, 0);
  pods[0] = State(pods[0], kStatePreparingDelete);
  pods[0].finalizers = {"example.com/hold"};
  auto plan = PlanScale(s, Numbers(s), DiffsFor(s, pods), pods, {});
  EXPECT_THAT(plan.remove, IsEmpty());  // still hooked; nothing else to do (replicas reached)
  pods[0].finalizers.clear();
  plan = PlanScale(s, Numbers(s), DiffsFor(s, pods), pods, {});
  EXPECT_THAT(plan.remove, ElementsAre(0));
}

TEST(PlanScale, ScaleUpBringsPreparingDeleteBack) {
  CloneSetSpec s = Spec(3, 0, 1);
  s.pre_delete = LifecycleHook();
  s.pre_delete->labels_handler = {{"hold", "true"}};
  auto pods = Pods(3, 0);
  pods[2] = State(pods[2], kStatePreparingDelete);
  auto plan = PlanScale(s, Numbers(s), DiffsFor(s, pods), pods, {});
  EXPECT_THAT(plan.back_to_normal, ElementsAre(2));
  EXPECT_EQ(plan.create, 0);
  s.pre_delete->mark_pod_not_ready = true;  // then PreparingDelete is final: create instead
  plan = PlanScale(s, Numbers(s), DiffsFor(s, pods), pods, {});
  EXPECT_THAT(plan.back_to_normal, IsEmpty());
  EXPECT_EQ(plan.create, 0);  // it still counts until it is gone; it is not hooked: delete it
  EXPECT_THAT(plan.remove, ElementsAre(2));
}

TEST(PlanScale, ScaleDownWaitsForPlannedDeletions) {
  CloneSetSpec s = Spec(2, 0, 1);
  auto pods = Pods(4, 0);
  auto plan = PlanScale(s, Numbers(s), DiffsFor(s, pods), pods, {});
  EXPECT_EQ(plan.remove.size(), 2u);
  pods[0] = Specified(NotReady(pods[0]));
  plan = PlanScale(s, Numbers(s), DiffsFor(s, pods), pods, {});
  EXPECT_THAT(plan.remove, ElementsAre(0));  // the specified one only, this round
}

// ---- PlanUpdate -----------------------------------------------------------------------------

TEST(PlanUpdate, MaxUnavailableLimitsReadyPods) {
  CloneSetSpec s = Spec(5, 0, 2);
  auto pods = Pods(0, 5);
  EXPECT_EQ(PlanUpdate(s, DiffsFor(s, pods), pods).size(), 2u);
  pods[4] = NotReady(pods[4]);  // not-ready pods update first and for free... but count
  auto plan = PlanUpdate(s, DiffsFor(s, pods), pods);
  ASSERT_FALSE(plan.empty());
  EXPECT_EQ(plan[0], 4u);
  EXPECT_EQ(plan.size(), 2u);  // 1 unavailable already: one more ready pod
  s.paused = true;
  EXPECT_THAT(PlanUpdate(s, DiffsFor(s, pods), pods), IsEmpty());
}

TEST(PlanUpdate, PartitionAndSkippedStates) {
  CloneSetSpec s = Spec(5, 3, 5);
  auto pods = Pods(0, 5);
  EXPECT_EQ(PlanUpdate(s, DiffsFor(s, pods), pods).size(), 2u);
  pods[0].in_place_grace = true;
  pods[1] = State(pods[1], kStateUpdated);
  pods[2] = State(pods[2], kStatePreparingDelete);
  // The PreparingDelete pod no longer counts against the partition: one pod left to update.
  auto plan = PlanUpdate(s, DiffsFor(s, pods), pods);
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_TRUE(plan[0] == 3 || plan[0] == 4);
}

TEST(PlanUpdate, PreparingUpdateFirstThenPriority) {
  CloneSetSpec s = Spec(4, 0, 4);
  s.priority_strategy = Json::parse(
      R"({"weightPriority": [{"weight": 50, "matchSelector": {"matchLabels": {"tier": "a"}}}]})");
  auto pods = Pods(0, 4);
  pods[2].labels["tier"] = "a";
  pods[3] = State(pods[3], kStatePreparingUpdate);
  auto plan = PlanUpdate(s, DiffsFor(s, pods), pods);
  ASSERT_EQ(plan.size(), 4u);
  EXPECT_EQ(plan[0], 3u);
  EXPECT_EQ(plan[1], 2u);
}

TEST(PlanUpdate, OrderPriorityBiggerFirst) {
  CloneSetSpec s = Spec(3, 0, 3);
  s.priority_strategy = Json::parse(R"({"orderPriority": [{"orderedKey": "rank"}]})");
  auto pods = Pods(0, 3);
  pods[0].labels["rank"] = "1";
  pods[1].labels["rank"] = "node-7";
  pods[2].labels["rank"] = "3";
  EXPECT_THAT(PlanUpdate(s, DiffsFor(s, pods), pods), ElementsAre(1, 2, 0));
}

TEST(PlanUpdate, ScatterSpreadsMatchingPods) {
  CloneSetSpec s = Spec(6, 0, 6);
  s.scatter_strategy = Json::parse(R"([{"key": "role", "value": "db"}])");
  auto pods = Pods(0, 6);
  pods[0].labels["role"] = "db";
  pods[1].labels["role"] = "db";
  auto plan = PlanUpdate(s, DiffsFor(s, pods), pods);
  ASSERT_EQ(plan.size(), 6u);
  std::vector<size_t> positions;
  for (size_t k = 0; k < plan.size(); ++k) {
    if (plan[k] <= 1) positions.push_back(k);
  }
  ASSERT_EQ(positions.size(), 2u);
  EXPECT_GE(positions[1] - positions[0], 3u) << "db pods must not be adjacent";
}

// ---- Small pieces ---------------------------------------------------------------------------

TEST(SlowStartBatches, DoublesAndEndsWithTheRest) {
  EXPECT_THAT(SlowStartBatches(0), IsEmpty());
  EXPECT_THAT(SlowStartBatches(1), ElementsAre(1));
  EXPECT_THAT(SlowStartBatches(10), ElementsAre(1, 2, 4, 3));
  EXPECT_THAT(SlowStartBatches(30), ElementsAre(1, 2, 4, 8, 15));
}

TEST(NewInstanceId, SafeAlphabetAndNotTaken) {
  size_t calls = 0;
  // The first attempt produces "bbbbb", which is taken; the second "ccccc".
  auto id = NewInstanceId([](const std::string& s) { return s == "bbbbb"; },
                          [&](size_t) { return calls++ < 5 ? 0 : 1; });
  EXPECT_EQ(id, "ccccc");
  std::set<std::string> seen;
  uint64_t state = 7;
  for (int i = 0; i < 200; ++i) {
    seen.insert(NewInstanceId([&](const std::string& s) { return seen.count(s) > 0; },
                              [&](size_t n) {
                                state = state * 6364136223846793005ULL + 1442695040888963407ULL;
                                return static_cast<size_t>(state >> 33) % n;
                              }));
  }
  EXPECT_EQ(seen.size(), 200u);
  for (const std::string& s : seen) {
    EXPECT_EQ(s.find_first_of("aeiou013"), std::string::npos) << s;
  }
}

TEST(Hooks, HookedAndAllHooked) {
  LifecycleHook hook{.labels_handler = {{"a", "1"}, {"b", "2"}}, .finalizers_handler = {"f"}};
  PodView p = Pod("p", true);
  EXPECT_FALSE(IsPodHooked(hook, p));
  p.labels["a"] = "1";
  EXPECT_TRUE(IsPodHooked(hook, p));
  EXPECT_FALSE(IsPodAllHooked(hook, p));
  p.labels["b"] = "2";
  p.finalizers = {"f"};
  EXPECT_TRUE(IsPodAllHooked(hook, p));
  EXPECT_FALSE(IsPodHooked(std::nullopt, p));
}

TEST(ViewPod, ReadsConditionsLabelsAndMinReady) {
  CloneSetSpec s = Spec(1);
  s.min_ready_seconds = 30;
  s.pods_to_delete = {"named"};
  Json pod = Json::parse(R"({
    "metadata": {"name": "named", "creationTimestamp": "2026-01-01T00:00:00Z",
                 "labels": {"controller-revision-hash": "cs-abc",
                            "apps.kruise.io/cloneset-instance-id": "x2z4b"},
                 "annotations": {"controller.kubernetes.io/pod-deletion-cost": "-7"}},
    "spec": {"nodeName": "n1", "readinessGates": [{"conditionType": "InPlaceUpdateReady"}]},
    "status": {"phase": "Running",
               "conditions": [{"type": "Ready", "status": "True",
                               "lastTransitionTime": "2026-01-01T00:01:00Z"},
                              {"type": "InPlaceUpdateReady", "status": "True"}],
               "containerStatuses": [{"restartCount": 2}, {"restartCount": 1}]}})");
  absl::Time ready_at = absl::FromUnixSeconds(1767225660);  // 2026-01-01T00:01:00Z
  PodView v = ViewPod(pod, s, "cs-abc", ready_at + absl::Seconds(10));
  EXPECT_TRUE(v.updated);
  EXPECT_EQ(v.instance_id, "x2z4b");
  EXPECT_TRUE(v.specified_delete);
  EXPECT_TRUE(v.ready);
  EXPECT_TRUE(v.update_ready);
  EXPECT_FALSE(v.available);  // not yet ready for 30 s
  EXPECT_EQ(v.restarts, 3);
  EXPECT_EQ(v.deletion_cost, -7);
  v = ViewPod(pod, s, "cs-abc", ready_at + absl::Seconds(30));
  EXPECT_TRUE(v.available);
  pod["status"]["conditions"][1]["status"] = "False";
  v = ViewPod(pod, s, "cs-other", ready_at + absl::Seconds(60));
  EXPECT_FALSE(v.updated);
  EXPECT_TRUE(v.ready);
  EXPECT_FALSE(v.update_ready);
  EXPECT_FALSE(v.available);
}

TEST(CountStatus, Counters) {
  CloneSetSpec s = Spec(4, 1, 1);
  auto pods = Pods(2, 2);
  pods[1] = NotReady(pods[1]);
  pods[2].ready_long_enough = pods[2].available = false;  // ready, minReadySeconds not over
  StatusCounts c = CountStatus(s, Numbers(s), pods);
  EXPECT_EQ(c.replicas, 4);
  EXPECT_EQ(c.ready, 3);
  EXPECT_EQ(c.available, 2);
  EXPECT_EQ(c.updated, 2);
  EXPECT_EQ(c.updated_ready, 1);
  EXPECT_EQ(c.updated_available, 1);
  EXPECT_EQ(c.expected_updated, 3);
}

}  // namespace
}  // namespace kruise::manager::cloneset
