#pragma once

// Deletion protection (issue 17; OpenKruise's ResourcesDeletionProtection feature): objects
// labelled `policy.kruise.io/delete-protection` are guarded against DELETE by one validating
// webhook (kValidatePath; deploy/ sends only labelled objects, objectSelector `Exists`).
//   * `Always`: the delete is denied until the label is removed or changed.
//   * `Cascading`: denied while something would go with the object:
//       - Namespace: active pods (not Succeeded/Failed, not being deleted) or Bound PVCs (not
//         being deleted) in it;
//       - CustomResourceDefinition: custom resources of it not being deleted (only with the
//         DeletionProtectionForCRDCascadingGate; without it every Cascading CRD delete is denied,
//         as OpenKruise does);
//       - workloads (apps/v1 Deployment, ReplicaSet, StatefulSet; apps.kruise.io CloneSet,
//         StatefulSet, UnitedDeployment): spec.replicas > 0 (absent: allowed);
//       - Service, Ingress: nothing (OpenKruise guards them for `Always` only).
//   * any other value (also empty): allowed, as OpenKruise does.
// An object already being deleted (deletionTimestamp set) is allowed (the delete is under way).
// Advanced DaemonSet is not guarded: OpenKruise's DaemonSet webhook does not check the label.
//
// DecideDeletion is the pure decision; DeletionProtectionHandler reads the request's oldObject
// and, for Cascading only, the dependents from the API server (paged LISTs). A failed read denies
// (fail closed, code 500, the error in the message); `Always` and unlabelled objects never read.
// Objects in kube-system (and the kube-system Namespace) are never judged.
// Denials are 403. Without the ResourcesDeletionProtection gate everything is allowed (the
// handler stays registered so a webhook entry pointing at it does not fail).
//
// Thread-safety: the handler is safe for concurrent use (no state besides the client).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "kube/client.h"
#include "manager/webhook/admission.h"

namespace kruise::manager::deletionprotection {

inline constexpr char kLabel[] = "policy.kruise.io/delete-protection";
inline constexpr char kValidatePath[] = "/validate-deletion-protection";

enum class Protection { kNone, kAlways, kCascading };
// The label's meaning; values other than "Always" and "Cascading" (exact case) are kNone.
Protection ProtectionOf(const nlohmann::json& obj);

// What a Cascading delete of each kind waits for.
enum class GuardedKind { kNotGuarded, kNamespace, kCustomResourceDefinition, kWorkload, kAlwaysOnly };
// The kind of the object of a request (by group and kind; any version).
GuardedKind GuardedKindOf(const webhook::GroupVersionKind& gvk);

struct Target {
  GuardedKind kind = GuardedKind::kNotGuarded;
  std::string kind_name;  // "Namespace", "CloneSet", ... for messages
  std::string name;       // "ns/name" or "name"
  std::string label_value;
  bool being_deleted = false;
};

// What goes with the object (only read for Cascading).
struct Dependents {
  int64_t replicas = 0;     // workloads: spec.replicas
  int64_t active_pods = 0;  // namespaces
  int64_t bound_pvcs = 0;   // namespaces
  int64_t active_crs = 0;   // CRDs
};

struct Verdict {
  bool allowed = true;
  int code = 200;
  std::string message;
};

// Whether DecideDeletion needs `Dependents` for `target` (Cascading of a kind that has any).
bool NeedsDependents(const Target& target);
// The decision. `crd_cascading`: the DeletionProtectionForCRDCascadingGate.
Verdict DecideDeletion(const Target& target, const Dependents& deps, bool crd_cascading);

// The custom resources a CRD serves (its storage version; the first served one when none is
// marked). kInvalidArgument when the CRD lacks group, plural or versions.
absl::StatusOr<kube::Resource> CustomResourceOf(const nlohmann::json& crd);

struct HandlerOptions {
  bool enabled = true;        // ResourcesDeletionProtection
  bool crd_cascading = false;  // DeletionProtectionForCRDCascadingGate
  int64_t page_size = 500;    // LIST page size for the Cascading counts
};

class DeletionProtectionHandler final : public webhook::Handler {
 public:
  // `client` must outlive the handler.
  DeletionProtectionHandler(kube::KubeClient* client, HandlerOptions opts)
      : client_(client), opts_(opts) {}
  webhook::AdmissionResponse Handle(const webhook::AdmissionRequest& request) override;

  // The dependents of `obj` (its kind `kind`), read from the API server.
  absl::StatusOr<Dependents> ReadDependents(GuardedKind kind, const nlohmann::json& obj);

 private:
  kube::KubeClient* client_;
  const HandlerOptions opts_;
};

// Registers the handler at kValidatePath.
void RegisterDeletionProtectionHandler(webhook::HandlerRegistry* registry,
                                       kube::KubeClient* client, const HandlerOptions& opts);

}  // namespace kruise::manager::deletionprotection
