#include "manager/sidecarset/sidecarset_upgrade.h"

#include <algorithm>
#include <climits>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
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
  } else if (target.hot_upgrade) {
    plan.held = "the set has HotUpgrade containers, which are not upgraded (cold upgrade only)";
  }
  if (!plan.held.empty()) return plan;

  std::optional<kube::LabelSelector> selector;
  if (!target.selector.is_null()) {
    ASSIGN_OR_RETURN(selector, kube::LabelSelector::FromJson(target.selector));
  }
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
  if (target.hot_upgrade) {
    return absl::UnimplementedError(absl::StrCat(
        "SidecarSet ", target.name, " has HotUpgrade containers: only cold upgrades are done"));
  }
  if (!pod.is_object()) return absl::InvalidArgumentError("the pod is not an object");
  const std::string pod_name = kube::Name(pod);
  const std::string rv = kube::ResourceVersion(pod);
  if (rv.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pod ", pod_name, ": metadata.resourceVersion is required (the patch's guard)"));
  }
  const nlohmann::json* containers = kube::FindPath(pod, {"spec", "containers"});
  if (containers == nullptr || !containers->is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pod ", pod_name, ": spec.containers is not a list"));
  }
  const std::map<std::string, std::string> annotations = kube::Annotations(pod);
  const std::string context = absl::StrCat("pod ", pod_name);
  auto hashes = upgrade_impl::ReadEntries(annotations, kSidecarSetHashAnnotation, true);
  if (!hashes.ok()) return Annotate(hashes.status(), context);
  auto without =
      upgrade_impl::ReadEntries(annotations, kSidecarSetHashWithoutImageAnnotation, true);
  if (!without.ok()) return Annotate(without.status(), context);
  auto states =
      upgrade_impl::ReadEntries(annotations, kSidecarSetInPlaceUpdateStateAnnotation, false);
  if (!states.ok()) return Annotate(states.status(), context);

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
  for (const std::string& c : target.containers) {
    bool found = false;
    upgrade_impl::ContainerImage(pod, c, &found);
    if (!found) patch.missing.push_back(c);
  }
  if (!patch.missing.empty()) return patch;

  patch.ops.push_back({{"op", "test"}, {"path", "/metadata/resourceVersion"}, {"value", rv}});
  inplace::InPlaceUpdateSpec update;
  update.revision = target.hash;
  for (size_t i = 0; i < containers->size(); ++i) {
    const nlohmann::json& c = (*containers)[i];
    auto it = target.images.find(upgrade_impl::Str(c, "name"));
    if (it == target.images.end() || upgrade_impl::Str(c, "image") == it->second) continue;
    patch.ops.push_back({{"op", "replace"},
                         {"path", absl::StrCat("/spec/containers/", i, "/image")},
                         {"value", it->second}});
    patch.containers.push_back(it->first);
    update.container_images[it->first] = it->second;
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
  if (!update.container_images.empty()) {
    OrderedJson state;
    try {  // the engine reads the container statuses with value(): a mistyped field throws
      state = OrderedJson::parse(
          inplace::FormatInPlaceUpdateState(inplace::NewInPlaceUpdateState(pod, update, now)),
          nullptr, /*allow_exceptions=*/false);
    } catch (const nlohmann::json::exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat(context, ": status.containerStatuses: ", e.what()));
    }
    (*states)[target.name] = std::move(state);
    set_annotation(kSidecarSetInPlaceUpdateStateAnnotation, *states);
  }
  return patch;
}

}  // namespace kruise::manager::sidecarset
