#pragma once

// The SidecarSet controller (leader only, issue 15): a thin loop around the upgrade planner of
// sidecarset_upgrade.h (cold and hot upgrades), after OpenKruise's pkg/controller/sidecarset
// (sidecarset_processor.go, sidecarset_hotupgrade.go).
//
// One reconcile of a SidecarSet (cluster-scoped):
//   1. candidate pods from the shared pod cache (SharedInformers::Pods(); the namespace index
//      when spec.namespace is set, else every pod), kept when UpgradeMatcher matches them (the
//      Namespace's labels from the controller's namespace cache) and their
//      kruise.io/sidecarset-injected-list names the set;
//   2. waits while a pod it patched is older in the cache than the patch
//      (ResourceVersionExpectations; the pod's event brings the set back, the requeue is a
//      fallback): a stale cache would show that pod as old and ready, and the planner would spend
//      the maxUnavailable budget on another pod;
//  2b. keeps the set's ControllerRevision history (sidecarset_revision.h; OpenKruise's
//      registerLatestRevision and truncateHistory), when a revision informer is given: the
//      revision of the current spec exists in the manager's namespace (created under its
//      deterministic name; AlreadyExists with the same data is ours, other data counts a
//      collision and retries under the next name), an older revision recording it becomes the
//      newest (its `revision` is renumbered: a rollback), the customVersion label follows the
//      set, and revisions beyond revisionHistoryLimit no pod, injectionStrategy.revision or the
//      latest uses are deleted. The latest's name is the planner's latest_revision, so upgraded
//      pods record it in their hash annotation's controllerRevision, as injected ones do;
//   3. plans (PlanSidecarSetUpgrade) and writes status {observedGeneration, matchedPods,
//      updatedPods, readyPods, updatedReadyPods, latestRevision, collisionCount} (merge patch of
//      the status subresource, only when a value changed);
//   4. records event NotUpgradablePods (OpenKruise's reason) once per not-upgradable pod and set
//      hash (remembered in memory: a reconcile per pod event must not repeat it); sets this set's
//      entry of the pod condition SidecarSetUpgradable false on plan.mark_not_upgradable pods and
//      true again on updated pods it marks false (JSON patch of pods/status with the
//      resourceVersion test, only when it changes: SidecarSetUpgradableConditionPatch);
//  4b. hot upgrade step 2 for plan.reset pods (SidecarPodHotUpgradeResetPatch, same guard), with
//      OpenKruise's pod events ResetContainerSucceed / ResetContainerFailed;
//   5. patches each pod picked with SidecarPodUpgradePatch, a JSON patch whose first op is a
//      `test` of metadata.resourceVersion: a pod changed since the cache saw it is refused by the
//      API server (422; told from a bad patch by re-reading the pod) and the set is requeued, so a
//      stale cache can never patch a pod twice or over someone else's change. No blind retry.
//      One event UpgradedPods per batch patched (our reason: OpenKruise only logs); each pod
//      patched gets SidecarSetUpgradable true (on the pod the server returned). With a
//      disruption gate (the PodUnavailableBudget, manager/inplace/disruption_gate.h), each pod
//      is first put to the gate (UPDATE): a denied pod is skipped this round (the others, often
//      of other workloads and budgets, go on), with one Warning event PodUnavailableBudgetDenied
//      per round naming the budgets and their pods and a requeue after kDisruptionRetry.
//      OpenKruise's SidecarSet controller asks nothing (its pod update meets the webhook's UPDATE
//      check, which we keep too); the hot-upgrade reset of 4b is not put to the gate;
//   6. requeues after `upgrading_recheck` while a pod is mid-upgrade (its container restart is a
//      pod event that normally brings the set back first).
//
// Not here: image pre-download, re-queueing sets when a Namespace's labels change (the next pod or
// set event re-reads them), the note on pods the pod webhook did not inject
// (sidecarset_not_injected.h, a controller of its own in the same group).
//
// Thread-safety: Reconcile may run concurrently for different SidecarSets.

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "kube/client.h"
#include "kube/controller.h"
#include "kube/event_recorder.h"
#include "kube/expectations.h"
#include "kube/informer.h"
#include "manager/controller_group.h"
#include "manager/inplace/disruption_gate.h"

