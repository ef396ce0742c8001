#pragma once

// SidecarSet revision history (issue 15), as pure functions over raw JSON: the ControllerRevision
// that records a SidecarSet's injectable spec, which one is the latest, which to prune, and which
// spec a new pod gets when spec.injectionStrategy.revision asks for an older one. The controller
// (sidecarset_controller.h) keeps the history; the pod webhook (sidecarset_webhook.h) reads it.
// Semantics follow OpenKruise (pkg/control/sidecarcontrol/history_control.go,
// pkg/controller/sidecarset/sidecarset_processor.go registerLatestRevision / truncateHistory,
// pkg/webhook/pod/mutating/sidecarset.go getSuitableRevisionSidecarSet).
//
// The ControllerRevision of a set (NewSidecarSetRevision):
//  - lives in the manager's namespace (a SidecarSet is cluster-scoped, and that namespace is closed
//    to ordinary users), named "<set>-<hash>" (revision::RevisionName);
//  - data = {"spec": {"containers", "imagePullSecrets", "initContainers", "patchPodMetadata",
//    "volumes"}} of the set as DefaultSidecarSet gives it, absent fields as null (OpenKruise's
//    patch form: keys sorted, what injection reads and nothing else, so a change of selector or
//    updateStrategy makes no revision); hash = revision::TemplateHash(data, collisionCount when
//    > 0), also the label controller-revision-hash;
//  - labels: the set's labels, kruise.io/sidecarset-name=<set> (the selector of a set's history),
//    apps.kruise.io/sidecarset-custom-version=<SidecarSetCustomVersion> when non-empty;
//  - annotations: the set's, with kruise.io/sidecarset-hash(-without-image) set to the hashes pods
//    record (SidecarSetRecordedHash*), so a pod injected from the revision records the hashes the
//    set had then;
//  - ownerReference: the set (controller, blockOwnerDeletion): the garbage collector removes the
//    history with the set;
//  - `revision`: 1 + the highest of the set's revisions.
//
// Thread-compatible, no state; never throws, whatever the JSON.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace kruise::manager::sidecarset {

inline constexpr char kSidecarSetNameLabel[] = "kruise.io/sidecarset-name";
inline constexpr char kSidecarSetCustomVersionLabel[] = "apps.kruise.io/sidecarset-custom-version";
inline constexpr int kDefaultSidecarSetRevisionHistoryLimit = 10;

// v1beta1's spec.customVersion when non-empty, else v1alpha1's label
// apps.kruise.io/sidecarset-custom-version, else "".
std::string SidecarSetCustomVersion(const nlohmann::json& set);
// status.collisionCount (0 when absent or malformed).
int32_t SidecarSetCollisionCount(const nlohmann::json& set);
// The `data` of the set's revision (see above).
nlohmann::json SidecarSetRevisionData(const nlohmann::json& set);
// "<set>-<hash of data>" at `collision_count`.
std::string SidecarSetRevisionName(const nlohmann::json& set, const nlohmann::json& data,
                                   int32_t collision_count);
// The ControllerRevision of the set's current spec (see above), in `ns`.
nlohmann::json NewSidecarSetRevision(const nlohmann::json& set, const std::string& ns,
                                     int64_t revision, int32_t collision_count);

// Kubernetes' history.SortControllerRevisions order: `revision`, then creationTimestamp, then name.
void SortSidecarSetRevisions(std::vector<nlohmann::json>* revisions);
// Of `revisions` (any order), those of `set`: labelled kruise.io/sidecarset-name=<set> and, when
// both uids are known, controlled by this set (not a deleted namesake's leftovers), sorted as
// above.
std::vector<nlohmann::json> RevisionsOfSidecarSet(const nlohmann::json& set,
                                                  const std::vector<nlohmann::json>& revisions);

