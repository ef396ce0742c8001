#include "manager/sidecarset/sidecarset_upgrade.h"

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/client.h"
#include "kube/object.h"

namespace kruise::manager::sidecarset {
// Named, not anonymous: this file may share a unity-build unit with the other SidecarSet tests.
namespace upgrade_test {

using kube::Json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const absl::Time kNow = absl::FromUnixSeconds(1764158400);  // 2025-11-26T12:00:00Z
constexpr char kNowText[] = "2025-11-26T12:00:00Z";
constexpr char kSet[] = "log-set";

// The SidecarSet "log-set" (sidecar "log", image `image`), `spec_patch` merged into its spec.
Json Set(const std::string& spec_patch = "{}", const std::string& image = "fluentd:2") {
  Json ss = Json::parse(R"({
    "apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
    "metadata": {"name": "log-set"},
    "spec": {"selector": {"matchLabels": {"app": "web"}},
             "containers": [{"name": "log", "image": ""}]},
    "status": {"latestRevision": "log-set-rev2"}
  })");
  ss["spec"]["containers"][0]["image"] = image;
  ss["spec"].merge_patch(Json::parse(spec_patch));
  return ss;
}

SidecarSetUpgradeTarget Target(const std::string& spec_patch = "{}") {
  auto t = ParseSidecarSetUpgradeTarget(Set(spec_patch));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : SidecarSetUpgradeTarget{};
}

// Hashes a pod may record: the current set's, the set before its image change (upgradable), a
// set whose env changed too (not upgradable).
struct Hashes {
  std::string now, now_wo, old, old_wo, other, other_wo;
};
const Hashes& H() {
  static const Hashes h = [] {
    Hashes h;
    SidecarSetUpgradeTarget now = Target();
    auto old = ParseSidecarSetUpgradeTarget(Set("{}", "fluentd:1"));
    auto other =
        ParseSidecarSetUpgradeTarget(Set(R"({"containers": [{"name": "log", "image": "fluentd:1",
                                 "env": [{"name": "A", "value": "1"}]}]})"));
    h.now = now.hash;
    h.now_wo = now.hash_without_image;
    h.old = old->hash;
    h.old_wo = old->hash_without_image;
    h.other = other->hash;
    h.other_wo = other->hash_without_image;
    return h;
  }();
  return h;
}

enum class Kind { kUpdated, kOld, kStale };

// A running pod `name` with app container "app" and sidecar "log", injected by log-set at
// the version `kind` says (and by "other-set", whose entries must survive), `patch` merged in.
Json Pod(const std::string& name, Kind kind, bool ready = true, const std::string& patch = "{}") {
  const Hashes& h = H();
  const std::string hash = kind == Kind::kUpdated ? h.now : kind == Kind::kOld ? h.old : h.other;
  const std::string wo = kind == Kind::kUpdated ? h.now_wo
                         : kind == Kind::kOld   ? h.old_wo
                                                : h.other_wo;
  // OpenKruise's field order (an ordered_json keeps it).
  nlohmann::ordered_json entry = {{"updateTimestamp", "2025-11-01T00:00:00Z"},
                                  {"hash", hash},
                                  {"sidecarSetName", kSet},
                                  {"sidecarList", {"log"}},
                                  {"controllerRevision", "log-set-rev1"}};
  nlohmann::ordered_json hashes = {{kSet, entry}, {"other-set", "xyz"}};
  nlohmann::ordered_json entry_wo = entry;
  entry_wo.erase("controllerRevision");
  entry_wo["hash"] = wo;
  nlohmann::ordered_json hashes_wo = {{kSet, entry_wo}, {"other-set", "xyz-wo"}};
  Json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name},
        {"namespace", "team"},
        {"resourceVersion", "41"},
        {"creationTimestamp", "2025-11-01T00:00:00Z"},
        {"labels", {{"app", "web"}}},
        {"annotations",
         {{kSidecarSetHashAnnotation, hashes.dump()},
          {kSidecarSetHashWithoutImageAnnotation, hashes_wo.dump()}}}}},
      {"spec",
       {{"nodeName", "n1"},
        {"containers",
         {{{"name", "app"}, {"image", "nginx:1"}},
          {{"name", "log"}, {"image", kind == Kind::kUpdated ? "fluentd:2" : "fluentd:1"}}}}}},
      {"status",
       {{"phase", "Running"},
        {"conditions",
         {{{"type", "Ready"},
           {"status", ready ? "True" : "False"},
           {"lastTransitionTime", "2025-11-01T00:01:00Z"}}}},
        {"containerStatuses",
         {{{"name", "app"}, {"containerID", "containerd://app"}, {"restartCount", 0}},
          {{"name", "log"},
           {"imageID", "sha256:old"},
           {"containerID", "containerd://log-a"},
           {"restartCount", 0},
           {"state", {{"running", {{"startedAt", "2025-11-01T00:00:30Z"}}}}}}}}}}};
  pod.merge_patch(Json::parse(patch));
  return pod;
}

std::vector<const Json*> Ptrs(const std::vector<Json>& pods) {
  std::vector<const Json*> out;
  for (const Json& p : pods) out.push_back(&p);
  return out;
}

SidecarSetUpgradePlan Plan(const SidecarSetUpgradeTarget& t, const std::vector<Json>& pods) {
  auto plan = PlanSidecarSetUpgrade(t, Ptrs(pods));
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : SidecarSetUpgradePlan{};
}

std::vector<std::string> Names(const std::vector<Json>& pods, const std::vector<size_t>& idx) {
  std::vector<std::string> out;
  for (size_t i : idx) out.push_back(kube::Name(pods[i]));
  return out;
}

// The state our patch writes, for log-set, with the container id it recorded.
std::string InPlaceState(const std::string& recorded_container_id) {
  Json state = {{kSet,
                 {{"revision", H().now},
                  {"updateTimestamp", "2025-11-26T11:00:00Z"},
                  {"lastContainerStatuses",
                   {{"log",
                     {{"imageID", "sha256:old"},
                      {"containerID", recorded_container_id},
                      {"restartCount", 0}}}}}}}};
  return state.dump();
}

// An updated pod whose sidecar has (`restarted`) or has not yet been restarted by the kubelet.
Json MidUpgradePod(const std::string& name, bool restarted) {
  Json pod = Pod(name, Kind::kUpdated);
  pod["metadata"]["annotations"][kSidecarSetInPlaceUpdateStateAnnotation] =
      InPlaceState("containerd://log-a");
  if (restarted) {
    Json& log = pod["status"]["containerStatuses"][1];
    log["containerID"] = "containerd://log-b";
    log["state"]["running"]["startedAt"] = "2025-11-26T11:00:05Z";
  }
  return pod;
}

TEST(SidecarSetUpgradeTarget, ReadsTheSetWithDefaults) {
  SidecarSetUpgradeTarget t = Target();
  EXPECT_EQ(t.name, kSet);
  EXPECT_EQ(t.hash, SidecarSetRecordedHash(Set()));
  EXPECT_EQ(t.hash_without_image, SidecarSetRecordedHashWithoutImage(Set()));
  EXPECT_EQ(t.latest_revision, "log-set-rev2");
  EXPECT_THAT(t.containers, ElementsAre("log"));
  EXPECT_EQ(t.images.at("log"), "fluentd:2");
  EXPECT_EQ(t.max_unavailable, 1);  // DefaultSidecarSet's, and ours when absent
  EXPECT_EQ(t.partition, 0);
  EXPECT_FALSE(t.paused || t.not_update || t.hot_upgrade);
  // Only the image differs between the versions the tests use: same hash without image.
  EXPECT_EQ(H().old_wo, H().now_wo);
  EXPECT_NE(H().old, H().now);
  EXPECT_NE(H().other_wo, H().now_wo);
}

