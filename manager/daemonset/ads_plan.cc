#include "manager/daemonset/ads_plan.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "manager/daemonset/ads_admission.h"

namespace kruise::manager::daemonset {
namespace {

constexpr char kRevisionLabel[] = "controller-revision-hash";
constexpr char kTemplateGenerationLabel[] = "pod-template-generation";
constexpr char kTemplateGenerationAnnotation[] = "deprecated.daemonset.template.generation";
constexpr char kLifecycleLabel[] = "lifecycle.apps.kruise.io/state";
constexpr char kPreparingDelete[] = "PreparingDelete";
constexpr char kNoSchedule[] = "NoSchedule";
constexpr char kNoExecute[] = "NoExecute";

// ---- JSON readers (never throw) -------------------------------------------------------------

std::string StringOr(const Json& obj, const char* key, std::string def = "") {
  const Json* v = kube::Field(obj, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : def;
}

// A list of strings at obj[key]; INVALID_ARGUMENT naming `path` when mistyped.
absl::Status ReadStrings(const Json& obj, const char* key, const std::string& path,
                         std::vector<std::string>* out) {
  const Json* v = kube::Field(obj, key);
  if (v == nullptr || v->is_null()) return absl::OkStatus();
  if (!v->is_array()) return absl::InvalidArgumentError(path + ": want a list of strings");
  for (const Json& s : *v) {
    if (!s.is_string()) return absl::InvalidArgumentError(path + ": want a list of strings");
    out->push_back(s.get<std::string>());
  }
  return absl::OkStatus();
}

absl::Status ReadStringMap(const Json& obj, const char* key, const std::string& path,
                           std::map<std::string, std::string>* out) {
  const Json* v = kube::Field(obj, key);
  if (v == nullptr || v->is_null()) return absl::OkStatus();
  if (!v->is_object()) return absl::InvalidArgumentError(path + ": want a map of strings");
  for (const auto& [k, val] : v->items()) {
    if (!val.is_string()) return absl::InvalidArgumentError(path + "." + k + ": want a string");
    (*out)[k] = val.get<std::string>();
  }
  return absl::OkStatus();
}

// ---- Node selector terms ----------------------------------------------------------------------

NodeSelectorRequirement ReadRequirement(const Json& r, bool* malformed) {
  NodeSelectorRequirement req;
  if (!r.is_object()) {
    *malformed = true;
    return req;
  }
  req.key = StringOr(r, "key");
  req.op = StringOr(r, "operator");
  if (!ReadStrings(r, "values", "values", &req.values).ok()) *malformed = true;
  return req;
}

// Kubernetes' NodeSelectorRequirementsAsSelector / AsFieldSelector rules.
bool RequirementWellFormed(const NodeSelectorRequirement& r, bool field) {
  if (r.key.empty()) return false;
  if (field) {
    return r.key == "metadata.name" && (r.op == "In" || r.op == "NotIn") && r.values.size() == 1;
  }
  if (r.op == "In" || r.op == "NotIn") return !r.values.empty();
  if (r.op == "Exists" || r.op == "DoesNotExist") return r.values.empty();
  if (r.op == "Gt" || r.op == "Lt") {
    int64_t v = 0;
    return r.values.size() == 1 && absl::SimpleAtoi(r.values[0], &v);
  }
  return false;
}

bool RequirementMatches(const NodeSelectorRequirement& r,
                        const std::map<std::string, std::string>& labels) {
  auto it = labels.find(r.key);
  const bool has = it != labels.end();
  auto in_values = [&] {
    return has && std::find(r.values.begin(), r.values.end(), it->second) != r.values.end();
  };
  if (r.op == "In") return in_values();
  if (r.op == "NotIn") return !in_values();
  if (r.op == "Exists") return has;
  if (r.op == "DoesNotExist") return !has;
  int64_t want = 0;
  int64_t got = 0;
  if (!has || !absl::SimpleAtoi(r.values[0], &want) || !absl::SimpleAtoi(it->second, &got)) {
    return false;
  }
  return r.op == "Gt" ? got > want : got < want;
}

bool TermMatches(const NodeSelectorTerm& term, const NodeView& node) {
  if (term.malformed) return false;
  if (term.match_expressions.empty() && term.match_fields.empty()) return false;
  for (const NodeSelectorRequirement& r : term.match_expressions) {
    if (!RequirementMatches(r, node.labels)) return false;
  }
  const std::map<std::string, std::string> fields = {{"metadata.name", node.name}};
  for (const NodeSelectorRequirement& r : term.match_fields) {
    if (!RequirementMatches(r, fields)) return false;
  }
  return true;
}

// The node a pod is for: spec.nodeName, else the single metadata.name In term of its required
// node affinity (Kubernetes' GetTargetNodeName); "" when neither.
std::string TargetNode(const Json& pod) {
  std::string node = kube::GetString(pod, {"spec", "nodeName"}).value_or("");
  if (!node.empty()) return node;
  const Json* terms =
      kube::FindPath(pod, {"spec", "affinity", "nodeAffinity",
                           "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"});
  if (terms == nullptr || !terms->is_array()) return "";
  for (const Json& term : *terms) {
    const Json* fields = kube::Field(term, "matchFields");
    if (fields == nullptr || !fields->is_array()) continue;
    for (const Json& f : *fields) {
      bool malformed = false;
      NodeSelectorRequirement r = ReadRequirement(f, &malformed);
      if (!malformed && r.key == "metadata.name" && r.op == "In" && r.values.size() == 1) {
        return r.values[0];
      }
    }
  }
  return "";
}

// ---- Pods per node ----------------------------------------------------------------------------

// Kubernetes' podByCreationTimestampAndPhase: scheduled first, then older, then name.
bool OlderFirst(const AdsPod* a, const AdsPod* b) {
  if (a->scheduled != b->scheduled) return a->scheduled;
  if (a->created != b->created) return a->created < b->created;
  return a->name < b->name;
}

bool IsPreparingDelete(const AdsPod* p) {
  return p != nullptr && p->lifecycle_state == kPreparingDelete;
}
bool NilOrPreparingDelete(const AdsPod* p) { return p == nullptr || IsPreparingDelete(p); }

// findUpdatedPodsOnNode: the live new and old pod of a node; false when it has more than one of
// either.
struct NodePods {
  const AdsPod* new_pod = nullptr;
  const AdsPod* old_pod = nullptr;
  bool ok = true;
};
NodePods SplitNodePods(const AdsSpec& spec, const std::vector<const AdsPod*>& pods,
                       const std::string& update_revision) {
  NodePods out;
  for (const AdsPod* p : pods) {
    if (p->terminating) continue;
    const AdsPod*& slot = IsUpdated(spec, *p, update_revision) ? out.new_pod : out.old_pod;
    if (slot != nullptr) return NodePods{nullptr, nullptr, false};
    slot = p;
  }
  return out;
}

using PodsByNode = std::map<std::string, std::vector<const AdsPod*>>;

PodsByNode GroupByNode(const std::vector<AdsPod>& pods) {
  PodsByNode by_node;
  for (const AdsPod& p : pods) {
    if (!p.node.empty()) by_node[p.node].push_back(&p);
  }
  return by_node;
}

void NoteWait(absl::Duration wait, absl::Duration* recheck) {
  if (wait <= absl::ZeroDuration()) return;
  if (*recheck == absl::ZeroDuration() || wait < *recheck) *recheck = wait;
}

// syncNodes: hooked pods move to PreparingDelete (unless already there), the others are
// deleted; deletions capped at `burst`.
Deletions ApplyHooksAndBurst(const AdsSpec& spec, const std::vector<AdsPod>& pods,
                             const std::vector<PodAction>& candidates, int burst) {
  std::map<std::string, const AdsPod*> by_name;
  for (const AdsPod& p : pods) by_name[p.name] = &p;
  Deletions out;
  for (const PodAction& a : candidates) {
    auto it = by_name.find(a.pod);
    if (spec.pre_delete.has_value() && it != by_name.end() &&
        IsPodHooked(spec.pre_delete, *it->second)) {
      if (!IsPreparingDelete(it->second)) out.prepare_delete.push_back(a);
      continue;
    }
    if (static_cast<int>(out.remove.size()) < burst) out.remove.push_back(a);
  }
  return out;
}

absl::StatusOr<int> Scaled(const Json& v, int total, bool round_up, absl::string_view field) {
  absl::StatusOr<int> n = kube::GetScaledValueFromIntOrPercent(v, total, round_up);
  if (!n.ok()) return Annotate(n.status(), field);
  return std::max(0, *n);
}

}  // namespace

// ---- Eligibility --------------------------------------------------------------------------------

bool Tolerates(const Toleration& t, const Taint& taint) {
  if (!t.effect.empty() && t.effect != taint.effect) return false;
  if (!t.key.empty() && t.key != taint.key) return false;
  if (t.op == "Exists") return true;
  if (t.op.empty() || t.op == "Equal") return t.value == taint.value;
  return false;
}

std::vector<Toleration> DaemonPodTolerations(bool host_network) {
  std::vector<Toleration> out = {
      {"node.kubernetes.io/not-ready", "Exists", "", kNoExecute},
      {"node.kubernetes.io/unreachable", "Exists", "", kNoExecute},
      {"node.kubernetes.io/disk-pressure", "Exists", "", kNoSchedule},
      {"node.kubernetes.io/memory-pressure", "Exists", "", kNoSchedule},
      {"node.kubernetes.io/pid-pressure", "Exists", "", kNoSchedule},
      {"node.kubernetes.io/unschedulable", "Exists", "", kNoSchedule},
  };
  if (host_network)
    out.push_back({"node.kubernetes.io/network-unavailable", "Exists", "", kNoSchedule});
  return out;
}

absl::StatusOr<DaemonPlacement> ParsePlacement(const Json& pod_template) {
  static const Json kEmpty = Json::object();
  const Json* spec_ptr = kube::Field(pod_template, "spec");
  const Json& spec = spec_ptr != nullptr && !spec_ptr->is_null() ? *spec_ptr : kEmpty;
  if (!spec.is_object()) return absl::InvalidArgumentError("spec.template.spec: want an object");
  DaemonPlacement out;
  out.node_name = StringOr(spec, "nodeName");
  RETURN_IF_ERROR(
      ReadStringMap(spec, "nodeSelector", "spec.template.spec.nodeSelector", &out.node_selector));
  const Json* required = kube::FindPath(
      spec, {"affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"});
  if (required != nullptr && !required->is_null()) {
    out.has_required_affinity = true;
    const Json* terms = kube::Field(*required, "nodeSelectorTerms");
    if (terms != nullptr && terms->is_array()) {
      for (const Json& t : *terms) {
        NodeSelectorTerm term;
        if (!t.is_object()) term.malformed = true;
        for (const char* kind : {"matchExpressions", "matchFields"}) {
          const Json* reqs = kube::Field(t, kind);
          if (reqs == nullptr || reqs->is_null()) continue;
          if (!reqs->is_array()) {
            term.malformed = true;
            continue;
          }
          const bool field = std::string(kind) == "matchFields";
          for (const Json& r : *reqs) {
            NodeSelectorRequirement req = ReadRequirement(r, &term.malformed);
            if (!RequirementWellFormed(req, field)) term.malformed = true;
            (field ? term.match_fields : term.match_expressions).push_back(std::move(req));
          }
        }
        out.required_terms.push_back(std::move(term));
      }
    }
  }
  if (const Json* tols = kube::Field(spec, "tolerations"); tols != nullptr && !tols->is_null()) {
    if (!tols->is_array()) {
      return absl::InvalidArgumentError("spec.template.spec.tolerations: want a list");
    }
    for (const Json& t : *tols) {
      if (!t.is_object()) {
        return absl::InvalidArgumentError("spec.template.spec.tolerations: want objects");
      }
      out.tolerations.push_back({StringOr(t, "key"), StringOr(t, "operator"), StringOr(t, "value"),
                                 StringOr(t, "effect")});
    }
  }
  // AddOrUpdateTolerationInPodSpec: a toleration with the same key, operator, value and effect
  // is replaced (dropping its tolerationSeconds), others are added.
  const Json* host_network = kube::Field(spec, "hostNetwork");
  for (const Toleration& t : DaemonPodTolerations(
           host_network != nullptr && host_network->is_boolean() && host_network->get<bool>())) {
    if (std::find(out.tolerations.begin(), out.tolerations.end(), t) == out.tolerations.end()) {
      out.tolerations.push_back(t);
    }
  }
  return out;
}

NodeView ViewNode(const Json& node) {
  NodeView out;
  out.name = kube::Name(node);
  out.labels = kube::Labels(node);
  const Json* taints = kube::FindPath(node, {"spec", "taints"});
  if (taints != nullptr && taints->is_array()) {
    for (const Json& t : *taints) {
      if (!t.is_object()) continue;
      out.taints.push_back({StringOr(t, "key"), StringOr(t, "value"), StringOr(t, "effect")});
    }
  }
  return out;
}

Eligibility NodeShouldRunDaemonPod(const DaemonPlacement& placement, const NodeView& node) {
  Eligibility out;
  if (!placement.node_name.empty() && placement.node_name != node.name) {
    out.reason = absl::StrCat("the template names node ", placement.node_name);
    return out;
  }
  for (const auto& [k, v] : placement.node_selector) {
    auto it = node.labels.find(k);
    if (it == node.labels.end() || it->second != v) {
      out.reason = absl::StrCat("nodeSelector ", k, "=", v, " does not match");
      return out;
    }
  }
  if (placement.has_required_affinity &&
      std::none_of(placement.required_terms.begin(), placement.required_terms.end(),
                   [&](const NodeSelectorTerm& t) { return TermMatches(t, node); })) {
    out.reason = "the required node affinity does not match";
    return out;
  }
  const Taint* untolerated = nullptr;
  bool untolerated_no_execute = false;
  for (const Taint& taint : node.taints) {
    if (taint.effect != kNoSchedule && taint.effect != kNoExecute) continue;
    const bool tolerated = std::any_of(placement.tolerations.begin(), placement.tolerations.end(),
                                       [&](const Toleration& t) { return Tolerates(t, taint); });
    if (tolerated) continue;
    if (untolerated == nullptr) untolerated = &taint;
    if (taint.effect == kNoExecute) untolerated_no_execute = true;
  }
  if (untolerated != nullptr) {
    out.should_continue_running = !untolerated_no_execute;
    out.reason =
        absl::StrCat("taint ", untolerated->key, ":", untolerated->effect, " is not tolerated");
    return out;
  }
  out.should_run = true;
  out.should_continue_running = true;
  return out;
}

// ---- Spec and pods ------------------------------------------------------------------------------

absl::StatusOr<AdsSpec> ParseAdsSpec(const Json& daemonset) {
  if (!daemonset.is_object()) return absl::InvalidArgumentError("DaemonSet: want an object");
  const Json ds = DefaultAdvancedDaemonSet(daemonset);
  const Json* spec_ptr = kube::Field(ds, "spec");
  if (spec_ptr == nullptr || !spec_ptr->is_object()) {
    return absl::InvalidArgumentError("spec: want an object");
  }
  const Json& spec = *spec_ptr;
  AdsSpec out;
  if (const Json* b = kube::Field(spec, "burstReplicas"); b != nullptr && !b->is_null()) {
    out.burst_replicas = *b;
  }
  if (const Json* m = kube::Field(spec, "minReadySeconds"); m != nullptr && !m->is_null()) {
    if (!m->is_number_integer() || m->get<int64_t>() < 0 ||
        m->get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat("spec.minReadySeconds: want a non-negative integer, got ", m->dump()));
    }
    out.min_ready_seconds = static_cast<int>(m->get<int64_t>());
  }
  const std::string type = kube::GetString(spec, {"updateStrategy", "type"}).value_or("");
  if (type != "RollingUpdate" && type != "OnDelete") {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec.updateStrategy.type: want RollingUpdate or OnDelete, got \"", type, "\""));
  }
  out.on_delete = type == "OnDelete";
  if (const Json* ru = kube::FindPath(spec, {"updateStrategy", "rollingUpdate"});
      ru != nullptr && ru->is_object()) {
    const std::string rut = StringOr(*ru, "rollingUpdateType", "Standard");
    if (rut != "Standard" && rut != "InPlaceIfPossible") {
      return absl::InvalidArgumentError(absl::StrCat(
          "spec.updateStrategy.rollingUpdate.rollingUpdateType: unsupported \"", rut, "\""));
    }
    out.in_place_if_possible = rut == "InPlaceIfPossible";
    for (auto [key, dst] :
         {std::pair{"maxUnavailable", &out.max_unavailable}, std::pair{"maxSurge", &out.max_surge},
          std::pair{"partition", &out.partition}}) {
      if (const Json* v = kube::Field(*ru, key); v != nullptr && !v->is_null()) *dst = *v;
    }
    if (const Json* sel = kube::Field(*ru, "selector"); sel != nullptr && !sel->is_null()) {
      absl::StatusOr<kube::LabelSelector> parsed = kube::LabelSelector::FromJson(*sel);
      if (!parsed.ok()) {
        return Annotate(parsed.status(), "spec.updateStrategy.rollingUpdate.selector");
      }
      out.update_selector = *std::move(parsed);
    }
    if (const Json* p = kube::Field(*ru, "paused"); p != nullptr && !p->is_null()) {
      if (!p->is_boolean()) {
        return absl::InvalidArgumentError(
            "spec.updateStrategy.rollingUpdate.paused: want a boolean");
      }
      out.paused = p->get<bool>();
    }
  }
  if (const Json* ps = kube::FindPath(spec, {"scaleStrategy", "partitionedScaling"});
      ps != nullptr && ps->is_boolean()) {
    out.partitioned_scaling = ps->get<bool>();
  }
  if (kube::Annotation(ds, kProgressiveCreatePodAnnotation).value_or("") == "true") {
    out.partitioned_scaling = true;
  }
  ASSIGN_OR_RETURN(workload::Lifecycle lifecycle, workload::ParseLifecycle(ds));
  out.pre_delete = std::move(lifecycle.pre_delete);
  if (auto gen = kube::Annotation(ds, kTemplateGenerationAnnotation)) {
    int64_t g = 0;
    if (absl::SimpleAtoi(*gen, &g)) out.template_generation = g;
  }
  return out;
}

