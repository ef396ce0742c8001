// RestKubeClient against the fake API server (test/fakes/apiserver): real REST semantics over HTTP.

#include <atomic>
#include <memory>
#include <set>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/call_deadline.h"
#include "kube/errors.h"
#include "kube/leader_election.h"
#include "kube/object.h"
#include "kube/resources.h"
#include "kube/rest_client.h"
#include "kube/write_fence.h"
#include "test/fakes/apiserver/fake_apiserver.h"
#include "test/fakes/fake_clock.h"
#include "test/kube/client_test_util.h"

namespace kruise::kube {
namespace {

using ::testing::ElementsAre;
using testing::FakeApiServer;
using testing::FakeFailure;
using ::testing::UnorderedElementsAre;
using testutil::WaitFor;

// A namespaced custom resource with a status subresource, registered by the test itself.
Resource Widgets() { return {"test.kruise.io", "v1", "widgets", "Widget", true}; }

Json Pod(const std::string& name, const std::string& ns = "default") {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"labels", {{"app", "web"}}}}},
          {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
}

class ClientApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    server_.RegisterResource({"test.kruise.io", "v1", "widgets", "Widget", true, true});
    client_ = NewClient(Clock::Real());
  }

  std::unique_ptr<RestKubeClient> NewClient(Clock* clock, RestConfig cfg = {}) {
    cfg.host = server_.base_url();
    cfg.qps = 0;
    RestClientOptions opts;
    opts.initial_backoff = absl::Milliseconds(1);
    opts.max_backoff = absl::Milliseconds(5);
    opts.max_attempts = 4;
    auto c = RestKubeClient::Create(cfg, clock, opts);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }

  FakeApiServer server_;
  std::unique_ptr<RestKubeClient> client_;
};

TEST_F(ClientApiServerTest, CreateGetUpdateDelete) {
  absl::StatusOr<Json> created = client_->Create(resources::Pods(), "default", Pod("p1"));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_FALSE(Uid(*created).empty());
  EXPECT_FALSE(ResourceVersion(*created).empty());

  absl::StatusOr<Json> got = client_->Get(resources::Pods(), "default", "p1");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(Uid(*got), Uid(*created));

  Json changed = *got;
  changed["metadata"]["labels"]["tier"] = "front";
  absl::StatusOr<Json> updated = client_->Update(resources::Pods(), "", changed);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(Label(*updated, "tier"), "front");
  EXPECT_NE(ResourceVersion(*updated), ResourceVersion(*got));

  EXPECT_TRUE(
      kube::IsAlreadyExists(client_->Create(resources::Pods(), "default", Pod("p1")).status()));

  ASSERT_TRUE(client_->Delete(resources::Pods(), "default", "p1").ok());
  absl::Status gone = client_->Get(resources::Pods(), "default", "p1").status();
  EXPECT_TRUE(kube::IsNotFound(gone)) << gone;
  EXPECT_EQ(Reason(gone), "NotFound");
  EXPECT_TRUE(kube::IsNotFound(client_->Delete(resources::Pods(), "default", "p1")));
}

TEST_F(ClientApiServerTest, ClusterScopedKruiseResource) {
  Json ni = {{"apiVersion", "apps.kruise.io/v1alpha1"},
             {"kind", "NodeImage"},
             {"metadata", {{"name", "node-a"}}},
             {"spec", {{"images", Json::object()}}}};
  ASSERT_TRUE(client_->Create(resources::NodeImages(), "", ni).ok());
  absl::StatusOr<ListResult> list = client_->List(resources::NodeImages(), "", {});
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->items.size(), 1u);
  EXPECT_EQ(Name(list->items[0]), "node-a");
  EXPECT_EQ(list->items[0]["kind"], "NodeImage");
}

TEST_F(ClientApiServerTest, StaleUpdateConflicts) {
  absl::StatusOr<Json> created = client_->Create(resources::Pods(), "default", Pod("p"));
  ASSERT_TRUE(created.ok());
  Json first = *created;
  first["metadata"]["labels"]["x"] = "1";
  ASSERT_TRUE(client_->Update(resources::Pods(), "default", first).ok());
  Json stale = *created;
  stale["metadata"]["labels"]["x"] = "2";
  absl::Status st = client_->Update(resources::Pods(), "default", stale).status();
  EXPECT_TRUE(IsConflict(st)) << st;
  EXPECT_EQ(Reason(st), "Conflict");
}

