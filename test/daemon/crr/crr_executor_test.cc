#include "daemon/crr/crr_executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cri/grpc_cri.h"
#include "kube/object.h"
#include "test/fakes/cri/fake_cri_server.h"
#include "test/fakes/fake_clock.h"

namespace kruise::daemon {
namespace {

namespace v1 = ::runtime::v1;
using kube::Json;
using ::testing::ElementsAre;
using testing::FakeClock;
using testing::FakeCriServer;
using ::testing::HasSubstr;

constexpr char kPodUid[] = "pod-uid-1";
constexpr char kImage[] = "docker.io/library/busybox:1.36";

class CrrExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeCriServer::Options options;
    options.clock = &clock_;  // started_at/created_at follow the fake clock
    auto server = FakeCriServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    auto channel = cri::DialCri(server_->endpoint());
    ASSERT_TRUE(channel.ok()) << channel.status();
    // RPC deadlines use the real clock; only the executor's "now" is fake.
    runtime_ = std::make_unique<cri::GrpcRuntimeService>(*channel);
    ASSERT_TRUE(server_->AddImage(kImage).ok());

    sandbox_config_.mutable_metadata()->set_name("web-0");
    sandbox_config_.mutable_metadata()->set_namespace_("default");
    sandbox_config_.mutable_metadata()->set_uid(kPodUid);
    (*sandbox_config_.mutable_labels())["io.kubernetes.pod.uid"] = kPodUid;
    auto sandbox = runtime_->RunPodSandbox(sandbox_config_, "");
    ASSERT_TRUE(sandbox.ok()) << sandbox.status();
    sandbox_id_ = *sandbox;
  }

  void TearDown() override {
    // Whatever the test did: never StopContainer(0), which is SIGKILL at once.
    for (const auto& req : server_->Requests<v1::StopContainerRequest>("StopContainer")) {
      EXPECT_GE(req.timeout(), 2) << "StopContainer of " << req.container_id();
    }
  }

  // Creates (and by default starts) container `name` with `attempt`, as kubelet would.
  std::string AddContainer(const std::string& name, uint32_t attempt, bool start = true) {
    v1::ContainerConfig config;
    config.mutable_metadata()->set_name(name);
    config.mutable_metadata()->set_attempt(attempt);
    config.mutable_image()->set_image(kImage);
    (*config.mutable_labels())["io.kubernetes.pod.uid"] = kPodUid;
    (*config.mutable_labels())["io.kubernetes.container.name"] = name;
    auto id = runtime_->CreateContainer(sandbox_id_, config, sandbox_config_);
    EXPECT_TRUE(id.ok()) << id.status();
    if (!id.ok()) return "";
    if (start) {
      absl::Status st = runtime_->StartContainer(*id);
      EXPECT_TRUE(st.ok()) << st;
    }
    return *id;
  }

  Json SpecContainer(const std::string& name, const std::string& id, int restart_count = 0) {
    return {{"name", name},
            {"statusContext",
             {{"containerID", "containerd://" + id}, {"restartCount", restart_count}}}};
  }

  Json NewCrr(Json containers, Json strategy = Json::object()) {
    return {
        {"apiVersion", "apps.kruise.io/v1alpha1"},
        {"kind", "ContainerRecreateRequest"},
        {"metadata",
         {{"name", "crr-1"},
          {"namespace", "default"},
          {"creationTimestamp", kube::FormatRfc3339(clock_.Now())},
          {"labels", {{kCrrPodUidLabel, kPodUid}}}}},
        {"spec",
         {{"podName", "web-0"}, {"containers", std::move(containers)}, {"strategy", strategy}}}};
  }

  // One reconcile step at the fake clock's time; applies the patch to `crr` like the API server.
  CrrStepResult Step(Json* crr) {
    auto result = executor_->Reconcile(*crr, clock_.Now());
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return {};
    EXPECT_TRUE(result->status_patch.is_object());
    if (result->HasPatch()) {
      EXPECT_EQ(result->status_patch.size(), 1u) << "status-only patch expected";
      crr->merge_patch(result->status_patch);
    }
    return *result;
  }

