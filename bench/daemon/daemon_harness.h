#pragma once

// Harness for benchmarks of the real kruise-daemon binary: runs it as a child process against an
// API server (the in-process fake, or any cluster through a kubeconfig) and a CRI socket, and
// offers the pieces the scenarios share (arrival timestamps, statistics, /proc memory).
//
// Not thread-safe unless stated; one scenario at a time.

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kruise::bench {

// A running kruise-daemon child. Stop() (or the destructor) sends SIGTERM and reaps it.
class DaemonProcess {
 public:
  struct Options {
    std::string binary;
    std::string node_name;
    std::string kubeconfig;
    std::string socket;  // absolute CRI socket path (--socket-file)
    std::string log_file;
    std::vector<std::string> extra_args;
  };
  static absl::StatusOr<std::unique_ptr<DaemonProcess>> Start(const Options& options);
  ~DaemonProcess();

  // Waits until /readyz answers 200 (informers synced, runtime connected).
  absl::Status WaitReady(absl::Duration timeout);
  absl::StatusOr<std::string> Get(const std::string& path);
  void Stop();
  pid_t pid() const { return pid_; }
  int port() const { return port_; }

 private:
  DaemonProcess() = default;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_file_;
};

// Timestamps of the first arrival of keys (image refs, container ids); thread-safe.
class Arrivals {
 public:
  void Record(const std::string& key, absl::Time at);
  // Waits until a key ending in `suffix` arrived; returns its time.
  absl::StatusOr<absl::Time> Wait(const std::string& suffix, absl::Duration timeout);

 private:
  absl::Mutex mu_;
  std::map<std::string, absl::Time> first_ ABSL_GUARDED_BY(mu_);
};

struct Summary {
  size_t n = 0;
  double median = 0, p90 = 0, max = 0, min = 0;
};
Summary Summarize(std::vector<double> values);

// VmRSS and RssAnon of `pid` in KiB (from /proc/<pid>/status).
struct Memory {
  int64_t rss_kib = 0;
  int64_t rss_anon_kib = 0;
};
absl::StatusOr<Memory> ReadMemory(pid_t pid);

// A kubeconfig for a plain-HTTP server without credentials, written to `path`.
absl::Status WriteKubeconfig(const std::string& path, const std::string& server_url);

// A free TCP port on 127.0.0.1 (bound and released).
absl::StatusOr<int> FreePort();

}  // namespace kruise::bench