TEST_F(ClientApiServerTest, StatusSubresource) {
  Json w = {{"apiVersion", "test.kruise.io/v1"},
            {"kind", "Widget"},
            {"metadata", {{"name", "w"}, {"namespace", "ns1"}}},
            {"spec", {{"size", 1}}}};
  absl::StatusOr<Json> created = client_->Create(Widgets(), "ns1", w);
  ASSERT_TRUE(created.ok()) << created.status();
  Json with_status = *created;
  with_status["status"] = {{"phase", "Ready"}};
  absl::StatusOr<Json> st = client_->Update(Widgets(), "ns1", with_status, "status");
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ((*st)["status"]["phase"], "Ready");
  // A main-resource update does not touch status.
  Json main = *st;
  main["status"] = {{"phase", "Hacked"}};
  main["spec"]["size"] = 2;
  absl::StatusOr<Json> after = client_->Update(Widgets(), "ns1", main);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ((*after)["status"]["phase"], "Ready");
  EXPECT_EQ((*after)["spec"]["size"], 2);
  EXPECT_EQ(Generation(*after), 2);
  absl::StatusOr<Json> patched = client_->Patch(Widgets(), "ns1", "w", PatchType::kMerge,
                                                {{"status", {{"phase", "Done"}}}}, "status");
  ASSERT_TRUE(patched.ok()) << patched.status();
  EXPECT_EQ((*patched)["status"]["phase"], "Done");
}

TEST_F(ClientApiServerTest, PatchTypes) {
  ASSERT_TRUE(client_->Create(resources::Pods(), "default", Pod("p")).ok());
  absl::StatusOr<Json> merged = client_->Patch(resources::Pods(), "default", "p", PatchType::kMerge,
                                               {{"metadata", {{"labels", {{"m", "1"}}}}}});
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(Label(*merged, "m"), "1");
  EXPECT_EQ(Label(*merged, "app"), "web");

  absl::StatusOr<Json> jp = client_->Patch(
      resources::Pods(), "default", "p", PatchType::kJson,
      Json::parse(R"([{"op":"add","path":"/metadata/annotations","value":{"a":"b"}}])"));
  ASSERT_TRUE(jp.ok()) << jp.status();
  EXPECT_EQ(Annotation(*jp, "a"), "b");

  absl::Status failed_test =
      client_
          ->Patch(resources::Pods(), "default", "p", PatchType::kJson,
                  Json::parse(R"([{"op":"test","path":"/metadata/labels/app","value":"db"}])"))
          .status();
  EXPECT_EQ(failed_test.code(), absl::StatusCode::kInvalidArgument) << failed_test;

  absl::StatusOr<Json> smp =
      client_->Patch(resources::Pods(), "default", "p", PatchType::kStrategicMerge,
                     {{"metadata", {{"labels", {{"s", "2"}}}}}});
  ASSERT_TRUE(smp.ok()) << smp.status();
  EXPECT_EQ(Label(*smp, "s"), "2");

  // A patch carrying a stale resourceVersion is an optimistic-concurrency check.
  absl::Status stale = client_
                           ->Patch(resources::Pods(), "default", "p", PatchType::kMerge,
                                   {{"metadata", {{"resourceVersion", ResourceVersion(*merged)}}}})
                           .status();
  EXPECT_TRUE(IsConflict(stale)) << stale;
}

TEST_F(ClientApiServerTest, PatchIfUnchangedTellsAStaleTestFromABadPatch) {
  auto created = client_->Create(resources::Pods(), "default", Pod("p"));
  ASSERT_TRUE(created.ok()) << created.status();
  auto test_rv = [](const Json& obj) {
    return Json{
        {"op", "test"}, {"path", "/metadata/resourceVersion"}, {"value", ResourceVersion(obj)}};
  };
  const Json label = {{"op", "add"}, {"path", "/metadata/labels/x"}, {"value", "1"}};
  auto patched = PatchIfUnchanged(client_.get(), resources::Pods(), *created,
                                  Json::array({test_rv(*created), label}));
  ASSERT_TRUE(patched.ok()) << patched.status();
  EXPECT_EQ(Labels(*patched)["x"], "1");
  // The cached copy is now stale: a conflict, not a bad request.
  auto stale = PatchIfUnchanged(client_.get(), resources::Pods(), *created,
                                Json::array({test_rv(*created), label}));
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kAborted) << stale.status();
  // A patch that is wrong on an up-to-date object stays INVALID_ARGUMENT.
  const Json bad = {{"op", "remove"}, {"path", "/metadata/labels/missing"}};
  auto invalid = PatchIfUnchanged(client_.get(), resources::Pods(), *patched,
                                  Json::array({test_rv(*patched), bad}));
  EXPECT_EQ(invalid.status().code(), absl::StatusCode::kInvalidArgument) << invalid.status();
}

