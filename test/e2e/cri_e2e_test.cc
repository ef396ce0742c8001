// End-to-end tests of the CRI client (cri/) against the real containerd of scripts/testbed:
// discovery, pulls (anonymous, basic auth over TLS, errors), image status/list/remove, and a
// host-network pod with containers that are exec'd into and stopped with and without a SIGTERM
// handler.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cri/discovery.h"
#include "cri/grpc_cri.h"
#include "common/image_ref.h"
#include "test/e2e/testbed_env.h"
#include "test/e2e/testbed_util.h"

namespace kruise::cri {
namespace {

using ::kruise::testing::TestbedEnv;
using ::kruise::testing::WaitFor;
using ::testing::AnyOf;
using ::testing::Contains;
using ::testing::HasSubstr;

constexpr absl::Duration kPullTimeout = absl::Minutes(2);

class CriE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KRUISE_LOAD_TESTBED_OR_SKIP(env_);
    socket_ = env_.Get("KRUISE_TESTBED_CRI_SOCKET");
    GrpcCriOptions options;
    options.default_timeout = absl::Seconds(30);
    absl::StatusOr<CriClients> clients = ConnectCri("unix://" + socket_, options);
    ASSERT_TRUE(clients.ok()) << clients.status();
    cri_ = *std::move(clients);
  }

  // Pulls `image` anonymously, failing the test on error.
  void Pull(const std::string& image) {
    absl::StatusOr<std::string> id = cri_.images->PullImage(image, nullptr, nullptr, kPullTimeout);
    ASSERT_TRUE(id.ok()) << image << ": " << id.status();
  }

  v1::AuthConfig TlsAuth(const std::string& password, const std::string& server_address) const {
    v1::AuthConfig auth;
    auth.set_username(env_.Get("KRUISE_TESTBED_REGISTRY_USER"));
    auth.set_password(password);
    auth.set_server_address(server_address);
    return auth;
  }

  TestbedEnv env_;
  std::string socket_;
  CriClients cri_;
};

TEST_F(CriE2eTest, DiscoveryFindsTheSocketUnderARunDir) {
  // The bed's dir has the layout of a node's /run: containerd/containerd.sock.
  DiscoveryOptions options;
  options.host_run_dir = env_.Get("KRUISE_TESTBED_DIR");
  absl::StatusOr<DiscoveredRuntime> found = DiscoverRuntime(options);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(std::filesystem::weakly_canonical(found->socket_path),
            std::filesystem::weakly_canonical(socket_));
  EXPECT_EQ(found->endpoint, "unix://" + found->socket_path);
  EXPECT_EQ(found->runtime_name, "containerd");
  EXPECT_THAT(found->runtime_version, HasSubstr("1.6"));
  EXPECT_EQ(found->runtime_api_version, "v1");

  // A run dir that only links to the socket (as a daemon seeing the host's /run through a mount).
  const std::filesystem::path run_dir =
      std::filesystem::path(env_.Get("KRUISE_TESTBED_DIR")) / absl::StrCat("run-link-", getpid());
  std::filesystem::remove_all(run_dir);
  std::filesystem::create_directories(run_dir);
  std::filesystem::create_symlink(socket_, run_dir / "containerd.sock");
  options.host_run_dir = run_dir.string();
  found = DiscoverRuntime(options);
  std::filesystem::remove_all(run_dir);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->socket_path, (run_dir / "containerd.sock").string());

  // Nothing there: NOT_FOUND.
  options.host_run_dir = run_dir.string() + "-missing";
  found = DiscoverRuntime(options);
  EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound) << found.status();
}

