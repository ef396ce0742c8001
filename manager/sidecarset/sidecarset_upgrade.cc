#include "manager/sidecarset/sidecarset_upgrade.h"

#include <algorithm>
#include <climits>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "kube/object.h"
#include "manager/inplace/inplace_update.h"
#include "manager/inplace/update_order.h"
#include "manager/sidecarset/sidecarset_admission.h"

namespace kruise::manager::sidecarset {
namespace {
// A named namespace of its own: this file shares a unity-build unit with its siblings.
namespace upgrade_impl {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;
using Entries = std::map<std::string, OrderedJson>;

const Json& Member(const Json& j, const char* key) {
  static const Json kNull;
  const Json* f = kube::Field(j, key);
  return f != nullptr ? *f : kNull;
}

absl::Status Invalid(const std::string& field, const char* want) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": must be ", want));
}

std::string Str(const Json& j, const char* key) { return kube::GetString(j, {key}).value_or(""); }

// A pod annotation holding a JSON object of set name -> entry; absent or empty reads as empty.
// `strings_too`: entries may also be strings (the older hash form, name -> hash).
absl::StatusOr<Entries> ReadEntries(const std::map<std::string, std::string>& annotations,
                                    const char* key, bool strings_too) {
  Entries out;
  auto it = annotations.find(key);
  if (it == annotations.end() || it->second.empty()) return out;
  OrderedJson parsed = OrderedJson::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pod annotation ", key, " is not a JSON object"));
  }
  for (auto e = parsed.begin(); e != parsed.end(); ++e) {
    if (!e.value().is_object() && !(strings_too && e.value().is_string())) {
      return absl::InvalidArgumentError(
          absl::StrCat("pod annotation ", key, ": the entry of ", e.key(), " is not ",
                       strings_too ? "an object or a string" : "an object"));
    }
    out[e.key()] = e.value();
  }
  return out;
}

std::string EntryHash(const OrderedJson& e) {
  if (e.is_string()) return e.get<std::string>();
  auto h = e.find("hash");
  return h != e.end() && h->is_string() ? h->get<std::string>() : std::string();
}

std::string Dump(const Entries& entries) {
  OrderedJson out = OrderedJson::object();
  for (const auto& [k, v] : entries) out[k] = v;
  return out.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

std::string ContainerImage(const Json& pod, const std::string& name, bool* found = nullptr) {
  if (found != nullptr) *found = false;
  const Json* cs = kube::FindPath(pod, {"spec", "containers"});
  if (cs == nullptr || !cs->is_array()) return "";
  for (const Json& c : *cs) {
    if (Str(c, "name") != name) continue;
    if (found != nullptr) *found = true;
    return Str(c, "image");
  }
  return "";
}

bool Active(const Json& pod) {
  const std::string phase = kube::GetString(pod, {"status", "phase"}).value_or("");
  return !kube::IsBeingDeleted(pod) && phase != "Succeeded" && phase != "Failed";
}

int ContainerIndex(const Json& pod, const std::string& name) {
  const Json* cs = kube::FindPath(pod, {"spec", "containers"});
  if (cs == nullptr || !cs->is_array()) return -1;
  for (size_t i = 0; i < cs->size(); ++i) {
    if (Str((*cs)[i], "name") == name) return static_cast<int>(i);
  }
  return -1;
}

// Ready in the pod's container statuses.
bool ContainerReady(const Json& pod, const std::string& name) {
  const Json* ss = kube::FindPath(pod, {"status", "containerStatuses"});
  if (ss == nullptr || !ss->is_array()) return false;
  for (const Json& s : *ss) {
    if (Str(s, "name") != name) continue;
    const Json& r = Member(s, "ready");
    return r.is_boolean() && r.get<bool>();
  }
  return false;
}

// kruise.io/sidecarset-working-hotupgrade-container: sidecar name -> working container.
absl::StatusOr<std::map<std::string, std::string>> ReadWorking(
    const std::map<std::string, std::string>& annotations) {
  std::map<std::string, std::string> out;
  auto it = annotations.find(kSidecarSetWorkingHotUpgradeContainerAnnotation);
  if (it == annotations.end() || it->second.empty()) return out;
  Json parsed = Json::parse(it->second, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("pod annotation ",
                                                   kSidecarSetWorkingHotUpgradeContainerAnnotation,
                                                   " is not a JSON object"));
  }
  for (auto e = parsed.begin(); e != parsed.end(); ++e) {
    if (!e.value().is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("pod annotation ", kSidecarSetWorkingHotUpgradeContainerAnnotation,
                       ": the entry of ", e.key(), " is not a string"));
    }
    out[e.key()] = e.value().get<std::string>();
  }
  return out;
}

std::string VersionKey(const std::string& container) {
  return absl::StrCat(kSidecarSetVersionAnnotationPrefix, container);
}
std::string VersionAltKey(const std::string& container) {
  return absl::StrCat(kSidecarSetVersionAltAnnotationPrefix, container);
}

