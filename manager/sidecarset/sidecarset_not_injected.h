#pragma once

// A note on pods created without the sidecars of SidecarSets that should have been injected
// (issue 15). Our addition: OpenKruise has no such note. The pod webhook's failurePolicy is Ignore,
// so with no kruise-manager answering, pods are created as they were sent, without sidecars; this
// is how it gets said.
//
// A pod counts as created without the sidecars of SidecarSet S (SidecarSetsNotInjected) when:
//  - S matches the pod now, by the injection's rules (SidecarSetMatcher, sidecarset_inject.h:
//    selector, spec.namespace, namespaceSelector, not paused; the pod not in kube-system or the
//    manager's namespace, not being deleted, not finished);
//  - S's name is not in the pod's kruise.io/sidecarset-injected-list;
//  - the pod's metadata.creationTimestamp is strictly later than S's (S existed when the pod was
//    created; older pods are legitimately untouched; equal seconds are given the benefit of the
//    doubt);
//  - the pod webhook is called for the pod's namespace: not one whose labels the webhook
//    configuration excludes (control-plane=openkruise, pod-webhook.kruise.io/disabled present;
//    deploy/manager/base/webhooks.yaml).
// Limits of "matches now": a set unpaused, or whose selector widened, after the pod was created,
// or pod or namespace labels changed since, make the pod look like one the webhook missed; the
// note's message says "not injected when it was created", which stays true.
//
// The leader records it once per pod and set (SidecarSetNotInjectedReconciler):
//  - annotation kruise.io/sidecarset-not-injected on the pod: the comma-separated, sorted union of
//    the names already there and the new ones, written as a JSON merge patch of that one
//    annotation with metadata.resourceVersion (the API server refuses it with 409 Conflict when
//    the pod changed since the cache saw it: nothing else is touched, nothing merged from a stale
//    value); the shared pod cache keeps this annotation and creationTimestamp even in the stubs
//    it keeps for most pods (kube::CompactPodForManager);
//  - then a Warning event SidecarSetNotInjected on the pod naming the new sets.
// A pod whose annotation already names every such set gets nothing: the annotation is the durable
// record, so a restart or a new leader repeats neither the patch nor the event. (A leader dying
// between the patch and the event loses that event.)
//
// Detection without scanning pods per SidecarSet reconcile: CreatedSidecarSets holds each set's
// matcher and creation time (rebuilt per set event, never per pod), indexed by a pod label each
// set requires, so a pod event tests only the sets its labels can match. A pod event (add or
// update) whose pod has sets to note enqueues that pod into the "sidecarset-not-injected"
// controller (leader-only, WatchPodsNotInjected); its reconcile re-reads the pod from the cache,
// decides again, patches and records. Because the pod and set caches fill in no fixed order, one
// request (AllPods) queued at registration makes the leader's first reconcile look at every cached
// pod once (one decode at a time; nothing when no set can match a pod) and enqueue those to note.
// A pod whose every event came before its set's reached the cache is noted at its next event (the
// kubelet's status updates follow creation) or by the next leader. On other replicas the filter
// runs and the queue holds the pods' keys, but nothing is written or recorded. The group registers
// this controller only with the PodWebhook gate on (without it no pod is ever injected).
//
// Thread-safety: CreatedSidecarSets and the reconciler are thread-safe (informer handlers and
// workers). The free functions are pure and never throw.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kube/client.h"
#include "kube/controller.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "kube/selector_index.h"
#include "manager/sidecarset/sidecarset_inject.h"

