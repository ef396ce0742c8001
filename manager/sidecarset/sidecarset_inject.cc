#include "manager/sidecarset/sidecarset_inject.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "kube/object.h"
#include "manager/sidecarset/sidecarset_admission.h"
#include "nlohmann/json.hpp"

namespace kruise::manager::sidecarset {
namespace {
// A named namespace of its own: this file shares a unity-build unit with sidecarset_admission.cc.
namespace inject_impl {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;
using kube::Field;

constexpr char kMetadataNameLabel[] = "kubernetes.io/metadata.name";
// Members of a SidecarContainer that are not a core Container's.
constexpr const char* kSidecarOnlyFields[] = {"podInjectPolicy",   "upgradeStrategy",
                                              "shareVolumePolicy", "shareVolumeDevicePolicy",
                                              "transferEnv",       "resourcesPolicy"};

std::string StrOf(const Json* j) {
  return j != nullptr && j->is_string() ? j->get<std::string>() : "";
}
std::string StrAt(const Json& obj, const char* key) { return StrOf(Field(obj, key)); }

// ---- Hash

// Go-omitempty-like canonical form: null, "", [] and {} members dropped, integral floats as
// integers; keys come out sorted (nlohmann::json objects are ordered maps).
Json Canonical(const Json& j) {
  if (j.is_object()) {
    Json out = Json::object();
    for (auto it = j.begin(); it != j.end(); ++it) {
      Json v = Canonical(it.value());
      if (v.is_null() || (v.is_string() && v.get_ref<const std::string&>().empty()) ||
          ((v.is_array() || v.is_object()) && v.empty())) {
        continue;
      }
      out[it.key()] = std::move(v);
    }
    return out;
  }
  if (j.is_array()) {
    Json out = Json::array();
    for (const Json& e : j) out.push_back(Canonical(e));
    return out;
  }
  if (j.is_number_float()) {
    const double d = j.get<double>();
    if (std::isfinite(d) && std::trunc(d) == d && std::fabs(d) < 9.0e15) {
      return Json(static_cast<int64_t>(d));
    }
  }
  return j;
}

// Kubernetes' rand.SafeEncodeString: each byte mapped onto an alphabet without vowels.
std::string SafeEncode(const std::string& s) {
  static constexpr char kAlphanums[] = "bcdfghjklmnpqrstvwxz2456789";
  constexpr size_t kLen = sizeof(kAlphanums) - 1;
  std::string out(s.size(), 'b');
  for (size_t i = 0; i < s.size(); ++i) {
    out[i] = kAlphanums[static_cast<unsigned char>(s[i]) % kLen];
  }
  return out;
}

std::string Sha256Hex(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr) != 1) return "";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 0xf]);
  }
  return out;
}

bool IsNativeSidecar(const Json& c) {
  return c.is_object() && StrAt(c, "restartPolicy") == "Always";
}

// The hash of a set DefaultSidecarSet already went through.
std::string HashOfDefaulted(const Json& defaulted, bool without_image) {
  const Json* dspec_p = Field(defaulted, "spec");
  if (dspec_p == nullptr || !dspec_p->is_object()) return "";
  const Json& dspec = *dspec_p;
  auto list = [&](const char* key) {
    const Json* l = Field(dspec, key);
    Json out = l != nullptr && l->is_array() ? *l : Json::array();
    if (without_image) {
      for (Json& c : out) {
        if (c.is_object()) c.erase("image");
      }
    }
    return out;
  };
  Json m = Json::object();
  m["containers"] = list("containers");
  Json init = list("initContainers");
  if (std::any_of(init.begin(), init.end(), IsNativeSidecar)) m["initContainers"] = init;
  const std::string encoded = Canonical(m).dump(-1, ' ', false, Json::error_handler_t::replace);
  return SafeEncode(Sha256Hex(encoded));
}

std::string HashOf(const Json& ss, bool without_image) {
  const Json* spec = Field(ss, "spec");
  if (spec == nullptr || !spec->is_object()) return "";
  return HashOfDefaulted(DefaultSidecarSet(ss), without_image);
}

// The recorded hash (annotation first) of a defaulted set.
std::string RecordedHashOfDefaulted(const Json& defaulted, const char* annotation,
                                    bool without_image) {
  std::optional<std::string> a = kube::Annotation(defaulted, annotation);
  return a && !a->empty() ? *a : HashOfDefaulted(defaulted, without_image);
}

// ---- Injection

// A pod container's env, by name (the last of a name wins, as a Go map fill does); pointers into
// the pod.
using EnvIndex = std::map<std::string, std::map<std::string, const Json*>>;

struct PodView {
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;  // after patchPodMetadata
  EnvIndex envs;
  std::vector<const Json*> app_containers;
};

bool HasEnvValue(const Json& c, const char* name, const char* value) {
  const Json* env = Field(c, "env");
  if (env == nullptr || !env->is_array()) return false;
  for (const Json& e : *env) {
    if (e.is_object() && StrAt(e, "name") == name) return StrAt(e, "value") == value;
  }
  return false;
}

bool HasNamed(const Json& list, const char* key, const std::string& value) {
  return std::any_of(list.begin(), list.end(),
                     [&](const Json& e) { return e.is_object() && StrAt(e, key) == value; });
}

