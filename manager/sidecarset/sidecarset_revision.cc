#include "manager/sidecarset/sidecarset_revision.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "kube/object.h"
#include "manager/revision/revision.h"
#include "manager/sidecarset/sidecarset_admission.h"
#include "manager/sidecarset/sidecarset_inject.h"

namespace kruise::manager::sidecarset {
namespace {

using Json = nlohmann::json;

// The fields a revision records, in the order Go's json.Marshal of a map writes them (sorted).
constexpr const char* kRecordedFields[] = {"containers", "imagePullSecrets", "initContainers",
                                           "patchPodMetadata", "volumes"};
// Of those, the lists a strategic merge merges by name.
constexpr const char* kMergedByName[] = {"containers", "imagePullSecrets", "initContainers",
                                         "volumes"};

std::optional<int64_t> CreationSeconds(const Json& r) {
  auto t = kube::CreationTimestamp(r);
  if (!t) return std::nullopt;
  return absl::ToUnixSeconds(*t);
}

const Json* InjectionRevisionSpec(const Json& set) {
  const Json* r = kube::FindPath(set, {"spec", "injectionStrategy", "revision"});
  return r != nullptr && r->is_object() ? r : nullptr;
}

std::optional<std::string> NonEmptyString(const Json& obj, const char* key) {
  const Json* v = kube::Field(obj, key);
  if (v == nullptr || !v->is_string() || v->get_ref<const std::string&>().empty()) {
    return std::nullopt;
  }
  return v->get<std::string>();
}

}  // namespace

std::string SidecarSetCustomVersion(const Json& set) {
  if (auto v = kube::GetString(set, {"spec", "customVersion"}); v && !v->empty()) return *v;
  return kube::Label(set, kSidecarSetCustomVersionLabel).value_or("");
}

int32_t SidecarSetCollisionCount(const Json& set) {
  auto c = kube::GetInt(set, {"status", "collisionCount"});
  return c && *c > 0 && *c <= INT32_MAX ? static_cast<int32_t>(*c) : 0;
}

Json SidecarSetRevisionData(const Json& set) {
  const Json defaulted = DefaultSidecarSet(set);
  const Json* spec = kube::FindPath(defaulted, {"spec"});
  Json out = Json::object();
  for (const char* f : kRecordedFields) {
    const Json* v = spec != nullptr && spec->is_object() ? kube::Field(*spec, f) : nullptr;
    out[f] = v != nullptr ? *v : Json(nullptr);
  }
  return Json{{"spec", std::move(out)}};
}

std::string SidecarSetRevisionName(const Json& set, const Json& data, int32_t collision_count) {
  std::optional<int32_t> c;
  if (collision_count > 0) c = collision_count;
  return revision::RevisionName(kube::Name(set), revision::TemplateHash(data, c));
}

Json NewSidecarSetRevision(const Json& set, const std::string& ns, int64_t revision_number,
                           int32_t collision_count) {
  Json data = SidecarSetRevisionData(set);
  std::optional<int32_t> c;
  if (collision_count > 0) c = collision_count;
  const std::string hash = revision::TemplateHash(data, c);
  Json labels = Json::object();
  for (const auto& [k, v] : kube::Labels(set)) labels[k] = v;
  labels[kSidecarSetNameLabel] = kube::Name(set);
  labels[revision::kControllerRevisionHashLabel] = hash;
  if (std::string cv = SidecarSetCustomVersion(set); !cv.empty()) {
    labels[kSidecarSetCustomVersionLabel] = cv;
  } else {
    labels.erase(kSidecarSetCustomVersionLabel);
  }
  Json annotations = Json::object();
  for (const auto& [k, v] : kube::Annotations(set)) annotations[k] = v;
  annotations[kSidecarSetHashAnnotation] = SidecarSetRecordedHash(set);
  annotations[kSidecarSetHashWithoutImageAnnotation] = SidecarSetRecordedHashWithoutImage(set);
  Json meta = {{"name", revision::RevisionName(kube::Name(set), hash)},
               {"namespace", ns},
               {"labels", std::move(labels)},
               {"annotations", std::move(annotations)}};
  if (!kube::Uid(set).empty()) {
    meta["ownerReferences"] =
        Json::array({{{"apiVersion", set.value("apiVersion", "apps.kruise.io/v1alpha1")},
                      {"kind", "SidecarSet"},
                      {"name", kube::Name(set)},
                      {"uid", kube::Uid(set)},
                      {"controller", true},
                      {"blockOwnerDeletion", true}}});
  }
  return {{"apiVersion", "apps/v1"},
          {"kind", "ControllerRevision"},
          {"metadata", std::move(meta)},
          {"data", std::move(data)},
          {"revision", revision_number}};
}

void SortSidecarSetRevisions(std::vector<Json>* revisions) {
  std::stable_sort(revisions->begin(), revisions->end(), [](const Json& a, const Json& b) {
    const int64_t ra = kube::IntField(a, "revision", 0), rb = kube::IntField(b, "revision", 0);
    if (ra != rb) return ra < rb;
    const auto ta = CreationSeconds(a), tb = CreationSeconds(b);
    if (ta != tb) return ta < tb;
    return kube::Name(a) < kube::Name(b);
  });
}

std::vector<Json> RevisionsOfSidecarSet(const Json& set, const std::vector<Json>& revisions) {
  std::vector<Json> out;
  const std::string name = kube::Name(set), uid = kube::Uid(set);
  for (const Json& r : revisions) {
    if (kube::Label(r, kSidecarSetNameLabel) != name) continue;
    if (auto owner = kube::ControllerOf(r);
        owner && !uid.empty() && !owner->uid.empty() && owner->uid != uid) {
      continue;
    }
    out.push_back(r);
  }
  SortSidecarSetRevisions(&out);
  return out;
}

LatestRevisionPlan PlanLatestSidecarSetRevision(const Json& set, const std::vector<Json>& sorted,
                                                const std::string& ns) {
  LatestRevisionPlan plan;
  const Json data = SidecarSetRevisionData(set);
  plan.revision_number = sorted.empty() ? 1 : kube::IntField(sorted.back(), "revision", 0) + 1;
  for (auto it = sorted.rbegin(); it != sorted.rend(); ++it) {
    const Json* d = kube::Field(*it, "data");
    if (d == nullptr || *d != data) continue;
    plan.action = it == sorted.rbegin() ? LatestRevisionPlan::Action::kKeep
                                        : LatestRevisionPlan::Action::kRenumber;
    plan.revision = *it;
    if (plan.action == LatestRevisionPlan::Action::kKeep) {
      plan.revision_number = kube::IntField(*it, "revision", 0);
    }
    return plan;
  }
  plan.action = LatestRevisionPlan::Action::kCreate;
  plan.revision =
      NewSidecarSetRevision(set, ns, plan.revision_number, SidecarSetCollisionCount(set));
  return plan;
}

std::string LatestSidecarSetRevisionName(const Json& set, const std::vector<Json>& sorted) {
  const Json data = SidecarSetRevisionData(set);
  for (auto it = sorted.rbegin(); it != sorted.rend(); ++it) {
    const Json* d = kube::Field(*it, "data");
    if (d != nullptr && *d == data) return kube::Name(*it);
  }
  return SidecarSetRevisionName(set, data, SidecarSetCollisionCount(set));
}

std::vector<std::string> SidecarSetRevisionsToPrune(const Json& set,
                                                    const std::vector<Json>& sorted,
                                                    const std::set<std::string>& used_by_pods) {
  int64_t limit = kDefaultSidecarSetRevisionHistoryLimit;
  if (auto l = kube::GetInt(set, {"spec", "revisionHistoryLimit"})) limit = *l;
  limit = std::clamp<int64_t>(limit, 1, INT32_MAX);
  std::set<std::string> keep = used_by_pods;
  if (const Json* wanted = FindInjectionRevision(set, sorted)) keep.insert(kube::Name(*wanted));
  if (const Json* r = InjectionRevisionSpec(set)) {
    if (auto name = NonEmptyString(*r, "revisionName")) keep.insert(*name);
  }
  std::vector<std::string> names;
  names.reserve(sorted.size());
  for (const Json& r : sorted) names.push_back(kube::Name(r));
  return revision::RevisionsToPrune(names, static_cast<int>(limit), keep);
}

std::string PodSidecarSetControllerRevision(const Json& pod, const std::string& set_name) {
  auto a = kube::Annotation(pod, kSidecarSetHashAnnotation);
  if (!a || a->empty()) return "";
  Json parsed = Json::parse(*a, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) return "";
  const Json* entry = kube::Field(parsed, set_name.c_str());
  if (entry == nullptr || !entry->is_object()) return "";
  return kube::GetString(*entry, {"controllerRevision"}).value_or("");
}

const Json* FindInjectionRevision(const Json& set, const std::vector<Json>& sorted) {
  const Json* r = InjectionRevisionSpec(set);
  if (r == nullptr) return nullptr;
  if (auto name = NonEmptyString(*r, "revisionName")) {
    for (const Json& rev : sorted) {
      if (kube::Name(rev) == *name) return &rev;
    }
    return nullptr;
  }
  if (auto cv = NonEmptyString(*r, "customVersion")) {
    for (auto it = sorted.rbegin(); it != sorted.rend(); ++it) {
      if (kube::Label(*it, kSidecarSetCustomVersionLabel) == *cv) return &*it;
    }
  }
  return nullptr;
}

std::string MissingInjectionRevisionMessage(const Json& set) {
  const Json* r = InjectionRevisionSpec(set);
  std::string what = "a revision";
  if (r != nullptr) {
    if (auto name = NonEmptyString(*r, "revisionName")) {
      what = absl::StrCat("revisionName \"", *name, "\"");
    } else if (auto cv = NonEmptyString(*r, "customVersion")) {
      what = absl::StrCat("customVersion \"", *cv, "\"");
    }
  }
  return absl::StrCat("SidecarSet ", kube::Name(set), ": injectionStrategy.revision ", what,
                      " matches no ControllerRevision of this set (never recorded, pruned by "
                      "revisionHistoryLimit, or not yet seen); its latest spec was injected");
}

Json RestoreSidecarSetRevision(const Json& set, const Json& revision) {
  Json out = set;
  const Json* rspec = kube::FindPath(revision, {"data", "spec"});
  if (rspec != nullptr && rspec->is_object() && out.is_object()) {
    Json& spec = out["spec"];
    if (!spec.is_object()) spec = Json::object();
    for (const char* f : kRecordedFields) {
      auto found = rspec->find(f);
      if (found == rspec->end()) continue;  // not recorded: the current value stays
      const Json* v = &*found;
      if (v->is_null()) {
        spec.erase(f);
        continue;
      }
      const bool by_name = std::any_of(std::begin(kMergedByName), std::end(kMergedByName),
                                       [&](const char* m) { return std::string(m) == f; });
      const Json* current = kube::Field(spec, f);
      if (!by_name || !v->is_array() || current == nullptr || !current->is_array()) {
        spec[f] = *v;
        continue;
      }
      Json merged = *v;
      std::set<std::string> names;
      for (const Json& item : *v) {
        if (item.is_object()) names.insert(item.value("name", ""));
      }
      for (const Json& item : *current) {
        if (!item.is_object() || !names.count(item.value("name", ""))) merged.push_back(item);
      }
      spec[f] = std::move(merged);
    }
  }
  if (!out.is_object()) return out;
  Json& meta = out["metadata"];
  if (!meta.is_object()) meta = Json::object();
  Json& annotations = meta["annotations"];
  if (!annotations.is_object()) annotations = Json::object();
  for (const char* key : {kSidecarSetHashAnnotation, kSidecarSetHashWithoutImageAnnotation}) {
    annotations.erase(key);
  }
  const std::string hash = kube::Annotation(revision, kSidecarSetHashAnnotation).value_or("");
  const std::string hash_wo =
      kube::Annotation(revision, kSidecarSetHashWithoutImageAnnotation).value_or("");
  annotations[kSidecarSetHashAnnotation] = hash.empty() ? SidecarSetHash(out) : hash;
  annotations[kSidecarSetHashWithoutImageAnnotation] =
      hash_wo.empty() ? SidecarSetHashWithoutImage(out) : hash_wo;
  Json& status = out["status"];
  if (!status.is_object()) status = Json::object();
  status["latestRevision"] = kube::Name(revision);
  return out;
}

bool InjectHistoryRevision(const Json& set, const std::map<std::string, std::string>& pod_labels,
                           double uniform01) {
  if (kube::GetBool(set, {"spec", "updateStrategy", "paused"}).value_or(false)) return true;
  const Json* r = InjectionRevisionSpec(set);
  if (r == nullptr || r->value("policy", "Always") != "Partial") return true;
  if (const Json* sel = kube::FindPath(set, {"spec", "updateStrategy", "selector"});
      sel != nullptr && !sel->is_null()) {
    auto selector = kube::LabelSelector::FromJson(*sel);
    if (!selector.ok()) return false;
    if (!selector->Matches(pod_labels)) return true;
  }
  const Json* partition = kube::FindPath(set, {"spec", "updateStrategy", "partition"});
  if (partition == nullptr || !partition->is_string()) return false;
  const std::string& p = partition->get_ref<const std::string&>();
  double percent = 0;
  if (!absl::EndsWith(p, "%") || !absl::SimpleAtod(p.substr(0, p.size() - 1), &percent)) {
    return false;
  }
  return uniform01 < percent / 100.0;
}

}  // namespace kruise::manager::sidecarset
