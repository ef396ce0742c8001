#include "manager/webhook/crr_handlers.h"

#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kube/resources.h"

namespace kruise::manager::webhook {

namespace {

const Json* Field(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::string StringField(const Json& j, const char* key) {
  const Json* v = Field(j, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

// Negative or non-integer -> error text.
std::string CheckNonNegative(const Json& obj, const char* key, const char* path) {
  const Json* v = Field(obj, key);
  if (v == nullptr) return "";
  if (!v->is_number_integer()) return absl::StrCat(path, " must be an integer");
  if (v->get<int64_t>() < 0) return absl::StrCat(path, " must not be negative");
  return "";
}

const Json* FindByName(const Json* list, const std::string& name) {
  if (list == nullptr || !list->is_array()) return nullptr;
  for (const Json& item : *list) {
    if (StringField(item, "name") == name) return &item;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<Json> ApiPodReader::GetPod(const std::string& ns, const std::string& name) {
  absl::StatusOr<Json> pod = client_->Get(kube::resources::Pods(), ns, name);
  // The mutator never reads managedFields; dropping them halves what is copied and freed.
  if (pod.ok()) {
    if (auto meta = pod->find("metadata"); meta != pod->end() && meta->is_object()) {
      meta->erase("managedFields");
    }
  }
  return pod;
}

std::string ValidateCrrSpec(const Json& spec) {
  if (!spec.is_object()) return "spec is required";
  if (StringField(spec, "podName").empty()) return "spec.podName is required";
  const Json* containers = Field(spec, "containers");
  if (containers == nullptr || !containers->is_array() || containers->empty()) {
    return "spec.containers must list at least one container";
  }
  std::set<std::string> names;
  for (const Json& c : *containers) {
    std::string name = StringField(c, "name");
    if (name.empty()) return "spec.containers[].name is required";
    if (!names.insert(name).second) {
      return absl::StrCat("spec.containers: duplicated container name ", name);
    }
  }
  if (const Json* strategy = Field(spec, "strategy"); strategy != nullptr) {
    if (!strategy->is_object()) return "spec.strategy must be an object";
    if (const Json* fp = Field(*strategy, "failurePolicy"); fp != nullptr) {
      if (!fp->is_string() || (*fp != "Fail" && *fp != "Ignore")) {
        return "spec.strategy.failurePolicy must be Fail or Ignore";
      }
    }
    for (const char* key :
         {"terminationGracePeriodSeconds", "unreadyGracePeriodSeconds", "minStartedSeconds"}) {
      std::string err =
          CheckNonNegative(*strategy, key, absl::StrCat("spec.strategy.", key).c_str());
      if (!err.empty()) return err;
    }
  }
  if (const Json* ads = Field(spec, "activeDeadlineSeconds"); ads != nullptr) {
    if (!ads->is_number_integer() || ads->get<int64_t>() < 3) {
      return "spec.activeDeadlineSeconds must be at least 3";
    }
  }
  return CheckNonNegative(spec, "ttlSecondsAfterFinished", "spec.ttlSecondsAfterFinished");
}

AdmissionResponse CrrMutator::Handle(const AdmissionRequest& request) {
  if (request.operation != "CREATE") return Allowed();
  const Json& original = request.object;
  if (!original.is_object()) return Denied(400, "no object in the request");
  const Json empty_spec = Json::object();
  const Json* spec_ptr = Field(original, "spec");
  const Json& spec = spec_ptr != nullptr ? *spec_ptr : empty_spec;
  if (std::string err = ValidateCrrSpec(spec); !err.empty()) return Denied(422, err);

  std::string ns = request.namespace_;
  if (ns.empty()) ns = StringField(original.value("metadata", Json::object()), "namespace");
  std::string pod_name = StringField(spec, "podName");
  absl::StatusOr<Json> pod = pods_->GetPod(ns, pod_name);
  if (absl::IsNotFound(pod.status())) {
    return Denied(400, absl::StrCat("not found pod ", ns, "/", pod_name), "BadRequest");
  }
  if (!pod.ok()) {
    return Denied(500, absl::StrCat("failed to get pod ", ns, "/", pod_name, ": ",
                                    std::string(pod.status().message())));
  }
  const Json& meta = pod->value("metadata", Json::object());
  const Json& pod_spec = pod->value("spec", Json::object());
  const Json& pod_status = pod->value("status", Json::object());
  std::string phase = StringField(pod_status, "phase");
  if (Field(meta, "deletionTimestamp") != nullptr || phase == "Succeeded" || phase == "Failed") {
    return Denied(400, absl::StrCat("pod ", ns, "/", pod_name, " is not active"), "BadRequest");
  }
  std::string node = StringField(pod_spec, "nodeName");
  if (node.empty()) {
    return Denied(400, absl::StrCat("pod ", ns, "/", pod_name, " is not scheduled to a node"),
                  "BadRequest");
  }

  Json mutated = original;
  Json& labels = mutated["metadata"]["labels"];
  if (!labels.is_object()) labels = Json::object();
  labels[kCrrNodeNameLabel] = node;
  labels[kCrrPodUidLabel] = StringField(meta, "uid");
  labels[kCrrActiveLabel] = "true";

  Json& strategy = mutated["spec"]["strategy"];
  if (!strategy.is_object()) strategy = Json::object();
  if (Field(strategy, "failurePolicy") == nullptr) strategy["failurePolicy"] = "Fail";
  if (Field(strategy, "terminationGracePeriodSeconds") == nullptr) {
    if (const Json* g = Field(pod_spec, "terminationGracePeriodSeconds");
        g != nullptr && g->is_number_integer()) {
      strategy["terminationGracePeriodSeconds"] = *g;
    }
  }

  const Json* pod_containers = Field(pod_spec, "containers");
  const Json* pod_statuses = Field(pod_status, "containerStatuses");
  for (Json& c : mutated["spec"]["containers"]) {
    std::string name = StringField(c, "name");
    const Json* pc = FindByName(pod_containers, name);
    if (pc == nullptr) {
      return Denied(422, absl::StrCat("container ", name, " is not in pod ", ns, "/", pod_name));
    }
    c.erase("preStop");
    c.erase("ports");
    if (const Json* lifecycle = Field(*pc, "lifecycle"); lifecycle != nullptr) {
      if (const Json* pre_stop = Field(*lifecycle, "preStop"); pre_stop != nullptr) {
        c["preStop"] = *pre_stop;
        if (Field(*pre_stop, "httpGet") != nullptr) {
          if (const Json* ports = Field(*pc, "ports"); ports != nullptr) c["ports"] = *ports;
        }
      }
    }
    const Json* cs = FindByName(pod_statuses, name);
    std::string container_id = cs != nullptr ? StringField(*cs, "containerID") : "";
    if (container_id.empty()) {
      return Denied(400,
                    absl::StrCat("container ", name, " of pod ", ns, "/", pod_name,
                                 " has no containerID in the pod status (not started yet)"),
                    "BadRequest");
    }
    c["statusContext"] = {{"containerID", container_id},
                          {"restartCount", cs->value("restartCount", 0)}};
  }
  return PatchResponse(original, mutated);
}

AdmissionResponse CrrValidator::Handle(const AdmissionRequest& request) {
  if (request.operation == "CREATE") {
    const Json* spec = Field(request.object, "spec");
    std::string err = ValidateCrrSpec(spec != nullptr ? *spec : Json());
    return err.empty() ? Allowed() : Denied(422, err);
  }
  if (request.operation != "UPDATE") return Allowed();
  const Json* old_spec = Field(request.old_object, "spec");
  const Json* new_spec = Field(request.object, "spec");
  if ((old_spec == nullptr) != (new_spec == nullptr) ||
      (old_spec != nullptr && *old_spec != *new_spec)) {
    return Denied(422, "spec of a ContainerRecreateRequest is immutable");
  }
  auto label = [](const Json& obj, const char* key) -> std::string {
    const Json* meta = Field(obj, "metadata");
    const Json* labels = meta != nullptr ? Field(*meta, "labels") : nullptr;
    return labels != nullptr ? StringField(*labels, key) : "";
  };
  for (const char* key : {kCrrPodUidLabel, kCrrNodeNameLabel}) {
    if (label(request.old_object, key) != label(request.object, key)) {
      return Denied(422, absl::StrCat("label ", key, " is immutable"));
    }
  }
  return Allowed();
}

void RegisterCrrHandlers(HandlerRegistry* registry, PodReader* pods,
                         const std::function<bool()>& enabled) {
  auto mutator = std::make_shared<CrrMutator>(pods);
  auto validator = std::make_shared<CrrValidator>();
  registry->Register(kCrrMutatePath, mutator, enabled);
  registry->Register(kCrrMutatePathVersionless, mutator, enabled);
  registry->Register(kCrrValidatePath, validator, enabled);
  registry->Register(kCrrValidatePathVersionless, validator, enabled);
}

}  // namespace kruise::manager::webhook