// A hot sidecar as a pod holds it.
struct HotPair {
  const SidecarSetUpgradeTarget::HotSidecar* sidecar = nullptr;
  std::string working, idle;  // container names
  int working_index = -1, idle_index = -1;
  std::string working_image, idle_image;
};

// The pairs the pod has both containers of; the names of those it lacks go to `missing`.
std::vector<HotPair> HotPairs(const SidecarSetUpgradeTarget& t, const Json& pod,
                              const std::map<std::string, std::string>& working,
                              std::vector<std::string>* missing) {
  std::vector<HotPair> out;
  for (const SidecarSetUpgradeTarget::HotSidecar& h : t.hot) {
    const std::string n1 = h.name + "-1", n2 = h.name + "-2";
    auto w = working.find(h.name);
    // OpenKruise's GetPodHotUpgradeContainers: <name>-1 only when the annotation says so.
    const bool first = w != working.end() && w->second == n1;
    HotPair p;
    p.sidecar = &h;
    p.working = first ? n1 : n2;
    p.idle = first ? n2 : n1;
    p.working_index = ContainerIndex(pod, p.working);
    p.idle_index = ContainerIndex(pod, p.idle);
    if (p.working_index < 0 || p.idle_index < 0) {
      if (missing != nullptr) {
        for (const std::string& n : {n1, n2}) {
          if (ContainerIndex(pod, n) < 0) missing->push_back(n);
        }
      }
      continue;
    }
    p.working_image = ContainerImage(pod, p.working);
    p.idle_image = ContainerImage(pod, p.idle);
    out.push_back(std::move(p));
  }
  return out;
}

// ClassifySidecarPod, plus the pod as the update order sees it. May throw nlohmann's
// exceptions (the in-place engine and inplace::ReadPodFacts read mistyped fields with value()).
SidecarPodInfo ClassifyOrThrow(const SidecarSetUpgradeTarget& t, const Json& pod,
                               inplace::PodFacts* view) {
  SidecarPodInfo info;
  auto malformed = [&](const absl::Status& s) {
    info.state = SidecarPodState::kMalformed;
    info.problem = std::string(s.message());
    return info;
  };
  if (!pod.is_object()) return malformed(absl::InvalidArgumentError("the pod is not an object"));
  if (!Active(pod)) return info;
  const std::map<std::string, std::string> annotations = kube::Annotations(pod);
  auto hashes = ReadEntries(annotations, kSidecarSetHashAnnotation, true);
  if (!hashes.ok()) return malformed(hashes.status());
  auto entry = hashes->find(t.name);
  if (entry == hashes->end()) return info;
  if (EntryHash(entry->second) == t.hash) {
    info.state = SidecarPodState::kUpdated;
  } else {
    auto without = ReadEntries(annotations, kSidecarSetHashWithoutImageAnnotation, true);
    if (!without.ok()) return malformed(without.status());
    auto w = without->find(t.name);
    info.state = w != without->end() && EntryHash(w->second) == t.hash_without_image
                     ? SidecarPodState::kUpgradable
                     : SidecarPodState::kNotUpgradable;
  }
  auto states = ReadEntries(annotations, kSidecarSetInPlaceUpdateStateAnnotation, false);
  if (!states.ok()) return malformed(states.status());
  if (auto s = states->find(t.name); s != states->end()) {
    auto state = inplace::ParseInPlaceUpdateState(
        s->second.dump(-1, ' ', false, OrderedJson::error_handler_t::replace));
    if (!state.ok()) {
      return malformed(Annotate(state.status(), kSidecarSetInPlaceUpdateStateAnnotation));
    }
    std::map<std::string, std::string> images;  // what the update patched, as the pod has it
    for (const auto& [name, last] : state->last_container_statuses) {
      images[name] = ContainerImage(pod, name);
    }
    info.upgrading = !inplace::InPlaceUpdateCompleted(pod, *state, images, &info.problem);
  }
  *view = inplace::ReadPodFacts(pod);
  if (!t.hot.empty()) {
    auto working = ReadWorking(annotations);
    if (!working.ok()) return malformed(working.status());
    std::set<std::string> idle;
    std::vector<std::string> busy;  // idle containers not on hotUpgradeEmptyImage
    for (const HotPair& p : HotPairs(t, pod, *working, nullptr)) {
      idle.insert(p.idle);
      if (p.idle_image != p.sidecar->empty_image) busy.push_back(p.idle);
    }
    if (!busy.empty()) {
      // OpenKruise's isHotUpgradingReady: Running and Ready, or every container but the idle
      // ones ready.
      bool ready = view->phase == "Running" && view->ready;
      if (!ready) {
        ready = true;
        const Json* ss = kube::FindPath(pod, {"status", "containerStatuses"});
        if (ss != nullptr && ss->is_array()) {
          for (const Json& s : *ss) {
            if (idle.count(Str(s, "name")) == 0 && !ContainerReady(pod, Str(s, "name"))) {
              ready = false;
            }
          }
        }
      }
      const std::string names = absl::StrJoin(busy, ", ");
      if (info.upgrading) {
        // Step 1's container has not restarted yet: info.problem says which.
      } else if (ready) {
        info.hot_reset = true;
        info.problem = absl::StrCat("hot upgrade: old container(s) ", names,
                                    " to go back to hotUpgradeEmptyImage");
      } else {
        info.problem = absl::StrCat(
            "hot upgrade: waiting for the upgraded container(s) to be "
            "ready before resetting ",
            names);
      }
      info.upgrading = true;
    }
  }
  info.ready = view->ready && !info.upgrading;
  view->ready = info.ready;
  return info;
}

