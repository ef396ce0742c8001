#include "manager/inplace/inplace_apply.h"

#include "absl/strings/str_cat.h"
#include "kube/object.h"
#include "manager/revision/revision.h"

namespace kruise::manager::inplace {

using Json = nlohmann::json;

namespace {

std::string PointerTo(const std::string& base, const std::string& token) {
  return (Json::json_pointer(base) / token).to_string();
}

// Container name -> image of a pod or pod template.
std::map<std::string, std::string> ContainerImages(const Json& obj) {
  std::map<std::string, std::string> out;
  const Json* containers = kube::FindPath(obj, {"spec", "containers"});
  if (containers == nullptr || !containers->is_array()) return out;
  for (const Json& c : *containers) {
    if (!c.is_object()) continue;
    const Json* name = kube::Field(c, "name");
    const Json* image = kube::Field(c, "image");
    if (name != nullptr && name->is_string()) {
      out[name->get<std::string>()] =
          image != nullptr && image->is_string() ? image->get<std::string>() : "";
    }
  }
  return out;
}

// Ops replacing spec.containers[i].image for each container named in `images`.
void ImageOps(const Json& pod, const Json& images, Json* ops) {
  const Json* containers = kube::FindPath(pod, {"spec", "containers"});
  if (containers == nullptr || !containers->is_array() || !images.is_object()) return;
  for (size_t i = 0; i < containers->size(); ++i) {
    const Json& c = (*containers)[i];
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string()) continue;
    auto it = images.find(c["name"].get<std::string>());
    if (it == images.end() || !it->is_string()) continue;
    ops->push_back({{"op", "replace"},
                    {"path", absl::StrCat("/spec/containers/", i, "/image")},
                    {"value", *it}});
  }
}

std::string StatusOf(const Json* condition) {
  if (condition == nullptr) return "";
  const Json* s = kube::Field(*condition, "status");
  return s != nullptr && s->is_string() ? s->get<std::string>() : "";
}

}  // namespace

Json TestResourceVersionOp(const Json& obj) {
  return {
      {"op", "test"}, {"path", "/metadata/resourceVersion"}, {"value", kube::ResourceVersion(obj)}};
}

void AppendMapOps(const Json& obj, const std::string& base, const Json& entries, Json* ops) {
  if (!entries.is_object() || entries.empty()) return;
  const Json* current = kube::FindPointer(obj, base);
  bool have_map = current != nullptr && current->is_object();
  for (const auto& [k, v] : entries.items()) {
    if (v.is_null()) {
      if (have_map && current != nullptr && current->contains(k)) {
        ops->push_back({{"op", "remove"}, {"path", PointerTo(base, k)}});
      }
      continue;
    }
    if (!have_map) {
      ops->push_back({{"op", "add"}, {"path", base}, {"value", Json::object()}});
      have_map = true;
      current = nullptr;  // the map we just made holds nothing to remove
    }
    ops->push_back({{"op", "add"}, {"path", PointerTo(base, k)}, {"value", v}});
  }
}

void AppendConditionOps(const Json& pod, const std::vector<Json>& conditions, Json* ops) {
  const Json* conds = kube::FindPath(pod, {"status", "conditions"});
  const bool have = conds != nullptr && conds->is_array();
  if (!have) {
    const Json* status = kube::Field(pod, "status");
    if (status == nullptr || !status->is_object()) {
      ops->push_back({{"op", "add"}, {"path", "/status"}, {"value", Json::object()}});
    }
    ops->push_back({{"op", "add"}, {"path", "/status/conditions"}, {"value", Json::array()}});
  }
  for (const Json& c : conditions) {
    const std::string type = c.value("type", "");
    bool replaced = false;
    for (size_t i = 0; have && i < conds->size(); ++i) {
      const Json& old = (*conds)[i];
      if (!old.is_object() || old.value("type", "") != type) continue;
      const std::string base = absl::StrCat("/status/conditions/", i, "/");
      const bool flips = StatusOf(&old) != c.value("status", "");
      for (const auto& [k, v] : c.items()) {
        if (k == "type" || (k == "lastTransitionTime" && !flips)) continue;
        ops->push_back({{"op", "add"}, {"path", base + k}, {"value", v}});
      }
      replaced = true;
      break;
    }
    if (!replaced) ops->push_back({{"op", "add"}, {"path", "/status/conditions/-"}, {"value", c}});
  }
}

