#pragma once

// CloneSet (apps.kruise.io/v1alpha1) names on the wire, as OpenKruise spells them. Shared by the
// CloneSet webhook handlers, planners and controller.

#include "manager/workload/lifecycle.h"

namespace kruise::manager::cloneset {

// Pod and PVC labels.
inline constexpr char kInstanceIdLabel[] = "apps.kruise.io/cloneset-instance-id";
inline constexpr char kSpecifiedDeleteLabel[] = "apps.kruise.io/specified-delete";
using workload::kLifecycleStateLabel;
using workload::kLifecycleTimestampAnnotation;
inline constexpr char kPodDeletionCostAnnotation[] = "controller.kubernetes.io/pod-deletion-cost";
inline constexpr char kImagePredownloadParallelismAnnotation[] =
    "apps.kruise.io/image-predownload-parallelism";

// Lifecycle states (label lifecycle.apps.kruise.io/state), shared with every workload.
using workload::kStateNormal;
using workload::kStatePreparingDelete;
using workload::kStatePreparingNormal;
using workload::kStatePreparingUpdate;
using workload::kStateUpdated;
using workload::kStateUpdating;

// spec.updateStrategy.type
inline constexpr char kReCreate[] = "ReCreate";
inline constexpr char kInPlaceIfPossible[] = "InPlaceIfPossible";
inline constexpr char kInPlaceOnly[] = "InPlaceOnly";

}  // namespace kruise::manager::cloneset
