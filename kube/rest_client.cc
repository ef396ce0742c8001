#include "kube/rest_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kube/call_deadline.h"
#include "kube/errors.h"

namespace kruise::kube {
namespace {

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
using CurlPtr = std::unique_ptr<CURL, CurlDeleter>;

struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using SlistPtr = std::unique_ptr<curl_slist, SlistDeleter>;

void GlobalInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

bool IsRetryableHttp(long code) { return code == 500 || code == 502 || code == 503 || code == 504; }

bool IsRetryableTransport(CURLcode c) {
  switch (c) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

absl::Status TransportStatus(CURLcode code, const char* errbuf, const std::string& what) {
  std::string detail = curl_easy_strerror(code);
  if (errbuf != nullptr && errbuf[0] != '\0') absl::StrAppend(&detail, " (", errbuf, ")");
  switch (code) {
    case CURLE_PEER_FAILED_VERIFICATION:
      return absl::UnauthenticatedError(absl::StrCat(
          what, ": TLS verification of the API server certificate failed (wrong or missing CA?): ",
          detail));
    case CURLE_SSL_CACERT_BADFILE:
      return absl::UnauthenticatedError(
          absl::StrCat(what, ": TLS verification impossible, cannot load the CA: ", detail));
    case CURLE_SSL_CERTPROBLEM:
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": client certificate or key unusable: ", detail));
    case CURLE_OPERATION_TIMEDOUT:
      return absl::DeadlineExceededError(absl::StrCat(what, ": ", detail));
    default:
      return absl::UnavailableError(absl::StrCat(what, ": ", detail));
  }
}

const char* PatchContentType(PatchType t) {
  switch (t) {
    case PatchType::kMerge:
      return "application/merge-patch+json";
    case PatchType::kJson:
      return "application/json-patch+json";
    case PatchType::kStrategicMerge:
      return "application/strategic-merge-patch+json";
  }
  return "application/merge-patch+json";
}

std::optional<absl::Duration> ParseRetryAfterHeader(absl::string_view line) {
  constexpr absl::string_view kName = "retry-after:";
  if (line.size() < kName.size() || !absl::EqualsIgnoreCase(line.substr(0, kName.size()), kName)) {
    return std::nullopt;
  }
  int64_t secs = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(kName.size())), &secs) || secs < 0) {
    return std::nullopt;
  }
  return absl::Seconds(secs);
}

size_t AppendBody(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

}  // namespace