  static std::string ContainerPhase(const Json& crr, const std::string& name) {
    for (const Json& s : crr["status"]["containerRecreateStates"]) {
      if (s["name"] == name) return s["phase"].get<std::string>();
    }
    return "<none>";
  }
  static Json ContainerState(const Json& crr, const std::string& name) {
    for (const Json& s : crr["status"]["containerRecreateStates"]) {
      if (s["name"] == name) return s;
    }
    return nullptr;
  }

  void MakeExecutor(CrrExecutorOptions options = {}) {
    executor_ = std::make_unique<CrrExecutor>(runtime_.get(), &clock_, options);
  }

  std::vector<v1::StopContainerRequest> Stops() const {
    return server_->Requests<v1::StopContainerRequest>("StopContainer");
  }

  FakeClock clock_;
  std::unique_ptr<FakeCriServer> server_;
  std::unique_ptr<cri::GrpcRuntimeService> runtime_;
  v1::PodSandboxConfig sandbox_config_;
  std::string sandbox_id_;
  std::unique_ptr<CrrExecutor> executor_;  // built by MakeExecutor()
};

TEST_F(CrrExecutorTest, KillsWithDefaultGraceThenSucceedsOnceNewContainerRanLongEnough) {
  MakeExecutor();
  std::string old_id = AddContainer("app", 0);
  Json crr = NewCrr(Json::array({SpecContainer("app", old_id)}), {{"minStartedSeconds", 10}});

  CrrStepResult step = Step(&crr);
  EXPECT_EQ(crr["status"]["phase"], "Recreating");
  ASSERT_EQ(Stops().size(), 1u);
  EXPECT_EQ(Stops()[0].container_id(), old_id);
  EXPECT_EQ(Stops()[0].timeout(), 30);  // terminationGracePeriodSeconds unset → 30
  Json state = ContainerState(crr, "app");
  EXPECT_EQ(state["phase"], "Recreating");
  EXPECT_EQ(state["isKilled"], true);
  ASSERT_TRUE(step.requeue_after.has_value());
  EXPECT_EQ(*step.requeue_after, absl::Seconds(3));
  ASSERT_EQ(step.events.size(), 1u);
  EXPECT_EQ(step.events[0].reason, "Killing");
  // The start of Recreating is recorded in status.
  ASSERT_TRUE(crr["status"]["conditions"].is_array());
  EXPECT_EQ(crr["status"]["conditions"][0]["type"], "Recreating");

  // Kubelet has not restarted it yet: nothing changes, nothing written, no second kill.
  clock_.Advance(absl::Seconds(1));
  step = Step(&crr);
  EXPECT_FALSE(step.HasPatch()) << step.status_patch.dump();
  EXPECT_EQ(Stops().size(), 1u);

  // Kubelet creates attempt 1.
  std::string new_id = AddContainer("app", 1);
  step = Step(&crr);
  EXPECT_EQ(ContainerPhase(crr, "app"), "Recreating");
  ASSERT_TRUE(step.requeue_after.has_value());
  EXPECT_EQ(*step.requeue_after, absl::Seconds(10));  // exactly minStartedSeconds left

  clock_.Advance(absl::Seconds(9));
  step = Step(&crr);
  EXPECT_EQ(ContainerPhase(crr, "app"), "Recreating");
  EXPECT_EQ(*step.requeue_after, absl::Seconds(1));

  clock_.Advance(absl::Seconds(1));
  step = Step(&crr);
  EXPECT_EQ(ContainerPhase(crr, "app"), "Succeeded");
  EXPECT_EQ(crr["status"]["phase"], "Completed");
  EXPECT_EQ(crr["status"]["completionTime"], kube::FormatRfc3339(clock_.Now()));
  EXPECT_THAT(crr["status"]["message"].get<std::string>(), HasSubstr("recreated all 1"));
  EXPECT_FALSE(step.requeue_after.has_value());
  EXPECT_EQ(Stops().size(), 1u);

  // Completed is final: no CRI call, no patch.
  server_->ClearCalls();
  step = Step(&crr);
  EXPECT_FALSE(step.HasPatch());
  EXPECT_TRUE(server_->Calls().empty());
}