namespace kruise::manager::sidecarset {

inline constexpr char kSidecarSetNotInjectedAnnotation[] = "kruise.io/sidecarset-not-injected";
inline constexpr char kSidecarSetNotInjectedReason[] = "SidecarSetNotInjected";

// What the decision reads of a SidecarSet, prepared once per set change.
struct CreatedSidecarSet {
  explicit CreatedSidecarSet(const nlohmann::json& sidecarset);
  SidecarSetMatcher matcher;          // name() is the set's name
  std::optional<absl::Time> created;  // metadata.creationTimestamp; none: never noted
};

// The pod's Namespace object (name and labels) by name; null when unknown.
using NamespaceLookup =
    std::function<std::shared_ptr<const nlohmann::json>(const std::string& namespace_name)>;

// The names of `sets` that should have been injected into `pod` at its creation (above), are not
// in its kruise.io/sidecarset-injected-list and not yet in its kruise.io/sidecarset-not-injected,
// sorted and unique. `namespace_of` is called at most once, only when a set passes the cheap tests
// (creation times, lists). Null entries of `sets` are skipped.
std::vector<std::string> SidecarSetsNotInjected(const nlohmann::json& pod,
                                                const std::vector<const CreatedSidecarSet*>& sets,
                                                const NamespaceLookup& namespace_of,
                                                absl::string_view manager_namespace);
// The names in the pod's kruise.io/sidecarset-not-injected (comma-separated, blanks trimmed).
std::vector<std::string> NotInjectedSidecarSetsNoted(const nlohmann::json& pod);
// Whether the pod webhook configuration leaves pods of this Namespace alone (null: unknown, no).
bool PodWebhookSkipsNamespace(const nlohmann::json* namespace_obj);
// The merge patch recording `names` on `pod`: {"metadata": {"resourceVersion": the pod's,
// "annotations": {kruise.io/sidecarset-not-injected: sorted union of the noted and `names`}}}.
nlohmann::json SidecarSetNotInjectedPatch(const nlohmann::json& pod,
                                          const std::vector<std::string>& names);
// The event's message for `names`.
std::string SidecarSetNotInjectedMessage(const std::vector<std::string>& names);

// The sets as the decision reads them, fed by the SidecarSet informer's events. Readers take an
// immutable snapshot; writers (one set at a time) build the next one.
class CreatedSidecarSets {
 public:
  CreatedSidecarSets();
  void Upsert(const nlohmann::json& sidecarset);
  void Remove(const std::string& name);
  // Registers Upsert/Remove on `sidecarsets` (SidecarSetInformerOptions) before it starts.
  void Attach(kube::Informer* sidecarsets);

  struct Snapshot {
    std::map<std::string, std::shared_ptr<const CreatedSidecarSet>> by_name;
    std::vector<const CreatedSidecarSet*> all;  // by name; points into by_name
    // The sets that can match a pod (not never()), indexed by a pod label each requires
    // (SidecarSetMatcher::IndexInto), as SidecarSetCache does.
    kube::SelectorIndex<CreatedSidecarSet> index;
    // The sets `pod`'s labels can match: the unindexed ones and those whose required label the
    // pod has with one of its values (each once). What SidecarSetsNotInjected is given per event.
    std::vector<const CreatedSidecarSet*> For(const nlohmann::json& pod) const;
  };
  std::shared_ptr<const Snapshot> Get() const;

 private:
  void Set(std::map<std::string, std::shared_ptr<const CreatedSidecarSet>> by_name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  absl::Mutex write_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  std::shared_ptr<const Snapshot> snapshot_ ABSL_GUARDED_BY(mu_);
};

struct SidecarSetNotInjectedOptions {
  std::string manager_namespace = "kruise-system";  // never injected into (nor kube-system)
  // Fallback re-check after a conflict (the pod's update event normally brings it back first).
  absl::Duration conflict_recheck = absl::Seconds(10);
};

class SidecarSetNotInjectedReconciler final : public kube::Reconciler {
 public:
  // Not a pod (pods are namespaced): every cached pod is looked at, those to note enqueued.
  static kube::Request AllPods() { return {"", "(all pods)"}; }

  // Everything given must outlive the reconciler. `namespaces` (NamespaceInformerOptions) and
  // `recorder` may be null. `enqueue` adds a request to the controller's queue (the AllPods pass).
  SidecarSetNotInjectedReconciler(kube::KubeClient* client, const CreatedSidecarSets* sets,
                                  kube::Informer* pods, kube::Informer* namespaces,
                                  kube::EventRecorder* recorder,
                                  std::function<void(const kube::Request&)> enqueue,
                                  SidecarSetNotInjectedOptions opts);
  absl::StatusOr<kube::Result> Reconcile(const kube::Request& req) override;
  // SidecarSetsNotInjected against the current sets and namespaces (the pod event filter).
  std::vector<std::string> ToNote(const nlohmann::json& pod) const;

 private:
  kube::KubeClient* const client_;
  const CreatedSidecarSets* const sets_;
  kube::Informer* const pods_;
  kube::Informer* const namespaces_;
  kube::EventRecorder* const recorder_;
  const std::function<void(const kube::Request&)> enqueue_;
  const SidecarSetNotInjectedOptions opts_;
};

// Wires `controller` (running `reconciler`) to `pods` (SharedInformers::PodOptions()): adds and
// updates of pods with sets to note (ToNote) enqueue the pod; queues AllPods. Before it starts.
void WatchPodsNotInjected(kube::Controller* controller,
                          const SidecarSetNotInjectedReconciler* reconciler, kube::Informer* pods);

}  // namespace kruise::manager::sidecarset
