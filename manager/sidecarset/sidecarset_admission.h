#pragma once

// SidecarSet (apps.kruise.io v1alpha1 and v1beta1, one schema: deploy/crds) defaulting and
// validation as OpenKruise's SidecarSet webhooks do them, as pure functions over the raw object.
// The handlers are registered in manager/app/app.cc (`/mutate-apps-kruise-io-v1alpha1-sidecarset`,
// `/validate-apps-kruise-io-v1alpha1-sidecarset`, the v1beta1 and versionless paths).
//
// Defaults (OpenKruise SetDefaultsSidecarSet):
//  - spec.updateStrategy: type RollingUpdate, partition 0, maxUnavailable 1;
//    spec.injectionStrategy {} (Go always writes both structs); injectionStrategy.revision.policy
//    Always when a revision is given; revisionHistoryLimit 10; patchPodMetadata[].patchPolicy
//    Retain;
//  - each sidecar (containers and initContainers): podInjectPolicy BeforeAppContainer for
//    containers, AfterAppContainer for init containers; upgradeStrategy.upgradeType ColdUpgrade;
//    shareVolumePolicy.type disabled; transferEnv[].sourceContainerNameFrom.fieldRef.apiVersion v1;
//    and the defaults the API server gives a pod's container (Kubernetes 1.20 SetDefaults_Container
//    and friends), so that the sidecar injected into a pod equals the SidecarSet's and its hash is
//    stable: imagePullPolicy by Kubernetes' rule (Always for ":latest" or no tag, else
//    IfNotPresent), terminationMessagePath /dev/termination-log, terminationMessagePolicy File,
//    ports' protocol TCP, env fieldRef apiVersion v1, probes timeoutSeconds 1 / periodSeconds 10 /
//    successThreshold 1 / failureThreshold 3, httpGet (probes, postStart, preStop) path "/" and
//    scheme HTTP. OpenKruise defaults liveness and readiness probes only; startupProbe is defaulted
//    here too (the API server gives the pod's copy the same values anyway);
//  - volumes as a pod's: emptyDir {} when no source, hostPath.type "", defaultMode 420 (secret,
//    configMap, downwardAPI, projected), fieldRef apiVersion v1, serviceAccountToken
//    expirationSeconds 3600.
// Not here: the kruise.io/sidecarset-hash annotations OpenKruise's mutating webhook also writes
// (they belong with the hash the pod injection computes). A value the user set is never dropped or
// rewritten; a field of the wrong JSON type is left for validation to report.
//
// Validation (OpenKruise's validating webhook, Kubernetes-style field paths, every problem listed):
//  - metadata.name: letters, digits and '-', at most 63 characters (OpenKruise's rule);
//  - spec.selector required, valid, non-empty; spec.namespace a DNS-1123 label; namespace and
//    namespaceSelector not both; namespaceSelector valid and non-empty;
//  - at least one container or init container; names DNS-1123 labels, unique across containers and
//    initContainers; image required; podInjectPolicy BeforeAppContainer|AfterAppContainer;
//    shareVolumePolicy.type and shareVolumeDevicePolicy.type enabled|disabled;
//    upgradeStrategy.upgradeType ColdUpgrade|HotUpgrade, HotUpgrade with a hotUpgradeEmptyImage
//    different from the image and a name leaving room for the "-1"/"-2" pair it becomes; ports
//    1..65535; volumeMounts and volumeDevices naming one of spec.volumes, a mountPath, no device
//    path equal to a mount path; init containers' restartPolicy only Always, and such a native
//    sidecar only with updateStrategy.type NotUpdate (OpenKruise cannot upgrade it in place);
//  - transferEnv: a source (sourceContainerName or sourceContainerNameFrom.fieldRef) and at least
//    one of envName / envNames (valid env names); the fieldRef apiVersion v1 and fieldPath
//    metadata.name, metadata.labels['k'] or metadata.annotations['k'] (or the unsubscripted maps);
//  - resourcesPolicy (1.9): targetContainersMode sum|max, at least one expression, and no
//    resources of the container's own beside it;
//  - volumes: objects with unique DNS-1123 names and at most one source;
//  - updateStrategy.type RollingUpdate|NotUpdate (OpenKruise ignores unknown types; rejected
//    here); partition and maxUnavailable a non-negative integer or "N%" with 0 <= N <= 100 (the
//    CloneSet rule; OpenKruise accepts any percentage); a non-zero partition not together with a
//    selector; selector valid and non-empty; priorityStrategy (weight 0..100 with a non-empty
//    matchSelector, or orderedKey; not both kinds) and scatterStrategy (non-empty keys, no
//    duplicate pairs);
//  - injectionStrategy.revision: customVersion or revisionName (non-empty strings), policy
//    Always|Partial;
//  - imagePullSecrets[].name non-empty; revisionHistoryLimit >= 0; customVersion a string;
//  - patchPodMetadata: non-empty annotations with valid keys, each key in one entry only,
//    patchPolicy Retain|Overwrite|MergePatchJson, MergePatchJson values JSON objects.
// On UPDATE (old object given), as OpenKruise: a container's upgradeType cannot change.
// Absent fields read as their defaults, so a request may be validated before or after
// DefaultSidecarSet. Not checked by ValidateSidecarSet (OpenKruise asks the API server): conflicts
// with other SidecarSets (SidecarSetConflicts below, for a caller that has them), whether the
// injection revision exists, the patchPodMetadata whitelist.
//
// Thread-compatible, no state; never throws, whatever the JSON.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json_fwd.hpp"

