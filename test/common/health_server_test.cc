#include "common/health_server.h"

#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include "gtest/gtest.h"
#include "httplib.h"

namespace kruise {
namespace {

TEST(ParseListenAddress, Forms) {
  EXPECT_EQ(ParseListenAddress(":10221")->host, "0.0.0.0");
  EXPECT_EQ(ParseListenAddress(":10221")->port, 10221);
  EXPECT_EQ(ParseListenAddress("127.0.0.1:0")->host, "127.0.0.1");
  EXPECT_EQ(ParseListenAddress("[::1]:8000")->host, "::1");
  EXPECT_EQ(ParseListenAddress("[::1]:8000")->port, 8000);
  for (const char* bad : {"", "8080", "host:", "host:99999", "host:x", "[::1]8000", "[::1"}) {
    EXPECT_EQ(ParseListenAddress(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(HealthServer, ServesChecksAndMetrics) {
  HealthServer server({.address = "127.0.0.1:0"});
  std::atomic<bool> runtime_up{false};
  server.AddCheck("runtime", [&] {
    return runtime_up ? absl::OkStatus()
                      : absl::UnavailableError("no CRI socket: tried /run/containerd.sock");
  });
  server.AddCheck(
      "synced", [] { return absl::OkStatus(); }, CheckKind::kReadiness);
  auto registry = std::make_shared<prometheus::Registry>();
  prometheus::BuildCounter()
      .Name("kruise_test_total")
      .Help("t")
      .Register(*registry)
      .Add({})
      .Increment(3);
  server.SetMetrics(registry);
  ASSERT_TRUE(server.Start().ok());
  ASSERT_GT(server.port(), 0);

  httplib::Client client("127.0.0.1", server.port());
  auto res = client.Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_NE(res->body.find("[-]runtime failed: no CRI socket: tried /run/containerd.sock"),
            std::string::npos);
  EXPECT_EQ(res->body.find("synced"), std::string::npos);  // readiness-only
  // What the DaemonSet's liveness probe asks: everything but the runtime.
  res = client.Get("/healthz?exclude=runtime");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_NE(res->body.find("[+]runtime excluded: ok"), std::string::npos) << res->body;
  res = client.Get("/readyz?exclude=runtime");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;

  runtime_up = true;
  res = client.Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  res = client.Get("/readyz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->body.find("[+]synced ok"), std::string::npos);
  res = client.Get("/readyz/synced");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  res = client.Get("/healthz/nope");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);

  res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->body.find("kruise_test_total 3"), std::string::npos) << res->body;
  server.Stop();
}

TEST(HealthServer, BusyPortIsAnError) {
  HealthServer first({.address = "127.0.0.1:0"});
  ASSERT_TRUE(first.Start().ok());
  HealthServer second({.address = "127.0.0.1:" + std::to_string(first.port())});
  EXPECT_EQ(second.Start().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace kruise
