#pragma once

// Advanced StatefulSet (apps.kruise.io/v1beta1 StatefulSet, issue 16): what one reconcile round
// creates, deletes and updates, as pure functions over the set's spec and a view of its pods. The
// controller (a later slice) reads the cache, calls these and writes. Semantics as OpenKruise's
// pkg/controller/statefulset has them:
//
//  - Ordinals. Pods are named <set>-<ordinal>. The set owns the first `replicas` ordinals counted
//    from `ordinals.start` (default 0) that are not in `reserveOrdinals`; reserveOrdinals holds
//    integers and, in newer OpenKruise, "a-b" ranges (both ends included). The webhook rejects a
//    negative integer and a string that is not digits-dash-digits with a <= b; duplicates and
//    overlaps are allowed (the list is a set). Pods at any other ordinal (below start, reserved,
//    or past the last owned one) are "condemned": deleted, highest ordinal first.
//  - One round walks the owned ordinals in ascending order:
//      * a Failed or Succeeded pod is deleted (unless already terminating) and the round ends: its
//        replacement is created in a later round, once the old one is gone;
//      * a missing pod is created. OrderedReady: one per round, the round ends. Parallel: all of
//        them, unless scaleStrategy.maxUnavailable is set;
//      * OrderedReady waits (the round ends) on a terminating pod, and on a pod that is not
//        available: Running, Ready for minReadySeconds, and lifecycle state "" or Normal. A pod
//        in PreparingUpdate or PreparingDelete (a lifecycle hook holds the update or delete the
//        update step asked for) stops the walk without ending the round, so the update step can
//        carry on once the hook goes (OpenKruise's monotonic walk would end the round there and
//        never come back to the held pod);
//      * Parallel with scaleStrategy.maxUnavailable (int, or a percent of replicas rounded down;
//        at least 1): a budget counts each pod created now, each terminating pod and each pod not
//        available; when it reaches zero the walk stops creating, and the round goes on with the
//        condemned pods and the update. So never more than that many pods are unavailable while
//        scaling up (the OpenKruise 0.10 feature, Parallel only).
//  - Condemned pods: Parallel deletes all that are not already terminating. OrderedReady deletes
//    one per round, the highest ordinal, and waits while one is terminating, or while it is not
//    Running and Ready (or not available) unless it is the lowest-ordinal unhealthy pod of the set.
//  - Update (updateStrategy.type RollingUpdate; OnDelete never updates; not while paused; not in
//    a round that ended early). maxUnavailable (default 1; int or percent of replicas rounded
//    down, at least 1; more than 1 only with Parallel). Unavailable pods are the owned pods that
//    are not healthy (Running, Ready, not terminating, lifecycle "" or Normal), whose in-place
//    update is not complete, or not yet Ready for minReadySeconds; pods created this round and
//    pods still missing count too.
//      * Pods labelled apps.kruise.io/specified-delete are deleted first (highest ordinal first,
//        partition does not protect them), a pod that is still available only while fewer than
//        maxUnavailable are unavailable.
//      * Order: without unorderedUpdate, from the highest owned ordinal down, at most
//        replicas - partition pods: the first `partition` owned ordinals (reserved ones not
//        counted, ordinals.start where counting begins) keep the current revision. With
//        unorderedUpdate: pods already updated or terminating first (highest ordinal first), then
//        the others by priorityStrategy (stable over highest ordinal first); the list is cut to
//        replicas - partition, so partition is a count of pods left at the old revision, whichever
//        they are.
//      * Walking that order, a pod at the update revision is skipped; a pod that is available is
//        updated only while fewer than maxUnavailable pods are unavailable (the walk stops at the
//        first one that may not); updating a pod makes it unavailable; updating a pod that is
//        already unavailable costs nothing; a terminating pod is left alone.
//    How a pod is updated (podUpdatePolicy ReCreate: delete; InPlaceIfPossible: in place if
//    manager/inplace allows, else delete; InPlaceOnly: in place or an error) is the controller's.
//  - New pods get the current revision when they fall under the partition: without
//    unorderedUpdate, when fewer than `partition` owned ordinals precede them; with it, while fewer
//    than `partition` other pods are not at the update revision. OnDelete creates at the update
//    revision.
//
// Not here (the controller's): PVCs and their retention policy, lifecycle hooks
// (manager/workload/lifecycle.h: preDelete turns a delete into PreparingDelete, inPlaceUpdate an
// in-place update into PreparingUpdate), revisions, status, expectations.
//
// Pure functions, thread-compatible.

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "manager/inplace/update_order.h"
#include "nlohmann/json.hpp"