TEST_F(CrrExecutorTest, PreStopExecRunsWithGraceAndItsDurationComesOffTheStop) {
  MakeExecutor();
  std::string id = AddContainer("app", 0);
  server_->SetExecHandler([this](const v1::ExecSyncRequest&) {
    clock_.Advance(absl::Seconds(7));  // the hook takes 7 s
    v1::ExecSyncResponse r;
    r.set_exit_code(0);
    return r;
  });
  Json sc = SpecContainer("app", id);
  sc["preStop"] = {{"exec", {{"command", {"/bin/sh", "-c", "nginx -s quit"}}}}};
  Json crr = NewCrr(Json::array({sc}), {{"terminationGracePeriodSeconds", 20}});
  CrrStepResult step = Step(&crr);

  auto execs = server_->Requests<v1::ExecSyncRequest>("ExecSync");
  ASSERT_EQ(execs.size(), 1u);
  EXPECT_EQ(execs[0].container_id(), id);
  EXPECT_THAT(execs[0].cmd(), ElementsAre("/bin/sh", "-c", "nginx -s quit"));
  EXPECT_EQ(execs[0].timeout(), 20);
  ASSERT_EQ(Stops().size(), 1u);
  EXPECT_EQ(Stops()[0].timeout(), 13);  // 20 - 7
  EXPECT_EQ(ContainerState(crr, "app")["isKilled"], true);
}

TEST_F(CrrExecutorTest, FailingPreStopIsReportedAndTheStopStillHappens) {
  MakeExecutor();
  std::string id = AddContainer("app", 0);
  server_->SetExecHandler([](const v1::ExecSyncRequest&) {
    v1::ExecSyncResponse r;
    r.set_exit_code(3);
    r.set_stderr("boom\n");
    return r;
  });
  Json sc = SpecContainer("app", id);
  sc["preStop"] = {{"exec", {{"command", {"false"}}}}};
  Json crr = NewCrr(Json::array({sc}));
  CrrStepResult step = Step(&crr);
  ASSERT_EQ(Stops().size(), 1u);
  EXPECT_EQ(Stops()[0].timeout(), 30);
  ASSERT_EQ(step.events.size(), 2u);
  EXPECT_EQ(step.events[1].reason, "FailedPreStopHook");
  EXPECT_THAT(step.events[1].message, HasSubstr("boom"));
}

TEST_F(CrrExecutorTest, StopGraceNeverBelowTwoSeconds) {
  MakeExecutor();
  std::string a = AddContainer("a", 0);
  std::string b = AddContainer("b", 0);
  server_->SetExecHandler([this](const v1::ExecSyncRequest&) {
    clock_.Advance(absl::Seconds(10));  // longer than the whole grace
    return v1::ExecSyncResponse();
  });
  Json sa = SpecContainer("a", a);
  sa["preStop"] = {{"exec", {{"command", {"sleep", "100"}}}}};
  Json crr = NewCrr(Json::array({sa}), {{"terminationGracePeriodSeconds", 5}});
  Step(&crr);
  ASSERT_EQ(Stops().size(), 1u);
  EXPECT_EQ(Stops()[0].timeout(), 2);

  server_->ClearCalls();
  Json crr0 = NewCrr(Json::array({SpecContainer("b", b)}), {{"terminationGracePeriodSeconds", 0}});
  Step(&crr0);
  ASSERT_EQ(Stops().size(), 1u);
  EXPECT_EQ(Stops()[0].container_id(), b);
  EXPECT_EQ(Stops()[0].timeout(), 2);  // grace 0 must not become SIGKILL (timeout 0)
}

TEST_F(CrrExecutorTest, HttpGetPreStopUsesNamedPort) {
  MakeExecutor();
  httplib::Server http;
  std::atomic<int> hits{0};
  http.Get("/quit", [&](const httplib::Request&, httplib::Response& res) {
    hits++;
    res.set_content("bye", "text/plain");
  });
  int port = http.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serve([&] { http.listen_after_bind(); });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!http.is_running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }

  std::string id = AddContainer("app", 0);
  Json sc = SpecContainer("app", id);
  sc["ports"] = {{{"name", "admin"}, {"containerPort", port}}};
  sc["preStop"] = {{"httpGet", {{"host", "127.0.0.1"}, {"port", "admin"}, {"path", "/quit"}}}};
  Json crr = NewCrr(Json::array({sc}));
  CrrStepResult step = Step(&crr);
  http.stop();
  serve.join();
  EXPECT_EQ(hits.load(), 1);
  ASSERT_EQ(Stops().size(), 1u);
  EXPECT_EQ(step.events.size(), 1u) << step.events.back().message;
}

