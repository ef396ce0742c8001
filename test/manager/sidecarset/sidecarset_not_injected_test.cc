#include "manager/sidecarset/sidecarset_not_injected.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/client.h"
#include "kube/object.h"

namespace kruise::manager::sidecarset {
// Named, not anonymous: this file may share a unity-build unit with the other SidecarSet tests.
namespace not_injected_test {

using kube::Json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kSetCreated[] = "2025-11-26T12:00:00Z";
constexpr char kPodCreated[] = "2025-11-26T12:00:30Z";

// SidecarSet `name` created at kSetCreated, selecting app=web, `spec_patch` merged into its spec.
Json Set(const std::string& name, const Json& spec_patch = Json::object()) {
  Json s = {{"apiVersion", "apps.kruise.io/v1alpha1"},
            {"kind", "SidecarSet"},
            {"metadata", {{"name", name}, {"creationTimestamp", kSetCreated}}},
            {"spec",
             {{"selector", {{"matchLabels", {{"app", "web"}}}}},
              {"containers", {{{"name", "log"}, {"image", "fluentd:1"}}}}}}};
  s["spec"].merge_patch(spec_patch);
  return s;
}

// Pod "web" of namespace team created at kPodCreated, labelled app=web, `patch` merged in.
Json Pod(const Json& patch = Json::object()) {
  Json p = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata",
             {{"name", "web"},
              {"namespace", "team"},
              {"resourceVersion", "41"},
              {"creationTimestamp", kPodCreated},
              {"labels", {{"app", "web"}}}}},
            {"status", {{"phase", "Running"}}}};
  p.merge_patch(patch);
  return p;
}

Json Namespace(const std::string& name, const Json& labels) {
  return {{"apiVersion", "v1"},
          {"kind", "Namespace"},
          {"metadata", {{"name", name}, {"labels", labels}}}};
}

struct Case {
  std::string name;
  std::vector<Json> sets;
  Json pod;
  Json ns;  // the pod's Namespace; null: unknown
  std::vector<std::string> want;
};

Json Meta(const Json& meta) { return {{"metadata", meta}}; }
Json Annotated(const std::string& key, const std::string& value) {
  return Meta({{"annotations", {{key, value}}}});
}

