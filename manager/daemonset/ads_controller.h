#pragma once

// The Advanced DaemonSet controller (apps.kruise.io/v1beta1 DaemonSet, issue 16; leader only): a
// thin loop around the planners of ads_plan.h, the in-place engine (manager/inplace) and revisions
// (manager/revision), shaped like the Advanced StatefulSet controller.
//
// One reconcile of a DaemonSet:
//   1. waits while a pod creation or deletion it made is not yet in the cache
//      (kube::ScaleExpectations named per pod, keyed by the set) or a pod it patched is older in
//      the cache than the patch (ResourceVersionExpectations): a stale cache never puts a second
//      pod on a node nor deletes one twice;
//   2. adopts pods of its namespace that match its selector and have no controller, and releases
//      owned pods that no longer match (JSON patches guarded by resourceVersion);
//   3. finds or creates the ControllerRevision of its template (`<name>-<hash>`, collisionCount on
//      a clash; the pods' controller-revision-hash label and status.updateRevision/daemonSetHash
//      carry the hash) and prunes history beyond revisionHistoryLimit (default 10, revisions no
//      pod uses); with the feature gate PreDownloadImageForDaemonSetUpdate, while some eligible
//      node's pod is not at the update revision (and there is an older revision), plans image
//      pre-download once per revision (manager/inplace/predownload.h, as OpenKruise's
//      daemonset_predownload_image.go: one ImagePullJob `<revision>-<container>` per container
//      whose image differs from any older revision's, owned by the set, selecting its pods whose
//      controller-revision-hash is neither the revision's name nor its hash; parallelism and
//      timeout from the image-predownload annotations; the revision labelled created, or ignored
//      when partition is 0 and maxUnavailable (default 1, a percentage of the eligible nodes
//      rounded down) covers every eligible node: one batch, nothing to warm ahead of). There is no
//      minimum size, unlike CloneSet's replicas > 3. Unlike OpenKruise (a "todo" there), the
//      annotation apps.kruise.io/image-predownload-min-updated-ready-pods (int or percent of the
//      eligible nodes) holds the jobs back until that many updated pods are ready. Once every
//      eligible node's pod is at the update revision, the set's jobs are deleted. A job that
//      cannot be created is a Warning event, not retried; pre-download never holds the update;
//   4. refreshes pods: a new pod's readiness gates (InPlaceUpdateReady, KruisePodReady) start
//      True; a completed in-place update gets InPlaceUpdateReady True and lifecycle state Normal;
//      a pod in PreparingDelete whose preDelete hook has markPodNotReady gets KruisePodReady False
//      (workload::KruisePodReadyOps; only pods with that readiness gate, which the pod webhook
//      adds), so a round that died between the two patches of step 5 still ends not ready, and a
//      pod back in Normal with KruisePodReady False for a lifecycle reason gets it True
//      (workload::RestoreKruisePodReadyOps). A round that changed a pod here ends (the pod's
//      event brings the set back);
//   5. scales (PlanScale over every node of the Node cache): deletes pods (uid precondition), moves
//      pods the preDelete hook holds to lifecycle PreparingDelete (with the hook's
//      markPodNotReady, then KruisePodReady False, reason PreparingDelete, as OpenKruise's
//      syncWithPreparingDelete; such a pod never returns to Normal), and creates pods in slow-start
//      batches (1, 2, 4, ...; a batch with a failure ends the creations), each named
//      `<set>-<5 random characters>` by us (so the expectation is named before the request) with
//      the revision's template plus: labels controller-revision-hash (and pod-template-generation
//      when the set has the deprecated template-generation annotation), lifecycle state Normal;
//      the controller owner reference; a required node affinity naming only the target node
//      (Kubernetes' ReplaceDaemonSetPodNodeNameNodeAffinity, so the scheduler places it); the
//      daemon tolerations (DaemonPodTolerations, AddOrUpdateTolerationInPodSpec); the
//      InPlaceUpdateReady readiness gate when rollingUpdateType is InPlaceIfPossible. A Failed
//      pod is deleted with a per-node backoff (1 s doubling to 15 min, as Kubernetes' failed-pod
//      backoff) and a FailedDaemonPod warning;
//   6. updates (PlanUpdate, only when the scale step had nothing to do, as Kubernetes runs the
//      rolling update only with satisfied expectations): deletions (the next round's scale
//      creates the new pod), surge creations, and in-place updates (InPlaceUpdateReady and Ready
//      False, then one patch of the revision label, lifecycle state Updating, the state
//      annotation, metadata and images). With a disruption gate (the PodUnavailableBudget,
//      manager/inplace/disruption_gate.h; feature gate PodUnavailableBudgetUpdateGate) each pod
//      the update takes down is put to it first: UPDATE before an in-place update, DELETE before
//      a Standard update deletes it or moves it to PreparingDelete (only when
//      PodUnavailableBudgetDeleteGate has the webhook guard pod DELETE too). The first denial
//      ends the round's update (surge creations still happen), a Warning event
//      PodUnavailableBudgetDenied names the budget and its pods, and the set is looked at again
//      after kDisruptionRetry (or at the event of a pod becoming available). OpenKruise's ADS
//      controller asks nothing itself: its in-place patches and deletions meet the PUB webhook,
//      and a denial there is a failed write; here it is a skipped pod;
//   7. writes status through the status subresource (merge patch carrying the resourceVersion it
//      read, so a stale write is a 409 and the round is retried), only when it changed:
//      desired/current/misscheduled/ready/available/unavailable/updated counts (CountStatus),
//      observedGeneration, updateRevision and daemonSetHash, collisionCount, and conditions
//      FailedScale/FailedUpdate while that step fails;
//   8. requeues for what no event brings: a pod Ready but not yet available for minReadySeconds, a
//      failed pod's backoff, a surge pod's wait, a disruption gate's denial.
//
// Left out (documented in README): the daemonset.kruise.io deprecated "Surging" rolling update
// type (validated away by the webhook); pre-download of restartable init containers' images
// (OpenKruise's InPlaceUpdateRestartableInitContainer gate; only regular containers here).
//
// Thread-safety: Reconcile may run concurrently for different DaemonSets.

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "kube/client.h"
#include "kube/controller.h"
#include "kube/event_recorder.h"
#include "kube/expectations.h"
#include "kube/informer.h"
#include "kube/object.h"
#include "kube/resources.h"
#include "manager/controller_group.h"
#include "manager/daemonset/ads_plan.h"
#include "manager/inplace/disruption_gate.h"
#include "manager/workload/pod_writer.h"

