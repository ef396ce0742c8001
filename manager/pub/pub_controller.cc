#include "manager/pub/pub_controller.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kube/errors.h"
#include "kube/deployment_naming.h"
#include "kube/object.h"
#include "kube/resources.h"
#include "manager/pub/pub_admission.h"
#include "manager/pub/pub_webhook.h"

namespace kruise::manager::pub {

using kube::Json;

PodFacts PodFactsOfCached(const Json& pod) {
  PodFacts f = PodFactsOf(pod);
  const Json* containers = kube::FindPath(pod, {"spec", "containers"});
  if (containers != nullptr && containers->is_array()) return f;  // a full pod
  // A stub: Ready unless it keeps a Ready condition (only kept when not True).
  bool ready = kube::GetString(pod, {"status", "phase"}).value_or("") == "Running";
  if (const Json* conds = kube::FindPath(pod, {"status", "conditions"});
      conds != nullptr && conds->is_array()) {
    for (const Json& c : *conds) {
      if (c.is_object() && c.value("type", "") == "Ready") ready = ready && c.value("status", "") == "True";
    }
  }
  if (const Json* labels = kube::FindPath(pod, {"metadata", "labels"});
      labels != nullptr && labels->is_object()) {
    for (const auto& kv : labels->items()) {
      if (absl::StartsWith(kv.key(), kUnavailableLabelPrefix)) ready = false;
    }
  }
  f.ready = ready;
  return f;
}

namespace pub_controller_impl {
namespace {

// The workload a targetRef names, as this controller reads it; nullopt: not supported.
std::optional<kube::Resource> WorkloadResource(const TargetRef& t) {
  const std::string group = GroupOf(t.api_version);
  if (group == "apps") {
    if (t.kind == "Deployment") return kube::Resource{"apps", "v1", "deployments", t.kind, true};
    if (t.kind == "ReplicaSet") return kube::Resource{"apps", "v1", "replicasets", t.kind, true};
    if (t.kind == "StatefulSet") return kube::Resource{"apps", "v1", "statefulsets", t.kind, true};
  } else if (group == "apps.kruise.io") {
    if (t.kind == "CloneSet") return kube::resources::CloneSets();
    if (t.kind == "StatefulSet") {
      return kube::Resource{"apps.kruise.io", "v1beta1", "statefulsets", t.kind, true};
    }
  }
  return std::nullopt;
}

// The controller kind of a pod's ownerReferences (also of a cache stub's), "" when none.
std::string ControllerKind(const Json& pod) {
  const Json* refs = kube::FindPath(pod, {"metadata", "ownerReferences"});
  if (refs == nullptr || !refs->is_array()) return "";
  for (const Json& r : *refs) {
    if (r.is_object() && r.value("controller", false)) return r.value("kind", "");
  }
  return "";
}

}  // namespace
}  // namespace pub_controller_impl

void PubReconciler::Event(const Json& pub, bool warning, const std::string& reason,
                          const std::string& message) {
  if (recorder_ != nullptr) {
    recorder_->Event(pub, warning ? kube::EventType::kWarning : kube::EventType::kNormal, reason,
                     message);
  }
}

absl::StatusOr<PubReconciler::Covered> PubReconciler::PodsOf(const Pub& pub, const Json& object) {
  using namespace pub_controller_impl;
  Covered out;
  auto in_ns = inf_.pods->store().ByIndex(kube::kNamespaceIndex, pub.namespace_);
  if (!in_ns.ok()) return in_ns.status();
  if (pub.selector) {
    for (const auto& p : *in_ns) {
      if (pub.selector->MatchesObject(*p)) out.pods.push_back(PodFactsOfCached(*p));
    }
    return out;
  }
  if (!pub.target_ref) return out;
  const TargetRef& t = *pub.target_ref;
  auto resource = WorkloadResource(t);
  if (!resource) {
    Event(object, true, "UnsupportedTargetRef",
          absl::StrCat("targetRef ", t.api_version, " ", t.kind,
                       " is not supported (Deployment, ReplicaSet, StatefulSet, CloneSet): "
                       "the budget guards no pod"));
    out.replicas = 0;
    return out;
  }
  auto workload = client_->Get(*resource, pub.namespace_, t.name);
  if (!workload.ok()) {
    if (!kube::IsNotFound(workload.status())) return workload.status();
    out.replicas = 0;
    return out;
  }
  out.replicas =
      static_cast<int32_t>(kube::GetInt(*workload, {"spec", "replicas"}).value_or(1));
  const Json* sel_json = kube::FindPath(*workload, {"spec", "selector"});
  if (sel_json == nullptr) return out;
  auto selector = kube::LabelSelector::FromJson(*sel_json);
  if (!selector.ok() || selector->matches_everything()) return out;
  const std::string uid = kube::Uid(*workload);
  const std::string owner_kind = OwnerKindOfTarget(t);
  for (const auto& p : *in_ns) {
    if (!selector->MatchesObject(*p)) continue;
    bool mine = false;
    if (auto owner = kube::ControllerOf(*p)) {
      if (owner_kind == t.kind) {
        mine = owner->uid == uid;
      } else {  // a Deployment's ReplicaSet
        mine = owner->kind == owner_kind &&
               kube::DeploymentOfReplicaSetPod(*p, owner->name) == t.name;
      }
    } else {
      mine = ControllerKind(*p) == owner_kind;  // a stub: the kind is all it keeps
    }
    if (mine) out.pods.push_back(PodFactsOfCached(*p));
  }
  return out;
}

absl::StatusOr<bool> PubReconciler::WriteStatus(const Json& object, const PubStatus& status) {
  const Json patch =
      kube::StatusPatchOps(object, status.ToJson(), {"disruptedPods", "unavailablePods"});
  auto written = client_->Patch(PubResource(), kube::Namespace(object), kube::Name(object),
                                kube::PatchType::kJson, patch, "status");
  if (written.ok()) return true;
  if (kube::IsConflict(written.status()) ||
      written.status().code() == absl::StatusCode::kInvalidArgument ||
      kube::IsNotFound(written.status())) {
    return false;  // the caller re-reads (a bad patch shows as an unchanged resourceVersion)
  }
  return written.status();
}

absl::StatusOr<kube::Result> PubReconciler::Reconcile(const kube::Request& req) {
  auto cached = inf_.pubs->store().Get(req.ns, req.name);
  if (cached == nullptr) return kube::Result{};
  Json object = *cached;
  std::string refused_rv;
  for (int attempt = 0; attempt <= kube::kConflictRetries; ++attempt) {
    auto pub = ParsePub(object);
    if (!pub.ok()) {
      Logger("pub")->warn("{}/{}: {}", req.ns, req.name, pub.status());
      return kube::Result{};  // its next change brings it back
    }
    ASSIGN_OR_RETURN(Covered covered, PodsOf(*pub, object));
    const absl::Time now = opts_.clock->Now();
    std::optional<absl::Time> recheck;
    std::vector<std::string> not_deleted;
    PubStatus status = ComputeStatus(*pub, covered.pods, covered.replicas, now, &recheck,
                                     &not_deleted);
    if (!(status == pub->status)) {
      ASSIGN_OR_RETURN(bool written, WriteStatus(object, status));
      if (!written) {
        auto fresh = client_->Get(PubResource(), req.ns, req.name);
        if (!fresh.ok()) {
          if (kube::IsNotFound(fresh.status())) return kube::Result{};
          return fresh.status();
        }
        if (kube::ResourceVersion(*fresh) == kube::ResourceVersion(object)) {
          return absl::InternalError(absl::StrCat("status patch of PodUnavailableBudget ",
                                                  req.Key(), " refused"));
        }
        object = *std::move(fresh);
        continue;
      }
    }
    for (const std::string& pod : not_deleted) {
      Event(object, true, "NotDeleted",
            absl::StrCat("pod ", pod, " was allowed to be deleted more than ",
                         absl::FormatDuration(kDeletionTimeout),
                         " ago and is still there: it counts as available again"));
    }
    kube::Result result;
    if (recheck) result.requeue_after = std::max(*recheck - now, absl::ZeroDuration()) + absl::Seconds(1);
    return result;
  }
  return absl::AbortedError(absl::StrCat("PodUnavailableBudget ", req.Key(),
                                         " changed on every status write: requeued"));
}

namespace {

bool FactsEqual(const PodFacts& a, const PodFacts& b) {
  return a.active == b.active && a.ready == b.ready && a.consistent == b.consistent;
}

class PubGroup final : public ControllerGroup {
 public:
  std::string Name() const override { return "podunavailablebudget"; }