absl::StatusOr<ScaledNumbers> ScaleNumbers(const AdsSpec& spec, int desired) {
  ScaledNumbers n;
  if (spec.on_delete) {
    n.max_unavailable = 0;
  } else {
    ASSIGN_OR_RETURN(n.max_unavailable, Scaled(spec.max_unavailable, desired, true,
                                               "spec.updateStrategy.rollingUpdate.maxUnavailable"));
    ASSIGN_OR_RETURN(n.max_surge, Scaled(spec.max_surge, desired, true,
                                         "spec.updateStrategy.rollingUpdate.maxSurge"));
    if (desired > 0 && n.max_unavailable == 0 && n.max_surge == 0) n.max_unavailable = 1;
  }
  ASSIGN_OR_RETURN(n.partition, Scaled(spec.partition, desired, true,
                                       "spec.updateStrategy.rollingUpdate.partition"));
  ASSIGN_OR_RETURN(n.burst_replicas,
                   Scaled(spec.burst_replicas, desired, false, "spec.burstReplicas"));
  return n;
}

absl::StatusOr<AdsPod> ViewPod(const Json& pod) {
  AdsPod v;
  try {
    static_cast<inplace::PodFacts&>(v) = inplace::ReadPodFacts(pod);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("pod ", kube::Name(pod), ": ", e.what()));
  }
  v.node = TargetNode(pod);
  if (auto it = v.labels.find(kRevisionLabel); it != v.labels.end()) v.revision = it->second;
  if (auto it = v.labels.find(kTemplateGenerationLabel); it != v.labels.end()) {
    v.template_generation = it->second;
  }
  if (auto it = v.labels.find(kLifecycleLabel); it != v.labels.end())
    v.lifecycle_state = it->second;
  v.terminating = kube::DeletionTimestamp(pod).has_value();
  v.finalizers = kube::Finalizers(pod);
  if (const Json* gates = kube::FindPath(pod, {"spec", "readinessGates"});
      gates != nullptr && gates->is_array()) {
    for (const Json& g : *gates) {
      if (kube::GetString(g, {"conditionType"}).value_or("") ==
          inplace::kInPlaceUpdateReadyCondition) {
        v.in_place_gate = true;
      }
    }
  }
  if (const Json* conds = kube::FindPath(pod, {"status", "conditions"});
      conds != nullptr && conds->is_array()) {
    for (const Json& c : *conds) {
      if (kube::GetString(c, {"type"}).value_or("") == inplace::kInPlaceUpdateReadyCondition) {
        v.in_place_not_ready = kube::GetString(c, {"status"}).value_or("") != "True";
      }
    }
  }
  return v;
}

