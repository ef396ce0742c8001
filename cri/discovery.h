#pragma once

// Runtime discovery: finds the CRI socket of the node's container runtime.
//
//   kruise::cri::DiscoveryOptions opts;          // host_run_dir "/var/run"
//   opts.host_run_dir = "/host/var/run";         // the daemon sees the host's /var/run here
//   ASSIGN_OR_RETURN(auto rt, kruise::cri::DiscoverRuntime(opts));
//   ConnectCri(rt.endpoint) ...
//
// Candidates, tried in order under host_run_dir: containerd/containerd.sock, containerd.sock,
// crio/crio.sock, crio.sock, cri-dockerd.sock, cri-dockerd/cri-dockerd.sock. A candidate counts
// only if it is a unix socket AND both Version and ImageFsInfo answer within probe_timeout.
// With socket_override set, only that socket is tried.
//
// Thread-safe (no shared state). Blocks at most about (#candidates × probe_timeout). Never exits
// or aborts.

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "proto/cri_api.pb.h"

namespace kruise::cri {

struct DiscoveredRuntime {
  std::string socket_path;  // absolute path of the socket
  std::string endpoint;     // "unix://" + socket_path, ready for ConnectCri
  std::string runtime_name;
  std::string runtime_version;
  std::string runtime_api_version;
  std::string image_fs_summary;  // e.g. "/var/lib/containerd/...: 1234 bytes, 56 inodes"
  ::runtime::v1::ImageFsInfoResponse image_fs;
};

// What a probe learns from a socket that answered.
struct ProbeResult {
  ::runtime::v1::VersionResponse version;
  ::runtime::v1::ImageFsInfoResponse image_fs;
};

// Probes the unix socket at `socket_path` (already known to exist and be a socket): calls Version
// then ImageFsInfo, both bounded by `timeout`. Errors name the failed step ("Version failed: ..").
using RuntimeProber = std::function<absl::StatusOr<ProbeResult>(const std::string& socket_path,
                                                                absl::Duration timeout)>;

struct DiscoveryOptions {
  std::string host_run_dir = "/var/run";
  // Empty: try the candidates. Otherwise a socket path relative to host_run_dir, or absolute;
  // a "unix://" prefix is accepted.
  std::string socket_override;
  absl::Duration probe_timeout = absl::Seconds(3);
  Clock* clock = Clock::Real();
  // Empty: the gRPC prober (GrpcProber(clock)).
  RuntimeProber prober;
};

// The candidate paths, relative to the run dir, in the order they are tried.
const std::vector<std::string>& DefaultRuntimeCandidates();

// The real prober: dials the socket with gRPC.
RuntimeProber GrpcProber(Clock* clock = Clock::Real());

// Returns the first candidate that answers. On failure: NOT_FOUND when no candidate exists at
// all (all missing), UNAVAILABLE when some exist but none answered, INVALID_ARGUMENT for a
// malformed override; the message lists every path tried and why it failed (missing, not a
// socket, connection refused, timeout, "Version failed: <runtime message>", ...).
absl::StatusOr<DiscoveredRuntime> DiscoverRuntime(const DiscoveryOptions& options);

}  // namespace kruise::cri
