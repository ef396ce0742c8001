#pragma once

// Daemon: the kruise-daemon process, composed from its parts.
//
//   health/metrics server (--addr; the address bound also in --addr-file)  ->  runtime discovery,
//   retried with backoff until a CRI socket answers (fail-soft: /healthz says 503 with every path
//   tried, the process stays up)  ->  Kubernetes client  ->  NodeImage controller (image
//   pre-pull) and ContainerRecreateRequest controller (container recreate), both for this node
//   only.
//
// Run() blocks until `stop` is requested, then shuts down in reverse order.

#include <stop_token>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace kruise::daemon {

struct DaemonOptions {
  std::string node_name;        // NODE_NAME
  std::string addr = ":10221";  // health + metrics; port 0: an ephemeral port
  // When set: the address bound ("host:port", the port resolved) is written there once serving
  // (kruise::WriteAddressFile), for clients that cannot know it (`kruise-daemon probe`); removed
  // before binding (a previous run's) and again when RunDaemon returns.
  std::string addr_file;
  std::string host_run_dir = "/hostvarrun";
  std::string socket_file;             // relative to host_run_dir; empty: discover
  // systemd unit of the runtime (/healthz, /metrics); empty: from the runtime discovered.
  std::string runtime_unit;
  int max_workers_for_pull_image = 2;  // -1: unlimited
  // ContainerRecreateRequest workers (pods handled at once). OpenKruise hard-codes 32; 4 is
  // plenty for a node's pods (a worker is busy only while it kills a container).
  int max_workers_for_crr = 4;
  std::string kubeconfig;
  double rest_qps = 5;
  int rest_burst = 10;
  std::string nodeimage_version = "v1alpha1";
  absl::Duration discovery_max_backoff = absl::Seconds(30);
};

// Returns non-OK only for start-up errors that retrying cannot fix (bad flags, no Kubernetes
// configuration, the address in use, the address file not writable).
absl::Status RunDaemon(const DaemonOptions& options, std::stop_token stop);

}  // namespace kruise::daemon
