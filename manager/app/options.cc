#include "manager/app/options.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "common/logging.h"

namespace kruise::manager {

const std::vector<std::string>& WorkerFlagControllers() {
  static const auto* names = new std::vector<std::string>{"cloneset",
                                                          "sidecarset",
                                                          "statefulset",
                                                          "daemonset",
                                                          "workloadspread",
                                                          "podunavailablebudget",
                                                          "uniteddeployment",
                                                          "broadcastjob",
                                                          "advancedcronjob",
                                                          "imagepulljob",
                                                          "imagelistpulljob",
                                                          "nodeimage",
                                                          "crr",
                                                          "podprobemarker",
                                                          "nodepodprobe",
                                                          "persistentpodstate",
                                                          "resourcedistribution",
                                                          "sidecarterminator",
                                                          "ephemeraljob"};
  return *names;
}

namespace {

absl::Status ParseDurationFlag(const std::string& flag, const std::string& text,
                               absl::Duration* out) {
  if (text.empty()) return absl::OkStatus();
  absl::Duration d;
  if (!absl::ParseDuration(text, &d) || d < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": \"", text, "\" is not a duration (e.g. 15s, 2m)"));
  }
  *out = d;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ManagerConfig> ParseManagerCommandLine(int argc, const char* const* argv,
                                                      const kube::EnvLookup& env) {
  ManagerConfig c;
  auto getenv = [&](const char* name) -> std::string {
    std::optional<std::string> v = env ? env(name) : std::nullopt;
    return v.value_or("");
  };
  if (std::string ns = getenv("POD_NAMESPACE"); !ns.empty()) c.namespace_name = ns;
  c.pod_name = getenv("POD_NAME");
  if (std::string port = getenv("WEBHOOK_PORT"); !port.empty()) {
    if (!absl::SimpleAtoi(port, &c.webhook_port) || c.webhook_port <= 0 || c.webhook_port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("WEBHOOK_PORT: \"", port, "\" is not a port number"));
    }
  }
  c.webhook_host = getenv("WEBHOOK_HOST");
  if (std::string v = getenv("WEBHOOK_CERT_DIR"); !v.empty()) c.webhook_cert_dir = v;
  if (std::string v = getenv("SECRET_NAME"); !v.empty()) c.secret_name = v;
  if (std::string v = getenv("SERVICE_NAME"); !v.empty()) c.service_name = v;
  if (std::string v = getenv("KRUISE_DAEMON_CONFIG_NS"); !v.empty()) {
    c.daemon_config_namespace = v;
  }

