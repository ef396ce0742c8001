#pragma once

// The Advanced StatefulSet controller (apps.kruise.io/v1beta1 StatefulSet, issue 16; leader
// only): a thin loop around the planners of asts_plan.h, the in-place engine (manager/inplace)
// and revisions (manager/revision), shaped like the CloneSet controller.
//
// One reconcile of a StatefulSet:
//   1. waits while a pod creation or deletion it made is not yet in the cache
//      (kube::ScaleExpectations named per pod, keyed by the set) or a pod it patched is older in
//      the cache than the patch (ResourceVersionExpectations);
//   2. adopts pods of its namespace that match its selector and have no controller, and releases
//      owned pods that no longer match (JSON patches guarded by resourceVersion);
//   3. finds or creates the ControllerRevision of its template (`<name>-<hash>`, collisionCount
//      on a clash) and prunes history beyond revisionHistoryLimit (default 10);
//   4. with PreDownloadImageForInPlaceUpdate, while the pods span two revisions, creates one
//      ImagePullJob per changed image of the update revision (manager/inplace/predownload.h,
//      OpenKruise's statefulset_predownload_image.go: not for OnDelete, ReCreate, an update that
//      cannot be in place, replicas <= 3 or a one-batch update; once per revision, the revision
//      labelled created or ignored; held back by apps.kruise.io/image-predownload-min-updated-
//      ready-pods) and deletes the set's jobs once one revision is left;
//   4b. refreshes pods: a new pod's readiness gates (InPlaceUpdateReady, KruisePodReady) start
//      True; an in-place update's grace period that ran out applies its images; the lifecycle
//      moves on by itself (manager/workload/lifecycle.h): PreparingNormal -> Normal once the
//      preNormal hook is all on the pod, a completed in-place update (InPlaceUpdateReady True)
//      or a PreparingUpdate rolled back -> Updated while the inPlaceUpdate hook is not all back,
//      else Normal, Updated -> Normal once it is; KruisePodReady False that markPodNotReady set
//      is True again in Normal/Updated; a PreparingDelete pod no longer to be deleted (an owned
//      ordinal at the update revision, not named for deletion: a scale-down called off) goes
//      back to Normal, or, with preDelete markPodNotReady (final, as CloneSet), is deleted once
//      its hook is gone. A round that changed a pod here ends (the pod's event brings the set
//      back);
//   5. scales (PlanScale): deletes Failed/Succeeded and condemned pods, creates missing ordinals:
//      pod `<set>-<ordinal>` with labels controller-revision-hash,
//      statefulset.kubernetes.io/pod-name, apps.kubernetes.io/pod-index and
//      lifecycle.apps.kruise.io/state (PreparingNormal while a preNormal hook is not all on the
//      template, else Normal), hostname and (with
//      serviceName) subdomain, the controller owner reference; before it, one PVC per
//      volumeClaimTemplate named `<vct>-<set>-<ordinal>` (an existing one is reused, as a core
//      StatefulSet does), mounted as the volume of the template's name;
//   6. updates (PlanUpdate, not when the scale step ended the round): pods labelled
//      apps.kruise.io/specified-delete and pods to update under podUpdatePolicy ReCreate are
//      deleted (recreated by a later round at their revision); InPlaceIfPossible/InPlaceOnly
//      update in place when the engine allows it (InPlaceUpdateReady and Ready False, then one
//      patch of the revision label, lifecycle state Updating, state annotation, metadata and
//      images, or the grace annotation), InPlaceIfPossible deletes otherwise, InPlaceOnly reports
//      FailedUpdate. With a disruption gate (the PodUnavailableBudget,
//      manager/inplace/disruption_gate.h), an in-place update is first put to the gate (UPDATE);
//      a denial leaves the pod as it is and stops the round there (ordinal order is kept), with
//      one Warning event PodUnavailableBudgetDenied naming the budget and a requeue after
//      kDisruptionRetry. OpenKruise's ASTS asks nothing ("todo validate in-place for pub"), its
//      in-place patch meeting the webhook's UPDATE check instead, which we keep too; deletes are
//      not put to the gate (the webhook's DELETE check judges them, in OpenKruise as here);
//      lifecycle hooks (OpenKruise's ASTS semantics): every delete (scale-down, failed pod,
//      specified delete, recreate update) of a pod the preDelete hook holds (any of its labels
//      with its value, or any finalizer) moves it to PreparingDelete instead (with markPodNotReady:
//      KruisePodReady False), deleted by a later round once the hook is gone; an in-place update
//      of a pod the inPlaceUpdate hook holds moves it to PreparingUpdate (markPodNotReady alike)
//      and waits there until the hook is gone; an Updated pod asked to update again goes back to
//      PreparingUpdate with the hook put back; a PreparingDelete pod is never updated in place
//      (its delete goes on). OrderedReady does not end the round on a PreparingUpdate or
//      PreparingDelete pod, so this step can reach it once its hook goes;
//      volumeClaimUpdateStrategy OnPodRollingUpdate with StatefulSetAutoResizePVCGate (OpenKruise's
//      statefulset_resize_pvc.go): before a pod is updated its claims are grown to their
//      templates' storage request (a JSON patch guarded by resourceVersion; a storage class
//      without allowVolumeExpansion is a FailedUpdatePVC), and the pod waits until the volume
//      has it (capacity, or FileSystemResizePending); pods already at the update revision get
//      their claims grown too. A claim that differs in more than size (class, access modes)
//      is never patched or deleted: FailedUpdate names it and the user deletes it (as
//      OpenKruise; OnDelete is the same without any resize);
//   7. writes status through the status subresource (merge patch carrying the resourceVersion it
//      read, so a stale write is a 409 and the round is retried), only when it changed; with
//      volumeClaimTemplates, status.volumeClaims gives per template the owned pods whose claim is
//      compatible (CompareClaim: same class and access modes, request >= the template's) and of
//      those the ones whose volume has the request (compatibleReplicas,
//      compatibleReadyReplicas).
// persistentVolumeClaimRetentionPolicy: whenDeleted Delete gives the set's PVCs an owner
// reference to the set (Retain removes it), so deleting the set deletes them; whenScaled Delete
// moves a condemned pod's PVCs' owner reference to that pod before deleting it (propagation
// Background), so they go with it, also if this manager stops in between.
//
// Exactly once: pod names are deterministic, so a create answered 409 AlreadyExists is checked:
// a pod of this set (the cache is behind) is waited for through the expectation, another
// object's is reported (Warning FailedCreate) and never retried in a loop of creates; deletes
// carry a uid precondition and a named delete expectation, so a stale cache never deletes a pod
// twice; a new leader starts from the API server's state (informers) and the same names.
//
// Left out: PVC reuse checks beyond the name (an existing claim of the pod's name is used as it
// is, as a core StatefulSet does); with OnPodRollingUpdate a pod already at the update revision
// whose claims grew keeps running (OpenKruise also puts such a pod through its update step once
// the resize completed, which may recreate it); the webhook does not ask the StorageClass whether
// it allows expansion (the controller does, at resize time).
//
// Thread-safety: Reconcile may run concurrently for different StatefulSets.

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
#include "kube/object.h"
#include "kube/resources.h"
#include "manager/controller_group.h"
#include "manager/inplace/disruption_gate.h"
#include "manager/statefulset/asts_plan.h"
#include "manager/workload/lifecycle.h"
#include "manager/workload/pod_writer.h"

