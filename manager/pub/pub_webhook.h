#pragma once

// The PodUnavailableBudget webhooks (issue 17), on every manager replica:
//  - PubCache: the cluster's PUBs, fed by one informer (kPubInformer, shared with the leader's PUB
//    controller through SharedInformers::Named) and read by admission threads as immutable
//    snapshots (one shared_ptr copy under a mutex; writers build the next snapshot, per namespace).
//    Each PUB is parsed once per change (ParsePub); an invalid stored PUB (written while no
//    webhook ran) is kept for conflict checks but guards nothing. PUBs of a namespace are tested
//    one by one against a pod: a namespace holds a handful (not indexed by label, unlike the
//    cluster-wide SidecarSets).
//  - PubValidatingHandler (`/validate-policy-kruise-io-podunavailablebudget`, PUB CREATE and
//    UPDATE): PubProblems, then PubConflicts against the cache's PUBs of the namespace, both
//    denied with 422 and every problem in the message. Without both PUB feature gates
//    (PodUnavailableBudgetDeleteGate, PodUnavailableBudgetUpdateGate) every PUB is refused, as
//    OpenKruise does (a PUB nothing would enforce). No defaulting webhook: OpenKruise has none.
//  - PubPodValidator (`/validate-pod`: pods DELETE and UPDATE, pods/eviction CREATE): the budget
//    check of pkg/webhook/pod/validating/pod_unavailable_budget.go.
//      * DELETE of a pod (not of a subresource; gate PodUnavailableBudgetDeleteGate): the pod is
//        the request's oldObject (none: allowed, as OpenKruise on Kubernetes < 1.16);
//      * CREATE of pods/eviction (same gate): the pod is read from the API server (gone: allowed);
//      * UPDATE of a pod (gate PodUnavailableBudgetUpdateGate, off by default): only when
//        UpdateMakesUnavailable(old, new); the pod before the update is judged.
//    The PUB guarding the pod is the first by name in the cache that PubCoversPod. The decision
//    is DecideDisruption's; when it spends the budget the handler writes the PUB's status before
//    answering: a JSON patch of the status subresource whose first operation tests
//    metadata.resourceVersion, setting unavailableAllowed and the whole disruptedPods or
//    unavailablePods map. A refused test (422, or 409) re-reads the PUB from the API server and
//    decides again (the budget may be spent by now), up to kube::kConflictRetries times. A PUB
//    deleted meanwhile: allowed. Still conflicting, or any other API error (a failed pod read of
//    an eviction too): the budget could not be recorded. The webhook is failurePolicy Ignore
//    (deploy/: an unreachable manager lets the deletion through), so with a webhook::FailOpen the
//    request is allowed unrecorded, with an admission warning, a Warning event on the PUB (the
//    pod, for a failed read) and the infrastructure-failure counter (issue 33); without one it is
//    denied with the error (500, or 409 "try again"). JudgeDisruption itself, which our own
//    controllers ask too, keeps reporting those as denials (BudgetVerdict::infrastructure). A
//    dry run (request dryRun, or an
//    eviction's deleteOptions.dryRun) is decided the same way and writes nothing. Denials are 403
//    with DecideDisruption's message (the PUB's name, the operation, current/desired available).
//    Never judged: kube-system and the manager's own namespace (whatever the webhook
//    configuration says); pods that are not active or not ready (a finished pod the pod garbage
//    collector deletes, a pod of a deleted workload the garbage collector deletes once it is
//    terminating) cost nothing in DecideDisruption. `policy.kruise.io/delete-protection` is not
//    read here: in OpenKruise it belongs to the DeletionProtection feature (workloads,
//    namespaces, CRDs), not to PUB.
//    Not here: OpenKruise's per-PUB lock and local cache of its last write (concurrent
//    admissions of one PUB on one replica conflict and re-read instead), its
//    PubPreventPodDeletion event on the pod and its protection audit log.
//
// Thread-safety: PubCache and both handlers are safe for concurrent use.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "manager/pub/pub_budget.h"
#include "manager/webhook/admission.h"
#include "manager/webhook/crr_handlers.h"
#include "manager/webhook/fail_open.h"

namespace kruise::manager::pub {

inline constexpr char kPubValidatePath[] = "/validate-policy-kruise-io-podunavailablebudget";
inline constexpr char kValidatePodPath[] = "/validate-pod";

inline kube::Resource PubResource() {
  return {"policy.kruise.io", "v1alpha1", "podunavailablebudgets", "PodUnavailableBudget", true};
}
// Every PUB (managedFields dropped), indexed by namespace; shared under this name.
inline constexpr char kPubInformer[] = "podunavailablebudgets";
kube::InformerOptions PubInformerOptions();

class PubCache {
 public:
  struct Entry {
    std::shared_ptr<const nlohmann::json> object;
    std::optional<Pub> pub;  // nullopt: invalid, guards nothing
  };
  void Upsert(const nlohmann::json& pub);
  void Remove(const std::string& ns, const std::string& name);
  // Registers Upsert/Remove on `pubs` (PubInformerOptions) before it starts.
  void Attach(kube::Informer* pubs);

