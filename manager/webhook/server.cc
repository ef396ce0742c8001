#include "manager/webhook/server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <chrono>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/health_server.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "httplib.h"

namespace kruise::manager::webhook {

WebhookServer::WebhookServer(Options options, const HandlerRegistry* registry)
    : options_(std::move(options)), registry_(registry) {
  if (options_.cert_file.empty()) options_.cert_file = options_.cert_dir + "/" + tls::kTlsCertFile;
  if (options_.key_file.empty()) options_.key_file = options_.cert_dir + "/" + tls::kTlsKeyFile;
}

WebhookServer::~WebhookServer() { Stop(); }

absl::Status WebhookServer::Start() {
  if (server_) return absl::FailedPreconditionError("webhook server already started");
  ASSIGN_OR_RETURN(HostPort hp, ParseListenAddress(options_.address));
  reloader_ = std::make_unique<tls::CertReloader>(tls::CertReloader::Options{
      .cert_file = options_.cert_file,
      .key_file = options_.key_file,
      .clock = options_.clock,
      .poll_interval = options_.cert_poll_interval,
  });
  RETURN_IF_ERROR(Annotate(reloader_->Load(), "loading webhook certificate"));

  absl::Status ctx_status;
  tls::CertReloader* reloader = reloader_.get();
  auto server = std::make_unique<httplib::SSLServer>([&](SSL_CTX& ctx) {
    ctx_status = tls::ConfigureServerCtx(&ctx);
    if (!ctx_status.ok()) return false;
    reloader->Install(&ctx);
    return true;
  });
  if (!ctx_status.ok()) return ctx_status;
  if (!server->is_valid()) return absl::InternalError("cannot create the TLS server context");

  int threads = options_.threads;
  server->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // SO_REUSEADDR only (httplib's default adds SO_REUSEPORT: see docs/conventions.md), and no Nagle:
  // a response is written as headers + body and must not wait for the peer's delayed ACK.
  server->set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
  });
  server->set_payload_max_length(options_.max_body_bytes);
  server->set_read_timeout(
      std::chrono::microseconds(absl::ToInt64Microseconds(options_.read_timeout)));
  server->set_write_timeout(
      std::chrono::microseconds(absl::ToInt64Microseconds(options_.write_timeout)));
  server->set_keep_alive_timeout(
      std::max<time_t>(1, static_cast<time_t>(absl::ToInt64Seconds(options_.idle_timeout))));
  server->set_keep_alive_max_count(std::numeric_limits<int>::max());

  server->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok", "text/plain");
  });
  for (const std::string& path : registry_->Paths()) {
    Handler* handler = registry_->Find(path);
    server->Post(path, [this, handler](const httplib::Request& req, httplib::Response& res) {
      HttpReply reply = ServeAdmission(*handler, req.body);
      requests_.fetch_add(1, std::memory_order_relaxed);
      res.status = reply.status;
      res.set_content(std::move(reply.body), reply.content_type.c_str());
    });
  }
  server->set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) {
      std::string msg;
      switch (res.status) {
        case 404:
          msg = "no admission handler at this path\n";
          break;
        case 413:
          msg = "request body too large\n";
          break;
        default:
          msg = absl::StrCat("HTTP ", res.status, "\n");
      }
      res.set_content(msg, "text/plain");
    }
  });

  if (hp.port == 0) {
    port_ = server->bind_to_any_port(hp.host);
  } else {
    port_ = server->bind_to_port(hp.host, hp.port) ? hp.port : 0;
  }
  if (port_ <= 0) {
    port_ = 0;
    return absl::UnavailableError(absl::StrCat("cannot bind webhook server to ", options_.address));
  }
  server_ = std::move(server);
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // cpp-httplib's stop() does nothing until the listen loop runs (Stop() would then join forever),
  // so Start returns only once it does.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!server_->is_running() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  if (!server_->is_running()) {
    return absl::UnavailableError(
        absl::StrCat("webhook server on ", options_.address, " did not start within 10s"));
  }
  reloader_->Start();
  Logger("webhook")->info("webhook server listening on {}:{} ({} handlers)", hp.host, port_,
                          registry_->Paths().size());
  return absl::OkStatus();
}

void WebhookServer::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
  if (reloader_) reloader_->Stop();
  server_.reset();
}

}  // namespace kruise::manager::webhook
