// WebhookServer, CertReloader and ReadinessChecker over real TLS on 127.0.0.1.

#include "manager/webhook/server.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>

#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "manager/webhook/crr_handlers.h"
#include "manager/webhook/fail_open.h"
#include "manager/webhook/pod_handlers.h"
#include "manager/webhook/pod_webhook.h"
#include "manager/webhook/readiness.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "test/fakes/apiserver/fake_apiserver.h"
#include "test/fakes/apiserver/rest_client_for.h"
#include "test/manager/webhook/test_certs.h"

namespace kruise::manager::webhook {
namespace {

using ::testing::HasSubstr;

struct CurlDeleter {
  void operator()(CURL* h) const { curl_easy_cleanup(h); }
};
using CurlPtr = std::unique_ptr<CURL, CurlDeleter>;

struct HttpResult {
  CURLcode rc = CURLE_OK;
  long code = 0;
  std::string body;
  std::string headers;
  long new_connections = 0;
  absl::Duration took;
};

size_t Append(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

// One libcurl handle (keeps its connection alive between calls), trusting only `ca_pem`.
class Client {
 public:
  Client(int port, std::string ca_pem) : port_(port), ca_pem_(std::move(ca_pem)) {
    h_.reset(curl_easy_init());
  }
  // Send "Accept-Encoding: gzip" like the apiserver (admission replies must stay uncompressed).
  bool accept_gzip = false;
  HttpResult Call(const std::string& path, const std::string* post_body) {
    HttpResult r;
    CURL* h = h_.get();
    std::string url = absl::StrCat("https://127.0.0.1:", port_, path);
    curl_easy_setopt(h, CURLOPT_URL, url.c_str());
    curl_blob blob{ca_pem_.data(), ca_pem_.size(), CURL_BLOB_COPY};
    curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
    curl_easy_setopt(h, CURLOPT_CAPATH, nullptr);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &Append);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &r.body);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, &Append);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &r.headers);
    curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
    // As kube-apiserver: the body follows the headers at once (no 100-continue round trip).
    headers = curl_slist_append(headers, "Expect:");
    if (accept_gzip) {
      // As kube-apiserver's Go client sends it. Set by hand (not CURLOPT_ACCEPT_ENCODING) so curl
      // does not decode: a gzipped admission reply would fail the JSON parsing in the tests.
      headers = curl_slist_append(headers, "Accept-Encoding: gzip");
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    if (post_body != nullptr) {
      curl_easy_setopt(h, CURLOPT_POST, 1L);
      curl_easy_setopt(h, CURLOPT_POSTFIELDS, post_body->data());
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(post_body->size()));
    } else {
      curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    }
    const absl::Time start = absl::Now();
    r.rc = curl_easy_perform(h);
    r.took = absl::Now() - start;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r.code);
    curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &r.new_connections);
    curl_slist_free_all(headers);
    return r;
  }

 private:
  int port_;
  std::string ca_pem_;
  CurlPtr h_;
};

// A raw OpenSSL handshake limited to [min, max] protocol versions; returns the served cert's
// serial or the handshake error.
absl::StatusOr<std::string> Handshake(int port, int min_version, int max_version) {
  tls::SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  SSL_CTX_set_security_level(ctx.get(), 0);  // let the client offer old protocols at all
  SSL_CTX_set_cipher_list(ctx.get(), "DEFAULT:@SECLEVEL=0");
  SSL_CTX_set_min_proto_version(ctx.get(), min_version);
  SSL_CTX_set_max_proto_version(ctx.get(), max_version);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return absl::UnavailableError("connect");
  }
  tls::SslPtr ssl(SSL_new(ctx.get()));
  SSL_set_fd(ssl.get(), fd);
  int rc = SSL_connect(ssl.get());
  absl::StatusOr<std::string> out = absl::UnavailableError("handshake");
  if (rc == 1) {
    tls::X509Ptr peer(SSL_get1_peer_certificate(ssl.get()));
    out = peer ? tls::SerialHex(peer.get()) : "";
    SSL_shutdown(ssl.get());
  } else {
    out = absl::UnavailableError(absl::StrCat("handshake failed: ", tls::OpenSslErrors()));
  }
  ssl.reset();
  close(fd);
  return out;
}