  // The namespace's PUB objects, by name.
  std::vector<std::shared_ptr<const nlohmann::json>> ObjectsIn(const std::string& ns) const;
  // The valid PUB guarding `pod` (PubCoversPod; the pod's namespace), the first by name; null.
  std::shared_ptr<const Entry> Covering(const nlohmann::json& pod) const;
  // The valid PUBs of the pod's namespace an event of `pod`, as the shared pod cache keeps it,
  // may concern: selector match, or a targetRef whose owner kind (OwnerKindOfTarget) is the
  // pod's controller's kind (cache stubs keep no owner name: the controller sorts them out).
  std::vector<std::string> Concerning(const nlohmann::json& pod) const;
  size_t size() const;

 private:
  using Namespace = std::map<std::string, std::shared_ptr<const Entry>>;
  using Snapshot = std::map<std::string, std::shared_ptr<const Namespace>>;
  std::shared_ptr<const Namespace> In(const std::string& ns) const;

  absl::Mutex write_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  std::shared_ptr<const Snapshot> snapshot_ ABSL_GUARDED_BY(mu_) = std::make_shared<Snapshot>();
};

class PubValidatingHandler final : public webhook::Handler {
 public:
  // `cache` must outlive the handler. `enabled`: one of the PUB gates is on.
  PubValidatingHandler(const PubCache* cache, bool enabled) : cache_(cache), enabled_(enabled) {}
  webhook::AdmissionResponse Handle(const webhook::AdmissionRequest& request) override;

 private:
  const PubCache* cache_;
  bool enabled_;
};

// The budget check of one pod, shared by the /validate-pod handler and the controllers' gate
// (PubDisruptionGate, pub_gate.h): the cheap exits (no-protect, not ready, not consistent), the
// PUB guarding `pod` (PubCache::Covering; `pod` carries its namespace) and DecideDisruption,
// recording the cost in the PUB's status as described at the top. Excluded namespaces are the
// caller's business.
struct BudgetVerdict {
  bool allowed = true;
  int code = 200;            // when denied: 403 (budget), 409 (conflicts), 500 (API error)
  std::string pub = {};      // the PUB that decided; empty when none guards the pod
  std::string message = {};  // why it is denied
  // Denied because the budget could not be read or recorded (API error, conflicts past the
  // retries), not because it is spent.
  bool infrastructure = false;
};
BudgetVerdict JudgeDisruption(const PubCache& cache, kube::KubeClient* client, Clock* clock,
                              const nlohmann::json& pod, Operation op, bool dry_run);

struct PubPodValidatorOptions {
  Clock* clock = Clock::Real();
  bool guard_delete = true;   // PodUnavailableBudgetDeleteGate: DELETE and eviction
  bool guard_update = false;  // PodUnavailableBudgetUpdateGate: UPDATE
  std::vector<std::string> excluded_namespaces = {"kube-system"};
  // failurePolicy Ignore: infrastructure failures allow with a warning (see the top). Null: they
  // deny. Must outlive the validator.
  webhook::FailOpen* fail_open = nullptr;
};

class PubPodValidator final : public webhook::Handler {
 public:
  // All must outlive the validator.
  PubPodValidator(const PubCache* cache, kube::KubeClient* client, webhook::PodReader* pods,
                  PubPodValidatorOptions opts)
      : cache_(cache), client_(client), pods_(pods), opts_(std::move(opts)) {}
  webhook::AdmissionResponse Handle(const webhook::AdmissionRequest& request) override;

 private:
  const PubCache* cache_;
  kube::KubeClient* client_;
  webhook::PodReader* pods_;
  const PubPodValidatorOptions opts_;
};

// Registers both handlers on `registry` when the PUB CRD is served (a LIST probe; returns false
// otherwise, with a warning: attach no informer then). kValidatePodPath only with the PodWebhook
// gate and one of the PUB gates. Everything given must outlive the registry.
struct PubHandlerOptions {
  bool pod_webhook = true;
  bool delete_gate = true;
  bool update_gate = false;
  std::string manager_namespace;
  Clock* clock = Clock::Real();
  webhook::FailOpen* fail_open = nullptr;  // PubPodValidatorOptions::fail_open
};
bool RegisterPubHandlers(webhook::HandlerRegistry* registry, const PubCache* cache,
                         kube::KubeClient* client, webhook::PodReader* pods,
                         const PubHandlerOptions& opts);

}  // namespace kruise::manager::pub
