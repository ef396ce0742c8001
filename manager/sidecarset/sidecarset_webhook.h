#pragma once

// The SidecarSet side of the pod webhook (issue 15), on every manager replica:
//  - SidecarSetCache holds what injection matches against: each SidecarSet as DefaultSidecarSet
//    gives it, with its selectors parsed once (SidecarSetMatcher), and the labels of every
//    Namespace (for namespaceSelector). It is fed by informer events (Attach) and read by
//    admission threads without blocking them on writers: readers take the current immutable
//    snapshot (one shared_ptr copy under a mutex), writers build the next one.
//  - SidecarSetInjector is the PodMutator the pod webhook chain runs on pod CREATE: it injects
//    every matching set (InjectSidecarsNoCopy, sidecarset_inject.h), turns a conflict between
//    sets into a denial naming both, and the injection notes into admission warnings.
//
// Not here: injectionStrategy.revision (an older revision from the ControllerRevision history;
// the latest spec is injected and a warning says so), pod UPDATE.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "kube/informer.h"
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
  // Registers the handlers above on the two informers (SidecarSetInformerOptions and
  // NamespaceInformerOptions) before they start.
  void Attach(kube::Informer* sidecarsets, kube::Informer* namespaces);

  // The defaulted sets that inject into `pod` (created in `request_namespace` when the pod names
  // none), sorted by name.
  std::vector<std::shared_ptr<const nlohmann::json>> Matching(
      const nlohmann::json& pod, const std::string& request_namespace) const;
  size_t size() const;

 private:
  struct Entry {
    SidecarSetMatcher matcher;
    std::shared_ptr<const nlohmann::json> set;
  };
  using Sets = std::map<std::string, std::shared_ptr<const Entry>>;
  using Namespaces = std::map<std::string, std::shared_ptr<const nlohmann::json>>;

  const std::string manager_namespace_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const Sets> sets_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const Namespaces> namespaces_ ABSL_GUARDED_BY(mu_);
};

// SidecarSets for the cache: everything (the injector needs the whole spec), managedFields
// dropped. Namespaces: name and labels only. Shared with the SidecarSet controller under these
// names (SharedInformers::Named).
inline constexpr char kSidecarSetInformer[] = "sidecarsets";
inline constexpr char kNamespaceInformer[] = "namespaces";
kube::InformerOptions SidecarSetInformerOptions();
kube::InformerOptions NamespaceInformerOptions();

class SidecarSetInjector final : public webhook::PodMutator {
 public:
  // `cache` and `clock` must outlive the injector.
  SidecarSetInjector(const SidecarSetCache* cache, Clock* clock) : cache_(cache), clock_(clock) {}
  absl::string_view Name() const override { return "sidecarset"; }
  bool Applies(const webhook::AdmissionRequest& request, const nlohmann::json& pod) const override;
  absl::Status Mutate(const webhook::AdmissionRequest& request, nlohmann::json* pod,
                      std::vector<std::string>* warnings) const override;

 private:
  const SidecarSetCache* cache_;
  Clock* clock_;
};

}  // namespace kruise::manager::sidecarset
