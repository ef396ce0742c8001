#pragma once

// The order in which a workload updates its pods (issue 14), shared by CloneSet and the SidecarSet
// cold upgrade; it knows no workload. OpenKruise's SortUpdateIndexes: Kubernetes' ActivePods order,
// then spec.updateStrategy.priorityStrategy, then scatterStrategy. Pure functions,
// thread-compatible.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace kruise::manager::inplace {

// What the ordering reads of one pod.
struct PodFacts {
  std::string name;
  bool scheduled = false;  // spec.nodeName set
  std::string phase;       // Pending | Running | Unknown | ...
  bool ready = false;      // Ready condition True
  absl::Time ready_since = absl::InfinitePast();
  absl::Time created = absl::InfinitePast();
  int restarts = 0;           // sum over containers
  int64_t deletion_cost = 0;  // controller.kubernetes.io/pod-deletion-cost
  std::map<std::string, std::string> labels;
};

// Reads the facts from a pod as the API server serves it. May throw nlohmann's exceptions on
// mistyped fields (restartCount, condition fields).
PodFacts ReadPodFacts(const nlohmann::json& pod);

// Kubernetes' ActivePods order (pods to get rid of, or to update, first): unscheduled < scheduled;
// Pending < Unknown < Running; not ready < ready; with `with_cost_and_rank` (ActivePodsWithRanks)
// lower deletion cost, then higher rank; ready for less time; more restarts; newer; name.
bool ActivePodLess(const PodFacts& a, const PodFacts& b, int rank_a = 0, int rank_b = 0,
                   bool with_cost_and_rank = false);

// Reorders `order` (indices into `pods`) by priorityStrategy (null, or {weightPriority: [{weight,
// matchSelector}]} higher sum first, or {orderPriority: [{orderedKey}]} higher label value
// first: the label as an integer or the digits it ends with), a stable sort. Unparseable selectors
// are skipped.
void ApplyPriorityStrategy(const nlohmann::json& priority, const std::vector<const PodFacts*>& pods,
                           std::vector<size_t>* order);

// Reorders `order` by scatterStrategy (null or [{key, value}]): for each term the pods having that
// label are spread evenly over the order instead of coming one after another.
void ApplyScatterStrategy(const nlohmann::json& scatter, const std::vector<const PodFacts*>& pods,
                          std::vector<size_t>* order);

// SortUpdateIndexes: `order` sorted by ActivePodLess (no cost or rank), then priority, then
// scatter. Throws nlohmann's exceptions on a mistyped strategy (validate it first).
void SortUpdateOrder(const nlohmann::json& priority, const nlohmann::json& scatter,
                     const std::vector<const PodFacts*>& pods, std::vector<size_t>* order);

// The partition (pods kept at the old revision) of `replicas` pods: an integer as is, or a percent
// rounded up, where a percent below 100% leaves at least one pod to update when replicas > 1;
// clamped to [0, replicas]. INVALID_ARGUMENT for anything else
// (kube::GetScaledValueFromIntOrPercent).
absl::StatusOr<int> ScalePartition(const nlohmann::json& partition, int replicas);

}  // namespace kruise::manager::inplace
