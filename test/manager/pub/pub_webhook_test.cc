// The pod webhook's PUB enforcement against the fake API server: the PubCache is fed by hand (a
// stale cache is how a concurrent write shows), the status write goes through the real REST
// client.

#include "manager/pub/pub_webhook.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/object.h"
#include "kube/rest_client.h"
#include "manager/webhook/fail_open.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "test/fakes/apiserver/fake_apiserver.h"
#include "test/fakes/apiserver/fake_cluster_test.h"
#include "test/fakes/apiserver/rest_client_for.h"
#include "test/fakes/fake_clock.h"

namespace kruise::manager::pub {
namespace webhook_test {

using kube::Json;
using ::testing::HasSubstr;
constexpr char kPubs[] = "podunavailablebudgets.policy.kruise.io";
constexpr char kNs[] = "team";

class PubPodValidatorTest : public testing::FakeClusterTest {
 protected:
  void SetUp() override {
    StartCluster({{"policy.kruise.io", "v1alpha1", "podunavailablebudgets", "PodUnavailableBudget",
                   true, true}});
    ASSERT_FALSE(HasFatalFailure());
    pods_ = std::make_unique<webhook::ApiPodReader>(client_.get());
    PubPodValidatorOptions o;
    o.clock = &clock_;
    o.guard_update = true;
    o.excluded_namespaces.push_back("kruise-system");
    validator_ = std::make_unique<PubPodValidator>(&cache_, client_.get(), pods_.get(), o);
  }

  // PUB "web-pub" over app=web with `allowed` of 3 desired available.
  Json SeedPub(int allowed) {
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
    EXPECT_TRUE(stored.ok()) << stored.status();
    cache_.Upsert(*stored);
    return *stored;
  }

  static Json Pod(const std::string& name, bool ready = true, const std::string& ns = kNs) {
    return {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", name}, {"namespace", ns}, {"labels", {{"app", "web"}}}}},
            {"spec", {{"containers", {{{"name", "app"}, {"image", "nginx:1"}}}}}},
            {"status",
             {{"phase", "Running"},
              {"conditions", {{{"type", "Ready"}, {"status", ready ? "True" : "False"}}}}}}};
  }

  static webhook::AdmissionRequest Delete(const Json& pod, bool dry_run = false) {
    webhook::AdmissionRequest r;
    r.operation = "DELETE";
    r.namespace_ = kube::Namespace(pod);
    r.name = kube::Name(pod);
    r.old_object = pod;
    r.dry_run = dry_run;
    return r;
  }

  Json StoredStatus() { return (*server_->Get(kPubs, kNs, "web-pub"))["status"]; }

  std::unique_ptr<webhook::ApiPodReader> pods_;
  PubCache cache_;
  std::unique_ptr<PubPodValidator> validator_;
};

TEST_F(PubPodValidatorTest, AllowedDeletionIsRecordedBeforeTheAnswer) {
  SeedPub(1);
  auto r = validator_->Handle(Delete(Pod("web-0")));
  EXPECT_TRUE(r.allowed) << r.result.message;
  Json status = StoredStatus();
  EXPECT_EQ(status["unavailableAllowed"], 0);
  EXPECT_EQ(status["disruptedPods"]["web-0"], kube::FormatRfc3339(clock_.Now()));
  EXPECT_EQ(status["desiredAvailable"], 3);  // other fields untouched
}

TEST_F(PubPodValidatorTest, SpentBudgetDenies) {
  SeedPub(0);
  auto r = validator_->Handle(Delete(Pod("web-0")));
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.result.code, 403);
  EXPECT_THAT(r.result.message, HasSubstr("web-pub"));
  EXPECT_THAT(r.result.message, HasSubstr("DELETE of pod web-0"));
  EXPECT_EQ(server_->RequestCount("PATCH"), 0);
  // An unready pod, a pod no PUB covers, kube-system and the manager's namespace: free.
  EXPECT_TRUE(validator_->Handle(Delete(Pod("web-1", /*ready=*/false))).allowed);
  Json other = Pod("db-0");
  other["metadata"]["labels"]["app"] = "db";
  EXPECT_TRUE(validator_->Handle(Delete(other)).allowed);
  EXPECT_TRUE(validator_->Handle(Delete(Pod("web-0", true, "kube-system"))).allowed);
  EXPECT_TRUE(validator_->Handle(Delete(Pod("web-0", true, "kruise-system"))).allowed);
  // A finished pod (what the pod garbage collector deletes) never costs anything.
  Json done = Pod("web-2");
  done["status"]["phase"] = "Succeeded";
  EXPECT_TRUE(validator_->Handle(Delete(done)).allowed);
}

TEST_F(PubPodValidatorTest, DryRunSpendsNothing) {
  SeedPub(1);
  EXPECT_TRUE(validator_->Handle(Delete(Pod("web-0"), /*dry_run=*/true)).allowed);
  EXPECT_EQ(StoredStatus()["unavailableAllowed"], 1);
  EXPECT_EQ(server_->RequestCount("PATCH"), 0);
}

TEST_F(PubPodValidatorTest, ConflictRereadsAndDecidesAgain) {
  Json stale = SeedPub(2);
  // Someone (another replica) recorded web-9 meanwhile: the cache still shows the old object.
  Json fresh = *server_->Get(kPubs, kNs, "web-pub");
  fresh["status"]["unavailableAllowed"] = 1;
  fresh["status"]["disruptedPods"] = {{"web-9", kube::FormatRfc3339(clock_.Now())}};
  ASSERT_TRUE(server_->Put(kPubs, fresh).ok());
  auto r = validator_->Handle(Delete(Pod("web-0")));
  EXPECT_TRUE(r.allowed) << r.result.message;
  Json status = StoredStatus();
  EXPECT_EQ(status["unavailableAllowed"], 0);
  EXPECT_TRUE(status["disruptedPods"].contains("web-9"));  // kept
  EXPECT_TRUE(status["disruptedPods"].contains("web-0"));
  // The cache is still stale (allowed 2): the next pod conflicts, re-reads and is denied.
  r = validator_->Handle(Delete(Pod("web-1")));
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.result.code, 403);
  EXPECT_FALSE(StoredStatus()["disruptedPods"].contains("web-1"));
}

