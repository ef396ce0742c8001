#pragma once

// Revisions of a workload's pod template (issue 14; shared by CloneSet, Advanced StatefulSet and
// Advanced DaemonSet, knows no workload): the ControllerRevision that records a template, its
// hash and name, as OpenKruise and the Kubernetes controllers shape them.
//
//  - TemplateHash: FNV-1a (32 bit) of the template's canonical JSON (keys sorted), then the
//    collision count's 4 bytes little-endian when it is set, printed in decimal and each digit
//    mapped onto the alphabet of Kubernetes' rand.SafeEncodeString (no vowels, no 0/1/3). The
//    hash of Go controllers is taken over Go's in-memory struct dump and cannot be reproduced
//    from JSON; ours is stable for the same JSON, which is what the controller needs (defaults
//    are applied by the webhook before, so a round trip through the API server keeps it).
//  - RevisionName: "<owner>-<hash>", as `kubectl rollout history` shows.
//  - NewControllerRevision: data = {"spec": {"template": <template with "$patch": "replace">}},
//    OpenKruise's patch form, labels from the template plus the hash label, the owner reference.

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace kruise::manager::revision {

inline constexpr char kControllerRevisionHashLabel[] = "controller-revision-hash";

std::string TemplateHash(const nlohmann::json& pod_template,
                         std::optional<int32_t> collision_count = std::nullopt);

std::string RevisionName(const std::string& owner_name, const std::string& hash);

// `owner`: the workload object (apiVersion, kind, metadata.name/namespace/uid).
nlohmann::json NewControllerRevision(const nlohmann::json& owner,
                                     const nlohmann::json& pod_template, int64_t revision,
                                     std::optional<int32_t> collision_count = std::nullopt);

// The pod template a ControllerRevision made by NewControllerRevision records (without the
// "$patch" marker); null when `revision` has none.
nlohmann::json RevisionTemplate(const nlohmann::json& revision);

// History pruning: of `sorted_names` (a workload's revisions, oldest first, the newest last), the
// ones to delete so that at most `limit` remain, oldest first, never the newest nor one in `keep`
// (in use). Fewer when kept revisions are in the way; none when `limit` < 0.
std::vector<std::string> RevisionsToPrune(const std::vector<std::string>& sorted_names, int limit,
                                          const std::set<std::string>& keep);

}  // namespace kruise::manager::revision
