#pragma once

// The WorkloadSpread webhooks (issue 17), on every manager replica, over the pure core of
// ws_core.h:
//  - WorkloadSpreadCache: the cluster's WorkloadSpreads, fed by one informer
//    (kWorkloadSpreadInformer, to be shared with the leader's controller through
//    SharedInformers::Named) and read by admission threads as immutable snapshots (one shared_ptr
//    copy under a mutex; writers build the next snapshot of the namespace they touch). Each object
//    is parsed once per change (ParseWorkloadSpread) and indexed by namespace and target (API
//    group, kind, name); an invalid stored object (written while no webhook ran) is kept for the
//    conflict check but spreads nothing. The injector also stores what its own status writes
//    return, and an informer event older than what is stored (same uid, smaller decimal
//    resourceVersion) does not replace it: OpenKruise's webhook keeps such a cache of its last
//    writes too, so back-to-back admissions on one replica do not each start with a conflict.
//  - WorkloadSpreadValidatingHandler (`/validate-apps-kruise-io-v1alpha1-workloadspread`, and
//    OpenKruise 1.x's unversioned `/validate-apps-kruise-io-workloadspread`; CREATE and UPDATE):
//    WorkloadSpreadProblems, then WorkloadSpreadConflicts against the cache's WorkloadSpreads of
//    the namespace (one WorkloadSpread per workload), all refused at once with 400 (OpenKruise's
//    BadRequest) naming every problem; WorkloadSpreadWarnings as admission warnings. With the
//    WorkloadSpread feature gate off every WorkloadSpread is refused (403), as OpenKruise does.
//  - WorkloadSpreadInjector (a PodMutator of `/mutate-pod`, before the SidecarSet injector:
//    OpenKruise's order), pods CREATE (not subresources):
//      * PodCanBeSpread, then the WorkloadSpread of the pod's namespace whose targetRef is the
//        pod's controller (same group, kind, name; the first by name when several), or, for a
//        pod of an apps ReplicaSet, the one whose targetRef is the apps Deployment named by the
//        ReplicaSet's name minus "-<pod-template-hash label>" (kube/deployment_naming.h, as the
//        PodUnavailableBudget webhook does): no ReplicaSet is read, where OpenKruise GETs it and
//        compares its uid and controller. A Deployment pod without that label is not spread.
//      * ChooseSubset on the cached object. A choice with a status change is recorded before the
//        answer: a JSON patch of the status subresource whose first operation tests
//        metadata.resourceVersion and whose second sets status.subsetStatuses. A refused test
//        (422 Invalid on the real API server, or 409) re-reads the WorkloadSpread and chooses
//        again on the fresh status, up to kube::kConflictRetries times, so concurrent admissions
//        (on any replicas) never take more than a subset's missingReplicas between them. Pods
//        with generateName only are recorded under a fresh UUID per attempt (ChooseSubset's
//        generated_uid, also in the pod's annotation).
//      * Only then is PlanSubsetInjection sent with PodEdit::AddOps (tolerations, node affinity,
//        the subset's patch, the apps.kruise.io/matched-workloadspread annotation).
//      * No suitable subset (all full or unschedulable, no status yet), the WorkloadSpread gone
//        (404 on the write or the re-read) or no longer valid: the pod goes through unchanged,
//        as in OpenKruise.
//      * Failure policy: when the write keeps conflicting past the retries, or fails otherwise
//        (an API error or timeout, a patch refused although the resourceVersion held), the pod
//        goes through unspread, with an admission warning, a Warning event on the
//        WorkloadSpread and the infrastructure-failure counter (webhook::FailOpen): the pod
//        webhook is failurePolicy Ignore (deploy/), so a failing API server must not deny what
//        an unreachable manager would let through (issue 33). OpenKruise (admission.Errored(500)
//        under failurePolicy Fail) refuses the pod instead; without a FailOpen this injector
//        does too (the chain's 500). An injection error (a subset patch that does not apply)
//        denies the pod, as in OpenKruise (its status record then expires after
//        kCreatePodTimeout).
//      * Dry run (the request's dryRun): the choice is made and injected but nothing is written,
//        so the answer shows what a real creation would get. OpenKruise instead lets a dry-run
//        pod through untouched.
//    StatefulSet pods are spread like the others (ChooseSubset's ordinal rule).
//  - WorkloadSpreadDeletionRecorder (on `/validate-pod`, after the PodUnavailableBudget check:
//    HandlerRegistry::Append; OpenKruise's order, so a refused deletion is not recorded): pods
//    DELETE (the request's oldObject; not subresources) and pods/eviction CREATE (the pod read
//    through the PodReader; gone: nothing to do). The WorkloadSpread named in the pod's
//    apps.kruise.io/matched-workloadspread annotation (the cache's object of that name) gets
//    RecordDeletion's status: the pod in its subset's deletingPods, missingReplicas + 1, so the
//    replacement may go to that subset before the controller has seen the pod go. Written like
//    the injector's record (resourceVersion test first; a refused test re-reads and records again
//    on the fresh object, up to kube::kConflictRetries times). Dry runs (the request's dryRun, an
//    eviction's deleteOptions.dryRun) write nothing. Always allowed: a failed write (or a failed
//    read of an evicted pod) is an admission warning, a Warning event on the WorkloadSpread (the
//    pod) and a count with a FailOpen, a log line without; the controller's next status counts
//    the pod as gone once it is (OpenKruise fails the deletion instead).
//
// Thread-safety: the cache and both handlers are safe for concurrent use.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "manager/webhook/admission.h"
#include "manager/webhook/crr_handlers.h"
#include "manager/webhook/fail_open.h"
#include "manager/webhook/pod_webhook.h"
#include "manager/workloadspread/ws_core.h"

