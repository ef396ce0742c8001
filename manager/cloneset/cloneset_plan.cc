#include "manager/cloneset/cloneset_plan.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kube/object.h"
#include "manager/cloneset/cloneset_api.h"
#include "manager/inplace/inplace_update.h"

namespace kruise::manager::cloneset {
namespace {

const Json& PlanMember(const Json& j, const char* key) {
  static const Json kNull;
  const Json* f = kube::Field(j, key);
  return f != nullptr ? *f : kNull;
}

absl::Status WrongType(const std::string& field, const char* want) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": must be ", want));
}

absl::StatusOr<int64_t> OptionalInt(const Json& obj, const char* key, int64_t def,
                                    const std::string& field) {
  const Json& v = PlanMember(obj, key);
  if (v.is_null()) return def;
  if (!v.is_number_integer()) return WrongType(field, "an integer");
  return v.get<int64_t>();
}

bool IsIntOrPercent(const Json& v) { return v.is_number_integer() || v.is_string(); }

bool ConditionTrue(const Json& pod, const char* type, bool* present = nullptr,
                   absl::Time* since = nullptr) {
  const Json* conds = kube::FindPath(pod, {"status", "conditions"});
  if (present != nullptr) *present = false;
  if (conds == nullptr || !conds->is_array()) return false;
  for (const Json& c : *conds) {
    if (!c.is_object() || c.value("type", "") != type) continue;
    if (present != nullptr) *present = true;
    if (since != nullptr) {
      auto t = kube::ParseRfc3339(c.value("lastTransitionTime", ""));
      if (t.ok()) *since = *t;
    }
    return c.value("status", "") == "True";
  }
  return false;
}

}  // namespace

absl::StatusOr<CloneSetSpec> ParseCloneSetSpec(const Json& cloneset) {
  CloneSetSpec s;
  const Json& spec = PlanMember(cloneset, "spec");
  if (!spec.is_object()) return WrongType("spec", "an object");
  auto replicas = OptionalInt(spec, "replicas", 1, "spec.replicas");
  if (!replicas.ok()) return replicas.status();
  if (*replicas < 0 || *replicas > INT32_MAX) {
    return absl::InvalidArgumentError("spec.replicas: must be between 0 and 2147483647");
  }
  s.replicas = static_cast<int>(*replicas);

  const Json& us = PlanMember(spec, "updateStrategy");
  if (!us.is_null() && !us.is_object()) return WrongType("spec.updateStrategy", "an object");
  if (const Json& t = PlanMember(us, "type"); !t.is_null()) {
    if (!t.is_string()) return WrongType("spec.updateStrategy.type", "a string");
    s.update_type = t.get<std::string>();
  }
  for (auto [key, target] : {std::pair<const char*, Json*>{"partition", &s.partition},
                             {"maxUnavailable", &s.max_unavailable},
                             {"maxSurge", &s.max_surge}}) {
    const Json& v = PlanMember(us, key);
    if (v.is_null()) continue;
    if (!IsIntOrPercent(v)) {
      return WrongType(absl::StrCat("spec.updateStrategy.", key), "an integer or a percent");
    }
    *target = v;
  }
  if (const Json& p = PlanMember(us, "paused"); !p.is_null()) {
    if (!p.is_boolean()) return WrongType("spec.updateStrategy.paused", "a boolean");
    s.paused = p.get<bool>();
  }
  auto grace = OptionalInt(PlanMember(us, "inPlaceUpdateStrategy"), "gracePeriodSeconds", 0,
                           "spec.updateStrategy.inPlaceUpdateStrategy.gracePeriodSeconds");
  if (!grace.ok()) return grace.status();
  s.grace_period_seconds = std::max<int64_t>(*grace, 0);
  s.priority_strategy = PlanMember(us, "priorityStrategy");
  s.scatter_strategy = PlanMember(us, "scatterStrategy");

  const Json& ss = PlanMember(spec, "scaleStrategy");
  if (const Json& m = PlanMember(ss, "maxUnavailable"); !m.is_null()) {
    if (!IsIntOrPercent(m)) {
      return WrongType("spec.scaleStrategy.maxUnavailable", "an integer or a percent");
    }
    s.scale_max_unavailable = m;
  }
  if (const Json& d = PlanMember(ss, "podsToDelete"); !d.is_null()) {
    if (!d.is_array()) return WrongType("spec.scaleStrategy.podsToDelete", "a list of names");
    for (const Json& n : d) {
      if (!n.is_string()) return WrongType("spec.scaleStrategy.podsToDelete", "a list of names");
      s.pods_to_delete.push_back(n.get<std::string>());
    }
  }
  auto min_ready = OptionalInt(spec, "minReadySeconds", 0, "spec.minReadySeconds");
  if (!min_ready.ok()) return min_ready.status();
  s.min_ready_seconds = static_cast<int>(std::clamp<int64_t>(*min_ready, 0, INT32_MAX));
  auto history = OptionalInt(spec, "revisionHistoryLimit", 10, "spec.revisionHistoryLimit");
  if (!history.ok()) return history.status();
  s.revision_history_limit = static_cast<int>(std::clamp<int64_t>(*history, 0, INT32_MAX));

  auto lifecycle = workload::ParseLifecycle(cloneset);
  if (!lifecycle.ok()) return lifecycle.status();
  s.pre_delete = std::move(lifecycle->pre_delete);
  s.in_place_update = std::move(lifecycle->in_place_update);
  s.pre_normal = std::move(lifecycle->pre_normal);
  return s;
}

