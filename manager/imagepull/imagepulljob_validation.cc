#include "manager/imagepull/imagepulljob_validation.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kube/errors.h"
#include "kube/object.h"

namespace kruise::manager {
namespace {

using kube::Field;
using kube::IntField;
using kube::Json;
using kube::kConflictRetries;


// An optional integer field: nullopt when absent; `bad` set when present but not an integer.
std::optional<int64_t> OptInt(const Json& obj, const char* key, bool* bad) {
  const Json* v = Field(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) {
    *bad = true;
    return std::nullopt;
  }
  return v->get<int64_t>();
}

void CheckLabelSelector(const Json& sel, const std::string& field, std::vector<std::string>* errs) {
  Json labels_only = Json::object();
  if (const Json* ml = Field(sel, "matchLabels")) labels_only["matchLabels"] = *ml;
  if (const Json* me = Field(sel, "matchExpressions")) labels_only["matchExpressions"] = *me;
  auto parsed = kube::LabelSelector::FromJson(labels_only);
  if (!parsed.ok())
    errs->push_back(absl::StrCat(field, ": invalid selector: ", parsed.status().message()));
}

}  // namespace

Json DefaultImagePullJob(const Json& job, bool add_protection_finalizer) {
  Json out = job.is_object() ? job : Json::object();
  if (!out.contains("spec") || !out["spec"].is_object()) out["spec"] = Json::object();
  Json& spec = out["spec"];
  if (!spec.contains("completionPolicy") || !spec["completionPolicy"].is_object()) {
    spec["completionPolicy"] = Json::object();
  }
  if (spec["completionPolicy"].value("type", "").empty())
    spec["completionPolicy"]["type"] = "Always";
  if (!spec.contains("pullPolicy") || !spec["pullPolicy"].is_object())
    spec["pullPolicy"] = Json::object();
  Json& pp = spec["pullPolicy"];
  if (!pp.contains("timeoutSeconds") || pp["timeoutSeconds"].is_null()) pp["timeoutSeconds"] = 600;
  if (!pp.contains("backoffLimit") || pp["backoffLimit"].is_null()) pp["backoffLimit"] = 3;
  if (!spec.contains("imagePullPolicy") || !spec["imagePullPolicy"].is_string() ||
      spec["imagePullPolicy"].get<std::string>().empty()) {
    spec["imagePullPolicy"] = "IfNotPresent";
  }
  if (add_protection_finalizer && !kube::HasFinalizer(out, kProtectionFinalizer)) {
    if (!out.contains("metadata") || !out["metadata"].is_object()) out["metadata"] = Json::object();
    Json& fins = out["metadata"]["finalizers"];
    if (!fins.is_array()) fins = Json::array();
    fins.push_back(kProtectionFinalizer);
  }
  return out;
}

absl::StatusOr<int> ParseParallelism(const Json& spec) {
  const Json* p = Field(spec, "parallelism");
  if (p == nullptr) return 1;
  if (p->is_number_integer()) {
    int64_t v = p->get<int64_t>();
    if (v < 0 || v > INT32_MAX) {
      return absl::InvalidArgumentError("spec.parallelism: must be a non-negative integer");
    }
    return static_cast<int>(v);
  }
  if (p->is_string()) {
    const std::string s = p->get<std::string>();
    int v = 0;
    if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos &&
        absl::SimpleAtoi(s, &v) && v >= 0) {
      return v;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.parallelism: must be a non-negative integer (percentages are not supported), got \"",
        s, "\""));
  }
  return absl::InvalidArgumentError("spec.parallelism: must be a non-negative integer");
}

