#pragma once

// RuntimeService: the CRI sandbox/container operations the daemon needs.
//
// Thread-safety: implementations are safe to call concurrently from any thread.
// Blocking: every method blocks until the runtime answers or the call's deadline passes. The
// deadline is the implementation's default per-call timeout (GrpcCriOptions::default_timeout);
// StopContainer adds its grace period to it and ExecSync takes its own timeout.
// Errors (absl::Status codes mirror the gRPC code the runtime returned, message kept verbatim):
//   DEADLINE_EXCEEDED  the deadline passed before the runtime answered;
//   UNAVAILABLE        the runtime socket cannot be reached (message says why);
//   NOT_FOUND          unknown sandbox/container (as reported by the runtime); others as returned.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/cri_api.pb.h"

namespace kruise::cri {

namespace v1 = ::runtime::v1;

class RuntimeService {
 public:
  virtual ~RuntimeService() = default;

  // Runtime name/version and CRI API version (the request announces client API version "v1").
  virtual absl::StatusOr<v1::VersionResponse> Version() = 0;

  // Creates and starts a sandbox; returns its id. `runtime_handler` empty = default handler.
  virtual absl::StatusOr<std::string> RunPodSandbox(const v1::PodSandboxConfig& config,
                                                    const std::string& runtime_handler) = 0;
  // Stops every process of the sandbox. Idempotent.
  virtual absl::Status StopPodSandbox(const std::string& sandbox_id) = 0;
  // Removes the sandbox (and its containers). Idempotent.
  virtual absl::Status RemovePodSandbox(const std::string& sandbox_id) = 0;
  virtual absl::StatusOr<v1::PodSandboxStatusResponse> PodSandboxStatus(
      const std::string& sandbox_id, bool verbose) = 0;
  // `filter` may be empty (all sandboxes).
  virtual absl::StatusOr<std::vector<v1::PodSandbox>> ListPodSandbox(
      const v1::PodSandboxFilter& filter) = 0;

  // Creates a container in `sandbox_id`; returns its id.
  virtual absl::StatusOr<std::string> CreateContainer(
      const std::string& sandbox_id, const v1::ContainerConfig& config,
      const v1::PodSandboxConfig& sandbox_config) = 0;
  virtual absl::Status StartContainer(const std::string& container_id) = 0;
  // Stops the container, killing it after `grace_period_seconds` (0 = kill at once). The RPC
  // deadline is the default timeout plus the grace period. Idempotent.
  virtual absl::Status StopContainer(const std::string& container_id,
                                     int64_t grace_period_seconds) = 0;
  // Removes the container (forcibly if running). Idempotent.
  virtual absl::Status RemoveContainer(const std::string& container_id) = 0;
  // `filter` may be empty (all containers); fields are ANDed.
  virtual absl::StatusOr<std::vector<v1::Container>> ListContainers(
      const v1::ContainerFilter& filter) = 0;
  virtual absl::StatusOr<v1::ContainerStatusResponse> ContainerStatus(
      const std::string& container_id, bool verbose) = 0;

  // Runs `cmd` in the container and waits for it. `timeout` bounds the command (sent to the
  // runtime, rounded up to whole seconds) and the RPC (timeout + default timeout). A zero or
  // negative timeout means the default timeout; absl::InfiniteDuration() means no limit at all.
  virtual absl::StatusOr<v1::ExecSyncResponse> ExecSync(const std::string& container_id,
                                                        const std::vector<std::string>& cmd,
                                                        absl::Duration timeout) = 0;
};

}  // namespace kruise::cri
