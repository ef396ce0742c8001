#include "common/health_server.h"

#include <prometheus/counter.h>
#include <prometheus/registry.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "test/fakes/temp_dir.h"
#include "httplib.h"

namespace kruise {
namespace {

TEST(ParseListenAddress, Forms) {
  EXPECT_EQ(ParseListenAddress(":10221")->host, "0.0.0.0");
  EXPECT_EQ(ParseListenAddress(":10221")->port, 10221);
  EXPECT_EQ(ParseListenAddress("127.0.0.1:0")->host, "127.0.0.1");
  EXPECT_EQ(ParseListenAddress("[::1]:8000")->host, "::1");
  EXPECT_EQ(ParseListenAddress("[::1]:8000")->port, 8000);
  for (const char* bad : {"", "8080", "host:", "host:99999", "host:x", "[::1]8000", "[::1"}) {
    EXPECT_EQ(ParseListenAddress(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(HealthServer, ServesChecksAndMetrics) {
  HealthServer server({.address = "127.0.0.1:0"});
  std::atomic<bool> runtime_up{false};
  server.AddCheck("runtime", [&] {
    return runtime_up ? absl::OkStatus()
                      : absl::UnavailableError("no CRI socket: tried /run/containerd.sock");
  });
  server.AddCheck(
      "synced", [] { return absl::OkStatus(); }, CheckKind::kReadiness);
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter()
      .Name("kruise_test_total")
      .Help("t")
      .Register(*registry)
      .Add({})
      .Increment(3);
  server.SetMetrics(registry);
  ASSERT_TRUE(server.Start().ok());
  ASSERT_GT(server.port(), 0);  // port 0 asked: the kernel's ephemeral port
  EXPECT_EQ(server.bound_address(), "127.0.0.1:" + std::to_string(server.port()));

  httplib::Client client("127.0.0.1", server.port());
  auto res = client.Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_NE(res->body.find("[-]runtime failed: no CRI socket: tried /run/containerd.sock"),
            std::string::npos);
  EXPECT_EQ(res->body.find("synced"), std::string::npos);  // readiness-only
  // What the DaemonSet's liveness probe asks: everything but the runtime.
  res = client.Get("/healthz?exclude=runtime");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_NE(res->body.find("[+]runtime excluded: ok"), std::string::npos) << res->body;
  res = client.Get("/readyz?exclude=runtime");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;

  runtime_up = true;
  res = client.Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  res = client.Get("/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->body.find("[+]synced ok"), std::string::npos);
  res = client.Get("/readyz/synced");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  res = client.Get("/healthz/nope");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);

  res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->body.find("kruise_test_total 3"), std::string::npos) << res->body;
  server.Stop();
}

TEST(HealthServer, BusyPortIsAnError) {
  HealthServer first({.address = "127.0.0.1:0"});
  ASSERT_TRUE(first.Start().ok());
  HealthServer second({.address = "127.0.0.1:" + std::to_string(first.port())});
  EXPECT_EQ(second.Start().code(), absl::StatusCode::kUnavailable);
}

TEST(HealthServer, BoundAddressBeforeStartIsEmpty) {
  HealthServer server({.address = "127.0.0.1:0"});
  EXPECT_EQ(server.port(), 0);
  EXPECT_EQ(server.bound_address(), "");
}

// A directory under $TMPDIR, removed with its content at the end of the test.
class ScratchDir : public ::kruise::testing::TempDir {
 public:
  ScratchDir() : TempDir("health-server-test") {}
};

std::string FileContent(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(AddressFile, WrittenAtomicallyAndReadBack) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  // The parent directory is created; the file holds one line.
  std::string path = dir.path() + "/run/kruise-daemon/addr";
  ASSERT_TRUE(WriteAddressFile(path, "127.0.0.1:41234").ok());
  EXPECT_EQ(FileContent(path), "127.0.0.1:41234\n");
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  auto read = ReadAddressFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "127.0.0.1:41234");

  // Replaced, not appended to; no temporary file left next to it.
  ASSERT_TRUE(WriteAddressFile(path, "[::1]:8000").ok());
  EXPECT_EQ(*ReadAddressFile(path), "[::1]:8000");
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path() + "/run/kruise-daemon")) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "addr");
  }
  EXPECT_EQ(entries, 1);
}

