#pragma once

// Logging: spdlog with one named logger per component ("cri", "kube", "daemon", ...).
//
//   InitLogging({.format = LogFormat::kJson, .level = spdlog::level::debug});
//   auto log = kruise::Logger("cri");
//   log->info("connected to {} {}", name, version);
//
// Never log secrets: credentials, tokens, pull-secret contents, private keys.

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "spdlog/spdlog.h"

// Debian's abseil has its own absl::string_view (not std::string_view): let fmt/spdlog print it
// and absl::Status directly.
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  template <typename Ctx>
  auto format(absl::string_view s, Ctx& ctx) const {
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(s.data(), s.size()), ctx);
  }
};
template <>
struct fmt::formatter<absl::Status> : fmt::formatter<fmt::string_view> {
  template <typename Ctx>
  auto format(const absl::Status& s, Ctx& ctx) const {
    std::string text = s.ToString();
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(text), ctx);
  }
};

namespace kruise {

enum class LogFormat { kText, kJson };

struct LogOptions {
  LogFormat format = LogFormat::kText;
  spdlog::level::level_enum level = spdlog::level::info;
};

// Configures every logger created before or after the call. Thread-safe; call early in main().
void InitLogging(const LogOptions& options);

// "text" | "json".
absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view s);

// Maps a klog-style verbosity (-v 0..10) to a level: 0-1 info, 2-4 debug, >= 5 trace.
spdlog::level::level_enum LevelFromVerbosity(int v);

// Returns the logger for `component`, creating it on first use. Thread-safe.
std::shared_ptr<spdlog::logger> Logger(const std::string& component);

}  // namespace kruise
