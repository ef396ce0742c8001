#pragma once

// Advanced DaemonSet (apps.kruise.io DaemonSet, issue 16): which nodes run a daemon pod, and
// what one reconcile round creates, deletes and updates, as pure functions over the set's spec,
// the nodes and a view of its pods. The controller (ads_controller.h) reads the caches, calls these
// and writes. Semantics as OpenKruise's pkg/controller/daemonset (itself the core DaemonSet
// controller plus partition, node selector, in-place update and hooks):
//
//  - Eligibility (NodeShouldRunDaemonPod). The template's pod, with the tolerations the core
//    controller adds to every daemon pod (node.kubernetes.io/not-ready and /unreachable NoExecute;
//    disk-pressure, memory-pressure, pid-pressure, unschedulable NoSchedule; network-unavailable
//    NoSchedule with hostNetwork), is matched against the node: a template spec.nodeName other
//    than the node's, a nodeSelector label missing or different, or a required node affinity
//    (nodeSelectorTerms ORed; a term's matchExpressions on labels and matchFields on
//    metadata.name ANDed; an empty or malformed term matches nothing) that does not match:
//    neither should_run nor should_continue_running. A NoSchedule or NoExecute taint no
//    toleration tolerates: not should_run; should_continue_running only if every NoExecute taint
//    is tolerated. PreferNoSchedule taints never matter. Resources and host ports are the
//    scheduler's business (pods are created with a node affinity and scheduled normally).
//  - Scale (PlanScale), per node in the given order:
//      * should_run and no pod at all (terminating ones count): create one;
//      * should_continue_running: a Failed pod is deleted (unless the controller's failure backoff
//        holds that node); a pod in PreparingDelete is deleted; of the others, without surge
//        (maxSurge 0) all but the oldest are deleted (scheduled before unscheduled, then older,
//        then name); with surge, the oldest pod of the update revision and the oldest other one
//        are kept and the rest deleted, and of those two the old one is deleted once it is not
//        Ready or the new one is available; with surge and no live pod, one is created;
//      * not should_continue_running: every live pod on the node is deleted.
//    Unscheduled pods aimed at a node that no longer exists are deleted. With updateStrategy
//    RollingUpdate and a non-zero partition, the nodes to create on are sorted by name; with
//    partitioned scaling (scaleStrategy.partitionedScaling, or the v1alpha1 annotation
//    daemonset.kruise.io/progressive-create-pod: "true") only the first
//    desired - (nodes with a pod of the update revision) - partition of them get a pod. Pods are
//    created at the update revision.
//  - Update (PlanUpdate; RollingUpdate and not paused). maxUnavailable and maxSurge scale against
//    the number of eligible nodes, rounded up; both 0 reads as maxUnavailable 1. The scope is the
//    eligible nodes (should_run; others spend no budget, as OpenKruise 1.9), walked by name from
//    the highest: nodes already at the update revision (or with more than one old or new pod)
//    first, then nodes whose old pod is gone or PreparingDelete, then the nodes to update: those
//    rollingUpdate.selector matches when it is set (only those), else all the rest; the list is
//    cut to (scope size - partition) nodes, so `partition` nodes (the lowest names) keep the old
//    revision.
//      * maxSurge 0: a node with no usable pod, with two, with an unavailable new pod or a new pod
//        in PreparingDelete counts unavailable; an old pod that is not available is replaced at
//        once; available old pods are replaced while fewer than maxUnavailable are unavailable.
//        Replacing is deleting (a new pod is created by the next round's scale), or, with
//        rollingUpdateType InPlaceIfPossible, an in-place update when the pod carries the
//        InPlaceUpdateReady readiness gate and manager/inplace's CalculateInPlaceUpdate allows it
//        between the pod's revision and the update revision.
//      * maxSurge > 0: a node with an old pod and no new one gets a new pod at once when the old
//        one is not available, else while fewer than maxSurge surge pods are pending; a node whose
//        new pod is not yet available (or is PreparingDelete) counts as a pending surge; once the
//        new pod is available the old one is deleted.
//    Available: Ready for minReadySeconds (Kubernetes' IsPodAvailable; lifecycle state plays no
//    part, as OpenKruise).
//  - Every round's deletions go through the preDelete hook: a pod the hook holds (one of its
//    labels with that value, or one of its finalizers) is moved to PreparingDelete instead, and
//    deleted by a later round once released. Creations, deletions and in-place updates are each
//    capped at burstReplicas (default 250; a percentage of the desired number, rounded down).
//
// Not here (ads_controller.h): ControllerRevisions and their history, status writes and
// conditions, expectations, the failed-pod backoff clock, image pre-download
// (manager/inplace/predownload.h), the pod a creation writes (its node affinity, the
// InPlaceUpdateReady readiness gate for InPlaceIfPossible, controller-revision-hash label).
//
// Pure functions, thread-compatible; never throw, whatever the JSON.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kube/object.h"
#include "manager/inplace/inplace_update.h"
#include "manager/inplace/update_order.h"
#include "manager/workload/lifecycle.h"
#include "nlohmann/json.hpp"

