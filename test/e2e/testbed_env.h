#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace kruise::testing {

// Values describing the running test bed (scripts/testbed/up): KRUISE_TESTBED_CRI_SOCKET,
// KRUISE_TESTBED_REGISTRY, ... Thread-compatible value type.
class TestbedEnv {
 public:
  // Reads the KRUISE_TESTBED_* variables from the process environment. When
  // KRUISE_TESTBED_CRI_SOCKET is not set there, parses the env file written by `up` instead:
  // $KRUISE_TESTBED_DIR/env (default /tmp/kruise-testbed/env). Returns NotFound when neither
  // describes a test bed, or when the socket it names does not exist.
  static absl::StatusOr<TestbedEnv> Load();

  // Parses the text of an env file ("export KEY=VALUE" lines, VALUE optionally in double quotes).
  static TestbedEnv ParseEnvFile(absl::string_view text);

  // The value of `key`, or "" when absent.
  std::string Get(const std::string& key) const;
  bool Has(const std::string& key) const { return vars_.count(key) > 0; }
  const std::map<std::string, std::string>& vars() const { return vars_; }

 private:
  std::map<std::string, std::string> vars_;
};

// True when KRUISE_E2E_REQUIRED=1: a missing test bed is then a failure, not a skip.
bool E2eRequired();

// Polls `condition` every `interval` until it returns true or `timeout` passes; returns whether it
// became true. For waiting on external processes (containerd, shims) that offer no notification.
template <typename Condition>
bool WaitFor(Condition condition, absl::Duration timeout,
             absl::Duration interval = absl::Milliseconds(20)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (condition()) {
      return true;
    }
    if (absl::Now() >= deadline) {
      return false;
    }
    absl::SleepFor(interval);
  }
}

}  // namespace kruise::testing

// Loads the test bed into `var` (a TestbedEnv) or skips the test; with KRUISE_E2E_REQUIRED=1 a
// missing test bed fails it instead. Use inside a TEST body or SetUp().
#define KRUISE_LOAD_TESTBED_OR_SKIP(var)                                                           \
  do {                                                                                             \
    auto loaded_testbed_ = ::kruise::testing::TestbedEnv::Load();                                  \
    if (!loaded_testbed_.ok()) {                                                                   \
      if (::kruise::testing::E2eRequired()) {                                                      \
        FAIL() << "KRUISE_E2E_REQUIRED=1 but no test bed: " << loaded_testbed_.status().ToString() \
               << " (run scripts/testbed/up or ctest -L e2e)";                                     \
      }                                                                                            \
      GTEST_SKIP() << "no CRI test bed (" << loaded_testbed_.status().ToString()                   \
                   << "); start one with scripts/testbed/up";                                      \
    }                                                                                              \
    var = *std::move(loaded_testbed_);                                                             \
  } while (0)
