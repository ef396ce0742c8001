#include "manager/workload/pod_claim.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kube/errors.h"
#include "manager/controller_group.h"

namespace kruise::manager::workload {
namespace {

using kube::Json;

Json TestResourceVersion(const Json& pod) {
  return {
      {"op", "test"}, {"path", "/metadata/resourceVersion"}, {"value", kube::ResourceVersion(pod)}};
}

}  // namespace

absl::StatusOr<std::vector<Json>> ClaimPods(
    const PodClaim& claim, absl::FunctionRef<absl::StatusOr<Json>(const Json&, const Json&)> patch,
    absl::FunctionRef<void(const std::string&, const std::string&)> event) {
  std::vector<Json> out;
  const Json& owner = *claim.owner;
  const std::string uid = kube::Uid(owner);
  std::set<std::string> seen;
  ASSIGN_OR_RETURN(auto owned, claim.pods->store().ByIndex(kube::kControllerUidIndex, uid));
  for (const auto& p : owned) {
    auto controller = kube::ControllerOf(*p);
    if (!controller.has_value() || controller->uid != uid) continue;
    seen.insert(kube::Name(*p));
    if (claim.selector->MatchesObject(*p) || kube::IsBeingDeleted(*p)) {
      out.push_back(*p);
      continue;
    }
    // Release: it no longer matches the selector.
    Json ops = Json::array({TestResourceVersion(*p)});
    const Json* refs = kube::FindPath(*p, {"metadata", "ownerReferences"});
    for (size_t i = 0; refs != nullptr && refs->is_array() && i < refs->size(); ++i) {
      if ((*refs)[i].value("uid", "") == uid) {
        ops.push_back({{"op", "remove"}, {"path", absl::StrCat("/metadata/ownerReferences/", i)}});
        break;
      }
    }
    auto released = patch(*p, ops);
    if (!released.ok() && !kube::IsNotFound(released.status())) return released.status();
    event("ReleasedPod",
          absl::StrCat("released pod ", kube::Name(*p), ": it no longer matches the selector"));
  }
  if (kube::IsBeingDeleted(owner)) return out;
  ASSIGN_OR_RETURN(auto in_ns, claim.pods->store().ByIndex(SharedInformers::kOrphanNamespaceIndex,
                                                           kube::Namespace(owner)));
  for (const auto& p : in_ns) {
    if (seen.count(kube::Name(*p)) || kube::HasController(*p) || kube::IsBeingDeleted(*p) ||
        !claim.selector->MatchesObject(*p)) {
      continue;
    }
    Json ops = Json::array({TestResourceVersion(*p)});
    if (kube::FindPath(*p, {"metadata", "ownerReferences"}) == nullptr) {
      ops.push_back(
          {{"op", "add"}, {"path", "/metadata/ownerReferences"}, {"value", Json::array()}});
    }
    ops.push_back(
        {{"op", "add"}, {"path", "/metadata/ownerReferences/-"}, {"value", claim.owner_ref}});
    auto adopted = patch(*p, ops);
    if (!adopted.ok()) {
      if (kube::IsNotFound(adopted.status()) || kube::IsConflict(adopted.status())) continue;
      return adopted.status();
    }
    event("AdoptedPod", absl::StrCat("adopted pod ", kube::Name(*p)));
    out.push_back(*std::move(adopted));
  }
  return out;
}

void FeedExpectations(kube::Informer* pods, kube::ScaleExpectations* scale,
                      kube::ResourceVersionExpectations* rv,
                      std::function<std::string(const Json&)> owner_key) {
  auto observe = [scale, owner_key](const Json& obj, kube::ScaleExpectations::Action action) {
    const std::string key = owner_key(obj);
    if (!key.empty()) scale->Observe(key, action, kube::Name(obj));
  };
  auto deleted = [observe, rv](const Json& obj) {
    observe(obj, kube::ScaleExpectations::Action::kDelete);
    rv->Delete(kube::NamespacedName(obj));
  };
  pods->AddEventHandler({
      .on_add =
          [observe](const Json& obj) { observe(obj, kube::ScaleExpectations::Action::kCreate); },
      .on_update =
          [rv, deleted](const Json&, const Json& obj) {
            rv->Observe(obj);
            // A pod that turns terminating counts as deleted.
            if (kube::IsBeingDeleted(obj)) deleted(obj);
          },
      .on_delete = [deleted](const Json& obj, bool) { deleted(obj); },
  });
}

std::vector<kube::Request> WorkloadsSelecting(kube::Informer* workloads, const kube::Json& obj) {
  std::vector<kube::Request> out;
  auto in_ns = workloads->store().ByIndex(kube::kNamespaceIndex, kube::Namespace(obj));
  if (!in_ns.ok()) return out;
  for (const auto& w : *in_ns) {
    const kube::Json* sel = kube::FindPath(*w, {"spec", "selector"});
    auto ls = kube::LabelSelector::FromJson(sel != nullptr ? *sel : kube::Json());
    if (ls.ok() && !ls->matches_everything() && ls->MatchesObject(obj)) {
      out.push_back({kube::Namespace(*w), kube::Name(*w)});
    }
  }
  return out;
}

kube::EventMapper EnqueueAdopters(kube::Informer* workloads) {
  return kube::EnqueueMapped([workloads](const kube::Json& pod) {
    if (kube::HasController(pod)) return std::vector<kube::Request>{};
    return WorkloadsSelecting(workloads, pod);
  });
}

void WatchWorkload(kube::Controller* controller, const WorkloadWatches& w) {
  auto owned = [&w] {
    return kube::EnqueueOwner(w.kind, /*controller_only=*/true, "apps.kruise.io");
  };
  controller->Watch(w.workloads, kube::EnqueueSelf(), {kube::ResourceVersionChanged()});
  controller->Watch(w.pods, owned(), {kube::ResourceVersionChanged()});
  controller->Watch(w.revisions, owned());
  if (w.image_pull_jobs != nullptr) controller->Watch(w.image_pull_jobs, owned());
  controller->Watch(w.pods, EnqueueAdopters(w.workloads));
}

}  // namespace kruise::manager::workload