// Appends `item` to the array `list` unless an element has the same `key`.
void AddUnique(Json* list, const char* key, const Json& item) {
  if (!HasNamed(*list, key, StrAt(item, key))) list->push_back(item);
}

// The variable names $(NAME) in a subPathExpr.
std::vector<std::string> SubPathExprVars(const std::string& expr) {
  auto first_ok = [](char c) {
    return c == '-' || c == '.' || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  };
  std::vector<std::string> out;
  for (size_t i = 0; i + 1 < expr.size(); ++i) {
    if (expr[i] != '$' || expr[i + 1] != '(') continue;
    size_t j = i + 2;
    if (j >= expr.size() || !first_ok(expr[j])) continue;
    while (j < expr.size() && (first_ok(expr[j]) || (expr[j] >= '0' && expr[j] <= '9'))) ++j;
    if (j < expr.size() && expr[j] == ')') {
      out.push_back(expr.substr(i + 2, j - i - 2));
      i = j;
    }
  }
  return out;
}

// metadata.labels['k'] / metadata.annotations['k'] of the pod; nullopt when unsupported.
std::optional<std::string> FieldRefValue(const std::string& path, const PodView& pod) {
  auto subscript = [&](const std::string& prefix) -> std::optional<std::string> {
    if (path.size() < prefix.size() + 4 || path.compare(0, prefix.size(), prefix) != 0) {
      return std::nullopt;
    }
    const std::string rest = path.substr(prefix.size());
    if (rest.size() < 4 || rest.front() != '[' || rest.back() != ']') return std::nullopt;
    const char q = rest[1];
    if ((q != '\'' && q != '"') || rest[rest.size() - 2] != q) return std::nullopt;
    return rest.substr(2, rest.size() - 4);
  };
  if (auto k = subscript("metadata.labels")) {
    auto it = pod.labels.find(*k);
    return it == pod.labels.end() ? "" : it->second;
  }
  if (auto k = subscript("metadata.annotations")) {
    auto it = pod.annotations.find(*k);
    return it == pod.annotations.end() ? "" : it->second;
  }
  return std::nullopt;
}

Json EnvVar(const std::string& name, const std::string& value) {
  return Json{{"name", name}, {"value", value}};
}

Json AnnotationEnv(const std::string& name, const std::string& annotation) {
  return Json{
      {"name", name},
      {"valueFrom",
       {{"fieldRef", {{"fieldPath", absl::StrCat("metadata.annotations['", annotation, "']")}}}}}};
}

std::string VersionAnnotation(const std::string& c) {
  return absl::StrCat("version.sidecarset.kruise.io/", c);
}
std::string VersionAltAnnotation(const std::string& c) {
  return absl::StrCat("versionalt.sidecarset.kruise.io/", c);
}

// The core container injected for sidecar `sc` of set `set_name`.
Json BuildContainer(const Json& sc, const std::string& set_name, const PodView& pod,
                    std::vector<std::string>* notes) {
  Json c = sc;
  for (const char* f : kSidecarOnlyFields) c.erase(f);
  const std::string name = StrAt(sc, "name");

  // Shared mounts and devices of the app containers; env vars their subPathExpr uses.
  std::vector<Json> shared_env;
  if (kube::GetString(sc, {"shareVolumePolicy", "type"}).value_or("") == "enabled") {
    Json* mounts = &c["volumeMounts"];
    if (!mounts->is_array()) *mounts = Json::array();
    for (const Json* app : pod.app_containers) {
      const Json* am = Field(*app, "volumeMounts");
      if (am == nullptr || !am->is_array()) continue;
      for (const Json& m : *am) {
        if (!m.is_object()) continue;
        AddUnique(mounts, "mountPath", m);
        for (const std::string& var : SubPathExprVars(StrAt(m, "subPathExpr"))) {
          auto envs = pod.envs.find(StrAt(*app, "name"));
          if (envs == pod.envs.end()) continue;
          if (auto e = envs->second.find(var); e != envs->second.end()) {
            shared_env.push_back(*e->second);
          }
        }
      }
    }
    if (mounts->empty()) c.erase("volumeMounts");
  }
  if (kube::GetString(sc, {"shareVolumeDevicePolicy", "type"}).value_or("") == "enabled") {
    Json* devices = &c["volumeDevices"];
    if (!devices->is_array()) *devices = Json::array();
    for (const Json* app : pod.app_containers) {
      const Json* ad = Field(*app, "volumeDevices");
      if (ad == nullptr || !ad->is_array()) continue;
      for (const Json& d : *ad) {
        if (d.is_object()) AddUnique(devices, "devicePath", d);
      }
    }
    if (devices->empty()) c.erase("volumeDevices");
  }

  Json* env = &c["env"];
  if (!env->is_array()) *env = Json::array();
  AddUnique(env, "name", EnvVar(kSidecarInjectedEnv, "true"));
  if (const Json* transfers = Field(sc, "transferEnv");
      transfers != nullptr && transfers->is_array()) {
    for (const Json& t : *transfers) {
      if (!t.is_object()) continue;
      std::set<std::string> names;
      if (std::string n = StrAt(t, "envName"); !n.empty()) names.insert(n);
      if (const Json* ns = Field(t, "envNames"); ns != nullptr && ns->is_array()) {
        for (const Json& n : *ns) {
          if (n.is_string() && !n.get_ref<const std::string&>().empty()) {
            names.insert(n.get<std::string>());
          }
        }
      }
      std::string source = StrAt(t, "sourceContainerName");
      if (auto path = kube::GetString(t, {"sourceContainerNameFrom", "fieldRef", "fieldPath"})) {
        std::optional<std::string> v = FieldRefValue(*path, pod);
        if (!v) {
          notes->push_back(absl::StrCat("SidecarSet ", set_name, " container ", name,
                                        ": transferEnv fieldPath ", *path, " is not supported"));
          continue;
        }
        source = *v;
      }
      auto envs = pod.envs.find(source);
      for (const std::string& n : names) {
        if (envs == pod.envs.end() || envs->second.count(n) == 0) {
          notes->push_back(absl::StrCat("SidecarSet ", set_name, " container ", name,
                                        ": transferEnv ", n, " not found in container \"", source,
                                        "\""));
          continue;
        }
        AddUnique(env, "name", *envs->second.at(n));
      }
    }
  }
  for (const Json& e : shared_env) AddUnique(env, "name", e);
  return c;
}

