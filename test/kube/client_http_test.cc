// RestKubeClient against small in-test cpp-httplib servers: the wire protocol (paths, headers,
// bodies), retries, Retry-After, token re-read on 401, watch stream edge cases and TLS.

#include <atomic>
#include <cstdlib>
#include <memory>
#include <set>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "kube/errors.h"
#include "kube/resources.h"
#include "kube/rest_client.h"
#include "test/fakes/fake_clock.h"
#include "test/kube/client_test_util.h"

namespace kruise::kube {
namespace {

using ::testing::HasSubstr;
using testutil::TempDir;
using testutil::WaitFor;

// Runs an httplib server (plain or TLS) on 127.0.0.1 on a background thread.
class TestServer {
 public:
  explicit TestServer(std::unique_ptr<httplib::Server> svr = std::make_unique<httplib::Server>())
      : svr_(std::move(svr)) {}
  ~TestServer() { Stop(); }

  httplib::Server& svr() { return *svr_; }

  void Start() {
    port_ = svr_->bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { svr_->listen_after_bind(); });
    // The socket already listens; wait (bounded) for the accept loop so Stop() can end it.
    const absl::Time end = absl::Now() + absl::Seconds(10);
    while (!svr_->is_running() && absl::Now() < end) std::this_thread::yield();
    ASSERT_TRUE(svr_->is_running());
  }
  void Stop() {
    if (thread_.joinable()) {
      svr_->stop();
      thread_.join();
    }
  }
  int port() const { return port_; }
  std::string url(const std::string& scheme = "http") const {
    return scheme + "://127.0.0.1:" + std::to_string(port_);
  }