std::string UrlEscape(const std::string& s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string ResourcePath(const Resource& r, const std::string& ns, const std::string& name,
                         const std::string& subresource) {
  std::string p = r.group.empty() ? absl::StrCat("/api/", r.version)
                                  : absl::StrCat("/apis/", r.group, "/", r.version);
  if (r.namespaced && !ns.empty()) absl::StrAppend(&p, "/namespaces/", UrlEscape(ns));
  absl::StrAppend(&p, "/", r.resource);
  if (!name.empty()) {
    absl::StrAppend(&p, "/", UrlEscape(name));
    if (!subresource.empty()) absl::StrAppend(&p, "/", UrlEscape(subresource));
  }
  return p;
}

std::string ListQuery(const ListOptions& o, bool watch) {
  std::string q;
  auto add = [&q](absl::string_view k, const std::string& v) {
    absl::StrAppend(&q, q.empty() ? "?" : "&", k, "=", UrlEscape(v));
  };
  if (watch) add("watch", "1");
  if (!o.label_selector.empty()) add("labelSelector", o.label_selector);
  if (!o.field_selector.empty()) add("fieldSelector", o.field_selector);
  if (!watch && o.limit > 0) add("limit", absl::StrCat(o.limit));
  if (!watch && !o.continue_token.empty()) add("continue", o.continue_token);
  if (!o.resource_version.empty()) add("resourceVersion", o.resource_version);
  if (!watch && !o.resource_version_match.empty()) {
    add("resourceVersionMatch", o.resource_version_match);
  }
  if (watch && o.timeout_seconds > 0) add("timeoutSeconds", absl::StrCat(o.timeout_seconds));
  if (watch && o.allow_watch_bookmarks) add("allowWatchBookmarks", "true");
  return q;
}

// ---------------------------------------------------------------------------------------------

class RestKubeClient::HandlePool {
 public:
  explicit HandlePool(size_t max_idle) : max_idle_(max_idle) {}

  CurlPtr Acquire() {
    {
      absl::MutexLock lock(&mu_);
      if (!idle_.empty()) {
        CurlPtr h = std::move(idle_.back());
        idle_.pop_back();
        return h;
      }
    }
    return CurlPtr(curl_easy_init());
  }

  void Release(CurlPtr h) {
    if (h == nullptr) return;
    // Reset clears options but keeps the handle's live connections and TLS session cache.
    curl_easy_reset(h.get());
    absl::MutexLock lock(&mu_);
    if (idle_.size() < max_idle_) idle_.push_back(std::move(h));
  }

 private:
  const size_t max_idle_;
  absl::Mutex mu_;
  std::vector<CurlPtr> idle_ ABSL_GUARDED_BY(mu_);
};

struct RestKubeClient::Request {
  std::string method;  // GET POST PUT PATCH DELETE
  std::string path;    // path and query
  std::string body;
  std::string content_type;
  bool idempotent = false;
};

struct RestKubeClient::Response {
  CURLcode curl_code = CURLE_OK;
  std::string curl_error;
  long http_code = 0;
  std::string body;
  std::optional<absl::Duration> retry_after;
};

RestKubeClient::RestKubeClient(RestConfig config, Clock* clock, RestClientOptions options)
    : config_(std::move(config)),
      clock_(clock),
      options_(options),
      tokens_(config_.bearer_token, config_.bearer_token_file, clock),
      throttle_(config_.qps, config_.burst, clock),
      pool_(std::make_unique<HandlePool>(options.max_idle_handles)) {}

RestKubeClient::~RestKubeClient() = default;

absl::StatusOr<std::unique_ptr<RestKubeClient>> RestKubeClient::Create(RestConfig config,
                                                                       Clock* clock,
                                                                       RestClientOptions options) {
  GlobalInitOnce();
  if (config.host.empty()) return absl::InvalidArgumentError("RestConfig.host is empty");
  while (absl::EndsWith(config.host, "/")) config.host.pop_back();
  if (!absl::StartsWith(config.host, "https://") && !absl::StartsWith(config.host, "http://")) {
    return absl::InvalidArgumentError(absl::StrCat("API server address \"", config.host,
                                                   "\" must start with https:// or http://"));
  }
  // Fail early on unreadable files; the paths are still what libcurl loads, so rotated files work.
  for (const std::string* f :
       {&config.ca_file, &config.client_cert_file, &config.client_key_file}) {
    if (!f->empty()) RETURN_IF_ERROR(ReadFileToString(*f).status());
  }
  if (options.max_attempts < 1) options.max_attempts = 1;
  return std::unique_ptr<RestKubeClient>(new RestKubeClient(std::move(config), clock, options));
}

absl::Status RestKubeClient::ApplyCommonOptions(CURL* c, const std::string& url, char* errbuf) {
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(c, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
  curl_easy_setopt(c, CURLOPT_USERAGENT, config_.user_agent.c_str());
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
  const long connect_ms = absl::ToInt64Milliseconds(std::min(config_.timeout, absl::Seconds(10)));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, std::max(1L, connect_ms));
  if (config_.insecure_skip_tls_verify) {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  } else {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    if (!config_.ca_data.empty()) {
      // Trust exactly this CA, not the system store as well.
      curl_easy_setopt(c, CURLOPT_CAINFO, nullptr);
      curl_easy_setopt(c, CURLOPT_CAPATH, nullptr);
      curl_blob blob{const_cast<char*>(config_.ca_data.data()), config_.ca_data.size(),
                     CURL_BLOB_NOCOPY};
      curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &blob);
    } else if (!config_.ca_file.empty()) {
      curl_easy_setopt(c, CURLOPT_CAPATH, nullptr);
      curl_easy_setopt(c, CURLOPT_CAINFO, config_.ca_file.c_str());
    }
  }
  if (!config_.client_cert_data.empty()) {
    curl_blob blob{const_cast<char*>(config_.client_cert_data.data()),
                   config_.client_cert_data.size(), CURL_BLOB_NOCOPY};
    curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &blob);
    curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
  } else if (!config_.client_cert_file.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLCERT, config_.client_cert_file.c_str());
    curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
  }
  if (!config_.client_key_data.empty()) {
    curl_blob blob{const_cast<char*>(config_.client_key_data.data()),
                   config_.client_key_data.size(), CURL_BLOB_NOCOPY};
    curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &blob);
    curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
  } else if (!config_.client_key_file.empty()) {
    curl_easy_setopt(c, CURLOPT_SSLKEY, config_.client_key_file.c_str());
    curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
  }
  return absl::OkStatus();
}

