// webhook-loadgen: open-loop HTTPS POST load at a fixed rate, for bench/webhook/run.sh.
//
//   webhook-loadgen --url https://127.0.0.1:16511/mutate-pod --body review.json --rate 1000
//       --duration 20 [--connections 32] [--arrivals poisson|uniform] [--warmup 2]
//   webhook-loadgen --url https://127.0.0.1:16511/healthz --method GET ...   (the floor: no work)
//
// Why not only hey or h2load: both are closed-loop and their workers share one timer tick, so
// "1,000 req/s over 10 connections" reaches the server as a burst of 10 requests every 10 ms (70%
// of consecutive sends land < 100 µs apart in h2load --rps logs). The last of each burst waits for
// the nine before it, so those tools measure the burst as much as the server. Here each request
// has its own scheduled send time (Poisson arrivals by default: independent callers, as an API
// server's admission traffic is; or evenly spaced), and its latency is measured from that
// scheduled time, not from when a connection became free. A slow server therefore cannot slow the
// schedule down and hide its own queueing (no coordinated omission): requests that find every
// connection busy wait in a queue, and that wait is part of their latency.
//
// One thread, one io_context; pin it with taskset. TLS 1.2+, certificate not verified (as hey and
// h2load) unless --cacert is given. Output: one line with sent/ok/failed counts, the achieved rate
// and p50/p90/p99/p99.9/max in ms over the requests scheduled after the warm-up. Exit 1 when a
// reply was not 200 or a connection broke, 2 for bad flags or when no connection could be opened.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "boost/asio.hpp"
#include "boost/asio/ssl.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "boost/beast/ssl.hpp"

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

struct Url {
  std::string host, port, target;
};

bool ParseUrl(const std::string& url, Url* out) {
  const std::string scheme = "https://";
  if (url.rfind(scheme, 0) != 0) return false;
  std::string rest = url.substr(scheme.size());
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  out->target = slash == std::string::npos ? "/" : rest.substr(slash);
  size_t colon = authority.rfind(':');
  if (colon == std::string::npos) {
    out->host = authority;
    out->port = "443";
  } else {
    out->host = authority.substr(0, colon);
    out->port = authority.substr(colon + 1);
  }
  return !out->host.empty() && !out->port.empty();
}

class Generator;

// One keep-alive TLS connection carrying one request at a time (HTTP/1.1, no pipelining).
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(asio::io_context& ioc, ssl::context& ctx, Generator* gen,
             const http::request<http::string_body>& request)
      : stream_(ioc, ctx), gen_(gen), request_(request) {}

  void Open(const tcp::resolver::results_type& endpoints, const std::string& sni);
  void Send(SteadyClock::time_point scheduled);

 private:
  beast::ssl_stream<beast::tcp_stream> stream_;
  Generator* gen_;
  http::request<http::string_body> request_;
  http::response<http::string_body> response_;
  beast::flat_buffer buffer_;
  SteadyClock::time_point scheduled_, sent_;
};

class Generator {
 public:
  struct Options {
    double rate = 1000;
    double duration_s = 20;
    double warmup_s = 2;
    bool poisson = true;
    double drain_timeout_s = 10;
  };

  Generator(asio::io_context& ioc, Options options)
      : ioc_(ioc), options_(options), timer_(ioc), rng_(1) {}

  void AddConnection(std::shared_ptr<Connection> c) { all_.push_back(std::move(c)); }

  // A connection finished its handshake (or its previous request): give it queued work.
  void Idle(Connection* c) {
    if (!queue_.empty()) {
      SteadyClock::time_point t = queue_.front();
      queue_.pop_front();
      c->Send(t);
      return;
    }
    idle_.push_back(c);
    if (state_ == State::kConnecting && idle_.size() == all_.size()) Start();
    MaybeFinish();
  }

