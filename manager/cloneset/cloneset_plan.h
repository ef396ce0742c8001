#pragma once

// CloneSet's decisions as pure functions (issue 14): what to create, what to delete, which pods to
// update, and the status, from the CloneSet's spec and a view of its pods. The controller
// (cloneset_controller.h) reads the cache, calls these and writes; every rule here is a table
// test. The numbers follow OpenKruise's CloneSet (its "expectation diffs"):
//
//  - partition: pods kept at the current revision; an integer, or a percent of replicas rounded
//    up, and a percent below 100% leaves at least one pod to update when replicas > 1.
//  - maxUnavailable (default 20%): rounded up when maxSurge is 0, down otherwise; caps the pods
//    that are unavailable while updating and deleting.
//  - maxSurge (default 0, rounded up; 0 while paused): extra pods during recreate updates and
//    specified deletes.
//  - scaleStrategy.maxUnavailable: creation stops while this many pods are unavailable.
//
// What OpenKruise's feature gate CloneSetPartitionRollback adds (rolling pods back to the current
// revision when partition grows) is not done: pods above the partition stay updated.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "manager/inplace/update_order.h"
#include "manager/workload/lifecycle.h"
#include "nlohmann/json.hpp"

namespace kruise::manager::cloneset {

using Json = nlohmann::json;

// A lifecycle hook (spec.lifecycle.preDelete / inPlaceUpdate / preNormal), shared with the
// Advanced StatefulSet (manager/workload/lifecycle.h).
using LifecycleHook = workload::LifecycleHook;

// The parts of a CloneSet's spec the planners read, defaults applied.
struct CloneSetSpec {
  int replicas = 1;
  std::string update_type = "ReCreate";
  Json partition = 0;          // int or "N%"
  Json max_unavailable = "20%";
  Json max_surge = 0;
  bool paused = false;
  Json scale_max_unavailable;  // null: no limit
  std::vector<std::string> pods_to_delete;
  int min_ready_seconds = 0;
  int64_t grace_period_seconds = 0;  // updateStrategy.inPlaceUpdateStrategy.gracePeriodSeconds
  int revision_history_limit = 10;
  Json priority_strategy;  // null or {weightPriority: [...]} / {orderPriority: [...]}
  Json scatter_strategy;   // null or [{key, value}]
  std::optional<LifecycleHook> pre_delete;
  std::optional<LifecycleHook> in_place_update;
  std::optional<LifecycleHook> pre_normal;
};

// Reads spec (tolerant: a missing field takes its default; a field of the wrong type is
// INVALID_ARGUMENT naming it).
absl::StatusOr<CloneSetSpec> ParseCloneSetSpec(const Json& cloneset);

// The spec's numbers resolved against replicas.
struct ScaledNumbers {
  int partition = 0;
  int max_surge = 0;
  int max_unavailable = 0;
  int scale_max_unavailable = 0;
};
absl::StatusOr<ScaledNumbers> ScaleNumbers(const CloneSetSpec& spec);

// What the planners need to know about one active pod (not terminating, not finished); the
// update order's facts (name, scheduled, phase, ready, ready_since, created, restarts,
// deletion_cost, labels) are inplace::PodFacts.
struct PodView : inplace::PodFacts {
  std::string instance_id;
  std::string revision;            // controller-revision-hash label
  bool updated = false;            // at the update revision
  std::string lifecycle_state;     // lifecycle.apps.kruise.io/state, "" if none
  bool specified_delete = false;   // label apps.kruise.io/specified-delete or in podsToDelete
  std::string node;
  bool update_ready = false;       // ready, and InPlaceUpdateReady not False
  bool ready_long_enough = false;  // update_ready for minReadySeconds
  bool available = false;          // ready_long_enough, and lifecycle "" or Normal
  bool in_place_grace = false;     // an in-place update waits out its grace period
  std::vector<std::string> finalizers;
};

PodView ViewPod(const Json& pod, const CloneSetSpec& spec, const std::string& update_revision,
                absl::Time now);

// Whether the hook holds the pod (any of its labels with that value, or any finalizer), and
// whether all of them are present (workload::IsPodHooked / IsPodAllHooked on the view).
bool IsPodHooked(const std::optional<LifecycleHook>& hook, const PodView& pod);
bool IsPodAllHooked(const std::optional<LifecycleHook>& hook, const PodView& pod);

// The numbers of one reconcile: OpenKruise's calculateDiffsWithExpectation.
struct Diffs {
  int scale_up = 0;               // pods to create
  int scale_up_old_revision = 0;  // of which at the current revision (may exceed scale_up)
  int scale_up_limit = 0;         // creation cap from scaleStrategy.maxUnavailable
  int scale_down = 0;             // pods to delete, beyond those specified
  int scale_down_old_revision = 0;
  int delete_ready_limit = 0;     // ready pods that may be deleted now
  int use_surge = 0;
  int use_surge_old_revision = 0;
  int update = 0;                 // pods still to update to the update revision (>= 0)
  int update_max_unavailable = 0;
  bool operator==(const Diffs&) const = default;
};
Diffs CalculateDiffs(const CloneSetSpec& spec, const ScaledNumbers& numbers,
                     const std::vector<PodView>& pods);

// Kubernetes' ActivePods order, the order in which pods are deleted first: unscheduled <
// scheduled; Pending < Unknown < Running; not ready < ready; lower pod-deletion-cost; higher
// `rank`; ready for less time; more restarts; newer. `rank` may be empty (all 0).
bool DeleteFirst(const PodView& a, const PodView& b, int rank_a, int rank_b);

// Ranks for the scale-down order: without topology spread constraints, the number of the set's
// pods on the same node; with `spread_keys` (the template's topologySpreadConstraints' keys) the
// number of the set's pods in the pod's domain of each key, summed (delete from the most crowded
// domain first, as OpenKruise 0.10). `node_label(node, key)` is the node's label; a pod whose
// node lacks a key counts in no domain of it.
std::vector<int> SpreadRanks(
    const std::vector<PodView>& pods, const std::vector<std::string>& spread_keys,
    const std::function<std::optional<std::string>(const std::string& node,
                                                   const std::string& key)>& node_label);

// Which pods a scale-down deletes (indices into `pods`, in deletion order): `total` pods, of which
// `old_revision` from pods not at the update revision first. `ranks` as SpreadRanks (or empty).
std::vector<size_t> ChoosePodsToDelete(const std::vector<PodView>& pods, int total,
                                       int old_revision, const std::vector<int>& ranks);

// The scale plan of one reconcile, OpenKruise's order: pods already PreparingDelete, then the
// specified ones, then a scale-down. Creations and deletions never mix in one plan.
struct ScalePlan {
  int create = 0;                // pods to create now (after scaleStrategy.maxUnavailable)
  int create_old_revision = 0;   // of which at the current revision
  std::vector<size_t> remove;    // pods to delete (or to move to PreparingDelete), in order
  std::vector<size_t> back_to_normal;  // PreparingDelete pods no longer to delete
};
ScalePlan PlanScale(const CloneSetSpec& spec, const ScaledNumbers& numbers, const Diffs& diffs,
                    const std::vector<PodView>& pods, const std::vector<int>& ranks);

// Which pods to update now, in order: pods not at the update revision, not PreparingDelete or
// Updated, not in a grace period; sorted (not ready first, ...), then priorityStrategy, then
// scatterStrategy, PreparingUpdate first; cut to diffs.update and to what maxUnavailable allows
// (updating a pod that is not ready costs nothing).
std::vector<size_t> PlanUpdate(const CloneSetSpec& spec, const Diffs& diffs,
                               const std::vector<PodView>& pods);

// Sizes of the slow-start creation batches for `n` pods: 1, 2, 4, ... (the last one smaller).
std::vector<int> SlowStartBatches(int n);

// A new instance id of 5 characters from Kubernetes' safe alphabet (no vowels, no 0/1/3) that
// `taken` does not contain; `random` returns a uniform integer in [0, n).
std::string NewInstanceId(const std::function<bool(const std::string&)>& taken,
                          const std::function<size_t(size_t n)>& random);

// The status counters over the active pods (conditions, revisions, observedGeneration and
// labelSelector are the controller's).
struct StatusCounts {
  int replicas = 0;
  int ready = 0;
  int available = 0;
  int updated = 0;
  int updated_ready = 0;
  int updated_available = 0;
  int expected_updated = 0;
  bool operator==(const StatusCounts&) const = default;
};
StatusCounts CountStatus(const CloneSetSpec& spec, const ScaledNumbers& numbers,
                         const std::vector<PodView>& pods);

}  // namespace kruise::manager::cloneset