struct Planned {
  std::string set;
  Json container;
  bool before = false;
};

// An existing hash annotation: set name -> entry, in OpenKruise's current or older
// (name -> hash string) form.
absl::StatusOr<std::map<std::string, OrderedJson>> ParseHashAnnotation(
    const std::map<std::string, std::string>& annotations, const char* key) {
  std::map<std::string, OrderedJson> out;
  auto it = annotations.find(key);
  if (it == annotations.end() || it->second.empty()) return out;
  OrderedJson parsed = OrderedJson::parse(it->second, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pod annotation ", key, " is not a JSON object: ", it->second));
  }
  for (auto e = parsed.begin(); e != parsed.end(); ++e) {
    if (e.value().is_object()) {
      out[e.key()] = e.value();
    } else if (e.value().is_string()) {
      OrderedJson entry = OrderedJson::object();
      entry["updateTimestamp"] = nullptr;
      entry["hash"] = e.value();
      entry["sidecarSetName"] = e.key();
      entry["sidecarList"] = nullptr;
      out[e.key()] = std::move(entry);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("pod annotation ", key, ": entry ", e.key(), " is neither form"));
    }
  }
  return out;
}

std::string DumpSorted(const std::map<std::string, OrderedJson>& m) {
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : m) {
    if (!first) out += ",";
    first = false;
    absl::StrAppend(&out, Json(k).dump(-1, ' ', false, Json::error_handler_t::replace), ":",
                    v.dump(-1, ' ', false, OrderedJson::error_handler_t::replace));
  }
  return out + "}";
}

// A list member of the pod spec: absent/null reads as empty; anything but a list is an error.
absl::Status CheckList(const Json& spec, const char* key) {
  const Json* l = Field(spec, key);
  if (l != nullptr && !l->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat("pod spec.", key, " is not a list"));
  }
  return absl::OkStatus();
}

std::string Show(const Json& v) { return v.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace inject_impl
}  // namespace

struct SidecarSetMatcher::Impl {
  bool never = false;  // not an object, no spec, paused, malformed selector
  std::string name;
  std::optional<std::string> namespace_;  // spec.namespace when non-empty
  std::optional<kube::LabelSelector> namespace_selector;
  bool namespace_selector_by_name_only = false;
  kube::LabelSelector selector = kube::LabelSelector::Nothing();
};

SidecarSetMatcher::SidecarSetMatcher(const nlohmann::json& sidecarset)
    : impl_(std::make_unique<Impl>()) {
  using namespace inject_impl;  // NOLINT(build/namespaces): file-local helpers
  Impl& m = *impl_;
  m.never = true;
  if (!sidecarset.is_object()) return;
  m.name = kube::Name(sidecarset);
  const Json* spec = Field(sidecarset, "spec");
  if (spec == nullptr || !spec->is_object()) return;
  if (const Json* paused = kube::FindPath(*spec, {"injectionStrategy", "paused"});
      paused != nullptr && paused->is_boolean() && paused->get<bool>()) {
    return;
  }
  if (const Json* want = Field(*spec, "namespace"); want != nullptr) {
    if (!want->is_string()) return;
    if (!want->get_ref<const std::string&>().empty()) m.namespace_ = want->get<std::string>();
  }
  if (const Json* nss = Field(*spec, "namespaceSelector"); nss != nullptr) {
    absl::StatusOr<kube::LabelSelector> sel = kube::LabelSelector::FromJson(*nss);
    if (!sel.ok() || sel->matches_nothing()) return;
    m.namespace_selector_by_name_only =
        std::all_of(sel->requirements().begin(), sel->requirements().end(),
                    [](const auto& r) { return r.key == kMetadataNameLabel; });
    m.namespace_selector = std::move(*sel);
  }
  const Json* selector = Field(*spec, "selector");
  if (selector == nullptr) return;
  absl::StatusOr<kube::LabelSelector> sel = kube::LabelSelector::FromJson(*selector);
  if (!sel.ok() || sel->matches_nothing() || sel->matches_everything()) return;
  m.selector = std::move(*sel);
  m.never = false;
}

