// kruise-daemon: the node agent. Flags follow OpenKruise's daemon where it has them.
//
//   kruise-daemon [flags]          run as the node agent (NODE_NAME required)
//   kruise-daemon check [flags]    print the runtime found on this node; exit 0 if healthy
//   kruise-daemon probe [flags]    GET a running daemon's /healthz (or --path); exit 0 on HTTP 200

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <stop_token>
#include <thread>

#include "common/flags.h"
#include "common/health_server.h"
#include "common/logging.h"
#include "cri/discovery.h"
#include "daemon/app/daemon.h"
#include "daemon/imagepull/pull_command.h"

namespace {

// Turns SIGTERM/SIGINT into a stop request, on a thread of its own (no work in a handler).
std::stop_source WatchSignals() {
  static sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::stop_source source;
  std::thread([source]() mutable {
    int sig = 0;
    sigwait(&set, &sig);
    source.request_stop();
  }).detach();
  return source;
}

}  // namespace

int main(int argc, char** argv) {
  kruise::daemon::DaemonOptions o;
  std::string log_format = "text";
  int verbosity = 0;
  std::string feature_gates;
  kruise::Flags app{
      "kruise-daemon: OpenKruise-compatible node agent (image pre-pull, container "
      "recreate) over CRI"};
  app.Add("--addr", &o.addr, "Address of /healthz, /readyz and /metrics (port 0: any free port)")
      .ShowDefault();
  app.Add("--addr-file", &o.addr_file,
          "Once serving, write the address bound (HOST:PORT) to this file (for `probe`)");
  app.Add("--host-run-dir", &o.host_run_dir,
          "Where the host's /var/run is mounted (CRI sockets are looked up under it)")
      .ShowDefault();
  app.Add("--socket-file", &o.socket_file,
          "CRI socket relative to --host-run-dir (or absolute); empty: discover");
  app.Add("--runtime-unit", &o.runtime_unit,
          "systemd unit of the CRI runtime, reported on /healthz and /metrics "
          "(default: from the runtime found, e.g. containerd.service)");
  app.Add("--max-workers-for-pull-image", &o.max_workers_for_pull_image,
          "Image pulls running at once on this node; -1: unlimited")
      .ShowDefault();
  app.Add("--max-workers-for-crr", &o.max_workers_for_crr,
          "ContainerRecreateRequest workers (pods handled at once; OpenKruise: 32)")
      .Positive()
      .ShowDefault();
  app.Add("--kubeconfig", &o.kubeconfig, "Kubeconfig file (default: in-cluster)");
  app.Add("--rest-config-qps", &o.rest_qps, "API requests per second").ShowDefault();
  app.Add("--rest-config-burst", &o.rest_burst, "API request burst").ShowDefault();
  app.Add("--nodeimage-version", &o.nodeimage_version, "NodeImage API version to watch")
      .OneOf({"v1alpha1", "v1beta1"})
      .ShowDefault();
  app.Add("--feature-gates", &feature_gates,
          "OpenKruise feature gates (accepted for compatibility)");
  app.Add("--log-format", &log_format, "text or json").ShowDefault();
  app.Add("-v,--v", &verbosity, "Log verbosity (klog-style)");
  bool logtostderr = true;
  app.AddSwitch("--logtostderr", &logtostderr, "Accepted for compatibility (always stderr)");
  auto& check = app.Subcommand("check", "Find the CRI runtime and print what answered");
  kruise::daemon::PullCommandOptions pull;
  auto& pull_cmd = app.Subcommand(
      "pull",
      "Pre-pull the images of ImagePullJob/NodeImage YAML or references, no cluster needed");
  pull_cmd.Add("-f,--filename", &pull.files, "YAML file(s); - for stdin");
  pull_cmd.Add("images", &pull.images, "Image references");
  pull_cmd.Add("--docker-config", &pull.docker_config,
               "Docker config JSON with registry credentials");
  pull_cmd.Add("--max-workers", &pull.max_workers, "Pulls at once").ShowDefault();
  pull_cmd.Add("--timeout-seconds", &pull.timeout_seconds, "Per attempt").ShowDefault();
  pull_cmd.Add("--backoff-limit", &pull.backoff_limit, "Retries").ShowDefault();
  pull_cmd.AddSwitch("--always", &pull.always, "Pull even when the runtime has the image");
  kruise::HealthProbe probe;
  int probe_timeout_seconds = 2;
  auto& probe_cmd = app.Subcommand(
      "probe",
      "GET a running daemon's health endpoint, print the body; exit 0 on HTTP 200, else 1 "
      "(exec probes when the port is not known in advance)");
  probe_cmd.Add("--addr-file", &probe.address_file, "File the daemon's --addr-file wrote");
  probe_cmd.Add("--addr", &probe.address, "HOST:PORT instead of --addr-file (0.0.0.0: loopback)");
  probe_cmd.Add("--path", &probe.path, "Path and query, e.g. /readyz or /healthz?exclude=runtime")
      .ShowDefault();
  probe_cmd.Add("--timeout-seconds", &probe_timeout_seconds, "For connecting and for each read")
      .Positive()
      .ShowDefault();
  if (auto exit_code = app.ParseOrExitCode(argc, argv)) return *exit_code;

  if (probe_cmd.Given()) {  // before logging: a probe prints only the answer, or why there is none
    probe.timeout = absl::Seconds(probe_timeout_seconds);
    auto answer = kruise::ProbeHealth(probe);
    if (!answer.ok()) {
      std::fprintf(stderr, "kruise-daemon probe: %s\n",
                   std::string(answer.status().message()).c_str());
      return 1;
    }
    std::fwrite(answer->body.data(), 1, answer->body.size(), stdout);
    if (!answer->body.empty() && answer->body.back() != '\n') std::fputc('\n', stdout);
    if (answer->status != 200) {
      std::fprintf(stderr, "kruise-daemon probe: GET %s: HTTP %d\n", answer->url.c_str(),
                   answer->status);
      return 1;
    }
    return 0;
  }

  auto format = kruise::ParseLogFormat(log_format);
  if (!format.ok()) {
    std::fprintf(stderr, "kruise-daemon: %s\n", std::string(format.status().message()).c_str());
    return 2;
  }
  kruise::InitLogging({.format = *format, .level = kruise::LevelFromVerbosity(verbosity)});

  if (pull_cmd.Given()) {
    pull.host_run_dir = o.host_run_dir == "/hostvarrun" ? "/var/run" : o.host_run_dir;
    pull.socket_file = o.socket_file;
    return kruise::daemon::RunPullCommand(pull);
  }
  if (check.Given()) {
    kruise::cri::DiscoveryOptions d;
    d.host_run_dir = o.host_run_dir;
    d.socket_override = o.socket_file;
    auto rt = kruise::cri::DiscoverRuntime(d);
    if (!rt.ok()) {
      std::printf("runtime: NOT FOUND\n%s\n", std::string(rt.status().message()).c_str());
      return 1;
    }
    std::printf("runtime: %s %s (CRI %s)\nsocket: %s\nimage fs: %s\n", rt->runtime_name.c_str(),
                rt->runtime_version.c_str(), rt->runtime_api_version.c_str(),
                rt->socket_path.c_str(), rt->image_fs_summary.c_str());
    return 0;
  }

  const char* node = std::getenv("NODE_NAME");
  o.node_name = node != nullptr ? node : "";
  std::stop_source stop = WatchSignals();
  absl::Status s = kruise::daemon::RunDaemon(o, stop.get_token());
  if (!s.ok()) {
    kruise::Logger("daemon")->critical("{}", s);
    return 1;
  }
  return 0;
}
