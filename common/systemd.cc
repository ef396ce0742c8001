#include "common/systemd.h"

#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"

namespace kruise {
namespace {

struct BusDeleter {
  void operator()(sd_bus* b) const { sd_bus_flush_close_unref(b); }
};
struct MessageDeleter {
  void operator()(sd_bus_message* m) const { sd_bus_message_unref(m); }
};
using BusPtr = std::unique_ptr<sd_bus, BusDeleter>;
using MessagePtr = std::unique_ptr<sd_bus_message, MessageDeleter>;

// sd_bus_error owns heap strings once set; free them on every path.
class BusError {
 public:
  ~BusError() { sd_bus_error_free(&error_); }
  sd_bus_error* get() { return &error_; }
  std::string message(int r) const {
    if (error_.message != nullptr) return error_.message;
    return std::strerror(-r);
  }
  bool is(const char* name) const { return sd_bus_error_has_name(&error_, name); }

 private:
  sd_bus_error error_ = SD_BUS_ERROR_NULL;
};

}  // namespace

SystemdNotifier SystemdNotifier::FromEnvironment() {
  SystemdNotifier n;
  const char* sock = std::getenv("NOTIFY_SOCKET");
  n.enabled_ = sock != nullptr && sock[0] != '\0';
  uint64_t usec = 0;
  // sd_watchdog_enabled checks WATCHDOG_PID against our pid; 0 keeps the variables for children.
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    n.watchdog_interval_ = absl::Microseconds(static_cast<int64_t>(usec)) / 2;
  }
  return n;
}

absl::Status SystemdNotifier::Send(const std::string& state) const {
  if (!enabled_) return absl::OkStatus();
  int r = sd_notify(0, state.c_str());
  if (r < 0) {
    return absl::UnavailableError(
        absl::StrCat("sd_notify(", state, ") failed: ", std::strerror(-r)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> UnitActiveState(const std::string& unit) {
  sd_bus* raw = nullptr;
  int r = sd_bus_open_system(&raw);
  BusPtr bus(raw);
  if (r < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot connect to the system bus: ", std::strerror(-r)));
  }
  BusError error;
  sd_bus_message* reply_raw = nullptr;
  // LoadUnit (unlike GetUnit) answers for units that exist on disk but are not loaded.
  r = sd_bus_call_method(bus.get(), "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                         "org.freedesktop.systemd1.Manager", "LoadUnit", error.get(), &reply_raw,
                         "s", unit.c_str());
  MessagePtr reply(reply_raw);
  if (r < 0) {
    if (error.is("org.freedesktop.systemd1.NoSuchUnit")) {
      return absl::NotFoundError(absl::StrCat("systemd has no unit ", unit));
    }
    return absl::UnavailableError(
        absl::StrCat("systemd LoadUnit(", unit, ") failed: ", error.message(r)));
  }
  const char* path = nullptr;
  r = sd_bus_message_read(reply.get(), "o", &path);
  if (r < 0) {
    return absl::DataLossError(absl::StrCat("bad LoadUnit reply: ", std::strerror(-r)));
  }
  char* state = nullptr;
  BusError prop_error;
  r = sd_bus_get_property_string(bus.get(), "org.freedesktop.systemd1", path,
                                 "org.freedesktop.systemd1.Unit", "ActiveState", prop_error.get(),
                                 &state);
  if (r < 0) {
    return absl::UnavailableError(
        absl::StrCat("reading ActiveState of ", unit, " failed: ", prop_error.message(r)));
  }
  std::string out(state);
  std::free(state);
  if (out == "inactive") {
    // A unit that systemd only just loaded for us and that does not exist on disk.
    char* load = nullptr;
    BusError load_error;
    if (sd_bus_get_property_string(bus.get(), "org.freedesktop.systemd1", path,
                                   "org.freedesktop.systemd1.Unit", "LoadState", load_error.get(),
                                   &load) >= 0) {
      std::string load_state(load);
      std::free(load);
      if (load_state == "not-found") {
        return absl::NotFoundError(absl::StrCat("systemd has no unit ", unit));
      }
    }
  }
  return out;
}

}  // namespace kruise