TEST_F(CrrExecutorTest, OrderedRecreateKillsOneContainerAtATime) {
  MakeExecutor();
  std::string app = AddContainer("app", 0);
  std::string sidecar = AddContainer("sidecar", 0);
  Json crr = NewCrr(Json::array({SpecContainer("app", app), SpecContainer("sidecar", sidecar)}),
                    {{"orderedRecreate", true}});
  Step(&crr);
  ASSERT_EQ(Stops().size(), 1u);
  EXPECT_EQ(Stops()[0].container_id(), app);
  EXPECT_EQ(ContainerPhase(crr, "app"), "Recreating");
  EXPECT_EQ(ContainerPhase(crr, "sidecar"), "Pending");

  Step(&crr);  // app not restarted yet: sidecar still waits
  EXPECT_EQ(Stops().size(), 1u);
  EXPECT_EQ(ContainerPhase(crr, "sidecar"), "Pending");

  AddContainer("app", 1);
  Step(&crr);  // app Succeeded → sidecar's turn
  EXPECT_EQ(ContainerPhase(crr, "app"), "Succeeded");
  ASSERT_EQ(Stops().size(), 2u);
  EXPECT_EQ(Stops()[1].container_id(), sidecar);
  EXPECT_EQ(ContainerPhase(crr, "sidecar"), "Recreating");
  EXPECT_EQ(crr["status"]["phase"], "Recreating");

  AddContainer("sidecar", 1);
  Step(&crr);
  EXPECT_EQ(ContainerPhase(crr, "sidecar"), "Succeeded");
  EXPECT_EQ(crr["status"]["phase"], "Completed");
}

TEST_F(CrrExecutorTest, UnorderedRecreateKillsAllAtOnce) {
  MakeExecutor();
  std::string app = AddContainer("app", 0);
  std::string sidecar = AddContainer("sidecar", 0);
  Json crr = NewCrr(Json::array({SpecContainer("app", app), SpecContainer("sidecar", sidecar)}));
  Step(&crr);
  ASSERT_EQ(Stops().size(), 2u);
  EXPECT_EQ(ContainerPhase(crr, "app"), "Recreating");
  EXPECT_EQ(ContainerPhase(crr, "sidecar"), "Recreating");
}

TEST_F(CrrExecutorTest, StartingContainerIsKilledOnlyWithForceRecreate) {
  MakeExecutor();
  std::string id = AddContainer("app", 0, /*start=*/false);
  Json crr = NewCrr(Json::array({SpecContainer("app", id)}));
  CrrStepResult step = Step(&crr);
  EXPECT_TRUE(Stops().empty());
  EXPECT_EQ(ContainerPhase(crr, "app"), "Pending");
  EXPECT_TRUE(step.requeue_after.has_value());

  Json forced = NewCrr(Json::array({SpecContainer("app", id)}), {{"forceRecreate", true}});
  Step(&forced);
  ASSERT_EQ(Stops().size(), 1u);
  EXPECT_EQ(Stops()[0].container_id(), id);
  EXPECT_EQ(ContainerState(forced, "app")["isKilled"], true);
}

