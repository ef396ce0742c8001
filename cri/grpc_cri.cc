#include "cri/grpc_cri.h"

#include <grpcpp/grpcpp.h>

#include <cmath>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "proto/containerd_content.grpc.pb.h"
#include "proto/cri_api.grpc.pb.h"

namespace kruise::cri {
namespace {

namespace content = ::containerd::services::content::v1;

// Version the client announces in VersionRequest (the CRI API it speaks).
constexpr char kClientApiVersion[] = "v1";

// Sets the deadline `timeout` from now on `ctx` (an infinite timeout sets none).
void SetDeadline(grpc::ClientContext* ctx, Clock* clock, absl::Duration timeout) {
  if (timeout == absl::InfiniteDuration()) {
    return;
  }
  ctx->set_deadline(absl::ToChronoTime(clock->Now() + timeout));
}

// Calls `method` on `stub` with a deadline and maps the result. `name` prefixes error messages.
template <typename Stub, typename Req, typename Resp>
absl::StatusOr<Resp> Invoke(Stub* stub,
                            grpc::Status (Stub::*method)(grpc::ClientContext*, const Req&, Resp*),
                            absl::string_view name, const Req& request, Clock* clock,
                            absl::Duration timeout,
                            const std::pair<std::string, std::string>* metadata = nullptr) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, clock, timeout);
  if (metadata != nullptr) {
    ctx.AddMetadata(metadata->first, metadata->second);
  }
  Resp response;
  grpc::Status status = (stub->*method)(&ctx, request, &response);
  if (!status.ok()) {
    absl::Status mapped = FromGrpcStatus(status);
    std::string message = absl::StrCat(name, ": ", mapped.message());
    if (mapped.code() == absl::StatusCode::kDeadlineExceeded) {
      absl::StrAppend(&message, " (deadline ", absl::FormatDuration(timeout), ")");
    }
    return absl::Status(mapped.code(), message);
  }
  return response;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> DialCri(absl::string_view endpoint,
                                                       const GrpcCriOptions& options) {
  absl::StatusOr<std::string> path = SocketPathFromEndpoint(endpoint);
  if (!path.ok()) {
    return path.status();
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  // A private subchannel pool: a socket that failed earlier (and sits in reconnect backoff in the
  // global pool) must not make this channel fail without trying.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // Local socket: retry a refused connection quickly instead of backing off for seconds.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(absl::StrCat("unix:", *path), grpc::InsecureChannelCredentials(),
                                   args);
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  int code = static_cast<int>(status.error_code());
  if (code < 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    code = static_cast<int>(absl::StatusCode::kUnknown);
  }
  return absl::Status(static_cast<absl::StatusCode>(code), status.error_message());
}

// ---- GrpcImageService ----

struct GrpcImageService::Impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::ImageService::Stub> stub;
  GrpcCriOptions options;
};

GrpcImageService::GrpcImageService(std::shared_ptr<grpc::Channel> channel,
                                   const GrpcCriOptions& options)
    : impl_(std::make_unique<Impl>()) {
  impl_->stub = v1::ImageService::NewStub(channel);
  impl_->channel = std::move(channel);
  impl_->options = options;
}

GrpcImageService::~GrpcImageService() = default;

absl::StatusOr<std::string> GrpcImageService::PullImage(const std::string& image,
                                                        const v1::AuthConfig* auth,
                                                        const v1::PodSandboxConfig* sandbox,
                                                        absl::Duration timeout) {
  v1::PullImageRequest req;
  req.mutable_image()->set_image(image);
  if (auth != nullptr) {
    *req.mutable_auth() = *auth;
  }
  if (sandbox != nullptr) {
    *req.mutable_sandbox_config() = *sandbox;
  }
  auto resp = Invoke(impl_->stub.get(), &v1::ImageService::Stub::PullImage, "PullImage", req,
                     impl_->options.clock, timeout);
  if (!resp.ok()) {
    return resp.status();
  }
  return resp->image_ref();
}

