#include "kube/errors.h"

#include <cstdint>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace kruise::kube {
namespace {

constexpr size_t kMaxBodyInMessage = 256;

// The reason Kubernetes uses for an HTTP code when the body carries none.
std::string DefaultReason(long code) {
  switch (code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 406:
      return "NotAcceptable";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 413:
      return "RequestEntityTooLarge";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 500:
      return "InternalError";
    case 502:
      return "BadGateway";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return code >= 500 ? "InternalError" : (code >= 400 ? "Unknown" : "");
  }
}

absl::StatusCode CodeFor(long http, const std::string& reason) {
  // Reasons that share an HTTP code with another meaning are checked first.
  if (reason == "AlreadyExists") return absl::StatusCode::kAlreadyExists;
  if (reason == "Conflict") return absl::StatusCode::kAborted;
  if (reason == "Expired" || reason == "Gone") return absl::StatusCode::kOutOfRange;
  switch (http) {
    case 400:
      return absl::StatusCode::kInvalidArgument;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 405:
      return absl::StatusCode::kUnimplemented;
    case 409:
      return absl::StatusCode::kAborted;
    case 410:
      return absl::StatusCode::kOutOfRange;
    case 413:
    case 415:
    case 422:
      return absl::StatusCode::kInvalidArgument;
    case 429:
      return absl::StatusCode::kResourceExhausted;
    case 504:
      return absl::StatusCode::kDeadlineExceeded;
    default:
      break;
  }
  if (http >= 500) return absl::StatusCode::kUnavailable;
  if (http >= 400) return absl::StatusCode::kFailedPrecondition;
  return absl::StatusCode::kUnknown;
}

std::string Truncate(absl::string_view body) {
  std::string s(body.substr(0, kMaxBodyInMessage));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  if (body.size() > kMaxBodyInMessage) s += "...";
  return s;
}

}  // namespace

absl::Status StatusFromHttp(long http_code, absl::string_view body) {
  if (http_code >= 200 && http_code < 300) return absl::OkStatus();
  std::string reason;
  std::string message;
  int64_t retry_after = -1;
  nlohmann::json j = nlohmann::json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_object() && (j.contains("reason") || j.contains("message") || j.contains("code"))) {
    if (auto it = j.find("reason"); it != j.end() && it->is_string())
      reason = it->get<std::string>();
    if (auto it = j.find("message"); it != j.end() && it->is_string()) {
      message = it->get<std::string>();
    }
    if (auto it = j.find("code"); it != j.end() && it->is_number_integer() && http_code <= 0) {
      http_code = it->get<long>();
    }
    if (auto d = j.find("details"); d != j.end() && d->is_object()) {
      if (auto ra = d->find("retryAfterSeconds"); ra != d->end() && ra->is_number_integer()) {
        retry_after = ra->get<int64_t>();
      }
    }
  } else {
    message = Truncate(body);
  }
  if (reason.empty()) reason = DefaultReason(http_code);
  if (reason.empty()) reason = "Unknown";
  if (message.empty()) message = absl::StrCat("HTTP ", http_code);
  absl::Status s(CodeFor(http_code, reason), absl::StrCat(reason, ": ", message));
  s.SetPayload(kReasonPayload, absl::Cord(reason));
  if (retry_after >= 0) s.SetPayload(kRetryAfterPayload, absl::Cord(absl::StrCat(retry_after)));
  return s;
}

std::string Reason(const absl::Status& s) {
  auto p = s.GetPayload(kReasonPayload);
  return p ? std::string(*p) : std::string();
}

std::optional<absl::Duration> RetryAfter(const absl::Status& s) {
  auto p = s.GetPayload(kRetryAfterPayload);
  int64_t secs = 0;
  if (!p || !absl::SimpleAtoi(std::string(*p), &secs) || secs < 0) return std::nullopt;
  return absl::Seconds(secs);
}

}  // namespace kruise::kube
