#pragma once

// SidecarSet in-place sidecar upgrades (issue 15), as pure functions: which of a set's pods run
// its current sidecars, which to upgrade now, the patches that upgrade one pod (cold, or the two
// steps of a hot upgrade), and the pod condition SidecarSetUpgradable. The SidecarSet controller
// (not here) lists the pods the set selects, calls PlanSidecarSetUpgrade, sends the patches and
// condition writes, and writes the counts to the set's status. Not here: image pre-download.
//
// Semantics follow OpenKruise (pkg/controller/sidecarset sidecarset_strategy.go, processor.go,
// pkg/control/sidecarcontrol):
//  - Matched pod: active (not being deleted, not Succeeded/Failed), and its
//    kruise.io/sidecarset-hash annotation has an entry for the set (the caller passes the pods the
//    set selects: SidecarSetMatcher; its injectionStrategy.paused test is an injection rule, use
//    UpgradeMatcher below). Per matched pod:
//      updated        its entry's hash == SidecarSetRecordedHash(set);
//      upgradable     not updated, and its kruise.io/sidecarset-hash-without-image entry ==
//                     SidecarSetRecordedHashWithoutImage(set): only images changed;
//      not upgradable anything else (the change applies to new pods only).
//  - Upgrading (mid-upgrade): the pod's kruise.io/sidecarset-inplace-update-state entry for the
//    set (written by our patch, OpenKruise's map set name -> state) is not complete by the
//    in-place engine's test (inplace::InPlaceUpdateCompleted: each patched container restarted
//    since, whatever the image digest: no hang on same-digest tags). A pod without an entry is
//    not upgrading. Ready: condition Ready True and not upgrading.
//  - Nothing is picked (and no hot upgrade finished) when spec.updateStrategy.paused or when its
//    type is NotUpdate. Candidates: upgradable pods, matching updateStrategy.selector when set,
//    not upgrading (a pod still finishing an earlier upgrade waits).
//  - Order (OpenKruise's SortUpdateIndexes, inplace::SortUpdateOrder): priorityStrategy
//    (weightPriority / orderPriority, as CloneSet) first, then scatterStrategy (value "*" stands
//    for each value the pods have for the key), then Kubernetes' ActivePods order: unscheduled,
//    Pending < Unknown < Running, not ready first, ready for less time, more restarts, newer, name.
//  - partition (int, or percent of matched pods rounded up; a percent below 100% leaves one pod
//    to upgrade when there are two or more): that many candidates, from the end of the order,
//    stay at the old version.
//  - maxUnavailable (default 1; int, or percent of matched pods rounded up): OpenKruise's count.
//    Unavailable = updated pods that are not ready or upgrading; picking a ready pod adds one and
//    stops at maxUnavailable; picking a pod that is not ready costs nothing (it already is).
//    Pods at an old version that are not ready are not counted, as OpenKruise (so a broken app
//    pod outside the rollout does not hold it back).
//
// Hot upgrade (a sidecar with upgradeStrategy.upgradeType HotUpgrade; OpenKruise's
// sidecarset_processor.go, sidecarset_hotupgrade.go, sidecarcontrol/util_hotupgrade.go): the pod
// holds the sidecar twice, "<name>-1" and "<name>-2". The working one is the one the annotation
// kruise.io/sidecarset-working-hotupgrade-container ({"<name>": "<name>-N"}) names (absent or
// naming neither: "<name>-2", as OpenKruise reads it); the other is idle on hotUpgradeEmptyImage.
//  - Step 1 (SidecarPodUpgradePatch, for a pod the plan picks, under the same partition,
//    maxUnavailable, selector, priority and scatter rules): the container to upgrade is the one on
//    hotUpgradeEmptyImage (-1 first), else the one not ready when the other is, else the idle
//    one; nothing to do when the other already runs the set's image. It gets the set's image; the
//    working annotation names it at once (OpenKruise: the new container takes over while it
//    starts, e.g. by fd passing in its postStart hook); version.sidecarset.kruise.io/<it> = the
//    set's metadata.resourceVersion, versionalt.sidecarset.kruise.io/<it> = the old container's
//    version, versionalt.sidecarset.kruise.io/<old> = the set's resourceVersion (the env vars
//    SIDECARSET_VERSION / SIDECARSET_VERSION_ALT read them when a container starts). The old
//    container keeps its image and keeps running: one of the pair always runs the real sidecar.
//    Hashes and the in-place state (the upgraded container) as for a cold upgrade.
//  - A pod is mid hot upgrade while a hot sidecar's idle container is not on hotUpgradeEmptyImage:
//    it is "upgrading" (not ready, so it counts against maxUnavailable, as OpenKruise's
//    IsPodReady).
//  - Step 2 (SidecarPodHotUpgradeResetPatch, for the pods in plan.reset): once the in-place
//    update is complete (the upgraded container restarted since the patch, whatever the digest)
//    and the pod is Running and Ready, or every container but the idle ones is ready, the idle
//    (old) container goes back to hotUpgradeEmptyImage, version.sidecarset.kruise.io/<old> = "0",
//    versionalt.sidecarset.kruise.io/<working> = "0", and the in-place state records that
//    container, so the pod stays upgrading until the kubelet restarted it. The hashes are not
//    touched. Reset is done for every pod due, before any new pod is picked (a round with resets
//    picks none, as OpenKruise). A pod counts as ready again when both steps are done.
//
// Pod condition SidecarSetUpgradable (OpenKruise's updatePodSidecarSetUpgradableCondition): its
// message is a JSON object set name -> upgradable (bool), one entry per SidecarSet that wrote it;
// status True with reason AllSidecarsetUpgradable when every entry is true, else False with reason
// UpdateImmutableField. The controller writes false for plan.mark_not_upgradable and true after
// upgrading a pod, and true again for an updated pod its entry marks false. Through the pods/status
// subresource (SidecarSetUpgradableConditionPatch).
//
// The patch (SidecarPodUpgradePatch) is an RFC 6902 **JSON patch** (send as
// application/json-patch+json), not a merge or strategic patch: this repository's optimistic
// write (docs/conventions.md) starts with a `test` of /metadata/resourceVersion, a failed test
// being a bare 422 to tell from a bad patch by re-reading the pod (CloneSetReconciler::PatchPod);
// a merge patch would replace the whole containers list, and the fake API server treats a
// strategic patch as a merge patch. Ops: the test, `replace` of /spec/containers/<i>/image for
// each (cold) container of the set the pod has whose image differs and for each hot container
// step 1 upgrades, `add` of the working and version annotations step 1 changes, and `add` of the
// annotations hash,
// hash-without-image and (when an image changes) inplace-update-state, with this set's entries
// updated (hash, updateTimestamp, and controllerRevision from status.latestRevision; other fields
// kept) and every other set's entry kept as it was. Indices come from the pod given; the test makes
// them safe.
//
// Thread-compatible, no state; never throws, whatever the JSON.

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "manager/sidecarset/sidecarset_inject.h"
#include "nlohmann/json.hpp"