TEST_F(CriE2eTest, AnonymousPullStatusListRemove) {
  const std::string image = env_.Get("KRUISE_TESTBED_SIZED_10M");
  ASSERT_TRUE(cri_.images->RemoveImage(image).ok());
  absl::StatusOr<std::optional<v1::Image>> before = cri_.images->ImageStatus(image);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_FALSE(before->has_value()) << "image present before the pull";

  absl::StatusOr<std::string> id = cri_.images->PullImage(image, nullptr, nullptr, kPullTimeout);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_TRUE(absl::StartsWith(*id, "sha256:")) << *id;

  // IfNotPresent-style check.
  absl::StatusOr<std::optional<v1::Image>> status = cri_.images->ImageStatus(image);
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_TRUE(status->has_value());
  EXPECT_EQ((*status)->id(), *id);
  EXPECT_THAT((*status)->repo_tags(), Contains(image));
  EXPECT_GT((*status)->size(), 9u * 1024 * 1024);

  absl::StatusOr<std::vector<v1::Image>> list = cri_.images->ListImages();
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_TRUE(std::any_of(list->begin(), list->end(),
                          [&](const v1::Image& i) {
                            return i.id() == *id &&
                                   std::find(i.repo_tags().begin(), i.repo_tags().end(), image) !=
                                       i.repo_tags().end();
                          }))
      << "ListImages lacks " << image;

  ASSERT_TRUE(cri_.images->RemoveImage(image).ok());
  status = cri_.images->ImageStatus(image);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_FALSE(status->has_value()) << "image still present after RemoveImage";
  // Removing again is fine.
  EXPECT_TRUE(cri_.images->RemoveImage(image).ok());
}

TEST_F(CriE2eTest, PullWithBasicAuthOverTls) {
  const std::string image = env_.Get("KRUISE_TESTBED_BUSYBOX_IMAGE_TLS");
  const std::string password = env_.Get("KRUISE_TESTBED_REGISTRY_PASSWORD");
  for (const std::string& server :
       {std::string(), "https://" + env_.Get("KRUISE_TESTBED_REGISTRY_TLS")}) {
    SCOPED_TRACE("server_address='" + server + "'");
    ASSERT_TRUE(cri_.images->RemoveImage(image).ok());
    v1::AuthConfig auth = TlsAuth(password, server);
    absl::StatusOr<std::string> id = cri_.images->PullImage(image, &auth, nullptr, kPullTimeout);
    ASSERT_TRUE(id.ok()) << id.status();
    absl::StatusOr<std::optional<v1::Image>> status = cri_.images->ImageStatus(image);
    ASSERT_TRUE(status.ok()) << status.status();
    EXPECT_TRUE(status->has_value());
  }
  ASSERT_TRUE(cri_.images->RemoveImage(image).ok());
}

TEST_F(CriE2eTest, PullWithWrongPasswordFailsWith401) {
  const std::string image = env_.Get("KRUISE_TESTBED_BUSYBOX_IMAGE_TLS");
  ASSERT_TRUE(cri_.images->RemoveImage(image).ok());
  v1::AuthConfig auth = TlsAuth("not-the-password", "");
  absl::StatusOr<std::string> id = cri_.images->PullImage(image, &auth, nullptr, kPullTimeout);
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(id.status().code(),
              AnyOf(absl::StatusCode::kUnknown, absl::StatusCode::kUnauthenticated))
      << id.status();
  EXPECT_THAT(std::string(id.status().message()), HasSubstr("401"));
  // No credentials at all: same.
  id = cri_.images->PullImage(image, nullptr, nullptr, kPullTimeout);
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(std::string(id.status().message()), HasSubstr("401"));
}

TEST_F(CriE2eTest, MissingImageIsNotFound) {
  const std::string image = env_.Get("KRUISE_TESTBED_REGISTRY") + "/busybox:no-such-tag";
  absl::StatusOr<std::string> id = cri_.images->PullImage(image, nullptr, nullptr, kPullTimeout);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kNotFound) << id.status();
  absl::StatusOr<std::optional<v1::Image>> status = cri_.images->ImageStatus(image);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_FALSE(status->has_value());
}

