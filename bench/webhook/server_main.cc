// webhook-bench-server --cert tls.crt --key tls.key --addr 127.0.0.1:16511 [--pod running-pod.json]
//     [--threads 2] [--handler-threads 8] [--decode-budget-mib 96] [--decode-factor F]
//     [--max-sessions 1024] [--idle-timeout-seconds 10] [--apiserver URL] [--port-file F]
// Serves over TLS until SIGINT/SIGTERM (SIGUSR1 prints its own latency since the last SIGUSR1):
//   /mutate-pod, /validate-pod: the Go peer's work (PodSidecarMutator, allow-all), for comparison;
//   /kruise/mutate-pod: the manager's real pod webhook (PodMutatingHandler, readiness-gate chain);
//   /kruise/mutate-pod-sidecarsets: the same chain with SidecarSet injection over 100 cached
//   SidecarSets, one of which (selector tier=backend) matches the peers' review pod and injects a
//   log agent with a shared volume and transferEnv; the other 99 select other apps, 33 of them by
//   namespaceSelector as well;
//   --loop-availability: WorkloadSpread and PodUnavailableBudget's cost per pod admission
//   (availability_loop.h);
//   the manager's real ContainerRecreateRequest paths (CrrMutator/CrrValidator), the pod they read
//   coming from --pod instead of the API server (a GET there is not what this measures).

#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "bench/webhook/availability_loop.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/tls.h"
#include "fmt/format.h"
#include "manager/sidecarset/sidecarset_webhook.h"
#include "kube/rest_client.h"
#include "manager/webhook/crr_handlers.h"
#include "manager/webhook/fail_open.h"
#include "manager/webhook/pod_handlers.h"
#include "manager/webhook/pod_webhook.h"
#include "manager/webhook/server.h"
#include "prometheus/registry.h"

namespace {

using kruise::manager::webhook::Json;

// The one pod the CRR mutator may read.
class OnePodReader final : public kruise::manager::webhook::PodReader {
 public:
  // As ApiPodReader hands it to the mutator: without managedFields.
  explicit OnePodReader(Json pod) : pod_(std::move(pod)) {
    if (pod_.is_object() && pod_["metadata"].is_object()) pod_["metadata"].erase("managedFields");
  }
  absl::StatusOr<Json> GetPod(const std::string& ns, const std::string& name) override {
    if (pod_.is_object() && pod_["metadata"].value("namespace", "") == ns &&
        pod_["metadata"].value("name", "") == name) {
      return pod_;
    }
    return absl::NotFoundError("pod not found");
  }
  const Json& pod() const { return pod_; }

