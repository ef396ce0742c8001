#include "manager/sidecarset/sidecarset_admission.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kube/field_errors.h"
#include "kube/object.h"
#include "kube/pod_defaults.h"
#include "manager/workload/workload_admission.h"

namespace kruise::manager::sidecarset {
// Helpers in a named namespace, in case this library gains sibling sources that share its
// unity-build unit.
namespace admission_impl {
namespace {

using kube::Field;
using kube::Json;

constexpr char kRollingUpdate[] = "RollingUpdate";
constexpr char kNotUpdate[] = "NotUpdate";
constexpr char kBeforeApp[] = "BeforeAppContainer";
constexpr char kAfterApp[] = "AfterAppContainer";
constexpr char kColdUpgrade[] = "ColdUpgrade";
constexpr char kHotUpgrade[] = "HotUpgrade";
constexpr char kShareEnabled[] = "enabled";
constexpr char kShareDisabled[] = "disabled";
constexpr char kRevisionAlways[] = "Always";
constexpr char kRevisionPartial[] = "Partial";
constexpr char kPatchRetain[] = "Retain";
constexpr char kPatchOverwrite[] = "Overwrite";
constexpr char kPatchMergeJson[] = "MergePatchJson";

// ---- Defaulting ---------------------------------------------------------------------------------
// Every function below takes an object (callers check) and only adds members that are absent or
// null (Go's nil), or, for strings and the probe counters, empty/zero (Go cannot tell those apart
// from unset either).

using kube::json_defaults::Absent;
using kube::json_defaults::DefaultIfEmptyString;
using kube::json_defaults::DefaultIfUnset;
using kube::json_defaults::ExistingObject;
using kube::json_defaults::ForEachObject;
using kube::json_defaults::ObjectMember;

void DefaultSidecar(Json* c, const char* inject_policy) {
  DefaultIfEmptyString(c, "podInjectPolicy", inject_policy);
  if (Json* us = ObjectMember(c, "upgradeStrategy")) {
    DefaultIfEmptyString(us, "upgradeType", kColdUpgrade);
  }
  if (Json* svp = ObjectMember(c, "shareVolumePolicy")) {
    DefaultIfEmptyString(svp, "type", kShareDisabled);
  }
  ForEachObject(c, "transferEnv", [](Json* t) {
    if (Json* from = ExistingObject(t, "sourceContainerNameFrom")) kube::DefaultFieldRef(from);
  });
  // The core/v1 Container part (a sidecar's ports are not on the pod's host network here).
  const Json* image = Field(*c, "image");
  DefaultIfEmptyString(c, "imagePullPolicy",
                       kube::DefaultPullPolicy(image != nullptr ? *image : Json()));
  kube::DefaultContainerFields(c, /*host_network=*/false);
}

// ---- Validation helpers -------------------------------------------------------------------------

using Problems = kube::FieldErrors;
using workload::CheckBool;
using workload::CheckEnum;

// A value for a message; never throws (invalid UTF-8 is replaced).
std::string Show(const Json& v) { return v.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string At(const std::string& path, size_t i) { return absl::StrCat(path, "[", i, "]"); }

// A non-empty string member, or nullopt.
std::optional<std::string> NonEmptyString(const Json& obj, const char* key) {
  const Json* v = Field(obj, key);
  if (v == nullptr || !v->is_string() || v->get_ref<const std::string&>().empty()) {
    return std::nullopt;
  }
  return v->get<std::string>();
}

// Kubernetes' IsEnvVarName: [-._a-zA-Z][-._a-zA-Z0-9]*, not "." or "..", not starting with "..".
bool IsEnvVarName(const std::string& s) {
  if (s.empty() || s == "." || s == ".." || absl::StartsWith(s, "..")) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (!(absl::ascii_isalpha(c) || c == '-' || c == '.' || c == '_' ||
          (i > 0 && absl::ascii_isdigit(c)))) {
      return false;
    }
  }
  return true;
}

// A label key / annotation key / qualified name ("prefix/name"), through the selector grammar of
// kube::LabelSelector: OK or the reason.
absl::Status CheckQualifiedName(const std::string& name) {
  auto parsed = kube::LabelSelector::FromJson(
      Json{{"matchExpressions", Json::array({{{"key", name}, {"operator", "Exists"}}})}});
  return parsed.ok() ? absl::OkStatus() : parsed.status();
}

// A label selector that must be given, valid and non-empty (reported otherwise).
void CheckSelector(const Json* sel, const std::string& path, Problems* problems) {
  if (sel == nullptr) {
    problems->Add(path, "Required value: no selector defined for SidecarSet");
    return;
  }
  if (!sel->is_object()) {
    problems->Add(path, "Invalid value: must be a label selector object");
    return;
  }
  auto parsed = kube::LabelSelector::FromJson(*sel);
  if (!parsed.ok()) {
    problems->Add(path, absl::StrCat("Invalid value: ", parsed.status().message()));
  } else if (parsed->matches_everything()) {
    problems->Add(path, "Invalid value: empty selector is not valid for sidecarset");
  }
}

// An optional object member; reports a non-object. nullptr when absent or not an object.
const Json* OptionalObject(const Json& obj, const char* key, const std::string& path,
                           Problems* problems) {
  const Json* v = Field(obj, key);
  if (v == nullptr) return nullptr;
  if (!v->is_object()) {
    problems->Add(path, "must be an object");
    return nullptr;
  }
  return v;
}

// An optional list member; reports a non-list. nullptr when absent or not a list.
const Json* OptionalList(const Json& obj, const char* key, const std::string& path,
                         Problems* problems) {
  const Json* v = Field(obj, key);
  if (v == nullptr) return nullptr;
  if (!v->is_array()) {
    problems->Add(path, "must be a list");
    return nullptr;
  }
  return v;
}


// An IntOrString that must be a non-negative integer or "N%" with 0 <= N <= 100; returns whether
// it is non-zero (nullopt when invalid, reported).
std::optional<bool> CheckIntOrPercent(const Json& v, const std::string& path, Problems* problems) {
  std::optional<int> scaled = workload::IntOrPercent(v, 100, path, problems);
  if (!scaled) return std::nullopt;
  return *scaled != 0;
}

// ---- Validation ---------------------------------------------------------------------------------

// spec.volumes: the names, for the volume mounts to refer to.
std::set<std::string> CheckVolumes(const Json& spec, Problems* problems) {
  std::set<std::string> names;
  const Json* list = OptionalList(spec, "volumes", "spec.volumes", problems);
  if (list == nullptr) return names;
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& v = (*list)[i];
    const std::string path = At("spec.volumes", i);
    if (!v.is_object()) {
      problems->Add(path, "must be a volume object");
      continue;
    }
    auto name = NonEmptyString(v, "name");
    if (!name) {
      problems->Add(path + ".name", "Required value");
    } else if (!workload::IsDnsLabel(*name)) {
      problems->Add(path + ".name",
                    absl::StrCat("Invalid value: \"", *name, "\": must be a DNS-1123 label"));
    } else if (!names.insert(*name).second) {
      problems->Add(path + ".name", absl::StrCat("Duplicate value: \"", *name, "\""));
    }
    std::vector<std::string> sources;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it.key() != "name" && !it->is_null()) sources.push_back(it.key());
    }
    if (sources.size() > 1) {
      problems->Add(path, absl::StrCat("Forbidden: may not specify more than 1 volume type (",
                                       absl::StrJoin(sources, ", "), ")"));
    }
  }
  return names;
}