namespace {

SlistPtr BuildHeaders(const std::string& token, const std::string& content_type) {
  curl_slist* h = nullptr;
  h = curl_slist_append(h, "Accept: application/json");
  // No "Expect: 100-continue" round trip for large bodies.
  h = curl_slist_append(h, "Expect:");
  if (!content_type.empty()) h = curl_slist_append(h, ("Content-Type: " + content_type).c_str());
  if (!token.empty()) h = curl_slist_append(h, ("Authorization: Bearer " + token).c_str());
  return SlistPtr(h);
}

void SetMethod(CURL* c, const std::string& method, const std::string& body) {
  if (method == "GET") {
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  } else {
    if (method != "POST") curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
    if (method == "POST" || !body.empty()) {
      curl_easy_setopt(c, CURLOPT_POST, 1L);
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    }
  }
}

size_t CaptureRetryAfter(char* data, size_t size, size_t n, void* user) {
  auto* out = static_cast<std::optional<absl::Duration>*>(user);
  if (auto d = ParseRetryAfterHeader(absl::string_view(data, size * n))) *out = d;
  return size * n;
}

}  // namespace

RestKubeClient::Response RestKubeClient::PerformOnce(const Request& req, const std::string& token,
                                                     std::optional<absl::Time> deadline) {
  attempts_.fetch_add(1);
  Response resp;
  CurlPtr h = pool_->Acquire();
  if (h == nullptr) {
    resp.curl_code = CURLE_FAILED_INIT;
    return resp;
  }
  CURL* c = h.get();
  char errbuf[CURL_ERROR_SIZE] = {0};
  const std::string url = config_.host + req.path;
  (void)ApplyCommonOptions(c, url, errbuf);
  SlistPtr headers = BuildHeaders(token, req.content_type);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  SetMethod(c, req.method, req.body);
  absl::Duration timeout = config_.timeout;
  if (deadline) timeout = std::min(timeout, *deadline - clock_->Now());
  // Rounded up: curl must not give up before the deadline has passed.
  const long timeout_ms =
      std::max<long>(1, absl::ToInt64Milliseconds(absl::Ceil(timeout, absl::Milliseconds(1))));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
  // A call deadline can only shorten the handle's connect timeout (ApplyCommonOptions).
  const long connect_ms =
      absl::ToInt64Milliseconds(std::min(config_.timeout, absl::Seconds(10)));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, std::max(1L, std::min(timeout_ms, connect_ms)));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &AppendBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &resp.body);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &CaptureRetryAfter);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &resp.retry_after);
  resp.curl_code = curl_easy_perform(c);
  resp.curl_error = errbuf;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp.http_code);
  if (options_.on_request) options_.on_request(req.method, resp.http_code);
  // Don't keep a handle whose options point at this stack frame.
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, nullptr);
  pool_->Release(std::move(h));
  return resp;
}

absl::Duration RestKubeClient::Backoff(int attempt) {
  absl::Duration d = options_.initial_backoff * std::pow(2.0, std::max(0, attempt - 1));
  d = std::min(d, options_.max_backoff);
  double f;
  {
    absl::MutexLock lock(&rng_mu_);
    f = absl::Uniform(rng_, 0.5, 1.5);
  }
  return std::min(d * f, options_.max_backoff);
}

