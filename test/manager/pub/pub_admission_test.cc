// PUB admission: OpenKruise's loose selector overlap, the conflict check, which PUB guards a pod
// and the PUB validating handler over a PubCache fed by hand.

#include "manager/pub/pub_admission.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "manager/pub/pub_webhook.h"

namespace kruise::manager::pub {
namespace {

using kube::Json;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

Json Sel(const char* text) { return Json::parse(text); }

TEST(PubSelectorOverlapTest, OpenKruiseTable) {
  struct Case {
    const char* a;
    const char* b;
    bool overlap;
  } cases[] = {
      {R"({"matchLabels": {"app": "web"}})", R"({"matchLabels": {"app": "web"}})", true},
      {R"({"matchLabels": {"app": "web"}})", R"({"matchLabels": {"app": "db"}})", false},
      // Different keys: not an overlap by this test.
      {R"({"matchLabels": {"app": "web"}})", R"({"matchLabels": {"tier": "front"}})", false},
      {R"({"matchLabels": {"app": "web"}})",
       R"({"matchLabels": {"app": "web", "tier": "front"}})", false},
      {R"({"matchExpressions": [{"key": "a", "operator": "In", "values": ["b", "c"]}]})",
       R"({"matchExpressions": [{"key": "a", "operator": "Exists"}]})", true},
      {R"({"matchExpressions": [{"key": "a", "operator": "In", "values": ["b", "c"]}]})",
       R"({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b", "c", "e"]}]})",
       false},
      {R"({"matchExpressions": [{"key": "a", "operator": "In", "values": ["b", "c"]}]})",
       R"({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b"]}]})", true},
      {R"({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b"]}]})",
       R"({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]})", true},
      {R"({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]})",
       R"({"matchExpressions": [{"key": "a", "operator": "Exists"}]})", false},
      {R"({"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]})",
       R"({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]})", false},
      // matchLabels override an expression on the same key.
      {R"({"matchLabels": {"a": "x"}, "matchExpressions": [{"key": "a", "operator": "In",
           "values": ["y"]}]})",
       R"({"matchLabels": {"a": "x"}})", true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(SelectorsLooselyOverlap(Sel(c.a), Sel(c.b)), c.overlap) << c.a << " vs " << c.b;
    EXPECT_EQ(SelectorsLooselyOverlap(Sel(c.b), Sel(c.a)), c.overlap) << c.b << " vs " << c.a;
  }
  EXPECT_FALSE(SelectorsLooselyOverlap(Json(), Sel(R"({"matchLabels": {"a": "b"}})")));
}

Json SelectorPub(const std::string& name, const std::string& app) {
  return {{"apiVersion", "policy.kruise.io/v1alpha1"},
          {"kind", "PodUnavailableBudget"},
          {"metadata", {{"name", name}, {"namespace", "team"}}},
          {"spec", {{"selector", {{"matchLabels", {{"app", app}}}}}, {"maxUnavailable", 1}}}};
}

Json RefPub(const std::string& name, const std::string& api_version, const std::string& kind,
            const std::string& target) {
  return {{"apiVersion", "policy.kruise.io/v1alpha1"},
          {"kind", "PodUnavailableBudget"},
          {"metadata", {{"name", name}, {"namespace", "team"}}},
          {"spec",
           {{"targetRef", {{"apiVersion", api_version}, {"kind", kind}, {"name", target}}},
            {"minAvailable", "50%"}}}};
}

std::vector<std::shared_ptr<const Json>> Objects(std::vector<Json> v) {
  std::vector<std::shared_ptr<const Json>> out;
  for (Json& j : v) out.push_back(std::make_shared<const Json>(std::move(j)));
  return out;
}

