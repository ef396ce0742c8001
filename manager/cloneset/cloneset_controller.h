#pragma once

// The CloneSet controller (leader only), after OpenKruise's pkg/controller/cloneset: a thin loop
// around the planners of cloneset_plan.h and the in-place engine of manager/inplace.
//
// One reconcile of a CloneSet:
//   1. waits while a creation or deletion it made is not yet in the cache (ScaleExpectations,
//      named per pod and PVC) or a pod it patched is older in the cache than the patch
//      (ResourceVersionExpectations);
//   2. adopts pods of its namespace that match its selector and have no controller, and
//      releases owned pods that no longer match (JSON patches guarded by resourceVersion);
//   3. finds or creates the ControllerRevision of its template (`<name>-<hash>`, collisionCount
//      on a clash) and prunes history beyond revisionHistoryLimit; with the feature gate
//      PreDownloadImageForInPlaceUpdate, creates once per new revision ImagePullJobs for its
//      changed images on the nodes of the pods not yet updated (manager/inplace/predownload.h),
//      and deletes them once every pod is at the update revision;
//   4. scales (PlanScale): returns PreparingDelete pods to Normal, creates pods in slow-start
//      batches (names `<name>-<instance id>`, PVCs from volumeClaimTemplates first), or deletes
//      (a pod held by a preDelete hook moves to PreparingDelete instead) with its PVCs;
//   5. if it did not scale, updates (PlanUpdate): in place when the engine says the revision
//      change allows it and the strategy is InPlaceIfPossible/InPlaceOnly (InPlaceUpdateReady and
//      Ready False first, then one patch of labels, annotations and images; with a grace period
//      the images wait in apps.kruise.io/inplace-update-grace), else by labelling the pod
//      apps.kruise.io/specified-delete so step 4 replaces it; and refreshes pods whose in-place
//      update completed (InPlaceUpdateReady True, lifecycle Normal). With a disruption gate
//      (the PodUnavailableBudget, manager/inplace/disruption_gate.h), each pod picked is first
//      put to the gate (UPDATE, whether in place or ReCreate), as OpenKruise's cloneset_update.go:
//      a denial stops the round there (no later pod is updated), records one Warning event
//      PodUnavailableBudgetDenied naming the budget, and requeues after kDisruptionRetry;
//   6. writes status (merge patch of the status subresource, only when it changed).
// Every pod write is a JSON patch starting with a `test` of metadata.resourceVersion, so a stale
// cache can never overwrite someone else's change; a create uses a fresh random instance id and a
// delete a uid precondition, so neither repeats on a stale cache or after a leader change.
//
// Thread-safety: Reconcile may run concurrently for different CloneSets.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "kube/client.h"
#include "kube/controller.h"
#include "kube/event_recorder.h"
#include "kube/expectations.h"
#include "kube/informer.h"
#include "kube/object.h"
#include "manager/cloneset/cloneset_plan.h"
#include "manager/controller_group.h"
#include "manager/inplace/disruption_gate.h"
#include "manager/inplace/inplace_update.h"
#include "manager/workload/pod_writer.h"

namespace kruise::manager::cloneset {


struct CloneSetReconcilerOptions {
  Clock* clock = Clock::Real();
  // Fallback re-check while waiting for expectations (events normally bring the CloneSet back).
  absl::Duration expectation_recheck = absl::Seconds(10);
  // Feature gate PreDownloadImageForInPlaceUpdate: ImagePullJobs for a new revision's images
  // (manager/inplace/predownload.h); needs CloneSetInformers::image_pull_jobs.
  bool pre_download_images = false;
  // Asked before each pod update (see step 5); null: none. Must outlive the reconciler.
  inplace::DisruptionGate* disruption_gate = nullptr;
};

struct CloneSetInformers {
  kube::Informer* clonesets = nullptr;
  kube::Informer* pods = nullptr;       // SharedInformers::PodOptions()
  kube::Informer* revisions = nullptr;  // indexed by kube::kControllerUidIndex
  kube::Informer* pvcs = nullptr;       // indexed by kube::kControllerUidIndex
  kube::Informer* nodes = nullptr;      // optional: node labels for topology spread ranks
  kube::Informer* image_pull_jobs = nullptr;  // with pre-download: inplace::PreDownloadJobInformerOptions
};

class CloneSetReconciler final : public kube::Reconciler {
 public:
  // Everything given must outlive the reconciler. `recorder` may be null.
  CloneSetReconciler(kube::KubeClient* client, CloneSetInformers informers,
                     kube::EventRecorder* recorder, CloneSetReconcilerOptions opts);
  absl::StatusOr<kube::Result> Reconcile(const kube::Request& req) override;

  // Feeds the expectations from `informer`'s events (the pod and the PVC informer): the
  // creations, deletions and patches this controller waits to see. Before the informer starts.
  void ObserveThrough(kube::Informer* informer);

 private:
  struct Context;
  absl::StatusOr<std::optional<kube::Json>> SyncRevisions(Context& ctx);
  absl::Status PreDownloadImages(Context& ctx);
  absl::StatusOr<bool> Scale(Context& ctx);
  absl::StatusOr<bool> Refresh(Context& ctx);
  absl::StatusOr<bool> Update(Context& ctx);
  absl::Status CreatePods(Context& ctx, int count, int old_revision_count);
  absl::Status RemovePod(Context& ctx, const kube::Json& pod);
  absl::Status UpdatePodInPlace(Context& ctx, const kube::Json& pod,
                                const inplace::InPlaceUpdateSpec& update);
  absl::Status WriteStatus(Context& ctx);
  // The KruisePodReady condition (pods the pod webhook gated) for a lifecycle hook's
  // markPodNotReady; `reason` names the lifecycle state. Returns the pod as patched.
  absl::StatusOr<kube::Json> SetKruisePodReady(const kube::Json& pod, bool ready,
                                               const std::string& reason,
                                               const std::string& message, absl::Time now);
  std::string RandomInstanceId(const std::vector<kube::Json>& pods,
                               const std::vector<std::string>& reserved);

  kube::KubeClient* const client_;
  const CloneSetInformers inf_;
  const CloneSetReconcilerOptions opts_;
  workload::PodWriter writer_;
  absl::Mutex rng_mu_;
  absl::BitGen rng_ ABSL_GUARDED_BY(rng_mu_);
};

// The informers the controller reads, in CloneSetInformers' order (clonesets, pods, revisions,
// PVCs, nodes), with their transforms and indexes. Exposed for tests.
std::vector<kube::InformerOptions> CloneSetInformerOptions();

// The "cloneset" controller group: informers for CloneSets, their pods (all pods, compacted;
// pods of other controllers reduced to their metadata), ControllerRevisions, PVCs and node
// labels; the reconciler; a kube::Controller with --cloneset-workers (default 3). A no-op when the
// CloneSet CRD is not served.
std::unique_ptr<ControllerGroup> NewCloneSetControllerGroup();

}  // namespace kruise::manager::cloneset