TEST_F(ClientApiServerTest, DeletePreconditions) {
  absl::StatusOr<Json> created = client_->Create(resources::Pods(), "default", Pod("p"));
  ASSERT_TRUE(created.ok());
  DeleteOptions wrong_uid;
  wrong_uid.precondition_uid = "not-the-uid";
  EXPECT_TRUE(IsConflict(client_->Delete(resources::Pods(), "default", "p", wrong_uid)));
  DeleteOptions wrong_rv;
  wrong_rv.precondition_resource_version = "1";
  EXPECT_TRUE(IsConflict(client_->Delete(resources::Pods(), "default", "p", wrong_rv)));
  DeleteOptions right;
  right.precondition_uid = Uid(*created);
  right.precondition_resource_version = ResourceVersion(*created);
  EXPECT_TRUE(client_->Delete(resources::Pods(), "default", "p", right).ok());
  EXPECT_TRUE(kube::IsNotFound(client_->Get(resources::Pods(), "default", "p").status()));
}

TEST_F(ClientApiServerTest, ListPaginationAndSelectors) {
  for (int i = 0; i < 5; ++i) {
    Json p = Pod("p" + std::to_string(i));
    if (i % 2 == 1) p["metadata"]["labels"]["app"] = "db";
    ASSERT_TRUE(client_->Create(resources::Pods(), "default", p).ok());
  }
  ASSERT_TRUE(client_->Create(resources::Pods(), "other", Pod("q", "other")).ok());

  std::vector<std::string> names;
  ListOptions o;
  o.limit = 2;
  int pages = 0;
  for (;;) {
    absl::StatusOr<ListResult> page = client_->List(resources::Pods(), "default", o);
    ASSERT_TRUE(page.ok()) << page.status();
    ++pages;
    EXPECT_LE(page->items.size(), 2u);
    for (const Json& item : page->items) names.push_back(Name(item));
    if (pages == 1) {
      EXPECT_EQ(page->remaining_item_count, 3);
    }
    if (page->continue_token.empty()) break;
    o.continue_token = page->continue_token;
    ASSERT_LT(pages, 10);
  }
  EXPECT_EQ(pages, 3);
  EXPECT_THAT(names, ElementsAre("p0", "p1", "p2", "p3", "p4"));

  ListOptions sel;
  sel.label_selector = "app in (db)";
  absl::StatusOr<ListResult> dbs = client_->List(resources::Pods(), "", sel);
  ASSERT_TRUE(dbs.ok());
  std::set<std::string> db_names;
  for (const Json& item : dbs->items) db_names.insert(Name(item));
  EXPECT_THAT(db_names, UnorderedElementsAre("p1", "p3"));
  absl::StatusOr<ListResult> all = client_->List(resources::Pods(), "", {});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->items.size(), 6u);
}

// Runs a watch on a thread and records its events.
class WatchRunner {
 public:
  WatchRunner(KubeClient* client, Resource r, ListOptions opts) {
    thread_ = std::thread([this, client, r, opts] {
      absl::Status st = client->Watch(
          r, "", opts,
          [this](WatchEvent&& ev) {
            absl::MutexLock lock(&mu_);
            events_.emplace_back(ev.type, Name(ev.object));
            return true;
          },
          &canceller_);
      absl::MutexLock lock(&mu_);
      status_ = st;
      done_ = true;
    });
  }
  ~WatchRunner() {
    canceller_.Cancel();
    thread_.join();
  }
  std::vector<std::pair<WatchEvent::Type, std::string>> events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  absl::Status Finish(absl::Duration limit = absl::Seconds(10)) {
    absl::MutexLock lock(&mu_);
    if (!mu_.AwaitWithTimeout(absl::Condition(&done_), limit)) {
      return absl::DeadlineExceededError("watch did not finish");
    }
    return status_;
  }
  void Cancel() { canceller_.Cancel(); }