SidecarSetMatcher::~SidecarSetMatcher() = default;
SidecarSetMatcher::SidecarSetMatcher(SidecarSetMatcher&&) noexcept = default;
SidecarSetMatcher& SidecarSetMatcher::operator=(SidecarSetMatcher&&) noexcept = default;

const std::string& SidecarSetMatcher::name() const { return impl_->name; }

PodFacts PodFacts::Of(const nlohmann::json& pod, absl::string_view manager_namespace) {
  PodFacts f;
  if (!pod.is_object()) return f;
  f.namespace_ = kube::Namespace(pod);
  if (f.namespace_.empty()) f.namespace_ = "default";
  f.labels = kube::Labels(pod);
  const std::string phase = kube::GetString(pod, {"status", "phase"}).value_or("");
  f.injectable = f.namespace_ != "kube-system" &&
                 (manager_namespace.empty() || f.namespace_ != manager_namespace) &&
                 !kube::IsBeingDeleted(pod) && phase != "Succeeded" && phase != "Failed";
  return f;
}

std::optional<std::map<std::string, std::string>> SidecarSetMatcher::NamespaceLabels(
    const nlohmann::json* namespace_obj, const std::string& namespace_name) {
  if (namespace_obj == nullptr || !namespace_obj->is_object()) return std::nullopt;
  std::map<std::string, std::string> labels = kube::Labels(*namespace_obj);
  labels.emplace(inject_impl::kMetadataNameLabel, namespace_name);
  return labels;
}

bool SidecarSetMatcher::Matches(const PodFacts& pod, const nlohmann::json* namespace_obj) const {
  if (impl_->never || !pod.injectable) return false;
  if (!impl_->namespace_selector) return Matches(pod, std::nullopt);
  return Matches(pod, NamespaceLabels(namespace_obj, pod.namespace_));
}

bool SidecarSetMatcher::Matches(
    const PodFacts& pod,
    const std::optional<std::map<std::string, std::string>>& namespace_labels) const {
  using namespace inject_impl;  // NOLINT(build/namespaces): file-local helpers
  const Impl& m = *impl_;
  if (m.never || !pod.injectable) return false;
  if (m.namespace_ && *m.namespace_ != pod.namespace_) return false;
  if (m.namespace_selector) {
    if (namespace_labels.has_value()) {
      if (!m.namespace_selector->Matches(*namespace_labels)) return false;
    } else if (!m.namespace_selector_by_name_only ||
               !m.namespace_selector->Matches({{kMetadataNameLabel, pod.namespace_}})) {
      return false;
    }
  }
  return m.selector.Matches(pod.labels);
}

bool SidecarSetMatcher::never() const { return impl_->never; }

bool SidecarSetMatcher::RequiredLabel(std::string* key, std::vector<std::string>* values) const {
  const kube::LabelSelector::Requirement* r =
      impl_->never ? nullptr : impl_->selector.RequiredLabel();
  if (r == nullptr) return false;
  *key = r->key;
  *values = r->values;
  return true;
}

bool SidecarSetMatchesPod(const nlohmann::json& sidecarset, const nlohmann::json& pod,
                          const nlohmann::json* namespace_obj,
                          absl::string_view manager_namespace) {
  return SidecarSetMatcher(sidecarset).Matches(PodFacts::Of(pod, manager_namespace), namespace_obj);
}

std::string SidecarSetHash(const nlohmann::json& sidecarset) {
  return inject_impl::HashOf(sidecarset, /*without_image=*/false);
}

std::string SidecarSetHashWithoutImage(const nlohmann::json& sidecarset) {
  return inject_impl::HashOf(sidecarset, /*without_image=*/true);
}

std::string SidecarSetRecordedHash(const nlohmann::json& sidecarset) {
  std::optional<std::string> a = kube::Annotation(sidecarset, kSidecarSetHashAnnotation);
  return a && !a->empty() ? *a : SidecarSetHash(sidecarset);
}

std::string SidecarSetRecordedHashWithoutImage(const nlohmann::json& sidecarset) {
  std::optional<std::string> a =
      kube::Annotation(sidecarset, kSidecarSetHashWithoutImageAnnotation);
  return a && !a->empty() ? *a : SidecarSetHashWithoutImage(sidecarset);
}

nlohmann::json WithSidecarSetHashes(const nlohmann::json& sidecarset, const nlohmann::json* old) {
  if (!sidecarset.is_object()) return sidecarset;
  nlohmann::json out = sidecarset;
  if (!out.contains("metadata") || !out["metadata"].is_object()) out["metadata"] = nlohmann::json::object();
  nlohmann::json& meta = out["metadata"];
  if (!meta.contains("annotations") || !meta["annotations"].is_object()) {
    meta["annotations"] = nlohmann::json::object();
  }
  const bool have_old = old != nullptr && old->is_object();
  auto stamp = [&](const char* key, std::string (*hash)(const nlohmann::json&)) {
    const std::string now = hash(sidecarset);
    if (have_old && hash(*old) == now) {
      std::optional<std::string> kept = kube::Annotation(*old, key);
      if (kept.has_value() && !kept->empty()) {
        meta["annotations"][key] = *kept;
        return;
      }
    }
    meta["annotations"][key] = now;
  };
  stamp(kSidecarSetHashAnnotation, &SidecarSetHash);
  stamp(kSidecarSetHashWithoutImageAnnotation, &SidecarSetHashWithoutImage);
  return out;
}

