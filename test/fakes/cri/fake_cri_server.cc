#include "test/fakes/cri/fake_cri_server.h"

#include <grpcpp/grpcpp.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/image_ref.h"
#include "proto/containerd_content.grpc.pb.h"
#include "proto/cri_api.grpc.pb.h"

namespace kruise::testing {
namespace {

namespace content = ::containerd::services::content::v1;

std::string Sha256Hex(absl::string_view data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) {
    return grpc::Status::OK;
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

template <typename Map>
bool LabelsMatch(const Map& selector, const Map& labels) {
  for (const auto& [key, value] : selector) {
    auto it = labels.find(key);
    if (it == labels.end() || it->second != value) {
      return false;
    }
  }
  return true;
}

// Normalised form of `ref` when it parses, else `ref` itself.
std::string NormalizeOrSelf(const std::string& ref) {
  absl::StatusOr<ImageReference> parsed = ParseImageReference(ref);
  return parsed.ok() ? parsed->Normalized() : ref;
}

}  // namespace

// ---- gRPC service adapters: each RPC goes through Enter() and then touches state under mu_. ----

class FakeCriServer::RuntimeImpl final : public v1::RuntimeService::Service {
 public:
  explicit RuntimeImpl(FakeCriServer* s) : s_(s) {}

  grpc::Status Version(grpc::ServerContext* ctx, const v1::VersionRequest* req,
                       v1::VersionResponse* resp) override {
    if (absl::Status st = s_->Enter("Version", ctx, *req); !st.ok()) return ToGrpc(st);
    absl::MutexLock lock(&s_->mu_);
    resp->set_version("0.1.0");
    resp->set_runtime_name(s_->runtime_name_);
    resp->set_runtime_version(s_->runtime_version_);
    resp->set_runtime_api_version(s_->options_.runtime_api_version);
    return grpc::Status::OK;
  }

  grpc::Status RunPodSandbox(grpc::ServerContext* ctx, const v1::RunPodSandboxRequest* req,
                             v1::RunPodSandboxResponse* resp) override {
    if (absl::Status st = s_->Enter("RunPodSandbox", ctx, *req); !st.ok()) return ToGrpc(st);
    const v1::PodSandboxConfig& config = req->config();
    if (config.metadata().name().empty()) {
      return ToGrpc(absl::InvalidArgumentError("sandbox config must include metadata.name"));
    }
    absl::MutexLock lock(&s_->mu_);
    for (const auto& [id, sb] : s_->sandboxes_) {
      const v1::PodSandboxMetadata& m = sb.status.metadata();
      if (m.name() == config.metadata().name() &&
          m.namespace_() == config.metadata().namespace_() && m.uid() == config.metadata().uid() &&
          m.attempt() == config.metadata().attempt()) {
        return ToGrpc(absl::AlreadyExistsError(
            absl::StrCat("sandbox name \"", m.name(), "\" is reserved for \"", id, "\"")));
      }
    }
    std::string id = absl::StrCat("sandbox-", ++s_->next_id_);
    Sandbox sb;
    sb.config = config;
    sb.status.set_id(id);
    *sb.status.mutable_metadata() = config.metadata();
    sb.status.set_state(v1::SANDBOX_READY);
    sb.status.set_created_at(s_->NowNanos());
    sb.status.mutable_network()->set_ip("10.88.0." + std::to_string(s_->next_id_ % 250 + 2));
    *sb.status.mutable_labels() = config.labels();
    *sb.status.mutable_annotations() = config.annotations();
    sb.status.set_runtime_handler(req->runtime_handler());
    if (config.has_linux() && config.linux().has_security_context()) {
      *sb.status.mutable_linux()->mutable_namespaces()->mutable_options() =
          config.linux().security_context().namespace_options();
    }
    s_->sandboxes_[id] = std::move(sb);
    resp->set_pod_sandbox_id(id);
    return grpc::Status::OK;
  }

