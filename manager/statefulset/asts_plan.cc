#include "manager/statefulset/asts_plan.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "kube/object.h"

namespace kruise::manager::statefulset {
namespace {

constexpr char kRevisionLabel[] = "controller-revision-hash";
constexpr char kLifecycleLabel[] = "lifecycle.apps.kruise.io/state";
constexpr char kSpecifiedDeleteLabel[] = "apps.kruise.io/specified-delete";

bool AllDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isdigit(static_cast<unsigned char>(c));
  });
}

// A decimal that fits an int32, as Go's strconv.ParseInt(s, 10, 32).
bool ParseInt32(absl::string_view s, int* out) {
  int64_t v = 0;
  if (!AllDigits(s) || !absl::SimpleAtoi(s, &v) || v > std::numeric_limits<int32_t>::max()) {
    return false;
  }
  *out = static_cast<int>(v);
  return true;
}

bool LifecycleAllowsAvailable(const AstsPod& pod) {
  return pod.lifecycle_state.empty() || pod.lifecycle_state == "Normal";
}

bool RunningAndReady(const AstsPod& pod) { return pod.phase == "Running" && pod.ready; }

// One owned ordinal: its pod, or the pod that would be created there.
struct Slot {
  int ordinal = 0;
  const AstsPod* pod = nullptr;  // null: missing
  bool create_current = false;   // missing: created at the current revision
};

// The owned slots, ascending, with the revision a missing pod gets (OpenKruise decides it for
// every missing ordinal up front, each seeing the pods and the placeholders below it).
std::vector<Slot> BuildSlots(const AstsSpec& spec, const std::map<int, const AstsPod*>& by_ordinal,
                             const std::string& update_revision) {
  const std::vector<int> owned =
      OwnedOrdinals(spec.replicas, spec.ordinals_start, spec.reserve_ordinals);
  std::vector<Slot> slots;
  slots.reserve(owned.size());
  for (int ord : owned) {
    Slot s;
    s.ordinal = ord;
    if (auto it = by_ordinal.find(ord); it != by_ordinal.end()) s.pod = it->second;
    slots.push_back(s);
  }
  // Pods counted by the unordered rule: every existing owned pod, plus placeholders decided so far.
  int not_updated_existing = 0;
  for (const Slot& s : slots) {
    if (s.pod != nullptr && s.pod->revision != update_revision) ++not_updated_existing;
  }
  int not_updated_placeholders = 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    Slot& s = slots[i];
    if (s.pod != nullptr) continue;
    if (spec.on_delete) {
      s.create_current = false;
    } else if (!spec.unordered) {
      s.create_current = static_cast<int>(i) + 1 <= spec.partition;
    } else {
      s.create_current = not_updated_existing + not_updated_placeholders < spec.partition;
    }
    if (s.create_current) ++not_updated_placeholders;
  }
  return slots;
}

std::map<int, const AstsPod*> IndexByOrdinal(const std::vector<AstsPod>& pods) {
  std::map<int, const AstsPod*> by_ordinal;
  for (const AstsPod& p : pods) {
    if (p.ordinal >= 0) by_ordinal[p.ordinal] = &p;  // a later pod wins
  }
  return by_ordinal;
}

void NoteWait(absl::Duration wait, absl::Duration* recheck) {
  if (wait <= absl::ZeroDuration()) return;
  if (*recheck == absl::ZeroDuration() || wait < *recheck) *recheck = wait;
}

absl::StatusOr<int> ScaleToAtLeastOne(const Json& value, int replicas, absl::string_view field) {
  absl::StatusOr<int> v = kube::GetScaledValueFromIntOrPercent(value, replicas, /*round_up=*/false);
  if (!v.ok()) return Annotate(v.status(), field);
  return std::max(1, *v);
}

// spec.<path> as a non-negative integer, `def` when absent or null.
absl::StatusOr<int> NonNegativeInt(const Json& spec, std::initializer_list<absl::string_view> path,
                                   absl::string_view name, int def) {
  const Json* v = kube::FindPath(spec, path);
  if (v == nullptr || v->is_null()) return def;
  if (!v->is_number_integer()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": want an integer, got ", v->dump()));
  }
  const int64_t i = v->get<int64_t>();
  if (i < 0 || i > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", i, " is out of range (0 to 2147483647)"));
  }
  return static_cast<int>(i);
}

