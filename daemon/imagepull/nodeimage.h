#pragma once

// The NodeImage resource (apps.kruise.io v1alpha1 and v1beta1 share these fields) as the daemon
// reads its spec and writes its status. Field names and defaults follow OpenKruise.
//
//   spec.images.<name>: {pullSecrets: [{namespace, name}], tags: [TagSpec], sandboxConfig}
//   status: {desired, succeeded, failed, pulling, waiting, imageStatuses.<name>.tags: [...]}

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace kruise::daemon {

struct PullPolicy {
  int64_t timeout_seconds = 600;
  int64_t backoff_limit = 3;
  std::optional<int64_t> active_deadline_seconds;
  std::optional<int64_t> ttl_seconds_after_finished;
};

struct SecretRef {
  std::string namespace_;
  std::string name;
  bool operator==(const SecretRef&) const = default;
};

struct TagSpec {
  std::string tag;
  int64_t version = 0;
  PullPolicy pull_policy;
  // "Always" (also when empty, as OpenKruise's daemon treats it) or "IfNotPresent".
  std::string image_pull_policy;
  nlohmann::json owner_references = nlohmann::json::array();
  bool if_not_present() const { return image_pull_policy == "IfNotPresent"; }
};

struct ImageSpec {
  std::string name;  // e.g. "busybox" or "127.0.0.1:5000/team/app" (no tag)
  std::vector<SecretRef> pull_secrets;
  std::vector<TagSpec> tags;
  std::map<std::string, std::string> sandbox_labels;
  std::map<std::string, std::string> sandbox_annotations;
};

// Parses spec.images of a NodeImage. Malformed entries (non-object image, tag without a name)
// are an INVALID_ARGUMENT naming the image and tag; absent spec/images is an empty list.
absl::StatusOr<std::vector<ImageSpec>> ParseNodeImageSpec(const nlohmann::json& node_image);

enum class TagPhase { kWaiting, kPulling, kSucceeded, kFailed };
const char* TagPhaseName(TagPhase p);

struct TagStatus {
  std::string tag;
  int64_t version = 0;
  TagPhase phase = TagPhase::kWaiting;
  int progress = 0;  // 0..100
  std::optional<absl::Time> start_time;
  std::optional<absl::Time> completion_time;
  std::string image_id;
  std::string message;
  bool operator==(const TagStatus&) const = default;
  bool completed() const { return phase == TagPhase::kSucceeded || phase == TagPhase::kFailed; }
};

// image name -> tag statuses
using ImageStatuses = std::map<std::string, std::vector<TagStatus>>;

// Reads status.imageStatuses (to learn which tags already completed at their version).
ImageStatuses ParseNodeImageStatus(const nlohmann::json& node_image);

// Builds the whole `status` object: counters (desired counts every tag of `spec`) and
// imageStatuses with tags sorted by name. Tags without a status count as waiting.
nlohmann::json BuildNodeImageStatus(const std::vector<ImageSpec>& spec,
                                    const ImageStatuses& statuses);

// Whether `next` differs from `current` (statuses as BuildNodeImageStatus writes them) in more
// than the tags' progress and messages: a count, a tag appearing or going, its phase, version,
// imageID, start or completion time. Such a change is what ImagePullJobs (and rollouts gated on
// them) wait for, so it is written at once; progress-only changes wait for the write budget.
bool StatusChangeIsUrgent(const nlohmann::json& current, const nlohmann::json& next);

}  // namespace kruise::daemon