TEST(SidecarSetUpgradeTarget, MalformedSetsAreClearErrors) {
  struct Case {
    std::string name;
    Json set;
    std::string message;
  };
  auto with = [](const std::string& spec_patch) { return Set(spec_patch); };
  Json no_name = Set();
  no_name["metadata"].erase("name");
  Json spec_list = Set();
  spec_list["spec"] = Json::array();
  const std::vector<Case> cases = {
      {"not an object", Json::array(), "SidecarSet: must be an object"},
      {"no name", no_name, "metadata.name: must be a non-empty string"},
      {"spec a list", spec_list, "spec: must be an object"},
      {"containers an object", with(R"({"containers": {}})"), "spec.containers: must be a list"},
      {"container without name", with(R"({"containers": [{"image": "x"}]})"),
       "spec.containers[0].name"},
      {"image a number", with(R"({"containers": [{"name": "log", "image": 5}]})"),
       "spec.containers[0].image: must be a string"},
      {"strategy a list", with(R"({"updateStrategy": []})"), "spec.updateStrategy: must be"},
      {"paused a string", with(R"({"updateStrategy": {"paused": "yes"}})"),
       "spec.updateStrategy.paused: must be a boolean"},
      {"type a number", with(R"({"updateStrategy": {"type": 1}})"), "spec.updateStrategy.type"},
      {"partition a float", with(R"({"updateStrategy": {"partition": 1.5}})"),
       "spec.updateStrategy.partition: must be an integer or a percent"},
      {"partition no percent", with(R"({"updateStrategy": {"partition": "abc"}})"),
       "spec.updateStrategy.partition"},
      {"maxUnavailable negative", with(R"({"updateStrategy": {"maxUnavailable": -1}})"),
       "spec.updateStrategy.maxUnavailable: must be non-negative"},
      {"maxUnavailable bad percent", with(R"({"updateStrategy": {"maxUnavailable": "x%"}})"),
       "spec.updateStrategy.maxUnavailable"},
      {"selector bad operator", with(R"({"updateStrategy": {"selector": {"matchExpressions":
              [{"key": "a", "operator": "Near"}]}}})"),
       "spec.updateStrategy.selector"},
      {"priority a list", with(R"({"updateStrategy": {"priorityStrategy": []}})"),
       "spec.updateStrategy.priorityStrategy: must be an object"},
      {"weight a string", with(R"({"updateStrategy": {"priorityStrategy": {"weightPriority":
              [{"weight": "9", "matchSelector": {}}]}}})"),
       "weightPriority[0].weight: must be an integer"},
      {"orderedKey missing",
       with(R"({"updateStrategy": {"priorityStrategy": {"orderPriority": [5]}}})"),
       "orderPriority[0].orderedKey: must be a string"},
      {"scatter an object", with(R"({"updateStrategy": {"scatterStrategy": {}}})"),
       "spec.updateStrategy.scatterStrategy: must be a list"},
      {"scatter term without value",
       with(R"({"updateStrategy": {"scatterStrategy": [{"key": "zone"}]}})"),
       "scatterStrategy: must be a list of {key, value} strings"},
  };
  for (const Case& c : cases) {
    auto t = ParseSidecarSetUpgradeTarget(c.set);
    ASSERT_FALSE(t.ok()) << c.name;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(std::string(t.status().message()), HasSubstr(c.message)) << c.name;
  }
}

TEST(ClassifySidecarPod, Table) {
  struct Case {
    std::string name;
    Json pod;
    SidecarPodState state;
    bool ready;
    bool upgrading;
  };
  Json deleting = Pod("d", Kind::kOld);
  deleting["metadata"]["deletionTimestamp"] = "2025-11-26T11:00:00Z";
  Json other_set_only = Pod("o", Kind::kOld);
  other_set_only["metadata"]["annotations"][kSidecarSetHashAnnotation] = R"({"other-set": "x"})";
  Json no_wo = Pod("w", Kind::kOld);
  no_wo["metadata"]["annotations"].erase(kSidecarSetHashWithoutImageAnnotation);
  Json old_form = Pod("f", Kind::kOld);
  old_form["metadata"]["annotations"][kSidecarSetHashAnnotation] = Json({{kSet, H().old}}).dump();
  Json bad_hash = Pod("b", Kind::kOld);
  bad_hash["metadata"]["annotations"][kSidecarSetHashAnnotation] = "{not json";
  Json bad_entry = Pod("e", Kind::kOld);
  bad_entry["metadata"]["annotations"][kSidecarSetHashAnnotation] = R"({"log-set": 5})";
  Json bad_state = Pod("s", Kind::kUpdated);
  bad_state["metadata"]["annotations"][kSidecarSetInPlaceUpdateStateAnnotation] =
      R"({"log-set": {"updateTimestamp": "now"}})";
  Json mistyped = Pod("m", Kind::kOld);
  mistyped["status"]["conditions"][0]["type"] = 7;  // the sorter's value() would throw
  const std::vector<Case> cases = {
      {"updated", Pod("u", Kind::kUpdated), SidecarPodState::kUpdated, true, false},
      {"updated not ready", Pod("u", Kind::kUpdated, false), SidecarPodState::kUpdated, false,
       false},
      {"images only changed", Pod("o", Kind::kOld), SidecarPodState::kUpgradable, true, false},
      {"more changed", Pod("s", Kind::kStale), SidecarPodState::kNotUpgradable, true, false},
      {"no without-image entry", no_wo, SidecarPodState::kNotUpgradable, true, false},
      {"older hash form", old_form, SidecarPodState::kUpgradable, true, false},
      {"mid-upgrade", MidUpgradePod("m", false), SidecarPodState::kUpdated, false, true},
      {"upgrade done", MidUpgradePod("m", true), SidecarPodState::kUpdated, true, false},
      {"deleting", deleting, SidecarPodState::kNotMatched, false, false},
      {"succeeded", Pod("x", Kind::kOld, true, R"({"status": {"phase": "Succeeded"}})"),
       SidecarPodState::kNotMatched, false, false},
      {"other set only", other_set_only, SidecarPodState::kNotMatched, false, false},
      {"no annotations", Pod("n", Kind::kOld, true, R"({"metadata": {"annotations": null}})"),
       SidecarPodState::kNotMatched, false, false},
      {"hash not JSON", bad_hash, SidecarPodState::kMalformed, false, false},
      {"hash entry a number", bad_entry, SidecarPodState::kMalformed, false, false},
      {"state without revision", bad_state, SidecarPodState::kMalformed, false, false},
      {"mistyped condition", mistyped, SidecarPodState::kMalformed, false, false},
      {"not an object", Json("pod"), SidecarPodState::kMalformed, false, false},
  };
  const SidecarSetUpgradeTarget t = Target();
  for (const Case& c : cases) {
    SidecarPodInfo info;
    ASSERT_NO_THROW(info = ClassifySidecarPod(t, c.pod)) << c.name;
    EXPECT_EQ(info.state, c.state) << c.name << ": " << info.problem;
    EXPECT_EQ(info.ready, c.ready) << c.name;
    EXPECT_EQ(info.upgrading, c.upgrading) << c.name;
    if (c.state == SidecarPodState::kMalformed) {
      EXPECT_FALSE(info.problem.empty()) << c.name;
    }
  }
  EXPECT_THAT(ClassifySidecarPod(t, MidUpgradePod("m", false)).problem,
              HasSubstr("not restarted by the kubelet yet"));
}

