// PUB controller against the fake API server: real REST client, informers (the pod informer with
// the shared cache's transform, so Deployment pods are stubs) and event recorder, fake clock; the
// test calls Reconcile itself.

#include "manager/pub/pub_controller.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/object.h"
#include "kube/rest_client.h"
#include "manager/pub/pub_webhook.h"
#include "test/fakes/apiserver/fake_apiserver.h"
#include "test/fakes/apiserver/fake_cluster_test.h"
#include "test/fakes/fake_clock.h"

namespace kruise::manager::pub {
namespace controller_test {

using kube::Json;
constexpr char kPubs[] = "podunavailablebudgets.policy.kruise.io";
constexpr char kNs[] = "team";

class PubControllerTest : public testing::FakeClusterTest {
 protected:
  void SetUp() override {
    StartCluster({{"policy.kruise.io", "v1alpha1", "podunavailablebudgets", "PodUnavailableBudget",
                   true, true}});
    ASSERT_FALSE(HasFatalFailure());
    StartRecorder();
  }

  void StartInformers() {
    pubs_ = std::make_unique<kube::Informer>(client_.get(), &clock_, PubInformerOptions());
    pods_ = std::make_unique<kube::Informer>(client_.get(), &clock_, SharedInformers::PodOptions());
    for (kube::Informer* i : {pubs_.get(), pods_.get()}) i->Start();
    for (kube::Informer* i : {pubs_.get(), pods_.get()}) {
      ASSERT_TRUE(i->WaitForSync(clock_.Now() + absl::Seconds(10)));
    }
    PubReconcilerOptions ro;
    ro.clock = &clock_;
    reconciler_ = std::make_unique<PubReconciler>(
        client_.get(), PubInformers{pubs_.get(), pods_.get()}, recorder_.get(), ro);
  }

  void TearDown() override {
    recorder_.reset();
    for (auto* i : {pubs_.get(), pods_.get()}) {
      if (i != nullptr) i->RequestStop();
    }
    for (auto* i : {pubs_.get(), pods_.get()}) {
      if (i != nullptr) i->Stop();
    }
  }

  static Json Pod(const std::string& name, const Json& owner, bool ready = true,
                  const std::string& app = "web") {
    Json pod = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata",
                 {{"name", name},
                  {"namespace", kNs},
                  {"labels", {{"app", app}, {"pod-template-hash", "h1"}}}}},
                {"spec", {{"containers", {{{"name", "app"}, {"image", "nginx:1"}}}}}},
                {"status",
                 {{"phase", "Running"},
                  {"conditions", {{{"type", "Ready"}, {"status", ready ? "True" : "False"}}}}}}};
    if (!owner.is_null()) pod["metadata"]["ownerReferences"] = Json::array({owner});
    return pod;
  }

  Json SeedPub(const Json& spec, const Json& status = nullptr) {
    Json pub = {{"apiVersion", "policy.kruise.io/v1alpha1"},
                {"kind", "PodUnavailableBudget"},
                {"metadata", {{"name", "web-pub"}, {"namespace", kNs}}},
                {"spec", spec}};
    if (!status.is_null()) pub["status"] = status;
    auto stored = server_->Seed(kPubs, pub);
    EXPECT_TRUE(stored.ok()) << stored.status();
    return *stored;
  }

  absl::StatusOr<kube::Result> Reconcile() { return reconciler_->Reconcile({kNs, "web-pub"}); }
  Json Status() { return (*server_->Get(kPubs, kNs, "web-pub"))["status"]; }

  std::unique_ptr<kube::Informer> pubs_, pods_;
  std::unique_ptr<PubReconciler> reconciler_;
};

TEST_F(PubControllerTest, SelectorBudget) {
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(server_->Seed("pods", Pod("web-" + std::to_string(i), nullptr, i != 3)).ok());
  }
  ASSERT_TRUE(server_->Seed("pods", Pod("db-0", nullptr, true, "db")).ok());
  SeedPub({{"selector", {{"matchLabels", {{"app", "web"}}}}}, {"maxUnavailable", 1}});
  StartInformers();
  auto r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->requeue_after, absl::ZeroDuration());
  Json s = Status();
  EXPECT_EQ(s["totalReplicas"], 4);
  EXPECT_EQ(s["desiredAvailable"], 3);
  EXPECT_EQ(s["currentAvailable"], 3);
  EXPECT_EQ(s["unavailableAllowed"], 0);
  EXPECT_EQ(s["observedGeneration"], 1);
}

