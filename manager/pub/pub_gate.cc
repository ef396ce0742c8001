#include "manager/pub/pub_gate.h"

#include <algorithm>

#include "kube/object.h"

namespace kruise::manager::pub {

absl::StatusOr<inplace::GateDecision> PubDisruptionGate::Allow(const nlohmann::json& pod,
                                                               inplace::DisruptionOperation op,
                                                               bool dry_run) {
  const std::string ns = kube::Namespace(pod);
  if (std::find(excluded_namespaces_.begin(), excluded_namespaces_.end(), ns) !=
      excluded_namespaces_.end()) {
    return inplace::GateDecision{};
  }
  const BudgetVerdict v = JudgeDisruption(
      *cache_, client_, clock_, pod,
      op == inplace::DisruptionOperation::kUpdate ? Operation::kUpdate : Operation::kDelete,
      dry_run);
  if (v.allowed) return inplace::GateDecision{.allowed = true, .budget = v.pub};
  if (v.code == 500) return absl::UnavailableError(v.message);
  return inplace::GateDecision{.allowed = false, .budget = v.pub, .message = v.message};
}

}  // namespace kruise::manager::pub
