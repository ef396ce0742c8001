#pragma once

// Small helpers for building URLs from host names and addresses.

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace kruise {

// The host part of a URL or host:port: an IPv6 literal in brackets, anything else as given.
inline std::string UrlHost(absl::string_view host) {
  if (absl::StrContains(host, ':') && !absl::StartsWith(host, "[")) {
    return absl::StrCat("[", host, "]");
  }
  return std::string(host);
}

}  // namespace kruise
