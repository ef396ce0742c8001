// PubDisruptionGate (the PUB behind the controllers' inplace::DisruptionGate) against the fake API
// server: the same path as the /validate-pod webhook, so the cost is recorded in the PUB's status
// before Allow answers, and the pod UPDATE admission that follows is free.

#include "manager/pub/pub_gate.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/object.h"
#include "kube/rest_client.h"
#include "manager/pub/pub_webhook.h"
#include "test/fakes/apiserver/fake_apiserver.h"
#include "test/fakes/apiserver/fake_cluster_test.h"
#include "test/fakes/fake_clock.h"

namespace kruise::manager::pub {
namespace gate_test {

using inplace::DisruptionOperation;
using kube::Json;
using ::testing::HasSubstr;
constexpr char kPubs[] = "podunavailablebudgets.policy.kruise.io";
constexpr char kNs[] = "team";

class PubDisruptionGateTest : public testing::FakeClusterTest {
 protected:
  void SetUp() override {
    StartCluster({{"policy.kruise.io", "v1alpha1", "podunavailablebudgets", "PodUnavailableBudget",
                   true, true}});
    ASSERT_FALSE(HasFatalFailure());
    gate_ = std::make_unique<PubDisruptionGate>(&cache_, client_.get(), &clock_,
                                                std::vector<std::string>{"kube-system", "ks"});
    pods_ = std::make_unique<webhook::ApiPodReader>(client_.get());
    PubPodValidatorOptions o;
    o.clock = &clock_;
    o.guard_update = true;
    validator_ = std::make_unique<PubPodValidator>(&cache_, client_.get(), pods_.get(), o);
  }

  void SeedPub(int allowed) {
    Json pub = {
        {"apiVersion", "policy.kruise.io/v1alpha1"},
        {"kind", "PodUnavailableBudget"},
        {"metadata", {{"name", "web-pub"}, {"namespace", kNs}}},
        {"spec", {{"selector", {{"matchLabels", {{"app", "web"}}}}}, {"maxUnavailable", 1}}},
        {"status",
         {{"observedGeneration", 1},
          {"unavailableAllowed", allowed},
          {"currentAvailable", 3 + allowed},
          {"desiredAvailable", 3},
          {"totalReplicas", 4}}}};
    auto stored = server_->Seed(kPubs, pub);
    ASSERT_TRUE(stored.ok()) << stored.status();
    cache_.Upsert(*stored);
  }
  // The informer catching up with what the gate wrote.
  void Refresh() { cache_.Upsert(*server_->Get(kPubs, kNs, "web-pub")); }

  static Json Pod(const std::string& name, const std::string& ns = kNs) {
    return {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", name}, {"namespace", ns}, {"labels", {{"app", "web"}}}}},
            {"spec", {{"containers", {{{"name", "app"}, {"image", "nginx:1"}}}}}},
            {"status",
             {{"phase", "Running"}, {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
  }
  Json StoredStatus() { return (*server_->Get(kPubs, kNs, "web-pub"))["status"]; }

  PubCache cache_;
  std::unique_ptr<PubDisruptionGate> gate_;
  std::unique_ptr<webhook::ApiPodReader> pods_;
  std::unique_ptr<PubPodValidator> validator_;
};

TEST_F(PubDisruptionGateTest, RecordsThePodThenTheWebhookLetsItsUpdateThroughFree) {
  SeedPub(1);
  auto d = gate_->Allow(Pod("web-0"), DisruptionOperation::kUpdate, /*dry_run=*/false);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->budget, "web-pub");
  Json status = StoredStatus();
  EXPECT_EQ(status["unavailableAllowed"], 0);
  EXPECT_EQ(status["unavailablePods"]["web-0"], kube::FormatRfc3339(clock_.Now()));
  EXPECT_EQ(server_->RequestCount("PATCH"), 1);

  // The controller's patch then meets the webhook: the pod is recorded, nothing is spent again.
  Refresh();
  webhook::AdmissionRequest update;
  update.operation = "UPDATE";
  update.namespace_ = kNs;
  update.name = "web-0";
  update.old_object = Pod("web-0");
  update.object = Pod("web-0");
  update.object["spec"]["containers"][0]["image"] = "nginx:2";
  EXPECT_TRUE(validator_->Handle(update).allowed);
  EXPECT_EQ(server_->RequestCount("PATCH"), 1);
  // Asking again for the same pod (a retried round) is free as well.
  d = gate_->Allow(Pod("web-0"), DisruptionOperation::kUpdate, false);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(server_->RequestCount("PATCH"), 1);
}

TEST_F(PubDisruptionGateTest, DeniesWhenSpentNamingTheBudget) {
  SeedPub(1);
  ASSERT_TRUE(gate_->Allow(Pod("web-0"), DisruptionOperation::kUpdate, false)->allowed);
  // The cache still shows the budget: the write conflicts, re-reads and is denied.
  auto d = gate_->Allow(Pod("web-1"), DisruptionOperation::kUpdate, false);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->allowed);
  EXPECT_EQ(d->budget, "web-pub");
  EXPECT_THAT(d->message, HasSubstr("UPDATE of pod web-1"));
  EXPECT_FALSE(StoredStatus()["unavailablePods"].contains("web-1"));
  // Caught up: denied without a write.
  Refresh();
  const int patches = server_->RequestCount("PATCH");
  d = gate_->Allow(Pod("web-2"), DisruptionOperation::kDelete, false);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->allowed);
  EXPECT_THAT(d->message, HasSubstr("web-pub"));
  EXPECT_EQ(server_->RequestCount("PATCH"), patches);
  // Excluded namespaces and pods no PUB covers cost nothing.
  EXPECT_TRUE(gate_->Allow(Pod("web-3", "ks"), DisruptionOperation::kUpdate, false)->allowed);
  Json other = Pod("db-0");
  other["metadata"]["labels"]["app"] = "db";
  auto free = gate_->Allow(other, DisruptionOperation::kUpdate, false);
  ASSERT_TRUE(free.ok());
  EXPECT_TRUE(free->allowed);
  EXPECT_EQ(free->budget, "");
}

TEST_F(PubDisruptionGateTest, DryRunSpendsNothing) {
  SeedPub(1);
  auto d = gate_->Allow(Pod("web-0"), DisruptionOperation::kUpdate, /*dry_run=*/true);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(StoredStatus()["unavailableAllowed"], 1);
  EXPECT_EQ(server_->RequestCount("PATCH"), 0);
}

}  // namespace gate_test
}  // namespace kruise::manager::pub
