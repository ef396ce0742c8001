#include "manager/cloneset/cloneset_admission.h"

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kube/field_errors.h"
#include "kube/object.h"
#include "kube/pod_defaults.h"
#include "manager/cloneset/cloneset_api.h"

namespace kruise::manager::cloneset {
// Helpers live in a named namespace: this file shares a unity-build unit with the other sources
// of kruise_manager_cloneset, whose file-local helpers sit in kruise::manager::cloneset.
namespace admission_impl {
namespace {

using kube::Field;
using kube::Json;

// ---- Defaulting ---------------------------------------------------------------------------------
// Every function below takes an object (callers check) and only adds members that are absent or
// null (Go's nil), or, for strings and the probe counters, empty/zero (Go cannot tell those from
// unset either).

using kube::json_defaults::Absent;
using kube::json_defaults::DefaultIfEmptyString;
using kube::json_defaults::DefaultIfUnset;
using kube::json_defaults::ExistingObject;
using kube::json_defaults::ForEachObject;
using kube::json_defaults::ObjectMember;

void DefaultContainer(Json* c, bool init_container, bool host_network) {
  if (init_container) {
    auto image = c->find("image");
    DefaultIfEmptyString(c, "imagePullPolicy",
                         kube::DefaultPullPolicy(image == c->end() ? Json() : *image).c_str());
  } else {
    // OpenKruise: "For in-place update, we set default imagePullPolicy to Always".
    DefaultIfEmptyString(c, "imagePullPolicy", "Always");
  }
  kube::DefaultContainerFields(c, host_network);
}

void DefaultPodSpecInPlace(Json* spec) {
  DefaultIfEmptyString(spec, "dnsPolicy", "ClusterFirst");
  DefaultIfEmptyString(spec, "restartPolicy", "Always");
  DefaultIfUnset(spec, "securityContext", Json::object());
  DefaultIfUnset(spec, "terminationGracePeriodSeconds", 30);
  DefaultIfEmptyString(spec, "schedulerName", "default-scheduler");
  auto hn = spec->find("hostNetwork");
  const bool host_network = hn != spec->end() && hn->is_boolean() && hn->get<bool>();
  ForEachObject(spec, "volumes", kube::DefaultVolumeFields);
  ForEachObject(spec, "initContainers",
                [host_network](Json* c) { DefaultContainer(c, true, host_network); });
  ForEachObject(spec, "containers",
                [host_network](Json* c) { DefaultContainer(c, false, host_network); });
}

// ---- Validation helpers -------------------------------------------------------------------------

using Problems = kube::FieldErrors;

std::string Idx(const std::string& path, size_t i) { return absl::StrCat(path, "[", i, "]"); }

bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!absl::ascii_islower(static_cast<unsigned char>(c)) &&
        !absl::ascii_isdigit(static_cast<unsigned char>(c)) && c != '-') {
      return false;
    }
  }
  return s.front() != '-' && s.back() != '-';
}

