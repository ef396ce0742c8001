#include "manager/cloneset/cloneset_controller.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kube/errors.h"
#include "kube/kruise_api.h"
#include "kube/object.h"
#include "kube/resources.h"
#include "manager/cloneset/cloneset_api.h"
#include "manager/inplace/inplace_apply.h"
#include "manager/inplace/predownload.h"
#include "manager/revision/revision.h"
#include "manager/workload/pod_claim.h"
#include "manager/workload/workload_status.h"

namespace kruise::manager::cloneset {

namespace res = kube::resources;
using kube::Json;

namespace {

using inplace::AppendMapOps;
using inplace::HasReadinessGate;

Json TestRv(const Json& obj) { return inplace::TestResourceVersionOp(obj); }

bool IsActive(const Json& pod) {
  if (kube::IsBeingDeleted(pod)) return false;
  const std::string phase = kube::GetString(pod, {"status", "phase"}).value_or("");
  return phase != "Succeeded" && phase != "Failed";
}

std::optional<kube::OwnerReference> CloneSetOwner(const Json& obj) {
  auto owner = kube::ControllerOf(obj);
  if (!owner.has_value() || owner->kind != "CloneSet" ||
      owner->api_version.rfind("apps.kruise.io/", 0) != 0) {
    return std::nullopt;
  }
  return owner;
}

std::string OwnerKey(const Json& obj) {
  auto owner = CloneSetOwner(obj);
  if (!owner.has_value()) return "";
  return absl::StrCat(kube::Namespace(obj), "/", owner->name);
}

std::vector<std::string> SpreadKeys(const Json& tmpl) {
  std::vector<std::string> keys;
  const Json* tsc = kube::FindPath(tmpl, {"spec", "topologySpreadConstraints"});
  if (tsc == nullptr || !tsc->is_array()) return keys;
  for (const Json& c : *tsc) {
    if (c.is_object() && c.contains("topologyKey") && c["topologyKey"].is_string()) {
      keys.push_back(c["topologyKey"].get<std::string>());
    }
  }
  return keys;
}

Json OwnerRefJson(const Json& cs) {
  return {{"apiVersion", cs.value("apiVersion", "apps.kruise.io/v1alpha1")},
          {"kind", "CloneSet"},
          {"name", kube::Name(cs)},
          {"uid", kube::Uid(cs)},
          {"controller", true},
          {"blockOwnerDeletion", true}};
}

std::string PvcName(const std::string& vct, const std::string& cs, const std::string& id) {
  return absl::StrCat(vct, "-", cs, "-", id);
}

}  // namespace

struct CloneSetReconciler::Context {
  Json cs;
  std::string key;
  CloneSetSpec spec;
  ScaledNumbers numbers;
  kube::LabelSelector selector = kube::LabelSelector::Nothing();
  std::vector<Json> pods;  // active pods, same order as views
  std::vector<PodView> views;
  std::vector<Json> revisions;
  Json update_revision;
  std::string update_revision_name;
  std::string current_revision_name;
  int64_t collision_count = 0;
  Diffs diffs;
  absl::Time now;
  // Outcomes of the scale and update steps when they ran (status conditions FailedScale and
  // FailedUpdate); a conflict (stale cache) counts as not run.
  std::optional<absl::Status> scale_result;
  std::optional<absl::Status> update_result;
  bool held = false;  // the disruption gate denied a pod this round
};

CloneSetReconciler::CloneSetReconciler(kube::KubeClient* client, CloneSetInformers informers,
                                       kube::EventRecorder* recorder,
                                       CloneSetReconcilerOptions opts)
    : client_(client), inf_(informers), opts_(opts), writer_(client, recorder, opts.clock) {}

void CloneSetReconciler::ObserveThrough(kube::Informer* informer) {
  writer_.ObserveThrough(informer, OwnerKey);
}

std::string CloneSetReconciler::RandomInstanceId(const std::vector<Json>& pods,
                                                 const std::vector<std::string>& reserved) {
  std::set<std::string> taken(reserved.begin(), reserved.end());
  for (const Json& p : pods) {
    if (auto id = kube::Label(p, kInstanceIdLabel)) taken.insert(*id);
  }
  absl::MutexLock lock(&rng_mu_);
  return NewInstanceId([&](const std::string& id) { return taken.count(id) > 0; },
                       [&](size_t n) { return absl::Uniform<size_t>(rng_, 0, n); });
}

absl::StatusOr<std::optional<Json>> CloneSetReconciler::SyncRevisions(Context& ctx) {
  ASSIGN_OR_RETURN(auto owned,
                   inf_.revisions->store().ByIndex(kube::kControllerUidIndex, kube::Uid(ctx.cs)));
  for (const auto& r : owned) ctx.revisions.push_back(*r);
  std::sort(ctx.revisions.begin(), ctx.revisions.end(), [](const Json& a, const Json& b) {
    return kube::IntField(a, "revision", 0) < kube::IntField(b, "revision", 0);
  });
  const Json* tmpl_ptr = kube::FindPath(ctx.cs, {"spec", "template"});
  const Json tmpl = tmpl_ptr != nullptr ? *tmpl_ptr : Json::object();
  ctx.collision_count = kube::GetInt(ctx.cs, {"status", "collisionCount"}).value_or(0);
  std::optional<int32_t> collision;
  if (ctx.collision_count > 0) collision = static_cast<int32_t>(ctx.collision_count);
  const std::string name =
      revision::RevisionName(kube::Name(ctx.cs), revision::TemplateHash(tmpl, collision));
  int64_t max_revision = 0;
  for (const Json& r : ctx.revisions) {
    max_revision = std::max<int64_t>(max_revision, kube::IntField(r, "revision", 0));
  }
  for (const Json& r : ctx.revisions) {
    if (kube::Name(r) != name) continue;
    if (revision::RevisionTemplate(r) != tmpl) break;  // a hash collision
    ctx.update_revision = r;
    ctx.update_revision_name = name;
    return std::optional<Json>(r);
  }
  Json fresh = revision::NewControllerRevision(ctx.cs, tmpl, max_revision + 1, collision);
  auto created = client_->Create(res::ControllerRevisions(), kube::Namespace(ctx.cs), fresh);
  if (created.ok()) {
    ctx.revisions.push_back(*created);
    ctx.update_revision = *created;
    ctx.update_revision_name = name;
    return std::optional<Json>(*created);
  }
  if (!kube::IsAlreadyExists(created.status())) return created.status();
  ASSIGN_OR_RETURN(Json existing,
                   client_->Get(res::ControllerRevisions(), kube::Namespace(ctx.cs), name));
  auto owner = kube::ControllerOf(existing);
  if (revision::RevisionTemplate(existing) == tmpl && owner.has_value() &&
      owner->uid == kube::Uid(ctx.cs)) {
    ctx.revisions.push_back(existing);  // our cache had not seen it yet
    ctx.update_revision = existing;
    ctx.update_revision_name = name;
    return std::optional<Json>(existing);
  }
  // Someone else's revision under our name: count the collision and come back.
  Json patch = {{"status", {{"collisionCount", ctx.collision_count + 1}}}};
  RETURN_IF_ERROR(client_
                      ->Patch(res::CloneSets(), kube::Namespace(ctx.cs), kube::Name(ctx.cs),
                              kube::PatchType::kMerge, patch, "status")
                      .status());
  return std::optional<Json>();
}

absl::Status CloneSetReconciler::CreatePods(Context& ctx, int count, int old_revision_count) {
  const std::string ns = kube::Namespace(ctx.cs);
  const std::string cs_name = kube::Name(ctx.cs);
  const Json* current_rev = nullptr;
  for (const Json& r : ctx.revisions) {
    if (kube::Name(r) == ctx.current_revision_name) current_rev = &r;
  }
  std::set<std::string> existing_pvcs;
  std::vector<std::string> free_ids;  // instance ids whose PVCs outlived their pod: reuse them
  {
    ASSIGN_OR_RETURN(auto pvcs,
                     inf_.pvcs->store().ByIndex(kube::kControllerUidIndex, kube::Uid(ctx.cs)));
    std::set<std::string> pod_ids;
    for (const Json& p : ctx.pods) {
      if (auto id = kube::Label(p, kInstanceIdLabel)) pod_ids.insert(*id);
    }
    std::set<std::string> ids;
    for (const auto& pvc : pvcs) {
      existing_pvcs.insert(kube::Name(*pvc));
      auto id = kube::Label(*pvc, kInstanceIdLabel);
      if (id.has_value() && !pod_ids.count(*id) && !kube::IsBeingDeleted(*pvc)) ids.insert(*id);
    }
    free_ids.assign(ids.begin(), ids.end());
  }
  const Json* vcts = kube::FindPath(ctx.cs, {"spec", "volumeClaimTemplates"});
  std::vector<std::string> reserved = free_ids;
  int created = 0;
  for (int batch : SlowStartBatches(count)) {
    for (int b = 0; b < batch; ++b, ++created) {
      const bool old = created < old_revision_count && current_rev != nullptr &&
                       ctx.current_revision_name != ctx.update_revision_name;
      const Json& rev = old ? *current_rev : ctx.update_revision;
      Json tmpl = revision::RevisionTemplate(rev);
      if (!tmpl.is_object()) return absl::InternalError("revision without a template");
      std::string id;
      if (!free_ids.empty()) {
        id = free_ids.back();
        free_ids.pop_back();
      } else {
        id = RandomInstanceId(ctx.pods, reserved);
        reserved.push_back(id);
      }
      const std::string name = absl::StrCat(cs_name, "-", id);
      Json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
      Json meta = tmpl.contains("metadata") && tmpl["metadata"].is_object() ? tmpl["metadata"]
                                                                            : Json::object();
      meta.erase("creationTimestamp");
      meta["name"] = name;
      meta["namespace"] = ns;
      if (!meta.contains("labels") || !meta["labels"].is_object()) meta["labels"] = Json::object();
      meta["labels"][revision::kControllerRevisionHashLabel] = kube::Name(rev);
      meta["labels"][kInstanceIdLabel] = id;
      const bool pre_normal = ctx.spec.pre_normal.has_value() && !ctx.spec.pre_normal->empty();
      meta["labels"][kLifecycleStateLabel] = pre_normal ? kStatePreparingNormal : kStateNormal;
      meta["ownerReferences"] = Json::array({OwnerRefJson(ctx.cs)});
      pod["metadata"] = std::move(meta);
      Json spec = tmpl.contains("spec") ? tmpl["spec"] : Json::object();
      if (!spec.contains("readinessGates") || !spec["readinessGates"].is_array()) {
        spec["readinessGates"] = Json::array();
      }
      if (!HasReadinessGate(Json{{"spec", spec}}, inplace::kInPlaceUpdateReadyCondition)) {
        spec["readinessGates"].push_back(
            {{"conditionType", inplace::kInPlaceUpdateReadyCondition}});
      }
      // PVCs first, then the pod mounting them.
      if (vcts != nullptr && vcts->is_array()) {
        if (!spec.contains("volumes") || !spec["volumes"].is_array())
          spec["volumes"] = Json::array();
        for (const Json& vct : *vcts) {
          const std::string vct_name = kube::Name(vct);
          if (vct_name.empty()) continue;
          const std::string claim = PvcName(vct_name, cs_name, id);
          Json volume = {{"name", vct_name}, {"persistentVolumeClaim", {{"claimName", claim}}}};
          bool replaced = false;
          for (Json& v : spec["volumes"]) {
            if (v.value("name", "") == vct_name) {
              v = volume;
              replaced = true;
            }
          }
          if (!replaced) spec["volumes"].push_back(volume);
          if (existing_pvcs.count(claim)) continue;
          Json pvc = {{"apiVersion", "v1"}, {"kind", "PersistentVolumeClaim"}};
          Json pmeta = vct.contains("metadata") ? vct["metadata"] : Json::object();
          pmeta["name"] = claim;
          pmeta["namespace"] = ns;
          if (!pmeta.contains("labels") || !pmeta["labels"].is_object())
            pmeta["labels"] = Json::object();
          for (const auto& [k, v] : pod["metadata"]["labels"].items()) {
            if (k != revision::kControllerRevisionHashLabel && k != kLifecycleStateLabel) {
              pmeta["labels"][k] = v;
            }
          }
          pmeta["ownerReferences"] = Json::array({OwnerRefJson(ctx.cs)});
          pvc["metadata"] = std::move(pmeta);
          pvc["spec"] = vct.contains("spec") ? vct["spec"] : Json::object();
          writer_.scale_expectations().Expect(ctx.key, kube::ScaleExpectations::Action::kCreate,
                                              claim);
          auto made = client_->Create(res::PersistentVolumeClaims(), ns, pvc);
          if (!made.ok() && !kube::IsAlreadyExists(made.status())) {
            writer_.scale_expectations().Observe(ctx.key, kube::ScaleExpectations::Action::kCreate,
                                                 claim);
            writer_.Event(
                ctx.cs, true, "FailedCreate",
                absl::StrCat("failed to create pvc ", claim, ": ", made.status().message()));
            return made.status();
          }
          if (!made.ok()) {
            writer_.scale_expectations().Observe(ctx.key, kube::ScaleExpectations::Action::kCreate,
                                                 claim);
          }
          existing_pvcs.insert(claim);
        }
      }
      pod["spec"] = std::move(spec);
      writer_.scale_expectations().Expect(ctx.key, kube::ScaleExpectations::Action::kCreate, name);
      auto made = client_->Create(res::Pods(), ns, pod);
      if (!made.ok()) {
        writer_.scale_expectations().Observe(ctx.key, kube::ScaleExpectations::Action::kCreate,
                                             name);
        writer_.Event(ctx.cs, true, "FailedCreate",
                      absl::StrCat("failed to create pod ", name, ": ", made.status().message()));
        return made.status();
      }
      writer_.Event(ctx.cs, false, "SuccessfulCreate",
                    absl::StrCat("succeed to create pod ", name));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Json> CloneSetReconciler::SetKruisePodReady(const Json& pod, bool ready,
                                                           const std::string& reason,
                                                           const std::string& message,
                                                           absl::Time now) {
  Json ops = workload::KruisePodReadyOps(pod, ready, reason, message, now);
  if (ops.empty()) return pod;
  ops.insert(ops.begin(), TestRv(pod));
  return writer_.PatchPod(pod, ops, "status");
}

absl::Status CloneSetReconciler::RemovePod(Context& ctx, const Json& pod) {
  PodView view = ViewPod(pod, ctx.spec, ctx.update_revision_name, ctx.now);
  if (IsPodHooked(ctx.spec.pre_delete, view)) {
    if (view.lifecycle_state == kStatePreparingDelete) return absl::OkStatus();
    Json ops = workload::LifecycleStateOps(pod, kStatePreparingDelete, ctx.now);
    ops.insert(ops.begin(), TestRv(pod));
    ASSIGN_OR_RETURN(Json patched, writer_.PatchPod(pod, ops));
    if (ctx.spec.pre_delete->mark_pod_not_ready) {
      RETURN_IF_ERROR(SetKruisePodReady(patched, false, kStatePreparingDelete,
                                        "the CloneSet's preDelete hook holds this pod", ctx.now)
                          .status());
    }
    writer_.Event(ctx.cs, false, "PreparingDelete",
                  absl::StrCat("pod ", kube::Name(pod), " waits for its preDelete hook"));
    return absl::OkStatus();
  }
  absl::Status st = writer_.Delete(ctx.key, res::Pods(), pod);
  if (!st.ok()) {
    if (kube::IsNotFound(st)) return absl::OkStatus();
    writer_.Event(ctx.cs, true, "FailedDelete",
                  absl::StrCat("failed to delete pod ", kube::Name(pod), ": ", st.message()));
    return st;
  }
  writer_.Event(ctx.cs, false, "SuccessfulDelete",
                absl::StrCat("succeed to delete pod ", kube::Name(pod)));
  // Its PVCs go with it.
  auto id = kube::Label(pod, kInstanceIdLabel);
  if (!id.has_value()) return absl::OkStatus();
  ASSIGN_OR_RETURN(auto pvcs,
                   inf_.pvcs->store().ByIndex(kube::kControllerUidIndex, kube::Uid(ctx.cs)));
  for (const auto& pvc : pvcs) {
    if (kube::Label(*pvc, kInstanceIdLabel) != id || kube::IsBeingDeleted(*pvc)) continue;
    absl::Status pst = writer_.Delete(ctx.key, res::PersistentVolumeClaims(), *pvc);
    if (!pst.ok() && !kube::IsNotFound(pst)) return pst;
  }
  return absl::OkStatus();
}

absl::Status CloneSetReconciler::PreDownloadImages(Context& ctx) {
  if (!opts_.pre_download_images || inf_.image_pull_jobs == nullptr) return absl::OkStatus();
  if (ctx.current_revision_name == ctx.update_revision_name) {
    // Every pod is at one revision: the jobs of earlier updates have nothing left to warm.
    ASSIGN_OR_RETURN(auto jobs, inf_.image_pull_jobs->store().ByIndex(kube::kControllerUidIndex,
                                                                      kube::Uid(ctx.cs)));
    return inplace::DeletePreDownloadJobs(client_, jobs);
  }
  if (inplace::PreDownloadDone(ctx.update_revision) ||
      inplace::PreDownloadHeldBack(ctx.cs, ctx.update_revision_name, ctx.spec.replicas)) {
    return absl::OkStatus();
  }
  const Json* current = nullptr;
  for (const Json& r : ctx.revisions) {
    if (kube::Name(r) == ctx.current_revision_name) current = &r;
  }
  if (current == nullptr) return absl::OkStatus();
  inplace::PreDownloadRequest req = inplace::PreDownloadRequestFor(ctx.cs, ctx.update_revision);
  req.current_template = revision::RevisionTemplate(*current);
  req.recreate_only = ctx.spec.update_type == "ReCreate";
  req.replicas = ctx.spec.replicas;
  req.partition = ctx.numbers.partition;
  req.max_unavailable = ctx.numbers.max_unavailable;
  return inplace::CarryOutPreDownload(
      client_, ctx.cs, ctx.update_revision_name, inplace::PlanImagePreDownload(req),
      [&](bool warning, const std::string& reason, const std::string& message) {
        writer_.Event(ctx.cs, warning, reason, message);
      });
}

absl::StatusOr<bool> CloneSetReconciler::Scale(Context& ctx) {
  std::vector<int> ranks;
  const Json* tmpl = kube::FindPath(ctx.cs, {"spec", "template"});
  std::vector<std::string> keys = tmpl != nullptr ? SpreadKeys(*tmpl) : std::vector<std::string>{};
  auto node_label = [this](const std::string& node,
                           const std::string& key) -> std::optional<std::string> {
    if (inf_.nodes == nullptr) return std::nullopt;
    auto n = inf_.nodes->store().Get(node);
    if (n == nullptr) return std::nullopt;
    return kube::Label(*n, key);
  };
  ranks = SpreadRanks(ctx.views, keys, node_label);
  ScalePlan plan = PlanScale(ctx.spec, ctx.numbers, ctx.diffs, ctx.views, ranks);
  if (!plan.back_to_normal.empty()) {
    for (size_t i : plan.back_to_normal) {
      Json ops = Json::array({TestRv(ctx.pods[i])});
      AppendMapOps(ctx.pods[i], "/metadata/labels", {{kLifecycleStateLabel, kStateNormal}}, &ops);
      RETURN_IF_ERROR(writer_.PatchPod(ctx.pods[i], ops).status());
    }
    return true;
  }
  if (plan.create > 0) {
    writer_.Event(ctx.cs, false, "ScaleUp",
                  absl::StrCat("creating ", plan.create, " pods (", plan.create_old_revision,
                               " at the current revision)"));
    RETURN_IF_ERROR(CreatePods(ctx, plan.create, plan.create_old_revision));
    return true;
  }
  if (!plan.remove.empty()) {
    for (size_t i : plan.remove) RETURN_IF_ERROR(RemovePod(ctx, ctx.pods[i]));
    return true;
  }
  return false;
}

absl::StatusOr<bool> CloneSetReconciler::Refresh(Context& ctx) {
  bool modified = false;
  const workload::Lifecycle lifecycle{ctx.spec.pre_delete, ctx.spec.in_place_update,
                                      ctx.spec.pre_normal};
  for (size_t i = 0; i < ctx.pods.size(); ++i) {
    const Json& pod = ctx.pods[i];
    // A new pod's gates start True: InPlaceUpdateReady (ours) and KruisePodReady (the pod webhook
    // adds it to pods of Kruise workloads; OpenKruise's pod-readiness controller sets it).
    Json initial = inplace::InitialReadinessGateOps(
        pod, {inplace::kInPlaceUpdateReadyCondition, kube::kKruisePodReadyCondition}, ctx.now);
    if (!initial.empty()) {
      RETURN_IF_ERROR(writer_.PatchPod(pod, initial, "status").status());
      modified = true;
      continue;
    }
    const PodView& view = ctx.views[i];
    // markPodNotReady: a pod a lifecycle hook made not ready is ready again once it is Normal
    // (its update done, or its deletion called off). Another party's reason is left alone.
    if (Json ops = workload::RestoreKruisePodReadyOps(pod, view.lifecycle_state, ctx.now);
        !ops.empty()) {
      ops.insert(ops.begin(), TestRv(pod));
      RETURN_IF_ERROR(writer_.PatchPod(pod, ops, "status").status());
      modified = true;
      continue;
    }
    // The engine: a grace period that has run out applies the images it held back; an update
    // the kubelet has carried out gets InPlaceUpdateReady True.
    auto revision_template = [&ctx](const std::string& name) -> std::optional<Json> {
      for (const Json& r : ctx.revisions) {
        if (kube::Name(r) == name) return revision::RevisionTemplate(r);
      }
      return std::nullopt;
    };
    inplace::InPlaceUpdateCheck check =
        inplace::CheckInPlaceUpdate(pod, ctx.spec.grace_period_seconds, ctx.now, revision_template);
    using Step = inplace::InPlaceUpdateCheck::Step;
    if (check.step == Step::kInGrace) continue;
    if (check.step == Step::kGraceOver) {
      RETURN_IF_ERROR(writer_.PatchPod(pod, check.pod_ops).status());
      modified = true;
      continue;
    }
    // The lifecycle's own moves (workload::NextLifecycleState): PreparingNormal -> Normal once
    // the preNormal hook is all there; an in-place update the kubelet has carried out (ready
    // again) or a PreparingUpdate rolled back -> Updated while the inPlaceUpdate hook is not all
    // back, else Normal; Updated -> Normal once it is.
    const bool completed =
        view.lifecycle_state == kStateUpdating && check.step == Step::kCompleted;
    std::optional<std::string> next = workload::NextLifecycleState(
        lifecycle, view.lifecycle_state, {view.labels, view.finalizers}, view.updated, completed);
    if (!next.has_value()) continue;
    Json patched = pod;
    if (completed && !check.status_ops.empty()) {
      ASSIGN_OR_RETURN(patched, writer_.PatchPod(pod, check.status_ops, "status"));
    }
    Json ops = workload::LifecycleStateOps(patched, *next, ctx.now);
    ops.insert(ops.begin(), TestRv(patched));
    RETURN_IF_ERROR(writer_.PatchPod(patched, ops).status());
    if (completed) {
      writer_.Event(ctx.cs, false, "InPlaceUpdateCompleted",
                    absl::StrCat("pod ", kube::Name(pod), " runs revision ", check.revision));
    }
    modified = true;
  }
  return modified;
}

absl::Status CloneSetReconciler::UpdatePodInPlace(Context& ctx, const Json& pod,
                                                  const inplace::InPlaceUpdateSpec& update) {
  // Not ready first, so endpoints drop the pod before its containers restart; then revision,
  // lifecycle, state annotation, metadata and (unless in grace) images, in one patch.
  inplace::InPlaceUpdatePatchOptions po;
  po.grace_period_seconds = ctx.spec.grace_period_seconds;
  po.labels = {{kLifecycleStateLabel, kStateUpdating}};
  po.annotations = {{kLifecycleTimestampAnnotation, kube::FormatRfc3339(ctx.now)}};
  return writer_.UpdateInPlace(ctx.cs, pod, update, po, ctx.now, update.revision);
}

absl::StatusOr<bool> CloneSetReconciler::Update(Context& ctx) {
  std::vector<size_t> chosen = PlanUpdate(ctx.spec, ctx.diffs, ctx.views);
  if (chosen.empty()) return false;
  const Json update_tmpl = revision::RevisionTemplate(ctx.update_revision);
  bool modified = false;
  inplace::HeldPods held;
  for (size_t i : chosen) {
    const Json& pod = ctx.pods[i];
    const PodView& view = ctx.views[i];
    // The PodUnavailableBudget first, whatever the update's kind (OpenKruise's order); a denial
    // ends the round.
    if (opts_.disruption_gate != nullptr) {
      ASSIGN_OR_RETURN(inplace::GateDecision gate,
                       opts_.disruption_gate->Allow(pod, inplace::DisruptionOperation::kUpdate,
                                                    /*dry_run=*/false));
      if (!gate.allowed) {
        held.Add(kube::Name(pod), gate);
        break;
      }
    }
    if (ctx.spec.update_type == kInPlaceIfPossible || ctx.spec.update_type == kInPlaceOnly) {
      Json old_tmpl;
      for (const Json& r : ctx.revisions) {
        if (kube::Name(r) == view.revision) old_tmpl = revision::RevisionTemplate(r);
      }
      std::string why_not = "the pod's revision is no longer in the history";
      std::optional<inplace::InPlaceUpdateSpec> update;
      if (old_tmpl.is_object()) {
        update = inplace::CalculateInPlaceUpdate(old_tmpl, update_tmpl, ctx.update_revision_name,
                                                 &why_not);
      }
      if (update.has_value()) {
        // inPlaceUpdate hook (workload::DecideInPlaceUpdate): a held pod goes to
        // PreparingUpdate and waits there until the hook is gone.
        using Action = workload::InPlaceUpdateDecision::Action;
        const workload::Lifecycle lifecycle{ctx.spec.pre_delete, ctx.spec.in_place_update,
                                            ctx.spec.pre_normal};
        workload::InPlaceUpdateDecision hook = workload::DecideInPlaceUpdate(
            lifecycle, view.lifecycle_state, {view.labels, view.finalizers});
        if (hook.action == Action::kWait) continue;
        if (hook.action == Action::kRefuse) {
          return absl::FailedPreconditionError(
              absl::StrCat("pod ", kube::Name(pod), " may not be updated in place in lifecycle state ",
                           view.lifecycle_state));
        }
        if (hook.action == Action::kPrepare) {
          Json ops = workload::LifecycleStateOps(
              pod, kStatePreparingUpdate, ctx.now,
              hook.put_hook_back ? &*ctx.spec.in_place_update : nullptr);
          ops.insert(ops.begin(), TestRv(pod));
          ASSIGN_OR_RETURN(Json patched, writer_.PatchPod(pod, ops));
          if (hook.mark_not_ready) {
            RETURN_IF_ERROR(SetKruisePodReady(patched, false, kStatePreparingUpdate,
                                              "the CloneSet's inPlaceUpdate hook holds this pod",
                                              ctx.now)
                                .status());
          }
          modified = true;
          continue;
        }
        RETURN_IF_ERROR(UpdatePodInPlace(ctx, pod, *update));
        modified = true;
        continue;
      }
      if (ctx.spec.update_type == kInPlaceOnly) {
        writer_.Event(ctx.cs, true, "FailedUpdatePodInPlace",
                      absl::StrCat("pod ", kube::Name(pod), " cannot be updated in place (",
                                   why_not, ") and the strategy is InPlaceOnly"));
        return absl::FailedPreconditionError(absl::StrCat(
            "pod ", kube::Name(pod), ": InPlaceOnly but cannot update in place: ", why_not));
      }
    }
    // Recreate: mark it; the scale step deletes it and creates a replacement.
    Json ops = Json::array({TestRv(pod)});
    AppendMapOps(pod, "/metadata/labels", {{kSpecifiedDeleteLabel, "true"}}, &ops);
    RETURN_IF_ERROR(writer_.PatchPod(pod, ops).status());
    writer_.Event(
        ctx.cs, false, "SuccessfulUpdatePodReCreate",
        absl::StrCat("successfully patch pod ", kube::Name(pod),
                     " specified-delete for update(revision ", ctx.update_revision_name, ")"));
    modified = true;
  }
  if (!held.empty()) {
    ctx.held = true;
    writer_.Event(ctx.cs, true, inplace::kDisruptionDeniedReason, held.Message());
  }
  return modified;
}

absl::Status CloneSetReconciler::WriteStatus(Context& ctx) {
  StatusCounts counts = CountStatus(ctx.spec, ctx.numbers, ctx.views);
  std::string current = ctx.current_revision_name;
  if (counts.updated == counts.replicas && counts.replicas == ctx.spec.replicas) {
    current = ctx.update_revision_name;
  }
  Json status = {{"observedGeneration", kube::Generation(ctx.cs)},
                 {"replicas", counts.replicas},
                 {"readyReplicas", counts.ready},
                 {"availableReplicas", counts.available},
                 {"updatedReplicas", counts.updated},
                 {"updatedReadyReplicas", counts.updated_ready},
                 {"updatedAvailableReplicas", counts.updated_available},
                 {"expectedUpdatedReplicas", counts.expected_updated},
                 {"updateRevision", ctx.update_revision_name},
                 {"currentRevision", current},
                 {"labelSelector", ctx.selector.ToString()}};
  if (ctx.collision_count > 0) status["collisionCount"] = ctx.collision_count;
  if (Json conditions =
          workload::StepConditions(ctx.cs, ctx.now, ctx.scale_result, ctx.update_result);
      !conditions.is_null()) {
    status["conditions"] = std::move(conditions);
  }
  return workload::WriteStatusIfChanged(client_, res::CloneSets(), ctx.cs, status);
}

absl::StatusOr<kube::Result> CloneSetReconciler::Reconcile(const kube::Request& req) {
  Context ctx;
  ctx.key = req.Key();
  ctx.now = opts_.clock->Now();
  auto cached = inf_.clonesets->store().Get(req.ns, req.name);
  if (cached == nullptr) {
    writer_.scale_expectations().Delete(ctx.key);
    return kube::Result{};
  }
  ctx.cs = *cached;
  if (!writer_.scale_expectations().Satisfied(ctx.key)) {
    return kube::Result{opts_.expectation_recheck};  // events bring us back sooner
  }
  auto spec = ParseCloneSetSpec(ctx.cs);
  if (!spec.ok()) return writer_.InvalidSpec(ctx.cs, spec.status());
  ctx.spec = *std::move(spec);
  auto numbers = ScaleNumbers(ctx.spec);
  if (!numbers.ok()) return writer_.InvalidSpec(ctx.cs, numbers.status());
  ctx.numbers = *numbers;
  ASSIGN_OR_RETURN(ctx.selector, writer_.Selector(ctx.cs));

  ASSIGN_OR_RETURN(std::vector<Json> claimed,
                   writer_.ClaimPods(ctx.cs, OwnerRefJson(ctx.cs), ctx.selector, inf_.pods));
  if (kube::IsBeingDeleted(ctx.cs)) return kube::Result{};
  for (Json& p : claimed) {
    if (!writer_.rv_expectations().SatisfiedByCache(p))
      return kube::Result{opts_.expectation_recheck};
    if (IsActive(p)) ctx.pods.push_back(std::move(p));
  }
  ASSIGN_OR_RETURN(auto revision, SyncRevisions(ctx));
  if (!revision.has_value()) return kube::Result{absl::Seconds(1)};  // collision counted
  ctx.current_revision_name = kube::GetString(ctx.cs, {"status", "currentRevision"}).value_or("");
  bool current_known = false;
  for (const Json& r : ctx.revisions) current_known |= kube::Name(r) == ctx.current_revision_name;
  if (!current_known) ctx.current_revision_name = ctx.update_revision_name;

  if (absl::Status st = PreDownloadImages(ctx); !st.ok()) {
    Logger("cloneset")->warn("{}: image pre-download: {}", ctx.key, st.message());
  }
  for (const Json& p : ctx.pods) {
    ctx.views.push_back(ViewPod(p, ctx.spec, ctx.update_revision_name, ctx.now));
  }
  ctx.diffs = CalculateDiffs(ctx.spec, ctx.numbers, ctx.views);

  absl::Status step = absl::OkStatus();
  auto scaled = Scale(ctx);
  ctx.scale_result = scaled.status();
  if (!scaled.ok()) {
    step = scaled.status();
  } else if (!*scaled) {
    auto refreshed = Refresh(ctx);
    if (!refreshed.ok()) {
      step = refreshed.status();
    } else if (!*refreshed) {
      auto updated = Update(ctx);
      if (!updated.ok()) step = updated.status();
    }
    ctx.update_result = step;
  }
  for (auto* result : {&ctx.scale_result, &ctx.update_result}) {
    if (result->has_value() && (kube::IsConflict(**result) || kube::IsNotFound(**result))) {
      result->reset();
    }
  }
  if (absl::Status st = WriteStatus(ctx); !st.ok()) {
    // The CloneSet changed since the cache saw it: plan again on the newer one.
    if (kube::IsConflict(st)) return kube::Result{absl::Seconds(1)};
    return st;
  }
  // Prune history beyond the limit: revisions no pod uses, oldest first.
  std::set<std::string> in_use = {ctx.update_revision_name, ctx.current_revision_name};
  for (const PodView& v : ctx.views) in_use.insert(v.revision);
  int excess = static_cast<int>(ctx.revisions.size()) - ctx.spec.revision_history_limit -
               static_cast<int>(std::min<size_t>(in_use.size(), ctx.revisions.size()));
  for (const Json& r : ctx.revisions) {
    if (excess <= 0) break;
    if (in_use.count(kube::Name(r))) continue;
    absl::Status st = client_->Delete(res::ControllerRevisions(), req.ns, kube::Name(r));
    if (!st.ok() && !kube::IsNotFound(st)) return st;
    --excess;
  }
  if (!step.ok()) {
    if (kube::IsConflict(step) || kube::IsNotFound(step)) return kube::Result{absl::Seconds(1)};
    return step;
  }
  // A grace period or minReadySeconds is waited for by time, not by an event.
  absl::Duration after = absl::ZeroDuration();
  for (size_t i = 0; i < ctx.pods.size(); ++i) {
    if (ctx.views[i].in_place_grace) after = absl::Seconds(1);
    if (ctx.spec.min_ready_seconds > 0 && ctx.views[i].update_ready &&
        !ctx.views[i].ready_long_enough) {
      absl::Duration left =
          ctx.views[i].ready_since + absl::Seconds(ctx.spec.min_ready_seconds) - ctx.now;
      if (after == absl::ZeroDuration() || left < after) after = std::max(left, absl::Seconds(1));
    }
  }
  // A budget frees when a pod becomes available again: usually one of ours, whose event comes
  // first; the requeue covers a budget shared with other workloads.
  if (ctx.held && (after == absl::ZeroDuration() || after > inplace::kDisruptionRetry)) {
    after = inplace::kDisruptionRetry;
  }
  return kube::Result{after};
}

// ---- Controller group -------------------------------------------------------------------------

std::vector<kube::InformerOptions> CloneSetInformerOptions() {
  std::vector<kube::InformerOptions> out(5);
  out[0].resource = res::CloneSets();
  out[0].indexers[kube::kNamespaceIndex] = kube::NamespaceIndexFunc();
  out[1] = SharedInformers::PodOptions();
  out[2] = SharedInformers::ControllerRevisionOptions();
  out[3].resource = res::PersistentVolumeClaims();
  out[3].label_selector = kInstanceIdLabel;
  out[3].indexers[kube::kControllerUidIndex] = kube::ControllerUidIndexFunc();
  out[4] = SharedInformers::NodeOptions();
  return out;
}

namespace {

class CloneSetGroup : public ControllerGroup {
 public:
  std::string Name() const override { return "cloneset"; }

  absl::Status Register(const ControllerContext& ctx) override {
    RETURN_IF_ERROR(CheckControllerContext(ctx, "cloneset"));
    if (!kube::Served(ctx.client, res::CloneSets())) {
      Logger("cloneset")->warn("CloneSet CRD is not served: CloneSet controller off");
      return absl::OkStatus();
    }
    auto make = [&](kube::InformerOptions o) { return informers_.Make(ctx, std::move(o)); };
    std::vector<kube::InformerOptions> all = CloneSetInformerOptions();
    CloneSetInformers inf;
    inf.clonesets = make(all[0]);
    inf.pods = ctx.shared != nullptr ? ctx.shared->Pods() : make(all[1]);
    inf.revisions = ctx.shared != nullptr ? ctx.shared->ControllerRevisions() : make(all[2]);
    inf.pvcs = make(all[3]);
    inf.nodes = ctx.shared != nullptr ? ctx.shared->Nodes() : make(all[4]);
    if (ctx.feature_enabled(inplace::kPreDownloadGate)) {
      inf.image_pull_jobs = inplace::PreDownloadJobInformer(ctx, "cloneset", make);
    }

    CloneSetReconcilerOptions ro;
    ro.clock = ctx.clock;
    ro.pre_download_images = inf.image_pull_jobs != nullptr;
    ro.disruption_gate = ctx.disruption_gate;
    reconciler_ = std::make_unique<CloneSetReconciler>(ctx.client, inf, ctx.recorder, ro);
    CloneSetReconciler* r = reconciler_.get();
    r->ObserveThrough(inf.pods);
    r->ObserveThrough(inf.pvcs);
    kube::ControllerOptions co;
    co.clock = ctx.clock;
    co.workers = ctx.workers("cloneset", 3);
    controller_ = std::make_unique<kube::Controller>("cloneset", r, co);
    workload::WatchWorkload(controller_.get(), {"CloneSet", inf.clonesets, inf.pods, inf.revisions,
                                                inf.image_pull_jobs});
    controller_->Watch(inf.pvcs, kube::EnqueueOwner("CloneSet", true, "apps.kruise.io"));
    ctx.manager->Add(controller_.get());
    return absl::OkStatus();
  }

 private:
  OwnedInformers informers_;
  std::unique_ptr<CloneSetReconciler> reconciler_;
  std::unique_ptr<kube::Controller> controller_;
};

}  // namespace

std::unique_ptr<ControllerGroup> NewCloneSetControllerGroup() {
  return std::make_unique<CloneSetGroup>();
}

}  // namespace kruise::manager::cloneset