namespace kruise::manager::statefulset {

// The Advanced StatefulSet resource (v1beta1, the stored version).
inline kube::Resource AdvancedStatefulSets() {
  return {kube::resources::kKruiseGroup, "v1beta1", "statefulsets", "StatefulSet", true};
}

inline constexpr char kPodNameLabel[] = "statefulset.kubernetes.io/pod-name";
inline constexpr char kPodIndexLabel[] = "apps.kubernetes.io/pod-index";

struct AstsReconcilerOptions {
  Clock* clock = Clock::Real();
  // Fallback re-check while waiting for expectations (events normally bring the set back).
  absl::Duration expectation_recheck = absl::Seconds(10);
  // Asked before each in-place update (see step 6); null: none. Must outlive the reconciler.
  inplace::DisruptionGate* disruption_gate = nullptr;
  // StatefulSetAutoResizePVCGate: volumeClaimUpdateStrategy OnPodRollingUpdate expands claims.
  bool auto_resize_pvc = false;
  // PreDownloadImageForInPlaceUpdate; needs AstsInformers::image_pull_jobs.
  bool pre_download_images = false;
};

inline constexpr char kAutoResizePvcGate[] = "StatefulSetAutoResizePVCGate";

struct AstsInformers {
  kube::Informer* statefulsets = nullptr;  // indexed by kube::kNamespaceIndex
  kube::Informer* pods = nullptr;          // SharedInformers::PodOptions()
  kube::Informer* revisions = nullptr;     // indexed by kube::kControllerUidIndex
  kube::Informer* pvcs = nullptr;          // compacted (AstsInformerOptions)
  kube::Informer* image_pull_jobs = nullptr;  // with pre-download: PreDownloadJobInformerOptions()
};

class AstsReconciler final : public kube::Reconciler {
 public:
  // Everything given must outlive the reconciler. `recorder` may be null.
  AstsReconciler(kube::KubeClient* client, AstsInformers informers, kube::EventRecorder* recorder,
                 AstsReconcilerOptions opts);
  absl::StatusOr<kube::Result> Reconcile(const kube::Request& req) override;

