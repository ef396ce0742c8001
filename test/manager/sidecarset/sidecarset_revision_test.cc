#include "manager/sidecarset/sidecarset_revision.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/object.h"
#include "manager/revision/revision.h"
#include "manager/sidecarset/sidecarset_admission.h"
#include "manager/sidecarset/sidecarset_inject.h"
#include "nlohmann/json.hpp"

namespace kruise::manager::sidecarset {
// Named, not anonymous: this file may share a unity-build unit with the other SidecarSet tests.
namespace revision_test {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kNs[] = "kruise-system";

json Set(const std::string& image = "fluentd:1", const std::string& spec_patch = "{}") {
  json ss = json::parse(R"({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
    "metadata": {"name": "log-set", "uid": "uid-1", "labels": {"team": "platform"}},
    "spec": {"selector": {"matchLabels": {"app": "web"}},
             "containers": [{"name": "log", "image": ""}]}})");
  ss["spec"]["containers"][0]["image"] = image;
  ss["spec"].merge_patch(json::parse(spec_patch));
  return ss;
}

// A revision of Set(image) numbered `n`.
json Rev(const std::string& image, int64_t n, const std::string& spec_patch = "{}") {
  return NewSidecarSetRevision(Set(image, spec_patch), kNs, n, 0);
}

std::vector<std::string> Names(const std::vector<json>& revs) {
  std::vector<std::string> out;
  for (const json& r : revs) out.push_back(kube::Name(r));
  return out;
}

TEST(SidecarSetRevisionTest, DataRecordsWhatInjectionReadsAsOpenKruiseDoes) {
  json data = SidecarSetRevisionData(Set());
  ASSERT_TRUE(data["spec"].is_object());
  std::vector<std::string> keys;
  for (auto it = data["spec"].begin(); it != data["spec"].end(); ++it) keys.push_back(it.key());
  EXPECT_THAT(keys, ElementsAre("containers", "imagePullSecrets", "initContainers",
                                "patchPodMetadata", "volumes"));
  EXPECT_TRUE(data["spec"]["volumes"].is_null());
  // Defaulted: the same data whether the set went through the defaulting webhook or not.
  EXPECT_EQ(data["spec"]["containers"][0]["podInjectPolicy"], "BeforeAppContainer");
  EXPECT_EQ(SidecarSetRevisionData(DefaultSidecarSet(Set())), data);
  // Selector, update strategy and injection strategy are not part of a revision.
  EXPECT_EQ(SidecarSetRevisionData(Set("fluentd:1", R"({"selector": {"matchLabels": {"app": "db"}},
      "updateStrategy": {"partition": 3}, "injectionStrategy": {"paused": true}})")),
            data);
  EXPECT_NE(SidecarSetRevisionData(Set("fluentd:2")), data);
  EXPECT_NE(SidecarSetRevisionData(Set("fluentd:1", R"({"imagePullSecrets": [{"name": "r"}]})")),
            data);
}

TEST(SidecarSetRevisionTest, NewRevisionNamesLabelsAnnotationsAndOwner) {
  json set = Set();
  set["metadata"]["annotations"] = {{"note", "kept"}};
  json r = NewSidecarSetRevision(set, kNs, 3, 0);
  const std::string hash = revision::TemplateHash(SidecarSetRevisionData(set));
  EXPECT_EQ(r["apiVersion"], "apps/v1");
  EXPECT_EQ(r["kind"], "ControllerRevision");
  EXPECT_EQ(kube::Name(r), "log-set-" + hash);
  EXPECT_EQ(kube::Name(r), SidecarSetRevisionName(set, SidecarSetRevisionData(set), 0));
  EXPECT_EQ(kube::Namespace(r), kNs);
  EXPECT_EQ(r["revision"], 3);
  EXPECT_EQ(r["data"], SidecarSetRevisionData(set));
  EXPECT_EQ(kube::Labels(r),
            (std::map<std::string, std::string>{{"controller-revision-hash", hash},
                                                {"kruise.io/sidecarset-name", "log-set"},
                                                {"team", "platform"}}));
  EXPECT_EQ(kube::Annotation(r, "note"), "kept");
  EXPECT_EQ(kube::Annotation(r, kSidecarSetHashAnnotation), SidecarSetRecordedHash(set));
  EXPECT_EQ(kube::Annotation(r, kSidecarSetHashWithoutImageAnnotation),
            SidecarSetRecordedHashWithoutImage(set));
  auto owner = kube::ControllerOf(r);
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(owner->uid, "uid-1");
  EXPECT_EQ(owner->kind, "SidecarSet");
  // A collision count renames it; 0 is "none".
  EXPECT_NE(kube::Name(NewSidecarSetRevision(set, kNs, 3, 1)), kube::Name(r));
  EXPECT_EQ(kube::Name(NewSidecarSetRevision(set, kNs, 4, 0)), kube::Name(r));
}

TEST(SidecarSetRevisionTest, CustomVersionFromSpecOrLabel) {
  json set = Set();
  EXPECT_EQ(SidecarSetCustomVersion(set), "");
  set["metadata"]["labels"][kSidecarSetCustomVersionLabel] = "from-label";
  EXPECT_EQ(SidecarSetCustomVersion(set), "from-label");
  EXPECT_EQ(kube::Label(NewSidecarSetRevision(set, kNs, 1, 0), kSidecarSetCustomVersionLabel),
            "from-label");
  set["spec"]["customVersion"] = "v1beta1-field";
  EXPECT_EQ(SidecarSetCustomVersion(set), "v1beta1-field");
  EXPECT_EQ(kube::Label(NewSidecarSetRevision(set, kNs, 1, 0), kSidecarSetCustomVersionLabel),
            "v1beta1-field");
}

TEST(SidecarSetRevisionTest, RevisionsOfASetSortedAndNotANamesakes) {
  json other_owner = Rev("fluentd:9", 0);
  other_owner["metadata"]["ownerReferences"][0]["uid"] = "uid-of-a-deleted-set";
  json other_set = Rev("fluentd:8", 0);
  other_set["metadata"]["labels"]["kruise.io/sidecarset-name"] = "another";
  json a = Rev("fluentd:1", 2), b = Rev("fluentd:2", 1), c = Rev("fluentd:3", 2);
  a["metadata"]["creationTimestamp"] = "2025-01-02T00:00:00Z";
  c["metadata"]["creationTimestamp"] = "2025-01-01T00:00:00Z";
  EXPECT_EQ(Names(RevisionsOfSidecarSet(Set(), {a, other_owner, b, other_set, c})),
            (std::vector<std::string>{kube::Name(b), kube::Name(c), kube::Name(a)}));
}

TEST(SidecarSetRevisionTest, LatestRevisionPlan) {
  struct Case {
    std::string name;
    std::vector<json> history;
    LatestRevisionPlan::Action action;
    int64_t number;
  };
  const std::vector<Case> cases = {
      {"no history: create 1", {}, LatestRevisionPlan::Action::kCreate, 1},
      {"newest records the spec: keep",
       {Rev("fluentd:0", 1), Rev("fluentd:1", 2)},
       LatestRevisionPlan::Action::kKeep,
       2},
      {"an older one does: renumber it",
       {Rev("fluentd:1", 1), Rev("fluentd:2", 4)},
       LatestRevisionPlan::Action::kRenumber,
       5},
      {"none does: create the next",
       {Rev("fluentd:0", 1), Rev("fluentd:2", 7)},
       LatestRevisionPlan::Action::kCreate,
       8},
  };
  for (const Case& c : cases) {
    LatestRevisionPlan plan = PlanLatestSidecarSetRevision(Set(), c.history, kNs);
    EXPECT_EQ(plan.action, c.action) << c.name;
    EXPECT_EQ(plan.revision_number, c.number) << c.name;
    EXPECT_EQ(plan.revision["data"], SidecarSetRevisionData(Set())) << c.name;
    if (c.action == LatestRevisionPlan::Action::kCreate) {
      EXPECT_EQ(plan.revision["revision"], c.number) << c.name;
      EXPECT_EQ(kube::Namespace(plan.revision), kNs) << c.name;
    }
  }
  // The set's collision count names the new revision.
  json collided = Set();
  collided["status"]["collisionCount"] = 2;
  EXPECT_EQ(kube::Name(PlanLatestSidecarSetRevision(collided, {}, kNs).revision),
            kube::Name(NewSidecarSetRevision(Set(), kNs, 1, 2)));
}

TEST(SidecarSetRevisionTest, LatestNameIsTheRecordingRevisionOrTheOneToBeCreated) {
  EXPECT_EQ(LatestSidecarSetRevisionName(Set(), {}), kube::Name(Rev("fluentd:1", 1)));
  json renamed = Rev("fluentd:1", 1);  // recorded under an earlier collision count
  renamed["metadata"]["name"] = "log-set-older";
  EXPECT_EQ(LatestSidecarSetRevisionName(Set(), {renamed, Rev("fluentd:2", 2)}), "log-set-older");
}

TEST(SidecarSetRevisionTest, PruneOldestBeyondTheLimitKeepingWhatIsInUse) {
  std::vector<json> h;
  for (int i = 1; i <= 5; ++i) h.push_back(Rev("fluentd:" + std::to_string(i), i));
  auto name = [&](int i) { return kube::Name(h[i - 1]); };
  struct Case {
    std::string name;
    std::string spec_patch;
    std::set<std::string> used;
    std::vector<std::string> pruned;
  };
  const std::vector<Case> cases = {
      {"default limit 10", "{}", {}, {}},
      {"limit 3", R"({"revisionHistoryLimit": 3})", {}, {name(1), name(2)}},
      {"limit 0 keeps the newest",
       R"({"revisionHistoryLimit": 0})",
       {},
       {name(1), name(2), name(3), name(4)}},
      {"pods use 1", R"({"revisionHistoryLimit": 3})", {name(1)}, {name(2), name(3)}},
      {"revisionName keeps 2",
       R"({"revisionHistoryLimit": 3,
         "injectionStrategy": {"revision": {"revisionName": ")" +
           name(2) + R"("}}})",
       {},
       {name(1), name(3)}},
      {"in use everywhere: fewer",
       R"({"revisionHistoryLimit": 1})",
       {name(1), name(2), name(3), name(4)},
       {}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(SidecarSetRevisionsToPrune(Set("fluentd:5", c.spec_patch), h, c.used), c.pruned)
        << c.name;
  }
  // customVersion keeps the newest revision labelled with it.
  h[0]["metadata"]["labels"][kSidecarSetCustomVersionLabel] = "stable";
  h[1]["metadata"]["labels"][kSidecarSetCustomVersionLabel] = "stable";
  EXPECT_EQ(SidecarSetRevisionsToPrune(Set("fluentd:5", R"({"revisionHistoryLimit": 3,
                    "injectionStrategy": {"revision": {"customVersion": "stable"}}})"),
                                       h, {}),
            (std::vector<std::string>{name(1), name(3)}));
}