TEST(PubConflictTest, SameWorkloadOrOverlappingSelector) {
  // Same group and kind, other version: the same workload.
  auto conflicts = PubConflicts(RefPub("b", "apps.kruise.io/v1beta1", "CloneSet", "web"),
                                Objects({RefPub("a", "apps.kruise.io/v1alpha1", "CloneSet", "web")}));
  ASSERT_EQ(conflicts.size(), 1u);
  EXPECT_THAT(conflicts[0], HasSubstr("spec.targetRef"));
  EXPECT_THAT(conflicts[0], HasSubstr("PodUnavailableBudget a"));
  // Another group's StatefulSet, another name: none.
  EXPECT_THAT(PubConflicts(RefPub("b", "apps/v1", "StatefulSet", "web"),
                           Objects({RefPub("a", "apps.kruise.io/v1beta1", "StatefulSet", "web"),
                                    RefPub("c", "apps/v1", "StatefulSet", "db")})),
              IsEmpty());
  conflicts = PubConflicts(SelectorPub("b", "web"),
                           Objects({SelectorPub("a", "db"), SelectorPub("c", "web"),
                                    SelectorPub("d", "web")}));
  ASSERT_EQ(conflicts.size(), 1u);  // the first only
  EXPECT_THAT(conflicts[0], HasSubstr("spec.selector"));
  EXPECT_THAT(conflicts[0], HasSubstr("PodUnavailableBudget c"));
  // Itself (an UPDATE) and a selector against a targetRef: none.
  EXPECT_THAT(PubConflicts(SelectorPub("b", "web"),
                           Objects({SelectorPub("b", "web"),
                                    RefPub("a", "apps/v1", "Deployment", "web")})),
              IsEmpty());
}

Json PodOwnedBy(const std::string& api_version, const std::string& kind, const std::string& name,
                const Json& labels = Json::object()) {
  return {{"metadata",
           {{"name", "p"},
            {"namespace", "team"},
            {"labels", labels},
            {"ownerReferences",
             {{{"apiVersion", api_version},
               {"kind", kind},
               {"name", name},
               {"uid", "u"},
               {"controller", true}}}}}}};
}

TEST(PubCoversPodTest, SelectorAndTargetRef) {
  Pub by_selector = *ParsePub(SelectorPub("s", "web"));
  EXPECT_TRUE(PubCoversPod(by_selector, PodOwnedBy("apps/v1", "ReplicaSet", "x", {{"app", "web"}})));
  EXPECT_FALSE(PubCoversPod(by_selector, PodOwnedBy("apps/v1", "ReplicaSet", "x", {{"app", "db"}})));

  Pub deploy = *ParsePub(RefPub("d", "apps/v1", "Deployment", "web"));
  EXPECT_TRUE(PubCoversPod(deploy, PodOwnedBy("apps/v1", "ReplicaSet", "web-7d9f",
                                              {{"pod-template-hash", "7d9f"}})));
  // web-api-7d9f is another Deployment's ReplicaSet.
  EXPECT_FALSE(PubCoversPod(deploy, PodOwnedBy("apps/v1", "ReplicaSet", "web-api-7d9f",
                                               {{"pod-template-hash", "7d9f"}})));
  EXPECT_FALSE(PubCoversPod(deploy, PodOwnedBy("apps/v1", "ReplicaSet", "web-7d9f")));

  Pub cloneset = *ParsePub(RefPub("c", "apps.kruise.io/v1alpha1", "CloneSet", "web"));
  EXPECT_TRUE(PubCoversPod(cloneset, PodOwnedBy("apps.kruise.io/v1alpha1", "CloneSet", "web")));
  EXPECT_FALSE(PubCoversPod(cloneset, PodOwnedBy("apps.kruise.io/v1alpha1", "CloneSet", "db")));
  Pub asts = *ParsePub(RefPub("a", "apps.kruise.io/v1beta1", "StatefulSet", "web"));
  EXPECT_FALSE(PubCoversPod(asts, PodOwnedBy("apps/v1", "StatefulSet", "web")));
  EXPECT_TRUE(PubCoversPod(asts, PodOwnedBy("apps.kruise.io/v1alpha1", "StatefulSet", "web")));
  Json orphan = {{"metadata", {{"name", "p"}, {"namespace", "team"}}}};
  EXPECT_FALSE(PubCoversPod(asts, orphan));
}