namespace kruise::manager::statefulset {

using Json = nlohmann::json;

// The largest number of ordinals one reserveOrdinals range may name (ours: OpenKruise has no cap,
// but a range like "0-2000000000" would only exhaust memory).
inline constexpr int kMaxReserveRange = 100000;

// Parses spec.reserveOrdinals (null or a list of integers >= 0 and "a-b" strings with a <= b).
// INVALID_ARGUMENT naming the element ("reserveOrdinals[2]: ...") otherwise.
absl::StatusOr<std::set<int>> ParseReserveOrdinals(const Json& reserve_ordinals);

// The ordinals a set owns: the first `replicas` ordinals from `start` not in `reserved`, ascending.
std::vector<int> OwnedOrdinals(int replicas, int start, const std::set<int>& reserved);

// The ordinal of a pod of set `set_name` from its name "<set_name>-<digits>" (a 32-bit value),
// or -1 when the name is not of that form.
int OrdinalOf(absl::string_view set_name, absl::string_view pod_name);

// The parts of an Advanced StatefulSet's spec the planners read, OpenKruise's defaults applied.
struct AstsSpec {
  int replicas = 1;
  int ordinals_start = 0;
  std::set<int> reserve_ordinals;
  bool parallel = false;       // podManagementPolicy Parallel (default OrderedReady)
  Json scale_max_unavailable;  // scaleStrategy.maxUnavailable; null: no limit
  bool on_delete = false;      // updateStrategy.type OnDelete (default RollingUpdate)
  int partition = 0;
  Json max_unavailable = 1;  // updateStrategy.rollingUpdate.maxUnavailable
  std::string pod_update_policy = "ReCreate";
  bool paused = false;
  bool unordered = false;     // rollingUpdate.unorderedUpdate set
  Json priority_strategy;     // rollingUpdate.unorderedUpdate.priorityStrategy, or null
  int min_ready_seconds = 0;  // rollingUpdate.minReadySeconds
};

// Reads a StatefulSet object (its spec). A missing field takes its default; a field of the wrong
// type, a bad reserveOrdinals element or a negative replicas/partition/minReadySeconds is
// INVALID_ARGUMENT naming the field. (Validation proper is the webhook's.)
absl::StatusOr<AstsSpec> ParseAstsSpec(const Json& statefulset);

// The spec's numbers resolved against replicas: OpenKruise's GetValueFromIntOrPercent rounded
// down, then at least 1. scale_max_unavailable is nullopt when not set. A string without "%" is
// INVALID_ARGUMENT here (OpenKruise's deprecated helper would read "5" as 5%; its webhook's
// IntOrPercent validation rejects such strings first).
struct ScaledNumbers {
  int max_unavailable = 1;
  std::optional<int> scale_max_unavailable;
};
absl::StatusOr<ScaledNumbers> ScaleNumbers(const AstsSpec& spec);

// What the planners read of one pod of the set (the ordering facts are inplace::PodFacts).
struct AstsPod : inplace::PodFacts {
  int ordinal = -1;
  std::string revision;            // label controller-revision-hash
  bool terminating = false;        // metadata.deletionTimestamp set
  std::string lifecycle_state;     // label lifecycle.apps.kruise.io/state, "" if none
  bool specified_delete = false;   // label apps.kruise.io/specified-delete present
  bool update_incomplete = false;  // an in-place update has not completed (the engine's check)
};

// Reads a pod as the API server serves it (update_incomplete stays false: the controller asks the
// in-place engine). INVALID_ARGUMENT on mistyped fields.
absl::StatusOr<AstsPod> ViewPod(const Json& pod, absl::string_view set_name);

// Running and Ready, not terminating, lifecycle state "" or Normal.
bool IsHealthy(const AstsPod& pod);

// Running, Ready for `min_ready_seconds` at `now`, lifecycle state "" or Normal. When it is only
// waiting for minReadySeconds, `*wait` (if given) is set to the time left.
bool IsAvailable(const AstsPod& pod, int min_ready_seconds, absl::Time now,
                 absl::Duration* wait = nullptr);

// A pod to create.
struct Creation {
  int ordinal = 0;
  bool current_revision = false;  // at the current revision (under the partition), else update
  bool operator==(const Creation&) const = default;
};

// The scale part of one round.
struct ScalePlan {
  std::vector<Creation> create;  // in ascending ordinal order
  std::vector<int> remove;       // ordinals of pods to delete: failed/condemned, in order
  bool round_ends = false;       // nothing else this round (OrderedReady waiting, failed pod)
  std::string waiting;           // why the round ends or the creation stopped, for the log
  absl::Duration recheck_after = absl::ZeroDuration();  // a minReadySeconds wait, if any
};

// `pods`: the set's pods (any ordinal; at most one per ordinal, a later one wins as OpenKruise's).
// `update_revision`: the revision new pods get unless the partition keeps them at the current one.
absl::StatusOr<ScalePlan> PlanScale(const AstsSpec& spec, const std::vector<AstsPod>& pods,
                                    const std::string& update_revision, absl::Time now);

// The update part of one round.
struct UpdatePlan {
  std::vector<int> specified_delete;  // ordinals of labelled pods to delete now
  std::vector<int> update;            // ordinals to update now, in order
  std::vector<int> unavailable;       // owned ordinals counted unavailable after this plan
  absl::Duration recheck_after = absl::ZeroDuration();
};

// The update after `scale` (empty when the round ended, for OnDelete and while paused).
absl::StatusOr<UpdatePlan> PlanUpdate(const AstsSpec& spec, const std::vector<AstsPod>& pods,
                                      const std::string& update_revision, const ScalePlan& scale,
                                      absl::Time now);

// ---- Volume claims against their templates (volumeClaimUpdateStrategy, status.volumeClaims) ---

// A Kubernetes resource quantity ("10Gi", "1.5G", "500M", "2e9", "100m") as a number of units,
// or nullopt when it does not parse.
std::optional<long double> ParseQuantity(absl::string_view q);

// How a PVC compares with its volumeClaimTemplate, as OpenKruise's pkg/util/pvc: the storage
// class (when both name one) and the access modes (in order) must be the same, else the claim is
// `other_diff` (only deleting it brings it in line); `compatible` when its
// spec.resources.requests.storage is at least the template's; `ready` when compatible and its
// status.capacity.storage is at least its request; `needs_expand` when its request is below the
// template's; `resize_done` when compatible and ready, or compatible and the file system resize
// waits for the kubelet (condition FileSystemResizePending). A size missing on either side is
// neither compatible nor in need of expansion.
struct ClaimCheck {
  bool other_diff = false;
  bool compatible = false;
  bool ready = false;
  bool needs_expand = false;
  bool resize_done = false;
};
ClaimCheck CompareClaim(const Json& claim, const Json& volume_claim_template);

}  // namespace kruise::manager::statefulset
