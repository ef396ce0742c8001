#include "manager/workload/workload_admission.h"

#include <set>
#include <string>
#include <vector>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kube/pod_defaults.h"

namespace kruise::manager::workload {
namespace {

using kube::Field;
using kube::FieldErrors;
using kube::Json;
using kube::json_defaults::DefaultIfEmptyString;
using kube::json_defaults::DefaultIfUnset;
using kube::json_defaults::ExistingObject;
using kube::json_defaults::ForEachObject;
using kube::json_defaults::ObjectMember;

// Every function below takes an object (callers check) and only adds members that are absent or
// null (Go's nil), or, for strings and the probe counters, empty/zero (Go cannot tell those from
// unset either).
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

std::string Idx(const std::string& path, size_t i) { return absl::StrCat(path, "[", i, "]"); }

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

bool IsLabelChar(char c) {
  return absl::ascii_islower(static_cast<unsigned char>(c)) ||
         absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '-';
}

void CheckContainers(const Json& pod_spec, const char* key, bool required,
                     const std::set<std::string>& volume_names, std::set<std::string>* names,
                     FieldErrors* problems) {
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

// The template's pod spec without container images, normalised.
Json PodSpecWithoutImages(const Json& spec) {
  const Json* ps = kube::FindPath(spec, {"template", "spec"});
  Json out = ps != nullptr ? *ps : Json::object();
  if (out.is_object()) {
    auto containers = out.find("containers");
    if (containers != out.end() && containers->is_array()) {
      for (Json& c : *containers) {
        if (c.is_object()) c.erase("image");
      }
    }
  }
  return kube::SemanticNormalized(out);
}

}  // namespace

// ---- Defaulting -----------------------------------------------------------------------------

kube::Json DefaultPodSpec(const kube::Json& pod_spec) {
  kube::Json out = pod_spec;
  if (out.is_object()) DefaultPodSpecInPlace(&out);
  return out;
}

void DefaultTemplates(kube::Json* spec) {
  if (spec == nullptr || !spec->is_object()) return;
  if (Json* tmpl = ExistingObject(spec, "template")) {
    if (Json* pod_spec = ExistingObject(tmpl, "spec")) DefaultPodSpecInPlace(pod_spec);
  }
  ForEachObject(spec, "volumeClaimTemplates", [](Json* pvc) {
    if (Json* pvc_spec = ObjectMember(pvc, "spec")) {
      DefaultIfUnset(pvc_spec, "volumeMode", "Filesystem");
    }
  });
}

bool ShouldInjectTemplateDefaults(const kube::Json& obj, const kube::Json* old_obj) {
  if (old_obj == nullptr || !old_obj->is_object()) return true;
  const Json* now = kube::FindPath(obj, {"spec", "template"});
  const Json* before = kube::FindPath(*old_obj, {"spec", "template"});
  if (now == nullptr || before == nullptr) return now != before;
  return *now != *before;
}

// ---- Field checks ---------------------------------------------------------------------------

bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!IsLabelChar(c)) return false;
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
      if (!IsLabelChar(c)) return false;
    }
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

void CheckObjectName(const kube::Json& obj, kube::FieldErrors* problems) {
  const Json* name = kube::FindPath(obj, {"metadata", "name"});
  if (name != nullptr && name->is_string() && !name->get_ref<const std::string&>().empty() &&
      !IsDnsSubdomain(name->get<std::string>())) {
    problems->Add("metadata.name", absl::StrCat("Invalid value: \"", name->get<std::string>(),
                                                "\": must be a DNS-1123 subdomain"));
  }
}

void CheckIntRange(const kube::Json& obj, const char* key, const std::string& path,
                   kube::FieldErrors* problems, int64_t max, const char* max_message) {
  const Json* v = Field(obj, key);
  if (v == nullptr) return;
  if (!v->is_number_integer()) {
    problems->Add(path, absl::StrCat("Invalid value: ", v->dump(), ": must be an integer"));
  } else if (v->get<int64_t>() < 0) {
    problems->Add(
        path, absl::StrCat("Invalid value: ", v->dump(), ": must be greater than or equal to 0"));
  } else if (v->get<int64_t>() > max) {
    problems->Add(path, absl::StrCat("Invalid value: ", v->dump(), ": ", max_message));
  }
}

void CheckBool(const kube::Json& obj, const char* key, const std::string& path,
               kube::FieldErrors* problems) {
  const Json* v = Field(obj, key);
  if (v != nullptr && !v->is_boolean()) problems->Add(path, "Invalid value: must be a boolean");
}

std::string CheckEnum(const kube::Json& obj, const char* key, const std::string& path,
                      std::initializer_list<const char*> allowed, kube::FieldErrors* problems) {
  const Json* v = Field(obj, key);
  if (v == nullptr || (v->is_string() && v->get_ref<const std::string&>().empty())) return "";
  if (v->is_string()) {
    for (const char* a : allowed) {
      if (v->get_ref<const std::string&>() == a) return a;
    }
  }
  std::vector<std::string> quoted;
  for (const char* a : allowed) quoted.push_back(absl::StrCat("\"", a, "\""));
  // A value for the message never throws: invalid UTF-8 is replaced.
  problems->Add(path, absl::StrCat("Unsupported value: ",
                                   v->dump(-1, ' ', false, Json::error_handler_t::replace),
                                   ": supported values: ", absl::StrJoin(quoted, ", ")));
  return "";
}

std::optional<int> IntOrPercent(const kube::Json& v, int total, const std::string& path,
                                kube::FieldErrors* problems) {
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

std::optional<kube::LabelSelector> NonEmptySelector(const kube::Json* sel, const std::string& path,
                                                    const std::string& empty_message,
                                                    kube::FieldErrors* problems) {
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

// ---- The parts of a workload spec -----------------------------------------------------------

std::set<std::string> CheckVolumeClaimTemplates(const kube::Json& spec,
                                                kube::FieldErrors* problems) {
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

void CheckTemplate(const kube::Json& spec, const std::optional<kube::LabelSelector>& selector,
                   const std::set<std::string>& vct_names, const std::string& kind,
                   kube::FieldErrors* problems) {
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
                  absl::StrCat("Forbidden: activeDeadlineSeconds in ", kind, " is not Supported"));
  }
}

void CheckLifecycle(const kube::Json& spec, kube::FieldErrors* problems) {
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

void CheckPriorityStrategy(const kube::Json& ps, const std::string& path,
                           kube::FieldErrors* problems) {
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

void CheckScatterStrategy(const kube::Json& ss, const std::string& path,
                          kube::FieldErrors* problems) {
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

void CheckInPlaceUpdateStrategy(const kube::Json& ips, const std::string& path,
                                kube::FieldErrors* problems) {
  if (!ips.is_object()) {
    problems->Add(path, "must be an object");
    return;
  }
  CheckIntRange(ips, "gracePeriodSeconds", path + ".gracePeriodSeconds", problems);
}

bool TemplateChangesBeyondImages(const kube::Json& old_spec, const kube::Json& new_spec) {
  return PodSpecWithoutImages(old_spec) != PodSpecWithoutImages(new_spec);
}

}  // namespace kruise::manager::workload
