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

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kruise::kube {

inline constexpr char kReasonPayload[] = "k8s.io/reason";
// Set when the server asked us to retry later (Status details.retryAfterSeconds or the
// Retry-After header): the number of seconds as decimal text.
inline constexpr char kRetryAfterPayload[] = "k8s.io/retry-after-seconds";

// Builds a status from an HTTP code and the response body (a Kubernetes Status object or anything).
// 2xx codes give OK. A non-JSON body becomes the message (truncated to 256 bytes). `http_code` <= 0
// means "take the code from the Status object" (watch ERROR events embed a Status).
absl::Status StatusFromHttp(long http_code, absl::string_view body);

// The server's requested retry delay recorded on `s`, if any.
std::optional<absl::Duration> RetryAfter(const absl::Status& s);

// The Kubernetes reason recorded on `s` ("" if none).
std::string Reason(const absl::Status& s);

// Note: absl has IsNotFound/IsAlreadyExists too and ADL finds them, so an unqualified call with an
// absl::Status argument is ambiguous: write kube::IsNotFound(s) (same meaning either way).
inline bool IsNotFound(const absl::Status& s) { return s.code() == absl::StatusCode::kNotFound; }
inline bool IsConflict(const absl::Status& s) { return s.code() == absl::StatusCode::kAborted; }
// How often a read-modify-write retries after a 409 before giving up (and requeueing).
inline constexpr int kConflictRetries = 5;
inline bool IsAlreadyExists(const absl::Status& s) {
  return s.code() == absl::StatusCode::kAlreadyExists;
}
inline bool IsGone(const absl::Status& s) { return s.code() == absl::StatusCode::kOutOfRange; }

}  // namespace kruise::kube