absl::StatusOr<std::string> OneOf(const Json& spec, std::initializer_list<absl::string_view> path,
                                  absl::string_view name,
                                  std::initializer_list<absl::string_view> allowed) {
  const Json* v = kube::FindPath(spec, path);
  if (v == nullptr || v->is_null()) return std::string(*allowed.begin());
  if (v->is_string()) {
    const std::string s = v->get<std::string>();
    if (s.empty()) return std::string(*allowed.begin());
    for (absl::string_view a : allowed) {
      if (s == a) return s;
    }
  }
  std::string want;
  for (absl::string_view a : allowed) absl::StrAppend(&want, want.empty() ? "" : ", ", a);
  return absl::InvalidArgumentError(absl::StrCat(name, ": ", v->dump(), " is not one of ", want));
}

}  // namespace

absl::StatusOr<std::set<int>> ParseReserveOrdinals(const Json& reserve_ordinals) {
  std::set<int> out;
  if (reserve_ordinals.is_null()) return out;
  if (!reserve_ordinals.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("reserveOrdinals: want a list, got ", reserve_ordinals.dump()));
  }
  for (size_t i = 0; i < reserve_ordinals.size(); ++i) {
    const Json& e = reserve_ordinals[i];
    const std::string where = absl::StrCat("reserveOrdinals[", i, "]: ");
    if (e.is_number_integer()) {
      const int64_t v = e.get<int64_t>();
      if (v < 0) return absl::InvalidArgumentError(absl::StrCat(where, v, " is negative"));
      if (v > std::numeric_limits<int32_t>::max()) {
        return absl::InvalidArgumentError(absl::StrCat(where, v, " is out of range"));
      }
      out.insert(static_cast<int>(v));
      continue;
    }
    if (!e.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "want an integer or a range \"a-b\", got ", e.dump()));
    }
    const std::string s = e.get<std::string>();
    std::vector<absl::string_view> ends = absl::StrSplit(s, '-');
    int lo = 0;
    int hi = 0;
    if (ends.size() != 2 || !ParseInt32(ends[0], &lo) || !ParseInt32(ends[1], &hi)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "\"", s, "\" is not a range \"a-b\" of two non-negative integers"));
    }
    if (lo > hi) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "range \"", s, "\" starts after it ends"));
    }
    if (static_cast<int64_t>(hi) - lo + 1 > kMaxReserveRange) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "range \"", s, "\" names more than ", kMaxReserveRange, " ordinals"));
    }
    for (int64_t o = lo; o <= hi; ++o) out.insert(static_cast<int>(o));
  }
  return out;
}

std::vector<int> OwnedOrdinals(int replicas, int start, const std::set<int>& reserved) {
  std::vector<int> owned;
  if (replicas <= 0) return owned;
  owned.reserve(static_cast<size_t>(replicas));
  for (int64_t ord = start;
       static_cast<int>(owned.size()) < replicas && ord <= std::numeric_limits<int32_t>::max();
       ++ord) {
    if (reserved.count(static_cast<int>(ord)) == 0) owned.push_back(static_cast<int>(ord));
  }
  return owned;
}

int OrdinalOf(absl::string_view set_name, absl::string_view pod_name) {
  if (pod_name.size() <= set_name.size() + 1 || !absl::StartsWith(pod_name, set_name) ||
      pod_name[set_name.size()] != '-') {
    return -1;
  }
  int ord = -1;
  return ParseInt32(pod_name.substr(set_name.size() + 1), &ord) ? ord : -1;
}

