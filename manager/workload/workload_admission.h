#pragma once

// The admission rules OpenKruise's workloads share (CloneSet, Advanced StatefulSet, and the
// Advanced DaemonSet to come), as pure functions over raw JSON: the Pod template defaults
// (OpenKruise's SetDefaultPodSpec), and the checks of the selector, the Pod template,
// volumeClaimTemplates, lifecycle hooks and priorityStrategy. Each workload's own admission
// (manager/cloneset/cloneset_admission.h, manager/statefulset/asts_admission.h) calls these with
// its field paths and kind name; this library knows no workload.
//
// Template defaults (Kubernetes 1.20 SetDefaults_PodSpec / _Container / _Probe / _Volume ..., as
// the API server gives a Pod, so that a pod created from the template equals it and the
// template's hash is stable):
//  - pod: restartPolicy Always, terminationGracePeriodSeconds 30, dnsPolicy ClusterFirst,
//    securityContext {}, schedulerName default-scheduler; with hostNetwork every container port
//    without a hostPort gets hostPort = containerPort;
//  - containers and initContainers: terminationMessagePath /dev/termination-log,
//    terminationMessagePolicy File, ports' protocol TCP, env fieldRef apiVersion v1, probes
//    (liveness, readiness, startup) timeoutSeconds 1, periodSeconds 10, successThreshold 1,
//    failureThreshold 3, httpGet (probes, postStart, preStop) path "/" and scheme HTTP;
//    imagePullPolicy: Always for containers (OpenKruise's choice, so that an in-place image update
//    always pulls), Kubernetes' rule for initContainers (Always for ":latest" or no tag, else
//    IfNotPresent);
//  - volumes: emptyDir {} when no source, hostPath.type "", defaultMode 420 (secret, configMap,
//    downwardAPI, projected), fieldRef apiVersion v1, serviceAccountToken expirationSeconds 3600;
//  - volumeClaimTemplates: spec.volumeMode Filesystem.
// Not applied: resource quantity canonicalisation, which only rewrites a quantity's spelling.
// A value the user set is never dropped or rewritten; a field of the wrong JSON type is left for
// validation (and the CRD schema) to reject.
//
// Checks report "field.path: message" into a kube::FieldErrors. Thread-compatible, no state;
// never throws, whatever the JSON.

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>

#include "kube/client.h"
#include "kube/field_errors.h"
#include "kube/object.h"

namespace kruise::manager::workload {

// ---- Defaulting -----------------------------------------------------------------------------

// The Pod template defaults above applied to one PodSpec (a non-object is returned unchanged).
kube::Json DefaultPodSpec(const kube::Json& pod_spec);

// On a workload's spec object: spec.template.spec gets DefaultPodSpec and every
// volumeClaimTemplates[].spec a volumeMode Filesystem. Absent or mistyped parts are left alone.
void DefaultTemplates(kube::Json* spec);

// OpenKruise defaults the template on CREATE (`old_obj` null) and on an UPDATE that changes
// spec.template, so that an object written before the webhook existed is not rewritten by an
// unrelated update.
bool ShouldInjectTemplateDefaults(const kube::Json& obj, const kube::Json* old_obj);

// ---- Field checks ---------------------------------------------------------------------------

bool IsDnsLabel(const std::string& s);      // RFC 1123 label, at most 63 characters
bool IsDnsSubdomain(const std::string& s);  // RFC 1123 subdomain, at most 253 characters

// metadata.name, when set, a DNS-1123 subdomain.
void CheckObjectName(const kube::Json& obj, kube::FieldErrors* problems);

// An optional integer member in [0, max]; reports a wrong type, a negative value, or one above
// `max` with `max_message`.
void CheckIntRange(const kube::Json& obj, const char* key, const std::string& path,
                   kube::FieldErrors* problems, int64_t max = 2147483647,
                   const char* max_message = "must fit in a 32-bit integer");
// An optional boolean member.
void CheckBool(const kube::Json& obj, const char* key, const std::string& path,
               kube::FieldErrors* problems);

// A string member that must be one of `allowed` when present and non-empty (empty reads as the
// default). Returns the effective value: "" when absent, empty or invalid (reported as
// "Unsupported value: ...: supported values: ...").
std::string CheckEnum(const kube::Json& obj, const char* key, const std::string& path,
                      std::initializer_list<const char*> allowed, kube::FieldErrors* problems);

// An IntOrString that must be a non-negative integer or "N%" with 0 <= N <= 100. Returns its
// value scaled against `total` (percentages rounded up), nullopt when invalid (reported).
std::optional<int> IntOrPercent(const kube::Json& v, int total, const std::string& path,
                                kube::FieldErrors* problems);

// A label selector that must be present, valid and non-empty; the parsed selector, or nullopt
// (reported; `empty_message` is the text for a selector that matches everything).
std::optional<kube::LabelSelector> NonEmptySelector(const kube::Json* sel, const std::string& path,
                                                    const std::string& empty_message,
                                                    kube::FieldErrors* problems);

// ---- The parts of a workload spec (paths from "spec.") --------------------------------------

// spec.volumeClaimTemplates: each with a metadata.name that is a DNS-1123 label, names unique.
// Returns the names.
std::set<std::string> CheckVolumeClaimTemplates(const kube::Json& spec,
                                                kube::FieldErrors* problems);

// spec.template: labels valid and matched by `selector` (when it parsed); containers non-empty,
// each with a DNS-1123 name (unique among containers and initContainers), an image and ports in
// 1..65535; volume names unique (volumeClaimTemplates count as volumes, as OpenKruise mocks them
// in) and every volumeMount naming one; restartPolicy Always only; no activeDeadlineSeconds
// (the message names `kind`, e.g. "cloneset").
void CheckTemplate(const kube::Json& spec, const std::optional<kube::LabelSelector>& selector,
                   const std::set<std::string>& vct_names, const std::string& kind,
                   kube::FieldErrors* problems);

// spec.lifecycle.{preDelete,inPlaceUpdate,preNormal}: labelsHandler a map of valid label keys and
// values, finalizersHandler a list of qualified names, markPodNotReady a boolean.
void CheckLifecycle(const kube::Json& spec, kube::FieldErrors* problems);

// A priorityStrategy at `path`: weightPriority [{weight 0..100, matchSelector non-empty and
// valid}] or orderPriority [{orderedKey non-empty}], not both.
void CheckPriorityStrategy(const kube::Json& ps, const std::string& path,
                           kube::FieldErrors* problems);

// A scatterStrategy at `path`: a list of {key non-empty, value} without duplicate pairs.
void CheckScatterStrategy(const kube::Json& ss, const std::string& path,
                          kube::FieldErrors* problems);

// An inPlaceUpdateStrategy at `path`: an object whose gracePeriodSeconds is >= 0.
void CheckInPlaceUpdateStrategy(const kube::Json& ips, const std::string& path,
                                kube::FieldErrors* problems);

// Whether the pod spec of spec.template differs between two workload specs in more than its
// containers' images (the InPlaceOnly rule). Compared after kube::SemanticNormalized.
bool TemplateChangesBeyondImages(const kube::Json& old_spec, const kube::Json& new_spec);

}  // namespace kruise::manager::workload
