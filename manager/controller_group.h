#pragma once

// ControllerGroup: how kruise-manager's composition root (manager/app) hands its shared parts to a
// family of controllers without knowing them. A group owns its informers, reconcilers and
// kube::Controllers; Register() creates them and adds them to the kube::Manager (informers with
// AddInformer, controllers with Add; kube::Controller is a leader-only Runnable), so they start
// after the caches, the webhook readiness gate and leader election.
//
//   auto group = NewImagePullControllerGroup();
//   RETURN_IF_ERROR(group->Register(ctx));
//   manager.Run(stop);  // group must outlive Run()
//
// Thread-safety: Register() is called once, from the composition root, before Manager::Run().
// Errors: a group returns INVALID_ARGUMENT for bad options; it never starts threads itself.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/clock.h"
#include "kube/client.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "kube/manager.h"
#include "kube/object.h"
#include "kube/resources.h"

namespace kruise::manager {

namespace inplace {
class DisruptionGate;  // manager/inplace/disruption_gate.h
}  // namespace inplace

// Informers several groups read, created on first use so that a manager whose controllers need no
// pods caches none. One pod cache for all controllers (30k pods are the manager's largest cache):
// kube::CompactPodForManager keeps full objects only for pods of Kruise workloads, indexed by
// namespace and by controller uid.
class SharedInformers {
 public:
  // Pods without a controller (candidates for adoption), by namespace.
  static constexpr char kOrphanNamespaceIndex[] = "orphan-namespace";
  // Pods by the SidecarSets named in their kruise.io/sidecarset-injected-list annotation.
  static constexpr char kInjectedSidecarSetIndex[] = "injected-sidecarset";
  // Pods by "<namespace>/<WorkloadSpread>" of their apps.kruise.io/matched-workloadspread
  // annotation (its "name"); pods without one are not indexed.
  static constexpr char kWorkloadSpreadIndex[] = "workloadspread";
  // All must outlive this object.
  SharedInformers(kube::KubeClient* client, Clock* clock, kube::Manager* manager)
      : client_(client), clock_(clock), manager_(manager) {}
  static kube::InformerOptions PodOptions() {
    kube::InformerOptions o;
    o.resource = kube::resources::Pods();
    o.transform = kube::CompactPodForManager;
    o.indexers[kube::kNamespaceIndex] = kube::NamespaceIndexFunc();
    o.indexers[kube::kControllerUidIndex] = kube::ControllerUidIndexFunc();
    o.indexers[kOrphanNamespaceIndex] = [](const kube::Json& pod) -> std::vector<std::string> {
      if (kube::HasController(pod)) return {};
      return {kube::Namespace(pod)};
    };
    o.indexers[kInjectedSidecarSetIndex] = InjectedSidecarSets;
    o.indexers[kWorkloadSpreadIndex] = MatchedWorkloadSpread;
    return o;
  }
  // "<namespace>/<name>" of the WorkloadSpread a pod's apps.kruise.io/matched-workloadspread
  // annotation names (a JSON object {"name": ..., "subset": ...}); none when absent or malformed.
  static std::vector<std::string> MatchedWorkloadSpread(const kube::Json& pod) {
    const kube::Json* value =
        kube::FindPath(pod, {"metadata", "annotations", "apps.kruise.io/matched-workloadspread"});
    if (value == nullptr || !value->is_string()) return {};
    const kube::Json parsed = kube::Json::parse(value->get_ref<const std::string&>(), nullptr,
                                                /*allow_exceptions=*/false);
    const kube::Json* name = kube::Field(parsed, "name");
    if (name == nullptr || !name->is_string()) return {};
    return {absl::StrCat(kube::Namespace(pod), "/", name->get_ref<const std::string&>())};
  }
  // The names in a pod's kruise.io/sidecarset-injected-list (comma-separated, blanks trimmed).
  static std::vector<std::string> InjectedSidecarSets(const kube::Json& pod) {
    std::vector<std::string> out;
    const kube::Json* list =
        kube::FindPath(pod, {"metadata", "annotations", "kruise.io/sidecarset-injected-list"});
    if (list == nullptr || !list->is_string()) return out;
    for (absl::string_view name :
         absl::StrSplit(list->get_ref<const std::string&>(), ',', absl::SkipWhitespace())) {
      out.emplace_back(absl::StripAsciiWhitespace(name));
    }
    return out;
  }
  // Every node, kube::CompactNodeForManager (NodeImage, CloneSet spread ranks, Advanced
  // DaemonSet eligibility).
  static kube::InformerOptions NodeOptions() {
    kube::InformerOptions o;
    o.resource = kube::resources::Nodes();
    o.transform = kube::CompactNodeForManager;
    return o;
  }
  // Every ControllerRevision, indexed by controller uid (the workloads' revision histories).
  static kube::InformerOptions ControllerRevisionOptions() {
    kube::InformerOptions o;
    o.resource = kube::resources::ControllerRevisions();
    o.indexers[kube::kControllerUidIndex] = kube::ControllerUidIndexFunc();
    return o;
  }
  // Register() time only (before Manager::Run).
  kube::Informer* Pods() { return Named("pods", &PodOptions); }
  kube::Informer* Nodes() { return Named("nodes", &NodeOptions); }
  kube::Informer* ControllerRevisions() {
    return Named("controllerrevisions", &ControllerRevisionOptions);
  }
  // The informer every user names `name` (e.g. "sidecarsets": the pod webhook's and the
  // SidecarSet controller's), made from `options` by the first one. Before Manager::Run only.
  kube::Informer* Named(const std::string& name,
                        const std::function<kube::InformerOptions()>& options) {
    std::unique_ptr<kube::Informer>& slot = named_[name];
    if (slot == nullptr) {
      slot = std::make_unique<kube::Informer>(client_, clock_, options());
      manager_->AddInformer(slot.get());
    }
    return slot.get();
  }