// Five ready pods at the old image, `updated` ready pods at the new one, the strategy given.
std::vector<Json> OldPods(int old, int updated = 0) {
  std::vector<Json> pods;
  for (int i = 0; i < old; ++i) pods.push_back(Pod("old-" + std::to_string(i), Kind::kOld));
  for (int i = 0; i < updated; ++i) pods.push_back(Pod("new-" + std::to_string(i), Kind::kUpdated));
  return pods;
}

TEST(PlanSidecarSetUpgrade, PartitionAndMaxUnavailable) {
  struct Case {
    std::string strategy;  // spec.updateStrategy
    int old, updated;
    int want;  // pods picked
  };
  const std::vector<Case> cases = {
      // maxUnavailable: default 1, ints, percents of matched pods rounded up.
      {R"({})", 5, 0, 1},
      {R"({"maxUnavailable": 3})", 5, 0, 3},
      {R"({"maxUnavailable": 0})", 5, 0, 0},
      {R"({"maxUnavailable": "40%"})", 5, 0, 2},
      {R"({"maxUnavailable": "10%"})", 5, 0, 1},  // 0.5 -> 1
      {R"({"maxUnavailable": "100%"})", 5, 0, 5},
      {R"({"maxUnavailable": 10})", 3, 2, 3},  // only the old ones
      // partition: old-version pods kept, an int or a percent of matched pods rounded up.
      {R"({"partition": 2, "maxUnavailable": 10})", 5, 0, 3},
      {R"({"partition": 2, "maxUnavailable": 10})", 3, 2, 1},
      {R"({"partition": 5, "maxUnavailable": 10})", 5, 0, 0},
      {R"({"partition": 9, "maxUnavailable": 10})", 5, 0, 0},
      {R"({"partition": "50%", "maxUnavailable": 10})", 5, 0, 2},  // 2.5 -> 3 kept
      {R"({"partition": "50%", "maxUnavailable": 10})", 4, 2, 1},  // 3 of 6 kept
      {R"({"partition": "99%", "maxUnavailable": 10})", 5, 0, 1},  // below 100%: one goes
      {R"({"partition": "100%", "maxUnavailable": 10})", 5, 0, 0},
      {R"({"partition": "0%", "maxUnavailable": 10})", 5, 0, 5},
      {R"({"partition": 1, "maxUnavailable": "40%"})", 5, 0, 2},  // both limits
  };
  for (const Case& c : cases) {
    std::vector<Json> pods = OldPods(c.old, c.updated);
    SidecarSetUpgradePlan plan = Plan(Target(R"({"updateStrategy": )" + c.strategy + "}"), pods);
    EXPECT_EQ(static_cast<int>(plan.upgrade.size()), c.want)
        << c.strategy << " " << c.old << "+" << c.updated;
    EXPECT_EQ(plan.matched_pods, c.old + c.updated);
    EXPECT_EQ(plan.updated_pods, c.updated);
    EXPECT_EQ(plan.ready_pods, c.old + c.updated);
    EXPECT_EQ(plan.updated_ready_pods, c.updated);
    EXPECT_THAT(plan.held, IsEmpty());
  }
}

TEST(PlanSidecarSetUpgrade, UnavailablePodsUseTheBudget) {
  const SidecarSetUpgradeTarget t = Target(R"({"updateStrategy": {"maxUnavailable": 2}})");
  // An updated pod that is not ready, and one whose sidecar has not restarted yet: budget spent.
  std::vector<Json> pods = OldPods(3);
  pods.push_back(Pod("new-unready", Kind::kUpdated, false));
  pods.push_back(MidUpgradePod("new-mid", false));
  SidecarSetUpgradePlan plan = Plan(t, pods);
  EXPECT_THAT(plan.upgrade, IsEmpty());
  EXPECT_EQ(plan.matched_pods, 5);
  EXPECT_EQ(plan.updated_pods, 2);
  EXPECT_EQ(plan.ready_pods, 3);
  EXPECT_EQ(plan.updated_ready_pods, 0);

  // Once the kubelet restarted the sidecar, that pod is available again: one more may go.
  pods[4] = MidUpgradePod("new-mid", true);
  plan = Plan(t, pods);
  EXPECT_EQ(plan.upgrade.size(), 1u);
  EXPECT_EQ(plan.updated_ready_pods, 1);

  // Old pods that are not ready cost nothing and go first; ready ones fill what is left.
  pods = OldPods(3);
  pods.push_back(Pod("old-unready-b", Kind::kOld, false));
  pods.push_back(Pod("old-unready-a", Kind::kOld, false));
  plan = Plan(Target(), pods);  // maxUnavailable 1
  EXPECT_THAT(Names(pods, plan.upgrade), ElementsAre("old-unready-a", "old-unready-b", "old-0"));

  // An old pod still finishing an earlier upgrade waits, and is not counted (not updated).
  pods = OldPods(2);
  pods[0]["metadata"]["annotations"][kSidecarSetInPlaceUpdateStateAnnotation] =
      InPlaceState("containerd://log-a");
  plan = Plan(Target(), pods);
  EXPECT_TRUE(plan.pods[0].upgrading);
  EXPECT_THAT(Names(pods, plan.upgrade), ElementsAre("old-1"));
}

TEST(PlanSidecarSetUpgrade, HeldSelectedAndNotUpgradable) {
  std::vector<Json> pods = OldPods(3);
  pods[1]["metadata"]["labels"]["canary"] = "true";
  pods.push_back(Pod("stale", Kind::kStale));
  pods.push_back(Pod("stranger", Kind::kOld, true,
                     R"({"metadata": {"annotations": {"kruise.io/sidecarset-hash": "{}"}}})"));
  pods.push_back(Pod("broken", Kind::kOld, true,
                     R"({"metadata": {"annotations": {"kruise.io/sidecarset-hash": "["}}})"));

  for (const char* held : {R"({"updateStrategy": {"paused": true}})",
                           R"({"updateStrategy": {"type": "NotUpdate"}})"}) {
    SidecarSetUpgradePlan plan = Plan(Target(held), pods);
    EXPECT_THAT(plan.upgrade, IsEmpty()) << held;
    EXPECT_THAT(plan.mark_not_upgradable, IsEmpty()) << held;
    EXPECT_FALSE(plan.held.empty()) << held;
    EXPECT_EQ(plan.matched_pods, 4) << held;  // counts are still given
  }
  SidecarSetUpgradePlan plan = Plan(Target(R"({"updateStrategy": {"paused": true}})"), pods);
  EXPECT_THAT(plan.held, HasSubstr("paused"));

  plan = Plan(Target(R"({"updateStrategy": {"maxUnavailable": 5,
                          "selector": {"matchLabels": {"canary": "true"}}}})"),
              pods);
  EXPECT_THAT(Names(pods, plan.upgrade), ElementsAre("old-1"));
  EXPECT_THAT(Names(pods, plan.not_upgradable), ElementsAre("stale"));
  EXPECT_THAT(plan.mark_not_upgradable, IsEmpty());  // outside updateStrategy.selector
  EXPECT_EQ(plan.pods[3].state, SidecarPodState::kNotUpgradable);
  EXPECT_EQ(plan.pods[4].state, SidecarPodState::kNotMatched);
  EXPECT_EQ(plan.pods[5].state, SidecarPodState::kMalformed);
  EXPECT_THAT(plan.pods[5].problem, HasSubstr("is not a JSON object"));

  // Not-upgradable pods never count as candidates, so partition compares with the others only.
  plan = Plan(Target(R"({"updateStrategy": {"maxUnavailable": 5, "partition": 1}})"), pods);
  EXPECT_EQ(plan.upgrade.size(), 2u);
  EXPECT_THAT(Names(pods, plan.mark_not_upgradable), ElementsAre("stale"));
}