TEST(SidecarSetRevisionTest, PodControllerRevisionFromTheHashAnnotation) {
  json pod = {
      {"metadata",
       {{"annotations",
         {{kSidecarSetHashAnnotation,
           R"({"log-set": {"hash": "h", "controllerRevision": "log-set-abc"}, "x": {"hash": "y"}})"}}}}}};
  EXPECT_EQ(PodSidecarSetControllerRevision(pod, "log-set"), "log-set-abc");
  EXPECT_EQ(PodSidecarSetControllerRevision(pod, "x"), "");
  EXPECT_EQ(PodSidecarSetControllerRevision(pod, "absent"), "");
  pod["metadata"]["annotations"][kSidecarSetHashAnnotation] = R"({"log-set": "old-form"})";
  EXPECT_EQ(PodSidecarSetControllerRevision(pod, "log-set"), "");
  pod["metadata"]["annotations"][kSidecarSetHashAnnotation] = "not json";
  EXPECT_EQ(PodSidecarSetControllerRevision(pod, "log-set"), "");
  EXPECT_EQ(PodSidecarSetControllerRevision(json::object(), "log-set"), "");
}

TEST(SidecarSetRevisionTest, FindTheInjectionRevisionByNameOrCustomVersion) {
  std::vector<json> h = {Rev("fluentd:1", 1), Rev("fluentd:2", 2), Rev("fluentd:3", 3)};
  h[0]["metadata"]["labels"][kSidecarSetCustomVersionLabel] = "stable";
  h[1]["metadata"]["labels"][kSidecarSetCustomVersionLabel] = "stable";
  auto find = [&](const std::string& revision) {
    const json* r = FindInjectionRevision(
        Set("fluentd:3", R"({"injectionStrategy": {"revision": )" + revision + "}}"), h);
    return r == nullptr ? std::string("<none>") : kube::Name(*r);
  };
  EXPECT_EQ(find(R"({"revisionName": ")" + kube::Name(h[0]) + R"("})"), kube::Name(h[0]));
  EXPECT_EQ(find(R"({"customVersion": "stable"})"), kube::Name(h[1]));  // the newest
  EXPECT_EQ(find(R"({"customVersion": "canary"})"), "<none>");
  EXPECT_EQ(find(R"({"revisionName": "log-set-gone"})"), "<none>");
  EXPECT_EQ(find("{}"), "<none>");
  EXPECT_EQ(FindInjectionRevision(Set(), h), nullptr);
  EXPECT_THAT(MissingInjectionRevisionMessage(Set(
                  "x", R"({"injectionStrategy": {"revision": {"revisionName": "log-set-gone"}}})")),
              HasSubstr("revisionName \"log-set-gone\" matches no ControllerRevision"));
  EXPECT_THAT(MissingInjectionRevisionMessage(
                  Set("x", R"({"injectionStrategy": {"revision": {"customVersion": "canary"}}})")),
              HasSubstr("customVersion \"canary\""));
}

