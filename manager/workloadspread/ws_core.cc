#include "manager/workloadspread/ws_core.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "kube/field_errors.h"
#include "manager/webhook/admission.h"
#include "manager/workload/workload_admission.h"

namespace kruise::manager::workloadspread {
namespace ws_impl {
namespace {

using kube::Field;
using kube::FieldErrors;
using kube::Json;

std::string Show(const Json& v) { return v.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string Str(const Json& obj, const char* key) {
  const Json* v = Field(obj, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

std::string Idx(const std::string& path, size_t i) { return absl::StrCat(path, "[", i, "]"); }

// ---- Kubernetes field rules ------------------------------------------------------------------

// A label key (qualified name), through kube::LabelSelector's grammar; "" when valid.
std::string LabelKeyProblem(const std::string& key) {
  auto parsed = kube::LabelSelector::FromJson(
      Json{{"matchExpressions", Json::array({{{"key", key}, {"operator", "Exists"}}})}});
  return parsed.ok() ? "" : std::string(parsed.status().message());
}
std::string LabelValueProblem(const std::string& value) {
  auto parsed = kube::LabelSelector::FromJson(Json{{"matchLabels", {{"k", value}}}});
  return parsed.ok() ? "" : std::string(parsed.status().message());
}

size_t ArraySize(const Json* v) { return v != nullptr && v->is_array() ? v->size() : 0; }

// Kubernetes' ValidateNodeSelectorRequirement (matchExpressions) and
// ValidateNodeFieldSelectorRequirement (matchFields, key metadata.name only).
void CheckRequirement(const Json& rq, const std::string& path, bool field, FieldErrors* problems) {
  if (!rq.is_object()) {
    problems->Add(path, "must be an object with key, operator and values");
    return;
  }
  const std::string op = Str(rq, "operator");
  const Json* values = Field(rq, "values");
  if (values != nullptr && !values->is_array()) {
    problems->Add(path + ".values", "must be a list of strings");
    return;
  }
  const size_t n = ArraySize(values);
  if (field) {
    if (op == "In" || op == "NotIn") {
      if (n != 1) {
        problems->Add(path + ".values",
                      "Required value: must be only one value when `operator` is 'In' or 'NotIn' "
                      "for node field selector");
      }
    } else {
      problems->Add(path + ".operator",
                    absl::StrCat("Invalid value: \"", op, "\": not a valid selector operator"));
    }
    const std::string key = Str(rq, "key");
    if (key != "metadata.name") {
      problems->Add(path + ".key",
                    absl::StrCat("Invalid value: \"", key, "\": not a valid field selector key"));
    } else if (n == 1 && (*values)[0].is_string() &&
               !workload::IsDnsSubdomain((*values)[0].get<std::string>())) {
      problems->Add(path + ".values[0]",
                    absl::StrCat("Invalid value: ", Show((*values)[0]),
                                 ": must be a node name (a DNS-1123 subdomain)"));
    }
    return;
  }
  if (op == "In" || op == "NotIn") {
    if (n == 0) {
      problems->Add(path + ".values",
                    "Required value: must be specified when `operator` is 'In' or 'NotIn'");
    }
  } else if (op == "Exists" || op == "DoesNotExist") {
    if (n > 0) {
      problems->Add(path + ".values",
                    "Forbidden: may not be specified when `operator` is 'Exists' or "
                    "'DoesNotExist'");
    }
  } else if (op == "Gt" || op == "Lt") {
    if (n != 1) {
      problems->Add(path + ".values",
                    "Required value: must be specified single value when `operator` is 'Lt' or "
                    "'Gt'");
    }
  } else {
    problems->Add(path + ".operator",
                  absl::StrCat("Invalid value: \"", op, "\": not a valid selector operator"));
  }
  const std::string key = Str(rq, "key");
  if (std::string why = LabelKeyProblem(key); !why.empty()) {
    problems->Add(path + ".key", absl::StrCat("Invalid value: \"", key, "\": ", why));
  }
}

void CheckTerm(const Json& term, const std::string& path, FieldErrors* problems) {
  if (!term.is_object()) {
    problems->Add(path, "must be a node selector term (matchExpressions, matchFields)");
    return;
  }
  for (const char* key : {"matchExpressions", "matchFields"}) {
    const Json* list = Field(term, key);
    if (list == nullptr) continue;
    const std::string lpath = absl::StrCat(path, ".", key);
    if (!list->is_array()) {
      problems->Add(lpath, "must be a list of node selector requirements");
      continue;
    }
    for (size_t i = 0; i < list->size(); ++i) {
      CheckRequirement((*list)[i], Idx(lpath, i), key[5] == 'F', problems);
    }
  }
}

// Kubernetes' ValidateTolerations.
void CheckToleration(const Json& t, const std::string& path, FieldErrors* problems) {
  if (!t.is_object()) {
    problems->Add(path, "must be a toleration object");
    return;
  }
  const std::string key = Str(t, "key"), op = Str(t, "operator"), value = Str(t, "value"),
                    effect = Str(t, "effect");
  if (!key.empty()) {
    if (std::string why = LabelKeyProblem(key); !why.empty()) {
      problems->Add(path + ".key", absl::StrCat("Invalid value: \"", key, "\": ", why));
    }
  } else if (op != "Exists") {
    problems->Add(path + ".operator",
                  absl::StrCat("Invalid value: \"", op,
                               "\": operator must be Exists when `key` is empty, which means "
                               "\"match all values and all keys\""));
  }
  if (Field(t, "tolerationSeconds") != nullptr && effect != "NoExecute") {
    problems->Add(path + ".effect",
                  absl::StrCat("Invalid value: \"", effect,
                               "\": effect must be 'NoExecute' when `tolerationSeconds` is set"));
  }
  if (op.empty() || op == "Equal") {
    if (std::string why = LabelValueProblem(value); !why.empty()) {
      problems->Add(path + ".operator", absl::StrCat("Invalid value: \"", value, "\": ", why));
    }
  } else if (op == "Exists") {
    if (!value.empty()) {
      problems->Add(path + ".operator",
                    absl::StrCat("Invalid value: \"", value,
                                 "\": value must be empty when `operator` is 'Exists'"));
    }
  } else {
    problems->Add(path + ".operator", absl::StrCat("Unsupported value: \"", op,
                                                   "\": supported values: \"Equal\", \"Exists\""));
  }
  if (!effect.empty() && effect != "NoSchedule" && effect != "PreferNoSchedule" &&
      effect != "NoExecute") {
    problems->Add(path + ".effect",
                  absl::StrCat("Unsupported value: \"", effect,
                               "\": supported values: \"NoSchedule\", \"PreferNoSchedule\", "
                               "\"NoExecute\""));
  }
}

// Kubernetes' schema.ParseGroupVersion: "", "v1" or "group/version".
bool ValidGroupVersion(const std::string& s) {
  std::vector<absl::string_view> parts = absl::StrSplit(s, '/');
  if (parts.size() == 1) return true;
  return parts.size() == 2 && !parts[0].empty() && !parts[1].empty();
}

std::string GroupOf(const std::string& api_version) {
  std::vector<absl::string_view> parts = absl::StrSplit(api_version, '/');
  return parts.size() == 2 ? std::string(parts[0]) : "";
}

// The groups each target kind may have.
const std::vector<std::string>* TargetGroups(const std::string& kind) {
  static const auto* table = new std::map<std::string, std::vector<std::string>>{
      {"CloneSet", {"apps.kruise.io"}},
      {"Deployment", {"apps"}},
      {"ReplicaSet", {"apps"}},
      {"Job", {"batch"}},
      {"StatefulSet", {"apps", "apps.kruise.io"}},
  };
  auto it = table->find(kind);
  return it == table->end() ? nullptr : &it->second;
}

// Kinds that own pods directly (OpenKruise's matchReference).
bool PodOwnerKind(const std::string& group, const std::string& kind) {
  if (kind == "Deployment") return false;
  const std::vector<std::string>* groups = TargetGroups(kind);
  return groups != nullptr && std::find(groups->begin(), groups->end(), group) != groups->end();
}

// ---- Strategic merge ---------------------------------------------------------------------------

// core/v1 Pod merge keys, by path from the pod root (list indexes left out).
const char* MergeKey(const std::string& path) {
  static const auto* keys = new std::map<std::string, const char*>{
      {"spec.volumes", "name"},
      {"spec.containers", "name"},
      {"spec.initContainers", "name"},
      {"spec.ephemeralContainers", "name"},
      {"spec.imagePullSecrets", "name"},
      {"spec.hostAliases", "ip"},
      {"spec.topologySpreadConstraints", "topologyKey"},
      {"metadata.ownerReferences", "uid"},
  };
  if (auto it = keys->find(path); it != keys->end()) return it->second;
  for (const char* c : {"spec.containers.", "spec.initContainers.", "spec.ephemeralContainers."}) {
    if (!absl::StartsWith(path, c)) continue;
    const absl::string_view rest = absl::string_view(path).substr(strlen(c));
    if (rest == "env") return "name";
    if (rest == "ports") return "containerPort";
    if (rest == "volumeMounts") return "mountPath";
    if (rest == "volumeDevices") return "devicePath";
  }
  return nullptr;
}

bool IsDirective(const std::string& key) { return !key.empty() && key[0] == '$'; }

// `v` without "$..." members (at any depth) and without list elements marked for deletion.
Json Clean(const Json& v) {
  if (v.is_object()) {
    Json out = Json::object();
    for (const auto& [k, x] : v.items()) {
      if (!IsDirective(k)) out[k] = Clean(x);
    }
    return out;
  }
  if (v.is_array()) {
    Json out = Json::array();
    for (const Json& x : v) {
      if (x.is_object() && Str(x, "$patch") == "delete") continue;
      out.push_back(Clean(x));
    }
    return out;
  }
  return v;
}

absl::Status MergeObject(Json* target, const Json& patch, const std::string& path);

absl::Status MergeList(Json* target, const Json& patch, const char* key, const std::string& path) {
  for (const Json& e : patch) {
    const Json* k = e.is_object() ? Field(e, key) : nullptr;
    if (k == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": element ", Show(e), " does not contain declared merge key \"", key, "\""));
    }
    auto same = [&](const Json& x) {
      const Json* xk = x.is_object() ? Field(x, key) : nullptr;
      return xk != nullptr && *xk == *k;
    };
    if (Str(e, "$patch") == "delete") {
      target->erase(std::remove_if(target->begin(), target->end(), same), target->end());
      continue;
    }
    auto it = std::find_if(target->begin(), target->end(), same);
    if (it == target->end()) {
      target->push_back(Clean(e));
    } else {
      RETURN_IF_ERROR(MergeObject(&*it, e, path));
    }
  }
  return absl::OkStatus();
}

absl::Status MergeObject(Json* target, const Json& patch, const std::string& path) {
  if (!patch.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path.empty() ? "patch" : path, ": must be an object, not ", Show(patch)));
  }
  if (Str(patch, "$patch") == "replace") {
    *target = Clean(patch);
    return absl::OkStatus();
  }
  if (!target->is_object()) *target = Json::object();
  for (const auto& [k, v] : patch.items()) {
    if (IsDirective(k)) continue;
    const std::string child = path.empty() ? k : absl::StrCat(path, ".", k);
    if (v.is_null()) {
      target->erase(k);
      continue;
    }
    auto it = target->find(k);
    const bool has = it != target->end() && !it->is_null();
    if (v.is_object()) {
      if (has && it->is_object()) {
        RETURN_IF_ERROR(MergeObject(&*it, v, child));
      } else {
        Json fresh = Json::object();
        RETURN_IF_ERROR(MergeObject(&fresh, v, child));
        (*target)[k] = std::move(fresh);
      }
    } else if (v.is_array() && child == "metadata.finalizers") {
      Json list = has && it->is_array() ? *it : Json::array();
      for (const Json& f : v) {
        if (std::find(list.begin(), list.end(), f) == list.end()) list.push_back(f);
      }
      (*target)[k] = std::move(list);
    } else if (const char* key = v.is_array() ? MergeKey(child) : nullptr; key != nullptr) {
      Json list = has && it->is_array() ? *it : Json::array();
      RETURN_IF_ERROR(MergeList(&list, v, key, child));
      (*target)[k] = std::move(list);
    } else {
      (*target)[k] = Clean(v);
    }
  }
  return absl::OkStatus();
}

// ---- Injection ----------------------------------------------------------------------------------

// The member `key` of object `obj` as an object (created when absent or null); null when it is
// something else.
Json* ObjectMember(Json* obj, const char* key) {
  Json& v = (*obj)[key];
  if (v.is_null()) v = Json::object();
  return v.is_object() ? &v : nullptr;
}
Json* ArrayMember(Json* obj, const char* key) {
  Json& v = (*obj)[key];
  if (v.is_null()) v = Json::array();
  return v.is_array() ? &v : nullptr;
}

absl::Status Mistyped(const std::string& path) {
  return absl::InvalidArgumentError(absl::StrCat("pod field ", path, " has the wrong type"));
}

// Applies the subset's injection to `pod` (a pod, or the part of one PlanSubsetInjection took).
absl::Status Inject(Json* pod, const WorkloadSpread& ws, const Subset& subset,
                    const std::string& uid) {
  if (!pod->is_object()) return absl::InvalidArgumentError("the pod is not a JSON object");
  const bool affinity = !subset.required_term.is_null() || !subset.preferred_terms.empty();
  if (!subset.tolerations.empty() || affinity) {
    Json* spec = ObjectMember(pod, "spec");
    if (spec == nullptr) return Mistyped("spec");
    if (!subset.tolerations.empty()) {
      Json* list = ArrayMember(spec, "tolerations");
      if (list == nullptr) return Mistyped("spec.tolerations");
      for (const Json& t : subset.tolerations) list->push_back(t);
    }
    if (affinity) {
      Json* a = ObjectMember(spec, "affinity");
      if (a == nullptr) return Mistyped("spec.affinity");
      Json* na = ObjectMember(a, "nodeAffinity");
      if (na == nullptr) return Mistyped("spec.affinity.nodeAffinity");
      if (!subset.preferred_terms.empty()) {
        Json* list = ArrayMember(na, "preferredDuringSchedulingIgnoredDuringExecution");
        if (list == nullptr) {
          return Mistyped(
              "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution");
        }
        for (const Json& t : subset.preferred_terms) list->push_back(t);
      }
      if (!subset.required_term.is_null()) {
        const std::string rpath =
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution";
        Json* req = ObjectMember(na, "requiredDuringSchedulingIgnoredDuringExecution");
        if (req == nullptr) return Mistyped(rpath);
        Json* terms = ArrayMember(req, "nodeSelectorTerms");
        if (terms == nullptr) return Mistyped(rpath + ".nodeSelectorTerms");
        if (terms->empty()) {
          terms->push_back(subset.required_term);
        } else {
          for (Json& term : *terms) {
            if (!term.is_object()) return Mistyped(rpath + ".nodeSelectorTerms[]");
            for (const char* key : {"matchExpressions", "matchFields"}) {
              const Json* add = Field(subset.required_term, key);
              if (add == nullptr || !add->is_array() || add->empty()) continue;
              Json* list = ArrayMember(&term, key);
              if (list == nullptr)
                return Mistyped(absl::StrCat(rpath, ".nodeSelectorTerms[].", key));
              for (const Json& r : *add) list->push_back(r);
            }
          }
        }
      }
    }
  }
  if (subset.patch.is_object()) {
    absl::Status st = MergeObject(pod, subset.patch, "");
    if (!st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("subset ", subset.name, " of WorkloadSpread ",
                                                     ws.name, ": patch: ", st.message()));
    }
  }
  Json* meta = ObjectMember(pod, "metadata");
  if (meta == nullptr) return Mistyped("metadata");
  Json* annotations = ObjectMember(meta, "annotations");
  if (annotations == nullptr) return Mistyped("metadata.annotations");
  (*annotations)[kMatchedWorkloadSpreadAnnotation] =
      MatchedAnnotationValue(ws.name, subset.name, uid);
  return absl::OkStatus();
}

// ---- Pod facts ---------------------------------------------------------------------------------

bool Active(const Json& pod) {
  const std::string phase = kube::GetString(pod, {"status", "phase"}).value_or("");
  return phase != "Succeeded" && phase != "Failed" && !kube::IsBeingDeleted(pod);
}

const Json* PodCondition(const Json& pod, absl::string_view type) {
  const Json* conds = kube::FindPath(pod, {"status", "conditions"});
  if (conds == nullptr || !conds->is_array()) return nullptr;
  for (const Json& c : *conds) {
    if (c.is_object() && Str(c, "type") == type) return &c;
  }
  return nullptr;
}

// What Kubernetes' ActivePods ordering reads.
struct SortFacts {
  bool assigned = false;
  int phase = 0;  // Pending 0, Unknown 1, Running 2 (others 3, as Kubernetes' map gives none)
  bool ready = false;
  absl::Time ready_since = absl::InfinitePast();  // InfinitePast: zero time
  int64_t restarts = 0;
  absl::Time created = absl::InfinitePast();
};

SortFacts SortFactsOf(const Json& pod) {
  SortFacts f;
  f.assigned = !kube::GetString(pod, {"spec", "nodeName"}).value_or("").empty();
  const std::string phase = kube::GetString(pod, {"status", "phase"}).value_or("");
  f.phase = phase == "Pending" ? 0 : phase == "Unknown" ? 1 : phase == "Running" ? 2 : 3;
  if (const Json* c = PodCondition(pod, "Ready"); c != nullptr && Str(*c, "status") == "True") {
    f.ready = true;
    auto t = kube::ParseRfc3339(Str(*c, "lastTransitionTime"));
    if (t.ok()) f.ready_since = *t;
  }
  if (const Json* st = kube::FindPath(pod, {"status", "containerStatuses"});
      st != nullptr && st->is_array()) {
    for (const Json& s : *st)
      f.restarts = std::max(f.restarts, kube::IntField(s, "restartCount", 0));
  }
  f.created = kube::CreationTimestamp(pod).value_or(absl::InfinitePast());
  return f;
}

// Go's afterOrZero: a zero time sorts first, then the later one.
bool AfterOrZero(absl::Time a, absl::Time b) {
  if (a == absl::InfinitePast() || b == absl::InfinitePast()) return a == absl::InfinitePast();
  return a > b;
}

// Kubernetes' ActivePods.Less: the pod to delete first sorts first.
bool DeleteFirst(const SortFacts& a, const SortFacts& b) {
  if (a.assigned != b.assigned) return !a.assigned;
  if (a.phase != b.phase) return a.phase < b.phase;
  if (a.ready != b.ready) return !a.ready;
  if (a.ready && b.ready && a.ready_since != b.ready_since) {
    return AfterOrZero(a.ready_since, b.ready_since);
  }
  if (a.restarts != b.restarts) return a.restarts > b.restarts;
  if (a.created != b.created) return AfterOrZero(a.created, b.created);
  return false;
}

// OpenKruise's GetTimeBeforePendingTimeout: a Pending pod on no node whose PodScheduled
// condition is False with reason Unschedulable, older than `timeout`. Otherwise, when it will be
// (for the recheck), in `*at`.
bool UnscheduledTooLong(const Json& pod, absl::Duration timeout, absl::Time now,
                        std::optional<absl::Time>* at) {
  if (kube::IsBeingDeleted(pod) ||
      kube::GetString(pod, {"status", "phase"}).value_or("") != "Pending" ||
      !kube::GetString(pod, {"spec", "nodeName"}).value_or("").empty()) {
    return false;
  }
  const Json* c = PodCondition(pod, "PodScheduled");
  if (c == nullptr || Str(*c, "status") != "False" || Str(*c, "reason") != "Unschedulable") {
    return false;
  }
  const absl::Time deadline = kube::CreationTimestamp(pod).value_or(absl::InfinitePast()) + timeout;
  if (deadline < now) return true;
  *at = deadline;
  return false;
}

void Earliest(std::optional<absl::Time>* out, absl::Time t) {
  if (!*out || t < **out) *out = t;
}

// OpenKruise's setWorkloadSpreadSubsetCondition: a condition of the same status and reason is
// left as it is; one of the same status keeps its lastTransitionTime.
void SetCondition(SubsetStatus* s, SubsetCondition c) {
  auto it = std::find_if(s->conditions.begin(), s->conditions.end(),
                         [&](const SubsetCondition& x) { return x.type == c.type; });
  if (it != s->conditions.end()) {
    if (it->status == c.status && it->reason == c.reason) return;
    if (it->status == c.status) c.last_transition_time = it->last_transition_time;
    s->conditions.erase(it);
  }
  s->conditions.push_back(std::move(c));
}

void ParseTimes(const Json* m, std::map<std::string, absl::Time>* out) {
  if (m == nullptr || !m->is_object()) return;
  for (const auto& [k, t] : m->items()) {
    auto parsed =
        t.is_string() ? kube::ParseRfc3339(t.get<std::string>()) : absl::InvalidArgumentError("");
    (*out)[k] = parsed.ok() ? *parsed : absl::InfinitePast();
  }
}

int32_t Int32Field(const Json& obj, const char* key, int32_t def) {
  const int64_t v = kube::IntField(obj, key, def);
  return static_cast<int32_t>(std::clamp<int64_t>(v, std::numeric_limits<int32_t>::min(),
                                                  std::numeric_limits<int32_t>::max()));
}

WorkloadSpreadStatus ParseStatus(const Json& st) {
  WorkloadSpreadStatus s;
  s.observed_generation = kube::IntField(st, "observedGeneration", 0);
  const Json* list = Field(st, "subsetStatuses");
  if (list == nullptr || !list->is_array()) return s;
  for (const Json& e : *list) {
    if (!e.is_object()) continue;
    SubsetStatus ss;
    ss.name = Str(e, "name");
    ss.replicas = Int32Field(e, "replicas", 0);
    ss.missing_replicas = Int32Field(e, "missingReplicas", 0);
    ParseTimes(Field(e, "creatingPods"), &ss.creating_pods);
    ParseTimes(Field(e, "deletingPods"), &ss.deleting_pods);
    if (const Json* conds = Field(e, "conditions"); conds != nullptr && conds->is_array()) {
      for (const Json& c : *conds) {
        if (!c.is_object()) continue;
        SubsetCondition sc{Str(c, "type"), Str(c, "status"), absl::InfinitePast(), Str(c, "reason"),
                           Str(c, "message")};
        if (auto t = kube::ParseRfc3339(Str(c, "lastTransitionTime")); t.ok()) {
          sc.last_transition_time = *t;
        }
        ss.conditions.push_back(std::move(sc));
      }
    }
    s.subsets.push_back(std::move(ss));
  }
  return s;
}

// ---- Validation ---------------------------------------------------------------------------------

std::optional<MaxReplicas> ParseMaxReplicas(const Json& v) {
  auto scaled = kube::GetScaledValueFromIntOrPercent(v, 100, /*round_up=*/true);
  if (!scaled.ok() || *scaled < 0) return std::nullopt;
  if (v.is_string()) {
    int n = 0;
    const std::string& s = v.get_ref<const std::string&>();
    if (!absl::SimpleAtoi(absl::string_view(s).substr(0, s.size() - 1), &n)) return std::nullopt;
    return MaxReplicas{true, n};
  }
  return MaxReplicas{false, *scaled};
}

// Spec, parsed and checked; `out` may be null (problems only).
void Check(const Json& ws, const Json* old_ws, FieldErrors* problems, WorkloadSpread* out) {
  if (!ws.is_object()) {
    problems->Add("<object>", "must be a JSON object");
    return;
  }
  workload::CheckObjectName(ws, problems);
  static const Json kEmpty = Json::object();
  const Json* spec_p = Field(ws, "spec");
  if (spec_p != nullptr && !spec_p->is_object()) problems->Add("spec", "must be an object");
  const Json& spec = spec_p != nullptr && spec_p->is_object() ? *spec_p : kEmpty;

  // targetRef
  TargetRef target;
  const Json* ref = Field(spec, "targetRef");
  if (ref == nullptr) {
    problems->Add("spec.targetRef", "Required value: no targetRef defined in WorkloadSpread");
  } else if (!ref->is_object()) {
    problems->Add("spec.targetRef", "must be an object with apiVersion, kind and name");
  } else {
    target = TargetRef{Str(*ref, "apiVersion"), Str(*ref, "kind"), Str(*ref, "name")};
    if (target.api_version.empty() || target.kind.empty() || target.name.empty()) {
      problems->Add("spec.targetRef", absl::StrCat("Invalid value: ", Show(*ref),
                                                   ": apiVersion, kind and name are all required"));
    } else if (!ValidGroupVersion(target.api_version)) {
      problems->Add("spec.targetRef.apiVersion",
                    absl::StrCat("Invalid value: \"", target.api_version,
                                 "\": must be \"version\" or \"group/version\""));
    } else if (const std::vector<std::string>* groups = TargetGroups(target.kind);
               groups == nullptr) {
      problems->Add("spec.targetRef.kind",
                    absl::StrCat("Unsupported value: \"", target.kind,
                                 "\": supported values: \"CloneSet\", \"Deployment\", "
                                 "\"ReplicaSet\", \"Job\", \"StatefulSet\""));
    } else if (std::find(groups->begin(), groups->end(), target.Group()) == groups->end()) {
      problems->Add("spec.targetRef.apiVersion",
                    absl::StrCat("Invalid value: \"", target.api_version, "\": a ", target.kind,
                                 " is in API group ", absl::StrJoin(*groups, " or ")));
    }
  }
  if (old_ws != nullptr && ref != nullptr && ref->is_object()) {
    const Json* old_ref = kube::FindPath(*old_ws, {"spec", "targetRef"});
    if (old_ref != nullptr && old_ref->is_object()) {
      const TargetRef before{Str(*old_ref, "apiVersion"), Str(*old_ref, "kind"),
                             Str(*old_ref, "name")};
      if (before.Group() != target.Group() || before.kind != target.kind ||
          before.name != target.name) {
        problems->Add("spec.targetRef",
                      "Forbidden: targetRef cannot change (its group, kind and name)");
      }
    }
  }

  // subsets
  std::vector<Subset> subsets;
  const Json* list = Field(spec, "subsets");
  if (list != nullptr && !list->is_array()) {
    problems->Add("spec.subsets", "must be a list of subsets");
  } else if (list == nullptr || list->empty()) {
    problems->Add("spec.subsets", "Required value: at least one subset");
  } else {
    std::set<std::string> names;
    std::optional<bool> percent_type;  // of the first maxReplicas
    int percent_sum = 0;
    bool max_problem = false;
    for (size_t i = 0; i < list->size(); ++i) {
      const Json& s = (*list)[i];
      const std::string path = Idx("spec.subsets", i);
      if (!s.is_object()) {
        problems->Add(path, "must be a subset object");
        continue;
      }
      Subset sub;
      sub.name = Str(s, "name");
      if (sub.name.empty()) {
        problems->Add(path + ".name", "Required value");
      } else if (!names.insert(sub.name).second) {
        problems->Add(path + ".name", absl::StrCat("Duplicate value: \"", sub.name, "\""));
      }
      if (const Json* t = Field(s, "requiredNodeSelectorTerm"); t != nullptr) {
        CheckTerm(*t, path + ".requiredNodeSelectorTerm", problems);
        sub.required_term = *t;
      }
      sub.preferred_terms = Json::array();
      if (const Json* p = Field(s, "preferredNodeSelectorTerms"); p != nullptr) {
        const std::string ppath = path + ".preferredNodeSelectorTerms";
        if (!p->is_array()) {
          problems->Add(ppath, "must be a list of preferred scheduling terms");
        } else {
          for (size_t j = 0; j < p->size(); ++j) {
            const Json& term = (*p)[j];
            const std::string tpath = Idx(ppath, j);
            const Json* w = Field(term, "weight");
            if (w == nullptr || !w->is_number_integer() || w->get<int64_t>() < 1 ||
                w->get<int64_t>() > 100) {
              problems->Add(tpath + ".weight",
                            absl::StrCat("Invalid value: ", w != nullptr ? Show(*w) : "null",
                                         ": must be in the range 1-100"));
            }
            const Json* pref = Field(term, "preference");
            if (pref == nullptr) {
              problems->Add(tpath + ".preference", "Required value");
            } else {
              CheckTerm(*pref, tpath + ".preference", problems);
            }
          }
          sub.preferred_terms = *p;
        }
      }
      sub.tolerations = Json::array();
      if (const Json* t = Field(s, "tolerations"); t != nullptr) {
        if (!t->is_array()) {
          problems->Add(path + ".tolerations", "must be a list of tolerations");
        } else {
          for (size_t j = 0; j < t->size(); ++j) {
            CheckToleration((*t)[j], Idx(path + ".tolerations", j), problems);
          }
          sub.tolerations = *t;
        }
      }
      if (const Json* p = Field(s, "patch"); p != nullptr) {
        Json probe = {{"metadata", Json::object()}, {"spec", Json::object()}};
        absl::Status st = p->is_object() ? MergeObject(&probe, *p, "")
                                         : absl::InvalidArgumentError("must be an object");
        if (!st.ok()) {
          problems->Add(path + ".patch", absl::StrCat("Invalid value: ", st.message()));
        } else {
          sub.patch = *p;
        }
      }
      if (const Json* m = Field(s, "maxReplicas"); m != nullptr && !max_problem) {
        const std::string mpath = path + ".maxReplicas";
        std::optional<MaxReplicas> mr = ParseMaxReplicas(*m);
        if (!mr) {
          problems->Add(mpath, absl::StrCat("Invalid value: ", Show(*m),
                                            ": must be an integer >= 0 or a percentage"));
          max_problem = true;
        } else if (percent_type && *percent_type != mr->percent) {
          problems->Add(mpath, absl::StrCat("Invalid value: ", Show(*m),
                                            ": every subset's maxReplicas must be of one type "
                                            "(all integers or all percentages)"));
          max_problem = true;
        } else if (mr->percent && target.kind == "StatefulSet") {
          problems->Add(mpath, absl::StrCat("Invalid value: ", Show(*m),
                                            ": must be an integer for a StatefulSet"));
          max_problem = true;
        } else {
          percent_type = mr->percent;
          if (mr->percent) percent_sum += mr->value;
          if (percent_sum > 100) {
            problems->Add(mpath, absl::StrCat("Invalid value: ", Show(*m),
                                              ": the subsets' maxReplicas add up to more than "
                                              "100%"));
            max_problem = true;
          }
          sub.max_replicas = mr;
        }
      }
      subsets.push_back(std::move(sub));
    }
    const Json* last_max = Field(list->back(), "maxReplicas");
    if (!max_problem && percent_type.value_or(false) && percent_sum < 100 && last_max != nullptr) {
      problems->Add("spec.subsets[0].maxReplicas",
                    absl::StrCat("Invalid value: the percentages add up to ", percent_sum,
                                 "%: they must make 100% unless the last subset has no "
                                 "maxReplicas"));
    }
  }

  // scheduleStrategy
  bool adaptive = false;
  int32_t critical = 0;
  if (const Json* ss = Field(spec, "scheduleStrategy"); ss != nullptr) {
    if (!ss->is_object()) {
      problems->Add("spec.scheduleStrategy", "must be an object");
    } else {
      const Json* type = Field(*ss, "type");
      const std::string t = type != nullptr && type->is_string() ? type->get<std::string>() : "";
      if (type != nullptr && (!type->is_string() || (t != "" && t != "Fixed" && t != "Adaptive"))) {
        problems->Add("spec.scheduleStrategy.type",
                      absl::StrCat("Unsupported value: ", Show(*type),
                                   ": supported values: \"Fixed\", \"Adaptive\""));
      }
      adaptive = t == "Adaptive";
      if (const Json* a = Field(*ss, "adaptive"); a != nullptr) {
        if (!a->is_object()) {
          problems->Add("spec.scheduleStrategy.adaptive", "must be an object");
        } else {
          if (!adaptive) {
            problems->Add("spec.scheduleStrategy.type",
                          absl::StrCat("Invalid value: \"", t,
                                       "\": must be Adaptive when scheduleStrategy.adaptive is "
                                       "set"));
          }
          const size_t n = list != nullptr && list->is_array() ? list->size() : 0;
          if (n > 1 && Field(list->back(), "maxReplicas") != nullptr) {
            problems->Add("spec.scheduleStrategy.adaptive",
                          "Invalid value: the last subset must have no maxReplicas with the "
                          "Adaptive strategy (rescheduled pods need a subset that takes them)");
          }
          const int64_t allowed =
              n > 1 ? static_cast<int64_t>(absl::ToInt64Seconds(kMaxScheduledFailedDuration) - 5) /
                          static_cast<int64_t>(n - 1)
                    : std::numeric_limits<int32_t>::max();
          if (const Json* rcs = Field(*a, "rescheduleCriticalSeconds"); rcs != nullptr) {
            if (!rcs->is_number_integer() || rcs->get<int64_t>() < 0 ||
                rcs->get<int64_t>() > allowed) {
              problems->Add(
                  "spec.scheduleStrategy.adaptive.rescheduleCriticalSeconds",
                  absl::StrCat("Invalid value: ", Show(*rcs), ": must be between 0 and ", allowed,
                               " (300 s - 5 s shared by the subsets a pod may pass)"));
            } else {
              critical = static_cast<int32_t>(rcs->get<int64_t>());
            }
          }
          if (const Json* d = Field(*a, "disableSimulationSchedule");
              d != nullptr && !d->is_boolean()) {
            problems->Add("spec.scheduleStrategy.adaptive.disableSimulationSchedule",
                          "must be a boolean");
          }
        }
      }
    }
  }

  if (out == nullptr) return;
  out->namespace_ = kube::Namespace(ws);
  out->name = kube::Name(ws);
  out->generation = kube::Generation(ws);
  out->resource_version = kube::ResourceVersion(ws);
  out->target_ref = std::move(target);
  out->subsets = std::move(subsets);
  out->adaptive = adaptive;
  out->reschedule_critical_seconds = adaptive ? critical : 0;
  if (const Json* st = Field(ws, "status"); st != nullptr && st->is_object()) {
    out->status = ParseStatus(*st);
  }
}

// Whether node selector term `a` is implied by `b` (every requirement of `a` is one of `b`'s),
// so every node `b` selects is also one `a` selects. Requirements compare with sorted values.
bool TermImpliedBy(const Json& a, const Json& b) {
  auto reqs = [](const Json& term) {
    std::vector<Json> out;
    for (const char* key : {"matchExpressions", "matchFields"}) {
      const Json* list = Field(term, key);
      if (list == nullptr || !list->is_array()) continue;
      for (Json r : *list) {
        if (!r.is_object()) continue;
        if (Json* v = r.contains("values") ? &r["values"] : nullptr;
            v != nullptr && v->is_array()) {
          std::sort(v->begin(), v->end());
        }
        r["$list"] = key;
        out.push_back(kube::SemanticNormalized(r));
      }
    }
    return out;
  };
  const std::vector<Json> ra = reqs(a), rb = reqs(b);
  for (const Json& r : ra) {
    if (std::find(rb.begin(), rb.end(), r) == rb.end()) return false;
  }
  return true;
}

}  // namespace
}  // namespace ws_impl