namespace kruise::manager::workloadspread {

inline constexpr char kValidateWorkloadSpreadPath[] =
    "/validate-apps-kruise-io-v1alpha1-workloadspread";
inline constexpr char kValidateWorkloadSpreadUnversionedPath[] =
    "/validate-apps-kruise-io-workloadspread";

inline kube::Resource WorkloadSpreadResource() {
  return {"apps.kruise.io", "v1alpha1", "workloadspreads", "WorkloadSpread", true};
}
// Every WorkloadSpread (managedFields dropped); shared under this name.
inline constexpr char kWorkloadSpreadInformer[] = "workloadspreads";
kube::InformerOptions WorkloadSpreadInformerOptions();

class WorkloadSpreadCache {
 public:
  struct Entry {
    std::shared_ptr<const nlohmann::json> object;
    std::optional<WorkloadSpread> ws;  // nullopt: invalid, spreads nothing
  };
  // Replaces the object of its namespace and name, unless the stored one has the same uid and a
  // larger resourceVersion (both decimal).
  void Upsert(const nlohmann::json& ws);
  void Remove(const std::string& ns, const std::string& name);
  // Registers Upsert/Remove on `informer` (WorkloadSpreadInformerOptions) before it starts.
  void Attach(kube::Informer* informer);

  // The namespace's objects, by name.
  std::vector<std::shared_ptr<const nlohmann::json>> ObjectsIn(const std::string& ns) const;
  // The entry of that name (valid or not); null when none.
  std::shared_ptr<const Entry> Named(const std::string& ns, const std::string& name) const;
  // The valid WorkloadSpread of `ns` whose targetRef names (group, kind, name); the first by
  // name; null when none.
  std::shared_ptr<const Entry> Targeting(const std::string& ns, const std::string& group,
                                         const std::string& kind, const std::string& name) const;
  size_t size() const;