TEST_F(CrrExecutorTest, FailurePolicyFailCompletesAtFirstKillError) {
  MakeExecutor();
  std::string app = AddContainer("app", 0);
  std::string sidecar = AddContainer("sidecar", 0);
  server_->InjectError("StopContainer", absl::InternalError("shim is gone"));
  Json crr = NewCrr(Json::array({SpecContainer("app", app), SpecContainer("sidecar", sidecar)}),
                    {{"failurePolicy", "Fail"}});
  CrrStepResult step = Step(&crr);
  EXPECT_EQ(Stops().size(), 1u);  // sidecar not attempted
  EXPECT_EQ(ContainerPhase(crr, "app"), "Failed");
  EXPECT_THAT(ContainerState(crr, "app")["message"].get<std::string>(), HasSubstr("shim is gone"));
  EXPECT_EQ(crr["status"]["phase"], "Completed");
  EXPECT_THAT(crr["status"]["message"].get<std::string>(), HasSubstr("app"));
  EXPECT_TRUE(crr["status"].contains("completionTime"));
  EXPECT_FALSE(step.requeue_after.has_value());
}

TEST_F(CrrExecutorTest, FailurePolicyIgnoreContinuesWithOtherContainers) {
  MakeExecutor();
  std::string app = AddContainer("app", 0);
  std::string sidecar = AddContainer("sidecar", 0);
  server_->InjectError("StopContainer", absl::InternalError("shim is gone"));
  Json crr = NewCrr(Json::array({SpecContainer("app", app), SpecContainer("sidecar", sidecar)}),
                    {{"failurePolicy", "Ignore"}, {"orderedRecreate", true}});
  Step(&crr);
  ASSERT_EQ(Stops().size(), 2u);
  EXPECT_EQ(Stops()[1].container_id(), sidecar);
  EXPECT_EQ(ContainerPhase(crr, "app"), "Failed");
  EXPECT_EQ(ContainerPhase(crr, "sidecar"), "Recreating");
  EXPECT_EQ(crr["status"]["phase"], "Recreating");

  AddContainer("sidecar", 1);
  Step(&crr);
  EXPECT_EQ(ContainerPhase(crr, "app"), "Failed");  // terminal states are kept
  EXPECT_EQ(ContainerPhase(crr, "sidecar"), "Succeeded");
  EXPECT_EQ(crr["status"]["phase"], "Completed");
  EXPECT_THAT(crr["status"]["message"].get<std::string>(), HasSubstr("failed containers: app"));
}

TEST_F(CrrExecutorTest, UnreadyGracePeriodDelaysKillAndRequeuesAtExactRemainder) {
  MakeExecutor();
  std::string id = AddContainer("app", 0);
  Json crr = NewCrr(Json::array({SpecContainer("app", id)}), {{"unreadyGracePeriodSeconds", 10}});
  CrrStepResult step = Step(&crr);
  EXPECT_EQ(crr["status"]["phase"], "Recreating");
  EXPECT_EQ(ContainerPhase(crr, "app"), "Pending");
  EXPECT_TRUE(Stops().empty());
  ASSERT_TRUE(step.requeue_after.has_value());
  EXPECT_EQ(*step.requeue_after, absl::Seconds(10));

  clock_.Advance(absl::Milliseconds(4500));
  step = Step(&crr);
  EXPECT_TRUE(Stops().empty());
  EXPECT_EQ(*step.requeue_after, absl::Milliseconds(5500));

  clock_.Advance(absl::Milliseconds(5500));
  Step(&crr);
  ASSERT_EQ(Stops().size(), 1u);
  EXPECT_EQ(ContainerState(crr, "app")["isKilled"], true);
}

TEST_F(CrrExecutorTest, UnreadyGraceCountsFromManagersPreRecreateGraceCondition) {
  MakeExecutor();
  std::string id = AddContainer("app", 0);
  Json crr = NewCrr(Json::array({SpecContainer("app", id)}), {{"unreadyGracePeriodSeconds", 10}});
  crr["status"] = {
      {"conditions",
       {{{"type", "PreRecreateGrace"},
         {"status", "True"},
         {"lastTransitionTime", kube::FormatRfc3339(clock_.Now() - absl::Seconds(8))}}}}};
  CrrStepResult step = Step(&crr);
  EXPECT_TRUE(Stops().empty());
  EXPECT_EQ(*step.requeue_after, absl::Seconds(2));
}

