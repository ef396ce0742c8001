// Integration: the gRPC CRI client against the in-process FakeCriServer.
#include "cri/grpc_cri.h"

#include <fstream>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/fakes/cri/fake_cri_server.h"

namespace kruise::cri {
namespace {

using ::kruise::testing::FakeCriServer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

class GrpcCriTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = FakeCriServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    GrpcCriOptions opts;
    opts.default_timeout = absl::Seconds(10);
    auto cri = ConnectCri(server_->endpoint(), opts);
    ASSERT_TRUE(cri.ok()) << cri.status();
    cri_ = *std::move(cri);
  }

  v1::PodSandboxConfig SandboxConfig(const std::string& name) {
    v1::PodSandboxConfig c;
    c.mutable_metadata()->set_name(name);
    c.mutable_metadata()->set_namespace_("default");
    c.mutable_metadata()->set_uid("uid-" + name);
    c.set_hostname(name);
    c.set_log_directory("/var/log/pods/default_" + name);
    c.mutable_dns_config()->add_servers("10.0.0.10");
    auto* pm = c.add_port_mappings();
    pm->set_container_port(80);
    (*c.mutable_labels())["app"] = name;
    (*c.mutable_annotations())["note"] = "x";
    c.mutable_linux()->set_cgroup_parent("/kubepods");
    c.mutable_linux()->mutable_security_context()->mutable_namespace_options()->set_network(
        v1::NODE);
    return c;
  }

  v1::ContainerConfig ContainerConfig(const std::string& name, const std::string& image) {
    v1::ContainerConfig c;
    c.mutable_metadata()->set_name(name);
    c.mutable_image()->set_image(image);
    c.add_command("sh");
    c.add_args("-c");
    c.add_args("sleep 1000");
    c.set_working_dir("/");
    auto* env = c.add_envs();
    env->set_key("A");
    env->set_value("B");
    auto* m = c.add_mounts();
    m->set_container_path("/data");
    m->set_host_path("/tmp");
    (*c.mutable_labels())["role"] = name;
    c.set_log_path(name + "/0.log");
    return c;
  }

  std::unique_ptr<FakeCriServer> server_;
  CriClients cri_;
};

TEST_F(GrpcCriTest, VersionRoundTrip) {
  auto v = cri_.runtime->Version();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->runtime_name(), "fake-cri");
  EXPECT_EQ(v->runtime_version(), "1.0.0");
  EXPECT_EQ(v->runtime_api_version(), "v1");
  auto reqs = server_->Requests<v1::VersionRequest>("Version");
  ASSERT_THAT(reqs, SizeIs(1));
  EXPECT_EQ(reqs[0].version(), "v1");
}

TEST_F(GrpcCriTest, ImageLifecycle) {
  auto missing = cri_.images->ImageStatus("busybox:1.36");
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_FALSE(missing->has_value());

  v1::AuthConfig auth;
  auth.set_username("user");
  auth.set_password("secret");
  v1::PodSandboxConfig sandbox = SandboxConfig("puller");
  auto ref = cri_.images->PullImage("busybox:1.36", &auth, &sandbox, absl::Seconds(30));
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(*ref, FakeCriServer::ImageIdFor("docker.io/library/busybox:1.36"));

  auto pulls = server_->Requests<v1::PullImageRequest>("PullImage");
  ASSERT_THAT(pulls, SizeIs(1));
  EXPECT_EQ(pulls[0].image().image(), "busybox:1.36");
  EXPECT_EQ(pulls[0].auth().username(), "user");
  EXPECT_EQ(pulls[0].auth().password(), "secret");
  EXPECT_EQ(pulls[0].sandbox_config().metadata().name(), "puller");
  EXPECT_EQ(pulls[0].sandbox_config().linux().security_context().namespace_options().network(),
            v1::NODE);

  // Found by familiar name, normalised name and id.
  for (const std::string& name :
       {std::string("busybox:1.36"), std::string("docker.io/library/busybox:1.36"), *ref}) {
    auto st = cri_.images->ImageStatus(name);
    ASSERT_TRUE(st.ok()) << st.status();
    ASSERT_TRUE(st->has_value()) << name;
    EXPECT_EQ((*st)->id(), *ref);
    EXPECT_THAT((*st)->repo_tags(), ElementsAre("docker.io/library/busybox:1.36"));
  }

  ASSERT_TRUE(server_->AddImage("quay.io/x/y:2").ok());
  auto all = cri_.images->ListImages();
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_THAT(*all, SizeIs(2));
  v1::ImageFilter filter;
  filter.mutable_image()->set_image("quay.io/x/y:2");
  auto filtered = cri_.images->ListImages(filter);
  ASSERT_TRUE(filtered.ok()) << filtered.status();
  ASSERT_THAT(*filtered, SizeIs(1));
  EXPECT_EQ((*filtered)[0].id(), FakeCriServer::ImageIdFor("quay.io/x/y:2"));

  auto fs = cri_.images->ImageFsInfo();
  ASSERT_TRUE(fs.ok()) << fs.status();
  ASSERT_EQ(fs->image_filesystems_size(), 1);
  EXPECT_EQ(fs->image_filesystems(0).used_bytes().value(), 2u << 20);

  ASSERT_TRUE(cri_.images->RemoveImage("busybox:1.36").ok());
  EXPECT_FALSE(server_->HasImage(*ref));
  EXPECT_TRUE(cri_.images->RemoveImage("busybox:1.36").ok()) << "idempotent";
}

