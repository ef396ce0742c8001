#pragma once

// A stand-in for the PodUnavailableBudget behind inplace::DisruptionGate, for the workload
// controllers' tests: one budget ("web-pub") of `budget` pods; a pod allowed once stays allowed
// (as a pod recorded in the PUB's status), every other pod costs one; none left: denied.

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "kube/object.h"
#include "manager/inplace/disruption_gate.h"

namespace kruise::testing {

class FakeDisruptionGate final : public manager::inplace::DisruptionGate {
 public:
  absl::StatusOr<manager::inplace::GateDecision> Allow(const nlohmann::json& pod,
                                                       manager::inplace::DisruptionOperation,
                                                       bool dry_run) override {
    absl::MutexLock lock(&mu_);
    const std::string name = kube::Name(pod);
    asked_.push_back(name);
    if (recorded_.count(name) > 0) return manager::inplace::GateDecision{.budget = "web-pub"};
    if (budget_ <= 0) {
      return manager::inplace::GateDecision{
          .allowed = false, .budget = "web-pub", .message = "pub unavailable allowed is negative"};
    }
    if (!dry_run) {
      --budget_;
      recorded_.insert(name);
    }
    return manager::inplace::GateDecision{.budget = "web-pub"};
  }

  void SetBudget(int budget) {
    absl::MutexLock lock(&mu_);
    budget_ = budget;
  }
  // The pods asked about, in order, since the last call.
  std::vector<std::string> TakeAsked() {
    absl::MutexLock lock(&mu_);
    return std::exchange(asked_, {});
  }

 private:
  absl::Mutex mu_;
  int budget_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<std::string> recorded_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> asked_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kruise::testing