  grpc::Status StopPodSandbox(grpc::ServerContext* ctx, const v1::StopPodSandboxRequest* req,
                              v1::StopPodSandboxResponse*) override {
    if (absl::Status st = s_->Enter("StopPodSandbox", ctx, *req); !st.ok()) return ToGrpc(st);
    absl::MutexLock lock(&s_->mu_);
    auto it = s_->sandboxes_.find(req->pod_sandbox_id());
    if (it == s_->sandboxes_.end()) {
      return grpc::Status::OK;  // idempotent
    }
    it->second.status.set_state(v1::SANDBOX_NOTREADY);
    for (auto& [cid, c] : s_->containers_) {
      if (c.sandbox_id == it->first && c.status.state() == v1::CONTAINER_RUNNING) {
        StopLocked(&c, 137, "Error");
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status RemovePodSandbox(grpc::ServerContext* ctx, const v1::RemovePodSandboxRequest* req,
                                v1::RemovePodSandboxResponse*) override {
    if (absl::Status st = s_->Enter("RemovePodSandbox", ctx, *req); !st.ok()) return ToGrpc(st);
    absl::MutexLock lock(&s_->mu_);
    s_->sandboxes_.erase(req->pod_sandbox_id());
    std::erase_if(s_->containers_,
                  [&](const auto& kv) { return kv.second.sandbox_id == req->pod_sandbox_id(); });
    return grpc::Status::OK;
  }

  grpc::Status PodSandboxStatus(grpc::ServerContext* ctx, const v1::PodSandboxStatusRequest* req,
                                v1::PodSandboxStatusResponse* resp) override {
    if (absl::Status st = s_->Enter("PodSandboxStatus", ctx, *req); !st.ok()) return ToGrpc(st);
    absl::MutexLock lock(&s_->mu_);
    auto it = s_->sandboxes_.find(req->pod_sandbox_id());
    if (it == s_->sandboxes_.end()) {
      return ToGrpc(
          absl::NotFoundError(absl::StrCat("sandbox \"", req->pod_sandbox_id(), "\" not found")));
    }
    *resp->mutable_status() = it->second.status;
    resp->set_timestamp(s_->NowNanos());
    if (req->verbose()) {
      (*resp->mutable_info())["info"] = "{\"fake\":true}";
    }
    return grpc::Status::OK;
  }

  grpc::Status ListPodSandbox(grpc::ServerContext* ctx, const v1::ListPodSandboxRequest* req,
                              v1::ListPodSandboxResponse* resp) override {
    if (absl::Status st = s_->Enter("ListPodSandbox", ctx, *req); !st.ok()) return ToGrpc(st);
    absl::MutexLock lock(&s_->mu_);
    const v1::PodSandboxFilter& f = req->filter();
    for (const auto& [id, sb] : s_->sandboxes_) {
      if (!f.id().empty() && !absl::StartsWith(id, f.id())) continue;
      if (f.has_state() && f.state().state() != sb.status.state()) continue;
      if (!LabelsMatch(f.label_selector(), sb.status.labels())) continue;
      v1::PodSandbox* item = resp->add_items();
      item->set_id(id);
      *item->mutable_metadata() = sb.status.metadata();
      item->set_state(sb.status.state());
      item->set_created_at(sb.status.created_at());
      *item->mutable_labels() = sb.status.labels();
      *item->mutable_annotations() = sb.status.annotations();
      item->set_runtime_handler(sb.status.runtime_handler());
    }
    return grpc::Status::OK;
  }

  grpc::Status CreateContainer(grpc::ServerContext* ctx, const v1::CreateContainerRequest* req,
                               v1::CreateContainerResponse* resp) override {
    if (absl::Status st = s_->Enter("CreateContainer", ctx, *req); !st.ok()) return ToGrpc(st);
    const v1::ContainerConfig& config = req->config();
    absl::MutexLock lock(&s_->mu_);
    auto sb = s_->sandboxes_.find(req->pod_sandbox_id());
    if (sb == s_->sandboxes_.end()) {
      return ToGrpc(
          absl::NotFoundError(absl::StrCat("sandbox \"", req->pod_sandbox_id(), "\" not found")));
    }
    if (sb->second.status.state() != v1::SANDBOX_READY) {
      return ToGrpc(absl::FailedPreconditionError(
          absl::StrCat("sandbox \"", req->pod_sandbox_id(), "\" is not ready")));
    }
    if (config.metadata().name().empty()) {
      return ToGrpc(absl::InvalidArgumentError("container config must include metadata.name"));
    }
    for (const auto& [id, c] : s_->containers_) {
      if (c.sandbox_id == req->pod_sandbox_id() &&
          c.status.metadata().name() == config.metadata().name() &&
          c.status.metadata().attempt() == config.metadata().attempt()) {
        return ToGrpc(absl::AlreadyExistsError(
            absl::StrCat("container name \"", config.metadata().name(), "\" attempt ",
                         config.metadata().attempt(), " is reserved for \"", id, "\"")));
      }
    }
    StoredImage* image = s_->FindImageLocked(config.image().image());
    if (image == nullptr) {
      return ToGrpc(absl::NotFoundError(
          absl::StrCat("failed to get image \"", config.image().image(), "\": not found")));
    }
    std::string id = absl::StrCat("container-", ++s_->next_id_);
    StoredContainer c;
    c.sandbox_id = req->pod_sandbox_id();
    c.status.set_id(id);
    *c.status.mutable_metadata() = config.metadata();
    c.status.set_state(v1::CONTAINER_CREATED);
    c.status.set_created_at(s_->NowNanos());
    *c.status.mutable_image() = config.image();
    c.status.set_image_ref(image->image.id());
    c.status.set_image_id(image->image.id());
    *c.status.mutable_labels() = config.labels();
    *c.status.mutable_annotations() = config.annotations();
    *c.status.mutable_mounts() = config.mounts();
    if (!config.log_path().empty()) {
      c.status.set_log_path(
          absl::StrCat(sb->second.config.log_directory(), "/", config.log_path()));
    }
    s_->containers_[id] = std::move(c);
    resp->set_container_id(id);
    return grpc::Status::OK;
  }

  grpc::Status StartContainer(grpc::ServerContext* ctx, const v1::StartContainerRequest* req,
                              v1::StartContainerResponse*) override {
    if (absl::Status st = s_->Enter("StartContainer", ctx, *req); !st.ok()) return ToGrpc(st);
    absl::MutexLock lock(&s_->mu_);
    auto it = s_->containers_.find(req->container_id());
    if (it == s_->containers_.end()) {
      return ToGrpc(NotFound(req->container_id()));
    }
    if (it->second.status.state() != v1::CONTAINER_CREATED) {
      return ToGrpc(absl::FailedPreconditionError(absl::StrCat(
          "container \"", req->container_id(), "\" is in ",
          v1::ContainerState_Name(it->second.status.state()), " state, not CONTAINER_CREATED")));
    }
    it->second.status.set_state(v1::CONTAINER_RUNNING);
    it->second.status.set_started_at(s_->NowNanos());
    return grpc::Status::OK;
  }

  grpc::Status StopContainer(grpc::ServerContext* ctx, const v1::StopContainerRequest* req,
                             v1::StopContainerResponse*) override {
    if (absl::Status st = s_->Enter("StopContainer", ctx, *req); !st.ok()) return ToGrpc(st);
    absl::MutexLock lock(&s_->mu_);
    auto it = s_->containers_.find(req->container_id());
    if (it == s_->containers_.end()) {
      return ToGrpc(NotFound(req->container_id()));
    }
    if (it->second.status.state() == v1::CONTAINER_RUNNING) {
      // A graceful stop exits 0 in this model; an immediate kill exits 137 (SIGKILL).
      StopLocked(&it->second, req->timeout() > 0 ? 0 : 137,
                 req->timeout() > 0 ? "Completed" : "Error");
    }
    return grpc::Status::OK;
  }

  grpc::Status RemoveContainer(grpc::ServerContext* ctx, const v1::RemoveContainerRequest* req,
                               v1::RemoveContainerResponse*) override {
    if (absl::Status st = s_->Enter("RemoveContainer", ctx, *req); !st.ok()) return ToGrpc(st);
    absl::MutexLock lock(&s_->mu_);
    s_->containers_.erase(req->container_id());
    return grpc::Status::OK;
  }

  grpc::Status ListContainers(grpc::ServerContext* ctx, const v1::ListContainersRequest* req,
                              v1::ListContainersResponse* resp) override {
    if (absl::Status st = s_->Enter("ListContainers", ctx, *req); !st.ok()) return ToGrpc(st);
    absl::MutexLock lock(&s_->mu_);
    for (const auto& [id, c] : s_->containers_) {
      if (Matches(req->filter(), c)) {
        *resp->add_containers() = ToContainer(c);
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status ContainerStatus(grpc::ServerContext* ctx, const v1::ContainerStatusRequest* req,
                               v1::ContainerStatusResponse* resp) override {
    if (absl::Status st = s_->Enter("ContainerStatus", ctx, *req); !st.ok()) return ToGrpc(st);
    absl::MutexLock lock(&s_->mu_);
    auto it = s_->containers_.find(req->container_id());
    if (it == s_->containers_.end()) {
      return ToGrpc(NotFound(req->container_id()));
    }
    *resp->mutable_status() = it->second.status;
    if (req->verbose()) {
      (*resp->mutable_info())["info"] =
          absl::StrCat("{\"sandboxID\":\"", it->second.sandbox_id, "\"}");
    }
    return grpc::Status::OK;
  }

  grpc::Status ExecSync(grpc::ServerContext* ctx, const v1::ExecSyncRequest* req,
                        v1::ExecSyncResponse* resp) override {
    if (absl::Status st = s_->Enter("ExecSync", ctx, *req); !st.ok()) return ToGrpc(st);
    ExecHandler handler;
    {
      absl::MutexLock lock(&s_->mu_);
      auto it = s_->containers_.find(req->container_id());
      if (it == s_->containers_.end()) {
        return ToGrpc(NotFound(req->container_id()));
      }
      if (it->second.status.state() != v1::CONTAINER_RUNNING) {
        return ToGrpc(absl::FailedPreconditionError(
            absl::StrCat("container \"", req->container_id(), "\" is not running")));
      }
      handler = s_->exec_handler_;
    }
    if (handler) {
      *resp = handler(*req);
    } else {
      resp->set_stdout(absl::StrCat(absl::StrJoin(req->cmd(), " "), "\n"));
      resp->set_exit_code(0);
    }
    return grpc::Status::OK;
  }

 private:
  static absl::Status NotFound(const std::string& id) {
    return absl::NotFoundError(absl::StrCat("container \"", id, "\" not found"));
  }

  void StopLocked(StoredContainer* c, int32_t exit_code, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu_) {
    c->status.set_state(v1::CONTAINER_EXITED);
    c->status.set_finished_at(s_->NowNanos());
    c->status.set_exit_code(exit_code);
    c->status.set_reason(reason);
  }

  static bool Matches(const v1::ContainerFilter& f, const StoredContainer& c) {
    if (!f.id().empty() && !absl::StartsWith(c.status.id(), f.id())) return false;
    if (f.has_state() && f.state().state() != c.status.state()) return false;
    if (!f.pod_sandbox_id().empty() && f.pod_sandbox_id() != c.sandbox_id) return false;
    return LabelsMatch(f.label_selector(), c.status.labels());
  }

  static v1::Container ToContainer(const StoredContainer& c) {
    v1::Container out;
    out.set_id(c.status.id());
    out.set_pod_sandbox_id(c.sandbox_id);
    *out.mutable_metadata() = c.status.metadata();
    *out.mutable_image() = c.status.image();
    out.set_image_ref(c.status.image_ref());
    out.set_state(c.status.state());
    out.set_created_at(c.status.created_at());
    *out.mutable_labels() = c.status.labels();
    *out.mutable_annotations() = c.status.annotations();
    out.set_image_id(c.status.image_id());
    return out;
  }

  FakeCriServer* s_;
};

class FakeCriServer::ImageImpl final : public v1::ImageService::Service {
 public:
  explicit ImageImpl(FakeCriServer* s) : s_(s) {}

  grpc::Status ListImages(grpc::ServerContext* ctx, const v1::ListImagesRequest* req,
                          v1::ListImagesResponse* resp) override {
    if (absl::Status st = s_->Enter("ListImages", ctx, *req); !st.ok()) return ToGrpc(st);
    absl::MutexLock lock(&s_->mu_);
    const std::string& wanted = req->filter().image().image();
    if (!wanted.empty()) {
      if (StoredImage* img = s_->FindImageLocked(wanted); img != nullptr) {
        *resp->add_images() = img->image;
      }
      return grpc::Status::OK;
    }
    for (const auto& [id, img] : s_->images_by_id_) {
      *resp->add_images() = img.image;
    }
    return grpc::Status::OK;
  }

  grpc::Status ImageStatus(grpc::ServerContext* ctx, const v1::ImageStatusRequest* req,
                           v1::ImageStatusResponse* resp) override {
    if (absl::Status st = s_->Enter("ImageStatus", ctx, *req); !st.ok()) return ToGrpc(st);
    absl::MutexLock lock(&s_->mu_);
    if (StoredImage* img = s_->FindImageLocked(req->image().image()); img != nullptr) {
      *resp->mutable_image() = img->image;
      if (req->verbose()) {
        (*resp->mutable_info())["info"] = absl::StrCat("{\"ref\":\"", img->normalized, "\"}");
      }
    }
    return grpc::Status::OK;  // absent: empty response, as the CRI specifies
  }

  grpc::Status PullImage(grpc::ServerContext* ctx, const v1::PullImageRequest* req,
                         v1::PullImageResponse* resp) override {
    if (absl::Status st = s_->Enter("PullImage", ctx, *req); !st.ok()) return ToGrpc(st);
    std::string ref;
    if (absl::Status st = s_->PullImageImpl(ctx, *req, &ref); !st.ok()) return ToGrpc(st);
    resp->set_image_ref(ref);
    return grpc::Status::OK;
  }

  grpc::Status RemoveImage(grpc::ServerContext* ctx, const v1::RemoveImageRequest* req,
                           v1::RemoveImageResponse*) override {
    if (absl::Status st = s_->Enter("RemoveImage", ctx, *req); !st.ok()) return ToGrpc(st);
    absl::MutexLock lock(&s_->mu_);
    if (StoredImage* img = s_->FindImageLocked(req->image().image()); img != nullptr) {
      s_->images_by_id_.erase(img->image.id());
    }
    return grpc::Status::OK;  // idempotent
  }

  grpc::Status ImageFsInfo(grpc::ServerContext* ctx, const v1::ImageFsInfoRequest* req,
                           v1::ImageFsInfoResponse* resp) override {
    if (absl::Status st = s_->Enter("ImageFsInfo", ctx, *req); !st.ok()) return ToGrpc(st);
    absl::MutexLock lock(&s_->mu_);
    uint64_t used = 0;
    for (const auto& [id, img] : s_->images_by_id_) {
      used += img.image.size();
    }
    v1::FilesystemUsage* fs = resp->add_image_filesystems();
    fs->set_timestamp(s_->NowNanos());
    fs->mutable_fs_id()->set_mountpoint("/var/lib/fake-cri/images");
    fs->mutable_used_bytes()->set_value(used);
    fs->mutable_inodes_used()->set_value(s_->images_by_id_.size() * 10);
    return grpc::Status::OK;
  }

 private:
  FakeCriServer* s_;
};

class FakeCriServer::ContentImpl final : public content::Content::Service {
 public:
  explicit ContentImpl(FakeCriServer* s) : s_(s) {}

  grpc::Status ListStatuses(grpc::ServerContext* ctx, const content::ListStatusesRequest* req,
                            content::ListStatusesResponse* resp) override {
    if (absl::Status st = s_->Enter("ListStatuses", ctx, *req); !st.ok()) return ToGrpc(st);
    std::string ns;
    auto md = ctx->client_metadata().find("containerd-namespace");
    if (md != ctx->client_metadata().end()) {
      ns.assign(md->second.data(), md->second.size());
    }
    if (ns.empty()) {
      return ToGrpc(absl::FailedPreconditionError("namespace is required"));
    }
    // Supported filters: ref==X (exact) and ref~=X (substring); quotes optional.
    std::vector<std::pair<bool, std::string>> ref_filters;  // (exact, value)
    for (const std::string& f : req->filters()) {
      absl::string_view v = f;
      bool exact;
      if (absl::ConsumePrefix(&v, "ref==")) {
        exact = true;
      } else if (absl::ConsumePrefix(&v, "ref~=")) {
        exact = false;
      } else {
        return ToGrpc(absl::InvalidArgumentError(absl::StrCat("unsupported filter \"", f, "\"")));
      }
      absl::ConsumePrefix(&v, "\"");
      absl::ConsumeSuffix(&v, "\"");
      ref_filters.emplace_back(exact, std::string(v));
    }
    if (ns != "k8s.io") {
      return grpc::Status::OK;  // CRI pulls live in k8s.io only
    }
    absl::MutexLock lock(&s_->mu_);
    absl::Time now = s_->options_.clock->Now();
    for (const auto& [n, pull] : s_->pulls_) {
      std::string ref = "layer-" + ImageIdFor(pull.ref);
      bool ok = std::all_of(ref_filters.begin(), ref_filters.end(), [&](const auto& f) {
        return f.first ? ref == f.second : absl::StrContains(ref, f.second);
      });
      if (!ok) continue;
      double fraction = 1.0;
      if (s_->pull_duration_ > absl::ZeroDuration()) {
        fraction = std::clamp(absl::FDivDuration(now - pull.started, s_->pull_duration_), 0.0, 1.0);
      }
      content::Status* st = resp->add_statuses();
      st->set_ref(ref);
      st->set_total(s_->pull_total_bytes_);
      st->set_offset(static_cast<int64_t>(fraction * static_cast<double>(s_->pull_total_bytes_)));
      st->set_expected(ImageIdFor(pull.ref));
      st->mutable_started_at()->set_seconds(absl::ToUnixSeconds(pull.started));
      st->mutable_updated_at()->set_seconds(absl::ToUnixSeconds(now));
    }
    return grpc::Status::OK;
  }

 private:
  FakeCriServer* s_;
};

// ---- FakeCriServer ----

FakeCriServer::FakeCriServer(Options options) : options_(std::move(options)) {
  runtime_name_ = options_.runtime_name;
  runtime_version_ = options_.runtime_version;
}

absl::StatusOr<std::unique_ptr<FakeCriServer>> FakeCriServer::Start(Options options) {
  std::unique_ptr<FakeCriServer> server(new FakeCriServer(std::move(options)));
  if (server->options_.socket_path.empty()) {
    char tmpl[] = "/tmp/fake-cri-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      return absl::InternalError("mkdtemp failed for the fake CRI socket directory");
    }
    server->temp_dir_ = tmpl;
    server->socket_path_ = server->temp_dir_ + "/cri.sock";
  } else {
    server->socket_path_ = server->options_.socket_path;
    ::unlink(server->socket_path_.c_str());
  }
  server->runtime_ = std::make_unique<RuntimeImpl>(server.get());
  server->images_ = std::make_unique<ImageImpl>(server.get());
  server->content_ = std::make_unique<ContentImpl>(server.get());
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort("unix:" + server->socket_path_, grpc::InsecureServerCredentials(),
                           &bound_port);
  builder.RegisterService(server->runtime_.get());
  builder.RegisterService(server->images_.get());
  builder.RegisterService(server->content_.get());
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("fake CRI server could not listen on unix:", server->socket_path_));
  }
  return server;
}

FakeCriServer::~FakeCriServer() {
  Shutdown();
  if (!temp_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(temp_dir_, ec);
  }
}

void FakeCriServer::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) {
      return;
    }
    shutting_down_ = true;
  }
  if (server_ != nullptr) {
    // Parked calls see shutting_down_ and return; give stragglers a bounded grace.
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    server_->Wait();
  }
}

int64_t FakeCriServer::NowNanos() const { return absl::ToUnixNanos(options_.clock->Now()); }

bool FakeCriServer::WaitLocked(grpc::ServerContext* ctx, absl::Time until,
                               const std::function<bool()>& done) {
  std::function<bool()> wake = [&]() { return shutting_down_ || done(); };
  while (true) {
    if (shutting_down_ || (ctx != nullptr && ctx->IsCancelled())) {
      return false;
    }
    if (done()) {
      return true;
    }
    absl::Time now = options_.clock->Now();
    if (now >= until) {
      return true;
    }
    // Wake at least every 20ms to notice a cancelled call (its deadline passed).
    absl::Time slice = std::min(until, now + absl::Milliseconds(20));
    options_.clock->AwaitWithDeadline(
        &mu_, absl::Condition(&wake, &std::function<bool()>::operator()), slice);
  }
}

// A call ended by Shutdown() fails as against a runtime that is going away (UNAVAILABLE, as a
// client of a killed or restarting containerd sees it); one whose client gave up is CANCELLED.
absl::Status FakeCriServer::Interrupted(const std::string& what) const {
  if (shutting_down_) return absl::UnavailableError(absl::StrCat(what, ": runtime shutting down"));
  return absl::CancelledError(what);
}

absl::Status FakeCriServer::Enter(const std::string& method, grpc::ServerContext* ctx,
                                  const google::protobuf::Message& request) {
  RecordedCall call;
  call.method = method;
  std::shared_ptr<google::protobuf::Message> copy(request.New());
  copy->CopyFrom(request);
  call.request = std::move(copy);
  if (ctx != nullptr) {
    for (const auto& [k, v] : ctx->client_metadata()) {
      call.metadata.emplace(std::string(k.data(), k.size()), std::string(v.data(), v.size()));
    }
  }
  absl::MutexLock lock(&mu_);
  calls_.push_back(std::move(call));
  if (shutting_down_) return Interrupted(method);
  MethodControl& control = controls_[method];
  if (control.latency > absl::ZeroDuration()) {
    absl::Time until = options_.clock->Now() + control.latency;
    if (!WaitLocked(ctx, until, [] { return false; })) {
      return Interrupted(absl::StrCat(method, " cancelled during injected latency"));
    }
  }
  if (controls_[method].hang) {
    controls_[method].hung++;
    bool released = WaitLocked(ctx, absl::InfiniteFuture(),
                               [this, &method] { return !controls_[method].hang; });
    controls_[method].hung--;
    if (!released) {
      return Interrupted(absl::StrCat(method, " cancelled while hung"));
    }
  }
  std::deque<absl::Status>& errors = controls_[method].errors;
  if (!errors.empty()) {
    absl::Status st = std::move(errors.front());
    errors.pop_front();
    return st;
  }
  return absl::OkStatus();
}

void FakeCriServer::InjectError(const std::string& method, absl::Status status) {
  absl::MutexLock lock(&mu_);
  controls_[method].errors.push_back(std::move(status));
}

void FakeCriServer::SetLatency(const std::string& method, absl::Duration latency) {
  absl::MutexLock lock(&mu_);
  controls_[method].latency = latency;
}

void FakeCriServer::SetHang(const std::string& method, bool hang) {
  absl::MutexLock lock(&mu_);
  controls_[method].hang = hang;
}

void FakeCriServer::ReleaseHangs() {
  absl::MutexLock lock(&mu_);
  for (auto& [method, control] : controls_) {
    control.hang = false;
  }
}

bool FakeCriServer::WaitForHungCalls(const std::string& method, int n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto cond = [this, &method, n]() { return controls_[method].hung >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&cond, &decltype(cond)::operator()), timeout);
}

void FakeCriServer::SetVersion(const std::string& runtime_name,
                               const std::string& runtime_version) {
  absl::MutexLock lock(&mu_);
  runtime_name_ = runtime_name;
  runtime_version_ = runtime_version;
}

void FakeCriServer::SetPullHook(PullHook hook) {
  absl::MutexLock lock(&mu_);
  pull_hook_ = std::move(hook);
}

void FakeCriServer::SetPullDuration(absl::Duration duration, int64_t total_bytes) {
  absl::MutexLock lock(&mu_);
  pull_duration_ = duration;
  pull_total_bytes_ = total_bytes;
}

bool FakeCriServer::WaitForInFlightPulls(int n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto cond = [this, n]() { return static_cast<int>(pulls_.size()) >= n; };
  return mu_.AwaitWithTimeout(absl::Condition(&cond, &decltype(cond)::operator()), timeout);
}

void FakeCriServer::SetExecHandler(ExecHandler handler) {
  absl::MutexLock lock(&mu_);
  exec_handler_ = std::move(handler);
}

std::string FakeCriServer::ImageIdFor(const std::string& ref) {
  return "sha256:" + Sha256Hex(NormalizeOrSelf(ref));
}

FakeCriServer::StoredImage* FakeCriServer::FindImageLocked(const std::string& name_or_id) {
  if (name_or_id.empty()) {
    return nullptr;
  }
  if (auto it = images_by_id_.find(name_or_id); it != images_by_id_.end()) {
    return &it->second;
  }
  if (auto it = images_by_id_.find("sha256:" + name_or_id); it != images_by_id_.end()) {
    return &it->second;
  }
  absl::StatusOr<ImageReference> ref = ParseImageReference(name_or_id);
  if (!ref.ok()) {
    return nullptr;
  }
  for (auto& [id, img] : images_by_id_) {
    if (!ref->digest.empty()) {
      std::string wanted = absl::StrCat(ref->RepositoryWithRegistry(), "@", ref->digest);
      for (const std::string& d : img.image.repo_digests()) {
        if (d == wanted) return &img;
      }
    } else {
      for (const std::string& t : img.image.repo_tags()) {
        if (t == ref->Normalized()) return &img;
      }
    }
  }
  return nullptr;
}

std::string FakeCriServer::AddImageLocked(const std::string& normalized, uint64_t size,
                                          const std::string& id, const std::string& digest) {
  StoredImage& img = images_by_id_[id];
  img.normalized = normalized;
  img.image.set_id(id);
  img.image.set_size(size);
  img.image.mutable_spec()->set_image(id);
  absl::StatusOr<ImageReference> ref = ParseImageReference(normalized);
  if (ref.ok()) {
    if (!ref->tag.empty()) {
      ImageReference tagged = *ref;
      tagged.digest.clear();
      std::string tag = tagged.Normalized();
      auto& tags = *img.image.mutable_repo_tags();
      if (std::find(tags.begin(), tags.end(), tag) == tags.end()) {
        img.image.add_repo_tags(tag);
      }
    }
    std::string d = absl::StrCat(ref->RepositoryWithRegistry(), "@", digest);
    auto& digests = *img.image.mutable_repo_digests();
    if (std::find(digests.begin(), digests.end(), d) == digests.end()) {
      img.image.add_repo_digests(d);
    }
  }
  return id;
}

absl::StatusOr<std::string> FakeCriServer::AddImage(const std::string& ref, uint64_t size_bytes) {
  absl::StatusOr<ImageReference> parsed = ParseImageReference(ref);
  if (!parsed.ok()) {
    return parsed.status();
  }
  std::string id = ImageIdFor(ref);
  std::string digest = parsed->digest.empty() ? "sha256:" + Sha256Hex(id) : parsed->digest;
  absl::MutexLock lock(&mu_);
  return AddImageLocked(parsed->Normalized(), size_bytes, id, digest);
}

absl::Status FakeCriServer::PullImageImpl(grpc::ServerContext* ctx, const v1::PullImageRequest& req,
                                          std::string* image_ref) {
  PullHook hook;
  {
    absl::MutexLock lock(&mu_);
    hook = pull_hook_;
  }
  if (hook) {
    if (absl::Status st = hook(req); !st.ok()) {
      return st;
    }
  }
  const std::string& name = req.image().image();
  absl::StatusOr<ImageReference> parsed = ParseImageReference(name);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("failed to pull image \"", name, "\": ", parsed.status().message()));
  }
  std::string id = ImageIdFor(name);
  std::string digest = parsed->digest.empty() ? "sha256:" + Sha256Hex(id) : parsed->digest;
  absl::MutexLock lock(&mu_);
  if (pull_duration_ > absl::ZeroDuration()) {
    int n = next_pull_++;
    absl::Time start = options_.clock->Now();
    pulls_[n] = InFlightPull{name, start};
    bool finished = WaitLocked(ctx, start + pull_duration_, [] { return false; });
    pulls_.erase(n);
    if (!finished) {
      return Interrupted(absl::StrCat("pull of \"", name, "\" cancelled"));
    }
  }
  uint64_t size = pull_total_bytes_ > 0 ? static_cast<uint64_t>(pull_total_bytes_) : (1u << 20);
  *image_ref = AddImageLocked(parsed->Normalized(), size, id, digest);
  return absl::OkStatus();
}

