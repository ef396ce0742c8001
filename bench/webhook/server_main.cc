// webhook-bench-server --cert tls.crt --key tls.key --addr 127.0.0.1:16511 [--pod running-pod.json]
// Serves over TLS until SIGINT/SIGTERM:
//   /mutate-pod, /validate-pod: the Go peer's work (PodSidecarMutator, allow-all), for comparison;
//   /kruise/mutate-pod: the manager's real pod webhook (PodMutatingHandler, readiness-gate chain);
//   the manager's real ContainerRecreateRequest paths (CrrMutator/CrrValidator), the pod they read
//   coming from --pod instead of the API server (a GET there is not what this measures).

#include <csignal>
#include <fstream>
#include <sstream>

#include "CLI/CLI.hpp"
#include "absl/synchronization/notification.h"
#include "common/logging.h"
#include "manager/webhook/crr_handlers.h"
#include "manager/webhook/pod_handlers.h"
#include "manager/webhook/pod_webhook.h"
#include "manager/webhook/server.h"

namespace {
absl::Notification* g_stop = nullptr;

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

 private:
  Json pod_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"admission webhook benchmark server"};
  std::string cert, key, addr = "127.0.0.1:16511";
  int threads = 2;
  app.add_option("--cert", cert, "TLS certificate (PEM)")->required();
  app.add_option("--key", key, "TLS private key (PEM)")->required();
  app.add_option("--addr", addr, "listen address (host:port)");
  app.add_option("--threads", threads, "server threads");
  std::string pod_file = KRUISE_BENCH_POD_FILE;
  app.add_option("--pod", pod_file, "the running pod CRR admissions refer to (JSON)");
  CLI11_PARSE(app, argc, argv);

  using namespace kruise::manager::webhook;
  HandlerRegistry registry;
  registry.Register("/mutate-pod", std::make_shared<PodSidecarMutator>());
  registry.Register("/validate-pod", std::make_shared<PodAllowValidator>());
  std::vector<std::unique_ptr<PodMutator>> chain;
  chain.push_back(std::make_unique<ReadinessGateInjector>(/*all_pods=*/false));
  registry.Register("/kruise/mutate-pod", std::make_shared<PodMutatingHandler>(
                                              std::move(chain), PodMutatingHandler::Options{}));
  std::ifstream in(pod_file);
  std::stringstream text;
  text << in.rdbuf();
  Json pod = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!pod.is_object()) {
    kruise::Logger("bench")->error("--pod {}: not a JSON object", pod_file);
    return 1;
  }
  OnePodReader pods(std::move(pod));
  RegisterCrrHandlers(&registry, &pods);
  WebhookServer server({.address = addr, .cert_file = cert, .key_file = key, .threads = threads},
                       &registry);
  if (absl::Status s = server.Start(); !s.ok()) {
    kruise::Logger("bench")->error("{}", s);
    return 1;
  }
  absl::Notification stop;
  g_stop = &stop;
  struct sigaction sa {};
  sa.sa_handler = [](int) {
    if (g_stop != nullptr && !g_stop->HasBeenNotified()) g_stop->Notify();
  };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  stop.WaitForNotification();
  server.Stop();
  kruise::Logger("bench")->info("served {} admissions", server.requests_served());
  return 0;
}