bool IsUpdated(const AdsSpec& spec, const AdsPod& pod, const std::string& update_revision) {
  if (!pod.revision.empty() && pod.revision == update_revision) return true;
  return spec.template_generation.has_value() && !pod.template_generation.empty() &&
         pod.template_generation == absl::StrCat(*spec.template_generation);
}

bool IsAvailable(const AdsPod& pod, int min_ready_seconds, absl::Time now) {
  if (!pod.ready) return false;
  if (min_ready_seconds <= 0) return true;
  return pod.ready_since != absl::InfinitePast() &&
         pod.ready_since + absl::Seconds(min_ready_seconds) <= now;
}

bool IsPodHooked(const std::optional<LifecycleHook>& hook, const AdsPod& pod) {
  if (!hook.has_value()) return false;
  return workload::IsPodHooked(hook, workload::HookedPod{pod.labels, pod.finalizers});
}

// ---- Plans --------------------------------------------------------------------------------------

absl::StatusOr<ScalePlan> PlanScale(const AdsSpec& spec, const DaemonPlacement& placement,
                                    const std::vector<NodeView>& nodes,
                                    const std::vector<AdsPod>& pods,
                                    const std::string& update_revision, absl::Time now,
                                    const std::set<std::string>& failed_backoff) {
  ScalePlan plan;
  const PodsByNode by_node = GroupByNode(pods);
  int new_pod_nodes = 0;
  std::vector<std::string> create;
  std::vector<PodAction> remove;
  // Surge is read against one node, as OpenKruise's allowSurge.
  ASSIGN_OR_RETURN(ScaledNumbers one, ScaleNumbers(spec, 1));
  const bool surge = !spec.on_delete && one.max_surge > 0;
  std::set<std::string> node_names;
  for (const NodeView& node : nodes) {
    node_names.insert(node.name);
    const Eligibility e = NodeShouldRunDaemonPod(placement, node);
    auto it = by_node.find(node.name);
    const bool exists = it != by_node.end();
    static const std::vector<const AdsPod*> kNone;
    const std::vector<const AdsPod*>& on_node = exists ? it->second : kNone;
    if (e.should_run) ++plan.desired_number_scheduled;
    if (NodePods np = SplitNodePods(spec, on_node, update_revision); np.ok && np.new_pod) {
      ++new_pod_nodes;
    }
    if (e.should_run && !exists) {
      create.push_back(node.name);
    } else if (e.should_continue_running) {
      std::vector<const AdsPod*> running;
      for (const AdsPod* p : on_node) {
        if (p->terminating) continue;
        if (p->phase == "Failed") {
          if (failed_backoff.count(node.name) == 0) {
            remove.push_back({p->name, node.name, DeleteReason::kFailed});
          }
        } else if (IsPreparingDelete(p)) {
          remove.push_back({p->name, node.name, DeleteReason::kPreparingDelete});
        } else {
          running.push_back(p);
        }
      }
      std::sort(running.begin(), running.end(), OlderFirst);
      if (!surge) {
        for (size_t i = 1; i < running.size(); ++i) {
          remove.push_back({running[i]->name, node.name, DeleteReason::kExcess});
        }
        continue;
      }
      if (running.size() <= 1) {
        if (running.empty() && e.should_run) create.push_back(node.name);
        continue;
      }
      const AdsPod* oldest_new = nullptr;
      const AdsPod* oldest_old = nullptr;
      for (const AdsPod* p : running) {
        const AdsPod*& slot = IsUpdated(spec, *p, update_revision) ? oldest_new : oldest_old;
        if (slot == nullptr) {
          slot = p;
        } else {
          remove.push_back({p->name, node.name, DeleteReason::kExcess});
        }
      }
      if (oldest_new != nullptr && oldest_old != nullptr) {
        if (!oldest_old->ready || IsAvailable(*oldest_new, spec.min_ready_seconds, now)) {
          remove.push_back({oldest_old->name, node.name, DeleteReason::kUpdate});
        } else if (oldest_new->ready && spec.min_ready_seconds > 0) {
          NoteWait(oldest_new->ready_since + absl::Seconds(spec.min_ready_seconds) - now,
                   &plan.recheck_after);
        }
      }
    } else if (exists) {
      for (const AdsPod* p : on_node) {
        if (!p->terminating) remove.push_back({p->name, node.name, DeleteReason::kNotEligible});
      }
    }
  }
  for (const auto& [node, on_node] : by_node) {
    if (node_names.count(node) > 0) continue;
    for (const AdsPod* p : on_node) {
      if (!p->scheduled) remove.push_back({p->name, node, DeleteReason::kNodeGone});
    }
  }
  ASSIGN_OR_RETURN(ScaledNumbers numbers, ScaleNumbers(spec, plan.desired_number_scheduled));
  if (!spec.on_delete && numbers.partition != 0) {
    std::sort(create.begin(), create.end());
    if (spec.partitioned_scaling) {
      const int partition = std::clamp(numbers.partition, 0, plan.desired_number_scheduled);
      const int max_create = std::clamp(plan.desired_number_scheduled - new_pod_nodes - partition,
                                        0, static_cast<int>(create.size()));
      create.resize(static_cast<size_t>(max_create));
    }
  }
  plan.create_wanted = static_cast<int>(create.size());
  if (plan.create_wanted > numbers.burst_replicas) create.resize(numbers.burst_replicas);
  plan.create = std::move(create);
  plan.deletions = ApplyHooksAndBurst(spec, pods, remove, numbers.burst_replicas);
  return plan;
}

