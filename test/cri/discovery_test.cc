// Integration: runtime discovery over a temporary run dir holding fake CRI servers and decoys.
#include "cri/discovery.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/fakes/cri/fake_cri_server.h"

namespace kruise::cri {
namespace {

using ::kruise::testing::FakeCriServer;
using ::testing::HasSubstr;

class DiscoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/cri-run-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    run_dir_ = tmpl;
  }
  void TearDown() override {
    servers_.clear();
    std::error_code ec;
    std::filesystem::remove_all(run_dir_, ec);
  }

  std::string Path(const std::string& rel) { return run_dir_ + "/" + rel; }

  FakeCriServer* StartFake(const std::string& rel, const std::string& name) {
    std::filesystem::create_directories(std::filesystem::path(Path(rel)).parent_path());
    FakeCriServer::Options opts;
    opts.socket_path = Path(rel);
    opts.runtime_name = name;
    auto server = FakeCriServer::Start(opts);
    EXPECT_TRUE(server.ok()) << server.status();
    servers_.push_back(*std::move(server));
    return servers_.back().get();
  }

  void MakeRegularFile(const std::string& rel) {
    std::filesystem::create_directories(std::filesystem::path(Path(rel)).parent_path());
    std::ofstream(Path(rel)) << "x";
  }

  void MakeDeadSocket(const std::string& rel) {
    std::filesystem::create_directories(std::filesystem::path(Path(rel)).parent_path());
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", Path(rel).c_str());
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ::close(fd);
  }

  // Probes that must succeed get a generous timeout (CI machines can be very busy); tests about
  // hangs pass a short one.
  DiscoveryOptions Options(absl::Duration probe_timeout = absl::Seconds(10)) {
    DiscoveryOptions opts;
    opts.host_run_dir = run_dir_;
    opts.probe_timeout = probe_timeout;
    return opts;
  }

  std::string run_dir_;
  std::vector<std::unique_ptr<FakeCriServer>> servers_;
};

TEST_F(DiscoveryTest, SkipsBrokenCandidatesAndPicksTheWorkingOne) {
  // containerd/containerd.sock: missing.
  MakeRegularFile("containerd.sock");
  MakeDeadSocket("crio/crio.sock");
  FakeCriServer* failing = StartFake("crio.sock", "broken-runtime");
  failing->InjectError("Version", absl::InternalError("runtime is wedged"));
  FakeCriServer* good = StartFake("cri-dockerd.sock", "cri-dockerd");

  absl::Time start = absl::Now();
  absl::StatusOr<DiscoveredRuntime> rt = DiscoverRuntime(Options());
  ASSERT_TRUE(rt.ok()) << rt.status();
  // Broken candidates fail fast (refused, wrong type, error reply): far below one probe timeout.
  EXPECT_LT(absl::Now() - start, absl::Seconds(9));
  EXPECT_EQ(rt->socket_path, Path("cri-dockerd.sock"));
  EXPECT_EQ(rt->endpoint, "unix://" + Path("cri-dockerd.sock"));
  EXPECT_EQ(rt->runtime_name, "cri-dockerd");
  EXPECT_EQ(rt->runtime_version, "1.0.0");
  EXPECT_EQ(rt->runtime_api_version, "v1");
  EXPECT_THAT(rt->image_fs_summary, HasSubstr("/var/lib/fake-cri/images"));
  EXPECT_EQ(good->CallCount("Version"), 1);
  EXPECT_EQ(good->CallCount("ImageFsInfo"), 1);
  EXPECT_EQ(failing->CallCount("ImageFsInfo"), 0) << "Version failed first";
}

