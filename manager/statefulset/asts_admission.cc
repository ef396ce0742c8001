#include "manager/statefulset/asts_admission.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kube/field_errors.h"
#include "kube/object.h"
#include "kube/pod_defaults.h"
#include "manager/statefulset/asts_plan.h"
#include "manager/workload/workload_admission.h"

namespace kruise::manager::statefulset {
// Helpers live in a named namespace: this file shares a unity-build unit with asts_plan.cc, whose
// file-local helpers sit in kruise::manager::statefulset's anonymous namespace.
namespace asts_admission_impl {
namespace {

using kube::Field;
using kube::Json;
using kube::json_defaults::DefaultIfEmptyString;
using kube::json_defaults::DefaultIfUnset;
using kube::json_defaults::ObjectMember;

constexpr char kOrderedReady[] = "OrderedReady";
constexpr char kParallel[] = "Parallel";
constexpr char kRollingUpdate[] = "RollingUpdate";
constexpr char kOnDelete[] = "OnDelete";
constexpr char kReCreate[] = "ReCreate";
constexpr char kInPlaceIfPossible[] = "InPlaceIfPossible";
constexpr char kInPlaceOnly[] = "InPlaceOnly";
constexpr char kInPlaceUpdateReady[] = "InPlaceUpdateReady";
constexpr int kMaxMinReadySeconds = 300;  // OpenKruise's MaxMinReadySeconds

// The spec fields an UPDATE may change (see the header).
constexpr const char* kMutableSpecFields[] = {"replicas",
                                              "template",
                                              "updateStrategy",
                                              "scaleStrategy",
                                              "reserveOrdinals",
                                              "lifecycle",
                                              "revisionHistoryLimit",
                                              "persistentVolumeClaimRetentionPolicy",
                                              "volumeClaimTemplates",
                                              "ordinals",
                                              "volumeClaimUpdateStrategy"};

using Problems = kube::FieldErrors;
using workload::CheckBool;
using workload::CheckIntRange;
using kube::SemanticNormalized;

// The non-template defaults (SetDefaultsStatefulSet without SetDefaultPodSpec) on a spec object.
void DefaultSpec(Json* spec) {
  DefaultIfEmptyString(spec, "podManagementPolicy", kOrderedReady);
  if (Json* strategy = ObjectMember(spec, "updateStrategy")) {
    DefaultIfEmptyString(strategy, "type", kRollingUpdate);
    if ((*strategy)["type"] == kRollingUpdate) {
      if (Json* ru = ObjectMember(strategy, "rollingUpdate")) {
        DefaultIfUnset(ru, "partition", 0);
        DefaultIfUnset(ru, "maxUnavailable", 1);
        DefaultIfEmptyString(ru, "podUpdatePolicy", kReCreate);
        DefaultIfUnset(ru, "minReadySeconds", 0);
      }
    }
  }
  if (Json* policy = ObjectMember(spec, "persistentVolumeClaimRetentionPolicy")) {
    DefaultIfEmptyString(policy, "whenDeleted", "Retain");
    DefaultIfEmptyString(policy, "whenScaled", "Retain");
  }
  DefaultIfUnset(spec, "replicas", 1);
  DefaultIfUnset(spec, "revisionHistoryLimit", 10);
}

// maxUnavailable (rollingUpdate's or scaleStrategy's): a non-negative integer or "N%", at least 1
// once scaled against one replica (rounded up), and anything but the integer 1 only with Parallel.
void CheckMaxUnavailable(const Json& v, bool parallel, const std::string& path,
                         Problems* problems) {
  bool zero = false;
  if (v.is_number_integer()) {
    if (v.get<int64_t>() < 0) {
      problems->Add(
          path, absl::StrCat("Invalid value: ", v.dump(), ": must be greater than or equal to 0"));
      return;
    }
    zero = v.get<int64_t>() == 0;
  } else if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    int64_t percent = 0;
    if (s.size() < 2 || s.back() != '%' ||
        !std::all_of(s.begin(), s.end() - 1,
                     [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); }) ||
        !absl::SimpleAtoi(absl::string_view(s).substr(0, s.size() - 1), &percent)) {
      problems->Add(path, absl::StrCat("Invalid value: ", v.dump(),
                                       ": must be an integer or a percentage like \"10%\""));
      return;
    }
    zero = percent == 0;
  } else {
    problems->Add(path, absl::StrCat("Invalid value: ", v.dump(),
                                     ": must be an integer or a percentage like \"10%\""));
    return;
  }
  if (zero) {
    problems->Add(path, absl::StrCat("Invalid value: ", v.dump(), ": must be at least 1"));
  }
  if (!parallel && !(v.is_number_integer() && v.get<int64_t>() == 1)) {
    problems->Add(path, absl::StrCat("Invalid value: ", v.dump(),
                                     ": a value other than 1 requires podManagementPolicy "
                                     "Parallel"));
  }
}

bool HasInPlaceReadinessGate(const Json& spec) {
  const Json* gates = kube::FindPath(spec, {"template", "spec", "readinessGates"});
  if (gates == nullptr || !gates->is_array()) return false;
  for (const Json& g : *gates) {
    if (kube::GetString(g, {"conditionType"}).value_or("") == kInPlaceUpdateReady) return true;
  }
  return false;
}

// The checks every workload shares (manager/workload): name, selector, template,
// volumeClaimTemplates, lifecycle, and the rolling update's priorityStrategy and
// inPlaceUpdateStrategy.
void SharedChecks(const Json& sts, const Json& spec, const Json* rolling_update,
                  Problems* problems) {
  workload::CheckObjectName(sts, problems);
  std::optional<kube::LabelSelector> selector =
      workload::NonEmptySelector(Field(spec, "selector"), "spec.selector",
                                 "empty selector is invalid for statefulset", problems);
  const std::set<std::string> vct_names = workload::CheckVolumeClaimTemplates(spec, problems);
  workload::CheckTemplate(spec, selector, vct_names, "statefulset", problems);
  workload::CheckLifecycle(spec, problems);
  if (rolling_update == nullptr) return;
  const std::string path = "spec.updateStrategy.rollingUpdate";
  if (const Json* ps = kube::FindPath(*rolling_update, {"unorderedUpdate", "priorityStrategy"})) {
    workload::CheckPriorityStrategy(*ps, path + ".unorderedUpdate.priorityStrategy", problems);
  }
  if (const Json* ips = Field(*rolling_update, "inPlaceUpdateStrategy")) {
    workload::CheckInPlaceUpdateStrategy(*ips, path + ".inPlaceUpdateStrategy", problems);
  }
}

void CheckRollingUpdate(const Json& spec, const Json& ru, bool parallel, Problems* problems) {
  const std::string path = "spec.updateStrategy.rollingUpdate";
  CheckIntRange(ru, "partition", path + ".partition", problems);
  CheckIntRange(ru, "minReadySeconds", path + ".minReadySeconds", problems, kMaxMinReadySeconds,
                "must be no more than 300 seconds");
  if (const Json* mu = Field(ru, "maxUnavailable")) {
    CheckMaxUnavailable(*mu, parallel, path + ".maxUnavailable", problems);
  }
  if (const Json* policy = Field(ru, "podUpdatePolicy")) {
    const std::string p = policy->is_string() ? policy->get<std::string>() : "";
    if (p == kInPlaceIfPossible || p == kInPlaceOnly) {
      if (!HasInPlaceReadinessGate(spec)) {
        problems->Add("spec.template.spec.readinessGates",
                      absl::StrCat("Required value: must contain conditionType ",
                                   kInPlaceUpdateReady, " when podUpdatePolicy is ", p));
      }
    } else if (!p.empty() && p != kReCreate) {
      problems->Add(
          path + ".podUpdatePolicy",
          absl::StrCat("Unsupported value: ", policy->dump(), ": supported values: \"", kReCreate,
                       "\", \"", kInPlaceIfPossible, "\", \"", kInPlaceOnly, "\""));
    } else if (!policy->is_string()) {
      problems->Add(path + ".podUpdatePolicy", "Invalid value: must be a string");
    }
  }
  CheckBool(ru, "paused", path + ".paused", problems);
  if (const Json* uu = Field(ru, "unorderedUpdate")) {
    if (!uu->is_object()) {
      problems->Add(path + ".unorderedUpdate", "Invalid value: must be an object");
    } else if (!parallel) {
      problems->Add(path + ".unorderedUpdate",
                    "Invalid value: unorderedUpdate requires podManagementPolicy Parallel");
    }
  }
}

void CheckUpdateStrategy(const Json& spec, bool parallel, Problems* problems) {
  const Json* us = Field(spec, "updateStrategy");
  if (us == nullptr) return;
  if (!us->is_object()) {
    problems->Add("spec.updateStrategy", "Invalid value: must be an object");
    return;
  }
  std::string type = workload::CheckEnum(*us, "type", "spec.updateStrategy.type",
                                         {kRollingUpdate, kOnDelete}, problems);
  if (type.empty()) {
    if (const Json* t = Field(*us, "type"); t != nullptr && *t != "") return;  // reported
    type = kRollingUpdate;
  }
  const Json* ru = Field(*us, "rollingUpdate");
  if (ru == nullptr) return;
  if (type == kOnDelete) {
    problems->Add("spec.updateStrategy.rollingUpdate",
                  "Invalid value: only allowed for updateStrategy type RollingUpdate");
    return;
  }
  if (!ru->is_object()) {
    problems->Add("spec.updateStrategy.rollingUpdate", "Invalid value: must be an object");
    return;
  }
  CheckRollingUpdate(spec, *ru, parallel, problems);
}

// spec.volumeClaimUpdateStrategy: an object whose type is OnPodRollingUpdate or OnDelete (empty
// reads as OnDelete, as OpenKruise: nothing is done to claims).
void CheckVolumeClaimUpdateStrategy(const Json& spec, Problems* problems) {
  const Json* vcus = Field(spec, "volumeClaimUpdateStrategy");
  if (vcus == nullptr) return;
  if (!vcus->is_object()) {
    problems->Add("spec.volumeClaimUpdateStrategy", "Invalid value: must be an object");
    return;
  }
  workload::CheckEnum(*vcus, "type", "spec.volumeClaimUpdateStrategy.type",
                      {"OnPodRollingUpdate", "OnDelete"}, problems);
}

// With volumeClaimUpdateStrategy OnPodRollingUpdate the controller only grows claims during the
// rollout, so (as OpenKruise's ValidateVolumeClaimTemplateUpdate) templates may not be added,
// removed or renamed, and keep their storageClassName and accessModes; only the size changes.
// (OpenKruise also asks the StorageClass whether it allows expansion; the controller reports
// that instead, FailedUpdatePVC.)
void CheckVolumeClaimTemplateUpdate(const Json& spec, const Json& old_spec, Problems* problems) {
  if (kube::GetString(spec, {"volumeClaimUpdateStrategy", "type"}).value_or("") !=
      "OnPodRollingUpdate") {
    return;
  }
  const Json* now = Field(spec, "volumeClaimTemplates");
  const Json* before = Field(old_spec, "volumeClaimTemplates");
  const Json empty = Json::array();
  const Json& a = now != nullptr && now->is_array() ? *now : empty;
  const Json& b = before != nullptr && before->is_array() ? *before : empty;
  if (a.size() != b.size()) {
    problems->Add("spec.volumeClaimTemplates",
                  "Forbidden: templates may not be added or removed while "
                  "volumeClaimUpdateStrategy is OnPodRollingUpdate");
    return;
  }
  for (const Json& t : a) {
    const std::string name = kube::Name(t);
    const std::string path = absl::StrCat("spec.volumeClaimTemplates[", name, "]");
    auto old =
        std::find_if(b.begin(), b.end(), [&](const Json& o) { return kube::Name(o) == name; });
    if (old == b.end()) {
      problems->Add(path + ".name",
                    "Forbidden: a template may not be renamed while volumeClaimUpdateStrategy is "
                    "OnPodRollingUpdate");
      continue;
    }
    if (CompareClaim(*old, t).other_diff) {
      problems->Add(path,
                    "Forbidden: only the storage size may change while "
                    "volumeClaimUpdateStrategy is OnPodRollingUpdate (storageClassName and "
                    "accessModes are kept); with OnDelete, change them and delete the claims");
    }
  }
}

void CheckRetentionPolicy(const Json& spec, Problems* problems) {
  const Json* policy = Field(spec, "persistentVolumeClaimRetentionPolicy");
  if (policy == nullptr) return;
  const std::string path = "spec.persistentVolumeClaimRetentionPolicy";
  if (!policy->is_object()) {
    problems->Add(path, "Invalid value: must be an object");
    return;
  }
  for (const char* key : {"whenDeleted", "whenScaled"}) {
    const Json* v = Field(*policy, key);
    if (v == nullptr || (v->is_string() && v->get_ref<const std::string&>().empty())) continue;
    if (*v != "Retain" && *v != "Delete") {
      problems->Add(absl::StrCat(path, ".", key),
                    absl::StrCat("Unsupported value: ", v->dump(),
                                 ": supported values: \"Retain\", \"Delete\""));
    }
  }
}

void CheckUpdate(const Json& spec, const Json& old_spec, Problems* problems) {
  Json now = spec.is_object() ? spec : Json::object();
  Json before = old_spec.is_object() ? old_spec : Json::object();
  // Absent fields read as their defaults on both sides.
  DefaultSpec(&now);
  DefaultSpec(&before);
  for (const char* key : kMutableSpecFields) {
    now.erase(key);
    before.erase(key);
  }
  for (const char* key : {"selector", "serviceName", "podManagementPolicy"}) {
    const Json* a = Field(now, key);
    const Json* b = Field(before, key);
    if (SemanticNormalized(a ? *a : Json()) != SemanticNormalized(b ? *b : Json())) {
      problems->Add(absl::StrCat("spec.", key), "Invalid value: field is immutable");
    }
    now.erase(key);
    before.erase(key);
  }
  if (SemanticNormalized(now) != SemanticNormalized(before)) {
    problems->Add("spec",
                  "Forbidden: updates to statefulset spec for fields other than 'replicas', "
                  "'template', 'updateStrategy', 'scaleStrategy', 'reserveOrdinals', 'lifecycle', "
                  "'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy', "
                  "'volumeClaimTemplates', 'ordinals' and 'volumeClaimUpdateStrategy' are "
                  "forbidden");
  }
  if (kube::GetString(spec, {"updateStrategy", "rollingUpdate", "podUpdatePolicy"}).value_or("") ==
          kInPlaceOnly &&
      workload::TemplateChangesBeyondImages(old_spec, spec)) {
    problems->Add("spec.template.spec",
                  "Forbidden: with podUpdatePolicy InPlaceOnly only container images may change");
  }
}

}  // namespace
}  // namespace asts_admission_impl

