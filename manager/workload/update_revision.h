#pragma once

// The update revision of a workload that records its Pod template in ControllerRevisions
// (Advanced StatefulSet, Advanced DaemonSet), as the core StatefulSet/DaemonSet controllers find
// it: the workload's revisions from the cache (by `.revision`), the revision named
// `<name>-<hash of spec.template and status.collisionCount>` when its template is the workload's,
// else one created with the next `.revision`. AlreadyExists is read back: our own revision (the
// cache was behind) is taken; another object's under our name counts a collision
// (status.collisionCount + 1, a merge patch of the workload's status guarded by its
// resourceVersion) and the caller comes back on the next round.
//
// Thread-safety: none of its own; the informer and client are thread-safe.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kube/informer.h"
#include "kube/object.h"

namespace kruise::manager::workload {

struct UpdateRevision {
  std::vector<kube::Json> revisions;   // the workload's, ascending `.revision`, plus one created
  int64_t collision_count = 0;         // status.collisionCount as read
  std::string hash;                    // of the template (and the collision count)
  std::string name;                    // <workload>-<hash>
  std::optional<kube::Json> revision;  // nullopt: a collision was counted; come back later
  // The revision named `n` among `revisions`, or null.
  const kube::Json* Named(const std::string& n) const;
};

// `revisions_cache`: ControllerRevisions indexed by kube::kControllerUidIndex. `resource`: the
// workload's own resource (for the collisionCount status patch).
absl::StatusOr<UpdateRevision> SyncUpdateRevision(kube::KubeClient* client,
                                                  kube::Informer* revisions_cache,
                                                  const kube::Json& workload,
                                                  const kube::Resource& resource);

}  // namespace kruise::manager::workload