absl::StatusOr<RestKubeClient::Response> RestKubeClient::Execute(const Request& req) {
  const std::string what = absl::StrCat(req.method, " ", config_.host, req.path);
  bool refreshed_token = false;
  // A caller's budget (ScopedCallDeadline): nothing is sent, waited for or retried past it.
  const std::optional<absl::Time> deadline = CurrentCallDeadline();
  auto past_deadline = [&] { return deadline && clock_->Now() >= *deadline; };
  for (int attempt = 1;; ++attempt) {
    // The throttle waits at most until the caller's deadline and at most max_throttle_wait.
    const absl::Time throttle_until =
        options_.max_throttle_wait == absl::InfiniteDuration()
            ? absl::InfiniteFuture()
            : clock_->Now() + options_.max_throttle_wait;
    if (deadline && *deadline <= throttle_until) {
      if (!throttle_.Wait(*deadline) || past_deadline()) return CallDeadlineExceeded(what);
    } else if (!throttle_.Wait(throttle_until)) {
      return absl::ResourceExhaustedError(
          absl::StrCat(what, ": client-side throttle would wait longer than ",
                       absl::FormatDuration(options_.max_throttle_wait)));
    }
    ASSIGN_OR_RETURN(std::string token, tokens_.Token());
    Response resp = PerformOnce(req, token, deadline);
    if (resp.curl_code == CURLE_OPERATION_TIMEDOUT && past_deadline()) {
      return CallDeadlineExceeded(what);
    }
    absl::Status st;
    std::optional<absl::Duration> wait;
    bool retry = false;
    if (resp.curl_code != CURLE_OK) {
      st = TransportStatus(resp.curl_code, resp.curl_error.c_str(), what);
      retry = (req.idempotent && IsRetryableTransport(resp.curl_code)) ||
              resp.curl_code == CURLE_COULDNT_CONNECT;
    } else if (resp.http_code >= 200 && resp.http_code < 300) {
      return resp;
    } else {
      st = StatusFromHttp(resp.http_code, resp.body);
      if (resp.retry_after && !RetryAfter(st)) {
        st.SetPayload(kRetryAfterPayload,
                      absl::Cord(absl::StrCat(absl::ToInt64Seconds(*resp.retry_after))));
      }
      if (resp.http_code == 401 && !refreshed_token && tokens_.from_file()) {
        // The token may have rotated under us: re-read it once and try again.
        refreshed_token = true;
        tokens_.Refresh();
        --attempt;
        continue;
      }
      if (resp.http_code == 429) {
        retry = true;
        wait = std::min(RetryAfter(st).value_or(options_.default_retry_after),
                        options_.max_retry_after);
      } else if (req.idempotent && IsRetryableHttp(resp.http_code)) {
        retry = true;
        if (auto ra = RetryAfter(st)) wait = std::min(*ra, options_.max_retry_after);
      }
    }
    if (!retry || attempt >= options_.max_attempts) {
      Logger("kube")->debug("{} failed after {} attempt(s): {}", what, attempt, st);
      return st;
    }
    absl::Duration d = wait ? *wait : Backoff(attempt);
    if (deadline && clock_->Now() + d >= *deadline) {
      Logger("kube")->debug("{}: {}; no retry within the call's deadline", what, st);
      return st;
    }
    Logger("kube")->debug("{}: {}; retrying in {}", what, st, absl::FormatDuration(d));
    clock_->SleepFor(d);
  }
}

absl::StatusOr<Json> RestKubeClient::ExecuteJson(const Request& req) {
  ASSIGN_OR_RETURN(Response resp, Execute(req));
  Json j = Json::parse(resp.body, nullptr, false);
  if (j.is_discarded()) {
    return absl::DataLossError(absl::StrCat("malformed JSON in the response to ", req.method, " ",
                                            req.path, " (", resp.body.size(), " bytes)"));
  }
  return j;
}

absl::StatusOr<Json> RestKubeClient::GetPath(const std::string& path_and_query) {
  return ExecuteJson({.method = "GET",
                      .path = path_and_query,
                      .body = "",
                      .content_type = "",
                      .idempotent = true});
}

absl::StatusOr<Json> RestKubeClient::Get(const Resource& r, const std::string& ns,
                                         const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("Get: empty name");
  ASSIGN_OR_RETURN(Json obj, ExecuteJson({.method = "GET",
                                          .path = ResourcePath(r, ns, name),
                                          .body = "",
                                          .content_type = "",
                                          .idempotent = true}));
  if (!obj.is_object()) return absl::DataLossError("Get: response is not a JSON object");
  return obj;
}