bool IsDnsSubdomain(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    const std::string part =
        s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    // Subdomain segments follow the label grammar (without the 63-character segment limit).
    if (part.empty() || part.front() == '-' || part.back() == '-') return false;
    for (char c : part) {
      if (!absl::ascii_islower(static_cast<unsigned char>(c)) &&
          !absl::ascii_isdigit(static_cast<unsigned char>(c)) && c != '-') {
        return false;
      }
    }
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

// Label keys/values (and qualified names such as finalizers) through the selector grammar of
// kube::LabelSelector: OK or the reason.
absl::Status CheckLabels(const Json& labels) {
  auto parsed = kube::LabelSelector::FromJson(Json{{"matchLabels", labels}});
  return parsed.ok() ? absl::OkStatus() : parsed.status();
}
absl::Status CheckQualifiedName(const std::string& name) {
  auto parsed = kube::LabelSelector::FromJson(
      Json{{"matchExpressions", Json::array({{{"key", name}, {"operator", "Exists"}}})}});
  return parsed.ok() ? absl::OkStatus() : parsed.status();
}

// An optional non-negative integer member; reports a wrong type or a negative value.
void CheckNonNegative(const Json& obj, const char* key, const std::string& path,
                      Problems* problems) {
  const Json* v = Field(obj, key);
  if (v == nullptr) return;
  if (!v->is_number_integer()) {
    problems->Add(path, "must be an integer");
  } else if (v->get<int64_t>() < 0) {
    problems->Add(path, "must be greater than or equal to 0");
  } else if (v->get<int64_t>() > std::numeric_limits<int32_t>::max()) {
    problems->Add(path, "must fit in a 32-bit integer");
  }
}

void CheckBool(const Json& obj, const char* key, const std::string& path, Problems* problems) {
  const Json* v = Field(obj, key);
  if (v != nullptr && !v->is_boolean()) problems->Add(path, "must be a boolean");
}

// An IntOrString that must be a non-negative integer or "N%" with 0 <= N <= 100. Returns its
// value scaled against `total` (percentages rounded up), nullopt when invalid (reported).
std::optional<int> IntOrPercent(const Json& v, int total, const std::string& path,
                                Problems* problems) {
  auto scaled = kube::GetScaledValueFromIntOrPercent(v, total, /*round_up=*/true);
  if (!scaled.ok()) {
    problems->Add(path, absl::StrCat("Invalid value: ", v.dump(),
                                     ": must be an integer or a percentage like \"20%\""));
    return std::nullopt;
  }
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    int percent = 0;
    if (!absl::SimpleAtoi(absl::string_view(s).substr(0, s.size() - 1), &percent) || percent < 0 ||
        percent > 100) {
      problems->Add(path, absl::StrCat("Invalid value: \"", s,
                                       "\": a percentage must be between 0% and 100%"));
      return std::nullopt;
    }
  } else if (v.get<int64_t>() < 0) {
    problems->Add(
        path, absl::StrCat("Invalid value: ", v.dump(), ": must be greater than or equal to 0"));
    return std::nullopt;
  }
  return *scaled;
}

// A label selector that must be non-empty and valid; the parsed selector, or nullopt (reported).
std::optional<kube::LabelSelector> NonEmptySelector(const Json* sel, const std::string& path,
                                                    const char* empty_message, Problems* problems) {
  if (sel == nullptr) {
    problems->Add(path, "Required value");
    return std::nullopt;
  }
  if (!sel->is_object()) {
    problems->Add(path, "Invalid value: must be a label selector object");
    return std::nullopt;
  }
  auto parsed = kube::LabelSelector::FromJson(*sel);
  if (!parsed.ok()) {
    problems->Add(path, absl::StrCat("Invalid value: ", parsed.status().message()));
    return std::nullopt;
  }
  if (parsed->matches_everything()) {
    problems->Add(path, absl::StrCat("Invalid value: ", empty_message));
    return std::nullopt;
  }
  return *std::move(parsed);
}

using kube::SemanticNormalized;

// ---- Validation ---------------------------------------------------------------------------------