TEST(SidecarSetsNotInjectedTest, Table) {
  const Json team = Namespace("team", {{"env", "prod"}});
  const std::vector<Case> cases = {
      {"created after the set, not injected", {Set("log")}, Pod(), team, {"log"}},
      {"created before the set",
       {Set("log")},
       Pod(Meta({{"creationTimestamp", "2025-11-26T11:59:59Z"}})),
       team,
       {}},
      {"created in the same second as the set",
       {Set("log")},
       Pod(Meta({{"creationTimestamp", kSetCreated}})),
       team,
       {}},
      {"paused set", {Set("log", {{"injectionStrategy", {{"paused", true}}}})}, Pod(), team, {}},
      {"selector does not match",
       {Set("log", {{"selector", {{"matchLabels", {{"app", "db"}}}}}})},
       Pod(),
       team,
       {}},
      {"already injected",
       {Set("log")},
       Pod(Annotated(kSidecarSetInjectedListAnnotation, "log")),
       team,
       {}},
      {"already noted",
       {Set("log")},
       Pod(Annotated(kSidecarSetNotInjectedAnnotation, "log")),
       team,
       {}},
      {"another set noted, this one not yet",
       {Set("log"), Set("audit")},
       Pod(Annotated(kSidecarSetNotInjectedAnnotation, " audit ")),
       team,
       {"log"}},
      {"one injected, one missing",
       {Set("log"), Set("audit")},
       Pod(Annotated(kSidecarSetInjectedListAnnotation, "audit")),
       team,
       {"log"}},
      {"two missing, sorted", {Set("log"), Set("audit")}, Pod(), team, {"audit", "log"}},
      {"being deleted",
       {Set("log")},
       Pod(Meta({{"deletionTimestamp", "2025-11-26T12:01:00Z"}})),
       team,
       {}},
      {"finished", {Set("log")}, Pod({{"status", {{"phase", "Succeeded"}}}}), team, {}},
      {"namespaceSelector matches",
       {Set("log", {{"namespaceSelector", {{"matchLabels", {{"env", "prod"}}}}}})},
       Pod(),
       team,
       {"log"}},
      {"namespaceSelector does not match",
       {Set("log", {{"namespaceSelector", {{"matchLabels", {{"env", "dev"}}}}}})},
       Pod(),
       team,
       {}},
      {"namespaceSelector, namespace unknown",
       {Set("log", {{"namespaceSelector", {{"matchLabels", {{"env", "prod"}}}}}})},
       Pod(),
       nullptr,
       {}},
      {"spec.namespace elsewhere", {Set("log", {{"namespace", "other"}})}, Pod(), team, {}},
      {"spec.namespace the pod's", {Set("log", {{"namespace", "team"}})}, Pod(), team, {"log"}},
      {"kube-system", {Set("log")}, Pod(Meta({{"namespace", "kube-system"}})), nullptr, {}},
      {"the manager's namespace",
       {Set("log")},
       Pod(Meta({{"namespace", "kruise-system"}})),
       nullptr,
       {}},
      {"namespace the pod webhook skips",
       {Set("log")},
       Pod(),
       Namespace("team", {{"pod-webhook.kruise.io/disabled", "true"}}),
       {}},
      {"set without creationTimestamp",
       {[] {
         Json s = Set("log");
         s["metadata"].erase("creationTimestamp");
         return s;
       }()},
       Pod(),
       team,
       {}},
      {"pod without creationTimestamp",
       {Set("log")},
       [] {
         Json p = Pod();
         p["metadata"].erase("creationTimestamp");
         return p;
       }(),
       team,
       {}},
  };
  for (const Case& c : cases) {
    std::vector<std::unique_ptr<CreatedSidecarSet>> owned;
    std::vector<const CreatedSidecarSet*> sets;
    for (const Json& s : c.sets) {
      owned.push_back(std::make_unique<CreatedSidecarSet>(s));
      sets.push_back(owned.back().get());
    }
    int lookups = 0;
    NamespaceLookup lookup = [&](const std::string& name) -> std::shared_ptr<const Json> {
      ++lookups;
      if (c.ns.is_null() || kube::Name(c.ns) != name) return nullptr;
      return std::make_shared<const Json>(c.ns);
    };
    EXPECT_EQ(SidecarSetsNotInjected(c.pod, sets, lookup, "kruise-system"), c.want) << c.name;
    EXPECT_LE(lookups, 1) << c.name;
  }
}

TEST(SidecarSetsNotInjectedTest, NamespaceLookedUpOnlyForCandidates) {
  CreatedSidecarSet set(Set("log"));
  int lookups = 0;
  NamespaceLookup lookup = [&](const std::string&) -> std::shared_ptr<const Json> {
    ++lookups;
    return nullptr;
  };
  EXPECT_THAT(SidecarSetsNotInjected(Pod(Annotated(kSidecarSetInjectedListAnnotation, "log")),
                                     {&set}, lookup, "kruise-system"),
              IsEmpty());
  EXPECT_THAT(SidecarSetsNotInjected(Pod(Meta({{"creationTimestamp", kSetCreated}})), {&set},
                                     lookup, "kruise-system"),
              IsEmpty());
  EXPECT_EQ(lookups, 0);
  EXPECT_THAT(SidecarSetsNotInjected(Pod(), {&set, nullptr}, nullptr, "kruise-system"),
              ElementsAre("log"));
  EXPECT_THAT(SidecarSetsNotInjected(Json("not a pod"), {&set}, lookup, ""), IsEmpty());
}

TEST(SidecarSetNotInjectedPatchTest, MergesSortedNamesIntoTheOneAnnotationWithTheVersion) {
  EXPECT_EQ(SidecarSetNotInjectedPatch(Pod(), {"log", "audit"}),
            Json::parse(R"({"metadata": {"resourceVersion": "41",
              "annotations": {"kruise.io/sidecarset-not-injected": "audit,log"}}})"));
  const Json noted = Pod(Annotated(kSidecarSetNotInjectedAnnotation, "zz, audit"));
  EXPECT_THAT(NotInjectedSidecarSetsNoted(noted), ElementsAre("zz", "audit"));
  EXPECT_EQ(SidecarSetNotInjectedPatch(noted, {"log"})["metadata"]["annotations"],
            Json({{kSidecarSetNotInjectedAnnotation, "audit,log,zz"}}));
}

