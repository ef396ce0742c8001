#include "manager/webhook/server.h"

#include <malloc.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <deque>
#include <functional>
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
#include "manager/webhook/fail_open.h"
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

// After a review this large, freed decode memory goes back to the kernel: glibc keeps what a
// thread's arena freed (the DOM of a 4 MiB review is ~50 MiB of small blocks), so each handler
// thread's arena would otherwise hold on to the largest review it ever decoded, and the decode
// budget would bound only what is in use, not the process's RSS.
constexpr size_t kTrimAfterBody = 1 << 20;
void TrimHeap() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

// The handler threads: a bounded FIFO queue; a worker takes the oldest job whose handler runs on
// fewer than `per_handler` threads, so one handler blocked on the API server leaves the other
// threads to the rest.
class HandlerPool {
 public:
  HandlerPool(int threads, int capacity, int per_handler)
      : capacity_(static_cast<size_t>(std::max(1, capacity))),
        per_handler_(std::max(1, per_handler)) {
    for (int i = 0; i < std::max(1, threads); ++i) workers_.emplace_back([this] { Work(); });
  }
  ~HandlerPool() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    for (std::thread& t : workers_) t.join();  // runs what is queued first
  }
  size_t queued() {
    absl::MutexLock lock(&mu_);
    return queue_.size();
  }
  // False (and `job` dropped) when the queue is full.
  bool TrySubmit(const void* handler, std::function<void()> job) {
    absl::MutexLock lock(&mu_);
    if (queue_.size() >= capacity_) return false;
    queue_.push_back({handler, std::move(job)});
    return true;
  }

 private:
  struct Job {
    const void* handler;
    std::function<void()> run;
  };
  // The oldest job that may run now; queue_.end() when none.
  std::deque<Job>::iterator Runnable() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      auto r = running_.find(it->handler);
      if (r == running_.end() || r->second < per_handler_) return it;
    }
    return queue_.end();
  }
  void Work() {
    for (;;) {
      Job job;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](HandlerPool* p) ABSL_NO_THREAD_SAFETY_ANALYSIS {
              return p->Runnable() != p->queue_.end() || (p->stopping_ && p->queue_.empty());
            },
            this));
        auto it = Runnable();
        if (it == queue_.end()) return;  // stopping, nothing left
        job = std::move(*it);
        queue_.erase(it);
        ++running_[job.handler];
      }
      job.run();  // never throws (the jobs catch everything)
      absl::MutexLock lock(&mu_);
      if (--running_[job.handler] == 0) running_.erase(job.handler);
    }
  }

  const size_t capacity_;
  const int per_handler_;
  absl::Mutex mu_;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<const void*, int> running_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

// Decode memory in flight (see "Limits" in server.h).
class DecodeBudget {
 public:
  explicit DecodeBudget(size_t limit) : limit_(limit) {}
  // Takes `cost`; false when it does not fit and something else is in flight.
  bool TryTake(size_t cost) {
    size_t used = used_.load(std::memory_order_relaxed);
    for (;;) {
      if (used != 0 && used + cost > limit_) return false;
      if (used_.compare_exchange_weak(used, used + cost)) return true;
    }
  }
  void Give(size_t cost) { used_.fetch_sub(cost); }

 private:
  const size_t limit_;
  std::atomic<size_t> used_{0};
};

}  // namespace

struct WebhookServer::Impl {
  Impl(const Options* opts, const HandlerRegistry* reg, WebhookServer* srv)
      : options(opts),
        registry(reg),
        server(srv),
        requests(&srv->requests_),
        ssl_ctx(asio::ssl::context::tls_server),
        acceptor(ioc),
        accept_timer(ioc),
        budget(opts->decode_budget_bytes),
        pool(opts->handler_threads, opts->handler_queue,
             opts->max_running_per_handler > 0 ? opts->max_running_per_handler
                                               : std::max(1, opts->handler_threads / 2)) {}