  kruise::Flags app{
      "kruise-manager: OpenKruise-compatible control plane (admission webhooks in every replica, "
      "leader-elected controllers)"};
  app.SetHelpFlag("-h,--help", "Print this help and exit");
  app.Add("--metrics-addr", &c.metrics_addr, "Address of /metrics").ShowDefault();
  app.Add("--health-probe-addr", &c.health_probe_addr, "Address of /healthz and /readyz")
      .ShowDefault();
  app.Add("--webhook-bind-address", &c.webhook_bind_address,
          "IP the webhook server listens on (port: WEBHOOK_PORT; default: all interfaces)");
  app.AddSwitch("--enable-leader-election", &c.enable_leader_election,
                "Run controllers only on the Lease holder (=false: always lead)")
      .ShowDefault();
  std::string lease_ns;
  app.Add("--leader-election-namespace", &lease_ns,
          "Namespace of the Lease (default: POD_NAMESPACE or kruise-system)");
  app.Add("--leader-election-id", &c.leader_election_id, "Name of the Lease").ShowDefault();
  std::string lock = "leases";
  app.Add("--leader-election-resource-lock", &lock, "Only 'leases' is supported").OneOf({"leases"});
  std::string lease_duration = "15s", renew_deadline = "10s", retry_period = "2s";
  std::string webhook_init_timeout = "60s", cache_sync_timeout = "2m";
  app.Add("--leader-election-lease-duration", &lease_duration, "Lease duration").ShowDefault();
  app.Add("--leader-election-renew-deadline", &renew_deadline, "Renew deadline").ShowDefault();
  app.Add("--leader-election-retry-period", &retry_period, "Retry period").ShowDefault();
  app.Add("--webhook-initialize-timeout", &webhook_init_timeout,
          "Exit when the webhook certificates are not served within this")
      .ShowDefault();
  app.Add("--controller-cache-sync-timeout", &cache_sync_timeout, "Cache sync timeout")
      .ShowDefault();
  std::string cert_renew_before = "4320h";
  app.Add("--webhook-cert-renew-before", &cert_renew_before,
          "Renew the webhook serving certificate when it expires within this")
      .ShowDefault();
  std::string nodeimage_delay = "30s";
  app.Add("--nodeimage-creation-delay", &nodeimage_delay,
          "Wait after a Node became Ready before creating its NodeImage")
      .ShowDefault();
  app.Add("--default-ttlseconds-for-always-nodeimage", &c.default_ttl_for_always_nodeimage_seconds,
          "Extra TTL of NodeImage tags of Always ImagePullJobs")
      .NonNegative()
      .ShowDefault();
  std::string gates;
  app.Add("--feature-gates", &gates, "Feature gates, e.g. ImagePullJobGate=true,PodWebhook=false");
  app.Add("--webhook-handler-threads", &c.webhook_handler_threads,
          "Threads running admission handlers (a slow kind of review holds at most half)")
      .Positive()
      .ShowDefault();
  app.Add("--pod-webhook-failure-policy", &c.pod_webhook_failure_policy,
          "failurePolicy of the pod webhooks' configurations: with Ignore, a handler's own "
          "failure (API error, timeout) admits the pod with a warning; with Fail, it denies")
      .OneOf({"Ignore", "Fail"})
      .ShowDefault();
  app.Add("--rest-config-qps", &c.rest_qps, "API requests per second").ShowDefault();
  app.Add("--rest-config-burst", &c.rest_burst, "API request burst").ShowDefault();
  std::map<std::string, int> workers;
  for (const std::string& name : WorkerFlagControllers()) {
    workers[name] = 0;
    app.Add("--" + name + "-workers", &workers[name],
            "Concurrent reconciles of the " + name + " controller (default 3)")
        .Positive();
  }
  app.Add("--kubeconfig", &c.kubeconfig, "Kubeconfig file (default: in-cluster)");
  app.Add("--log-format,--logging-format", &c.log_format, "text or json")
      .OneOf({"text", "json"})
      .ShowDefault();
  app.Add("-v,--v", &c.verbosity, "Log verbosity (klog-style)");
  bool logtostderr = true;
  app.AddSwitch("--logtostderr", &logtostderr, "Accepted for compatibility (always stderr)");
  // Accepted for compatibility, not implemented.
  std::string ignored_str;
  bool ignored_bool = false;
  app.Add("--namespace,--sync-period,--pprof-addr", &ignored_str,
          "Accepted for compatibility (no effect)");
  app.AddSwitch("--enable-pprof,--allow-privileged,--disable-no-deepcopy", &ignored_bool,
                "Accepted for compatibility (no effect)");

  if (absl::Status parsed = app.Parse(argc, argv); !parsed.ok()) return parsed;
  for (const auto& [name, n] : workers) {
    if (n > 0) c.workers[name] = n;
  }
  c.leader_election_namespace = lease_ns.empty() ? c.namespace_name : lease_ns;
  absl::Status st =
      ParseDurationFlag("--leader-election-lease-duration", lease_duration, &c.lease_duration);
  if (st.ok()) {
    st = ParseDurationFlag("--leader-election-renew-deadline", renew_deadline, &c.renew_deadline);
  }
  if (st.ok()) {
    st = ParseDurationFlag("--leader-election-retry-period", retry_period, &c.retry_period);
  }
  if (st.ok()) {
    st = ParseDurationFlag("--webhook-initialize-timeout", webhook_init_timeout,
                           &c.webhook_initialize_timeout);
  }
  if (st.ok()) {
    st = ParseDurationFlag("--controller-cache-sync-timeout", cache_sync_timeout,
                           &c.cache_sync_timeout);
  }
  if (st.ok()) {
    st = ParseDurationFlag("--webhook-cert-renew-before", cert_renew_before,
                           &c.webhook_cert_renew_before);
    if (st.ok() && c.webhook_cert_renew_before <= absl::ZeroDuration()) {
      st = absl::InvalidArgumentError("--webhook-cert-renew-before must be positive");
    }
  }
  if (st.ok()) {
    st = ParseDurationFlag("--nodeimage-creation-delay", nodeimage_delay,
                           &c.nodeimage_creation_delay);
  }
  if (!st.ok()) return st;
  absl::StatusOr<FeatureGates> fg = FeatureGates::Parse(gates);
  if (!fg.ok()) return fg.status();
  c.feature_gates = *std::move(fg);
  return c;
}

}  // namespace kruise::manager