 private:
  struct Namespace {
    std::map<std::string, std::shared_ptr<const Entry>> by_name;
    // "group/kind/name" of the target -> the valid entries naming it, by name.
    std::map<std::string, std::map<std::string, std::shared_ptr<const Entry>>> by_target;
  };
  using Snapshot = std::map<std::string, std::shared_ptr<const Namespace>>;
  std::shared_ptr<const Namespace> In(const std::string& ns) const;
  // Publishes `ns` rebuilt from `by_name` (erased when empty). Holds write_mu_.
  void Publish(const std::string& ns, std::map<std::string, std::shared_ptr<const Entry>> by_name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  absl::Mutex write_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  std::shared_ptr<const Snapshot> snapshot_ ABSL_GUARDED_BY(mu_) = std::make_shared<Snapshot>();
};

class WorkloadSpreadValidatingHandler final : public webhook::Handler {
 public:
  // `cache` must outlive the handler. `enabled`: the WorkloadSpread feature gate.
  WorkloadSpreadValidatingHandler(const WorkloadSpreadCache* cache, bool enabled)
      : cache_(cache), enabled_(enabled) {}
  webhook::AdmissionResponse Handle(const webhook::AdmissionRequest& request) override;

 private:
  const WorkloadSpreadCache* cache_;
  bool enabled_;
};

class WorkloadSpreadInjector final : public webhook::PodMutator {
 public:
  // `cache`, `client` and `clock` must outlive the injector. `new_uid`: a fresh UUID for a pod
  // without a name (thread-safe; null: random version-4 UUIDs).
  // `fail_open` (may be null; must outlive the injector): see "Failure policy" above.
  WorkloadSpreadInjector(WorkloadSpreadCache* cache, kube::KubeClient* client, Clock* clock,
                         std::function<std::string()> new_uid = nullptr,
                         webhook::FailOpen* fail_open = nullptr)
      : cache_(cache),
        client_(client),
        clock_(clock),
        new_uid_(std::move(new_uid)),
        fail_open_(fail_open) {}
  absl::string_view Name() const override { return "workloadspread"; }
  absl::Status Mutate(const webhook::AdmissionRequest& request, webhook::PodEdit* pod,
                      std::vector<std::string>* warnings) const override;

 private:
  std::string NewUid() const;
  // Chooses, records and injects the subset (the former Mutate).
  absl::Status Spread(const webhook::AdmissionRequest& request, webhook::PodEdit* pod,
                      std::string* ws_name) const;

  WorkloadSpreadCache* cache_;
  kube::KubeClient* client_;
  Clock* clock_;
  std::function<std::string()> new_uid_;
  webhook::FailOpen* fail_open_;
};

class WorkloadSpreadDeletionRecorder final : public webhook::Handler {
 public:
  // All must outlive the recorder.
  WorkloadSpreadDeletionRecorder(WorkloadSpreadCache* cache, kube::KubeClient* client,
                                 webhook::PodReader* pods, Clock* clock,
                                 webhook::FailOpen* fail_open = nullptr)
      : cache_(cache), client_(client), pods_(pods), clock_(clock), fail_open_(fail_open) {}
  // Always allowed.
  webhook::AdmissionResponse Handle(const webhook::AdmissionRequest& request) override;

 private:
  // Records `pod`'s deletion; an error when it could not be written (`*ws_name`: the
  // WorkloadSpread it was for).
  absl::Status Record(const nlohmann::json& pod, const std::string& operation,
                      std::string* ws_name);

  WorkloadSpreadCache* cache_;
  kube::KubeClient* client_;
  webhook::PodReader* pods_;
  Clock* clock_;
  webhook::FailOpen* fail_open_;
};

// Registers WorkloadSpreadValidatingHandler on both paths when the WorkloadSpread CRD is served
// (a LIST probe; returns false otherwise, with a warning: attach no informer, add no injector
// then). Everything given must outlive the registry.
bool RegisterWorkloadSpreadHandlers(webhook::HandlerRegistry* registry,
                                    const WorkloadSpreadCache* cache, kube::KubeClient* client,
                                    bool enabled);

}  // namespace kruise::manager::workloadspread