kube::Json DefaultAdvancedStatefulSet(const kube::Json& sts, bool inject_template_defaults) {
  namespace impl = asts_admission_impl;
  kube::Json out = sts;
  if (!out.is_object()) return out;
  kube::Json* spec = impl::ObjectMember(&out, "spec");
  if (spec == nullptr) return out;
  impl::DefaultSpec(spec);
  if (inject_template_defaults) workload::DefaultTemplates(spec);
  return out;
}

std::vector<std::string> AdvancedStatefulSetProblems(const kube::Json& sts,
                                                     const kube::Json* old_sts) {
  namespace impl = asts_admission_impl;
  impl::Problems problems;
  const kube::Json* spec = kube::Field(sts, "spec");
  if (spec == nullptr || !spec->is_object()) {
    problems.Add("spec", "Required value");
    return problems.Take();
  }
  impl::CheckIntRange(*spec, "replicas", "spec.replicas", &problems);
  bool parallel = false;
  if (const kube::Json* pmp = kube::Field(*spec, "podManagementPolicy")) {
    parallel = *pmp == impl::kParallel;
    if (!parallel && *pmp != impl::kOrderedReady && *pmp != "") {
      problems.Add("spec.podManagementPolicy",
                   absl::StrCat("Unsupported value: ", pmp->dump(), ": supported values: \"",
                                impl::kOrderedReady, "\", \"", impl::kParallel, "\""));
    }
  }
  const kube::Json* ru = kube::FindPath(*spec, {"updateStrategy", "rollingUpdate"});
  impl::SharedChecks(sts, *spec, ru != nullptr && ru->is_object() ? ru : nullptr, &problems);
  impl::CheckUpdateStrategy(*spec, parallel, &problems);
  if (const kube::Json* ss = kube::Field(*spec, "scaleStrategy")) {
    if (!ss->is_object()) {
      problems.Add("spec.scaleStrategy", "Invalid value: must be an object");
    } else if (const kube::Json* mu = kube::Field(*ss, "maxUnavailable")) {
      impl::CheckMaxUnavailable(*mu, parallel, "spec.scaleStrategy.maxUnavailable", &problems);
    }
  }
  if (const kube::Json* ro = kube::Field(*spec, "reserveOrdinals")) {
    if (auto parsed = ParseReserveOrdinals(*ro); !parsed.ok()) {
      // "reserveOrdinals[i]: why" -> "spec.reserveOrdinals[i]: Invalid value: why".
      const absl::string_view message = parsed.status().message();
      const size_t colon = message.find(": ");
      if (colon == absl::string_view::npos) {
        problems.Add("spec.reserveOrdinals", absl::StrCat("Invalid value: ", message));
      } else {
        problems.Add(absl::StrCat("spec.", message.substr(0, colon)),
                     absl::StrCat("Invalid value: ", message.substr(colon + 2)));
      }
    }
  }
  impl::CheckRetentionPolicy(*spec, &problems);
  impl::CheckVolumeClaimUpdateStrategy(*spec, &problems);
  if (const kube::Json* ordinals = kube::Field(*spec, "ordinals")) {
    if (!ordinals->is_object()) {
      problems.Add("spec.ordinals", "Invalid value: must be an object");
    } else {
      impl::CheckIntRange(*ordinals, "start", "spec.ordinals.start", &problems);
    }
  }
  impl::CheckIntRange(*spec, "revisionHistoryLimit", "spec.revisionHistoryLimit", &problems);
  if (const kube::Json* sn = kube::Field(*spec, "serviceName"); sn != nullptr && !sn->is_string()) {
    problems.Add("spec.serviceName", "Invalid value: must be a string");
  }
  if (old_sts != nullptr) {
    const kube::Json* old_spec = kube::Field(*old_sts, "spec");
    impl::CheckUpdate(*spec, old_spec != nullptr ? *old_spec : kube::Json::object(), &problems);
    impl::CheckVolumeClaimTemplateUpdate(
        *spec, old_spec != nullptr ? *old_spec : kube::Json::object(), &problems);
  }
  return problems.Take();
}

absl::Status ValidateAdvancedStatefulSet(const kube::Json& sts, const kube::Json* old_sts) {
  return kube::FieldErrorsStatus(AdvancedStatefulSetProblems(sts, old_sts));
}

}  // namespace kruise::manager::statefulset
