#include "manager/webhook/server.h"

#include <algorithm>
#include <array>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <map>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/health_server.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace kruise::manager::webhook {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

std::chrono::nanoseconds ToChrono(absl::Duration d) {
  return std::chrono::nanoseconds(absl::ToInt64Nanoseconds(d));
}

class Session;

}  // namespace

struct WebhookServer::Impl {
  Impl(const Options* opts, const HandlerRegistry* reg, std::atomic<int64_t>* served)
      : options(opts),
        registry(reg),
        requests(served),
        ssl_ctx(asio::ssl::context::tls_server),
        acceptor(ioc) {}

  void Accept();
  // False once stopping: the caller closes the connection instead of serving it.
  bool Register(const std::shared_ptr<Session>& s);
  void Unregister(Session* s) {
    absl::MutexLock lock(&mu);
    sessions.erase(s);
  }

  struct PathMetrics {
    prometheus::Histogram* latency = nullptr;
    prometheus::Gauge* in_flight = nullptr;
    prometheus::Family<prometheus::Counter>* requests = nullptr;
  };
  // Filled before serving, then read-only; empty without Options::metrics.
  std::map<std::string, PathMetrics, std::less<>> metrics;

  const Options* options;
  const HandlerRegistry* registry;
  std::atomic<int64_t>* requests;
  asio::io_context ioc;
  asio::ssl::context ssl_ctx;
  tcp::acceptor acceptor;
  std::vector<std::thread> threads;
  absl::Mutex mu;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions ABSL_GUARDED_BY(mu);
};

namespace {

// One TLS connection: handshake, then read request / run handler / write reply until the peer
// closes, a timeout fires, or the server stops. All of a session's work runs on its strand.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, WebhookServer::Impl* server)
      : stream_(std::move(socket), server->ssl_ctx), server_(server) {}
  ~Session() { server_->Unregister(this); }

