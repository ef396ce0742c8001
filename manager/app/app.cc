#include "manager/app/app.h"

#include <atomic>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/health_server.h"
#include "common/logging.h"
#include "common/url.h"
#include "kube/errors.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "kube/leader_election.h"
#include "kube/manager.h"
#include "kube/resources.h"
#include "kube/rest_client.h"
#include "kube/write_fence.h"
#include "manager/cloneset/cloneset_admission.h"
#include "manager/cloneset/cloneset_controller.h"
#include "manager/crr/crr_controller.h"
#include "manager/daemonset/ads_admission.h"
#include "manager/daemonset/ads_controller.h"
#include "manager/deletionprotection/deletion_protection.h"
#include "manager/imagepull/imagepull_group.h"
#include "manager/imagepull/imagepulljob_validation.h"
#include "manager/imagepull/nodeimage_admission.h"
#include "manager/pub/pub_controller.h"
#include "manager/pub/pub_gate.h"
#include "manager/pub/pub_webhook.h"
#include "manager/sidecarset/sidecarset_admission.h"
#include "manager/sidecarset/sidecarset_controller.h"
#include "manager/sidecarset/sidecarset_inject.h"
#include "manager/sidecarset/sidecarset_webhook.h"
#include "manager/statefulset/asts_admission.h"
#include "manager/statefulset/asts_controller.h"
#include "manager/webhook/cert_manager.h"
#include "manager/webhook/crr_handlers.h"
#include "manager/webhook/fail_open.h"
#include "manager/webhook/pod_webhook.h"
#include "manager/webhook/readiness.h"
#include "manager/webhook/server.h"
#include "manager/workload/workload_admission.h"
#include "manager/workloadspread/ws_controller.h"
#include "manager/workloadspread/ws_webhook.h"
#include "prometheus/registry.h"