 private:
  absl::Mutex mu_;
  std::vector<std::pair<WatchEvent::Type, std::string>> events_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  WatchCanceller canceller_;
  std::thread thread_;
};

TEST_F(ClientApiServerTest, WatchWithBookmarksAndCancellation) {
  absl::StatusOr<ListResult> list = client_->List(resources::Pods(), "", {});
  ASSERT_TRUE(list.ok());
  ListOptions o;
  o.resource_version = list->resource_version;
  o.allow_watch_bookmarks = true;
  WatchRunner w(client_.get(), resources::Pods(), o);
  ASSERT_TRUE(WaitFor([&] { return server_.OpenWatches() == 1; }));
  ASSERT_TRUE(client_->Create(resources::Pods(), "default", Pod("a")).ok());
  ASSERT_TRUE(client_
                  ->Patch(resources::Pods(), "default", "a", PatchType::kMerge,
                          {{"metadata", {{"labels", {{"x", "y"}}}}}})
                  .ok());
  ASSERT_TRUE(WaitFor([&] { return w.events().size() >= 2; }));
  server_.EmitBookmarkNow();
  ASSERT_TRUE(WaitFor([&] { return w.events().size() >= 3; }));
  ASSERT_TRUE(client_->Delete(resources::Pods(), "default", "a").ok());
  ASSERT_TRUE(WaitFor([&] { return w.events().size() >= 4; }));
  w.Cancel();
  EXPECT_TRUE(w.Finish().ok());
  using T = WatchEvent::Type;
  auto ev = w.events();
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[0], std::make_pair(T::kAdded, std::string("a")));
  EXPECT_EQ(ev[1], std::make_pair(T::kModified, std::string("a")));
  EXPECT_EQ(ev[2].first, T::kBookmark);
  EXPECT_EQ(ev[3], std::make_pair(T::kDeleted, std::string("a")));
}

TEST_F(ClientApiServerTest, WatchFromCompactedVersionIsGone) {
  absl::StatusOr<Json> p = client_->Create(resources::Pods(), "default", Pod("a"));
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(client_->Create(resources::Pods(), "default", Pod("b")).ok());
  server_.CompactNow();
  ListOptions o;
  o.resource_version = ResourceVersion(*p);
  absl::Status st = client_->Watch(
      resources::Pods(), "", o, [](WatchEvent&&) { return true; }, nullptr);
  EXPECT_TRUE(IsGone(st)) << st;
  // A continue token from before the compaction is gone as well.
  ListOptions page;
  page.limit = 1;
  absl::StatusOr<ListResult> first = client_->List(resources::Pods(), "", page);
  ASSERT_TRUE(first.ok());
  ASSERT_FALSE(first->continue_token.empty());
  ASSERT_TRUE(client_->Create(resources::Pods(), "default", Pod("c")).ok());
  server_.CompactNow();
  page.continue_token = first->continue_token;
  EXPECT_TRUE(IsGone(client_->List(resources::Pods(), "", page).status()));
}

TEST_F(ClientApiServerTest, TruncatedWatchStream) {
  WatchRunner w(client_.get(), resources::Pods(), {});
  ASSERT_TRUE(WaitFor([&] { return server_.OpenWatches() == 1; }));
  EXPECT_EQ(server_.DropWatches(/*truncate_mid_event=*/true), 1);
  absl::Status st = w.Finish();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
}

TEST_F(ClientApiServerTest, TooManyRequestsHonoursRetryAfter) {
  ASSERT_TRUE(client_->Create(resources::Pods(), "default", Pod("p")).ok());
  testing::FakeClock clock;
  auto client = NewClient(&clock);
  FakeFailure f;
  f.method = "PATCH";
  f.http_code = 429;
  f.retry_after_seconds = 3;
  server_.FailNext(f);
  absl::StatusOr<Json> patched;
  std::thread t([&] {
    patched = client->Patch(resources::Pods(), "default", "p", PatchType::kMerge,
                            {{"metadata", {{"labels", {{"r", "1"}}}}}});
  });
  ASSERT_TRUE(WaitFor([&] { return clock.waiters() == 1; }));
  EXPECT_EQ(server_.RequestCount("PATCH"), 1);
  clock.Advance(absl::Milliseconds(2900));
  EXPECT_EQ(server_.RequestCount("PATCH"), 1);
  clock.Advance(absl::Milliseconds(100));
  t.join();
  ASSERT_TRUE(patched.ok()) << patched.status();
  EXPECT_EQ(server_.RequestCount("PATCH"), 2);
}

