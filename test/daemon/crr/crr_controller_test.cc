#include "daemon/crr/crr_controller.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/logging.h"
#include "cri/grpc_cri.h"
#include "kube/informer.h"
#include "kube/object.h"
#include "kube/resources.h"
#include "kube/rest_client.h"
#include "test/fakes/apiserver/fake_apiserver.h"
#include "test/fakes/apiserver/rest_client_for.h"
#include "test/fakes/cri/fake_cri_server.h"

namespace kruise::daemon {
namespace {

namespace v1 = ::runtime::v1;
using kube::Json;
using ::testing::HasSubstr;

constexpr char kNode[] = "node-1";
constexpr char kBusyboxImage[] = "docker.io/library/busybox:1.36";
constexpr char kCrrResource[] = "containerrecreaterequests.apps.kruise.io";
constexpr absl::Duration kWait = absl::Seconds(20);

class CrrControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api_.Start().ok());
    auto client = testing::UnthrottledClientFor(api_);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);

    auto cri = testing::FakeCriServer::Start();
    ASSERT_TRUE(cri.ok()) << cri.status();
    cri_ = std::move(*cri);
    auto channel = cri::DialCri(cri_->endpoint());
    ASSERT_TRUE(channel.ok()) << channel.status();
    runtime_ = std::make_unique<cri::GrpcRuntimeService>(*channel);
    ASSERT_TRUE(cri_->AddImage(kBusyboxImage).ok());

    kube::EventRecorderOptions ero;
    ero.component = "kruise-daemon";
    ero.host = kNode;
    recorder_ = std::make_unique<kube::EventRecorder>(client_.get(), ero);

    // The test's own view of every CRR (no selector), to wait on status changes without polling.
    kube::InformerOptions io;
    io.resource = kube::resources::ContainerRecreateRequests();
    watch_ = std::make_unique<kube::Informer>(client_.get(), Clock::Real(), io);
    kube::ResourceEventHandler bump;
    bump.on_add = [this](const Json&) { Bump(); };
    bump.on_update = [this](const Json&, const Json&) { Bump(); };
    bump.on_delete = [this](const Json&, bool) { Bump(); };
    watch_->AddEventHandler(std::move(bump));
    watch_->Start();
    ASSERT_TRUE(watch_->WaitForSync(absl::Now() + kWait));
  }

  void TearDown() override {
    if (controller_) controller_->Stop();
    watch_->Stop();
    for (const auto& req : cri_->Requests<v1::StopContainerRequest>("StopContainer")) {
      EXPECT_GE(req.timeout(), 2) << "StopContainer of " << req.container_id();
    }
  }

  void StartController() {
    CrrControllerOptions o;
    o.node_name = kNode;
    o.workers = 2;
    o.executor.poll_interval = absl::Milliseconds(50);
    o.backoff_base = absl::Milliseconds(20);
    o.backoff_max = absl::Milliseconds(200);
    CrrObserver observer;
    observer.on_completed = [this](const Json& crr, bool succeeded, absl::Duration) {
      absl::MutexLock lock(&mu_);
      completed_.push_back(kube::Name(crr) + (succeeded ? ":succeeded" : ":failed"));
      ++generation_;
    };
    observer.on_container_killed = [this](const Json& crr, const std::string& container) {
      absl::MutexLock lock(&mu_);
      killed_.push_back(kube::Name(crr) + "/" + container);
      ++generation_;
    };
    controller_ = std::make_unique<CrrController>(o, client_.get(), runtime_.get(), Clock::Real(),
                                                  recorder_.get(), std::move(observer));
    controller_->Start();
    ASSERT_TRUE(controller_->WaitForSync(absl::Now() + kWait));
  }

  void Bump() {
    absl::MutexLock lock(&mu_);
    ++generation_;
  }

  // Waits until the CRR `name` (namespace default) satisfies `pred`, woken by watch events.
  bool WaitForCrr(const std::string& name, const std::function<bool(const Json&)>& pred,
                  absl::Duration timeout = kWait) {
    absl::Time deadline = absl::Now() + timeout;
    absl::MutexLock lock(&mu_);
    while (true) {
      uint64_t seen = generation_;
      std::shared_ptr<const Json> obj = watch_->store().Get("default", name);
      if (obj && pred(*obj)) return true;
      auto changed = [this, seen]() { return generation_ != seen; };
      if (!mu_.AwaitWithDeadline(absl::Condition(&changed), deadline)) {
        obj = watch_->store().Get("default", name);
        if (obj) ADD_FAILURE() << "last seen " << name << ": " << obj->dump();
        return false;
      }
    }
  }

  // A pod sandbox for `pod_uid`, as kubelet would create it.
  void AddPod(const std::string& pod_uid, const std::string& pod_name) {
    v1::PodSandboxConfig config;
    config.mutable_metadata()->set_name(pod_name);
    config.mutable_metadata()->set_namespace_("default");
    config.mutable_metadata()->set_uid(pod_uid);
    (*config.mutable_labels())["io.kubernetes.pod.uid"] = pod_uid;
    auto id = runtime_->RunPodSandbox(config, "");
    ASSERT_TRUE(id.ok()) << id.status();
    sandboxes_[pod_uid] = {*id, config};
  }

  // Creates and starts container `name` of the pod with `attempt` (= restart count).
  std::string AddContainer(const std::string& pod_uid, const std::string& name, uint32_t attempt) {
    const auto& [sandbox_id, sandbox_config] = sandboxes_.at(pod_uid);
    v1::ContainerConfig config;
    config.mutable_metadata()->set_name(name);
    config.mutable_metadata()->set_attempt(attempt);
    config.mutable_image()->set_image(kBusyboxImage);
    (*config.mutable_labels())["io.kubernetes.pod.uid"] = pod_uid;
    (*config.mutable_labels())["io.kubernetes.container.name"] = name;
    (*config.mutable_annotations())["io.kubernetes.container.restartCount"] =
        std::to_string(attempt);
    auto id = runtime_->CreateContainer(sandbox_id, config, sandbox_config);
    EXPECT_TRUE(id.ok()) << id.status();
    if (!id.ok()) return "";
    absl::Status st = runtime_->StartContainer(*id);
    EXPECT_TRUE(st.ok()) << st;
    return *id;
  }

  static Json SpecContainer(const std::string& name, const std::string& id) {
    return {{"name", name},
            {"statusContext", {{"containerID", "containerd://" + id}, {"restartCount", 0}}}};
  }

  // Creates a CRR through the API, labelled as the manager's webhook would.
  Json CreateCrr(const std::string& name, const std::string& pod_uid, Json containers,
                 Json strategy = Json::object(), const std::string& node = kNode,
                 const std::string& active = "true") {
    Json crr = {
        {"apiVersion", "apps.kruise.io/v1alpha1"},
        {"kind", "ContainerRecreateRequest"},
        {"metadata",
         {{"name", name},
          {"namespace", "default"},
          {"labels",
           {{kCrrPodUidLabel, pod_uid}, {kCrrNodeNameLabel, node}, {kCrrActiveLabel, active}}}}},
        {"spec",
         {{"podName", "pod-" + pod_uid},
          {"containers", std::move(containers)},
          {"strategy", std::move(strategy)}}}};
    auto created = client_->Create(kube::resources::ContainerRecreateRequests(), "default", crr);
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? *created : Json();
  }

  static Json State(const Json& crr, const std::string& container) {
    const Json* states = kube::FindPath(crr, {"status", "containerRecreateStates"});
    if (states == nullptr || !states->is_array()) return nullptr;
    for (const Json& s : *states) {
      if (s.value("name", "") == container) return s;
    }
    return nullptr;
  }
  static bool Killed(const Json& crr, const std::string& container) {
    Json s = State(crr, container);
    return s.is_object() && s.value("isKilled", false);
  }
  static std::string StatePhase(const Json& crr, const std::string& container) {
    Json s = State(crr, container);
    return s.is_object() ? s.value("phase", "") : "";
  }
  static std::string Phase(const Json& crr) {
    return kube::GetString(crr, {"status", "phase"}).value_or("");
  }

  std::vector<v1::StopContainerRequest> Stops() const {
    return cri_->Requests<v1::StopContainerRequest>("StopContainer");
  }

  // Events recorded on the CRR `name` by reason.
  std::vector<std::string> EventReasons(const std::string& name) {
    recorder_->WaitIdle(absl::Seconds(5));
    std::vector<std::string> out;
    for (const Json& e : api_.List("events", "default")) {
      if (kube::GetString(e, {"involvedObject", "name"}) == name) {
        out.push_back(e.value("reason", ""));
      }
    }
    return out;
  }

  // The observer runs after the patch returns, possibly after the watch showed its result: wait
  // until it reported `n` completions, then return them.
  std::vector<std::string> Completed(size_t n) {
    absl::Time deadline = absl::Now() + kWait;
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() { return completed_.size() >= n; };
    mu_.AwaitWithDeadline(absl::Condition(&enough), deadline);
    return completed_;
  }
  std::vector<std::string> KilledContainers() {
    absl::MutexLock lock(&mu_);
    return killed_;
  }

  testing::FakeApiServer api_;
  std::unique_ptr<kube::RestKubeClient> client_;
  std::unique_ptr<testing::FakeCriServer> cri_;
  std::unique_ptr<cri::GrpcRuntimeService> runtime_;
  std::unique_ptr<kube::EventRecorder> recorder_;
  std::unique_ptr<kube::Informer> watch_;
  std::unique_ptr<CrrController> controller_;
  std::map<std::string, std::pair<std::string, v1::PodSandboxConfig>> sandboxes_;

  absl::Mutex mu_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> completed_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> killed_ ABSL_GUARDED_BY(mu_);
};