absl::StatusOr<ScaledNumbers> ScaleNumbers(const CloneSetSpec& spec) {
  ScaledNumbers n;
  const int replicas = spec.replicas;
  auto partition = inplace::ScalePartition(spec.partition, replicas);
  if (!partition.ok()) return Annotate(partition.status(), "spec.updateStrategy.partition");
  n.partition = *partition;
  auto surge = kube::GetScaledValueFromIntOrPercent(spec.max_surge, replicas, true);
  if (!surge.ok()) return Annotate(surge.status(), "spec.updateStrategy.maxSurge");
  n.max_surge = spec.paused ? 0 : std::max(*surge, 0);
  auto unavailable =
      kube::GetScaledValueFromIntOrPercent(spec.max_unavailable, replicas, n.max_surge == 0);
  if (!unavailable.ok()) {
    return Annotate(unavailable.status(), "spec.updateStrategy.maxUnavailable");
  }
  n.max_unavailable = std::max(*unavailable, 0);
  if (spec.scale_max_unavailable.is_null()) {
    n.scale_max_unavailable = INT_MAX;
  } else {
    auto scale = kube::GetScaledValueFromIntOrPercent(spec.scale_max_unavailable, replicas, true);
    if (!scale.ok()) return Annotate(scale.status(), "spec.scaleStrategy.maxUnavailable");
    n.scale_max_unavailable = std::max(*scale, 0);
  }
  return n;
}

PodView ViewPod(const Json& pod, const CloneSetSpec& spec, const std::string& update_revision,
                absl::Time now) {
  PodView v;
  static_cast<inplace::PodFacts&>(v) = inplace::ReadPodFacts(pod);
  v.finalizers = kube::Finalizers(pod);
  auto label = [&](const char* key) {
    auto it = v.labels.find(key);
    return it == v.labels.end() ? std::string() : it->second;
  };
  v.instance_id = label(kInstanceIdLabel);
  v.revision = label("controller-revision-hash");
  v.updated = !update_revision.empty() && v.revision == update_revision;
  v.lifecycle_state = label(kLifecycleStateLabel);
  v.specified_delete =
      v.labels.count(kSpecifiedDeleteLabel) > 0 ||
      std::find(spec.pods_to_delete.begin(), spec.pods_to_delete.end(), v.name) !=
          spec.pods_to_delete.end();
  v.node = kube::GetString(pod, {"spec", "nodeName"}).value_or("");
  bool gate_present = false;
  bool in_place_ready = ConditionTrue(pod, inplace::kInPlaceUpdateReadyCondition, &gate_present);
  v.update_ready = v.ready && (!gate_present || in_place_ready);
  v.ready_long_enough =
      v.update_ready && (spec.min_ready_seconds == 0 ||
                         (v.ready_since != absl::InfinitePast() &&
                          v.ready_since + absl::Seconds(spec.min_ready_seconds) <= now));
  v.available = v.ready_long_enough &&
                (v.lifecycle_state.empty() || v.lifecycle_state == kStateNormal);
  v.in_place_grace = kube::Annotation(pod, inplace::kInPlaceUpdateGraceAnnotation).has_value();
  return v;
}