SidecarPodInfo Classify(const SidecarSetUpgradeTarget& t, const Json& pod,
                        inplace::PodFacts* view) {
  try {
    return ClassifyOrThrow(t, pod, view);
  } catch (const nlohmann::json::exception& e) {
    SidecarPodInfo info;
    info.state = SidecarPodState::kMalformed;
    info.problem = absl::StrCat("the pod has a field of the wrong type: ", e.what());
    return info;
  }
}

// OpenKruise's parseUpdateScatterTerms: a term with value "*" stands for one term per value the
// pods have for its key; duplicates are dropped.
Json ExpandScatter(const Json& scatter, const std::vector<const Json*>& pods) {
  if (!scatter.is_array()) return scatter;
  Json out = Json::array();
  std::set<std::pair<std::string, std::string>> seen;
  auto add = [&](const std::string& k, const std::string& v) {
    if (seen.emplace(k, v).second) out.push_back({{"key", k}, {"value", v}});
  };
  for (const Json& term : scatter) {
    const std::string key = Str(term, "key"), value = Str(term, "value");
    if (value != "*") {
      add(key, value);
      continue;
    }
    for (const Json* p : pods) {
      if (auto v = kube::Label(*p, key)) add(key, *v);
    }
  }
  return out;
}

// What a pod patch needs first: an object whose spec.containers is a list, and its
// resourceVersion (the patch's `test`). Errors name the pod as `context` does.
absl::StatusOr<std::string> PatchGuard(const Json& pod, const std::string& context) {
  if (!pod.is_object()) return absl::InvalidArgumentError("the pod is not an object");
  std::string rv = kube::ResourceVersion(pod);
  if (rv.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(context, ": metadata.resourceVersion is required (the patch's guard)"));
  }
  const Json* containers = kube::FindPath(pod, {"spec", "containers"});
  if (containers == nullptr || !containers->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": spec.containers is not a list"));
  }
  return rv;
}

// The set's kruise.io/sidecarset-inplace-update-state entry for `update` of `pod` at `now`.
absl::StatusOr<OrderedJson> InPlaceStateEntry(const Json& pod,
                                              const inplace::InPlaceUpdateSpec& update,
                                              absl::Time now, const std::string& context) {
  try {  // the engine reads the container statuses with value(): a mistyped field throws
    return OrderedJson::parse(
        inplace::FormatInPlaceUpdateState(inplace::NewInPlaceUpdateState(pod, update, now)),
        nullptr, /*allow_exceptions=*/false);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(context, ": status.containerStatuses: ", e.what()));
  }
}

}  // namespace upgrade_impl
}  // namespace

