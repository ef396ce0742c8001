#include "daemon/crr/crr_prestop.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"

namespace kruise::daemon {
namespace {

// An HTTP server on an ephemeral 127.0.0.1 port, running until destroyed.
class TestHttpServer {
 public:
  TestHttpServer() {
    server_.Get("/hook", [this](const httplib::Request& req, httplib::Response& res) {
      absl::MutexLock lock(&mu_);
      last_header_ = req.get_header_value("X-Test");
      hits_++;
      res.set_content("ok", "text/plain");
    });
    server_.Get("/broken",
                [](const httplib::Request&, httplib::Response& res) { res.status = 500; });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // listen_after_bind() starts its loop asynchronously; stop() is a no-op until it runs.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!server_.is_running() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
  }
  ~TestHttpServer() {
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  int hits() const { return hits_; }
  std::string last_header() const {
    absl::MutexLock lock(&mu_);
    return last_header_;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<int> hits_{0};
  mutable absl::Mutex mu_;
  std::string last_header_ ABSL_GUARDED_BY(mu_);
};

TEST(CrrPreStopTest, HttpGetReachesServerWithHeaders) {
  TestHttpServer server;
  ASSERT_GT(server.port(), 0);
  HttpGetAction action;
  action.host = "127.0.0.1";
  action.port = server.port();
  action.path = "hook";  // a missing leading slash is added
  action.headers = {{"X-Test", "value-1"}};
  absl::StatusOr<int> code = RunHttpGet(action, absl::Seconds(5));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 200);
  EXPECT_EQ(server.hits(), 1);
  EXPECT_EQ(server.last_header(), "value-1");

  action.path = "/broken";
  code = RunHttpGet(action, absl::Seconds(5));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 500);
}

TEST(CrrPreStopTest, HttpGetRejectsBadInput) {
  HttpGetAction action;
  action.host = "127.0.0.1";
  action.port = 0;
  EXPECT_EQ(RunHttpGet(action, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  action.port = 80;
  action.scheme = "FTP";
  EXPECT_EQ(RunHttpGet(action, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A port that was bound and then released: nothing listens there.
int ClosedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

TEST(CrrPreStopTest, HttpGetConnectionRefusedIsUnavailable) {
  HttpGetAction action;
  action.host = "127.0.0.1";
  action.port = ClosedPort();
  EXPECT_EQ(RunHttpGet(action, absl::Seconds(5)).status().code(), absl::StatusCode::kUnavailable);
}

TEST(CrrPreStopTest, DialTcpConnectsAndReportsRefusal) {
  TestHttpServer server;
  EXPECT_TRUE(DialTcp("127.0.0.1", server.port(), absl::Seconds(5)).ok());
  absl::Status refused = DialTcp("127.0.0.1", ClosedPort(), absl::Seconds(5));
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
  EXPECT_EQ(DialTcp("127.0.0.1", 70000, absl::Seconds(1)).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kruise::daemon