 private:
  Json pod_;
};

// The server's own view (controller_runtime_webhook_latency_seconds: review read -> reply ready),
// per path: the share of reviews within each bucket bound up to 10 ms. It separates the server's
// tail from the load generator's and the machine's. With `window`, only the reviews since the
// previous call with the same map count (bench/webhook/run.sh brackets each load with SIGUSR1).
using BucketCounts = std::map<std::string, std::vector<uint64_t>>;  // path -> counts, sum last
void PrintServerLatency(prometheus::Registry& metrics, BucketCounts* window) {
  for (const prometheus::MetricFamily& family : metrics.Collect()) {
    if (family.name != "controller_runtime_webhook_latency_seconds") continue;
    for (const prometheus::ClientMetric& m : family.metric) {
      std::string path = m.label.empty() ? "" : m.label.front().value;
      std::vector<uint64_t> now;
      for (const prometheus::ClientMetric::Bucket& b : m.histogram.bucket) {
        now.push_back(b.cumulative_count);
      }
      now.push_back(m.histogram.sample_count);
      now.push_back(static_cast<uint64_t>(m.histogram.sample_sum * 1e9));  // ns
      std::vector<uint64_t> delta = now;
      if (window != nullptr) {
        std::vector<uint64_t>& before = (*window)[path];
        if (before.size() == now.size()) {
          for (size_t i = 0; i < now.size(); ++i) delta[i] = now[i] - before[i];
        }
        before = now;
      }
      const uint64_t count = delta[delta.size() - 2];
      if (count == 0) continue;
      std::string line;
      for (size_t i = 0; i < m.histogram.bucket.size(); ++i) {
        const double bound = m.histogram.bucket[i].upper_bound;
        if (bound > 0.01) break;
        line += fmt::format(" <={}ms:{:.3f}%", bound * 1000,
                            100.0 * static_cast<double>(delta[i]) / static_cast<double>(count));
      }
      std::printf("server-side latency %s (%llu reviews, mean %.1f us):%s\n", path.c_str(),
                  static_cast<unsigned long long>(count),
                  static_cast<double>(delta.back()) / 1e3 / static_cast<double>(count),
                  line.c_str());
    }
  }
  std::fflush(stdout);
}

// 100 SidecarSets as described at the top of this file.
void FillSidecarSets(kruise::manager::sidecarset::SidecarSetCache* cache) {
  for (int i = 0; i < 100; ++i) {
    Json set = Json::parse(R"({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
      "metadata": {"name": ""},
      "spec": {"selector": {"matchLabels": {"app": ""}},
               "containers": [{"name": "", "image": "registry.example/agent:1.0",
                               "volumeMounts": [{"name": "agent-data", "mountPath": "/agent"}]}],
               "volumes": [{"name": "agent-data", "emptyDir": {}}]}})");
    set["metadata"]["name"] = fmt::format("set-{:03d}", i);
    set["spec"]["selector"]["matchLabels"]["app"] = fmt::format("other-{}", i);
    set["spec"]["containers"][0]["name"] = fmt::format("agent-{}", i);
    if (i % 3 == 0) set["spec"]["namespaceSelector"] = {{"matchLabels", {{"team", "platform"}}}};
    if (i == 42) {
      set["spec"]["selector"] = {{"matchLabels", {{"tier", "backend"}}}};
      set["spec"]["containers"][0]["shareVolumePolicy"] = {{"type", "enabled"}};
      set["spec"]["containers"][0]["transferEnv"] = {
          {{"sourceContainerName", "app"}, {"envName", "POD_IP"}}};
    }
    cache->UpsertSidecarSet(set);
  }
  cache->UpsertNamespace({{"metadata", {{"name", "load"}, {"labels", {{"team", "platform"}}}}}});
}

