#include "common/health_server.h"

#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "common/url.h"
#include "httplib.h"

namespace kruise {

absl::StatusOr<HostPort> ParseListenAddress(absl::string_view address) {
  HostPort hp;
  absl::string_view port_part;
  if (!address.empty() && address.front() == '[') {
    size_t close = address.find(']');
    if (close == absl::string_view::npos || close + 1 >= address.size() ||
        address[close + 1] != ':') {
      return absl::InvalidArgumentError(
          absl::StrCat("listen address \"", address, "\": want [ipv6]:port"));
    }
    hp.host = std::string(address.substr(1, close - 1));
    port_part = address.substr(close + 2);
  } else {
    size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("listen address \"", address, "\": want host:port or :port"));
    }
    hp.host = std::string(address.substr(0, colon));
    port_part = address.substr(colon + 1);
  }
  if (hp.host.empty()) hp.host = "0.0.0.0";
  if (!absl::SimpleAtoi(port_part, &hp.port) || hp.port < 0 || hp.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address \"", address, "\": bad port \"", port_part, "\""));
  }
  return hp;
}

HealthServer::HealthServer(Options options) : options_(std::move(options)) {}

HealthServer::~HealthServer() { Stop(); }

void HealthServer::AddCheck(std::string name, std::function<absl::Status()> check, CheckKind kind) {
  absl::MutexLock lock(&mu_);
  checks_.push_back({std::move(name), std::move(check), kind});
}

void HealthServer::SetMetrics(std::shared_ptr<prometheus::Registry> registry) {
  absl::MutexLock lock(&mu_);
  registry_ = std::move(registry);
}

std::pair<int, std::string> HealthServer::Evaluate(bool readiness, absl::string_view only,
                                                   const std::vector<std::string>& exclude) const {
  std::vector<Check> checks;
  {
    absl::MutexLock lock(&mu_);
    checks = checks_;
  }
  std::string body;
  bool ok = true;
  bool found = only.empty();
  for (const Check& c : checks) {
    if (!readiness && c.kind == CheckKind::kReadiness) continue;
    if (!only.empty() && c.name != only) continue;
    found = true;
    if (std::find(exclude.begin(), exclude.end(), c.name) != exclude.end()) {
      absl::StrAppend(&body, "[+]", c.name, " excluded: ok\n");
      continue;
    }
    absl::Status s = c.fn();
    if (s.ok()) {
      absl::StrAppend(&body, "[+]", c.name, " ok\n");
    } else {
      ok = false;
      absl::StrAppend(&body, "[-]", c.name, " failed: ", s.message(), "\n");
    }
  }
  if (!found) return {404, absl::StrCat("no check named ", only, "\n")};
  if (!ok) return {503, absl::StrCat(body, readiness ? "readyz" : "healthz", " check failed\n")};
  if (!only.empty()) return {200, "ok"};
  return {200, absl::StrCat(body, "ok\n")};
}

absl::Status HealthServer::Start() {
  auto hp = ParseListenAddress(options_.address);
  if (!hp.ok()) return hp.status();
  host_ = hp->host;
  server_ = std::make_unique<httplib::Server>();
  // cpp-httplib's default also sets SO_REUSEPORT, which would let a second process silently share
  // the port; a listener must fail loudly instead.
  server_->set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server_->set_keep_alive_max_count(100);
  server_->set_read_timeout(5, 0);
  server_->set_write_timeout(5, 0);
  server_->set_payload_max_length(64 * 1024);
  auto health = [this](bool readiness) {
    return [this, readiness](const httplib::Request& req, httplib::Response& res) {
      std::string only = req.matches.size() > 1 ? std::string(req.matches[1]) : "";
      std::vector<std::string> exclude;
      for (size_t i = 0, n = req.get_param_value_count("exclude"); i < n; ++i) {
        exclude.push_back(req.get_param_value("exclude", i));
      }
      auto [code, body] = Evaluate(readiness, only, exclude);
      res.status = code;
      res.set_content(body, "text/plain; charset=utf-8");
    };
  };
  if (options_.serve_health) {
    server_->Get("/healthz", health(false));
    server_->Get("/readyz", health(true));
    server_->Get(R"(/healthz/([A-Za-z0-9_.-]+))", health(false));
    server_->Get(R"(/readyz/([A-Za-z0-9_.-]+))", health(true));
  }
  if (options_.serve_metrics) {
    server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      std::shared_ptr<prometheus::Registry> registry;
      {
        absl::MutexLock lock(&mu_);
        registry = registry_;
      }
      std::string text;
      if (registry) text = prometheus::TextSerializer().Serialize(registry->Collect());
      res.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
    });
  }
  if (hp->port == 0) {
    port_ = server_->bind_to_any_port(hp->host);
    if (port_ < 0) port_ = 0;
  } else {
    port_ = server_->bind_to_port(hp->host, hp->port) ? hp->port : 0;
  }
  if (port_ == 0) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.address));
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // stop() is a no-op until the listen loop runs, so Start returns only once it does.
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!server_->is_running() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  if (!server_->is_running()) {
    Stop();
    return absl::UnavailableError(absl::StrCat("server on ", options_.address, " did not start"));
  }
  return absl::OkStatus();
}

