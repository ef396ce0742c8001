#pragma once

// The WorkloadSpread controller (leader only, issue 17), after OpenKruise's
// pkg/controller/workloadspread, over the pure core of ws_core.h. It keeps each WorkloadSpread's
// status (the subsets' replicas, missingReplicas, creatingPods/deletingPods, the Adaptive
// Schedulable condition) for the pod webhook (ws_webhook.h) to spend, writes the pods'
// deletion costs and, with the Adaptive strategy, deletes pods stuck unschedulable.
//
// One reconcile of a WorkloadSpread (namespace/name, from the shared WorkloadSpread informer):
//   1. its workload: the targetRef (CloneSet, apps.kruise.io StatefulSet, apps/v1 Deployment,
//      ReplicaSet, StatefulSet, batch/v1 Job) from this controller's compact caches of those
//      kinds (WsTargetInformers; from the API server when that kind is not cached); replicas is
//      spec.replicas (a Job's spec.parallelism; default 1; 0 when the workload does not exist);
//   2. its pods: those of the shared pod cache whose apps.kruise.io/matched-workloadspread
//      annotation names it (the cache's kWorkloadSpreadIndex), kept when their controller is
//      the workload (same group, kind and name, and uid when the workload was found) or, for a
//      Deployment, an apps ReplicaSet `<deployment>-<pod-template-hash>`;
//   3. deletion costs (CloneSet, Deployment, ReplicaSet targets): every pod whose
//      controller.kubernetes.io/pod-deletion-cost differs from DeletionCosts gets a merge patch of
//      that one annotation (a pod without one that should get "0" is left alone); a failed
//      patch makes the reconcile an error (retried) once the steps below are done;
//   4. ComputeStatus at now; written when its JSON differs from the stored status, as a JSON
//      patch of the status subresource whose first operation tests metadata.resourceVersion
//      (then `add` of observedGeneration and subsetStatuses: nothing else of the status is
//      touched). The pod webhook writes the same status when it places or lets go a pod: a
//      refused test (422 or 409) re-reads the WorkloadSpread from the API server and computes
//      again from it, so the creatingPods/deletingPods entries the webhook added are kept (until
//      their pod shows up or goes, or they time out), up to kube::kConflictRetries times (then an
//      error: the rate-limited requeue). When the write expired entries, a Warning event per
//      entry: CreatePodFailed (a pod recorded at admission never appeared within 30 s) or
//      DeletePodFailed (a pod whose deletion was admitted is still there after 15 s);
//   5. Adaptive (rescheduleCriticalSeconds > 0): after the status with the subset's Schedulable
//      condition False is stored (so the webhook sends the replacements to a later subset), the
//      pods ComputeStatus names are deleted with a uid precondition (a pod recreated under the
//      same name, as a StatefulSet's, is not touched), each remembered in the controller's
//      expectations until the pod cache shows it terminating or gone: while any is outstanding no
//      further deletion is made for that WorkloadSpread, so a stale cache never deletes twice.
//      A Normal event RescheduledPod per deleted pod, a Warning DeletePodFailed per failure;
//   6. requeues one second after ComputeStatus's recheck (an entry expiring, a pod becoming
//      critical, a subset returning to Schedulable); pod, workload and WorkloadSpread events
//      bring it back sooner.
// Events that reconcile a WorkloadSpread: its own changes; a pod of the shared cache whose
// annotation names it, on add and delete, and on update when what the controller reads of it
// changed (WsPodFactsChanged); its target workload's replicas changing.
//
// Thread-safety: Reconcile may run concurrently for different WorkloadSpreads.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "kube/client.h"
#include "kube/controller.h"
#include "kube/event_recorder.h"
#include "kube/expectations.h"
#include "kube/informer.h"
#include "manager/controller_group.h"
#include "manager/workloadspread/ws_core.h"

