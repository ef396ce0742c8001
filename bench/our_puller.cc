#include "bench/our_puller.h"

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "cri/grpc_cri.h"
#include "proto/cri_api.grpc.pb.h"

namespace kruise::bench {
namespace {

class CriPuller final : public OurPuller {
 public:
  explicit CriPuller(cri::CriClients clients) : clients_(std::move(clients)) {}

  absl::Status Pull(const std::string& ref) override {
    return clients_.images->PullImage(ref, nullptr, nullptr, absl::Minutes(5)).status();
  }

  absl::Status Remove(const std::string& ref) override { return clients_.images->RemoveImage(ref); }

 private:
  cri::CriClients clients_;
};

class BareGrpcPuller final : public OurPuller {
 public:
  explicit BareGrpcPuller(std::shared_ptr<grpc::Channel> channel)
      : stub_(runtime::v1::ImageService::NewStub(channel)) {}

  absl::Status Pull(const std::string& ref) override {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
    runtime::v1::PullImageRequest request;
    request.mutable_image()->set_image(ref);
    runtime::v1::PullImageResponse response;
    grpc::Status status = stub_->PullImage(&context, request, &response);
    return status.ok() ? absl::OkStatus()
                       : absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                                      status.error_message());
  }

  absl::Status Remove(const std::string& ref) override {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(1));
    runtime::v1::RemoveImageRequest request;
    request.mutable_image()->set_image(ref);
    runtime::v1::RemoveImageResponse response;
    grpc::Status status = stub_->RemoveImage(&context, request, &response);
    return status.ok() ? absl::OkStatus()
                       : absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                                      status.error_message());
  }

 private:
  std::unique_ptr<runtime::v1::ImageService::Stub> stub_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<OurPuller>> MakeBareGrpcPuller(const std::string& socket_path) {
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel("unix://" + socket_path, grpc::InsecureChannelCredentials());
  return std::unique_ptr<OurPuller>(new BareGrpcPuller(std::move(channel)));
}

absl::StatusOr<std::unique_ptr<OurPuller>> MakeOurPuller(const std::string& socket_path) {
  absl::StatusOr<cri::CriClients> clients = cri::ConnectCri("unix://" + socket_path);
  if (!clients.ok()) {
    return clients.status();
  }
  // Fail early (UNAVAILABLE) when nothing answers on the socket.
  if (absl::StatusOr<cri::v1::VersionResponse> v = clients->runtime->Version(); !v.ok()) {
    return v.status();
  }
  return std::unique_ptr<OurPuller>(new CriPuller(*std::move(clients)));
}

}  // namespace kruise::bench