namespace kruise::manager::sidecarset {

inline constexpr char kSidecarSetInPlaceUpdateStateAnnotation[] =
    "kruise.io/sidecarset-inplace-update-state";
inline constexpr char kSidecarSetVersionAnnotationPrefix[] = "version.sidecarset.kruise.io/";
inline constexpr char kSidecarSetVersionAltAnnotationPrefix[] = "versionalt.sidecarset.kruise.io/";
inline constexpr char kSidecarSetUpgradableCondition[] = "SidecarSetUpgradable";

// What the planners read of a SidecarSet, parsed once (defaults applied).
struct SidecarSetUpgradeTarget {
  std::string name;
  std::string hash;                           // SidecarSetRecordedHash
  std::string hash_without_image;             // SidecarSetRecordedHashWithoutImage
  std::string latest_revision;                // status.latestRevision ("" when unknown)
  std::vector<std::string> containers;        // spec.containers names, in order
  std::map<std::string, std::string> images;  // container name -> image
  struct HotSidecar {
    std::string name;  // the set's container name; the pod has <name>-1 and <name>-2
    std::string image;
    std::string empty_image;  // upgradeStrategy.hotUpgradeEmptyImage
  };
  std::vector<HotSidecar> hot;   // containers with upgradeStrategy.upgradeType HotUpgrade
  bool hot_upgrade = false;      // !hot.empty()
  std::string resource_version;  // metadata.resourceVersion: the hot version annotations' value
  bool not_update = false;       // updateStrategy.type NotUpdate
  bool paused = false;           // updateStrategy.paused
  nlohmann::json selector;       // updateStrategy.selector (null: every pod)
  nlohmann::json partition = 0;  // int or "N%"
  nlohmann::json max_unavailable = 1;
  nlohmann::json priority_strategy;  // null or {weightPriority | orderPriority}
  nlohmann::json scatter_strategy;   // null or [{key, value}]
};

// INVALID_ARGUMENT naming the field for: not an object, no metadata.name, spec not an object,
// containers not a list of objects with a name and a string image, updateStrategy not an object,
// type/paused/partition/maxUnavailable of the wrong type or an unparsable percent, a selector
// that is not a valid label selector, priorityStrategy not an object, scatterStrategy not a list.
absl::StatusOr<SidecarSetUpgradeTarget> ParseSidecarSetUpgradeTarget(const nlohmann::json& set);

// A SidecarSetMatcher for upgrades: the set's selector and namespace rules without
// injectionStrategy.paused (which stops injection into new pods, not upgrades).
SidecarSetMatcher UpgradeMatcher(const nlohmann::json& sidecarset);

enum class SidecarPodState {
  kNotMatched,  // inactive, or no hash entry for the set: ignored
  kUpdated,
  kUpgradable,
  kNotUpgradable,
  kMalformed,  // the pod's sidecarset annotations cannot be read: see `problem`
};

struct SidecarPodInfo {
  SidecarPodState state = SidecarPodState::kNotMatched;
  bool ready = false;      // Ready True and not upgrading
  bool upgrading = false;  // its in-place update for this set is not complete, or mid hot upgrade
  bool hot_reset = false;  // hot upgrade step 2 is due (see above)
  std::string problem;     // kMalformed: why; upgrading: what it waits for
};

struct SidecarSetUpgradePlan {
  std::vector<SidecarPodInfo> pods;    // parallel to the input
  std::vector<size_t> upgrade;         // indices to upgrade now, in order
  std::vector<size_t> not_upgradable;  // kNotUpgradable pods, input order
  // Hot pods whose old container goes back to hotUpgradeEmptyImage now (step 2), input order.
  std::vector<size_t> reset;
  // not_upgradable pods OpenKruise marks SidecarSetUpgradable False: the set is not held and they
  // match updateStrategy.selector.
  std::vector<size_t> mark_not_upgradable;
  std::string held;  // why nothing may be picked ("" when not held)
  // For status (OpenKruise's): matched, updated, ready, updated and ready.
  int matched_pods = 0;
  int updated_pods = 0;
  int ready_pods = 0;
  int updated_ready_pods = 0;
};

// `pods`: the pods the set selects (pointers must not be null). Pods whose annotations are
// malformed are reported in their SidecarPodInfo and otherwise left out (one bad pod does not stop
// the rollout). INVALID_ARGUMENT when the strategy's numbers cannot be scaled.
absl::StatusOr<SidecarSetUpgradePlan> PlanSidecarSetUpgrade(
    const SidecarSetUpgradeTarget& target, const std::vector<const nlohmann::json*>& pods);

// Classifies one pod (as PlanSidecarSetUpgrade does for each).
SidecarPodInfo ClassifySidecarPod(const SidecarSetUpgradeTarget& target, const nlohmann::json& pod);

struct SidecarPodPatch {
  nlohmann::json ops = nlohmann::json::array();  // the JSON patch; empty: send nothing
  std::vector<std::string> containers;           // pod containers whose image it changes
  std::vector<std::string> missing;  // containers of the set the pod lacks (then no ops)
};

// The patch upgrading `pod` to the set's sidecars (see above; hot sidecars: step 1); `now`
// becomes the entries' updateTimestamp (RFC 3339, UTC, seconds). Already updated: empty ops. A pod
// lacking one of the set's containers (hot: either of the pair) is not patched: `missing` names
// them (writing the new hash would say it runs them). Errors: INVALID_ARGUMENT for a pod that is
// not an object, has no metadata.resourceVersion, spec.containers not a list, or unreadable
// sidecarset annotations (hot sets: also the working annotation); FAILED_PRECONDITION when the pod
// has no entry for the set or is not upgradable.
absl::StatusOr<SidecarPodPatch> SidecarPodUpgradePatch(const SidecarSetUpgradeTarget& target,
                                                       const nlohmann::json& pod, absl::Time now);

// Hot upgrade step 2 for `pod` (see above): the test, `replace` of each idle container's image by
// hotUpgradeEmptyImage where it differs, `add` of the two version annotations per such sidecar and
// of the in-place state. Empty ops when no idle container needs it. The caller checks that it is
// due (SidecarPodInfo::hot_reset). Errors: INVALID_ARGUMENT as SidecarPodUpgradePatch.
absl::StatusOr<SidecarPodPatch> SidecarPodHotUpgradeResetPatch(
    const SidecarSetUpgradeTarget& target, const nlohmann::json& pod, absl::Time now);

// The JSON patch (for the pods/status subresource) setting this set's entry of `pod`'s
// SidecarSetUpgradable condition to `upgradable` (see above): a `test` of resourceVersion, then
// `add` of the condition (absent) or of its changed fields (status, reason, message, and
// lastTransitionTime when the status flips: single fields, the pod cache keeps no other). Empty
// when nothing would change. A message that is not a JSON object of booleans is replaced.
// INVALID_ARGUMENT for a pod that is not an object or has no metadata.resourceVersion.
absl::StatusOr<nlohmann::json> SidecarSetUpgradableConditionPatch(const std::string& set_name,
                                                                  const nlohmann::json& pod,
                                                                  bool upgradable, absl::Time now);
// Whether `pod`'s SidecarSetUpgradable condition has an entry false for `set_name`.
bool MarkedNotUpgradable(const std::string& set_name, const nlohmann::json& pod);

}  // namespace kruise::manager::sidecarset