 private:
  std::unique_ptr<httplib::Server> svr_;
  std::thread thread_;
  int port_ = 0;
};

RestClientOptions FastRetries() {
  RestClientOptions o;
  o.initial_backoff = absl::Milliseconds(1);
  o.max_backoff = absl::Milliseconds(5);
  o.max_attempts = 4;
  return o;
}

std::unique_ptr<RestKubeClient> MakeClient(const std::string& host, Clock* clock = Clock::Real(),
                                           RestClientOptions opts = FastRetries(),
                                           RestConfig cfg = {}) {
  cfg.host = host;
  cfg.qps = 0;  // no throttling in these tests
  cfg.timeout = absl::Seconds(20);
  auto c = RestKubeClient::Create(cfg, clock, opts);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

std::string StatusJson(int code, const std::string& reason, const std::string& msg) {
  return Json{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
              {"code", code},     {"reason", reason},   {"message", msg}}
      .dump();
}

// ---- Requests --------------------------------------------------------------------------------

TEST(RestClientHttpTest, GetSendsHeadersAndParsesObject) {
  TestServer server;
  std::string auth, accept, agent, path;
  server.svr().Get(".*", [&](const httplib::Request& req, httplib::Response& res) {
    auth = req.get_header_value("Authorization");
    accept = req.get_header_value("Accept");
    agent = req.get_header_value("User-Agent");
    path = req.path;
    res.set_content(R"({"kind":"Pod","metadata":{"name":"p"}})", "application/json");
  });
  server.Start();
  RestConfig cfg;
  cfg.bearer_token = "tok123";
  auto client = MakeClient(server.url(), Clock::Real(), FastRetries(), cfg);
  absl::StatusOr<Json> pod = client->Get(resources::Pods(), "ns", "p");
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ((*pod)["metadata"]["name"], "p");
  EXPECT_EQ(auth, "Bearer tok123");
  EXPECT_EQ(accept, "application/json");
  EXPECT_EQ(agent, "kruise-cpp/0.1");
  EXPECT_EQ(path, "/api/v1/namespaces/ns/pods/p");
}

TEST(RestClientHttpTest, ReusesConnections) {
  TestServer server;
  absl::Mutex mu;
  std::set<int> ports;
  server.svr().Get(".*", [&](const httplib::Request& req, httplib::Response& res) {
    absl::MutexLock lock(&mu);
    ports.insert(req.remote_port);
    res.set_content("{}", "application/json");
  });
  server.Start();
  auto client = MakeClient(server.url());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(client->Get(resources::Nodes(), "", "n").ok());
  absl::MutexLock lock(&mu);
  EXPECT_EQ(ports.size(), 1u) << "every request opened a new connection";
}

TEST(RestClientHttpTest, WriteVerbsSendBodiesAndContentTypes) {
  TestServer server;
  absl::Mutex mu;
  std::vector<std::tuple<std::string, std::string, std::string, std::string>> seen;
  auto record = [&](const httplib::Request& req, httplib::Response& res) {
    absl::MutexLock lock(&mu);
    seen.emplace_back(req.method, req.path, req.get_header_value("Content-Type"), req.body);
    res.set_content(req.method == "DELETE" ? StatusJson(200, "", "") : req.body,
                    "application/json");
  };
  server.svr().Post(".*", record);
  server.svr().Put(".*", record);
  server.svr().Patch(".*", record);
  server.svr().Delete(".*", record);
  server.Start();
  auto client = MakeClient(server.url());
  const Json obj = {{"metadata", {{"name", "crr"}, {"namespace", "ns1"}}}};
  ASSERT_TRUE(client->Create(resources::ContainerRecreateRequests(), "", obj).ok());
  ASSERT_TRUE(client->Update(resources::ContainerRecreateRequests(), "", obj, "status").ok());
  ASSERT_TRUE(
      client->Patch(resources::Pods(), "ns1", "p", PatchType::kStrategicMerge, Json{{"a", 1}})
          .ok());
  ASSERT_TRUE(client->Patch(resources::Pods(), "ns1", "p", PatchType::kJson, Json::array()).ok());
  ASSERT_TRUE(
      client->Patch(resources::NodeImages(), "", "n", PatchType::kMerge, Json{{"b", 2}}).ok());
  DeleteOptions del;
  del.precondition_uid = "uid-1";
  del.precondition_resource_version = "7";
  del.propagation_policy = "Background";
  del.grace_period_seconds = 0;
  ASSERT_TRUE(client->Delete(resources::Pods(), "ns1", "p", del).ok());

  absl::MutexLock lock(&mu);
  ASSERT_EQ(seen.size(), 6u);
  const std::string crrs = "/apis/apps.kruise.io/v1alpha1/namespaces/ns1/containerrecreaterequests";
  EXPECT_EQ(seen[0], std::make_tuple("POST", crrs, "application/json", obj.dump()));
  EXPECT_EQ(seen[1], std::make_tuple("PUT", crrs + "/crr/status", "application/json", obj.dump()));
  EXPECT_EQ(std::get<2>(seen[2]), "application/strategic-merge-patch+json");
  EXPECT_EQ(std::get<2>(seen[3]), "application/json-patch+json");
  EXPECT_EQ(std::get<1>(seen[4]), "/apis/apps.kruise.io/v1alpha1/nodeimages/n");
  EXPECT_EQ(std::get<2>(seen[4]), "application/merge-patch+json");
  EXPECT_EQ(std::get<0>(seen[5]), "DELETE");
  Json body = Json::parse(std::get<3>(seen[5]));
  EXPECT_EQ(body["preconditions"]["uid"], "uid-1");
  EXPECT_EQ(body["preconditions"]["resourceVersion"], "7");
  EXPECT_EQ(body["propagationPolicy"], "Background");
  EXPECT_EQ(body["gracePeriodSeconds"], 0);
}

// Bodies are encoded as Go's encoding/json does (the API server keeps RawExtension bytes as sent
// and compares them with its own re-encoding on a later patch).
TEST(RestClientHttpTest, BodiesAreEncodedLikeGo) {
  TestServer server;
  absl::Mutex mu;
  std::vector<std::string> bodies;
  server.svr().Post(".*", [&](const httplib::Request& req, httplib::Response& res) {
    absl::MutexLock lock(&mu);
    bodies.push_back(req.body);
    res.set_content(req.body, "application/json");
  });
  server.Start();
  auto client = MakeClient(server.url());
  const Json obj = {{"metadata", {{"name", "r"}, {"namespace", "ns1"}}},
                    {"data", {{"z", "sleep 1 & wait"}, {"a", "<b> \u2028 \u00e9"}}}};
  auto created = client->Create(resources::ControllerRevisions(), "", obj);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(*created, obj);
  // Invalid UTF-8 is replaced, not thrown.
  Json bad = obj;
  bad["data"]["z"] = std::string("x\xff");
  ASSERT_TRUE(client->Create(resources::ControllerRevisions(), "", bad).ok());
  absl::MutexLock lock(&mu);
  ASSERT_EQ(bodies.size(), 2u);
  EXPECT_EQ(bodies[0],
            R"({"data":{"a":"\u003cb\u003e \u2028 )" "\u00e9" R"(","z":"sleep 1 \u0026 wait"},)"
            R"("metadata":{"name":"r","namespace":"ns1"}})");
  EXPECT_NE(bodies[1].find("x\xef\xbf\xbd"), std::string::npos) << bodies[1];
}

TEST(RestClientHttpTest, ArgumentErrorsAreCaughtLocally) {
  auto client = MakeClient("http://127.0.0.1:1");
  EXPECT_EQ(
      client->Create(resources::Pods(), "", Json{{"metadata", {{"name", "x"}}}}).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client->Update(resources::Pods(), "ns", Json::object()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client->Get(resources::Pods(), "ns", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client->attempts(), 0);
  EXPECT_EQ(RestKubeClient::Create(RestConfig{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  RestConfig bad;
  bad.host = "https://x";
  bad.ca_file = "/nonexistent/ca.crt";
  EXPECT_FALSE(RestKubeClient::Create(bad).ok());
}

TEST(RestClientHttpTest, ListParsesMetadataAndFillsKinds) {
  TestServer server;
  std::string query;
  server.svr().Get(".*", [&](const httplib::Request& req, httplib::Response& res) {
    query = req.get_param_value("labelSelector") + "|" + req.get_param_value("limit") + "|" +
            req.get_param_value("continue");
    res.set_content(
        R"({"kind":"PodList","metadata":{"resourceVersion":"77","continue":"next",)"
        R"("remainingItemCount":3},"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}]})",
        "application/json");
  });
  server.Start();
  auto client = MakeClient(server.url());
  ListOptions o;
  o.label_selector = "app in (x,y)";
  o.limit = 2;
  o.continue_token = "tok/+=";
  absl::StatusOr<ListResult> list = client->List(resources::Pods(), "", o);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(query, "app in (x,y)|2|tok/+=");
  EXPECT_EQ(list->resource_version, "77");
  EXPECT_EQ(list->continue_token, "next");
  EXPECT_EQ(list->remaining_item_count, 3);
  ASSERT_EQ(list->items.size(), 2u);
  EXPECT_EQ(list->items[1]["kind"], "Pod");
  EXPECT_EQ(list->items[1]["apiVersion"], "v1");
}

TEST(RestClientHttpTest, MalformedJsonIsDataLoss) {
  TestServer server;
  server.svr().Get(".*", [&](const httplib::Request& req, httplib::Response& res) {
    if (req.path.find("/pods/") != std::string::npos) {
      res.set_content("{\"metadata\": {\"na", "application/json");
    } else {
      res.set_content(R"({"items": 5})", "application/json");
    }
  });
  server.Start();
  auto client = MakeClient(server.url());
  EXPECT_EQ(client->Get(resources::Pods(), "ns", "p").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(client->List(resources::Pods(), "ns", {}).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(client->attempts(), 2);  // not retried
}

TEST(RestClientHttpTest, ServerErrorsRetriedForGetOnly) {
  TestServer server;
  std::atomic<int> gets{0}, posts{0};
  server.svr().Get(".*", [&](const httplib::Request&, httplib::Response& res) {
    if (++gets <= 2) {
      res.status = 503;
      res.set_content(StatusJson(503, "ServiceUnavailable", "busy"), "application/json");
      return;
    }
    res.set_content("{}", "application/json");
  });
  server.svr().Post(".*", [&](const httplib::Request&, httplib::Response& res) {
    ++posts;
    res.status = 500;
    res.set_content(StatusJson(500, "InternalError", "oops"), "application/json");
  });
  server.Start();
  auto client = MakeClient(server.url());
  EXPECT_TRUE(client->Get(resources::Pods(), "ns", "p").ok());
  EXPECT_EQ(gets.load(), 3);
  absl::Status st =
      client->Create(resources::Pods(), "ns", Json{{"metadata", {{"name", "p"}}}}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(st.message(), "InternalError: oops");
  EXPECT_EQ(posts.load(), 1);
  // Persistent failure: bounded attempts.
  gets = -100;
  EXPECT_EQ(client->Get(resources::Pods(), "ns", "p").status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(gets.load(), -100 + 4);
}

TEST(RestClientHttpTest, OnRequestSeesEveryAttemptWithMethodAndCode) {
  TestServer server;
  std::atomic<int> gets{0};
  server.svr().Get(".*", [&](const httplib::Request&, httplib::Response& res) {
    if (++gets == 1) {
      res.status = 503;
      res.set_content(StatusJson(503, "ServiceUnavailable", "busy"), "application/json");
      return;
    }
    res.set_content("{}", "application/json");
  });
  server.svr().Patch(".*", [&](const httplib::Request&, httplib::Response& res) {
    res.status = 404;
    res.set_content(StatusJson(404, "NotFound", "gone"), "application/json");
  });
  server.Start();
  absl::Mutex mu;
  std::vector<std::string> seen;
  RestClientOptions opts = FastRetries();
  opts.on_request = [&](absl::string_view method, long code) {
    absl::MutexLock lock(&mu);
    seen.push_back(absl::StrCat(method, " ", code));
  };
  auto client = MakeClient(server.url(), Clock::Real(), opts);
  EXPECT_TRUE(client->Get(resources::Pods(), "ns", "p").ok());
  EXPECT_FALSE(client->Patch(resources::Pods(), "ns", "p", PatchType::kMerge, Json::object()).ok());
  absl::MutexLock lock(&mu);
  EXPECT_EQ(seen, (std::vector<std::string>{"GET 503", "GET 200", "PATCH 404"}));
}

TEST(RestClientHttpTest, NotFoundAndConflictAreNotRetried) {
  TestServer server;
  std::atomic<int> n{0};
  server.svr().Get(".*", [&](const httplib::Request&, httplib::Response& res) {
    ++n;
    res.status = 404;
    res.set_content(StatusJson(404, "NotFound", "pods \"p\" not found"), "application/json");
  });
  server.svr().Put(".*", [&](const httplib::Request&, httplib::Response& res) {
    ++n;
    res.status = 409;
    res.set_content(StatusJson(409, "Conflict", "the object has been modified"),
                    "application/json");
  });
  server.Start();
  auto client = MakeClient(server.url());
  absl::Status nf = client->Get(resources::Pods(), "ns", "p").status();
  EXPECT_TRUE(kube::IsNotFound(nf));
  EXPECT_EQ(Reason(nf), "NotFound");
  absl::Status conflict =
      client->Update(resources::Pods(), "ns", Json{{"metadata", {{"name", "p"}}}}).status();
  EXPECT_TRUE(IsConflict(conflict));
  EXPECT_EQ(n.load(), 2);
}

TEST(RestClientHttpTest, TooManyRequestsHonoursRetryAfterForEveryVerb) {
  TestServer server;
  std::atomic<int> posts{0};
  server.svr().Post(".*", [&](const httplib::Request& req, httplib::Response& res) {
    if (++posts == 1) {
      res.status = 429;
      res.set_header("Retry-After", "2");
      res.set_content(StatusJson(429, "TooManyRequests", "slow down"), "application/json");
      return;
    }
    res.status = 201;
    res.set_content(req.body, "application/json");
  });
  server.Start();
  testing::FakeClock clock;
  auto client = MakeClient(server.url(), &clock);
  absl::StatusOr<Json> created;
  std::thread caller([&] {
    created = client->Create(resources::Pods(), "ns", Json{{"metadata", {{"name", "p"}}}});
  });
  // The client parks on the clock after the 429 and does not retry before Retry-After passes.
  ASSERT_TRUE(WaitFor([&] { return clock.waiters() == 1; }));
  EXPECT_EQ(posts.load(), 1);
  clock.Advance(absl::Milliseconds(1900));
  EXPECT_EQ(clock.waiters(), 1);
  EXPECT_EQ(posts.load(), 1);
  clock.Advance(absl::Milliseconds(100));
  caller.join();
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(posts.load(), 2);
}

TEST(RestClientHttpTest, UnauthorizedRereadsTokenFileOnce) {
  TempDir dir;
  std::string token_file = dir.Write("token", "old");
  TestServer server;
  std::atomic<int> n{0};
  std::atomic<bool> rotate{true};
  std::atomic<bool> accept_new{true};
  server.svr().Get(".*", [&](const httplib::Request& req, httplib::Response& res) {
    ++n;
    if (!accept_new || req.get_header_value("Authorization") != "Bearer new") {
      if (rotate) dir.Write("token", "new");  // rotated while the old token was in use
      res.status = 401;
      res.set_content(StatusJson(401, "Unauthorized", "Unauthorized"), "application/json");
      return;
    }
    res.set_content("{}", "application/json");
  });
  server.Start();
  RestConfig cfg;
  cfg.bearer_token_file = token_file;
  auto client = MakeClient(server.url(), Clock::Real(), FastRetries(), cfg);
  EXPECT_TRUE(client->Get(resources::Pods(), "ns", "p").ok());
  EXPECT_EQ(n.load(), 2);

  // A token that stays bad: exactly one re-read and retry, then kUnauthenticated.
  accept_new = false;
  rotate = false;
  n = 0;
  absl::Status st = client->Get(resources::Pods(), "ns", "p").status();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(n.load(), 2);
  EXPECT_THAT(std::string(st.message()), ::testing::Not(HasSubstr("new")));
}

TEST(RestClientHttpTest, ConnectionRefusedIsUnavailable) {
  int port;
  {
    TestServer gone;
    gone.svr().Get(".*", [](const httplib::Request&, httplib::Response&) {});
    gone.Start();
    port = gone.port();
  }
  auto client = MakeClient("http://127.0.0.1:" + std::to_string(port));
  absl::Status st = client->Get(resources::Pods(), "ns", "p").status();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_EQ(client->attempts(), 4);
}

// ---- Watch -----------------------------------------------------------------------------------

std::string Event(const std::string& type, const std::string& name, const std::string& rv) {
  return Json{
             {"type", type},
             {"object", {{"kind", "Pod"}, {"metadata", {{"name", name}, {"resourceVersion", rv}}}}}}
             .dump() +
         "\n";
}

// Serves GET with a chunked body made of `chunks`; `clean_end` false closes the connection without
// the terminating chunk.
void ServeChunks(TestServer& server, std::vector<std::string> chunks, bool clean_end = true,
                 std::string* query = nullptr) {
  server.svr().Get(".*",
                   [chunks, clean_end, query](const httplib::Request& req, httplib::Response& res) {
                     if (query != nullptr) *query = req.params.count("watch") ? "watch" : "";
                     res.set_chunked_content_provider(
                         "application/json", [chunks, clean_end](size_t, httplib::DataSink& sink) {
                           for (const std::string& c : chunks) {
                             sink.write(c.data(), c.size());
                           }
                           if (!clean_end) return false;
                           sink.done();
                           return true;
                         });
                   });
}

struct Collected {
  std::vector<std::pair<WatchEvent::Type, std::string>> events;
  WatchHandler Handler(int stop_after = -1) {
    return [this, stop_after](WatchEvent&& ev) {
      std::string name = ev.object["metadata"].value("name", "");
      events.emplace_back(ev.type, name);
      return stop_after < 0 || static_cast<int>(events.size()) < stop_after;
    };
  }
};

TEST(RestClientWatchTest, EventsSplitAcrossChunksAndBookmarks) {
  TestServer server;
  std::string all = Event("ADDED", "a", "1") + Event("MODIFIED", "a", "2") +
                    Event("BOOKMARK", "", "3") + Event("DELETED", "a", "4");
  // Cut the stream at awkward places: mid-line, right after a newline, single bytes.
  std::vector<std::string> chunks = {all.substr(0, 7), all.substr(7, 1), all.substr(8, 60),
                                     all.substr(68, Event("ADDED", "a", "1").size()),
                                     all.substr(68 + Event("ADDED", "a", "1").size())};
  std::string query;
  ServeChunks(server, chunks, true, &query);
  server.Start();
  auto client = MakeClient(server.url());
  Collected got;
  ListOptions o;
  o.resource_version = "0";
  o.allow_watch_bookmarks = true;
  absl::Status st = client->Watch(resources::Pods(), "ns", o, got.Handler(), nullptr);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(query, "watch");
  using T = WatchEvent::Type;
  EXPECT_THAT(got.events, ::testing::ElementsAre(
                              std::make_pair(T::kAdded, "a"), std::make_pair(T::kModified, "a"),
                              std::make_pair(T::kBookmark, ""), std::make_pair(T::kDeleted, "a")));
}

TEST(RestClientWatchTest, HandlerReturningFalseStops) {
  TestServer server;
  ServeChunks(server,
              {Event("ADDED", "a", "1") + Event("ADDED", "b", "2") + Event("ADDED", "c", "3")});
  server.Start();
  auto client = MakeClient(server.url());
  Collected got;
  EXPECT_TRUE(client->Watch(resources::Pods(), "", {}, got.Handler(2), nullptr).ok());
  EXPECT_EQ(got.events.size(), 2u);
}

TEST(RestClientWatchTest, ErrorEventGoneMapsToOutOfRange) {
  TestServer server;
  ServeChunks(
      server,
      {Event("ADDED", "a", "1"),
       Json{{"type", "ERROR"},
            {"object", Json::parse(StatusJson(410, "Expired", "too old resource version: 1 (5)"))}}
               .dump() +
           "\n"});
  server.Start();
  auto client = MakeClient(server.url());
  Collected got;
  absl::Status st = client->Watch(resources::Pods(), "", {}, got.Handler(), nullptr);
  EXPECT_TRUE(IsGone(st)) << st;
  EXPECT_EQ(Reason(st), "Expired");
  EXPECT_EQ(got.events.size(), 1u);
}

TEST(RestClientWatchTest, TruncatedFinalLineIsDataLoss) {
  TestServer server;
  std::string half = Event("ADDED", "b", "2");
  half.resize(half.size() / 2);
  ServeChunks(server, {Event("ADDED", "a", "1"), half});
  server.Start();
  auto client = MakeClient(server.url());
  Collected got;
  absl::Status st = client->Watch(resources::Pods(), "", {}, got.Handler(), nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_EQ(got.events.size(), 1u);
}

TEST(RestClientWatchTest, StreamCutMidEventIsUnavailable) {
  TestServer server;
  std::string half = Event("ADDED", "b", "2");
  half.resize(half.size() / 2);
  ServeChunks(server, {Event("ADDED", "a", "1"), half}, /*clean_end=*/false);
  server.Start();
  auto client = MakeClient(server.url());
  Collected got;
  absl::Status st = client->Watch(resources::Pods(), "", {}, got.Handler(), nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_EQ(got.events.size(), 1u);
}

TEST(RestClientWatchTest, FinalEventWithoutNewlineIsAccepted) {
  TestServer server;
  std::string last = Event("ADDED", "b", "2");
  last.pop_back();
  ServeChunks(server, {Event("ADDED", "a", "1"), last});
  server.Start();
  auto client = MakeClient(server.url());
  Collected got;
  EXPECT_TRUE(client->Watch(resources::Pods(), "", {}, got.Handler(), nullptr).ok());
  EXPECT_EQ(got.events.size(), 2u);
}

TEST(RestClientWatchTest, MalformedEventIsDataLoss) {
  for (const std::string& bad : {std::string("{not json}\n"), std::string("[1,2]\n"),
                                 std::string(R"({"type":"ADDED"})") + "\n",
                                 std::string(R"({"type":"WEIRD","object":{}})") + "\n"}) {
    TestServer server;
    ServeChunks(server, {Event("ADDED", "a", "1"), bad, Event("ADDED", "c", "3")});
    server.Start();
    auto client = MakeClient(server.url());
    Collected got;
    absl::Status st = client->Watch(resources::Pods(), "", {}, got.Handler(), nullptr);
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << bad << " " << st;
    EXPECT_EQ(got.events.size(), 1u) << bad;
  }
}

TEST(RestClientWatchTest, HttpErrorBeforeStream) {
  TestServer server;
  server.svr().Get(".*", [](const httplib::Request&, httplib::Response& res) {
    res.status = 403;
    res.set_content(StatusJson(403, "Forbidden", "pods is forbidden"), "application/json");
  });
  server.Start();
  auto client = MakeClient(server.url());
  Collected got;
  absl::Status st = client->Watch(resources::Pods(), "", {}, got.Handler(), nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kPermissionDenied) << st;
  EXPECT_EQ(st.message(), "Forbidden: pods is forbidden");
}

// A server whose watch sends one event and then holds the stream open until released.
class HangingWatchServer {
 public:
  HangingWatchServer() {
    server_.svr().Get(".*", [this](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("application/json", [this](size_t, httplib::DataSink& sink) {
        std::string ev = Event("ADDED", "a", "1");
        sink.write(ev.data(), ev.size());
        absl::MutexLock lock(&mu_);
        mu_.AwaitWithTimeout(absl::Condition(&released_), absl::Seconds(30));
        return false;
      });
    });
    server_.Start();
  }
  ~HangingWatchServer() {
    {
      absl::MutexLock lock(&mu_);
      released_ = true;
    }
    server_.Stop();
  }
  std::string url() { return server_.url(); }

 private:
  absl::Mutex mu_;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  TestServer server_;
};

TEST(RestClientWatchTest, CancellerStopsABlockedWatch) {
  HangingWatchServer server;
  auto client = MakeClient(server.url());
  WatchCanceller canceller;
  std::atomic<int> events{0};
  absl::Status st = absl::UnknownError("not finished");
  std::atomic<bool> finished{false};
  std::thread watcher([&] {
    st = client->Watch(
        resources::Pods(), "", {},
        [&](WatchEvent&&) {
          ++events;
          return true;
        },
        &canceller);
    finished = true;
  });
  ASSERT_TRUE(WaitFor([&] { return events.load() == 1; }));
  EXPECT_FALSE(finished.load());
  const absl::Time cancelled_at = absl::Now();
  canceller.Cancel();
  ASSERT_TRUE(WaitFor([&] { return finished.load(); }, absl::Seconds(5)));
  watcher.join();
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_LT(absl::Now() - cancelled_at, absl::Seconds(3));
}

TEST(RestClientWatchTest, IdleStreamIsNoticed) {
  HangingWatchServer server;
  RestClientOptions opts = FastRetries();
  opts.watch_idle_timeout = absl::Seconds(1);
  auto client = MakeClient(server.url(), Clock::Real(), opts);
  Collected got;
  const absl::Time start = absl::Now();
  absl::Status st = client->Watch(resources::Pods(), "", {}, got.Handler(), nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(st.code() == absl::StatusCode::kDeadlineExceeded ||
              st.code() == absl::StatusCode::kUnavailable)
      << st;
  EXPECT_EQ(got.events.size(), 1u);
  // libcurl averages the transfer speed over ~5 s, so the first event's bytes delay detection.
  EXPECT_LT(absl::Now() - start, absl::Seconds(15));
}

// ---- TLS -------------------------------------------------------------------------------------

// Generates a CA and a server certificate for 127.0.0.1 (and a client certificate) with the
// openssl CLI.
class Pki {
 public:
  Pki() {
    const std::string d = dir_.path();
    const std::string ext = dir_.Write("san.ext", "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
    const std::string cmd =
        "set -e; cd " + d +
        "; for ca in ca other; do openssl req -x509 -newkey ec -pkeyopt "
        "ec_paramgen_curve:prime256v1 -nodes -keyout $ca.key -out $ca.crt -days 2 -subj "
        "/CN=test-$ca >/dev/null 2>&1; done"
        "; openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout srv.key "
        "-out srv.csr -subj /CN=127.0.0.1 >/dev/null 2>&1"
        "; openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out srv.crt "
        "-days 2 -extfile " +
        ext +
        " >/dev/null 2>&1"
        "; openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout cli.key "
        "-out cli.csr -subj /CN=client >/dev/null 2>&1"
        "; openssl x509 -req -in cli.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out cli.crt "
        "-days 2 >/dev/null 2>&1";
    ok_ = std::system(cmd.c_str()) == 0;
  }
  bool ok() const { return ok_; }
  std::string file(const std::string& name) const { return dir_.path() + "/" + name; }
  std::string read(const std::string& name) const { return *ReadFileToString(file(name)); }

 private:
  TempDir dir_;
  bool ok_ = false;
};

void ServeOk(TestServer& server) {
  server.svr().Get(".*", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"gitVersion":"v1.20.2"})", "application/json");
  });
}

TEST(RestClientTlsTest, VerifiesServerWithConfiguredCa) {
  Pki pki;
  ASSERT_TRUE(pki.ok()) << "openssl failed";
  TestServer server(std::make_unique<httplib::SSLServer>(pki.file("srv.crt").c_str(),
                                                         pki.file("srv.key").c_str()));
  ServeOk(server);
  server.Start();

  RestConfig cfg;
  cfg.ca_data = pki.read("ca.crt");
  auto good = MakeClient(server.url("https"), Clock::Real(), FastRetries(), cfg);
  absl::StatusOr<Json> v = good->GetPath("/version");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ((*v)["gitVersion"], "v1.20.2");

  RestConfig file_cfg;
  file_cfg.ca_file = pki.file("ca.crt");
  EXPECT_TRUE(MakeClient(server.url("https"), Clock::Real(), FastRetries(), file_cfg)
                  ->GetPath("/version")
                  .ok());

  RestConfig wrong;
  wrong.ca_data = pki.read("other.crt");
  auto bad = MakeClient(server.url("https"), Clock::Real(), FastRetries(), wrong);
  absl::Status st = bad->GetPath("/version").status();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnauthenticated) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("TLS verification"));
  EXPECT_EQ(bad->attempts(), 1) << "a TLS verification failure must not be retried";

  wrong.insecure_skip_tls_verify = true;
  EXPECT_TRUE(MakeClient(server.url("https"), Clock::Real(), FastRetries(), wrong)
                  ->GetPath("/version")
                  .ok());
}

TEST(RestClientTlsTest, ClientCertificateFromMemoryAndFiles) {
  Pki pki;
  ASSERT_TRUE(pki.ok()) << "openssl failed";
  TestServer server(std::make_unique<httplib::SSLServer>(
      pki.file("srv.crt").c_str(), pki.file("srv.key").c_str(), pki.file("ca.crt").c_str()));
  ServeOk(server);
  server.Start();

  RestConfig none;
  none.ca_data = pki.read("ca.crt");
  EXPECT_FALSE(MakeClient(server.url("https"), Clock::Real(), FastRetries(), none)
                   ->GetPath("/version")
                   .ok());

  RestConfig mem = none;
  mem.client_cert_data = pki.read("cli.crt");
  mem.client_key_data = pki.read("cli.key");
  absl::StatusOr<Json> v =
      MakeClient(server.url("https"), Clock::Real(), FastRetries(), mem)->GetPath("/version");
  EXPECT_TRUE(v.ok()) << v.status();

  RestConfig files = none;
  files.client_cert_file = pki.file("cli.crt");
  files.client_key_file = pki.file("cli.key");
  v = MakeClient(server.url("https"), Clock::Real(), FastRetries(), files)->GetPath("/version");
  EXPECT_TRUE(v.ok()) << v.status();
}

}  // namespace
}  // namespace kruise::kube
