#include "manager/workload/lifecycle.h"

#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kube/object.h"

namespace kruise::manager::workload {
namespace {

using Json = nlohmann::json;

Lifecycle Hooks() {
  auto lc = ParseLifecycle(Json::parse(R"({"spec": {"lifecycle": {
      "preDelete": {"labelsHandler": {"hold-delete": "true"}, "markPodNotReady": true},
      "inPlaceUpdate": {"finalizersHandler": ["example.com/hold-update"]},
      "preNormal": {"labelsHandler": {"ready-to-serve": "yes"},
                    "finalizersHandler": ["example.com/serving"]}}}})"));
  EXPECT_TRUE(lc.ok()) << lc.status();
  return lc.ok() ? *lc : Lifecycle{};
}

HookedPod PodWith(std::vector<std::pair<std::string, std::string>> labels,
                  std::vector<std::string> finalizers) {
  HookedPod p;
  for (auto& [k, v] : labels) p.labels[k] = v;
  p.finalizers = std::move(finalizers);
  return p;
}

TEST(LifecycleParse, ReadsHooksAndNamesMistypedFields) {
  Lifecycle lc = Hooks();
  ASSERT_TRUE(lc.pre_delete.has_value());
  EXPECT_TRUE(lc.pre_delete->mark_pod_not_ready);
  EXPECT_EQ(lc.pre_delete->labels_handler.at("hold-delete"), "true");
  ASSERT_TRUE(lc.in_place_update.has_value());
  EXPECT_EQ(lc.in_place_update->finalizers_handler,
            std::vector<std::string>{"example.com/hold-update"});
  EXPECT_FALSE(ParseLifecycle(Json::object())->pre_normal.has_value());

  auto bad = ParseLifecycle(
      Json::parse(R"({"spec": {"lifecycle": {"preDelete": {"labelsHandler": ["x"]}}}})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "spec.lifecycle.preDelete.labelsHandler: must be a map of strings");
  bad = ParseLifecycle(
      Json::parse(R"({"spec": {"lifecycle": {"inPlaceUpdate": {"markPodNotReady": "yes"}}}})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "spec.lifecycle.inPlaceUpdate.markPodNotReady: must be a boolean");
}

TEST(LifecycleHooked, AnyVersusAll) {
  Lifecycle lc = Hooks();
  HookedPod none = PodWith({}, {});
  HookedPod label_only = PodWith({{"ready-to-serve", "yes"}}, {});
  HookedPod wrong_value = PodWith({{"ready-to-serve", "no"}}, {"example.com/serving"});
  HookedPod both = PodWith({{"ready-to-serve", "yes"}}, {"example.com/serving"});
  EXPECT_FALSE(IsPodHooked(lc.pre_normal, none));
  EXPECT_TRUE(IsPodHooked(lc.pre_normal, label_only));
  EXPECT_FALSE(IsPodAllHooked(lc.pre_normal, label_only));
  EXPECT_FALSE(IsPodAllHooked(lc.pre_normal, wrong_value));
  EXPECT_TRUE(IsPodAllHooked(lc.pre_normal, both));
  EXPECT_FALSE(IsPodHooked(std::nullopt, both));
  EXPECT_FALSE(IsPodAllHooked(std::nullopt, both));
}

TEST(LifecycleState, InitialState) {
  Lifecycle lc = Hooks();
  EXPECT_EQ(InitialLifecycleState(lc, PodWith({}, {})), kStatePreparingNormal);
  EXPECT_EQ(
      InitialLifecycleState(lc, PodWith({{"ready-to-serve", "yes"}}, {"example.com/serving"})),
      kStateNormal);
  EXPECT_EQ(InitialLifecycleState(Lifecycle{}, PodWith({}, {})), kStateNormal);
}

TEST(LifecycleState, NextStateTable) {
  const Lifecycle lc = Hooks();
  const HookedPod bare = PodWith({}, {});
  const HookedPod update_hook = PodWith({}, {"example.com/hold-update"});
  const HookedPod normal_hook = PodWith({{"ready-to-serve", "yes"}}, {"example.com/serving"});
  struct Case {
    const char* name;
    Lifecycle lc;
    std::string state;
    HookedPod pod;
    bool at_update = false;
    bool completed = false;
    std::optional<std::string> want;
  };
  const std::vector<Case> cases = {
      {"normal stays", lc, kStateNormal, bare, true, true, std::nullopt},
      {"no label stays", lc, "", bare, true, true, std::nullopt},
      {"preparing normal waits for all hooks", lc, kStatePreparingNormal,
       PodWith({{"ready-to-serve", "yes"}}, {}), false, false, std::nullopt},
      {"preparing normal with all hooks", lc, kStatePreparingNormal, normal_hook, false, false,
       kStateNormal},
      {"preparing normal without a preNormal hook", Lifecycle{}, kStatePreparingNormal, bare, false,
       false, kStateNormal},
      {"preparing update at an old revision waits", lc, kStatePreparingUpdate, bare, false, false,
       std::nullopt},
      {"preparing update rolled back, hook gone: Updated", lc, kStatePreparingUpdate, bare, true,
       false, kStateUpdated},
      {"preparing update rolled back, hook on: Normal", lc, kStatePreparingUpdate, update_hook,
       true, false, kStateNormal},
      {"updating not complete stays", lc, kStateUpdating, bare, true, false, std::nullopt},
      {"updating complete, hook gone: Updated", lc, kStateUpdating, bare, true, true,
       kStateUpdated},
      {"updating complete, hook back: Normal", lc, kStateUpdating, update_hook, true, true,
       kStateNormal},
      {"updating complete without a hook: Normal", Lifecycle{}, kStateUpdating, bare, true, true,
       kStateNormal},
      {"updated waits for the hook", lc, kStateUpdated, bare, true, true, std::nullopt},
      {"updated with the hook back: Normal", lc, kStateUpdated, update_hook, true, true,
       kStateNormal},
      {"preparing delete is final", lc, kStatePreparingDelete, bare, true, true, std::nullopt},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(NextLifecycleState(c.lc, c.state, c.pod, c.at_update, c.completed), c.want) << c.name;
  }
}

TEST(LifecycleState, InPlaceUpdateDecisionTable) {
  using Action = InPlaceUpdateDecision::Action;
  Lifecycle lc = Hooks();
  lc.in_place_update->mark_pod_not_ready = true;
  const HookedPod bare = PodWith({}, {});
  const HookedPod hooked = PodWith({}, {"example.com/hold-update"});
  struct Case {
    const char* name;
    std::string state;
    HookedPod pod;
    Action want;
    bool put_back = false;
  };
  const std::vector<Case> cases = {
      {"normal unhooked updates", kStateNormal, bare, Action::kUpdate},
      {"no state unhooked updates", "", bare, Action::kUpdate},
      {"normal hooked prepares", kStateNormal, hooked, Action::kPrepare},
      {"preparing normal hooked prepares", kStatePreparingNormal, hooked, Action::kPrepare},
      {"preparing update hooked waits", kStatePreparingUpdate, hooked, Action::kWait},
      {"preparing update released updates", kStatePreparingUpdate, bare, Action::kUpdate},
      {"updating updates again", kStateUpdating, bare, Action::kUpdate},
      {"updated goes back with the hook", kStateUpdated, bare, Action::kPrepare, true},
      {"preparing delete refused", kStatePreparingDelete, bare, Action::kRefuse},
  };
  for (const Case& c : cases) {
    InPlaceUpdateDecision d = DecideInPlaceUpdate(lc, c.state, c.pod);
    EXPECT_EQ(d.action, c.want) << c.name;
    EXPECT_EQ(d.put_hook_back, c.put_back) << c.name;
    if (d.action == Action::kPrepare) {
      EXPECT_TRUE(d.mark_not_ready) << c.name;
    }
  }
  EXPECT_EQ(DecideInPlaceUpdate(Lifecycle{}, kStateUpdated, bare).action, Action::kUpdate);
}

TEST(LifecycleState, DeleteDecisionTable) {
  using Action = DeleteDecision::Action;
  Lifecycle lc = Hooks();
  const HookedPod hooked = PodWith({{"hold-delete", "true"}}, {});
  EXPECT_EQ(DecideDelete(lc, kStateNormal, PodWith({}, {})).action, Action::kDelete);
  EXPECT_EQ(DecideDelete(lc, kStateNormal, PodWith({{"hold-delete", "false"}}, {})).action,
            Action::kDelete);
  DeleteDecision d = DecideDelete(lc, kStateNormal, hooked);
  EXPECT_EQ(d.action, Action::kPrepare);
  EXPECT_TRUE(d.mark_not_ready);
  EXPECT_EQ(DecideDelete(lc, kStatePreparingDelete, hooked).action, Action::kWait);
  EXPECT_EQ(DecideDelete(lc, kStatePreparingDelete, PodWith({}, {})).action, Action::kDelete);
  EXPECT_EQ(DecideDelete(Lifecycle{}, kStateNormal, hooked).action, Action::kDelete);
}

TEST(LifecycleOps, StateOpsPutTheHookBack) {
  const Json pod = Json::parse(R"({"metadata": {"name": "p", "labels": {"a": "b"},
      "finalizers": ["x"]}})");
  LifecycleHook hook;
  hook.labels_handler["hold"] = "true";
  hook.finalizers_handler = {"x", "example.com/hold-update"};
  Json patched = pod;
  Json ops = LifecycleStateOps(pod, kStatePreparingUpdate, absl::FromUnixSeconds(0), &hook);
  patched = patched.patch(ops);
  EXPECT_EQ(patched["metadata"]["labels"][kLifecycleStateLabel], kStatePreparingUpdate);
  EXPECT_EQ(patched["metadata"]["labels"]["hold"], "true");
  EXPECT_EQ(patched["metadata"]["labels"]["a"], "b");
  EXPECT_EQ(patched["metadata"]["annotations"][kLifecycleTimestampAnnotation],
            "1970-01-01T00:00:00Z");
  EXPECT_EQ(patched["metadata"]["finalizers"], Json::parse(R"(["x", "example.com/hold-update"])"));
}

TEST(LifecycleOps, KruisePodReadyOnlyWithTheGateAndOnlyOurReasons) {
  Json pod = Json::parse(R"({"metadata": {"name": "p"},
      "spec": {"readinessGates": [{"conditionType": "KruisePodReady"}]},
      "status": {"conditions": [{"type": "KruisePodReady", "status": "True"}]}})");
  const absl::Time now = absl::FromUnixSeconds(10);
  Json ops = KruisePodReadyOps(pod, false, kStatePreparingDelete, "held", now);
  ASSERT_FALSE(ops.empty());
  Json not_ready = pod.patch(ops);
  EXPECT_EQ(not_ready["status"]["conditions"][0]["status"], "False");
  EXPECT_EQ(not_ready["status"]["conditions"][0]["reason"], kStatePreparingDelete);
  EXPECT_TRUE(KruisePodReadyOps(not_ready, false, kStatePreparingDelete, "held", now).empty());
  // Without the gate nothing is written.
  Json ungated = pod;
  ungated["spec"].erase("readinessGates");
  EXPECT_TRUE(KruisePodReadyOps(ungated, false, kStatePreparingDelete, "held", now).empty());
  // Ready again in Normal/Updated, never in PreparingDelete, never for another party's reason.
  EXPECT_FALSE(RestoreKruisePodReadyOps(not_ready, kStateNormal, now).empty());
  EXPECT_TRUE(RestoreKruisePodReadyOps(not_ready, kStatePreparingDelete, now).empty());
  Json other = not_ready;
  other["status"]["conditions"][0]["reason"] = "SomeoneElse";
  EXPECT_TRUE(RestoreKruisePodReadyOps(other, kStateNormal, now).empty());
  Json back = not_ready.patch(RestoreKruisePodReadyOps(not_ready, kStateUpdated, now));
  EXPECT_EQ(back["status"]["conditions"][0]["status"], "True");
}

}  // namespace
}  // namespace kruise::manager::workload
