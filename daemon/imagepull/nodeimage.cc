#include "daemon/imagepull/nodeimage.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kube/object.h"

namespace kruise::daemon {
namespace {

using Json = nlohmann::json;

const Json* Find(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::string Str(const Json& obj, const char* key) {
  const Json* v = Find(obj, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

std::optional<int64_t> Int(const Json& obj, const char* key) {
  const Json* v = Find(obj, key);
  if (v != nullptr && v->is_number_integer()) return v->get<int64_t>();
  return std::nullopt;
}

std::optional<absl::Time> TimeAt(const Json& obj, const char* key) {
  auto t = kube::ParseRfc3339(Str(obj, key));
  if (!t.ok()) return std::nullopt;
  return *t;
}

std::map<std::string, std::string> StringMap(const Json* obj) {
  std::map<std::string, std::string> out;
  if (obj == nullptr || !obj->is_object()) return out;
  for (const auto& [k, v] : obj->items()) {
    if (v.is_string()) out[k] = v.get<std::string>();
  }
  return out;
}

}  // namespace

const char* TagPhaseName(TagPhase p) {
  switch (p) {
    case TagPhase::kWaiting:
      return "Waiting";
    case TagPhase::kPulling:
      return "Pulling";
    case TagPhase::kSucceeded:
      return "Succeeded";
    case TagPhase::kFailed:
      return "Failed";
  }
  return "Waiting";
}

absl::StatusOr<std::vector<ImageSpec>> ParseNodeImageSpec(const Json& node_image) {
  std::vector<ImageSpec> out;
  const Json* spec = Find(node_image, "spec");
  const Json* images = spec != nullptr ? Find(*spec, "images") : nullptr;
  if (images == nullptr) return out;
  if (!images->is_object()) return absl::InvalidArgumentError("spec.images must be an object");
  for (const auto& [name, image] : images->items()) {
    if (!image.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat("spec.images[", name, "] must be an object"));
    }
    ImageSpec is;
    is.name = name;
    if (const Json* secrets = Find(image, "pullSecrets"); secrets && secrets->is_array()) {
      for (const Json& s : *secrets) {
        is.pull_secrets.push_back({Str(s, "namespace"), Str(s, "name")});
      }
    }
    if (const Json* sandbox = Find(image, "sandboxConfig")) {
      is.sandbox_labels = StringMap(Find(*sandbox, "labels"));
      is.sandbox_annotations = StringMap(Find(*sandbox, "annotations"));
    }
    if (const Json* tags = Find(image, "tags"); tags && tags->is_array()) {
      for (const Json& t : *tags) {
        TagSpec ts;
        ts.tag = Str(t, "tag");
        if (ts.tag.empty()) {
          return absl::InvalidArgumentError(
              absl::StrCat("spec.images[", name, "] has a tag entry without a tag"));
        }
        ts.version = Int(t, "version").value_or(0);
        ts.image_pull_policy = Str(t, "imagePullPolicy");
        if (const Json* pp = Find(t, "pullPolicy")) {
          ts.pull_policy.timeout_seconds = Int(*pp, "timeoutSeconds").value_or(600);
          ts.pull_policy.backoff_limit = Int(*pp, "backoffLimit").value_or(3);
          ts.pull_policy.active_deadline_seconds = Int(*pp, "activeDeadlineSeconds");
          ts.pull_policy.ttl_seconds_after_finished = Int(*pp, "ttlSecondsAfterFinished");
        }
        if (ts.pull_policy.timeout_seconds <= 0) ts.pull_policy.timeout_seconds = 600;
        if (ts.pull_policy.backoff_limit < 0) ts.pull_policy.backoff_limit = 0;
        if (const Json* owners = Find(t, "ownerReferences"); owners && owners->is_array()) {
          ts.owner_references = *owners;
        }
        is.tags.push_back(std::move(ts));
      }
    }
    out.push_back(std::move(is));
  }
  return out;
}

ImageStatuses ParseNodeImageStatus(const Json& node_image) {
  ImageStatuses out;
  const Json* status = Find(node_image, "status");
  const Json* images = status != nullptr ? Find(*status, "imageStatuses") : nullptr;
  if (images == nullptr || !images->is_object()) return out;
  for (const auto& [name, image] : images->items()) {
    const Json* tags = Find(image, "tags");
    if (tags == nullptr || !tags->is_array()) continue;
    for (const Json& t : *tags) {
      TagStatus ts;
      ts.tag = Str(t, "tag");
      ts.version = Int(t, "version").value_or(0);
      std::string phase = Str(t, "phase");
      ts.phase = phase == "Pulling"     ? TagPhase::kPulling
                 : phase == "Succeeded" ? TagPhase::kSucceeded
                 : phase == "Failed"    ? TagPhase::kFailed
                                        : TagPhase::kWaiting;
      ts.progress = static_cast<int>(Int(t, "progress").value_or(0));
      ts.start_time = TimeAt(t, "startTime");
      ts.completion_time = TimeAt(t, "completionTime");
      ts.image_id = Str(t, "imageID");
      ts.message = Str(t, "message");
      out[name].push_back(std::move(ts));
    }
  }
  return out;
}

Json BuildNodeImageStatus(const std::vector<ImageSpec>& spec, const ImageStatuses& statuses) {
  int64_t desired = 0, succeeded = 0, failed = 0, pulling = 0, waiting = 0;
  Json image_statuses = Json::object();
  for (const ImageSpec& image : spec) {
    desired += static_cast<int64_t>(image.tags.size());
    auto it = statuses.find(image.name);
    std::vector<TagStatus> tags;
    for (const TagSpec& tag : image.tags) {
      const TagStatus* found = nullptr;
      if (it != statuses.end()) {
        for (const TagStatus& s : it->second) {
          if (s.tag == tag.tag) found = &s;
        }
      }
      if (found == nullptr) {
        ++waiting;
        continue;
      }
      switch (found->phase) {
        case TagPhase::kSucceeded:
          ++succeeded;
          break;
        case TagPhase::kFailed:
          ++failed;
          break;
        case TagPhase::kPulling:
          ++pulling;
          break;
        case TagPhase::kWaiting:
          ++waiting;
          break;
      }
      tags.push_back(*found);
    }
    if (tags.empty()) continue;
    std::sort(tags.begin(), tags.end(),
              [](const TagStatus& a, const TagStatus& b) { return a.tag < b.tag; });
    Json arr = Json::array();
    for (const TagStatus& t : tags) {
      Json j = {{"tag", t.tag}, {"phase", TagPhaseName(t.phase)}, {"version", t.version}};
      if (t.progress > 0) j["progress"] = t.progress;
      if (t.start_time) j["startTime"] = kube::FormatRfc3339(*t.start_time);
      if (t.completion_time) j["completionTime"] = kube::FormatRfc3339(*t.completion_time);
      if (!t.image_id.empty()) j["imageID"] = t.image_id;
      if (!t.message.empty()) j["message"] = t.message;
      arr.push_back(std::move(j));
    }
    image_statuses[image.name] = {{"tags", std::move(arr)}};
  }
  Json status = {{"desired", desired},
                 {"succeeded", succeeded},
                 {"failed", failed},
                 {"pulling", pulling},
                 {"waiting", waiting}};
  if (!image_statuses.empty()) status["imageStatuses"] = std::move(image_statuses);
  return status;
}

namespace {

// `status` without what StatusChangeIsUrgent ignores: the tags' progress and message.
Json WithoutProgress(const Json& status) {
  Json out = status.is_object() ? status : Json::object();
  auto images = out.find("imageStatuses");
  if (images == out.end() || !images->is_object()) return out;
  for (auto& [name, image] : images->items()) {
    auto tags = image.find("tags");
    if (tags == image.end() || !tags->is_array()) continue;
    for (Json& tag : *tags) {
      if (!tag.is_object()) continue;
      tag.erase("progress");
      tag.erase("message");
    }
  }
  return out;
}

}  // namespace

bool StatusChangeIsUrgent(const Json& current, const Json& next) {
  return WithoutProgress(current) != WithoutProgress(next);
}

}  // namespace kruise::daemon
