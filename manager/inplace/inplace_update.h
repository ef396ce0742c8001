#pragma once

// The in-place update engine's decisions (issue 14), shared by CloneSet, Advanced StatefulSet and
// Advanced DaemonSet; it knows no workload. Pure functions over pod templates and pods (JSON as the
// API server serves them), so every rule is a table test.
//
//  - CalculateInPlaceUpdate: is a revision change possible without a new pod, and what to patch.
//    As OpenKruise: only the images of regular containers and the pod's labels and annotations
//    may change; anything else (init containers, env, ports, probes, volumes, ...) needs a new pod.
//  - InPlaceUpdateState: the annotation `apps.kruise.io/inplace-update-state`, OpenKruise's JSON
//    (revision, updateTimestamp, lastContainerStatuses{c: {imageID}}, updateImages) plus, in each
//    lastContainerStatuses entry, the containerID and restartCount we saw before patching.
//  - InPlaceUpdateCompleted: has the kubelet run every changed container with its new spec?
//    **Better than OpenKruise**, whose check compares image digests, so a tag change that keeps the
//    digest never completes (its issues #635, #1493, #2297): ours looks for the container having
//    been restarted (a new containerID or a higher restartCount), whatever the digest.

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace kruise::manager::inplace {

inline constexpr char kInPlaceUpdateStateAnnotation[] = "apps.kruise.io/inplace-update-state";
inline constexpr char kInPlaceUpdateGraceAnnotation[] = "apps.kruise.io/inplace-update-grace";
inline constexpr char kInPlaceUpdateReadyCondition[] = "InPlaceUpdateReady";

// What an in-place update changes on a pod.
struct InPlaceUpdateSpec {
  std::string revision;                                      // the target revision's name
  std::map<std::string, std::string> container_images;       // container name -> new image
  nlohmann::json metadata_patch = nlohmann::json::object();  // merge patch: labels, annotations
                                                             // (null deletes a key)
};

// `old_template` and `new_template` are pod templates ({metadata, spec}) of two revisions.
// Returns the update when it can be done in place; nullopt otherwise, with the first reason in
// `why_not` (e.g. "spec.containers[0].env changed") when given.
std::optional<InPlaceUpdateSpec> CalculateInPlaceUpdate(const nlohmann::json& old_template,
                                                        const nlohmann::json& new_template,
                                                        const std::string& new_revision,
                                                        std::string* why_not = nullptr);

struct LastContainerStatus {
  std::string image_id;
  std::string container_id;
  int64_t restart_count = 0;
};

struct InPlaceUpdateState {
  std::string revision;
  absl::Time update_timestamp;
  std::map<std::string, LastContainerStatus> last_container_statuses;  // changed containers only
  bool update_images = false;
};

// The state to record before patching `pod` with `spec` (containers' statuses as they are now).
InPlaceUpdateState NewInPlaceUpdateState(const nlohmann::json& pod, const InPlaceUpdateSpec& spec,
                                         absl::Time now);

// The annotation's value, and back. Unknown fields in the JSON are ignored (OpenKruise writes
// more: next batches, env-from-metadata); a malformed value is INVALID_ARGUMENT.
std::string FormatInPlaceUpdateState(const InPlaceUpdateState& state);
absl::StatusOr<InPlaceUpdateState> ParseInPlaceUpdateState(const std::string& annotation);

// Whether every container the update changed runs with its new spec: the pod's spec has the new
// image (the patch landed) and the container's status shows a restart since the state was recorded
// (another containerID, or a higher restartCount) that did not start before the update's timestamp
// (second precision, as the API server has it). When false, `waiting_for` (if given) names the
// first container still waiting and why.
bool InPlaceUpdateCompleted(const nlohmann::json& pod, const InPlaceUpdateState& state,
                            const std::map<std::string, std::string>& container_images,
                            std::string* waiting_for = nullptr);

}  // namespace kruise::manager::inplace