TEST_F(CrrControllerTest, KillsRunningContainerThenCompletesWhenKubeletRestartedIt) {
  AddPod("uid-1", "web-0");
  std::string old_id = AddContainer("uid-1", "app", 0);
  StartController();

  // Park the stop so the moment it reaches the runtime can be measured.
  cri_->SetHang("StopContainer", true);
  absl::Time created_at = absl::Now();
  Json crr = CreateCrr("crr-1", "uid-1", Json::array({SpecContainer("app", old_id)}),
                       {{"terminationGracePeriodSeconds", 7}});
  // Fields we do not model must survive every write.
  ASSERT_TRUE(client_
                  ->Patch(kube::resources::ContainerRecreateRequests(), "default", "crr-1",
                          kube::PatchType::kMerge,
                          {{"metadata", {{"annotations", {{"example.com/keep", "yes"}}}}},
                           {"spec", {{"futureField", {{"nested", 1}}}}}})
                  .ok());
  ASSERT_TRUE(cri_->WaitForHungCalls("StopContainer", 1, kWait));
  absl::Duration to_stop = absl::Now() - created_at;
  Logger("test")->info("CRR create -> StopContainer: {}", absl::FormatDuration(to_stop));
  std::printf("[ measured ] CRR create -> StopContainer: %.1f ms\n",
              absl::ToDoubleMilliseconds(to_stop));
  cri_->ReleaseHangs();

  ASSERT_TRUE(WaitForCrr(
      "crr-1", [](const Json& c) { return Phase(c) == "Recreating" && Killed(c, "app"); }));
  ASSERT_EQ(Stops().size(), 1u);
  EXPECT_EQ(Stops()[0].container_id(), old_id);
  EXPECT_EQ(Stops()[0].timeout(), 7);
  EXPECT_EQ(StatePhase(*watch_->store().Get("default", "crr-1"), "app"), "Recreating");

  // Kubelet notices the exit and starts attempt 1.
  AddContainer("uid-1", "app", 1);
  ASSERT_TRUE(WaitForCrr("crr-1", [](const Json& c) {
    return Phase(c) == "Completed" && StatePhase(c, "app") == "Succeeded";
  }));
  auto stored = client_->Get(kube::resources::ContainerRecreateRequests(), "default", "crr-1");
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE((*stored)["status"].contains("completionTime"));
  EXPECT_EQ((*stored)["metadata"]["annotations"]["example.com/keep"], "yes");
  EXPECT_EQ((*stored)["spec"]["futureField"]["nested"], 1);
  EXPECT_EQ((*stored)["spec"]["strategy"]["terminationGracePeriodSeconds"], 7);
  EXPECT_EQ((*stored)["metadata"]["labels"][kCrrActiveLabel], "true");
  EXPECT_EQ(Stops().size(), 1u);

  // Status is only ever patched through the status subresource, never PUT.
  EXPECT_EQ(api_.RequestCount("PUT", "containerrecreaterequests"), 0);
  EXPECT_GE(api_.RequestCount("PATCH", "containerrecreaterequests/crr-1/status"), 2);
  // Every other PATCH of crr-1 is the test's own metadata/spec patch.
  EXPECT_EQ(api_.RequestCount("PATCH", "containerrecreaterequests/crr-1") -
                api_.RequestCount("PATCH", "containerrecreaterequests/crr-1/status"),
            1);

  EXPECT_THAT(EventReasons("crr-1"), ::testing::Contains("Killing"));
  EXPECT_EQ(Completed(1), std::vector<std::string>{"crr-1:succeeded"});
  EXPECT_EQ(KilledContainers(), std::vector<std::string>{"crr-1/app"});
}

