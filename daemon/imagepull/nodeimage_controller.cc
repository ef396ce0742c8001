#include "daemon/imagepull/nodeimage_controller.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kube/errors.h"

namespace kruise::daemon {
namespace {

using Json = nlohmann::json;

kube::InformerOptions InformerFor(const NodeImageControllerOptions& o) {
  kube::InformerOptions io;
  io.resource = o.resource;
  io.field_selector = absl::StrCat("metadata.name=", o.node_name);
  return io;
}

// A merge patch turning `old_status` into `status`: images no longer reported are removed with
// null; everything else we write replaces what was there; fields we never write stay.
Json StatusPatch(const Json& old_status, const Json& status) {
  Json patch_status = status;
  if (!patch_status.contains("imageStatuses")) patch_status["imageStatuses"] = Json::object();
  if (old_status.is_object()) {
    auto old_images = old_status.find("imageStatuses");
    if (old_images != old_status.end() && old_images->is_object()) {
      for (const auto& [name, v] : old_images->items()) {
        if (!patch_status["imageStatuses"].contains(name)) {
          patch_status["imageStatuses"][name] = nullptr;
        }
      }
    }
  }
  if (patch_status["imageStatuses"].empty()) patch_status.erase("imageStatuses");
  return {{"status", patch_status}};
}

}  // namespace

NodeImageController::NodeImageController(NodeImageControllerOptions options,
                                         kube::KubeClient* client, Clock* clock,
                                         kube::EventRecorder* recorder, PullerFactory make_puller)
    : options_(std::move(options)),
      client_(client),
      clock_(clock),
      recorder_(recorder),
      informer_(client, clock, InformerFor(options_)),
      bucket_(options_.status_qps, options_.status_burst, clock) {
  puller_ = make_puller([this] {
    absl::MutexLock lock(&mu_);
    dirty_ = true;
  });
  kube::ResourceEventHandler handler;
  handler.on_add = [this](const Json& obj) { OnNodeImage(obj); };
  handler.on_update = [this](const Json&, const Json& obj) { OnNodeImage(obj); };
  handler.on_delete = [this](const Json&, bool) {
    // The manager deletes a NodeImage with its Node: stop pulling for it.
    absl::MutexLock lock(&mu_);
    spec_.clear();
    last_spec_.reset();
    last_written_.reset();
    dirty_ = false;
    mu_.Unlock();
    puller_->Sync({}, {});
    mu_.Lock();
  };
  informer_.AddEventHandler(std::move(handler));
}

NodeImageController::~NodeImageController() { Stop(); }

void NodeImageController::Start() {
  informer_.Start();
  writer_ = std::thread([this] { WriterLoop(); });
}

void NodeImageController::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  informer_.Stop();
  if (writer_.joinable()) writer_.join();
  puller_->Stop();
}

NodeImageControllerStats NodeImageController::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void NodeImageController::OnNodeImage(const Json& obj) {
  const Json spec = obj.contains("spec") ? obj["spec"] : Json::object();
  auto parsed = ParseNodeImageSpec(obj);
  if (!parsed.ok()) {
    Logger("nodeimage")->error("NodeImage {}: {}", options_.node_name, parsed.status());
    return;
  }
  bool spec_changed;
  {
    absl::MutexLock lock(&mu_);
    spec_changed = !last_spec_.has_value() || *last_spec_ != spec;
    if (spec_changed) {
      last_spec_ = spec;
      spec_ = *parsed;
      ++stats_.syncs;
    }
    dirty_ = true;  // also re-check the status against what the server now holds
  }
  if (spec_changed) puller_->Sync(*parsed, ParseNodeImageStatus(obj));
}

absl::Status NodeImageController::WriteStatus(const Json& cached, const Json& status) {
  Json old_status = cached.contains("status") ? cached["status"] : Json::object();
  auto r = client_->Patch(options_.resource, "", options_.node_name, kube::PatchType::kMerge,
                          StatusPatch(old_status, status), "status");
  return r.status();
}

