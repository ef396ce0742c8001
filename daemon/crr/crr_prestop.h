#pragma once

// Host-side preStop actions used when the node agent kills a container for a
// ContainerRecreateRequest: an HTTP GET (kubelet's httpGet handler) and a TCP connect
// (tcpSocket). The exec handler goes through the CRI (RuntimeService::ExecSync) and lives in
// crr_executor.cc.
//
// Thread-safety: the functions share no state and may run concurrently.
// Blocking: each blocks at most `timeout` (connect + transfer).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kruise::daemon {

struct HttpGetAction {
  std::string scheme = "HTTP";  // "HTTP" | "HTTPS" (certificates are not verified, as kubelet)
  std::string host;             // literal host or IP
  int port = 0;
  std::string path = "/";
  std::vector<std::pair<std::string, std::string>> headers;
};

// Performs the GET and returns the HTTP status code. Any completed response counts as "ran"
// (callers decide what a 5xx means). Errors: INVALID_ARGUMENT for a bad scheme/port,
// DEADLINE_EXCEEDED when `timeout` passes, UNAVAILABLE for connection failures.
absl::StatusOr<int> RunHttpGet(const HttpGetAction& action, absl::Duration timeout);

// Opens and closes a TCP connection to host:port (IPv4/IPv6 literal or resolvable name).
// Errors: INVALID_ARGUMENT for a bad port, DEADLINE_EXCEEDED on timeout, UNAVAILABLE otherwise.
absl::Status DialTcp(const std::string& host, int port, absl::Duration timeout);

}  // namespace kruise::daemon
