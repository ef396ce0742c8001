#pragma once

// What CloneSet, Advanced StatefulSet and Advanced DaemonSet write to their status the same way:
//
//  - StepConditions: OpenKruise's FailedScale and FailedUpdate conditions. While a step fails, a
//    True condition with the error as its message (its lastTransitionTime kept as long as it
//    stays failing); once the step succeeds, the condition is removed. A step that did not run
//    this round (nullopt) leaves its condition as it is; other conditions are kept.
//  - WriteStatusIfChanged: a merge patch of the status subresource with the fields the controller
//    computes, guarded by the workload's resourceVersion (a status computed from a stale spec is
//    refused with ABORTED and planned again), and only when one of them differs.

#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "kube/client.h"

namespace kruise::manager::workload {

// The workload's new status.conditions; null when it has none and needs none.
kube::Json StepConditions(const kube::Json& workload, absl::Time now,
                          const std::optional<absl::Status>& scale_result,
                          const std::optional<absl::Status>& update_result);

// NOT_FOUND (the workload is gone) counts as done.
absl::Status WriteStatusIfChanged(kube::KubeClient* client, const kube::Resource& resource,
                                  const kube::Json& workload, const kube::Json& status);

}  // namespace kruise::manager::workload