void CheckContainers(const Json& pod_spec, const char* key, bool required,
                     const std::set<std::string>& volume_names, std::set<std::string>* names,
                     Problems* problems) {
  const std::string path = absl::StrCat("spec.template.spec.", key);
  const Json* list = Field(pod_spec, key);
  if (list == nullptr || (list->is_array() && list->empty())) {
    if (required) problems->Add(path, "Required value: at least one container is required");
    return;
  }
  if (!list->is_array()) {
    problems->Add(path, "must be a list of containers");
    return;
  }
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& c = (*list)[i];
    const std::string cpath = Idx(path, i);
    if (!c.is_object()) {
      problems->Add(cpath, "must be a container object");
      continue;
    }
    const Json* name = Field(c, "name");
    if (name == nullptr || !name->is_string() || name->get_ref<const std::string&>().empty()) {
      problems->Add(cpath + ".name", "Required value");
    } else if (!IsDnsLabel(name->get<std::string>())) {
      problems->Add(cpath + ".name",
                    absl::StrCat("Invalid value: \"", name->get<std::string>(),
                                 "\": must be a DNS-1123 label (lower-case alphanumerics and "
                                 "'-', at most 63 characters)"));
    } else if (!names->insert(name->get<std::string>()).second) {
      problems->Add(cpath + ".name",
                    absl::StrCat("Duplicate value: \"", name->get<std::string>(), "\""));
    }
    const Json* image = Field(c, "image");
    if (image == nullptr || !image->is_string() || image->get_ref<const std::string&>().empty()) {
      problems->Add(cpath + ".image", "Required value");
    }
    if (const Json* ports = Field(c, "ports"); ports != nullptr && ports->is_array()) {
      for (size_t p = 0; p < ports->size(); ++p) {
        const Json* cp = Field((*ports)[p], "containerPort");
        if (cp == nullptr || !cp->is_number_integer() || cp->get<int64_t>() < 1 ||
            cp->get<int64_t>() > 65535) {
          problems->Add(Idx(cpath + ".ports", p) + ".containerPort",
                        "Invalid value: must be between 1 and 65535, inclusive");
        }
      }
    }
    if (const Json* mounts = Field(c, "volumeMounts"); mounts != nullptr && mounts->is_array()) {
      for (size_t m = 0; m < mounts->size(); ++m) {
        const Json* mname = Field((*mounts)[m], "name");
        const std::string mpath = Idx(cpath + ".volumeMounts", m) + ".name";
        if (mname == nullptr || !mname->is_string()) {
          problems->Add(mpath, "Required value");
        } else if (volume_names.count(mname->get<std::string>()) == 0) {
          problems->Add(mpath, absl::StrCat("Not found: \"", mname->get<std::string>(),
                                            "\" (no volume or volumeClaimTemplate of that name)"));
        }
      }
    }
  }
}

// volumeClaimTemplates; returns their names.
std::set<std::string> CheckVolumeClaimTemplates(const Json& spec, Problems* problems) {
  std::set<std::string> names;
  const Json* vcts = Field(spec, "volumeClaimTemplates");
  if (vcts == nullptr) return names;
  if (!vcts->is_array()) {
    problems->Add("spec.volumeClaimTemplates", "must be a list of PersistentVolumeClaims");
    return names;
  }
  for (size_t i = 0; i < vcts->size(); ++i) {
    const std::string path = Idx("spec.volumeClaimTemplates", i) + ".metadata.name";
    auto name = kube::GetString((*vcts)[i], {"metadata", "name"});
    if (!name || name->empty()) {
      problems->Add(path, "Required value");
    } else if (!IsDnsLabel(*name)) {
      problems->Add(path, absl::StrCat("Invalid value: \"", *name,
                                       "\": must be a DNS-1123 label (it names a pod volume)"));
    } else if (!names.insert(*name).second) {
      problems->Add(path, absl::StrCat("Duplicate value: \"", *name, "\""));
    }
  }
  return names;
}

