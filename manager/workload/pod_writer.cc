#include "manager/workload/pod_writer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kube/controller.h"
#include "kube/resources.h"
#include "manager/workload/pod_claim.h"

namespace kruise::manager::workload {

using kube::Json;

PodWriter::PodWriter(kube::KubeClient* client, kube::EventRecorder* recorder, Clock* clock)
    : client_(client), recorder_(recorder), scale_(clock), rv_(clock) {}

void PodWriter::ObserveThrough(kube::Informer* informer,
                               std::function<std::string(const Json&)> owner_key) {
  FeedExpectations(informer, &scale_, &rv_, std::move(owner_key));
}

void PodWriter::Event(const Json& workload, bool warning, const std::string& reason,
                      const std::string& message) const {
  if (recorder_ == nullptr) return;
  recorder_->Event(workload, warning ? kube::EventType::kWarning : kube::EventType::kNormal, reason,
                   message);
}

absl::Status PodWriter::InvalidSpec(const Json& workload, const absl::Status& why) const {
  Event(workload, true, "InvalidSpec", std::string(why.message()));
  return kube::TerminalError(why);
}

absl::StatusOr<kube::LabelSelector> PodWriter::Selector(const Json& workload) const {
  const Json* sel = kube::FindPath(workload, {"spec", "selector"});
  auto selector = kube::LabelSelector::FromJson(sel != nullptr ? *sel : Json());
  if (!selector.ok() || selector->matches_everything() || selector->matches_nothing()) {
    Event(workload, true, "InvalidSelector", "spec.selector must select some pods");
    return kube::TerminalError(absl::InvalidArgumentError("spec.selector is empty or invalid"));
  }
  return selector;
}

absl::StatusOr<Json> PodWriter::PatchPod(const Json& pod, const Json& ops,
                                         const std::string& subresource) {
  ASSIGN_OR_RETURN(Json patched,
                   kube::PatchIfUnchanged(client_, kube::resources::Pods(), pod, ops, subresource));
  rv_.Expect(kube::NamespacedName(patched), kube::ResourceVersion(patched));
  return patched;
}

absl::Status PodWriter::Delete(const std::string& key, const kube::Resource& resource,
                               const Json& obj, kube::DeleteOptions options) {
  options.precondition_uid = kube::Uid(obj);
  scale_.Expect(key, kube::ScaleExpectations::Action::kDelete, kube::Name(obj));
  absl::Status st = client_->Delete(resource, kube::Namespace(obj), kube::Name(obj), options);
  if (!st.ok()) scale_.Observe(key, kube::ScaleExpectations::Action::kDelete, kube::Name(obj));
  return st;
}

absl::StatusOr<std::vector<Json>> PodWriter::ClaimPods(const Json& workload, Json owner_ref,
                                                       const kube::LabelSelector& selector,
                                                       kube::Informer* pods) {
  PodClaim claim;
  claim.owner = &workload;
  claim.owner_ref = std::move(owner_ref);
  claim.selector = &selector;
  claim.pods = pods;
  return workload::ClaimPods(
      claim, [this](const Json& pod, const Json& ops) { return PatchPod(pod, ops); },
      [&](const std::string& reason, const std::string& message) {
        Event(workload, false, reason, message);
      });
}

absl::Status PodWriter::UpdateInPlace(const Json& workload, const Json& pod,
                                      const inplace::InPlaceUpdateSpec& update,
                                      const inplace::InPlaceUpdatePatchOptions& options,
                                      absl::Time now, const std::string& revision) {
  auto patched = inplace::ApplyInPlaceUpdate(
      pod, update, options, now,
      [this](const Json& p, const Json& ops, const std::string& sub) {
        return PatchPod(p, ops, sub);
      },
      [this](const Json& p) {
        return client_->Get(kube::resources::Pods(), kube::Namespace(p), kube::Name(p));
      });
  if (!patched.ok()) {
    Event(workload, true, "FailedUpdatePodInPlace",
          absl::StrCat("failed to update pod ", kube::Name(pod), " in place (revision ", revision,
                       "): ", patched.status().message()));
    return patched.status();
  }
  Event(workload, false, "SuccessfulUpdatePodInPlace",
        absl::StrCat("successfully update pod ", kube::Name(pod), " in-place(revision ", revision,
                     ")"));
  return absl::OkStatus();
}

}  // namespace kruise::manager::workload
