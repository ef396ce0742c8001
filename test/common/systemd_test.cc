#include "common/systemd.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace kruise {
namespace {

// A real notify socket: the unix datagram socket systemd would listen on.
class NotifySocket {
 public:
  NotifySocket() {
    char tmpl[] = "/tmp/kruise-notify-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/notify.sock";
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    bound_ = bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    timeval tv{5, 0};  // a bounded read: a missing message fails the test instead of hanging
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~NotifySocket() {
    close(fd_);
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  bool bound() const { return bound_; }
  const std::string& path() const { return path_; }
  std::string Read() {
    char buf[512];
    ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    return n > 0 ? std::string(buf, n) : "";
  }

 private:
  std::string dir_, path_;
  int fd_ = -1;
  bool bound_ = false;
};

TEST(SystemdNotifier, DisabledWithoutNotifySocket) {
  unsetenv("NOTIFY_SOCKET");
  unsetenv("WATCHDOG_USEC");
  auto n = SystemdNotifier::FromEnvironment();
  EXPECT_FALSE(n.enabled());
  EXPECT_FALSE(n.watchdog_ping_interval().has_value());
  EXPECT_TRUE(n.Ready().ok());
}

TEST(SystemdNotifier, SendsReadyAndWatchdog) {
  NotifySocket sock;
  ASSERT_TRUE(sock.bound());
  setenv("NOTIFY_SOCKET", sock.path().c_str(), 1);
  setenv("WATCHDOG_USEC", "4000000", 1);
  setenv("WATCHDOG_PID", std::to_string(getpid()).c_str(), 1);
  auto n = SystemdNotifier::FromEnvironment();
  ASSERT_TRUE(n.enabled());
  ASSERT_TRUE(n.watchdog_ping_interval().has_value());
  EXPECT_EQ(*n.watchdog_ping_interval(), absl::Seconds(2));
  ASSERT_TRUE(n.Ready().ok());
  EXPECT_EQ(sock.Read(), "READY=1");
  ASSERT_TRUE(n.Watchdog().ok());
  EXPECT_EQ(sock.Read(), "WATCHDOG=1");
  ASSERT_TRUE(n.Status("pulling 2 images").ok());
  EXPECT_EQ(sock.Read(), "STATUS=pulling 2 images");
  unsetenv("NOTIFY_SOCKET");
  unsetenv("WATCHDOG_USEC");
  unsetenv("WATCHDOG_PID");
}

TEST(UnitActiveState, AnswersOrFailsCleanly) {
  // Without a system bus (containers, CI sandboxes) this must be an error, never a crash; with one,
  // an unknown unit is NotFound.
  auto s = UnitActiveState("kruise-no-such-unit-for-tests.service");
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.status().code() == absl::StatusCode::kUnavailable ||
              s.status().code() == absl::StatusCode::kNotFound)
      << s.status();
}

}  // namespace
}  // namespace kruise
