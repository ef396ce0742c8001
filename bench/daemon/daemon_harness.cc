#include "bench/daemon/daemon_harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

extern char** environ;

namespace kruise::bench {

absl::StatusOr<int> FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return absl::InternalError("bind failed");
  }
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

absl::Status WriteKubeconfig(const std::string& path, const std::string& server_url) {
  std::ofstream f(path);
  f << "apiVersion: v1\nkind: Config\nclusters:\n- name: bench\n  cluster:\n    server: "
    << server_url
    << "\nusers:\n- name: bench\n  user: {}\ncontexts:\n- name: bench\n  context:\n    "
       "cluster: bench\n    user: bench\ncurrent-context: bench\n";
  f.close();
  if (!f) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DaemonProcess>> DaemonProcess::Start(const Options& options) {
  auto port = FreePort();
  if (!port.ok()) return port.status();
  std::unique_ptr<DaemonProcess> p(new DaemonProcess());
  p->port_ = *port;
  p->log_file_ = options.log_file;
  std::vector<std::string> args = {options.binary, absl::StrCat("--addr=127.0.0.1:", *port),
                                   "--kubeconfig=" + options.kubeconfig,
                                   "--socket-file=" + options.socket, "--host-run-dir=/"};
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_store;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!absl::StartsWith(*e, "NODE_NAME=") && !absl::StartsWith(*e, "NOTIFY_SOCKET=")) {
      env_store.emplace_back(*e);
    }
  }
  env_store.push_back("NODE_NAME=" + options.node_name);
  std::vector<char*> envp;
  for (std::string& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  std::string log = options.log_file.empty() ? "/dev/null" : options.log_file;
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  // The child must not inherit our blocked signal mask (it would ignore SIGTERM).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, options.binary.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("spawn ", options.binary, ": ", std::strerror(rc)));
  }
  p->pid_ = pid;
  return p;
}

DaemonProcess::~DaemonProcess() { Stop(); }

void DaemonProcess::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  int status = 0;
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (absl::Now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  pid_ = -1;
}

absl::StatusOr<std::string> DaemonProcess::Get(const std::string& path) {
  httplib::Client client("127.0.0.1", port_);
  client.set_connection_timeout(1, 0);
  client.set_read_timeout(5, 0);
  auto res = client.Get(path);
  if (!res) return absl::UnavailableError("no answer");
  if (res->status != 200) {
    return absl::UnavailableError(absl::StrCat("HTTP ", res->status, ": ", res->body));
  }
  return res->body;
}

absl::Status DaemonProcess::WaitReady(absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  absl::Status last = absl::UnavailableError("not tried");
  while (absl::Now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::AbortedError(
          absl::StrCat("kruise-daemon exited (status ", status, "), log ", log_file_));
    }
    auto body = Get("/readyz");
    if (body.ok()) return absl::OkStatus();
    last = body.status();
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("kruise-daemon not ready: ", last.message(), " (log ", log_file_, ")"));
}

void Arrivals::Record(const std::string& key, absl::Time at) {
  absl::MutexLock lock(&mu_);
  first_.emplace(key, at);
}

absl::StatusOr<absl::Time> Arrivals::Wait(const std::string& suffix, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  absl::Time found = absl::InfinitePast();
  auto has = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& [key, at] : first_) {
      if (absl::EndsWith(key, suffix)) {
        found = at;
        return true;
      }
    }
    return false;
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&has), timeout)) {
    return absl::DeadlineExceededError(absl::StrCat("nothing ending in ", suffix, " arrived"));
  }
  return found;
}

Summary Summarize(std::vector<double> values) {
  Summary s;
  s.n = values.size();
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  auto at = [&](double q) {
    size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size()))) - 1;
    return values[std::min(i, values.size() - 1)];
  };
  s.median = values.size() % 2 == 1
                 ? values[values.size() / 2]
                 : (values[values.size() / 2 - 1] + values[values.size() / 2]) / 2;
  s.p90 = at(0.9);
  s.max = values.back();
  s.min = values.front();
  return s;
}

absl::StatusOr<Memory> ReadMemory(pid_t pid) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/status"));
  if (!f) return absl::NotFoundError(absl::StrCat("no /proc/", pid, "/status"));
  Memory m;
  std::string line;
  while (std::getline(f, line)) {
    std::vector<std::string> cols = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (cols.size() < 2) continue;
    if (cols[0] == "VmRSS:") (void)absl::SimpleAtoi(cols[1], &m.rss_kib);
    if (cols[0] == "RssAnon:") (void)absl::SimpleAtoi(cols[1], &m.rss_anon_kib);
  }
  return m;
}

}  // namespace kruise::bench
