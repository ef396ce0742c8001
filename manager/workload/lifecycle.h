#pragma once

// Lifecycle hooks of OpenKruise's workloads (spec.lifecycle: preDelete, inPlaceUpdate,
// preNormal, each {labelsHandler, finalizersHandler, markPodNotReady}; apps.kruise.io/pub
// Lifecycle), shared by CloneSet and Advanced StatefulSet: the hook's parse, the "hooked"
// predicates and the state machine over the pod label lifecycle.apps.kruise.io/state, as pure
// functions. The controllers read a pod, ask these and write the answer (LifecycleStateOps,
// KruisePodReadyOps) with their own resourceVersion-guarded patch.
//
// The states and their moves (OpenKruise's refreshPodState / inPlaceUpdatePod / deletePod):
//   - a new pod starts PreparingNormal when a preNormal hook is set and its template does not
//     already carry all of it, else Normal (InitialLifecycleState);
//   - PreparingNormal -> Normal once every preNormal label and finalizer is on the pod;
//   - an in-place update of a pod in "", PreparingNormal or Normal that the inPlaceUpdate hook
//     holds (any label of it with its value, or any finalizer) moves it to PreparingUpdate and
//     stops there; the update waits while the hook holds it; an Updated pod asked to update
//     again goes back to PreparingUpdate with the hook's labels and finalizers put back;
//     a PreparingDelete pod is never updated in place (InPlaceUpdateDecision);
//   - PreparingUpdate of a pod already at the update revision (a rollback while it waited), and
//     Updating once the in-place update completed, -> Updated while the inPlaceUpdate hook is not
//     all back on the pod, else Normal; Updated -> Normal once it is (NextLifecycleState);
//   - a delete of a pod the preDelete hook holds moves it to PreparingDelete instead; the delete
//     happens in a later round once the hook is gone (DeleteDecision).
// markPodNotReady: moving to PreparingDelete / PreparingUpdate with that hook's markPodNotReady
// sets the KruisePodReady condition False (reason: the state), so endpoints drop the pod while
// the hook's owner works; back in Normal or Updated, a False condition with one of those reasons
// is set True again (RestoreKruisePodReady). PreparingDelete stays not ready. Only pods carrying
// the KruisePodReady readiness gate (the pod webhook adds it) are touched.
//
// Pure functions, thread-compatible.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace kruise::manager::workload {

inline constexpr char kLifecycleStateLabel[] = "lifecycle.apps.kruise.io/state";
inline constexpr char kLifecycleTimestampAnnotation[] = "lifecycle.apps.kruise.io/timestamp";

inline constexpr char kStatePreparingNormal[] = "PreparingNormal";
inline constexpr char kStateNormal[] = "Normal";
inline constexpr char kStatePreparingUpdate[] = "PreparingUpdate";
inline constexpr char kStateUpdating[] = "Updating";
inline constexpr char kStateUpdated[] = "Updated";
inline constexpr char kStatePreparingDelete[] = "PreparingDelete";

// One hook.
struct LifecycleHook {
  std::map<std::string, std::string> labels_handler;
  std::vector<std::string> finalizers_handler;
  bool mark_pod_not_ready = false;
  bool empty() const { return labels_handler.empty() && finalizers_handler.empty(); }
};

// spec.lifecycle; an absent hook is nullopt.
struct Lifecycle {
  std::optional<LifecycleHook> pre_delete;
  std::optional<LifecycleHook> in_place_update;
  std::optional<LifecycleHook> pre_normal;
};

// Reads spec.lifecycle of a workload object (absent: no hooks). A mistyped field is
// INVALID_ARGUMENT naming it ("spec.lifecycle.preDelete.labelsHandler: must be a map of
// strings"). Validation proper is the webhook's (CheckLifecycle).
absl::StatusOr<Lifecycle> ParseLifecycle(const nlohmann::json& workload);

// What the hooks look at on a pod.
struct HookedPod {
  std::map<std::string, std::string> labels;
  std::vector<std::string> finalizers;
};
HookedPod ReadHookedPod(const nlohmann::json& pod);

// Any of the hook's labels with its value, or any of its finalizers, is on the pod. False
// without a hook.
bool IsPodHooked(const std::optional<LifecycleHook>& hook, const HookedPod& pod);
// All of them are. False without a hook.
bool IsPodAllHooked(const std::optional<LifecycleHook>& hook, const HookedPod& pod);

// The state a new pod is created in (its template's labels and finalizers in `pod`).
std::string InitialLifecycleState(const Lifecycle& lifecycle, const HookedPod& pod);

// The state a pod moves to on its own (no update or delete asked), or nullopt to stay.
// `state` is the pod's label ("" if none); `at_update_revision`: the pod runs the workload's
// update revision; `update_completed`: an in-place update of the pod has completed.
std::optional<std::string> NextLifecycleState(const Lifecycle& lifecycle, const std::string& state,
                                              const HookedPod& pod, bool at_update_revision,
                                              bool update_completed);

// What to do with a pod an in-place update wants.
struct InPlaceUpdateDecision {
  enum class Action {
    kUpdate,   // go ahead (the update sets Updating)
    kPrepare,  // move to PreparingUpdate (put_hook_back: with the hook put back on the pod)
    kWait,     // the inPlaceUpdate hook holds it in PreparingUpdate
    kRefuse,   // not in a state that may be updated in place (error)
  };
  Action action = Action::kUpdate;
  bool put_hook_back = false;   // kPrepare from Updated: add the hook's labels and finalizers
  bool mark_not_ready = false;  // kPrepare: the hook's markPodNotReady
};
InPlaceUpdateDecision DecideInPlaceUpdate(const Lifecycle& lifecycle, const std::string& state,
                                          const HookedPod& pod);

// What to do with a pod a delete wants.
struct DeleteDecision {
  enum class Action {
    kDelete,   // delete it now
    kPrepare,  // move to PreparingDelete, delete later
    kWait,     // PreparingDelete already; the preDelete hook still holds it
  };
  Action action = Action::kDelete;
  bool mark_not_ready = false;  // the preDelete hook's markPodNotReady (kPrepare and kWait)
};
DeleteDecision DecideDelete(const Lifecycle& lifecycle, const std::string& state,
                            const HookedPod& pod);

// JSON patch operations (without a resourceVersion test) setting the pod's state label and
// timestamp annotation (RFC 3339 `now`), and with `put_back` the hook's labels and finalizers.
nlohmann::json LifecycleStateOps(const nlohmann::json& pod, const std::string& state,
                                 absl::Time now, const LifecycleHook* put_back = nullptr);

// Status-subresource operations (without a resourceVersion test) setting the pod's
// KruisePodReady condition to `ready` with `reason` and `message`; empty when the pod has no
// KruisePodReady readiness gate or the condition already says so.
nlohmann::json KruisePodReadyOps(const nlohmann::json& pod, bool ready, const std::string& reason,
                                 const std::string& message, absl::Time now);

// For a pod in `state` "", Normal or Updated whose KruisePodReady is False with reason
// PreparingUpdate (or PreparingDelete, a delete called off): the ops setting it True; else empty.
nlohmann::json RestoreKruisePodReadyOps(const nlohmann::json& pod, const std::string& state,
                                        absl::Time now);

}  // namespace kruise::manager::workload