bool IsPodHooked(const std::optional<LifecycleHook>& hook, const PodView& pod) {
  return workload::IsPodHooked(hook, {pod.labels, pod.finalizers});
}

bool IsPodAllHooked(const std::optional<LifecycleHook>& hook, const PodView& pod) {
  return workload::IsPodAllHooked(hook, {pod.labels, pod.finalizers});
}

Diffs CalculateDiffs(const CloneSetSpec& spec, const ScaledNumbers& n,
                     const std::vector<PodView>& pods) {
  Diffs res;
  const int replicas = spec.replicas;
  int new_count = 0, new_active = 0, old_count = 0, old_active = 0;
  int new_unavailable = 0, old_unavailable = 0, new_to_delete = 0, old_to_delete = 0;
  int new_pre_deleting = 0, old_pre_deleting = 0;
  for (const PodView& p : pods) {
    int& count = p.updated ? new_count : old_count;
    ++count;
    if (p.lifecycle_state == kStatePreparingDelete) {
      ++(p.updated ? new_pre_deleting : old_pre_deleting);
      continue;
    }
    ++(p.updated ? new_active : old_active);
    if (p.specified_delete) {
      ++(p.updated ? new_to_delete : old_to_delete);
    } else if (!p.available) {
      ++(p.updated ? new_unavailable : old_unavailable);
    }
  }
  // Without partition rollback pods only move to the update revision.
  const int update_old_diff = std::max(old_active - n.partition, 0);
  const int update_new_diff = std::min(new_active - (replicas - n.partition), 0);
  const int total_unavailable =
      new_pre_deleting + old_pre_deleting + new_unavailable + old_unavailable;

  if (n.max_surge > 0) {
    int scale_surge = 0, scale_old_surge = 0;
    if (const int to_delete = new_to_delete + old_to_delete; to_delete > 0) {
      scale_surge = std::min(std::max(total_unavailable + to_delete - n.max_unavailable, 0),
                             to_delete);
      if (scale_surge > new_to_delete) scale_old_surge = scale_surge - new_to_delete;
    }
    int update_surge = 0, update_old_surge = 0;
    // Surge for updating only when old pods must move (update_old_diff > 0) and new ones are
    // missing (update_new_diff < 0): the smaller of the two.
    if (update_old_diff > 0 && update_new_diff < 0) {
      if (update_old_diff <= -update_new_diff) {
        update_surge = update_old_diff;
      } else {
        update_surge = -update_new_diff;
      }
    }
    if (scale_surge >= update_surge) {
      res.use_surge = std::min(n.max_surge, scale_surge);
      res.use_surge_old_revision = std::min(res.use_surge, scale_old_surge);
    } else {
      res.use_surge = std::min(n.max_surge, update_surge);
      res.use_surge_old_revision = std::min(res.use_surge, update_old_surge);
    }
  }

  const int total = static_cast<int>(pods.size());
  const int expected_total = replicas + res.use_surge;
  const int expected_old = n.partition + res.use_surge_old_revision;
  if (const int up = expected_total - total; up > 0) {
    res.scale_up = up;
    res.scale_up_old_revision = std::max(expected_old - old_count, 0);
    res.scale_up_limit =
        std::min(res.scale_up, std::max(n.scale_max_unavailable - total_unavailable, 0));
  }
  if (const int down = total - old_to_delete - new_to_delete - expected_total; down > 0) {
    res.scale_down = down;
    res.scale_down_old_revision = std::max(old_count - old_to_delete - expected_old, 0);
  }
  if (new_to_delete > 0 || old_to_delete > 0 || res.scale_down > 0) {
    res.delete_ready_limit = std::max(n.max_unavailable + (total - replicas) - total_unavailable, 0);
  }
  res.update = update_old_diff <= -update_new_diff ? update_old_diff : -update_new_diff;
  if (res.update != 0) res.update_max_unavailable = n.max_unavailable + total - replicas;
  return res;
}

