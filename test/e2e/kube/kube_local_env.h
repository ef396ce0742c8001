#pragma once

// Helpers for end-to-end tests against kube-local (a real kube-apiserver, see
// /work/shared/kube-local/README.md): reading its env file, building a RestKubeClient from its
// admin kubeconfig, throw-away namespaces and waiting on conditions with a deadline.
//
// The env file path comes from $KRUISE_KUBE_LOCAL_ENV (default /tmp/kube-local/env). When it is
// absent, tests skip with a clear message, unless KRUISE_E2E_REQUIRED=1 (then they fail).

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "kube/config.h"
#include "kube/rest_client.h"

namespace kruise::testing {

// The variables of a kube-local env file. Thread-compatible value type.
class KubeLocalEnv {
 public:
  // Path of the env file: $KRUISE_KUBE_LOCAL_ENV or /tmp/kube-local/env.
  static std::string EnvFilePath();
  // Loads and parses EnvFilePath(). NotFound when the file is missing or names no KUBECONFIG.
  static absl::StatusOr<KubeLocalEnv> Load();
  // Parses `export NAME="value"` / `NAME=value` lines; comments and blank lines are skipped.
  static KubeLocalEnv Parse(absl::string_view text);

  std::string Get(const std::string& key) const;  // "" when absent
  std::string kubeconfig() const { return Get("KUBECONFIG"); }
  // KUBE_LOCAL_KUBECTL, or "kubectl".
  std::string kubectl() const;

 private:
  std::map<std::string, std::string> vars_;
};

// True when KRUISE_E2E_REQUIRED=1.
bool KubeE2eRequired();

// A RestKubeClient for kube-local's admin kubeconfig.
absl::StatusOr<std::unique_ptr<kube::RestKubeClient>> AdminClient(
    const KubeLocalEnv& env, kube::RestClientOptions options = {});

// "prefix-<8 random lowercase alnum>".
std::string RandomName(const std::string& prefix);

// Creates a namespace with a random name on construction and deletes it on destruction (without
// waiting for the namespace to disappear).
class ScopedNamespace {
 public:
  ScopedNamespace(kube::KubeClient* client, const std::string& prefix);
  ~ScopedNamespace();
  ScopedNamespace(const ScopedNamespace&) = delete;
  ScopedNamespace& operator=(const ScopedNamespace&) = delete;

  const absl::Status& status() const { return status_; }
  const std::string& name() const { return name_; }

 private:
  kube::KubeClient* client_;
  std::string name_;
  absl::Status status_;
};

// Polls `condition` every `interval` until it holds or `timeout` passes; returns whether it held.
// For external processes and servers that offer no notification.
template <typename Condition>
bool PollUntil(Condition condition, absl::Duration timeout,
               absl::Duration interval = absl::Milliseconds(50)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (condition()) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(interval);
  }
}

// Runs argv, capturing stdout+stderr into *output (if given). Returns the exit code.
absl::StatusOr<int> RunCommand(const std::vector<std::string>& argv, std::string* output = nullptr);

}  // namespace kruise::testing

// Loads kube-local into `env_var` and a client into `client_var`, or skips (fails with
// KRUISE_E2E_REQUIRED=1). Use in SetUp() or a TEST body.
#define KRUISE_KUBE_LOCAL_OR_SKIP(env_var)                                                        \
  do {                                                                                            \
    auto kruise_env_or = ::kruise::testing::KubeLocalEnv::Load();                                 \
    if (!kruise_env_or.ok()) {                                                                    \
      if (::kruise::testing::KubeE2eRequired()) {                                                 \
        FAIL() << "kube-local is required (KRUISE_E2E_REQUIRED=1) but unavailable: "              \
               << kruise_env_or.status();                                                         \
      }                                                                                           \
      GTEST_SKIP() << "kube-local not running (" << kruise_env_or.status()                        \
                   << "); start it with /work/shared/kube-local/up or set KRUISE_KUBE_LOCAL_ENV"; \
    }                                                                                             \
    env_var = *std::move(kruise_env_or);                                                          \
  } while (0)
