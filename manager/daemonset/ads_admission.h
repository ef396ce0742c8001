#pragma once

// Advanced DaemonSet (apps.kruise.io DaemonSet, v1beta1 stored, v1alpha1 served with one schema)
// defaulting and validation as OpenKruise's webhooks do them, as pure functions over the raw
// object. One handler pair serves both versions; manager/app/app.cc registers it under
// `/mutate-apps-kruise-io-v1beta1-daemonset` and `/validate-apps-kruise-io-v1beta1-daemonset`
// (deploy/ uses these) and the v1alpha1 and versionless spellings.
//
// Defaults (OpenKruise SetDefaultsDaemonSet, 1.9): burstReplicas 250; updateStrategy.type
// RollingUpdate; for RollingUpdate a rollingUpdate object whose rollingUpdateType "" becomes
// Standard; the deprecated rollingUpdateType Surging becomes Standard too, after giving an unset
// maxSurge 1 and an unset maxUnavailable 0; when neither maxUnavailable nor maxSurge is set,
// maxUnavailable 1 and maxSurge 0; revisionHistoryLimit 10. partition gets no default (0 when
// read). Unlike CloneSet and Advanced StatefulSet, OpenKruise gives a DaemonSet's Pod template no
// defaults, and neither do we: pods get the API server's. A value the user set is never
// rewritten.
//
// Validation (OpenKruise pkg/webhook/daemonset/validating; field paths as Kubernetes prints
// them):
//  - metadata.name a DNS-1123 subdomain;
//  - spec.selector required, valid, non-empty, matching spec.template.metadata.labels; the
//    template checked as every workload's (manager/workload: containers, names, images, volumes,
//    restartPolicy Always, no activeDeadlineSeconds); a gcePersistentDisk volume must be
//    readOnly (daemons run on many nodes at once);
//  - minReadySeconds, revisionHistoryLimit >= 0;
//  - updateStrategy.type RollingUpdate|OnDelete (rollingUpdate is ignored with OnDelete, as
//    OpenKruise);
//  - rollingUpdate: maxUnavailable and maxSurge each a non-negative integer or a percentage of at
//    most 100%; not both non-zero ("may not be set when maxUnavailable is non-zero") and not both
//    zero ("cannot be 0 when maxSurge is 0"); rollingUpdateType Standard|InPlaceIfPossible|
//    Surging (InPlaceIfPossible needs maxSurge 0, Surging maxUnavailable 0); partition a
//    non-negative integer or a percentage (v1beta1's IntOrString); selector a valid label
//    selector; paused a boolean;
//  - lifecycle hooks as every workload's, and no inPlaceUpdate hook ("not supported yet", as
//    OpenKruise; preDelete is honoured, preNormal accepted and unused, as OpenKruise);
//  - burstReplicas a non-negative integer or a percentage (ours: OpenKruise does not check it and
//    a bad value silently stops all creation);
//  - scaleStrategy an object, partitionedScaling a boolean.
// Absent fields read as their defaults, so a request may be validated before or after
// DefaultAdvancedDaemonSet.
// On UPDATE (old object given) only burstReplicas, template, lifecycle, updateStrategy,
// minReadySeconds and revisionHistoryLimit may change, as OpenKruise, plus scaleStrategy (v1beta1's
// field, a strategy like updateStrategy); the selector is immutable.
//
// Thread-compatible, no state; never throws, whatever the JSON.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kube/client.h"

namespace kruise::manager::daemonset {

// A copy of `ds` with OpenKruise's defaults filled in. A non-object is returned unchanged.
kube::Json DefaultAdvancedDaemonSet(const kube::Json& ds);

// Every problem found, as "field.path: message". Empty when valid. `old_ds` is the stored object
// on UPDATE, null on CREATE.
std::vector<std::string> AdvancedDaemonSetProblems(const kube::Json& ds, const kube::Json* old_ds);
// The same as one INVALID_ARGUMENT status joining the problems with "; ".
absl::Status ValidateAdvancedDaemonSet(const kube::Json& ds, const kube::Json* old_ds);

}  // namespace kruise::manager::daemonset