TEST(SidecarSetNotInjectedMessageTest, NamesTheSetsTheCauseAndTheRemedy) {
  const std::string one = SidecarSetNotInjectedMessage({"log"});
  EXPECT_THAT(one, HasSubstr("SidecarSet log "));
  EXPECT_THAT(one, HasSubstr("pod webhook did not inject"));
  EXPECT_THAT(one, HasSubstr("kruise-manager"));
  EXPECT_THAT(one, HasSubstr("recreate the pod"));
  EXPECT_THAT(SidecarSetNotInjectedMessage({"audit", "log"}), HasSubstr("SidecarSets audit, log "));
}

TEST(PodWebhookSkipsNamespaceTest, TheWebhookConfigurationsNamespaceSelector) {
  EXPECT_FALSE(PodWebhookSkipsNamespace(nullptr));
  const Json team = Namespace("team", {{"env", "prod"}});
  EXPECT_FALSE(PodWebhookSkipsNamespace(&team));
  const Json disabled = Namespace("team", {{"pod-webhook.kruise.io/disabled", ""}});
  EXPECT_TRUE(PodWebhookSkipsNamespace(&disabled));
  const Json kruise = Namespace("kruise-system", {{"control-plane", "openkruise"}});
  EXPECT_TRUE(PodWebhookSkipsNamespace(&kruise));
}

TEST(CreatedSidecarSetsTest, FollowsTheSets) {
  CreatedSidecarSets sets;
  EXPECT_THAT(sets.Get()->all, IsEmpty());
  sets.Upsert(Set("log"));
  sets.Upsert(Set("audit"));
  auto before = sets.Get();
  ASSERT_EQ(before->all.size(), 2u);
  EXPECT_EQ(before->all[0]->matcher.name(), "audit");
  // A change rebuilds that set's entry; snapshots already taken stay as they were.
  sets.Upsert(Set("log", {{"injectionStrategy", {{"paused", true}}}}));
  EXPECT_TRUE(sets.Get()->by_name.at("log")->matcher.never());
  EXPECT_FALSE(before->by_name.at("log")->matcher.never());
  sets.Remove("audit");
  sets.Remove("missing");
  ASSERT_EQ(sets.Get()->all.size(), 1u);
  EXPECT_EQ(sets.Get()->all[0]->matcher.name(), "log");
  EXPECT_EQ(sets.Get()->all[0]->created, kube::ParseRfc3339(kSetCreated).value());
}

TEST(CreatedSidecarSetsTest, APodEventTestsOnlyTheSetsItsLabelsCanMatch) {
  CreatedSidecarSets sets;
  sets.Upsert(Set("web"));  // app=web
  sets.Upsert(Set(
      "tiers",
      {{"selector",
        {{"matchLabels", nullptr},
         {"matchExpressions", {{{"key", "tier"}, {"operator", "In"}, {"values", {"a", "b"}}}}}}}}));
  sets.Upsert(
      Set("any-tier", {{"selector",
                        {{"matchLabels", nullptr},
                         {"matchExpressions", {{{"key", "tier"}, {"operator", "Exists"}}}}}}}));
  sets.Upsert(Set("paused", {{"injectionStrategy", {{"paused", true}}}}));
  auto names = [&](const Json& labels) {
    std::vector<std::string> out;
    for (const CreatedSidecarSet* s : sets.Get()->For(Meta({{"labels", labels}}))) {
      out.push_back(s->matcher.name());
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_THAT(names({{"app", "web"}}), ElementsAre("any-tier", "web"));
  EXPECT_THAT(names({{"app", "web"}, {"tier", "b"}}), ElementsAre("any-tier", "tiers", "web"));
  EXPECT_THAT(names({{"app", "db"}, {"tier", "c"}}), ElementsAre("any-tier"));
  EXPECT_THAT(names(Json::object()), ElementsAre("any-tier"));
  EXPECT_THAT(sets.Get()->For(Json("not a pod")), ::testing::SizeIs(1));
  EXPECT_EQ(sets.Get()->all.size(), 4u);  // the paused one too, never offered
}

}  // namespace not_injected_test
}  // namespace kruise::manager::sidecarset