void CheckTemplate(const Json& spec, const std::optional<kube::LabelSelector>& selector,
                   const std::set<std::string>& vct_names, Problems* problems) {
  const Json* tmpl = Field(spec, "template");
  if (tmpl == nullptr || !tmpl->is_object()) {
    problems->Add("spec.template", "Required value");
    return;
  }
  if (const Json* labels = kube::FindPath(*tmpl, {"metadata", "labels"})) {
    if (absl::Status st = CheckLabels(*labels); !st.ok()) {
      problems->Add("spec.template.metadata.labels", absl::StrCat("Invalid value: ", st.message()));
    }
  }
  if (selector && !selector->MatchesObject(*tmpl)) {
    problems->Add("spec.template.metadata.labels",
                  "Invalid value: `selector` does not match template `labels`");
  }
  const Json* pod_spec = Field(*tmpl, "spec");
  if (pod_spec == nullptr || !pod_spec->is_object()) {
    problems->Add("spec.template.spec", "Required value");
    return;
  }
  // Volumes, with the volumeClaimTemplates mocked in as OpenKruise does.
  std::set<std::string> volume_names;
  if (const Json* volumes = Field(*pod_spec, "volumes")) {
    if (!volumes->is_array()) {
      problems->Add("spec.template.spec.volumes", "must be a list of volumes");
    } else {
      for (size_t i = 0; i < volumes->size(); ++i) {
        const std::string path = Idx("spec.template.spec.volumes", i) + ".name";
        auto name = kube::GetString((*volumes)[i], {"name"});
        if (!name || name->empty()) {
          problems->Add(path, "Required value");
        } else if (!IsDnsLabel(*name)) {
          problems->Add(path,
                        absl::StrCat("Invalid value: \"", *name, "\": must be a DNS-1123 label"));
        } else if (!volume_names.insert(*name).second) {
          problems->Add(path, absl::StrCat("Duplicate value: \"", *name, "\""));
        }
      }
    }
  }
  for (const std::string& name : vct_names) {
    if (!volume_names.insert(name).second) {
      problems->Add("spec.volumeClaimTemplates",
                    absl::StrCat("Duplicate value: \"", name,
                                 "\": spec.template.spec.volumes has a volume of that name"));
    }
  }
  std::set<std::string> container_names;
  CheckContainers(*pod_spec, "initContainers", false, volume_names, &container_names, problems);
  CheckContainers(*pod_spec, "containers", true, volume_names, &container_names, problems);
  if (const Json* rp = Field(*pod_spec, "restartPolicy")) {
    if (!rp->is_string() || (!rp->get_ref<const std::string&>().empty() && *rp != "Always")) {
      problems->Add(
          "spec.template.spec.restartPolicy",
          absl::StrCat("Unsupported value: ", rp->dump(), ": supported values: \"Always\""));
    }
  }
  if (Field(*pod_spec, "activeDeadlineSeconds") != nullptr) {
    problems->Add("spec.template.spec.activeDeadlineSeconds",
                  "Forbidden: activeDeadlineSeconds in cloneset is not Supported");
  }
}

void CheckPriorityStrategy(const Json& ps, Problems* problems) {
  const std::string path = "spec.updateStrategy.priorityStrategy";
  if (!ps.is_object()) {
    problems->Add(path, "must be an object");
    return;
  }
  const Json* weight = Field(ps, "weightPriority");
  const Json* order = Field(ps, "orderPriority");
  if (weight != nullptr && !weight->is_array()) {
    problems->Add(path + ".weightPriority", "must be a list");
    weight = nullptr;
  }
  if (order != nullptr && !order->is_array()) {
    problems->Add(path + ".orderPriority", "must be a list");
    order = nullptr;
  }
  if (weight != nullptr && order != nullptr && !weight->empty() && !order->empty()) {
    problems->Add(path, "Invalid value: only one of weightPriority and orderPriority can be used");
  }
  if (weight != nullptr) {
    for (size_t i = 0; i < weight->size(); ++i) {
      const Json& term = (*weight)[i];
      const std::string tpath = Idx(path + ".weightPriority", i);
      const Json* w = Field(term, "weight");
      if (w == nullptr || !w->is_number_integer() || w->get<int64_t>() < 0 ||
          w->get<int64_t>() > 100) {
        problems->Add(tpath + ".weight",
                      "Invalid value: weight must be a number in the range 0-100");
      }
      NonEmptySelector(Field(term, "matchSelector"), tpath + ".matchSelector",
                       "selector can not be empty", problems);
    }
  }
  if (order != nullptr) {
    for (size_t i = 0; i < order->size(); ++i) {
      auto key = kube::GetString((*order)[i], {"orderedKey"});
      if (!key || key->empty()) {
        problems->Add(Idx(path + ".orderPriority", i) + ".orderedKey",
                      "Required value: order key can not be empty");
      }
    }
  }
}