void CheckTransferEnv(const Json& c, const std::string& cpath, Problems* problems) {
  const std::string tpath = cpath + ".transferEnv";
  const Json* list = OptionalList(c, "transferEnv", tpath, problems);
  if (list == nullptr) return;
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& t = (*list)[i];
    const std::string path = At(tpath, i);
    if (!t.is_object()) {
      problems->Add(path, "must be an object");
      continue;
    }
    const Json* source_name = Field(t, "sourceContainerName");
    if (source_name != nullptr && !source_name->is_string()) {
      problems->Add(path + ".sourceContainerName", "must be a string");
    }
    bool has_source = NonEmptyString(t, "sourceContainerName").has_value();
    if (const Json* from = OptionalObject(t, "sourceContainerNameFrom",
                                          path + ".sourceContainerNameFrom", problems)) {
      const std::string fpath = path + ".sourceContainerNameFrom.fieldRef";
      const Json* ref = Field(*from, "fieldRef");
      if (ref == nullptr || !ref->is_object()) {
        problems->Add(fpath, "Required value: the pod field naming the source container");
      } else {
        has_source = true;
        const Json* api = Field(*ref, "apiVersion");
        if (api != nullptr && !(api->is_string() && (api->get_ref<const std::string&>() == "v1" ||
                                                     api->get_ref<const std::string&>().empty()))) {
          problems->Add(fpath + ".apiVersion", absl::StrCat("Unsupported value: ", Show(*api),
                                                            ": supported values: \"v1\""));
        }
        auto field_path = NonEmptyString(*ref, "fieldPath");
        if (!field_path) {
          problems->Add(fpath + ".fieldPath", "Required value");
        } else {
          const std::string& fp = *field_path;
          bool ok =
              fp == "metadata.name" || fp == "metadata.labels" || fp == "metadata.annotations";
          for (const char* prefix : {"metadata.labels['", "metadata.annotations['"}) {
            if (absl::StartsWith(fp, prefix) && absl::EndsWith(fp, "']") &&
                fp.size() > strlen(prefix) + 2) {
              std::string key = fp.substr(strlen(prefix), fp.size() - strlen(prefix) - 2);
              if (absl::StartsWith(prefix, "metadata.annotations"))
                key = absl::AsciiStrToLower(key);
              if (absl::Status st = CheckQualifiedName(key); st.ok()) {
                ok = true;
              } else {
                problems->Add(fpath + ".fieldPath",
                              absl::StrCat("Invalid value: \"", fp, "\": ", st.message()));
                ok = true;  // reported
              }
            }
          }
          if (!ok) {
            problems->Add(fpath + ".fieldPath",
                          absl::StrCat("Unsupported value: \"", fp,
                                       "\": supported values: \"metadata.name\", "
                                       "\"metadata.labels['<KEY>']\", "
                                       "\"metadata.annotations['<KEY>']\""));
          }
        }
      }
    }
    if (!has_source) {
      problems->Add(path,
                    "Required value: sourceContainerName or sourceContainerNameFrom.fieldRef");
    }
    bool has_env = false;
    if (const Json* name = Field(t, "envName")) {
      if (!name->is_string()) {
        problems->Add(path + ".envName", "must be a string");
      } else if (!name->get_ref<const std::string&>().empty()) {
        has_env = true;
        if (!IsEnvVarName(name->get<std::string>())) {
          problems->Add(path + ".envName", absl::StrCat("Invalid value: ", Show(*name),
                                                        ": not a valid environment variable name"));
        }
      }
    }
    if (const Json* names = OptionalList(t, "envNames", path + ".envNames", problems)) {
      for (size_t j = 0; j < names->size(); ++j) {
        const Json& n = (*names)[j];
        has_env = true;
        if (!n.is_string() || !IsEnvVarName(n.get<std::string>())) {
          problems->Add(
              At(path + ".envNames", j),
              absl::StrCat("Invalid value: ", Show(n), ": not a valid environment variable name"));
        }
      }
    }
    if (!has_env) problems->Add(path, "Required value: envName or envNames");
  }
}