bool DeleteFirst(const PodView& a, const PodView& b, int rank_a, int rank_b) {
  return inplace::ActivePodLess(a, b, rank_a, rank_b, true);
}

std::vector<int> SpreadRanks(
    const std::vector<PodView>& pods, const std::vector<std::string>& spread_keys,
    const std::function<std::optional<std::string>(const std::string& node,
                                                   const std::string& key)>& node_label) {
  std::vector<int> ranks(pods.size(), 0);
  if (spread_keys.empty()) {
    std::map<std::string, int> per_node;
    for (const PodView& p : pods) {
      if (p.scheduled) ++per_node[p.node];
    }
    for (size_t i = 0; i < pods.size(); ++i) {
      if (pods[i].scheduled) ranks[i] = per_node[pods[i].node];
    }
    return ranks;
  }
  for (const std::string& key : spread_keys) {
    std::vector<std::optional<std::string>> domain(pods.size());
    std::map<std::string, int> per_domain;
    for (size_t i = 0; i < pods.size(); ++i) {
      if (!pods[i].scheduled || !node_label) continue;
      domain[i] = node_label(pods[i].node, key);
      if (domain[i].has_value()) ++per_domain[*domain[i]];
    }
    for (size_t i = 0; i < pods.size(); ++i) {
      if (domain[i].has_value()) ranks[i] += per_domain[*domain[i]];
    }
  }
  return ranks;
}

std::vector<size_t> ChoosePodsToDelete(const std::vector<PodView>& pods, int total,
                                       int old_revision, const std::vector<int>& ranks) {
  auto rank = [&](size_t i) { return i < ranks.size() ? ranks[i] : 0; };
  std::vector<size_t> old_pods, new_pods;
  for (size_t i = 0; i < pods.size(); ++i) (pods[i].updated ? new_pods : old_pods).push_back(i);
  auto choose = [&](std::vector<size_t> from, int diff) {
    std::sort(from.begin(), from.end(), [&](size_t a, size_t b) {
      return DeleteFirst(pods[a], pods[b], rank(a), rank(b));
    });
    if (diff < static_cast<int>(from.size())) from.resize(std::max(diff, 0));
    return from;
  };
  std::vector<size_t> out;
  if (old_revision >= total) {
    out = choose(old_pods, total);
  } else if (old_revision > 0) {
    out = choose(old_pods, old_revision);
    for (size_t i : choose(new_pods, total - static_cast<int>(out.size()))) out.push_back(i);
  } else {
    out = choose(new_pods, total);
  }
  // Not enough pods on one side: take the rest from the other, still in order.
  if (static_cast<int>(out.size()) < total) {
    std::set<size_t> taken(out.begin(), out.end());
    std::vector<size_t> rest;
    for (size_t i = 0; i < pods.size(); ++i) {
      if (!taken.count(i)) rest.push_back(i);
    }
    for (size_t i : choose(rest, total - static_cast<int>(out.size()))) out.push_back(i);
  }
  return out;
}

