#include "daemon/imagepull/nodeimage_controller.h"

#include "cri/grpc_cri.h"
#include "gtest/gtest.h"
#include "kube/resources.h"
#include "kube/rest_client.h"
#include "test/fakes/apiserver/fake_apiserver.h"
#include "test/fakes/apiserver/rest_client_for.h"
#include "test/fakes/cri/fake_cri_server.h"

namespace kruise::daemon {
namespace {

using Json = nlohmann::json;

class NodeImageControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api_.Start().ok());
    auto client = testing::UnthrottledClientFor(api_);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
    auto cri = testing::FakeCriServer::Start();
    ASSERT_TRUE(cri.ok());
    cri_ = std::move(*cri);
    auto channel = cri::DialCri(cri_->endpoint());
    ASSERT_TRUE(channel.ok());
    images_ = std::make_shared<cri::GrpcImageService>(*channel);
  }

  std::unique_ptr<NodeImageController> NewController(double qps = 50, int burst = 50) {
    NodeImageControllerOptions o;
    o.node_name = "node-1";
    o.resource = kube::resources::NodeImages();
    o.status_qps = qps;
    o.status_burst = burst;
    auto images = images_;
    return std::make_unique<NodeImageController>(
        o, client_.get(), Clock::Real(), nullptr, [images](std::function<void()> on_change) {
          ImagePullerOptions po;
          po.backoff_initial = absl::Milliseconds(5);
          po.backoff_max = absl::Milliseconds(10);
          po.progress_interval = absl::Milliseconds(20);
          return std::make_unique<ImagePuller>(po, images, nullptr, nullptr, Clock::Real(),
                                               std::move(on_change));
        });
  }

  Json NodeImage(const std::string& name, Json images) {
    return {{"apiVersion", "apps.kruise.io/v1alpha1"},
            {"kind", "NodeImage"},
            {"metadata", {{"name", name}}},
            {"spec", {{"images", images}}}};
  }

  // Polls the API server (the object under test lives there) until `pred` holds.
  bool WaitForStatus(const std::function<bool(const Json&)>& pred,
                     absl::Duration timeout = absl::Seconds(20)) {
    absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      auto obj = client_->Get(kube::resources::NodeImages(), "", "node-1");
      if (obj.ok() && obj->contains("status") && pred((*obj)["status"])) return true;
      // The fake API server offers no push channel for tests; a short poll interval bounded by
      // the deadline keeps this a condition wait.
      absl::SleepFor(absl::Milliseconds(20));
    }
    return false;
  }

  testing::FakeApiServer api_;
  std::unique_ptr<kube::RestKubeClient> client_;
  std::unique_ptr<testing::FakeCriServer> cri_;
  std::shared_ptr<cri::ImageService> images_;
};

TEST_F(NodeImageControllerTest, PullsOwnNodeImageAndWritesStatusKeepingUnknownFields) {
  Json images = {{"busybox", {{"tags", {{{"tag", "1.35"}, {"version", 1}}}}}}};
  ASSERT_TRUE(client_->Create(kube::resources::NodeImages(), "", NodeImage("node-1", images)).ok());
  // Another node's NodeImage must be ignored.
  ASSERT_TRUE(client_
                  ->Create(kube::resources::NodeImages(), "",
                           NodeImage("node-2", {{"other", {{"tags", {{{"tag", "x"}}}}}}}))
                  .ok());
  // A status field we do not model must survive our writes.
  ASSERT_TRUE(client_
                  ->Patch(kube::resources::NodeImages(), "", "node-1", kube::PatchType::kMerge,
                          {{"status", {{"firstSyncStatus", {{"status", "Succeeded"}}}}}}, "status")
                  .ok());
  auto controller = NewController();
  controller->Start();
  ASSERT_TRUE(controller->WaitForSync(absl::Now() + absl::Seconds(10)));
  ASSERT_TRUE(WaitForStatus([](const Json& s) {
    return s.value("succeeded", 0) == 1 &&
           s["imageStatuses"]["busybox"]["tags"][0]["phase"] == "Succeeded";
  }));
  auto obj = client_->Get(kube::resources::NodeImages(), "", "node-1");
  ASSERT_TRUE(obj.ok());
  const Json& status = (*obj)["status"];
  EXPECT_EQ(status["desired"], 1);
  EXPECT_EQ(status["firstSyncStatus"]["status"], "Succeeded");
  EXPECT_EQ(status["imageStatuses"]["busybox"]["tags"][0]["progress"], 100);
  EXPECT_EQ(status["imageStatuses"]["busybox"]["tags"][0]["version"], 1);
  EXPECT_FALSE(cri_->HasImage("docker.io/library/other:x"));

  // A tag removed from spec disappears from status.
  ASSERT_TRUE(
      client_
          ->Patch(kube::resources::NodeImages(), "", "node-1", kube::PatchType::kMerge,
                  {{"spec",
                    {{"images", {{"busybox", nullptr}, {"app", {{"tags", {{{"tag", "v1"}}}}}}}}}}})
          .ok());
  ASSERT_TRUE(WaitForStatus([](const Json& s) {
    return !s["imageStatuses"].contains("busybox") && s.value("desired", 0) == 1 &&
           s.value("succeeded", 0) == 1;
  }));
  controller->Stop();
}