  void Record(SteadyClock::time_point scheduled, SteadyClock::time_point sent, bool ok) {
    if (scheduled < measure_from_) return;
    lags_ns_.push_back(
        std::chrono::duration_cast<std::chrono::nanoseconds>(sent - scheduled).count());
    if (!ok) {
      ++bad_status_;
    } else {
      latencies_ns_.push_back(
          std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now() - scheduled)
              .count());
    }
  }

  // A request failed on the wire (warm-up included): its connection is gone, the run goes on with
  // the others.
  void Broken(const std::string& what) {
    if (errors_++ == 0) std::fprintf(stderr, "webhook-loadgen: %s\n", what.c_str());
    ++broken_;
    MaybeFinish();
  }

  void ConnectionFailed(const std::string& what) {
    std::fprintf(stderr, "webhook-loadgen: %s\n", what.c_str());
    failed_ = true;
    ioc_.stop();
  }

  bool failed() const { return failed_; }
  bool clean() const { return bad_status_ == 0 && errors_ == 0; }

  void Report() const {
    std::vector<int64_t> l = latencies_ns_;
    std::sort(l.begin(), l.end());
    std::vector<int64_t> lag = lags_ns_;
    std::sort(lag.begin(), lag.end());
    auto pct_of = [](const std::vector<int64_t>& l, double q) -> double {
      if (l.empty()) return 0;
      size_t i = static_cast<size_t>(q * static_cast<double>(l.size()));
      return static_cast<double>(l[std::min(i, l.size() - 1)]) / 1e6;
    };
    auto pct = [&](double q) -> double {
      if (l.empty()) return 0;
      size_t i = static_cast<size_t>(q * static_cast<double>(l.size()));
      return static_cast<double>(l[std::min(i, l.size() - 1)]) / 1e6;
    };
    const double measured_s = options_.duration_s - options_.warmup_s;
    const int64_t total = static_cast<int64_t>(l.size()) + bad_status_ + errors_ + unfinished_;
    std::printf(
        "%lld requests (%.0f req/s, %s arrivals), %zu ok, %lld non-200, %lld errors, "
        "%lld unfinished; latency from scheduled send: p50 %.3f p90 %.3f p99 %.3f p99.9 %.3f "
        "max %.3f ms\n",
        static_cast<long long>(total), static_cast<double>(total) / measured_s,
        options_.poisson ? "poisson" : "uniform", l.size(), static_cast<long long>(bad_status_),
        static_cast<long long>(errors_), static_cast<long long>(unfinished_), pct(0.5), pct(0.9),
        pct(0.99), pct(0.999), l.empty() ? 0.0 : static_cast<double>(l.back()) / 1e6);
    std::printf(
        "send delay (scheduled -> written; queueing for a free connection included): p99 %.3f "
        "p99.9 %.3f max %.3f ms\n",
        pct_of(lag, 0.99), pct_of(lag, 0.999), pct_of(lag, 1.0));
  }

 private:
  enum class State { kConnecting, kRunning, kDraining, kDone };

  void Start() {
    state_ = State::kRunning;
    start_ = SteadyClock::now() + std::chrono::milliseconds(50);
    next_ = start_;
    measure_from_ = start_ + ToDuration(options_.warmup_s);
    end_ = start_ + ToDuration(options_.duration_s);
    Arm();
  }

  static SteadyClock::duration ToDuration(double s) {
    return std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(s));
  }

  SteadyClock::duration Gap() {
    double s = options_.poisson ? std::exponential_distribution<double>(options_.rate)(rng_)
                                : 1.0 / options_.rate;
    return ToDuration(s);
  }

  void Arm() {
    timer_.expires_at(next_);
    timer_.async_wait([this](beast::error_code ec) {
      if (ec) return;
      // Everything due by now goes out (the timer can fire late; the schedule does not slip).
      const auto now = SteadyClock::now();
      while (next_ <= now && next_ < end_) {
        Dispatch(next_);
        next_ += Gap();
      }
      if (next_ < end_) return Arm();
      state_ = State::kDraining;
      timer_.expires_after(ToDuration(options_.drain_timeout_s));
      timer_.async_wait([this](beast::error_code ec2) {
        if (ec2) return;
        unfinished_ = static_cast<int64_t>(queue_.size() + all_.size() - idle_.size() - broken_);
        state_ = State::kDone;
        ioc_.stop();
      });
      MaybeFinish();
    });
  }

  void Dispatch(SteadyClock::time_point scheduled) {
    if (idle_.empty()) {
      queue_.push_back(scheduled);
      return;
    }
    // Oldest idle first: every connection stays in use, so none outlives the server's idle timeout.
    Connection* c = idle_.front();
    idle_.pop_front();
    c->Send(scheduled);
  }

  void MaybeFinish() {
    if (state_ == State::kDraining && queue_.empty() && idle_.size() + broken_ == all_.size()) {
      state_ = State::kDone;
      timer_.cancel();
      ioc_.stop();
    }
  }

  asio::io_context& ioc_;
  Options options_;
  asio::steady_timer timer_;
  std::mt19937_64 rng_;
  State state_ = State::kConnecting;
  std::vector<std::shared_ptr<Connection>> all_;
  std::deque<Connection*> idle_;
  std::deque<SteadyClock::time_point> queue_;
  SteadyClock::time_point start_, next_, measure_from_, end_;
  std::vector<int64_t> latencies_ns_;
  std::vector<int64_t> lags_ns_;  // scheduled -> written: the generator's own delay plus queueing
  int64_t bad_status_ = 0, errors_ = 0, unfinished_ = 0;
  size_t broken_ = 0;
  bool failed_ = false;
};