namespace kruise::manager::sidecarset {

// A copy of `ss` with the defaults above filled in. A non-object is returned unchanged.
nlohmann::json DefaultSidecarSet(const nlohmann::json& ss);

// Every problem found, as "field.path: message". Empty when valid. `old_ss` is the stored object
// on UPDATE, null on CREATE.
std::vector<std::string> SidecarSetProblems(const nlohmann::json& ss, const nlohmann::json* old_ss);
// The same as one INVALID_ARGUMENT status joining the problems with "; ".
absl::Status ValidateSidecarSet(const nlohmann::json& ss, const nlohmann::json* old_ss);

// The labels of a namespace, nullopt when unknown.
using NamespaceLabelsFn =
    std::function<std::optional<std::map<std::string, std::string>>(const std::string&)>;

// OpenKruise's check against the other SidecarSets of the cluster (its validating webhook lists
// them): for each other set (another metadata.name) that may inject into the same pods, every
// init container name it also has among its init containers, every container name it also has
// among its containers, every volume name it also has with a different definition, and every
// patchPodMetadata annotation both patch when either does so with Overwrite (Retain entries never
// conflict). "May inject into the same pods": the namespaces may overlap (different
// spec.namespace values do not; two namespaceSelectors that OpenKruise's overlap test finds
// disjoint do not; a namespace whose labels `namespace_labels` knows and the other's
// namespaceSelector does not match does not; unknown labels count as overlapping) and the pod
// selectors overlap by OpenKruise's test (IsSelectorOverlapping: disjoint when one selector pins
// a key to values the other excludes, or requires a key the other does not mention). `others`
// are stored objects (either version); malformed ones are skipped. Problems as in
// SidecarSetProblems; never throws. Not yet called by the validating handler: the webhook has no
// SidecarSet cache until the pod injection brings one.
std::vector<std::string> SidecarSetConflicts(const nlohmann::json& ss,
                                             const std::vector<nlohmann::json>& others,
                                             const NamespaceLabelsFn& namespace_labels = nullptr);

// OpenKruise's IsSelectorOverlapping over two metav1.LabelSelector objects (exposed for tests and
// for the injection's own conflict checks). Non-objects never overlap.
bool SelectorsMayOverlap(const nlohmann::json& a, const nlohmann::json& b);

}  // namespace kruise::manager::sidecarset
