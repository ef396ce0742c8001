// fake-apiserver: runs FakeApiServer as a process for scripts and benchmarks.
//
//   fake-apiserver --addr 127.0.0.1:0 --port-file /tmp/port --seed-pods 30000 --seed-nodes 1000
//
// Writes the bound port to --port-file once serving, then runs until SIGTERM/SIGINT.

#include <signal.h>

#include <iostream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/flags.h"
#include "common/tls.h"
#include "test/fakes/apiserver/fake_apiserver.h"

int main(int argc, char** argv) {
  kruise::Flags app{"Fake Kubernetes API server"};
  std::string addr = "127.0.0.1:0";
  std::string port_file;
  int seed_pods = 0;
  int seed_nodes = 0;
  int namespaces = 10;
  std::string token;
  std::string cert;
  std::string key;
  int bookmark_seconds = 60;
  app.Add("--addr", &addr, "host:port to listen on (port 0: any free port)");
  app.Add("--port-file", &port_file, "write the bound port to this file");
  app.Add("--seed-pods", &seed_pods, "number of realistic pods to create");
  app.Add("--seed-nodes", &seed_nodes, "number of nodes to create");
  app.Add("--seed-namespaces", &namespaces, "pods are spread over this many namespaces");
  app.Add("--token", &token, "require this bearer token");
  app.Add("--tls-cert", &cert, "serve HTTPS with this PEM certificate");
  app.Add("--tls-key", &key, "PEM private key for --tls-cert");
  app.Add("--bookmark-interval", &bookmark_seconds, "watch bookmark period (seconds)");
  std::string pod_get_latency = "0s";
  app.Add("--pod-get-latency", &pod_get_latency,
          "answer pod GETs after this long (e.g. 20s; a slow API server)");
  if (auto exit_code = app.ParseOrExitCode(argc, argv)) return *exit_code;

  kruise::testing::FakeApiServerOptions opts;
  size_t colon = addr.rfind(':');
  opts.host = colon == std::string::npos ? addr : addr.substr(0, colon);
  if (colon != std::string::npos && !absl::SimpleAtoi(addr.substr(colon + 1), &opts.port)) {
    std::cerr << "bad --addr " << addr << "\n";
    return 2;
  }
  opts.cert_file = cert;
  opts.key_file = key;
  opts.bookmark_interval = absl::Seconds(bookmark_seconds);

  // Block the stop signals before any thread starts so only sigwait below sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  kruise::testing::FakeApiServer server(opts);
  if (!token.empty()) server.RequireToken(token);
  absl::Duration pod_latency;
  if (!absl::ParseDuration(pod_get_latency, &pod_latency)) {
    std::cerr << "bad --pod-get-latency " << pod_get_latency << "\n";
    return 2;
  }
  if (pod_latency > absl::ZeroDuration()) server.SetPathLatency("GET", "/pods/", pod_latency);
  namespaces = std::max(1, namespaces);
  for (int i = 0; i < namespaces; ++i) {
    auto st = server.Seed("namespaces", {{"metadata", {{"name", absl::StrCat("ns-", i)}}}});
    if (!st.ok()) {
      std::cerr << st.status() << "\n";
      return 1;
    }
  }
  for (int i = 0; i < seed_nodes; ++i) {
    auto st = server.Seed("nodes", kruise::testing::MakeRealisticNode(absl::StrCat("node-", i), i));
    if (!st.ok()) {
      std::cerr << st.status() << "\n";
      return 1;
    }
  }
  for (int i = 0; i < seed_pods; ++i) {
    std::string node = seed_nodes > 0 ? absl::StrCat("node-", i % seed_nodes) : "";
    auto st =
        server.Seed("pods", kruise::testing::MakeRealisticPod(absl::StrCat("ns-", i % namespaces),
                                                              absl::StrCat("pod-", i), node, i));
    if (!st.ok()) {
      std::cerr << st.status() << "\n";
      return 1;
    }
  }
  absl::Status started = server.Start();
  if (!started.ok()) {
    std::cerr << "start: " << started << "\n";
    return 1;
  }
  if (!port_file.empty()) {
    absl::Status written =
        kruise::tls::WriteFileAtomic(port_file, absl::StrCat(server.port(), "\n"), 0644);
    if (!written.ok()) {
      std::cerr << "--port-file: " << written << "\n";
      return 1;
    }
  }
  std::cerr << "fake-apiserver serving on " << server.base_url() << " (resourceVersion "
            << server.CurrentResourceVersion() << ")\n";
  int sig = 0;
  sigwait(&signals, &sig);
  server.Stop();
  return 0;
}
