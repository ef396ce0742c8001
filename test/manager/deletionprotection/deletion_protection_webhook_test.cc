// The deletion-protection webhook against the fake API server: the object comes as the
// request's oldObject, Cascading counts come from paged LISTs through the real REST client.

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "manager/deletionprotection/deletion_protection.h"
#include "test/fakes/apiserver/fake_apiserver.h"
#include "test/fakes/apiserver/fake_cluster_test.h"

namespace kruise::manager::deletionprotection {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

class DeletionProtectionWebhookTest : public testing::FakeClusterTest {
 protected:
  void SetUp() override {
    StartCluster({{"example.com", "v1", "widgets", "Widget", true, false}});
    ASSERT_FALSE(HasFatalFailure());
  }

  webhook::AdmissionResponse Run(const webhook::AdmissionRequest& r, HandlerOptions o = {}) {
    o.page_size = 2;  // several pages in every count
    DeletionProtectionHandler h(client_.get(), o);
    return h.Handle(r);
  }

  static Json Labelled(Json obj, const std::string& value) {
    obj["metadata"]["labels"]["policy.kruise.io/delete-protection"] = value;
    return obj;
  }
  static webhook::AdmissionRequest Delete(const webhook::GroupVersionKind& gvk, const Json& obj) {
    webhook::AdmissionRequest r;
    r.operation = "DELETE";
    r.kind = gvk;
    r.name = obj["metadata"].value("name", "");
    r.namespace_ = obj["metadata"].value("namespace", "");
    r.old_object = obj;
    return r;
  }
  static Json Namespace(const std::string& name) {
    return {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}};
  }
  void SeedPod(const std::string& ns, const std::string& name, const std::string& phase) {
    Json pod = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata", {{"name", name}, {"namespace", ns}}},
                {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}},
                {"status", {{"phase", phase}}}};
    ASSERT_TRUE(server_->Seed("pods", pod).ok());
  }
  const webhook::GroupVersionKind kNs{"", "v1", "Namespace"};
  const webhook::GroupVersionKind kCrd{"apiextensions.k8s.io", "v1", "CustomResourceDefinition"};
  const webhook::GroupVersionKind kCloneSet{"apps.kruise.io", "v1alpha1", "CloneSet"};
};

TEST_F(DeletionProtectionWebhookTest, CascadingNamespaceCountsActivePodsOverPages) {
  for (int i = 0; i < 5; ++i) SeedPod("team", "done-" + std::to_string(i), "Succeeded");
  const Json ns = Labelled(Namespace("team"), "Cascading");
  EXPECT_TRUE(Run(Delete(kNs, ns)).allowed) << "finished pods do not hold a namespace";

  SeedPod("team", "web-0", "Running");
  SeedPod("other", "web-1", "Running");  // another namespace does not count
  auto resp = Run(Delete(kNs, ns));
  EXPECT_FALSE(resp.allowed);
  EXPECT_EQ(resp.result.code, 403);
  EXPECT_EQ(resp.result.reason, "Forbidden");  // kubectl: "Error from server (Forbidden)"
  EXPECT_THAT(resp.result.message, HasSubstr("Namespace team"));
  EXPECT_THAT(resp.result.message, HasSubstr("policy.kruise.io/delete-protection=Cascading"));
  EXPECT_THAT(resp.result.message, HasSubstr("1 active pod(s)"));
}

TEST_F(DeletionProtectionWebhookTest, CascadingNamespaceBoundPvc) {
  Json pvc = {{"apiVersion", "v1"},
              {"kind", "PersistentVolumeClaim"},
              {"metadata", {{"name", "data"}, {"namespace", "team"}}},
              {"spec", Json::object()},
              {"status", {{"phase", "Bound"}}}};
  ASSERT_TRUE(server_->Seed("persistentvolumeclaims", pvc).ok());
  auto resp = Run(Delete(kNs, Labelled(Namespace("team"), "Cascading")));
  EXPECT_FALSE(resp.allowed);
  EXPECT_THAT(resp.result.message, HasSubstr("1 Bound PersistentVolumeClaim(s)"));
}