TEST_F(CriE2eTest, MalformedReferencesAreRejectedBeforeAnyCall) {
  const std::string registry = env_.Get("KRUISE_TESTBED_REGISTRY");
  absl::StatusOr<ImageReference> ok = ParseImageReference(registry + "/busybox:1.35");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->registry, registry);
  EXPECT_EQ(ok->repository, "busybox");
  EXPECT_EQ(ok->tag, "1.35");
  for (const std::string& bad :
       {registry + "/BusyBox:1.35", registry + "/busybox:bad tag", std::string(),
        registry + "/busybox@sha256:123", registry + "//busybox"}) {
    EXPECT_EQ(ParseImageReference(bad).status().code(), absl::StatusCode::kInvalidArgument)
        << "'" << bad << "'";
  }
}

// Removes a sandbox (and its containers) at scope exit, so a failing test leaves nothing running.
class SandboxGuard {
 public:
  SandboxGuard(RuntimeService* runtime, std::string id) : runtime_(runtime), id_(std::move(id)) {}
  ~SandboxGuard() {
    if (!id_.empty()) {
      (void)runtime_->StopPodSandbox(id_);
      (void)runtime_->RemovePodSandbox(id_);
    }
  }
  SandboxGuard(const SandboxGuard&) = delete;
  SandboxGuard& operator=(const SandboxGuard&) = delete;

 private:
  RuntimeService* runtime_;
  std::string id_;
};

