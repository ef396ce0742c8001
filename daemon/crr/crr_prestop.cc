#include "daemon/crr/crr_prestop.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/url.h"

namespace kruise::daemon {
namespace {

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
struct AddrInfoDeleter {
  void operator()(addrinfo* a) const { freeaddrinfo(a); }
};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

size_t DiscardBody(char*, size_t size, size_t nmemb, void*) { return size * nmemb; }

int64_t TimeoutMillis(absl::Duration timeout) {
  return std::max<int64_t>(1,
                           absl::ToInt64Milliseconds(absl::Ceil(timeout, absl::Milliseconds(1))));
}

using SteadyTime = std::chrono::steady_clock::time_point;

// Connects a fresh non-blocking socket to `ai`, waiting until `deadline` (a monotonic I/O
// deadline, not a scheduling one, hence no kruise::Clock).
absl::Status ConnectOne(const addrinfo* ai, SteadyTime deadline) {
  Fd fd(socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
  if (fd.get() < 0) {
    return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  }
  if (connect(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0) return absl::OkStatus();
  if (errno != EINPROGRESS) {
    return absl::UnavailableError(absl::StrCat("connect: ", std::strerror(errno)));
  }
  for (;;) {
    absl::Duration left = absl::FromChrono(deadline - std::chrono::steady_clock::now());
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError("connect timed out");
    }
    pollfd p{fd.get(), POLLOUT, 0};
    int n = poll(&p, 1, static_cast<int>(TimeoutMillis(left)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::UnavailableError(absl::StrCat("poll: ", std::strerror(errno)));
    if (n == 0) return absl::DeadlineExceededError("connect timed out");
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
      return absl::UnavailableError(absl::StrCat("getsockopt: ", std::strerror(errno)));
    }
    if (err != 0) return absl::UnavailableError(absl::StrCat("connect: ", std::strerror(err)));
    return absl::OkStatus();
  }
}

}  // namespace

absl::StatusOr<int> RunHttpGet(const HttpGetAction& action, absl::Duration timeout) {
  std::string scheme = absl::AsciiStrToLower(action.scheme.empty() ? "http" : action.scheme);
  if (scheme != "http" && scheme != "https") {
    return absl::InvalidArgumentError(absl::StrCat("unsupported scheme \"", action.scheme, "\""));
  }
  if (action.port <= 0 || action.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("invalid port ", action.port));
  }
  if (action.host.empty()) return absl::InvalidArgumentError("empty host");
  std::string path = action.path.empty() ? "/" : action.path;
  if (!absl::StartsWith(path, "/")) path = absl::StrCat("/", path);
  std::string url = absl::StrCat(scheme, "://", UrlHost(action.host), ":", action.port, path);

  std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  if (!curl) return absl::InternalError("curl_easy_init failed");
  std::unique_ptr<curl_slist, SlistDeleter> headers;
  for (const auto& [name, value] : action.headers) {
    std::string line = absl::StrCat(name, ": ", value);
    curl_slist* next = curl_slist_append(headers.get(), line.c_str());
    if (next == nullptr) return absl::InternalError("curl_slist_append failed");
    headers.release();
    headers.reset(next);
  }
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(TimeoutMillis(timeout)));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &DiscardBody);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  if (scheme == "https") {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (headers) curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  CURLcode rc = curl_easy_perform(c);
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    return absl::DeadlineExceededError(absl::StrCat("GET ", url, ": ", curl_easy_strerror(rc)));
  }
  if (rc != CURLE_OK) {
    return absl::UnavailableError(absl::StrCat("GET ", url, ": ", curl_easy_strerror(rc)));
  }
  long code = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  return static_cast<int>(code);
}

absl::Status DialTcp(const std::string& host, int port, absl::Duration timeout) {
  if (port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("invalid port ", port));
  }
  SteadyTime deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(TimeoutMillis(timeout));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* raw = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? "127.0.0.1" : host.c_str(), service.c_str(), &hints, &raw);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat("resolve ", host, ": ", gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, AddrInfoDeleter> list(raw);
  absl::Status last = absl::UnavailableError("no address");
  for (const addrinfo* ai = list.get(); ai != nullptr; ai = ai->ai_next) {
    last = ConnectOne(ai, deadline);
    if (last.ok() || absl::IsDeadlineExceeded(last)) break;
  }
  if (!last.ok()) {
    return absl::Status(last.code(), absl::StrCat("tcp ", host, ":", port, ": ", last.message()));
  }
  return absl::OkStatus();
}

}  // namespace kruise::daemon