namespace kruise::manager {

std::vector<std::unique_ptr<ControllerGroup>> ControllerGroups(const ManagerConfig& cfg) {
  std::vector<std::unique_ptr<ControllerGroup>> groups;
  ImagePullGroupOptions imagepull;
  imagepull.nodeimage_creation_delay = cfg.nodeimage_creation_delay;
  imagepull.default_ttl_for_always_seconds = cfg.default_ttl_for_always_nodeimage_seconds;
  groups.push_back(NewImagePullControllerGroup(imagepull));  // NodeImage + ImagePullJob
  groups.push_back(crr::NewCrrControllerGroup());            // ContainerRecreateRequest
  groups.push_back(cloneset::NewCloneSetControllerGroup());  // CloneSet
  groups.push_back(statefulset::NewStatefulSetControllerGroup());  // Advanced StatefulSet
  groups.push_back(daemonset::NewDaemonSetControllerGroup());  // Advanced DaemonSet
  groups.push_back(sidecarset::NewSidecarSetControllerGroup());  // SidecarSet
  groups.push_back(pub::NewPubControllerGroup());  // PodUnavailableBudget
  groups.push_back(workloadspread::NewWorkloadSpreadControllerGroup());  // WorkloadSpread
  return groups;
}

void RegisterAdmissionHandlers(const FeatureGates& gates, webhook::PodReader* pods,
                               webhook::HandlerRegistry* registry,
                               const std::string& own_namespace,
                               std::vector<std::unique_ptr<webhook::PodMutator>> pod_mutators,
                               webhook::FailOpen* fail_open) {
  auto daemon = [&gates] { return gates.Enabled("KruiseDaemon"); };
  auto imagepulljob = [&gates] { return gates.Enabled("ImagePullJobGate"); };
  webhook::RegisterCrrHandlers(registry, pods, daemon);
  // Pods: the mutator chain, in OpenKruise's order (readiness gate first). Features that mutate
  // pods add their PodMutator here.
  std::vector<std::unique_ptr<webhook::PodMutator>> pod_chain;
  pod_chain.push_back(
      std::make_unique<webhook::ReadinessGateInjector>(gates.Enabled("KruisePodReadinessGate")));
  for (auto& m : pod_mutators) pod_chain.push_back(std::move(m));
  webhook::PodMutatingHandler::Options pod_opts;
  if (!own_namespace.empty()) pod_opts.excluded_namespaces.push_back(own_namespace);
  pod_opts.fail_open = fail_open;
  if (fail_open != nullptr) registry->SetFailOpen(webhook::kMutatePodPath, fail_open);
  registry->Register(
      webhook::kMutatePodPath,
      std::make_shared<webhook::PodMutatingHandler>(std::move(pod_chain), std::move(pod_opts)),
      [&gates] { return gates.Enabled("PodWebhook"); });
  // ImagePullJob: the defaults and checks of manager/imagepull/imagepulljob_validation.h.
  auto mutate_job = std::make_shared<webhook::FuncHandler>(
      [](const webhook::AdmissionRequest& req) -> webhook::AdmissionResponse {
        if (req.operation != "CREATE" && req.operation != "UPDATE") return webhook::Allowed();
        if (!req.object.is_object()) return webhook::Denied(400, "no object in the request");
        return webhook::PatchResponse(req.object, DefaultImagePullJob(req.object));
      });
  auto validate_job = std::make_shared<webhook::FuncHandler>(
      [](const webhook::AdmissionRequest& req) -> webhook::AdmissionResponse {
        if (req.operation != "CREATE" && req.operation != "UPDATE") return webhook::Allowed();
        absl::Status st = ValidateImagePullJobStatus(DefaultImagePullJob(req.object));
        // 422 without reason "Invalid", as controller-runtime's Errored(): kubectl 1.20 prints
        // only "The request is invalid" for reason Invalid without status details.
        if (!st.ok()) return webhook::Denied(422, std::string(st.message()));
        return webhook::Allowed();
      });
  for (const char* p :
       {"/mutate-apps-kruise-io-imagepulljob", "/mutate-apps-kruise-io-v1alpha1-imagepulljob",
        "/mutate-apps-kruise-io-v1beta1-imagepulljob"}) {
    registry->Register(p, mutate_job, imagepulljob);
  }
  for (const char* p :
       {"/validate-apps-kruise-io-imagepulljob", "/validate-apps-kruise-io-v1alpha1-imagepulljob",
        "/validate-apps-kruise-io-v1beta1-imagepulljob"}) {
    registry->Register(p, validate_job, imagepulljob);
  }
  // NodeImage: OpenKruise's defaults and checks (manager/imagepull/nodeimage_admission.h), so a
  // NodeImage edited by hand keeps its tags. Registered with the daemon's feature, as OpenKruise.
  auto mutate_node_image = std::make_shared<webhook::FuncHandler>(
      [](const webhook::AdmissionRequest& req) -> webhook::AdmissionResponse {
        if (req.operation != "CREATE" && req.operation != "UPDATE") return webhook::Allowed();
        if (!req.object.is_object()) return webhook::Denied(400, "no object in the request");
        return webhook::PatchResponse(req.object,
                                      DefaultNodeImage(req.object, Clock::Real()->Now()));
      });
  auto validate_node_image = std::make_shared<webhook::FuncHandler>(
      [](const webhook::AdmissionRequest& req) -> webhook::AdmissionResponse {
        if (req.operation != "CREATE" && req.operation != "UPDATE") return webhook::Allowed();
        absl::Status st = ValidateNodeImage(req.object);
        if (!st.ok()) return webhook::Denied(422, std::string(st.message()));
        return webhook::Allowed();
      });
  for (const char* p : {"/mutate-apps-kruise-io-nodeimage", "/mutate-apps-kruise-io-v1alpha1-nodeimage",
                        "/mutate-apps-kruise-io-v1beta1-nodeimage"}) {
    registry->Register(p, mutate_node_image, daemon);
  }
  for (const char* p :
       {"/validate-apps-kruise-io-nodeimage", "/validate-apps-kruise-io-v1alpha1-nodeimage",
        "/validate-apps-kruise-io-v1beta1-nodeimage"}) {
    registry->Register(p, validate_node_image, daemon);
  }
  // CloneSet: OpenKruise's defaults and checks (manager/cloneset/cloneset_admission.h). Always
  // registered (OpenKruise has no gate for it); the v1alpha1 path is the one deploy/ uses, the
  // versionless one is OpenKruise master's.
  auto mutate_cloneset = std::make_shared<webhook::FuncHandler>(
      [](const webhook::AdmissionRequest& req) -> webhook::AdmissionResponse {
        if (req.operation != "CREATE" && req.operation != "UPDATE") return webhook::Allowed();
        if (!req.object.is_object()) return webhook::Denied(400, "no object in the request");
        const bool template_defaults = workload::ShouldInjectTemplateDefaults(
            req.object, req.operation == "UPDATE" ? &req.old_object : nullptr);
        return webhook::PatchResponse(req.object,
                                      cloneset::DefaultCloneSet(req.object, template_defaults));
      });
  auto validate_cloneset = std::make_shared<webhook::FuncHandler>(
      [](const webhook::AdmissionRequest& req) -> webhook::AdmissionResponse {
        if (req.operation != "CREATE" && req.operation != "UPDATE") return webhook::Allowed();
        const bool update = req.operation == "UPDATE" && req.old_object.is_object();
        absl::Status st =
            cloneset::ValidateCloneSet(req.object, update ? &req.old_object : nullptr);
        if (!st.ok()) return webhook::Denied(422, std::string(st.message()));
        return webhook::Allowed();
      });
  for (const char* p :
       {"/mutate-apps-kruise-io-v1alpha1-cloneset", "/mutate-apps-kruise-io-cloneset"}) {
    registry->Register(p, mutate_cloneset);
  }
  for (const char* p :
       {"/validate-apps-kruise-io-v1alpha1-cloneset", "/validate-apps-kruise-io-cloneset"}) {
    registry->Register(p, validate_cloneset);
  }
  // Advanced StatefulSet: OpenKruise's defaults and checks (manager/statefulset/asts_admission.h).
  // Always registered (OpenKruise has no gate for it). v1alpha1 and v1beta1 share one schema
  // (conversion None), so one handler serves every version's path; deploy/ uses the v1beta1 one.
  auto mutate_statefulset = std::make_shared<webhook::FuncHandler>(
      [](const webhook::AdmissionRequest& req) -> webhook::AdmissionResponse {
        if (req.operation != "CREATE" && req.operation != "UPDATE") return webhook::Allowed();
        if (!req.object.is_object()) return webhook::Denied(400, "no object in the request");
        // Same rule as the CloneSet's: the template is defaulted on CREATE and when it changes.
        const bool template_defaults = workload::ShouldInjectTemplateDefaults(
            req.object, req.operation == "UPDATE" ? &req.old_object : nullptr);
        return webhook::PatchResponse(
            req.object, statefulset::DefaultAdvancedStatefulSet(req.object, template_defaults));
      });
  auto validate_statefulset = std::make_shared<webhook::FuncHandler>(
      [](const webhook::AdmissionRequest& req) -> webhook::AdmissionResponse {
        if (req.operation != "CREATE" && req.operation != "UPDATE") return webhook::Allowed();
        const bool update = req.operation == "UPDATE" && req.old_object.is_object();
        absl::Status st = statefulset::ValidateAdvancedStatefulSet(
            req.object, update ? &req.old_object : nullptr);
        if (!st.ok()) return webhook::Denied(422, std::string(st.message()));
        return webhook::Allowed();
      });
  for (const char* p :
       {"/mutate-apps-kruise-io-v1beta1-statefulset", "/mutate-apps-kruise-io-v1alpha1-statefulset",
        "/mutate-apps-kruise-io-statefulset"}) {
    registry->Register(p, mutate_statefulset);
  }
  for (const char* p :
       {"/validate-apps-kruise-io-v1beta1-statefulset",
        "/validate-apps-kruise-io-v1alpha1-statefulset", "/validate-apps-kruise-io-statefulset"}) {
    registry->Register(p, validate_statefulset);
  }
  // Advanced DaemonSet: OpenKruise's defaults and checks (manager/daemonset/ads_admission.h).
  // Always registered (OpenKruise has no gate for it). v1alpha1 and v1beta1 share one schema
  // (conversion None), so one handler serves every version's path; deploy/ uses the v1beta1 one.
  auto mutate_daemonset = std::make_shared<webhook::FuncHandler>(
      [](const webhook::AdmissionRequest& req) -> webhook::AdmissionResponse {
        if (req.operation != "CREATE" && req.operation != "UPDATE") return webhook::Allowed();
        if (!req.object.is_object()) return webhook::Denied(400, "no object in the request");
        return webhook::PatchResponse(req.object, daemonset::DefaultAdvancedDaemonSet(req.object));
      });
  auto validate_daemonset = std::make_shared<webhook::FuncHandler>(
      [](const webhook::AdmissionRequest& req) -> webhook::AdmissionResponse {
        if (req.operation != "CREATE" && req.operation != "UPDATE") return webhook::Allowed();
        const bool update = req.operation == "UPDATE" && req.old_object.is_object();
        absl::Status st =
            daemonset::ValidateAdvancedDaemonSet(req.object, update ? &req.old_object : nullptr);
        if (!st.ok()) return webhook::Denied(422, std::string(st.message()));
        return webhook::Allowed();
      });
  for (const char* p :
       {"/mutate-apps-kruise-io-v1beta1-daemonset", "/mutate-apps-kruise-io-v1alpha1-daemonset",
        "/mutate-apps-kruise-io-daemonset"}) {
    registry->Register(p, mutate_daemonset);
  }
  for (const char* p :
       {"/validate-apps-kruise-io-v1beta1-daemonset", "/validate-apps-kruise-io-v1alpha1-daemonset",
        "/validate-apps-kruise-io-daemonset"}) {
    registry->Register(p, validate_daemonset);
  }
  // SidecarSet: OpenKruise's defaults and checks (manager/sidecarset/sidecarset_admission.h).
  // Always registered (OpenKruise has no gate for it). v1alpha1 and v1beta1 share one schema
  // (conversion None), so one handler serves both versions' paths; deploy/ uses the v1alpha1 one.
  auto mutate_sidecarset = std::make_shared<webhook::FuncHandler>(
      [](const webhook::AdmissionRequest& req) -> webhook::AdmissionResponse {
        if (req.operation != "CREATE" && req.operation != "UPDATE") return webhook::Allowed();
        if (!req.object.is_object()) return webhook::Denied(400, "no object in the request");
        // Defaults, then OpenKruise's kruise.io/sidecarset-hash(-without-image) annotations.
        const bool update = req.operation == "UPDATE" && req.old_object.is_object();
        return webhook::PatchResponse(
            req.object, sidecarset::WithSidecarSetHashes(sidecarset::DefaultSidecarSet(req.object),
                                                         update ? &req.old_object : nullptr));
      });
  auto validate_sidecarset = std::make_shared<webhook::FuncHandler>(
      [](const webhook::AdmissionRequest& req) -> webhook::AdmissionResponse {
        if (req.operation != "CREATE" && req.operation != "UPDATE") return webhook::Allowed();
        const bool update = req.operation == "UPDATE" && req.old_object.is_object();
        absl::Status st =
            sidecarset::ValidateSidecarSet(req.object, update ? &req.old_object : nullptr);
        if (!st.ok()) return webhook::Denied(422, std::string(st.message()));
        return webhook::Allowed();
      });
  for (const char* p :
       {"/mutate-apps-kruise-io-v1alpha1-sidecarset", "/mutate-apps-kruise-io-v1beta1-sidecarset",
        "/mutate-apps-kruise-io-sidecarset"}) {
    registry->Register(p, mutate_sidecarset);
  }
  for (const char* p :
       {"/validate-apps-kruise-io-v1alpha1-sidecarset",
        "/validate-apps-kruise-io-v1beta1-sidecarset", "/validate-apps-kruise-io-sidecarset"}) {
    registry->Register(p, validate_sidecarset);
  }
}

namespace {

// The readiness checker keeps a keep-alive TLS connection to our own webhook server; Close()
// drops it at shutdown so the server's Stop() need not wait for it to idle out.
class ClosableReadiness {
 public:
  explicit ClosableReadiness(webhook::ReadinessChecker::Options opts)
      : checker_(std::make_unique<webhook::ReadinessChecker>(std::move(opts))) {}
  absl::Status Check() {
    absl::MutexLock lock(&mu_);
    if (!checker_) return absl::UnavailableError("shutting down");
    return checker_->Check();
  }
  void Close() {
    absl::MutexLock lock(&mu_);
    checker_.reset();
  }

