#pragma once

// Mapping of Kubernetes API errors to absl status codes, kept in one place:
//
//   HTTP / reason                      absl code
//   400 BadRequest                     kInvalidArgument
//   401 Unauthorized                   kUnauthenticated
//   403 Forbidden                      kPermissionDenied
//   404 NotFound                       kNotFound
//   409 AlreadyExists                  kAlreadyExists
//   409 Conflict                       kAborted
//   410 Gone / Expired                 kOutOfRange
//   422 Invalid                        kInvalidArgument
//   429 TooManyRequests                kResourceExhausted
//   500, 502, 503                      kUnavailable (retried for idempotent requests)
//   504 Timeout                        kDeadlineExceeded
//   malformed response                 kDataLoss
//   transport error (connect, TLS)     kUnavailable (TLS verification failure: kUnauthenticated)
//
// The message is "<Reason>: <server message>"; the reason (e.g. "Conflict", "Expired") is also set
// as the status payload kReasonPayload so callers can tell AlreadyExists from Conflict precisely.

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kruise::kube {

inline constexpr char kReasonPayload[] = "k8s.io/reason";

// Builds a status from an HTTP code and the response body (a Kubernetes Status object or anything).
absl::Status StatusFromHttp(long http_code, absl::string_view body);

// The Kubernetes reason recorded on `s` ("" if none).
std::string Reason(const absl::Status& s);

inline bool IsNotFound(const absl::Status& s) { return s.code() == absl::StatusCode::kNotFound; }
inline bool IsConflict(const absl::Status& s) { return s.code() == absl::StatusCode::kAborted; }
inline bool IsAlreadyExists(const absl::Status& s) {
  return s.code() == absl::StatusCode::kAlreadyExists;
}
inline bool IsGone(const absl::Status& s) { return s.code() == absl::StatusCode::kOutOfRange; }

}  // namespace kruise::kube