void NodeImageController::WriterLoop() {
  auto log = Logger("nodeimage");
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return dirty_ || stopping_; };
      // Re-check periodically too, so a status the server lost (e.g. a rejected write) heals.
      clock_->AwaitWithDeadline(&mu_, absl::Condition(&wake), clock_->Now() + absl::Seconds(30));
      if (stopping_) return;
      dirty_ = false;
    }
    auto cached = informer_.store().Get("", options_.node_name);
    if (cached == nullptr) continue;  // no NodeImage for this node (yet)
    std::vector<ImageSpec> spec;
    {
      absl::MutexLock lock(&mu_);
      spec = spec_;
    }
    Json status = BuildNodeImageStatus(spec, puller_->Statuses());
    Json server_status = cached->contains("status") ? (*cached)["status"] : Json::object();
    // Compare only the fields we write; others (firstSyncStatus, ...) are not ours to reset.
    Json comparable = Json::object();
    for (const char* k :
         {"desired", "succeeded", "failed", "pulling", "waiting", "imageStatuses"}) {
      if (server_status.is_object() && server_status.contains(k)) comparable[k] = server_status[k];
    }
    if (comparable == status) continue;
    {
      // Our last write may not have reached the cache yet: do not send it twice in a row.
      absl::MutexLock lock(&mu_);
      if (last_written_ && *last_written_ == status &&
          clock_->Now() - last_write_time_ < absl::Seconds(5)) {
        continue;
      }
    }
    // Under budget a change goes out at once; past it a progress-only change waits for a token,
    // then writes the newest status (changes made meanwhile are folded into this write). A phase
    // change or completion takes a token if there is one and never waits.
    const bool urgent = StatusChangeIsUrgent(comparable, status);
    bucket_.Wait(urgent ? clock_->Now() : absl::InfiniteFuture());
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      if (dirty_) {
        dirty_ = false;
        status = BuildNodeImageStatus(spec_, puller_->Statuses());
      }
    }
    absl::Status s = WriteStatus(*cached, status);
    absl::MutexLock lock(&mu_);
    if (s.ok()) {
      ++stats_.status_writes;
      if (urgent) ++stats_.urgent_status_writes;
      last_written_ = status;
      last_write_time_ = clock_->Now();
    } else {
      ++stats_.status_write_errors;
      dirty_ = true;  // retry after the next token
      log->warn("writing NodeImage {} status failed: {}", options_.node_name, s);
    }
  }
}

void NodeImageController::RecordOutcome(const std::string& image, const std::string& tag, bool ok,
                                        const std::string& message) {
  if (recorder_ == nullptr) return;
  const kube::EventType type = ok ? kube::EventType::kNormal : kube::EventType::kWarning;
  const std::string reason = ok ? "PullImageSucceed" : "PullImageFailed";
  const std::string text =
      ok ? absl::StrCat("Image ", image, ":", tag, " has been pulled successfully")
         : absl::StrCat("Image ", image, ":", tag, " failed to pull: ", message);
  if (auto cached = informer_.store().Get("", options_.node_name)) {
    recorder_->Event(*cached, type, reason, text);
  }
  Json owners = Json::array();
  {
    absl::MutexLock lock(&mu_);
    for (const ImageSpec& is : spec_) {
      if (is.name != image) continue;
      for (const TagSpec& ts : is.tags) {
        if (ts.tag == tag) owners = ts.owner_references;
      }
    }
  }
  for (const Json& ref : owners) {
    if (!ref.is_object() || !ref.contains("name") || !ref.contains("kind")) continue;
    // An ObjectReference is enough to address the event's involvedObject.
    Json involved = {{"apiVersion", ref.value("apiVersion", "apps.kruise.io/v1alpha1")},
                     {"kind", ref["kind"]},
                     {"metadata",
                      {{"name", ref["name"]},
                       {"namespace", ref.value("namespace", "")},
                       {"uid", ref.value("uid", "")}}}};
    recorder_->Event(involved, type, reason, text);
  }
}

}  // namespace kruise::daemon