absl::StatusOr<AstsSpec> ParseAstsSpec(const Json& statefulset) {
  static const Json kEmpty = Json::object();
  const Json* spec_ptr = kube::Field(statefulset, "spec");
  const Json& spec = spec_ptr != nullptr ? *spec_ptr : kEmpty;
  if (!spec.is_object()) return absl::InvalidArgumentError("spec: want an object");
  AstsSpec out;
  ASSIGN_OR_RETURN(out.replicas, NonNegativeInt(spec, {"replicas"}, "spec.replicas", 1));
  ASSIGN_OR_RETURN(out.ordinals_start,
                   NonNegativeInt(spec, {"ordinals", "start"}, "spec.ordinals.start", 0));
  if (const Json* r = kube::Field(spec, "reserveOrdinals")) {
    absl::StatusOr<std::set<int>> reserved = ParseReserveOrdinals(*r);
    if (!reserved.ok()) return Annotate(reserved.status(), "spec");
    out.reserve_ordinals = *std::move(reserved);
  }
  ASSIGN_OR_RETURN(std::string policy,
                   OneOf(spec, {"podManagementPolicy"}, "spec.podManagementPolicy",
                         {"OrderedReady", "Parallel"}));
  out.parallel = policy == "Parallel";
  if (const Json* m = kube::FindPath(spec, {"scaleStrategy", "maxUnavailable"})) {
    out.scale_max_unavailable = *m;
  }
  ASSIGN_OR_RETURN(std::string type,
                   OneOf(spec, {"updateStrategy", "type"}, "spec.updateStrategy.type",
                         {"RollingUpdate", "OnDelete"}));
  out.on_delete = type == "OnDelete";
  ASSIGN_OR_RETURN(out.partition,
                   NonNegativeInt(spec, {"updateStrategy", "rollingUpdate", "partition"},
                                  "spec.updateStrategy.rollingUpdate.partition", 0));
  if (const Json* m = kube::FindPath(spec, {"updateStrategy", "rollingUpdate", "maxUnavailable"});
      m != nullptr && !m->is_null()) {
    out.max_unavailable = *m;
  }
  ASSIGN_OR_RETURN(out.pod_update_policy,
                   OneOf(spec, {"updateStrategy", "rollingUpdate", "podUpdatePolicy"},
                         "spec.updateStrategy.rollingUpdate.podUpdatePolicy",
                         {"ReCreate", "InPlaceIfPossible", "InPlaceOnly"}));
  if (const Json* p = kube::FindPath(spec, {"updateStrategy", "rollingUpdate", "paused"});
      p != nullptr && !p->is_null()) {
    if (!p->is_boolean()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "spec.updateStrategy.rollingUpdate.paused: want a boolean, got ", p->dump()));
    }
    out.paused = p->get<bool>();
  }
  if (const Json* u = kube::FindPath(spec, {"updateStrategy", "rollingUpdate", "unorderedUpdate"});
      u != nullptr && !u->is_null()) {
    if (!u->is_object()) {
      return absl::InvalidArgumentError(
          "spec.updateStrategy.rollingUpdate.unorderedUpdate: want an object");
    }
    out.unordered = true;
    if (const Json* ps = kube::Field(*u, "priorityStrategy")) out.priority_strategy = *ps;
  }
  ASSIGN_OR_RETURN(out.min_ready_seconds,
                   NonNegativeInt(spec, {"updateStrategy", "rollingUpdate", "minReadySeconds"},
                                  "spec.updateStrategy.rollingUpdate.minReadySeconds", 0));
  return out;
}

absl::StatusOr<ScaledNumbers> ScaleNumbers(const AstsSpec& spec) {
  ScaledNumbers n;
  ASSIGN_OR_RETURN(n.max_unavailable,
                   ScaleToAtLeastOne(spec.max_unavailable, spec.replicas,
                                     "spec.updateStrategy.rollingUpdate.maxUnavailable"));
  if (!spec.scale_max_unavailable.is_null()) {
    ASSIGN_OR_RETURN(n.scale_max_unavailable,
                     ScaleToAtLeastOne(spec.scale_max_unavailable, spec.replicas,
                                       "spec.scaleStrategy.maxUnavailable"));
  }
  return n;
}

absl::StatusOr<AstsPod> ViewPod(const Json& pod, absl::string_view set_name) {
  AstsPod v;
  try {
    static_cast<inplace::PodFacts&>(v) = inplace::ReadPodFacts(pod);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("pod ", kube::Name(pod), ": ", e.what()));
  }
  v.ordinal = OrdinalOf(set_name, v.name);
  if (auto it = v.labels.find(kRevisionLabel); it != v.labels.end()) v.revision = it->second;
  if (auto it = v.labels.find(kLifecycleLabel); it != v.labels.end()) {
    v.lifecycle_state = it->second;
  }
  v.specified_delete = v.labels.count(kSpecifiedDeleteLabel) > 0;
  v.terminating = kube::DeletionTimestamp(pod).has_value();
  return v;
}

bool IsHealthy(const AstsPod& pod) {
  return LifecycleAllowsAvailable(pod) && RunningAndReady(pod) && !pod.terminating;
}

