#include "manager/webhook/pod_webhook.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "manager/webhook/fail_open.h"

namespace kruise::manager::webhook {

bool IsPodOwnedByKruise(const Json& pod) {
  auto meta = pod.find("metadata");
  if (meta == pod.end() || !meta->is_object()) return false;
  auto refs = meta->find("ownerReferences");
  if (refs == meta->end() || !refs->is_array()) return false;
  for (const Json& ref : *refs) {
    if (!ref.is_object() || !ref.value("controller", false)) continue;
    // apiVersion is "group/version"; a core-group owner has no slash.
    const std::string api_version = ref.value("apiVersion", "");
    return absl::StartsWith(api_version, "apps.kruise.io/");
  }
  return false;
}

namespace {

bool HasReadinessGate(const Json& pod, absl::string_view condition) {
  auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->is_object()) return false;
  auto gates = spec->find("readinessGates");
  if (gates == spec->end() || !gates->is_array()) return false;
  return std::any_of(gates->begin(), gates->end(), [&](const Json& g) {
    return g.is_object() && g.value("conditionType", "") == condition;
  });
}

}  // namespace

absl::Status ReadinessGateInjector::Mutate(const AdmissionRequest& request, PodEdit* edit,
                                           std::vector<std::string>*) const {
  if (request.operation != "CREATE") return absl::OkStatus();
  if (!all_pods_ && !IsPodOwnedByKruise(edit->pod())) return absl::OkStatus();
  if (HasReadinessGate(edit->pod(), kKruisePodReadyCondition)) return absl::OkStatus();
  Json* pod = edit->Mutable();
  Json& spec = (*pod)["spec"];
  if (!spec.is_object()) return absl::InvalidArgumentError("pod spec is not an object");
  Json& gates = spec["readinessGates"];
  if (gates.is_null()) gates = Json::array();
  if (!gates.is_array()) return absl::InvalidArgumentError("spec.readinessGates is not a list");
  gates.push_back({{"conditionType", kKruisePodReadyCondition}});
  return absl::OkStatus();
}

Json* PodEdit::Mutable() {
  if (!copy_) {
    copy_.emplace(original_);
    if (!ops_.empty()) copy_->patch_inplace(ops_);
    ops_ = Json::array();
  }
  return &*copy_;
}

void PodEdit::AddOps(Json ops) {
  if (!ops.is_array() || ops.empty()) return;
  if (copy_) {
    copy_->patch_inplace(ops);
    return;
  }
  for (Json& op : ops) ops_.push_back(std::move(op));
}

AdmissionResponse PodEdit::Response() const {
  if (copy_) return PatchResponse(original_, *copy_);
  return PatchOpsResponse(ops_);
}

PodMutatingHandler::PodMutatingHandler(std::vector<std::unique_ptr<PodMutator>> chain,
                                       Options options)
    : chain_(std::move(chain)), options_(std::move(options)) {}

AdmissionResponse PodMutatingHandler::Handle(const AdmissionRequest& request) {
  // Only pod creation itself: not pods/status, pods/binding, ephemeral containers, ...
  if (request.operation != "CREATE" || !request.sub_resource.empty()) return Allowed();
  if (std::find(options_.excluded_namespaces.begin(), options_.excluded_namespaces.end(),
                request.namespace_) != options_.excluded_namespaces.end()) {
    return Allowed();
  }
  const Json& pod = request.object;
  if (!pod.is_object()) return Denied(400, "request.object is not a Pod");
  PodEdit edit(pod);
  std::vector<std::string> warnings;
  for (const auto& m : chain_) {
    absl::Status st;
    bool exception = false;
    try {
      st = m->Mutate(request, &edit, &warnings);
    } catch (const std::exception& e) {
      exception = true;
      st = absl::InternalError(absl::StrCat("exception: ", e.what()));
    } catch (...) {
      exception = true;
      st = absl::InternalError("unknown exception");
    }
    if (st.ok()) continue;
    if (IsInfrastructureFailure(st)) {
      if (options_.fail_open == nullptr) {
        return Denied(500, absl::StrCat("pod webhook (", m->Name(), "): ", st.message()));
      }
      warnings.push_back(options_.fail_open->Record(kMutatePodPath, m->Name(),
                                                    "pod admitted without it", st));
      if (exception) {
        // The pod may be half edited: send it as it came.
        AdmissionResponse response = Allowed();
        response.warnings = std::move(warnings);
        return response;
      }
      continue;
    }
    return Denied(422, absl::StrCat("pod webhook (", m->Name(), "): ", st.message()));
  }
  AdmissionResponse response = edit.Response();
  response.warnings = std::move(warnings);
  return response;
}

}  // namespace kruise::manager::webhook
