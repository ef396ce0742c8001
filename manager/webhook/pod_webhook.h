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
// Cost: a pod no mutator applies to is answered "allowed" without copying it; otherwise the pod
// is copied once, every applicable mutator edits the copy, and the reply is the JSON Patch from
// the original to the copy.
//
// Thread-safety: Handle() is called concurrently from server threads; mutators must be
// thread-safe (the ones here are stateless).

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "kube/kruise_api.h"
#include "manager/webhook/admission.h"

namespace kruise::manager::webhook {

inline constexpr char kMutatePodPath[] = "/mutate-pod";
using kube::kKruisePodReadyCondition;

class PodMutator {
 public:
  virtual ~PodMutator() = default;
  virtual absl::string_view Name() const = 0;
  // Cheap test on the unmodified pod: does Mutate have anything to do?
  virtual bool Applies(const AdmissionRequest& request, const Json& pod) const = 0;
  // Edits `pod` (a copy, possibly already edited by earlier mutators). An error denies the pod
  // with its message; keep errors for input the pod's author must fix. Lines appended to
  // `warnings` reach the client as admission warnings (kubectl prints them).
  virtual absl::Status Mutate(const AdmissionRequest& request, Json* pod,
                              std::vector<std::string>* warnings) const = 0;
};

// Adds readiness gate KruisePodReady to pods controlled by an apps.kruise.io workload, or to
// every pod when `all_pods` (feature gate KruisePodReadinessGate).
class ReadinessGateInjector final : public PodMutator {
 public:
  explicit ReadinessGateInjector(bool all_pods) : all_pods_(all_pods) {}
  absl::string_view Name() const override { return "readiness-gate"; }
  bool Applies(const AdmissionRequest& request, const Json& pod) const override;
  absl::Status Mutate(const AdmissionRequest& request, Json* pod,
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