absl::StatusOr<UpdatePlan> PlanUpdate(const AdsSpec& spec, const DaemonPlacement& placement,
                                      const std::vector<NodeView>& nodes,
                                      const std::vector<AdsPod>& pods,
                                      const std::string& update_revision,
                                      const std::map<std::string, Json>& templates,
                                      absl::Time now) {
  UpdatePlan plan;
  if (spec.on_delete || spec.paused) return plan;
  const PodsByNode by_node = GroupByNode(pods);
  // The scope: eligible nodes, by name.
  std::map<std::string, const NodeView*> eligible;
  for (const NodeView& node : nodes) {
    if (NodeShouldRunDaemonPod(placement, node).should_run) eligible[node.name] = &node;
  }
  ASSIGN_OR_RETURN(plan.numbers, ScaleNumbers(spec, static_cast<int>(eligible.size())));
  static const std::vector<const AdsPod*> kNone;
  auto pods_on = [&](const std::string& node) -> const std::vector<const AdsPod*>& {
    auto it = by_node.find(node);
    return it != by_node.end() ? it->second : kNone;
  };
  std::vector<std::string> updated, updating, selected, rest;
  for (auto it = eligible.rbegin(); it != eligible.rend(); ++it) {
    const NodePods np = SplitNodePods(spec, pods_on(it->first), update_revision);
    if (!np.ok || np.new_pod != nullptr) {
      updated.push_back(it->first);
    } else if (NilOrPreparingDelete(np.old_pod)) {
      updating.push_back(it->first);
    } else if (spec.update_selector.has_value()) {
      if (spec.update_selector->Matches(it->second->labels)) selected.push_back(it->first);
    } else {
      rest.push_back(it->first);
    }
  }
  std::vector<std::string>& scope = plan.scope;
  scope = std::move(updated);
  scope.insert(scope.end(), updating.begin(), updating.end());
  const std::vector<std::string>& to_update = spec.update_selector.has_value() ? selected : rest;
  scope.insert(scope.end(), to_update.begin(), to_update.end());
  const int max_update = static_cast<int>(eligible.size()) - plan.numbers.partition;
  if (max_update <= 0) {
    scope.clear();
    return plan;
  }
  if (max_update < static_cast<int>(scope.size())) scope.resize(static_cast<size_t>(max_update));

  std::vector<PodAction> remove;
  const int burst = plan.numbers.burst_replicas;
  if (plan.numbers.max_surge == 0) {
    std::vector<PodAction> replace_now;
    std::vector<PodAction> candidates;
    for (const std::string& node : scope) {
      const NodePods np = SplitNodePods(spec, pods_on(node), update_revision);
      if (!np.ok) {
        ++plan.unavailable;
        continue;
      }
      const bool old_gone = NilOrPreparingDelete(np.old_pod);
      const bool new_gone = NilOrPreparingDelete(np.new_pod);
      if (old_gone == new_gone) {
        ++plan.unavailable;
      } else if (np.new_pod != nullptr) {
        if (!IsAvailable(*np.new_pod, spec.min_ready_seconds, now)) ++plan.unavailable;
        if (IsPreparingDelete(np.new_pod)) ++plan.unavailable;
      } else if (!IsAvailable(*np.old_pod, spec.min_ready_seconds, now)) {
        replace_now.push_back({np.old_pod->name, node, DeleteReason::kUpdate});
      } else {
        candidates.push_back({np.old_pod->name, node, DeleteReason::kUpdate});
      }
    }
    const int room = std::clamp(plan.numbers.max_unavailable - plan.unavailable, 0,
                                static_cast<int>(candidates.size()));
    replace_now.insert(replace_now.end(), candidates.begin(), candidates.begin() + room);
    if (!spec.in_place_if_possible) {
      remove = std::move(replace_now);
    } else {
      std::map<std::string, const AdsPod*> by_name;
      for (const AdsPod& p : pods) by_name[p.name] = &p;
      const auto update_template = templates.find(update_revision);
      for (const PodAction& a : replace_now) {
        const AdsPod* pod = by_name.at(a.pod);
        std::optional<inplace::InPlaceUpdateSpec> in_place;
        const auto old_template = templates.find(pod->revision);
        if (pod->in_place_gate && old_template != templates.end() &&
            update_template != templates.end()) {
          in_place = inplace::CalculateInPlaceUpdate(old_template->second, update_template->second,
                                                     update_revision);
        }
        if (!in_place.has_value()) {
          remove.push_back(a);
        } else if (static_cast<int>(plan.in_place.size()) < burst) {
          plan.in_place.push_back({a.pod, a.node, *std::move(in_place)});
        }
      }
    }
  } else {
    std::vector<std::string> create_now;
    std::vector<std::string> candidates;
    for (const std::string& node : scope) {
      const NodePods np = SplitNodePods(spec, pods_on(node), update_revision);
      if (!np.ok) {
        ++plan.surging;
        continue;
      }
      if (NilOrPreparingDelete(np.old_pod)) continue;
      if (np.new_pod == nullptr) {
        (IsAvailable(*np.old_pod, spec.min_ready_seconds, now) ? candidates : create_now)
            .push_back(node);
      } else if (!IsAvailable(*np.new_pod, spec.min_ready_seconds, now) ||
                 IsPreparingDelete(np.new_pod)) {
        ++plan.surging;
      } else {
        remove.push_back({np.old_pod->name, node, DeleteReason::kUpdate});
      }
    }
    const int room =
        std::clamp(plan.numbers.max_surge - plan.surging, 0, static_cast<int>(candidates.size()));
    create_now.insert(create_now.end(), candidates.begin(), candidates.begin() + room);
    if (static_cast<int>(create_now.size()) > burst) create_now.resize(burst);
    plan.create = std::move(create_now);
  }
  plan.deletions = ApplyHooksAndBurst(spec, pods, remove, burst);
  return plan;
}

