#include "manager/inplace/disruption_gate.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kruise::manager::inplace {

void HeldPods::Add(const std::string& pod, const GateDecision& decision) {
  Held& h = by_budget_[decision.budget];
  if (h.pods.empty()) h.message = decision.message;
  h.pods.push_back(pod);
}

std::string HeldPods::Message() const {
  std::vector<std::string> parts;
  for (const auto& [budget, held] : by_budget_) {
    std::string part = absl::StrCat("pod(s) ", absl::StrJoin(held.pods, ", "), " held by ",
                                    budget.empty() ? std::string("a PodUnavailableBudget")
                                                   : absl::StrCat("PodUnavailableBudget ", budget));
    if (!held.message.empty()) absl::StrAppend(&part, ": ", held.message);
    parts.push_back(std::move(part));
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace kruise::manager::inplace