TEST_F(GrpcCriTest, PullWithoutAuthOrSandboxSendsNone) {
  ASSERT_TRUE(cri_.images->PullImage("alpine", nullptr, nullptr, absl::Seconds(30)).ok());
  auto pulls = server_->Requests<v1::PullImageRequest>("PullImage");
  ASSERT_THAT(pulls, SizeIs(1));
  EXPECT_FALSE(pulls[0].has_auth());
  EXPECT_FALSE(pulls[0].has_sandbox_config());
}

TEST_F(GrpcCriTest, PullHookSeesAuthAndItsErrorReachesClient) {
  server_->SetPullHook([](const v1::PullImageRequest& req) {
    if (req.auth().registry_token() != "good-token") {
      return absl::PermissionDeniedError("pull access denied: authorization failed");
    }
    return absl::OkStatus();
  });
  v1::AuthConfig auth;
  auth.set_registry_token("bad-token");
  auto bad = cri_.images->PullImage("private.example.com/app:1", &auth, nullptr, absl::Seconds(5));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("authorization failed"));
  auth.set_registry_token("good-token");
  EXPECT_TRUE(
      cri_.images->PullImage("private.example.com/app:1", &auth, nullptr, absl::Seconds(5)).ok());
}

TEST_F(GrpcCriTest, MalformedReferenceIsInvalidArgumentFromRuntime) {
  auto r = cri_.images->PullImage("Bad Image", nullptr, nullptr, absl::Seconds(5));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("Bad Image"));
}