void CheckResourcesPolicy(const Json& c, const std::string& cpath, Problems* problems) {
  const std::string path = cpath + ".resourcesPolicy";
  const Json* rp = OptionalObject(c, "resourcesPolicy", path, problems);
  if (rp == nullptr) return;
  const Json* mode = Field(*rp, "targetContainersMode");
  if (mode == nullptr || !mode->is_string() ||
      (mode->get_ref<const std::string&>() != "sum" &&
       mode->get_ref<const std::string&>() != "max")) {
    problems->Add(path + ".targetContainersMode",
                  absl::StrCat("Unsupported value: ", mode == nullptr ? "null" : Show(*mode),
                               ": supported values: \"sum\", \"max\""));
  }
  const Json* regex = Field(*rp, "targetContainersNameRegex");
  if (regex != nullptr && !regex->is_string()) {
    problems->Add(path + ".targetContainersNameRegex", "must be a string");
  }
  int expressions = 0;
  if (const Json* expr = OptionalObject(*rp, "resourcesExpr", path + ".resourcesExpr", problems)) {
    for (const char* kind : {"limits", "requests"}) {
      const std::string kpath = absl::StrCat(path, ".resourcesExpr.", kind);
      const Json* k = OptionalObject(*expr, kind, kpath, problems);
      if (k == nullptr) continue;
      for (const char* res : {"cpu", "memory"}) {
        const Json* e = Field(*k, res);
        if (e == nullptr) continue;
        if (!e->is_string()) {
          problems->Add(absl::StrCat(kpath, ".", res), "must be a string expression");
        } else if (!e->get_ref<const std::string&>().empty()) {
          ++expressions;
        }
      }
    }
  }
  if (expressions == 0) {
    problems->Add(path + ".resourcesExpr",
                  "Required value: at least one of limits/requests cpu/memory");
  }
  if (const Json* res = Field(c, "resources"); res != nullptr && res->is_object()) {
    for (const char* kind : {"limits", "requests"}) {
      const Json* k = Field(*res, kind);
      if (k != nullptr && k->is_object() && !k->empty()) {
        problems->Add(path, absl::StrCat("Forbidden: resourcesPolicy and resources.", kind,
                                         " cannot be used together"));
      }
    }
  }
}

struct SidecarNames {
  std::set<std::string> all;                             // containers and initContainers
  std::vector<std::pair<std::string, std::string>> hot;  // (name, path) of HotUpgrade sidecars
};