void Connection::Open(const tcp::resolver::results_type& endpoints, const std::string& sni) {
  if (!SSL_set_tlsext_host_name(stream_.native_handle(), sni.c_str())) {
    return gen_->ConnectionFailed("cannot set TLS server name");
  }
  beast::get_lowest_layer(stream_).async_connect(
      endpoints, [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
        if (ec) return self->gen_->ConnectionFailed("connect: " + ec.message());
        beast::get_lowest_layer(self->stream_).socket().set_option(tcp::no_delay(true));
        self->stream_.async_handshake(ssl::stream_base::client, [self](beast::error_code ec2) {
          if (ec2) return self->gen_->ConnectionFailed("TLS handshake: " + ec2.message());
          self->gen_->Idle(self.get());
        });
      });
}

void Connection::Send(SteadyClock::time_point scheduled) {
  scheduled_ = scheduled;
  sent_ = SteadyClock::now();
  http::async_write(stream_, request_, [self = shared_from_this()](beast::error_code ec, size_t) {
    if (ec) return self->gen_->Broken("write: " + ec.message());
    self->response_ = {};
    http::async_read(self->stream_, self->buffer_, self->response_,
                     [self](beast::error_code ec2, size_t) {
                       if (ec2) return self->gen_->Broken("read: " + ec2.message());
                       self->gen_->Record(self->scheduled_, self->sent_,
                                          self->response_.result() == http::status::ok);
                       self->gen_->Idle(self.get());
                     });
  });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"open-loop HTTPS load generator for admission webhooks"};
  std::string url_text, body_file, cacert, arrivals = "poisson";
  int connections = 32;
  Generator::Options options;
  app.add_option("--url", url_text, "https://host:port/path")->required();
  app.add_option("--body", body_file, "request body (JSON), POSTed as application/json");
  std::string method = "POST";
  app.add_option(
         "--method", method,
         "POST (the body) or GET (no body: e.g. /healthz, the floor of TLS + HTTP + machine)")
      ->check(CLI::IsMember({"POST", "GET"}));
  app.add_option("--rate", options.rate, "requests per second")->check(CLI::PositiveNumber);
  app.add_option("--duration", options.duration_s, "seconds of load, warm-up included")
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", options.warmup_s, "seconds at the start not measured")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--connections", connections, "keep-alive connections opened before the run")
      ->check(CLI::Range(1, 10000));
  app.add_option("--arrivals", arrivals, "poisson (independent callers) or uniform (evenly spaced)")
      ->check(CLI::IsMember({"poisson", "uniform"}));
  app.add_option("--cacert", cacert,
                 "verify the server against this CA (default: no verification)");
  CLI11_PARSE(app, argc, argv);
  options.poisson = arrivals == "poisson";
  if (options.warmup_s >= options.duration_s) {
    std::fprintf(stderr, "webhook-loadgen: --warmup must be shorter than --duration\n");
    return 2;
  }
  Url url;
  if (!ParseUrl(url_text, &url)) {
    std::fprintf(stderr, "webhook-loadgen: --url %s: expected https://host[:port]/path\n",
                 url_text.c_str());
    return 2;
  }
  std::stringstream body;
  if (method == "POST") {
    std::ifstream in(body_file, std::ios::binary);
    if (body_file.empty() || !in) {
      std::fprintf(stderr, "webhook-loadgen: POST needs a readable --body (got '%s')\n",
                   body_file.c_str());
      return 2;
    }
    body << in.rdbuf();
  }

  asio::io_context ioc(1);
  ssl::context ctx(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION);
  if (cacert.empty()) {
    ctx.set_verify_mode(ssl::verify_none);
  } else {
    beast::error_code ec;
    ctx.load_verify_file(cacert, ec);
    if (ec) {
      std::fprintf(stderr, "webhook-loadgen: --cacert %s: %s\n", cacert.c_str(),
                   ec.message().c_str());
      return 2;
    }
    ctx.set_verify_mode(ssl::verify_peer);
  }
  beast::error_code ec;
  tcp::resolver resolver(ioc);
  auto endpoints = resolver.resolve(url.host, url.port, ec);
  if (ec) {
    std::fprintf(stderr, "webhook-loadgen: resolve %s: %s\n", url.host.c_str(),
                 ec.message().c_str());
    return 2;
  }
  http::request<http::string_body> request{method == "POST" ? http::verb::post : http::verb::get,
                                           url.target, 11};
  request.set(http::field::host, url.host + ":" + url.port);
  if (method == "POST") {
    request.set(http::field::content_type, "application/json");
    request.body() = body.str();
  }
  request.keep_alive(true);
  request.prepare_payload();

  Generator gen(ioc, options);
  std::vector<std::shared_ptr<Connection>> conns;
  for (int i = 0; i < connections; ++i) {
    auto c = std::make_shared<Connection>(ioc, ctx, &gen, request);
    gen.AddConnection(c);
    conns.push_back(c);
  }
  for (auto& c : conns) c->Open(endpoints, url.host);
  ioc.run();
  if (gen.failed()) return 2;
  gen.Report();
  return gen.clean() ? 0 : 1;  // non-200 replies or broken connections fail the run
}