absl::StatusOr<SidecarSetUpgradeTarget> ParseSidecarSetUpgradeTarget(const nlohmann::json& set) {
  using upgrade_impl::Invalid;
  using upgrade_impl::Member;
  if (!set.is_object()) return Invalid("SidecarSet", "an object");
  SidecarSetUpgradeTarget t;
  t.name = kube::Name(set);
  if (t.name.empty()) return Invalid("metadata.name", "a non-empty string");
  if (!Member(set, "spec").is_object()) return Invalid("spec", "an object");
  const nlohmann::json defaulted = DefaultSidecarSet(set);
  const nlohmann::json& spec = Member(defaulted, "spec");

  const nlohmann::json& containers = Member(spec, "containers");
  if (!containers.is_null() && !containers.is_array()) return Invalid("spec.containers", "a list");
  for (size_t i = 0; containers.is_array() && i < containers.size(); ++i) {
    const nlohmann::json& c = containers[i];
    const std::string field = absl::StrCat("spec.containers[", i, "]");
    const nlohmann::json& name = Member(c, "name");
    const nlohmann::json& image = Member(c, "image");
    if (!name.is_string() || name.get<std::string>().empty()) {
      return Invalid(field + ".name", "a non-empty string");
    }
    if (!image.is_string()) return Invalid(field + ".image", "a string");
    t.containers.push_back(name.get<std::string>());
    t.images[name.get<std::string>()] = image.get<std::string>();
    if (kube::GetString(c, {"upgradeStrategy", "upgradeType"}).value_or("") == "HotUpgrade") {
      const std::string empty =
          kube::GetString(c, {"upgradeStrategy", "hotUpgradeEmptyImage"}).value_or("");
      if (empty.empty()) {
        return Invalid(field + ".upgradeStrategy.hotUpgradeEmptyImage",
                       "a non-empty string for a HotUpgrade container");
      }
      t.hot.push_back({name.get<std::string>(), image.get<std::string>(), empty});
      t.hot_upgrade = true;
    }
  }

  const nlohmann::json& us = Member(spec, "updateStrategy");
  if (!us.is_null() && !us.is_object()) return Invalid("spec.updateStrategy", "an object");
  if (const nlohmann::json& type = Member(us, "type"); !type.is_null()) {
    if (!type.is_string()) return Invalid("spec.updateStrategy.type", "a string");
    t.not_update = type.get<std::string>() == "NotUpdate";
  }
  if (const nlohmann::json& paused = Member(us, "paused"); !paused.is_null()) {
    if (!paused.is_boolean()) return Invalid("spec.updateStrategy.paused", "a boolean");
    t.paused = paused.get<bool>();
  }
  for (auto [key, target] : {std::pair<const char*, nlohmann::json*>{"partition", &t.partition},
                             {"maxUnavailable", &t.max_unavailable}}) {
    const nlohmann::json& v = Member(us, key);
    if (v.is_null()) continue;
    const std::string field = absl::StrCat("spec.updateStrategy.", key);
    if (!v.is_number_integer() && !v.is_string()) return Invalid(field, "an integer or a percent");
    auto scaled = kube::GetScaledValueFromIntOrPercent(v, 100, true);
    if (!scaled.ok()) return Annotate(scaled.status(), field);
    if (*scaled < 0) return Invalid(field, "non-negative");
    *target = v;
  }
  if (const nlohmann::json& sel = Member(us, "selector"); !sel.is_null()) {
    auto parsed = kube::LabelSelector::FromJson(sel);
    if (!parsed.ok()) return Annotate(parsed.status(), "spec.updateStrategy.selector");
    t.selector = sel;
  }
  t.priority_strategy = Member(us, "priorityStrategy");
  if (!t.priority_strategy.is_null()) {
    const std::string field = "spec.updateStrategy.priorityStrategy";
    if (!t.priority_strategy.is_object()) return Invalid(field, "an object");
    const nlohmann::json& weights = Member(t.priority_strategy, "weightPriority");
    if (!weights.is_null() && !weights.is_array())
      return Invalid(field + ".weightPriority", "a list");
    for (size_t i = 0; weights.is_array() && i < weights.size(); ++i) {
      const std::string f = absl::StrCat(field, ".weightPriority[", i, "]");
      if (!Member(weights[i], "weight").is_number_integer())
        return Invalid(f + ".weight", "an integer");
      auto sel = kube::LabelSelector::FromJson(Member(weights[i], "matchSelector"));
      if (!sel.ok()) return Annotate(sel.status(), f + ".matchSelector");
    }
    const nlohmann::json& orders = Member(t.priority_strategy, "orderPriority");
    if (!orders.is_null() && !orders.is_array()) return Invalid(field + ".orderPriority", "a list");
    for (size_t i = 0; orders.is_array() && i < orders.size(); ++i) {
      if (!Member(orders[i], "orderedKey").is_string()) {
        return Invalid(absl::StrCat(field, ".orderPriority[", i, "].orderedKey"), "a string");
      }
    }
  }
  t.scatter_strategy = Member(us, "scatterStrategy");
  if (!t.scatter_strategy.is_null()) {
    if (!t.scatter_strategy.is_array()) {
      return Invalid("spec.updateStrategy.scatterStrategy", "a list");
    }
    for (const nlohmann::json& term : t.scatter_strategy) {
      if (!Member(term, "key").is_string() || !Member(term, "value").is_string()) {
        return Invalid("spec.updateStrategy.scatterStrategy", "a list of {key, value} strings");
      }
    }
  }
  t.hash = SidecarSetRecordedHash(set);
  t.hash_without_image = SidecarSetRecordedHashWithoutImage(set);
  t.latest_revision = kube::GetString(set, {"status", "latestRevision"}).value_or("");
  t.resource_version = kube::ResourceVersion(set);
  return t;
}

SidecarSetMatcher UpgradeMatcher(const nlohmann::json& sidecarset) {
  if (const nlohmann::json* s = kube::FindPath(sidecarset, {"spec", "injectionStrategy"});
      s == nullptr || !s->is_object() || !s->contains("paused")) {
    return SidecarSetMatcher(sidecarset);
  }
  nlohmann::json copy = sidecarset;
  copy["spec"]["injectionStrategy"].erase("paused");
  return SidecarSetMatcher(copy);
}