void CheckSidecars(const Json& spec, const char* key, bool init,
                   const std::set<std::string>& volumes, const std::string& update_type,
                   SidecarNames* names, Problems* problems) {
  const std::string lpath = absl::StrCat("spec.", key);
  const Json* list = OptionalList(spec, key, lpath, problems);
  if (list == nullptr) return;
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& c = (*list)[i];
    const std::string path = At(lpath, i);
    if (!c.is_object()) {
      problems->Add(path, "must be a container object");
      continue;
    }
    auto name = NonEmptyString(c, "name");
    if (!name) {
      problems->Add(path + ".name", "Required value");
    } else if (!workload::IsDnsLabel(*name)) {
      problems->Add(path + ".name",
                    absl::StrCat("Invalid value: \"", *name,
                                 "\": must be a DNS-1123 label (lower-case alphanumerics and '-', "
                                 "at most 63 characters)"));
    } else if (!names->all.insert(*name).second) {
      problems->Add(path + ".name", absl::StrCat("Duplicate value: \"", *name,
                                                 "\": container names must be unique across "
                                                 "containers and initContainers"));
    }
    auto image = NonEmptyString(c, "image");
    if (!image) problems->Add(path + ".image", "Required value");

    CheckEnum(c, "podInjectPolicy", path + ".podInjectPolicy", {kBeforeApp, kAfterApp}, problems);
    for (const char* policy : {"shareVolumePolicy", "shareVolumeDevicePolicy"}) {
      const std::string ppath = absl::StrCat(path, ".", policy);
      if (const Json* p = OptionalObject(c, policy, ppath, problems)) {
        CheckEnum(*p, "type", ppath + ".type", {kShareEnabled, kShareDisabled}, problems);
      }
    }
    if (const Json* us =
            OptionalObject(c, "upgradeStrategy", path + ".upgradeStrategy", problems)) {
      const std::string type = CheckEnum(*us, "upgradeType", path + ".upgradeStrategy.upgradeType",
                                         {kColdUpgrade, kHotUpgrade}, problems);
      const Json* empty_image = Field(*us, "hotUpgradeEmptyImage");
      if (empty_image != nullptr && !empty_image->is_string()) {
        problems->Add(path + ".upgradeStrategy.hotUpgradeEmptyImage", "must be a string");
      }
      if (type == kHotUpgrade) {
        auto empty = NonEmptyString(*us, "hotUpgradeEmptyImage");
        if (!empty) {
          problems->Add(
              path + ".upgradeStrategy.hotUpgradeEmptyImage",
              "Required value: a HotUpgrade sidecar needs the image of its idle container");
        } else if (image && *empty == *image) {
          problems->Add(path + ".upgradeStrategy.hotUpgradeEmptyImage",
                        absl::StrCat("Invalid value: \"", *empty,
                                     "\": must differ from the sidecar's image"));
        }
        if (name && workload::IsDnsLabel(*name)) {
          if (name->size() > 61) {
            problems->Add(path + ".name",
                          absl::StrCat("Invalid value: \"", *name,
                                       "\": a HotUpgrade sidecar runs as <name>-1 and <name>-2, "
                                       "so its name can have at most 61 characters"));
          } else {
            names->hot.emplace_back(*name, path + ".name");
          }
        }
      }
    }
    if (init) {
      if (const Json* rp = Field(c, "restartPolicy")) {
        if (!rp->is_string() || rp->get_ref<const std::string&>() != "Always") {
          problems->Add(path + ".restartPolicy", absl::StrCat("Unsupported value: ", Show(*rp),
                                                              ": supported values: \"Always\""));
        } else if (update_type == kRollingUpdate) {
          problems->Add("spec.updateStrategy",
                        absl::StrCat("Required value: ", path,
                                     " has restartPolicy Always (a native sidecar), which cannot "
                                     "be upgraded in place; use updateStrategy.type NotUpdate"));
        }
      }
    }
    if (const Json* ports = OptionalList(c, "ports", path + ".ports", problems)) {
      for (size_t p = 0; p < ports->size(); ++p) {
        const Json* cp = Field((*ports)[p], "containerPort");
        if (cp == nullptr || !cp->is_number_integer() || cp->get<int64_t>() < 1 ||
            cp->get<int64_t>() > 65535) {
          problems->Add(At(path + ".ports", p) + ".containerPort",
                        "Invalid value: must be between 1 and 65535, inclusive");
        }
      }
    }
    std::set<std::string> mount_paths;
    if (const Json* mounts = OptionalList(c, "volumeMounts", path + ".volumeMounts", problems)) {
      for (size_t m = 0; m < mounts->size(); ++m) {
        const Json& mount = (*mounts)[m];
        const std::string mpath = At(path + ".volumeMounts", m);
        auto vname = NonEmptyString(mount, "name");
        if (!vname) {
          problems->Add(mpath + ".name", "Required value");
        } else if (volumes.count(*vname) == 0) {
          problems->Add(mpath + ".name",
                        absl::StrCat("Not found: \"", *vname, "\": not a volume of spec.volumes"));
        }
        if (auto mp = NonEmptyString(mount, "mountPath")) {
          mount_paths.insert(*mp);
        } else {
          problems->Add(mpath + ".mountPath", "Required value");
        }
      }
    }
    if (const Json* devices = OptionalList(c, "volumeDevices", path + ".volumeDevices", problems)) {
      for (size_t d = 0; d < devices->size(); ++d) {
        const Json& dev = (*devices)[d];
        const std::string dpath = At(path + ".volumeDevices", d);
        auto vname = NonEmptyString(dev, "name");
        if (!vname) {
          problems->Add(dpath + ".name", "Required value");
        } else if (volumes.count(*vname) == 0) {
          problems->Add(dpath + ".name",
                        absl::StrCat("Not found: \"", *vname, "\": not a volume of spec.volumes"));
        }
        auto dev_path = NonEmptyString(dev, "devicePath");
        if (!dev_path) {
          problems->Add(dpath + ".devicePath", "Required value");
        } else if (mount_paths.count(*dev_path) != 0) {
          problems->Add(dpath + ".devicePath",
                        absl::StrCat("Invalid value: \"", *dev_path,
                                     "\": devicePath is already used as a volumeMount mountPath"));
        }
      }
    }
    CheckTransferEnv(c, path, problems);
    CheckResourcesPolicy(c, path, problems);
  }
}

// priorityStrategy and scatterStrategy: the rules every workload's update strategy shares.
void CheckPriorityStrategy(const Json& us, Problems* problems) {
  const Json* ps = Field(us, "priorityStrategy");
  if (ps == nullptr || ps->is_null()) return;
  workload::CheckPriorityStrategy(*ps, "spec.updateStrategy.priorityStrategy", problems);
}

void CheckScatterStrategy(const Json& us, Problems* problems) {
  const Json* ss = Field(us, "scatterStrategy");
  if (ss == nullptr || ss->is_null()) return;
  workload::CheckScatterStrategy(*ss, "spec.updateStrategy.scatterStrategy", problems);
}

// Returns the effective updateStrategy.type (RollingUpdate when absent).
std::string CheckUpdateStrategy(const Json& spec, Problems* problems) {
  const Json* us = OptionalObject(spec, "updateStrategy", "spec.updateStrategy", problems);
  if (us == nullptr) return kRollingUpdate;
  std::string type =
      CheckEnum(*us, "type", "spec.updateStrategy.type", {kRollingUpdate, kNotUpdate}, problems);
  if (type.empty()) type = kRollingUpdate;
  CheckBool(*us, "paused", "spec.updateStrategy.paused", problems);
  std::optional<bool> partition_set;
  if (const Json* p = Field(*us, "partition")) {
    partition_set = CheckIntOrPercent(*p, "spec.updateStrategy.partition", problems);
  }
  if (const Json* mu = Field(*us, "maxUnavailable")) {
    CheckIntOrPercent(*mu, "spec.updateStrategy.maxUnavailable", problems);
  }
  if (const Json* sel = Field(*us, "selector")) {
    CheckSelector(sel, "spec.updateStrategy.selector", problems);
    if (partition_set.value_or(false)) {
      problems->Add("spec.updateStrategy",
                    "Invalid value: partition and selector cannot be used together");
    }
  }
  CheckPriorityStrategy(*us, problems);
  CheckScatterStrategy(*us, problems);
  return type;
}