bool IsAvailable(const AstsPod& pod, int min_ready_seconds, absl::Time now, absl::Duration* wait) {
  if (wait != nullptr) *wait = absl::ZeroDuration();
  if (!LifecycleAllowsAvailable(pod) || !RunningAndReady(pod)) return false;
  if (min_ready_seconds <= 0) return true;
  const absl::Duration min_ready = absl::Seconds(min_ready_seconds);
  if (pod.ready_since == absl::InfinitePast()) {
    if (wait != nullptr) *wait = min_ready;
    return false;
  }
  const absl::Duration left = pod.ready_since + min_ready - now;
  if (left > absl::ZeroDuration()) {
    if (wait != nullptr) *wait = left;
    return false;
  }
  return true;
}

absl::StatusOr<ScalePlan> PlanScale(const AstsSpec& spec, const std::vector<AstsPod>& pods,
                                    const std::string& update_revision, absl::Time now) {
  ASSIGN_OR_RETURN(ScaledNumbers numbers, ScaleNumbers(spec));
  const std::map<int, const AstsPod*> by_ordinal = IndexByOrdinal(pods);
  const std::vector<Slot> slots = BuildSlots(spec, by_ordinal, update_revision);
  const bool ordered = !spec.parallel;
  // Only Parallel reads the scale budget: OrderedReady stops at the first unavailable pod anyway.
  const bool limited = spec.parallel && numbers.scale_max_unavailable.has_value();
  int budget = limited ? *numbers.scale_max_unavailable : 0;
  auto spend = [&]() { return limited && --budget <= 0; };

  ScalePlan plan;
  std::set<int> owned;
  int first_unhealthy = std::numeric_limits<int>::max();
  for (const Slot& s : slots) {
    owned.insert(s.ordinal);
    if (s.pod == nullptr || !IsHealthy(*s.pod))
      first_unhealthy = std::min(first_unhealthy, s.ordinal);
  }
  std::vector<const AstsPod*> condemned;
  for (const auto& [ord, pod] : by_ordinal) {
    if (owned.count(ord) > 0) continue;
    condemned.push_back(pod);
    if (!IsHealthy(*pod)) first_unhealthy = std::min(first_unhealthy, ord);
  }
  std::sort(condemned.begin(), condemned.end(),
            [](const AstsPod* a, const AstsPod* b) { return a->ordinal > b->ordinal; });

  for (const Slot& s : slots) {
    const AstsPod* pod = s.pod;
    if (pod != nullptr && (pod->phase == "Failed" || pod->phase == "Succeeded")) {
      if (!pod->terminating) plan.remove.push_back(s.ordinal);
      plan.round_ends = true;
      plan.waiting =
          absl::StrCat("pod ", pod->name, " is ", pod->phase, "; it is replaced once it is gone");
      return plan;
    }
    if (pod == nullptr) {
      plan.create.push_back({s.ordinal, s.create_current});
      if (ordered) {
        plan.round_ends = true;
        plan.waiting = absl::StrCat("created ordinal ", s.ordinal, "; waiting for it");
        return plan;
      }
      if (spend()) {
        plan.waiting = "scaleStrategy.maxUnavailable reached";
        break;
      }
      continue;
    }
    if (pod->terminating) {
      if (ordered) {
        plan.round_ends = true;
        plan.waiting = absl::StrCat("waiting for pod ", pod->name, " to terminate");
        return plan;
      }
      if (spend()) {
        plan.waiting = "scaleStrategy.maxUnavailable reached";
        break;
      }
      // As OpenKruise, a terminating pod goes on to the availability check (and may count twice).
    }
    if (ordered || limited) {
      absl::Duration wait;
      if (!IsAvailable(*pod, spec.min_ready_seconds, now, &wait)) {
        NoteWait(wait, &plan.recheck_after);
        if (ordered && (pod->lifecycle_state == "PreparingUpdate" ||
                        pod->lifecycle_state == "PreparingDelete")) {
          // Held by a lifecycle hook for an update or delete only the update step carries out
          // once the hook goes: stop creating, but let the round go on to that step.
          plan.waiting = absl::StrCat("pod ", pod->name, " is ", pod->lifecycle_state,
                                      " (a lifecycle hook holds it)");
          break;
        }
        if (ordered) {
          plan.round_ends = true;
          plan.waiting = absl::StrCat("waiting for pod ", pod->name, " to be available");
          return plan;
        }
        if (spend()) {
          plan.waiting = "scaleStrategy.maxUnavailable reached";
          break;
        }
      }
    }
  }

  for (const AstsPod* pod : condemned) {
    if (!ordered) {
      if (!pod->terminating) plan.remove.push_back(pod->ordinal);
      continue;
    }
    plan.round_ends = true;
    if (pod->terminating) {
      plan.waiting = absl::StrCat("waiting for pod ", pod->name, " to terminate (scale down)");
      return plan;
    }
    absl::Duration wait;
    const bool available = IsAvailable(*pod, spec.min_ready_seconds, now, &wait);
    if (!available && pod->ordinal != first_unhealthy) {
      NoteWait(wait, &plan.recheck_after);
      plan.waiting = absl::StrCat("waiting for ordinal ", first_unhealthy,
                                  " to be available before scaling down");
      return plan;
    }
    plan.remove.push_back(pod->ordinal);
    plan.waiting = absl::StrCat("deleted pod ", pod->name, " (scale down)");
    return plan;
  }
  return plan;
}

