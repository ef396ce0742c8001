#pragma once

// ImagePullJob defaulting and validation as OpenKruise's webhooks do them, as pure functions over
// the raw object so that the admission webhook and the controller share one definition.
//
// Defaults (OpenKruise SetDefaultsImagePullJob): completionPolicy.type Always,
// pullPolicy.timeoutSeconds 600, pullPolicy.backoffLimit 3, imagePullPolicy IfNotPresent and
// (optionally) the deletion-protection finalizer. parallelism is not written; absent means 1.
//
// Validation (OpenKruise's validating webhook plus the checks it leaves to the controller):
//  - spec.image required and parseable (ParseImageReference);
//  - spec.selector: names XOR matchLabels/matchExpressions, no duplicated names, valid labels;
//  - spec.selector XOR spec.podSelector; podSelector a valid label selector;
//  - spec.parallelism a non-negative integer, or a string holding one (OpenKruise reads it with
//    IntOrString.IntValue(): a percentage would silently become 0 = paused, so we reject it);
//  - pullPolicy.timeoutSeconds > 0, backoffLimit >= 0;
//  - completionPolicy.type Always|Never; with Always, activeDeadlineSeconds >= timeoutSeconds
//    (OpenKruise rejects only timeoutSeconds > activeDeadlineSeconds); with Never, neither
//    activeDeadlineSeconds nor ttlSecondsAfterFinished; both non-negative;
//  - imagePullPolicy Always|IfNotPresent.
//
// Thread-compatible, no state.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kube/client.h"
#include "manager/imagepull/imagepull_util.h"

namespace kruise::manager {

// A copy of `job` with the defaults filled in (existing values are kept).
kube::Json DefaultImagePullJob(const kube::Json& job, bool add_protection_finalizer = false);

// Every problem found, as "spec.field: message". Empty when valid. Validates `job` as given;
// call DefaultImagePullJob first when validating a request (an empty type reads as Always and
// an absent timeoutSeconds as 600 either way).
std::vector<std::string> ValidateImagePullJob(const kube::Json& job);
// The same, as one INVALID_ARGUMENT status joining the problems ("; ").
absl::Status ValidateImagePullJobStatus(const kube::Json& job);

// spec.parallelism: absent/null -> 1; a non-negative int, or a string of digits; anything else
// (percentages included) is INVALID_ARGUMENT.
absl::StatusOr<int> ParseParallelism(const kube::Json& spec);

// The effective spec of a defaulted, valid job, as the controller uses it.
struct ImagePullJobSpec {
  std::string image;
  ImageNameTag name_tag;
  std::vector<std::string> pull_secrets;
  kube::Json selector;      // null: all nodes
  kube::Json pod_selector;  // null: none
  int parallelism = 1;
  int64_t timeout_seconds = 600;
  int64_t backoff_limit = 3;
  bool never = false;  // completionPolicy.type == Never
  std::optional<int64_t> active_deadline_seconds;
  std::optional<int64_t> ttl_seconds_after_finished;
  kube::Json sandbox_config;  // null when absent
  std::string image_pull_policy = "IfNotPresent";
};
// Defaults, validates and extracts. INVALID_ARGUMENT listing the problems.
absl::StatusOr<ImagePullJobSpec> ParseImagePullJobSpec(const kube::Json& job);

}  // namespace kruise::manager
