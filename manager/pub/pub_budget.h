#pragma once

// PodUnavailableBudget (policy.kruise.io v1alpha1, short name pub; deploy/crds) as pure functions:
// the object's validation, the budget the controller computes, and the decision the pod webhook
// makes on a DELETE, an eviction or an UPDATE (issue 17). Semantics are OpenKruise's
// (pkg/control/pubcontrol, pkg/controller/podunavailablebudget, pkg/webhook/podunavailablebudget):
//
// Object: exactly one of spec.selector (non-empty) and spec.targetRef (apiVersion, kind, name of a
// workload), exactly one of spec.maxUnavailable and spec.minAvailable (an integer >= 0 or "N%",
// 0 <= N <= 100). Annotations: `kruise.io/pub-protect-operations` (a comma list of DELETE, UPDATE,
// EVICT: only those are guarded; absent or empty guards all three) and
// `pub.kruise.io/protect-total-replicas` (an int32 that replaces the workload's replicas as the
// total). On UPDATE, selector and targetRef cannot change.
//
// Budget (the controller's status), over the pods the PUB covers:
//  - totalReplicas: the protect-total-replicas annotation, else the workloads' replicas the caller
//    found (targetRef's spec.replicas; for a selector, the owners' replicas), else the number of
//    active pods;
//  - desiredAvailable: with maxUnavailable, total - maxUnavailable (a percentage of total rounded
//    up, so desired rounds down), at least 0; with minAvailable, the integer as it is, or a
//    percentage of total rounded up (as the PDB);
//  - disruptedPods (pod -> time the webhook let it be deleted or evicted) keeps an entry for 20 s
//    (DeletionTimeout) while its pod exists and is active; a pod still there after that was not
//    deleted after all (OpenKruise records a NotDeleted event): `not_deleted` below;
//  - unavailablePods (pod -> time the webhook let an update through) keeps an entry for 10 s
//    (UpdatedDelayCheckTime, the informer's lag) while its pod exists and is active: after that
//    the pod's own state (ready, in-place update finished) says whether it is available;
//  - currentAvailable: active pods, not recorded in either map, ready and consistent;
//  - unavailableAllowed: max(0, currentAvailable - desiredAvailable).
//  "Active": not Succeeded/Failed and no deletionTimestamp. "Ready": phase Running, condition
//  Ready True, no label starting with `unavailable-pod.kruise.io/`. "Consistent": every container
//  whose spec image is a digest runs that digest, and an in-place update recorded in
//  `apps.kruise.io/inplace-update-state` has restarted its containers (manager/inplace).
//
// Admission (PodUnavailableBudgetValidatePod), for the pod as it is before the operation:
//  allowed without cost when the pod has `pub.kruise.io/no-protect: "true"`, is not ready or not
//  consistent (already unavailable), the PUB's desiredAvailable is 0 (also a PUB the controller
//  has not computed yet), the operation is not protected, or the pod is already in disruptedPods or
//  unavailablePods; otherwise denied when unavailableAllowed <= 0 or the two maps hold more than
//  2000 pods; otherwise allowed at the cost of one: unavailableAllowed - 1 and the pod recorded at
//  `now` (UPDATE in unavailablePods, DELETE and EVICT in disruptedPods). A dry run is decided the
//  same way and spends nothing. An UPDATE needs the budget only when it can take the pod down:
//  its spec changes, or it gains an `unavailable-pod.kruise.io/` label (UpdateMakesUnavailable).
//
// Not here (the next slice): finding the PUB of a pod, the controller, the webhooks, the conflict
// check against the namespace's other PUBs. Thread-compatible, no state; never throws.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kube/object.h"
#include "nlohmann/json.hpp"