TEST_F(GrpcCriTest, SandboxAndContainerLifecycle) {
  ASSERT_TRUE(server_->AddImage("busybox:1.36").ok());
  v1::PodSandboxConfig sb_config = SandboxConfig("web");
  auto sb = cri_.runtime->RunPodSandbox(sb_config, "");
  ASSERT_TRUE(sb.ok()) << sb.status();
  auto dup = cri_.runtime->RunPodSandbox(sb_config, "");
  EXPECT_EQ(dup.status().code(), absl::StatusCode::kAlreadyExists);

  auto sb_status = cri_.runtime->PodSandboxStatus(*sb, true);
  ASSERT_TRUE(sb_status.ok()) << sb_status.status();
  EXPECT_EQ(sb_status->status().state(), v1::SANDBOX_READY);
  EXPECT_EQ(sb_status->status().labels().at("app"), "web");
  EXPECT_FALSE(sb_status->info().empty());

  auto cid =
      cri_.runtime->CreateContainer(*sb, ContainerConfig("nginx", "busybox:1.36"), sb_config);
  ASSERT_TRUE(cid.ok()) << cid.status();
  auto created = server_->Requests<v1::CreateContainerRequest>("CreateContainer");
  ASSERT_THAT(created, SizeIs(1));
  EXPECT_EQ(created[0].config().envs(0).key(), "A");
  EXPECT_EQ(created[0].sandbox_config().hostname(), "web");

  auto st = cri_.runtime->ContainerStatus(*cid, false);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->status().state(), v1::CONTAINER_CREATED);
  EXPECT_EQ(st->status().image_ref(), FakeCriServer::ImageIdFor("busybox:1.36"));
  EXPECT_EQ(st->status().log_path(), "/var/log/pods/default_web/nginx/0.log");

  ASSERT_TRUE(cri_.runtime->StartContainer(*cid).ok());
  EXPECT_EQ(cri_.runtime->StartContainer(*cid).code(), absl::StatusCode::kFailedPrecondition);

  auto exec = cri_.runtime->ExecSync(*cid, {"echo", "hi"}, absl::Milliseconds(1500));
  ASSERT_TRUE(exec.ok()) << exec.status();
  EXPECT_EQ(exec->stdout(), "echo hi\n");
  EXPECT_EQ(exec->exit_code(), 0);
  EXPECT_EQ(server_->Requests<v1::ExecSyncRequest>("ExecSync")[0].timeout(), 2) << "rounded up";

  v1::ContainerFilter running;
  running.mutable_state()->set_state(v1::CONTAINER_RUNNING);
  auto list = cri_.runtime->ListContainers(running);
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_THAT(*list, SizeIs(1));
  EXPECT_EQ((*list)[0].id(), *cid);

  ASSERT_TRUE(cri_.runtime->StopContainer(*cid, 0).ok());
  EXPECT_EQ(server_->Requests<v1::StopContainerRequest>("StopContainer")[0].timeout(), 0);
  st = cri_.runtime->ContainerStatus(*cid, false);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->status().state(), v1::CONTAINER_EXITED);
  EXPECT_EQ(st->status().exit_code(), 137);
  list = cri_.runtime->ListContainers(running);
  ASSERT_TRUE(list.ok());
  EXPECT_THAT(*list, SizeIs(0));

  ASSERT_TRUE(cri_.runtime->RemoveContainer(*cid).ok());
  auto gone = cri_.runtime->ContainerStatus(*cid, false);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(gone.status().message()), HasSubstr(*cid));

  ASSERT_TRUE(cri_.runtime->StopPodSandbox(*sb).ok());
  v1::PodSandboxFilter ready;
  ready.mutable_state()->set_state(v1::SANDBOX_READY);
  auto sbs = cri_.runtime->ListPodSandbox(ready);
  ASSERT_TRUE(sbs.ok());
  EXPECT_THAT(*sbs, SizeIs(0));
  ASSERT_TRUE(cri_.runtime->RemovePodSandbox(*sb).ok());
  auto all_sbs = cri_.runtime->ListPodSandbox(v1::PodSandboxFilter());
  ASSERT_TRUE(all_sbs.ok());
  EXPECT_THAT(*all_sbs, SizeIs(0));
}

TEST_F(GrpcCriTest, ListContainersFiltersByLabelAndSandbox) {
  ASSERT_TRUE(server_->AddImage("busybox").ok());
  auto a = cri_.runtime->RunPodSandbox(SandboxConfig("a"), "");
  auto b = cri_.runtime->RunPodSandbox(SandboxConfig("b"), "");
  ASSERT_TRUE(a.ok() && b.ok());
  auto c1 =
      cri_.runtime->CreateContainer(*a, ContainerConfig("app", "busybox"), SandboxConfig("a"));
  auto c2 =
      cri_.runtime->CreateContainer(*a, ContainerConfig("side", "busybox"), SandboxConfig("a"));
  auto c3 =
      cri_.runtime->CreateContainer(*b, ContainerConfig("app", "busybox"), SandboxConfig("b"));
  ASSERT_TRUE(c1.ok() && c2.ok() && c3.ok());

  v1::ContainerFilter by_label;
  (*by_label.mutable_label_selector())["role"] = "app";
  auto l = cri_.runtime->ListContainers(by_label);
  ASSERT_TRUE(l.ok());
  EXPECT_THAT(*l, SizeIs(2));

  by_label.set_pod_sandbox_id(*a);
  l = cri_.runtime->ListContainers(by_label);
  ASSERT_TRUE(l.ok());
  ASSERT_THAT(*l, SizeIs(1));
  EXPECT_EQ((*l)[0].id(), *c1);
  EXPECT_EQ((*l)[0].metadata().name(), "app");

  // A crash shows up as EXITED with its exit code; the next attempt is a new container.
  ASSERT_TRUE(cri_.runtime->StartContainer(*c1).ok());
  ASSERT_TRUE(server_->ExitContainer(*c1, 2, "Error").ok());
  auto st = cri_.runtime->ContainerStatus(*c1, false);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->status().exit_code(), 2);
  EXPECT_EQ(st->status().reason(), "Error");
  v1::ContainerConfig retry = ContainerConfig("app", "busybox");
  retry.mutable_metadata()->set_attempt(1);
  auto c4 = cri_.runtime->CreateContainer(*a, retry, SandboxConfig("a"));
  ASSERT_TRUE(c4.ok()) << c4.status();
  EXPECT_EQ(cri_.runtime->CreateContainer(*a, retry, SandboxConfig("a")).status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST_F(GrpcCriTest, CreateContainerWithoutImageIsNotFound) {
  auto sb = cri_.runtime->RunPodSandbox(SandboxConfig("s"), "");
  ASSERT_TRUE(sb.ok());
  auto c = cri_.runtime->CreateContainer(*sb, ContainerConfig("c", "nope:1"), SandboxConfig("s"));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("nope:1"));
}

