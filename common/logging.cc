#include "common/logging.h"

#include <mutex>

#include "absl/strings/str_cat.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace kruise {
namespace {

std::mutex g_mu;
LogOptions g_options;

// JSON lines: {"ts":"...","level":"info","logger":"cri","msg":"..."}. The %* flag writes the
// message with JSON string escaping.
class JsonEscapeFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    for (char c : std::string_view(msg.payload.data(), msg.payload.size())) {
      switch (c) {
        case '"': dest.append(std::string_view("\\\"")); break;
        case '\\': dest.append(std::string_view("\\\\")); break;
        case '\n': dest.append(std::string_view("\\n")); break;
        case '\r': dest.append(std::string_view("\\r")); break;
        case '\t': dest.append(std::string_view("\\t")); break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            static const char* kHex = "0123456789abcdef";
            const char buf[6] = {'\\', 'u', '0', '0', kHex[(c >> 4) & 0xf], kHex[c & 0xf]};
            dest.append(std::string_view(buf, 6));
          } else {
            dest.push_back(c);
          }
      }
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonEscapeFlag>();
  }
};

void Apply(spdlog::logger& logger, const LogOptions& options) {
  logger.set_level(options.level);
  if (options.format == LogFormat::kJson) {
    auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
    formatter->add_flag<JsonEscapeFlag>('*').set_pattern(
        R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","logger":"%n","msg":"%*"})");
    logger.set_formatter(std::move(formatter));
  } else {
    logger.set_pattern("%Y-%m-%dT%H:%M:%S.%fZ %L %n] %v", spdlog::pattern_time_type::utc);
  }
}

}  // namespace

void InitLogging(const LogOptions& options) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_options = options;
  spdlog::apply_all([&](std::shared_ptr<spdlog::logger> l) { Apply(*l, options); });
}

absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view s) {
  if (s == "text") return LogFormat::kText;
  if (s == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(absl::StrCat("log format must be text or json, got \"", s, "\""));
}

spdlog::level::level_enum LevelFromVerbosity(int v) {
  if (v <= 1) return spdlog::level::info;
  if (v <= 4) return spdlog::level::debug;
  return spdlog::level::trace;
}

std::shared_ptr<spdlog::logger> Logger(const std::string& component) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (auto existing = spdlog::get(component)) return existing;
  // stderr, so that command output (e.g. `kruise-daemon check`) stays clean on stdout.
  auto logger = std::make_shared<spdlog::logger>(
      component, std::make_shared<spdlog::sinks::stderr_sink_mt>());
  Apply(*logger, g_options);
  spdlog::register_logger(logger);
  return logger;
}

}  // namespace kruise
