#include "manager/pub/pub_budget.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "kube/field_errors.h"
#include "manager/inplace/inplace_update.h"

namespace kruise::manager::pub {
namespace pub_impl {
namespace {

using kube::Field;
using kube::Json;

std::string Show(const Json& v) { return v.dump(-1, ' ', false, Json::error_handler_t::replace); }

// The string member `key` of `obj`, "" when absent or not a string.
std::string Str(const Json& obj, const char* key) {
  const Json* v = Field(obj, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

using Problems = kube::FieldErrors;

// A non-negative integer or "N%" with 0 <= N <= 100 (Kubernetes' ValidatePositiveIntOrPercent and
// IsNotMoreThan100Percent); nullopt when invalid, reported under `path`.
std::optional<IntOrPercent> ParseIntOrPercent(const Json& v, const std::string& path,
                                              Problems* problems) {
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i < 0) {
      problems->Add(path,
                    absl::StrCat("Invalid value: ", i, ": must be greater than or equal to 0"));
      return std::nullopt;
    }
    if (i > std::numeric_limits<int32_t>::max()) {
      problems->Add(path, absl::StrCat("Invalid value: ", i, ": must fit in 32 bits"));
      return std::nullopt;
    }
    return IntOrPercent{false, static_cast<int>(i)};
  }
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    absl::string_view digits(s);
    int n = 0;
    if (absl::ConsumeSuffix(&digits, "%") && !digits.empty() &&
        std::all_of(digits.begin(), digits.end(),
                    [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); })) {
      if (!absl::SimpleAtoi(digits, &n) || n > 100) {
        problems->Add(path,
                      absl::StrCat("Invalid value: \"", s, "\": must not be greater than 100%"));
        return std::nullopt;
      }
      return IntOrPercent{true, n};
    }
  }
  problems->Add(path, absl::StrCat("Invalid value: ", Show(v),
                                   ": must be an integer or percentage (e.g '5%')"));
  return std::nullopt;
}

// Kubernetes' schema.ParseGroupVersion: "", "v1" or "group/version" (one slash, both non-empty).
bool ValidGroupVersion(const std::string& s) {
  if (s.empty() || s == "v1") return true;
  std::vector<absl::string_view> parts = absl::StrSplit(s, '/');
  if (parts.size() == 1) return true;
  return parts.size() == 2 && !parts[0].empty() && !parts[1].empty();
}

std::optional<Operation> OperationFromName(absl::string_view s) {
  if (s == "DELETE") return Operation::kDelete;
  if (s == "EVICT") return Operation::kEvict;
  if (s == "UPDATE") return Operation::kUpdate;
  return std::nullopt;
}

void ParseTimes(const Json* m, std::map<std::string, absl::Time>* out) {
  if (m == nullptr || !m->is_object()) return;
  for (const auto& [pod, t] : m->items()) {
    absl::StatusOr<absl::Time> parsed =
        t.is_string() ? kube::ParseRfc3339(t.get<std::string>()) : absl::InvalidArgumentError("");
    (*out)[pod] = parsed.ok() ? *parsed : absl::InfinitePast();
  }
}

int32_t Int32Field(const Json& obj, const char* key) {
  const int64_t v = kube::IntField(obj, key, 0);
  return static_cast<int32_t>(std::clamp<int64_t>(v, std::numeric_limits<int32_t>::min(),
                                                  std::numeric_limits<int32_t>::max()));
}

// Spec and annotations, parsed and checked; `out` may be null (problems only).
void CheckPub(const Json& pub, const Json* old_pub, Problems* problems, Pub* out) {
  if (!pub.is_object()) {
    problems->Add("<object>", "must be a JSON object");
    return;
  }
  const auto annotations = kube::Annotations(pub);
  std::set<Operation> ops = {Operation::kDelete, Operation::kEvict, Operation::kUpdate};
  if (auto a = annotations.find(kProtectOperationsAnnotation);
      a != annotations.end() && !a->second.empty()) {
    ops.clear();
    for (absl::string_view name : absl::StrSplit(a->second, ',')) {
      if (auto op = OperationFromName(name)) {
        ops.insert(*op);
      } else {
        problems->Add(absl::StrCat("metadata.annotations[", kProtectOperationsAnnotation, "]"),
                      absl::StrCat("Unsupported value: \"", name,
                                   "\": supported values: \"DELETE\", \"EVICT\", \"UPDATE\""));
      }
    }
  }
  std::optional<int32_t> total;
  if (auto a = annotations.find(kProtectTotalReplicasAnnotation); a != annotations.end()) {
    int32_t n = 0;
    if (absl::SimpleAtoi(a->second, &n)) {
      total = n;
    } else {
      problems->Add(absl::StrCat("metadata.annotations[", kProtectTotalReplicasAnnotation, "]"),
                    absl::StrCat("Invalid value: \"", a->second, "\": must be a 32-bit integer"));
    }
  }

  static const Json kEmpty = Json::object();
  const Json* spec_p = Field(pub, "spec");
  const Json& spec = spec_p != nullptr && spec_p->is_object() ? *spec_p : kEmpty;
  if (spec_p != nullptr && !spec_p->is_object()) problems->Add("spec", "must be an object");
  const Json* sel = Field(spec, "selector");
  const Json* ref = Field(spec, "targetRef");
  std::optional<kube::LabelSelector> selector;
  std::optional<TargetRef> target;
  if (sel == nullptr && ref == nullptr) {
    problems->Add("spec", "one of selector and targetRef is required");
  } else if (sel != nullptr && ref != nullptr) {
    problems->Add("spec", "selector and targetRef are mutually exclusive");
  } else if (ref != nullptr) {
    if (!ref->is_object()) {
      problems->Add("spec.targetRef", "must be an object with apiVersion, kind and name");
    } else {
      TargetRef t{Str(*ref, "apiVersion"), Str(*ref, "kind"), Str(*ref, "name")};
      bool ok = true;
      for (const auto& [field, value] :
           {std::pair<const char*, const std::string*>{"apiVersion", &t.api_version},
            {"kind", &t.kind},
            {"name", &t.name}}) {
        if (value->empty()) {
          problems->Add(absl::StrCat("spec.targetRef.", field), "Required value");
          ok = false;
        }
      }
      if (!t.api_version.empty() && !ValidGroupVersion(t.api_version)) {
        problems->Add("spec.targetRef.apiVersion",
                      absl::StrCat("Invalid value: \"", t.api_version,
                                   "\": must be \"version\" or \"group/version\""));
        ok = false;
      }
      if (ok) target = std::move(t);
    }
  } else {
    auto parsed = kube::LabelSelector::FromJson(*sel);
    if (!sel->is_object()) {
      problems->Add("spec.selector", "must be a label selector object");
    } else if (!parsed.ok()) {
      problems->Add("spec.selector", absl::StrCat("Invalid value: ", parsed.status().message()));
    } else if (parsed->matches_everything()) {
      problems->Add("spec.selector",
                    "Invalid value: {}: empty selector is not valid for "
                    "PodUnavailableBudget");
    } else {
      selector = *std::move(parsed);
    }
  }

  const Json* mu = Field(spec, "maxUnavailable");
  const Json* ma = Field(spec, "minAvailable");
  std::optional<IntOrPercent> max_unavailable, min_available;
  if (mu == nullptr && ma == nullptr) {
    problems->Add("spec", "one of maxUnavailable and minAvailable is required");
  } else if (mu != nullptr && ma != nullptr) {
    problems->Add("spec", "maxUnavailable and minAvailable are mutually exclusive");
  } else if (mu != nullptr) {
    max_unavailable = ParseIntOrPercent(*mu, "spec.maxUnavailable", problems);
  } else {
    min_available = ParseIntOrPercent(*ma, "spec.minAvailable", problems);
  }

  if (old_pub != nullptr && old_pub->is_object()) {
    const Json* old_spec = Field(*old_pub, "spec");
    const Json null_json;
    auto old_field = [&](const char* key) -> const Json& {
      const Json* v = old_spec != nullptr ? Field(*old_spec, key) : nullptr;
      return v != nullptr ? *v : null_json;
    };
    if ((sel != nullptr ? *sel : null_json) != old_field("selector")) {
      problems->Add("spec.selector", "Forbidden: selector cannot be modified");
    }
    if ((ref != nullptr ? *ref : null_json) != old_field("targetRef")) {
      problems->Add("spec.targetRef", "Forbidden: targetRef cannot be modified");
    }
  }

  if (out == nullptr) return;
  out->namespace_ = kube::Namespace(pub);
  out->name = kube::Name(pub);
  out->generation = kube::Generation(pub);
  out->resource_version = kube::ResourceVersion(pub);
  out->selector = std::move(selector);
  out->target_ref = std::move(target);
  out->max_unavailable = max_unavailable;
  out->min_available = min_available;
  out->protect_operations = std::move(ops);
  out->protect_total_replicas = total;
  if (const Json* st = Field(pub, "status"); st != nullptr && st->is_object()) {
    PubStatus& s = out->status;
    s.observed_generation = kube::IntField(*st, "observedGeneration", 0);
    s.unavailable_allowed = Int32Field(*st, "unavailableAllowed");
    s.current_available = Int32Field(*st, "currentAvailable");
    s.desired_available = Int32Field(*st, "desiredAvailable");
    s.total_replicas = Int32Field(*st, "totalReplicas");
    ParseTimes(Field(*st, "disruptedPods"), &s.disrupted_pods);
    ParseTimes(Field(*st, "unavailablePods"), &s.unavailable_pods);
  }
}

bool HasUnavailableLabel(const Json& pod) {
  const Json* labels = kube::FindPath(pod, {"metadata", "labels"});
  if (labels == nullptr || !labels->is_object()) return false;
  return std::any_of(labels->items().begin(), labels->items().end(), [](const auto& kv) {
    return absl::StartsWith(kv.key(), kUnavailableLabelPrefix);
  });
}

const Json* ContainerStatusNamed(const Json& pod, const std::string& name) {
  const Json* list = kube::FindPath(pod, {"status", "containerStatuses"});
  if (list == nullptr || !list->is_array()) return nullptr;
  for (const Json& s : *list) {
    if (Str(s, "name") == name) return &s;
  }
  return nullptr;
}

// OpenKruise's IsPodStateConsistent, with our in-place completion check.
bool Consistent(const Json& pod) {
  const Json* containers = kube::FindPath(pod, {"spec", "containers"});
  std::map<std::string, std::string> images;
  if (containers != nullptr && containers->is_array()) {
    for (const Json& c : *containers) {
      const std::string name = Str(c, "name"), image = Str(c, "image");
      if (name.empty()) continue;
      images[name] = image;
      const size_t at = image.find("@sha256:");
      if (at == std::string::npos) continue;
      const Json* s = ContainerStatusNamed(pod, name);
      const std::string image_id = s != nullptr ? Str(*s, "imageID") : "";
      if (!absl::EndsWith(image_id, image.substr(at))) return false;
    }
  }
  auto annotation = kube::Annotation(pod, inplace::kInPlaceUpdateStateAnnotation);
  if (!annotation) return true;
  auto state = inplace::ParseInPlaceUpdateState(*annotation);
  if (!state.ok()) return true;  // OpenKruise ignores a state it cannot read too
  std::map<std::string, std::string> changed;
  for (const auto& [name, last] : state->last_container_statuses) {
    if (auto it = images.find(name); it != images.end()) changed[name] = it->second;
  }
  return inplace::InPlaceUpdateCompleted(pod, *state, changed);
}

}  // namespace
}  // namespace pub_impl