// What registerLatestRevision does with the set's current spec, given its revisions (sorted):
//  - kKeep: the newest revision already records it (`revision` is that one);
//  - kRenumber: an older one does (a rollback): it becomes the newest by taking `revision_number`
//    (OpenKruise updates the revision's `revision` field; `revision` is that older revision);
//  - kCreate: none does: `revision` is NewSidecarSetRevision at `revision_number` and the set's
//    collision count. On AlreadyExists with other data, the caller counts a collision and asks
//    NewSidecarSetRevision again with collision_count + 1.
struct LatestRevisionPlan {
  enum class Action { kKeep, kRenumber, kCreate };
  Action action = Action::kCreate;
  nlohmann::json revision;
  int64_t revision_number = 1;
};
LatestRevisionPlan PlanLatestSidecarSetRevision(const nlohmann::json& set,
                                                const std::vector<nlohmann::json>& sorted,
                                                const std::string& ns);

// The latest revision's name the webhook records in a pod's hash annotation while it injects the
// current spec: the newest of `sorted` whose data equals the current spec's, else the name the
// controller will create (SidecarSetRevisionName at the set's collision count).
std::string LatestSidecarSetRevisionName(const nlohmann::json& set,
                                         const std::vector<nlohmann::json>& sorted);

// The names to delete from `sorted` (the set's revisions, the latest among them) so that at most
// max(1, spec.revisionHistoryLimit (default 10)) remain: oldest first, never the newest, never one
// in use: named by a pod's hash annotation (`used_by_pods`), by injectionStrategy.revision's
// revisionName, or the newest with injectionStrategy.revision's customVersion. Fewer when in-use
// revisions are in the way (OpenKruise then reports it and keeps them).
std::vector<std::string> SidecarSetRevisionsToPrune(const nlohmann::json& set,
                                                    const std::vector<nlohmann::json>& sorted,
                                                    const std::set<std::string>& used_by_pods);

// The controllerRevision a pod's kruise.io/sidecarset-hash annotation records for `set_name`
// ("" when none or malformed).
std::string PodSidecarSetControllerRevision(const nlohmann::json& pod, const std::string& set_name);

// The revision spec.injectionStrategy.revision asks for among `sorted` (the set's revisions):
// revisionName by name, else the newest labelled with customVersion. Null when the set asks for
// none or it is not there.
const nlohmann::json* FindInjectionRevision(const nlohmann::json& set,
                                            const std::vector<nlohmann::json>& sorted);
// A readable reason FindInjectionRevision found nothing for a set that asks for a revision.
std::string MissingInjectionRevisionMessage(const nlohmann::json& set);

// The set as `revision` recorded it, as OpenKruise's GetHistorySidecarSet restores it (a strategic
// merge of the revision's data into the current set): for containers, initContainers, volumes and
// imagePullSecrets (merge key name), the revision's items replace the current items of their name
// and current items of other names are kept after them; a field the revision recorded as null is
// removed; patchPodMetadata is the revision's. Unlike a strategic merge, an item the revision
// recorded replaces the current one whole (OpenKruise merges their fields too, so a field set only
// after the revision survives there). Everything else is the current set's. Annotations
// kruise.io/sidecarset-hash(-without-image) come from the revision (computed from the restored spec
// when it has none) and status.latestRevision is the revision's name, so the pod records that
// revision.
nlohmann::json RestoreSidecarSetRevision(const nlohmann::json& set, const nlohmann::json& revision);

// Which spec a pod being created gets from a set whose injectionStrategy.revision names an
// existing revision (OpenKruise's getSuitableRevisionSidecarSet on CREATE):
//  - updateStrategy.paused: the revision;
//  - policy Partial: the revision when updateStrategy.selector is set and does not match the pod
//    (that pod would not be upgraded); otherwise the revision with the probability
//    updateStrategy.partition gives as a percentage ("30%": 30 % of new pods; an integer partition
//    or none: never), `uniform01` being a draw in [0, 1);
//  - otherwise (Always, the default): the revision.
// A malformed selector or partition picks the latest.
bool InjectHistoryRevision(const nlohmann::json& set,
                           const std::map<std::string, std::string>& pod_labels, double uniform01);

}  // namespace kruise::manager::sidecarset