void CheckInjectionStrategy(const Json& spec, Problems* problems) {
  const std::string path = "spec.injectionStrategy";
  const Json* is = OptionalObject(spec, "injectionStrategy", path, problems);
  if (is == nullptr) return;
  CheckBool(*is, "paused", path + ".paused", problems);
  const Json* rev = OptionalObject(*is, "revision", path + ".revision", problems);
  if (rev == nullptr) return;
  bool named = false;
  for (const char* key : {"customVersion", "revisionName"}) {
    const Json* v = Field(*rev, key);
    if (v == nullptr) continue;
    if (!v->is_string() || v->get_ref<const std::string&>().empty()) {
      problems->Add(absl::StrCat(path, ".revision.", key),
                    absl::StrCat("Invalid value: ", Show(*v), ": must be a non-empty string"));
    }
    named = true;
  }
  if (!named) {
    problems->Add(path + ".revision",
                  "Required value: revisionName and customVersion cannot be empty simultaneously");
  }
  CheckEnum(*rev, "policy", path + ".revision.policy", {kRevisionAlways, kRevisionPartial},
            problems);
}

void CheckPatchPodMetadata(const Json& spec, Problems* problems) {
  const std::string lpath = "spec.patchPodMetadata";
  const Json* list = OptionalList(spec, "patchPodMetadata", lpath, problems);
  if (list == nullptr) return;
  std::map<std::string, std::string> keys;  // annotation key -> path of the entry that has it
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& patch = (*list)[i];
    const std::string path = At(lpath, i);
    if (!patch.is_object()) {
      problems->Add(path, "must be an object");
      continue;
    }
    const std::string policy =
        CheckEnum(patch, "patchPolicy", path + ".patchPolicy",
                  {kPatchRetain, kPatchOverwrite, kPatchMergeJson}, problems);
    const Json* ann = Field(patch, "annotations");
    if (ann == nullptr || (ann->is_object() && ann->empty())) {
      problems->Add(path + ".annotations", "Required value: no annotations defined for SidecarSet");
      continue;
    }
    if (!ann->is_object()) {
      problems->Add(path + ".annotations", "must be a map of annotation keys to values");
      continue;
    }
    for (auto it = ann->begin(); it != ann->end(); ++it) {
      const std::string kpath = absl::StrCat(path, ".annotations[", it.key(), "]");
      if (absl::Status st = CheckQualifiedName(it.key()); !st.ok()) {
        problems->Add(kpath, absl::StrCat("Invalid value: ", st.message()));
      }
      if (!it->is_string()) {
        problems->Add(kpath, "must be a string");
      } else if (policy == kPatchMergeJson) {
        Json parsed = Json::parse(it->get_ref<const std::string&>(), nullptr,
                                  /*allow_exceptions=*/false);
        if (!parsed.is_object()) {
          problems->Add(kpath, "Invalid value: a MergePatchJson value must be a JSON object");
        }
      }
      auto [prev, inserted] = keys.emplace(it.key(), path);
      if (!inserted) {
        problems->Add(kpath, absl::StrCat("Duplicate value: annotation \"", it.key(),
                                          "\" is already patched by ", prev->second));
      }
    }
  }
}

// UPDATE: a sidecar's upgradeType cannot change (when the stored object has one).
void CheckUpdate(const Json& spec, const Json& old_spec, Problems* problems) {
  for (const char* key : {"containers", "initContainers"}) {
    std::map<std::string, std::string> old_types;
    if (const Json* list = Field(old_spec, key); list != nullptr && list->is_array()) {
      for (const Json& c : *list) {
        auto name = NonEmptyString(c, "name");
        auto type =
            c.is_object() ? kube::GetString(c, {"upgradeStrategy", "upgradeType"}) : std::nullopt;
        if (name && type && !type->empty()) old_types[*name] = *type;
      }
    }
    const Json* list = Field(spec, key);
    if (list == nullptr || !list->is_array()) continue;
    for (size_t i = 0; i < list->size(); ++i) {
      const Json& c = (*list)[i];
      auto name = NonEmptyString(c, "name");
      if (!name) continue;
      auto old = old_types.find(*name);
      if (old == old_types.end()) continue;
      std::string type = kube::GetString(c, {"upgradeStrategy", "upgradeType"}).value_or("");
      if (type.empty()) type = kColdUpgrade;
      if (type != old->second) {
        problems->Add(At(absl::StrCat("spec.", key), i) + ".upgradeStrategy.upgradeType",
                      absl::StrCat("Invalid value: \"", type, "\": container ", *name,
                                   " upgradeType is immutable (was \"", old->second, "\")"));
      }
    }
  }
}

// ---- Conflicts with other SidecarSets -----------------------------------------------------------

constexpr char kAllValues[] = "*";  // "any value" (a key required to exist; not a label value)