absl::StatusOr<UpdatePlan> PlanUpdate(const AstsSpec& spec, const std::vector<AstsPod>& pods,
                                      const std::string& update_revision, const ScalePlan& scale,
                                      absl::Time now) {
  UpdatePlan plan;
  if (scale.round_ends || spec.on_delete || spec.paused) return plan;
  ASSIGN_OR_RETURN(ScaledNumbers numbers, ScaleNumbers(spec));
  const int max_unavailable = numbers.max_unavailable;
  const std::map<int, const AstsPod*> by_ordinal = IndexByOrdinal(pods);
  const std::vector<Slot> slots = BuildSlots(spec, by_ordinal, update_revision);

  std::set<int> unavailable;
  for (const Slot& s : slots) {
    const AstsPod* pod = s.pod;
    if (pod == nullptr || !IsHealthy(*pod) || pod->update_incomplete) {
      unavailable.insert(s.ordinal);
      continue;
    }
    absl::Duration wait;
    if (!IsAvailable(*pod, spec.min_ready_seconds, now, &wait)) {
      NoteWait(wait, &plan.recheck_after);
      unavailable.insert(s.ordinal);
    }
  }
  auto blocked = [&](int ord) {
    return static_cast<int>(unavailable.size()) >= max_unavailable && unavailable.count(ord) == 0;
  };

  std::set<int> specified;
  for (auto it = slots.rbegin(); it != slots.rend(); ++it) {
    const AstsPod* pod = it->pod;
    if (pod == nullptr || !pod->specified_delete || pod->terminating) continue;
    if (blocked(it->ordinal)) continue;
    specified.insert(it->ordinal);
    plan.specified_delete.push_back(it->ordinal);
    unavailable.insert(it->ordinal);
  }

  // The update order, as indices into `slots`.
  const int max_update = spec.replicas - spec.partition;
  std::vector<size_t> order;
  if (max_update > 0) {
    if (!spec.unordered) {
      for (size_t i = slots.size(); i-- > 0 && static_cast<int>(order.size()) < max_update;) {
        if (static_cast<int>(i) >= spec.partition) order.push_back(i);
      }
    } else {
      std::vector<size_t> done;
      std::vector<size_t> waiting;
      for (size_t i = slots.size(); i-- > 0;) {
        const Slot& s = slots[i];
        const bool updated = s.pod != nullptr
                                 ? (s.pod->terminating || s.pod->revision == update_revision)
                                 : !s.create_current;
        (updated ? done : waiting).push_back(i);
      }
      if (!spec.priority_strategy.is_null()) {
        static const inplace::PodFacts kNoFacts;
        std::vector<const inplace::PodFacts*> facts;
        facts.reserve(slots.size());
        for (const Slot& s : slots) facts.push_back(s.pod != nullptr ? s.pod : &kNoFacts);
        try {
          inplace::ApplyPriorityStrategy(spec.priority_strategy, facts, &waiting);
        } catch (const nlohmann::json::exception& e) {
          return absl::InvalidArgumentError(absl::StrCat(
              "spec.updateStrategy.rollingUpdate.unorderedUpdate.priorityStrategy: ", e.what()));
        }
      }
      order = std::move(done);
      order.insert(order.end(), waiting.begin(), waiting.end());
      if (static_cast<int>(order.size()) > max_update) order.resize(max_update);
    }
  }

  for (size_t i : order) {
    const Slot& s = slots[i];
    // A missing pod is created at the revision its place needs; there is nothing to update.
    if (s.pod == nullptr || s.pod->revision == update_revision) continue;
    if (blocked(s.ordinal)) break;
    if (specified.count(s.ordinal) > 0 || s.pod->terminating) continue;
    plan.update.push_back(s.ordinal);
    unavailable.insert(s.ordinal);
  }
  plan.unavailable.assign(unavailable.begin(), unavailable.end());
  return plan;
}

