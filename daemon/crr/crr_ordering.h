#pragma once

// Per-pod serialisation of ContainerRecreateRequests: the node agent works on one CRR of a pod at
// a time. CRRs are ordered by phase (Completed, Recreating, Pending, then no phase) and creation
// time (then name); the first one that is not Completed is processed, and every other unfinished
// CRR of the pod waits with phase Pending.
//
// Pure functions over raw CRR JSON; thread-compatible.

#include <cstddef>
#include <optional>
#include <vector>

#include "kube/client.h"

namespace kruise::daemon {

struct CrrSelection {
  // Index (into the input) of the CRR to reconcile now; nullopt when every CRR is Completed.
  std::optional<size_t> active;
  // Indexes of unfinished CRRs that must wait; each needs `PendingPatch` applied unless it is
  // already Pending with the same message.
  std::vector<size_t> to_mark_pending;
};

// `crrs_of_pod`: every CRR of one pod (label crr.apps.kruise.io/pod-uid), in any order.
CrrSelection SelectActive(const std::vector<kube::Json>& crrs_of_pod);

// The merge patch (status only) that parks `crr` behind `active_name`; null JSON when `crr`
// already says exactly that.
kube::Json PendingPatch(const kube::Json& crr, const std::string& active_name);

}  // namespace kruise::daemon
