#pragma once

// CRI endpoint strings (pure string code, no gRPC: fuzzed by test/fuzz/cri_endpoint.cc).

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kruise::cri {

// Normalises a CRI endpoint: "unix:///run/x.sock", "unix:/run/x.sock" or a bare absolute path
// "/run/x.sock" → the socket path "/run/x.sock". INVALID_ARGUMENT for other schemes
// ("tcp://", "npipe://"), relative paths and empty input.
absl::StatusOr<std::string> SocketPathFromEndpoint(absl::string_view endpoint);

}  // namespace kruise::cri