absl::StatusOr<std::optional<v1::Image>> GrpcImageService::ImageStatus(const std::string& image) {
  v1::ImageStatusRequest req;
  req.mutable_image()->set_image(image);
  auto resp = Invoke(impl_->stub.get(), &v1::ImageService::Stub::ImageStatus, "ImageStatus", req,
                     impl_->options.clock, impl_->options.default_timeout);
  if (!resp.ok()) {
    // Some runtimes report an absent image as NOT_FOUND instead of an empty response.
    if (absl::IsNotFound(resp.status())) {
      return std::optional<v1::Image>();
    }
    return resp.status();
  }
  if (!resp->has_image()) {
    return std::optional<v1::Image>();
  }
  return std::optional<v1::Image>(std::move(*resp->mutable_image()));
}

absl::StatusOr<std::vector<v1::Image>> GrpcImageService::ListImages(const v1::ImageFilter& filter) {
  v1::ListImagesRequest req;
  if (filter.has_image()) {
    *req.mutable_filter() = filter;
  }
  auto resp = Invoke(impl_->stub.get(), &v1::ImageService::Stub::ListImages, "ListImages", req,
                     impl_->options.clock, impl_->options.default_timeout);
  if (!resp.ok()) {
    return resp.status();
  }
  return std::vector<v1::Image>(std::make_move_iterator(resp->mutable_images()->begin()),
                                std::make_move_iterator(resp->mutable_images()->end()));
}

absl::Status GrpcImageService::RemoveImage(const std::string& image) {
  v1::RemoveImageRequest req;
  req.mutable_image()->set_image(image);
  return Invoke(impl_->stub.get(), &v1::ImageService::Stub::RemoveImage, "RemoveImage", req,
                impl_->options.clock, impl_->options.default_timeout)
      .status();
}

absl::StatusOr<v1::ImageFsInfoResponse> GrpcImageService::ImageFsInfo() {
  return Invoke(impl_->stub.get(), &v1::ImageService::Stub::ImageFsInfo, "ImageFsInfo",
                v1::ImageFsInfoRequest(), impl_->options.clock, impl_->options.default_timeout);
}

// ---- GrpcRuntimeService ----

struct GrpcRuntimeService::Impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::RuntimeService::Stub> stub;
  GrpcCriOptions options;

  template <typename Req, typename Resp>
  absl::StatusOr<Resp> Call(grpc::Status (v1::RuntimeService::Stub::*method)(grpc::ClientContext*,
                                                                             const Req&, Resp*),
                            absl::string_view name, const Req& req) {
    return Invoke(stub.get(), method, name, req, options.clock, options.default_timeout);
  }
};

GrpcRuntimeService::GrpcRuntimeService(std::shared_ptr<grpc::Channel> channel,
                                       const GrpcCriOptions& options)
    : impl_(std::make_unique<Impl>()) {
  impl_->stub = v1::RuntimeService::NewStub(channel);
  impl_->channel = std::move(channel);
  impl_->options = options;
}

GrpcRuntimeService::~GrpcRuntimeService() = default;

absl::StatusOr<v1::VersionResponse> GrpcRuntimeService::Version() {
  v1::VersionRequest req;
  req.set_version(kClientApiVersion);
  return impl_->Call(&v1::RuntimeService::Stub::Version, "Version", req);
}

absl::StatusOr<std::string> GrpcRuntimeService::RunPodSandbox(const v1::PodSandboxConfig& config,
                                                              const std::string& runtime_handler) {
  v1::RunPodSandboxRequest req;
  *req.mutable_config() = config;
  req.set_runtime_handler(runtime_handler);
  auto resp = impl_->Call(&v1::RuntimeService::Stub::RunPodSandbox, "RunPodSandbox", req);
  if (!resp.ok()) {
    return resp.status();
  }
  return resp->pod_sandbox_id();
}

