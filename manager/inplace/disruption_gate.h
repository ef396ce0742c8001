#pragma once

// DisruptionGate: what a workload controller asks before it takes one of its pods down for an
// update (issue 17), so that a PodUnavailableBudget guarding the pod is respected by our own
// rollouts and not only by the /validate-pod webhook. Workload-neutral: the in-place engine and
// the workloads know this interface only; manager/pub implements it (PubDisruptionGate, the same
// code path as the webhook: the PUB's status records the pod through a resourceVersion-guarded
// patch, so the budget is spent once and the pod UPDATE admission that follows finds the pod
// already recorded and lets it through free) and manager/app wires it into the controllers'
// options. A null gate means no PodUnavailableBudget feature (PodUnavailableBudgetUpdateGate off,
// or the PUB CRD not served): everything is allowed.
//
// OpenKruise (pkg/controller/cloneset/sync/cloneset_update.go) asks
// pubcontrol.PodUnavailableBudgetValidatePod(pod, UPDATE, dryRun=false) under the feature gate
// PodUnavailableBudgetUpdateGate before each pod a CloneSet update round picked, in place or
// ReCreate (the specified-delete marking), and when denied requeues after one second and updates
// no further pod that round. Its Advanced StatefulSet ("todo validate in-place for pub") and
// SidecarSet controllers ask nothing: their pod writes meet the webhook. Ours ask too (see each
// controller's header): a denial becomes a skipped pod and a requeue instead of a failed patch.
//
// Thread-safety: implementations are safe for concurrent use (several workers, several
// controllers). Allow blocks on API calls (the PUB's status patch, a re-read on conflict).

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace kruise::manager::inplace {

enum class DisruptionOperation { kUpdate, kDelete };

struct GateDecision {
  bool allowed = true;
  std::string budget = {};   // the PodUnavailableBudget that decided; empty when none guards it
  std::string message = {};  // why it is denied
};

class DisruptionGate {
 public:
  virtual ~DisruptionGate() = default;
  // Whether `pod` (as the controller's pod cache has it: metadata, owners, conditions, container
  // statuses) may be made unavailable by `op` now. An allowed decision may have spent budget for
  // the pod: the caller goes ahead at once. `dry_run`: decide only, spend nothing. An error (the
  // budget could not be read or written) is neither: the caller retries later.
  virtual absl::StatusOr<GateDecision> Allow(const nlohmann::json& pod, DisruptionOperation op,
                                             bool dry_run) = 0;
};

// How soon a controller looks again after a denial (OpenKruise's CloneSet: one second). Only a
// fallback when the budget's pods are the workload's own: their events bring the workload back.
inline constexpr absl::Duration kDisruptionRetry = absl::Seconds(1);
// The reason of the workload's Warning event for a round's denials (ours; OpenKruise records
// PubPreventPodDeletion on the pod inside the webhook path only).
inline constexpr char kDisruptionDeniedReason[] = "PodUnavailableBudgetDenied";

// The denials of one reconcile round, for one event naming each budget and its pods.
class HeldPods {
 public:
  void Add(const std::string& pod, const GateDecision& decision);
  bool empty() const { return by_budget_.empty(); }
  // "pod(s) a, b held by PodUnavailableBudget pub-a: <its first message>; ..." (budgets by name).
  std::string Message() const;

 private:
  struct Held {
    std::vector<std::string> pods;
    std::string message;
  };
  std::map<std::string, Held> by_budget_;
};

}  // namespace kruise::manager::inplace
