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
// Cost: a pod no mutator changes is answered "allowed" without copying it. A mutator that sends
// JSON Patch operations (PodEdit::AddOps; the SidecarSet injector) costs no copy of the pod
// either; one that edits the pod (PodEdit::Mutable) makes the chain copy it once and reply with
// the diff.
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
// Pods DELETE and UPDATE, pods/eviction CREATE (PodUnavailableBudget, WorkloadSpread records).
inline constexpr char kValidatePodPath[] = "/validate-pod";
using kube::kKruisePodReadyCondition;

// The pod a mutator chain works on: the request's object until a mutator changes it. A mutator
// either sends RFC 6902 operations (AddOps) or edits the pod itself (Mutable). Later mutators
// always see earlier ones' changes: reading pod() or Mutable() after operations copies the pod
// and applies them, and the reply is then the diff from the original to the copy. Operations
// nobody reads after (the last mutator's, e.g. the SidecarSet injector's) are sent as they are:
// no copy of the pod, no diff.
class PodEdit {
 public:
  explicit PodEdit(const Json& original) : original_(original) {}
  // The pod as the chain has left it so far.
  const Json& pod() {
    if (!ops_.empty()) Mutable();
    return copy_ ? *copy_ : original_;
  }
  // The pod to edit. Ask only when about to change it.
  Json* Mutable();
  // Operations against pod() as it is now (a JSON array; may throw Json's exceptions when an
  // operation does not apply to a copy already made).
  void AddOps(Json ops);
  bool changed() const { return copy_.has_value() || !ops_.empty(); }
  // Allowed, with the patch from the original to the pod as the chain left it (none if equal).
  AdmissionResponse Response() const;

 private:
  const Json& original_;
  std::optional<Json> copy_;
  Json ops_ = Json::array();  // pending while !copy_
};

class PodMutator {
 public:
  virtual ~PodMutator() = default;
  virtual absl::string_view Name() const = 0;
  // Reads `pod->pod()` and, only when it has something to change, edits `pod->Mutable()` or
  // sends `pod->AddOps()`. Lines appended to `warnings` reach the client as admission warnings
  // (kubectl prints them). Errors:
  //   * a policy error (kInvalidArgument, kFailedPrecondition, ...: input the pod's author or a
  //     SidecarSet's must fix) denies the pod with its message (an error after Mutable() is fine:
  //     nothing of a denied pod is kept);
  //   * an infrastructure error (IsInfrastructureFailure: an API call that failed, a write that
  //     kept conflicting) must leave the pod as it was: with Options::fail_open the pod goes on
  //     through the rest of the chain and is allowed with a warning (failurePolicy Ignore).
  //   An exception allows the pod unchanged (no patch at all) with a warning under fail_open.
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
    // The webhook is failurePolicy Ignore (deploy/): infrastructure errors and exceptions of a
    // mutator allow the pod with a warning (fail_open.h). Null: they deny it (code 500).
    FailOpen* fail_open = nullptr;
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