void CheckScatterStrategy(const Json& ss, Problems* problems) {
  const std::string path = "spec.updateStrategy.scatterStrategy";
  if (!ss.is_array()) {
    problems->Add(path, "must be a list of {key, value} terms");
    return;
  }
  std::set<std::pair<std::string, std::string>> seen;
  for (size_t i = 0; i < ss.size(); ++i) {
    const std::string tpath = Idx(path, i);
    auto key = kube::GetString(ss[i], {"key"});
    auto value = kube::GetString(ss[i], {"value"});
    if (!key || key->empty()) {
      problems->Add(tpath + ".key", "Required value: key should not be empty");
      continue;
    }
    if (!seen.emplace(*key, value.value_or("")).second) {
      problems->Add(tpath, absl::StrCat("Duplicate value: duplicated key=", *key,
                                        " value=", value.value_or("")));
    }
  }
}

void CheckUpdateStrategy(const Json& spec, int replicas, Problems* problems) {
  const Json* us = Field(spec, "updateStrategy");
  const Json empty = Json::object();
  if (us != nullptr && !us->is_object()) {
    problems->Add("spec.updateStrategy", "must be an object");
    return;
  }
  const Json& strategy = us != nullptr ? *us : empty;
  std::string type = kReCreate;
  if (const Json* t = Field(strategy, "type")) {
    if (t->is_string() && !t->get_ref<const std::string&>().empty()) type = t->get<std::string>();
    if (!t->is_string() ||
        (type != kReCreate && type != kInPlaceIfPossible && type != kInPlaceOnly)) {
      problems->Add(
          "spec.updateStrategy.type",
          absl::StrCat("Unsupported value: ", t->dump(), ": supported values: \"", kReCreate,
                       "\", \"", kInPlaceIfPossible, "\", \"", kInPlaceOnly, "\""));
    }
  }
  if (const Json* p = Field(strategy, "partition")) {
    IntOrPercent(*p, replicas, "spec.updateStrategy.partition", problems);
  }
  // Absent values read as their defaults (20%, 0).
  const Json* mu_json = Field(strategy, "maxUnavailable");
  const Json* ms_json = Field(strategy, "maxSurge");
  std::optional<int> max_unavailable =
      mu_json != nullptr
          ? IntOrPercent(*mu_json, replicas, "spec.updateStrategy.maxUnavailable", problems)
          : kube::GetScaledValueFromIntOrPercent(Json("20%"), replicas, true).value_or(0);
  std::optional<int> max_surge =
      ms_json != nullptr
          ? IntOrPercent(*ms_json, replicas, "spec.updateStrategy.maxSurge", problems)
          : 0;
  if (type == kInPlaceOnly && max_surge && *max_surge > 0) {
    problems->Add("spec.updateStrategy.maxSurge",
                  absl::StrCat("Invalid value: ", ms_json->dump(),
                               ": can not use maxSurge with strategy type InPlaceOnly"));
  }
  if (replicas > 0 && max_unavailable && max_surge && *max_unavailable < 1 && *max_surge < 1) {
    problems->Add("spec.updateStrategy.maxUnavailable",
                  "Invalid value: maxUnavailable and maxSurge should not both be less than 1");
  }
  CheckBool(strategy, "paused", "spec.updateStrategy.paused", problems);
  if (const Json* ps = Field(strategy, "priorityStrategy")) CheckPriorityStrategy(*ps, problems);
  if (const Json* ss = Field(strategy, "scatterStrategy")) CheckScatterStrategy(*ss, problems);
  if (const Json* ips = Field(strategy, "inPlaceUpdateStrategy")) {
    if (!ips->is_object()) {
      problems->Add("spec.updateStrategy.inPlaceUpdateStrategy", "must be an object");
    } else {
      CheckNonNegative(*ips, "gracePeriodSeconds",
                       "spec.updateStrategy.inPlaceUpdateStrategy.gracePeriodSeconds", problems);
    }
  }
}

