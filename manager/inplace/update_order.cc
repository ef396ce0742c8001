#include "manager/inplace/update_order.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <utility>

#include "absl/strings/numbers.h"
#include "kube/object.h"

namespace kruise::manager::inplace {
namespace {
// A named namespace of its own: this file shares a unity-build unit with its siblings.
namespace order_impl {

using Json = nlohmann::json;

const Json& OrderMember(const Json& j, const char* key) {
  static const Json kNull;
  const Json* f = kube::Field(j, key);
  return f != nullptr ? *f : kNull;
}

int PhaseOrdinal(const std::string& phase) {
  if (phase == "Running") return 2;
  if (phase == "Unknown") return 1;
  return 0;  // Pending and anything else
}

// The int value an orderPriority key gives a pod: the label parsed as an integer, or the digits
// it ends with ("pod-12" -> 12); none: lowest.
int64_t OrderValue(const std::map<std::string, std::string>& labels, const std::string& key) {
  auto it = labels.find(key);
  if (it == labels.end()) return INT64_MIN;
  int64_t v = 0;
  if (absl::SimpleAtoi(it->second, &v)) return v;
  size_t start = it->second.size();
  while (start > 0 && std::isdigit(static_cast<unsigned char>(it->second[start - 1]))) --start;
  if (start < it->second.size() && absl::SimpleAtoi(it->second.substr(start), &v)) return v;
  return INT64_MIN;
}

}  // namespace order_impl
}  // namespace

PodFacts ReadPodFacts(const nlohmann::json& pod) {
  PodFacts f;
  f.name = kube::Name(pod);
  f.labels = kube::Labels(pod);
  f.scheduled = !kube::GetString(pod, {"spec", "nodeName"}).value_or("").empty();
  f.phase = kube::GetString(pod, {"status", "phase"}).value_or("");
  if (const nlohmann::json* conds = kube::FindPath(pod, {"status", "conditions"});
      conds != nullptr && conds->is_array()) {
    for (const nlohmann::json& c : *conds) {
      if (!c.is_object() || c.value("type", "") != "Ready") continue;
      f.ready = c.value("status", "") == "True";
      if (auto t = kube::ParseRfc3339(c.value("lastTransitionTime", "")); f.ready && t.ok()) {
        f.ready_since = *t;
      }
      break;
    }
  }
  f.created = kube::CreationTimestamp(pod).value_or(absl::InfinitePast());
  if (const nlohmann::json* statuses = kube::FindPath(pod, {"status", "containerStatuses"});
      statuses != nullptr && statuses->is_array()) {
    for (const nlohmann::json& c : *statuses) {
      f.restarts += static_cast<int>(kube::IntField(c, "restartCount", 0));
    }
  }
  if (auto cost = kube::Annotation(pod, "controller.kubernetes.io/pod-deletion-cost")) {
    int64_t c = 0;
    if (absl::SimpleAtoi(*cost, &c)) f.deletion_cost = c;
  }
  return f;
}

bool ActivePodLess(const PodFacts& a, const PodFacts& b, int rank_a, int rank_b,
                   bool with_cost_and_rank) {
  using order_impl::PhaseOrdinal;
  if (a.scheduled != b.scheduled) return !a.scheduled;
  if (PhaseOrdinal(a.phase) != PhaseOrdinal(b.phase)) {
    return PhaseOrdinal(a.phase) < PhaseOrdinal(b.phase);
  }
  if (a.ready != b.ready) return !a.ready;
  if (with_cost_and_rank) {
    if (a.deletion_cost != b.deletion_cost) return a.deletion_cost < b.deletion_cost;
    if (rank_a != rank_b) return rank_a > rank_b;
  }
  if (a.ready && b.ready && a.ready_since != b.ready_since) return a.ready_since > b.ready_since;
  if (a.restarts != b.restarts) return a.restarts > b.restarts;
  if (a.created != b.created) return a.created > b.created;
  return a.name < b.name;  // deterministic
}

void ApplyPriorityStrategy(const nlohmann::json& priority, const std::vector<const PodFacts*>& pods,
                           std::vector<size_t>* order) {
  using order_impl::OrderMember;
  if (!priority.is_object()) return;
  const nlohmann::json& weights = OrderMember(priority, "weightPriority");
  const nlohmann::json& orders = OrderMember(priority, "orderPriority");
  if (weights.is_array() && !weights.empty()) {
    std::vector<std::pair<int64_t, kube::LabelSelector>> terms;
    for (const nlohmann::json& w : weights) {
      auto sel = kube::LabelSelector::FromJson(OrderMember(w, "matchSelector"));
      if (!sel.ok()) continue;
      terms.emplace_back(kube::IntField(w, "weight", 0), *std::move(sel));
    }
    auto weight = [&](size_t i) {
      int64_t sum = 0;
      for (const auto& [w, sel] : terms) {
        if (sel.Matches(pods[i]->labels)) sum += w;
      }
      return sum;
    };
    std::stable_sort(order->begin(), order->end(),
                     [&](size_t a, size_t b) { return weight(a) > weight(b); });
  } else if (orders.is_array() && !orders.empty()) {
    std::vector<std::string> keys;
    for (const nlohmann::json& o : orders) keys.push_back(o.value("orderedKey", ""));
    std::stable_sort(order->begin(), order->end(), [&](size_t a, size_t b) {
      for (const std::string& k : keys) {
        int64_t va = order_impl::OrderValue(pods[a]->labels, k);
        int64_t vb = order_impl::OrderValue(pods[b]->labels, k);
        if (va != vb) return va > vb;
      }
      return false;
    });
  }
}

void ApplyScatterStrategy(const nlohmann::json& scatter, const std::vector<const PodFacts*>& pods,
                          std::vector<size_t>* order) {
  if (!scatter.is_array()) return;
  for (const nlohmann::json& term : scatter) {
    const std::string key = term.value("key", ""), value = term.value("value", "");
    std::vector<size_t> hit, rest;
    for (size_t i : *order) {
      auto it = pods[i]->labels.find(key);
      (it != pods[i]->labels.end() && it->second == value ? hit : rest).push_back(i);
    }
    if (hit.size() < 2 || rest.empty()) continue;
    // Place hit pod k at position round((k + 0.5) * n / hits) of the n slots.
    const size_t n = order->size();
    std::vector<size_t> out;
    out.reserve(n);
    size_t h = 0, r = 0;
    for (size_t pos = 0; pos < n; ++pos) {
      bool take_hit =
          h < hit.size() && (r >= rest.size() || 2 * pos * hit.size() >= (2 * h + 1) * n);
      out.push_back(take_hit ? hit[h++] : rest[r++]);
    }
    *order = std::move(out);
  }
}

void SortUpdateOrder(const nlohmann::json& priority, const nlohmann::json& scatter,
                     const std::vector<const PodFacts*>& pods, std::vector<size_t>* order) {
  std::sort(order->begin(), order->end(),
            [&](size_t a, size_t b) { return ActivePodLess(*pods[a], *pods[b]); });
  ApplyPriorityStrategy(priority, pods, order);
  ApplyScatterStrategy(scatter, pods, order);
}

absl::StatusOr<int> ScalePartition(const nlohmann::json& partition, int replicas) {
  auto scaled = kube::GetScaledValueFromIntOrPercent(partition, replicas, true);
  if (!scaled.ok()) return scaled.status();
  int n = *scaled;
  if (partition.is_string() && replicas > 1 && n >= replicas) {
    int pct = 0;
    const std::string text = partition.get<std::string>();
    if (absl::SimpleAtoi(text.substr(0, text.size() - 1), &pct) && pct < 100) {
      n = replicas - 1;  // a percent below 100% leaves a pod to update
    }
  }
  return std::clamp(n, 0, replicas);
}

}  // namespace kruise::manager::inplace