TEST(SidecarSetRevisionTest, RestoreTheRecordedSpec) {
  json old_set = Set("fluentd:1", R"({"volumes": [{"name": "logs", "emptyDir": {}}],
      "patchPodMetadata": [{"annotations": {"a": "1"}}]})");
  json rev = NewSidecarSetRevision(old_set, kNs, 1, 0);
  json current = Set("fluentd:3", R"({
      "containers": [{"name": "log", "image": "fluentd:3"}, {"name": "metrics", "image": "m:1"}],
      "imagePullSecrets": [{"name": "registry"}],
      "patchPodMetadata": [{"annotations": {"b": "2"}}],
      "updateStrategy": {"paused": true}})");
  json restored = RestoreSidecarSetRevision(current, rev);
  // Containers merged by name: the recorded "log", then the current-only "metrics".
  ASSERT_EQ(restored["spec"]["containers"].size(), 2u);
  EXPECT_EQ(restored["spec"]["containers"][0]["image"], "fluentd:1");
  EXPECT_EQ(restored["spec"]["containers"][1]["name"], "metrics");
  const json recorded = DefaultSidecarSet(old_set);  // revisions record the defaulted spec
  EXPECT_EQ(restored["spec"]["volumes"], recorded["spec"]["volumes"]);
  EXPECT_FALSE(restored["spec"].contains("imagePullSecrets"));  // recorded as null
  EXPECT_EQ(restored["spec"]["patchPodMetadata"], recorded["spec"]["patchPodMetadata"]);
  EXPECT_EQ(restored["spec"]["updateStrategy"], current["spec"]["updateStrategy"]);
  EXPECT_EQ(restored["status"]["latestRevision"], kube::Name(rev));
  EXPECT_EQ(kube::Annotation(restored, kSidecarSetHashAnnotation), SidecarSetRecordedHash(old_set));
  EXPECT_EQ(kube::Annotation(restored, kSidecarSetHashWithoutImageAnnotation),
            SidecarSetRecordedHashWithoutImage(old_set));
  // A revision without hash annotations: hashes of the restored spec.
  rev["metadata"].erase("annotations");
  json computed = RestoreSidecarSetRevision(current, rev);
  EXPECT_EQ(kube::Annotation(computed, kSidecarSetHashAnnotation), SidecarSetHash(computed));
}