std::string ReviewBody(const std::string& api_version) {
  std::string body = tls::ReadFile(std::string(KRUISE_SOURCE_DIR) +
                                   "/test/manager/webhook/testdata/review-pod-create.json")
                         .value_or("");
  Json review = Json::parse(body);
  review["apiVersion"] = api_version;
  return review.dump();
}

class WebhookServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pki_ = testing::MakePki();
    testing::WritePki(dir_.path(), pki_);
    registry_.Register("/mutate-pod", std::make_shared<PodSidecarMutator>());
    registry_.Register("/validate-pod", std::make_shared<PodAllowValidator>());
    server_ =
        std::make_unique<WebhookServer>(WebhookServer::Options{.address = "127.0.0.1:0",
                                                               .cert_dir = dir_.path(),
                                                               .max_body_bytes = 256 << 10,
                                                               .idle_timeout = absl::Seconds(1),
                                                               .threads = 8},
                                        &registry_);
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_GT(server_->port(), 0);
  }
  void TearDown() override { server_->Stop(); }

  testing::TempDir dir_;
  testing::TestPki pki_;
  HandlerRegistry registry_;
  std::unique_ptr<WebhookServer> server_;
};

TEST_F(WebhookServerTest, MutatePodRoundTripV1AndV1beta1) {
  Client client(server_->port(), pki_.ca.cert_pem);
  client.accept_gzip = true;
  for (const std::string v : {"admission.k8s.io/v1", "admission.k8s.io/v1beta1"}) {
    std::string body = ReviewBody(v);
    ASSERT_GT(body.size(), 9000u);
    HttpResult r = client.Call("/mutate-pod", &body);
    ASSERT_EQ(r.rc, CURLE_OK) << curl_easy_strerror(r.rc);
    ASSERT_EQ(r.code, 200) << r.body;
    Json out = Json::parse(r.body);
    EXPECT_EQ(out["apiVersion"], v);
    EXPECT_EQ(out["kind"], "AdmissionReview");
    EXPECT_EQ(out["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    EXPECT_EQ(out["response"]["allowed"], true);
    EXPECT_EQ(out["response"]["patchType"], "JSONPatch");
    std::string raw;
    ASSERT_TRUE(absl::Base64Unescape(out["response"]["patch"].get<std::string>(), &raw));
    Json pod = Json::parse(body)["request"]["object"];
    Json patched = pod.patch(Json::parse(raw));
    EXPECT_EQ(patched["metadata"]["labels"]["injected"], "true");
    EXPECT_EQ(patched["spec"]["containers"].back()["name"], "injected-sidecar");
    EXPECT_EQ(patched["spec"]["containers"].size(), pod["spec"]["containers"].size() + 1);
  }
  std::string body = ReviewBody("admission.k8s.io/v1");
  HttpResult r = client.Call("/validate-pod", &body);
  ASSERT_EQ(r.code, 200);
  EXPECT_EQ(Json::parse(r.body)["response"]["allowed"], true);
  EXPECT_FALSE(Json::parse(r.body)["response"].contains("patch"));
  EXPECT_EQ(server_->requests_served(), 3);
}

TEST_F(WebhookServerTest, MalformedOversizeUnknownPathAndHealthz) {
  Client client(server_->port(), pki_.ca.cert_pem);
  std::string bad = "{\"apiVersion\": \"admission.k8s.io/v1\", \"kind\": ";
  HttpResult r = client.Call("/mutate-pod", &bad);
  EXPECT_EQ(r.code, 400);
  EXPECT_THAT(r.body, HasSubstr("not valid JSON"));

  std::string huge(300 << 10, ' ');
  r = client.Call("/mutate-pod", &huge);
  EXPECT_EQ(r.code, 413);

  std::string ok = ReviewBody("admission.k8s.io/v1");
  Client fresh(server_->port(), pki_.ca.cert_pem);
  r = fresh.Call("/mutate-nothing", &ok);
  EXPECT_EQ(r.code, 404);

  r = fresh.Call("/healthz", nullptr);
  EXPECT_EQ(r.code, 200);
  EXPECT_EQ(r.body, "ok");
}

TEST_F(WebhookServerTest, RejectsTls11AndAcceptsTls12And13) {
  auto old = Handshake(server_->port(), TLS1_1_VERSION, TLS1_1_VERSION);
  EXPECT_FALSE(old.ok());
  auto v12 = Handshake(server_->port(), TLS1_2_VERSION, TLS1_2_VERSION);
  ASSERT_TRUE(v12.ok()) << v12.status();
  EXPECT_EQ(*v12, *tls::SerialHex(pki_.server.cert_pem));
  auto v13 = Handshake(server_->port(), TLS1_3_VERSION, TLS1_3_VERSION);
  EXPECT_TRUE(v13.ok()) << v13.status();
}

TEST_F(WebhookServerTest, HotReloadServesNewCertToNewConnectionsWithoutRestart) {
  Client client(server_->port(), pki_.ca.cert_pem);
  HttpResult r = client.Call("/healthz", nullptr);
  ASSERT_EQ(r.code, 200);
  std::string old_serial = *tls::SerialHex(pki_.server.cert_pem);
  ASSERT_EQ(*Handshake(server_->port(), TLS1_2_VERSION, TLS1_3_VERSION), old_serial);

  // A new CA and server certificate land in the cert dir (what CertManager does).
  testing::TestPki next = testing::MakePki();
  testing::WritePki(dir_.path(), next);
  auto changed = server_->cert_reloader()->PollOnce();
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);

  std::string new_serial = *tls::SerialHex(next.server.cert_pem);
  EXPECT_EQ(*Handshake(server_->port(), TLS1_2_VERSION, TLS1_3_VERSION), new_serial);
  // The established keep-alive connection keeps working.
  r = client.Call("/healthz", nullptr);
  EXPECT_EQ(r.code, 200);
  EXPECT_EQ(r.new_connections, 0);
  // A new client trusting only the new CA works, one trusting only the old CA does not.
  Client fresh_new(server_->port(), next.ca.cert_pem);
  EXPECT_EQ(fresh_new.Call("/healthz", nullptr).code, 200);
  Client fresh_old(server_->port(), pki_.ca.cert_pem);
  EXPECT_NE(fresh_old.Call("/healthz", nullptr).rc, CURLE_OK);
}

TEST_F(WebhookServerTest, ReadinessCheckerDoesRealTlsRoundTrip) {
  ReadinessChecker checker({.host = "localhost", .port = server_->port(), .cert_dir = dir_.path()});
  absl::Status s = checker.Check();
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(checker.Check().ok());
  EXPECT_EQ(checker.rebuilds(), 1);

  // CA file replaced by an unrelated CA: the client is rebuilt and verification fails.
  testing::TestPki other = testing::MakePki();
  ASSERT_TRUE(tls::WriteFileAtomic(dir_.path() + "/ca-cert.pem", other.ca.cert_pem, 0644).ok());
  s = checker.Check();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(checker.rebuilds(), 2);
  ASSERT_TRUE(tls::WriteFileAtomic(dir_.path() + "/ca-cert.pem", pki_.ca.cert_pem, 0644).ok());
  EXPECT_TRUE(checker.Check().ok());

  // Wrong host name for the certificate.
  ReadinessChecker wrong_host(
      {.host = "127.0.0.2", .port = server_->port(), .cert_dir = dir_.path()});
  EXPECT_FALSE(wrong_host.Check().ok());

  server_->Stop();
  s = checker.Check();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  ReadinessChecker no_ca({.port = 1, .cert_dir = dir_.path() + "/missing"});
  EXPECT_EQ(no_ca.Check().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(WebhookServerStopTest, ClosesIdleAndHalfOpenConnectionsAtOnce) {
  testing::TempDir dir;
  testing::TestPki pki = testing::MakePki();
  testing::WritePki(dir.path(), pki);
  HandlerRegistry registry;
  registry.Register("/validate-pod", std::make_shared<PodAllowValidator>());
  // Timeouts far beyond the test's deadline: Stop() must not wait for them.
  WebhookServer server({.address = "127.0.0.1:0",
                        .cert_dir = dir.path(),
                        .read_timeout = absl::Hours(1),
                        .idle_timeout = absl::Hours(1),
                        .threads = 2},
                       &registry);
  ASSERT_TRUE(server.Start().ok());
  Client kept_alive(server.port(), pki.ca.cert_pem);
  std::string body = ReviewBody("admission.k8s.io/v1");
  ASSERT_EQ(kept_alive.Call("/validate-pod", &body).code, 200);
  // A TCP connection that never starts its TLS handshake.
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);

  absl::Notification stopped;
  std::thread stopper([&] {
    server.Stop();
    stopped.Notify();
  });
  EXPECT_TRUE(stopped.WaitForNotificationWithTimeout(absl::Seconds(20)));
  close(fd);
  stopper.join();
  EXPECT_EQ(server.requests_served(), 1);
}

TEST(WebhookServerMetricsTest, CountsAndTimesAdmissionsByPathAndCode) {
  testing::TempDir dir;
  testing::TestPki pki = testing::MakePki();
  testing::WritePki(dir.path(), pki);
  HandlerRegistry registry;
  registry.Register("/validate-pod", std::make_shared<PodAllowValidator>());
  prometheus::Registry metrics;
  WebhookServer server(
      {.address = "127.0.0.1:0", .cert_dir = dir.path(), .threads = 1, .metrics = &metrics},
      &registry);
  ASSERT_TRUE(server.Start().ok());
  Client client(server.port(), pki.ca.cert_pem);
  std::string body = ReviewBody("admission.k8s.io/v1");
  std::string bad = "{";
  ASSERT_EQ(client.Call("/validate-pod", &body).code, 200);
  ASSERT_EQ(client.Call("/validate-pod", &body).code, 200);
  ASSERT_EQ(client.Call("/validate-pod", &bad).code, 400);
  server.Stop();
  std::string text = prometheus::TextSerializer().Serialize(metrics.Collect());
  EXPECT_THAT(text, HasSubstr("controller_runtime_webhook_requests_total{code=\"200\",webhook=\"/"
                              "validate-pod\"} 2"));
  EXPECT_THAT(text, HasSubstr("controller_runtime_webhook_requests_total{code=\"400\",webhook=\"/"
                              "validate-pod\"} 1"));
  EXPECT_THAT(text, HasSubstr("controller_runtime_webhook_latency_seconds_count{webhook=\"/"
                              "validate-pod\"} 3"));
  EXPECT_THAT(text, HasSubstr("controller_runtime_webhook_requests_in_flight{webhook=\"/"
                              "validate-pod\"} 0"));
}

TEST(WebhookServerStartTest, FailsOnMissingCertsAndBadAddress) {
  testing::TempDir dir;
  HandlerRegistry registry;
  WebhookServer missing({.address = "127.0.0.1:0", .cert_dir = dir.path()}, &registry);
  EXPECT_EQ(missing.Start().code(), absl::StatusCode::kNotFound);
  testing::WritePki(dir.path(), testing::MakePki());
  WebhookServer bad({.address = "nonsense", .cert_dir = dir.path()}, &registry);
  EXPECT_FALSE(bad.Start().ok());
  WebhookServer first({.address = "127.0.0.1:0", .cert_dir = dir.path()}, &registry);
  ASSERT_TRUE(first.Start().ok());
  WebhookServer second(
      {.address = absl::StrCat("127.0.0.1:", first.port()), .cert_dir = dir.path()}, &registry);
  EXPECT_EQ(second.Start().code(), absl::StatusCode::kUnavailable);
}

// ---- Issue 33: handlers off the I/O threads, limits ----------------------------------------

// The value of one sample of `metrics` (text format), -1 when absent.
double Sample(prometheus::Registry& metrics, const std::string& series) {
  const std::string text = prometheus::TextSerializer().Serialize(metrics.Collect());
  size_t at = text.find(series + " ");
  if (at == std::string::npos) return -1;
  return std::strtod(text.c_str() + at + series.size() + 1, nullptr);
}

// Polls `cond` every 5 ms until it holds or `timeout` passes.
bool Eventually(const std::function<bool()>& cond, absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!cond()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

std::string CrrReview(const std::string& uid) {
  Json review = Json::parse(R"({
    "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
    "request": {
      "kind": {"group": "apps.kruise.io", "version": "v1alpha1",
               "kind": "ContainerRecreateRequest"},
      "operation": "CREATE", "namespace": "default",
      "object": {"apiVersion": "apps.kruise.io/v1alpha1", "kind": "ContainerRecreateRequest",
                 "metadata": {"namespace": "default"},
                 "spec": {"podName": "slow-pod", "containers": [{"name": "app"}]}}}})");
  review["request"]["uid"] = uid;
  review["request"]["name"] = uid;
  review["request"]["object"]["metadata"]["name"] = uid;
  return review.dump();
}

// The API server answers pod GETs after 3 s (the brief's 20 s, shortened: the old server is
// stuck for as long as the GET takes). 5 CRR reviews wait on it; /healthz and an ordinary
// /mutate-pod on the same server must still answer at once.
TEST(WebhookServerIsolationTest, SlowCrrReviewsDoNotDelayHealthzOrPodAdmission) {
  testing::TempDir dir;
  testing::TestPki pki = testing::MakePki();
  testing::WritePki(dir.path(), pki);
  kruise::testing::FakeApiServer api;
  ASSERT_TRUE(api.Start().ok());
  api.SetPathLatency("GET", "/pods/", absl::Seconds(3));
  kube::RestClientOptions client_opts;
  client_opts.max_attempts = 1;
  auto client = kruise::testing::UnthrottledClientFor(api, client_opts);
  ASSERT_TRUE(client.ok()) << client.status();
  ApiPodReader pods(client->get());
  HandlerRegistry registry;
  RegisterCrrHandlers(&registry, &pods);
  std::vector<std::unique_ptr<PodMutator>> chain;
  chain.push_back(std::make_unique<ReadinessGateInjector>(/*all_pods=*/true));
  registry.Register(kMutatePodPath, std::make_shared<PodMutatingHandler>(
                                        std::move(chain), PodMutatingHandler::Options{}));
  prometheus::Registry metrics;
  WebhookServer server({.address = "127.0.0.1:0", .cert_dir = dir.path(), .metrics = &metrics},
                       &registry);
  ASSERT_TRUE(server.Start().ok());
  // Connections made (TLS handshakes done) before the slow reviews arrive.
  Client health(server.port(), pki.ca.cert_pem);
  Client pod(server.port(), pki.ca.cert_pem);
  std::string pod_review = ReviewBody("admission.k8s.io/v1");
  ASSERT_EQ(health.Call("/healthz", nullptr).code, 200);
  ASSERT_EQ(pod.Call(kMutatePodPath, &pod_review).code, 200);

  std::vector<std::thread> slow;
  std::vector<HttpResult> slow_results(5);
  for (int i = 0; i < 5; ++i) {
    slow.emplace_back([&, i] {
      Client c(server.port(), pki.ca.cert_pem);
      std::string review = CrrReview(absl::StrCat("crr-", i));
      slow_results[i] = c.Call(kCrrMutatePath, &review);
    });
  }
  const std::string in_flight = absl::StrCat(
      "controller_runtime_webhook_requests_in_flight{webhook=\"", kCrrMutatePath, "\"}");
  // The old server had no such gauge moment: its 4 threads were stuck before the reviews
  // counted; wait for at least 4 running, or for the GETs to be over (then the test fails below).
  Eventually([&] { return Sample(metrics, in_flight) >= 4; }, absl::Seconds(2));
  EXPECT_GE(Sample(metrics, in_flight), 4);
  for (int i = 0; i < 3; ++i) {
    HttpResult h = health.Call("/healthz", nullptr);
    EXPECT_EQ(h.code, 200);
    EXPECT_LT(h.took, absl::Milliseconds(100)) << "/healthz took " << h.took;
    HttpResult p = pod.Call(kMutatePodPath, &pod_review);
    EXPECT_EQ(p.code, 200);
    EXPECT_LT(p.took, absl::Milliseconds(100)) << "/mutate-pod took " << p.took;
  }
  EXPECT_GE(Sample(metrics, in_flight), 4);  // still waiting on the API server
  for (std::thread& t : slow) t.join();
  for (const HttpResult& r : slow_results) EXPECT_EQ(r.rc, CURLE_OK);
  server.Stop();
}

// A handler that blocks until released.
std::shared_ptr<FuncHandler> Blocking(absl::Notification* release) {
  return std::make_shared<FuncHandler>([release](const AdmissionRequest&) {
    release->WaitForNotification();
    return Allowed();
  });
}

TEST(WebhookServerLimitsTest, FullHandlerQueueAnswers429AtOnce) {
  testing::TempDir dir;
  testing::TestPki pki = testing::MakePki();
  testing::WritePki(dir.path(), pki);
  absl::Notification release;
  FailOpen fail_open({});
  HandlerRegistry registry;
  auto handler = Blocking(&release);
  registry.Register("/ignore", handler);
  registry.SetFailOpen("/ignore", &fail_open);
  registry.Register("/fail", handler);
  prometheus::Registry metrics;
  WebhookServer server({.address = "127.0.0.1:0",
                        .cert_dir = dir.path(),
                        .handler_threads = 1,
                        .handler_queue = 1,
                        .metrics = &metrics},
                       &registry);
  ASSERT_TRUE(server.Start().ok());
  std::string review = ReviewBody("admission.k8s.io/v1");
  HttpResult first, second;
  std::thread a([&] { first = Client(server.port(), pki.ca.cert_pem).Call("/ignore", &review); });
  ASSERT_TRUE(Eventually([&] {
    return Sample(metrics, "controller_runtime_webhook_requests_in_flight{webhook=\"/ignore\"}") ==
           1;
  }));
  std::thread b([&] { second = Client(server.port(), pki.ca.cert_pem).Call("/ignore", &review); });
  ASSERT_TRUE(Eventually([&] { return server.queued_reviews() == 1; }));

  HttpResult busy = Client(server.port(), pki.ca.cert_pem).Call("/ignore", &review);
  EXPECT_EQ(busy.code, 429);
  EXPECT_LT(busy.took, absl::Seconds(1));
  // failurePolicy Ignore: no Retry-After, so the API server does not retry and allows at once.
  EXPECT_THAT(busy.headers, ::testing::Not(HasSubstr("Retry-After")));
  HttpResult busy_fail = Client(server.port(), pki.ca.cert_pem).Call("/fail", &review);
  EXPECT_EQ(busy_fail.code, 429);
  EXPECT_THAT(busy_fail.headers, HasSubstr("Retry-After: 1"));
  EXPECT_EQ(server.requests_rejected(), 2);

  release.Notify();
  a.join();
  b.join();
  EXPECT_EQ(first.code, 200);
  EXPECT_EQ(second.code, 200);
  server.Stop();
}

TEST(WebhookServerLimitsTest, ReviewsOverTheMemoryBudgetGet429BeforeTheirBody) {
  testing::TempDir dir;
  testing::TestPki pki = testing::MakePki();
  testing::WritePki(dir.path(), pki);
  absl::Notification release;
  HandlerRegistry registry;
  registry.Register("/validate-pod", Blocking(&release));
  prometheus::Registry metrics;
  WebhookServer server({.address = "127.0.0.1:0",
                        .cert_dir = dir.path(),
                        .max_body_bytes = 4 << 20,
                        .decode_budget_bytes = 1 << 20,
                        .decode_cost_factor = 1,
                        .metrics = &metrics},
                       &registry);
  ASSERT_TRUE(server.Start().ok());
  Json review = Json::parse(ReviewBody("admission.k8s.io/v1"));
  review["request"]["object"]["metadata"]["annotations"]["big"] = std::string(600 << 10, 'x');
  const std::string big = review.dump();
  HttpResult first;
  std::thread a(
      [&] { first = Client(server.port(), pki.ca.cert_pem).Call("/validate-pod", &big); });
  ASSERT_TRUE(Eventually([&] {
    return Sample(metrics,
                  "controller_runtime_webhook_requests_in_flight{webhook=\"/validate-pod\"}") == 1;
  }));
  HttpResult over = Client(server.port(), pki.ca.cert_pem).Call("/validate-pod", &big);
  EXPECT_EQ(over.code, 429);
  EXPECT_THAT(over.body, HasSubstr("memory budget"));
  // A small review still fits next to the large one.
  std::string small = ReviewBody("admission.k8s.io/v1");
  HttpResult fits;
  std::thread c(
      [&] { fits = Client(server.port(), pki.ca.cert_pem).Call("/validate-pod", &small); });
  ASSERT_TRUE(Eventually([&] {
    return Sample(metrics,
                  "controller_runtime_webhook_requests_in_flight{webhook=\"/validate-pod\"}") == 2;
  }));
  release.Notify();
  a.join();
  c.join();
  EXPECT_EQ(first.code, 200);
  EXPECT_EQ(fits.code, 200);
  // The budget is given back with the answers.
  EXPECT_EQ(Client(server.port(), pki.ca.cert_pem).Call("/validate-pod", &big).code, 200);
  server.Stop();
}

TEST(WebhookServerLimitsTest, ConnectionsBeyondMaxSessionsAreRefused) {
  testing::TempDir dir;
  testing::TestPki pki = testing::MakePki();
  testing::WritePki(dir.path(), pki);
  HandlerRegistry registry;
  WebhookServer server({.address = "127.0.0.1:0", .cert_dir = dir.path(), .max_sessions = 2},
                       &registry);
  ASSERT_TRUE(server.Start().ok());
  Client one(server.port(), pki.ca.cert_pem), two(server.port(), pki.ca.cert_pem);
  ASSERT_EQ(one.Call("/healthz", nullptr).code, 200);
  ASSERT_EQ(two.Call("/healthz", nullptr).code, 200);
  HttpResult third = Client(server.port(), pki.ca.cert_pem).Call("/healthz", nullptr);
  EXPECT_NE(third.rc, CURLE_OK);
  EXPECT_EQ(server.sessions_refused(), 1);
  EXPECT_EQ(one.Call("/healthz", nullptr).code, 200);  // the kept ones still serve
  server.Stop();
}

// The child of AcceptPausesOnEmfileInsteadOfSpinning (the same binary, re-executed; disabled
// otherwise): serves with every descriptor taken, so each accept fails with EMFILE, and writes its
// port to the inherited pipe once that is so.
TEST(WebhookServerEmfileChild, DISABLED_Serve) {
  const char* pipe_fd = std::getenv("KRUISE_EMFILE_CHILD_PIPE");
  ASSERT_NE(pipe_fd, nullptr);
  testing::TempDir dir;
  testing::WritePki(dir.path(), testing::MakePki());
  HandlerRegistry registry;
  WebhookServer server({.address = "127.0.0.1:0", .cert_dir = dir.path()}, &registry);
  ASSERT_TRUE(server.Start().ok());
  // Every descriptor below the lowest free one is taken: a limit there makes the next accept
  // fail with EMFILE.
  const int lowest_free = dup(0);
  ASSERT_GE(lowest_free, 0);
  close(lowest_free);
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = static_cast<rlim_t>(lowest_free);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lim), 0);
  const std::string port = absl::StrCat(server.port(), "\n");
  ASSERT_EQ(write(std::atoi(pipe_fd), port.data(), port.size()),
            static_cast<ssize_t>(port.size()));
  absl::SleepFor(absl::Seconds(30));  // killed by the parent
}