absl::StatusOr<InjectionResult> InjectSidecars(nlohmann::json* pod_ptr,
                                               const std::vector<nlohmann::json>& matching,
                                               absl::Time now) {
  std::vector<const nlohmann::json*> pointers;
  pointers.reserve(matching.size());
  for (const nlohmann::json& ss : matching) pointers.push_back(&ss);
  return InjectSidecarsNoCopy(pod_ptr, pointers, now);
}

absl::StatusOr<InjectionResult> InjectSidecarsNoCopy(
    nlohmann::json* pod, const std::vector<const nlohmann::json*>& matching, absl::Time now,
    bool sets_defaulted) {
  if (pod == nullptr) return absl::InvalidArgumentError("pod is not an object");
  nlohmann::json patch;
  absl::StatusOr<InjectionResult> result =
      PlanSidecarInjection(*pod, matching, now, sets_defaulted, &patch);
  if (result.ok() && !patch.empty()) pod->patch_inplace(patch);
  return result;
}

absl::StatusOr<InjectionResult> PlanSidecarInjection(
    const nlohmann::json& pod, const std::vector<const nlohmann::json*>& matching, absl::Time now,
    bool sets_defaulted, nlohmann::json* patch) {
  using namespace inject_impl;  // NOLINT(build/namespaces): file-local helpers
  InjectionResult result;
  *patch = Json::array();
  if (!pod.is_object()) return absl::InvalidArgumentError("pod is not an object");
  const Json* spec = Field(pod, "spec");
  if (spec == nullptr || !spec->is_object()) {
    return absl::InvalidArgumentError("pod spec is not an object");
  }
  for (const char* key : {"containers", "initContainers", "volumes", "imagePullSecrets"}) {
    if (absl::Status st = CheckList(*spec, key); !st.ok()) return st;
  }
  if (const Json* meta = Field(pod, "metadata"); meta != nullptr && !meta->is_object()) {
    return absl::InvalidArgumentError("pod metadata is not an object");
  }
  if (const Json* ann = kube::FindPath(pod, {"metadata", "annotations"});
      ann != nullptr && !ann->is_null()) {
    if (!ann->is_object()) return absl::InvalidArgumentError("pod annotations are not an object");
    for (auto it = ann->begin(); it != ann->end(); ++it) {
      if (!it.value().is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat("pod annotation ", it.key(), " is not a string"));
      }
    }
  }

  // The sets, defaulted, by name.
  std::map<std::string, Json> defaulted;  // owns the copies when the caller's are not defaulted
  std::map<std::string, const Json*> sets;
  for (const Json* ss_p : matching) {
    const Json& ss = *ss_p;
    const std::string name = ss.is_object() ? kube::Name(ss) : "";
    if (name.empty()) {
      result.notes.push_back("skipped a SidecarSet without metadata.name");
      continue;
    }
    if (sets.count(name) != 0) continue;
    sets[name] = sets_defaulted ? &ss : &defaulted.emplace(name, DefaultSidecarSet(ss)).first->second;
  }
  if (sets.empty()) return result;

  static const Json* const kNoItems = new Json(Json::array());
  const Json* containers_p = Field(*spec, "containers");
  const Json& containers = containers_p != nullptr ? *containers_p : *kNoItems;
  PodView view;
  view.labels = kube::Labels(pod);
  view.annotations = kube::Annotations(pod);

  // patchPodMetadata, with conflicts between sets.
  struct Patch {
    std::string set, policy, value;
  };
  std::map<std::string, Patch> patched;  // annotation -> first set patching it
  for (const auto& [set_name, ss_ptr] : sets) {
    const Json& ss = *ss_ptr;
    const Json* patches = kube::FindPath(ss, {"spec", "patchPodMetadata"});
    if (patches == nullptr || !patches->is_array()) continue;
    for (const Json& p : *patches) {
      const Json* anns = Field(p, "annotations");
      if (anns == nullptr || !anns->is_object()) continue;
      std::string policy = StrAt(p, "patchPolicy");
      if (policy.empty()) policy = "Retain";
      for (auto it = anns->begin(); it != anns->end(); ++it) {
        if (!it.value().is_string()) continue;
        const std::string& key = it.key();
        const std::string value = it.value().get<std::string>();
        if (auto prev = patched.find(key); prev != patched.end()) {
          if (prev->second.set != set_name && prev->second.value != value &&
              (prev->second.policy != "Retain" || policy != "Retain")) {
            return absl::FailedPreconditionError(absl::StrCat(
                "SidecarSets ", prev->second.set, " and ", set_name, " patch pod annotation ", key,
                " with different values (", prev->second.policy, " ",
                Show(Json(prev->second.value)), ", ", policy, " ", Show(Json(value)), ")"));
          }
        } else {
          patched.emplace(key, Patch{set_name, policy, value});
        }
        auto cur = view.annotations.find(key);
        if (policy == "Overwrite") {
          view.annotations[key] = value;
        } else if (policy == "MergePatchJson") {
          if (cur == view.annotations.end() || cur->second.empty()) {
            view.annotations[key] = value;
            continue;
          }
          Json target = Json::parse(cur->second, nullptr, false);
          Json patch = Json::parse(value, nullptr, false);
          if (target.is_discarded() || patch.is_discarded()) {
            return absl::InvalidArgumentError(
                absl::StrCat("SidecarSet ", set_name, " patchPodMetadata: annotation ", key,
                             ": MergePatchJson needs JSON in both the pod's value and the patch"));
          }
          target.merge_patch(patch);
          cur->second = Show(target);
        } else if (policy == "Retain") {
          if (cur == view.annotations.end()) view.annotations[key] = value;
        }
      }
    }
  }

  // App containers: neither injected before nor named like a sidecar being injected.
  std::set<std::string> sidecar_names;
  for (const auto& [set_name, ss_ptr] : sets) {
    const Json& ss = *ss_ptr;
    for (const char* key : {"containers", "initContainers"}) {
      const Json* l = kube::FindPath(ss, {"spec", key});
      if (l == nullptr || !l->is_array()) continue;
      for (const Json& c : *l) {
        const std::string n = StrAt(c, "name");
        sidecar_names.insert(n);
        sidecar_names.insert(n + "-1");
        sidecar_names.insert(n + "-2");
      }
    }
  }
  for (const Json& c : containers) {
    if (!c.is_object()) continue;
    const std::string n = StrAt(c, "name");
    if (const Json* env = Field(c, "env"); env != nullptr && env->is_array()) {
      for (const Json& e : *env) {
        if (e.is_object() && e.contains("name")) view.envs[n][StrAt(e, "name")] = &e;
      }
    }
    if (!HasEnvValue(c, kSidecarInjectedEnv, "true") && sidecar_names.count(n) == 0) {
      view.app_containers.push_back(&c);
    }
  }

  absl::StatusOr<std::map<std::string, OrderedJson>> hashes =
      ParseHashAnnotation(view.annotations, kSidecarSetHashAnnotation);
  if (!hashes.ok()) return hashes.status();
  absl::StatusOr<std::map<std::string, OrderedJson>> hashes_wo =
      ParseHashAnnotation(view.annotations, kSidecarSetHashWithoutImageAnnotation);
  if (!hashes_wo.ok()) return hashes_wo.status();
  std::map<std::string, std::string> working;  // hot upgrade: sidecar -> working container
  if (auto it = view.annotations.find(kSidecarSetWorkingHotUpgradeContainerAnnotation);
      it != view.annotations.end()) {
    Json w = Json::parse(it->second, nullptr, false);
    if (w.is_object()) {
      for (auto e = w.begin(); e != w.end(); ++e) {
        if (e.value().is_string()) working[e.key()] = e.value().get<std::string>();
      }
    }
  }
  std::set<std::string> injected_list;
  if (auto it = view.annotations.find(kSidecarSetInjectedListAnnotation);
      it != view.annotations.end()) {
    for (absl::string_view s : absl::StrSplit(it->second, ',', absl::SkipEmpty())) {
      injected_list.emplace(s);
    }
  }

  std::vector<Planned> init_planned, planned;
  struct PlanRef {
    bool init;
    size_t index;
  };
  std::map<std::string, PlanRef> by_name;  // container name -> first plan, for conflicts
  std::vector<Json> volumes;               // to add, in order
  std::map<std::string, std::string> volume_set;
  std::vector<Json> secrets;
  const Json* pod_volumes_p = Field(*spec, "volumes");
  const Json& pod_volumes = pod_volumes_p != nullptr ? *pod_volumes_p : *kNoItems;
  const std::string timestamp = kube::FormatRfc3339(now);

  // Records `c` as injected by `set_name`; false when an identical one is already planned.
  auto plan = [&](const std::string& set_name, Json c, bool before,
                  bool init) -> absl::StatusOr<bool> {
    const std::string name = StrAt(c, "name");
    if (auto prev = by_name.find(name); prev != by_name.end()) {
      const Planned& first = (prev->second.init ? init_planned : planned)[prev->second.index];
      if (first.container == c) return false;
      return absl::FailedPreconditionError(absl::StrCat("SidecarSets ", first.set, " and ",
                                                        set_name, " both inject container ", name,
                                                        " with different content"));
    }
    std::vector<Planned>& list = init ? init_planned : planned;
    by_name.emplace(name, PlanRef{init, list.size()});
    list.push_back(Planned{set_name, std::move(c), before});
    return true;
  };

  for (const auto& [set_name, ss_ptr] : sets) {
    const Json& ss = *ss_ptr;
    const Json* sspec_p = Field(ss, "spec");
    if (sspec_p == nullptr || !sspec_p->is_object()) {
      result.notes.push_back(absl::StrCat("SidecarSet ", set_name, " has no spec"));
      continue;
    }
    const Json& sspec = *sspec_p;
    result.sidecarsets.push_back(set_name);
    injected_list.insert(set_name);
    std::map<std::string, const Json*> set_volumes;
    if (const Json* vs = Field(sspec, "volumes"); vs != nullptr && vs->is_array()) {
      for (const Json& v : *vs) {
        if (v.is_object() && !StrAt(v, "name").empty()) set_volumes.emplace(StrAt(v, "name"), &v);
      }
    }
    std::set<std::string> sidecar_list;
    bool injecting = false;
    for (const char* key : {"initContainers", "containers"}) {
      const bool init = std::string(key) == "initContainers";
      const Json* l = Field(sspec, key);
      if (l == nullptr || !l->is_array()) continue;
      for (const Json& sc : *l) {
        const std::string name = StrAt(sc, "name");
        if (!sc.is_object() || name.empty()) {
          result.notes.push_back(
              absl::StrCat("SidecarSet ", set_name, ": skipped a ", key, " entry without a name"));
          continue;
        }
        const bool native = init && IsNativeSidecar(sc);
        if (!init || native) sidecar_list.insert(name);
        injecting = true;
        // Volumes the sidecar mounts.
        if (const Json* ms = Field(sc, "volumeMounts"); ms != nullptr && ms->is_array()) {
          for (const Json& m : *ms) {
            const std::string vname = StrAt(m, "name");
            auto sv = set_volumes.find(vname);
            if (sv == set_volumes.end() || HasNamed(pod_volumes, "name", vname)) continue;
            auto prev = std::find_if(volumes.begin(), volumes.end(),
                                     [&](const Json& v) { return StrAt(v, "name") == vname; });
            if (prev == volumes.end()) {
              volumes.push_back(*sv->second);
              volume_set[vname] = set_name;
            } else if (Canonical(*prev) != Canonical(*sv->second)) {
              return absl::FailedPreconditionError(
                  absl::StrCat("SidecarSets ", volume_set[vname], " and ", set_name,
                               " define volume ", vname, " differently"));
            }
          }
        }
        Json c = BuildContainer(sc, set_name, view, &result.notes);
        // Defaulted: BeforeAppContainer for containers, AfterAppContainer for init containers.
        const bool before = StrAt(sc, "podInjectPolicy") == "BeforeAppContainer";
        const bool hot =
            (!init || native) &&
            kube::GetString(sc, {"upgradeStrategy", "upgradeType"}).value_or("") == "HotUpgrade";
        if (!hot) {
          absl::StatusOr<bool> st = plan(set_name, std::move(c), before, init);
          if (!st.ok()) return st.status();
          continue;
        }
        const std::string n1 = name + "-1", n2 = name + "-2";
        Json c1 = c, c2 = c;
        c1["name"] = n1;
        c2["name"] = n2;
        c2["image"] = kube::GetString(sc, {"upgradeStrategy", "hotUpgradeEmptyImage"}).value_or("");
        for (Json* h : {&c1, &c2}) {
          const std::string hn = StrAt(*h, "name");
          AddUnique(&(*h)["env"], "name",
                    AnnotationEnv(kSidecarSetVersionEnv, VersionAnnotation(hn)));
          AddUnique(&(*h)["env"], "name",
                    AnnotationEnv(kSidecarSetVersionAltEnv, VersionAltAnnotation(hn)));
        }
        for (Json* h : {&c1, &c2}) {
          absl::StatusOr<bool> st = plan(set_name, std::move(*h), before, init);
          if (!st.ok()) return st.status();
        }
        view.annotations[VersionAnnotation(n1)] = "1";
        view.annotations[VersionAltAnnotation(n1)] = "0";
        view.annotations[VersionAnnotation(n2)] = "0";
        view.annotations[VersionAltAnnotation(n2)] = "1";
        working[name] = n1;
      }
    }
    if (const Json* ps = Field(sspec, "imagePullSecrets"); ps != nullptr && ps->is_array()) {
      for (const Json& s : *ps) {
        if (s.is_object() && !StrAt(s, "name").empty()) secrets.push_back(s);
      }
    }
    if (!injecting) continue;
    const std::vector<std::string> list(sidecar_list.begin(), sidecar_list.end());
    OrderedJson entry = OrderedJson::object();
    entry["updateTimestamp"] = timestamp;
    entry["hash"] = RecordedHashOfDefaulted(ss, kSidecarSetHashAnnotation, false);
    entry["sidecarSetName"] = set_name;
    entry["sidecarList"] = list;
    OrderedJson entry_wo = entry;
    entry_wo["hash"] =
        RecordedHashOfDefaulted(ss, kSidecarSetHashWithoutImageAnnotation, /*without_image=*/true);
    if (std::string rev = kube::GetString(ss, {"status", "latestRevision"}).value_or("");
        !rev.empty()) {
      entry["controllerRevision"] = rev;
    }
    (*hashes)[set_name] = std::move(entry);
    (*hashes_wo)[set_name] = std::move(entry_wo);
  }

  // Nothing fallible from here on: the operations turning `pod` into the injected pod. Lists
  // are edited element by element (never sent whole when the pod has them), so the patch stays
  // small and a field we do not model is never rewritten.
  Json& ops = *patch;
  auto add = [&ops](std::string path, Json value) {
    ops.push_back({{"op", "add"}, {"path", std::move(path)}, {"value", std::move(value)}});
  };
  // Appends `items` to the list spec.<key>: one add per item, or the whole list when absent.
  auto append = [&](const char* key, std::vector<Json> items) {
    if (items.empty()) return;
    const Json* l = Field(*spec, key);
    if (l == nullptr || l->is_null()) {
      Json all = Json::array();
      for (Json& i : items) all.push_back(std::move(i));
      add(absl::StrCat("/spec/", key), std::move(all));
      return;
    }
    for (Json& i : items) add(absl::StrCat("/spec/", key, "/-"), std::move(i));
  };
  // Sidecars into spec.<key>: a container of the same name replaced where it is, the others
  // before or after the pod's own (result.containers gets the names in pod order).
  auto merge = [&](const char* key, std::vector<Planned>& sidecars) {
    if (sidecars.empty()) return;
    const Json* l = Field(*spec, key);
    const Json& origin = l != nullptr && l->is_array() ? *l : *kNoItems;
    std::vector<Json> before, after;
    std::map<size_t, std::string> replaced;  // index in origin -> name
    for (Planned& p : sidecars) {
      const std::string name = StrAt(p.container, "name");
      auto it = std::find_if(origin.begin(), origin.end(), [&](const Json& c) {
        return c.is_object() && StrAt(c, "name") == name;
      });
      if (it != origin.end()) {
        const size_t i = static_cast<size_t>(it - origin.begin());
        replaced[i] = name;
        ops.push_back({{"op", "replace"},
                       {"path", absl::StrCat("/spec/", key, "/", i)},
                       {"value", std::move(p.container)}});
      } else {
        (p.before ? before : after).push_back(std::move(p.container));
      }
    }
    for (const Json& c : before) result.containers.push_back(StrAt(c, "name"));
    for (const auto& [i, name] : replaced) result.containers.push_back(name);
    for (const Json& c : after) result.containers.push_back(StrAt(c, "name"));
    if (l == nullptr || l->is_null()) {
      Json all = Json::array();
      for (Json& c : before) all.push_back(std::move(c));
      for (Json& c : after) all.push_back(std::move(c));
      add(absl::StrCat("/spec/", key), std::move(all));
      return;
    }
    for (size_t i = 0; i < before.size(); ++i) {
      add(absl::StrCat("/spec/", key, "/", i), std::move(before[i]));
    }
    append(key, std::move(after));
  };
  if (!init_planned.empty() || !planned.empty()) {
    std::stable_sort(init_planned.begin(), init_planned.end(),
                     [](const Planned& a, const Planned& b) {
                       return StrAt(a.container, "name") < StrAt(b.container, "name");
                     });
    merge("initContainers", init_planned);
    merge("containers", planned);
    append("volumes", std::move(volumes));
    std::vector<Json> new_secrets;
    const Json* pod_secrets = Field(*spec, "imagePullSecrets");
    for (Json& s : secrets) {
      const std::string name = StrAt(s, "name");
      const bool have = (pod_secrets != nullptr && pod_secrets->is_array() &&
                         HasNamed(*pod_secrets, "name", name)) ||
                        std::any_of(new_secrets.begin(), new_secrets.end(),
                                    [&](const Json& n) { return StrAt(n, "name") == name; });
      if (!have) new_secrets.push_back(std::move(s));
    }
    append("imagePullSecrets", std::move(new_secrets));

    view.annotations[kSidecarSetHashAnnotation] = DumpSorted(*hashes);
    view.annotations[kSidecarSetHashWithoutImageAnnotation] = DumpSorted(*hashes_wo);
    view.annotations[kSidecarSetInjectedListAnnotation] = absl::StrJoin(injected_list, ",");
    if (!working.empty()) {
      Json w = Json::object();
      for (const auto& [k, v] : working) w[k] = v;
      view.annotations[kSidecarSetWorkingHotUpgradeContainerAnnotation] = Show(w);
    }
  }
  // Annotations are only ever added or changed above: send those.
  const Json* meta = Field(pod, "metadata");
  const Json* anns = meta != nullptr ? Field(*meta, "annotations") : nullptr;
  Json changed = Json::object();
  for (const auto& [k, v] : view.annotations) {
    const Json* old = anns != nullptr && anns->is_object() ? Field(*anns, k.c_str()) : nullptr;
    if (old != nullptr && old->is_string() && old->get_ref<const std::string&>() == v) continue;
    changed[k] = v;
  }
  if (!changed.empty()) {
    if (meta == nullptr || meta->is_null()) {
      add("/metadata", Json{{"annotations", std::move(changed)}});
    } else if (anns == nullptr || anns->is_null()) {
      add("/metadata/annotations", std::move(changed));
    } else {
      const Json::json_pointer base("/metadata/annotations");
      for (auto it = changed.begin(); it != changed.end(); ++it) {
        add((base / it.key()).to_string(), std::move(it.value()));
      }
    }
  }
  return result;
}

}  // namespace kruise::manager::sidecarset
