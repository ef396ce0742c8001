#pragma once

// SidecarSet injection into a pod being created (issue 15), as pure functions over raw JSON: which
// SidecarSets apply to a pod, the SidecarSet hashes, and the pod with the sidecars injected. The
// pod webhook's SidecarSet mutator (not here: it needs the SidecarSet and Namespace caches) calls
// SidecarSetMatchesPod for each cached set, then InjectSidecars with the matching ones.
//
// Semantics follow OpenKruise's pod mutating webhook (pkg/webhook/pod/mutating/sidecarset.go and
// pkg/control/sidecarcontrol) on CREATE:
//  - Every matching set is read as DefaultSidecarSet gives it (a set stored without the defaulting
//    webhook injects the same containers, in the same places, as a defaulted one).
//  - Init containers of all sets, sorted by name, go after the pod's init containers
//    (podInjectPolicy AfterAppContainer, the default) or before them (BeforeAppContainer).
//    Containers go before the app containers (BeforeAppContainer, the default) or after them, in
//    set order (sets sorted by name) then the set's own order. A pod container that already has a
//    sidecar's name is replaced in place by the sidecar (OpenKruise's rule: the pod keeps its
//    container order and never holds two containers of one name), which also makes injection
//    idempotent.
//  - Each injected container is the sidecar's core Container (SidecarContainer-only fields such as
//    podInjectPolicy, upgradeStrategy, shareVolumePolicy, transferEnv are removed) with, in
//    order: its own env, IS_INJECTED=true, then the transferEnv variables (envName and envNames,
//    sorted; from the pod container named by sourceContainerName or by
//    sourceContainerNameFrom.fieldRef metadata.labels['k'] / metadata.annotations['k']; a
//    variable the source does not have is skipped and reported in `notes`), then the variables a
//    shared mount's subPathExpr refers to; a name already present is never added twice.
//  - shareVolumePolicy.type enabled: the sidecar also gets every volumeMount of the app
//    containers (pod containers without IS_INJECTED=true and not named like a sidecar being
//    injected), skipping mount paths it already has. shareVolumeDevicePolicy.type enabled does
//    the same for volumeDevices (by devicePath).
//  - Volumes: the set's volumes named by its sidecars' volumeMounts are added to the pod unless
//    the pod has a volume of that name (the pod's wins); never twice.
//  - imagePullSecrets of every set are appended, without duplicate names.
//  - patchPodMetadata (annotations only, as OpenKruise): Retain sets a key the pod lacks,
//    Overwrite sets it, MergePatchJson applies the value as a JSON merge patch (RFC 7386) to the
//    pod's value (or sets it when absent or empty). Applied before transferEnv reads annotations.
//  - upgradeStrategy.upgradeType HotUpgrade: the sidecar becomes "<name>-1" (working, its image)
//    and "<name>-2" (hotUpgradeEmptyImage), each with env SIDECARSET_VERSION and
//    SIDECARSET_VERSION_ALT from annotations version.sidecarset.kruise.io/<container> ("1"/"0"
//    and "0"/"1") and versionalt.sidecarset.kruise.io/<container>, and the pod annotation
//    kruise.io/sidecarset-working-hotupgrade-container {"<name>": "<name>-1", ...}.
//  - Annotations: kruise.io/sidecarset-hash and kruise.io/sidecarset-hash-without-image are JSON
//    objects, set name -> {"updateTimestamp": RFC 3339 UTC seconds, "hash": ..., "sidecarSetName":
//    ..., "sidecarList": [container names (and native-sidecar init container names), sorted],
//    "controllerRevision": status.latestRevision (hash annotation only, omitted when empty)},
//    fields in OpenKruise's order; entries the pod already had for other sets are kept (the older
//    form name -> hash string is read too). kruise.io/sidecarset-injected-list is the sorted,
//    comma-separated union of the names already listed and the matching sets.
//
// Conflicts (checked here because two sets may be created while the validating webhook cannot
// see each other, and sets from before this manager exist): two matching sets giving the same
// init container or container name different content, the same volume name different
// definitions (both needed, the pod lacking it), or the same annotation different values where
// either patches with Overwrite or MergePatchJson, fail with FAILED_PRECONDITION naming both sets
// and the item; identical duplicates are injected once. SidecarSetConflicts (admission) is
// stricter (any shared name) and stays the validating webhook's check.
//
// Not here: injectionStrategy.revision (SidecarSetInjector picks the revision with
// sidecarset_revision.h and passes that revision's set), resources
// computed by resourcesPolicy (1.9; sidecars keep their own resources), pod UPDATE handling.
//
// Hashes (OpenKruise pkg/webhook/sidecarset/mutating/hash.go): SHA-256 of the JSON encoding of
// {"containers": spec.containers} plus "initContainers": spec.initContainers when any init
// container has restartPolicy Always, hex-encoded, each hex digit then mapped through
// Kubernetes' rand.SafeEncodeString alphabet: 64 characters of [bcdfghjklmnpqrstvwxz2456789].
// The without-image hash blanks every image first. OpenKruise encodes Go structs (fields in
// declaration order, Go's omitempty rules, resource quantities in canonical form, and whatever
// fields the vendored Kubernetes version has), which cannot be reproduced from the JSON without
// copying those struct definitions, so our value differs from OpenKruise's for the same set.
// Ours: the same recipe over the defaulted set's containers in canonical JSON (object keys
// sorted, null, "", [] and {} members dropped as Go's omitempty would, integral floats written as
// integers), so it is deterministic, independent of key order, and the same before and after
// DefaultSidecarSet. Compatibility with pods injected by OpenKruise comes from the annotations
// instead: SidecarSetRecordedHash prefers the set's kruise.io/sidecarset-hash annotation (which
// OpenKruise's SidecarSet webhook writes) and InjectSidecars records that value, so a set
// migrated from OpenKruise keeps matching its pods until its spec changes.
//
// Thread-compatible, no state; never throws, whatever the JSON.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json_fwd.hpp"

