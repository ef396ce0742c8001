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
//
// A server started on port 0 gets an ephemeral port (port(), bound_address()). Where clients cannot
// know it in advance (several kruise-daemons on one host network, as on a multi-node kube-local),
// the process publishes it in an address file (WriteAddressFile) and clients read it back
// (ProbeHealth with address_file: `kruise-daemon probe`, the kube-local DaemonSet's exec probes).

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

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
  // After a successful Start(): the port bound (the ephemeral port the kernel chose when the
  // address asked for port 0) and "host:port" with it ("[::1]:41234" for IPv6); 0 / "" before.
  int port() const { return port_; }
  std::string bound_address() const;

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
  std::string host_;
  int port_ = 0;
};

// The address file: a server's bound address as one line "host:port\n".
// WriteAddressFile creates the parent directory when missing and replaces the file atomically (a
// temporary file in the same directory, renamed over it: tls::WriteFileAtomic), so a
// reader sees the previous content or the new one, never a partial line. Errors name the path.
absl::Status WriteAddressFile(const std::string& path, absl::string_view address);
// The address in the file, surrounding whitespace removed. Errors: kNotFound when the file does not
// exist, kInvalidArgument when it is empty, the errno's status for other read failures.
absl::StatusOr<std::string> ReadAddressFile(const std::string& path);

// One HTTP GET of a health endpoint, as `kruise-daemon probe` and the DaemonSet's exec probes do
// it.
struct HealthProbe {
  // Exactly one of the two: "host:port" (":port", "[ipv6]:port"), or the address file to read it
  // from. A wildcard host (empty, 0.0.0.0, ::) is reached on loopback (127.0.0.1, ::1).
  std::string address = "";
  std::string address_file = "";
  std::string path = "/healthz";              // may carry a query: "/healthz?exclude=runtime"
  absl::Duration timeout = absl::Seconds(2);  // for connecting, and for each read and write
};
struct HealthProbeResult {
  std::string url;  // what was asked, for messages: "http://127.0.0.1:41234/readyz"
  int status = 0;   // the HTTP status
  std::string body;
};
// Blocks for at most about twice `timeout`. Any HTTP answer is a result (the caller judges its
// status). Errors: kInvalidArgument (neither or both of address / address_file, a bad address, port
// 0, a path not starting with '/'), ReadAddressFile's errors, kUnavailable when no answer came
// (connection refused, timeout).
absl::StatusOr<HealthProbeResult> ProbeHealth(const HealthProbe& probe);

}  // namespace kruise