TEST_F(CriE2eTest, HostNetworkPodLifecycle) {
  const std::string image = env_.Get("KRUISE_TESTBED_BUSYBOX_IMAGE");
  ASSERT_NO_FATAL_FAILURE(Pull(image));

  const std::string uid = absl::StrCat("e2e-", getpid(), "-", absl::ToUnixMicros(absl::Now()));
  const std::filesystem::path log_dir =
      std::filesystem::path(env_.Get("KRUISE_TESTBED_DIR")) / "e2e-logs" / uid;
  std::filesystem::create_directories(log_dir);

  v1::PodSandboxConfig pod;
  pod.mutable_metadata()->set_name("cri-e2e");
  pod.mutable_metadata()->set_uid(uid);
  pod.mutable_metadata()->set_namespace_("kruise-e2e");
  pod.set_log_directory(log_dir.string());
  // Host network needs no CNI, and its hostname must stay empty (notes item 2).
  pod.mutable_linux()->mutable_security_context()->mutable_namespace_options()->set_network(
      v1::NODE);
  (*pod.mutable_labels())["kruise.io/e2e"] = uid;

  absl::StatusOr<std::string> sandbox = cri_.runtime->RunPodSandbox(pod, "");
  ASSERT_TRUE(sandbox.ok()) << sandbox.status();
  SandboxGuard guard(cri_.runtime.get(), *sandbox);
  EXPECT_FALSE(testing::ShimPids(socket_, *sandbox).empty()) << "no shim for the sandbox";

  absl::StatusOr<v1::PodSandboxStatusResponse> pod_status =
      cri_.runtime->PodSandboxStatus(*sandbox, false);
  ASSERT_TRUE(pod_status.ok()) << pod_status.status();
  EXPECT_EQ(pod_status->status().state(), v1::SANDBOX_READY);

  auto make_container = [&](const std::string& name, const std::string& script) {
    v1::ContainerConfig config;
    config.mutable_metadata()->set_name(name);
    config.mutable_image()->set_image(image);
    config.add_command("sh");
    config.add_args("-c");
    config.add_args(script);
    config.set_log_path(name + ".log");
    return cri_.runtime->CreateContainer(*sandbox, config, pod);
  };
  // Exits 0 on SIGTERM at once; ignores SIGTERM (so only SIGKILL after the grace period stops it).
  absl::StatusOr<std::string> polite =
      make_container("polite", "trap 'exit 0' TERM; while :; do sleep 0.1; done");
  ASSERT_TRUE(polite.ok()) << polite.status();
  absl::StatusOr<std::string> stubborn =
      make_container("stubborn", "trap '' TERM; while :; do sleep 0.1; done");
  ASSERT_TRUE(stubborn.ok()) << stubborn.status();
  ASSERT_TRUE(cri_.runtime->StartContainer(*polite).ok());
  ASSERT_TRUE(cri_.runtime->StartContainer(*stubborn).ok());

  auto state_of = [&](const std::string& id) {
    absl::StatusOr<v1::ContainerStatusResponse> s = cri_.runtime->ContainerStatus(id, false);
    return s.ok() ? s->status().state() : v1::CONTAINER_UNKNOWN;
  };
  for (const std::string* id : {&*polite, &*stubborn}) {
    EXPECT_TRUE(WaitFor([&] { return state_of(*id) == v1::CONTAINER_RUNNING; }, absl::Seconds(10)))
        << *id << " not running";
  }

  v1::ContainerFilter in_pod;
  in_pod.set_pod_sandbox_id(*sandbox);
  absl::StatusOr<std::vector<v1::Container>> listed = cri_.runtime->ListContainers(in_pod);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), 2u);

  absl::StatusOr<v1::ExecSyncResponse> exec =
      cri_.runtime->ExecSync(*polite, {"echo", "hello from exec"}, absl::Seconds(10));
  ASSERT_TRUE(exec.ok()) << exec.status();
  EXPECT_EQ(exec->stdout(), "hello from exec\n");
  EXPECT_EQ(exec->exit_code(), 0);
  exec = cri_.runtime->ExecSync(*polite, {"sh", "-c", "echo oops >&2; exit 3"}, absl::Seconds(10));
  ASSERT_TRUE(exec.ok()) << exec.status();
  EXPECT_EQ(exec->stderr(), "oops\n");
  EXPECT_EQ(exec->exit_code(), 3);

  // SIGTERM handler: stops well within the grace period, exit code 0.
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(cri_.runtime->StopContainer(*polite, 10).ok());
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(took, 5.0);
  absl::StatusOr<v1::ContainerStatusResponse> cs = cri_.runtime->ContainerStatus(*polite, false);
  ASSERT_TRUE(cs.ok()) << cs.status();
  EXPECT_EQ(cs->status().state(), v1::CONTAINER_EXITED);
  EXPECT_EQ(cs->status().exit_code(), 0);

  // SIGTERM ignored: killed after the 2 s grace period, 128 + SIGKILL.
  start = std::chrono::steady_clock::now();
  ASSERT_TRUE(cri_.runtime->StopContainer(*stubborn, 2).ok());
  took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(took, 1.8);
  EXPECT_LT(took, 10.0);
  cs = cri_.runtime->ContainerStatus(*stubborn, false);
  ASSERT_TRUE(cs.ok()) << cs.status();
  EXPECT_EQ(cs->status().state(), v1::CONTAINER_EXITED);
  EXPECT_EQ(cs->status().exit_code(), 137);

  // Teardown through the client, then nothing of the pod is left.
  ASSERT_TRUE(cri_.runtime->RemoveContainer(*polite).ok());
  ASSERT_TRUE(cri_.runtime->RemoveContainer(*stubborn).ok());
  ASSERT_TRUE(cri_.runtime->StopPodSandbox(*sandbox).ok());
  ASSERT_TRUE(cri_.runtime->RemovePodSandbox(*sandbox).ok());
  absl::StatusOr<v1::ContainerStatusResponse> gone = cri_.runtime->ContainerStatus(*polite, false);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound) << gone.status();
  v1::PodSandboxFilter by_id;
  by_id.set_id(*sandbox);
  absl::StatusOr<std::vector<v1::PodSandbox>> pods = cri_.runtime->ListPodSandbox(by_id);
  ASSERT_TRUE(pods.ok()) << pods.status();
  EXPECT_TRUE(pods->empty());
  EXPECT_TRUE(
      WaitFor([&] { return testing::ShimPids(socket_, *sandbox).empty(); }, absl::Seconds(10)))
      << "the sandbox's shim is still running";
  std::filesystem::remove_all(log_dir);
}

}  // namespace
}  // namespace kruise::cri
