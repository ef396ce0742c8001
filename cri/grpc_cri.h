#pragma once

// gRPC implementations of ImageService, RuntimeService and ContentStatusReader over a unix socket.
//
//   ASSIGN_OR_RETURN(auto cri, kruise::cri::ConnectCri("unix:///run/containerd/containerd.sock"));
//   ASSIGN_OR_RETURN(std::string id, cri.images->PullImage("busybox:1.36", nullptr, nullptr,
//                                                        absl::Minutes(5)));
//
// One grpc::Channel is shared by every service built on it. Creating a channel does not connect:
// an unreachable socket shows up as UNAVAILABLE on the first call (never as a hang past the
// deadline). All classes here are thread-safe.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "cri/content_status.h"
#include "cri/endpoint.h"
#include "cri/image_service.h"
#include "cri/runtime_service.h"

namespace grpc {
class Channel;
class Status;
}  // namespace grpc

namespace kruise::cri {

struct GrpcCriOptions {
  // Deadline of every call that has no explicit timeout argument.
  absl::Duration default_timeout = absl::Minutes(2);
  // Largest response accepted (ListImages/ListContainers on busy nodes can be large).
  int max_receive_message_bytes = 16 * 1024 * 1024;
  // Source of "now" for deadlines. Must stay valid while services live.
  Clock* clock = Clock::Real();
  // containerd namespace ConnectCri gives its GrpcContentService (CRI images live in "k8s.io").
  std::string containerd_namespace = "k8s.io";
};

// Creates a channel to the unix socket named by `endpoint` (see SocketPathFromEndpoint), with
// the receive limit of `options`. Does not connect.
absl::StatusOr<std::shared_ptr<grpc::Channel>> DialCri(absl::string_view endpoint,
                                                       const GrpcCriOptions& options = {});

// Maps a gRPC status to an absl::Status with the same code and the runtime's message.
absl::Status FromGrpcStatus(const grpc::Status& status);

class GrpcImageService final : public ImageService {
 public:
  GrpcImageService(std::shared_ptr<grpc::Channel> channel, const GrpcCriOptions& options = {});
  ~GrpcImageService() override;

  absl::StatusOr<std::string> PullImage(const std::string& image, const v1::AuthConfig* auth,
                                        const v1::PodSandboxConfig* sandbox,
                                        absl::Duration timeout) override;
  absl::StatusOr<std::optional<v1::Image>> ImageStatus(const std::string& image) override;
  absl::StatusOr<std::vector<v1::Image>> ListImages(const v1::ImageFilter& filter) override;
  using ImageService::ListImages;
  absl::Status RemoveImage(const std::string& image) override;
  absl::StatusOr<v1::ImageFsInfoResponse> ImageFsInfo() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class GrpcRuntimeService final : public RuntimeService {
 public:
  GrpcRuntimeService(std::shared_ptr<grpc::Channel> channel, const GrpcCriOptions& options = {});
  ~GrpcRuntimeService() override;

  absl::StatusOr<v1::VersionResponse> Version() override;
  absl::StatusOr<std::string> RunPodSandbox(const v1::PodSandboxConfig& config,
                                            const std::string& runtime_handler) override;
  absl::Status StopPodSandbox(const std::string& sandbox_id) override;
  absl::Status RemovePodSandbox(const std::string& sandbox_id) override;
  absl::StatusOr<v1::PodSandboxStatusResponse> PodSandboxStatus(const std::string& sandbox_id,
                                                                bool verbose) override;
  absl::StatusOr<std::vector<v1::PodSandbox>> ListPodSandbox(
      const v1::PodSandboxFilter& filter) override;
  absl::StatusOr<std::string> CreateContainer(const std::string& sandbox_id,
                                              const v1::ContainerConfig& config,
                                              const v1::PodSandboxConfig& sandbox_config) override;
  absl::Status StartContainer(const std::string& container_id) override;
  absl::Status StopContainer(const std::string& container_id,
                             int64_t grace_period_seconds) override;
  absl::Status RemoveContainer(const std::string& container_id) override;
  absl::StatusOr<std::vector<v1::Container>> ListContainers(
      const v1::ContainerFilter& filter) override;
  absl::StatusOr<v1::ContainerStatusResponse> ContainerStatus(const std::string& container_id,
                                                              bool verbose) override;
  absl::StatusOr<v1::ExecSyncResponse> ExecSync(const std::string& container_id,
                                                const std::vector<std::string>& cmd,
                                                absl::Duration timeout) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// containerd's content service (same socket as its CRI plugin). Every call carries the gRPC
// metadata "containerd-namespace: <containerd_namespace>".
class GrpcContentService final : public ContentStatusReader {
 public:
  GrpcContentService(std::shared_ptr<grpc::Channel> channel,
                     std::string containerd_namespace = "k8s.io",
                     const GrpcCriOptions& options = {});
  ~GrpcContentService() override;

  absl::StatusOr<std::vector<ContentStatus>> ListStatuses(
      const std::vector<std::string>& filters) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Everything needed to talk to one runtime, sharing one channel.
struct CriClients {
  std::string socket_path;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<GrpcImageService> images;
  std::unique_ptr<GrpcRuntimeService> runtime;
  std::unique_ptr<GrpcContentService> content;  // options.containerd_namespace
};

// Dials `endpoint` (see DialCri) and builds the three services on one channel. Does not connect;
// INVALID_ARGUMENT only for a malformed endpoint.
absl::StatusOr<CriClients> ConnectCri(absl::string_view endpoint,
                                      const GrpcCriOptions& options = {});

}  // namespace kruise::cri
