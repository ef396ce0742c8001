// RunDaemon's --addr-file and the `kruise-daemon probe` subcommand: how a daemon on an ephemeral
// port is found and probed (the kube-local DaemonSet, several nodes on one host network).

#include "daemon/app/daemon.h"

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stop_token>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/health_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/fakes/temp_dir.h"

namespace kruise::daemon {
namespace {

using ::testing::HasSubstr;

// A directory under $TMPDIR, removed with its content at the end of the test.
class ScratchDir : public ::kruise::testing::TempDir {
 public:
  ScratchDir() : TempDir("daemon-app-test") {}
};

// Polls `cond` until it holds or `timeout` passes (a condition with a deadline, not a sleep).
bool WaitUntil(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!cond()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// Options of a daemon that serves health on an ephemeral port and never gets further than runtime
// discovery (the CRI socket does not exist; the API server is never contacted before that).
DaemonOptions EphemeralDaemon(const std::string& dir) {
  std::filesystem::create_directories(dir + "/hostrun");
  std::ofstream(dir + "/kubeconfig") << "apiVersion: v1\nkind: Config\n"
                                     << "clusters:\n- name: c\n  cluster:\n"
                                     << "    server: http://127.0.0.1:1\n"
                                     << "users:\n- name: u\n  user:\n    token: t\n"
                                     << "contexts:\n- name: x\n  context:\n    cluster: c\n"
                                     << "    user: u\ncurrent-context: x\n";
  DaemonOptions o;
  o.node_name = "node-a";
  o.addr = "127.0.0.1:0";
  o.addr_file = dir + "/run/kruise-daemon/addr";
  o.host_run_dir = dir + "/hostrun";
  o.socket_file = "no-such.sock";
  o.kubeconfig = dir + "/kubeconfig";
  return o;
}

TEST(RunDaemonAddrFile, PublishesTheBoundAddressAndRemovesItOnExit) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  DaemonOptions o = EphemeralDaemon(dir.path());
  // A file left by an earlier run must not be taken for this run's address.
  std::filesystem::create_directories(dir.path() + "/run/kruise-daemon");
  std::ofstream(o.addr_file) << "127.0.0.1:1\n";

  std::stop_source stop;
  absl::Status result = absl::UnknownError("still running");
  std::thread daemon([&] { result = RunDaemon(o, stop.get_token()); });
  std::string address;
  bool published = WaitUntil(
      [&] {
        auto read = ReadAddressFile(o.addr_file);
        if (read.ok()) address = *read;
        return read.ok() && address != "127.0.0.1:1";
      },
      std::chrono::seconds(10));
  if (published) {
    EXPECT_THAT(address, ::testing::StartsWith("127.0.0.1:"));
    EXPECT_NE(address, "127.0.0.1:0");
    // Liveness as the kube-local DaemonSet asks it: up, although no runtime answers.
    auto live = ProbeHealth({.address_file = o.addr_file, .path = "/healthz?exclude=runtime"});
    ASSERT_TRUE(live.ok()) << live.status();
    EXPECT_EQ(live->status, 200) << live->body;
    // Readiness: not ready, and why.
    auto ready = ProbeHealth({.address_file = o.addr_file, .path = "/readyz"});
    ASSERT_TRUE(ready.ok()) << ready.status();
    EXPECT_EQ(ready->status, 503);
    EXPECT_THAT(ready->body, HasSubstr("[-]runtime failed"));
  }
  stop.request_stop();
  daemon.join();
  ASSERT_TRUE(published) << "no address in " << o.addr_file << "; RunDaemon: " << result;
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_FALSE(std::filesystem::exists(o.addr_file));
}

TEST(RunDaemonAddrFile, UnwritableFileFailsTheStart) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  DaemonOptions o = EphemeralDaemon(dir.path());
  std::ofstream(dir.path() + "/not-a-dir") << "x";
  o.addr_file = dir.path() + "/not-a-dir/addr";
  std::stop_source stop;
  absl::Status s = RunDaemon(o, stop.get_token());  // returns at once: no retry can fix it
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("--addr-file"));
  EXPECT_THAT(std::string(s.message()), HasSubstr(o.addr_file));
}

// The binary's `probe` subcommand: exit code, stdout and one line on stderr.
struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
CommandResult RunProbe(const std::string& args, const std::string& dir) {
  std::string err_file = dir + "/probe.err";
  std::string cmd = absl::StrCat(KRUISE_DAEMON_BINARY, " probe ", args, " 2>", err_file);
  CommandResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) r.out.append(buf, n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_file);
  r.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return r;
}

TEST(ProbeCommand, ExitCodesAndOutput) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  HealthServer server({.address = "127.0.0.1:0"});
  server.AddCheck(
      "synced", [] { return absl::UnavailableError("informers not synced"); },
      CheckKind::kReadiness);
  ASSERT_TRUE(server.Start().ok());
  std::string file = dir.path() + "/addr";
  ASSERT_TRUE(WriteAddressFile(file, server.bound_address()).ok());

  CommandResult r = RunProbe("--addr-file " + file, dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "ok\n");
  EXPECT_EQ(r.err, "");

  r = RunProbe("--addr-file=" + file + " --path=/readyz", dir.path());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("[-]synced failed: informers not synced"));
  EXPECT_EQ(r.err, absl::StrCat("kruise-daemon probe: GET http://", server.bound_address(),
                                "/readyz: HTTP 503\n"));

  r = RunProbe(absl::StrCat("--addr 0.0.0.0:", server.port(), " --path '/metrics'"), dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.err;

  r = RunProbe("--addr-file " + dir.path() + "/missing", dir.path());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, HasSubstr("does not exist"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;

  int port = server.port();
  server.Stop();
  r = RunProbe(absl::StrCat("--addr 127.0.0.1:", port, " --timeout-seconds 1"), dir.path());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot connect"));

  r = RunProbe("", dir.path());  // neither --addr nor --addr-file
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("exactly one"));
}

}  // namespace
}  // namespace kruise::daemon
