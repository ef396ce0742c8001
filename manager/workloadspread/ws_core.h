#pragma once

// WorkloadSpread (apps.kruise.io v1alpha1, short name ws; deploy/crds; issue 17) as pure
// functions: the object's validation, which WorkloadSpread a new pod falls under, the subset the
// pod webhook picks and what it injects, the deletion costs and status the controller writes,
// and the Adaptive rescheduling decision. Semantics are OpenKruise's (pkg/util/workloadspread,
// pkg/webhook/workloadspread/validating, pkg/controller/workloadspread), 0.10 unless noted:
//
// Object: spec.targetRef {apiVersion, kind, name} names a workload of the namespace: CloneSet
// (apps.kruise.io), Deployment or ReplicaSet (apps), Job (batch), StatefulSet (apps, or
// apps.kruise.io for the Advanced StatefulSet; OpenKruise 1.x). It cannot change, and two
// WorkloadSpreads of a namespace may not name the same group, kind and name
// (WorkloadSpreadConflicts). spec.subsets, at least one (0.10 wanted two; 1.x one), each with a
// unique non-empty name and optional requiredNodeSelectorTerm, preferredNodeSelectorTerms
// (weight 1..100), tolerations (all checked by Kubernetes' pod rules), patch (an object, applied
// as below) and maxReplicas: an integer >= 0 or "N%". Every maxReplicas is of one type (1.x);
// integers only for a StatefulSet (1.x); percentages sum to at most 100%, and to exactly 100%
// unless the last subset has no maxReplicas (1.x). scheduleStrategy.type is "", Fixed or
// Adaptive; adaptive may only be set with type Adaptive, needs an unbounded last subset, and
// rescheduleCriticalSeconds is in [0, 295 / (subsets - 1)] (1.x; 0.10 only asked for > 0, 0
// means "never reschedule" in the controller either way). WorkloadSpreadWarnings (not refusals:
// OpenKruise accepts both, and has no overlap check) flags, with the Fixed strategy, the subsets
// after one without maxReplicas (they never get a pod), and two subsets whose
// requiredNodeSelectorTerms hold the same requirements (values in any order): the same nodes.
//
// Which pods (the webhook, on pod CREATE): an active pod (not Succeeded/Failed, not being
// deleted) whose controller reference is a CloneSet, ReplicaSet, Job or StatefulSet
// (PodCanBeSpread). The WorkloadSpread whose targetRef equals the controller (same group, kind,
// name) takes it; for a targetRef Deployment the pod's controller is a ReplicaSet: the webhook
// reads that ReplicaSet (NeedsOwnerLookup) and, if its uid is the reference's, compares the
// ReplicaSet's own controller (PodMatchesTarget). At most one WorkloadSpread per pod (the first).
//
// Subset choice (ChooseSubset, on the WorkloadSpread's status as last read):
//  - one subset and no maxReplicas: that subset, no status change;
//  - StatefulSet targets: by ordinal (the name's "-N" suffix): subsets in spec order each take
//    maxReplicas ordinals (no maxReplicas: all the rest), subsets whose Schedulable condition is
//    False skipped; no status change (1.x);
//  - a named pod already in some subset's creatingPods or deletingPods (a retried admission):
//    that subset, no status change;
//  - otherwise the first entry of status.subsetStatuses, in status order, that is still in
//    spec, whose Schedulable condition is not False and whose missingReplicas is > 0 or -1
//    (no maxReplicas). With -1 nothing is written (1.x); else the pod's name (or, for a pod with
//    only generateName, the uid the caller generated, which also goes into the annotation) goes
//    into creatingPods at `now` and missingReplicas drops by one: that status must be written
//    with a resourceVersion test, and on a conflict the choice made again on the fresh object,
//    so that concurrent creations never take more than missingReplicas between them.
//  - no such subset (all full, all unschedulable, or no status yet because the controller has
//    not run): none. OpenKruise then lets the pod through unchanged (no subset, no annotation).
// RecordDeletion does the webhook's part on a pod DELETE or eviction: the subset recorded in
// the pod's annotation (unless missingReplicas is -1) gets the pod in deletingPods at `now` and
// missingReplicas + 1.
//
// Injection (PlanSubsetInjection, as OpenKruise's injectWorkloadSpreadIntoPod, in this order):
// the subset's tolerations appended to spec.tolerations; its preferredNodeSelectorTerms appended
// to spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution; its
// requiredNodeSelectorTerm becomes the only nodeSelectorTerm of
// requiredDuringSchedulingIgnoredDuringExecution when the pod has none, else its
// matchExpressions and matchFields are appended to every existing term (ANDed into each); then
// the patch as a strategic merge patch of the pod (StrategicMergePod); last the annotation
// apps.kruise.io/matched-workloadspread = {"name":<ws>,"subset":<subset>} (plus "uid" for a
// generated uid), which a patch cannot override. Unlike OpenKruise no empty
// affinity/nodeAffinity objects are added when the subset has no terms (the same pod to the
// scheduler).
//
// Controller (ComputeStatus, DeletionCosts, over the workload's pods and its replicas: CloneSet,
// Deployment, ReplicaSet and StatefulSet spec.replicas, Job spec.parallelism): pods belong to the
// subset named in their annotation when it names this WorkloadSpread and a subset of its spec
// (other pods are left alone). A percentage maxReplicas is scaled against the replicas,
// rounded up.
//  - Status per spec subset, in spec order: replicas = active pods; missingReplicas starts at
//    maxReplicas (-1 without) and drops by one (not below 0) per active pod; a deletingPods entry
//    is kept while its pod is still active and younger than 15 s (DeletePodTimeout), counting
//    the pod as gone again; a creatingPods entry is kept until a pod with that name (or uid in its
//    annotation) appears, at most 30 s (CreatePodTimeout), counting as a pod. Entries that time
//    out are reported (OpenKruise's CreatePodFailed / DeletePodFailed events).
//  - Adaptive with rescheduleCriticalSeconds > 0, every subset but the last: its pods that are
//    Pending, not on a node, not being deleted, with condition PodScheduled False reason
//    Unschedulable and created more than rescheduleCriticalSeconds ago are to be deleted (their
//    replacements go to a later subset), and the subset's condition Schedulable is False while
//    there are any; it returns to True 5 minutes (MaxScheduledFailedDuration) after it became
//    False. The last subset is always Schedulable True. Without Adaptive no such condition.
//    A condition keeps its lastTransitionTime while its status stays.
//  - Deletion cost (controller.kubernetes.io/pod-deletion-cost; CloneSet, Deployment and
//    ReplicaSet only), subset i of n: active pods within maxReplicas (or all, without one) get
//    100 * (n - i); when the subset holds more active pods than maxReplicas, the extra ones, the
//    first in Kubernetes' ActivePods order (unassigned, Pending, not ready, ready more recently,
//    more restarts, newer first), get -100 * (i + 1). So scale-down removes the pods beyond a
//    subset's limit first, from the first subset on, then whole subsets from the last one. This
//    is the formula OpenKruise's user manual documents; its first release wrote flat 100 / -100
//    / 0 (no maxReplicas).
//
// The webhooks (ws_webhook.h: the pod CREATE mutator, the validating handler, the pod DELETE and
// eviction recorder) and the controller (ws_controller.h: status, deletion costs, Adaptive
// deletions) exist and say where they differ from OpenKruise. Not here yet: e2e on kube-local (a
// CloneSet and a Deployment over two labelled nodes, fill order, scale-down order, Adaptive with
// an unschedulable subset).
// Thread-compatible, no state; never throws, whatever the JSON.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "kube/object.h"
#include "nlohmann/json.hpp"