TEST_F(CrrExecutorTest, ActiveDeadlineCompletesTheRequest) {
  CrrExecutorOptions options;
  options.poll_interval = absl::Hours(1);
  MakeExecutor(options);
  std::string id = AddContainer("app", 0);
  Json crr = NewCrr(Json::array({SpecContainer("app", id)}));
  crr["spec"]["activeDeadlineSeconds"] = 60;
  CrrStepResult step = Step(&crr);
  ASSERT_EQ(Stops().size(), 1u);
  ASSERT_TRUE(step.requeue_after.has_value());
  EXPECT_EQ(*step.requeue_after, absl::Seconds(60));  // wake up at the deadline

  clock_.Advance(absl::Seconds(60));
  server_->ClearCalls();
  step = Step(&crr);
  EXPECT_EQ(crr["status"]["phase"], "Completed");
  EXPECT_THAT(crr["status"]["message"].get<std::string>(), HasSubstr("activeDeadlineSeconds"));
  EXPECT_FALSE(step.requeue_after.has_value());
  EXPECT_TRUE(server_->Calls().empty());
}

TEST_F(CrrExecutorTest, MissingContainerStaysPending) {
  MakeExecutor();
  AddContainer("app", 0);
  Json crr = NewCrr(Json::array({SpecContainer("ghost", "abc")}));
  CrrStepResult step = Step(&crr);
  EXPECT_EQ(crr["status"]["phase"], "Recreating");
  Json state = ContainerState(crr, "ghost");
  EXPECT_EQ(state["phase"], "Pending");
  EXPECT_EQ(state["message"], "not found container on Node");
  EXPECT_TRUE(Stops().empty());
  EXPECT_TRUE(step.requeue_after.has_value());
}

TEST_F(CrrExecutorTest, PicksNewestAttemptAndUsesRestartCount) {
  MakeExecutor();
  std::string old_id = AddContainer("app", 0);
  ASSERT_TRUE(runtime_->StopContainer(old_id, 5).ok());
  std::string current = AddContainer("app", 1);
  server_->ClearCalls();
  // statusContext names the current container (restartCount 1): it must be killed.
  Json crr = NewCrr(Json::array({SpecContainer("app", current, 1)}));
  Step(&crr);
  ASSERT_EQ(Stops().size(), 1u);
  EXPECT_EQ(Stops()[0].container_id(), current);
}

TEST_F(CrrExecutorTest, ManagerSnapshotMustShowNewContainerReady) {
  MakeExecutor();
  std::string old_id = AddContainer("app", 0);
  Json crr = NewCrr(Json::array({SpecContainer("app", old_id)}));
  Step(&crr);
  std::string new_id = AddContainer("app", 1);
  crr["status"]["containerStatusSnapshot"] = {
      {{"name", "app"}, {"containerID", "containerd://" + new_id}, {"ready", false}}};
  Step(&crr);
  EXPECT_EQ(ContainerPhase(crr, "app"), "Recreating");
  crr["status"]["containerStatusSnapshot"][0]["ready"] = true;
  Step(&crr);
  EXPECT_EQ(ContainerPhase(crr, "app"), "Succeeded");
}

TEST_F(CrrExecutorTest, PendingMessageIsClearedWhenRecreatingStartsAndMissingUidIsAnError) {
  MakeExecutor();
  std::string id = AddContainer("app", 0);
  Json crr = NewCrr(Json::array({SpecContainer("app", id)}));
  crr["status"] = {{"phase", "Pending"}, {"message", "waiting for crr-0"}};
  auto result = executor_->Reconcile(crr, clock_.Now());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->status_patch["status"]["message"].is_null());
  EXPECT_TRUE(result->status_patch["status"].contains("message"));

  Json no_uid = NewCrr(Json::array({SpecContainer("app", id)}));
  no_uid["metadata"].erase("labels");
  EXPECT_EQ(executor_->Reconcile(no_uid, clock_.Now()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CrrExecutorStaticTest, StripsRuntimeScheme) {
  EXPECT_EQ(CrrExecutor::StripContainerIdScheme("containerd://abc"), "abc");
  EXPECT_EQ(CrrExecutor::StripContainerIdScheme("docker://x"), "x");
  EXPECT_EQ(CrrExecutor::StripContainerIdScheme("abc"), "abc");
  EXPECT_EQ(CrrExecutor::StripContainerIdScheme(""), "");
}

}  // namespace
}  // namespace kruise::daemon
