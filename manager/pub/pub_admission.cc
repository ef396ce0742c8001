#include "manager/pub/pub_admission.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "kube/deployment_naming.h"
#include "kube/object.h"

namespace kruise::manager::pub {
namespace pub_admission_impl {
namespace {

using kube::Json;

struct Req {
  std::string op;  // In, NotIn, Exists, DoesNotExist (anything else never overlaps)
  std::set<std::string> values;
};

// OpenKruise's convertSelectorToMatchExpressions: one requirement per key, matchLabels last.
std::map<std::string, Req> Requirements(const Json& selector) {
  std::map<std::string, Req> out;
  if (const Json* exprs = kube::Field(selector, "matchExpressions");
      exprs != nullptr && exprs->is_array()) {
    for (const Json& e : *exprs) {
      if (!e.is_object()) continue;
      const Json* key = kube::Field(e, "key");
      const Json* op = kube::Field(e, "operator");
      if (key == nullptr || !key->is_string()) continue;
      Req r;
      if (op != nullptr && op->is_string()) r.op = op->get<std::string>();
      if (const Json* vs = kube::Field(e, "values"); vs != nullptr && vs->is_array()) {
        for (const Json& v : *vs) {
          if (v.is_string()) r.values.insert(v.get<std::string>());
        }
      }
      out[key->get<std::string>()] = std::move(r);
    }
  }
  if (const Json* labels = kube::Field(selector, "matchLabels");
      labels != nullptr && labels->is_object()) {
    for (const auto& [k, v] : labels->items()) {
      if (v.is_string()) out[k] = Req{"In", {v.get<std::string>()}};
    }
  }
  return out;
}

bool Intersect(const std::set<std::string>& a, const std::set<std::string>& b) {
  return std::any_of(a.begin(), a.end(), [&](const std::string& v) { return b.count(v) > 0; });
}
// Every value of `b` is in `a`.
bool Contains(const std::set<std::string>& a, const std::set<std::string>& b) {
  return std::all_of(b.begin(), b.end(), [&](const std::string& v) { return a.count(v) > 0; });
}

// OpenKruise's isMatchExpOverlap(e1, e2).
bool Overlap(const Req& e1, const Req& e2) {
  if (e1.op == "In") {
    return e2.op == "Exists" || (e2.op == "In" && Intersect(e2.values, e1.values)) ||
           (e2.op == "NotIn" && !Contains(e2.values, e1.values));
  }
  if (e1.op == "Exists") return e2.op == "In" || e2.op == "NotIn" || e2.op == "Exists";
  if (e1.op == "NotIn") {
    return e2.op == "Exists" || e2.op == "DoesNotExist" || e2.op == "NotIn" ||
           (e2.op == "In" && !Contains(e1.values, e2.values));
  }
  if (e1.op == "DoesNotExist") return e2.op == "DoesNotExist" || e2.op == "NotIn";
  return false;
}

const Json* SpecField(const Json& obj, const char* key) {
  const Json* spec = kube::Field(obj, "spec");
  if (spec == nullptr || !spec->is_object()) return nullptr;
  const Json* v = kube::Field(*spec, key);
  return v != nullptr && !v->is_null() ? v : nullptr;
}

std::string Str(const Json& obj, const char* key) {
  const Json* v = kube::Field(obj, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

}  // namespace
}  // namespace pub_admission_impl

using kube::Json;

std::string GroupOf(const std::string& api_version) {
  const size_t slash = api_version.find('/');
  return slash == std::string::npos ? "" : api_version.substr(0, slash);
}

std::string OwnerKindOfTarget(const TargetRef& ref) {
  if (GroupOf(ref.api_version) == "apps" && ref.kind == "Deployment") return "ReplicaSet";
  return ref.kind;
}

bool SelectorsLooselyOverlap(const Json& a, const Json& b) {
  using namespace pub_admission_impl;
  if (!a.is_object() || !b.is_object()) return false;
  const auto ra = Requirements(a), rb = Requirements(b);
  for (const auto& [key, e1] : ra) {
    auto it = rb.find(key);
    if (it == rb.end() || !Overlap(e1, it->second)) return false;
  }
  for (const auto& [key, e2] : rb) {
    auto it = ra.find(key);
    if (it == ra.end() || !Overlap(e2, it->second)) return false;
  }
  return true;
}

std::vector<std::string> PubConflicts(const Json& pub,
                                      const std::vector<std::shared_ptr<const Json>>& others) {
  using namespace pub_admission_impl;
  std::vector<std::string> out;
  const std::string name = kube::Name(pub);
  const Json* ref = SpecField(pub, "targetRef");
  const Json* sel = SpecField(pub, "selector");
  for (const auto& other_p : others) {
    if (other_p == nullptr || !other_p->is_object()) continue;
    const Json& other = *other_p;
    const std::string other_name = kube::Name(other);
    if (other_name == name) continue;
    const Json* other_ref = SpecField(other, "targetRef");
    const Json* other_sel = SpecField(other, "selector");
    if (ref != nullptr && other_ref != nullptr && ref->is_object() && other_ref->is_object()) {
      if (GroupOf(Str(*ref, "apiVersion")) == GroupOf(Str(*other_ref, "apiVersion")) &&
          Str(*ref, "kind") == Str(*other_ref, "kind") &&
          Str(*ref, "name") == Str(*other_ref, "name")) {
        out.push_back(absl::StrCat("spec.targetRef: Invalid value: ", Str(*ref, "kind"), " ",
                                   Str(*ref, "name"),
                                   ": in conflict with PodUnavailableBudget ", other_name,
                                   " (same workload): a pod can be guarded by one budget only"));
        return out;
      }
    } else if (sel != nullptr && other_sel != nullptr && SelectorsLooselyOverlap(*sel, *other_sel)) {
      out.push_back(absl::StrCat("spec.selector: Invalid value: ",
                                 sel->dump(-1, ' ', false, Json::error_handler_t::replace),
                                 ": in conflict with PodUnavailableBudget ", other_name,
                                 " (overlapping selector): a pod can be guarded by one budget only"));
      return out;
    }
  }
  return out;
}

bool PubCoversPod(const Pub& pub, const Json& pod) {
  if (pub.selector) return pub.selector->MatchesObject(pod);
  if (!pub.target_ref) return false;
  const TargetRef& t = *pub.target_ref;
  auto owner = kube::ControllerOf(pod);
  if (!owner || GroupOf(owner->api_version) != GroupOf(t.api_version)) return false;
  if (owner->kind != OwnerKindOfTarget(t)) return false;
  if (owner->kind == t.kind) return owner->name == t.name;
  // A Deployment's pod: its ReplicaSet is <deployment>-<pod-template-hash>.
  return kube::DeploymentOfReplicaSetPod(pod, owner->name) == t.name;
}

}  // namespace kruise::manager::pub