// OpenKruise's isDisjoint(a, b): a's keys pinned to values (matchLabels, In) or to any value
// (Exists), then b's requirements checked against them.
bool SelectorDisjoint(const Json& a, const Json& b) {
  std::map<std::string, std::set<std::string>> pinned;
  if (const Json* ml = Field(a, "matchLabels"); ml != nullptr && ml->is_object()) {
    for (auto it = ml->begin(); it != ml->end(); ++it) {
      if (it->is_string()) pinned[it.key()] = {it->get<std::string>()};
    }
  }
  if (const Json* me = Field(a, "matchExpressions"); me != nullptr && me->is_array()) {
    for (const Json& r : *me) {
      auto key = kube::GetString(r, {"key"});
      auto op = kube::GetString(r, {"operator"});
      if (!key || !op) continue;
      if (*op == "In") {
        if (const Json* vs = Field(r, "values"); vs != nullptr && vs->is_array()) {
          for (const Json& v : *vs) {
            if (v.is_string()) pinned[*key].insert(v.get<std::string>());
          }
        }
      } else if (*op == "Exists") {
        pinned[*key] = {kAllValues};
      }
    }
  }
  auto any = [](const std::set<std::string>& s) { return s.count(kAllValues) != 0; };
  if (const Json* ml = Field(b, "matchLabels"); ml != nullptr && ml->is_object()) {
    for (auto it = ml->begin(); it != ml->end(); ++it) {
      auto p = pinned.find(it.key());
      if (p != pinned.end() && it->is_string() && !any(p->second) &&
          p->second.count(it->get<std::string>()) == 0) {
        return true;
      }
    }
  }
  if (const Json* me = Field(b, "matchExpressions"); me != nullptr && me->is_array()) {
    for (const Json& r : *me) {
      auto key = kube::GetString(r, {"key"});
      auto op = kube::GetString(r, {"operator"});
      if (!key || !op) continue;
      std::set<std::string> values;
      if (const Json* vs = Field(r, "values"); vs != nullptr && vs->is_array()) {
        for (const Json& v : *vs) {
          if (v.is_string()) values.insert(v.get<std::string>());
        }
      }
      auto p = pinned.find(*key);
      const bool known = p != pinned.end();
      if (*op == "In") {
        if (known && !any(p->second)) {
          bool common = false;
          for (const std::string& v : values) common = common || p->second.count(v) != 0;
          if (!common) return true;
        }
      } else if (*op == "NotIn") {
        if (known) {
          bool all_excluded = true;
          for (const std::string& v : p->second)
            all_excluded = all_excluded && values.count(v) != 0;
          if (all_excluded) return true;
        }
      } else if (*op == "Exists") {
        if (!known) return true;  // OpenKruise's approximation
      } else if (*op == "DoesNotExist") {
        if (known) return true;
      }
    }
  }
  return false;
}

bool SelectorOverlap(const Json& a, const Json& b) {
  if (!a.is_object() || !b.is_object()) return false;
  return !(SelectorDisjoint(a, b) || SelectorDisjoint(b, a));
}

std::string NamespaceOf(const Json& spec) {
  auto ns = kube::GetString(spec, {"namespace"});
  return ns.value_or("");
}

// Whether a namespace may be selected by `sel`: its labels when known, else yes.
bool NamespaceMaySelect(const std::string& ns, const Json& sel, const NamespaceLabelsFn& labels) {
  if (!labels) return true;
  std::optional<std::map<std::string, std::string>> l = labels(ns);
  if (!l) return true;
  auto parsed = kube::LabelSelector::FromJson(sel);
  return !parsed.ok() || parsed->Matches(*l);
}

bool NamespacesMayOverlap(const Json& a, const Json& b, const NamespaceLabelsFn& labels) {
  const std::string na = NamespaceOf(a), nb = NamespaceOf(b);
  const Json* sa = Field(a, "namespaceSelector");
  const Json* sb = Field(b, "namespaceSelector");
  if (!na.empty() && !nb.empty() && na != nb) return false;
  if (sa != nullptr && sb != nullptr && !SelectorOverlap(*sa, *sb)) return false;
  if (!na.empty() && sb != nullptr && !NamespaceMaySelect(na, *sb, labels)) return false;
  if (!nb.empty() && sa != nullptr && !NamespaceMaySelect(nb, *sa, labels)) return false;
  return true;
}

std::string PatchPolicyOf(const Json& patch) {
  std::string p = kube::GetString(patch, {"patchPolicy"}).value_or("");
  return p.empty() ? kPatchRetain : p;
}

