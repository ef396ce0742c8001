#pragma once

// RestConfig: where the Kubernetes API server is and how to authenticate to it, plus the loaders
// (in-cluster service account, kubeconfig file) and the resolver that picks one of them the way
// kubectl and controller-runtime do:
//
//   explicit --kubeconfig flag > $KUBECONFIG (first existing file) > in-cluster > ~/.kube/config
//
// Errors name the file and the missing or malformed key. Secrets (tokens, keys) never appear in
// messages or logs.

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace kruise::kube {

struct RestConfig {
  std::string host;  // "https://10.0.0.1:443" (scheme, host, port; no trailing slash)

  // Server CA: PEM data (preferred when both are set) or a file. Neither: the system trust store.
  std::string ca_data;
  std::string ca_file;
  bool insecure_skip_tls_verify = false;

  // Bearer token: inline, or a file that is re-read when it changes (projected tokens rotate).
  std::string bearer_token;
  std::string bearer_token_file;

  // Client certificate and key (PEM): data or files.
  std::string client_cert_data;
  std::string client_cert_file;
  std::string client_key_data;
  std::string client_key_file;

  // Client-side throttle: sustained requests per second and burst. qps <= 0: unlimited.
  double qps = 20;
  int burst = 30;
  std::string user_agent = "kruise-cpp/0.1";
  // Deadline of one non-watch request (each attempt).
  absl::Duration timeout = absl::Seconds(30);

  // From the kubeconfig context or the service account's namespace file ("" when unknown).
  std::string default_namespace;
  // Where this config came from ("kubeconfig /root/.kube/config context kind", "in-cluster"), for
  // messages.
  std::string source;
};

// Looks up an environment variable; nullopt when unset. Injected so tests need not touch the
// process environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup ProcessEnv();

struct InClusterOptions {
  std::string service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
  EnvLookup env;  // default: the process environment
};

// In-cluster config: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT (IPv6 literals get
// brackets), token file and ca.crt from the service-account directory, namespace from its
// "namespace" file. kNotFound when not running in a cluster (env vars unset).
absl::StatusOr<RestConfig> InClusterConfig(const InClusterOptions& opts = {});

// Loads a kubeconfig file. `context` overrides current-context when non-empty. Relative file paths
// in the file are resolved against the file's directory. Inline *-data fields are base64 and are
// decoded. Unsupported auth (exec, auth-provider) is an error.
absl::StatusOr<RestConfig> LoadKubeconfig(const std::string& path, const std::string& context = "");

struct ResolveOptions {
  std::string kubeconfig_flag;  // --kubeconfig; when set it must load
  std::string context;          // --context
  EnvLookup env;                // default: the process environment (KUBECONFIG, HOME)
  InClusterOptions in_cluster;  // its env defaults to `env`
};

absl::StatusOr<RestConfig> ResolveConfig(const ResolveOptions& opts = {});

// BearerTokenSource hands out the current bearer token. With a token file it re-reads the file when
// its mtime changes (checked at most every `check_interval`) and at least every `max_age`;
// Refresh() forces a re-read (the client calls it once after a 401). Thread-safe.
class BearerTokenSource {
 public:
  BearerTokenSource(std::string static_token, std::string token_file, Clock* clock,
                    absl::Duration check_interval = absl::Seconds(10),
                    absl::Duration max_age = absl::Minutes(1));

  // The token ("" when none is configured). Errors only when the file cannot be read and no token
  // was read before.
  absl::StatusOr<std::string> Token();
  // Re-reads the token file now. Returns whether the token changed.
  bool Refresh();
  bool from_file() const { return !file_.empty(); }

 private:
  absl::Status ReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string file_;
  Clock* const clock_;
  const absl::Duration check_interval_;
  const absl::Duration max_age_;
  absl::Mutex mu_;
  std::string token_ ABSL_GUARDED_BY(mu_);
  bool have_token_ ABSL_GUARDED_BY(mu_) = false;
  int64_t mtime_ns_ ABSL_GUARDED_BY(mu_) = -1;
  absl::Time last_read_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time last_check_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

// Reads a whole file (helper shared with the client; errors name the path).
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

}  // namespace kruise::kube