TEST(PlanSidecarSetUpgrade, Order) {
  struct Case {
    std::string name;
    std::string strategy;
    std::vector<std::string> want;
  };
  // Pods c, a, b, d (input order); labels: a prio=high, b prio=low and order=5, c order=9,
  // d zone=x; a and b zone=y; d is not ready.
  std::vector<Json> pods = {
      Pod("c", Kind::kOld, true, R"({"metadata": {"labels": {"order": "9", "zone": "x"}}})"),
      Pod("a", Kind::kOld, true, R"({"metadata": {"labels": {"prio": "high", "zone": "y"}}})"),
      Pod("b", Kind::kOld, true,
          R"({"metadata": {"labels": {"prio": "low", "order": "5", "zone": "y"}}})"),
      Pod("d", Kind::kOld, false, R"({"metadata": {"labels": {"zone": "x"}}})"),
  };
  const std::vector<Case> cases = {
      {"not ready first, then name", R"({})", {"d", "a", "b", "c"}},
      {"weightPriority",
       R"({"priorityStrategy": {"weightPriority": [
            {"weight": 50, "matchSelector": {"matchLabels": {"prio": "high"}}},
            {"weight": 10, "matchSelector": {"matchLabels": {"prio": "low"}}}]}})",
       {"a", "b", "d", "c"}},
      {"orderPriority",
       R"({"priorityStrategy": {"orderPriority": [{"orderedKey": "order"}]}})",
       {"c", "b", "d", "a"}},
      // zone=y (a, b) spread over the base order d a b c.
      {"scatter", R"({"scatterStrategy": [{"key": "zone", "value": "y"}]})", {"d", "a", "c", "b"}},
      // zone=x then zone=y (the values in pod order): a d b c, then d a c b.
      {"scatter any value",
       R"({"scatterStrategy": [{"key": "zone", "value": "*"}]})",
       {"d", "a", "c", "b"}},
      {"scatter any value, one key only",
       R"({"scatterStrategy": [{"key": "zone", "value": "*"}, {"key": "zone", "value": "x"}]})",
       {"d", "a", "c", "b"}},
  };
  for (const Case& c : cases) {
    Json strategy = Json::parse(c.strategy);
    strategy["maxUnavailable"] = "100%";
    SidecarSetUpgradePlan plan = Plan(Target(Json({{"updateStrategy", strategy}}).dump()), pods);
    EXPECT_EQ(Names(pods, plan.upgrade), c.want) << c.name;
  }
}

// Applies `patch` to `pod` as the API server would (a failed test throws).
Json Apply(const Json& pod, const SidecarPodPatch& patch) { return pod.patch(patch.ops); }

TEST(SidecarPodUpgradePatch, Content) {
  const SidecarSetUpgradeTarget t = Target();
  Json pod = Pod("p", Kind::kOld);
  auto patch = SidecarPodUpgradePatch(t, pod, kNow);
  ASSERT_TRUE(patch.ok()) << patch.status();
  EXPECT_THAT(patch->containers, ElementsAre("log"));
  EXPECT_THAT(patch->missing, IsEmpty());
  ASSERT_EQ(patch->ops.size(), 5u) << patch->ops.dump(1);
  EXPECT_EQ(patch->ops[0],
            Json({{"op", "test"}, {"path", "/metadata/resourceVersion"}, {"value", "41"}}));
  EXPECT_EQ(
      patch->ops[1],
      Json({{"op", "replace"}, {"path", "/spec/containers/1/image"}, {"value", "fluentd:2"}}));
  EXPECT_EQ(patch->ops[2]["op"], "add");
  EXPECT_EQ(patch->ops[2]["path"], "/metadata/annotations/kruise.io~1sidecarset-hash");
  EXPECT_EQ(patch->ops[3]["path"],
            "/metadata/annotations/kruise.io~1sidecarset-hash-without-image");
  EXPECT_EQ(patch->ops[4]["path"],
            "/metadata/annotations/kruise.io~1sidecarset-inplace-update-state");

  // The entry keeps its fields and their order; hash, time and revision are the set's now.
  const std::string hash_text = patch->ops[2]["value"].get<std::string>();
  EXPECT_EQ(hash_text.find(R"({"log-set":{"updateTimestamp":")"), 0u) << hash_text;
  Json hashes = Json::parse(hash_text);
  EXPECT_EQ(hashes[kSet], Json({{"updateTimestamp", kNowText},
                                {"hash", t.hash},
                                {"sidecarSetName", kSet},
                                {"sidecarList", {"log"}},
                                {"controllerRevision", "log-set-rev2"}}));
  EXPECT_EQ(hashes["other-set"], "xyz");  // another set's entry, in its older form, kept
  Json without = Json::parse(patch->ops[3]["value"].get<std::string>());
  EXPECT_EQ(without[kSet]["hash"], t.hash_without_image);
  EXPECT_EQ(without[kSet]["updateTimestamp"], kNowText);
  EXPECT_FALSE(without[kSet].contains("controllerRevision"));
  EXPECT_EQ(without["other-set"], "xyz-wo");
  Json state = Json::parse(patch->ops[4]["value"].get<std::string>());
  EXPECT_EQ(state[kSet]["revision"], t.hash);
  EXPECT_EQ(state[kSet]["updateTimestamp"], kNowText);
  EXPECT_EQ(state[kSet]["lastContainerStatuses"]["log"]["containerID"], "containerd://log-a");

  // Applied, the pod is updated but upgrading until the kubelet restarts the sidecar.
  Json patched = Apply(pod, *patch);
  EXPECT_EQ(patched["spec"]["containers"][1]["image"], "fluentd:2");
  SidecarPodInfo info = ClassifySidecarPod(t, patched);
  EXPECT_EQ(info.state, SidecarPodState::kUpdated);
  EXPECT_TRUE(info.upgrading);
  EXPECT_FALSE(info.ready);
  Json& log = patched["status"]["containerStatuses"][1];
  log["containerID"] = "containerd://log-b";  // same digest or not: a restart is what counts
  log["state"]["running"]["startedAt"] = "2025-11-26T12:00:03Z";
  info = ClassifySidecarPod(t, patched);
  EXPECT_FALSE(info.upgrading) << info.problem;
  EXPECT_TRUE(info.ready);

  // The guard: a pod changed since (another resourceVersion) makes the patch fail.
  Json newer = pod;
  newer["metadata"]["resourceVersion"] = "42";
  EXPECT_ANY_THROW(Apply(newer, *patch));
}

TEST(SidecarPodUpgradePatch, Cases) {
  const SidecarSetUpgradeTarget t = Target();
  // Already updated: nothing to send.
  auto patch = SidecarPodUpgradePatch(t, Pod("u", Kind::kUpdated), kNow);
  ASSERT_TRUE(patch.ok());
  EXPECT_TRUE(patch->ops.empty());

  // The older name -> hash form becomes OpenKruise's entry.
  Json old_form = Pod("f", Kind::kOld);
  old_form["metadata"]["annotations"][kSidecarSetHashAnnotation] = Json({{kSet, H().old}}).dump();
  patch = SidecarPodUpgradePatch(t, old_form, kNow);
  ASSERT_TRUE(patch.ok()) << patch.status();
  EXPECT_EQ(Json::parse(patch->ops[2]["value"].get<std::string>())[kSet],
            Json({{"updateTimestamp", kNowText},
                  {"hash", t.hash},
                  {"sidecarSetName", kSet},
                  {"sidecarList", {"log"}},
                  {"controllerRevision", "log-set-rev2"}}));

  // A sidecar the pod lacks: reported, not patched.
  SidecarSetUpgradeTarget two = Target(R"({"containers": [
      {"name": "log", "image": "fluentd:2"}, {"name": "proxy", "image": "envoy:2"}]})");
  two.hash_without_image = H().now_wo;  // as if only images had changed
  patch = SidecarPodUpgradePatch(two, Pod("p", Kind::kOld), kNow);
  ASSERT_TRUE(patch.ok()) << patch.status();
  EXPECT_THAT(patch->missing, ElementsAre("proxy"));
  EXPECT_TRUE(patch->ops.empty());

  // The image already right (a set migrated with another hash): only the bookkeeping changes.
  Json same = Pod("s", Kind::kOld);
  same["spec"]["containers"][1]["image"] = "fluentd:2";
  patch = SidecarPodUpgradePatch(t, same, kNow);
  ASSERT_TRUE(patch.ok());
  EXPECT_THAT(patch->containers, IsEmpty());
  ASSERT_EQ(patch->ops.size(), 3u);  // test + two hash annotations, no in-place state
  EXPECT_EQ(
      Apply(same, *patch)["metadata"]["annotations"].count(kSidecarSetInPlaceUpdateStateAnnotation),
      0u);

  // Another set's in-place state entry survives ours.
  Json with_state = Pod("w", Kind::kOld);
  with_state["metadata"]["annotations"][kSidecarSetInPlaceUpdateStateAnnotation] =
      R"({"other-set": {"revision": "r", "lastContainerStatuses": {}}})";
  patch = SidecarPodUpgradePatch(t, with_state, kNow);
  ASSERT_TRUE(patch.ok());
  Json states = Json::parse(patch->ops.back()["value"].get<std::string>());
  EXPECT_EQ(states["other-set"]["revision"], "r");
  EXPECT_TRUE(states.contains(kSet));
}