absl::StatusOr<ListResult> RestKubeClient::List(const Resource& r, const std::string& ns,
                                                const ListOptions& opts) {
  ASSIGN_OR_RETURN(Json list, ExecuteJson({.method = "GET",
                                           .path = ResourcePath(r, ns) + ListQuery(opts, false),
                                           .body = "",
                                           .content_type = "",
                                           .idempotent = true}));
  if (!list.is_object()) return absl::DataLossError("List: response is not a JSON object");
  ListResult out;
  auto items = list.find("items");
  if (items != list.end() && items->is_array()) {
    out.items = std::move(*items);
  } else if (items != list.end() && !items->is_null()) {
    return absl::DataLossError("List: \"items\" is not an array");
  }
  for (Json& item : out.items) {
    if (!item.is_object()) return absl::DataLossError("List: an item is not an object");
    if (!item.contains("kind")) item["kind"] = r.kind;
    if (!item.contains("apiVersion")) item["apiVersion"] = r.ApiVersion();
  }
  if (auto md = list.find("metadata"); md != list.end() && md->is_object()) {
    if (auto v = md->find("resourceVersion"); v != md->end() && v->is_string()) {
      out.resource_version = v->get<std::string>();
    }
    if (auto v = md->find("continue"); v != md->end() && v->is_string()) {
      out.continue_token = v->get<std::string>();
    }
    if (auto v = md->find("remainingItemCount"); v != md->end() && v->is_number_integer()) {
      out.remaining_item_count = v->get<int64_t>();
    }
  }
  return out;
}