 private:
  absl::Mutex mu_;
  std::unique_ptr<webhook::ReadinessChecker> checker_ ABSL_GUARDED_BY(mu_);
};

// The webhook side of every replica: certificates, then the server, then the readiness gate.
class WebhookRunnable final : public kube::Runnable {
 public:
  WebhookRunnable(webhook::CertManager* certs, webhook::WebhookServer* server,
                  ClosableReadiness* readiness, kube::Gate* ready, Clock* clock,
                  absl::Duration init_timeout, std::stop_source fatal)
      : certs_(certs),
        server_(server),
        readiness_(readiness),
        ready_(ready),
        clock_(clock),
        init_timeout_(init_timeout),
        fatal_(std::move(fatal)) {}

  bool NeedLeaderElection() const override { return false; }
  std::string Name() const override { return "webhook"; }
  bool serving() const { return serving_.load(); }
  bool failed() const { return failed_.load(); }

  void Start(std::stop_token stop) override {
    auto log = Logger("webhook");
    certs_->Start();
    const absl::Time deadline = clock_->Now() + init_timeout_;
    kube::Gate never("tick");  // a stop-aware wait
    while (!certs_->inited() && !stop.stop_requested() && clock_->Now() < deadline) {
      never.Wait(clock_, clock_->Now() + absl::Milliseconds(100), stop);
    }
    if (!stop.stop_requested() && !certs_->inited()) {
      Fail(absl::StrCat("webhook certificates were not in place within ",
                        absl::FormatDuration(init_timeout_), " (--webhook-initialize-timeout)"));
    } else if (!stop.stop_requested()) {
      absl::Status st = server_->Start();
      if (!st.ok()) {
        Fail(absl::StrCat("webhook server: ", st.ToString()));
      } else {
        serving_ = true;
        log->info("serving admission webhooks on port {}", server_->port());
        absl::Status check = absl::UnavailableError("not checked");
        while (!stop.stop_requested() && !(check = readiness_->Check()).ok()) {
          if (clock_->Now() >= deadline) {
            Fail(absl::StrCat("webhook not reachable over TLS within ",
                              absl::FormatDuration(init_timeout_), ": ", check.ToString()));
            break;
          }
          never.Wait(clock_, clock_->Now() + absl::Milliseconds(200), stop);
        }
        if (check.ok()) {
          // Only now do the webhook configurations point here (URL mode) or carry our CA: the
          // API server never calls a replica that is not answering yet.
          certs_->SetServing();
          while (!stop.stop_requested() && !certs_->published()) {
            if (clock_->Now() >= deadline) {
              Fail(absl::StrCat("webhook configurations not written within ",
                                absl::FormatDuration(init_timeout_)));
              break;
            }
            never.Wait(clock_, clock_->Now() + absl::Milliseconds(100), stop);
          }
        }
        if (check.ok() && certs_->published()) {
          ready_->Open();
          log->info("webhook ready (TLS round trip to /healthz answered, configurations written)");
        }
      }
    }
    never.Wait(clock_, absl::InfiniteFuture(), stop);
    readiness_->Close();
    if (serving_) {
      server_->Stop();
      serving_ = false;
      log->info("webhook server stopped");
    }
    certs_->Stop();
  }