using kube::Json;

const char* OperationName(Operation op) {
  switch (op) {
    case Operation::kDelete:
      return "DELETE";
    case Operation::kEvict:
      return "EVICT";
    case Operation::kUpdate:
      return "UPDATE";
  }
  return "";
}

int IntOrPercent::Scaled(int total) const {
  if (!percent) return value;
  // Kubernetes' arithmetic (GetScaledValueFromIntOrPercent with roundUp).
  return static_cast<int>(std::ceil(static_cast<double>(value) * total / 100));
}

Json PubStatus::ToJson() const {
  Json s = {{"observedGeneration", observed_generation},
            {"unavailableAllowed", unavailable_allowed},
            {"currentAvailable", current_available},
            {"desiredAvailable", desired_available},
            {"totalReplicas", total_replicas}};
  auto times = [](const std::map<std::string, absl::Time>& m) {
    Json out = Json::object();
    for (const auto& [pod, t] : m) {
      out[pod] = kube::FormatRfc3339(t == absl::InfinitePast() ? absl::UnixEpoch() : t);
    }
    return out;
  };
  if (!disrupted_pods.empty()) s["disruptedPods"] = times(disrupted_pods);
  if (!unavailable_pods.empty()) s["unavailablePods"] = times(unavailable_pods);
  return s;
}