TEST_F(DiscoveryTest, FailureMessageListsEveryPathAndReason) {
  MakeRegularFile("containerd.sock");
  MakeDeadSocket("crio/crio.sock");
  StartFake("crio.sock", "broken")
      ->InjectError("Version", absl::InternalError("runtime is wedged"));
  StartFake("cri-dockerd.sock", "slow")->SetHang("Version", true);
  StartFake("cri-dockerd/cri-dockerd.sock", "no-fs")
      ->InjectError("ImageFsInfo", absl::UnimplementedError("no image fs"));

  absl::Time start = absl::Now();
  absl::StatusOr<DiscoveredRuntime> rt = DiscoverRuntime(Options(absl::Milliseconds(500)));
  absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(rt.ok());
  EXPECT_EQ(rt.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(took, absl::Seconds(6));
  std::string msg(rt.status().message());
  EXPECT_THAT(msg, HasSubstr(Path("containerd/containerd.sock") + ": missing"));
  EXPECT_THAT(msg, HasSubstr(Path("containerd.sock") + ": not a socket (regular file)"));
  EXPECT_THAT(msg, HasSubstr(Path("crio/crio.sock") + ": connection refused"));
  EXPECT_THAT(msg, HasSubstr(Path("crio.sock") + ": INTERNAL: Version failed: "));
  EXPECT_THAT(msg, HasSubstr("runtime is wedged"));
  EXPECT_THAT(msg, HasSubstr(Path("cri-dockerd.sock") + ": timeout after 500ms"));
  EXPECT_THAT(msg, HasSubstr(Path("cri-dockerd/cri-dockerd.sock") +
                             ": UNIMPLEMENTED: ImageFsInfo failed: "));
}

TEST_F(DiscoveryTest, FirstWorkingCandidateWinsInOrder) {
  StartFake("containerd/containerd.sock", "containerd");
  StartFake("crio.sock", "cri-o");
  absl::StatusOr<DiscoveredRuntime> rt = DiscoverRuntime(Options());
  ASSERT_TRUE(rt.ok()) << rt.status();
  EXPECT_EQ(rt->runtime_name, "containerd");
  EXPECT_EQ(servers_[1]->CallCount("Version"), 0) << "later candidates are not probed";
}

TEST_F(DiscoveryTest, ExplicitOverrideRelativeAndAbsolute) {
  StartFake("containerd/containerd.sock", "containerd");
  StartFake("custom/runtime.sock", "custom");
  DiscoveryOptions opts = Options();
  opts.socket_override = "custom/runtime.sock";
  absl::StatusOr<DiscoveredRuntime> rt = DiscoverRuntime(opts);
  ASSERT_TRUE(rt.ok()) << rt.status();
  EXPECT_EQ(rt->runtime_name, "custom");

  opts.socket_override = "unix://" + Path("custom/runtime.sock");
  rt = DiscoverRuntime(opts);
  ASSERT_TRUE(rt.ok()) << rt.status();
  EXPECT_EQ(rt->socket_path, Path("custom/runtime.sock"));

  // An override that does not work is not silently replaced by a candidate.
  opts.socket_override = Path("custom/absent.sock");
  rt = DiscoverRuntime(opts);
  ASSERT_FALSE(rt.ok());
  EXPECT_EQ(rt.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(rt.status().message()), HasSubstr("custom/absent.sock: missing"));
}

TEST_F(DiscoveryTest, RecoversWhenRuntimeRestartsOnSameSocket) {
  FakeCriServer* first = StartFake("containerd/containerd.sock", "containerd");
  first->Shutdown();
  servers_.clear();
  // The old socket file may linger: a dead socket must fail fast, not hang.
  absl::Time start = absl::Now();
  absl::StatusOr<DiscoveredRuntime> rt = DiscoverRuntime(Options());
  EXPECT_FALSE(rt.ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(9)) << "a dead socket must not wait for the timeout";
  StartFake("containerd/containerd.sock", "containerd");
  rt = DiscoverRuntime(Options());
  ASSERT_TRUE(rt.ok()) << rt.status();
  EXPECT_EQ(rt->runtime_name, "containerd");
}

}  // namespace
}  // namespace kruise::cri
