// WebhookServer, CertReloader and ReadinessChecker over real TLS on 127.0.0.1.

#include "manager/webhook/server.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "manager/webhook/pod_handlers.h"
#include "manager/webhook/readiness.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
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
  long new_connections = 0;
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
    curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
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
    r.rc = curl_easy_perform(h);
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

}  // namespace
}  // namespace kruise::manager::webhook
