#pragma once

// RuntimeUnitMonitor: the systemd unit state of the node's container runtime (containerd.service,
// crio.service, cri-docker.service), read over sd-bus, for /healthz and /metrics.
//
//   RuntimeUnitMonitor unit(registry.get());                 // default reader: UnitActiveState
//   unit.SetUnit(RuntimeUnitFor(runtime.runtime_name, runtime.socket_path));  // or --runtime-unit
//   health.AddCheck("runtime-unit", [&] { return unit.Check(); });
//   ... unit.Refresh() now and then (the daemon's watchdog loop) keeps the gauge current.
//
// The check is informational: it is OK while the unit is active, activating, reloading, unknown to
// systemd or when there is no system bus (a daemon in a pod usually has none); it fails only when
// systemd knows the unit and reports it `failed`.
//
// Metric kruise_daemon_runtime_unit_active{unit="..."}: 1 when ActiveState is "active", 0 for any
// other state (also when systemd does not know the unit); absent while the bus cannot be reached
// or before a unit is set.
//
// Thread-safe. Check() and Refresh() block for one D-Bus round trip at most once per
// `min_interval` (answers in between come from the cache).

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace prometheus {
class Gauge;
template <typename T>
class Family;
class Registry;
}  // namespace prometheus

namespace kruise::daemon {

// Reads a unit's ActiveState. Errors as kruise::UnitActiveState: kUnavailable (no bus), kNotFound
// (no such unit).
using ActiveStateReader = std::function<absl::StatusOr<std::string>(const std::string& unit)>;

// The systemd unit that usually runs a runtime, from its CRI Version name ("containerd", "cri-o",
// "docker") or its socket path (".../crio.sock", ".../cri-dockerd.sock"). "" when unknown.
std::string RuntimeUnitFor(absl::string_view runtime_name, absl::string_view socket_path = "");

class RuntimeUnitMonitor {
 public:
  struct Options {
    ActiveStateReader reader;  // empty: kruise::UnitActiveState (system bus)
    Clock* clock = Clock::Real();
    absl::Duration min_interval = absl::Seconds(2);
  };

  // `registry` may be null (no metric).
  RuntimeUnitMonitor(Options options, prometheus::Registry* registry);
  explicit RuntimeUnitMonitor(prometheus::Registry* registry)
      : RuntimeUnitMonitor(Options(), registry) {}
  ~RuntimeUnitMonitor();

  // Sets (or clears, with "") the unit to watch; the next Check()/Refresh() reads it afresh.
  void SetUnit(std::string unit);
  std::string unit() const;

  // Reads the state (unless cached) and updates the gauge. Returns what Check() would.
  absl::Status Refresh();
  // The health check (see above). Refreshes when the cache is older than min_interval.
  absl::Status Check();

  // Last state read: the ActiveState, or "" when none could be read (see last_error()).
  std::string state() const;
  absl::Status last_error() const;

 private:
  absl::Status RefreshLocked(bool force) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status VerdictLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetGaugeLocked(std::optional<double> value) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Options options_;
  prometheus::Family<prometheus::Gauge>* family_ = nullptr;

  mutable absl::Mutex mu_;
  std::string unit_ ABSL_GUARDED_BY(mu_);
  bool read_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time read_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::string state_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  prometheus::Gauge* gauge_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace kruise::daemon