TEST(SidecarPodUpgradePatch, Errors) {
  struct Case {
    std::string name;
    std::string set_patch;
    Json pod;
    absl::StatusCode code;
    std::string message;
  };
  Json no_rv = Pod("p", Kind::kOld);
  no_rv["metadata"].erase("resourceVersion");
  Json containers_object = Pod("p", Kind::kOld);
  containers_object["spec"]["containers"] = Json::object();
  Json bad_wo = Pod("p", Kind::kOld);
  bad_wo["metadata"]["annotations"][kSidecarSetHashWithoutImageAnnotation] = "[]";
  Json bad_state = Pod("p", Kind::kOld);
  bad_state["metadata"]["annotations"][kSidecarSetInPlaceUpdateStateAnnotation] =
      R"({"other-set": "x"})";
  Json stranger = Pod("p", Kind::kOld);
  stranger["metadata"]["annotations"][kSidecarSetHashAnnotation] = R"({"other-set": "x"})";
  Json mistyped = Pod("p", Kind::kOld);
  mistyped["status"]["containerStatuses"][1]["restartCount"] = "zero";
  Json bad_working = Pod("p", Kind::kOld);
  bad_working["metadata"]["annotations"][kSidecarSetWorkingHotUpgradeContainerAnnotation] = "[";
  const std::vector<Case> cases = {
      {"hot upgrade, working annotation not an object",
       R"({"containers": [{"name": "log", "image": "fluentd:2", "upgradeStrategy":
           {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty:1"}}]})",
       bad_working, absl::StatusCode::kInvalidArgument,
       "kruise.io/sidecarset-working-hotupgrade-container is not a JSON object"},
      {"not an object", "{}", Json(5), absl::StatusCode::kInvalidArgument, "not an object"},
      {"no resourceVersion", "{}", no_rv, absl::StatusCode::kInvalidArgument,
       "metadata.resourceVersion is required"},
      {"containers an object", "{}", containers_object, absl::StatusCode::kInvalidArgument,
       "spec.containers is not a list"},
      {"without-image not an object", "{}", bad_wo, absl::StatusCode::kInvalidArgument,
       "kruise.io/sidecarset-hash-without-image is not a JSON object"},
      {"state entry a string", "{}", bad_state, absl::StatusCode::kInvalidArgument,
       "the entry of other-set is not an object"},
      {"no entry", "{}", stranger, absl::StatusCode::kFailedPrecondition,
       "no kruise.io/sidecarset-hash entry for SidecarSet log-set"},
      {"not upgradable", "{}", Pod("p", Kind::kStale), absl::StatusCode::kFailedPrecondition,
       "changed more than images"},
      {"mistyped status", "{}", mistyped, absl::StatusCode::kInvalidArgument,
       "status.containerStatuses"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<SidecarPodPatch> patch;
    ASSERT_NO_THROW(patch = SidecarPodUpgradePatch(Target(c.set_patch), c.pod, kNow)) << c.name;
    ASSERT_FALSE(patch.ok()) << c.name;
    EXPECT_EQ(patch.status().code(), c.code) << c.name << ": " << patch.status();
    EXPECT_THAT(std::string(patch.status().message()), HasSubstr(c.message)) << c.name;
  }
}

TEST(SidecarSetUpgrade, NeverThrowsOnOddPods) {
  const SidecarSetUpgradeTarget t = Target(
      R"({"updateStrategy": {"maxUnavailable": "100%",
          "priorityStrategy": {"orderPriority": [{"orderedKey": "order"}]},
          "scatterStrategy": [{"key": "zone", "value": "*"}]}})");
  std::vector<Json> pods = {
      Json(),
      Json::array(),
      Json("x"),
      Json::object(),
      Pod("a", Kind::kOld, true, R"({"metadata": {"labels": 5}})"),
      Pod("b", Kind::kOld, true, R"({"status": {"conditions": "no"}})"),
      Pod("c", Kind::kOld, true, R"({"spec": {"containers": [1, null]}})"),
      Pod("d", Kind::kOld, true, R"({"status": {"containerStatuses": [{"name": 3}]}})"),
      Pod("e", Kind::kOld, true, R"({"metadata": {"annotations": []}})")};
  Json bad_restart = MidUpgradePod("f", false);
  bad_restart["status"]["containerStatuses"][1]["containerID"] = 12;
  pods.push_back(bad_restart);
  absl::StatusOr<SidecarSetUpgradePlan> plan;
  ASSERT_NO_THROW(plan = PlanSidecarSetUpgrade(t, Ptrs(pods)));
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (const Json& p : pods) {
    EXPECT_NO_THROW(ClassifySidecarPod(t, p));
    EXPECT_NO_THROW((void)SidecarPodUpgradePatch(t, p, kNow));
  }
  EXPECT_EQ(plan->pods[9].state, SidecarPodState::kMalformed);
}

// ---- Hot upgrade --------------------------------------------------------------------------

constexpr char kHotSpec[] = R"({"containers": [{"name": "log", "image": "IMAGE",
    "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty:1"}}]})";

