#include "manager/imagepull/nodeimage_controller.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kube/errors.h"
#include "kube/object.h"
#include "manager/imagepull/imagepull_util.h"

namespace kruise::manager {
namespace {

using kube::Field;
using kube::IntField;
using kube::Json;
using kube::kConflictRetries;



std::optional<absl::Time> TimeField(const Json& obj, const char* key) {
  const Json* v = Field(obj, key);
  if (v == nullptr || !v->is_string()) return std::nullopt;
  auto t = kube::ParseRfc3339(v->get<std::string>());
  if (!t.ok()) return std::nullopt;
  return *t;
}


void MinRequeue(absl::Duration* requeue, absl::Duration d) {
  d = std::max(d, absl::Seconds(1));
  if (*requeue == absl::ZeroDuration() || d < *requeue) *requeue = d;
}

// The status entry of `tag` under status.imageStatuses.<image>.tags, or nullptr.
const Json* FindTagStatus(const Json& ni, const std::string& image, const std::string& tag) {
  const Json* tags = kube::FindPath(ni, {"status", "imageStatuses", image, "tags"});
  if (tags == nullptr || !tags->is_array()) return nullptr;
  for (const Json& t : *tags) {
    if (t.is_object() && t.value("tag", "") == tag) return &t;
  }
  return nullptr;
}

bool TagCompleted(const Json& st) {
  const std::string phase = st.value("phase", "");
  return Field(st, "completionTime") != nullptr || phase == "Succeeded" || phase == "Failed";
}

Json ObjectFromRef(const Json& ref) {
  Json meta = {{"name", ref.value("name", "")}};
  if (!ref.value("namespace", "").empty()) meta["namespace"] = ref.value("namespace", "");
  if (!ref.value("uid", "").empty()) meta["uid"] = ref.value("uid", "");
  return {{"apiVersion", ref.value("apiVersion", "")},
          {"kind", ref.value("kind", "")},
          {"metadata", meta}};
}

}  // namespace

kube::IndexFunc TagOwnerUidIndexFunc() {
  return [](const Json& ni) {
    std::vector<std::string> out;
    const Json* images = kube::FindPath(ni, {"spec", "images"});
    if (images == nullptr || !images->is_object()) return out;
    for (const auto& [name, image] : images->items()) {
      const Json* tags = Field(image, "tags");
      if (tags == nullptr || !tags->is_array()) continue;
      for (const Json& t : *tags) {
        const Json* refs = Field(t, "ownerReferences");
        if (refs == nullptr || !refs->is_array()) continue;
        for (const Json& r : *refs) {
          std::string uid = r.is_object() ? r.value("uid", "") : "";
          if (!uid.empty()) out.push_back(std::move(uid));
        }
      }
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  };
}

std::optional<absl::Time> NodeReadySince(const Json& node) {
  const Json* conds = kube::FindPath(node, {"status", "conditions"});
  if (conds == nullptr || !conds->is_array()) return std::nullopt;
  for (const Json& c : *conds) {
    if (!c.is_object() || c.value("type", "") != "Ready") continue;
    if (c.value("status", "") != "True") return std::nullopt;
    // A Ready condition without a transition time counts as Ready since forever.
    return TimeField(c, "lastTransitionTime").value_or(absl::InfinitePast());
  }
  return std::nullopt;
}

NodeImageReconciler::NodeImageReconciler(NodeImageControllerOptions opts, kube::KubeClient* client,
                                         Clock* clock, kube::EventRecorder* recorder,
                                         kube::Informer* nodes, kube::Informer* node_images,
                                         kube::Informer* jobs)
    : opts_(std::move(opts)),
      client_(client),
      clock_(clock),
      recorder_(recorder),
      nodes_(nodes),
      node_images_(node_images),
      jobs_(jobs) {}

absl::StatusOr<kube::Result> NodeImageReconciler::Reconcile(const kube::Request& req) {
  auto node = nodes_->store().Get(req.name);
  auto ni = node_images_->store().Get(req.name);
  const bool node_gone = node == nullptr || kube::IsBeingDeleted(*node);
  if (node_gone) {
    if (ni == nullptr || kube::IsBeingDeleted(*ni)) return kube::Result{};
    if (!kube::Label(*ni, kFakeNodeImageLabel).has_value()) {
      kube::DeleteOptions del;
      del.precondition_uid = kube::Uid(*ni);
      absl::Status s = client_->Delete(opts_.node_images, "", req.name, del);
      if (!s.ok() && !kube::IsNotFound(s)) return s;
      Logger("nodeimage")->info("deleted NodeImage {}: its Node is gone", req.name);
      return kube::Result{};
    }
  }
  if (ni == nullptr) return CreateIfReady(*node);
  if (kube::IsBeingDeleted(*ni)) return kube::Result{};

  absl::Duration requeue = absl::ZeroDuration();
  bool patched = false;
  absl::Status s = SyncSpec(*ni, node_gone ? nullptr : node.get(), &requeue, &patched);
  if (!s.ok()) return s;
  // A spec write comes back as an event; the status pass runs on that fresher object.
  if (patched) return kube::Result{};
  s = SyncStatus(*ni, &requeue);
  if (!s.ok()) return s;
  return kube::Result{requeue};
}

absl::StatusOr<kube::Result> NodeImageReconciler::CreateIfReady(const Json& node) {
  if (kube::Label(node, kVirtualKubeletLabel) == std::string(kVirtualKubeletValue)) {
    return kube::Result{};
  }
  auto ready_since = NodeReadySince(node);
  if (!ready_since) return kube::Result{};  // a Node update will bring us back
  const absl::Time now = clock_->Now();
  if (*ready_since != absl::InfinitePast()) {
    absl::Duration left = opts_.creation_delay - (now - *ready_since);
    if (left > absl::ZeroDuration()) return kube::Result{left};
  }
  Json labels = Json::object();
  for (const auto& [k, v] : kube::Labels(node)) labels[k] = v;
  Json obj = {{"apiVersion", opts_.node_images.ApiVersion()},
              {"kind", "NodeImage"},
              {"metadata", {{"name", kube::Name(node)}, {"labels", labels}}},
              {"spec", Json::object()}};
  auto created = client_->Create(opts_.node_images, "", obj);
  if (!created.ok() && !kube::IsAlreadyExists(created.status())) return created.status();
  if (created.ok()) Logger("nodeimage")->info("created NodeImage {}", kube::Name(node));
  return kube::Result{};
}

bool NodeImageReconciler::JobAlive(const Json& ref) {
  const std::string ns = ref.value("namespace", "");
  const std::string name = ref.value("name", "");
  const std::string uid = ref.value("uid", "");
  auto cached = jobs_->store().Get(ns, name);
  if (cached != nullptr) return uid.empty() || kube::Uid(*cached) == uid;
  // Not cached: confirm with the server before dropping anything.
  auto live = client_->Get(opts_.image_pull_jobs, ns, name);
  if (live.ok()) return uid.empty() || kube::Uid(*live) == uid;
  return !kube::IsNotFound(live.status());
}

Json NodeImageReconciler::SpecPatch(const Json& ni, const Json* node, absl::Duration* requeue) {
  Json patch = Json::object();
  if (node != nullptr) {
    auto want = kube::Labels(*node);
    auto have = kube::Labels(ni);
    if (want != have) {
      Json labels = Json::object();
      for (const auto& [k, v] : have) {
        if (!want.count(k)) labels[k] = nullptr;
      }
      for (const auto& [k, v] : want) labels[k] = v;
      patch["metadata"]["labels"] = labels;
    }
  }
  const absl::Time now = clock_->Now();
  const Json* images = kube::FindPath(ni, {"spec", "images"});
  Json images_patch = Json::object();
  if (images != nullptr && images->is_object()) {
    for (const auto& [name, image] : images->items()) {
      const Json* tags = Field(image, "tags");
      if (tags == nullptr || !tags->is_array()) continue;
      Json kept = Json::array();
      bool changed = false;
      for (const Json& tag : *tags) {
        if (!tag.is_object() || !TimeField(tag, "createdAt")) {
          changed = true;  // not written through the manager (no createdAt): drop
          continue;
        }
        Json t = tag;
        if (const Json* refs = Field(tag, "ownerReferences"); refs && refs->is_array()) {
          Json alive = Json::array();
          for (const Json& r : *refs) {
            if (!IsImagePullJobRef(r) || JobAlive(r)) alive.push_back(r);
          }
          if (alive.size() != refs->size()) {
            changed = true;
            if (alive.empty()) continue;
            t["ownerReferences"] = alive;
          }
        }
        const Json* ttl = kube::FindPath(tag, {"pullPolicy", "ttlSecondsAfterFinished"});
        if (ttl != nullptr && ttl->is_number_integer()) {
          const Json* st = FindTagStatus(ni, name, tag.value("tag", ""));
          if (st != nullptr && IntField(*st, "version", 0) == IntField(tag, "version", 0)) {
            if (auto done = TimeField(*st, "completionTime")) {
              absl::Duration left = absl::Seconds(ttl->get<int64_t>()) - (now - *done);
              if (left <= absl::ZeroDuration()) {
                changed = true;
                continue;
              }
              MinRequeue(requeue, left);
            }
          }
        }
        kept.push_back(std::move(t));
      }
      if (!changed) continue;
      if (kept.empty()) {
        images_patch[name] = nullptr;
      } else {
        images_patch[name] = {{"tags", kept}};
      }
    }
  }
  if (!images_patch.empty()) patch["spec"]["images"] = images_patch;
  return patch;
}

absl::Status NodeImageReconciler::SyncSpec(Json ni, const Json* node, absl::Duration* requeue,
                                           bool* patched) {
  *patched = false;
  for (int attempt = 0;; ++attempt) {
    absl::Duration local = absl::ZeroDuration();
    Json patch = SpecPatch(ni, node, &local);
    if (patch.empty()) {
      if (local > absl::ZeroDuration()) MinRequeue(requeue, local);
      return absl::OkStatus();
    }
    patch["metadata"]["resourceVersion"] = kube::ResourceVersion(ni);
    auto r = client_->Patch(opts_.node_images, "", kube::Name(ni), kube::PatchType::kMerge, patch);
    if (r.ok()) {
      *patched = true;
      Logger("nodeimage")
          ->info("NodeImage {}: synced labels/garbage-collected tags", kube::Name(ni));
      return absl::OkStatus();
    }
    if (!kube::IsConflict(r.status()) || attempt >= kConflictRetries) return r.status();
    auto fresh = client_->Get(opts_.node_images, "", kube::Name(ni));
    if (!fresh.ok()) return kube::IsNotFound(fresh.status()) ? absl::OkStatus() : fresh.status();
    ni = std::move(*fresh);
  }
}

Json NodeImageReconciler::StatusPatch(const Json& ni, absl::Duration* requeue,
                                      std::vector<std::pair<Json, std::string>>* failures) {
  const absl::Time now = clock_->Now();
  const Json* images = kube::FindPath(ni, {"spec", "images"});
  if (images == nullptr || !images->is_object()) return Json::object();
  Json changed_images = Json::object();
  for (const auto& [name, image] : images->items()) {
    const Json* tags = Field(image, "tags");
    if (tags == nullptr || !tags->is_array()) continue;
    std::map<std::string, Json> statuses;  // by tag
    if (const Json* st = kube::FindPath(ni, {"status", "imageStatuses", name, "tags"});
        st && st->is_array()) {
      for (const Json& t : *st) {
        if (t.is_object()) statuses[t.value("tag", "")] = t;
      }
    }
    bool changed = false;
    for (const Json& tag : *tags) {
      auto created = TimeField(tag, "createdAt");
      if (!created) continue;
      const std::string tag_name = tag.value("tag", "");
      const int64_t version = IntField(tag, "version", 0);
      auto it = statuses.find(tag_name);
      std::string message;
      if (it == statuses.end() || IntField(it->second, "version", 0) != version) {
        absl::Duration left = opts_.response_timeout - (now - *created);
        if (left > absl::ZeroDuration()) {
          MinRequeue(requeue, left);
          continue;
        }
        message = kNotRespondedMessage;
      } else if (!TagCompleted(it->second)) {
        const Json* deadline = kube::FindPath(tag, {"pullPolicy", "activeDeadlineSeconds"});
        if (deadline == nullptr || !deadline->is_number_integer()) continue;
        absl::Duration left =
            absl::Seconds(deadline->get<int64_t>()) + opts_.response_timeout - (now - *created);
        if (left > absl::ZeroDuration()) {
          MinRequeue(requeue, left);
          continue;
        }
        message = kDeadlineExceededMessage;
      } else {
        continue;
      }
      Json st = it != statuses.end() ? it->second : Json{{"tag", tag_name}};
      st["phase"] = "Failed";
      st["version"] = version;
      st["completionTime"] = kube::FormatRfc3339(now);
      st["message"] = message;
      statuses[tag_name] = st;
      changed = true;
      const std::string full = absl::StrCat(name, ":", tag_name);
      if (const Json* refs = Field(tag, "ownerReferences"); refs && refs->is_array()) {
        for (const Json& r : *refs) {
          failures->emplace_back(ObjectFromRef(r),
                                 absl::StrCat("Failed to pull image ", full, " on node ",
                                              kube::Name(ni), " for ", message));
        }
      }
      failures->emplace_back(Json{{"apiVersion", opts_.node_images.ApiVersion()},
                                  {"kind", "NodeImage"},
                                  {"metadata", {{"name", kube::Name(ni)}, {"uid", kube::Uid(ni)}}}},
                             absl::StrCat("Failed to pull image ", full, " for ", message));
    }
    if (!changed) continue;
    Json arr = Json::array();
    for (auto& [t, st] : statuses) arr.push_back(st);  // std::map: sorted by tag
    changed_images[name] = {{"tags", arr}};
  }
  if (changed_images.empty()) return Json::object();

  // Counters as the daemon computes them: desired counts every spec tag; a tag's phase is read
  // from its status entry (missing: waiting).
  int64_t desired = 0, succeeded = 0, failed = 0, pulling = 0, waiting = 0;
  for (const auto& [name, image] : images->items()) {
    const Json* tags = Field(image, "tags");
    if (tags == nullptr || !tags->is_array()) continue;
    for (const Json& tag : *tags) {
      ++desired;
      const std::string tag_name = tag.value("tag", "");
      const Json* st = nullptr;
      if (changed_images.contains(name)) {
        for (const Json& t : changed_images[name]["tags"]) {
          if (t.value("tag", "") == tag_name) st = &t;
        }
      } else {
        st = FindTagStatus(ni, name, tag_name);
      }
      const std::string phase = st != nullptr ? st->value("phase", "") : "";
      if (phase == "Succeeded") {
        ++succeeded;
      } else if (phase == "Failed") {
        ++failed;
      } else if (phase == "Pulling") {
        ++pulling;
      } else {
        ++waiting;
      }
    }
  }
  return {{"metadata", {{"resourceVersion", kube::ResourceVersion(ni)}}},
          {"status",
           {{"desired", desired},
            {"succeeded", succeeded},
            {"failed", failed},
            {"pulling", pulling},
            {"waiting", waiting},
            {"imageStatuses", changed_images}}}};
}

absl::Status NodeImageReconciler::SyncStatus(Json ni, absl::Duration* requeue) {
  for (int attempt = 0;; ++attempt) {
    absl::Duration local = absl::ZeroDuration();
    std::vector<std::pair<Json, std::string>> failures;
    Json patch = StatusPatch(ni, &local, &failures);
    if (patch.empty()) {
      if (local > absl::ZeroDuration()) MinRequeue(requeue, local);
      return absl::OkStatus();
    }
    auto r = client_->Patch(opts_.node_images, "", kube::Name(ni), kube::PatchType::kMerge, patch,
                            "status");
    if (r.ok()) {
      if (local > absl::ZeroDuration()) MinRequeue(requeue, local);
      for (const auto& [obj, msg] : failures) {
        Logger("nodeimage")->warn("{}", msg);
        if (recorder_ != nullptr) {
          recorder_->Event(obj, kube::EventType::kWarning, "PullImageFailed", msg);
        }
      }
      return absl::OkStatus();
    }
    if (!kube::IsConflict(r.status()) || attempt >= kConflictRetries) return r.status();
    auto fresh = client_->Get(opts_.node_images, "", kube::Name(ni));
    if (!fresh.ok()) return kube::IsNotFound(fresh.status()) ? absl::OkStatus() : fresh.status();
    ni = std::move(*fresh);
  }
}

}  // namespace kruise::manager