namespace kruise::manager::sidecarset {

inline constexpr char kSidecarSetHashAnnotation[] = "kruise.io/sidecarset-hash";
inline constexpr char kSidecarSetHashWithoutImageAnnotation[] =
    "kruise.io/sidecarset-hash-without-image";
inline constexpr char kSidecarSetInjectedListAnnotation[] = "kruise.io/sidecarset-injected-list";
inline constexpr char kSidecarSetWorkingHotUpgradeContainerAnnotation[] =
    "kruise.io/sidecarset-working-hotupgrade-container";
inline constexpr char kSidecarInjectedEnv[] = "IS_INJECTED";
inline constexpr char kSidecarSetVersionEnv[] = "SIDECARSET_VERSION";
inline constexpr char kSidecarSetVersionAltEnv[] = "SIDECARSET_VERSION_ALT";

// Does `sidecarset` (v1alpha1 or v1beta1) inject into `pod` at creation?
//  - never into kube-system or `manager_namespace`, nor into a pod being deleted or finished;
//  - not when spec.injectionStrategy.paused;
//  - spec.namespace (either version: the CRD has one schema) must equal the pod's namespace
//    ("default" when the pod names none);
//  - spec.namespaceSelector must match the labels of `namespace_obj` (the pod's Namespace
//    object). When it is null (unknown), only a selector that tests nothing but
//    kubernetes.io/metadata.name (which the API server sets to the name) can match, evaluated on
//    that label; anything else does not match, as OpenKruise does when the Namespace get fails;
//  - spec.selector must be non-empty and match the pod's labels.
// Malformed selectors never match.
bool SidecarSetMatchesPod(const nlohmann::json& sidecarset, const nlohmann::json& pod,
                          const nlohmann::json* namespace_obj, absl::string_view manager_namespace);

// The same decision split for a webhook matching each pod against many sets: a SidecarSetMatcher
// is built once per set (its selectors parsed; rebuild it when the set changes), PodFacts once
// per pod, and Matches(facts, namespace_obj) answers as SidecarSetMatchesPod does.
struct PodFacts {
  static PodFacts Of(const nlohmann::json& pod, absl::string_view manager_namespace);
  std::string namespace_;  // "default" when the pod names none
  std::map<std::string, std::string> labels;
  bool injectable = false;  // not kube-system / the manager's namespace, deleting or finished
};

class SidecarSetMatcher {
 public:
  explicit SidecarSetMatcher(const nlohmann::json& sidecarset);
  ~SidecarSetMatcher();
  SidecarSetMatcher(SidecarSetMatcher&&) noexcept;
  SidecarSetMatcher& operator=(SidecarSetMatcher&&) noexcept;

