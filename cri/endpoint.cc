#include "cri/endpoint.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kruise::cri {

absl::StatusOr<std::string> SocketPathFromEndpoint(absl::string_view endpoint) {
  constexpr absl::string_view kUnixScheme = "unix://";
  if (endpoint.empty()) {
    return absl::InvalidArgumentError("empty CRI endpoint");
  }
  absl::string_view path = endpoint;
  if (absl::StartsWith(endpoint, kUnixScheme)) {
    path = endpoint.substr(kUnixScheme.size());
  } else if (absl::StartsWith(endpoint, "unix:")) {
    path = endpoint.substr(5);
  } else if (endpoint.find("://") != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CRI endpoint \"", endpoint, "\": only unix sockets are supported (unix:///path)"));
  }
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("CRI endpoint \"", endpoint, "\": socket path must be absolute"));
  }
  return std::string(path);
}

}  // namespace kruise::cri
