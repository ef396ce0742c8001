#pragma once

// The SidecarSet side of the pod webhook (issue 15), on every manager replica:
//  - SidecarSetCache holds what injection matches against: each SidecarSet as DefaultSidecarSet
//    gives it, with its selectors parsed once (SidecarSetMatcher), and the labels of every
//    Namespace (for namespaceSelector). It is fed by informer events (Attach) and read by
//    admission threads without blocking them on writers: readers take the current immutable
//    snapshot (one shared_ptr copy under a mutex), writers build the next one.
//  - SidecarSetInjector is the PodMutator the pod webhook chain runs on pod CREATE: it injects
//    every matching set (PlanSidecarInjection, sidecarset_inject.h: JSON Patch operations sent
//    as they are), turns a conflict between sets into a denial naming both, and the injection
//    notes into admission warnings.
//  - injectionStrategy.revision (sidecarset_revision.h): the cache also holds the sets'
//    ControllerRevisions (the manager namespace's, labelled kruise.io/sidecarset-name, from the
//    informer the controller shares). Per set change or revision event it prepares the latest set
//    (status.latestRevision = LatestSidecarSetRevisionName, so pods record the revision the
//    controller writes) and the set restored from the revision injectionStrategy.revision names
//    (RestoreSidecarSetRevision, defaulted). The injector injects the restored one when
//    InjectHistoryRevision says so (a uniform draw per set and pod for Partial percentages); the
//    pod's hash annotation then records that revision and its hashes. A revision asked for but not
//    there: the latest spec, and an admission warning saying so (OpenKruise denies the pod instead;
//    a revision pruned or not yet in the cache should not stop a Deployment's pods).
//
// Not here: pod UPDATE.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "kube/informer.h"
#include "kube/selector_index.h"
#include "manager/sidecarset/sidecarset_inject.h"
#include "manager/webhook/pod_webhook.h"

namespace kruise::manager::sidecarset {

class SidecarSetCache {
 public:
  // `manager_namespace`: never injected into (nor kube-system).
  explicit SidecarSetCache(std::string manager_namespace);

  // Informer handlers (any thread). A set or namespace replaces the one of its name.
  void UpsertSidecarSet(const nlohmann::json& sidecarset);
  void RemoveSidecarSet(const std::string& name);
  void UpsertNamespace(const nlohmann::json& ns);
  void RemoveNamespace(const std::string& name);
  // A ControllerRevision of a set (labelled kruise.io/sidecarset-name; others are ignored).
  void UpsertRevision(const nlohmann::json& revision);
  void RemoveRevision(const nlohmann::json& revision);
  // Registers the handlers above on the informers (SidecarSetInformerOptions,
  // NamespaceInformerOptions, SidecarSetRevisionInformerOptions; `revisions` may be null: no
  // history, every pod gets the latest spec) before they start.
  void Attach(kube::Informer* sidecarsets, kube::Informer* namespaces,
              kube::Informer* revisions = nullptr);

  // The defaulted sets that inject into `pod` (created in `request_namespace` when the pod names
  // none), sorted by name.
  std::vector<std::shared_ptr<const nlohmann::json>> Matching(
      const nlohmann::json& pod, const std::string& request_namespace) const;
  // The same with each set's injection revision.
  struct Match {
    std::shared_ptr<const nlohmann::json> set;  // the latest spec (what Matching returns)
    // The set restored from injectionStrategy.revision's revision (defaulted, hashes and
    // status.latestRevision of that revision); null when it asks for none or it is missing.
    std::shared_ptr<const nlohmann::json> history;
    std::string missing_revision;  // non-empty: asked for, not found (the admission warning)
  };
  std::vector<Match> MatchingWithRevisions(const nlohmann::json& pod,
                                           const std::string& request_namespace) const;
  size_t size() const;

 private:
  struct Entry {
    SidecarSetMatcher matcher;
    std::shared_ptr<const nlohmann::json> base;  // defaulted, with hash annotations
    std::shared_ptr<const nlohmann::json> set;   // base + status.latestRevision
    std::shared_ptr<const nlohmann::json> history;
    std::string missing_revision;
  };
  using Sets = std::map<std::string, std::shared_ptr<const Entry>>;
  // What admissions read: the sets, and the same indexed by a pod label each requires
  // (SidecarSetMatcher::RequiredLabel), so a pod is checked against the sets its labels can
  // match plus the few that require no label value, not against every set.
  struct Snapshot {
    Sets sets;
    kube::SelectorIndex<Entry> index;
    static std::shared_ptr<const Snapshot> Of(Sets sets);
  };
  using Namespaces = std::map<std::string, std::shared_ptr<const nlohmann::json>>;
  // set name -> revision name -> revision.
  using Revisions = std::map<std::string, std::map<std::string, nlohmann::json>>;

  // The entry of `base` given the set's revisions. Holds write_mu_.
  std::shared_ptr<const Entry> MakeEntry(std::shared_ptr<const nlohmann::json> base) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  void RebuildSet(const std::string& set_name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Publishes the next snapshot: the current sets with `change` applied (it returns false to
  // leave everything as it is). The one way writers swap snapshots; readers never wait on the
  // rebuild of the index.
  void Publish(absl::FunctionRef<bool(Sets*)> change) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  const std::string manager_namespace_;
  // Serialises writers (informer handlers of different informers): each builds the next snapshot
  // from the current one and the revisions.
  absl::Mutex write_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  Revisions revisions_ ABSL_GUARDED_BY(write_mu_);
  mutable absl::Mutex mu_;
  std::shared_ptr<const Snapshot> sets_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const Namespaces> namespaces_ ABSL_GUARDED_BY(mu_);
};

// SidecarSets for the cache: everything (the injector needs the whole spec), managedFields
// dropped. Namespaces: name and labels only. Shared with the SidecarSet controller under these
// names (SharedInformers::Named).
inline constexpr char kSidecarSetInformer[] = "sidecarsets";
inline constexpr char kNamespaceInformer[] = "namespaces";
kube::InformerOptions SidecarSetInformerOptions();
kube::InformerOptions NamespaceInformerOptions();
// The sets' ControllerRevisions: `manager_namespace` only, label kruise.io/sidecarset-name present
// (a few objects per set), indexed by that label (kSidecarSetRevisionIndex).
inline constexpr char kSidecarSetRevisionInformer[] = "sidecarset-revisions";
inline constexpr char kSidecarSetRevisionIndex[] = "sidecarset";
kube::InformerOptions SidecarSetRevisionInformerOptions(const std::string& manager_namespace);

class SidecarSetInjector final : public webhook::PodMutator {
 public:
  // `cache` and `clock` must outlive the injector. `uniform01`: draws in [0, 1) for
  // injectionStrategy.revision policy Partial (thread-safe; null: a per-thread PRNG).
  SidecarSetInjector(const SidecarSetCache* cache, Clock* clock,
                     std::function<double()> uniform01 = nullptr)
      : cache_(cache), clock_(clock), uniform01_(std::move(uniform01)) {}
  absl::string_view Name() const override { return "sidecarset"; }
  absl::Status Mutate(const webhook::AdmissionRequest& request, webhook::PodEdit* pod,
                      std::vector<std::string>* warnings) const override;

 private:
  double Uniform01() const;

  const SidecarSetCache* cache_;
  Clock* clock_;
  std::function<double()> uniform01_;
};

}  // namespace kruise::manager::sidecarset