  bool Matches(const PodFacts& pod, const nlohmann::json* namespace_obj) const;
  // The same with the namespace's labels read once per pod (NamespaceLabels), not once per set.
  bool Matches(const PodFacts& pod,
               const std::optional<std::map<std::string, std::string>>& namespace_labels) const;
  // The labels namespaceSelector is matched against: the Namespace object's (null: unknown)
  // plus kubernetes.io/metadata.name.
  static std::optional<std::map<std::string, std::string>> NamespaceLabels(
      const nlohmann::json* namespace_obj, const std::string& namespace_name);
  const std::string& name() const;  // the set's metadata.name
  // Never injects (paused, malformed or empty selector, ...), whatever the pod.
  bool never() const;
  // A pod label every pod the set injects into carries, with one of `values`; false when the
  // selector requires none. For indexing many sets by pod label.
  bool RequiredLabel(std::string* key, std::vector<std::string>* values) const;
  // Adds `item` to `index` (a kube::SelectorIndex) under that label, or unindexed when the
  // selector requires none; nothing when never().
  template <typename Index, typename T>
  void IndexInto(Index* index, const T* item) const {
    if (never()) return;
    std::string key;
    std::vector<std::string> values;
    if (RequiredLabel(&key, &values)) {
      index->Add(item, key, values);
    } else {
      index->AddUnindexed(item);
    }
  }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// See "Hashes" above. Computed over DefaultSidecarSet(sidecarset); "" when it has no spec.
std::string SidecarSetHash(const nlohmann::json& sidecarset);
std::string SidecarSetHashWithoutImage(const nlohmann::json& sidecarset);
// The set's kruise.io/sidecarset-hash (-without-image) annotation when non-empty, else the
// computed hash: what pods record and the upgrade controller compares with.
std::string SidecarSetRecordedHash(const nlohmann::json& sidecarset);
std::string SidecarSetRecordedHashWithoutImage(const nlohmann::json& sidecarset);
// What the SidecarSet mutating webhook writes, as OpenKruise's does: `sidecarset` (already
// defaulted) with both hash annotations set. On UPDATE (`old` non-null) an annotation whose hash
// did not change keeps its value, so a set migrated from OpenKruise keeps OpenKruise's hashes,
// and with them its injected pods, until its containers change. A non-object is returned as is.
nlohmann::json WithSidecarSetHashes(const nlohmann::json& sidecarset, const nlohmann::json* old);

struct InjectionResult {
  // Names of the sets applied, sorted.
  std::vector<std::string> sidecarsets;
  // Names of the containers and init containers added or replaced, in pod order.
  std::vector<std::string> containers;
  // Things skipped that the pod's author may want to know (a transferEnv source missing, ...),
  // for the caller's log or the admission warnings.
  std::vector<std::string> notes;
};

// Injects `matching` (sets for which SidecarSetMatchesPod holds; order does not matter, they are
// sorted by name; a name given twice is applied once) into `pod`, a Pod object. `now` is the
// updateTimestamp recorded in the hash annotations. On error `pod` is left unchanged:
// INVALID_ARGUMENT for a pod that is not an object with a spec whose containers, initContainers,
// volumes, imagePullSecrets are lists and annotations an object of strings, or whose hash
// annotations are neither form OpenKruise reads, or for a MergePatchJson that does not apply;
// FAILED_PRECONDITION for a conflict between sets (above). Sets that are not objects with a
// metadata.name are skipped (reported in notes). With no set, the pod is unchanged.
absl::StatusOr<InjectionResult> InjectSidecars(nlohmann::json* pod,
                                               const std::vector<nlohmann::json>& matching,
                                               absl::Time now);
// The same without copying the sets (pointers must not be null); `sets_defaulted`: they are
// already as DefaultSidecarSet gives them (the webhook's cache), so not defaulted again. Named
// apart: nlohmann::json converts implicitly to pointers, which would make `{set}` ambiguous
// between overloads.
absl::StatusOr<InjectionResult> InjectSidecarsNoCopy(
    nlohmann::json* pod, const std::vector<const nlohmann::json*>& matching, absl::Time now,
    bool sets_defaulted = false);
// The injection as RFC 6902 operations against `pod` (set in `*patch`, an array; empty when
// nothing changes) instead of an edit of it, for the pod webhook: it sends them as they are,
// without copying the pod or diffing. Lists are edited element by element (sidecars added at
// their index or appended, a same-named container replaced where it is), annotations key by
// key. InjectSidecarsNoCopy applies exactly these. Errors as InjectSidecars; `*patch` is then
// empty.
absl::StatusOr<InjectionResult> PlanSidecarInjection(
    const nlohmann::json& pod, const std::vector<const nlohmann::json*>& matching, absl::Time now,
    bool sets_defaulted, nlohmann::json* patch);

}  // namespace kruise::manager::sidecarset
