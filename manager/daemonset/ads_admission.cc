#include "manager/daemonset/ads_admission.h"

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "kube/field_errors.h"
#include "kube/object.h"
#include "kube/pod_defaults.h"
#include "manager/workload/workload_admission.h"

namespace kruise::manager::daemonset {
// Helpers live in a named namespace: this file shares a unity-build unit with ads_plan.cc, whose
// file-local helpers sit in kruise::manager::daemonset's anonymous namespace.
namespace ads_admission_impl {
namespace {

using kube::Field;
using kube::Json;
using kube::SemanticNormalized;
using kube::json_defaults::Absent;
using kube::json_defaults::DefaultIfEmptyString;
using kube::json_defaults::DefaultIfUnset;
using kube::json_defaults::ObjectMember;
using Problems = kube::FieldErrors;

constexpr char kRollingUpdate[] = "RollingUpdate";
constexpr char kOnDelete[] = "OnDelete";
constexpr char kStandard[] = "Standard";
constexpr char kInPlaceIfPossible[] = "InPlaceIfPossible";
constexpr char kSurging[] = "Surging";  // deprecated alias of Standard with maxSurge 1
constexpr int kDefaultBurstReplicas = 250;

// The spec fields an UPDATE may change (see the header).
constexpr const char* kMutableSpecFields[] = {
    "burstReplicas",        "template",     "lifecycle", "updateStrategy", "minReadySeconds",
    "revisionHistoryLimit", "scaleStrategy"};

// SetDefaultsDaemonSet on a spec object.
void DefaultSpec(Json* spec) {
  DefaultIfUnset(spec, "burstReplicas", kDefaultBurstReplicas);
  if (Json* strategy = ObjectMember(spec, "updateStrategy")) {
    DefaultIfEmptyString(strategy, "type", kRollingUpdate);
    if ((*strategy)["type"] == kRollingUpdate) {
      if (Json* ru = ObjectMember(strategy, "rollingUpdate")) {
        const Json* type = Field(*ru, "rollingUpdateType");
        if (type != nullptr && *type == kSurging) {
          DefaultIfUnset(ru, "maxSurge", 1);
          DefaultIfUnset(ru, "maxUnavailable", 0);
          (*ru)["rollingUpdateType"] = kStandard;
        }
        DefaultIfEmptyString(ru, "rollingUpdateType", kStandard);
        if (Absent(*ru, "maxUnavailable") && Absent(*ru, "maxSurge")) {
          (*ru)["maxUnavailable"] = 1;
          (*ru)["maxSurge"] = 0;
        }
      }
    }
  }
  DefaultIfUnset(spec, "revisionHistoryLimit", 10);
}

// An IntOrString budget (maxUnavailable, maxSurge): its value as a count or percent (0 when
// absent), nullopt when invalid (reported).
std::optional<int> Budget(const Json& ru, const char* key, const std::string& path,
                          Problems* problems) {
  const Json* v = Field(ru, key);
  if (v == nullptr || v->is_null()) return 0;
  // Scaled against 100, a percentage reads as its number and an integer as itself.
  return workload::IntOrPercent(*v, 100, path, problems);
}

void CheckRollingUpdate(const Json& ru, Problems* problems) {
  const std::string path = "spec.updateStrategy.rollingUpdate";
  const std::optional<int> unavailable =
      Budget(ru, "maxUnavailable", path + ".maxUnavailable", problems);
  const std::optional<int> surge = Budget(ru, "maxSurge", path + ".maxSurge", problems);
  const bool has_unavailable = unavailable.value_or(0) != 0;
  const bool has_surge = surge.value_or(0) != 0;
  if (unavailable && surge) {
    if (has_unavailable && has_surge) {
      problems->Add(path + ".maxSurge",
                    absl::StrCat("Invalid value: ", Field(ru, "maxSurge")->dump(),
                                 ": may not be set when maxUnavailable is non-zero"));
    } else if (!has_unavailable && !has_surge) {
      problems->Add(path + ".maxUnavailable", "Required value: cannot be 0 when maxSurge is 0");
    }
  }
  if (const Json* type = Field(ru, "rollingUpdateType")) {
    const std::string t = type->is_string() ? type->get<std::string>() : "";
    if (!type->is_string() ||
        (!t.empty() && t != kStandard && t != kInPlaceIfPossible && t != kSurging)) {
      problems->Add(
          path + ".rollingUpdateType",
          absl::StrCat("Unsupported value: ", type->dump(), ": supported values: \"", kStandard,
                       "\", \"", kInPlaceIfPossible, "\", \"", kSurging, "\""));
    } else if (t == kInPlaceIfPossible && has_surge) {
      problems->Add(path + ".maxSurge", "Required value: must be 0 for InPlaceIfPossible type");
    } else if (t == kSurging && has_unavailable) {
      problems->Add(path + ".maxUnavailable", "Required value: must be 0 for Surging type");
    }
  }
  if (const Json* partition = Field(ru, "partition");
      partition != nullptr && !partition->is_null()) {
    workload::IntOrPercent(*partition, 100, path + ".partition", problems);
  }
  if (const Json* sel = Field(ru, "selector"); sel != nullptr && !sel->is_null()) {
    if (!sel->is_object()) {
      problems->Add(path + ".selector", "Invalid value: must be a label selector object");
    } else if (auto parsed = kube::LabelSelector::FromJson(*sel); !parsed.ok()) {
      problems->Add(path + ".selector", absl::StrCat("Invalid value: ", parsed.status().message()));
    }
  }
  workload::CheckBool(ru, "paused", path + ".paused", problems);
}

void CheckUpdateStrategy(const Json& spec, Problems* problems) {
  const Json* us = Field(spec, "updateStrategy");
  if (us == nullptr || us->is_null()) return;
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
  if (type == kOnDelete) return;
  // Read with the defaults, so that an absent rollingUpdate is the default one.
  Json ru = Json::object();
  if (const Json* given = Field(*us, "rollingUpdate"); given != nullptr && !given->is_null()) {
    if (!given->is_object()) {
      problems->Add("spec.updateStrategy.rollingUpdate", "Invalid value: must be an object");
      return;
    }
    ru = *given;
  }
  // The defaults turn Surging into Standard; validate the type as the user wrote it.
  Json defaulted = Json{{"updateStrategy", {{"type", kRollingUpdate}, {"rollingUpdate", ru}}}};
  DefaultSpec(&defaulted);
  Json& checked = defaulted["updateStrategy"]["rollingUpdate"];
  if (const Json* type_given = Field(ru, "rollingUpdateType")) {
    checked["rollingUpdateType"] = *type_given;
  }
  CheckRollingUpdate(checked, problems);
}

// Daemons run on many nodes at once: a GCE persistent disk can only be shared read-only.
void CheckReadOnlyPersistentDisks(const Json& spec, Problems* problems) {
  const Json* volumes = kube::FindPath(spec, {"template", "spec", "volumes"});
  if (volumes == nullptr || !volumes->is_array()) return;
  for (size_t i = 0; i < volumes->size(); ++i) {
    const Json* pd = Field((*volumes)[i], "gcePersistentDisk");
    if (pd == nullptr || !pd->is_object()) continue;
    const Json* ro = Field(*pd, "readOnly");
    if (ro == nullptr || !ro->is_boolean() || !ro->get<bool>()) {
      problems->Add(absl::StrCat("spec.template.spec.volumes[", i, "].gcePersistentDisk.readOnly"),
                    "Invalid value: false: must be true for replicated pods > 1; GCE PD can only "
                    "be mounted on multiple machines if it is read-only");
    }
  }
}

void CheckScaleStrategy(const Json& spec, Problems* problems) {
  const Json* ss = Field(spec, "scaleStrategy");
  if (ss == nullptr || ss->is_null()) return;
  if (!ss->is_object()) {
    problems->Add("spec.scaleStrategy", "Invalid value: must be an object");
    return;
  }
  workload::CheckBool(*ss, "partitionedScaling", "spec.scaleStrategy.partitionedScaling", problems);
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
  const Json* a = Field(now, "selector");
  const Json* b = Field(before, "selector");
  if (SemanticNormalized(a ? *a : Json()) != SemanticNormalized(b ? *b : Json())) {
    problems->Add("spec.selector", "Invalid value: field is immutable");
  }
  now.erase("selector");
  before.erase("selector");
  if (SemanticNormalized(now) != SemanticNormalized(before)) {
    problems->Add("spec",
                  "Forbidden: updates to daemonset spec for fields other than 'burstReplicas', "
                  "'template', 'lifecycle', 'updateStrategy', 'scaleStrategy', "
                  "'minReadySeconds' and 'revisionHistoryLimit' are forbidden");
  }
}

}  // namespace
}  // namespace ads_admission_impl

kube::Json DefaultAdvancedDaemonSet(const kube::Json& ds) {
  namespace impl = ads_admission_impl;
  kube::Json out = ds;
  if (!out.is_object()) return out;
  if (kube::Json* spec = impl::ObjectMember(&out, "spec")) impl::DefaultSpec(spec);
  return out;
}

std::vector<std::string> AdvancedDaemonSetProblems(const kube::Json& ds, const kube::Json* old_ds) {
  namespace impl = ads_admission_impl;
  impl::Problems problems;
  const kube::Json* spec = kube::Field(ds, "spec");
  if (spec == nullptr || !spec->is_object()) {
    problems.Add("spec", "Required value");
    return problems.Take();
  }
  workload::CheckObjectName(ds, &problems);
  std::optional<kube::LabelSelector> selector =
      workload::NonEmptySelector(kube::Field(*spec, "selector"), "spec.selector",
                                 "empty selector is invalid for daemonset", &problems);
  workload::CheckTemplate(*spec, selector, {}, "daemonset", &problems);
  impl::CheckReadOnlyPersistentDisks(*spec, &problems);
  workload::CheckIntRange(*spec, "minReadySeconds", "spec.minReadySeconds", &problems);
  impl::CheckUpdateStrategy(*spec, &problems);
  workload::CheckIntRange(*spec, "revisionHistoryLimit", "spec.revisionHistoryLimit", &problems);
  workload::CheckLifecycle(*spec, &problems);
  if (const kube::Json* hook = kube::FindPath(*spec, {"lifecycle", "inPlaceUpdate"});
      hook != nullptr && !hook->is_null()) {
    problems.Add("spec.lifecycle.inPlaceUpdate",
                 "Forbidden: inPlaceUpdate hook has not supported yet");
  }
  if (const kube::Json* burst = kube::Field(*spec, "burstReplicas");
      burst != nullptr && !burst->is_null()) {
    workload::IntOrPercent(*burst, 100, "spec.burstReplicas", &problems);
  }
  impl::CheckScaleStrategy(*spec, &problems);
  if (old_ds != nullptr) {
    const kube::Json* old_spec = kube::Field(*old_ds, "spec");
    impl::CheckUpdate(*spec, old_spec != nullptr ? *old_spec : kube::Json::object(), &problems);
  }
  return problems.Take();
}

absl::Status ValidateAdvancedDaemonSet(const kube::Json& ds, const kube::Json* old_ds) {
  return kube::FieldErrorsStatus(AdvancedDaemonSetProblems(ds, old_ds));
}

}  // namespace kruise::manager::daemonset
