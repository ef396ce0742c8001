#pragma once

// HealthServer: plain-HTTP /healthz, /readyz and /metrics for a process (the daemon's --addr, the
// manager's --health-probe-addr and --metrics-addr).
//
//   HealthServer server({.address = ":10221"});
//   server.AddCheck("runtime", [&] { return runtime_status(); });          // liveness + readiness
//   server.AddCheck("informers-synced", [&] {...}, CheckKind::kReadiness); // readiness only
//   server.SetMetrics(registry);   // prometheus::Registry served on /metrics
//   RETURN_IF_ERROR(server.Start());
//
// /healthz runs the liveness checks, /readyz all checks; each answers 200 "ok" or 503 with one
// line per check ("[+]name ok" / "[-]name failed: reason"), like the Kubernetes components.
// /healthz/<name> and /readyz/<name> run one check. `?exclude=<name>` (repeatable) skips a check,
// as kube-apiserver's /livez does: a DaemonSet's liveness probe can use
// `/healthz?exclude=runtime` so a node agent waiting for its runtime is not restarted in a loop.
// Checks run on the server's threads and must be quick and thread-safe.

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace httplib {
class Server;
}
namespace prometheus {
class Registry;
}

namespace kruise {

// ":8080" -> {"0.0.0.0", 8080}; "127.0.0.1:0"; "[::1]:9000" -> {"::1", 9000}.
struct HostPort {
  std::string host;
  int port = 0;
};
absl::StatusOr<HostPort> ParseListenAddress(absl::string_view address);

enum class CheckKind { kLiveness, kReadiness };

class HealthServer {
 public:
  struct Options {
    std::string address = ":8000";
    bool serve_health = true;
    bool serve_metrics = true;
  };
  explicit HealthServer(Options options);
  ~HealthServer();

  void AddCheck(std::string name, std::function<absl::Status()> check,
                CheckKind kind = CheckKind::kLiveness);
  void SetMetrics(std::shared_ptr<prometheus::Registry> registry);

  // Binds and starts serving on a background thread. Errors: kInvalidArgument for a bad address,
  // kUnavailable when the address cannot be bound.
  absl::Status Start();
  void Stop();
  int port() const { return port_; }

  // The bodies and codes the endpoints answer, for callers that want them without HTTP (tests,
  // `kruise-daemon check`).
  std::pair<int, std::string> Evaluate(bool readiness, absl::string_view only = "",
                                       const std::vector<std::string>& exclude = {}) const;

 private:
  struct Check {
    std::string name;
    std::function<absl::Status()> fn;
    CheckKind kind;
  };

  Options options_;
  mutable absl::Mutex mu_;
  std::vector<Check> checks_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<prometheus::Registry> registry_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace kruise