absl::Status GrpcRuntimeService::StopPodSandbox(const std::string& sandbox_id) {
  v1::StopPodSandboxRequest req;
  req.set_pod_sandbox_id(sandbox_id);
  return impl_->Call(&v1::RuntimeService::Stub::StopPodSandbox, "StopPodSandbox", req).status();
}

absl::Status GrpcRuntimeService::RemovePodSandbox(const std::string& sandbox_id) {
  v1::RemovePodSandboxRequest req;
  req.set_pod_sandbox_id(sandbox_id);
  return impl_->Call(&v1::RuntimeService::Stub::RemovePodSandbox, "RemovePodSandbox", req).status();
}

absl::StatusOr<v1::PodSandboxStatusResponse> GrpcRuntimeService::PodSandboxStatus(
    const std::string& sandbox_id, bool verbose) {
  v1::PodSandboxStatusRequest req;
  req.set_pod_sandbox_id(sandbox_id);
  req.set_verbose(verbose);
  return impl_->Call(&v1::RuntimeService::Stub::PodSandboxStatus, "PodSandboxStatus", req);
}

absl::StatusOr<std::vector<v1::PodSandbox>> GrpcRuntimeService::ListPodSandbox(
    const v1::PodSandboxFilter& filter) {
  v1::ListPodSandboxRequest req;
  *req.mutable_filter() = filter;
  auto resp = impl_->Call(&v1::RuntimeService::Stub::ListPodSandbox, "ListPodSandbox", req);
  if (!resp.ok()) {
    return resp.status();
  }
  return std::vector<v1::PodSandbox>(std::make_move_iterator(resp->mutable_items()->begin()),
                                     std::make_move_iterator(resp->mutable_items()->end()));
}

absl::StatusOr<std::string> GrpcRuntimeService::CreateContainer(
    const std::string& sandbox_id, const v1::ContainerConfig& config,
    const v1::PodSandboxConfig& sandbox_config) {
  v1::CreateContainerRequest req;
  req.set_pod_sandbox_id(sandbox_id);
  *req.mutable_config() = config;
  *req.mutable_sandbox_config() = sandbox_config;
  auto resp = impl_->Call(&v1::RuntimeService::Stub::CreateContainer, "CreateContainer", req);
  if (!resp.ok()) {
    return resp.status();
  }
  return resp->container_id();
}

absl::Status GrpcRuntimeService::StartContainer(const std::string& container_id) {
  v1::StartContainerRequest req;
  req.set_container_id(container_id);
  return impl_->Call(&v1::RuntimeService::Stub::StartContainer, "StartContainer", req).status();
}

absl::Status GrpcRuntimeService::StopContainer(const std::string& container_id,
                                               int64_t grace_period_seconds) {
  v1::StopContainerRequest req;
  req.set_container_id(container_id);
  req.set_timeout(grace_period_seconds < 0 ? 0 : grace_period_seconds);
  return Invoke(impl_->stub.get(), &v1::RuntimeService::Stub::StopContainer, "StopContainer", req,
                impl_->options.clock, impl_->options.default_timeout + absl::Seconds(req.timeout()))
      .status();
}

absl::Status GrpcRuntimeService::RemoveContainer(const std::string& container_id) {
  v1::RemoveContainerRequest req;
  req.set_container_id(container_id);
  return impl_->Call(&v1::RuntimeService::Stub::RemoveContainer, "RemoveContainer", req).status();
}

absl::StatusOr<std::vector<v1::Container>> GrpcRuntimeService::ListContainers(
    const v1::ContainerFilter& filter) {
  v1::ListContainersRequest req;
  *req.mutable_filter() = filter;
  auto resp = impl_->Call(&v1::RuntimeService::Stub::ListContainers, "ListContainers", req);
  if (!resp.ok()) {
    return resp.status();
  }
  return std::vector<v1::Container>(std::make_move_iterator(resp->mutable_containers()->begin()),
                                    std::make_move_iterator(resp->mutable_containers()->end()));
}