  void Accept();
  void OnAccepted(beast::error_code ec, tcp::socket socket);
  void CountRejected() { server->rejected_.fetch_add(1, std::memory_order_relaxed); }
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
  WebhookServer* server;
  std::atomic<int64_t>* requests;
  asio::io_context ioc;
  asio::ssl::context ssl_ctx;
  tcp::acceptor acceptor;
  asio::steady_timer accept_timer;  // the pause after EMFILE & co. (acceptor's handlers only)
  DecodeBudget budget;
  // Destroyed (joined) after the I/O threads: their last replies come from its jobs.
  HandlerPool pool;
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
  ~Session() {
    Uncharge();
    server_->Unregister(this);
  }

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
    if (buffer_.capacity() > (64 << 10)) buffer_.shrink_to_fit();  // after a large review
    parser_.emplace();
    parser_->body_limit(opts().max_body_bytes);
    // Covers waiting for the next request on a kept-alive connection and reading its headers.
    beast::get_lowest_layer(stream_).expires_after(ToChrono(opts().idle_timeout));
    waiting_ = true;
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              self->waiting_ = false;
                              self->OnHeader(ec);
                            });
  }

  // A read failed: answer what deserves an answer, else close.
  void OnReadError(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      // Answered from the headers: the client may still be sending the body.
      unread_input_ = true;
      return Reply(413, "request body too large\n", "text/plain", /*keep_alive=*/false, 11);
    }
    if (&ec.category() == &http::make_error_code(http::error::bad_method).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      unread_input_ = true;
      return Reply(400, absl::StrCat("malformed HTTP request: ", ec.message(), "\n"), "text/plain",
                   false, 11);
    }
    Shutdown();  // peer closed, timeout, TLS error, or Close()
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    const auto& header = parser_->get();
    beast::string_view target = header.target();
    target = target.substr(0, target.find('?'));
    path_.assign(target.data(), target.size());
    handler_ = server_->registry->Find(path_);
    if (handler_ == nullptr || header.method() != http::verb::post) return ReadBody();
    // An admission review: charge its decode memory before reading the body.
    const size_t body = parser_->content_length().value_or(opts().max_body_bytes);
    const size_t cost = static_cast<size_t>(static_cast<double>(body) *
                                            std::max(1.0, opts().decode_cost_factor));
    if (!server_->budget.TryTake(cost)) {
      unread_input_ = !parser_->is_done();
      return Busy(parser_->get().keep_alive() && !unread_input_, header.version(),
                  "admission reviews in flight exceed the webhook's memory budget");
    }
    charged_ = cost;
    ReadBody();
  }

  void ReadBody() {
    if (parser_->is_done()) return OnBody({});
    beast::get_lowest_layer(stream_).expires_after(ToChrono(opts().read_timeout));
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->OnBody(ec);
                     });
  }

  void OnBody(beast::error_code ec) {
    if (ec) {
      Uncharge();
      return OnReadError(ec);
    }
    Serve(parser_->release());
  }

  void Uncharge() {
    if (charged_ != 0) server_->budget.Give(charged_);
    charged_ = 0;
  }

  // 429 at once: without Retry-After on a failurePolicy Ignore path (the API server allows at
  // once), with it elsewhere (the API server retries within its timeout).
  void Busy(bool keep_alive, unsigned version, const char* why) {
    server_->CountRejected();
    const bool fail_open = server_->registry->FailOpenAt(path_) != nullptr;
    if (auto m = server_->metrics.find(path_); m != server_->metrics.end()) {
      m->second.requests->Add({{"webhook", m->first}, {"code", "429"}}).Increment();
    }
    Reply(429, absl::StrCat(why, ", try again\n"), "text/plain", keep_alive, version,
          /*retry_after=*/!fail_open);
  }

  void Serve(http::request<http::string_body> req) {
    const bool keep_alive = req.keep_alive();
    const unsigned version = req.version();
    if (path_ == "/healthz") {
      if (req.method() != http::verb::get && req.method() != http::verb::head) {
        return Reply(405, "use GET\n", "text/plain", keep_alive, version);
      }
      return Reply(200, "ok", "text/plain", keep_alive, version);
    }
    if (handler_ == nullptr) {
      return Reply(404, "no admission handler at this path\n", "text/plain", keep_alive, version);
    }
    if (req.method() != http::verb::post) {
      return Reply(405, "admission reviews are POSTed\n", "text/plain", keep_alive, version);
    }
    auto m = server_->metrics.find(path_);
    const WebhookServer::Impl::PathMetrics* pm = m == server_->metrics.end() ? nullptr : &m->second;
    // The job keeps the I/O context running (tracked work) until its reply is posted back.
    auto work = asio::prefer(stream_.get_executor(),
                             asio::execution::outstanding_work.tracked);
    const size_t charged = std::exchange(charged_, 0);
    auto body = std::make_shared<std::string>(std::move(req.body()));
    Handler* handler = handler_;
    const bool queued = server_->pool.TrySubmit(
        handler, [self = shared_from_this(), work, body, handler, charged, pm, keep_alive,
                  version]() mutable {
          WebhookServer::Impl* srv = self->server_;
          if (pm != nullptr) pm->in_flight->Increment();
          const auto start = std::chrono::steady_clock::now();
          HttpReply reply;
          try {
            reply = ServeAdmission(*handler, *body, self->path_,
                                   srv->registry->FailOpenAt(self->path_));
          } catch (...) {  // ServeAdmission does not throw; a bad_alloc building the reply might
            reply = {500, "internal error\n", "text/plain"};
          }
          const size_t body_size = body->size();
          body.reset();
          srv->budget.Give(charged);
          if (body_size >= kTrimAfterBody) TrimHeap();
          if (pm != nullptr) {
            pm->latency->Observe(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
            pm->in_flight->Decrement();
            pm->requests->Add({{"webhook", self->path_}, {"code", std::to_string(reply.status)}})
                .Increment();
          }
          srv->requests->fetch_add(1, std::memory_order_relaxed);
          asio::post(work, [self = std::move(self), reply = std::move(reply), keep_alive,
                            version]() mutable {
            self->Reply(reply.status, std::move(reply.body), reply.content_type, keep_alive,
                        version);
          });
        });
    if (!queued) {
      server_->budget.Give(charged);
      Busy(keep_alive, version, "all webhook handler threads are busy");
    }
  }

  void Reply(int status, std::string body, const std::string& content_type, bool keep_alive,
             unsigned version, bool retry_after = false) {
    response_ = {};
    response_.version(version);
    response_.result(static_cast<unsigned>(status));
    response_.set(http::field::content_type, content_type);
    if (retry_after) response_.set(http::field::retry_after, "1");
    response_.body() = std::move(body);
    response_.keep_alive(keep_alive && !closing_);
    response_.prepare_payload();
    beast::get_lowest_layer(stream_).expires_after(ToChrono(opts().write_timeout));
    http::async_write(stream_, response_,
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        self->response_.body() = std::string();  // a patch can be large
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
    if (!drain_buf_) drain_buf_ = std::make_unique<std::array<char, 16384>>();
    beast::get_lowest_layer(stream_).async_read_some(
        asio::buffer(*drain_buf_), [self = shared_from_this()](beast::error_code ec, size_t) {
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
  std::unique_ptr<std::array<char, 16384>> drain_buf_;  // only after an early error reply
  std::string path_;             // of the request being served
  Handler* handler_ = nullptr;   // its handler, null when none
  size_t charged_ = 0;           // decode budget held for it (until its job takes it over)
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
    OnAccepted(ec, std::move(socket));
  });
}

void WebhookServer::Impl::OnAccepted(beast::error_code ec, tcp::socket socket) {
  if (ec) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    const int e = ec.value();
    if (&ec.category() == &asio::error::get_system_category() &&
        (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM)) {
      // The connection stays in the backlog and the listener stays readable: accepting again at
      // once would spin. Pause; connections are served again once descriptors free up.
      if (server->accept_pauses_.fetch_add(1, std::memory_order_relaxed) % 100 == 0) {
        Logger("webhook")->warn("accept: {}; pausing accepts for {}", ec.message(),
                                absl::FormatDuration(options->accept_backoff));
      }
      accept_timer.expires_after(ToChrono(options->accept_backoff));
      accept_timer.async_wait([this](beast::error_code wait_ec) {
        if (wait_ec == asio::error::operation_aborted || !acceptor.is_open()) return;
        Accept();
      });
      return;
    }
    Logger("webhook")->warn("accept: {}", ec.message());
    return Accept();
  }
  beast::error_code ignored;
  bool full;
  {
    absl::MutexLock lock(&mu);
    full = sessions.size() >= static_cast<size_t>(std::max(1, options->max_sessions));
  }
  if (full) {
    // Refused at once (a reset), rather than left in the backlog: the API server's call fails
    // fast and its failurePolicy decides.
    server->refused_.fetch_add(1, std::memory_order_relaxed);
    socket.set_option(asio::socket_base::linger(true, 0), ignored);
    socket.close(ignored);
    return Accept();
  }
  // No Nagle: a reply is written as headers + body and must not wait for a delayed ACK.
  socket.set_option(tcp::no_delay(true), ignored);
  auto session = std::make_shared<Session>(std::move(socket), this);
  if (!Register(session)) return;  // stopping: the socket closes with the session
  session->Start();
  Accept();
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

  auto impl = std::make_unique<Impl>(&options_, registry_, this);
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
  // An idle connection gives its OpenSSL read/write buffers back (~34 KiB).
  SSL_CTX_set_mode(impl->ssl_ctx.native_handle(), SSL_MODE_RELEASE_BUFFERS);
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
      // Handlers run elsewhere and Beast reports errors as codes; a throw here (bad_alloc) would
      // be a bug or an exhausted heap, so log it and keep serving.
      for (;;) {
        try {
          raw->ioc.run();
          return;
        } catch (const std::exception& e) {
          Logger("webhook")->error("webhook server thread: {}", e.what());
        } catch (...) {
          Logger("webhook")->error("webhook server thread: unknown exception");
        }
      }
    });
  }
  impl_ = std::move(impl);
  reloader_->Start();
  Logger("webhook")->info(
      "webhook server listening on {}:{} ({} handlers, {} I/O threads, {} handler threads)",
      hp.host, port_, registry_->Paths().size(), threads, std::max(1, options_.handler_threads));
  return absl::OkStatus();
}

int64_t WebhookServer::queued_reviews() const {
  return impl_ ? static_cast<int64_t>(impl_->pool.queued()) : 0;
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
      impl->accept_timer.cancel();
    });
    for (auto& s : open) s->Close();
    open.clear();
    // The threads return once the acceptor is closed and every session has ended (idle ones at
    // once, busy ones after their reply, bounded by the write timeout); a review on a handler
    // thread keeps them running until its reply is written.
    for (std::thread& t : impl_->threads) t.join();
    impl_.reset();
  }
  if (reloader_) reloader_->Stop();
}

}  // namespace kruise::manager::webhook