namespace kruise::manager::pub {

inline constexpr char kNoProtectAnnotation[] = "pub.kruise.io/no-protect";
inline constexpr char kProtectOperationsAnnotation[] = "kruise.io/pub-protect-operations";
inline constexpr char kProtectTotalReplicasAnnotation[] = "pub.kruise.io/protect-total-replicas";
inline constexpr char kUnavailableLabelPrefix[] = "unavailable-pod.kruise.io/";
inline constexpr absl::Duration kDeletionTimeout = absl::Seconds(20);
inline constexpr absl::Duration kUpdatedDelayCheckTime = absl::Seconds(10);
inline constexpr size_t kMaxRecordedPods = 2000;

enum class Operation { kDelete, kEvict, kUpdate };
const char* OperationName(Operation op);  // "DELETE", "EVICT", "UPDATE"

struct IntOrPercent {
  bool percent = false;
  int value = 0;  // N of "N%" when percent
  // The value against `total`; a percentage rounds up.
  int Scaled(int total) const;
};

struct TargetRef {
  std::string api_version;
  std::string kind;
  std::string name;
};

struct PubStatus {
  int64_t observed_generation = 0;
  int32_t unavailable_allowed = 0;
  int32_t current_available = 0;
  int32_t desired_available = 0;
  int32_t total_replicas = 0;
  std::map<std::string, absl::Time> disrupted_pods = {};
  std::map<std::string, absl::Time> unavailable_pods = {};

  bool Records(const std::string& pod) const {
    return disrupted_pods.count(pod) > 0 || unavailable_pods.count(pod) > 0;
  }
  // The status object as the API server stores it (times RFC 3339, whole seconds; empty maps
  // omitted).
  nlohmann::json ToJson() const;
  bool operator==(const PubStatus&) const = default;
};

struct Pub {
  std::string namespace_;
  std::string name;
  int64_t generation = 0;
  std::string resource_version;
  std::optional<kube::LabelSelector> selector;  // exactly one of selector and target_ref
  std::optional<TargetRef> target_ref;
  std::optional<IntOrPercent> max_unavailable;  // exactly one of these two
  std::optional<IntOrPercent> min_available;
  std::set<Operation> protect_operations;  // all three unless the annotation narrows them
  std::optional<int32_t> protect_total_replicas;
  PubStatus status;
};

// Every problem of `pub` as "field.path: message" (empty when valid). `old_pub` is the stored
// object on UPDATE, null on CREATE.
std::vector<std::string> PubProblems(const nlohmann::json& pub, const nlohmann::json* old_pub);
// The typed object; INVALID_ARGUMENT joining PubProblems with "; " when it is not valid. A status
// time that does not parse reads as the infinite past (the entry still counts, and the controller
// expires it on its next pass).
absl::StatusOr<Pub> ParsePub(const nlohmann::json& pub);

// What the budget needs to know of one pod.
struct PodFacts {
  std::string name;
  bool active = true;       // not Succeeded/Failed, no deletionTimestamp
  bool ready = false;       // Running, Ready=True, no unavailable-pod.kruise.io/ label
  bool consistent = true;   // digest images running, in-place update finished
  bool no_protect = false;  // pub.kruise.io/no-protect: "true"
};
PodFacts PodFactsOf(const nlohmann::json& pod);

// The controller's status for `pub` over `pods` (the pods its selector or targetRef covers) at
// `now`. `workload_replicas`: the total the caller found from the workloads (see the top). The
// earliest time an entry kept in a map expires goes to `recheck` (nullopt when none), the pods
// whose deletion was allowed but who are still active after kDeletionTimeout to `not_deleted`.
PubStatus ComputeStatus(const Pub& pub, const std::vector<PodFacts>& pods,
                        std::optional<int32_t> workload_replicas, absl::Time now,
                        std::optional<absl::Time>* recheck = nullptr,
                        std::vector<std::string>* not_deleted = nullptr);

// Whether an UPDATE from `old_pod` to `new_pod` can make the pod unavailable (OpenKruise's
// IsPodUnavailableChanged): spec differs, or an unavailable-pod.kruise.io/ label appears.
bool UpdateMakesUnavailable(const nlohmann::json& old_pod, const nlohmann::json& new_pod);

struct Decision {
  bool allowed = true;
  std::string message;                  // why it is denied
  std::optional<PubStatus> new_status;  // set when the budget is spent: the status to write
};
// The webhook's decision for `op` on `pod` (facts of the pod before the operation) under `pub`.
Decision DecideDisruption(const Pub& pub, const PodFacts& pod, Operation op, bool dry_run,
                          absl::Time now);

}  // namespace kruise::manager::pub