namespace kruise::manager::workloadspread {

inline constexpr char kMatchedWorkloadSpreadAnnotation[] = "apps.kruise.io/matched-workloadspread";
inline constexpr char kPodDeletionCostAnnotation[] = "controller.kubernetes.io/pod-deletion-cost";
inline constexpr char kSubsetSchedulable[] = "Schedulable";  // subset condition type
inline constexpr absl::Duration kCreatePodTimeout = absl::Seconds(30);
inline constexpr absl::Duration kDeletePodTimeout = absl::Seconds(15);
inline constexpr absl::Duration kMaxScheduledFailedDuration = absl::Seconds(300);
inline constexpr int kDeletionCostUnit = 100;

struct TargetRef {
  std::string api_version;
  std::string kind;
  std::string name;
  std::string Group() const;  // "" for "v1" or a malformed apiVersion
};

struct MaxReplicas {
  bool percent = false;
  int value = 0;  // N of "N%" when percent
  // Against the workload's replicas; a percentage rounds up.
  int Scaled(int replicas) const;
};

struct Subset {
  std::string name;
  nlohmann::json required_term;             // NodeSelectorTerm, null when absent
  nlohmann::json preferred_terms;           // array (empty when absent)
  nlohmann::json tolerations;               // array (empty when absent)
  nlohmann::json patch;                     // object, null when absent
  std::optional<MaxReplicas> max_replicas;  // nullopt: no limit
};

struct SubsetCondition {
  std::string type;
  std::string status;  // "True", "False", "Unknown"
  absl::Time last_transition_time = absl::InfinitePast();
  std::string reason;
  std::string message;
  bool operator==(const SubsetCondition&) const = default;
};

struct SubsetStatus {
  std::string name;
  int32_t replicas = 0;
  int32_t missing_replicas = 0;  // -1: no maxReplicas
  std::map<std::string, absl::Time> creating_pods = {};
  std::map<std::string, absl::Time> deleting_pods = {};
  std::vector<SubsetCondition> conditions = {};

