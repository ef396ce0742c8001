#pragma once

// PubDisruptionGate: the PodUnavailableBudget behind inplace::DisruptionGate (issue 17), for the
// CloneSet, Advanced StatefulSet and SidecarSet controllers' updates. manager/app creates it when
// the feature gate PodUnavailableBudgetUpdateGate is on and the PUB CRD is served, and hands it
// to the controllers through ControllerContext::disruption_gate.
//
// The same code path as the /validate-pod webhook (JudgeDisruption, pub_webhook.h): the PUB
// guarding the pod from the shared PubCache, DecideDisruption, and the cost written to the PUB's
// status by a patch whose first operation tests its resourceVersion (re-read and decided again
// on a conflict), before Allow returns. The controller's pod UPDATE that follows therefore meets
// a webhook that finds the pod in unavailablePods (DELETE: disruptedPods) and lets it through
// without spending again. Pods in kube-system and the manager's own namespace are never judged,
// as by the webhook. A denial (budget spent, or the PUB changing too often to record the pod)
// is a GateDecision{allowed: false} naming the PUB; an API error writing or re-reading the PUB
// is an error status (UNAVAILABLE), never an unrecorded allow.
//
// Thread-safety: safe for concurrent use. Allow blocks on at most kube::kConflictRetries + 1
// patches and as many re-reads.

#include <string>
#include <vector>

#include "common/clock.h"
#include "kube/client.h"
#include "manager/inplace/disruption_gate.h"
#include "manager/pub/pub_webhook.h"

namespace kruise::manager::pub {

class PubDisruptionGate final : public inplace::DisruptionGate {
 public:
  // `cache` and `client` must outlive the gate.
  PubDisruptionGate(const PubCache* cache, kube::KubeClient* client, Clock* clock,
                    std::vector<std::string> excluded_namespaces = {"kube-system"})
      : cache_(cache),
        client_(client),
        clock_(clock),
        excluded_namespaces_(std::move(excluded_namespaces)) {}

  absl::StatusOr<inplace::GateDecision> Allow(const nlohmann::json& pod,
                                              inplace::DisruptionOperation op,
                                              bool dry_run) override;

 private:
  const PubCache* const cache_;
  kube::KubeClient* const client_;
  Clock* const clock_;
  const std::vector<std::string> excluded_namespaces_;
};

}  // namespace kruise::manager::pub
