#include "manager/workloadspread/ws_controller.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kube/deployment_naming.h"
#include "kube/errors.h"
#include "kube/object.h"
#include "kube/resources.h"
#include "manager/workloadspread/ws_webhook.h"

namespace kruise::manager::workloadspread {

using kube::Json;

const std::vector<WsTargetKind>& WsTargetKinds() {
  static const auto* kinds = new std::vector<WsTargetKind>{
      {"apps.kruise.io", "CloneSet", kube::resources::CloneSets()},
      {"apps.kruise.io",
       "StatefulSet",
       {"apps.kruise.io", "v1beta1", "statefulsets", "StatefulSet", true}},
      {"apps", "Deployment", {"apps", "v1", "deployments", "Deployment", true}},
      {"apps", "ReplicaSet", {"apps", "v1", "replicasets", "ReplicaSet", true}},
      {"apps", "StatefulSet", {"apps", "v1", "statefulsets", "StatefulSet", true}},
      {"batch", "Job", {"batch", "v1", "jobs", "Job", true}},
  };
  return *kinds;
}

void CompactWorkloadForWorkloadSpread(Json& workload) {
  if (!workload.is_object()) return;
  Json out = Json::object();
  for (const char* f : {"apiVersion", "kind"}) {
    if (auto it = workload.find(f); it != workload.end() && it->is_string()) out[f] = *it;
  }
  Json meta = Json::object();
  if (const Json* m = kube::Field(workload, "metadata"); m != nullptr && m->is_object()) {
    for (const char* f : {"name", "namespace", "uid", "resourceVersion"}) {
      if (auto it = m->find(f); it != m->end() && it->is_string()) meta[f] = *it;
    }
  }
  out["metadata"] = std::move(meta);
  if (const Json* s = kube::Field(workload, "spec"); s != nullptr && s->is_object()) {
    for (const char* f : {"replicas", "parallelism"}) {
      if (auto it = s->find(f); it != s->end() && it->is_number_integer()) out["spec"][f] = *it;
    }
  }
  workload = std::move(out);
}

kube::InformerOptions WsTargetInformerOptions(const WsTargetKind& kind) {
  kube::InformerOptions o;
  o.resource = kind.resource;
  o.transform = CompactWorkloadForWorkloadSpread;
  return o;
}

namespace ws_controller_impl {
namespace {

std::string Str(const Json& obj, const char* key) {
  const Json* v = kube::Field(obj, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

// What the controller reads of a pod (see WsPodFactsChanged).
Json PodFacts(const Json& pod) {
  Json f = Json::object();
  for (const char* a : {kMatchedWorkloadSpreadAnnotation, kPodDeletionCostAnnotation}) {
    if (auto v = kube::Annotation(pod, a)) f[a] = *v;
  }
  f["deleting"] = kube::IsBeingDeleted(pod);
  f["phase"] = kube::GetString(pod, {"status", "phase"}).value_or("");
  f["node"] = kube::GetString(pod, {"spec", "nodeName"}).value_or("");
  if (const Json* conds = kube::FindPath(pod, {"status", "conditions"});
      conds != nullptr && conds->is_array()) {
    for (const Json& c : *conds) {
      const std::string type = Str(c, "type");
      if (type != "Ready" && type != "PodScheduled") continue;
      f[type] = {Str(c, "status"), Str(c, "reason"), Str(c, "lastTransitionTime")};
    }
  }
  int64_t restarts = 0;
  if (const Json* cs = kube::FindPath(pod, {"status", "containerStatuses"});
      cs != nullptr && cs->is_array()) {
    for (const Json& c : *cs) restarts = std::max(restarts, kube::IntField(c, "restartCount", 0));
  }
  f["restarts"] = restarts;
  return f;
}

// The WorkloadSpread key ("ns/name") a pod's annotation names, "" when none.
std::string WsKeyOf(const Json& pod) {
  std::vector<std::string> keys = SharedInformers::MatchedWorkloadSpread(pod);
  return keys.empty() ? "" : keys.front();
}

const WsTargetKind* TargetKindOf(const TargetRef& t) {
  const std::string group = t.Group();
  for (const WsTargetKind& k : WsTargetKinds()) {
    if (k.group == group && k.kind == t.kind) return &k;
  }
  return nullptr;
}

// Whether a pod (the shared cache's object) is one of the workload's.
bool PodOfWorkload(const TargetRef& t, const Json& pod, const std::string& workload_uid) {
  std::optional<kube::OwnerReference> owner = kube::ControllerOf(pod);
  if (!owner) return false;
  if (OwnerIsTarget(t, *owner)) return workload_uid.empty() || owner->uid == workload_uid;
  if (NeedsOwnerLookup(t, *owner)) {
    return kube::DeploymentOfReplicaSetPod(pod, owner->name) == t.name;
  }
  return false;
}

std::string Quoted(const std::vector<std::string>& names) { return absl::StrJoin(names, ", "); }

}  // namespace
}  // namespace ws_controller_impl

bool WsPodFactsChanged(const Json& old_pod, const Json& new_pod) {
  return ws_controller_impl::PodFacts(old_pod) != ws_controller_impl::PodFacts(new_pod);
}

WorkloadSpreadReconciler::WorkloadSpreadReconciler(kube::KubeClient* client, WsInformers informers,
                                                   kube::EventRecorder* recorder,
                                                   WsReconcilerOptions opts)
    : client_(client),
      inf_(std::move(informers)),
      recorder_(recorder),
      opts_(opts),
      deletions_(opts.clock) {}

void WorkloadSpreadReconciler::ObserveThrough(kube::Informer* pods) {
  auto observe = [this](const Json& pod) {
    const std::string key = ws_controller_impl::WsKeyOf(pod);
    if (!key.empty())
      deletions_.Observe(key, kube::ScaleExpectations::Action::kDelete, kube::Uid(pod));
  };
  pods->AddEventHandler({
      .on_add = nullptr,
      .on_update =
          [observe](const Json&, const Json& pod) {
            if (kube::IsBeingDeleted(pod)) observe(pod);
          },
      .on_delete = [observe](const Json& pod, bool) { observe(pod); },
  });
}

void WorkloadSpreadReconciler::Event(const Json& ws, bool warning, const std::string& reason,
                                     const std::string& message) {
  if (recorder_ != nullptr) {
    recorder_->Event(ws, warning ? kube::EventType::kWarning : kube::EventType::kNormal, reason,
                     message);
  }
}

absl::StatusOr<WorkloadSpreadReconciler::Workload> WorkloadSpreadReconciler::WorkloadOf(
    const WorkloadSpread& ws) {
  Workload w;
  const WsTargetKind* kind = ws_controller_impl::TargetKindOf(ws.target_ref);
  if (kind == nullptr) return w;  // validation refuses these
  std::shared_ptr<const Json> object;
  if (auto it = inf_.targets.find(kind->Key()); it != inf_.targets.end() && it->second != nullptr) {
    object = it->second->store().Get(ws.namespace_, ws.target_ref.name);
  } else {
    auto got = client_->Get(kind->resource, ws.namespace_, ws.target_ref.name);
    if (!got.ok() && !kube::IsNotFound(got.status())) return got.status();
    if (got.ok()) object = std::make_shared<const Json>(*std::move(got));
  }
  if (object == nullptr) return w;
  w.found = true;
  w.uid = kube::Uid(*object);
  const char* field = kind->kind == "Job" ? "parallelism" : "replicas";
  w.replicas = static_cast<int32_t>(kube::GetInt(*object, {"spec", field}).value_or(1));
  return w;
}

std::vector<Json> WorkloadSpreadReconciler::PodsOf(const WorkloadSpread& ws,
                                                   const Workload& workload) {
  std::vector<Json> out;
  if (!workload.found) return out;
  auto indexed = inf_.pods->store().ByIndex(SharedInformers::kWorkloadSpreadIndex,
                                            absl::StrCat(ws.namespace_, "/", ws.name));
  if (!indexed.ok()) return out;
  for (const auto& pod : *indexed) {
    if (ws_controller_impl::PodOfWorkload(ws.target_ref, *pod, workload.uid)) out.push_back(*pod);
  }
  return out;
}

absl::Status WorkloadSpreadReconciler::SyncDeletionCosts(const WorkloadSpread& ws,
                                                         const std::vector<Json>& pods,
                                                         int32_t replicas) {
  const std::map<std::string, int> costs = DeletionCosts(ws, pods, replicas);
  absl::Status first;
  int patched = 0;
  for (const Json& pod : pods) {
    auto it = costs.find(kube::Name(pod));
    if (it == costs.end()) continue;
    const std::string want = std::to_string(it->second);
    const std::optional<std::string> have = kube::Annotation(pod, kPodDeletionCostAnnotation);
    if (have ? *have == want : it->second == 0) continue;
    const Json patch = {{"metadata", {{"annotations", {{kPodDeletionCostAnnotation, want}}}}}};
    auto done = client_->Patch(kube::resources::Pods(), ws.namespace_, kube::Name(pod),
                               kube::PatchType::kMerge, patch);
    if (done.ok()) {
      ++patched;
    } else if (!kube::IsNotFound(done.status()) && first.ok()) {
      first = Annotate(done.status(), absl::StrCat("deletion cost of pod ", kube::Name(pod)));
    }
  }
  if (patched > 0) {
    Logger("workloadspread")
        ->info("WorkloadSpread {}/{}: deletion cost of {} pods updated", ws.namespace_, ws.name,
               patched);
  }
  return first;
}

absl::Status WorkloadSpreadReconciler::WriteStatus(const Json& object,
                                                   const WorkloadSpreadStatus& status) {
  const Json patch = kube::StatusPatchOps(object, status.ToJson());
  return client_
      ->Patch(WorkloadSpreadResource(), kube::Namespace(object), kube::Name(object),
              kube::PatchType::kJson, patch, "status")
      .status();
}

absl::Status WorkloadSpreadReconciler::DeletePods(const Json& object, const WorkloadSpread& ws,
                                                  const StatusPlan& plan,
                                                  const std::vector<Json>& pods) {
  if (plan.pods_to_delete.empty()) return absl::OkStatus();
  const std::string key = absl::StrCat(ws.namespace_, "/", ws.name);
  // An earlier deletion the cache has not shown yet: its pod may still look unschedulable.
  if (!deletions_.Satisfied(key)) return absl::OkStatus();
  absl::Status first;
  for (const std::string& name : plan.pods_to_delete) {
    auto pod = std::find_if(pods.begin(), pods.end(),
                            [&](const Json& p) { return kube::Name(p) == name; });
    if (pod == pods.end()) continue;
    const std::string uid = kube::Uid(*pod);
    std::string subset;
    if (auto m = MatchedOf(*pod)) subset = m->subset;
    deletions_.Expect(key, kube::ScaleExpectations::Action::kDelete, uid);
    kube::DeleteOptions options;
    options.precondition_uid = uid;
    absl::Status st = client_->Delete(kube::resources::Pods(), ws.namespace_, name, options);
    if (st.ok()) {
      Event(object, false, "RescheduledPod",
            absl::StrCat("deleted pod ", name, " of subset ", subset,
                         ": unschedulable for more than ", ws.reschedule_critical_seconds,
                         " s; its replacement goes to a later subset"));
      continue;
    }
    deletions_.Observe(key, kube::ScaleExpectations::Action::kDelete, uid);
    if (kube::IsNotFound(st) || kube::IsConflict(st)) continue;  // gone, or another pod now
    Event(object, true, "DeletePodFailed",
          absl::StrCat("deleting unschedulable pod ", name, " of subset ", subset, ": ",
                       st.message()));
    if (first.ok()) first = Annotate(st, absl::StrCat("deleting pod ", name));
  }
  return first;
}

absl::StatusOr<kube::Result> WorkloadSpreadReconciler::Reconcile(const kube::Request& req) {
  auto cached = inf_.workloadspreads->store().Get(req.ns, req.name);
  if (cached == nullptr) {
    deletions_.Delete(req.Key());
    return kube::Result{};
  }
  Json object = *cached;
  absl::Status costs;  // a failed cost patch is retried (an error) after the status is written
  for (int attempt = 0; attempt <= kube::kConflictRetries; ++attempt) {
    auto ws = ParseWorkloadSpread(object);
    if (!ws.ok()) {
      Logger("workloadspread")->warn("{}: {}", req.Key(), ws.status());
      return kube::Result{};  // its next change brings it back
    }
    ASSIGN_OR_RETURN(Workload workload, WorkloadOf(*ws));
    const std::vector<Json> pods = PodsOf(*ws, workload);
    if (attempt == 0) costs = SyncDeletionCosts(*ws, pods, workload.replicas);
    const absl::Time now = opts_.clock->Now();
    StatusPlan plan = ComputeStatus(*ws, pods, workload.replicas, now);
    if (plan.status.ToJson() != ws->status.ToJson()) {
      absl::Status written = WriteStatus(object, plan.status);
      if (!written.ok()) {
        // 409, or the real API server's bare 422 for a failed test (or a bad patch).
        const bool conflict = kube::IsConflict(written);
        if (!conflict && !kube::IsNotFound(written) &&
            written.code() != absl::StatusCode::kInvalidArgument) {
          return Annotate(written, absl::StrCat("status of WorkloadSpread ", req.Key()));
        }
        auto fresh = client_->Get(WorkloadSpreadResource(), req.ns, req.name);
        if (!fresh.ok()) {
          if (kube::IsNotFound(fresh.status())) return kube::Result{};
          return fresh.status();
        }
        if (!conflict && kube::ResourceVersion(*fresh) == kube::ResourceVersion(object)) {
          return Annotate(written,
                          absl::StrCat("status patch of WorkloadSpread ", req.Key(), " refused"));
        }
        object = *std::move(fresh);
        continue;
      }
      if (!plan.not_created.empty()) {
        Event(object, true, "CreatePodFailed",
              absl::StrCat("pods recorded at admission never appeared within ",
                           absl::FormatDuration(kCreatePodTimeout), ": ",
                           ws_controller_impl::Quoted(plan.not_created)));
      }
      if (!plan.not_deleted.empty()) {
        Event(object, true, "DeletePodFailed",
              absl::StrCat("pods whose deletion was admitted more than ",
                           absl::FormatDuration(kDeletePodTimeout),
                           " ago are still there and count again: ",
                           ws_controller_impl::Quoted(plan.not_deleted)));
      }
    }
    RETURN_IF_ERROR(DeletePods(object, *ws, plan, pods));
    RETURN_IF_ERROR(costs);
    kube::Result result;
    if (plan.recheck) {
      result.requeue_after = std::max(*plan.recheck - now, absl::ZeroDuration()) + absl::Seconds(1);
    }
    return result;
  }
  return absl::AbortedError(
      absl::StrCat("WorkloadSpread ", req.Key(), " changed on every status write: requeued"));
}

// ---- Controller group ---------------------------------------------------------------------------

namespace {

class WorkloadSpreadGroup final : public ControllerGroup {
 public:
  std::string Name() const override { return "workloadspread"; }