  // Feeds the expectations from the pod informer's events. Before the informer starts.
  void ObserveThrough(kube::Informer* pods);

 private:
  struct Context;
  absl::StatusOr<bool> SyncRevisions(Context& ctx);
  absl::Status PreDownloadImages(Context& ctx);
  absl::StatusOr<bool> Refresh(Context& ctx);
  absl::Status SyncClaimOwners(Context& ctx);
  absl::Status CreatePod(Context& ctx, const Creation& c);
  absl::Status DeletePod(Context& ctx, const kube::Json& pod, bool condemned,
                         const std::string& why);
  absl::Status UpdatePod(Context& ctx, const kube::Json& pod);
  // Moves a pod to lifecycle `state` (the label and its timestamp; with `put_back` that hook's
  // labels and finalizers too), then with `mark_not_ready` sets KruisePodReady False.
  absl::Status SetLifecycle(Context& ctx, const kube::Json& pod, const std::string& state,
                            bool mark_not_ready, const workload::LifecycleHook* put_back,
                            const std::string& why);
  // volumeClaimUpdateStrategy OnPodRollingUpdate: expands the pod's claims to their templates'
  // size; true once every claim has it (or waits only for the kubelet's file system resize).
  absl::StatusOr<bool> ResizeClaims(Context& ctx, const kube::Json& pod);
  absl::Status WriteStatus(Context& ctx);

  kube::KubeClient* const client_;
  const AstsInformers inf_;
  const AstsReconcilerOptions opts_;
  workload::PodWriter writer_;
};

// The informers the controller reads, in AstsInformers' order (statefulsets, pods, revisions,
// PVCs), with their transforms and indexes. Exposed for tests.
std::vector<kube::InformerOptions> AstsInformerOptions();

// The "statefulset" controller group: the informers above (pods and revisions through
// SharedInformers when given), the reconciler, a kube::Controller with --statefulset-workers
// (default 3). A no-op when the Advanced StatefulSet CRD is not served.
std::unique_ptr<ControllerGroup> NewStatefulSetControllerGroup();

}  // namespace kruise::manager::statefulset