SidecarPodInfo ClassifySidecarPod(const SidecarSetUpgradeTarget& target,
                                  const nlohmann::json& pod) {
  inplace::PodFacts view;
  return upgrade_impl::Classify(target, pod, &view);
}

absl::StatusOr<SidecarSetUpgradePlan> PlanSidecarSetUpgrade(
    const SidecarSetUpgradeTarget& target, const std::vector<const nlohmann::json*>& pods) {
  SidecarSetUpgradePlan plan;
  plan.pods.resize(pods.size());
  std::vector<inplace::PodFacts> views(pods.size());
  std::vector<const nlohmann::json*> matched;
  for (size_t i = 0; i < pods.size(); ++i) {
    SidecarPodInfo& info = plan.pods[i] = upgrade_impl::Classify(target, *pods[i], &views[i]);
    if (info.state == SidecarPodState::kNotMatched || info.state == SidecarPodState::kMalformed) {
      continue;
    }
    matched.push_back(pods[i]);
    const bool updated = info.state == SidecarPodState::kUpdated;
    plan.updated_pods += updated;
    plan.ready_pods += info.ready;
    plan.updated_ready_pods += updated && info.ready;
    if (info.state == SidecarPodState::kNotUpgradable) plan.not_upgradable.push_back(i);
  }
  plan.matched_pods = static_cast<int>(matched.size());

  const nlohmann::json scatter = upgrade_impl::ExpandScatter(target.scatter_strategy, matched);
  auto partition = inplace::ScalePartition(target.partition, plan.matched_pods);
  if (!partition.ok()) return Annotate(partition.status(), "spec.updateStrategy.partition");
  // maxUnavailable rounds up, as OpenKruise's SidecarSet does.
  auto max_unavailable =
      kube::GetScaledValueFromIntOrPercent(target.max_unavailable, plan.matched_pods, true);
  if (!max_unavailable.ok()) {
    return Annotate(max_unavailable.status(), "spec.updateStrategy.maxUnavailable");
  }
  const int max_unavailable_pods = std::max(*max_unavailable, 0);

  if (target.paused) {
    plan.held = "spec.updateStrategy.paused is true";
  } else if (target.not_update) {
    plan.held = "spec.updateStrategy.type is NotUpdate";
  }
  if (!plan.held.empty()) return plan;

  std::optional<kube::LabelSelector> selector;
  if (!target.selector.is_null()) {
    ASSIGN_OR_RETURN(selector, kube::LabelSelector::FromJson(target.selector));
  }
  for (size_t i : plan.not_upgradable) {
    if (!selector.has_value() || selector->Matches(views[i].labels)) {
      plan.mark_not_upgradable.push_back(i);
    }
  }
  // Hot upgrades to finish come first; that round picks no new pod (OpenKruise).
  for (size_t i = 0; i < pods.size(); ++i) {
    if (plan.pods[i].hot_reset) plan.reset.push_back(i);
  }
  if (!plan.reset.empty()) return plan;
  std::vector<size_t> candidates;  // into pods
  std::vector<const inplace::PodFacts*> candidate_views;
  for (size_t i = 0; i < pods.size(); ++i) {
    const SidecarPodInfo& info = plan.pods[i];
    if (info.state != SidecarPodState::kUpgradable || info.upgrading) continue;
    if (selector.has_value() && !selector->Matches(views[i].labels)) continue;
    candidates.push_back(i);
    candidate_views.push_back(&views[i]);
  }
  std::vector<size_t> order(candidates.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  try {
    inplace::SortUpdateOrder(target.priority_strategy, scatter, candidate_views, &order);
  } catch (const nlohmann::json::exception& e) {
    // A hand-made target with a strategy ParseSidecarSetUpgradeTarget would have refused.
    return absl::InvalidArgumentError(
        absl::StrCat("spec.updateStrategy: priorityStrategy or scatterStrategy: ", e.what()));
  }

  const int wanted = static_cast<int>(order.size()) - *partition;
  if (wanted <= 0) return plan;
  order.resize(wanted);
  int unavailable = 0;
  for (const SidecarPodInfo& info : plan.pods) {
    if (info.state == SidecarPodState::kUpdated && !info.ready) ++unavailable;
  }
  for (size_t k : order) {
    const size_t i = candidates[k];
    if (plan.pods[i].ready) {
      if (unavailable >= max_unavailable_pods) break;
      ++unavailable;
    }
    plan.upgrade.push_back(i);
  }
  return plan;
}

absl::StatusOr<SidecarPodPatch> SidecarPodUpgradePatch(const SidecarSetUpgradeTarget& target,
                                                       const nlohmann::json& pod, absl::Time now) {
  using upgrade_impl::Entries;
  using upgrade_impl::OrderedJson;
  const std::string context = absl::StrCat("pod ", kube::Name(pod));
  absl::StatusOr<std::string> rv = upgrade_impl::PatchGuard(pod, context);
  if (!rv.ok()) return rv.status();
  const std::map<std::string, std::string> annotations = kube::Annotations(pod);
  auto hashes = upgrade_impl::ReadEntries(annotations, kSidecarSetHashAnnotation, true);
  if (!hashes.ok()) return Annotate(hashes.status(), context);
  auto without =
      upgrade_impl::ReadEntries(annotations, kSidecarSetHashWithoutImageAnnotation, true);
  if (!without.ok()) return Annotate(without.status(), context);
  auto states =
      upgrade_impl::ReadEntries(annotations, kSidecarSetInPlaceUpdateStateAnnotation, false);
  if (!states.ok()) return Annotate(states.status(), context);
  std::map<std::string, std::string> working;
  if (!target.hot.empty()) {
    auto w = upgrade_impl::ReadWorking(annotations);
    if (!w.ok()) return Annotate(w.status(), context);
    working = std::move(*w);
  }

  auto entry = hashes->find(target.name);
  if (entry == hashes->end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        context, " has no ", kSidecarSetHashAnnotation, " entry for SidecarSet ", target.name));
  }
  SidecarPodPatch patch;
  if (upgrade_impl::EntryHash(entry->second) == target.hash) return patch;  // already updated
  auto w = without->find(target.name);
  if (w == without->end() || upgrade_impl::EntryHash(w->second) != target.hash_without_image) {
    return absl::FailedPreconditionError(
        absl::StrCat(context, " is not upgradable: SidecarSet ", target.name,
                     " changed more than images since it was injected (applies to new pods only)"));
  }
  std::set<std::string> hot_names;
  for (const auto& h : target.hot) hot_names.insert(h.name);
  for (const std::string& c : target.containers) {
    if (hot_names.count(c) > 0) continue;
    bool found = false;
    upgrade_impl::ContainerImage(pod, c, &found);
    if (!found) patch.missing.push_back(c);
  }
  std::vector<upgrade_impl::HotPair> pairs;
  if (!target.hot.empty()) pairs = upgrade_impl::HotPairs(target, pod, working, &patch.missing);
  if (!patch.missing.empty()) return patch;

  patch.ops.push_back({{"op", "test"}, {"path", "/metadata/resourceVersion"}, {"value", *rv}});
  inplace::InPlaceUpdateSpec update;
  update.revision = target.hash;
  const nlohmann::json* containers =
      kube::FindPath(pod, {"spec", "containers"});  // PatchGuard: a list
  for (size_t i = 0; i < containers->size(); ++i) {
    const nlohmann::json& c = (*containers)[i];
    auto it = target.images.find(upgrade_impl::Str(c, "name"));
    if (it == target.images.end() || hot_names.count(it->first) > 0 ||
        upgrade_impl::Str(c, "image") == it->second) {
      continue;
    }
    patch.ops.push_back({{"op", "replace"},
                         {"path", absl::StrCat("/spec/containers/", i, "/image")},
                         {"value", it->second}});
    patch.containers.push_back(it->first);
    update.container_images[it->first] = it->second;
  }
  // Hot sidecars, step 1: the new image goes to the idle container, which becomes the working one.
  std::map<std::string, std::string> version_ops;  // annotation -> value
  bool working_changed = false;
  for (const upgrade_impl::HotPair& p : pairs) {
    const auto& h = *p.sidecar;
    // OpenKruise's findContainerToHotUpgrade: the one on the empty image (-1 first), else the
    // one not ready while the other is, else the idle one.
    const std::string n1 = h.name + "-1";
    const std::string& image1 = p.working == n1 ? p.working_image : p.idle_image;
    const std::string& image2 = p.working == n1 ? p.idle_image : p.working_image;
    const std::string n2 = h.name + "-2";
    std::string pick;
    if (image1 == h.empty_image) {
      pick = n1;
    } else if (image2 == h.empty_image) {
      pick = n2;
    } else {
      const bool r1 = upgrade_impl::ContainerReady(pod, n1),
                 r2 = upgrade_impl::ContainerReady(pod, n2);
      pick = r1 && !r2 ? n2 : !r1 && r2 ? n1 : p.idle;
    }
    const std::string old = pick == n1 ? n2 : n1;
    if (upgrade_impl::ContainerImage(pod, old) == h.image) continue;  // already runs it
    const int index = upgrade_impl::ContainerIndex(pod, pick);
    patch.ops.push_back({{"op", "replace"},
                         {"path", absl::StrCat("/spec/containers/", index, "/image")},
                         {"value", h.image}});
    patch.containers.push_back(pick);
    update.container_images[pick] = h.image;
    working_changed |= working[h.name] != pick;
    working[h.name] = pick;
    auto old_version = annotations.find(upgrade_impl::VersionKey(old));
    version_ops[upgrade_impl::VersionKey(pick)] = target.resource_version;
    version_ops[upgrade_impl::VersionAltKey(pick)] =
        old_version == annotations.end() ? "" : old_version->second;
    version_ops[upgrade_impl::VersionAltKey(old)] = target.resource_version;
  }

  const std::string timestamp = kube::FormatRfc3339(now);
  std::vector<std::string> sidecar_list = target.containers;
  std::sort(sidecar_list.begin(), sidecar_list.end());
  auto refresh = [&](Entries* entries, const std::string& hash, const std::string* revision) {
    OrderedJson& e = (*entries)[target.name];
    if (!e.is_object()) {  // absent, or the older name -> hash form
      e = OrderedJson::object();
      e["updateTimestamp"] = nullptr;
      e["hash"] = nullptr;
      e["sidecarSetName"] = target.name;
      e["sidecarList"] = sidecar_list;
    }
    e["updateTimestamp"] = timestamp;
    e["hash"] = hash;
    if (revision != nullptr && !revision->empty()) e["controllerRevision"] = *revision;
  };
  refresh(&*hashes, target.hash, &target.latest_revision);
  refresh(&*without, target.hash_without_image, nullptr);
  const nlohmann::json::json_pointer base("/metadata/annotations");
  auto set_annotation = [&](const char* key, const Entries& entries) {
    patch.ops.push_back({{"op", "add"},
                         {"path", (base / key).to_string()},
                         {"value", upgrade_impl::Dump(entries)}});
  };
  set_annotation(kSidecarSetHashAnnotation, *hashes);
  set_annotation(kSidecarSetHashWithoutImageAnnotation, *without);
  if (working_changed) {
    nlohmann::json w = nlohmann::json::object();
    for (const auto& [k, v] : working) w[k] = v;
    patch.ops.push_back(
        {{"op", "add"},
         {"path", (base / kSidecarSetWorkingHotUpgradeContainerAnnotation).to_string()},
         {"value", w.dump()}});
  }
  for (const auto& [k, v] : version_ops) {
    patch.ops.push_back({{"op", "add"}, {"path", (base / k).to_string()}, {"value", v}});
  }
  if (!update.container_images.empty()) {
    absl::StatusOr<OrderedJson> state = upgrade_impl::InPlaceStateEntry(pod, update, now, context);
    if (!state.ok()) return state.status();
    (*states)[target.name] = *std::move(state);
    set_annotation(kSidecarSetInPlaceUpdateStateAnnotation, *states);
  }
  return patch;
}