  void Start() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->Handshake(); });
  }

  // From any thread: an idle connection closes now, one with a request in flight after replying.
  void Close() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      self->closing_ = true;
      if (self->waiting_) beast::get_lowest_layer(self->stream_).cancel();
    });
  }

 private:
  const WebhookServer::Options& opts() const { return *server_->options; }

  void Handshake() {
    beast::get_lowest_layer(stream_).expires_after(ToChrono(opts().read_timeout));
    waiting_ = true;
    stream_.async_handshake(asio::ssl::stream_base::server,
                            [self = shared_from_this()](beast::error_code ec) {
                              self->waiting_ = false;
                              if (ec) return self->Shutdown();
                              self->Read();
                            });
  }

  void Read() {
    if (closing_) return Shutdown();
    parser_.emplace();
    parser_->body_limit(opts().max_body_bytes);
    // Covers waiting for the next request on a kept-alive connection and reading it.
    beast::get_lowest_layer(stream_).expires_after(ToChrono(opts().idle_timeout));
    waiting_ = true;
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->waiting_ = false;
                       self->OnRead(ec);
                     });
  }

  void OnRead(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      // Answered from the headers: the client may still be sending the body.
      unread_input_ = true;
      return Reply(413, "request body too large\n", "text/plain", /*keep_alive=*/false, 11);
    }
    if (ec && &ec.category() == &http::make_error_code(http::error::bad_method).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      unread_input_ = true;
      return Reply(400, absl::StrCat("malformed HTTP request: ", ec.message(), "\n"), "text/plain",
                   false, 11);
    }
    if (ec) return Shutdown();  // peer closed, timeout, TLS error, or Close()
    Serve(parser_->release());
  }

  void Serve(http::request<http::string_body> req) {
    const bool keep_alive = req.keep_alive();
    const unsigned version = req.version();
    beast::string_view target = req.target();
    target = target.substr(0, target.find('?'));
    if (target == "/healthz") {
      if (req.method() != http::verb::get && req.method() != http::verb::head) {
        return Reply(405, "use GET\n", "text/plain", keep_alive, version);
      }
      return Reply(200, "ok", "text/plain", keep_alive, version);
    }
    Handler* handler = server_->registry->Find(absl::string_view(target.data(), target.size()));
    if (handler == nullptr) {
      return Reply(404, "no admission handler at this path\n", "text/plain", keep_alive, version);
    }
    if (req.method() != http::verb::post) {
      return Reply(405, "admission reviews are POSTed\n", "text/plain", keep_alive, version);
    }
    auto m = server_->metrics.find(absl::string_view(target.data(), target.size()));
    const WebhookServer::Impl::PathMetrics* pm = m == server_->metrics.end() ? nullptr : &m->second;
    if (pm != nullptr) pm->in_flight->Increment();
    const auto start = std::chrono::steady_clock::now();
    HttpReply reply = ServeAdmission(*handler, req.body());
    if (pm != nullptr) {
      pm->latency->Observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      pm->in_flight->Decrement();
      pm->requests->Add({{"webhook", m->first}, {"code", std::to_string(reply.status)}})
          .Increment();
    }
    server_->requests->fetch_add(1, std::memory_order_relaxed);
    Reply(reply.status, std::move(reply.body), reply.content_type, keep_alive, version);
  }

  void Reply(int status, std::string body, const std::string& content_type, bool keep_alive,
             unsigned version) {
    response_ = {};
    response_.version(version);
    response_.result(static_cast<unsigned>(status));
    response_.set(http::field::content_type, content_type);
    response_.body() = std::move(body);
    response_.keep_alive(keep_alive && !closing_);
    response_.prepare_payload();
    beast::get_lowest_layer(stream_).expires_after(ToChrono(opts().write_timeout));
    http::async_write(stream_, response_,
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        if (ec) return self->Shutdown();
                        if (!self->response_.keep_alive()) {
                          return self->unread_input_ ? self->Drain() : self->Shutdown();
                        }
                        self->Read();
                      });
  }

  // After an early error reply: stop sending, then read and drop what the client still sends
  // until it closes (bounded by the read timeout). Closing at once would reset the connection
  // and the client could lose the reply it has not read yet.
  void Drain() {
    auto& tcp = beast::get_lowest_layer(stream_);
    beast::error_code ignored;
    tcp.socket().shutdown(tcp::socket::shutdown_send, ignored);
    tcp.expires_after(ToChrono(std::min(opts().read_timeout, absl::Seconds(5))));
    waiting_ = true;
    DrainSome();
  }
  void DrainSome() {
    beast::get_lowest_layer(stream_).async_read_some(
        asio::buffer(drain_buf_), [self = shared_from_this()](beast::error_code ec, size_t) {
          if (ec) {
            self->waiting_ = false;
            return self->Shutdown();
          }
          self->DrainSome();
        });
  }

  // Closes the TCP connection (no TLS close_notify: the apiserver's client does not need one and
  // a peer that stopped reading must not hold us).
  void Shutdown() {
    beast::error_code ignored;
    auto& socket = beast::get_lowest_layer(stream_).socket();
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
  }

  beast::ssl_stream<beast::tcp_stream> stream_;
  WebhookServer::Impl* server_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> response_;
  bool unread_input_ = false;
  std::array<char, 16384> drain_buf_;
  bool waiting_ = false;  // for the peer: in the handshake or between requests
  bool closing_ = false;
};

}  // namespace

bool WebhookServer::Impl::Register(const std::shared_ptr<Session>& s) {
  absl::MutexLock lock(&mu);
  if (stopping) return false;
  sessions.emplace(s.get(), s);
  return true;
}

void WebhookServer::Impl::Accept() {
  acceptor.async_accept(asio::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
      Logger("webhook")->warn("accept: {}", ec.message());
    } else {
      beast::error_code ignored;
      // No Nagle: a reply is written as headers + body and must not wait for a delayed ACK.
      socket.set_option(tcp::no_delay(true), ignored);
      auto session = std::make_shared<Session>(std::move(socket), this);
      if (!Register(session)) return;  // stopping: the socket closes with the session
      session->Start();
    }
    Accept();
  });
}

WebhookServer::WebhookServer(Options options, const HandlerRegistry* registry)
    : options_(std::move(options)), registry_(registry) {
  if (options_.cert_file.empty()) options_.cert_file = options_.cert_dir + "/" + tls::kTlsCertFile;
  if (options_.key_file.empty()) options_.key_file = options_.cert_dir + "/" + tls::kTlsKeyFile;
}

WebhookServer::~WebhookServer() { Stop(); }