void HealthServer::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
  server_.reset();
}

std::string HealthServer::bound_address() const {
  if (port_ == 0) return "";
  return absl::StrCat(UrlHost(host_), ":", port_);
}

namespace {

// cpp-httplib's client errors in words ("Connection" alone says little in a probe's output).
std::string ProbeErrorText(httplib::Error error, absl::Duration timeout) {
  switch (error) {
    case httplib::Error::Connection:
      return "cannot connect (refused or unreachable)";
    case httplib::Error::ConnectionTimeout:
      return absl::StrCat("no connection within ", absl::FormatDuration(timeout));
    case httplib::Error::Read:
      return absl::StrCat("no complete answer (connection closed, or nothing within ",
                          absl::FormatDuration(timeout), ")");
    case httplib::Error::Write:
      return "sending the request failed";
    default:
      return absl::StrCat("HTTP client error ", httplib::to_string(error));
  }
}

absl::Status AddressFileError(int error, absl::string_view what, absl::string_view path) {
  return absl::ErrnoToStatus(error, absl::StrCat("address file: ", what, " ", path));
}

}  // namespace

absl::Status WriteAddressFile(const std::string& path, absl::string_view address) {
  if (path.empty()) return absl::InvalidArgumentError("address file: empty path");
  std::filesystem::path target(path);
  if (target.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(target.parent_path(), ec);
    if (ec) return AddressFileError(ec.value(), "creating the directory of", path);
  }
  // The address is no secret and probes may run as another user: 0644.
  return Annotate(tls::WriteFileAtomic(path, absl::StrCat(address, "\n"), 0644), "address file");
}

absl::StatusOr<std::string> ReadAddressFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    int error = errno;
    if (error == ENOENT) {
      return absl::NotFoundError(absl::StrCat("address file ", path, " does not exist"));
    }
    return AddressFileError(error, "reading", path);
  }
  std::stringstream content;
  content << in.rdbuf();
  if (in.bad()) return AddressFileError(errno, "reading", path);
  std::string address(absl::StripAsciiWhitespace(content.str()));
  if (address.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("address file ", path, " is empty"));
  }
  return address;
}

absl::StatusOr<HealthProbeResult> ProbeHealth(const HealthProbe& probe) {
  if (probe.address.empty() == probe.address_file.empty()) {
    return absl::InvalidArgumentError(
        "give exactly one of an address (--addr) and an address file (--addr-file)");
  }
  std::string address = probe.address;
  if (!probe.address_file.empty()) {
    ASSIGN_OR_RETURN(address, ReadAddressFile(probe.address_file));
  }
  auto hp = ParseListenAddress(address);
  if (!hp.ok()) {
    if (probe.address_file.empty()) return hp.status();
    return Annotate(hp.status(), absl::StrCat("address file ", probe.address_file));
  }
  if (hp->port == 0) {
    return absl::InvalidArgumentError(absl::StrCat("address \"", address, "\": port 0"));
  }
  if (hp->host == "0.0.0.0") hp->host = "127.0.0.1";  // ParseListenAddress: "" -> 0.0.0.0
  if (hp->host == "::") hp->host = "::1";
  if (probe.path.empty() || probe.path.front() != '/') {
    return absl::InvalidArgumentError(absl::StrCat("path \"", probe.path, "\": want /..."));
  }
  int64_t usec = absl::ToInt64Microseconds(probe.timeout);
  if (usec <= 0) return absl::InvalidArgumentError("timeout must be positive");
  HealthProbeResult result;
  result.url = absl::StrCat("http://", UrlHost(hp->host), ":", hp->port, probe.path);
  httplib::Client client(hp->host, hp->port);
  time_t sec = static_cast<time_t>(usec / 1000000);
  time_t rest = static_cast<time_t>(usec % 1000000);
  client.set_connection_timeout(sec, rest);
  client.set_read_timeout(sec, rest);
  client.set_write_timeout(sec, rest);
  client.set_keep_alive(false);
  auto res = client.Get(probe.path);
  if (!res) {
    return absl::UnavailableError(
        absl::StrCat("GET ", result.url, ": ", ProbeErrorText(res.error(), probe.timeout)));
  }
  result.status = res->status;
  result.body = std::move(res->body);
  return result;
}

}  // namespace kruise
