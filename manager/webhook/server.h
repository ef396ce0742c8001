#pragma once

// WebhookServer: the HTTPS admission-webhook listener (Boost.Beast over Asio + OpenSSL, HTTP/1.1
// keep-alive, event-driven: `threads` threads run all connections). Serves every path of a
// HandlerRegistry (POST AdmissionReview) and an always-200 GET /healthz on the same TLS port. The
// certificate comes from a cert dir (tls.crt/tls.key) through tls::CertReloader, so rotated files
// are served to new connections without a restart.
//
//   WebhookServer server({.address = ":9876", .cert_dir = "/tmp/k8s-webhook-server/serving-certs"},
//                        &registry);
//   RETURN_IF_ERROR(server.Start());   // binds, loads the certs, serves on background threads
//   ...
//   server.Stop();                     // stops accepting, finishes in-flight requests, joins
//
// Threads (issue 33): `threads` I/O threads run the connections (TLS, HTTP framing, /healthz) and
// never run a handler; decoding, the handler and encoding run on `handler_threads` handler
// threads fed by a bounded queue. A handler that blocks on the API server (the CRR mutator's pod
// GET, a PUB or WorkloadSpread status write) holds one handler thread, at most
// `max_running_per_handler` of them per handler, so one slow kind of review cannot take every
// thread from the others (ordinary pods keep being admitted while CRR reviews wait), and never
// delays /healthz (the readiness probe's round trip) or the reading of other requests.
// Limits:
//   * request bodies above `max_body_bytes` get 413 (default 4 MiB: kube-apiserver accepts request
//     bodies up to 3 MiB and etcd stores objects up to 1.5 MiB, so a CREATE review carries at
//     most ~3 MiB and an UPDATE review two stored objects; plus the envelope);
//   * memory: an admission body of N bytes is charged `decode_cost_factor` x N (what decoding it
//     costs at its peak: the body, simdjson's tape, the nlohmann DOM: 13x for a 4 MiB pod of
//     small fields, bench/webhook/README.md) against `decode_budget_bytes` (112 MiB: two 4 MiB
//     reviews; with the manager's caches and full sessions inside its 256 MiB limit) from its
//     headers (Content-Length) until its answer is ready; a review that does not fit while others
//     are in flight gets 429 before its body is read (one review always fits, however large).
//     After a review over 1 MiB the heap is trimmed (malloc_trim), so RSS follows;
//   * a full handler queue (or a handler at its share) answers 429 at once;
//   * at most `max_sessions` (512) connections: more are closed as soon as accepted. An idle TLS
//     connection costs ~72 KiB (Asio's two 17 KiB TLS record buffers and its BIO pair's two),
//     so 512 hold at most ~36 MiB;
//   * accept errors for lack of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) pause
//     accepting for `accept_backoff` instead of retrying in a busy loop;
//   * read and write timeouts per socket operation; idle keep-alive connections close after
//     `idle_timeout`.
// 429s: on a failurePolicy Ignore path (HandlerRegistry::SetFailOpen) without Retry-After, which
// kube-apiserver's client does not retry, so the API server applies Ignore (allows) at once; on
// other paths with "Retry-After: 1", which it retries within the webhook's timeout.
// HTTP/1.1 only (no ALPN "h2" is offered, so kube-apiserver's webhook client keeps HTTP/1.1
// connections alive and reuses them).
// Why not cpp-httplib (used for the probe ports): it parks one thread per open connection, and its
// keep-alive wait polls in 10 ms slices followed by a 1 ms sleep, so a request arriving on an idle
// keep-alive connection waited up to 1 ms before being read (p50 1.3 ms at 1,000 req/s).
// Thread-safety: Start/Stop from one thread; the registry must not change while serving.

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/tls.h"
#include "manager/webhook/admission.h"

namespace prometheus {
class Registry;
}

namespace kruise::manager::webhook {

class WebhookServer {
 public:
  struct Options {
    std::string address = ":9876";  // see ParseListenAddress
    std::string cert_dir = "";      // holds tls.crt and tls.key (cert_file/key_file override)
    std::string cert_file = "";
    std::string key_file = "";
    size_t max_body_bytes = 4 << 20;
    absl::Duration read_timeout = absl::Seconds(10);
    absl::Duration write_timeout = absl::Seconds(10);
    // Idle keep-alive connections are closed after this. Stop() closes idle connections at once
    // and lets requests in flight finish (bounded by the timeouts above).
    absl::Duration idle_timeout = absl::Seconds(10);
    int threads = 2;  // I/O threads: connections, TLS, HTTP framing, /healthz
    // Handler threads (decode, handler, encode) and their queue; a handler (one Handler object,
    // whatever paths it serves) runs on at most max_running_per_handler threads at once
    // (0: handler_threads / 2, at least 1).
    int handler_threads = 8;
    int handler_queue = 256;
    int max_running_per_handler = 0;
    // Bytes of decode memory in flight (body size x factor), see "Limits".
    size_t decode_budget_bytes = 112 << 20;
    double decode_cost_factor = 14;
    int max_sessions = 512;
    absl::Duration accept_backoff = absl::Milliseconds(100);
    Clock* clock = Clock::Real();
    absl::Duration cert_poll_interval = absl::Seconds(2);
    // When set, controller-runtime's webhook metrics (the names OpenKruise's manager exports), by
    // path: controller_runtime_webhook_latency_seconds (review read -> reply ready),
    // controller_runtime_webhook_requests_total{code},
    // controller_runtime_webhook_requests_in_flight.
    prometheus::Registry* metrics = nullptr;
  };

  WebhookServer(Options options, const HandlerRegistry* registry);
  ~WebhookServer();
  WebhookServer(const WebhookServer&) = delete;
  WebhookServer& operator=(const WebhookServer&) = delete;

  // Errors: kInvalidArgument (address), kNotFound/kInvalidArgument (certs), kUnavailable (bind).
  absl::Status Start();
  void Stop();
  int port() const { return port_; }
  tls::CertReloader* cert_reloader() { return reloader_.get(); }
  int64_t requests_served() const { return requests_.load(); }
  // Answered 429 (busy, over budget) and connections refused over max_sessions, since Start().
  int64_t requests_rejected() const { return rejected_.load(); }
  int64_t sessions_refused() const { return refused_.load(); }
  // Reviews waiting for a handler thread.
  int64_t queued_reviews() const;
  // Accept errors that paused accepting (EMFILE, ...).
  int64_t accept_pauses() const { return accept_pauses_.load(); }

  struct Impl;  // server.cc (public only so its connection class can name it)

 private:
  Options options_;
  const HandlerRegistry* registry_;
  std::unique_ptr<tls::CertReloader> reloader_;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::atomic<int64_t> requests_{0};
  std::atomic<int64_t> rejected_{0};
  std::atomic<int64_t> refused_{0};
  std::atomic<int64_t> accept_pauses_{0};
};

}  // namespace kruise::manager::webhook