webhook::AdmissionRequest PubRequest(const std::string& op, const Json& object,
                                     const Json& old = Json()) {
  webhook::AdmissionRequest r;
  r.operation = op;
  r.namespace_ = "team";
  r.name = kube::Name(object);
  r.object = object;
  r.old_object = old;
  return r;
}

TEST(PubValidatingHandlerTest, ProblemsConflictsAndGates) {
  PubCache cache;
  cache.Upsert(SelectorPub("a", "web"));
  cache.Upsert(RefPub("r", "apps/v1", "Deployment", "api"));
  PubValidatingHandler handler(&cache, /*enabled=*/true);

  EXPECT_TRUE(handler.Handle(PubRequest("CREATE", SelectorPub("b", "db"))).allowed);
  auto r = handler.Handle(PubRequest("CREATE", SelectorPub("b", "web")));
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.result.code, 422);
  EXPECT_THAT(r.result.message, HasSubstr("PodUnavailableBudget a"));
  r = handler.Handle(PubRequest("CREATE", RefPub("q", "apps/v1", "Deployment", "api")));
  EXPECT_FALSE(r.allowed);
  EXPECT_THAT(r.result.message, HasSubstr("spec.targetRef"));
  // An UPDATE of `a` itself is fine; changing its selector is not.
  EXPECT_TRUE(
      handler.Handle(PubRequest("UPDATE", SelectorPub("a", "web"), SelectorPub("a", "web"))).allowed);
  r = handler.Handle(PubRequest("UPDATE", SelectorPub("a", "db"), SelectorPub("a", "web")));
  EXPECT_FALSE(r.allowed);
  EXPECT_THAT(r.result.message, HasSubstr("selector cannot be modified"));
  // PubProblems.
  Json bad = SelectorPub("c", "x");
  bad["spec"]["maxUnavailable"] = "120%";
  r = handler.Handle(PubRequest("CREATE", bad));
  EXPECT_FALSE(r.allowed);
  EXPECT_THAT(r.result.message, HasSubstr("spec.maxUnavailable"));
  // Removed from the cache: no longer in the way.
  cache.Remove("team", "a");
  EXPECT_TRUE(handler.Handle(PubRequest("CREATE", SelectorPub("b", "web"))).allowed);
  EXPECT_TRUE(handler.Handle(PubRequest("DELETE", Json(), SelectorPub("a", "web"))).allowed);

  PubValidatingHandler off(&cache, /*enabled=*/false);
  r = off.Handle(PubRequest("CREATE", SelectorPub("z", "zz")));
  EXPECT_FALSE(r.allowed);
  EXPECT_THAT(r.result.message, HasSubstr("PodUnavailableBudgetDeleteGate"));
}

TEST(PubCacheTest, CoveringAndConcerning) {
  PubCache cache;
  cache.Upsert(SelectorPub("b", "web"));
  cache.Upsert(RefPub("a", "apps/v1", "Deployment", "web"));
  Json invalid = SelectorPub("0", "web");
  invalid["spec"].erase("maxUnavailable");
  cache.Upsert(invalid);  // kept for conflicts, guards nothing
  EXPECT_EQ(cache.size(), 3u);
  Json pod = PodOwnedBy("apps/v1", "ReplicaSet", "web-1", {{"app", "web"}, {"pod-template-hash", "1"}});
  auto e = cache.Covering(pod);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->pub->name, "a");  // first by name
  // A stub of the shared pod cache: kind only.
  Json stub = {{"metadata",
                {{"name", "p"},
                 {"namespace", "team"},
                 {"labels", {{"app", "web"}}},
                 {"ownerReferences", {{{"controller", true}, {"kind", "ReplicaSet"}}}}}}};
  EXPECT_THAT(cache.Concerning(stub), ::testing::ElementsAre("a", "b"));
  stub["metadata"]["namespace"] = "other";
  EXPECT_THAT(cache.Concerning(stub), IsEmpty());
  EXPECT_EQ(cache.Covering(stub), nullptr);
}

}  // namespace
}  // namespace kruise::manager::pub
