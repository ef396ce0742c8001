#pragma once

// The pod admission webhook (`/mutate-pod`, pods CREATE): one handler running a chain of
// PodMutators in a fixed order, the way OpenKruise's pod webhook does (readiness gate first, then
// WorkloadSpread, SidecarSet, ... as they are added). A new feature adds a PodMutator to the chain
// built by NewPodMutatingHandler's caller; the handler, its registration and the webhook
// configuration stay as they are.
//
//   std::vector<std::unique_ptr<PodMutator>> chain;
//   chain.push_back(std::make_unique<ReadinessGateInjector>(/*all_pods=*/false));
//   registry.Register(kMutatePodPath, std::make_shared<PodMutatingHandler>(std::move(chain),
//   opts));
//
// Cost: a pod no mutator changes is answered "allowed" without copying it; otherwise the pod is
// copied once (when the first mutator asks to edit it), later mutators edit the same copy, and
// the reply is the JSON Patch from the original to the copy.
//
// Thread-safety: Handle() is called concurrently from server threads; mutators must be
// thread-safe (the ones here are stateless).

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "kube/kruise_api.h"
#include "manager/webhook/admission.h"

namespace kruise::manager::webhook {

inline constexpr char kMutatePodPath[] = "/mutate-pod";
using kube::kKruisePodReadyCondition;

// The pod a mutator chain works on: the request's object until a mutator asks to edit it, then
// one copy that every later mutator sees and edits.
class PodEdit {
 public:
  explicit PodEdit(const Json& original) : original_(original) {}
  // The pod as the chain has left it so far.
  const Json& pod() const { return copy_ ? *copy_ : original_; }
  // The pod to edit; the first call copies the original. Ask only when about to change it.
  Json* Mutable() {
    if (!copy_) copy_.emplace(original_);
    return &*copy_;
  }
  bool editing() const { return copy_.has_value(); }

 private:
  const Json& original_;
  std::optional<Json> copy_;
};

class PodMutator {
 public:
  virtual ~PodMutator() = default;
  virtual absl::string_view Name() const = 0;
  // Reads `pod->pod()` and, only when it has something to change, edits `pod->Mutable()`. An
  // error denies the pod with its message; keep errors for input the pod's author must fix (an
  // error after Mutable() is fine: nothing of a denied pod is kept). Lines appended to `warnings`
  // reach the client as admission warnings (kubectl prints them).
  virtual absl::Status Mutate(const AdmissionRequest& request, PodEdit* pod,
                              std::vector<std::string>* warnings) const = 0;
};

// Adds readiness gate KruisePodReady to pods controlled by an apps.kruise.io workload, or to
// every pod when `all_pods` (feature gate KruisePodReadinessGate).
class ReadinessGateInjector final : public PodMutator {
 public:
  explicit ReadinessGateInjector(bool all_pods) : all_pods_(all_pods) {}
  absl::string_view Name() const override { return "readiness-gate"; }
  absl::Status Mutate(const AdmissionRequest& request, PodEdit* pod,
                      std::vector<std::string>* warnings) const override;

 private:
  bool all_pods_;
};

class PodMutatingHandler final : public Handler {
 public:
  struct Options {
    // Never mutated, whatever the webhook configuration's namespaceSelector says: a second line of
    // defence, so a hand-edited configuration cannot make us touch the control plane.
    std::vector<std::string> excluded_namespaces = {"kube-system"};
  };
  PodMutatingHandler(std::vector<std::unique_ptr<PodMutator>> chain, Options options);

  AdmissionResponse Handle(const AdmissionRequest& request) override;
  size_t size() const { return chain_.size(); }

 private:
  std::vector<std::unique_ptr<PodMutator>> chain_;
  Options options_;
};

// True when `pod`'s controller owner reference belongs to the apps.kruise.io group.
bool IsPodOwnedByKruise(const Json& pod);

}  // namespace kruise::manager::webhook