TEST_F(NodeImageControllerTest, RestartedDaemonDoesNotPullCompletedTagsAgain) {
  Json images = {{"busybox", {{"tags", {{{"tag", "1.35"}, {"version", 4}}}}}}};
  ASSERT_TRUE(client_->Create(kube::resources::NodeImages(), "", NodeImage("node-1", images)).ok());
  {
    auto first = NewController();
    first->Start();
    ASSERT_TRUE(WaitForStatus([](const Json& s) { return s.value("succeeded", 0) == 1; }));
    first->Stop();
  }
  EXPECT_EQ(cri_->CallCount("PullImage"), 1);
  auto second = NewController();
  second->Start();
  ASSERT_TRUE(second->WaitForSync(absl::Now() + absl::Seconds(10)));
  auto statuses = second->puller().Statuses();
  ASSERT_EQ(statuses["busybox"].size(), 1u);
  EXPECT_EQ(statuses["busybox"][0].phase, TagPhase::kSucceeded);
  EXPECT_EQ(cri_->CallCount("PullImage"), 1);
  second->Stop();
}

TEST_F(NodeImageControllerTest, FailedPullReportsTheRuntimeMessage) {
  for (int i = 0; i < 2; ++i) {
    cri_->InjectError("PullImage", absl::NotFoundError("127.0.0.1:5000/nope:v1: not found"));
  }
  Json images = {{"127.0.0.1:5000/nope",
                  {{"tags",
                    {{{"tag", "v1"},
                      {"version", 1},
                      {"pullPolicy", {{"backoffLimit", 1}, {"timeoutSeconds", 5}}}}}}}}};
  ASSERT_TRUE(client_->Create(kube::resources::NodeImages(), "", NodeImage("node-1", images)).ok());
  auto controller = NewController();
  controller->Start();
  ASSERT_TRUE(WaitForStatus([](const Json& s) { return s.value("failed", 0) == 1; }));
  auto obj = client_->Get(kube::resources::NodeImages(), "", "node-1");
  const Json& tag = (*obj)["status"]["imageStatuses"]["127.0.0.1:5000/nope"]["tags"][0];
  EXPECT_EQ(tag["phase"], "Failed");
  EXPECT_NE(tag["message"].get<std::string>().find("not found"), std::string::npos);
  EXPECT_EQ(cri_->CallCount("PullImage"), 2);
  controller->Stop();
}

// Issue 13, part 3: a phase change or completion does not wait for the status-write budget.
// With one token and a refill of one per ~17 minutes, the write that reports Pulling spends the
// budget; the completion must still reach the API server at once.
TEST_F(NodeImageControllerTest, CompletionIsWrittenWithoutWaitingForATokenWhenBudgetIsSpent) {
  cri_->SetPullDuration(absl::Milliseconds(300), 1 << 20);  // Pulling is seen before Succeeded
  Json images = {{"busybox", {{"tags", {{{"tag", "1.35"}, {"version", 1}}}}}},
                 {"nginx", {{"tags", {{{"tag", "1.25"}, {"version", 1}}}}}}};
  ASSERT_TRUE(client_->Create(kube::resources::NodeImages(), "", NodeImage("node-1", images)).ok());
  auto controller = NewController(/*qps=*/0.001, /*burst=*/1);
  controller->Start();
  ASSERT_TRUE(WaitForStatus([](const Json& s) { return s.value("succeeded", 0) == 2; },
                            absl::Seconds(15)));
  NodeImageControllerStats stats = controller->stats();
  EXPECT_GE(stats.status_writes, 2u);
  EXPECT_GE(stats.urgent_status_writes, stats.status_writes - 1);
  controller->Stop();
}

}  // namespace
}  // namespace kruise::daemon