StatusCounts CountStatus(const AdsSpec& spec, const DaemonPlacement& placement,
                         const std::vector<NodeView>& nodes, const std::vector<AdsPod>& pods,
                         const std::string& update_revision, absl::Time now) {
  StatusCounts c;
  const PodsByNode by_node = GroupByNode(pods);
  for (const NodeView& node : nodes) {
    const bool should_run = NodeShouldRunDaemonPod(placement, node).should_run;
    auto it = by_node.find(node.name);
    const bool scheduled = it != by_node.end() && !it->second.empty();
    if (!should_run) {
      if (scheduled) ++c.number_misscheduled;
      continue;
    }
    ++c.desired_number_scheduled;
    if (!scheduled) continue;
    ++c.current_number_scheduled;
    const AdsPod* pod = *std::min_element(it->second.begin(), it->second.end(), OlderFirst);
    if (pod->ready) {
      ++c.number_ready;
      if (IsAvailable(*pod, spec.min_ready_seconds, now) &&
          !(pod->in_place_gate && pod->in_place_not_ready)) {
        ++c.number_available;
      }
    }
    if (IsUpdated(spec, *pod, update_revision)) ++c.updated_number_scheduled;
  }
  c.number_unavailable = c.desired_number_scheduled - c.number_available;
  return c;
}

}  // namespace kruise::manager::daemonset
