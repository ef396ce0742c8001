#include "manager/webhook/pod_handlers.h"

namespace kruise::manager::webhook {

AdmissionResponse PodSidecarMutator::Handle(const AdmissionRequest& request) {
  const Json& pod = request.object;
  if (!pod.is_object()) return Denied(400, "request.object is not a Pod");
  auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->is_object()) return Denied(400, "Pod has no spec");
  auto meta = pod.find("metadata");
  if (meta != pod.end() && !meta->is_object()) return Denied(400, "Pod metadata is not an object");
  bool has_labels = false;
  if (meta != pod.end()) {
    auto labels = meta->find("labels");
    has_labels = labels != meta->end() && labels->is_object();
  }
  // The same operations, in the same order, as the Go peer.
  Json ops = Json::array();
  ops.push_back(
      {{"op", "add"},
       {"path", "/spec/containers/-"},
       {"value",
        {{"name", "injected-sidecar"}, {"image", "sidecar:v1"}, {"resources", Json::object()}}}});
  if (has_labels) {
    ops.push_back({{"op", "add"}, {"path", "/metadata/labels/injected"}, {"value", "true"}});
  } else {
    ops.push_back({{"op", "add"}, {"path", "/metadata/labels"}, {"value", {{"injected", "true"}}}});
  }
  return PatchOpsResponse(ops);
}

AdmissionResponse PodAllowValidator::Handle(const AdmissionRequest&) { return Allowed(); }

}  // namespace kruise::manager::webhook
