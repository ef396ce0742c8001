#include "kube/event_recorder.h"

#include "gtest/gtest.h"
#include "test/fakes/fake_clock.h"
#include "test/fakes/memory_kube_client.h"

namespace kruise::kube {
namespace {

using kruise::testing::FakeClock;
using kruise::testing::MemoryKubeClient;

Json Pod(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "ns"}, {"uid", "uid-" + name}}}};
}

class EventRecorderTest : public ::testing::Test {
 protected:
  EventRecorderOptions Opts() {
    EventRecorderOptions o;
    o.component = "kruise-daemon";
    o.host = "node-1";
    o.clock = &clock_;
    return o;
  }
  std::vector<Json> Events() { return client_.Objects(EventResource()); }

  FakeClock clock_;
  MemoryKubeClient client_{&clock_};
};

TEST_F(EventRecorderTest, WritesACoreV1Event) {
  EventRecorder rec(&client_, Opts());
  rec.Event(Pod("p"), EventType::kWarning, "PullImageFailed", "image not found");
  ASSERT_TRUE(rec.WaitIdle(absl::Seconds(10)));
  auto evs = Events();
  ASSERT_EQ(evs.size(), 1u);
  const Json& e = evs[0];
  EXPECT_EQ(e["metadata"]["namespace"], "ns");
  EXPECT_EQ(e["involvedObject"]["kind"], "Pod");
  EXPECT_EQ(e["involvedObject"]["name"], "p");
  EXPECT_EQ(e["involvedObject"]["uid"], "uid-p");
  EXPECT_EQ(e["reason"], "PullImageFailed");
  EXPECT_EQ(e["message"], "image not found");
  EXPECT_EQ(e["type"], "Warning");
  EXPECT_EQ(e["source"]["component"], "kruise-daemon");
  EXPECT_EQ(e["source"]["host"], "node-1");
  EXPECT_EQ(e["count"], 1);
  EXPECT_EQ(e["firstTimestamp"], e["lastTimestamp"]);
}

TEST_F(EventRecorderTest, AggregatesRepeatsWithinTheWindow) {
  EventRecorder rec(&client_, Opts());
  rec.Event(Pod("p"), EventType::kNormal, "Pulled", "ok");
  ASSERT_TRUE(rec.WaitIdle(absl::Seconds(10)));
  clock_.Advance(absl::Minutes(1));
  rec.Event(Pod("p"), EventType::kNormal, "Pulled", "ok");
  rec.Event(Pod("p"), EventType::kNormal, "Pulled", "ok");
  rec.Event(Pod("p"), EventType::kNormal, "Pulled", "different message");
  ASSERT_TRUE(rec.WaitIdle(absl::Seconds(10)));
  auto evs = Events();
  ASSERT_EQ(evs.size(), 2u);
  int total = 0;
  for (const Json& e : evs) {
    total += e["count"].get<int>();
    if (e["message"] == "ok") {
      EXPECT_EQ(e["count"], 3);
      EXPECT_NE(e["firstTimestamp"], e["lastTimestamp"]);
    }
  }
  EXPECT_EQ(total, 4);
  EXPECT_EQ(rec.stats().created, 2u);
  EXPECT_EQ(rec.stats().patched, 2u);

  // Outside the 10 min window a new Event is created.
  clock_.Advance(absl::Minutes(11));
  rec.Event(Pod("p"), EventType::kNormal, "Pulled", "ok");
  ASSERT_TRUE(rec.WaitIdle(absl::Seconds(10)));
  EXPECT_EQ(Events().size(), 3u);
}

TEST_F(EventRecorderTest, RecreatesAggregatedEventThatWasDeleted) {
  EventRecorder rec(&client_, Opts());
  rec.Event(Pod("p"), EventType::kNormal, "Pulled", "ok");
  ASSERT_TRUE(rec.WaitIdle(absl::Seconds(10)));
  const Json first = Events().at(0);
  ASSERT_TRUE(client_.Delete(EventResource(), "ns", first["metadata"]["name"]).ok());
  rec.Event(Pod("p"), EventType::kNormal, "Pulled", "ok");
  ASSERT_TRUE(rec.WaitIdle(absl::Seconds(10)));
  EXPECT_EQ(Events().size(), 1u);
  EXPECT_EQ(rec.stats().created, 2u);
}

TEST_F(EventRecorderTest, PerObjectTokenBucketStopsFloods) {
  EventRecorder rec(&client_, Opts());
  for (int i = 0; i < 40; ++i) {
    rec.Event(Pod("hot"), EventType::kWarning, "Failed", "attempt " + std::to_string(i));
  }
  rec.Event(Pod("other"), EventType::kNormal, "Fine", "unaffected");
  ASSERT_TRUE(rec.WaitIdle(absl::Seconds(10)));
  EXPECT_EQ(rec.stats().rate_limited, 15u);
  EXPECT_EQ(Events().size(), 26u);
  // One token comes back every 5 minutes.
  clock_.Advance(absl::Minutes(5));
  rec.Event(Pod("hot"), EventType::kWarning, "Failed", "later");
  rec.Event(Pod("hot"), EventType::kWarning, "Failed", "later 2");
  ASSERT_TRUE(rec.WaitIdle(absl::Seconds(10)));
  EXPECT_EQ(rec.stats().rate_limited, 16u);
  EXPECT_EQ(Events().size(), 27u);
}

// A client whose Create blocks until released: lets the test fill the recorder's queue.
class BlockingClient : public MemoryKubeClient {
 public:
  using MemoryKubeClient::MemoryKubeClient;
  absl::StatusOr<Json> Create(const Resource& r, const std::string& ns, const Json& obj) override {
    {
      absl::MutexLock lock(&mu_);
      ++entered_;
      mu_.Await(absl::Condition(&released_));
    }
    return MemoryKubeClient::Create(r, ns, obj);
  }
  void WaitEntered() {
    absl::MutexLock lock(&mu_);
    auto cond = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return entered_ > 0; };
    mu_.AwaitWithTimeout(absl::Condition(&cond), absl::Seconds(10));
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }

 private:
  absl::Mutex mu_;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
};

TEST(EventRecorderQueueTest, NeverBlocksAndDropsWhenFull) {
  FakeClock clock;
  BlockingClient client(&clock);
  EventRecorderOptions o;
  o.clock = &clock;
  o.queue_capacity = 3;
  {
    EventRecorder rec(&client, o);
    rec.Event(Pod("p0"), EventType::kNormal, "R", "m");
    client.WaitEntered();  // the worker is stuck in Create
    const absl::Time start = absl::Now();
    for (int i = 1; i <= 10; ++i)
      rec.Event(Pod("p" + std::to_string(i)), EventType::kNormal, "R", "m");
    EXPECT_LT(absl::Now() - start, absl::Seconds(5));  // returned without waiting for the API
    EXPECT_EQ(rec.stats().dropped, 7u);
    client.Release();
    ASSERT_TRUE(rec.WaitIdle(absl::Seconds(10)));
    EXPECT_EQ(rec.stats().created, 4u);
  }
  EXPECT_EQ(client.Objects(EventResource()).size(), 4u);
}

}  // namespace
}  // namespace kruise::kube