namespace kruise::manager::sidecarset {

struct SidecarSetReconcilerOptions {
  Clock* clock = Clock::Real();
  std::string manager_namespace = "kruise-system";  // never matched (nor kube-system)
  // Fallback re-check while waiting for the cache to show a patch (events come back sooner).
  absl::Duration expectation_recheck = absl::Seconds(10);
  // Re-check while pods are mid-upgrade (OpenKruise: 1 s in the same situation).
  absl::Duration upgrading_recheck = absl::Seconds(2);
  // Asked before each pod upgrade (see step 5); null: none. Must outlive the reconciler.
  inplace::DisruptionGate* disruption_gate = nullptr;
};

struct SidecarSetInformers {
  kube::Informer* sidecarsets = nullptr;  // SidecarSetInformerOptions() (sidecarset_webhook.h)
  kube::Informer* pods = nullptr;         // SharedInformers::PodOptions()
  kube::Informer* namespaces = nullptr;   // NamespaceInformerOptions(); may be null
  // SidecarSetRevisionInformerOptions(manager_namespace); null: no revision history is kept.
  kube::Informer* revisions = nullptr;
};

class SidecarSetReconciler final : public kube::Reconciler {
 public:
  // Everything given must outlive the reconciler. `recorder` may be null.
  SidecarSetReconciler(kube::KubeClient* client, SidecarSetInformers informers,
                       kube::EventRecorder* recorder, SidecarSetReconcilerOptions opts);
  absl::StatusOr<kube::Result> Reconcile(const kube::Request& req) override;
  // Forgets the expectations of pods deleted from `pods` (the pod informer). Before it starts.
  void ObserveThrough(kube::Informer* pods);

 private:
  absl::StatusOr<kube::Json> PatchPod(const kube::Json& pod, const kube::Json& ops,
                                      const std::string& subresource = "");
  // PatchPod for a pod a plan picked: the patched pod; nullopt when the pod is gone (skip it);
  // an error otherwise (stop: the plan is stale), which `report` is given first unless it is a
  // conflict (a requeue, not a failure worth an event).
  absl::StatusOr<std::optional<kube::Json>> PatchPlannedPod(
      const kube::Json& pod, const kube::Json& ops,
      absl::FunctionRef<void(const absl::Status&)> report);
  // Writes `set_name`'s entry of the pod's SidecarSetUpgradable condition when it changes.
  absl::Status SetUpgradable(const std::string& set_name, const kube::Json& pod, bool upgradable,
                             absl::Time now);
  void PodEvent(const kube::Json& pod, bool warning, const std::string& reason,
                const std::string& message);
  void Event(const kube::Json& set, bool warning, const std::string& reason,
             const std::string& message);
  // True the first time `pod_uid` is reported not upgradable for `set` at `hash`.
  bool FirstReport(const std::string& set, const std::string& hash, const std::string& pod_uid);
  // Step 2b: the latest revision's name and the collision count to record.
  struct RevisionSync {
    std::string latest;
    int32_t collision_count = 0;
  };
  absl::StatusOr<RevisionSync> SyncRevisions(
      const kube::Json& set, const std::vector<std::shared_ptr<const kube::Json>>& pods);

  kube::KubeClient* const client_;
  const SidecarSetInformers inf_;
  kube::EventRecorder* const recorder_;
  const SidecarSetReconcilerOptions opts_;
  kube::ResourceVersionExpectations rv_expectations_;
  absl::Mutex mu_;
  // set name -> (hash, pod uids already reported not upgradable at that hash).
  std::map<std::string, std::pair<std::string, std::set<std::string>>> reported_
      ABSL_GUARDED_BY(mu_);
};

// The SidecarSets an informer event of `pod` concerns: its kruise.io/sidecarset-injected-list.
std::vector<kube::Request> SidecarSetsOfPod(const kube::Json& pod);

// The "sidecarset" controller group: informers for SidecarSets and Namespace labels, the shared
// pod cache, the reconciler and a kube::Controller with --sidecarset-workers (default 3); with the
// PodWebhook gate, also the "sidecarset-not-injected" controller (one worker) that notes pods
// created without the sidecars of a matching set (sidecarset_not_injected.h). A no-op (with a
// warning) when the SidecarSet CRD is not served.
std::unique_ptr<ControllerGroup> NewSidecarSetControllerGroup();

}  // namespace kruise::manager::sidecarset
