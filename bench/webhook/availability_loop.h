#pragma once

// --loop-availability of webhook-bench-server (issue 17): what WorkloadSpread and
// PodUnavailableBudget add to a pod admission, in-process (no TLS, HTTP or threads). Rounds
// interleave six cases and print each one's mean µs per review, then the medians:
//   pod CREATE through the readiness-gate chain alone; with the WorkloadSpread injector over 100
//   spreads in the namespace, none targeting the pod's CloneSet; with one targeting it (a subset
//   is chosen and recorded in the spread's status: a guarded JSON patch);
//   pod DELETE through an allow-all validator; through the PUB validator over 100 PUBs, none
//   guarding the pod; with one guarding it (the disruption is recorded in its status).
// A status write goes to an in-process API client: the manager's side of it (the request body,
// parsing the reply, parsing the watch event and updating the cache, as the informer would) is
// timed; the API server's side (applying the patch) is timed apart and left out. Statuses are
// reset every `batch` admissions, outside the timed part, as the controllers prune them in a
// cluster: a recorded spread or budget holds 0 to batch-1 entries.
// Returns non-zero when an admission was denied (the figures would be of the wrong path).

#include "nlohmann/json.hpp"

namespace kruise::bench {

// `review_pod`: the pod of the peers' CREATE review; `running_pod`: a Running, Ready pod.
int LoopAvailabilityReviews(const nlohmann::json& review_pod, const nlohmann::json& running_pod,
                            int count, int batch = 100);

}  // namespace kruise::bench
