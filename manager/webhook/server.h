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
// Limits: request bodies above `max_body_bytes` get 413 (default 4 MiB: an AdmissionReview carries
// object and oldObject, each up to etcd's 1.5 MiB object limit, plus the envelope); read and write
// timeouts per socket operation; idle keep-alive connections close after `idle_timeout`.
// HTTP/1.1 only (no ALPN "h2" is offered, so kube-apiserver's webhook client keeps HTTP/1.1
// connections alive and reuses them).
// Why not cpp-httplib (used for the probe ports): it parks one thread per open connection, and its
// keep-alive wait polls in 10 ms slices followed by a 1 ms sleep, so a request arriving on an idle
// keep-alive connection waited up to 1 ms before being read (p50 1.3 ms at 1,000 req/s).
// Handlers run on the server threads: a handler that blocks (the CRR mutator reads the pod from the
// API server) holds one of them, so `threads` bounds concurrent blocking handlers.
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
    int threads = 4;  // threads running connections and handlers
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

  struct Impl;  // server.cc (public only so its connection class can name it)

 private:
  Options options_;
  const HandlerRegistry* registry_;
  std::unique_ptr<tls::CertReloader> reloader_;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::atomic<int64_t> requests_{0};
};

}  // namespace kruise::manager::webhook