TEST_F(DeletionProtectionWebhookTest, AlwaysNeverReadsAndKubeSystemIsNeverJudged) {
  server_->Stop();  // any read would fail now
  auto resp = Run(Delete(kNs, Labelled(Namespace("team"), "Always")));
  EXPECT_FALSE(resp.allowed);
  EXPECT_EQ(resp.result.code, 403);
  EXPECT_TRUE(Run(Delete(kNs, Labelled(Namespace("kube-system"), "Always"))).allowed);
  Json cs = Labelled({{"apiVersion", "apps.kruise.io/v1alpha1"},
                      {"kind", "CloneSet"},
                      {"metadata", {{"name", "web"}, {"namespace", "kube-system"}}},
                      {"spec", {{"replicas", 3}}}},
                     "Always");
  EXPECT_TRUE(Run(Delete(kCloneSet, cs)).allowed);
}

TEST_F(DeletionProtectionWebhookTest, CascadingReadFailureFailsClosedReadably) {
  server_->Stop();
  auto resp = Run(Delete(kNs, Labelled(Namespace("team"), "Cascading")));
  EXPECT_FALSE(resp.allowed);
  EXPECT_EQ(resp.result.code, 500);
  EXPECT_THAT(resp.result.message, HasSubstr("policy.kruise.io/delete-protection=Cascading"));
  EXPECT_THAT(resp.result.message, HasSubstr("listing pods"));
}

TEST_F(DeletionProtectionWebhookTest, WorkloadReplicas) {
  Json cs = Labelled({{"apiVersion", "apps.kruise.io/v1alpha1"},
                      {"kind", "CloneSet"},
                      {"metadata", {{"name", "web"}, {"namespace", "team"}}},
                      {"spec", {{"replicas", 3}}}},
                     "Cascading");
  auto resp = Run(Delete(kCloneSet, cs));
  EXPECT_FALSE(resp.allowed);
  EXPECT_THAT(resp.result.message, HasSubstr("CloneSet team/web"));
  EXPECT_THAT(resp.result.message, HasSubstr("spec.replicas is 3"));
  cs["spec"]["replicas"] = 0;
  EXPECT_TRUE(Run(Delete(kCloneSet, cs)).allowed);
  cs["spec"]["replicas"] = 3;
  cs["metadata"]["deletionTimestamp"] = "2027-01-01T00:00:00Z";
  EXPECT_TRUE(Run(Delete(kCloneSet, cs)).allowed) << "already being deleted";
}

TEST_F(DeletionProtectionWebhookTest, CascadingCrdCountsItsResources) {
  Json crd = Labelled({{"apiVersion", "apiextensions.k8s.io/v1"},
                       {"kind", "CustomResourceDefinition"},
                       {"metadata", {{"name", "widgets.example.com"}}},
                       {"spec",
                        {{"group", "example.com"},
                         {"scope", "Namespaced"},
                         {"names", {{"plural", "widgets"}, {"kind", "Widget"}}},
                         {"versions", {{{"name", "v1"}, {"served", true}, {"storage", true}}}}}}},
                      "Cascading");
  HandlerOptions gate_on;
  gate_on.crd_cascading = true;
  EXPECT_TRUE(Run(Delete(kCrd, crd), gate_on).allowed);
  auto off = Run(Delete(kCrd, crd));
  EXPECT_FALSE(off.allowed);
  EXPECT_THAT(off.result.message, HasSubstr("DeletionProtectionForCRDCascadingGate"));
  for (const char* ns : {"a", "b", "c"}) {
    Json w = {{"apiVersion", "example.com/v1"},
              {"kind", "Widget"},
              {"metadata", {{"name", "w"}, {"namespace", ns}}}};
    ASSERT_TRUE(server_->Seed("widgets.example.com", w).ok());
  }
  auto resp = Run(Delete(kCrd, crd), gate_on);
  EXPECT_FALSE(resp.allowed);
  EXPECT_THAT(resp.result.message, HasSubstr("3 custom resource(s)"));
}

TEST_F(DeletionProtectionWebhookTest, OtherRequestsAndGateOff) {
  const Json ns = Labelled(Namespace("team"), "Always");
  auto update = Delete(kNs, ns);
  update.operation = "UPDATE";
  EXPECT_TRUE(Run(update).allowed);
  HandlerOptions off;
  off.enabled = false;
  EXPECT_TRUE(Run(Delete(kNs, ns), off).allowed);
  auto no_old = Delete(kNs, ns);
  no_old.old_object = nullptr;
  EXPECT_TRUE(Run(no_old).allowed);
  auto unknown = Delete(kNs, Labelled(Namespace("team"), "Sometimes"));
  EXPECT_TRUE(Run(unknown).allowed);
}

}  // namespace
}  // namespace kruise::manager::deletionprotection
