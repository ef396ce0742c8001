#pragma once

// The Deployment controller's naming: a Deployment's ReplicaSet is `<deployment>-<hash>` and
// labels its pods `pod-template-hash=<hash>`. Features that follow a pod up to its Deployment
// (PodUnavailableBudget and WorkloadSpread targetRefs) read the Deployment's name from there
// instead of reading the ReplicaSet. Header-only; never throws.

#include <optional>
#include <string>

#include "kube/object.h"

namespace kruise::kube {

inline constexpr char kPodTemplateHashLabel[] = "pod-template-hash";

// The Deployment whose ReplicaSet `replicaset` (the pod's controller's name) made `pod`: the
// name without its "-<pod-template-hash>" suffix. nullopt when the pod has no (or an empty)
// label, or the name does not end with it.
inline std::optional<std::string> DeploymentOfReplicaSetPod(const Json& pod,
                                                            const std::string& replicaset) {
  std::optional<std::string> hash = Label(pod, kPodTemplateHashLabel);
  if (!hash || hash->empty() || replicaset.size() <= hash->size() + 1) return std::nullopt;
  const size_t dash = replicaset.size() - hash->size() - 1;
  if (replicaset[dash] != '-' || replicaset.compare(dash + 1, std::string::npos, *hash) != 0) {
    return std::nullopt;
  }
  return replicaset.substr(0, dash);
}

}  // namespace kruise::kube