TEST(AddressFile, Errors) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  EXPECT_EQ(ReadAddressFile(dir.path() + "/missing").status().code(), absl::StatusCode::kNotFound);
  std::ofstream(dir.path() + "/empty") << " \n";
  EXPECT_EQ(ReadAddressFile(dir.path() + "/empty").status().code(),
            absl::StatusCode::kInvalidArgument);
  // The parent "directory" is a regular file: cannot be created, nothing written.
  std::ofstream(dir.path() + "/file") << "x";
  absl::Status s = WriteAddressFile(dir.path() + "/file/addr", "127.0.0.1:1");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(dir.path() + "/file/addr"), absl::string_view::npos) << s;
  EXPECT_FALSE(WriteAddressFile("", "127.0.0.1:1").ok());
}

TEST(ProbeHealth, AnswersOfARunningServer) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  HealthServer server({.address = "127.0.0.1:0"});
  std::atomic<bool> runtime_up{false};
  server.AddCheck("runtime", [&] {
    return runtime_up ? absl::OkStatus() : absl::UnavailableError("no CRI socket");
  });
  server.AddCheck(
      "synced", [] { return absl::OkStatus(); }, CheckKind::kReadiness);
  ASSERT_TRUE(server.Start().ok());
  std::string file = dir.path() + "/addr";
  ASSERT_TRUE(WriteAddressFile(file, server.bound_address()).ok());

  // Through the address file, as the kube-local DaemonSet's exec probes do.
  auto r = ProbeHealth({.address_file = file, .path = "/healthz?exclude=runtime"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_NE(r->body.find("[+]runtime excluded: ok"), std::string::npos) << r->body;
  EXPECT_EQ(r->url, "http://" + server.bound_address() + "/healthz?exclude=runtime");

  // A failing check is an answer (503 with the reason), not an error.
  r = ProbeHealth({.address_file = file, .path = "/readyz"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 503);
  EXPECT_NE(r->body.find("[-]runtime failed: no CRI socket"), std::string::npos) << r->body;

  runtime_up = true;
  r = ProbeHealth({.address_file = file, .path = "/readyz"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200) << r->body;

  // By address; a wildcard host is reached on loopback; the default path is /healthz.
  std::string port = std::to_string(server.port());
  for (const std::string& address : {"127.0.0.1:" + port, "0.0.0.0:" + port, ":" + port}) {
    r = ProbeHealth({.address = address});
    ASSERT_TRUE(r.ok()) << address << ": " << r.status();
    EXPECT_EQ(r->status, 200) << address;
    EXPECT_EQ(r->url, "http://127.0.0.1:" + port + "/healthz");
  }
  r = ProbeHealth({.address = "127.0.0.1:" + port, .path = "/nope"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 404);
}

TEST(ProbeHealth, Failures) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  // No address file (the daemon has not bound yet, or is gone).
  auto r = ProbeHealth({.address_file = dir.path() + "/addr"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();

  // A port nobody listens on any more: connection refused.
  int closed_port = 0;
  {
    HealthServer server({.address = "127.0.0.1:0"});
    ASSERT_TRUE(server.Start().ok());
    closed_port = server.port();
    ASSERT_TRUE(WriteAddressFile(dir.path() + "/addr", server.bound_address()).ok());
  }
  r = ProbeHealth({.address_file = dir.path() + "/addr", .timeout = absl::Seconds(1)});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_NE(r.status().message().find("127.0.0.1:" + std::to_string(closed_port)),
            absl::string_view::npos)
      << r.status();

  // Garbage in the file names the file.
  std::ofstream(dir.path() + "/garbage") << "not an address\n";
  r = ProbeHealth({.address_file = dir.path() + "/garbage"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(dir.path() + "/garbage"), absl::string_view::npos)
      << r.status();

  // Bad requests.
  EXPECT_EQ(ProbeHealth({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      ProbeHealth({.address = "127.0.0.1:1", .address_file = dir.path() + "/addr"}).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ProbeHealth({.address = "127.0.0.1:0"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ProbeHealth({.address = "127.0.0.1:1", .path = "healthz"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      ProbeHealth({.address = "127.0.0.1:1", .timeout = absl::ZeroDuration()}).status().code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kruise