TEST_F(ClientApiServerTest, ServerErrorsRetriedOnGetOnly) {
  ASSERT_TRUE(client_->Create(resources::Pods(), "default", Pod("p")).ok());
  FakeFailure unavailable;
  unavailable.method = "GET";
  unavailable.path_substring = "/pods/p";
  unavailable.http_code = 503;
  unavailable.count = 2;
  server_.FailNext(unavailable);
  EXPECT_TRUE(client_->Get(resources::Pods(), "default", "p").ok());
  EXPECT_EQ(server_.RequestCount("GET", "/pods/p"), 3);
  FakeFailure internal;
  internal.method = "POST";
  internal.http_code = 500;
  server_.FailNext(internal);
  absl::Status st = client_->Create(resources::Pods(), "default", Pod("q")).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(server_.RequestCount("POST"), 2);  // one create before, one failed now
}

TEST_F(ClientApiServerTest, MalformedBodyIsDataLoss) {
  FakeFailure f;
  f.method = "GET";
  f.http_code = 200;
  f.raw_body = "{\"kind\": \"Pod\", \"metadata\": {";
  server_.FailNext(f);
  EXPECT_EQ(client_->Get(resources::Pods(), "default", "p").status().code(),
            absl::StatusCode::kDataLoss);
}

TEST_F(ClientApiServerTest, UnauthorizedAndTokenRotation) {
  server_.RequireToken("new-token");
  EXPECT_EQ(client_->Get(resources::Pods(), "default", "p").status().code(),
            absl::StatusCode::kUnauthenticated);

  testutil::TempDir dir;
  std::string token_file = dir.Write("token", "old-token");
  RestConfig cfg;
  cfg.bearer_token_file = token_file;
  auto client = NewClient(Clock::Real(), cfg);
  EXPECT_EQ(client->List(resources::Pods(), "", {}).status().code(),
            absl::StatusCode::kUnauthenticated);
  // The token rotates; the next 401 makes the client re-read it and retry.
  dir.Write("token", "new-token\n");
  EXPECT_TRUE(client->List(resources::Pods(), "", {}).ok());
}

}  // namespace
}  // namespace kruise::kube

namespace kruise::kube {
namespace {

// ---- Call deadlines and the write fence against a hung API server (issue 33) ----

Resource LeaseRes() { return {"coordination.k8s.io", "v1", "leases", "Lease", true}; }

class ClientDeadlineTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.Start().ok()); }

  std::unique_ptr<RestKubeClient> NewClient(const std::string& agent, int max_attempts = 4) {
    RestConfig cfg;
    cfg.host = server_.base_url();
    cfg.qps = 0;
    cfg.user_agent = agent;
    RestClientOptions opts;
    opts.initial_backoff = absl::Milliseconds(1);
    opts.max_backoff = absl::Milliseconds(5);
    opts.max_attempts = max_attempts;
    auto c = RestKubeClient::Create(cfg, Clock::Real(), opts);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }

  testing::FakeApiServer server_;
};

TEST_F(ClientDeadlineTest, HungLeaseGetEndsAtTheDeadlineWithoutRetryWhileOthersAnswer) {
  auto client = NewClient("replica-a");
  auto hung_client = NewClient("replica-a");
  server_.SetPathLatency("GET", "/leases/", absl::Seconds(3));
  std::atomic<bool> hung_done{false};
  absl::Status hung;
  absl::Duration hung_took;
  std::thread t([&] {
    const absl::Time start = absl::Now();
    ScopedCallDeadline budget(start + absl::Milliseconds(400));
    hung = hung_client->Get(LeaseRes(), "kruise-system", "kruise-manager").status();
    hung_took = absl::Now() - start;
    hung_done = true;
  });
  // Meanwhile a pod GET of the same client answers at once.
  const absl::Time start = absl::Now();
  absl::Status other = client->Get(resources::Pods(), "default", "none").status();
  const absl::Duration other_took = absl::Now() - start;
  t.join();
  EXPECT_TRUE(kube::IsNotFound(other)) << other;
  EXPECT_LT(other_took, absl::Seconds(1));
  EXPECT_EQ(hung.code(), absl::StatusCode::kDeadlineExceeded) << hung;
  EXPECT_GE(hung_took, absl::Milliseconds(350));
  EXPECT_LT(hung_took, absl::Milliseconds(2500)) << "not bounded by the call's deadline";
  EXPECT_EQ(hung_client->attempts(), 1) << "retried past its deadline";
}

