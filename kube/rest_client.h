#pragma once

// RestKubeClient: KubeClient over HTTPS with libcurl.
//
// - Connections: a free-list of CURL easy handles; a handle goes back to the list after each
// request,
//   so its open connections (HTTP/1.1 keep-alive or HTTP/2, negotiated by ALPN) are reused.
// - TLS: verification on unless the config says insecure; CA, client cert and key from memory or
//   files; TLS 1.2 minimum. A server certificate that does not verify gives kUnauthenticated with a
//   message naming TLS verification.
// - Auth: bearer token from BearerTokenSource (re-read when the file rotates, and once after a 401
//   before the request is retried), or a client certificate.
// - Throttle: client-side token bucket (RestConfig qps/burst) on the injected clock.
// - Retries: GET/LIST on connection errors and 500/502/503/504 with exponential backoff and jitter;
//   every verb on 429, waiting for Retry-After; connection refused for every verb (nothing was
//   sent).
// - Deadlines: a ScopedCallDeadline on the calling thread (call_deadline.h) bounds each call: no
//   throttle wait, attempt or retry past it, each attempt's timeout capped at what is left
//   (kDeadlineExceeded). Watches ignore it.
// - Lists fill in `kind`/`apiVersion` on each item (the server omits them) so items are
//   self-describing objects.
//
// Thread-safe; every call blocks (see client.h). Never logs tokens or keys.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "kube/client.h"
#include "kube/config.h"
#include "kube/throttle.h"

typedef void CURL;  // NOLINT: libcurl's own declaration, so this header need not include curl.h

namespace kruise::kube {

struct RestClientOptions {
  int max_attempts = 5;  // per request, first try included
  absl::Duration initial_backoff = absl::Milliseconds(200);
  absl::Duration max_backoff = absl::Seconds(5);
  absl::Duration default_retry_after = absl::Seconds(1);  // 429 without Retry-After
  absl::Duration max_retry_after = absl::Seconds(30);     // cap on server-requested waits
  // A watch that receives no byte for this long is treated as dead (kUnavailable). With
  // ListOptions.timeout_seconds set, timeout_seconds + 30s is used instead.
  absl::Duration watch_idle_timeout = absl::Minutes(5);
  size_t max_idle_handles = 16;
  // Longest wait for the client-side throttle (RestConfig qps/burst) before a request; past it
  // the request fails with kResourceExhausted. The admission handlers' client bounds it so that
  // every call stays within the webhook's deadline; the controllers' waits as long as it takes.
  absl::Duration max_throttle_wait = absl::InfiniteDuration();
  // Called after every HTTP attempt (retries included) with the method ("GET", "PATCH", ...,
  // "WATCH" for watch streams) and the HTTP status, 0 when no response arrived. For metrics; runs
  // on the calling thread, must be cheap and thread-safe, must not call back into the client.
  std::function<void(absl::string_view method, long http_code)> on_request;
};

// "/api/v1/namespaces/NS/pods/NAME/status", "/apis/apps.kruise.io/v1alpha1/nodeimages". `ns` is
// ignored for cluster-scoped resources; `name` and `subresource` may be empty. Segments are
// escaped.
std::string ResourcePath(const Resource& r, const std::string& ns, const std::string& name = "",
                         const std::string& subresource = "");

// "?labelSelector=...&limit=..." (empty when no option is set); `watch` adds watch=1 and the
// watch-only options.
std::string ListQuery(const ListOptions& opts, bool watch);

// Percent-encodes everything but RFC 3986 unreserved characters.
std::string UrlEscape(const std::string& s);

class RestKubeClient final : public KubeClient {
 public:
  // Validates the config (host, readable CA/cert/key files) and prepares the client. `clock` must
  // outlive the client.
  static absl::StatusOr<std::unique_ptr<RestKubeClient>> Create(RestConfig config,
                                                                Clock* clock = Clock::Real(),
                                                                RestClientOptions options = {});
  ~RestKubeClient() override;
  RestKubeClient(const RestKubeClient&) = delete;
  RestKubeClient& operator=(const RestKubeClient&) = delete;

  // KubeClient
  absl::StatusOr<Json> Get(const Resource& r, const std::string& ns,
                           const std::string& name) override;
  absl::StatusOr<ListResult> List(const Resource& r, const std::string& ns,
                                  const ListOptions& opts) override;
  absl::StatusOr<Json> Create(const Resource& r, const std::string& ns, const Json& obj) override;
  absl::StatusOr<Json> Update(const Resource& r, const std::string& ns, const Json& obj,
                              const std::string& subresource = "") override;
  absl::StatusOr<Json> Patch(const Resource& r, const std::string& ns, const std::string& name,
                             PatchType type, const Json& patch,
                             const std::string& subresource = "") override;
  absl::Status Delete(const Resource& r, const std::string& ns, const std::string& name,
                      const DeleteOptions& opts = {}) override;
  absl::Status Watch(const Resource& r, const std::string& ns, const ListOptions& opts,
                     const WatchHandler& handler, WatchCanceller* canceller) override;

  // GET of an arbitrary API path ("/version", "/apis"), with the same auth, throttle and retries.
  absl::StatusOr<Json> GetPath(const std::string& path_and_query);

  const RestConfig& config() const { return config_; }
  // HTTP attempts made so far (retries included); for tests and metrics.
  int64_t attempts() const { return attempts_.load(); }

 private:
  struct Request;
  struct Response;
  class HandlePool;

  RestKubeClient(RestConfig config, Clock* clock, RestClientOptions options);

  absl::StatusOr<Response> Execute(const Request& req);
  Response PerformOnce(const Request& req, const std::string& token,
                       std::optional<absl::Time> deadline);
  absl::StatusOr<Json> ExecuteJson(const Request& req);
  absl::Status ApplyCommonOptions(CURL* c, const std::string& url, char* errbuf);
  absl::Duration Backoff(int attempt);

  const RestConfig config_;
  Clock* const clock_;
  const RestClientOptions options_;
  BearerTokenSource tokens_;
  TokenBucket throttle_;
  std::unique_ptr<HandlePool> pool_;
  std::atomic<int64_t> attempts_{0};
  absl::Mutex rng_mu_;
  absl::BitGen rng_ ABSL_GUARDED_BY(rng_mu_);
};

}  // namespace kruise::kube