namespace kruise::manager::workloadspread {

// A kind a targetRef may name, with the cache this controller keeps of it.
struct WsTargetKind {
  std::string group;  // "apps.kruise.io", "apps", "batch"
  std::string kind;   // "CloneSet", "StatefulSet", "Deployment", "ReplicaSet", "Job"
  kube::Resource resource;
  std::string Key() const { return group + "/" + kind; }
};
const std::vector<WsTargetKind>& WsTargetKinds();
// A workload as these caches keep it: apiVersion, kind, metadata name, namespace, uid,
// resourceVersion, spec.replicas and spec.parallelism (a few hundred bytes per workload).
void CompactWorkloadForWorkloadSpread(nlohmann::json& workload);
// The informer of one kind: CompactWorkloadForWorkloadSpread, no index (looked up by name).
kube::InformerOptions WsTargetInformerOptions(const WsTargetKind& kind);

// Whether an update of a pod of the shared cache changes anything the controller reads: the two
// annotations, deletion, phase, node, the Ready and PodScheduled conditions, restart counts.
bool WsPodFactsChanged(const nlohmann::json& old_pod, const nlohmann::json& new_pod);

struct WsInformers {
  kube::Informer* workloadspreads = nullptr;  // WorkloadSpreadInformerOptions() (ws_webhook.h)
  kube::Informer* pods = nullptr;             // SharedInformers::PodOptions()
  // WsTargetKind::Key() -> its informer (WsTargetInformerOptions); a kind not here is read from
  // the API server.
  std::map<std::string, kube::Informer*> targets;
};

struct WsReconcilerOptions {
  Clock* clock = Clock::Real();
};

class WorkloadSpreadReconciler final : public kube::Reconciler {
 public:
  // Everything given must outlive the reconciler. `recorder` may be null.
  WorkloadSpreadReconciler(kube::KubeClient* client, WsInformers informers,
                           kube::EventRecorder* recorder, WsReconcilerOptions opts);
  absl::StatusOr<kube::Result> Reconcile(const kube::Request& req) override;
  // Feeds the deletion expectations from `pods` (the informer in WsInformers); before it starts.
  void ObserveThrough(kube::Informer* pods);

 private:
  struct Workload {
    bool found = false;
    std::string uid;
    int32_t replicas = 0;
  };
  absl::StatusOr<Workload> WorkloadOf(const WorkloadSpread& ws);
  std::vector<nlohmann::json> PodsOf(const WorkloadSpread& ws, const Workload& workload);
  // Patches the pods whose deletion cost differs; the first error after trying them all.
  absl::Status SyncDeletionCosts(const WorkloadSpread& ws, const std::vector<nlohmann::json>& pods,
                                 int32_t replicas);
  // Writes `status` over `object` (its resourceVersion the test): the patch's result.
  absl::Status WriteStatus(const nlohmann::json& object, const WorkloadSpreadStatus& status);
  absl::Status DeletePods(const nlohmann::json& object, const WorkloadSpread& ws,
                          const StatusPlan& plan, const std::vector<nlohmann::json>& pods);
  void Event(const nlohmann::json& ws, bool warning, const std::string& reason,
             const std::string& message);

  kube::KubeClient* const client_;
  const WsInformers inf_;
  kube::EventRecorder* const recorder_;
  const WsReconcilerOptions opts_;
  // Adaptive deletions per WorkloadSpread key, by pod uid.
  kube::ScaleExpectations deletions_;
};

// The "workloadspread" controller group: the shared WorkloadSpread informer
// (kWorkloadSpreadInformer) and pod cache, one compact informer per target kind the API server
// serves (shared as "workloadspread-targets-<resource>.<group>"), the reconciler and a
// kube::Controller with --workloadspread-workers (default 3). A no-op when the WorkloadSpread
// feature gate is off or the WorkloadSpread CRD is not served (with a warning).
std::unique_ptr<ControllerGroup> NewWorkloadSpreadControllerGroup();

}  // namespace kruise::manager::workloadspread