std::vector<v1::Image> FakeCriServer::Images() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Image> out;
  for (const auto& [id, img] : images_by_id_) {
    out.push_back(img.image);
  }
  return out;
}

bool FakeCriServer::HasImage(const std::string& name_or_id) const {
  absl::MutexLock lock(&mu_);
  return const_cast<FakeCriServer*>(this)->FindImageLocked(name_or_id) != nullptr;
}

std::vector<v1::PodSandbox> FakeCriServer::Sandboxes() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::PodSandbox> out;
  for (const auto& [id, sb] : sandboxes_) {
    v1::PodSandbox item;
    item.set_id(id);
    *item.mutable_metadata() = sb.status.metadata();
    item.set_state(sb.status.state());
    item.set_created_at(sb.status.created_at());
    *item.mutable_labels() = sb.status.labels();
    *item.mutable_annotations() = sb.status.annotations();
    out.push_back(std::move(item));
  }
  return out;
}

std::vector<v1::Container> FakeCriServer::Containers() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Container> out;
  for (const auto& [id, c] : containers_) {
    v1::Container item;
    item.set_id(id);
    item.set_pod_sandbox_id(c.sandbox_id);
    *item.mutable_metadata() = c.status.metadata();
    item.set_state(c.status.state());
    *item.mutable_labels() = c.status.labels();
    item.set_image_id(c.status.image_id());
    out.push_back(std::move(item));
  }
  return out;
}