void ConflictsWith(const Json& spec, const Json& other, const std::string& other_name,
                   Problems* problems) {
  const Json& other_spec = *Field(other, "spec");
  for (const char* key : {"initContainers", "containers"}) {
    std::set<std::string> theirs;
    if (const Json* l = Field(other_spec, key); l != nullptr && l->is_array()) {
      for (const Json& c : *l) {
        if (auto n = NonEmptyString(c, "name")) theirs.insert(*n);
      }
    }
    const Json* mine = Field(spec, key);
    if (mine == nullptr || !mine->is_array()) continue;
    for (size_t i = 0; i < mine->size(); ++i) {
      auto n = NonEmptyString((*mine)[i], "name");
      if (n && theirs.count(*n) != 0) {
        problems->Add(At(absl::StrCat("spec.", key), i) + ".name",
                      absl::StrCat("Invalid value: \"", *n, "\": container ", *n,
                                   " already exists in sidecarset ", other_name));
      }
    }
  }
  std::map<std::string, const Json*> their_volumes;
  if (const Json* l = Field(other_spec, "volumes"); l != nullptr && l->is_array()) {
    for (const Json& v : *l) {
      if (auto n = NonEmptyString(v, "name")) their_volumes[*n] = &v;
    }
  }
  if (const Json* mine = Field(spec, "volumes"); mine != nullptr && mine->is_array()) {
    for (size_t i = 0; i < mine->size(); ++i) {
      auto n = NonEmptyString((*mine)[i], "name");
      if (!n) continue;
      auto theirs = their_volumes.find(*n);
      if (theirs != their_volumes.end() && *theirs->second != (*mine)[i]) {
        problems->Add(At("spec.volumes", i) + ".name",
                      absl::StrCat("Invalid value: \"", *n, "\": volume ", *n,
                                   " is in conflict with sidecarset ", other_name));
      }
    }
  }
  std::map<std::string, std::string> their_annotations;  // key -> policy (not Retain)
  if (const Json* l = Field(other_spec, "patchPodMetadata"); l != nullptr && l->is_array()) {
    for (const Json& p : *l) {
      const std::string policy = PatchPolicyOf(p);
      const Json* ann = Field(p, "annotations");
      if (policy == kPatchRetain || ann == nullptr || !ann->is_object()) continue;
      for (auto it = ann->begin(); it != ann->end(); ++it) their_annotations[it.key()] = policy;
    }
  }
  if (const Json* l = Field(spec, "patchPodMetadata"); l != nullptr && l->is_array()) {
    for (size_t i = 0; i < l->size(); ++i) {
      const std::string policy = PatchPolicyOf((*l)[i]);
      const Json* ann = Field((*l)[i], "annotations");
      if (policy == kPatchRetain || ann == nullptr || !ann->is_object()) continue;
      for (auto it = ann->begin(); it != ann->end(); ++it) {
        auto theirs = their_annotations.find(it.key());
        if (theirs == their_annotations.end()) continue;
        if (policy == kPatchOverwrite || theirs->second == kPatchOverwrite) {
          problems->Add(
              absl::StrCat(At("spec.patchPodMetadata", i), ".annotations[", it.key(), "]"),
              absl::StrCat("Invalid value: annotation ", it.key(),
                           " is in conflict with sidecarset ", other_name));
        }
      }
    }
  }
}
}  // namespace
}  // namespace admission_impl

namespace {

nlohmann::json DefaultsOf(const nlohmann::json& ss) {
  namespace impl = admission_impl;
  kube::Json out = ss;
  if (!out.is_object()) return out;
  kube::Json* spec = impl::ObjectMember(&out, "spec");
  if (spec == nullptr) return out;
  if (kube::Json* us = impl::ObjectMember(spec, "updateStrategy")) {
    impl::DefaultIfEmptyString(us, "type", impl::kRollingUpdate);
    impl::DefaultIfUnset(us, "partition", 0);
    impl::DefaultIfUnset(us, "maxUnavailable", 1);
  }
  if (kube::Json* is = impl::ObjectMember(spec, "injectionStrategy")) {
    if (kube::Json* rev = impl::ExistingObject(is, "revision")) {
      impl::DefaultIfEmptyString(rev, "policy", impl::kRevisionAlways);
    }
  }
  impl::ForEachObject(spec, "initContainers",
                      [](kube::Json* c) { impl::DefaultSidecar(c, impl::kAfterApp); });
  impl::ForEachObject(spec, "containers",
                      [](kube::Json* c) { impl::DefaultSidecar(c, impl::kBeforeApp); });
  impl::ForEachObject(spec, "volumes", kube::DefaultVolumeFields);
  impl::DefaultIfUnset(spec, "revisionHistoryLimit", 10);
  impl::ForEachObject(spec, "patchPodMetadata", [](kube::Json* patch) {
    impl::DefaultIfEmptyString(patch, "patchPolicy", impl::kPatchRetain);
  });
  return out;
}

}  // namespace

nlohmann::json DefaultSidecarSet(const nlohmann::json& ss) {
  try {
    return DefaultsOf(ss);
  } catch (const nlohmann::json::exception&) {
    return ss;  // left for validation to report
  }
}

namespace {

std::vector<std::string> ProblemsOf(const nlohmann::json& ss, const nlohmann::json* old_ss) {
  namespace impl = admission_impl;
  impl::Problems problems;
  if (const kube::Json* name = kube::FindPath(ss, {"metadata", "name"});
      name != nullptr && name->is_string() && !name->get_ref<const std::string&>().empty()) {
    const std::string& n = name->get_ref<const std::string&>();
    bool ok = n.size() <= 63;
    for (char c : n) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-') ok = false;
    }
    if (!ok) {
      problems.Add("metadata.name",
                   absl::StrCat("Invalid value: \"", n,
                                "\": sidecarset name must consist of alphanumeric characters or "
                                "'-', at most 63 characters"));
    }
  }
  const kube::Json* spec = kube::Field(ss, "spec");
  if (spec == nullptr || !spec->is_object()) {
    problems.Add("spec", "Required value");
    return problems.Take();
  }
  impl::CheckSelector(kube::Field(*spec, "selector"), "spec.selector", &problems);
  const kube::Json* ns = kube::Field(*spec, "namespace");
  const bool has_namespace =
      ns != nullptr && !(ns->is_string() && ns->get_ref<const std::string&>().empty());
  if (has_namespace && (!ns->is_string() || !workload::IsDnsLabel(ns->get<std::string>()))) {
    problems.Add("spec.namespace",
                 absl::StrCat("Invalid value: ", impl::Show(*ns), ": must be a namespace name"));
  }
  if (const kube::Json* nss = kube::Field(*spec, "namespaceSelector")) {
    if (has_namespace) {
      problems.Add("spec.namespaceSelector",
                   "Forbidden: namespace and namespaceSelector are mutually exclusive");
    } else {
      impl::CheckSelector(nss, "spec.namespaceSelector", &problems);
    }
  }
  if (const kube::Json* cv = kube::Field(*spec, "customVersion");
      cv != nullptr && !cv->is_string()) {
    problems.Add("spec.customVersion", "must be a string");
  }
  const std::string update_type = impl::CheckUpdateStrategy(*spec, &problems);
  impl::CheckInjectionStrategy(*spec, &problems);
  const std::set<std::string> volumes = impl::CheckVolumes(*spec, &problems);