TEST(SidecarSetRevisionTest, WhichPodsGetTheHistoryRevision) {
  struct Case {
    std::string name;
    std::string spec_patch;
    std::string app;
    double draw;
    bool history;
  };
  const std::vector<Case> cases = {
      {"Always", R"({"revision": {"revisionName": "r", "policy": "Always"}})", "web", 0.9, true},
      {"default policy", R"({"revision": {"revisionName": "r"}})", "web", 0.9, true},
      {"Partial, no partition", R"({"revision": {"revisionName": "r", "policy": "Partial"}})",
       "web", 0.0, false},
      {"Partial, integer partition", R"({"revision": {"revisionName": "r", "policy": "Partial"},
         "partition": 3})",
       "web", 0.0, false},
      {"Partial, 30% drawn 0.29", R"({"revision": {"revisionName": "r", "policy": "Partial"},
         "partition": "30%"})",
       "web", 0.29, true},
      {"Partial, 30% drawn 0.3", R"({"revision": {"revisionName": "r", "policy": "Partial"},
         "partition": "30%"})",
       "web", 0.3, false},
      {"Partial, 100%", R"({"revision": {"revisionName": "r", "policy": "Partial"},
         "partition": "100%"})",
       "web", 0.999, true},
      {"Partial, updateStrategy.selector misses the pod", R"({"revision": {"revisionName": "r",
         "policy": "Partial"}, "selector": {"matchLabels": {"canary": "true"}}})",
       "web", 0.9, true},
      {"Partial, updateStrategy.selector selects the pod", R"({"revision": {"revisionName": "r",
         "policy": "Partial"}, "selector": {"matchLabels": {"app": "web"}}})",
       "web", 0.9, false},
      {"Partial, updateStrategy paused", R"({"revision": {"revisionName": "r",
         "policy": "Partial"}, "paused": true})",
       "web", 0.9, true},
      {"Partial, malformed partition", R"({"revision": {"revisionName": "r",
         "policy": "Partial"}, "partition": "x%"})",
       "web", 0.0, false},
  };
  for (const Case& c : cases) {
    // The case's "revision" goes to injectionStrategy, the rest to updateStrategy.
    json patch = json::parse(c.spec_patch);
    json spec = {{"injectionStrategy", {{"revision", patch["revision"]}}}};
    patch.erase("revision");
    spec["updateStrategy"] = patch;
    EXPECT_EQ(InjectHistoryRevision(Set("fluentd:1", spec.dump()), {{"app", c.app}}, c.draw),
              c.history)
        << c.name;
  }
}

}  // namespace revision_test
}  // namespace kruise::manager::sidecarset