TEST_F(PubControllerTest, DeploymentTargetOverCacheStubs) {
  Json deploy = {{"apiVersion", "apps/v1"},
                 {"kind", "Deployment"},
                 {"metadata", {{"name", "web"}, {"namespace", kNs}}},
                 {"spec",
                  {{"replicas", 5},
                   {"selector", {{"matchLabels", {{"app", "web"}}}}},
                   {"template", Json::object()}}}};
  ASSERT_TRUE(server_->Seed("deployments.apps", deploy).ok());
  const Json rs = {{"apiVersion", "apps/v1"},
                   {"kind", "ReplicaSet"},
                   {"name", "web-h1"},
                   {"uid", "rs-uid"},
                   {"controller", true}};
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(server_->Seed("pods", Pod("web-" + std::to_string(i), rs, i != 0)).ok());
  }
  // Selected by the Deployment's selector but owned by a StatefulSet: not its pod.
  const Json sts = {{"apiVersion", "apps/v1"},
                    {"kind", "StatefulSet"},
                    {"name", "other"},
                    {"uid", "sts-uid"},
                    {"controller", true}};
  ASSERT_TRUE(server_->Seed("pods", Pod("other-0", sts)).ok());
  SeedPub({{"targetRef", {{"apiVersion", "apps/v1"}, {"kind", "Deployment"}, {"name", "web"}}},
           {"minAvailable", "60%"}});
  StartInformers();
  // The cache keeps stubs of these pods: no containers, readiness only when not ready.
  auto stub = pods_->store().Get(kNs, "web-0");
  ASSERT_NE(stub, nullptr);
  EXPECT_EQ(kube::FindPath(*stub, {"spec", "containers"}), nullptr);
  EXPECT_FALSE(PodFactsOfCached(*stub).ready);
  EXPECT_TRUE(PodFactsOfCached(*pods_->store().Get(kNs, "web-1")).ready);

  ASSERT_TRUE(Reconcile().ok());
  Json s = Status();
  EXPECT_EQ(s["totalReplicas"], 5);     // the Deployment's replicas
  EXPECT_EQ(s["desiredAvailable"], 3);  // 60% of 5
  EXPECT_EQ(s["currentAvailable"], 3);  // web-1..3
  EXPECT_EQ(s["unavailableAllowed"], 0);
}

TEST_F(PubControllerTest, ExpiresEntriesAndRequeuesAtTheNextExpiry) {
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(server_->Seed("pods", Pod("web-" + std::to_string(i), nullptr)).ok());
  }
  const absl::Time now = clock_.Now();
  SeedPub({{"selector", {{"matchLabels", {{"app", "web"}}}}}, {"maxUnavailable", 1}},
          {{"unavailableAllowed", 0},
           {"disruptedPods",
            {{"web-0", kube::FormatRfc3339(now - absl::Seconds(30))},
             {"gone", kube::FormatRfc3339(now - absl::Seconds(1))}}},
           {"unavailablePods", {{"web-1", kube::FormatRfc3339(now - absl::Seconds(4))}}}});
  StartInformers();
  auto r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  // web-1's entry expires 6 s from now; the controller looks one second after.
  EXPECT_EQ(r->requeue_after, absl::Seconds(7));
  Json s = Status();
  EXPECT_FALSE(s.contains("disruptedPods"));  // web-0 expired, "gone" is gone
  EXPECT_TRUE(s["unavailablePods"].contains("web-1"));
  EXPECT_EQ(s["currentAvailable"], 2);
  EXPECT_EQ(s["unavailableAllowed"], 0);
  // A NotDeleted warning for web-0 (the recorder writes asynchronously).
  bool found = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!found && std::chrono::steady_clock::now() < deadline) {
    for (const Json& e : server_->List("events", kNs)) {
      if (e.value("reason", "") == "NotDeleted" &&
          e.value("message", "").find("web-0") != std::string::npos) {
        found = true;
      }
    }
    if (!found) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(found);
}

TEST_F(PubControllerTest, StatusWriteKeepsWhatTheWebhookRecordedMeanwhile) {
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(server_->Seed("pods", Pod("web-" + std::to_string(i), nullptr)).ok());
  }
  SeedPub({{"selector", {{"matchLabels", {{"app", "web"}}}}}, {"maxUnavailable", 2}});
  StartInformers();
  // The PUB cache stops here: what the webhook writes next is not in it.
  pubs_->RequestStop();
  pubs_->Stop();
  Json pub = *server_->Get(kPubs, kNs, "web-pub");
  pub["status"] = {{"unavailableAllowed", 1},
                   {"desiredAvailable", 2},
                   {"disruptedPods", {{"web-3", kube::FormatRfc3339(clock_.Now())}}}};
  ASSERT_TRUE(server_->Put(kPubs, pub).ok());
  auto r = Reconcile();
  ASSERT_TRUE(r.ok()) << r.status();
  Json s = Status();
  EXPECT_TRUE(s["disruptedPods"].contains("web-3"));
  EXPECT_EQ(s["currentAvailable"], 3);  // web-3 is on its way out
  EXPECT_EQ(s["unavailableAllowed"], 1);
  EXPECT_EQ(r->requeue_after, absl::Seconds(21));
}

}  // namespace controller_test
}  // namespace kruise::manager::pub