absl::Status WebhookServer::Start() {
  if (impl_) return absl::FailedPreconditionError("webhook server already started");
  ASSIGN_OR_RETURN(HostPort hp, ParseListenAddress(options_.address));
  beast::error_code ec;
  asio::ip::address ip = asio::ip::make_address(hp.host == "localhost" ? "127.0.0.1" : hp.host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("webhook address ", options_.address, ": host must be an IP address"));
  }
  reloader_ = std::make_unique<tls::CertReloader>(tls::CertReloader::Options{
      .cert_file = options_.cert_file,
      .key_file = options_.key_file,
      .clock = options_.clock,
      .poll_interval = options_.cert_poll_interval,
  });
  RETURN_IF_ERROR(Annotate(reloader_->Load(), "loading webhook certificate"));

  auto impl = std::make_unique<Impl>(&options_, registry_, &requests_);
  if (options_.metrics != nullptr) {
    auto& latency = prometheus::BuildHistogram()
                        .Name("controller_runtime_webhook_latency_seconds")
                        .Help("Time to answer an admission review, by webhook path")
                        .Register(*options_.metrics);
    auto& in_flight = prometheus::BuildGauge()
                          .Name("controller_runtime_webhook_requests_in_flight")
                          .Help("Admission reviews being answered, by webhook path")
                          .Register(*options_.metrics);
    auto& requests = prometheus::BuildCounter()
                         .Name("controller_runtime_webhook_requests_total")
                         .Help("Admission reviews answered, by webhook path and HTTP code")
                         .Register(*options_.metrics);
    // Sub-millisecond buckets: an admission takes tens to hundreds of microseconds here.
    const prometheus::Histogram::BucketBoundaries buckets{
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 10};
    for (const std::string& path : registry_->Paths()) {
      impl->metrics[path] = {&latency.Add({{"webhook", path}}, buckets),
                             &in_flight.Add({{"webhook", path}}), &requests};
    }
  }
  RETURN_IF_ERROR(tls::ConfigureServerCtx(impl->ssl_ctx.native_handle()));
  reloader_->Install(impl->ssl_ctx.native_handle());

  tcp::endpoint endpoint(ip, static_cast<uint16_t>(hp.port));
  tcp::acceptor& acceptor = impl->acceptor;
  // SO_REUSEADDR only: no SO_REUSEPORT, so a second server on the same port fails to bind instead
  // of silently sharing it (docs/conventions.md).
  if (acceptor.open(endpoint.protocol(), ec) ||
      acceptor.set_option(tcp::acceptor::reuse_address(true), ec) || acceptor.bind(endpoint, ec) ||
      acceptor.listen(asio::socket_base::max_listen_connections, ec)) {
    return absl::UnavailableError(
        absl::StrCat("cannot bind webhook server to ", options_.address, ": ", ec.message()));
  }
  port_ = acceptor.local_endpoint(ec).port();
  impl->Accept();
  const int threads = std::max(1, options_.threads);
  for (int i = 0; i < threads; ++i) {
    impl->threads.emplace_back([raw = impl.get()] {
      // Handlers do not throw (ServeAdmission turns exceptions into denials) and Beast reports
      // errors as codes; a throw here would be a bug, so log it and keep serving.
      for (;;) {
        try {
          raw->ioc.run();
          return;
        } catch (const std::exception& e) {
          Logger("webhook")->error("webhook server thread: {}", e.what());
        }
      }
    });
  }
  impl_ = std::move(impl);
  reloader_->Start();
  Logger("webhook")->info("webhook server listening on {}:{} ({} handlers, {} threads)", hp.host,
                          port_, registry_->Paths().size(), threads);
  return absl::OkStatus();
}

void WebhookServer::Stop() {
  if (impl_) {
    std::vector<std::shared_ptr<Session>> open;
    {
      absl::MutexLock lock(&impl_->mu);
      impl_->stopping = true;
      for (auto& [raw, weak] : impl_->sessions) {
        if (auto s = weak.lock()) open.push_back(std::move(s));
      }
    }
    asio::post(impl_->ioc, [impl = impl_.get()] {
      beast::error_code ignored;
      impl->acceptor.close(ignored);
    });
    for (auto& s : open) s->Close();
    open.clear();
    // The threads return once the acceptor is closed and every session has ended (idle ones at
    // once, busy ones after their reply, bounded by the write timeout).
    for (std::thread& t : impl_->threads) t.join();
    impl_.reset();
  }
  if (reloader_) reloader_->Stop();
}

}  // namespace kruise::manager::webhook