namespace kruise::manager::daemonset {

// The Advanced DaemonSet resource (v1beta1, the stored version).
inline kube::Resource AdvancedDaemonSets() {
  return {kube::resources::kKruiseGroup, "v1beta1", "daemonsets", "DaemonSet", true};
}

struct AdsReconcilerOptions {
  Clock* clock = Clock::Real();
  // Fallback re-check while waiting for expectations (events normally bring the set back).
  absl::Duration expectation_recheck = absl::Seconds(10);
  // Failed-pod backoff per node (Kubernetes: 1 s doubling to 15 min).
  absl::Duration failed_backoff_initial = absl::Seconds(1);
  absl::Duration failed_backoff_max = absl::Minutes(15);
  // Feature gate PreDownloadImageForDaemonSetUpdate (step 3); needs AdsInformers::image_pull_jobs.
  bool pre_download_images = false;
  // Asked before each pod the update takes down (step 6); null: none. Must outlive the reconciler.
  inplace::DisruptionGate* disruption_gate = nullptr;
  // Also before deletions (PodUnavailableBudgetDeleteGate); else only before in-place updates.
  bool disruption_gate_deletes = true;
};

struct AdsInformers {
  kube::Informer* daemonsets = nullptr;       // indexed by kube::kNamespaceIndex
  kube::Informer* pods = nullptr;             // SharedInformers::PodOptions()
  kube::Informer* revisions = nullptr;        // indexed by kube::kControllerUidIndex
  kube::Informer* nodes = nullptr;            // SharedInformers::NodeOptions()
  kube::Informer* image_pull_jobs = nullptr;  // with pre-download: PreDownloadJobInformerOptions()
};

class AdsReconciler final : public kube::Reconciler {
 public:
  // Everything given must outlive the reconciler. `recorder` may be null.
  AdsReconciler(kube::KubeClient* client, AdsInformers informers, kube::EventRecorder* recorder,
                AdsReconcilerOptions opts);
  absl::StatusOr<kube::Result> Reconcile(const kube::Request& req) override;

  // Feeds the expectations from the pod informer's events. Before the informer starts.
  void ObserveThrough(kube::Informer* pods);

 private:
  struct Context;
  absl::StatusOr<bool> SyncRevisions(Context& ctx);
  absl::Status PreDownloadImages(Context& ctx);
  absl::StatusOr<bool> Refresh(Context& ctx);
  std::set<std::string> FailedBackoffNodes(Context& ctx);
  absl::Status CreatePods(Context& ctx, const std::vector<std::string>& nodes);
  absl::Status CreatePod(Context& ctx, const std::string& node);
  absl::Status ApplyDeletions(Context& ctx, const Deletions& deletions);
  absl::Status DeletePod(Context& ctx, const kube::Json& pod, const std::string& why);
  absl::Status PrepareDelete(Context& ctx, const kube::Json& pod);
  // KruisePodReady False for a pod the preDelete hook (with markPodNotReady) holds.
  absl::Status MarkPodNotReady(Context& ctx, const kube::Json& pod);
  // Whether the disruption gate lets the update take `pod` down now (true without a gate). A
  // denial is recorded for the round's event and closes the gate for the rest of the round.
  absl::StatusOr<bool> AdmitDisruption(Context& ctx, const kube::Json& pod,
                                       inplace::DisruptionOperation op);
  absl::Status UpdateInPlace(Context& ctx, const kube::Json& pod,
                             const inplace::InPlaceUpdateSpec& update);
  absl::Status WriteStatus(Context& ctx);

  kube::KubeClient* const client_;
  const AdsInformers inf_;
  const AdsReconcilerOptions opts_;
  workload::PodWriter writer_;

  struct Backoff {
    absl::Duration delay;
    absl::Time last;
  };
  absl::Mutex backoff_mu_;
  // "<set uid>/<node>" -> the failed-pod backoff of that node.
  absl::flat_hash_map<std::string, Backoff> backoff_ ABSL_GUARDED_BY(backoff_mu_);
};

// The informers the controller reads, in AdsInformers' order (daemonsets, pods, revisions,
// nodes), with their transforms and indexes. Exposed for tests.
std::vector<kube::InformerOptions> AdsInformerOptions();

// The "daemonset" controller group: the informers above (pods, revisions and nodes through
// SharedInformers when given; with PreDownloadImageForDaemonSetUpdate and the ImagePullJob CRD
// served, the shared ImagePullJob metadata cache), the reconciler (with the context's disruption
// gate), a kube::Controller with --daemonset-workers (default 3). A no-op when the Advanced
// DaemonSet CRD is not served.
std::unique_ptr<ControllerGroup> NewDaemonSetControllerGroup();

}  // namespace kruise::manager::daemonset