// ---- Volume claims ---------------------------------------------------------------------------

std::optional<long double> ParseQuantity(absl::string_view q) {
  q = absl::StripAsciiWhitespace(q);
  if (q.empty()) return std::nullopt;
  // The number: optional sign, digits with at most one '.', then a suffix.
  size_t i = 0;
  if (q[i] == '+' || q[i] == '-') ++i;
  const size_t digits_from = i;
  bool dot = false;
  while (i < q.size() && (absl::ascii_isdigit(q[i]) || (q[i] == '.' && !dot))) {
    dot |= q[i] == '.';
    ++i;
  }
  if (i == digits_from || (i == digits_from + 1 && dot)) return std::nullopt;
  double number = 0;
  if (!absl::SimpleAtod(q.substr(0, i), &number)) return std::nullopt;
  const absl::string_view suffix = q.substr(i);
  static const std::map<std::string, long double> kSuffixes = {{"", 1},
                                                               {"m", 1e-3L},
                                                               {"k", 1e3L},
                                                               {"M", 1e6L},
                                                               {"G", 1e9L},
                                                               {"T", 1e12L},
                                                               {"P", 1e15L},
                                                               {"E", 1e18L},
                                                               {"Ki", 1024.0L},
                                                               {"Mi", 1048576.0L},
                                                               {"Gi", 1073741824.0L},
                                                               {"Ti", 1099511627776.0L},
                                                               {"Pi", 1125899906842624.0L},
                                                               {"Ei", 1152921504606846976.0L}};
  if (auto it = kSuffixes.find(std::string(suffix)); it != kSuffixes.end()) {
    return static_cast<long double>(number) * it->second;
  }
  if (suffix.size() >= 2 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    int exp = 0;
    if (!absl::SimpleAtoi(suffix.substr(1), &exp) || exp > 30 || exp < -30) return std::nullopt;
    long double v = number;
    for (int k = 0; k < (exp < 0 ? -exp : exp); ++k) v = exp < 0 ? v / 10 : v * 10;
    return v;
  }
  return std::nullopt;
}

namespace {

std::optional<long double> StorageAt(const Json& obj,
                                     std::initializer_list<absl::string_view> path) {
  const Json* v = kube::FindPath(obj, path);
  if (v == nullptr) return std::nullopt;
  if (v->is_number()) return v->get<long double>();
  if (!v->is_string()) return std::nullopt;
  return ParseQuantity(v->get<std::string>());
}

}  // namespace

ClaimCheck CompareClaim(const Json& claim, const Json& vct) {
  ClaimCheck c;
  const auto claim_class = kube::GetString(claim, {"spec", "storageClassName"});
  const auto tmpl_class = kube::GetString(vct, {"spec", "storageClassName"});
  const Json* claim_modes = kube::FindPath(claim, {"spec", "accessModes"});
  const Json* tmpl_modes = kube::FindPath(vct, {"spec", "accessModes"});
  const Json empty = Json::array();
  if ((claim_class.has_value() && tmpl_class.has_value() && *claim_class != *tmpl_class) ||
      (claim_modes != nullptr ? *claim_modes : empty) !=
          (tmpl_modes != nullptr ? *tmpl_modes : empty)) {
    c.other_diff = true;
    return c;
  }
  const auto want = StorageAt(vct, {"spec", "resources", "requests", "storage"});
  const auto have = StorageAt(claim, {"spec", "resources", "requests", "storage"});
  const auto capacity = StorageAt(claim, {"status", "capacity", "storage"});
  if (!want.has_value() || !have.has_value()) return c;
  c.compatible = *have >= *want;
  c.needs_expand = *have < *want;
  c.ready = c.compatible && capacity.has_value() && *capacity >= *have;
  bool resize_pending = false;
  if (const Json* conds = kube::FindPath(claim, {"status", "conditions"});
      conds != nullptr && conds->is_array()) {
    for (const Json& cond : *conds) {
      if (cond.is_object() && cond.value("type", "") == "FileSystemResizePending") {
        resize_pending = true;
      }
    }
  }
  c.resize_done = c.compatible && (c.ready || resize_pending);
  return c;
}

}  // namespace kruise::manager::statefulset
