// DecideDeletion over label value x kind x state, and the small readers around it.

#include "manager/deletionprotection/deletion_protection.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kruise::manager::deletionprotection {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

struct Case {
  std::string what;
  GuardedKind kind;
  std::string kind_name;
  std::string value;
  bool being_deleted;
  Dependents deps;
  bool crd_cascading;
  bool allowed;
  std::vector<std::string> message_has;
};

TEST(DecideDeletionTest, Table) {
  const std::vector<Case> cases = {
      {"ns Always, empty", GuardedKind::kNamespace, "Namespace", "Always", false, {}, false, false,
       {"Namespace team", "policy.kruise.io/delete-protection=Always", "remove the label"}},
      {"ns Cascading, 2 active pods", GuardedKind::kNamespace, "Namespace", "Cascading", false,
       {.active_pods = 2}, false, false,
       {"policy.kruise.io/delete-protection=Cascading", "2 active pod(s)"}},
      {"ns Cascading, bound PVC", GuardedKind::kNamespace, "Namespace", "Cascading", false,
       {.bound_pvcs = 1}, false, false, {"1 Bound PersistentVolumeClaim(s)"}},
      {"ns Cascading, empty", GuardedKind::kNamespace, "Namespace", "Cascading", false, {}, false,
       true, {}},
      {"ns Cascading, already terminating", GuardedKind::kNamespace, "Namespace", "Cascading",
       true, {.active_pods = 3}, false, true, {}},
      {"ns Always, already terminating", GuardedKind::kNamespace, "Namespace", "Always", true, {},
       false, true, {}},
      {"ns unknown value", GuardedKind::kNamespace, "Namespace", "always", false,
       {.active_pods = 3}, false, true, {}},
      {"ns empty value", GuardedKind::kNamespace, "Namespace", "", false, {.active_pods = 3},
       false, true, {}},
      {"workload Always, 0 replicas", GuardedKind::kWorkload, "CloneSet", "Always", false, {},
       false, false, {"CloneSet team", "=Always"}},
      {"workload Cascading, 3 replicas", GuardedKind::kWorkload, "Deployment", "Cascading", false,
       {.replicas = 3}, false, false, {"spec.replicas is 3", "scale it to 0"}},
      {"workload Cascading, 0 replicas", GuardedKind::kWorkload, "Deployment", "Cascading", false,
       {.replicas = 0}, false, true, {}},
      {"workload Other value", GuardedKind::kWorkload, "StatefulSet", "Never", false,
       {.replicas = 3}, false, true, {}},
      {"CRD Always", GuardedKind::kCustomResourceDefinition, "CustomResourceDefinition", "Always",
       false, {}, true, false, {"=Always"}},
      {"CRD Cascading, gate off", GuardedKind::kCustomResourceDefinition,
       "CustomResourceDefinition", "Cascading", false, {}, false, false,
       {"DeletionProtectionForCRDCascadingGate"}},
      {"CRD Cascading, 4 CRs", GuardedKind::kCustomResourceDefinition, "CustomResourceDefinition",
       "Cascading", false, {.active_crs = 4}, true, false, {"4 custom resource(s)"}},
      {"CRD Cascading, no CRs", GuardedKind::kCustomResourceDefinition,
       "CustomResourceDefinition", "Cascading", false, {}, true, true, {}},
      {"Service Always", GuardedKind::kAlwaysOnly, "Service", "Always", false, {}, false, false,
       {"Service team"}},
      {"Service Cascading", GuardedKind::kAlwaysOnly, "Service", "Cascading", false, {}, false,
       true, {}},
      {"not guarded Always", GuardedKind::kNotGuarded, "ConfigMap", "Always", false, {}, false,
       true, {}},
  };
  for (const Case& c : cases) {
    Target t{c.kind, c.kind_name, "team", c.value, c.being_deleted};
    Verdict v = DecideDeletion(t, c.deps, c.crd_cascading);
    EXPECT_EQ(v.allowed, c.allowed) << c.what << ": " << v.message;
    if (!c.allowed) {
      EXPECT_EQ(v.code, 403) << c.what;
    }
    for (const std::string& s : c.message_has) EXPECT_THAT(v.message, HasSubstr(s)) << c.what;
  }
}