absl::StatusOr<SidecarPodPatch> SidecarPodHotUpgradeResetPatch(
    const SidecarSetUpgradeTarget& target, const nlohmann::json& pod, absl::Time now) {
  using upgrade_impl::OrderedJson;
  const std::string context = absl::StrCat("pod ", kube::Name(pod));
  absl::StatusOr<std::string> rv = upgrade_impl::PatchGuard(pod, context);
  if (!rv.ok()) return rv.status();
  const std::map<std::string, std::string> annotations = kube::Annotations(pod);
  auto working = upgrade_impl::ReadWorking(annotations);
  if (!working.ok()) return Annotate(working.status(), context);
  auto states =
      upgrade_impl::ReadEntries(annotations, kSidecarSetInPlaceUpdateStateAnnotation, false);
  if (!states.ok()) return Annotate(states.status(), context);

  SidecarPodPatch patch;
  patch.ops.push_back({{"op", "test"}, {"path", "/metadata/resourceVersion"}, {"value", *rv}});
  inplace::InPlaceUpdateSpec update;
  update.revision = target.hash;
  if (auto s = states->find(target.name); s != states->end()) {
    if (auto r = s->second.find("revision"); r != s->second.end() && r->is_string()) {
      update.revision = r->get<std::string>();
    }
  }
  std::map<std::string, std::string> version_ops;
  for (const upgrade_impl::HotPair& p : upgrade_impl::HotPairs(target, pod, *working, nullptr)) {
    if (p.idle_image == p.sidecar->empty_image) continue;
    patch.ops.push_back({{"op", "replace"},
                         {"path", absl::StrCat("/spec/containers/", p.idle_index, "/image")},
                         {"value", p.sidecar->empty_image}});
    patch.containers.push_back(p.idle);
    update.container_images[p.idle] = p.sidecar->empty_image;
    version_ops[upgrade_impl::VersionKey(p.idle)] = "0";
    version_ops[upgrade_impl::VersionAltKey(p.working)] = "0";
  }
  if (patch.containers.empty()) return SidecarPodPatch{};
  const nlohmann::json::json_pointer base("/metadata/annotations");
  for (const auto& [k, v] : version_ops) {
    patch.ops.push_back({{"op", "add"}, {"path", (base / k).to_string()}, {"value", v}});
  }
  absl::StatusOr<OrderedJson> state = upgrade_impl::InPlaceStateEntry(pod, update, now, context);
  if (!state.ok()) return state.status();
  (*states)[target.name] = *std::move(state);
  patch.ops.push_back({{"op", "add"},
                       {"path", (base / kSidecarSetInPlaceUpdateStateAnnotation).to_string()},
                       {"value", upgrade_impl::Dump(*states)}});
  return patch;
}