// Issue 33: the pod webhook is failurePolicy Ignore, so a budget that cannot be recorded (an API
// error, conflicts past the retries, a failed pod read) allows, with a warning, a Warning event
// on the PUB (the pod) and the counter; a spent budget still denies.
class PubPodValidatorFailOpenTest : public PubPodValidatorTest {
 protected:
  void SetUp() override {
    PubPodValidatorTest::SetUp();
    ASSERT_FALSE(HasFatalFailure());
    fail_open_ = std::make_unique<webhook::FailOpen>(webhook::FailOpen::Options{
        .metrics = &metrics_,
        .event = [this](const Json& object, const std::string& reason, const std::string& msg) {
          events_.push_back({object, reason, msg});
        }});
    // As the manager's webhook client: one attempt per call.
    kube::RestClientOptions one_attempt;
    one_attempt.max_attempts = 1;
    auto client = testing::UnthrottledClientFor(*server_, one_attempt);
    ASSERT_TRUE(client.ok()) << client.status();
    webhook_client_ = *std::move(client);
    pods_ = std::make_unique<webhook::ApiPodReader>(webhook_client_.get());
    PubPodValidatorOptions o;
    o.clock = &clock_;
    o.fail_open = fail_open_.get();
    validator_ =
        std::make_unique<PubPodValidator>(&cache_, webhook_client_.get(), pods_.get(), o);
  }
  std::string Metric() {
    return prometheus::TextSerializer().Serialize(metrics_.Collect());
  }
  struct Event {
    Json object;
    std::string reason, message;
  };
  prometheus::Registry metrics_;
  std::vector<Event> events_;
  std::unique_ptr<webhook::FailOpen> fail_open_;
  std::unique_ptr<kube::RestKubeClient> webhook_client_;
};

TEST_F(PubPodValidatorFailOpenTest, FailedStatusWriteAllowsWithWarningEventAndMetric) {
  SeedPub(1);
  testing::FakeFailure failure;
  failure.method = "PATCH";
  failure.path_substring = "podunavailablebudgets";
  failure.http_code = 500;
  server_->FailNext(failure);
  auto r = validator_->Handle(Delete(Pod("web-0")));
  EXPECT_TRUE(r.allowed) << r.result.message;
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_THAT(r.warnings[0], HasSubstr("DELETE of pod web-0 not counted"));
  EXPECT_THAT(r.warnings[0], HasSubstr("failurePolicy Ignore"));
  EXPECT_EQ(StoredStatus()["unavailableAllowed"], 1);  // nothing recorded
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].object["kind"], "PodUnavailableBudget");
  EXPECT_EQ(events_[0].object["metadata"]["name"], "web-pub");
  EXPECT_EQ(events_[0].object["metadata"]["namespace"], kNs);
  EXPECT_EQ(events_[0].reason, webhook::FailOpen::kReason);
  EXPECT_THAT(Metric(), HasSubstr("kruise_webhook_infrastructure_failures_total{handler="
                                  "\"podunavailablebudget\",path=\"/validate-pod\"} 1"));
}