// CPU seconds (user + system) of process `pid`.
double CpuSeconds(pid_t pid) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t close_paren = stat.rfind(')');
  if (close_paren == std::string::npos) return -1;
  std::istringstream rest(stat.substr(close_paren + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

TEST(WebhookServerLimitsTest, AcceptPausesOnEmfileInsteadOfSpinning) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);  // the write end is inherited by the child
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    setenv("KRUISE_EMFILE_CHILD_PIPE", std::to_string(fds[1]).c_str(), 1);
    execl("/proc/self/exe", "webhook_server_test", "--gtest_also_run_disabled_tests",
          "--gtest_filter=WebhookServerEmfileChild.DISABLED_Serve", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  char buf[32] = {0};
  ssize_t n = read(fds[0], buf, sizeof(buf) - 1);  // blocks until the child serves (or dies)
  close(fds[0]);
  ASSERT_GT(n, 0) << "the child did not start";
  const int port = std::atoi(buf);
  ASSERT_GT(port, 0);
  // A connection the child cannot accept: it stays in the backlog, the listener readable.
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  absl::SleepFor(absl::Milliseconds(200));  // let the first accepts fail
  const double before = CpuSeconds(child);
  absl::SleepFor(absl::Seconds(1));  // the measuring window
  const double used = CpuSeconds(child) - before;
  close(fd);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  // A spinning accept loop burns a whole CPU (~1 s here); paused accepts cost nothing.
  EXPECT_LT(used, 0.2) << "the child used " << used << " s of CPU in 1 s";
}

}  // namespace
}  // namespace kruise::manager::webhook