TEST_F(CrrControllerTest, SecondCrrOfPodWaitsPendingUntilFirstCompletes) {
  AddPod("uid-1", "web-0");
  std::string app = AddContainer("uid-1", "app", 0);
  std::string sidecar = AddContainer("uid-1", "sidecar", 0);
  StartController();

  CreateCrr("crr-a", "uid-1", Json::array({SpecContainer("app", app)}));
  CreateCrr("crr-b", "uid-1", Json::array({SpecContainer("sidecar", sidecar)}));
  ASSERT_TRUE(WaitForCrr("crr-a", [](const Json& c) { return Phase(c) == "Recreating"; }));
  ASSERT_TRUE(WaitForCrr("crr-b", [](const Json& c) {
    return Phase(c) == "Pending" &&
           kube::GetString(c, {"status", "message"}).value_or("").find("crr-a") !=
               std::string::npos;
  }));
  // crr-a keeps waiting for kubelet; crr-b must not have touched its container.
  ASSERT_EQ(Stops().size(), 1u);
  EXPECT_EQ(Stops()[0].container_id(), app);

  AddContainer("uid-1", "app", 1);
  ASSERT_TRUE(WaitForCrr("crr-a", [](const Json& c) { return Phase(c) == "Completed"; }));
  ASSERT_TRUE(WaitForCrr(
      "crr-b", [](const Json& c) { return Phase(c) == "Recreating" && Killed(c, "sidecar"); }));
  ASSERT_EQ(Stops().size(), 2u);
  EXPECT_EQ(Stops()[1].container_id(), sidecar);
  AddContainer("uid-1", "sidecar", 1);
  ASSERT_TRUE(WaitForCrr("crr-b", [](const Json& c) {
    return Phase(c) == "Completed" && StatePhase(c, "sidecar") == "Succeeded";
  }));
  EXPECT_THAT(Completed(2), ::testing::ElementsAre("crr-a:succeeded", "crr-b:succeeded"));
}