TEST_F(GrpcCriTest, InjectedErrorsKeepCodeAndMessage) {
  server_->InjectError("RemoveImage", absl::PermissionDeniedError("image is in use by pod x"));
  server_->InjectError("RemoveImage", absl::UnavailableError("runtime restarting"));
  absl::Status first = cri_.images->RemoveImage("busybox");
  EXPECT_EQ(first.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(first.message()), HasSubstr("image is in use by pod x"));
  EXPECT_THAT(std::string(first.message()), HasSubstr("RemoveImage"));
  absl::Status second = cri_.images->RemoveImage("busybox");
  EXPECT_EQ(second.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(second.message()), HasSubstr("runtime restarting"));
  EXPECT_TRUE(cri_.images->RemoveImage("busybox").ok()) << "queue drained";
  EXPECT_EQ(server_->CallCount("RemoveImage"), 3);
}

TEST_F(GrpcCriTest, HangHitsDefaultDeadline) {
  GrpcCriOptions opts;
  opts.default_timeout = absl::Milliseconds(300);
  auto cri = ConnectCri(server_->endpoint(), opts);
  ASSERT_TRUE(cri.ok());
  server_->SetHang("ImageStatus", true);
  absl::Time start = absl::Now();
  auto st = cri->images->ImageStatus("busybox");
  absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(st.status().message()), HasSubstr("ImageStatus"));
  EXPECT_GE(took, absl::Milliseconds(250));
  EXPECT_LT(took, absl::Seconds(3));
}