const Json* FindCondition(const Json& pod, const std::string& type) {
  const Json* conds = kube::FindPath(pod, {"status", "conditions"});
  if (conds == nullptr || !conds->is_array()) return nullptr;
  for (const Json& c : *conds) {
    if (c.is_object() && c.value("type", "") == type) return &c;
  }
  return nullptr;
}

bool HasReadinessGate(const Json& pod, const std::string& condition_type) {
  const Json* gates = kube::FindPath(pod, {"spec", "readinessGates"});
  if (gates == nullptr || !gates->is_array()) return false;
  for (const Json& g : *gates) {
    if (g.is_object() && g.value("conditionType", "") == condition_type) return true;
  }
  return false;
}

Json InitialReadinessGateOps(const Json& pod, const std::vector<std::string>& gates,
                             absl::Time now) {
  std::vector<Json> initial;
  for (const std::string& gate : gates) {
    if (HasReadinessGate(pod, gate) && FindCondition(pod, gate) == nullptr) {
      initial.push_back(
          {{"type", gate}, {"status", "True"}, {"lastTransitionTime", kube::FormatRfc3339(now)}});
    }
  }
  if (initial.empty()) return Json::array();
  Json ops = Json::array({TestResourceVersionOp(pod)});
  AppendConditionOps(pod, initial, &ops);
  return ops;
}

Json StartInPlaceUpdateStatusOps(const Json& pod, absl::Time now) {
  if (!HasReadinessGate(pod, kInPlaceUpdateReadyCondition)) return Json::array();
  const std::string at = kube::FormatRfc3339(now);
  Json ops = Json::array({TestResourceVersionOp(pod)});
  AppendConditionOps(pod,
                     {{{"type", kInPlaceUpdateReadyCondition},
                       {"status", "False"},
                       {"reason", kStartInPlaceUpdateReason},
                       {"message", ""},
                       {"lastTransitionTime", at}},
                      {{"type", "Ready"},
                       {"status", "False"},
                       {"reason", kStartInPlaceUpdateReason},
                       {"lastTransitionTime", at}}},
                     &ops);
  return ops;
}

Json InPlaceUpdatePodOps(const Json& pod, const InPlaceUpdateSpec& update,
                         const InPlaceUpdatePatchOptions& opts, absl::Time now) {
  const InPlaceUpdateState state = NewInPlaceUpdateState(pod, update, now);
  Json labels = {{revision::kControllerRevisionHashLabel, update.revision}};
  Json annotations = {{kInPlaceUpdateStateAnnotation, FormatInPlaceUpdateState(state)}};
  // Precedence: the engine's keys, then the workload's, then the revision's metadata changes.
  auto merge = [](Json* into, const Json* from) {
    if (from == nullptr || !from->is_object()) return;
    for (const auto& [k, v] : from->items()) {
      if (!into->contains(k)) (*into)[k] = v;
    }
  };
  merge(&labels, &opts.labels);
  merge(&annotations, &opts.annotations);
  if (update.metadata_patch.is_object()) {
    merge(&labels, kube::Field(update.metadata_patch, "labels"));
    merge(&annotations, kube::Field(update.metadata_patch, "annotations"));
  }
  Json ops = Json::array({TestResourceVersionOp(pod)});
  if (opts.grace_period_seconds > 0) {
    Json pending = {{"revision", update.revision},
                    {"containerImages", Json(update.container_images)}};
    annotations[kInPlaceUpdateGraceAnnotation] = pending.dump();
  } else {
    ImageOps(pod, Json(update.container_images), &ops);
  }
  AppendMapOps(pod, "/metadata/labels", labels, &ops);
  AppendMapOps(pod, "/metadata/annotations", annotations, &ops);
  return ops;
}