absl::StatusOr<v1::ContainerStatusResponse> GrpcRuntimeService::ContainerStatus(
    const std::string& container_id, bool verbose) {
  v1::ContainerStatusRequest req;
  req.set_container_id(container_id);
  req.set_verbose(verbose);
  return impl_->Call(&v1::RuntimeService::Stub::ContainerStatus, "ContainerStatus", req);
}

absl::StatusOr<v1::ExecSyncResponse> GrpcRuntimeService::ExecSync(
    const std::string& container_id, const std::vector<std::string>& cmd, absl::Duration timeout) {
  v1::ExecSyncRequest req;
  req.set_container_id(container_id);
  for (const std::string& arg : cmd) {
    req.add_cmd(arg);
  }
  absl::Duration rpc_timeout = absl::InfiniteDuration();
  if (timeout != absl::InfiniteDuration()) {
    if (timeout <= absl::ZeroDuration()) {
      timeout = impl_->options.default_timeout;
    }
    // The CRI takes whole seconds and 0 means "no limit": round up.
    req.set_timeout(static_cast<int64_t>(std::ceil(absl::ToDoubleSeconds(timeout))));
    rpc_timeout = absl::Seconds(req.timeout()) + impl_->options.default_timeout;
  }
  return Invoke(impl_->stub.get(), &v1::RuntimeService::Stub::ExecSync, "ExecSync", req,
                impl_->options.clock, rpc_timeout);
}

// ---- GrpcContentService ----

struct GrpcContentService::Impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<content::Content::Stub> stub;
  std::pair<std::string, std::string> namespace_metadata;
  GrpcCriOptions options;
};

GrpcContentService::GrpcContentService(std::shared_ptr<grpc::Channel> channel,
                                       std::string containerd_namespace,
                                       const GrpcCriOptions& options)
    : impl_(std::make_unique<Impl>()) {
  impl_->stub = content::Content::NewStub(channel);
  impl_->channel = std::move(channel);
  impl_->namespace_metadata = {"containerd-namespace", std::move(containerd_namespace)};
  impl_->options = options;
}

GrpcContentService::~GrpcContentService() = default;

absl::StatusOr<std::vector<ContentStatus>> GrpcContentService::ListStatuses(
    const std::vector<std::string>& filters) {
  content::ListStatusesRequest req;
  for (const std::string& f : filters) {
    req.add_filters(f);
  }
  auto resp =
      Invoke(impl_->stub.get(), &content::Content::Stub::ListStatuses, "ListStatuses", req,
             impl_->options.clock, impl_->options.default_timeout, &impl_->namespace_metadata);
  if (!resp.ok()) {
    return resp.status();
  }
  std::vector<ContentStatus> out;
  out.reserve(resp->statuses_size());
  for (const content::Status& s : resp->statuses()) {
    out.push_back(ContentStatus{s.ref(), s.offset(), s.total()});
  }
  return out;
}

// ---- ConnectCri ----

absl::StatusOr<CriClients> ConnectCri(absl::string_view endpoint, const GrpcCriOptions& options) {
  absl::StatusOr<std::string> path = SocketPathFromEndpoint(endpoint);
  if (!path.ok()) {
    return path.status();
  }
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = DialCri(endpoint, options);
  if (!channel.ok()) {
    return channel.status();
  }
  CriClients clients;
  clients.socket_path = *path;
  clients.channel = *channel;
  clients.images = std::make_unique<GrpcImageService>(*channel, options);
  clients.runtime = std::make_unique<GrpcRuntimeService>(*channel, options);
  clients.content =
      std::make_unique<GrpcContentService>(*channel, options.containerd_namespace, options);
  return clients;
}

}  // namespace kruise::cri
