#include "kube/object.h"

#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/resources.h"
#include "kube/rest_client.h"

namespace kruise::kube {
namespace {

using ::testing::ElementsAre;

const Json kPod = Json::parse(R"({
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {
    "name": "web-0", "namespace": "prod", "uid": "u-1", "resourceVersion": "42", "generation": 3,
    "labels": {"app": "web", "tier": "front", "bad": 5},
    "annotations": {"a": "b"},
    "finalizers": ["kruise.io/x", 7],
    "creationTimestamp": "2024-05-01T10:00:00Z",
    "deletionTimestamp": "2024-05-01T10:05:00Z",
    "ownerReferences": [
      {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-1"},
      {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet", "name": "web", "uid": "cs-1",
       "controller": true, "blockOwnerDeletion": true},
      {"kind": "Broken"}
    ]
  },
  "spec": {"containers": [{"name": "c", "image": "busybox"}], "nodeName": "n1"}
})");

TEST(ObjectTest, MetadataAccessors) {
  EXPECT_EQ(Name(kPod), "web-0");
  EXPECT_EQ(Namespace(kPod), "prod");
  EXPECT_EQ(Uid(kPod), "u-1");
  EXPECT_EQ(ResourceVersion(kPod), "42");
  EXPECT_EQ(Generation(kPod), 3);
  EXPECT_EQ(NamespacedName(kPod), "prod/web-0");
  EXPECT_EQ(Labels(kPod), (std::map<std::string, std::string>{{"app", "web"}, {"tier", "front"}}));
  EXPECT_EQ(Label(kPod, "app"), "web");
  EXPECT_EQ(Label(kPod, "bad"), std::nullopt);
  EXPECT_EQ(Annotation(kPod, "a"), "b");
  EXPECT_THAT(Finalizers(kPod), ElementsAre("kruise.io/x"));
  EXPECT_TRUE(HasFinalizer(kPod, "kruise.io/x"));
  EXPECT_FALSE(HasFinalizer(kPod, "other"));
  EXPECT_EQ(CreationTimestamp(kPod), absl::FromUnixSeconds(1714557600));
  EXPECT_EQ(DeletionTimestamp(kPod), absl::FromUnixSeconds(1714557900));
  EXPECT_TRUE(IsBeingDeleted(kPod));

  std::vector<OwnerReference> refs = OwnerReferences(kPod);
  ASSERT_EQ(refs.size(), 2u);
  EXPECT_EQ(refs[0].kind, "ReplicaSet");
  EXPECT_FALSE(refs[0].controller);
  std::optional<OwnerReference> ctrl = ControllerOf(kPod);
  ASSERT_TRUE(ctrl.has_value());
  EXPECT_EQ(ctrl->kind, "CloneSet");
  EXPECT_EQ(ctrl->uid, "cs-1");
  EXPECT_TRUE(ctrl->block_owner_deletion);
  EXPECT_EQ(ctrl->ToJson()["controller"], true);
  EXPECT_EQ(ctrl->ToJson()["apiVersion"], "apps.kruise.io/v1alpha1");
}

TEST(ObjectTest, AccessorsNeverThrowOnOddJson) {
  for (const Json& odd : {Json(), Json(5), Json::array(), Json::parse(R"({"metadata": 3})"),
                          Json::parse(R"({"metadata": {"labels": [1], "name": 3,
                            "ownerReferences": {}, "finalizers": "x", "generation": "1",
                            "creationTimestamp": "yesterday"}})")}) {
    EXPECT_EQ(Name(odd), "");
    EXPECT_EQ(Generation(odd), 0);
    EXPECT_TRUE(Labels(odd).empty());
    EXPECT_TRUE(OwnerReferences(odd).empty());
    EXPECT_TRUE(Finalizers(odd).empty());
    EXPECT_FALSE(CreationTimestamp(odd).has_value());
    EXPECT_FALSE(IsBeingDeleted(odd));
    EXPECT_FALSE(ControllerOf(odd).has_value());
  }
}

TEST(ObjectTest, PathAndPointerLookups) {
  EXPECT_EQ(GetString(kPod, {"spec", "nodeName"}), "n1");
  EXPECT_EQ(GetString(kPod, {"spec", "nodeName", "deeper"}), std::nullopt);
  EXPECT_EQ(GetInt(kPod, {"metadata", "generation"}), 3);
  EXPECT_EQ(GetBool(kPod, {"metadata", "generation"}), std::nullopt);
  const Json* image = FindPointer(kPod, "/spec/containers/0/image");
  ASSERT_NE(image, nullptr);
  EXPECT_EQ(*image, "busybox");
  EXPECT_EQ(FindPointer(kPod, "/spec/containers/9/image"), nullptr);
  EXPECT_EQ(FindPointer(kPod, "/spec/containers/x"), nullptr);
  EXPECT_EQ(FindPointer(kPod, "no-leading-slash"), nullptr);
  EXPECT_EQ(FindPointer(kPod, "/metadata/labels/app/x"), nullptr);
  EXPECT_EQ(FindPath(kPod, {"nope"}), nullptr);
}

// ---- IntOrString ----

struct ScaleCase {
  Json value;
  int total;
  bool round_up;
  int want;
};

TEST(IntOrStringTest, ScalingTable) {
  const ScaleCase cases[] = {
      {Json(5), 100, false, 5},      {Json(5), 3, true, 5},        {Json("50%"), 10, false, 5},
      {Json("25%"), 10, false, 2},   {Json("25%"), 10, true, 3},   {Json("0%"), 10, true, 0},
      {Json("100%"), 7, false, 7},   {Json("33%"), 3, true, 1},    {Json("33%"), 3, false, 0},
      {Json("1%"), 1, true, 1},      {Json("1%"), 1, false, 0},    {Json("150%"), 10, false, 15},
      {Json("10%"), 30, true, 3},    {Json("10%"), 31, true, 4},   {Json("10%"), 31, false, 3},
      {Json("-10%"), 15, false, -2}, {Json("-10%"), 15, true, -1}, {Json(0), 10, true, 0},
      {Json("+20%"), 10, false, 2},
  };
  for (const ScaleCase& c : cases) {
    absl::StatusOr<int> got = GetScaledValueFromIntOrPercent(c.value, c.total, c.round_up);
    ASSERT_TRUE(got.ok()) << c.value.dump() << " " << got.status();
    EXPECT_EQ(*got, c.want) << c.value.dump() << " of " << c.total << " up=" << c.round_up;
  }
}

TEST(IntOrStringTest, InvalidValues) {
  for (const Json& bad :
       {Json(), Json("5"), Json("abc%"), Json("%"), Json("5.5%"), Json(1.5), Json(" 5%"),
        Json("5 %"), Json("+%"), Json::array(), Json(true), Json("5%%")}) {
    absl::StatusOr<int> got = GetScaledValueFromIntOrPercent(bad, 10, true);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << bad.dump();
  }
}

// Found by test/fuzz/kube_time.cc: "2147483647%" of 1000 is 2.1e10, whose conversion to int was
// undefined behaviour (UBSan's float-cast-overflow; INT_MIN on x86). Saturates instead.
TEST(IntOrStringTest, PercentBeyondIntRangeSaturates) {
  EXPECT_EQ(*GetScaledValueFromIntOrPercent(Json("2147483647%"), 1000, true),
            std::numeric_limits<int>::max());
  EXPECT_EQ(*GetScaledValueFromIntOrPercent(Json("2147483647%"), 1000, false),
            std::numeric_limits<int>::max());
  EXPECT_EQ(*GetScaledValueFromIntOrPercent(Json("-2147483648%"), 1000, true),
            std::numeric_limits<int>::min());
  EXPECT_EQ(*GetScaledValueFromIntOrPercent(Json("2147483647%"), 100, true),
            std::numeric_limits<int>::max());
  EXPECT_EQ(*GetScaledValueFromIntOrPercent(Json("100%"), std::numeric_limits<int>::max(), true),
            std::numeric_limits<int>::max());
}

// ---- Times ----

TEST(TimeTest, ParseAndFormat) {
  absl::Time t = *ParseRfc3339("2024-05-01T10:00:00Z");
  EXPECT_EQ(t, absl::FromUnixSeconds(1714557600));
  EXPECT_EQ(*ParseRfc3339("2024-05-01T12:00:00+02:00"), t);
  absl::Time frac = *ParseRfc3339("2024-05-01T10:00:00.123456789Z");
  EXPECT_EQ(frac - t, absl::Nanoseconds(123456789));
  EXPECT_EQ(FormatRfc3339(frac), "2024-05-01T10:00:00Z");
  EXPECT_EQ(FormatRfc3339Micro(frac), "2024-05-01T10:00:00.123456Z");
  EXPECT_EQ(FormatRfc3339Micro(t), "2024-05-01T10:00:00.000000Z");
  EXPECT_EQ(FormatRfc3339Nano(frac), "2024-05-01T10:00:00.123456789Z");
  EXPECT_EQ(FormatRfc3339Nano(t + absl::Milliseconds(500)), "2024-05-01T10:00:00.5Z");
  EXPECT_EQ(FormatRfc3339Nano(t), "2024-05-01T10:00:00Z");
  // Round trips.
  EXPECT_EQ(*ParseRfc3339(FormatRfc3339Nano(frac)), frac);
  EXPECT_EQ(*ParseRfc3339(FormatRfc3339Micro(frac)), t + absl::Microseconds(123456));
  for (const char* bad :
       {"", "2024-05-01", "yesterday", "2024-05-01 10:00:00Z", "2024-13-01T10:00:00Z"}) {
    EXPECT_EQ(ParseRfc3339(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

// ---- Label selectors ----

using Labels_ = std::map<std::string, std::string>;

struct SelectorCase {
  std::string selector;
  Labels_ labels;
  bool want;
};

TEST(LabelSelectorTest, StringFormTable) {
  const Labels_ web = {{"app", "web"}, {"tier", "front"}, {"rev", "5"}};
  const SelectorCase cases[] = {
      {"", web, true},
      {"", {}, true},
      {"app=web", web, true},
      {"app==web", web, true},
      {"app=db", web, false},
      {"app!=db", web, true},
      {"app!=web", web, false},
      {"missing!=x", web, true},
      {"app in (db,web)", web, true},
      {"app in (db, cache)", web, false},
      {"app notin (db,cache)", web, true},
      {"missing notin (a)", web, true},
      {"app notin (web)", web, false},
      {"tier", web, true},
      {"missing", web, false},
      {"!missing", web, true},
      {"!tier", web, false},
      {"app=web,tier=front", web, true},
      {"app=web,tier=back", web, false},
      {" app = web , ! missing ", web, true},
      {"rev>4", web, true},
      {"rev>5", web, false},
      {"rev<6", web, true},
      {"app>1", web, false},
      {"empty=", {{"empty", ""}}, true},
      {"empty=", web, false},
      {"example.com/role in (a,b)", {{"example.com/role", "b"}}, true},
  };
  for (const SelectorCase& c : cases) {
    absl::StatusOr<LabelSelector> sel = LabelSelector::Parse(c.selector);
    ASSERT_TRUE(sel.ok()) << c.selector << ": " << sel.status();
    EXPECT_EQ(sel->Matches(c.labels), c.want) << "\"" << c.selector << "\"";
    // The canonical string form parses back to an equivalent selector.
    absl::StatusOr<LabelSelector> again = LabelSelector::Parse(sel->ToString());
    ASSERT_TRUE(again.ok()) << sel->ToString();
    EXPECT_EQ(again->Matches(c.labels), c.want) << sel->ToString();
  }
}

TEST(LabelSelectorTest, RequiredLabelIsTheNarrowestInOrEqualsRequirement) {
  struct Case {
    const char* selector;
    const char* key;  // nullptr: none
    std::vector<std::string> values;
  };
  const Case cases[] = {
      {"app=web", "app", {"web"}},
      {"app in (a,b,c),tier=front", "tier", {"front"}},
      {"app in (b,a),tier in (x,y,z)", "app", {"a", "b"}},
      {"app notin (a),tier", nullptr, {}},
      {"!app,x!=y,n>1", nullptr, {}},
      {"", nullptr, {}},
  };
  for (const Case& c : cases) {
    absl::StatusOr<LabelSelector> sel = LabelSelector::Parse(c.selector);
    ASSERT_TRUE(sel.ok()) << c.selector;
    const LabelSelector::Requirement* r = sel->RequiredLabel();
    if (c.key == nullptr) {
      EXPECT_EQ(r, nullptr) << c.selector;
      continue;
    }
    ASSERT_NE(r, nullptr) << c.selector;
    EXPECT_EQ(r->key, c.key) << c.selector;
    EXPECT_EQ(r->values, c.values) << c.selector;
  }
}

TEST(LabelSelectorTest, InvalidStrings) {
  for (const char* bad : {"app in web", "app in (a", "=x", "a b", "app=web,", ",", "a=(x)", "a>x",
                          "!", "-bad=x", "a=b=c", "a in (x) y", "a=in valid"}) {
    EXPECT_FALSE(LabelSelector::Parse(bad).ok()) << bad;
  }
}

TEST(LabelSelectorTest, ToStringIsCanonical) {
  absl::StatusOr<LabelSelector> sel = LabelSelector::Parse("z=1,a in (y,x),!m,b");
  ASSERT_TRUE(sel.ok());
  EXPECT_EQ(sel->ToString(), "a in (x,y),b,!m,z=1");
}

TEST(LabelSelectorTest, FromJsonTable) {
  const Labels_ web = {{"app", "web"}, {"tier", "front"}};
  struct JsonCase {
    const char* json;
    bool want;
  };
  const JsonCase cases[] = {
      {"{}", true},
      {R"({"matchLabels": {"app": "web"}})", true},
      {R"({"matchLabels": {"app": "db"}})", false},
      {R"({"matchLabels": null, "matchExpressions": null})", true},
      {R"({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "x"]}]})", true},
      {R"({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]})", false},
      {R"({"matchExpressions": [{"key": "tier", "operator": "Exists"}]})", true},
      {R"({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]})", false},
      {R"({"matchLabels": {"app": "web"},
           "matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]})",
       true},
      {"null", false},
  };
  for (const JsonCase& c : cases) {
    absl::StatusOr<LabelSelector> sel = LabelSelector::FromJson(Json::parse(c.json));
    ASSERT_TRUE(sel.ok()) << c.json << ": " << sel.status();
    EXPECT_EQ(sel->Matches(web), c.want) << c.json;
  }
  absl::StatusOr<LabelSelector> nothing = LabelSelector::FromJson(Json());
  ASSERT_TRUE(nothing.ok());
  EXPECT_TRUE(nothing->matches_nothing());
  EXPECT_FALSE(nothing->Matches({}));
  absl::StatusOr<LabelSelector> everything = LabelSelector::FromJson(Json::object());
  ASSERT_TRUE(everything.ok());
  EXPECT_TRUE(everything->matches_everything());
  EXPECT_TRUE(everything->Matches({}));
  absl::StatusOr<LabelSelector> ml =
      LabelSelector::FromJson(Json::parse(R"({"matchLabels": {"b": "2", "a": "1"}})"));
  EXPECT_EQ(ml->ToString(), "a=1,b=2");
  EXPECT_TRUE(ml->MatchesObject(Json::parse(R"({"metadata":{"labels":{"a":"1","b":"2"}}})")));
}

TEST(LabelSelectorTest, InvalidJson) {
  for (const char* bad : {
           R"({"matchExpressions": [{"key": "a", "operator": "In"}]})",
           R"({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]})",
           R"({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]})",
           R"({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]})",
           R"({"matchExpressions": [{"operator": "Exists"}]})",
           R"({"matchExpressions": {}})",
           R"({"matchLabels": {"a": 1}})",
           R"({"matchLabels": {"a": "not valid!"}})",
           R"("app=web")",
       }) {
    EXPECT_FALSE(LabelSelector::FromJson(Json::parse(bad)).ok()) << bad;
  }
}

// ---- Resources and paths ----

TEST(ResourcePathTest, Paths) {
  using namespace resources;  // NOLINT
  EXPECT_EQ(ResourcePath(Pods(), "default", "p"), "/api/v1/namespaces/default/pods/p");
  EXPECT_EQ(ResourcePath(Pods(), ""), "/api/v1/pods");
  EXPECT_EQ(ResourcePath(Pods(), "ns", "p", "status"), "/api/v1/namespaces/ns/pods/p/status");
  EXPECT_EQ(ResourcePath(Nodes(), "ignored", "n1"), "/api/v1/nodes/n1");
  EXPECT_EQ(ResourcePath(NodeImages(), "", "node-a"),
            "/apis/apps.kruise.io/v1alpha1/nodeimages/node-a");
  EXPECT_EQ(ResourcePath(NodeImagesV1beta1(), ""), "/apis/apps.kruise.io/v1beta1/nodeimages");
  EXPECT_EQ(ResourcePath(Leases(), "kube-system", "kruise-manager"),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kruise-manager");
  EXPECT_EQ(ResourcePath(ContainerRecreateRequests(), "ns"),
            "/apis/apps.kruise.io/v1alpha1/namespaces/ns/containerrecreaterequests");
  EXPECT_EQ(ResourcePath(CustomResourceDefinitions(), "", "x.apps.kruise.io"),
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x.apps.kruise.io");
  EXPECT_EQ(ImagePullJobs().ApiVersion(), "apps.kruise.io/v1alpha1");
  EXPECT_EQ(Pods().ApiVersion(), "v1");
  EXPECT_FALSE(MutatingWebhookConfigurations().namespaced);
  EXPECT_FALSE(ValidatingWebhookConfigurations().namespaced);
  EXPECT_TRUE(Secrets().namespaced);
  EXPECT_TRUE(Events().namespaced);
  EXPECT_FALSE(Namespaces().namespaced);
  // Odd names are escaped, not spliced into the path.
  EXPECT_EQ(ResourcePath(Pods(), "a/b", "c d"), "/api/v1/namespaces/a%2Fb/pods/c%20d");
}

TEST(ResourcePathTest, Queries) {
  ListOptions o;
  EXPECT_EQ(ListQuery(o, false), "");
  o.label_selector = "app in (a,b),!x";
  o.field_selector = "spec.nodeName=n1";
  o.limit = 50;
  o.continue_token = "abc=";
  o.resource_version = "0";
  o.resource_version_match = "NotOlderThan";
  o.timeout_seconds = 300;
  o.allow_watch_bookmarks = true;
  EXPECT_EQ(ListQuery(o, false),
            "?labelSelector=app%20in%20%28a%2Cb%29%2C%21x&fieldSelector=spec.nodeName%3Dn1"
            "&limit=50&continue=abc%3D&resourceVersion=0&resourceVersionMatch=NotOlderThan");
  EXPECT_EQ(ListQuery(o, true),
            "?watch=1&labelSelector=app%20in%20%28a%2Cb%29%2C%21x&fieldSelector=spec.nodeName%3Dn1"
            "&resourceVersion=0&timeoutSeconds=300&allowWatchBookmarks=true");
  EXPECT_EQ(UrlEscape("a-b_c.d~e/f+g"), "a-b_c.d~e%2Ff%2Bg");
}

// A controller's status write adds only what it computes, removes only the maps it emptied, and
// is guarded by the resourceVersion the controller read.
TEST(StatusPatchOps, AddsComputedFieldsKeepsOthersRemovesOnlyListedMaps) {
  Json obj = {{"metadata", {{"name", "b"}, {"resourceVersion", "7"}}},
              {"status",
               {{"observedGeneration", 1},
                {"disruptedPods", {{"p", "t"}}},
                {"unavailablePods", {{"q", "t"}}},
                {"byAnotherWriter", true}}}};
  Json next = {{"observedGeneration", 2}, {"unavailablePods", {{"q", "t"}}}};
  Json ops = StatusPatchOps(obj, next, {"disruptedPods", "unavailablePods"});
  Json patched = obj.patch(ops);
  EXPECT_EQ(ops[0], Json({{"op", "test"}, {"path", "/metadata/resourceVersion"}, {"value", "7"}}));
  EXPECT_EQ(patched["status"], Json({{"observedGeneration", 2},
                                     {"unavailablePods", {{"q", "t"}}},
                                     {"byAnotherWriter", true}}));
  // Not listed as removable: kept although `next` lacks it.
  EXPECT_TRUE(obj.patch(StatusPatchOps(obj, next))["status"].contains("disruptedPods"));
  // No status yet: one add of the whole status.
  obj.erase("status");
  ops = StatusPatchOps(obj, next, {"disruptedPods"});
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(obj.patch(ops)["status"], next);
}

}  // namespace
}  // namespace kruise::kube
