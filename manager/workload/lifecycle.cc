#include "manager/workload/lifecycle.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kube/kruise_api.h"
#include "kube/object.h"
#include "manager/inplace/inplace_apply.h"

namespace kruise::manager::workload {

using Json = nlohmann::json;

namespace {

absl::Status HookTypeError(const std::string& field, const char* want) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": must be ", want));
}

absl::StatusOr<std::optional<LifecycleHook>> ParseHook(const Json& lifecycle, const char* name) {
  const Json* h = kube::Field(lifecycle, name);
  if (h == nullptr || h->is_null()) return std::optional<LifecycleHook>();
  const std::string field = absl::StrCat("spec.lifecycle.", name);
  if (!h->is_object()) return HookTypeError(field, "an object");
  LifecycleHook hook;
  if (const Json* labels = kube::Field(*h, "labelsHandler");
      labels != nullptr && !labels->is_null()) {
    if (!labels->is_object()) return HookTypeError(field + ".labelsHandler", "a map of strings");
    for (const auto& [k, v] : labels->items()) {
      if (!v.is_string()) return HookTypeError(field + ".labelsHandler", "a map of strings");
      hook.labels_handler[k] = v.get<std::string>();
    }
  }
  if (const Json* fins = kube::Field(*h, "finalizersHandler");
      fins != nullptr && !fins->is_null()) {
    if (!fins->is_array()) return HookTypeError(field + ".finalizersHandler", "a list of strings");
    for (const Json& f : *fins) {
      if (!f.is_string()) return HookTypeError(field + ".finalizersHandler", "a list of strings");
      hook.finalizers_handler.push_back(f.get<std::string>());
    }
  }
  if (const Json* mark = kube::Field(*h, "markPodNotReady"); mark != nullptr && !mark->is_null()) {
    if (!mark->is_boolean()) return HookTypeError(field + ".markPodNotReady", "a boolean");
    hook.mark_pod_not_ready = mark->get<bool>();
  }
  return std::optional<LifecycleHook>(std::move(hook));
}

bool HasFinalizer(const HookedPod& pod, const std::string& f) {
  return std::find(pod.finalizers.begin(), pod.finalizers.end(), f) != pod.finalizers.end();
}

bool HasLabel(const HookedPod& pod, const std::string& k, const std::string& v) {
  auto it = pod.labels.find(k);
  return it != pod.labels.end() && it->second == v;
}

bool HookSet(const std::optional<LifecycleHook>& hook) {
  return hook.has_value() && !hook->empty();
}

// Where an update that completed (or a rollback) leaves the pod.
std::string AfterUpdate(const Lifecycle& lc, const HookedPod& pod) {
  return HookSet(lc.in_place_update) && !IsPodAllHooked(lc.in_place_update, pod) ? kStateUpdated
                                                                                 : kStateNormal;
}

}  // namespace

absl::StatusOr<Lifecycle> ParseLifecycle(const Json& workload) {
  Lifecycle lc;
  const Json* lifecycle = kube::FindPath(workload, {"spec", "lifecycle"});
  if (lifecycle == nullptr || lifecycle->is_null()) return lc;
  if (!lifecycle->is_object()) return HookTypeError("spec.lifecycle", "an object");
  auto pre_delete = ParseHook(*lifecycle, "preDelete");
  if (!pre_delete.ok()) return pre_delete.status();
  auto in_place = ParseHook(*lifecycle, "inPlaceUpdate");
  if (!in_place.ok()) return in_place.status();
  auto pre_normal = ParseHook(*lifecycle, "preNormal");
  if (!pre_normal.ok()) return pre_normal.status();
  lc.pre_delete = *std::move(pre_delete);
  lc.in_place_update = *std::move(in_place);
  lc.pre_normal = *std::move(pre_normal);
  return lc;
}

HookedPod ReadHookedPod(const Json& pod) {
  HookedPod h;
  if (const Json* labels = kube::FindPath(pod, {"metadata", "labels"});
      labels != nullptr && labels->is_object()) {
    for (const auto& [k, v] : labels->items()) {
      if (v.is_string()) h.labels[k] = v.get<std::string>();
    }
  }
  h.finalizers = kube::Finalizers(pod);
  return h;
}

bool IsPodHooked(const std::optional<LifecycleHook>& hook, const HookedPod& pod) {
  if (!hook.has_value()) return false;
  for (const auto& [k, v] : hook->labels_handler) {
    if (HasLabel(pod, k, v)) return true;
  }
  for (const std::string& f : hook->finalizers_handler) {
    if (HasFinalizer(pod, f)) return true;
  }
  return false;
}

bool IsPodAllHooked(const std::optional<LifecycleHook>& hook, const HookedPod& pod) {
  if (!hook.has_value()) return false;
  for (const auto& [k, v] : hook->labels_handler) {
    if (!HasLabel(pod, k, v)) return false;
  }
  for (const std::string& f : hook->finalizers_handler) {
    if (!HasFinalizer(pod, f)) return false;
  }
  return true;
}

std::string InitialLifecycleState(const Lifecycle& lc, const HookedPod& pod) {
  return HookSet(lc.pre_normal) && !IsPodAllHooked(lc.pre_normal, pod) ? kStatePreparingNormal
                                                                       : kStateNormal;
}