TEST_F(CrrControllerTest, IgnoresCrrsOfOtherNodesAndInactiveOnes) {
  AddPod("uid-1", "web-0");
  std::string app = AddContainer("uid-1", "app", 0);
  std::string sidecar = AddContainer("uid-1", "sidecar", 0);
  StartController();

  CreateCrr("other-node", "uid-1", Json::array({SpecContainer("app", app)}), Json::object(),
            "node-2");
  CreateCrr("inactive", "uid-1", Json::array({SpecContainer("app", app)}), Json::object(), kNode,
            "false");
  CreateCrr("mine", "uid-1", Json::array({SpecContainer("sidecar", sidecar)}));
  ASSERT_TRUE(WaitForCrr(
      "mine", [](const Json& c) { return Phase(c) == "Recreating" && Killed(c, "sidecar"); }));
  ASSERT_EQ(Stops().size(), 1u);
  EXPECT_EQ(Stops()[0].container_id(), sidecar);
  EXPECT_EQ(controller_->store().size(), 1u);
  for (const char* name : {"other-node", "inactive"}) {
    auto obj = client_->Get(kube::resources::ContainerRecreateRequests(), "default", name);
    ASSERT_TRUE(obj.ok());
    EXPECT_FALSE(obj->contains("status")) << name << ": " << obj->dump();
  }
  EXPECT_EQ(api_.RequestCount("PATCH", "other-node"), 0);
  EXPECT_EQ(api_.RequestCount("PATCH", "inactive"), 0);
}

