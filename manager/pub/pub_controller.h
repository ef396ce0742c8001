#pragma once

// The PodUnavailableBudget controller (leader only, issue 17), after OpenKruise's
// pkg/controller/podunavailablebudget: it keeps each PUB's status (pub_budget.h ComputeStatus)
// so that the pod webhook (pub_webhook.h) can spend it.
//
// One reconcile of a PUB (namespace/name, from the shared PUB informer's cache):
//   1. its pods, from the shared pod cache's namespace index:
//      - spec.selector: the pods it matches; the total is the number of active ones (OpenKruise
//        sums the replicas of the pods' owners: the shared cache keeps no owner names for pods of
//        non-Kruise workloads, so that is left out; pub.kruise.io/protect-total-replicas sets it);
//      - spec.targetRef: the workload is read from the API server (apps/v1 Deployment,
//        ReplicaSet, StatefulSet; apps.kruise.io v1alpha1/v1beta1 CloneSet, StatefulSet;
//        any other kind guards nothing, with a warning event); its spec.replicas (default 1) is
//        the total, its spec.selector picks the pods, kept when their controller is the workload:
//        the same uid, or for a Deployment its ReplicaSet `<name>-<pod-template-hash>`, when
//        the cache holds the full reference (pods of Kruise workloads, orphans, pods with
//        sidecars), else the same controller kind (ReplicaSet for a Deployment). A workload
//        that does not exist: no pods, total 0.
//   2. facts per pod (PodFactsOfCached: readiness of cache stubs, see kube::CompactPodForManager);
//   3. ComputeStatus at now: expired disruptedPods/unavailablePods entries dropped, the others
//      kept, observedGeneration = metadata.generation;
//   4. writes the status when it differs, as a JSON patch of the status subresource whose first
//      operation tests metadata.resourceVersion (each field its own `add`, maps whole, a map
//      that became empty removed: no field we do not model is touched). A refused test (422 or
//      409) means someone wrote meanwhile, most often the webhook recording a pod: the PUB is
//      re-read from the API server and the status computed again from it, so an entry the
//      webhook added is kept (it is younger than its timeout), up to kube::kConflictRetries times
//      (then an error: the rate-limited requeue);
//   5. a Warning event NotDeleted on the PUB per pod whose deletion was allowed more than 20 s
//      ago but that is still there and active (its entry expired);
//   6. requeues at the next entry expiry (one second after it); pod and PUB events bring it back
//      sooner.
// Pod events reach the PUBs of the pod's namespace that PubCache::Concerning names, adds and
// deletes always, updates only when the pod's labels or facts (active, ready, consistent)
// changed.
//
// Thread-safety: Reconcile may run concurrently for different PUBs.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "kube/client.h"
#include "kube/controller.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "manager/controller_group.h"
#include "manager/pub/pub_budget.h"

namespace kruise::manager::pub {

// PodFactsOf for a pod of the shared pod cache: a stub (no spec.containers: a pod of a
// non-Kruise workload) keeps phase and labels, and a Ready condition only when it is not True,
// so a Running stub without one is ready. A full pod is read by PodFactsOf.
PodFacts PodFactsOfCached(const nlohmann::json& pod);

struct PubInformers {
  kube::Informer* pubs = nullptr;  // PubInformerOptions() (pub_webhook.h)
  kube::Informer* pods = nullptr;  // SharedInformers::PodOptions()
};

struct PubReconcilerOptions {
  Clock* clock = Clock::Real();
};

class PubReconciler final : public kube::Reconciler {
 public:
  // Everything given must outlive the reconciler. `recorder` may be null.
  PubReconciler(kube::KubeClient* client, PubInformers informers, kube::EventRecorder* recorder,
                PubReconcilerOptions opts)
      : client_(client), inf_(informers), recorder_(recorder), opts_(opts) {}
  absl::StatusOr<kube::Result> Reconcile(const kube::Request& req) override;

 private:
  struct Covered {
    std::vector<PodFacts> pods;
    std::optional<int32_t> replicas;
  };
  absl::StatusOr<Covered> PodsOf(const Pub& pub, const nlohmann::json& object);
  // Writes `status` over `pub` (its resourceVersion the test); false on a refused test.
  absl::StatusOr<bool> WriteStatus(const nlohmann::json& object, const PubStatus& status);
  void Event(const nlohmann::json& pub, bool warning, const std::string& reason,
             const std::string& message);

  kube::KubeClient* const client_;
  const PubInformers inf_;
  kube::EventRecorder* const recorder_;
  const PubReconcilerOptions opts_;
};

// The "podunavailablebudget" controller group: the shared PUB informer (kPubInformer) and pod
// cache, a PubCache mapping pod events to PUBs, the reconciler and a kube::Controller with
// --podunavailablebudget-workers (default 3). A no-op when neither PUB gate is on or the PUB CRD
// is not served (with a warning).
std::unique_ptr<ControllerGroup> NewPubControllerGroup();

}  // namespace kruise::manager::pub