absl::Status FakeCriServer::ExitContainer(const std::string& container_id, int32_t exit_code,
                                          const std::string& reason) {
  absl::MutexLock lock(&mu_);
  auto it = containers_.find(container_id);
  if (it == containers_.end()) {
    return absl::NotFoundError(absl::StrCat("container \"", container_id, "\" not found"));
  }
  it->second.status.set_state(v1::CONTAINER_EXITED);
  it->second.status.set_finished_at(NowNanos());
  it->second.status.set_exit_code(exit_code);
  it->second.status.set_reason(reason);
  return absl::OkStatus();
}

std::vector<FakeCriServer::RecordedCall> FakeCriServer::Calls() const {
  absl::MutexLock lock(&mu_);
  return calls_;
}

std::vector<FakeCriServer::RecordedCall> FakeCriServer::CallsTo(const std::string& method) const {
  absl::MutexLock lock(&mu_);
  std::vector<RecordedCall> out;
  for (const RecordedCall& c : calls_) {
    if (c.method == method) out.push_back(c);
  }
  return out;
}

int FakeCriServer::CallCount(const std::string& method) const {
  return static_cast<int>(CallsTo(method).size());
}

void FakeCriServer::ClearCalls() {
  absl::MutexLock lock(&mu_);
  calls_.clear();
}

}  // namespace kruise::testing
