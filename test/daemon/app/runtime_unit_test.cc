#include "daemon/app/runtime_unit.h"

#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <map>

#include "gtest/gtest.h"
#include "test/fakes/fake_clock.h"

namespace kruise::daemon {
namespace {

// A scripted ActiveState reader: answers from `answers`, counts calls.
struct FakeReader {
  std::map<std::string, absl::StatusOr<std::string>> answers;
  int calls = 0;
  ActiveStateReader fn() {
    return [this](const std::string& unit) -> absl::StatusOr<std::string> {
      ++calls;
      auto it = answers.find(unit);
      if (it == answers.end()) return absl::NotFoundError("systemd has no unit " + unit);
      return it->second;
    };
  }
};

std::string Metrics(prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

class RuntimeUnitTest : public ::testing::Test {
 protected:
  RuntimeUnitMonitor::Options Opts() {
    RuntimeUnitMonitor::Options o;
    o.reader = reader_.fn();
    o.clock = &clock_;
    o.min_interval = absl::Seconds(2);
    return o;
  }
  FakeReader reader_;
  testing::FakeClock clock_;
  prometheus::Registry registry_;
};

TEST(RuntimeUnitForTest, MapsRuntimesToUnits) {
  EXPECT_EQ(RuntimeUnitFor("containerd"), "containerd.service");
  EXPECT_EQ(RuntimeUnitFor("cri-o"), "crio.service");
  EXPECT_EQ(RuntimeUnitFor("CRI-O"), "crio.service");
  EXPECT_EQ(RuntimeUnitFor("docker", "/var/run/cri-dockerd.sock"), "cri-docker.service");
  EXPECT_EQ(RuntimeUnitFor("remote", "/hostvarrun/cri-dockerd.sock"), "cri-docker.service");
  EXPECT_EQ(RuntimeUnitFor("remote", "/hostvarrun/crio/crio.sock"), "crio.service");
  EXPECT_EQ(RuntimeUnitFor("fake-cri", "/tmp/x/cri.sock"), "");
}

TEST_F(RuntimeUnitTest, ActiveUnitIsHealthyAndGaugeIsOne) {
  reader_.answers["containerd.service"] = std::string("active");
  RuntimeUnitMonitor m(Opts(), &registry_);
  m.SetUnit("containerd.service");
  EXPECT_TRUE(m.Check().ok());
  EXPECT_EQ(m.state(), "active");
  EXPECT_NE(
      Metrics(registry_).find("kruise_daemon_runtime_unit_active{unit=\"containerd.service\"} 1"),
      std::string::npos)
      << Metrics(registry_);
}

TEST_F(RuntimeUnitTest, OnlyFailedFailsTheCheck) {
  RuntimeUnitMonitor m(Opts(), &registry_);
  m.SetUnit("containerd.service");
  for (const char* state : {"inactive", "activating", "deactivating", "reloading"}) {
    reader_.answers["containerd.service"] = std::string(state);
    clock_.Advance(absl::Seconds(3));
    EXPECT_TRUE(m.Check().ok()) << state;
    EXPECT_NE(Metrics(registry_).find("kruise_daemon_runtime_unit_active{unit=\"containerd."
                                      "service\"} 0"),
              std::string::npos)
        << state;
  }
  reader_.answers["containerd.service"] = std::string("failed");
  clock_.Advance(absl::Seconds(3));
  absl::Status s = m.Check();
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_NE(s.message().find("containerd.service is failed"), absl::string_view::npos) << s;
}

TEST_F(RuntimeUnitTest, NoBusIsHealthyAndHasNoSample) {
  reader_.answers["containerd.service"] = absl::UnavailableError("cannot connect to the bus");
  RuntimeUnitMonitor m(Opts(), &registry_);
  m.SetUnit("containerd.service");
  EXPECT_TRUE(m.Check().ok());
  EXPECT_TRUE(absl::IsUnavailable(m.last_error()));
  EXPECT_EQ(Metrics(registry_).find("kruise_daemon_runtime_unit_active{"), std::string::npos)
      << Metrics(registry_);

  // The bus comes back: the sample appears; it goes again: the sample is removed.
  reader_.answers["containerd.service"] = std::string("active");
  clock_.Advance(absl::Seconds(3));
  EXPECT_TRUE(m.Refresh().ok());
  EXPECT_NE(Metrics(registry_).find("kruise_daemon_runtime_unit_active{"), std::string::npos);
  reader_.answers["containerd.service"] = absl::UnavailableError("bus gone");
  clock_.Advance(absl::Seconds(3));
  EXPECT_TRUE(m.Refresh().ok());
  EXPECT_EQ(Metrics(registry_).find("kruise_daemon_runtime_unit_active{"), std::string::npos);
}

TEST_F(RuntimeUnitTest, UnknownUnitIsHealthyAndZero) {
  RuntimeUnitMonitor m(Opts(), &registry_);
  m.SetUnit("crio.service");
  EXPECT_TRUE(m.Check().ok());
  EXPECT_TRUE(absl::IsNotFound(m.last_error()));
  EXPECT_NE(Metrics(registry_).find("kruise_daemon_runtime_unit_active{unit=\"crio.service\"} 0"),
            std::string::npos)
      << Metrics(registry_);
}

TEST_F(RuntimeUnitTest, CachesWithinMinInterval) {
  reader_.answers["containerd.service"] = std::string("active");
  RuntimeUnitMonitor m(Opts(), &registry_);
  EXPECT_TRUE(m.Check().ok());  // no unit yet: nothing read
  EXPECT_EQ(reader_.calls, 0);
  m.SetUnit("containerd.service");
  EXPECT_TRUE(m.Check().ok());
  EXPECT_TRUE(m.Check().ok());
  EXPECT_EQ(reader_.calls, 1);
  clock_.Advance(absl::Seconds(2));
  EXPECT_TRUE(m.Check().ok());
  EXPECT_EQ(reader_.calls, 2);
}

TEST_F(RuntimeUnitTest, ChangingUnitDropsOldSample) {
  reader_.answers["containerd.service"] = std::string("active");
  reader_.answers["my-containerd.service"] = std::string("failed");
  RuntimeUnitMonitor m(Opts(), &registry_);
  m.SetUnit("containerd.service");
  EXPECT_TRUE(m.Check().ok());
  m.SetUnit("my-containerd.service");
  EXPECT_FALSE(m.Check().ok());
  std::string text = Metrics(registry_);
  EXPECT_EQ(text.find("unit=\"containerd.service\""), std::string::npos) << text;
  EXPECT_NE(text.find("kruise_daemon_runtime_unit_active{unit=\"my-containerd.service\"} 0"),
            std::string::npos)
      << text;
}

TEST_F(RuntimeUnitTest, WorksWithoutRegistry) {
  reader_.answers["containerd.service"] = std::string("failed");
  RuntimeUnitMonitor m(Opts(), nullptr);
  m.SetUnit("containerd.service");
  EXPECT_FALSE(m.Check().ok());
}

}  // namespace
}  // namespace kruise::daemon
