#include "manager/imagepull/nodeimage_admission.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "kube/object.h"

namespace kruise::manager {

using kube::Json;

Json DefaultNodeImage(const Json& node_image, absl::Time now) {
  Json out = node_image;
  if (!out.is_object()) return out;
  auto spec = out.find("spec");
  if (spec == out.end() || !spec->is_object()) return out;
  auto images = spec->find("images");
  if (images == spec->end() || !images->is_object()) return out;
  const std::string created_at = kube::FormatRfc3339(now);
  for (auto& [name, image] : images->items()) {
    if (!image.is_object()) continue;
    auto tags = image.find("tags");
    if (tags == image.end() || !tags->is_array()) continue;
    for (Json& tag : *tags) {
      if (!tag.is_object()) continue;
      if (kube::Field(tag, "createdAt") == nullptr) tag["createdAt"] = created_at;
      Json& policy = tag["pullPolicy"];
      if (!policy.is_object()) policy = Json::object();
      if (kube::Field(policy, "timeoutSeconds") == nullptr) policy["timeoutSeconds"] = 600;
      if (kube::Field(policy, "backoffLimit") == nullptr) policy["backoffLimit"] = 3;
    }
  }
  return out;
}

absl::Status ValidateNodeImage(const Json& node_image) {
  const Json* images = kube::FindPath(node_image, {"spec", "images"});
  if (images == nullptr || images->is_null()) return absl::OkStatus();
  if (!images->is_object()) return absl::InvalidArgumentError("spec.images must be a map");
  if (images->size() > static_cast<size_t>(kMaxImagesPerNodeImage)) {
    return absl::InvalidArgumentError(absl::StrCat("spec images length ", images->size(),
                                                   " can not be more than ",
                                                   kMaxImagesPerNodeImage));
  }
  for (const auto& [name, image] : images->items()) {
    if (name.empty()) return absl::InvalidArgumentError("image name can not be empty");
    const Json* tags = kube::Field(image, "tags");
    if (tags == nullptr) continue;
    if (!tags->is_array()) {
      return absl::InvalidArgumentError(absl::StrCat("tags of image ", name, " must be a list"));
    }
    std::set<std::string> seen;
    for (const Json& tag : *tags) {
      const std::string t = tag.is_object() ? tag.value("tag", "") : "";
      if (t.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("tag for image ", name, " can not be empty"));
      }
      if (!seen.insert(t).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("duplicated tag ", t, " for image ", name));
      }
      const std::string full = absl::StrCat(name, "/", t);
      const Json* created = kube::Field(tag, "createdAt");
      if (created == nullptr || !created->is_string() ||
          !kube::ParseRfc3339(created->get<std::string>()).ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("createdAt for ", full, " must be an RFC 3339 time"));
      }
      if (kube::IntField(tag, "version", 0) < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("version for ", full, " can not be less than 0"));
      }
      const Json* policy = kube::Field(tag, "pullPolicy");
      if (policy == nullptr || !policy->is_object()) {
        return absl::InvalidArgumentError(absl::StrCat("pullPolicy for ", full, " must be set"));
      }
      const Json* ttl = kube::Field(*policy, "ttlSecondsAfterFinished");
      if (ttl == nullptr || !ttl->is_number_integer() || ttl->get<int64_t>() < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "pullPolicy.ttlSecondsAfterFinished for ", full, " must be set (seconds, >= 0)"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace kruise::manager
