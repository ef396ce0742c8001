#pragma once

// CloneSet (apps.kruise.io/v1alpha1) names on the wire, as OpenKruise spells them. Shared by the
// CloneSet webhook handlers, planners and controller.

namespace kruise::manager::cloneset {

// Pod and PVC labels.
inline constexpr char kInstanceIdLabel[] = "apps.kruise.io/cloneset-instance-id";
inline constexpr char kSpecifiedDeleteLabel[] = "apps.kruise.io/specified-delete";
inline constexpr char kLifecycleStateLabel[] = "lifecycle.apps.kruise.io/state";
inline constexpr char kLifecycleTimestampAnnotation[] = "lifecycle.apps.kruise.io/timestamp";
inline constexpr char kPodDeletionCostAnnotation[] = "controller.kubernetes.io/pod-deletion-cost";
inline constexpr char kImagePredownloadParallelismAnnotation[] =
    "apps.kruise.io/image-predownload-parallelism";

// Lifecycle states (label lifecycle.apps.kruise.io/state).
inline constexpr char kStatePreparingNormal[] = "PreparingNormal";
inline constexpr char kStateNormal[] = "Normal";
inline constexpr char kStatePreparingUpdate[] = "PreparingUpdate";
inline constexpr char kStateUpdating[] = "Updating";
inline constexpr char kStateUpdated[] = "Updated";
inline constexpr char kStatePreparingDelete[] = "PreparingDelete";

// spec.updateStrategy.type
inline constexpr char kReCreate[] = "ReCreate";
inline constexpr char kInPlaceIfPossible[] = "InPlaceIfPossible";
inline constexpr char kInPlaceOnly[] = "InPlaceOnly";

}  // namespace kruise::manager::cloneset