std::vector<std::string> ValidateImagePullJob(const Json& job) {
  std::vector<std::string> errs;
  const Json* spec_p = Field(job, "spec");
  if (spec_p == nullptr || !spec_p->is_object()) {
    errs.push_back("spec: required");
    return errs;
  }
  const Json& spec = *spec_p;

  // Image.
  const Json* image = Field(spec, "image");
  if (image == nullptr || !image->is_string() || image->get<std::string>().empty()) {
    errs.push_back("spec.image: image can not be empty");
  } else if (auto nt = SplitImageNameTag(image->get<std::string>()); !nt.ok()) {
    errs.push_back(absl::StrCat("spec.image: invalid image ", image->get<std::string>(), ": ",
                                nt.status().message()));
  }

  // Node selector.
  const Json* selector = Field(spec, "selector");
  if (selector != nullptr) {
    if (!selector->is_object()) {
      errs.push_back("spec.selector: must be an object");
    } else {
      const Json* names = Field(*selector, "names");
      const bool has_labels = Field(*selector, "matchLabels") != nullptr ||
                              Field(*selector, "matchExpressions") != nullptr;
      if (names != nullptr && has_labels) {
        errs.push_back("spec.selector: can not set both names and labelSelector");
      }
      if (has_labels) CheckLabelSelector(*selector, "spec.selector", &errs);
      if (names != nullptr) {
        if (!names->is_array()) {
          errs.push_back("spec.selector.names: must be a list of node names");
        } else {
          std::set<std::string> seen;
          for (const Json& n : *names) {
            if (!n.is_string() || n.get<std::string>().empty()) {
              errs.push_back("spec.selector.names: names must be non-empty strings");
              break;
            }
            if (!seen.insert(n.get<std::string>()).second) {
              errs.push_back(
                  absl::StrCat("spec.selector.names: duplicated name ", n.get<std::string>()));
              break;
            }
          }
        }
      }
    }
  }
  const Json* pod_selector = Field(spec, "podSelector");
  if (pod_selector != nullptr) {
    if (selector != nullptr)
      errs.push_back("spec.podSelector: can not set both selector and podSelector");
    if (!pod_selector->is_object()) {
      errs.push_back("spec.podSelector: must be an object");
    } else {
      CheckLabelSelector(*pod_selector, "spec.podSelector", &errs);
    }
  }

  // Parallelism.
  if (auto p = ParseParallelism(spec); !p.ok()) errs.push_back(std::string(p.status().message()));

  // Pull policy.
  int64_t timeout = 600;
  if (const Json* pp = Field(spec, "pullPolicy")) {
    bool bad = false;
    auto t = OptInt(*pp, "timeoutSeconds", &bad);
    if (bad || (t && *t <= 0))
      errs.push_back("spec.pullPolicy.timeoutSeconds: must be a positive integer");
    if (t && *t > 0) timeout = *t;
    bad = false;
    auto b = OptInt(*pp, "backoffLimit", &bad);
    if (bad || (b && *b < 0))
      errs.push_back("spec.pullPolicy.backoffLimit: must be a non-negative integer");
  }

  // Completion policy.
  const Json* cp = Field(spec, "completionPolicy");
  const Json empty = Json::object();
  const Json& policy = cp != nullptr && cp->is_object() ? *cp : empty;
  bool bad_deadline = false, bad_ttl = false;
  auto deadline = OptInt(policy, "activeDeadlineSeconds", &bad_deadline);
  auto ttl = OptInt(policy, "ttlSecondsAfterFinished", &bad_ttl);
  if (bad_deadline || (deadline && *deadline < 0)) {
    errs.push_back("spec.completionPolicy.activeDeadlineSeconds: must be a non-negative integer");
  }
  if (bad_ttl || (ttl && *ttl < 0)) {
    errs.push_back("spec.completionPolicy.ttlSecondsAfterFinished: must be a non-negative integer");
  }
  const std::string type = policy.value("type", "");
  if (type.empty() || type == "Always") {
    if (deadline && *deadline >= 0 && timeout > *deadline) {
      errs.push_back(
          absl::StrCat("spec.completionPolicy.activeDeadlineSeconds: must not be less than "
                       "pullPolicy.timeoutSeconds (",
                       timeout, ")"));
    }
  } else if (type == "Never") {
    if (deadline || ttl || bad_deadline || bad_ttl) {
      errs.push_back(
          "spec.completionPolicy: activeDeadlineSeconds and ttlSecondsAfterFinished can only work "
          "with type Always");
    }
  } else {
    errs.push_back(absl::StrCat("spec.completionPolicy.type: unknown type ", type));
  }

  // imagePullPolicy.
  if (const Json* ipp = Field(spec, "imagePullPolicy")) {
    const std::string v = ipp->is_string() ? ipp->get<std::string>() : "?";
    if (!v.empty() && v != "Always" && v != "IfNotPresent") {
      errs.push_back(absl::StrCat("spec.imagePullPolicy: must be Always or IfNotPresent, got ", v));
    }
  }

  // pullSecrets.
  if (const Json* ps = Field(spec, "pullSecrets")) {
    bool ok = ps->is_array();
    if (ok) {
      for (const Json& s : *ps) ok = ok && s.is_string() && !s.get<std::string>().empty();
    }
    if (!ok) errs.push_back("spec.pullSecrets: must be a list of Secret names");
  }
  return errs;
}

absl::Status ValidateImagePullJobStatus(const Json& job) {
  std::vector<std::string> errs = ValidateImagePullJob(job);
  if (errs.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errs, "; "));
}

absl::StatusOr<ImagePullJobSpec> ParseImagePullJobSpec(const Json& job) {
  Json defaulted = DefaultImagePullJob(job);
  if (absl::Status s = ValidateImagePullJobStatus(defaulted); !s.ok()) return s;
  const Json& spec = defaulted["spec"];
  ImagePullJobSpec out;
  out.image = spec["image"].get<std::string>();
  auto nt = SplitImageNameTag(out.image);
  if (!nt.ok()) return nt.status();
  out.name_tag = *nt;
  if (const Json* ps = Field(spec, "pullSecrets")) {
    for (const Json& s : *ps) out.pull_secrets.push_back(s.get<std::string>());
  }
  if (const Json* s = Field(spec, "selector")) out.selector = *s;
  if (const Json* s = Field(spec, "podSelector")) out.pod_selector = *s;
  auto par = ParseParallelism(spec);
  if (!par.ok()) return par.status();
  out.parallelism = *par;
  out.timeout_seconds = spec["pullPolicy"]["timeoutSeconds"].get<int64_t>();
  out.backoff_limit = spec["pullPolicy"]["backoffLimit"].get<int64_t>();
  const Json& cp = spec["completionPolicy"];
  out.never = cp.value("type", "") == "Never";
  bool bad = false;
  out.active_deadline_seconds = OptInt(cp, "activeDeadlineSeconds", &bad);
  out.ttl_seconds_after_finished = OptInt(cp, "ttlSecondsAfterFinished", &bad);
  if (const Json* sc = Field(spec, "sandboxConfig")) out.sandbox_config = *sc;
  out.image_pull_policy = spec["imagePullPolicy"].get<std::string>();
  return out;
}

}  // namespace kruise::manager
