#include "daemon/app/daemon.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <system_error>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/health_server.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/systemd.h"
#include "cri/discovery.h"
#include "cri/grpc_cri.h"
#include "daemon/crr/crr_controller.h"
#include "daemon/imagepull/image_puller.h"
#include "daemon/imagepull/nodeimage_controller.h"
#include "daemon/app/runtime_unit.h"
#include "daemon/imagepull/secret_credentials.h"
#include "kube/config.h"
#include "kube/event_recorder.h"
#include "kube/resources.h"
#include "kube/rest_client.h"

namespace kruise::daemon {
namespace {

struct Metrics {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  prometheus::Gauge& runtime_up = prometheus::BuildGauge()
                                      .Name("kruise_daemon_runtime_up")
                                      .Help("1 when a CRI runtime answers")
                                      .Register(*registry)
                                      .Add({});
  prometheus::Gauge& pulls_in_flight = prometheus::BuildGauge()
                                           .Name("kruise_daemon_pulls_in_flight")
                                           .Help("Image pulls currently running")
                                           .Register(*registry)
                                           .Add({});
  prometheus::Family<prometheus::Counter>& pulls = prometheus::BuildCounter()
                                                       .Name("kruise_daemon_image_pulls_total")
                                                       .Help("Finished image pulls by result")
                                                       .Register(*registry);
  prometheus::Family<prometheus::Counter>& api_requests =
      prometheus::BuildCounter()
          .Name("kruise_daemon_api_requests_total")
          .Help("Kubernetes API requests by verb and HTTP code (0: no response), retries included")
          .Register(*registry);
  prometheus::Counter& pull_bytes = prometheus::BuildCounter()
                                        .Name("kruise_daemon_image_pull_bytes_total")
                                        .Help("Bytes of layers downloaded by pulls")
                                        .Register(*registry)
                                        .Add({});
  prometheus::Histogram& pull_seconds = prometheus::BuildHistogram()
                                            .Name("kruise_daemon_image_pull_duration_seconds")
                                            .Help("Duration of successful pulls")
                                            .Register(*registry)
                                            .Add({}, prometheus::Histogram::BucketBoundaries{
                                                         0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600});
  prometheus::Family<prometheus::Counter>& crr_completed =
      prometheus::BuildCounter()
          .Name("kruise_daemon_crr_completed_total")
          .Help("ContainerRecreateRequests completed by this daemon, by result")
          .Register(*registry);
  prometheus::Histogram& crr_seconds =
      prometheus::BuildHistogram()
          .Name("kruise_daemon_crr_duration_seconds")
          .Help("ContainerRecreateRequest creation to Completed")
          .Register(*registry)
          .Add({}, prometheus::Histogram::BucketBoundaries{1, 2, 5, 10, 20, 30, 60, 120, 300, 600});
  prometheus::Counter& crr_killed = prometheus::BuildCounter()
                                        .Name("kruise_daemon_crr_containers_killed_total")
                                        .Help("Containers stopped for recreation")
                                        .Register(*registry)
                                        .Add({});
};

// Holds the discovery outcome for /healthz.
class RuntimeState {
 public:
  void Set(absl::Status s) {
    absl::MutexLock lock(&mu_);
    status_ = std::move(s);
  }
  absl::Status Get() const {
    absl::MutexLock lock(&mu_);
    return status_;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Status status_ = absl::UnavailableError("runtime discovery has not run yet");
};

}  // namespace

absl::Status RunDaemon(const DaemonOptions& options, std::stop_token stop) {
  auto log = Logger("daemon");
  if (options.node_name.empty()) {
    return absl::InvalidArgumentError(
        "NODE_NAME is not set: the daemon must know its node (downward API spec.nodeName)");
  }
  Metrics metrics;
  for (const char* result : {"succeeded", "failed"}) {
    metrics.crr_completed.Add({{"result", result}});  // export both series from the start
  }
  RuntimeState runtime_state;
  RuntimeUnitMonitor runtime_unit(metrics.registry.get());
  std::atomic<bool> synced{false};

  HealthServer health({.address = options.addr});
  health.AddCheck("runtime", [&] { return runtime_state.Get(); });
  health.AddCheck("runtime-unit", [&] { return runtime_unit.Check(); });
  health.AddCheck(
      "informers-synced",
      [&] {
        return synced ? absl::OkStatus()
                      : absl::UnavailableError("NodeImage or CRR informer has not synced");
      },
      CheckKind::kReadiness);
  health.SetMetrics(metrics.registry);
  // A file left by an earlier run (a restarted container keeps its emptyDir) names a port that may
  // now be another process's: remove it before binding, and again whichever way this returns.
  auto remove_addr_file = [&options] {
    std::error_code ec;
    if (!options.addr_file.empty()) std::filesystem::remove(options.addr_file, ec);
    return ec;
  };
  if (std::error_code ec = remove_addr_file()) {
    return absl::ErrnoToStatus(
        ec.value(), absl::StrCat("--addr-file: removing the previous ", options.addr_file));
  }
  absl::Cleanup addr_file_cleanup = [&] { (void)remove_addr_file(); };
  RETURN_IF_ERROR(health.Start());
  log->info("serving /healthz, /readyz and /metrics on {} (--addr {})", health.bound_address(),
            options.addr);
  if (!options.addr_file.empty()) {
    RETURN_IF_ERROR(
        Annotate(WriteAddressFile(options.addr_file, health.bound_address()), "--addr-file"));
    log->info("wrote the address {} to {}", health.bound_address(), options.addr_file);
  }

  kube::ResolveOptions resolve;
  resolve.kubeconfig_flag = options.kubeconfig;
  ASSIGN_OR_RETURN(kube::RestConfig config, kube::ResolveConfig(resolve));
  config.qps = options.rest_qps;
  config.burst = options.rest_burst;
  kube::RestClientOptions rest_options;
  rest_options.on_request = [&metrics](absl::string_view verb, long code) {
    metrics.api_requests.Add({{"verb", std::string(verb)}, {"code", std::to_string(code)}})
        .Increment();
  };
  ASSIGN_OR_RETURN(auto client, kube::RestKubeClient::Create(config, Clock::Real(), rest_options));

  SystemdNotifier notifier = SystemdNotifier::FromEnvironment();

  // Stop requests wake every wait below.
  std::mutex stop_mu;
  std::condition_variable_any stop_cv;
  auto wait_stop = [&](absl::Duration d) {
    std::unique_lock lock(stop_mu);
    stop_cv.wait_for(lock, stop, absl::ToChronoNanoseconds(d), [] { return false; });
    return stop.stop_requested();
  };

  // Fail-soft discovery: stay up, report why, retry with backoff.
  cri::DiscoveryOptions discovery;
  discovery.host_run_dir = options.host_run_dir;
  discovery.socket_override = options.socket_file;
  absl::Duration backoff = absl::Seconds(1);
  absl::StatusOr<cri::DiscoveredRuntime> runtime = absl::UnavailableError("not tried");
  while (!stop.stop_requested()) {
    runtime = cri::DiscoverRuntime(discovery);
    if (runtime.ok()) break;
    runtime_state.Set(runtime.status());
    log->warn("no CRI runtime yet (retry in {}): {}", absl::FormatDuration(backoff),
              runtime.status().message());
    if (wait_stop(backoff)) break;
    backoff = std::min(backoff * 2, options.discovery_max_backoff);
  }
  if (stop.stop_requested()) {
    health.Stop();
    return absl::OkStatus();
  }
  log->info("CRI runtime {} {} at {}", runtime->runtime_name, runtime->runtime_version,
            runtime->socket_path);
  runtime_state.Set(absl::OkStatus());
  runtime_unit.SetUnit(!options.runtime_unit.empty()
                           ? options.runtime_unit
                           : RuntimeUnitFor(runtime->runtime_name, runtime->socket_path));
  (void)runtime_unit.Refresh();
  metrics.runtime_up.Set(1);
  ASSIGN_OR_RETURN(auto channel, cri::DialCri(runtime->endpoint));
  auto images = std::make_shared<cri::GrpcImageService>(channel);
  auto content = std::make_shared<cri::GrpcContentService>(channel);
  auto credentials = std::make_shared<SecretCredentialSource>(client.get(), Clock::Real());

  kube::EventRecorderOptions ero;
  ero.component = "kruise-daemon";
  ero.host = options.node_name;
  kube::EventRecorder recorder(client.get(), ero);

  NodeImageControllerOptions nio;
  nio.node_name = options.node_name;
  nio.resource = options.nodeimage_version == "v1beta1" ? kube::resources::NodeImagesV1beta1()
                                                        : kube::resources::NodeImages();
  NodeImageController* controller_ptr = nullptr;
  NodeImageController controller(
      nio, client.get(), Clock::Real(), &recorder, [&](std::function<void()> on_change) {
        ImagePullerOptions po;
        po.max_workers = options.max_workers_for_pull_image;
        PullObserver observer;
        observer.on_start = [&](const std::string&, const std::string&) {
          metrics.pulls_in_flight.Increment();
        };
        observer.on_success = [&](const std::string& image, const std::string& tag,
                                  absl::Duration took, int64_t bytes) {
          metrics.pulls_in_flight.Decrement();
          metrics.pulls.Add({{"result", "succeeded"}}).Increment();
          metrics.pull_seconds.Observe(absl::ToDoubleSeconds(took));
          metrics.pull_bytes.Increment(static_cast<double>(bytes));
          if (controller_ptr) controller_ptr->RecordOutcome(image, tag, true, "");
        };
        observer.on_failure = [&](const std::string& image, const std::string& tag,
                                  const std::string& message) {
          metrics.pulls_in_flight.Decrement();
          metrics.pulls.Add({{"result", "failed"}}).Increment();
          if (controller_ptr) controller_ptr->RecordOutcome(image, tag, false, message);
        };
        return std::make_unique<ImagePuller>(po, images, content, credentials, Clock::Real(),
                                             std::move(on_change), std::move(observer));
      });
  controller_ptr = &controller;
  controller.Start();

  auto runtime_service = std::make_shared<cri::GrpcRuntimeService>(channel);
  CrrControllerOptions co;
  co.node_name = options.node_name;
  co.workers = options.max_workers_for_crr;
  CrrObserver crr_observer;
  crr_observer.on_completed = [&](const kube::Json&, bool succeeded, absl::Duration took) {
    metrics.crr_completed.Add({{"result", succeeded ? "succeeded" : "failed"}}).Increment();
    metrics.crr_seconds.Observe(absl::ToDoubleSeconds(took));
  };
  crr_observer.on_container_killed = [&](const kube::Json&, const std::string&) {
    metrics.crr_killed.Increment();
  };
  CrrController crr_controller(co, client.get(), runtime_service.get(), Clock::Real(), &recorder,
                               std::move(crr_observer));
  crr_controller.Start();
  auto all_synced = [&] { return controller.HasSynced() && crr_controller.HasSynced(); };
  while (!stop.stop_requested() && !(controller.WaitForSync(absl::Now() + absl::Seconds(1)) &&
                                     crr_controller.WaitForSync(absl::Now() + absl::Seconds(1)))) {
  }
  synced = all_synced();
  if (synced) log->info("NodeImage and CRR informers for node {} synced", options.node_name);
  (void)notifier.Ready();

  // Watchdog pings at half of WatchdogSec, only while the runtime answers.
  absl::Duration ping = notifier.watchdog_ping_interval().value_or(absl::Seconds(10));
  while (!wait_stop(ping)) {
    (void)runtime_unit.Refresh();  // keeps the unit gauge current
    if (!synced) synced = all_synced();
    if (notifier.watchdog_ping_interval().has_value() && runtime_state.Get().ok()) {
      (void)notifier.Watchdog();
    }
  }
  log->info("shutting down");
  (void)notifier.Stopping();
  crr_controller.Stop();
  controller.Stop();
  recorder.WaitIdle(absl::Seconds(2));
  health.Stop();
  return absl::OkStatus();
}

}  // namespace kruise::daemon
