#pragma once

// systemd integration for processes run as units (Type=notify, WatchdogSec=):
//  - SystemdNotifier sends READY=1 / STOPPING=1 / STATUS= / WATCHDOG=1 over $NOTIFY_SOCKET;
//  - UnitActiveState asks systemd over sd-bus for a unit's ActiveState ("active", "failed", ...).
// Outside systemd (no NOTIFY_SOCKET) the notifier is disabled and every call is a no-op.
//
// Thread-safety: SystemdNotifier methods may be called from any thread.

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kruise {

class SystemdNotifier {
 public:
  // Reads NOTIFY_SOCKET and WATCHDOG_USEC/WATCHDOG_PID from the environment.
  static SystemdNotifier FromEnvironment();

  bool enabled() const { return enabled_; }
  // Half of WatchdogSec when the unit has a watchdog for this process, else nullopt.
  std::optional<absl::Duration> watchdog_ping_interval() const { return watchdog_interval_; }

  absl::Status Ready() const { return Send("READY=1"); }
  absl::Status Stopping() const { return Send("STOPPING=1"); }
  absl::Status Watchdog() const { return Send("WATCHDOG=1"); }
  absl::Status Status(const std::string& text) const { return Send("STATUS=" + text); }

 private:
  absl::Status Send(const std::string& state) const;

  bool enabled_ = false;
  std::optional<absl::Duration> watchdog_interval_;
};

// ActiveState of `unit` (e.g. "containerd.service") from the system bus. Errors: kUnavailable when
// the bus cannot be reached, kNotFound when systemd does not know the unit.
absl::StatusOr<std::string> UnitActiveState(const std::string& unit);

}  // namespace kruise