 private:
  kube::KubeClient* const client_;
  Clock* const clock_;
  kube::Manager* const manager_;
  std::map<std::string, std::unique_ptr<kube::Informer>> named_;
};

struct ControllerContext {
  kube::KubeClient* client = nullptr;
  kube::Manager* manager = nullptr;
  kube::EventRecorder* recorder = nullptr;
  // Informers shared between groups; null: a group makes its own.
  SharedInformers* shared = nullptr;
  Clock* clock = Clock::Real();
  // Namespace of the manager itself (POD_NAMESPACE, default kruise-system).
  std::string namespace_name = "kruise-system";
  // Namespace holding pull secrets copied for the daemons.
  std::string daemon_config_namespace = "kruise-daemon-config";
  // What the workload controllers ask before taking a pod down for an update (issue 17): the
  // PodUnavailableBudget (manager/pub/pub_gate.h) with PodUnavailableBudgetUpdateGate; null: none.
  inplace::DisruptionGate* disruption_gate = nullptr;
  // Resolved feature gates (name → enabled).
  std::function<bool(absl::string_view gate)> feature_enabled = [](absl::string_view) {
    return true;
  };
  // Worker count for a controller: the --<name>-workers flag or `fallback`.
  std::function<int(absl::string_view controller, int fallback)> workers =
      [](absl::string_view, int fallback) { return fallback; };
};

// What a group's Register() checks first: the parts every controller needs.
inline absl::Status CheckControllerContext(const ControllerContext& ctx,
                                           absl::string_view controller) {
  if (ctx.client == nullptr || ctx.manager == nullptr || ctx.clock == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(controller, " controller needs a client, manager and clock"));
  }
  return absl::OkStatus();
}

// The informers a group makes for itself (those it does not take from SharedInformers): each is
// added to the manager and lives as long as the group. Register() time only.
class OwnedInformers {
 public:
  kube::Informer* Make(const ControllerContext& ctx, kube::InformerOptions options) {
    informers_.push_back(
        std::make_unique<kube::Informer>(ctx.client, ctx.clock, std::move(options)));
    ctx.manager->AddInformer(informers_.back().get());
    return informers_.back().get();
  }

 private:
  std::vector<std::unique_ptr<kube::Informer>> informers_;
};

class ControllerGroup {
 public:
  virtual ~ControllerGroup() = default;
  virtual std::string Name() const = 0;
  virtual absl::Status Register(const ControllerContext& ctx) = 0;
};

}  // namespace kruise::manager
