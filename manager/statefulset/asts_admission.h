#pragma once

// Advanced StatefulSet (apps.kruise.io StatefulSet, v1beta1 stored, v1alpha1 served with the same
// schema) defaulting and validation as OpenKruise's webhooks do them, as pure functions over the
// raw object. One handler pair serves both versions; manager/app/app.cc registers it under
// `/mutate-apps-kruise-io-v1beta1-statefulset` and `/validate-apps-kruise-io-v1beta1-statefulset`
// (deploy/ uses these) and the v1alpha1 and versionless spellings.
//
// Defaults (OpenKruise SetDefaultsStatefulSet): podManagementPolicy OrderedReady, updateStrategy
// type RollingUpdate; for RollingUpdate a rollingUpdate with partition 0, maxUnavailable 1,
// podUpdatePolicy ReCreate, minReadySeconds 0; persistentVolumeClaimRetentionPolicy whenDeleted and
// whenScaled Retain (OpenKruise's StatefulSetAutoDeletePVC gate, on by default); replicas 1,
// revisionHistoryLimit 10. The Pod template and volumeClaimTemplates get the defaults the API
// server gives a Pod and a PVC, exactly as for a CloneSet (workload::DefaultTemplates: OpenKruise's
// SetDefaultPodSpec is shared by both workloads), only on CREATE and on an UPDATE that changes
// spec.template. A value the user set is never rewritten.
//
// Validation (OpenKruise pkg/webhook/statefulset/validating; field paths as Kubernetes prints
// them):
//  - metadata.name a DNS-1123 subdomain; spec.replicas >= 0;
//  - spec.selector required, valid, non-empty, matching spec.template.metadata.labels; the template
//    and volumeClaimTemplates checked as a CloneSet's are (containers, names, images, volumes,
//    restartPolicy Always, no activeDeadlineSeconds), as are spec.lifecycle's hooks;
//  - podManagementPolicy OrderedReady|Parallel; updateStrategy.type RollingUpdate|OnDelete, and
//    rollingUpdate only with RollingUpdate;
//  - rollingUpdate: partition >= 0; minReadySeconds 0..300; maxUnavailable a non-negative integer
//    or "N%", at least 1 once scaled against 1 replica (so 0 and "0%" are refused), and other than
//    the integer 1 only with Parallel; podUpdatePolicy ReCreate|InPlaceIfPossible|InPlaceOnly, the
//    in-place ones only with the InPlaceUpdateReady readiness gate in the template;
//    unorderedUpdate only with Parallel, its priorityStrategy as a CloneSet's;
//    inPlaceUpdateStrategy.gracePeriodSeconds >= 0; paused a boolean;
//  - scaleStrategy.maxUnavailable: the same rules as rollingUpdate.maxUnavailable;
//  - reserveOrdinals: ParseReserveOrdinals (integers >= 0 and "a-b" ranges);
//  - persistentVolumeClaimRetentionPolicy.whenDeleted/whenScaled Retain|Delete; ordinals.start >=
//    0; revisionHistoryLimit >= 0;
//  - volumeClaimUpdateStrategy.type OnPodRollingUpdate|OnDelete; with OnPodRollingUpdate an
//    UPDATE may not add, remove or rename volumeClaimTemplates nor change their storageClassName
//    or accessModes (only the size: the controller grows claims, never recreates them).
// On UPDATE (old object given) only replicas, template, updateStrategy, scaleStrategy,
// reserveOrdinals, lifecycle, revisionHistoryLimit, persistentVolumeClaimRetentionPolicy and
// volumeClaimTemplates may change, as OpenKruise; also ordinals (as the core StatefulSet allows)
// and volumeClaimUpdateStrategy (a strategy like the others). The selector, serviceName and
// podManagementPolicy are immutable. With podUpdatePolicy InPlaceOnly the template's spec may
// change only in container images. Absent fields read as their defaults, so a request may be
// validated before or after DefaultAdvancedStatefulSet.
//
// Thread-compatible, no state; never throws, whatever the JSON.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kube/client.h"

namespace kruise::manager::statefulset {

// A copy of `sts` with the defaults filled in; the Pod template and volumeClaimTemplates defaults
// only with `inject_template_defaults`. A non-object is returned unchanged.
kube::Json DefaultAdvancedStatefulSet(const kube::Json& sts, bool inject_template_defaults = true);

// Every problem found, as "field.path: message". Empty when valid. `old_sts` is the stored object
// on UPDATE, null on CREATE.
std::vector<std::string> AdvancedStatefulSetProblems(const kube::Json& sts,
                                                     const kube::Json* old_sts);
// The same as one INVALID_ARGUMENT status joining the problems with "; ".
absl::Status ValidateAdvancedStatefulSet(const kube::Json& sts, const kube::Json* old_sts);

}  // namespace kruise::manager::statefulset