TEST_F(GrpcCriTest, PullUsesItsOwnTimeoutNotTheDefault) {
  server_->SetLatency("PullImage", absl::Milliseconds(600));
  GrpcCriOptions opts;
  opts.default_timeout = absl::Milliseconds(200);
  auto cri = ConnectCri(server_->endpoint(), opts);
  ASSERT_TRUE(cri.ok());
  // Longer than the default timeout but within its own: succeeds.
  EXPECT_TRUE(cri->images->PullImage("busybox", nullptr, nullptr, absl::Seconds(10)).ok());
  // Its own timeout shorter than the latency: DEADLINE_EXCEEDED, promptly.
  absl::Time start = absl::Now();
  auto r = cri->images->PullImage("busybox", nullptr, nullptr, absl::Milliseconds(150));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

TEST_F(GrpcCriTest, ExecSyncHandlerAndDeadline) {
  ASSERT_TRUE(server_->AddImage("busybox").ok());
  auto sb = cri_.runtime->RunPodSandbox(SandboxConfig("e"), "");
  ASSERT_TRUE(sb.ok());
  auto cid =
      cri_.runtime->CreateContainer(*sb, ContainerConfig("c", "busybox"), SandboxConfig("e"));
  ASSERT_TRUE(cid.ok());
  EXPECT_EQ(cri_.runtime->ExecSync(*cid, {"true"}, absl::Seconds(1)).status().code(),
            absl::StatusCode::kFailedPrecondition)
      << "not running yet";
  ASSERT_TRUE(cri_.runtime->StartContainer(*cid).ok());
  server_->SetExecHandler([](const v1::ExecSyncRequest& req) {
    v1::ExecSyncResponse resp;
    resp.set_stderr("no such file: " + req.cmd(0));
    resp.set_exit_code(127);
    return resp;
  });
  auto r = cri_.runtime->ExecSync(*cid, {"/missing"}, absl::Seconds(1));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code(), 127);
  EXPECT_EQ(r->stderr(), "no such file: /missing");

  // The RPC deadline is the command timeout plus the default timeout.
  GrpcCriOptions opts;
  opts.default_timeout = absl::Milliseconds(200);
  auto cri = ConnectCri(server_->endpoint(), opts);
  ASSERT_TRUE(cri.ok());
  server_->SetHang("ExecSync", true);
  absl::Time start = absl::Now();
  auto hung = cri->runtime->ExecSync(*cid, {"sleep", "9"}, absl::Seconds(1));
  absl::Duration took = absl::Now() - start;
  EXPECT_EQ(hung.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_GE(took, absl::Milliseconds(1100));
  EXPECT_LT(took, absl::Seconds(4));
}

TEST_F(GrpcCriTest, ReleasedHangCompletes) {
  server_->SetHang("Version", true);
  absl::StatusOr<v1::VersionResponse> result;
  std::jthread caller([&] { result = cri_.runtime->Version(); });
  ASSERT_TRUE(server_->WaitForHungCalls("Version", 1, absl::Seconds(10)));
  server_->ReleaseHangs();
  caller.join();
  EXPECT_TRUE(result.ok()) << result.status();
}

TEST_F(GrpcCriTest, ContentStatusesDuringPull) {
  server_->SetPullDuration(absl::Seconds(2), 1000);
  absl::StatusOr<std::string> pulled;
  std::jthread puller([&] {
    pulled = cri_.images->PullImage("busybox:1.36", nullptr, nullptr, absl::Seconds(30));
  });
  ASSERT_TRUE(server_->WaitForInFlightPulls(1, absl::Seconds(10)));
  auto listed = cri_.content->ListStatuses({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  std::vector<ContentStatus> statuses = *listed;
  ASSERT_THAT(statuses, SizeIs(1));
  EXPECT_EQ(statuses[0].ref, "layer-" + FakeCriServer::ImageIdFor("busybox:1.36"));
  EXPECT_EQ(statuses[0].total, 1000);
  EXPECT_GE(statuses[0].offset, 0);
  EXPECT_LE(statuses[0].offset, 1000);
  auto filtered = cri_.content->ListStatuses({"ref~=no-such-ref"});
  ASSERT_TRUE(filtered.ok());
  EXPECT_TRUE(filtered->empty());
  puller.join();
  ASSERT_TRUE(pulled.ok()) << pulled.status();
  auto after = cri_.content->ListStatuses({});
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->empty());
  // Every ListStatuses carried the containerd namespace.
  for (const auto& call : server_->CallsTo("ListStatuses")) {
    auto it = call.metadata.find("containerd-namespace");
    ASSERT_NE(it, call.metadata.end());
    EXPECT_EQ(it->second, "k8s.io");
  }
}

TEST_F(GrpcCriTest, ContentServiceOtherNamespaceSeesNothing) {
  server_->SetPullDuration(absl::Seconds(2), 10);
  std::jthread puller(
      [&] { (void)cri_.images->PullImage("busybox", nullptr, nullptr, absl::Seconds(30)); });
  ASSERT_TRUE(server_->WaitForInFlightPulls(1, absl::Seconds(10)));
  GrpcContentService other(cri_.channel, "moby");
  auto s = other.ListStatuses({});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->empty());
  puller.join();
}

TEST(GrpcCriUnreachableTest, MissingSocketIsUnavailableWithinDeadline) {
  GrpcCriOptions opts;
  opts.default_timeout = absl::Seconds(2);
  auto cri = ConnectCri("unix:///tmp/kruise-no-such-dir/none.sock", opts);
  ASSERT_TRUE(cri.ok());
  absl::Time start = absl::Now();
  auto v = cri->runtime->Version();
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

TEST(GrpcCriUnreachableTest, RegularFileIsUnavailableWithinDeadline) {
  char tmpl[] = "/tmp/cri-file-XXXXXX";
  int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ::close(fd);
  GrpcCriOptions opts;
  opts.default_timeout = absl::Seconds(2);
  auto cri = ConnectCri(tmpl, opts);
  ASSERT_TRUE(cri.ok());
  absl::Time start = absl::Now();
  auto fs = cri->images->ImageFsInfo();
  ::unlink(tmpl);
  ASSERT_FALSE(fs.ok());
  EXPECT_THAT(fs.status().code(), ::testing::AnyOf(absl::StatusCode::kUnavailable,
                                                   absl::StatusCode::kDeadlineExceeded));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

}  // namespace
}  // namespace kruise::cri