void CheckScaleStrategy(const Json& spec, int replicas, Problems* problems) {
  const Json* ss = Field(spec, "scaleStrategy");
  if (ss == nullptr) return;
  if (!ss->is_object()) {
    problems->Add("spec.scaleStrategy", "must be an object");
    return;
  }
  if (const Json* pods = Field(*ss, "podsToDelete")) {
    const std::string path = "spec.scaleStrategy.podsToDelete";
    if (!pods->is_array()) {
      problems->Add(path, "must be a list of pod names");
    } else {
      std::set<std::string> seen;
      std::vector<std::string> duplicated;
      for (size_t i = 0; i < pods->size(); ++i) {
        const Json& p = (*pods)[i];
        if (!p.is_string() || !IsDnsSubdomain(p.get<std::string>())) {
          problems->Add(Idx(path, i), absl::StrCat("Invalid value: ", p.dump(),
                                                   ": must be a pod name (DNS-1123 subdomain)"));
        } else if (!seen.insert(p.get<std::string>()).second) {
          duplicated.push_back(p.get<std::string>());
        }
      }
      if (!duplicated.empty()) {
        problems->Add(path, absl::StrCat("Invalid value: duplicated items [",
                                         absl::StrJoin(duplicated, " "), "]"));
      }
    }
  }
  if (const Json* mu = Field(*ss, "maxUnavailable")) {
    IntOrPercent(*mu, replicas, "spec.scaleStrategy.maxUnavailable", problems);
  }
  CheckBool(*ss, "disablePVCReuse", "spec.scaleStrategy.disablePVCReuse", problems);
}

void CheckLifecycle(const Json& spec, Problems* problems) {
  const Json* lc = Field(spec, "lifecycle");
  if (lc == nullptr) return;
  if (!lc->is_object()) {
    problems->Add("spec.lifecycle", "must be an object");
    return;
  }
  for (const char* hook_name : {"preDelete", "inPlaceUpdate", "preNormal"}) {
    const Json* hook = Field(*lc, hook_name);
    if (hook == nullptr) continue;
    const std::string path = absl::StrCat("spec.lifecycle.", hook_name);
    if (!hook->is_object()) {
      problems->Add(path, "must be an object");
      continue;
    }
    if (const Json* labels = Field(*hook, "labelsHandler")) {
      if (!labels->is_object()) {
        problems->Add(path + ".labelsHandler", "must be a map of label keys to values");
      } else if (absl::Status st = CheckLabels(*labels); !st.ok()) {
        problems->Add(path + ".labelsHandler", absl::StrCat("Invalid value: ", st.message()));
      }
    }
    if (const Json* fins = Field(*hook, "finalizersHandler")) {
      if (!fins->is_array()) {
        problems->Add(path + ".finalizersHandler", "must be a list of finalizer names");
      } else {
        for (size_t i = 0; i < fins->size(); ++i) {
          const Json& f = (*fins)[i];
          const std::string fpath = Idx(path + ".finalizersHandler", i);
          if (!f.is_string() || f.get_ref<const std::string&>().empty()) {
            problems->Add(fpath, "Invalid value: must be a non-empty finalizer name");
          } else if (absl::Status st = CheckQualifiedName(f.get<std::string>()); !st.ok()) {
            problems->Add(fpath, absl::StrCat("Invalid value: \"", f.get<std::string>(),
                                              "\": not a qualified name"));
          }
        }
      }
    }
    CheckBool(*hook, "markPodNotReady", path + ".markPodNotReady", problems);
  }
}