namespace {

absl::StatusOr<std::string> TargetNamespace(const Resource& r, const std::string& ns,
                                            const Json& obj, absl::string_view op) {
  if (!r.namespaced) return std::string();
  if (!ns.empty()) return ns;
  if (obj.is_object()) {
    auto md = obj.find("metadata");
    if (md != obj.end() && md->is_object()) {
      auto n = md->find("namespace");
      if (n != md->end() && n->is_string() && !n->get<std::string>().empty()) {
        return n->get<std::string>();
      }
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": ", r.resource, " are namespaced but no namespace was given"));
}

// Request bodies as Go's encoding/json writes them: compact, keys sorted (nlohmann's objects
// are), invalid UTF-8 replaced by U+FFFD instead of throwing, and <, >, &, U+2028, U+2029 escaped.
// The escapes matter for raw fields (runtime.RawExtension, e.g. ControllerRevision.data): the API
// server keeps their bytes as sent, and a later patch of the object re-encodes them the Go way;
// bytes that differ make "data: field is immutable" on a label patch of a revision whose template
// holds `&` (a shell command).
std::string EncodeBody(const Json& j) {
  std::string raw = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else if (c == '\xe2' && i + 2 < raw.size() && raw[i + 1] == '\x80' &&
               (raw[i + 2] == '\xa8' || raw[i + 2] == '\xa9')) {
      out += raw[i + 2] == '\xa8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<Json> RestKubeClient::Create(const Resource& r, const std::string& ns,
                                            const Json& obj) {
  if (!obj.is_object()) return absl::InvalidArgumentError("Create: object is not a JSON object");
  ASSIGN_OR_RETURN(std::string target_ns, TargetNamespace(r, ns, obj, "Create"));
  return ExecuteJson({.method = "POST",
                      .path = ResourcePath(r, target_ns),
                      .body = EncodeBody(obj),
                      .content_type = "application/json",
                      .idempotent = false});
}

absl::StatusOr<Json> RestKubeClient::Update(const Resource& r, const std::string& ns,
                                            const Json& obj, const std::string& subresource) {
  if (!obj.is_object()) return absl::InvalidArgumentError("Update: object is not a JSON object");
  std::string name;
  if (auto md = obj.find("metadata"); md != obj.end() && md->is_object()) {
    if (auto n = md->find("name"); n != md->end() && n->is_string()) name = n->get<std::string>();
  }
  if (name.empty()) return absl::InvalidArgumentError("Update: object has no metadata.name");
  ASSIGN_OR_RETURN(std::string target_ns, TargetNamespace(r, ns, obj, "Update"));
  return ExecuteJson({.method = "PUT",
                      .path = ResourcePath(r, target_ns, name, subresource),
                      .body = EncodeBody(obj),
                      .content_type = "application/json",
                      .idempotent = false});
}

absl::StatusOr<Json> RestKubeClient::Patch(const Resource& r, const std::string& ns,
                                           const std::string& name, PatchType type,
                                           const Json& patch, const std::string& subresource) {
  if (name.empty()) return absl::InvalidArgumentError("Patch: empty name");
  if (r.namespaced && ns.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Patch: ", r.resource, " are namespaced but no namespace was given"));
  }
  return ExecuteJson({.method = "PATCH",
                      .path = ResourcePath(r, ns, name, subresource),
                      .body = EncodeBody(patch),
                      .content_type = PatchContentType(type),
                      .idempotent = false});
}

absl::Status RestKubeClient::Delete(const Resource& r, const std::string& ns,
                                    const std::string& name, const DeleteOptions& opts) {
  if (name.empty()) return absl::InvalidArgumentError("Delete: empty name");
  if (r.namespaced && ns.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Delete: ", r.resource, " are namespaced but no namespace was given"));
  }
  Json body = {{"kind", "DeleteOptions"}, {"apiVersion", "v1"}};
  if (opts.precondition_uid) body["preconditions"]["uid"] = *opts.precondition_uid;
  if (opts.precondition_resource_version) {
    body["preconditions"]["resourceVersion"] = *opts.precondition_resource_version;
  }
  if (!opts.propagation_policy.empty()) body["propagationPolicy"] = opts.propagation_policy;
  if (opts.grace_period_seconds) body["gracePeriodSeconds"] = *opts.grace_period_seconds;
  return Execute({.method = "DELETE",
                  .path = ResourcePath(r, ns, name),
                  .body = body.dump(),
                  .content_type = "application/json",
                  .idempotent = false})
      .status();
}

// ---------------------------------------------------------------------------------------------
// Watch

namespace {

struct WatchState {
  CURL* curl = nullptr;
  const WatchHandler* handler = nullptr;
  WatchCanceller* canceller = nullptr;
  long http_code = 0;
  std::string pending;     // bytes after the last newline
  std::string error_body;  // body of a non-2xx answer
  absl::Status status;     // first in-stream error
  bool stopped = false;    // handler returned false or cancelled
  int64_t events = 0;
};

// Decodes one event line and passes it on. Returns false to stop the stream.
bool DispatchLine(WatchState* st, absl::string_view line) {
  line = absl::StripAsciiWhitespace(line);
  if (line.empty()) return true;
  Json ev = Json::parse(line.begin(), line.end(), nullptr, false);
  if (ev.is_discarded() || !ev.is_object()) {
    st->status = absl::DataLossError(absl::StrCat("malformed watch event (", line.size(),
                                                  " bytes) after ", st->events, " event(s)"));
    return false;
  }
  auto type_it = ev.find("type");
  auto obj_it = ev.find("object");
  if (type_it == ev.end() || !type_it->is_string() || obj_it == ev.end() || !obj_it->is_object()) {
    st->status = absl::DataLossError("watch event without a type or an object");
    return false;
  }
  const std::string type = type_it->get<std::string>();
  WatchEvent out;
  if (type == "ADDED") {
    out.type = WatchEvent::Type::kAdded;
  } else if (type == "MODIFIED") {
    out.type = WatchEvent::Type::kModified;
  } else if (type == "DELETED") {
    out.type = WatchEvent::Type::kDeleted;
  } else if (type == "BOOKMARK") {
    out.type = WatchEvent::Type::kBookmark;
  } else if (type == "ERROR") {
    st->status = StatusFromHttp(0, obj_it->dump());
    return false;
  } else {
    st->status = absl::DataLossError(absl::StrCat("unknown watch event type \"", type, "\""));
    return false;
  }
  out.object = std::move(*obj_it);
  ++st->events;
  if (!(*st->handler)(std::move(out))) {
    st->stopped = true;
    return false;
  }
  return true;
}

size_t WatchWrite(char* data, size_t size, size_t n, void* user) {
  auto* st = static_cast<WatchState*>(user);
  const size_t len = size * n;
  if (st->http_code == 0) curl_easy_getinfo(st->curl, CURLINFO_RESPONSE_CODE, &st->http_code);
  if (st->http_code < 200 || st->http_code >= 300) {
    if (st->error_body.size() < 64 * 1024) st->error_body.append(data, len);
    return len;
  }
  st->pending.append(data, len);
  size_t start = 0;
  for (;;) {
    size_t nl = st->pending.find('\n', start);
    if (nl == std::string::npos) break;
    if (!DispatchLine(st, absl::string_view(st->pending).substr(start, nl - start))) return 0;
    start = nl + 1;
  }
  st->pending.erase(0, start);
  return len;
}

int WatchProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* st = static_cast<WatchState*>(user);
  if (st->canceller != nullptr && st->canceller->cancelled()) {
    st->stopped = true;
    return 1;
  }
  return 0;
}

}  // namespace

absl::Status RestKubeClient::Watch(const Resource& r, const std::string& ns,
                                   const ListOptions& opts, const WatchHandler& handler,
                                   WatchCanceller* canceller) {
  const std::string path = ResourcePath(r, ns) + ListQuery(opts, true);
  const std::string what = absl::StrCat("WATCH ", config_.host, path);
  const absl::Duration idle = opts.timeout_seconds > 0
                                  ? absl::Seconds(opts.timeout_seconds) + absl::Seconds(30)
                                  : options_.watch_idle_timeout;
  bool refreshed_token = false;
  for (int attempt = 1;; ++attempt) {
    if (canceller != nullptr && canceller->cancelled()) return absl::OkStatus();
    throttle_.Wait();
    ASSIGN_OR_RETURN(std::string token, tokens_.Token());
    attempts_.fetch_add(1);
    CurlPtr h = pool_->Acquire();
    if (h == nullptr) return absl::InternalError("curl_easy_init failed");
    CURL* c = h.get();
    char errbuf[CURL_ERROR_SIZE] = {0};
    WatchState st;
    st.curl = c;
    st.handler = &handler;
    st.canceller = canceller;
    (void)ApplyCommonOptions(c, config_.host + path, errbuf);
    SlistPtr headers = BuildHeaders(token, "");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 0L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, std::max<long>(1, absl::ToInt64Seconds(idle)));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &WatchWrite);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &st);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, &WatchProgress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &st);
    std::optional<absl::Duration> retry_after;
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &CaptureRetryAfter);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &retry_after);
    const CURLcode code = curl_easy_perform(c);
    if (st.http_code == 0) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st.http_code);
    if (options_.on_request) options_.on_request("WATCH", st.http_code);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, nullptr);
    pool_->Release(std::move(h));

    if (st.stopped) return absl::OkStatus();
    if (!st.status.ok()) return st.status;
    if (st.http_code != 0 && (st.http_code < 200 || st.http_code >= 300) &&
        (code == CURLE_OK || code == CURLE_PARTIAL_FILE)) {
      absl::Status err = StatusFromHttp(st.http_code, st.error_body);
      if (st.http_code == 401 && !refreshed_token && tokens_.from_file()) {
        refreshed_token = true;
        tokens_.Refresh();
        --attempt;
        continue;
      }
      if (st.http_code == 429 && attempt < options_.max_attempts) {
        absl::Duration d =
            std::min(retry_after.value_or(RetryAfter(err).value_or(options_.default_retry_after)),
                     options_.max_retry_after);
        clock_->SleepFor(d);
        continue;
      }
      return err;
    }
    if (code != CURLE_OK) {
      absl::Status err = TransportStatus(code, errbuf, what);
      if (!st.pending.empty() && err.code() != absl::StatusCode::kUnauthenticated) {
        return absl::UnavailableError(
            absl::StrCat(what, ": watch stream cut in the middle of an event after ", st.events,
                         " event(s): ", err.message()));
      }
      return err;
    }
    // The server closed the stream cleanly. A final event without its newline is accepted if it
    // is complete JSON; otherwise the stream was truncated.
    if (!absl::StripAsciiWhitespace(st.pending).empty()) {
      std::string last = std::move(st.pending);
      if (Json::accept(last)) {
        DispatchLine(&st, last);
        if (!st.status.ok()) return st.status;
      } else {
        return absl::DataLossError(absl::StrCat(what, ": watch stream ended inside an event after ",
                                                st.events, " event(s)"));
      }
    }
    return absl::OkStatus();
  }
}

}  // namespace kruise::kube