  absl::Status Register(const ControllerContext& ctx) override {
    if (!ctx.feature_enabled("WorkloadSpread")) return absl::OkStatus();
    RETURN_IF_ERROR(CheckControllerContext(ctx, "workloadspread"));
    if (!kube::Served(ctx.client, WorkloadSpreadResource())) {
      Logger("workloadspread")
          ->warn("WorkloadSpread CRD is not served: WorkloadSpread controller off");
      return absl::OkStatus();
    }
    auto named = [&](const std::string& name, std::function<kube::InformerOptions()> options) {
      if (ctx.shared != nullptr) return ctx.shared->Named(name, options);
      return informers_.Make(ctx, options());
    };
    WsInformers inf;
    inf.workloadspreads = named(kWorkloadSpreadInformer, &WorkloadSpreadInformerOptions);
    inf.pods =
        ctx.shared != nullptr ? ctx.shared->Pods() : named("pods", &SharedInformers::PodOptions);
    for (const WsTargetKind& k : WsTargetKinds()) {
      if (!kube::Served(ctx.client, k.resource)) continue;  // e.g. no Advanced StatefulSet CRD
      inf.targets[k.Key()] =
          named(absl::StrCat("workloadspread-targets-", k.resource.resource, ".", k.group),
                [k] { return WsTargetInformerOptions(k); });
    }
    WsReconcilerOptions ro;
    ro.clock = ctx.clock;
    reconciler_ = std::make_unique<WorkloadSpreadReconciler>(ctx.client, inf, ctx.recorder, ro);
    reconciler_->ObserveThrough(inf.pods);
    kube::ControllerOptions co;
    co.clock = ctx.clock;
    co.workers = ctx.workers("workloadspread", 3);
    controller_ = std::make_unique<kube::Controller>("workloadspread", reconciler_.get(), co);
    controller_->Watch(inf.workloadspreads, kube::EnqueueSelf(), {kube::ResourceVersionChanged()});
    kube::Predicate pod_changed;
    pod_changed.update = [](const Json& a, const Json& b) { return WsPodFactsChanged(a, b); };
    controller_->Watch(
        inf.pods, kube::EnqueueMapped([](const Json& pod) {
          std::vector<kube::Request> out;
          for (const std::string& key : SharedInformers::MatchedWorkloadSpread(pod)) {
            const size_t slash = key.find('/');
            out.push_back({key.substr(0, slash), key.substr(slash + 1)});
          }
          return out;
        }),
        {pod_changed});
    kube::Predicate replicas_changed;
    replicas_changed.update = [](const Json& a, const Json& b) {
      return kube::FindPath(a, {"spec"}) == nullptr || kube::FindPath(b, {"spec"}) == nullptr ||
             *kube::FindPath(a, {"spec"}) != *kube::FindPath(b, {"spec"});
    };
    kube::Informer* spreads = inf.workloadspreads;
    for (const WsTargetKind& k : WsTargetKinds()) {
      auto it = inf.targets.find(k.Key());
      if (it == inf.targets.end()) continue;
      controller_->Watch(
          it->second, kube::EnqueueMapped([spreads, k](const Json& workload) {
            std::vector<kube::Request> out;
            auto in_ns = spreads->store().ByIndex(kube::kNamespaceIndex, kube::Namespace(workload));
            if (!in_ns.ok()) return out;
            for (const auto& w : *in_ns) {
              const Json* ref = kube::FindPath(*w, {"spec", "targetRef"});
              if (ref == nullptr || !ref->is_object()) continue;
              using ws_controller_impl::Str;
              const TargetRef t{Str(*ref, "apiVersion"), Str(*ref, "kind"), Str(*ref, "name")};
              if (t.Group() == k.group && t.kind == k.kind && t.name == kube::Name(workload)) {
                out.push_back({kube::Namespace(*w), kube::Name(*w)});
              }
            }
            return out;
          }),
          {replicas_changed});
    }
    ctx.manager->Add(controller_.get());
    return absl::OkStatus();
  }

 private:
  OwnedInformers informers_;
  std::unique_ptr<WorkloadSpreadReconciler> reconciler_;
  std::unique_ptr<kube::Controller> controller_;
};

}  // namespace

std::unique_ptr<ControllerGroup> NewWorkloadSpreadControllerGroup() {
  return std::make_unique<WorkloadSpreadGroup>();
}

}  // namespace kruise::manager::workloadspread
