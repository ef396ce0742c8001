#pragma once

// kruise-manager's command line and environment, with OpenKruise's names and defaults.
//
//   ASSIGN_OR_RETURN(ManagerConfig cfg, ParseManagerCommandLine(argc, argv, kube::ProcessEnv()));
//
// Flags: --metrics-addr (:8080), --health-probe-addr (:8000), --enable-leader-election (true;
// also --enable-leader-election=false), --leader-election-namespace (POD_NAMESPACE, else
// kruise-system), --leader-election-id (kruise-manager), --leader-election-lease-duration (15s),
// --leader-election-renew-deadline (10s), --leader-election-retry-period (2s),
// --webhook-initialize-timeout (60s), --controller-cache-sync-timeout (2m), --feature-gates,
// --webhook-cert-renew-before (4320h: renew the serving certificate 180 days before it expires),
// --rest-config-qps (30), --rest-config-burst (50), --<controller>-workers (3), --kubeconfig,
// --nodeimage-creation-delay (30s), --default-ttlseconds-for-always-nodeimage (300),
// --log-format text|json (also --logging-format), -v, --webhook-bind-address (IP of the webhook
// listener; default all interfaces; not in OpenKruise, which always listens on all),
// --webhook-handler-threads (8: threads running admission handlers), --pod-webhook-failure-policy
// (Ignore | Fail: what the pod webhook configurations say; Ignore: handler failures admit).
// Environment: POD_NAMESPACE, POD_NAME, WEBHOOK_PORT (9876), WEBHOOK_HOST, WEBHOOK_CERT_DIR
// (/tmp/kruise-webhook-certs), SECRET_NAME (kruise-webhook-certs), SERVICE_NAME
// (kruise-webhook-service), KRUISE_DAEMON_CONFIG_NS (kruise-daemon-config).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kube/config.h"
#include "manager/app/feature_gates.h"

namespace kruise::manager {

// Controllers that have a --<name>-workers flag (OpenKruise's list; unknown ones are accepted
// and ignored so existing manifests keep working).
const std::vector<std::string>& WorkerFlagControllers();

struct ManagerConfig {
  std::string metrics_addr = ":8080";
  std::string health_probe_addr = ":8000";
  bool enable_leader_election = true;
  std::string leader_election_namespace;  // default: namespace_name
  std::string leader_election_id = "kruise-manager";
  absl::Duration lease_duration = absl::Seconds(15);
  absl::Duration renew_deadline = absl::Seconds(10);
  absl::Duration retry_period = absl::Seconds(2);
  absl::Duration webhook_initialize_timeout = absl::Seconds(60);
  absl::Duration webhook_cert_renew_before = absl::Hours(24 * 180);  // certs are valid 10 years
  absl::Duration cache_sync_timeout = absl::Minutes(2);
  FeatureGates feature_gates;
  double rest_qps = 30;
  int rest_burst = 50;
  absl::Duration nodeimage_creation_delay = absl::Seconds(30);
  int64_t default_ttl_for_always_nodeimage_seconds = 300;
  std::map<std::string, int> workers;  // controller -> workers (only the ones given)
  std::string kubeconfig;
  std::string webhook_bind_address;  // "" = all interfaces
  int webhook_handler_threads = 8;   // --webhook-handler-threads (admission handler pool)
  // --pod-webhook-failure-policy: what the pod webhooks' configurations say (deploy/: Ignore;
  // overlays/strict-pods: Fail). Ignore: handler failures admit with a warning (FailOpen).
  std::string pod_webhook_failure_policy = "Ignore";
  std::string log_format = "text";
  int verbosity = 0;

  // Environment.
  std::string namespace_name = "kruise-system";  // POD_NAMESPACE
  std::string pod_name;                          // POD_NAME (leader identity: POD_NAME_<random>)
  int webhook_port = 9876;                       // WEBHOOK_PORT
  std::string webhook_host;                      // WEBHOOK_HOST (URL-mode webhook configs)
  std::string webhook_cert_dir = "/tmp/kruise-webhook-certs";    // WEBHOOK_CERT_DIR
  std::string secret_name = "kruise-webhook-certs";              // SECRET_NAME
  std::string service_name = "kruise-webhook-service";           // SERVICE_NAME
  std::string daemon_config_namespace = "kruise-daemon-config";  // KRUISE_DAEMON_CONFIG_NS

  int Workers(const std::string& controller, int fallback) const {
    auto it = workers.find(controller);
    return it == workers.end() ? fallback : it->second;
  }
};

// Parses flags and environment. `--help` gives kCancelled with the help text as the message
// (print it, exit 0). Errors: kInvalidArgument with a message naming the flag or variable.
absl::StatusOr<ManagerConfig> ParseManagerCommandLine(int argc, const char* const* argv,
                                                      const kube::EnvLookup& env);

}  // namespace kruise::manager