namespace kruise::manager::daemonset {

using Json = nlohmann::json;

inline constexpr char kProgressiveCreatePodAnnotation[] =
    "daemonset.kruise.io/progressive-create-pod";

// ---- Eligibility ----------------------------------------------------------------------------

struct Toleration {
  std::string key;
  std::string op;  // "Exists", or "Equal"/"" (compare values)
  std::string value;
  std::string effect;  // "" tolerates every effect
  bool operator==(const Toleration&) const = default;
};

struct Taint {
  std::string key;
  std::string value;
  std::string effect;  // NoSchedule | PreferNoSchedule | NoExecute
};

// Kubernetes' ToleratesTaint.
bool Tolerates(const Toleration& toleration, const Taint& taint);

// The tolerations the core DaemonSet controller adds to every daemon pod
// (AddOrUpdateDaemonPodTolerations), network-unavailable only with hostNetwork.
std::vector<Toleration> DaemonPodTolerations(bool host_network);

// One requirement of a node selector term.
struct NodeSelectorRequirement {
  std::string key;
  std::string op;  // In | NotIn | Exists | DoesNotExist | Gt | Lt
  std::vector<std::string> values;
};
struct NodeSelectorTerm {
  std::vector<NodeSelectorRequirement> match_expressions;  // on node labels
  std::vector<NodeSelectorRequirement> match_fields;       // on metadata.name
  bool malformed = false;  // an operator, value count or field key Kubernetes refuses
};

// What eligibility reads of the pod template, parsed once per template.
struct DaemonPlacement {
  std::string node_name;                             // spec.nodeName
  std::map<std::string, std::string> node_selector;  // spec.nodeSelector
  bool has_required_affinity = false;
  std::vector<NodeSelectorTerm> required_terms;  // requiredDuringSchedulingIgnoredDuringExecution
  std::vector<Toleration> tolerations;           // the template's, then the daemon ones missing
};

// Reads spec.template. INVALID_ARGUMENT naming the field when a part of it has the wrong JSON
// type (a malformed selector term is not an error: it matches nothing, as in Kubernetes).
absl::StatusOr<DaemonPlacement> ParsePlacement(const Json& pod_template);

// What eligibility and the planners read of a node.
struct NodeView {
  std::string name;
  std::map<std::string, std::string> labels;
  std::vector<Taint> taints;
};
// Reads a Node as the API server serves it; mistyped parts are skipped.
NodeView ViewNode(const Json& node);

struct Eligibility {
  bool should_run = false;               // a pod should be created here if there is none
  bool should_continue_running = false;  // a pod already here may stay
  std::string reason;                    // why not, for the log ("" when should_run)
};
Eligibility NodeShouldRunDaemonPod(const DaemonPlacement& placement, const NodeView& node);

// ---- Spec and pods --------------------------------------------------------------------------

// spec.lifecycle's hooks, as every workload reads them (manager/workload/lifecycle.h); a
// DaemonSet uses preDelete only.
using workload::LifecycleHook;

// The parts of a DaemonSet the planners read, OpenKruise's defaults applied.
struct AdsSpec {
  Json burst_replicas = 250;
  bool on_delete = false;             // updateStrategy.type OnDelete
  bool in_place_if_possible = false;  // rollingUpdateType InPlaceIfPossible
  Json max_unavailable = 0;           // IntOrString, 0 when unset
  Json max_surge = 0;
  Json partition = 0;                                  // IntOrString
  std::optional<kube::LabelSelector> update_selector;  // rollingUpdate.selector when set
  bool paused = false;
  bool partitioned_scaling = false;
  int min_ready_seconds = 0;
  std::optional<LifecycleHook> pre_delete;
  std::optional<int64_t>
      template_generation;  // annotation deprecated.daemonset.template.generation
};

// Reads a DaemonSet (v1alpha1 or v1beta1). A field of the wrong type is INVALID_ARGUMENT naming
// it (validation proper is the webhook's).
absl::StatusOr<AdsSpec> ParseAdsSpec(const Json& daemonset);

// The spec's numbers resolved against `desired` (the eligible nodes).
struct ScaledNumbers {
  int max_unavailable = 1;   // rounded up; 1 when both it and max_surge are 0 and desired > 0
  int max_surge = 0;         // rounded up
  int partition = 0;         // a percentage rounded up (v1beta1)
  int burst_replicas = 250;  // a percentage rounded down
};
absl::StatusOr<ScaledNumbers> ScaleNumbers(const AdsSpec& spec, int desired);

// What the planners read of one pod of the set.
struct AdsPod : inplace::PodFacts {
  std::string node;                 // spec.nodeName, else the node its required affinity names
  std::string revision;             // label controller-revision-hash
  std::string template_generation;  // label pod-template-generation
  bool terminating = false;         // metadata.deletionTimestamp set
  std::string lifecycle_state;      // label lifecycle.apps.kruise.io/state
  std::vector<std::string> finalizers;
  bool in_place_gate = false;       // readinessGates has InPlaceUpdateReady
  bool in_place_not_ready = false;  // condition InPlaceUpdateReady present and not True
};

// Reads a pod as the API server serves it. INVALID_ARGUMENT on mistyped fields.
absl::StatusOr<AdsPod> ViewPod(const Json& pod);

// Whether `pod` is at the update revision (its hash, or the template generation when both set).
bool IsUpdated(const AdsSpec& spec, const AdsPod& pod, const std::string& update_revision);
// Kubernetes' IsPodAvailable: Ready, for minReadySeconds at `now`.
bool IsAvailable(const AdsPod& pod, int min_ready_seconds, absl::Time now);
// Whether the hook holds the pod (any of its labels with that value, or any finalizer).
bool IsPodHooked(const std::optional<LifecycleHook>& hook, const AdsPod& pod);

// ---- Plans ----------------------------------------------------------------------------------

enum class DeleteReason {
  kFailed,           // phase Failed on an eligible node (the controller records its backoff)
  kPreparingDelete,  // its preDelete hook released it
  kExcess,           // more pods on the node than it may run
  kNotEligible,      // the node may not run it (selector, affinity, NoExecute taint)
  kNodeGone,         // unscheduled, aimed at a node that does not exist
  kUpdate,           // replaced by the rolling update
};

struct PodAction {
  std::string pod;
  std::string node;
  DeleteReason reason = DeleteReason::kExcess;
  bool operator==(const PodAction&) const = default;
};

// Deletions after the preDelete hook and burstReplicas.
struct Deletions {
  std::vector<PodAction> remove;          // delete now
  std::vector<PodAction> prepare_delete;  // held by the hook: set lifecycle PreparingDelete
};

struct ScalePlan {
  int desired_number_scheduled = 0;
  std::vector<std::string> create;  // nodes to create a pod on, in order (burst applied)
  Deletions deletions;
  int create_wanted = 0;                                // creations before burstReplicas
  absl::Duration recheck_after = absl::ZeroDuration();  // a surge pod's minReadySeconds wait
};

// `nodes`: every node of the cluster; `pods`: the set's pods (any state). `failed_backoff`: nodes
// whose failed pod the controller's backoff keeps for now.
absl::StatusOr<ScalePlan> PlanScale(const AdsSpec& spec, const DaemonPlacement& placement,
                                    const std::vector<NodeView>& nodes,
                                    const std::vector<AdsPod>& pods,
                                    const std::string& update_revision, absl::Time now,
                                    const std::set<std::string>& failed_backoff = {});

struct InPlaceAction {
  std::string pod;
  std::string node;
  inplace::InPlaceUpdateSpec update;
};

struct UpdatePlan {
  ScaledNumbers numbers;
  std::vector<std::string> scope;   // the nodes the update may touch, in its order
  int unavailable = 0;              // maxSurge 0: nodes counted unavailable
  int surging = 0;                  // maxSurge > 0: surge pods pending
  std::vector<std::string> create;  // surge: nodes to get a new pod (burst applied)
  Deletions deletions;
  std::vector<InPlaceAction> in_place;  // burst applied
};

// The rolling update of one round (empty for OnDelete and while paused). `templates` maps a
// revision's controller-revision-hash to its pod template ({metadata, spec}); it is read only for
// InPlaceIfPossible (a pod whose revision is missing from it is replaced).
absl::StatusOr<UpdatePlan> PlanUpdate(const AdsSpec& spec, const DaemonPlacement& placement,
                                      const std::vector<NodeView>& nodes,
                                      const std::vector<AdsPod>& pods,
                                      const std::string& update_revision,
                                      const std::map<std::string, Json>& templates, absl::Time now);

// The status counters of the core controller, over the eligible nodes (the oldest pod of a node
// speaks for it).
struct StatusCounts {
  int desired_number_scheduled = 0;
  int current_number_scheduled = 0;
  int number_misscheduled = 0;
  int number_ready = 0;
  int updated_number_scheduled = 0;
  int number_available = 0;  // also needs InPlaceUpdateReady not False
  int number_unavailable = 0;
  bool operator==(const StatusCounts&) const = default;
};
StatusCounts CountStatus(const AdsSpec& spec, const DaemonPlacement& placement,
                         const std::vector<NodeView>& nodes, const std::vector<AdsPod>& pods,
                         const std::string& update_revision, absl::Time now);

}  // namespace kruise::manager::daemonset
