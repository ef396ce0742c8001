#pragma once

// CloneSet (apps.kruise.io/v1alpha1) defaulting and validation as OpenKruise's webhooks do them,
// as pure functions over the raw object. The handlers that call them are registered in
// manager/app/app.cc (`/mutate-apps-kruise-io-v1alpha1-cloneset`,
// `/validate-apps-kruise-io-v1alpha1-cloneset`).
//
// Defaults (OpenKruise SetDefaultsCloneSet): spec.replicas 1, revisionHistoryLimit 10,
// scaleStrategy {}, updateStrategy.type ReCreate, partition 0, maxUnavailable "20%", maxSurge 0,
// inPlaceUpdateStrategy {} for the in-place types. A CRD's embedded Pod template is not defaulted
// by the API server, so (like OpenKruise's SetDefaultPodSpec) the template and
// volumeClaimTemplates get the defaults the API server gives a Pod and a PVC
// (workload::DefaultTemplates, manager/workload/workload_admission.h), on CREATE and on an UPDATE
// that changes spec.template (workload::ShouldInjectTemplateDefaults).
//
// Validation (OpenKruise's validating webhook; field paths as Kubernetes prints them):
//  - spec.selector required, valid, non-empty, and matching spec.template.metadata.labels;
//  - spec.replicas >= 0; template: containers non-empty, each with a DNS-1123 name (unique among
//    containers and initContainers) and an image; restartPolicy Always only; no
//    activeDeadlineSeconds; volume names unique (volumeClaimTemplates count as volumes) and every
//    volumeMount naming one;
//  - updateStrategy.type ReCreate|InPlaceIfPossible|InPlaceOnly; partition, maxUnavailable,
//    maxSurge and scaleStrategy.maxUnavailable a non-negative integer or "N%" with 0 <= N <= 100;
//    maxSurge 0 with InPlaceOnly; maxUnavailable and maxSurge not both below 1 (scaled against
//    replicas, rounded up) when replicas > 0;
//  - priorityStrategy: weightPriority [{weight 0..100, matchSelector non-empty and valid}] or
//    orderPriority [{orderedKey non-empty}], not both; scatterStrategy [{key non-empty, value}]
//    without duplicate pairs; inPlaceUpdateStrategy.gracePeriodSeconds >= 0;
//  - scaleStrategy.podsToDelete: DNS-1123 subdomains, no duplicates;
//  - revisionHistoryLimit, minReadySeconds, progressDeadlineSeconds (1.9) >= 0;
//  - lifecycle.{preDelete,inPlaceUpdate,preNormal}: labelsHandler a map of valid label keys and
//    values, finalizersHandler a list of qualified names, markPodNotReady a boolean;
//  - volumeClaimTemplates: each with a metadata.name (a DNS-1123 label), names unique.
// On UPDATE (old object given), as OpenKruise: only replicas, template, lifecycle, scaleStrategy,
// updateStrategy, minReadySeconds, volumeClaimTemplates and revisionHistoryLimit may change (the
// selector is immutable), and progressDeadlineSeconds (OpenKruise's list predates it; a deadline
// is a rollout setting, mutable as a Deployment's); with type InPlaceOnly the template's spec may
// change only in container images. Absent fields read as their defaults, so a request may be
// validated before or after DefaultCloneSet. Not checked here (OpenKruise asks the API server):
// whether podsToDelete pods exist and belong to this CloneSet.
//
// Thread-compatible, no state; never throws, whatever the JSON.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kube/client.h"

namespace kruise::manager::cloneset {

// A copy of `cs` with the defaults filled in; the Pod template and volumeClaimTemplates defaults
// only with `inject_template_defaults`. A non-object is returned unchanged.
kube::Json DefaultCloneSet(const kube::Json& cs, bool inject_template_defaults = true);

// Every problem found, as "field.path: message". Empty when valid. `old_cs` is the stored object
// on UPDATE, null on CREATE.
std::vector<std::string> CloneSetProblems(const kube::Json& cs, const kube::Json* old_cs);
// The same as one INVALID_ARGUMENT status joining the problems with "; ".
absl::Status ValidateCloneSet(const kube::Json& cs, const kube::Json* old_cs);

}  // namespace kruise::manager::cloneset