InPlaceUpdateCheck CheckInPlaceUpdate(
    const Json& pod, int grace_period_seconds, absl::Time now,
    const std::function<std::optional<Json>(const std::string&)>& revision_template) {
  InPlaceUpdateCheck out;
  const std::optional<std::string> state_text =
      kube::Annotation(pod, kInPlaceUpdateStateAnnotation);
  absl::StatusOr<InPlaceUpdateState> state =
      state_text.has_value()
          ? ParseInPlaceUpdateState(*state_text)
          : absl::StatusOr<InPlaceUpdateState>(absl::NotFoundError("no in-place update state"));
  if (state.ok()) out.revision = state->revision;

  if (const std::optional<std::string> grace =
          kube::Annotation(pod, kInPlaceUpdateGraceAnnotation)) {
    Json pending = Json::parse(*grace, nullptr, /*allow_exceptions=*/false);
    Json ops = Json::array({TestResourceVersionOp(pod)});
    if (!state.ok() || !pending.is_object()) {
      // Nothing sensible to apply: drop the annotation so the pod is not stuck.
      AppendMapOps(pod, "/metadata/annotations", {{kInPlaceUpdateGraceAnnotation, nullptr}}, &ops);
      out.step = InPlaceUpdateCheck::Step::kGraceOver;
      out.pod_ops = std::move(ops);
      return out;
    }
    const absl::Duration left = state->update_timestamp + absl::Seconds(grace_period_seconds) - now;
    if (left > absl::ZeroDuration()) {
      out.step = InPlaceUpdateCheck::Step::kInGrace;
      out.grace_left = left;
      return out;
    }
    if (const Json* images = kube::Field(pending, "containerImages")) ImageOps(pod, *images, &ops);
    AppendMapOps(pod, "/metadata/annotations", {{kInPlaceUpdateGraceAnnotation, nullptr}}, &ops);
    out.step = InPlaceUpdateCheck::Step::kGraceOver;
    out.pod_ops = std::move(ops);
    return out;
  }
  if (!state.ok()) return out;

  // The images the update asked for: the recorded revision's, else what the pod's spec says now.
  std::map<std::string, std::string> want;
  if (std::optional<Json> tmpl = revision_template(state->revision); tmpl.has_value()) {
    std::map<std::string, std::string> images = ContainerImages(*tmpl);
    for (const auto& [name, last] : state->last_container_statuses) {
      if (auto it = images.find(name); it != images.end()) want[name] = it->second;
    }
  }
  if (want.empty()) {
    std::map<std::string, std::string> images = ContainerImages(pod);
    for (const auto& [name, last] : state->last_container_statuses) want[name] = images[name];
  }
  if (!InPlaceUpdateCompleted(pod, *state, want, &out.waiting_for)) {
    out.step = InPlaceUpdateCheck::Step::kRunning;
    return out;
  }
  out.step = InPlaceUpdateCheck::Step::kCompleted;
  if (HasReadinessGate(pod, kInPlaceUpdateReadyCondition) &&
      StatusOf(FindCondition(pod, kInPlaceUpdateReadyCondition)) != "True") {
    out.status_ops = Json::array({TestResourceVersionOp(pod)});
    AppendConditionOps(pod,
                       {{{"type", kInPlaceUpdateReadyCondition},
                         {"status", "True"},
                         {"reason", ""},
                         {"message", ""},
                         {"lastTransitionTime", kube::FormatRfc3339(now)}}},
                       &out.status_ops);
  }
  return out;
}

absl::StatusOr<Json> ApplyInPlaceUpdate(
    const Json& pod, const InPlaceUpdateSpec& update, const InPlaceUpdatePatchOptions& opts,
    absl::Time now,
    absl::FunctionRef<absl::StatusOr<Json>(const Json&, const Json&, const std::string&)> patch,
    absl::FunctionRef<absl::StatusOr<Json>(const Json&)> get) {
  Json current = pod;
  if (Json ops = StartInPlaceUpdateStatusOps(pod, now); !ops.empty()) {
    auto started = patch(pod, ops, "status");
    if (!started.ok()) return started.status();
    current = *std::move(started);
  }
  absl::StatusOr<Json> patched =
      patch(current, InPlaceUpdatePodOps(current, update, opts, now), "");
  for (int retry = 0; retry < kMaxInPlacePatchRetries && !patched.ok() &&
                      patched.status().code() == absl::StatusCode::kAborted;
       ++retry) {
    auto fresh = get(current);
    if (!fresh.ok()) return fresh.status();
    if (kube::Uid(*fresh) != kube::Uid(pod)) {
      return absl::NotFoundError(absl::StrCat("pod ", kube::Name(pod), " was replaced"));
    }
    if (kube::Label(*fresh, revision::kControllerRevisionHashLabel).value_or("") == update.revision)
      return fresh;
    current = *std::move(fresh);
    patched = patch(current, InPlaceUpdatePodOps(current, update, opts, now), "");
  }
  return patched;
}

}  // namespace kruise::manager::inplace
