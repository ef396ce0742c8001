#pragma once

// apps.kruise.io names on the wire that more than one component reads or writes: the labels the
// manager's ContainerRecreateRequest webhook sets and the daemon selects on, and the pod conditions
// the CRR flow flips. One definition, so the daemon and the manager cannot drift apart.

namespace kruise::kube {

// ContainerRecreateRequest labels (set by the mutating webhook).
inline constexpr char kCrrNodeNameLabel[] = "crr.apps.kruise.io/node-name";
inline constexpr char kCrrPodUidLabel[] = "crr.apps.kruise.io/pod-uid";
inline constexpr char kCrrActiveLabel[] = "crr.apps.kruise.io/active";

// Pod conditions: the readiness gate OpenKruise's controllers flip (CRR unreadyGracePeriodSeconds,
// in-place update, ...) and the CRR's pre-recreate grace marker.
inline constexpr char kKruisePodReadyCondition[] = "KruisePodReady";
inline constexpr char kPreRecreateGraceCondition[] = "PreRecreateGrace";

}  // namespace kruise::kube