// The hot SidecarSet log-set at `image` (resourceVersion 77), `strategy` its updateStrategy.
SidecarSetUpgradeTarget HotTarget(const std::string& image = "fluentd:2",
                                  const std::string& strategy = "{}") {
  std::string spec = kHotSpec;
  spec.replace(spec.find("IMAGE"), 5, image);
  Json patch = Json::parse(spec);
  patch["updateStrategy"] = Json::parse(strategy);
  Json set = Set(patch.dump(), image);
  set["metadata"]["resourceVersion"] = "77";
  auto t = ParseSidecarSetUpgradeTarget(set);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : SidecarSetUpgradeTarget{};
}

Json ContainerStatus(const std::string& name, const std::string& id, const std::string& image) {
  return {{"name", name},
          {"image", image},
          {"imageID", "sha256:" + id},
          {"containerID", "containerd://" + id},
          {"restartCount", 0},
          {"ready", true},
          {"state", {{"running", {{"startedAt", "2025-11-01T00:00:30Z"}}}}}};
}

// A pod injected by the hot log-set at `image` (log-1 working on it, log-2 idle on empty:1), as
// our webhook writes it.
Json HotPod(const std::string& name, const std::string& image = "fluentd:1", bool ready = true) {
  const SidecarSetUpgradeTarget at = HotTarget(image);
  nlohmann::ordered_json entry = {{"updateTimestamp", "2025-11-01T00:00:00Z"},
                                  {"hash", at.hash},
                                  {"sidecarSetName", kSet},
                                  {"sidecarList", {"log"}}};
  nlohmann::ordered_json entry_wo = entry;
  entry_wo["hash"] = at.hash_without_image;
  Json pod = Pod(name, Kind::kOld, ready);
  Json& a = pod["metadata"]["annotations"];
  a[kSidecarSetHashAnnotation] = nlohmann::ordered_json({{kSet, entry}}).dump();
  a[kSidecarSetHashWithoutImageAnnotation] = nlohmann::ordered_json({{kSet, entry_wo}}).dump();
  a[kSidecarSetWorkingHotUpgradeContainerAnnotation] = R"({"log":"log-1"})";
  a["version.sidecarset.kruise.io/log-1"] = "1";
  a["versionalt.sidecarset.kruise.io/log-1"] = "0";
  a["version.sidecarset.kruise.io/log-2"] = "0";
  a["versionalt.sidecarset.kruise.io/log-2"] = "1";
  pod["spec"]["containers"] = {{{"name", "app"}, {"image", "nginx:1"}},
                               {{"name", "log-1"}, {"image", image}},
                               {{"name", "log-2"}, {"image", "empty:1"}}};
  pod["status"]["containerStatuses"] = {ContainerStatus("app", "app", "nginx:1"),
                                        ContainerStatus("log-1", "log1-a", image),
                                        ContainerStatus("log-2", "log2-a", "empty:1")};
  return pod;
}

// The kubelet restarting container `i` (the same index in spec and statuses) after the patch.
void Restart(Json* pod, size_t i, const std::string& id, bool ready = true) {
  Json& s = (*pod)["status"]["containerStatuses"][i];
  s["image"] = (*pod)["spec"]["containers"][i]["image"];
  s["containerID"] = "containerd://" + id;
  s["ready"] = ready;
  s["state"]["running"]["startedAt"] = "2025-11-26T12:00:05Z";
}

// How many of the pair run a real image (not empty:1, as their status says) and are ready.
int RealAndReady(const Json& pod) {
  int n = 0;
  for (size_t i : {1u, 2u}) {
    const Json& s = pod["status"]["containerStatuses"][i];
    n += s["image"] != "empty:1" && s["ready"] == true;
  }
  return n;
}

std::string Ann(const Json& pod, const std::string& key) {
  return pod["metadata"]["annotations"].value(key, "<none>");
}

TEST(HotUpgrade, TargetReadsTheHotSidecars) {
  SidecarSetUpgradeTarget t = HotTarget();
  EXPECT_TRUE(t.hot_upgrade);
  ASSERT_EQ(t.hot.size(), 1u);
  EXPECT_EQ(t.hot[0].name, "log");
  EXPECT_EQ(t.hot[0].image, "fluentd:2");
  EXPECT_EQ(t.hot[0].empty_image, "empty:1");
  EXPECT_EQ(t.resource_version, "77");
  Json bad = Set(R"({"containers": [{"name": "log", "image": "fluentd:2",
                     "upgradeStrategy": {"upgradeType": "HotUpgrade"}}]})");
  auto parsed = ParseSidecarSetUpgradeTarget(bad);
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(std::string(parsed.status().message()),
              HasSubstr("spec.containers[0].upgradeStrategy.hotUpgradeEmptyImage"));
}