// UPDATE-only rules.
void CheckUpdate(const Json& spec, const Json& old_spec, Problems* problems) {
  Json now = spec.is_object() ? spec : Json::object();
  Json before = old_spec.is_object() ? old_spec : Json::object();
  for (const char* mutable_field :
       {"replicas", "template", "scaleStrategy", "updateStrategy", "minReadySeconds", "lifecycle",
        "revisionHistoryLimit", "volumeClaimTemplates", "progressDeadlineSeconds"}) {
    now.erase(mutable_field);
    before.erase(mutable_field);
  }
  const Json* sel_now = Field(now, "selector");
  const Json* sel_before = Field(before, "selector");
  if (SemanticNormalized(sel_now ? *sel_now : Json()) !=
      SemanticNormalized(sel_before ? *sel_before : Json())) {
    problems->Add("spec.selector", "Invalid value: field is immutable");
  }
  now.erase("selector");
  before.erase("selector");
  if (SemanticNormalized(now) != SemanticNormalized(before)) {
    problems->Add("spec",
                  "Forbidden: updates to cloneset spec for fields other than 'replicas', "
                  "'template', 'lifecycle', 'scaleStrategy', 'updateStrategy', 'minReadySeconds', "
                  "'volumeClaimTemplates' and 'revisionHistoryLimit' are forbidden");
  }
  // InPlaceOnly: the template's spec may change only in container images.
  if (kube::GetString(spec, {"updateStrategy", "type"}).value_or("") != kInPlaceOnly) return;
  const Json* a = kube::FindPath(old_spec, {"template", "spec"});
  const Json* b = kube::FindPath(spec, {"template", "spec"});
  Json old_tmpl = a ? *a : Json::object();
  Json new_tmpl = b ? *b : Json::object();
  auto oc = old_tmpl.find("containers");
  auto nc = new_tmpl.find("containers");
  if (oc != old_tmpl.end() && nc != new_tmpl.end() && oc->is_array() && nc->is_array() &&
      oc->size() == nc->size()) {
    for (size_t i = 0; i < oc->size(); ++i) {
      Json& x = (*oc)[i];
      Json& y = (*nc)[i];
      if (x.is_object() && y.is_object() && x.contains("image") && y.contains("image")) {
        x.erase("image");
        y.erase("image");
      }
    }
  }
  if (SemanticNormalized(old_tmpl) != SemanticNormalized(new_tmpl)) {
    problems->Add("spec.template.spec",
                  "Forbidden: only allowed to update images in spec for InPlaceOnly");
  }
}

}  // namespace
}  // namespace admission_impl

kube::Json DefaultPodSpec(const kube::Json& pod_spec) {
  kube::Json out = pod_spec;
  if (out.is_object()) admission_impl::DefaultPodSpecInPlace(&out);
  return out;
}

kube::Json DefaultCloneSet(const kube::Json& cs, bool inject_template_defaults) {
  namespace impl = admission_impl;
  kube::Json out = cs;
  if (!out.is_object()) return out;
  kube::Json* spec = impl::ObjectMember(&out, "spec");
  if (spec == nullptr) return out;
  impl::DefaultIfUnset(spec, "replicas", 1);
  impl::DefaultIfUnset(spec, "revisionHistoryLimit", 10);
  if (inject_template_defaults) {
    if (kube::Json* tmpl = impl::ExistingObject(spec, "template")) {
      if (kube::Json* pod_spec = impl::ExistingObject(tmpl, "spec")) {
        impl::DefaultPodSpecInPlace(pod_spec);
      }
    }
    impl::ForEachObject(spec, "volumeClaimTemplates", [](kube::Json* pvc) {
      if (kube::Json* pvc_spec = impl::ObjectMember(pvc, "spec")) {
        impl::DefaultIfUnset(pvc_spec, "volumeMode", "Filesystem");
      }
    });
  }
  // Go serialises these two structs even when empty.
  impl::DefaultIfUnset(spec, "scaleStrategy", kube::Json::object());
  kube::Json* strategy = impl::ObjectMember(spec, "updateStrategy");
  if (strategy == nullptr) return out;
  impl::DefaultIfEmptyString(strategy, "type", kReCreate);
  const kube::Json& type = (*strategy)["type"];
  if (type == kInPlaceIfPossible || type == kInPlaceOnly) {
    impl::DefaultIfUnset(strategy, "inPlaceUpdateStrategy", kube::Json::object());
  }
  impl::DefaultIfUnset(strategy, "partition", 0);
  impl::DefaultIfUnset(strategy, "maxUnavailable", "20%");
  impl::DefaultIfUnset(strategy, "maxSurge", 0);
  return out;
}

