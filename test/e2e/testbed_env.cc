#include "test/e2e/testbed_env.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kruise::testing {
namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : fallback;
}

}  // namespace

TestbedEnv TestbedEnv::ParseEnvFile(absl::string_view text) {
  TestbedEnv env;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || absl::StartsWith(line, "#")) {
      continue;
    }
    absl::ConsumePrefix(&line, "export ");
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos || eq == 0) {
      continue;
    }
    absl::string_view key = line.substr(0, eq);
    absl::string_view value = line.substr(eq + 1);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    env.vars_[std::string(key)] = std::string(value);
  }
  return env;
}

absl::StatusOr<TestbedEnv> TestbedEnv::Load() {
  TestbedEnv env;
  if (const char* socket = std::getenv("KRUISE_TESTBED_CRI_SOCKET");
      socket != nullptr && *socket != '\0') {
    for (char** e = environ; *e != nullptr; ++e) {
      absl::string_view entry(*e);
      if (!absl::StartsWith(entry, "KRUISE_TESTBED_")) {
        continue;
      }
      const size_t eq = entry.find('=');
      env.vars_[std::string(entry.substr(0, eq))] = std::string(entry.substr(eq + 1));
    }
  } else {
    const std::string path = EnvOr("KRUISE_TESTBED_DIR", "/tmp/kruise-testbed") + "/env";
    std::ifstream in(path);
    if (!in) {
      return absl::NotFoundError("KRUISE_TESTBED_CRI_SOCKET is unset and " + path +
                                 " does not exist");
    }
    std::stringstream text;
    text << in.rdbuf();
    env = ParseEnvFile(text.str());
  }
  const std::string socket = env.Get("KRUISE_TESTBED_CRI_SOCKET");
  std::error_code ec;
  if (socket.empty() || !std::filesystem::exists(socket, ec)) {
    return absl::NotFoundError("CRI socket '" + socket + "' of the test bed does not exist");
  }
  return env;
}

std::string TestbedEnv::Get(const std::string& key) const {
  auto it = vars_.find(key);
  return it == vars_.end() ? std::string() : it->second;
}

bool E2eRequired() { return EnvOr("KRUISE_E2E_REQUIRED", "0") == "1"; }

}  // namespace kruise::testing