TEST(DecideDeletionTest, NeedsDependentsOnlyForCascading) {
  EXPECT_TRUE(NeedsDependents({GuardedKind::kNamespace, "Namespace", "a", "Cascading", false}));
  EXPECT_TRUE(NeedsDependents({GuardedKind::kWorkload, "CloneSet", "a", "Cascading", false}));
  EXPECT_FALSE(NeedsDependents({GuardedKind::kNamespace, "Namespace", "a", "Always", false}));
  EXPECT_FALSE(NeedsDependents({GuardedKind::kNamespace, "Namespace", "a", "Cascading", true}));
  EXPECT_FALSE(NeedsDependents({GuardedKind::kAlwaysOnly, "Service", "a", "Cascading", false}));
}

TEST(GuardedKindOfTest, Kinds) {
  EXPECT_EQ(GuardedKindOf({"", "v1", "Namespace"}), GuardedKind::kNamespace);
  EXPECT_EQ(GuardedKindOf({"apiextensions.k8s.io", "v1", "CustomResourceDefinition"}),
            GuardedKind::kCustomResourceDefinition);
  for (const char* k : {"Deployment", "ReplicaSet", "StatefulSet"}) {
    EXPECT_EQ(GuardedKindOf({"apps", "v1", k}), GuardedKind::kWorkload) << k;
  }
  for (const char* k : {"CloneSet", "StatefulSet", "UnitedDeployment"}) {
    EXPECT_EQ(GuardedKindOf({"apps.kruise.io", "v1beta1", k}), GuardedKind::kWorkload) << k;
  }
  EXPECT_EQ(GuardedKindOf({"", "v1", "Service"}), GuardedKind::kAlwaysOnly);
  EXPECT_EQ(GuardedKindOf({"networking.k8s.io", "v1", "Ingress"}), GuardedKind::kAlwaysOnly);
  EXPECT_EQ(GuardedKindOf({"apps.kruise.io", "v1beta1", "DaemonSet"}), GuardedKind::kNotGuarded);
  EXPECT_EQ(GuardedKindOf({"apps", "v1", "DaemonSet"}), GuardedKind::kNotGuarded);
  EXPECT_EQ(GuardedKindOf({"", "v1", "Pod"}), GuardedKind::kNotGuarded);
}

TEST(ProtectionOfTest, Values) {
  auto obj = [](const std::string& v) {
    return Json{{"metadata", {{"labels", {{"policy.kruise.io/delete-protection", v}}}}}};
  };
  EXPECT_EQ(ProtectionOf(obj("Always")), Protection::kAlways);
  EXPECT_EQ(ProtectionOf(obj("Cascading")), Protection::kCascading);
  EXPECT_EQ(ProtectionOf(obj("cascading")), Protection::kNone);
  EXPECT_EQ(ProtectionOf(Json{{"metadata", Json::object()}}), Protection::kNone);
}

TEST(CustomResourceOfTest, StorageVersionAndScope) {
  Json crd = {{"metadata", {{"name", "widgets.example.com"}}},
              {"spec",
               {{"group", "example.com"},
                {"scope", "Cluster"},
                {"names", {{"plural", "widgets"}, {"kind", "Widget"}}},
                {"versions",
                 {{{"name", "v1alpha1"}, {"served", true}, {"storage", false}},
                  {{"name", "v1"}, {"served", true}, {"storage", true}}}}}}};
  auto r = CustomResourceOf(crd);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ApiVersion(), "example.com/v1");
  EXPECT_EQ(r->resource, "widgets");
  EXPECT_FALSE(r->namespaced);
  crd["spec"].erase("versions");
  EXPECT_FALSE(CustomResourceOf(crd).ok());
}

}  // namespace
}  // namespace kruise::manager::deletionprotection