TEST(HotUpgrade, TwoStepsKeepOneWorkingSidecar) {
  const SidecarSetUpgradeTarget t = HotTarget("fluentd:2");
  Json pod = HotPod("p");
  SidecarPodInfo info = ClassifySidecarPod(t, pod);
  EXPECT_EQ(info.state, SidecarPodState::kUpgradable);
  EXPECT_FALSE(info.upgrading);
  EXPECT_EQ(RealAndReady(pod), 1);

  // Step 1: the idle container log-2 gets the image and becomes the working one.
  auto patch = SidecarPodUpgradePatch(t, pod, kNow);
  ASSERT_TRUE(patch.ok()) << patch.status();
  EXPECT_THAT(patch->containers, ElementsAre("log-2"));
  EXPECT_EQ(patch->ops[0]["op"], "test");
  EXPECT_EQ(
      patch->ops[1],
      Json({{"op", "replace"}, {"path", "/spec/containers/2/image"}, {"value", "fluentd:2"}}));
  for (const Json& op : patch->ops) {
    EXPECT_NE(op["path"], "/spec/containers/1/image") << "the working container is not touched";
  }
  pod = Apply(pod, *patch);
  EXPECT_EQ(pod["spec"]["containers"][1]["image"], "fluentd:1");
  EXPECT_EQ(pod["spec"]["containers"][2]["image"], "fluentd:2");
  EXPECT_EQ(Ann(pod, kSidecarSetWorkingHotUpgradeContainerAnnotation), R"({"log":"log-2"})");
  EXPECT_EQ(Ann(pod, "version.sidecarset.kruise.io/log-2"), "77");
  EXPECT_EQ(Ann(pod, "versionalt.sidecarset.kruise.io/log-2"), "1");  // log-1's version
  EXPECT_EQ(Ann(pod, "versionalt.sidecarset.kruise.io/log-1"), "77");
  EXPECT_EQ(Ann(pod, "version.sidecarset.kruise.io/log-1"), "1");
  Json state = Json::parse(Ann(pod, kSidecarSetInPlaceUpdateStateAnnotation));
  EXPECT_TRUE(state[kSet]["lastContainerStatuses"].contains("log-2"));
  EXPECT_FALSE(state[kSet]["lastContainerStatuses"].contains("log-1"));
  info = ClassifySidecarPod(t, pod);
  EXPECT_EQ(info.state, SidecarPodState::kUpdated);
  EXPECT_TRUE(info.upgrading);
  EXPECT_FALSE(info.ready);
  EXPECT_FALSE(info.hot_reset);
  EXPECT_EQ(RealAndReady(pod), 1);  // log-1 still runs fluentd:1

  // The kubelet restarts log-2 on the new image, not ready yet: no reset.
  Restart(&pod, 2, "log2-b", /*ready=*/false);
  pod["status"]["conditions"][0]["status"] = "False";
  info = ClassifySidecarPod(t, pod);
  EXPECT_TRUE(info.upgrading);
  EXPECT_FALSE(info.hot_reset);
  EXPECT_THAT(info.problem, HasSubstr("waiting for the upgraded container(s) to be ready"));
  // Ready: step 2 is due (every container but the idle log-1 is ready, the pod need not be).
  pod["status"]["containerStatuses"][2]["ready"] = true;
  info = ClassifySidecarPod(t, pod);
  EXPECT_TRUE(info.upgrading);
  EXPECT_TRUE(info.hot_reset) << info.problem;
  EXPECT_EQ(RealAndReady(pod), 2);

  // Step 2: the old container goes back to the empty image; the hashes are not touched.
  auto reset = SidecarPodHotUpgradeResetPatch(t, pod, kNow);
  ASSERT_TRUE(reset.ok()) << reset.status();
  EXPECT_THAT(reset->containers, ElementsAre("log-1"));
  EXPECT_EQ(reset->ops[0]["op"], "test");
  EXPECT_EQ(reset->ops[1],
            Json({{"op", "replace"}, {"path", "/spec/containers/1/image"}, {"value", "empty:1"}}));
  for (const Json& op : reset->ops) {
    EXPECT_NE(op["path"], "/metadata/annotations/kruise.io~1sidecarset-hash");
  }
  pod = Apply(pod, *reset);
  EXPECT_EQ(pod["spec"]["containers"][1]["image"], "empty:1");
  EXPECT_EQ(Ann(pod, "version.sidecarset.kruise.io/log-1"), "0");
  EXPECT_EQ(Ann(pod, "versionalt.sidecarset.kruise.io/log-2"), "0");
  EXPECT_EQ(Ann(pod, "version.sidecarset.kruise.io/log-2"), "77");
  EXPECT_EQ(RealAndReady(pod), 2);  // log-1 still runs fluentd:1 until the kubelet restarts it
  info = ClassifySidecarPod(t, pod);
  EXPECT_EQ(info.state, SidecarPodState::kUpdated);
  EXPECT_TRUE(info.upgrading);  // until the kubelet restarted log-1
  EXPECT_FALSE(info.hot_reset);
  // Nothing more to reset.
  auto again = SidecarPodHotUpgradeResetPatch(t, pod, kNow);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->ops.empty());

  // log-1 restarted on the empty image (same digest or not): the pod is updated and ready.
  Restart(&pod, 1, "log1-b");
  pod["status"]["conditions"][0]["status"] = "True";
  info = ClassifySidecarPod(t, pod);
  EXPECT_FALSE(info.upgrading) << info.problem;
  EXPECT_TRUE(info.ready);
  EXPECT_EQ(RealAndReady(pod), 1);
  patch = SidecarPodUpgradePatch(t, pod, kNow);
  ASSERT_TRUE(patch.ok());
  EXPECT_TRUE(patch->ops.empty());  // already updated

  // The next image goes to log-1 (now on the empty image) and log-1 works again.
  const SidecarSetUpgradeTarget t3 = HotTarget("fluentd:3");
  patch = SidecarPodUpgradePatch(t3, pod, kNow);
  ASSERT_TRUE(patch.ok()) << patch.status();
  EXPECT_THAT(patch->containers, ElementsAre("log-1"));
  pod = Apply(pod, *patch);
  EXPECT_EQ(Ann(pod, kSidecarSetWorkingHotUpgradeContainerAnnotation), R"({"log":"log-1"})");
  EXPECT_EQ(Ann(pod, "versionalt.sidecarset.kruise.io/log-1"), "77");  // log-2's version
  EXPECT_EQ(pod["spec"]["containers"][2]["image"], "fluentd:2");
}