ScalePlan PlanScale(const CloneSetSpec& spec, const ScaledNumbers& numbers, const Diffs& diffs,
                    const std::vector<PodView>& pods, const std::vector<int>& ranks) {
  (void)numbers;
  ScalePlan plan;
  std::vector<size_t> specified, pre_delete;
  for (size_t i = 0; i < pods.size(); ++i) {
    if (pods[i].lifecycle_state == kStatePreparingDelete) {
      pre_delete.push_back(i);
    } else if (pods[i].specified_delete) {
      specified.push_back(i);
    }
  }
  int planned = 0;
  for (const PodView& p : pods) {
    if (p.specified_delete || p.lifecycle_state == kStatePreparingDelete) ++planned;
  }
  // 1. PreparingDelete pods a scale-up wants back return to Normal (never with markPodNotReady,
  // whose PreparingDelete is final, and never when the user named them).
  const bool reversible = !(spec.pre_delete.has_value() && spec.pre_delete->mark_pod_not_ready);
  if (reversible) {
    int want = spec.replicas - static_cast<int>(pods.size()) + planned;
    for (size_t i : pre_delete) {
      if (want <= 0) break;
      if (pods[i].specified_delete) continue;
      plan.back_to_normal.push_back(i);
      --want;
    }
    if (!plan.back_to_normal.empty()) return plan;
  }
  // 2. Scale up.
  if (diffs.scale_up > 0) {
    plan.create = std::min(diffs.scale_up, diffs.scale_up_limit);
    plan.create_old_revision = std::min(diffs.scale_up_old_revision, plan.create);
    return plan;
  }
  // 3. PreparingDelete pods whose hook is gone are deleted.
  for (size_t i : pre_delete) {
    if (!IsPodHooked(spec.pre_delete, pods[i])) plan.remove.push_back(i);
  }
  if (!plan.remove.empty()) return plan;
  // 4. Specified deletions, update-revision pods first; ready ones within the limit.
  int ready_limit = diffs.delete_ready_limit;
  auto take = [&](size_t i) {
    if (!pods[i].available) {
      plan.remove.push_back(i);
    } else if (ready_limit > 0) {
      plan.remove.push_back(i);
      --ready_limit;
    }
  };
  if (!specified.empty()) {
    for (size_t i : specified) {
      if (pods[i].updated) take(i);
    }
    for (size_t i : specified) {
      if (!pods[i].updated) take(i);
    }
    return plan;
  }
  // 5. Scale down, unless deletions are still under way.
  if (diffs.scale_down > 0 && planned == 0) {
    for (size_t i :
         ChoosePodsToDelete(pods, diffs.scale_down, diffs.scale_down_old_revision, ranks)) {
      take(i);
    }
  }
  return plan;
}

std::vector<size_t> PlanUpdate(const CloneSetSpec& spec, const Diffs& diffs,
                               const std::vector<PodView>& pods) {
  if (spec.paused || diffs.update <= 0) return {};
  std::vector<size_t> order;
  for (size_t i = 0; i < pods.size(); ++i) {
    const PodView& p = pods[i];
    if (p.updated || p.specified_delete || p.in_place_grace) continue;
    if (p.lifecycle_state == kStatePreparingDelete || p.lifecycle_state == kStateUpdated) continue;
    order.push_back(i);
  }
  std::vector<const inplace::PodFacts*> facts(pods.size());
  for (size_t i = 0; i < pods.size(); ++i) facts[i] = &pods[i];
  inplace::SortUpdateOrder(spec.priority_strategy, spec.scatter_strategy, facts, &order);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return (pods[a].lifecycle_state == kStatePreparingUpdate) &&
           (pods[b].lifecycle_state != kStatePreparingUpdate);
  });
  if (static_cast<int>(order.size()) > diffs.update) order.resize(diffs.update);
  int not_ready = 0;
  for (const PodView& p : pods) {
    if (!p.available) ++not_ready;
  }
  size_t can = 0;
  for (size_t i : order) {
    if (pods[i].available) {
      if (not_ready >= diffs.update_max_unavailable) break;
      ++not_ready;
    }
    ++can;
  }
  order.resize(can);
  return order;
}

std::vector<int> SlowStartBatches(int n) {
  std::vector<int> out;
  for (int size = 1; n > 0; size *= 2) {
    out.push_back(std::min(size, n));
    n -= out.back();
  }
  return out;
}

std::string NewInstanceId(const std::function<bool(const std::string&)>& taken,
                          const std::function<size_t(size_t n)>& random) {
  static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  constexpr size_t kSize = sizeof(kAlphabet) - 1;
  while (true) {
    std::string id(5, ' ');
    for (char& c : id) c = kAlphabet[random(kSize) % kSize];
    if (!taken(id)) return id;
  }
}

StatusCounts CountStatus(const CloneSetSpec& spec, const ScaledNumbers& numbers,
                         const std::vector<PodView>& pods) {
  StatusCounts s;
  s.replicas = static_cast<int>(pods.size());
  for (const PodView& p : pods) {
    if (p.update_ready) ++s.ready;
    if (p.ready_long_enough) ++s.available;
    if (p.updated) {
      ++s.updated;
      if (p.update_ready) ++s.updated_ready;
      if (p.ready_long_enough) ++s.updated_available;
    }
  }
  s.expected_updated = std::max(spec.replicas - numbers.partition, 0);
  return s;
}

}  // namespace kruise::manager::cloneset