  const kube::Json* containers = kube::Field(*spec, "containers");
  const kube::Json* init_containers = kube::Field(*spec, "initContainers");
  auto empty = [](const kube::Json* l) { return l == nullptr || (l->is_array() && l->empty()); };
  if (empty(containers) && empty(init_containers)) {
    problems.Add("spec", "Required value: no initContainer or container defined for SidecarSet");
  }
  impl::SidecarNames names;
  impl::CheckSidecars(*spec, "initContainers", true, volumes, update_type, &names, &problems);
  impl::CheckSidecars(*spec, "containers", false, volumes, update_type, &names, &problems);
  for (const auto& [name, path] : names.hot) {
    for (const char* suffix : {"-1", "-2"}) {
      if (names.all.count(name + suffix) != 0) {
        problems.Add(path, absl::StrCat("Invalid value: \"", name, "\": the HotUpgrade sidecar's ",
                                        name, suffix, " clashes with another container's name"));
      }
    }
  }

  if (const kube::Json* secrets =
          impl::OptionalList(*spec, "imagePullSecrets", "spec.imagePullSecrets", &problems)) {
    for (size_t i = 0; i < secrets->size(); ++i) {
      if (!impl::NonEmptyString((*secrets)[i], "name")) {
        problems.Add(impl::At("spec.imagePullSecrets", i) + ".name", "Required value");
      }
    }
  }
  if (const kube::Json* rhl = kube::Field(*spec, "revisionHistoryLimit")) {
    if (!rhl->is_number_integer() || rhl->get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      problems.Add("spec.revisionHistoryLimit", "must be a 32-bit integer");
    } else if (rhl->get<int64_t>() < 0) {
      problems.Add("spec.revisionHistoryLimit",
                   "Invalid value: must be greater than or equal to 0");
    }
  }
  impl::CheckPatchPodMetadata(*spec, &problems);
  if (old_ss != nullptr) {
    const kube::Json* old_spec = kube::Field(*old_ss, "spec");
    impl::CheckUpdate(*spec, old_spec != nullptr ? *old_spec : kube::Json::object(), &problems);
  }
  return problems.Take();
}

}  // namespace

std::vector<std::string> SidecarSetProblems(const nlohmann::json& ss,
                                            const nlohmann::json* old_ss) {
  // The checks never throw on well-formed JSON; a helper that formats an odd value (a string that
  // is not UTF-8, which no parsed request holds) must not take the webhook down either.
  try {
    return ProblemsOf(ss, old_ss);
  } catch (const nlohmann::json::exception& e) {
    return {absl::StrCat("spec: Invalid value: the object cannot be checked: ", e.what())};
  }
}

std::vector<std::string> SidecarSetConflicts(const nlohmann::json& ss,
                                             const std::vector<nlohmann::json>& others,
                                             const NamespaceLabelsFn& namespace_labels) {
  namespace impl = admission_impl;
  impl::Problems problems;
  try {
    const kube::Json* spec = kube::Field(ss, "spec");
    if (spec == nullptr || !spec->is_object()) return {};
    const kube::Json* selector = kube::Field(*spec, "selector");
    if (selector == nullptr) return {};
    const std::string name = kube::Name(ss);
    for (const kube::Json& other : others) {
      const kube::Json* other_spec = kube::Field(other, "spec");
      const std::string other_name = kube::Name(other);
      if (other_spec == nullptr || !other_spec->is_object() || other_name == name) continue;
      const kube::Json* other_selector = kube::Field(*other_spec, "selector");
      if (other_selector == nullptr || !impl::SelectorOverlap(*selector, *other_selector) ||
          !impl::NamespacesMayOverlap(*spec, *other_spec, namespace_labels)) {
        continue;
      }
      impl::ConflictsWith(*spec, other, other_name, &problems);
    }
  } catch (const nlohmann::json::exception& e) {
    problems.Add("spec", absl::StrCat("Invalid value: conflicts cannot be checked: ", e.what()));
  }
  return problems.Take();
}

bool SelectorsMayOverlap(const nlohmann::json& a, const nlohmann::json& b) {
  try {
    return admission_impl::SelectorOverlap(a, b);
  } catch (const nlohmann::json::exception&) {
    return true;
  }
}

absl::Status ValidateSidecarSet(const nlohmann::json& ss, const nlohmann::json* old_ss) {
  return kube::FieldErrorsStatus(SidecarSetProblems(ss, old_ss));
}

}  // namespace kruise::manager::sidecarset