// --loop-review: the handlers' own cost, in-process, without TLS, HTTP or threads. Rounds
// interleave the pod paths; prints each round's mean µs per review, then the medians.
int LoopReviews(const kruise::manager::webhook::HandlerRegistry& registry, const std::string& file,
                int count) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  const std::string body = text.str();
  const std::vector<std::string> paths = {"/kruise/mutate-pod", "/kruise/mutate-pod-sidecarsets"};
  std::map<std::string, std::vector<double>> means;
  for (int round = 0; round < 5; ++round) {
    for (const std::string& path : paths) {
      kruise::manager::webhook::Handler* handler = registry.Find(path);
      if (handler == nullptr) return 1;
      size_t bytes = 0;
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < count; ++i) {
        bytes += kruise::manager::webhook::ServeAdmission(*handler, body).body.size();
      }
      const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
      means[path].push_back(took.count() / count);
      std::printf("%-32s round %d  %8.2f us/review  reply %zu bytes\n", path.c_str(), round,
                  took.count() / count, bytes / count);
    }
  }
  for (auto& [path, v] : means) {
    std::sort(v.begin(), v.end());
    std::printf("%-32s median %8.2f us/review (%.2f-%.2f)\n", path.c_str(), v[v.size() / 2],
                v.front(), v.back());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"admission webhook benchmark server"};
  std::string cert, key, addr = "127.0.0.1:16511";
  kruise::manager::webhook::WebhookServer::Options defaults;
  int threads = defaults.threads;  // as kruise-manager runs it
  int handler_threads = defaults.handler_threads;
  int max_sessions = defaults.max_sessions;
  double decode_budget_mib = static_cast<double>(defaults.decode_budget_bytes) / (1 << 20);
  double decode_factor = defaults.decode_cost_factor;
  int idle_timeout_seconds = 10;
  app.add_option("--cert", cert, "TLS certificate (PEM); required unless --loop-review");
  app.add_option("--key", key, "TLS private key (PEM); required unless --loop-review");
  app.add_option("--addr", addr, "listen address (host:port)");
  app.add_option("--threads", threads, "I/O threads (connections, TLS, HTTP)");
  app.add_option("--handler-threads", handler_threads, "threads running admission handlers");
  app.add_option("--max-sessions", max_sessions, "connections served at once");
  app.add_option("--decode-budget-mib", decode_budget_mib,
                 "decode memory in flight (MiB; body size x --decode-factor)");
  app.add_option("--decode-factor", decode_factor, "decode memory per body byte");
  app.add_option("--idle-timeout-seconds", idle_timeout_seconds,
                 "close idle keep-alive connections after this");
  int ballast_mib = 0;
  app.add_option("--ballast-mib", ballast_mib,
                 "hold this much touched heap (stands for kruise-manager's caches in a memory "
                 "limit: bench/manager measures 52-55 MiB RssAnon at 30k pods)");
  std::string apiserver;
  app.add_option("--apiserver", apiserver,
                 "read the CRR admissions' pods from this API server (http URL) with the "
                 "manager's webhook client (2 s per call, one attempt) instead of --pod");
  std::string port_file;
  app.add_option("--port-file", port_file,
                 "write the bound port here once serving (for --addr :0)");
  std::string pod_file = KRUISE_BENCH_POD_FILE;
  app.add_option("--pod", pod_file, "the running pod CRR admissions refer to (JSON)");
  std::string loop_review;
  int loop_count = 20000;
  app.add_option("--loop-review", loop_review,
                 "no server: time ServeAdmission in-process on this review for every pod path, "
                 "print µs per review and exit (handler cost without TLS and HTTP)");
  app.add_option("--loop-count", loop_count, "reviews per path and round for --loop-review");
  std::string loop_availability;
  app.add_option("--loop-availability", loop_availability,
                 "no server: time pod CREATE and DELETE admissions in-process with WorkloadSpread "
                 "and PodUnavailableBudget active and without, for the pod of this CREATE review "
                 "(and --pod as the running pod), print µs per review and exit");
  int loop_batch = 100;
  app.add_option("--loop-batch", loop_batch,
                 "--loop-availability: admissions between two resets of the recorded statuses "
                 "(pods in flight at once)");
  CLI11_PARSE(app, argc, argv);
  if (loop_review.empty() && loop_availability.empty() && (cert.empty() || key.empty())) {
    std::fprintf(stderr, "--cert and --key are required (unless --loop-review)\n");
    return 2;
  }

  using namespace kruise::manager::webhook;
  HandlerRegistry registry;
  registry.Register("/mutate-pod", std::make_shared<PodSidecarMutator>());
  registry.Register("/validate-pod", std::make_shared<PodAllowValidator>());
  std::vector<std::unique_ptr<PodMutator>> chain;
  chain.push_back(std::make_unique<ReadinessGateInjector>(/*all_pods=*/false));
  registry.Register("/kruise/mutate-pod", std::make_shared<PodMutatingHandler>(
                                              std::move(chain), PodMutatingHandler::Options{}));
  kruise::manager::sidecarset::SidecarSetCache sidecarsets("kruise-system");
  FillSidecarSets(&sidecarsets);
  std::vector<std::unique_ptr<PodMutator>> with_sets;
  with_sets.push_back(std::make_unique<ReadinessGateInjector>(/*all_pods=*/false));
  with_sets.push_back(std::make_unique<kruise::manager::sidecarset::SidecarSetInjector>(
      &sidecarsets, kruise::Clock::Real()));
  registry.Register(
      "/kruise/mutate-pod-sidecarsets",
      std::make_shared<PodMutatingHandler>(std::move(with_sets), PodMutatingHandler::Options{}));
  std::ifstream in(pod_file);
  std::stringstream text;
  text << in.rdbuf();
  Json pod = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!pod.is_object()) {
    kruise::Logger("bench")->error("--pod {}: not a JSON object", pod_file);
    return 1;
  }
  OnePodReader pods(std::move(pod));
  std::vector<std::string> ballast;
  for (int i = 0; i < ballast_mib; ++i) ballast.emplace_back(size_t{1} << 20, 'b');
  std::unique_ptr<kruise::kube::RestKubeClient> api_client;
  std::unique_ptr<ApiPodReader> api_pods;
  if (!apiserver.empty()) {
    kruise::kube::RestConfig rc;
    rc.host = apiserver;
    rc.timeout = absl::Seconds(2);  // as kruise-manager's webhook client (manager/app/app.cc)
    rc.qps = 50;
    rc.burst = 100;
    kruise::kube::RestClientOptions ro;
    ro.max_attempts = 1;
    ro.max_throttle_wait = absl::Milliseconds(500);
    auto c = kruise::kube::RestKubeClient::Create(rc, kruise::Clock::Real(), ro);
    if (!c.ok()) {
      kruise::Logger("bench")->error("--apiserver: {}", c.status());
      return 1;
    }
    api_client = *std::move(c);
    api_pods = std::make_unique<ApiPodReader>(api_client.get());
    RegisterCrrHandlers(&registry, api_pods.get());
  } else {
    RegisterCrrHandlers(&registry, &pods);
  }
  // As kruise-manager: the pod paths are failurePolicy Ignore.
  FailOpen fail_open({});
  for (const char* p : {"/mutate-pod", "/validate-pod", "/kruise/mutate-pod",
                        "/kruise/mutate-pod-sidecarsets"}) {
    registry.SetFailOpen(p, &fail_open);
  }
  if (!loop_review.empty()) return LoopReviews(registry, loop_review, loop_count);
  if (!loop_availability.empty()) {
    std::ifstream review_in(loop_availability);
    std::stringstream review_text;
    review_text << review_in.rdbuf();
    Json review = Json::parse(review_text.str(), nullptr, /*allow_exceptions=*/false);
    if (!review.is_object() || !review["request"]["object"].is_object()) {
      kruise::Logger("bench")->error("--loop-availability {}: no request.object",
                                     loop_availability);
      return 1;
    }
    return kruise::bench::LoopAvailabilityReviews(review["request"]["object"], pods.pod(),
                                                  loop_count, loop_batch);
  }
  // Signals are taken by sigwait below; blocked before the server starts so its threads inherit it.
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGINT, SIGTERM, SIGUSR1}) sigaddset(&signals, sig);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  prometheus::Registry metrics;
  WebhookServer server({.address = addr,
                        .cert_file = cert,
                        .key_file = key,
                        .idle_timeout = absl::Seconds(idle_timeout_seconds),
                        .threads = threads,
                        .handler_threads = handler_threads,
                        .decode_budget_bytes = static_cast<size_t>(decode_budget_mib * (1 << 20)),
                        .decode_cost_factor = decode_factor,
                        .max_sessions = max_sessions,
                        .metrics = &metrics},
                       &registry);
  if (absl::Status s = server.Start(); !s.ok()) {
    kruise::Logger("bench")->error("{}", s);
    return 1;
  }
  if (!port_file.empty()) {
    absl::Status written =
        kruise::tls::WriteFileAtomic(port_file, absl::StrCat(server.port(), "\n"), 0644);
    if (!written.ok()) {
      kruise::Logger("bench")->error("--port-file: {}", written);
      return 1;
    }
  }
  // SIGUSR1: print the server's latency since the previous SIGUSR1; SIGINT/SIGTERM: stop, print
  // the whole run's.
  // Also the process's CPU time (all threads: TLS, HTTP and handlers) per review served in the
  // window: the cost of an admission, which wall time on a shared CPU overstates by queueing.
  BucketCounts window;
  auto cpu_us = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 + u.ru_utime.tv_usec + u.ru_stime.tv_usec;
  };
  double cpu_before = cpu_us();
  uint64_t served_before = server.requests_served();
  for (int sig = 0; sigwait(&signals, &sig) == 0 && sig == SIGUSR1;) {
    std::printf("-- window\n");
    const double cpu = cpu_us();
    const uint64_t served = server.requests_served();
    if (served > served_before) {
      std::printf("server cpu %.1f us per review (%llu reviews)\n",
                  (cpu - cpu_before) / static_cast<double>(served - served_before),
                  static_cast<unsigned long long>(served - served_before));
    }
    cpu_before = cpu;
    served_before = served;
    PrintServerLatency(metrics, &window);
  }
  server.Stop();
  kruise::Logger("bench")->info("served {} admissions, rejected {} (429), refused {} connections",
                                server.requests_served(), server.requests_rejected(),
                                server.sessions_refused());
  std::printf("-- whole run\n");
  PrintServerLatency(metrics, nullptr);
  return 0;
}