TEST_F(ClientDeadlineTest, NothingIsSentAfterTheDeadline) {
  auto client = NewClient("replica-a");
  ScopedCallDeadline passed(absl::Now() - absl::Milliseconds(1));
  auto r = client->Create(resources::Pods(), "default", Pod("late"));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  EXPECT_EQ(server_.RequestCount("POST", "/pods"), 0);
}

TEST_F(ClientDeadlineTest, FencedWriteHeldByTheServerIsCutOffAtTheFence) {
  auto client = NewClient("replica-a");
  WriteFence fence;
  FencedKubeClient writes(client.get(), &fence);
  fence.ExtendTo(absl::Now() + absl::Milliseconds(400));
  server_.SetPathLatency("POST", "/pods", absl::Seconds(3));
  const absl::Time start = absl::Now();
  auto r = writes.Create(resources::Pods(), "default", Pod("held"));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_NE(r.status().message().find("cut off at the fence"), std::string::npos) << r.status();
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(2500));
  // Once closed, nothing more is sent.
  server_.SetPathLatency("POST", "/pods", absl::ZeroDuration());
  const int64_t sent = server_.RequestCount("POST", "/pods");
  EXPECT_EQ(writes.Create(resources::Pods(), "default", Pod("later")).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(server_.RequestCount("POST", "/pods"), sent);
}

// The leader's renewals against a real HTTP API server whose lease GETs hang for this replica
// only: leadership and the fence end at renew_deadline after the last renewal, not when the hung
// call would have returned (30 s client timeout, 5 attempts).
TEST_F(ClientDeadlineTest, LeaderWhoseLeaseCallsHangStopsAtItsRenewDeadline) {
  auto lease_client = NewClient("replica-a leader-election", /*max_attempts=*/1);
  WriteFence fence;
  std::atomic<bool> started{false}, lost{false};
  LeaderElectionConfig cfg;
  cfg.identity = "a";
  cfg.lease_duration = absl::Milliseconds(3000);
  cfg.renew_deadline = absl::Milliseconds(1500);
  cfg.retry_period = absl::Milliseconds(300);
  cfg.fence = &fence;
  cfg.callbacks.on_started_leading = [&](std::stop_token) { started = true; };
  cfg.callbacks.on_lost = [&] { lost = true; };
  auto elector = LeaderElector::Create(lease_client.get(), cfg);
  ASSERT_TRUE(elector.ok()) << elector.status();
  std::atomic<int> result{-1};
  std::jthread run([&](std::stop_token stop) { result = (*elector)->Run(stop) ? 1 : 0; });
  ASSERT_TRUE(WaitFor([&] { return started.load(); }, absl::Seconds(10)));
  ASSERT_TRUE(fence.IsOpen());
  server_.SetPathLatency("GET", "/leases/", absl::Seconds(30), "replica-a");
  const absl::Time hung_at = absl::Now();
  const absl::Time fence_end = fence.until();
  ASSERT_TRUE(WaitFor([&] { return result.load() >= 0; }, absl::Seconds(10)));
  const absl::Duration took = absl::Now() - hung_at;
  EXPECT_EQ(result.load(), 0);
  EXPECT_TRUE(lost.load());
  EXPECT_FALSE(fence.IsOpen());
  EXPECT_LE(fence_end, hung_at + cfg.renew_deadline);
  // Lost within the renew deadline plus scheduling slack, far below a hung call's 30 s.
  EXPECT_LT(took, absl::Seconds(4)) << absl::FormatDuration(took);
  server_.SetPathLatency("GET", "/leases/", absl::ZeroDuration(), "replica-a");
}

}  // namespace
}  // namespace kruise::kube