TEST(HotUpgrade, ContainerChoiceAndCases) {
  const SidecarSetUpgradeTarget t = HotTarget("fluentd:3");
  // Both on real images (an earlier upgrade not reset): the one not ready is upgraded...
  Json pod = HotPod("p");
  pod["spec"]["containers"][2]["image"] = "fluentd:2";
  pod["status"]["containerStatuses"][1]["ready"] = false;
  auto patch = SidecarPodUpgradePatch(t, pod, kNow);
  ASSERT_TRUE(patch.ok()) << patch.status();
  EXPECT_THAT(patch->containers, ElementsAre("log-1"));
  // ... else the idle one (log-2: log-1 is working).
  pod["status"]["containerStatuses"][1]["ready"] = true;
  patch = SidecarPodUpgradePatch(t, pod, kNow);
  ASSERT_TRUE(patch.ok());
  EXPECT_THAT(patch->containers, ElementsAre("log-2"));
  // No working annotation: OpenKruise reads <name>-2 as working, so log-1 is idle.
  pod["metadata"]["annotations"].erase(kSidecarSetWorkingHotUpgradeContainerAnnotation);
  patch = SidecarPodUpgradePatch(t, pod, kNow);
  ASSERT_TRUE(patch.ok());
  EXPECT_THAT(patch->containers, ElementsAre("log-1"));

  // The working container already runs the image (a set migrated with another hash): only the
  // bookkeeping changes, the working annotation stays.
  Json same = HotPod("s", "fluentd:3");
  same["metadata"]["annotations"][kSidecarSetHashAnnotation] =
      Json({{kSet, {{"hash", "older"}}}}).dump();
  patch = SidecarPodUpgradePatch(t, same, kNow);
  ASSERT_TRUE(patch.ok()) << patch.status();
  EXPECT_THAT(patch->containers, IsEmpty());
  ASSERT_EQ(patch->ops.size(), 3u) << patch->ops.dump(1);  // test + two hash annotations

  // A pod lacking one of the pair is not patched.
  Json lacking = HotPod("l");
  lacking["spec"]["containers"].erase(2);
  patch = SidecarPodUpgradePatch(t, lacking, kNow);
  ASSERT_TRUE(patch.ok());
  EXPECT_THAT(patch->missing, ElementsAre("log-2"));
  EXPECT_TRUE(patch->ops.empty());

  // Malformed: the working annotation is classified, and refused by both patches.
  Json bad = HotPod("b");
  bad["metadata"]["annotations"][kSidecarSetWorkingHotUpgradeContainerAnnotation] = R"({"log": 1})";
  EXPECT_EQ(ClassifySidecarPod(t, bad).state, SidecarPodState::kMalformed);
  EXPECT_EQ(SidecarPodUpgradePatch(t, bad, kNow).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SidecarPodHotUpgradeResetPatch(t, bad, kNow).status().code(),
            absl::StatusCode::kInvalidArgument);
  Json no_rv = HotPod("r");
  no_rv["metadata"].erase("resourceVersion");
  EXPECT_EQ(SidecarPodHotUpgradeResetPatch(t, no_rv, kNow).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_NO_THROW((void)SidecarPodHotUpgradeResetPatch(t, Json(5), kNow));
}

// A hot pod after step 1 (log-2 on `image`, working); `restarted`: the kubelet restarted log-2.
Json HotMidPod(const std::string& name, bool restarted, const SidecarSetUpgradeTarget& t) {
  Json pod = HotPod(name);
  auto patch = SidecarPodUpgradePatch(t, pod, kNow);
  EXPECT_TRUE(patch.ok()) << patch.status();
  pod = Apply(pod, *patch);
  if (restarted) Restart(&pod, 2, "log2-b");
  return pod;
}

TEST(HotUpgrade, PlanResetsFirstAndCountsHotPodsAsUnavailable) {
  const SidecarSetUpgradeTarget t = HotTarget("fluentd:2", R"({"maxUnavailable": 2})");
  std::vector<Json> pods = {HotPod("old-0"), HotPod("old-1"), HotPod("old-2"),
                            HotMidPod("mid", /*restarted=*/false, t)};
  SidecarSetUpgradePlan plan = Plan(t, pods);
  EXPECT_THAT(plan.reset, IsEmpty());
  EXPECT_THAT(Names(pods, plan.upgrade), ElementsAre("old-0"));  // "mid" uses one of 2
  EXPECT_EQ(plan.updated_pods, 1);
  EXPECT_EQ(plan.ready_pods, 3);
  EXPECT_EQ(plan.updated_ready_pods, 0);

  // Its new container runs and is ready: reset it, and pick nobody else this round.
  pods[3] = HotMidPod("mid", /*restarted=*/true, t);
  plan = Plan(t, pods);
  EXPECT_THAT(Names(pods, plan.reset), ElementsAre("mid"));
  EXPECT_THAT(plan.upgrade, IsEmpty());
  EXPECT_EQ(plan.ready_pods, 3);  // mid is not ready until both steps are done

  // Paused: nothing reset either.
  plan = Plan(HotTarget("fluentd:2", R"({"maxUnavailable": 2, "paused": true})"), pods);
  EXPECT_THAT(plan.reset, IsEmpty());
  EXPECT_FALSE(plan.held.empty());

  // Reset done and the old container restarted: ready again, the budget is free.
  pods[3] = Apply(pods[3], *SidecarPodHotUpgradeResetPatch(t, pods[3], kNow));
  plan = Plan(t, pods);
  EXPECT_THAT(plan.reset, IsEmpty());
  EXPECT_EQ(plan.upgrade.size(), 1u);  // still mid: its reset container has not restarted
  Restart(&pods[3], 1, "log1-b");
  plan = Plan(t, pods);
  EXPECT_EQ(plan.upgrade.size(), 2u);
  EXPECT_EQ(plan.updated_ready_pods, 1);

  // Partition and maxUnavailable as for cold pods.
  pods = {HotPod("a"), HotPod("b"), HotPod("c")};
  plan = Plan(HotTarget("fluentd:2", R"({"partition": 2, "maxUnavailable": 3})"), pods);
  EXPECT_EQ(plan.upgrade.size(), 1u);
  plan = Plan(HotTarget("fluentd:2"), pods);  // maxUnavailable 1
  EXPECT_EQ(plan.upgrade.size(), 1u);
}

// ---- SidecarSetUpgradable ---------------------------------------------------------------

Json ApplyOps(const Json& pod, const Json& ops) { return pod.patch(ops); }

TEST(SidecarSetUpgradableCondition, WritesItsEntryOnlyWhenItChanges) {
  Json pod = Pod("p", Kind::kStale);
  EXPECT_FALSE(MarkedNotUpgradable(kSet, pod));
  auto ops = SidecarSetUpgradableConditionPatch(kSet, pod, false, kNow);
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_EQ(ops->size(), 2u) << ops->dump(1);
  EXPECT_EQ((*ops)[0],
            Json({{"op", "test"}, {"path", "/metadata/resourceVersion"}, {"value", "41"}}));
  EXPECT_EQ((*ops)[1], Json({{"op", "add"},
                             {"path", "/status/conditions/-"},
                             {"value",
                              {{"type", "SidecarSetUpgradable"},
                               {"status", "False"},
                               {"reason", "UpdateImmutableField"},
                               {"message", R"({"log-set":false})"},
                               {"lastTransitionTime", kNowText}}}}));
  pod = ApplyOps(pod, *ops);
  EXPECT_TRUE(MarkedNotUpgradable(kSet, pod));
  ops = SidecarSetUpgradableConditionPatch(kSet, pod, false, kNow + absl::Minutes(1));
  ASSERT_TRUE(ops.ok());
  EXPECT_TRUE(ops->empty());  // unchanged: nothing to write

  // Another set's entry is kept; the status is True only when every entry is.
  ops = SidecarSetUpgradableConditionPatch("other-set", pod, true, kNow);
  ASSERT_TRUE(ops.ok());
  ASSERT_EQ(ops->size(), 2u) << ops->dump(1);  // only the message changes
  EXPECT_EQ((*ops)[1], Json({{"op", "add"},
                             {"path", "/status/conditions/1/message"},
                             {"value", R"({"log-set":false,"other-set":true})"}}));
  pod = ApplyOps(pod, *ops);
  const absl::Time later = kNow + absl::Hours(1);
  ops = SidecarSetUpgradableConditionPatch(kSet, pod, true, later);
  ASSERT_TRUE(ops.ok());
  pod = ApplyOps(pod, *ops);
  EXPECT_EQ(pod["status"]["conditions"][1],
            Json({{"type", "SidecarSetUpgradable"},
                  {"status", "True"},
                  {"reason", "AllSidecarsetUpgradable"},
                  {"message", R"({"log-set":true,"other-set":true})"},
                  {"lastTransitionTime", kube::FormatRfc3339(later)}}));
  EXPECT_FALSE(MarkedNotUpgradable(kSet, pod));

  // A message that is not OpenKruise's map is replaced; no conditions list yet is created.
  pod["status"]["conditions"][1]["message"] = "hello";
  ops = SidecarSetUpgradableConditionPatch(kSet, pod, true, kNow);
  ASSERT_TRUE(ops.ok());
  EXPECT_EQ(ApplyOps(pod, *ops)["status"]["conditions"][1]["message"], R"({"log-set":true})");
  Json bare = Pod("b", Kind::kStale);
  bare["status"].erase("conditions");
  ops = SidecarSetUpgradableConditionPatch(kSet, bare, false, kNow);
  ASSERT_TRUE(ops.ok());
  EXPECT_EQ(ApplyOps(bare, *ops)["status"]["conditions"][0]["status"], "False");
  bare.erase("status");
  ops = SidecarSetUpgradableConditionPatch(kSet, bare, false, kNow);
  ASSERT_TRUE(ops.ok());
  EXPECT_EQ(ApplyOps(bare, *ops)["status"]["conditions"].size(), 1u);

  // The guard.
  Json newer = Pod("p", Kind::kStale);
  ops = SidecarSetUpgradableConditionPatch(kSet, newer, false, kNow);
  newer["metadata"]["resourceVersion"] = "42";
  EXPECT_ANY_THROW(ApplyOps(newer, *ops));
  newer["metadata"].erase("resourceVersion");
  EXPECT_EQ(SidecarSetUpgradableConditionPatch(kSet, newer, false, kNow).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(SidecarSetUpgradableConditionPatch(kSet, Json(5), false, kNow).ok());
  EXPECT_FALSE(MarkedNotUpgradable(kSet, Json(5)));
}

TEST(UpgradeMatcher, IgnoresInjectionPaused) {
  Json set = Set(R"({"injectionStrategy": {"paused": true}})");
  Json pod = Pod("p", Kind::kOld);
  EXPECT_FALSE(SidecarSetMatchesPod(set, pod, nullptr, "kruise-system"));
  PodFacts facts = PodFacts::Of(pod, "kruise-system");
  EXPECT_TRUE(UpgradeMatcher(set).Matches(facts, nullptr));
  EXPECT_TRUE(UpgradeMatcher(Set()).Matches(facts, nullptr));
  Json other = pod;
  other["metadata"]["labels"]["app"] = "db";
  EXPECT_FALSE(UpgradeMatcher(set).Matches(PodFacts::Of(other, "kruise-system"), nullptr));
}

}  // namespace upgrade_test
}  // namespace kruise::manager::sidecarset
