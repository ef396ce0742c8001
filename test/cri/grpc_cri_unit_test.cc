// Unit tests for the pieces of cri/ that need no server: endpoint parsing, gRPC → absl status
// mapping, discovery with an injected prober.
#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cri/discovery.h"
#include "cri/grpc_cri.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kruise::cri {
namespace {

using ::testing::HasSubstr;

TEST(SocketPathFromEndpointTest, AcceptsUnixForms) {
  EXPECT_EQ(*SocketPathFromEndpoint("unix:///run/containerd/containerd.sock"),
            "/run/containerd/containerd.sock");
  EXPECT_EQ(*SocketPathFromEndpoint("unix:/run/x.sock"), "/run/x.sock");
  EXPECT_EQ(*SocketPathFromEndpoint("/run/x.sock"), "/run/x.sock");
}

TEST(SocketPathFromEndpointTest, RejectsOthers) {
  for (const char* bad : {"", "tcp://127.0.0.1:1234", "npipe:////./pipe/x", "run/x.sock", "unix://",
                          "unix://relative.sock"}) {
    absl::StatusOr<std::string> p = SocketPathFromEndpoint(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_THAT(std::string(SocketPathFromEndpoint("tcp://h:1").status().message()),
              HasSubstr("only unix sockets"));
}

TEST(FromGrpcStatusTest, KeepsCodeAndMessage) {
  struct Case {
    grpc::StatusCode grpc_code;
    absl::StatusCode absl_code;
  };
  for (Case c :
       {Case{grpc::StatusCode::DEADLINE_EXCEEDED, absl::StatusCode::kDeadlineExceeded},
        Case{grpc::StatusCode::UNAVAILABLE, absl::StatusCode::kUnavailable},
        Case{grpc::StatusCode::NOT_FOUND, absl::StatusCode::kNotFound},
        Case{grpc::StatusCode::PERMISSION_DENIED, absl::StatusCode::kPermissionDenied},
        Case{grpc::StatusCode::UNIMPLEMENTED, absl::StatusCode::kUnimplemented},
        Case{grpc::StatusCode::UNAUTHENTICATED, absl::StatusCode::kUnauthenticated},
        Case{grpc::StatusCode::RESOURCE_EXHAUSTED, absl::StatusCode::kResourceExhausted}}) {
    absl::Status s = FromGrpcStatus(grpc::Status(c.grpc_code, "runtime says no"));
    EXPECT_EQ(s.code(), c.absl_code);
    EXPECT_EQ(s.message(), "runtime says no");
  }
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
  EXPECT_EQ(FromGrpcStatus(grpc::Status(static_cast<grpc::StatusCode>(99), "x")).code(),
            absl::StatusCode::kUnknown);
}

TEST(DialCriTest, MalformedEndpointIsInvalidArgument) {
  EXPECT_EQ(DialCri("tcp://1.2.3.4:5").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ConnectCri("").status().code(), absl::StatusCode::kInvalidArgument);
}

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/cri-unit-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Creates a unix socket file nobody listens on.
void MakeDeadSocket(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);
}

TEST(DiscoveryUnitTest, CandidatesInDocumentedOrder) {
  EXPECT_THAT(
      DefaultRuntimeCandidates(),
      ::testing::ElementsAre("containerd/containerd.sock", "containerd.sock", "crio/crio.sock",
                             "crio.sock", "cri-dockerd.sock", "cri-dockerd/cri-dockerd.sock"));
}

TEST(DiscoveryUnitTest, ProbesOnlySocketsAndPicksFirstThatAnswers) {
  TempDir dir;
  std::filesystem::create_directories(dir.path() + "/crio");
  std::ofstream(dir.path() + "/containerd.sock") << "not a socket";
  MakeDeadSocket(dir.path() + "/crio/crio.sock");
  MakeDeadSocket(dir.path() + "/crio.sock");
  std::vector<std::string> probed;
  DiscoveryOptions opts;
  opts.host_run_dir = dir.path();
  opts.prober = [&](const std::string& path, absl::Duration) -> absl::StatusOr<ProbeResult> {
    probed.push_back(path);
    if (path == dir.path() + "/crio/crio.sock") {
      return absl::UnavailableError("Version failed: boom");
    }
    ProbeResult r;
    r.version.set_runtime_name("cri-o");
    r.version.set_runtime_version("1.28.0");
    r.version.set_runtime_api_version("v1");
    r.image_fs.add_image_filesystems()->mutable_fs_id()->set_mountpoint("/var/lib/containers");
    return r;
  };
  absl::StatusOr<DiscoveredRuntime> rt = DiscoverRuntime(opts);
  ASSERT_TRUE(rt.ok()) << rt.status();
  EXPECT_EQ(rt->socket_path, dir.path() + "/crio.sock");
  EXPECT_EQ(rt->endpoint, "unix://" + dir.path() + "/crio.sock");
  EXPECT_EQ(rt->runtime_name, "cri-o");
  EXPECT_THAT(rt->image_fs_summary, HasSubstr("/var/lib/containers"));
  EXPECT_THAT(probed,
              ::testing::ElementsAre(dir.path() + "/crio/crio.sock", dir.path() + "/crio.sock"));
}

TEST(DiscoveryUnitTest, AllMissingIsNotFoundListingEveryPath) {
  TempDir dir;
  DiscoveryOptions opts;
  opts.host_run_dir = dir.path();
  opts.prober = [](const std::string&, absl::Duration) -> absl::StatusOr<ProbeResult> {
    ADD_FAILURE() << "prober must not run for missing files";
    return absl::InternalError("unexpected");
  };
  absl::StatusOr<DiscoveredRuntime> rt = DiscoverRuntime(opts);
  ASSERT_FALSE(rt.ok());
  EXPECT_EQ(rt.status().code(), absl::StatusCode::kNotFound);
  for (const std::string& rel : DefaultRuntimeCandidates()) {
    EXPECT_THAT(std::string(rt.status().message()),
                HasSubstr(dir.path() + "/" + rel + ": missing"));
  }
}

TEST(DiscoveryUnitTest, OverrideRelativeAbsoluteAndMalformed) {
  TempDir dir;
  MakeDeadSocket(dir.path() + "/my.sock");
  std::vector<std::string> probed;
  DiscoveryOptions opts;
  opts.host_run_dir = dir.path();
  opts.prober = [&](const std::string& path, absl::Duration) -> absl::StatusOr<ProbeResult> {
    probed.push_back(path);
    return ProbeResult{};
  };
  opts.socket_override = "my.sock";
  ASSERT_TRUE(DiscoverRuntime(opts).ok());
  opts.socket_override = "unix://" + dir.path() + "/my.sock";
  ASSERT_TRUE(DiscoverRuntime(opts).ok());
  EXPECT_THAT(probed, ::testing::ElementsAre(dir.path() + "/my.sock", dir.path() + "/my.sock"));

  opts.socket_override = "tcp://1.2.3.4:1";
  EXPECT_EQ(DiscoverRuntime(opts).status().code(), absl::StatusCode::kInvalidArgument);
  opts.socket_override = "other.sock";
  absl::StatusOr<DiscoveredRuntime> rt = DiscoverRuntime(opts);
  EXPECT_EQ(rt.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(rt.status().message()), HasSubstr(dir.path() + "/other.sock: missing"));
}

}  // namespace
}  // namespace kruise::cri