std::vector<std::string> PubProblems(const Json& pub, const Json* old_pub) {
  pub_impl::Problems problems;
  pub_impl::CheckPub(pub, old_pub, &problems, nullptr);
  return problems.Take();
}

absl::StatusOr<Pub> ParsePub(const Json& pub) {
  pub_impl::Problems problems;
  Pub out;
  pub_impl::CheckPub(pub, nullptr, &problems, &out);
  std::vector<std::string> list = problems.Take();
  if (!list.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("PodUnavailableBudget ", kube::Name(pub), ": ", absl::StrJoin(list, "; ")));
  }
  return out;
}

PodFacts PodFactsOf(const Json& pod) {
  PodFacts f;
  f.name = kube::Name(pod);
  const std::string phase = kube::GetString(pod, {"status", "phase"}).value_or("");
  f.active = phase != "Succeeded" && phase != "Failed" && !kube::IsBeingDeleted(pod);
  bool ready_condition = false;
  if (const Json* conds = kube::FindPath(pod, {"status", "conditions"});
      conds != nullptr && conds->is_array()) {
    for (const Json& c : *conds) {
      if (pub_impl::Str(c, "type") == "Ready") {
        ready_condition = pub_impl::Str(c, "status") == "True";
      }
    }
  }
  f.ready = phase == "Running" && ready_condition && !pub_impl::HasUnavailableLabel(pod);
  f.consistent = pub_impl::Consistent(pod);
  f.no_protect = kube::Annotation(pod, kNoProtectAnnotation) == "true";
  return f;
}

