// webhook-bench-server --cert tls.crt --key tls.key --addr 127.0.0.1:16511
// Serves /mutate-pod (PodSidecarMutator: the Go peer's work) and /validate-pod (allow) over TLS
// until SIGINT/SIGTERM.

#include <csignal>

#include "CLI/CLI.hpp"
#include "absl/synchronization/notification.h"
#include "common/logging.h"
#include "manager/webhook/pod_handlers.h"
#include "manager/webhook/server.h"

namespace {
absl::Notification* g_stop = nullptr;
}

int main(int argc, char** argv) {
  CLI::App app{"admission webhook benchmark server"};
  std::string cert, key, addr = "127.0.0.1:16511";
  int threads = 2;
  app.add_option("--cert", cert, "TLS certificate (PEM)")->required();
  app.add_option("--key", key, "TLS private key (PEM)")->required();
  app.add_option("--addr", addr, "listen address (host:port)");
  app.add_option("--threads", threads, "connection threads");
  CLI11_PARSE(app, argc, argv);

  using namespace kruise::manager::webhook;
  HandlerRegistry registry;
  registry.Register("/mutate-pod", std::make_shared<PodSidecarMutator>());
  registry.Register("/validate-pod", std::make_shared<PodAllowValidator>());
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
