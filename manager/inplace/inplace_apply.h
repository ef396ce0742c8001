#pragma once

// The in-place update engine's writes (issue 14/16), shared by CloneSet, Advanced StatefulSet and
// Advanced DaemonSet; knows no workload. Pure functions returning RFC 6902 JSON Patch operations
// for a pod as the informer cache has it; the controller sends them (each list starts with a
// `test` of metadata.resourceVersion, so a stale cache never overwrites someone else's change)
// and decides *which* pods to update. Because the manager's pod cache drops fields, every op sets
// one map entry or one condition field, never a whole object read from the cache.
//
// An in-place update, as OpenKruise's pkg/util/inplaceupdate does it:
//   1. StartInPlaceUpdateStatusOps (status subresource): when the pod has the InPlaceUpdateReady
//      readiness gate, condition InPlaceUpdateReady=False and Ready=False (reason
//      StartInPlaceUpdate), so endpoints drop the pod before its containers restart. Nothing
//      (an empty list) when the pod has no gate.
//   2. InPlaceUpdatePodOps (main resource): label controller-revision-hash = the new revision,
//      annotation apps.kruise.io/inplace-update-state (NewInPlaceUpdateState of the pod as it is
//      now), the workload's own labels/annotations (its lifecycle state, say), the revision's
//      metadata changes, and the new images; with a grace period > 0 the images are not patched
//      but kept in apps.kruise.io/inplace-update-grace ({"revision", "containerImages"}).
//   3. On later reconciles, CheckInPlaceUpdate:
//        - a grace annotation still running: kInGrace with the time left;
//        - a grace annotation run out: kGraceOver with the ops applying its images and removing
//          it (a malformed one is only removed);
//        - otherwise, when the state annotation is there: kCompleted (InPlaceUpdateCompleted, the
//          images wanted are the recorded revision's, or the pod's own spec when that revision is
//          gone) with the status ops setting InPlaceUpdateReady=True (empty when the pod has no
//          gate or the condition is already True), or kRunning naming what it waits for.
//      The state annotation stays after completion (as OpenKruise), so whether an update is still
//      in progress is the workload's bookkeeping (its lifecycle state Updating, say).
//
// Thread-compatible; no I/O.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "manager/inplace/inplace_update.h"
#include "nlohmann/json.hpp"

namespace kruise::manager::inplace {

// ---- JSON Patch building blocks -------------------------------------------------------------

// {"op": "test", "path": "/metadata/resourceVersion", "value": <obj's>}.
nlohmann::json TestResourceVersionOp(const nlohmann::json& obj);

// Appends ops setting entries of the string map at `base` ("/metadata/labels"); a null value
// removes the key when `obj` has it (nothing otherwise); the map is created when absent.
void AppendMapOps(const nlohmann::json& obj, const std::string& base, const nlohmann::json& entries,
                  nlohmann::json* ops);

// Appends ops setting pod conditions by type. An existing condition is changed field by field
// (the cache may not hold all of its fields); its lastTransitionTime only when the status flips.
// A missing one is appended whole; status.conditions (and status) are created when absent.
void AppendConditionOps(const nlohmann::json& pod, const std::vector<nlohmann::json>& conditions,
                        nlohmann::json* ops);

// The condition of `type` in status.conditions, or null.
const nlohmann::json* FindCondition(const nlohmann::json& pod, const std::string& type);

// Whether spec.readinessGates names `condition_type`.
bool HasReadinessGate(const nlohmann::json& pod, const std::string& condition_type);

// Status ops (test first) giving each gate in `gates` the pod has but no condition for yet a
// True condition; an empty list when there is none. New pods start with their gates True (the
// API server drops status on create, so this is a status patch after the pod exists).
nlohmann::json InitialReadinessGateOps(const nlohmann::json& pod,
                                       const std::vector<std::string>& gates, absl::Time now);

// ---- The in-place update ----------------------------------------------------------------------

inline constexpr char kStartInPlaceUpdateReason[] = "StartInPlaceUpdate";

// Step 1: status ops (test first), or an empty list when the pod has no InPlaceUpdateReady gate.
nlohmann::json StartInPlaceUpdateStatusOps(const nlohmann::json& pod, absl::Time now);

struct InPlaceUpdatePatchOptions {
  int grace_period_seconds = 0;  // inPlaceUpdateStrategy.gracePeriodSeconds
  // The workload's own labels and annotations for the updated pod (they win over the revision's
  // metadata changes; the revision label and the engine's annotations win over them).
  nlohmann::json labels = nlohmann::json::object();
  nlohmann::json annotations = nlohmann::json::object();
};

// Step 2: pod ops (test first) for `update`. `pod` is the pod as step 1 left it.
nlohmann::json InPlaceUpdatePodOps(const nlohmann::json& pod, const InPlaceUpdateSpec& update,
                                   const InPlaceUpdatePatchOptions& opts, absl::Time now);

// Steps 1 and 2 sent through `patch(pod, ops, subresource)`: the controller's resourceVersion-
// guarded pod patch (kube::PatchIfUnchanged plus its expectations; ABORTED on a stale test). The
// kubelet answers step 1 within milliseconds with its own status write (Ready follows the gate),
// so step 2's test often fails against the pod step 1 returned: then the pod is read again with
// `get(pod)` and step 2 rebuilt on it, up to kMaxInPlacePatchRetries times, as long as it is the
// same pod (uid) not yet at update.revision (one already there is returned as it is). OpenKruise
// retries its update the same way. Returns the updated pod; the last error otherwise (ABORTED when
// the pod kept changing, NOT_FOUND when it is gone).
inline constexpr int kMaxInPlacePatchRetries = 3;
absl::StatusOr<nlohmann::json> ApplyInPlaceUpdate(
    const nlohmann::json& pod, const InPlaceUpdateSpec& update,
    const InPlaceUpdatePatchOptions& opts, absl::Time now,
    absl::FunctionRef<absl::StatusOr<nlohmann::json>(const nlohmann::json&, const nlohmann::json&,
                                                     const std::string&)>
        patch,
    absl::FunctionRef<absl::StatusOr<nlohmann::json>(const nlohmann::json&)> get);

// Step 3.
struct InPlaceUpdateCheck {
  enum class Step {
    kNone,       // no state annotation (never updated in place), or an unreadable one
    kInGrace,    // images held back; `grace_left` to go
    kGraceOver,  // send `pod_ops`
    kRunning,    // the kubelet has not restarted every changed container yet (`waiting_for`)
    kCompleted,  // send `status_ops` (may be empty)
  };
  Step step = Step::kNone;
  std::string revision;  // the state annotation's revision, when there is one
  nlohmann::json pod_ops = nlohmann::json::array();
  nlohmann::json status_ops = nlohmann::json::array();
  absl::Duration grace_left = absl::ZeroDuration();
  std::string waiting_for;
};

// `revision_template(name)`: the pod template ({metadata, spec}) of a revision in the workload's
// history, or nullopt when it is gone.
InPlaceUpdateCheck CheckInPlaceUpdate(
    const nlohmann::json& pod, int grace_period_seconds, absl::Time now,
    const std::function<std::optional<nlohmann::json>(const std::string&)>& revision_template);

}  // namespace kruise::manager::inplace