 private:
  void Fail(const std::string& why) {
    Logger("webhook")->critical("{}", why);
    failed_ = true;
    fatal_.request_stop();
  }

  webhook::CertManager* certs_;
  webhook::WebhookServer* server_;
  ClosableReadiness* readiness_;
  kube::Gate* ready_;
  Clock* clock_;
  absl::Duration init_timeout_;
  std::stop_source fatal_;
  std::atomic<bool> serving_{false};
  std::atomic<bool> failed_{false};
};

}  // namespace

int RunManager(const ManagerConfig& cfg, std::stop_token stop) {
  auto log = Logger("manager");
  Clock* clock = Clock::Real();
  const FeatureGates& gates = cfg.feature_gates;
  log->info("feature gates: {}", gates.String());
  for (const std::string& w : gates.warnings()) log->warn("feature gates: {}", w);

  kube::ResolveOptions resolve;
  resolve.kubeconfig_flag = cfg.kubeconfig;
  absl::StatusOr<kube::RestConfig> rest = kube::ResolveConfig(resolve);
  if (!rest.ok()) {
    log->critical("no Kubernetes configuration: {}", rest.status());
    return 1;
  }
  rest->qps = cfg.rest_qps;
  rest->burst = cfg.rest_burst;
  rest->user_agent = "kruise-manager (kruise-cpp)";
  auto client_or = kube::RestKubeClient::Create(*rest);
  if (!client_or.ok()) {
    log->critical("Kubernetes client: {}", client_or.status());
    return 1;
  }
  std::unique_ptr<kube::RestKubeClient> client = *std::move(client_or);
  log->info("API server {} ({})", rest->host, rest->source);
  // The leader's controllers write through the fence (kube/write_fence.h): nothing they send
  // reaches the API server once this replica's lease term may have ended, even before the elector
  // notices (a frozen process). Webhooks, certificates and caches use `client` on every replica.
  kube::WriteFence fence(clock);
  kube::FencedKubeClient controller_client(client.get(), &fence);
  // The lease has a client of its own: its own rate limiter (a busy controller cannot delay a
  // renewal), one attempt per call (a renew round bounds every call by the lease term and retries
  // itself every retry period).
  std::unique_ptr<kube::RestKubeClient> lease_client;
  if (cfg.enable_leader_election) {
    kube::RestConfig lease_rest = *rest;
    lease_rest.qps = 5;
    lease_rest.burst = 10;
    lease_rest.timeout = cfg.renew_deadline;
    lease_rest.user_agent = "kruise-manager (kruise-cpp) leader-election";
    kube::RestClientOptions lease_opts;
    lease_opts.max_attempts = 1;
    auto lease_or = kube::RestKubeClient::Create(lease_rest, clock, lease_opts);
    if (!lease_or.ok()) {
      log->critical("Kubernetes client for the lease: {}", lease_or.status());
      return 1;
    }
    lease_client = *std::move(lease_or);
  }

  // Probe and metrics servers.
  auto registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<HealthServer> metrics_server;
  HealthServer health({.address = cfg.health_probe_addr,
                       .serve_health = true,
                       .serve_metrics = cfg.metrics_addr == cfg.health_probe_addr});
  if (cfg.metrics_addr == cfg.health_probe_addr) {
    health.SetMetrics(registry);
  } else {
    metrics_server = std::make_unique<HealthServer>(HealthServer::Options{
        .address = cfg.metrics_addr, .serve_health = false, .serve_metrics = true});
    metrics_server->SetMetrics(registry);
  }

  // Admission. Handlers call the API server through their own client (issue 33): each call ends
  // within kWebhookApiTimeout, well below the pod webhooks' timeoutSeconds (5 s in deploy/, 10 s
  // for the others), is not retried (the API server retries the admission, or applies the
  // webhook's failurePolicy), and has its own throttle, never waited on for long, so the
  // controllers' traffic cannot hold an admission.
  constexpr absl::Duration kWebhookApiTimeout = absl::Seconds(2);
  kube::RestConfig webhook_rest = *rest;
  webhook_rest.timeout = kWebhookApiTimeout;
  webhook_rest.qps = std::max(50.0, cfg.rest_qps);
  webhook_rest.burst = std::max(100, cfg.rest_burst);
  webhook_rest.user_agent = "kruise-manager-webhook (kruise-cpp)";
  kube::RestClientOptions webhook_client_opts;
  webhook_client_opts.max_attempts = 1;
  webhook_client_opts.max_throttle_wait = absl::Milliseconds(500);
  auto webhook_client_or = kube::RestKubeClient::Create(webhook_rest, clock, webhook_client_opts);
  if (!webhook_client_or.ok()) {
    log->critical("Kubernetes client for the webhooks: {}", webhook_client_or.status());
    return 1;
  }
  std::unique_ptr<kube::RestKubeClient> webhook_client = *std::move(webhook_client_or);
  // Pod webhooks are failurePolicy Ignore (unless --pod-webhook-failure-policy=Fail): their
  // infrastructure failures allow with a warning, a Warning event and
  // kruise_webhook_infrastructure_failures_total (manager/webhook/fail_open.h).
  kube::EventRecorderOptions webhook_event_opts;
  webhook_event_opts.component = "kruise-manager-webhook";
  webhook_event_opts.clock = clock;
  kube::EventRecorder webhook_events(webhook_client.get(), webhook_event_opts);
  webhook::FailOpen fail_open({
      .metrics = registry.get(),
      .event = [&webhook_events](const kube::Json& object, const std::string& reason,
                                 const std::string& message) {
        webhook_events.Event(object, kube::EventType::kWarning, reason, message);
      },
  });
  webhook::FailOpen* pod_fail_open =
      cfg.pod_webhook_failure_policy == "Ignore" ? &fail_open : nullptr;
  webhook::HandlerRegistry handlers;
  webhook::ApiPodReader pods(webhook_client.get());
  // SidecarSet injection runs in every replica's pod webhook: the SidecarSets and Namespace labels
  // it matches against are cached here, not by the leader's controllers.
  // (Its informers are attached below, once the shared informers exist.)
  sidecarset::SidecarSetCache sidecarset_cache(cfg.namespace_name);
  std::vector<std::unique_ptr<webhook::PodMutator>> pod_mutators;
  // WorkloadSpread: its validating webhook and, before the SidecarSet injector (OpenKruise's
  // order), the subset injection on pod CREATE; both read the WorkloadSpreads from a cache fed by
  // a shared informer (attached below).
  workloadspread::WorkloadSpreadCache ws_cache;
  const bool ws_served = workloadspread::RegisterWorkloadSpreadHandlers(
      &handlers, &ws_cache, client.get(), gates.Enabled("WorkloadSpread"));
  if (ws_served && gates.Enabled("PodWebhook") && gates.Enabled("WorkloadSpread")) {
    pod_mutators.push_back(std::make_unique<workloadspread::WorkloadSpreadInjector>(
        &ws_cache, webhook_client.get(), clock, nullptr, pod_fail_open));
  }
  bool inject_sidecars = false;
  if (gates.Enabled("PodWebhook")) {
    if (!kube::Served(client.get(), kube::resources::SidecarSets())) {
      log->warn("SidecarSet CRD is not served: no sidecar injection");
    } else {
      inject_sidecars = true;
      pod_mutators.push_back(
          std::make_unique<sidecarset::SidecarSetInjector>(&sidecarset_cache, clock));
    }
  }
  RegisterAdmissionHandlers(gates, &pods, &handlers, cfg.namespace_name, std::move(pod_mutators),
                            pod_fail_open);
  // PodUnavailableBudget: its webhooks (PUB validation, pod DELETE/UPDATE/eviction) read the PUBs
  // from a cache fed by the informer its controller shares (attached below).
  pub::PubCache pub_cache;
  pub::PubHandlerOptions pub_opts;
  pub_opts.pod_webhook = gates.Enabled("PodWebhook");
  pub_opts.delete_gate = gates.Enabled("PodUnavailableBudgetDeleteGate");
  pub_opts.update_gate = gates.Enabled("PodUnavailableBudgetUpdateGate");
  pub_opts.manager_namespace = cfg.namespace_name;
  pub_opts.clock = clock;
  pub_opts.fail_open = pod_fail_open;
  const bool pub_served =
      pub::RegisterPubHandlers(&handlers, &pub_cache, webhook_client.get(), &pods, pub_opts);
  // Deletion protection: DELETE of objects labelled policy.kruise.io/delete-protection. Registered
  // also with the gate off (then it allows everything), so its webhook entry never gets a 404.
  deletionprotection::HandlerOptions dp_opts;
  dp_opts.enabled = gates.Enabled("ResourcesDeletionProtection");
  dp_opts.crd_cascading = gates.Enabled("DeletionProtectionForCRDCascadingGate");
  deletionprotection::RegisterDeletionProtectionHandler(&handlers, webhook_client.get(), dp_opts);
  // WorkloadSpread records pod deletions and evictions on the same path, after the budget check.
  if (ws_served && gates.Enabled("PodWebhook") && gates.Enabled("WorkloadSpread")) {
    handlers.Append(pub::kValidatePodPath,
                    std::make_shared<workloadspread::WorkloadSpreadDeletionRecorder>(
                        &ws_cache, webhook_client.get(), &pods, clock, pod_fail_open));
  }
  if (pod_fail_open != nullptr) handlers.SetFailOpen(webhook::kValidatePodPath, pod_fail_open);
  webhook::CertManager::Options cert_opts;
  cert_opts.namespace_ = cfg.namespace_name;
  cert_opts.secret_name = cfg.secret_name;
  cert_opts.service_name = cfg.service_name;
  cert_opts.cert_dir = cfg.webhook_cert_dir;
  cert_opts.host = cfg.webhook_host;
  cert_opts.port = cfg.webhook_port;
  cert_opts.external_certs = gates.Enabled("EnableExternalCerts");
  cert_opts.publish_when_serving = true;
  cert_opts.renew_before = cfg.webhook_cert_renew_before;
  cert_opts.clock = clock;
  webhook::CertManager certs(client.get(), &handlers, cert_opts);
  // The certificate Secret, watched in every replica: a deleted or edited Secret is repaired at
  // once instead of at the next resync (a minute). Not the webhook configurations: two URL-mode
  // replicas (WEBHOOK_HOST) would rewrite each other's URL in a loop.
  kube::InformerOptions secret_watch;
  secret_watch.resource = kube::resources::Secrets();
  secret_watch.ns = cfg.namespace_name;
  secret_watch.field_selector = absl::StrCat("metadata.name=", cfg.secret_name);
  kube::Informer cert_secret(client.get(), clock, secret_watch);
  cert_secret.AddEventHandler({
      .on_add = [&certs](const kube::Json&) { certs.Trigger(); },
      .on_update = [&certs](const kube::Json&, const kube::Json&) { certs.Trigger(); },
      .on_delete = [&certs](const kube::Json&, bool) { certs.Trigger(); },
  });
  webhook::WebhookServer::Options server_opts;
  // The webhook listener's IP (--webhook-bind-address); brackets for an IPv6 literal.
  const std::string& bind = cfg.webhook_bind_address;
  server_opts.address = absl::StrCat(UrlHost(bind), ":", cfg.webhook_port);
  server_opts.cert_dir = cfg.webhook_cert_dir;
  server_opts.metrics = registry.get();
  server_opts.handler_threads = cfg.webhook_handler_threads;
  webhook::WebhookServer server(server_opts, &handlers);
  webhook::ReadinessChecker::Options ready_opts;
  // Our own listener: localhost is in the certificate's SANs; a bind address other than "all"
  // must be dialled itself (an IP WEBHOOK_HOST is in the SANs too).
  ready_opts.host =
      bind.empty() || bind == "0.0.0.0" || bind == "::" || bind == "127.0.0.1" ? "localhost" : bind;
  ready_opts.port = cfg.webhook_port;
  ready_opts.cert_dir = cfg.webhook_cert_dir;
  ClosableReadiness readiness(ready_opts);
  kube::Gate webhook_ready("webhook-ready");

  std::stop_source run_stop;
  std::stop_callback forward(stop, [&run_stop] { run_stop.request_stop(); });
  WebhookRunnable webhook_runnable(&certs, &server, &readiness, &webhook_ready, clock,
                                   cfg.webhook_initialize_timeout, run_stop);

  health.AddCheck("ping", [] { return absl::OkStatus(); });
  health.AddCheck(
      "webhook-ready",
      [&]() -> absl::Status {
        if (!certs.inited()) {
          return absl::UnavailableError("webhook certificates are not in place yet");
        }
        if (!webhook_runnable.serving()) {
          return absl::UnavailableError("webhook server is not serving");
        }
        return readiness.Check();
      },
      CheckKind::kReadiness);

  kube::ManagerOptions mo;
  mo.clock = clock;
  mo.cache_sync_timeout = cfg.cache_sync_timeout;
  mo.gate_timeout = cfg.webhook_initialize_timeout;
  if (cfg.enable_leader_election) {
    kube::LeaderElectionConfig le;
    le.lease_namespace = cfg.leader_election_namespace;
    le.lease_name = cfg.leader_election_id;
    // POD_NAME (downward API) names the holder even on the host network, where every replica's
    // hostname is its node's.
    le.identity = kube::DefaultLeaderIdentity(cfg.pod_name);
    le.lease_duration = cfg.lease_duration;
    le.renew_deadline = cfg.renew_deadline;
    le.retry_period = cfg.retry_period;
    le.clock = clock;
    le.callbacks.on_new_leader = [log](const std::string& id) {
      log->info("leader is now {}", id);
    };
    // As controller-runtime: a replica that lost its lease exits at once instead of draining its
    // reconciles (the fence already refuses their writes); the Deployment restarts it as a
    // candidate.
    le.callbacks.on_lost = [log] {
      log->critical("leader election lost: exiting now");
      spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& l) { l->flush(); });
      std::_Exit(1);
    };
    mo.leader_election = le;
  }
  mo.fence = &fence;
  kube::Manager manager(lease_client.get(), mo);
  manager.AddInformer(&cert_secret);
  manager.Add(&webhook_runnable);
  manager.AddGate(&webhook_ready);

  kube::EventRecorderOptions event_opts;
  event_opts.component = "kruise-manager";
  event_opts.clock = clock;
  kube::EventRecorder recorder(&controller_client, event_opts);
  SharedInformers shared(client.get(), clock, &manager);
  if (inject_sidecars) {
    sidecarset_cache.Attach(
        shared.Named(sidecarset::kSidecarSetInformer, &sidecarset::SidecarSetInformerOptions),
        shared.Named(sidecarset::kNamespaceInformer, &sidecarset::NamespaceInformerOptions),
        shared.Named(sidecarset::kSidecarSetRevisionInformer, [&cfg] {
          return sidecarset::SidecarSetRevisionInformerOptions(cfg.namespace_name);
        }));
  }
  if (pub_served) pub_cache.Attach(shared.Named(pub::kPubInformer, &pub::PubInformerOptions));
  if (ws_served) {
    ws_cache.Attach(shared.Named(workloadspread::kWorkloadSpreadInformer,
                                 &workloadspread::WorkloadSpreadInformerOptions));
  }
  // Our own rollouts (CloneSet, Advanced StatefulSet, SidecarSet) ask the PUBs before taking a
  // pod down, under the gate OpenKruise's CloneSet asks them under.
  std::unique_ptr<pub::PubDisruptionGate> pub_gate;
  if (pub_served && gates.Enabled("PodUnavailableBudgetUpdateGate")) {
    pub_gate = std::make_unique<pub::PubDisruptionGate>(
        &pub_cache, &controller_client, clock,
        std::vector<std::string>{"kube-system", cfg.namespace_name});
  }
  ControllerContext ctx;
  ctx.shared = &shared;
  ctx.client = &controller_client;
  ctx.manager = &manager;
  ctx.recorder = &recorder;
  ctx.clock = clock;
  ctx.namespace_name = cfg.namespace_name;
  ctx.daemon_config_namespace = cfg.daemon_config_namespace;
  ctx.disruption_gate = pub_gate.get();
  ctx.feature_enabled = [&gates](absl::string_view g) { return gates.Enabled(g); };
  ctx.workers = [&cfg](absl::string_view name, int fallback) {
    return cfg.Workers(std::string(name), fallback);
  };
  std::vector<std::unique_ptr<ControllerGroup>> groups = ControllerGroups(cfg);
  for (auto& group : groups) {
    absl::Status st = group->Register(ctx);
    if (!st.ok()) {
      log->critical("controller group {}: {}", group->Name(), st);
      return 1;
    }
  }

  if (absl::Status st = health.Start(); !st.ok()) {
    log->critical("--health-probe-addr {}: {}", cfg.health_probe_addr, st);
    return 1;
  }
  if (metrics_server) {
    if (absl::Status st = metrics_server->Start(); !st.ok()) {
      log->critical("--metrics-addr {}: {}", cfg.metrics_addr, st);
      health.Stop();
      return 1;
    }
  }
  log->info("probes on {} (port {}), metrics on {}", cfg.health_probe_addr, health.port(),
            cfg.metrics_addr);

  int rc = manager.Run(run_stop.get_token());
  if (webhook_runnable.failed()) rc = 1;
  if (metrics_server) metrics_server->Stop();
  health.Stop();
  log->info("kruise-manager stopped (exit {})", rc);
  return rc;
}

}  // namespace kruise::manager