TEST_F(PubPodValidatorFailOpenTest, ConflictsPastTheRetriesAllow) {
  SeedPub(1);
  testing::FakeFailure conflict;
  conflict.method = "PATCH";
  conflict.path_substring = "podunavailablebudgets";
  conflict.http_code = 409;
  conflict.count = 100;
  server_->FailNext(conflict);
  auto r = validator_->Handle(Delete(Pod("web-0")));
  EXPECT_TRUE(r.allowed) << r.result.message;
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_THAT(r.warnings[0], HasSubstr("Conflict"));
  EXPECT_EQ(fail_open_->count(), 1);
}

TEST_F(PubPodValidatorFailOpenTest, SpentBudgetStillDenies) {
  SeedPub(0);
  auto r = validator_->Handle(Delete(Pod("web-0")));
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.result.code, 403);
  EXPECT_THAT(r.result.message, HasSubstr("web-pub"));
  EXPECT_EQ(fail_open_->count(), 0);
  EXPECT_TRUE(events_.empty());
}

TEST_F(PubPodValidatorFailOpenTest, FailedPodReadOfAnEvictionAllows) {
  SeedPub(1);
  ASSERT_TRUE(server_->Seed("pods", Pod("web-0")).ok());
  testing::FakeFailure failure;
  failure.method = "GET";
  failure.path_substring = "/pods/web-0";
  failure.http_code = 503;
  server_->FailNext(failure);
  webhook::AdmissionRequest evict;
  evict.operation = "CREATE";
  evict.sub_resource = "eviction";
  evict.namespace_ = kNs;
  evict.name = "web-0";
  evict.object = {{"apiVersion", "policy/v1"},
                  {"kind", "Eviction"},
                  {"metadata", {{"name", "web-0"}, {"namespace", kNs}}}};
  auto r = validator_->Handle(evict);
  EXPECT_TRUE(r.allowed) << r.result.message;
  ASSERT_EQ(r.warnings.size(), 1u);
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].object["kind"], "Pod");
  EXPECT_EQ(events_[0].object["metadata"]["name"], "web-0");
}

TEST_F(PubPodValidatorTest, WithoutFailOpenAFailedWriteDenies) {
  SeedPub(1);
  testing::FakeFailure failure;
  failure.method = "PATCH";
  failure.path_substring = "podunavailablebudgets";
  failure.http_code = 500;
  server_->FailNext(failure);
  auto r = validator_->Handle(Delete(Pod("web-0")));
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.result.code, 500);
}

TEST_F(PubPodValidatorTest, EvictionAndUpdate) {
  SeedPub(2);
  ASSERT_TRUE(server_->Seed("pods", Pod("web-0")).ok());
  webhook::AdmissionRequest evict;
  evict.operation = "CREATE";
  evict.sub_resource = "eviction";
  evict.namespace_ = kNs;
  evict.name = "web-0";
  evict.object = {{"apiVersion", "policy/v1"},
                  {"kind", "Eviction"},
                  {"metadata", {{"name", "web-0"}, {"namespace", kNs}}},
                  {"deleteOptions", {{"dryRun", {"All"}}}}};
  EXPECT_TRUE(validator_->Handle(evict).allowed);  // dry run
  EXPECT_EQ(StoredStatus()["unavailableAllowed"], 2);
  evict.object.erase("deleteOptions");
  EXPECT_TRUE(validator_->Handle(evict).allowed);
  EXPECT_TRUE(StoredStatus()["disruptedPods"].contains("web-0"));
  evict.name = "gone";
  EXPECT_TRUE(validator_->Handle(evict).allowed);  // no such pod

  // UPDATE: a label change costs nothing, an image change costs one (unavailablePods).
  cache_.Upsert(*server_->Get(kPubs, kNs, "web-pub"));
  webhook::AdmissionRequest update;
  update.operation = "UPDATE";
  update.namespace_ = kNs;
  update.name = "web-1";
  update.old_object = Pod("web-1");
  update.object = Pod("web-1");
  update.object["metadata"]["labels"]["x"] = "y";
  EXPECT_TRUE(validator_->Handle(update).allowed);
  EXPECT_FALSE(StoredStatus().contains("unavailablePods"));
  update.object["spec"]["containers"][0]["image"] = "nginx:2";
  EXPECT_TRUE(validator_->Handle(update).allowed);
  Json status = StoredStatus();
  EXPECT_TRUE(status["unavailablePods"].contains("web-1"));
  EXPECT_EQ(status["unavailableAllowed"], 0);
}

}  // namespace webhook_test
}  // namespace kruise::manager::pub