  absl::Status Register(const ControllerContext& ctx) override {
    if (!ctx.feature_enabled("PodUnavailableBudgetDeleteGate") &&
        !ctx.feature_enabled("PodUnavailableBudgetUpdateGate")) {
      return absl::OkStatus();
    }
    if (!kube::Served(ctx.client, PubResource())) {
      Logger("pub")->warn("PodUnavailableBudget CRD is not served: PUB controller off");
      return absl::OkStatus();
    }
    auto make = [&](kube::InformerOptions o) { return informers_.Make(ctx, std::move(o)); };
    PubInformers inf;
    inf.pubs = ctx.shared != nullptr ? ctx.shared->Named(kPubInformer, &PubInformerOptions)
                                     : make(PubInformerOptions());
    inf.pods = ctx.shared != nullptr ? ctx.shared->Pods() : make(SharedInformers::PodOptions());
    cache_.Attach(inf.pubs);
    PubReconcilerOptions ro;
    ro.clock = ctx.clock;
    reconciler_ = std::make_unique<PubReconciler>(ctx.client, inf, ctx.recorder, ro);
    kube::ControllerOptions co;
    co.clock = ctx.clock;
    co.workers = ctx.workers("podunavailablebudget", 3);
    controller_ = std::make_unique<kube::Controller>("podunavailablebudget", reconciler_.get(), co);
    controller_->Watch(inf.pubs, kube::EnqueueSelf(), {kube::ResourceVersionChanged()});
    kube::Predicate pod_changed;
    pod_changed.update = [](const Json& a, const Json& b) {
      return kube::Labels(a) != kube::Labels(b) ||
             !FactsEqual(PodFactsOfCached(a), PodFactsOfCached(b));
    };
    controller_->Watch(inf.pods, kube::EnqueueMapped([this](const Json& pod) {
                         std::vector<kube::Request> out;
                         for (std::string& name : cache_.Concerning(pod)) {
                           out.push_back({kube::Namespace(pod), std::move(name)});
                         }
                         return out;
                       }),
                       {pod_changed});
    ctx.manager->Add(controller_.get());
    return absl::OkStatus();
  }

 private:
  OwnedInformers informers_;
  PubCache cache_;
  std::unique_ptr<PubReconciler> reconciler_;
  std::unique_ptr<kube::Controller> controller_;
};

}  // namespace

std::unique_ptr<ControllerGroup> NewPubControllerGroup() { return std::make_unique<PubGroup>(); }

}  // namespace kruise::manager::pub