namespace {
namespace upgrade_impl {

// The pod's SidecarSetUpgradable condition and its index, or null.
const nlohmann::json* UpgradableCondition(const nlohmann::json& pod, size_t* index) {
  const nlohmann::json* conds = kube::FindPath(pod, {"status", "conditions"});
  if (conds == nullptr || !conds->is_array()) return nullptr;
  for (size_t i = 0; i < conds->size(); ++i) {
    if (Str((*conds)[i], "type") == kSidecarSetUpgradableCondition) {
      if (index != nullptr) *index = i;
      return &(*conds)[i];
    }
  }
  return nullptr;
}

// The condition's message as set name -> upgradable; anything else reads as empty.
nlohmann::json UpgradableEntries(const nlohmann::json* cond) {
  nlohmann::json kv = nlohmann::json::object();
  if (cond == nullptr) return kv;
  nlohmann::json parsed =
      nlohmann::json::parse(Str(*cond, "message"), nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) return kv;
  for (auto e = parsed.begin(); e != parsed.end(); ++e) {
    if (!e.value().is_boolean()) return kv;
  }
  return parsed;
}

}  // namespace upgrade_impl
}  // namespace

absl::StatusOr<nlohmann::json> SidecarSetUpgradableConditionPatch(const std::string& set_name,
                                                                  const nlohmann::json& pod,
                                                                  bool upgradable, absl::Time now) {
  using upgrade_impl::Str;
  if (!pod.is_object()) return absl::InvalidArgumentError("the pod is not an object");
  const std::string rv = kube::ResourceVersion(pod);
  if (rv.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pod ", kube::Name(pod), ": metadata.resourceVersion is required (the patch's guard)"));
  }
  size_t index = 0;
  const nlohmann::json* cond = upgrade_impl::UpgradableCondition(pod, &index);
  nlohmann::json kv = upgrade_impl::UpgradableEntries(cond);
  kv[set_name] = upgradable;
  bool all = true;
  for (auto e = kv.begin(); e != kv.end(); ++e) all = all && e.value().get<bool>();
  // Go's encoding/json of a map: keys sorted, compact (set names need no escaping).
  const std::map<std::string, std::string> want = {
      {"status", all ? "True" : "False"},
      {"reason", all ? "AllSidecarsetUpgradable" : "UpdateImmutableField"},
      {"message", kv.dump()}};
  nlohmann::json ops = nlohmann::json::array();
  if (cond != nullptr && Str(*cond, "status") == want.at("status") &&
      Str(*cond, "reason") == want.at("reason") && Str(*cond, "message") == want.at("message")) {
    return ops;
  }
  ops.push_back({{"op", "test"}, {"path", "/metadata/resourceVersion"}, {"value", rv}});
  const std::string time = kube::FormatRfc3339(now);
  if (cond != nullptr) {
    const std::string at = absl::StrCat("/status/conditions/", index, "/");
    for (const char* f : {"status", "reason", "message"}) {
      if (Str(*cond, f) != want.at(f)) {
        ops.push_back({{"op", "add"}, {"path", at + f}, {"value", want.at(f)}});
      }
    }
    if (Str(*cond, "status") != want.at("status")) {
      ops.push_back({{"op", "add"}, {"path", at + "lastTransitionTime"}, {"value", time}});
    }
    return ops;
  }
  const nlohmann::json* status = kube::FindPath(pod, {"status"});
  if (status == nullptr || !status->is_object()) {
    ops.push_back({{"op", "add"}, {"path", "/status"}, {"value", nlohmann::json::object()}});
  }
  const nlohmann::json* conds = kube::FindPath(pod, {"status", "conditions"});
  if (conds == nullptr || !conds->is_array()) {
    ops.push_back(
        {{"op", "add"}, {"path", "/status/conditions"}, {"value", nlohmann::json::array()}});
  }
  nlohmann::json c = {{"type", kSidecarSetUpgradableCondition}};
  for (const auto& [f, v] : want) c[f] = v;
  c["lastTransitionTime"] = time;
  ops.push_back({{"op", "add"}, {"path", "/status/conditions/-"}, {"value", c}});
  return ops;
}

bool MarkedNotUpgradable(const std::string& set_name, const nlohmann::json& pod) {
  if (!pod.is_object()) return false;
  const nlohmann::json kv =
      upgrade_impl::UpgradableEntries(upgrade_impl::UpgradableCondition(pod, nullptr));
  auto it = kv.find(set_name);
  return it != kv.end() && !it->get<bool>();
}

}  // namespace kruise::manager::sidecarset