std::optional<std::string> NextLifecycleState(const Lifecycle& lc, const std::string& state,
                                              const HookedPod& pod, bool at_update_revision,
                                              bool update_completed) {
  if (state == kStatePreparingNormal) {
    if (!HookSet(lc.pre_normal) || IsPodAllHooked(lc.pre_normal, pod)) return kStateNormal;
  } else if (state == kStatePreparingUpdate) {
    // Rolled back while the hook held it: nothing to update, only the state to settle.
    if (at_update_revision) return AfterUpdate(lc, pod);
  } else if (state == kStateUpdating) {
    if (update_completed) return AfterUpdate(lc, pod);
  } else if (state == kStateUpdated) {
    if (!HookSet(lc.in_place_update) || IsPodAllHooked(lc.in_place_update, pod)) {
      return kStateNormal;
    }
  }
  return std::nullopt;
}

InPlaceUpdateDecision DecideInPlaceUpdate(const Lifecycle& lc, const std::string& state,
                                          const HookedPod& pod) {
  using Action = InPlaceUpdateDecision::Action;
  InPlaceUpdateDecision d;
  const bool mark = lc.in_place_update.has_value() && lc.in_place_update->mark_pod_not_ready;
  if (state.empty() || state == kStatePreparingNormal || state == kStateNormal) {
    if (IsPodHooked(lc.in_place_update, pod)) {
      d.action = Action::kPrepare;
      d.mark_not_ready = mark;
    }
  } else if (state == kStateUpdated) {
    // Updated again before the hook's owner put its hook back: back to PreparingUpdate with the
    // hook on, so the owner sees this update too.
    if (HookSet(lc.in_place_update)) {
      d.action = Action::kPrepare;
      d.put_hook_back = true;
      d.mark_not_ready = mark;
    }
  } else if (state == kStatePreparingUpdate) {
    if (IsPodHooked(lc.in_place_update, pod)) d.action = Action::kWait;
  } else if (state != kStateUpdating) {
    d.action = Action::kRefuse;  // PreparingDelete, or a state we do not know
  }
  return d;
}

DeleteDecision DecideDelete(const Lifecycle& lc, const std::string& state, const HookedPod& pod) {
  using Action = DeleteDecision::Action;
  DeleteDecision d;
  if (!IsPodHooked(lc.pre_delete, pod)) return d;
  d.mark_not_ready = lc.pre_delete->mark_pod_not_ready;
  d.action = state == kStatePreparingDelete ? Action::kWait : Action::kPrepare;
  return d;
}

Json LifecycleStateOps(const Json& pod, const std::string& state, absl::Time now,
                       const LifecycleHook* put_back) {
  Json ops = Json::array();
  Json labels = {{kLifecycleStateLabel, state}};
  if (put_back != nullptr) {
    for (const auto& [k, v] : put_back->labels_handler) labels[k] = v;
  }
  inplace::AppendMapOps(pod, "/metadata/labels", labels, &ops);
  inplace::AppendMapOps(pod, "/metadata/annotations",
                        {{kLifecycleTimestampAnnotation, kube::FormatRfc3339(now)}}, &ops);
  if (put_back != nullptr && !put_back->finalizers_handler.empty()) {
    std::vector<std::string> fins = kube::Finalizers(pod);
    bool changed = false;
    for (const std::string& f : put_back->finalizers_handler) {
      if (std::find(fins.begin(), fins.end(), f) == fins.end()) {
        fins.push_back(f);
        changed = true;
      }
    }
    if (changed) {
      // Replaced whole: the patch's resourceVersion test (the caller's) keeps it exact.
      ops.push_back({{"op", "add"}, {"path", "/metadata/finalizers"}, {"value", fins}});
    }
  }
  return ops;
}

Json KruisePodReadyOps(const Json& pod, bool ready, const std::string& reason,
                       const std::string& message, absl::Time now) {
  Json ops = Json::array();
  if (!inplace::HasReadinessGate(pod, kube::kKruisePodReadyCondition)) return ops;
  const char* status = ready ? "True" : "False";
  const Json* c = inplace::FindCondition(pod, kube::kKruisePodReadyCondition);
  if (c != nullptr && c->value("status", "") == status && c->value("reason", "") == reason) {
    return ops;
  }
  inplace::AppendConditionOps(pod,
                              {{{"type", kube::kKruisePodReadyCondition},
                                {"status", status},
                                {"reason", reason},
                                {"message", message},
                                {"lastTransitionTime", kube::FormatRfc3339(now)}}},
                              &ops);
  return ops;
}

Json RestoreKruisePodReadyOps(const Json& pod, const std::string& state, absl::Time now) {
  if (!state.empty() && state != kStateNormal && state != kStateUpdated) return Json::array();
  const Json* c = inplace::FindCondition(pod, kube::kKruisePodReadyCondition);
  if (c == nullptr || c->value("status", "") != "False") return Json::array();
  const std::string reason = c->value("reason", "");
  if (reason != kStatePreparingUpdate && reason != kStatePreparingDelete) return Json::array();
  return KruisePodReadyOps(pod, true, "", "", now);
}

}  // namespace kruise::manager::workload