bool ShouldInjectTemplateDefaults(const kube::Json& cs, const kube::Json* old_cs) {
  if (old_cs == nullptr || !old_cs->is_object()) return true;
  const kube::Json* now = kube::FindPath(cs, {"spec", "template"});
  const kube::Json* before = kube::FindPath(*old_cs, {"spec", "template"});
  if (now == nullptr || before == nullptr) return now != before;
  return *now != *before;
}

std::vector<std::string> CloneSetProblems(const kube::Json& cs, const kube::Json* old_cs) {
  namespace impl = admission_impl;
  impl::Problems problems;
  if (const kube::Json* name = kube::FindPath(cs, {"metadata", "name"});
      name != nullptr && name->is_string() && !name->get_ref<const std::string&>().empty() &&
      !impl::IsDnsSubdomain(name->get<std::string>())) {
    problems.Add("metadata.name", absl::StrCat("Invalid value: \"", name->get<std::string>(),
                                               "\": must be a DNS-1123 subdomain"));
  }
  const kube::Json* spec = kube::Field(cs, "spec");
  if (spec == nullptr || !spec->is_object()) {
    problems.Add("spec", "Required value");
    return problems.Take();
  }
  int replicas = 1;
  if (const kube::Json* r = kube::Field(*spec, "replicas")) {
    if (!r->is_number_integer() || r->get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      problems.Add("spec.replicas", "must be a 32-bit integer");
    } else if (r->get<int64_t>() < 0) {
      problems.Add("spec.replicas", "Invalid value: must be greater than or equal to 0");
      replicas = 0;
    } else {
      replicas = static_cast<int>(r->get<int64_t>());
    }
  }
  std::optional<kube::LabelSelector> selector =
      impl::NonEmptySelector(kube::Field(*spec, "selector"), "spec.selector",
                             "empty selector is invalid for cloneset", &problems);
  const std::set<std::string> vct_names = impl::CheckVolumeClaimTemplates(*spec, &problems);
  impl::CheckTemplate(*spec, selector, vct_names, &problems);
  impl::CheckScaleStrategy(*spec, replicas, &problems);
  impl::CheckUpdateStrategy(*spec, replicas, &problems);
  impl::CheckNonNegative(*spec, "revisionHistoryLimit", "spec.revisionHistoryLimit", &problems);
  impl::CheckNonNegative(*spec, "minReadySeconds", "spec.minReadySeconds", &problems);
  impl::CheckNonNegative(*spec, "progressDeadlineSeconds", "spec.progressDeadlineSeconds",
                         &problems);
  impl::CheckLifecycle(*spec, &problems);
  if (old_cs != nullptr) {
    const kube::Json* old_spec = kube::Field(*old_cs, "spec");
    impl::CheckUpdate(*spec, old_spec != nullptr ? *old_spec : kube::Json::object(), &problems);
  }
  return problems.Take();
}

absl::Status ValidateCloneSet(const kube::Json& cs, const kube::Json* old_cs) {
  return kube::FieldErrorsStatus(CloneSetProblems(cs, old_cs));
}

}  // namespace kruise::manager::cloneset