  const SubsetCondition* Condition(absl::string_view type) const;
  bool Unschedulable() const;  // condition Schedulable is False
  bool Records(const std::string& pod) const {
    return creating_pods.count(pod) > 0 || deleting_pods.count(pod) > 0;
  }
  bool operator==(const SubsetStatus&) const = default;
};

struct WorkloadSpreadStatus {
  int64_t observed_generation = 0;
  std::vector<SubsetStatus> subsets = {};
  const SubsetStatus* Find(const std::string& name) const;
  // As the API server stores it (times RFC 3339, whole seconds; empty maps and lists omitted).
  nlohmann::json ToJson() const;
  bool operator==(const WorkloadSpreadStatus&) const = default;
};

struct WorkloadSpread {
  std::string namespace_;
  std::string name;
  int64_t generation = 0;
  std::string resource_version;
  TargetRef target_ref;
  std::vector<Subset> subsets;
  bool adaptive = false;
  int32_t reschedule_critical_seconds = 0;  // 0: never reschedule
  WorkloadSpreadStatus status;

  const Subset* FindSubset(const std::string& name) const;
  bool TargetsStatefulSet() const { return target_ref.kind == "StatefulSet"; }
  // Deletion costs are written for CloneSet, Deployment and ReplicaSet targets only.
  bool UsesDeletionCost() const;
};

// ---- Validation ---------------------------------------------------------------------------

// Every problem of `ws` as "field.path: message" (empty when valid). `old_ws` is the stored
// object on UPDATE (targetRef's group, kind and name cannot change), null on CREATE.
std::vector<std::string> WorkloadSpreadProblems(const nlohmann::json& ws,
                                                const nlohmann::json* old_ws);
// "spec.targetRef: ..." when another WorkloadSpread of `others` (same namespace; one of the same
// name is skipped) names the same group, kind and name.
std::vector<std::string> WorkloadSpreadConflicts(const nlohmann::json& ws,
                                                 const std::vector<const nlohmann::json*>& others);
// Admission warnings (see "Object" above); empty for an invalid object.
std::vector<std::string> WorkloadSpreadWarnings(const nlohmann::json& ws);
// The typed object; INVALID_ARGUMENT joining WorkloadSpreadProblems with "; " when not valid. A
// status time that does not parse reads as the infinite past (the entry expires).
absl::StatusOr<WorkloadSpread> ParseWorkloadSpread(const nlohmann::json& ws);

// ---- Which pods ---------------------------------------------------------------------------

// Active, with a controller reference to a CloneSet, ReplicaSet, Job or StatefulSet.
bool PodCanBeSpread(const nlohmann::json& pod);
// The pod's controller is the target itself.
bool OwnerIsTarget(const TargetRef& target, const kube::OwnerReference& owner);
// The target is a Deployment and `owner` (the pod's controller) an apps ReplicaSet: the
// webhook must read that ReplicaSet to decide.
bool NeedsOwnerLookup(const TargetRef& target, const kube::OwnerReference& owner);
// The whole decision for a pod CREATE: PodCanBeSpread and the controller is the target, or
// (NeedsOwnerLookup) `owner_object` is that ReplicaSet (its uid the reference's) and its own
// controller is the target. `owner_object` may be null (not looked up, not found).
bool PodMatchesTarget(const TargetRef& target, const nlohmann::json& pod,
                      const nlohmann::json* owner_object);

// ---- Webhook: subset choice, injection, deletion record -------------------------------------

struct SubsetChoice {
  std::string subset;  // "" when no subset is suitable: the pod is let through unchanged
  // Set when the pod has no name and was recorded under this generated uid (for the annotation).
  std::string generated_uid;
  // The status to write (resourceVersion-guarded) before answering; nullopt: nothing to write.
  std::optional<WorkloadSpreadStatus> new_status;
};
// See "Subset choice" above. `generated_uid`: what identifies a pod without a name (the caller
// generates a fresh UUID per admission attempt).
SubsetChoice ChooseSubset(const WorkloadSpread& ws, const nlohmann::json& pod,
                          const std::string& generated_uid, absl::Time now);

// The status to write when `pod` (as it is before a DELETE or eviction) goes; nullopt when there
// is nothing to record (no or another WorkloadSpread in its annotation, not active, no
// controller, already recorded, subset unknown or without maxReplicas).
std::optional<WorkloadSpreadStatus> RecordDeletion(const WorkloadSpread& ws,
                                                   const nlohmann::json& pod, absl::Time now);

// The apps.kruise.io/matched-workloadspread value, as Go's encoding/json writes it.
std::string MatchedAnnotationValue(const std::string& ws, const std::string& subset,
                                   const std::string& uid);
struct MatchedWorkloadSpread {
  std::string name;
  std::string subset;
  std::string uid;
};
// The pod's annotation, nullopt when absent or not a JSON object with a string name.
std::optional<MatchedWorkloadSpread> MatchedOf(const nlohmann::json& pod);

// `patch` applied to `target` as a Kubernetes strategic merge patch of a Pod: objects merged
// member by member (null deletes), lists replaced except those with a merge key in core/v1's
// Pod: volumes, containers, initContainers, ephemeralContainers, imagePullSecrets (name),
// hostAliases (ip), topologySpreadConstraints (topologyKey), a container's env (name), ports
// (containerPort), volumeMounts (mountPath), volumeDevices (devicePath), and metadata's
// ownerReferences (uid); metadata.finalizers is merged as a set. In merged lists an element with
// the key of an existing one is merged into it, others are appended; "$patch": "delete" removes
// one, "$patch": "replace" in an object replaces the object by the rest of it; other "$"
// directives are ignored. INVALID_ARGUMENT (target unchanged) for a patch that is not an object
// or a merged-list element without its merge key.
absl::Status StrategicMergePod(nlohmann::json* target, const nlohmann::json& patch);

// The injection of `subset` into `pod` as RFC 6902 operations against the unmodified pod (for
// PodEdit::AddOps): objects edited member by member, lists element by element where they only
// grow. INVALID_ARGUMENT when the subset is unknown, the pod is not an object, a field the
// injection extends has the wrong type, or the patch does not apply.
absl::StatusOr<nlohmann::json> PlanSubsetInjection(const nlohmann::json& pod,
                                                   const WorkloadSpread& ws,
                                                   const std::string& subset,
                                                   const std::string& generated_uid);

// ---- Controller ---------------------------------------------------------------------------

struct StatusPlan {
  WorkloadSpreadStatus status;
  // Adaptive: pods to delete so that their replacements go to a later subset.
  std::vector<std::string> pods_to_delete;
  // Expired records, for events: creatingPods keys never seen, deletingPods pods not gone.
  std::vector<std::string> not_created;
  std::vector<std::string> not_deleted;
  // The earliest time something above changes without a pod event (an entry expiring, a pod
  // becoming critical, a subset returning to Schedulable); nullopt when none.
  std::optional<absl::Time> recheck;
};
// The controller's status for `ws` over `pods` (the workload's pods) and the workload's
// `replicas`, at `now`. See "Controller" above.
StatusPlan ComputeStatus(const WorkloadSpread& ws, const std::vector<nlohmann::json>& pods,
                         int32_t replicas, absl::Time now);

// Pod name -> the pod-deletion-cost value the controller writes, for the active pods of `pods`
// in the subsets of `ws` (empty when !ws.UsesDeletionCost()). The controller patches only pods
// whose annotation differs, and never adds a "0".
std::map<std::string, int> DeletionCosts(const WorkloadSpread& ws,
                                         const std::vector<nlohmann::json>& pods, int32_t replicas);

}  // namespace kruise::manager::workloadspread