using kube::Json;
using ws_impl::Str;

// ---- Types
// ----------------------------------------------------------------------------------------

std::string TargetRef::Group() const { return ws_impl::GroupOf(api_version); }

int MaxReplicas::Scaled(int replicas) const {
  if (!percent) return value;
  return static_cast<int>(std::ceil(static_cast<double>(value) * replicas / 100));
}

const SubsetCondition* SubsetStatus::Condition(absl::string_view type) const {
  for (const SubsetCondition& c : conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

bool SubsetStatus::Unschedulable() const {
  const SubsetCondition* c = Condition(kSubsetSchedulable);
  return c != nullptr && c->status == "False";
}

const SubsetStatus* WorkloadSpreadStatus::Find(const std::string& name) const {
  for (const SubsetStatus& s : subsets) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

Json WorkloadSpreadStatus::ToJson() const {
  Json list = Json::array();
  auto times = [](const std::map<std::string, absl::Time>& m) {
    Json out = Json::object();
    for (const auto& [k, t] : m) {
      out[k] = kube::FormatRfc3339(t == absl::InfinitePast() ? absl::UnixEpoch() : t);
    }
    return out;
  };
  for (const SubsetStatus& s : subsets) {
    Json e = {{"name", s.name}, {"replicas", s.replicas}, {"missingReplicas", s.missing_replicas}};
    if (!s.creating_pods.empty()) e["creatingPods"] = times(s.creating_pods);
    if (!s.deleting_pods.empty()) e["deletingPods"] = times(s.deleting_pods);
    if (!s.conditions.empty()) {
      Json conds = Json::array();
      for (const SubsetCondition& c : s.conditions) {
        Json j = {{"type", c.type}, {"status", c.status}};
        if (c.last_transition_time != absl::InfinitePast()) {
          j["lastTransitionTime"] = kube::FormatRfc3339(c.last_transition_time);
        }
        if (!c.reason.empty()) j["reason"] = c.reason;
        if (!c.message.empty()) j["message"] = c.message;
        conds.push_back(std::move(j));
      }
      e["conditions"] = std::move(conds);
    }
    list.push_back(std::move(e));
  }
  Json out = {{"observedGeneration", observed_generation}};
  if (!list.empty()) out["subsetStatuses"] = std::move(list);
  return out;
}

const Subset* WorkloadSpread::FindSubset(const std::string& subset) const {
  for (const Subset& s : subsets) {
    if (s.name == subset) return &s;
  }
  return nullptr;
}

bool WorkloadSpread::UsesDeletionCost() const {
  const std::string& k = target_ref.kind;
  return k == "CloneSet" || k == "Deployment" || k == "ReplicaSet";
}

// ---- Validation
// -----------------------------------------------------------------------------------

std::vector<std::string> WorkloadSpreadProblems(const Json& ws, const Json* old_ws) {
  kube::FieldErrors problems;
  ws_impl::Check(ws, old_ws, &problems, nullptr);
  return problems.Take();
}

std::vector<std::string> WorkloadSpreadConflicts(const Json& ws,
                                                 const std::vector<const Json*>& others) {
  std::vector<std::string> out;
  const Json* ref = kube::FindPath(ws, {"spec", "targetRef"});
  if (ref == nullptr || !ref->is_object()) return out;
  const TargetRef mine{Str(*ref, "apiVersion"), Str(*ref, "kind"), Str(*ref, "name")};
  for (const Json* other : others) {
    if (other == nullptr || kube::Name(*other) == kube::Name(ws)) continue;
    const Json* oref = kube::FindPath(*other, {"spec", "targetRef"});
    if (oref == nullptr || !oref->is_object()) continue;
    const TargetRef theirs{Str(*oref, "apiVersion"), Str(*oref, "kind"), Str(*oref, "name")};
    if (theirs.Group() == mine.Group() && theirs.kind == mine.kind && theirs.name == mine.name) {
      out.push_back(absl::StrCat("spec.targetRef: Invalid value: ", ws_impl::Show(*ref),
                                 ": the workload already has WorkloadSpread ", kube::Name(*other),
                                 " (one per workload)"));
      break;
    }
  }
  return out;
}

std::vector<std::string> WorkloadSpreadWarnings(const Json& ws) {
  std::vector<std::string> out;
  absl::StatusOr<WorkloadSpread> parsed = ParseWorkloadSpread(ws);
  if (!parsed.ok()) return out;
  const std::vector<Subset>& subsets = parsed->subsets;
  for (size_t i = 0; i + 1 < subsets.size() && !parsed->adaptive; ++i) {
    if (!subsets[i].max_replicas) {
      out.push_back(absl::StrCat("spec.subsets[", i, "] (", subsets[i].name,
                                 ") has no maxReplicas: with the Fixed strategy the subsets after "
                                 "it never get a pod"));
      break;
    }
  }
  for (size_t i = 0; i < subsets.size(); ++i) {
    for (size_t j = i + 1; j < subsets.size(); ++j) {
      const Json& a = subsets[i].required_term;
      const Json& b = subsets[j].required_term;
      if (a.is_null() || b.is_null()) continue;
      if (ws_impl::TermImpliedBy(a, b) && ws_impl::TermImpliedBy(b, a)) {
        out.push_back(absl::StrCat("spec.subsets[", i, "] (", subsets[i].name,
                                   ") and spec.subsets[", j, "] (", subsets[j].name,
                                   ") require the same nodes: they are one topology domain"));
      }
    }
  }
  return out;
}

absl::StatusOr<WorkloadSpread> ParseWorkloadSpread(const Json& ws) {
  kube::FieldErrors problems;
  WorkloadSpread out;
  ws_impl::Check(ws, nullptr, &problems, &out);
  std::vector<std::string> list = problems.Take();
  if (!list.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("WorkloadSpread ", kube::Name(ws), ": ", absl::StrJoin(list, "; ")));
  }
  return out;
}

// ---- Which pods
// -------------------------------------------------------------------------------------

bool PodCanBeSpread(const Json& pod) {
  if (!ws_impl::Active(pod)) return false;
  std::optional<kube::OwnerReference> owner = kube::ControllerOf(pod);
  return owner && ws_impl::PodOwnerKind(ws_impl::GroupOf(owner->api_version), owner->kind);
}

bool OwnerIsTarget(const TargetRef& target, const kube::OwnerReference& owner) {
  return ws_impl::GroupOf(owner.api_version) == target.Group() && owner.kind == target.kind &&
         owner.name == target.name;
}

bool NeedsOwnerLookup(const TargetRef& target, const kube::OwnerReference& owner) {
  return target.kind == "Deployment" && target.Group() == "apps" && owner.kind == "ReplicaSet" &&
         ws_impl::GroupOf(owner.api_version) == "apps";
}

bool PodMatchesTarget(const TargetRef& target, const Json& pod, const Json* owner_object) {
  if (!PodCanBeSpread(pod)) return false;
  const kube::OwnerReference owner = *kube::ControllerOf(pod);
  if (OwnerIsTarget(target, owner)) return true;
  if (!NeedsOwnerLookup(target, owner) || owner_object == nullptr) return false;
  if (kube::Name(*owner_object) != owner.name || kube::Uid(*owner_object) != owner.uid) {
    return false;
  }
  std::optional<kube::OwnerReference> up = kube::ControllerOf(*owner_object);
  return up && OwnerIsTarget(target, *up);
}

// ---- Webhook
// ----------------------------------------------------------------------------------------

std::string MatchedAnnotationValue(const std::string& ws, const std::string& subset,
                                   const std::string& uid) {
  // Go's encoding/json: struct field order, HTML characters escaped.
  auto quoted = [](const std::string& v) {
    return Json(v).dump(-1, ' ', false, Json::error_handler_t::replace);
  };
  std::string out = absl::StrCat("{\"name\":", quoted(ws), ",\"subset\":", quoted(subset));
  if (!uid.empty()) absl::StrAppend(&out, ",\"uid\":", quoted(uid));
  out += "}";
  std::string escaped;
  for (char c : out) {
    if (c == '<') {
      escaped += "\\u003c";
    } else if (c == '>') {
      escaped += "\\u003e";
    } else if (c == '&') {
      escaped += "\\u0026";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

std::optional<MatchedWorkloadSpread> MatchedOf(const Json& pod) {
  std::optional<std::string> a = kube::Annotation(pod, kMatchedWorkloadSpreadAnnotation);
  if (!a || a->empty()) return std::nullopt;
  Json j = Json::parse(*a, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  const Json* name = kube::Field(j, "name");
  if (name == nullptr || !name->is_string()) return std::nullopt;
  return MatchedWorkloadSpread{name->get<std::string>(), Str(j, "subset"), Str(j, "uid")};
}

SubsetChoice ChooseSubset(const WorkloadSpread& ws, const Json& pod,
                          const std::string& generated_uid, absl::Time now) {
  SubsetChoice c;
  if (ws.subsets.empty()) return c;
  if (ws.subsets.size() == 1 && !ws.subsets[0].max_replicas) {
    c.subset = ws.subsets[0].name;
    return c;
  }
  const std::string name = kube::Name(pod);
  if (ws.TargetsStatefulSet()) {
    // The ordinal is the name's trailing "-N".
    const size_t dash = name.rfind('-');
    int64_t ordinal = -1;
    if (dash != std::string::npos && dash + 1 < name.size() &&
        std::all_of(name.begin() + dash + 1, name.end(),
                    [](char ch) { return absl::ascii_isdigit(static_cast<unsigned char>(ch)); })) {
      if (!absl::SimpleAtoi(absl::string_view(name).substr(dash + 1), &ordinal)) ordinal = -1;
    }
    int64_t threshold = 0;
    for (const Subset& s : ws.subsets) {
      const SubsetStatus* st = ws.status.Find(s.name);
      if (st != nullptr && st->Unschedulable()) continue;
      threshold += s.max_replicas ? s.max_replicas->value : std::numeric_limits<int32_t>::max();
      if (ordinal < threshold) {
        c.subset = s.name;
        break;
      }
    }
    return c;
  }
  if (!name.empty()) {
    for (const SubsetStatus& s : ws.status.subsets) {
      if (s.Records(name)) {
        c.subset = s.name;
        return c;
      }
    }
  }
  for (size_t i = 0; i < ws.status.subsets.size(); ++i) {
    const SubsetStatus& s = ws.status.subsets[i];
    if (ws.FindSubset(s.name) == nullptr || s.Unschedulable()) continue;
    if (s.missing_replicas == -1) {
      c.subset = s.name;
      return c;
    }
    if (s.missing_replicas <= 0) continue;
    c.subset = s.name;
    WorkloadSpreadStatus st = ws.status;
    SubsetStatus& chosen = st.subsets[i];
    if (name.empty()) c.generated_uid = generated_uid;
    chosen.creating_pods[name.empty() ? generated_uid : name] = now;
    --chosen.missing_replicas;
    c.new_status = std::move(st);
    return c;
  }
  return c;
}

std::optional<WorkloadSpreadStatus> RecordDeletion(const WorkloadSpread& ws, const Json& pod,
                                                   absl::Time now) {
  std::optional<MatchedWorkloadSpread> m = MatchedOf(pod);
  if (!m || m->name != ws.name || !ws_impl::Active(pod) || !kube::ControllerOf(pod)) {
    return std::nullopt;
  }
  const std::string name = kube::Name(pod);
  WorkloadSpreadStatus st = ws.status;
  for (const SubsetStatus& s : st.subsets) {
    if (s.Records(name)) return std::nullopt;
  }
  for (SubsetStatus& s : st.subsets) {
    if (s.name != m->subset) continue;
    if (s.missing_replicas == -1) return std::nullopt;
    s.deleting_pods[name] = now;
    ++s.missing_replicas;
    return st;
  }
  return std::nullopt;
}

absl::Status StrategicMergePod(Json* target, const Json& patch) {
  if (target == nullptr) return absl::InvalidArgumentError("no pod");
  Json copy = *target;
  RETURN_IF_ERROR(ws_impl::MergeObject(&copy, patch, ""));
  *target = std::move(copy);
  return absl::OkStatus();
}

absl::StatusOr<Json> PlanSubsetInjection(const Json& pod, const WorkloadSpread& ws,
                                         const std::string& subset,
                                         const std::string& generated_uid) {
  const Subset* s = ws.FindSubset(subset);
  if (s == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("WorkloadSpread ", ws.name, " has no subset ", subset));
  }
  if (!pod.is_object()) return absl::InvalidArgumentError("the pod is not a JSON object");
  // The part of the pod the injection can touch: under metadata and spec, the members it
  // extends and those the patch names; any other top-level member the patch names, whole. A
  // "$patch": "replace" drops what it does not name, so it takes the whole of what it replaces
  // (the pod, or metadata or spec; found by test/fuzz/ws_strategic_merge.cc).
  std::map<std::string, std::set<std::string>> touched = {{"metadata", {"annotations"}},
                                                          {"spec", {"tolerations", "affinity"}}};
  const auto replaces = [](const Json& v) { return v.is_object() && v.contains("$patch"); };
  if (replaces(s->patch)) {
    for (const auto& [k, v] : pod.items()) touched[k].insert("*");
  }
  if (s->patch.is_object()) {
    for (const auto& [k, v] : s->patch.items()) {
      if (ws_impl::IsDirective(k)) continue;
      auto& keys = touched[k];
      if (v.is_object() && (k == "metadata" || k == "spec") && !replaces(v)) {
        for (const auto& [m, unused] : v.items()) keys.insert(m);
      } else {
        keys.insert("*");  // the whole member
      }
    }
  }
  Json part = Json::object();
  for (const auto& [k, keys] : touched) {
    auto it = pod.find(k);
    if (it == pod.end()) continue;
    if (keys.count("*") > 0 || !it->is_object()) {
      part[k] = *it;
      continue;
    }
    Json sub = Json::object();
    for (const std::string& m : keys) {
      if (auto mit = it->find(m); mit != it->end()) sub[m] = *mit;
    }
    part[k] = std::move(sub);
  }
  Json injected = part;
  RETURN_IF_ERROR(ws_impl::Inject(&injected, ws, *s, generated_uid));
  return webhook::JsonPatchDiff(part, injected);
}

// ---- Controller
// -------------------------------------------------------------------------------------

namespace {

// The pods of each spec subset (by the annotation naming this WorkloadSpread).
std::vector<std::vector<const Json*>> GroupPods(const WorkloadSpread& ws,
                                                const std::vector<Json>& pods) {
  std::vector<std::vector<const Json*>> out(ws.subsets.size());
  for (const Json& pod : pods) {
    std::optional<MatchedWorkloadSpread> m = MatchedOf(pod);
    if (!m || m->name != ws.name) continue;
    for (size_t i = 0; i < ws.subsets.size(); ++i) {
      if (ws.subsets[i].name == m->subset) out[i].push_back(&pod);
    }
  }
  return out;
}

}  // namespace

StatusPlan ComputeStatus(const WorkloadSpread& ws, const std::vector<Json>& pods, int32_t replicas,
                         absl::Time now) {
  StatusPlan plan;
  plan.status.observed_generation = ws.generation;
  const std::vector<std::vector<const Json*>> groups = GroupPods(ws, pods);
  const int32_t critical = ws.adaptive ? ws.reschedule_critical_seconds : 0;
  for (size_t i = 0; i < ws.subsets.size(); ++i) {
    const Subset& subset = ws.subsets[i];
    const SubsetStatus* old = ws.status.Find(subset.name);
    SubsetStatus s;
    s.name = subset.name;
    const int32_t max =
        subset.max_replicas ? std::max(0, subset.max_replicas->Scaled(std::max(0, replicas))) : -1;
    s.missing_replicas = max;
    std::map<std::string, absl::Time> creating;
    if (old != nullptr) creating = old->creating_pods;
    for (const Json* pod : groups[i]) {
      std::optional<MatchedWorkloadSpread> m = MatchedOf(*pod);
      creating.erase(m && !m->uid.empty() ? m->uid : kube::Name(*pod));
      if (!ws_impl::Active(*pod)) continue;
      ++s.replicas;
      if (s.missing_replicas > 0) --s.missing_replicas;
      const std::string name = kube::Name(*pod);
      if (old == nullptr) continue;
      auto d = old->deleting_pods.find(name);
      if (d == old->deleting_pods.end()) continue;
      const absl::Time expires = d->second + kDeletePodTimeout;
      if (expires < now) {
        plan.not_deleted.push_back(name);
      } else {
        s.deleting_pods[name] = d->second;
        if (s.missing_replicas < max) ++s.missing_replicas;
        ws_impl::Earliest(&plan.recheck, expires);
      }
    }
    for (const auto& [key, t] : creating) {
      const absl::Time expires = t + kCreatePodTimeout;
      if (expires < now) {
        plan.not_created.push_back(key);
      } else {
        s.creating_pods[key] = t;
        if (s.missing_replicas > 0) --s.missing_replicas;
        ws_impl::Earliest(&plan.recheck, expires);
      }
    }

    if (critical > 0) {
      const SubsetCondition* old_cond =
          old != nullptr ? old->Condition(kSubsetSchedulable) : nullptr;
      if (old_cond != nullptr) s.conditions.push_back(*old_cond);
      const SubsetCondition schedulable{kSubsetSchedulable, "True", now, "", ""};
      const SubsetCondition unschedulable{kSubsetSchedulable, "False", now, "", ""};
      if (i + 1 == ws.subsets.size()) {
        ws_impl::SetCondition(&s, schedulable);
      } else {
        bool failed = false;
        for (const Json* pod : groups[i]) {
          std::optional<absl::Time> at;
          if (ws_impl::UnscheduledTooLong(*pod, absl::Seconds(critical), now, &at)) {
            plan.pods_to_delete.push_back(kube::Name(*pod));
            failed = true;
          } else if (at) {
            ws_impl::Earliest(&plan.recheck, *at);
          }
        }
        if (failed) {
          ws_impl::SetCondition(&s, unschedulable);
        } else if (old_cond == nullptr) {
          ws_impl::SetCondition(&s, schedulable);
        } else if (old_cond->status == "False") {
          const absl::Time back = old_cond->last_transition_time + kMaxScheduledFailedDuration;
          if (back < now) {
            ws_impl::SetCondition(&s, schedulable);
          } else {
            ws_impl::Earliest(&plan.recheck, back);
          }
        }
      }
    }
    plan.status.subsets.push_back(std::move(s));
  }
  return plan;
}

std::map<std::string, int> DeletionCosts(const WorkloadSpread& ws, const std::vector<Json>& pods,
                                         int32_t replicas) {
  std::map<std::string, int> out;
  if (!ws.UsesDeletionCost()) return out;
  const std::vector<std::vector<const Json*>> groups = GroupPods(ws, pods);
  const int n = static_cast<int>(ws.subsets.size());
  for (int i = 0; i < n; ++i) {
    std::vector<const Json*> active;
    for (const Json* pod : groups[i]) {
      if (ws_impl::Active(*pod)) active.push_back(pod);
    }
    const int positive = kDeletionCostUnit * (n - i);
    const int negative = -kDeletionCostUnit * (i + 1);
    const std::optional<MaxReplicas>& max = ws.subsets[i].max_replicas;
    const int limit = max ? std::max(0, max->Scaled(std::max(0, replicas))) : 0;
    const int extra = max ? static_cast<int>(active.size()) - limit : 0;
    if (extra > 0) {
      std::vector<ws_impl::SortFacts> facts;
      facts.reserve(active.size());
      for (const Json* pod : active) facts.push_back(ws_impl::SortFactsOf(*pod));
      std::vector<size_t> order(active.size());
      for (size_t k = 0; k < order.size(); ++k) order[k] = k;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return ws_impl::DeleteFirst(facts[a], facts[b]);
      });
      for (size_t k = 0; k < order.size(); ++k) {
        out[kube::Name(*active[order[k]])] = static_cast<int>(k) < extra ? negative : positive;
      }
    } else {
      for (const Json* pod : active) out[kube::Name(*pod)] = positive;
    }
  }
  return out;
}

}  // namespace kruise::manager::workloadspread