PubStatus ComputeStatus(const Pub& pub, const std::vector<PodFacts>& pods,
                        std::optional<int32_t> workload_replicas, absl::Time now,
                        std::optional<absl::Time>* recheck, std::vector<std::string>* not_deleted) {
  PubStatus s;
  s.observed_generation = pub.generation;
  int32_t active = 0;
  for (const PodFacts& p : pods) active += p.active ? 1 : 0;
  s.total_replicas = pub.protect_total_replicas.value_or(workload_replicas.value_or(active));
  const int total = std::max<int32_t>(s.total_replicas, 0);
  if (pub.max_unavailable) {
    s.desired_available = std::max(0, total - pub.max_unavailable->Scaled(total));
  } else if (pub.min_available) {
    s.desired_available = pub.min_available->Scaled(total);
  }

  std::optional<absl::Time> earliest;
  auto keep = [&](const std::map<std::string, absl::Time>& from, const std::string& pod,
                  absl::Duration timeout, std::map<std::string, absl::Time>* to) {
    auto it = from.find(pod);
    if (it == from.end()) return false;
    const absl::Time expires = it->second + timeout;
    if (expires < now) return true;  // expired
    (*to)[pod] = it->second;
    if (!earliest || expires < *earliest) earliest = expires;
    return false;
  };
  for (const PodFacts& p : pods) {
    if (!p.active) continue;  // gone from the budget: its entries are dropped
    if (keep(pub.status.disrupted_pods, p.name, kDeletionTimeout, &s.disrupted_pods) &&
        not_deleted != nullptr) {
      not_deleted->push_back(p.name);
    }
    keep(pub.status.unavailable_pods, p.name, kUpdatedDelayCheckTime, &s.unavailable_pods);
  }
  for (const PodFacts& p : pods) {
    if (p.active && !s.Records(p.name) && p.ready && p.consistent) ++s.current_available;
  }
  s.unavailable_allowed = std::max(0, s.current_available - s.desired_available);
  if (recheck != nullptr) *recheck = earliest;
  return s;
}

bool UpdateMakesUnavailable(const Json& old_pod, const Json& new_pod) {
  const Json null_json;
  const Json* a = kube::Field(old_pod, "spec");
  const Json* b = kube::Field(new_pod, "spec");
  if ((a != nullptr ? *a : null_json) != (b != nullptr ? *b : null_json)) return true;
  return !pub_impl::HasUnavailableLabel(old_pod) && pub_impl::HasUnavailableLabel(new_pod);
}

Decision DecideDisruption(const Pub& pub, const PodFacts& pod, Operation op, bool dry_run,
                          absl::Time now) {
  Decision d;
  if (pod.no_protect || !pod.ready || !pod.consistent || pub.status.desired_available == 0 ||
      pub.protect_operations.count(op) == 0 || pub.status.Records(pod.name)) {
    return d;  // costs nothing
  }
  // OpenKruise's words (a Forbidden error on the PUB), then the numbers behind them.
  const std::string forbidden =
      absl::StrCat("podunavailablebudget.policy.kruise.io \"", pub.name, "\" is forbidden: ");
  if (pub.status.unavailable_allowed <= 0) {
    d.allowed = false;
    d.message = absl::StrCat(forbidden, "pub unavailable allowed is negative (", OperationName(op),
                             " of pod ", pod.name, " denied: currentAvailable ",
                             pub.status.current_available, ", desiredAvailable ",
                             pub.status.desired_available, ")");
    return d;
  }
  if (pub.status.disrupted_pods.size() + pub.status.unavailable_pods.size() > kMaxRecordedPods) {
    d.allowed = false;
    d.message = absl::StrCat(forbidden,
                             "DisruptedPods and UnavailablePods map too big - too many unavailable "
                             "not confirmed by PUB controller");
    return d;
  }
  if (dry_run) return d;
  PubStatus s = pub.status;
  --s.unavailable_allowed;
  (op == Operation::kUpdate ? s.unavailable_pods : s.disrupted_pods)[pod.name] = now;
  d.new_status = std::move(s);
  return d;
}

}  // namespace kruise::manager::pub
