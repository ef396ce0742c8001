#include "daemon/app/runtime_unit.h"

#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/systemd.h"

namespace kruise::daemon {

std::string RuntimeUnitFor(absl::string_view runtime_name, absl::string_view socket_path) {
  std::string name = absl::AsciiStrToLower(runtime_name);
  if (name == "containerd") return "containerd.service";
  if (name == "cri-o" || name == "crio") return "crio.service";
  if (name == "docker" || name == "cri-dockerd") return "cri-docker.service";
  // Fall back on the socket the runtime answered on.
  if (absl::StrContains(socket_path, "cri-dockerd")) return "cri-docker.service";
  if (absl::StrContains(socket_path, "crio")) return "crio.service";
  if (absl::StrContains(socket_path, "containerd")) return "containerd.service";
  return "";
}

RuntimeUnitMonitor::RuntimeUnitMonitor(Options options, prometheus::Registry* registry)
    : options_(std::move(options)) {
  if (!options_.reader) {
    options_.reader = [](const std::string& unit) { return UnitActiveState(unit); };
  }
  if (options_.clock == nullptr) options_.clock = Clock::Real();
  if (registry != nullptr) {
    family_ = &prometheus::BuildGauge()
                   .Name("kruise_daemon_runtime_unit_active")
                   .Help("1 when the runtime's systemd unit is active, 0 otherwise")
                   .Register(*registry);
  }
}

RuntimeUnitMonitor::~RuntimeUnitMonitor() = default;

void RuntimeUnitMonitor::SetUnit(std::string unit) {
  absl::MutexLock lock(&mu_);
  if (unit == unit_) return;
  SetGaugeLocked(std::nullopt);
  unit_ = std::move(unit);
  read_ = false;
  state_.clear();
  error_ = absl::OkStatus();
}

std::string RuntimeUnitMonitor::unit() const {
  absl::MutexLock lock(&mu_);
  return unit_;
}

std::string RuntimeUnitMonitor::state() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

absl::Status RuntimeUnitMonitor::last_error() const {
  absl::MutexLock lock(&mu_);
  return error_;
}

absl::Status RuntimeUnitMonitor::Refresh() {
  absl::MutexLock lock(&mu_);
  return RefreshLocked(false);
}

absl::Status RuntimeUnitMonitor::Check() { return Refresh(); }

absl::Status RuntimeUnitMonitor::RefreshLocked(bool force) {
  if (unit_.empty()) return absl::OkStatus();
  absl::Time now = options_.clock->Now();
  if (force || !read_ || now - read_at_ >= options_.min_interval) {
    absl::StatusOr<std::string> state = options_.reader(unit_);
    read_ = true;
    read_at_ = now;
    if (state.ok()) {
      state_ = *state;
      error_ = absl::OkStatus();
      SetGaugeLocked(state_ == "active" ? 1.0 : 0.0);
    } else {
      state_.clear();
      error_ = state.status();
      // No bus: nothing is known, so no sample. A unit systemd does not know is simply not active.
      SetGaugeLocked(absl::IsNotFound(error_) ? std::optional<double>(0.0) : std::nullopt);
    }
  }
  return VerdictLocked();
}

absl::Status RuntimeUnitMonitor::VerdictLocked() const {
  if (state_ == "failed") {
    return absl::UnavailableError(absl::StrCat("systemd unit ", unit_, " is failed"));
  }
  return absl::OkStatus();
}

void RuntimeUnitMonitor::SetGaugeLocked(std::optional<double> value) {
  if (family_ == nullptr) return;
  if (!value.has_value()) {
    if (gauge_ != nullptr) family_->Remove(gauge_);
    gauge_ = nullptr;
    return;
  }
  if (gauge_ == nullptr) gauge_ = &family_->Add({{"unit", unit_}});
  gauge_->Set(*value);
}

}  // namespace kruise::daemon
