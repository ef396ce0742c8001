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
#include "manager/workload/workload_admission.h"

namespace kruise::manager::cloneset {
// Helpers live in a named namespace: this file shares a unity-build unit with the other sources
// of kruise_manager_cloneset, whose file-local helpers sit in kruise::manager::cloneset.
namespace admission_impl {
namespace {

using kube::Field;
using kube::Json;

using kube::json_defaults::DefaultIfEmptyString;
using kube::json_defaults::DefaultIfUnset;
using kube::json_defaults::ObjectMember;
using kube::SemanticNormalized;
using Problems = kube::FieldErrors;
using workload::CheckBool;
using workload::CheckIntRange;
using workload::IntOrPercent;
using workload::IsDnsSubdomain;

std::string Idx(const std::string& path, size_t i) { return absl::StrCat(path, "[", i, "]"); }

// ---- Validation ---------------------------------------------------------------------------------

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
  if (const Json* ps = Field(strategy, "priorityStrategy")) {
    workload::CheckPriorityStrategy(*ps, "spec.updateStrategy.priorityStrategy", problems);
  }
  if (const Json* ss = Field(strategy, "scatterStrategy")) {
    workload::CheckScatterStrategy(*ss, "spec.updateStrategy.scatterStrategy", problems);
  }
  if (const Json* ips = Field(strategy, "inPlaceUpdateStrategy")) {
    workload::CheckInPlaceUpdateStrategy(*ips, "spec.updateStrategy.inPlaceUpdateStrategy",
                                         problems);
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
  if (kube::GetString(spec, {"updateStrategy", "type"}).value_or("") == kInPlaceOnly &&
      workload::TemplateChangesBeyondImages(old_spec, spec)) {
    problems->Add("spec.template.spec",
                  "Forbidden: only allowed to update images in spec for InPlaceOnly");
  }
}

}  // namespace
}  // namespace admission_impl

kube::Json DefaultCloneSet(const kube::Json& cs, bool inject_template_defaults) {
  namespace impl = admission_impl;
  kube::Json out = cs;
  if (!out.is_object()) return out;
  kube::Json* spec = impl::ObjectMember(&out, "spec");
  if (spec == nullptr) return out;
  impl::DefaultIfUnset(spec, "replicas", 1);
  impl::DefaultIfUnset(spec, "revisionHistoryLimit", 10);
  if (inject_template_defaults) workload::DefaultTemplates(spec);
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

std::vector<std::string> CloneSetProblems(const kube::Json& cs, const kube::Json* old_cs) {
  namespace impl = admission_impl;
  impl::Problems problems;
  workload::CheckObjectName(cs, &problems);
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
      workload::NonEmptySelector(kube::Field(*spec, "selector"), "spec.selector",
                                 "empty selector is invalid for cloneset", &problems);
  const std::set<std::string> vct_names = workload::CheckVolumeClaimTemplates(*spec, &problems);
  workload::CheckTemplate(*spec, selector, vct_names, "cloneset", &problems);
  impl::CheckScaleStrategy(*spec, replicas, &problems);
  impl::CheckUpdateStrategy(*spec, replicas, &problems);
  workload::CheckIntRange(*spec, "revisionHistoryLimit", "spec.revisionHistoryLimit", &problems);
  workload::CheckIntRange(*spec, "minReadySeconds", "spec.minReadySeconds", &problems);
  workload::CheckIntRange(*spec, "progressDeadlineSeconds", "spec.progressDeadlineSeconds",
                          &problems);
  workload::CheckLifecycle(*spec, &problems);
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