TEST_F(CrrControllerTest, OrderedRecreateKillsTheNextContainerOnlyAfterThePreviousSucceeded) {
  AddPod("uid-1", "web-0");
  std::string app = AddContainer("uid-1", "app", 0);
  std::string sidecar = AddContainer("uid-1", "sidecar", 0);
  StartController();

  CreateCrr("ordered", "uid-1",
            Json::array({SpecContainer("app", app), SpecContainer("sidecar", sidecar)}),
            {{"orderedRecreate", true}, {"terminationGracePeriodSeconds", 3}});
  ASSERT_TRUE(WaitForCrr("ordered", [](const Json& c) { return Killed(c, "app"); }));
  EXPECT_EQ(StatePhase(*watch_->store().Get("default", "ordered"), "sidecar"), "Pending");
  ASSERT_EQ(Stops().size(), 1u);
  EXPECT_EQ(Stops()[0].container_id(), app);

  AddContainer("uid-1", "app", 1);
  ASSERT_TRUE(WaitForCrr("ordered", [](const Json& c) {
    return StatePhase(c, "app") == "Succeeded" && Killed(c, "sidecar");
  }));
  ASSERT_EQ(Stops().size(), 2u);
  EXPECT_EQ(Stops()[1].container_id(), sidecar);
  EXPECT_EQ(Stops()[1].timeout(), 3);

  AddContainer("uid-1", "sidecar", 1);
  ASSERT_TRUE(WaitForCrr("ordered", [](const Json& c) {
    return Phase(c) == "Completed" && StatePhase(c, "sidecar") == "Succeeded";
  }));
  EXPECT_EQ(Completed(1), std::vector<std::string>{"ordered:succeeded"});
  // Reported before the completion, by the same worker.
  EXPECT_THAT(KilledContainers(), ::testing::ElementsAre("ordered/app", "ordered/sidecar"));
}

TEST_F(CrrControllerTest, FailurePolicyFailCompletesOnStopContainerError) {
  AddPod("uid-1", "web-0");
  std::string app = AddContainer("uid-1", "app", 0);
  std::string sidecar = AddContainer("uid-1", "sidecar", 0);
  cri_->InjectError("StopContainer", absl::InternalError("runtime refused to stop"));
  StartController();

  // orderedRecreate so that the failing stop is the only one attempted.
  CreateCrr("fails", "uid-1",
            Json::array({SpecContainer("app", app), SpecContainer("sidecar", sidecar)}),
            {{"failurePolicy", "Fail"}, {"orderedRecreate", true}});
  ASSERT_TRUE(WaitForCrr("fails", [](const Json& c) { return Phase(c) == "Completed"; }));
  Json crr = *watch_->store().Get("default", "fails");
  EXPECT_EQ(StatePhase(crr, "app"), "Failed");
  EXPECT_THAT(kube::GetString(State(crr, "app"), {"message"}).value_or(""),
              HasSubstr("runtime refused to stop"));
  EXPECT_NE(StatePhase(crr, "sidecar"), "Succeeded");
  EXPECT_EQ(Stops().size(), 1u);
  EXPECT_THAT(EventReasons("fails"), ::testing::Contains("FailedKillContainer"));
  EXPECT_EQ(Completed(1), std::vector<std::string>{"fails:failed"});
  EXPECT_TRUE(KilledContainers().empty());
}

TEST(CrrControllerFlagsTest, DaemonHelpShowsMaxWorkersForCrr) {
  std::string cmd = std::string(KRUISE_DAEMON_BINARY) + " --help 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0);
  EXPECT_THAT(out, HasSubstr("--max-workers-for-crr INT:POSITIVE=4"));
}

}  // namespace
}  // namespace kruise::daemon
