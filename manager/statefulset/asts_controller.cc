#include "manager/statefulset/asts_controller.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kube/errors.h"
#include "kube/kruise_api.h"
#include "manager/inplace/inplace_apply.h"
#include "manager/inplace/inplace_update.h"
#include "manager/inplace/predownload.h"
#include "manager/revision/revision.h"
#include "manager/workload/pod_claim.h"
#include "manager/workload/update_revision.h"
#include "manager/workload/workload_status.h"

namespace kruise::manager::statefulset {

namespace res = kube::resources;

namespace {

bool IsAstsOwner(const kube::OwnerReference& owner) {
  return owner.kind == "StatefulSet" && owner.api_version.rfind("apps.kruise.io/", 0) == 0;
}

std::string AstsOwnerKey(const Json& obj) {
  auto owner = kube::ControllerOf(obj);
  if (!owner.has_value() || !IsAstsOwner(*owner)) return "";
  return absl::StrCat(kube::Namespace(obj), "/", owner->name);
}

Json AstsOwnerRef(const Json& set, bool controller) {
  Json ref = {{"apiVersion", set.value("apiVersion", "apps.kruise.io/v1beta1")},
              {"kind", "StatefulSet"},
              {"name", kube::Name(set)},
              {"uid", kube::Uid(set)},
              {"blockOwnerDeletion", true}};
  if (controller) ref["controller"] = true;
  return ref;
}

kube::Resource StorageClasses() {
  return {"storage.k8s.io", "v1", "storageclasses", "StorageClass", false};
}

Json PodOwnerRef(const Json& pod) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"name", kube::Name(pod)},
          {"uid", kube::Uid(pod)},
          {"blockOwnerDeletion", true}};
}

std::string ClaimName(const std::string& vct, const std::string& set, int ordinal) {
  return absl::StrCat(vct, "-", set, "-", ordinal);
}

// spec.persistentVolumeClaimRetentionPolicy.<field> == "Delete".
bool RetentionDeletes(const Json& set, const char* field) {
  return kube::GetString(set, {"spec", "persistentVolumeClaimRetentionPolicy", field}) == "Delete";
}

// Ops (test first) making `claim`'s ownerReferences those of `claim` without any reference to
// `drop_uid`, plus `add` (when not null and not there yet); empty when nothing changes.
Json ClaimOwnerOps(const Json& claim, const std::string& drop_uid, const Json& add) {
  Json refs = Json::array();
  bool changed = false;
  bool have_add = add.is_null();
  if (const Json* old = kube::FindPath(claim, {"metadata", "ownerReferences"});
      old != nullptr && old->is_array()) {
    for (const Json& r : *old) {
      const std::string uid = r.is_object() ? r.value("uid", "") : "";
      if (!drop_uid.empty() && uid == drop_uid) {
        changed = true;
        continue;
      }
      if (!add.is_null() && uid == add.value("uid", "")) have_add = true;
      refs.push_back(r);
    }
  }
  if (!have_add) {
    refs.push_back(add);
    changed = true;
  }
  if (!changed) return Json::array();
  return Json::array({inplace::TestResourceVersionOp(claim),
                      {{"op", "add"}, {"path", "/metadata/ownerReferences"}, {"value", refs}}});
}

bool OwnedBy(const Json& obj, const std::string& uid) {
  for (const kube::OwnerReference& r : kube::OwnerReferences(obj)) {
    if (r.uid == uid) return true;
  }
  return false;
}

}  // namespace

struct AstsReconciler::Context {
  Json set;
  std::string key;
  std::string ns;
  std::string name;
  AstsSpec spec;
  workload::Lifecycle lifecycle;
  kube::LabelSelector selector = kube::LabelSelector::Nothing();
  std::vector<Json> pods;  // claimed pods, same order as views
  std::vector<AstsPod> views;
  std::map<int, size_t> by_ordinal;  // ordinal -> index into pods (a later pod wins)
  std::vector<Json> revisions;       // oldest first
  Json update_revision;
  std::string update_revision_name;
  std::string current_revision_name;
  int64_t collision_count = 0;
  absl::Time now;
  absl::Duration recheck = absl::ZeroDuration();
  std::optional<absl::Status> scale_result;
  std::optional<absl::Status> update_result;
  inplace::HeldPods held;  // in-place updates the disruption gate denied this round

  void Recheck(absl::Duration d) {
    if (d > absl::ZeroDuration() && (recheck == absl::ZeroDuration() || d < recheck)) recheck = d;
  }
  const Json* RevisionNamed(const std::string& n) const {
    for (const Json& r : revisions) {
      if (kube::Name(r) == n) return &r;
    }
    return nullptr;
  }
};

AstsReconciler::AstsReconciler(kube::KubeClient* client, AstsInformers informers,
                               kube::EventRecorder* recorder, AstsReconcilerOptions opts)
    : client_(client), inf_(informers), opts_(opts), writer_(client, recorder, opts.clock) {}

void AstsReconciler::ObserveThrough(kube::Informer* pods) {
  writer_.ObserveThrough(pods, AstsOwnerKey);
}

absl::StatusOr<bool> AstsReconciler::SyncRevisions(Context& ctx) {
  ASSIGN_OR_RETURN(
      workload::UpdateRevision sync,
      workload::SyncUpdateRevision(client_, inf_.revisions, ctx.set, AdvancedStatefulSets()));
  ctx.revisions = std::move(sync.revisions);
  ctx.collision_count = sync.collision_count;
  if (!sync.revision.has_value()) return false;  // a collision was counted: come back
  ctx.update_revision = *std::move(sync.revision);
  ctx.update_revision_name = sync.name;
  return true;
}

absl::Status AstsReconciler::PreDownloadImages(Context& ctx) {
  if (!opts_.pre_download_images || inf_.image_pull_jobs == nullptr) return absl::OkStatus();
  if (ctx.current_revision_name == ctx.update_revision_name) {
    // Every pod is at one revision: the jobs of earlier updates have nothing left to warm.
    ASSIGN_OR_RETURN(auto jobs, inf_.image_pull_jobs->store().ByIndex(kube::kControllerUidIndex,
                                                                      kube::Uid(ctx.set)));
    return inplace::DeletePreDownloadJobs(client_, jobs);
  }
  // Done once per revision; held back until enough pods of the new revision are ready.
  if (inplace::PreDownloadDone(ctx.update_revision) ||
      inplace::PreDownloadHeldBack(ctx.set, ctx.update_revision_name, ctx.spec.replicas)) {
    return absl::OkStatus();
  }
  const Json* current = ctx.RevisionNamed(ctx.current_revision_name);
  if (current == nullptr) return absl::OkStatus();
  inplace::PreDownloadRequest req = inplace::PreDownloadRequestFor(ctx.set, ctx.update_revision);
  req.update_revision_hash =
      kube::Label(ctx.update_revision, revision::kControllerRevisionHashLabel).value_or("");
  req.current_template = revision::RevisionTemplate(*current);
  // As OpenKruise's ASTS: nothing to warm ahead of an OnDelete or ReCreate update, nor of one
  // that cannot be done in place (the new pods pull their images as they start anyway).
  std::string why_not;
  req.recreate_only = ctx.spec.on_delete || ctx.spec.pod_update_policy == "ReCreate" ||
                      !inplace::CalculateInPlaceUpdate(req.current_template, req.update_template,
                                                       ctx.update_revision_name, &why_not)
                           .has_value();
  req.replicas = ctx.spec.replicas;
  req.partition = ctx.spec.partition;
  // OpenKruise's reading here: maxUnavailable rounded down, without the floor of 1.
  auto scaled =
      kube::GetScaledValueFromIntOrPercent(ctx.spec.max_unavailable, ctx.spec.replicas, false);
  req.max_unavailable = scaled.ok() ? *scaled : 1;
  return inplace::CarryOutPreDownload(
      client_, ctx.set, ctx.update_revision_name, inplace::PlanImagePreDownload(req),
      [&](bool warning, const std::string& reason, const std::string& message) {
        writer_.Event(ctx.set, warning, reason, message);
      });
}

absl::StatusOr<bool> AstsReconciler::Refresh(Context& ctx) {
  bool modified = false;
  const std::vector<int> owned_list =
      OwnedOrdinals(ctx.spec.replicas, ctx.spec.ordinals_start, ctx.spec.reserve_ordinals);
  const std::set<int> owned(owned_list.begin(), owned_list.end());
  auto revision_template = [&ctx](const std::string& n) -> std::optional<Json> {
    const Json* r = ctx.RevisionNamed(n);
    if (r == nullptr) return std::nullopt;
    return revision::RevisionTemplate(*r);
  };
  const int grace =
      static_cast<int>(kube::GetInt(ctx.set, {"spec", "updateStrategy", "rollingUpdate",
                                              "inPlaceUpdateStrategy", "gracePeriodSeconds"})
                           .value_or(0));
  for (size_t i = 0; i < ctx.pods.size(); ++i) {
    const Json& pod = ctx.pods[i];
    if (kube::IsBeingDeleted(pod)) continue;
    // A new pod's gates start True: InPlaceUpdateReady (the template's) and KruisePodReady (the
    // pod webhook adds it to pods of Kruise workloads).
    Json initial = inplace::InitialReadinessGateOps(
        pod, {inplace::kInPlaceUpdateReadyCondition, kube::kKruisePodReadyCondition}, ctx.now);
    if (!initial.empty()) {
      RETURN_IF_ERROR(writer_.PatchPod(pod, initial, "status").status());
      modified = true;
      continue;
    }
    inplace::InPlaceUpdateCheck check =
        inplace::CheckInPlaceUpdate(pod, grace, ctx.now, revision_template);
    using Step = inplace::InPlaceUpdateCheck::Step;
    if (check.step == Step::kInGrace) {
      ctx.Recheck(check.grace_left);
      continue;
    }
    if (check.step == Step::kGraceOver) {
      RETURN_IF_ERROR(writer_.PatchPod(pod, check.pod_ops).status());
      modified = true;
      continue;
    }
    // markPodNotReady: ready again once Normal or Updated (a PreparingDelete stays not ready).
    const std::string& state = ctx.views[i].lifecycle_state;
    if (Json ops = workload::RestoreKruisePodReadyOps(pod, state, ctx.now); !ops.empty()) {
      ops.insert(ops.begin(), inplace::TestResourceVersionOp(pod));
      RETURN_IF_ERROR(writer_.PatchPod(pod, ops, "status").status());
      modified = true;
      continue;
    }
    // A PreparingDelete pod nobody wants deleted any more (a scale-down called off: an owned
    // ordinal, at the update revision so no recreate comes, not named for deletion, not
    // finished): back to Normal; with preDelete markPodNotReady its PreparingDelete is final
    // (as CloneSet), so its delete goes on once the hook is gone and the slot is filled again.
    const AstsPod& view = ctx.views[i];
    if (state == workload::kStatePreparingDelete && !view.specified_delete &&
        view.revision == ctx.update_revision_name && view.phase != "Failed" &&
        view.phase != "Succeeded" && owned.count(view.ordinal) > 0) {
      if (ctx.lifecycle.pre_delete.has_value() && ctx.lifecycle.pre_delete->mark_pod_not_ready) {
        if (workload::IsPodHooked(ctx.lifecycle.pre_delete, workload::ReadHookedPod(pod))) continue;
        RETURN_IF_ERROR(DeletePod(ctx, pod, /*condemned=*/false,
                                  "its PreparingDelete is final (preDelete markPodNotReady)"));
      } else {
        Json ops = workload::LifecycleStateOps(pod, workload::kStateNormal, ctx.now);
        ops.insert(ops.begin(), inplace::TestResourceVersionOp(pod));
        RETURN_IF_ERROR(writer_.PatchPod(pod, ops).status());
        writer_.Event(ctx.set, false, "PreparingDeleteCancelled",
                      absl::StrCat("pod ", kube::Name(pod), " is wanted again: back to Normal"));
      }
      modified = true;
      continue;
    }
    // The lifecycle's own moves: PreparingNormal -> Normal, an in-place update done (or rolled
    // back while PreparingUpdate) -> Updated or Normal, Updated -> Normal.
    const bool completed = state == workload::kStateUpdating && check.step == Step::kCompleted;
    std::optional<std::string> next =
        workload::NextLifecycleState(ctx.lifecycle, state, workload::ReadHookedPod(pod),
                                     ctx.views[i].revision == ctx.update_revision_name, completed);
    if (!next.has_value()) continue;
    Json patched = pod;
    if (completed && !check.status_ops.empty()) {
      ASSIGN_OR_RETURN(patched, writer_.PatchPod(pod, check.status_ops, "status"));
    }
    Json ops = workload::LifecycleStateOps(patched, *next, ctx.now);
    ops.insert(ops.begin(), inplace::TestResourceVersionOp(patched));
    RETURN_IF_ERROR(writer_.PatchPod(patched, ops).status());
    if (completed) {
      writer_.Event(ctx.set, false, "InPlaceUpdateCompleted",
                    absl::StrCat("pod ", kube::Name(pod), " runs revision ", check.revision));
    }
    modified = true;
  }
  return modified;
}

absl::Status AstsReconciler::SyncClaimOwners(Context& ctx) {
  const Json* vcts = kube::FindPath(ctx.set, {"spec", "volumeClaimTemplates"});
  if (vcts == nullptr || !vcts->is_array() || vcts->empty()) return absl::OkStatus();
  const bool when_deleted = RetentionDeletes(ctx.set, "whenDeleted");
  const std::vector<int> owned =
      OwnedOrdinals(ctx.spec.replicas, ctx.spec.ordinals_start, ctx.spec.reserve_ordinals);
  for (int ord : owned) {
    for (const Json& vct : *vcts) {
      const std::string claim_name = ClaimName(kube::Name(vct), ctx.name, ord);
      auto claim = inf_.pvcs->store().Get(ctx.ns, claim_name);
      if (claim == nullptr || kube::IsBeingDeleted(*claim)) continue;
      const bool has = OwnedBy(*claim, kube::Uid(ctx.set));
      if (has == when_deleted) continue;
      Json ops = when_deleted ? ClaimOwnerOps(*claim, "", AstsOwnerRef(ctx.set, false))
                              : ClaimOwnerOps(*claim, kube::Uid(ctx.set), Json());
      if (ops.empty()) continue;
      auto st = client_->Patch(res::PersistentVolumeClaims(), ctx.ns, claim_name,
                               kube::PatchType::kJson, ops);
      if (!st.ok() && !kube::IsNotFound(st.status()) &&
          st.status().code() != absl::StatusCode::kInvalidArgument) {
        return st.status();
      }
    }
  }
  return absl::OkStatus();
}

absl::Status AstsReconciler::CreatePod(Context& ctx, const Creation& c) {
  const bool current = c.current_revision && !ctx.current_revision_name.empty() &&
                       ctx.current_revision_name != ctx.update_revision_name &&
                       ctx.RevisionNamed(ctx.current_revision_name) != nullptr;
  const Json& rev = current ? *ctx.RevisionNamed(ctx.current_revision_name) : ctx.update_revision;
  Json tmpl = revision::RevisionTemplate(rev);
  if (!tmpl.is_object()) return absl::InternalError("revision without a template");
  const std::string pod_name = absl::StrCat(ctx.name, "-", c.ordinal);
  Json meta =
      tmpl.contains("metadata") && tmpl["metadata"].is_object() ? tmpl["metadata"] : Json::object();
  meta.erase("creationTimestamp");
  meta["name"] = pod_name;
  meta["namespace"] = ctx.ns;
  if (!meta.contains("labels") || !meta["labels"].is_object()) meta["labels"] = Json::object();
  meta["labels"][revision::kControllerRevisionHashLabel] = kube::Name(rev);
  meta["labels"][kPodNameLabel] = pod_name;
  meta["labels"][kPodIndexLabel] = std::to_string(c.ordinal);
  // PreparingNormal while a preNormal hook is not all on the template's pod, else Normal.
  meta["labels"][workload::kLifecycleStateLabel] =
      workload::InitialLifecycleState(ctx.lifecycle, workload::ReadHookedPod({{"metadata", meta}}));
  meta["ownerReferences"] = Json::array({AstsOwnerRef(ctx.set, true)});
  Json spec = tmpl.contains("spec") && tmpl["spec"].is_object() ? tmpl["spec"] : Json::object();
  spec["hostname"] = pod_name;
  if (auto svc = kube::GetString(ctx.set, {"spec", "serviceName"}); svc && !svc->empty()) {
    spec["subdomain"] = *svc;
  }
  // PVCs first (an existing one is the pod's, as with a core StatefulSet), then the pod.
  const Json* vcts = kube::FindPath(ctx.set, {"spec", "volumeClaimTemplates"});
  if (vcts != nullptr && vcts->is_array() && !vcts->empty()) {
    if (!spec.contains("volumes") || !spec["volumes"].is_array()) spec["volumes"] = Json::array();
    Json claim_labels = Json::object();
    if (const Json* ml = kube::FindPath(ctx.set, {"spec", "selector", "matchLabels"});
        ml != nullptr && ml->is_object()) {
      claim_labels = *ml;
    }
    for (const Json& vct : *vcts) {
      const std::string vct_name = kube::Name(vct);
      if (vct_name.empty()) continue;
      const std::string claim = ClaimName(vct_name, ctx.name, c.ordinal);
      Json volume = {{"name", vct_name}, {"persistentVolumeClaim", {{"claimName", claim}}}};
      bool replaced = false;
      for (Json& v : spec["volumes"]) {
        if (v.is_object() && v.value("name", "") == vct_name) {
          v = volume;
          replaced = true;
        }
      }
      if (!replaced) spec["volumes"].push_back(volume);
      if (auto cached = inf_.pvcs->store().Get(ctx.ns, claim); cached != nullptr) {
        if (kube::IsBeingDeleted(*cached)) {
          return absl::UnavailableError(
              absl::StrCat("pvc ", claim, " is being deleted; pod ", pod_name, " waits for it"));
        }
        continue;
      }
      Json pvc = {{"apiVersion", "v1"}, {"kind", "PersistentVolumeClaim"}};
      Json pmeta = vct.contains("metadata") && vct["metadata"].is_object() ? vct["metadata"]
                                                                           : Json::object();
      pmeta.erase("creationTimestamp");
      pmeta["name"] = claim;
      pmeta["namespace"] = ctx.ns;
      if (!pmeta.contains("labels") || !pmeta["labels"].is_object())
        pmeta["labels"] = Json::object();
      for (const auto& [k, v] : claim_labels.items()) pmeta["labels"][k] = v;
      if (RetentionDeletes(ctx.set, "whenDeleted")) {
        pmeta["ownerReferences"] = Json::array({AstsOwnerRef(ctx.set, false)});
      }
      pvc["metadata"] = std::move(pmeta);
      pvc["spec"] = vct.contains("spec") ? vct["spec"] : Json::object();
      auto made = client_->Create(res::PersistentVolumeClaims(), ctx.ns, pvc);
      if (!made.ok() && !kube::IsAlreadyExists(made.status())) {
        writer_.Event(
            ctx.set, true, "FailedCreate",
            absl::StrCat("create Claim ", claim, " for Pod ", pod_name, " in StatefulSet ",
                         ctx.name, " failed error: ", made.status().message()));
        return made.status();
      }
      if (made.ok()) {
        writer_.Event(ctx.set, false, "SuccessfulCreate",
                      absl::StrCat("create Claim ", claim, " Pod ", pod_name, " in StatefulSet ",
                                   ctx.name, " success"));
      }
    }
  }
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", std::move(meta)},
              {"spec", std::move(spec)}};
  writer_.scale_expectations().Expect(ctx.key, kube::ScaleExpectations::Action::kCreate, pod_name);
  auto made = client_->Create(res::Pods(), ctx.ns, pod);
  if (made.ok()) {
    writer_.Event(
        ctx.set, false, "SuccessfulCreate",
        absl::StrCat("create Pod ", pod_name, " in StatefulSet ", ctx.name, " successful"));
    return absl::OkStatus();
  }
  if (kube::IsAlreadyExists(made.status())) {
    // Deterministic names: someone made this pod already. Ours (the cache is behind): the
    // expectation waits for the cache. Anyone else's: report it, never create again blindly.
    auto existing = client_->Get(res::Pods(), ctx.ns, pod_name);
    if (existing.ok()) {
      auto owner = kube::ControllerOf(*existing);
      if (owner.has_value() && owner->uid == kube::Uid(ctx.set)) return absl::OkStatus();
    }
    writer_.scale_expectations().Observe(ctx.key, kube::ScaleExpectations::Action::kCreate,
                                         pod_name);
    if (existing.ok()) {
      writer_.Event(ctx.set, true, "FailedCreate",
                    absl::StrCat("create Pod ", pod_name, " in StatefulSet ", ctx.name,
                                 " failed: a pod of that name exists and is not this set's"));
      return absl::FailedPreconditionError(
          absl::StrCat("pod ", pod_name, " exists and is not owned by StatefulSet ", ctx.name));
    }
    return absl::AbortedError(absl::StrCat("pod ", pod_name, " came and went; retrying"));
  }
  writer_.scale_expectations().Observe(ctx.key, kube::ScaleExpectations::Action::kCreate, pod_name);
  writer_.Event(ctx.set, true, "FailedCreate",
                absl::StrCat("create Pod ", pod_name, " in StatefulSet ", ctx.name,
                             " failed error: ", made.status().message()));
  return made.status();
}

absl::Status AstsReconciler::SetLifecycle(Context& ctx, const Json& pod, const std::string& state,
                                          bool mark_not_ready,
                                          const workload::LifecycleHook* put_back,
                                          const std::string& why) {
  Json patched = pod;
  if (Json ops = workload::LifecycleStateOps(pod, state, ctx.now, put_back);
      !ops.empty() && kube::Label(pod, workload::kLifecycleStateLabel) != state) {
    ops.insert(ops.begin(), inplace::TestResourceVersionOp(pod));
    ASSIGN_OR_RETURN(patched, writer_.PatchPod(pod, ops));
    writer_.Event(ctx.set, false, state, absl::StrCat("pod ", kube::Name(pod), " ", why));
  }
  if (mark_not_ready) {
    Json ops = workload::KruisePodReadyOps(patched, false, state, why, ctx.now);
    if (!ops.empty()) {
      ops.insert(ops.begin(), inplace::TestResourceVersionOp(patched));
      RETURN_IF_ERROR(writer_.PatchPod(patched, ops, "status").status());
    }
  }
  return absl::OkStatus();
}

absl::Status AstsReconciler::DeletePod(Context& ctx, const Json& pod, bool condemned,
                                       const std::string& why) {
  // preDelete: a pod the hook holds moves to PreparingDelete and waits there; it is deleted by a
  // later round once the hook is gone (the plan asks for it again every round).
  const std::string state = kube::Label(pod, workload::kLifecycleStateLabel).value_or("");
  workload::DeleteDecision hold =
      workload::DecideDelete(ctx.lifecycle, state, workload::ReadHookedPod(pod));
  if (hold.action != workload::DeleteDecision::Action::kDelete) {
    return SetLifecycle(ctx, pod, workload::kStatePreparingDelete, hold.mark_not_ready, nullptr,
                        absl::StrCat("waits for the preDelete hook before its delete (", why, ")"));
  }
  kube::DeleteOptions del;
  const Json* vcts = kube::FindPath(ctx.set, {"spec", "volumeClaimTemplates"});
  if (condemned && RetentionDeletes(ctx.set, "whenScaled") && vcts != nullptr && vcts->is_array()) {
    // The claims go with the pod: owned by it (and no longer by the set) before it is deleted,
    // so the garbage collector removes them even if we stop right after.
    const int ord = OrdinalOf(ctx.name, kube::Name(pod));
    for (const Json& vct : *vcts) {
      const std::string claim_name = ClaimName(kube::Name(vct), ctx.name, ord);
      auto claim = inf_.pvcs->store().Get(ctx.ns, claim_name);
      if (claim == nullptr || kube::IsBeingDeleted(*claim)) continue;
      Json ops = ClaimOwnerOps(*claim, kube::Uid(ctx.set), PodOwnerRef(pod));
      if (ops.empty()) continue;
      auto st = client_->Patch(res::PersistentVolumeClaims(), ctx.ns, claim_name,
                               kube::PatchType::kJson, ops);
      if (!st.ok() && !kube::IsNotFound(st.status())) {
        if (st.status().code() == absl::StatusCode::kInvalidArgument) {
          return absl::AbortedError(absl::StrCat("pvc ", claim_name, " changed; retrying"));
        }
        return st.status();
      }
    }
    del.propagation_policy = "Background";
  }
  absl::Status st = writer_.Delete(ctx.key, res::Pods(), pod, del);
  if (!st.ok()) {
    // Gone already, or another pod of that name now (uid precondition): nothing of ours to do.
    if (kube::IsNotFound(st) || kube::IsConflict(st)) return absl::OkStatus();
    writer_.Event(ctx.set, true, "FailedDelete",
                  absl::StrCat("delete Pod ", kube::Name(pod), " in StatefulSet ", ctx.name,
                               " failed error: ", st.message()));
    return st;
  }
  writer_.Event(ctx.set, false, "SuccessfulDelete",
                absl::StrCat("delete Pod ", kube::Name(pod), " in StatefulSet ", ctx.name,
                             " successful (", why, ")"));
  return absl::OkStatus();
}

absl::Status AstsReconciler::UpdatePod(Context& ctx, const Json& pod) {
  const std::string& policy = ctx.spec.pod_update_policy;
  const std::string revision_of_pod =
      kube::Label(pod, revision::kControllerRevisionHashLabel).value_or("");
  const std::string state = kube::Label(pod, workload::kLifecycleStateLabel).value_or("");
  if (state == workload::kStatePreparingDelete) {
    // Its delete was asked already (a recreate or a specified delete): carry on with that.
    return DeletePod(ctx, pod, /*condemned=*/false,
                     absl::StrCat("update to revision ", ctx.update_revision_name));
  }
  if (policy == "InPlaceIfPossible" || policy == "InPlaceOnly") {
    std::string why_not = "the pod's revision is no longer in the history";
    std::optional<inplace::InPlaceUpdateSpec> update;
    if (const Json* old = ctx.RevisionNamed(revision_of_pod); old != nullptr) {
      update = inplace::CalculateInPlaceUpdate(revision::RevisionTemplate(*old),
                                               revision::RevisionTemplate(ctx.update_revision),
                                               ctx.update_revision_name, &why_not);
    }
    if (update.has_value()) {
      // inPlaceUpdate hook: a held pod goes to PreparingUpdate and waits for the hook to go.
      using Action = workload::InPlaceUpdateDecision::Action;
      workload::InPlaceUpdateDecision hook =
          workload::DecideInPlaceUpdate(ctx.lifecycle, state, workload::ReadHookedPod(pod));
      if (hook.action == Action::kWait) return absl::OkStatus();
      if (hook.action == Action::kRefuse) {
        return absl::FailedPreconditionError(absl::StrCat(
            "pod ", kube::Name(pod), " may not be updated in place in lifecycle state ", state));
      }
      if (hook.action == Action::kPrepare) {
        return SetLifecycle(ctx, pod, workload::kStatePreparingUpdate, hook.mark_not_ready,
                            hook.put_hook_back ? &*ctx.lifecycle.in_place_update : nullptr,
                            "waits for the inPlaceUpdate hook before its in-place update");
      }
      if (opts_.disruption_gate != nullptr) {
        ASSIGN_OR_RETURN(inplace::GateDecision gate,
                         opts_.disruption_gate->Allow(pod, inplace::DisruptionOperation::kUpdate,
                                                      /*dry_run=*/false));
        if (!gate.allowed) {
          ctx.held.Add(kube::Name(pod), gate);
          return absl::OkStatus();
        }
      }
      inplace::InPlaceUpdatePatchOptions po;
      po.grace_period_seconds =
          static_cast<int>(kube::GetInt(ctx.set, {"spec", "updateStrategy", "rollingUpdate",
                                                  "inPlaceUpdateStrategy", "gracePeriodSeconds"})
                               .value_or(0));
      po.labels = {{workload::kLifecycleStateLabel, workload::kStateUpdating}};
      po.annotations = {{workload::kLifecycleTimestampAnnotation, kube::FormatRfc3339(ctx.now)}};
      return writer_.UpdateInPlace(ctx.set, pod, *update, po, ctx.now, ctx.update_revision_name);
    }
    if (policy == "InPlaceOnly") {
      writer_.Event(ctx.set, true, "FailedUpdatePodInPlace",
                    absl::StrCat("pod ", kube::Name(pod), " cannot be updated in place (", why_not,
                                 ") and the podUpdatePolicy is InPlaceOnly"));
      return absl::FailedPreconditionError(absl::StrCat(
          "pod ", kube::Name(pod), ": InPlaceOnly but cannot update in place: ", why_not));
    }
  }
  return DeletePod(ctx, pod, /*condemned=*/false,
                   absl::StrCat("update to revision ", ctx.update_revision_name));
}

absl::StatusOr<bool> AstsReconciler::ResizeClaims(Context& ctx, const Json& pod) {
  const Json* vcts = kube::FindPath(ctx.set, {"spec", "volumeClaimTemplates"});
  if (vcts == nullptr || !vcts->is_array()) return true;
  const int ord = OrdinalOf(ctx.name, kube::Name(pod));
  bool all_done = true;
  for (const Json& vct : *vcts) {
    const std::string claim_name = ClaimName(kube::Name(vct), ctx.name, ord);
    auto claim = inf_.pvcs->store().Get(ctx.ns, claim_name);
    if (claim == nullptr || kube::IsBeingDeleted(*claim)) continue;  // made again with the pod
    const ClaimCheck check = CompareClaim(*claim, vct);
    if (check.other_diff) {
      const std::string msg =
          absl::StrCat("pvc ", claim_name, " differs from volumeClaimTemplate ", kube::Name(vct),
                       " in more than its size; it is never changed or deleted by the controller: "
                       "delete it (with its pod) to have it made again from the template");
      writer_.Event(ctx.set, true, "FailedUpdatePVC", msg);
      return absl::FailedPreconditionError(msg);
    }
    if (check.needs_expand) {
      if (auto sc = kube::GetString(*claim, {"spec", "storageClassName"}); sc && !sc->empty()) {
        auto klass = client_->Get(StorageClasses(), "", *sc);
        if (!klass.ok()) {
          return Annotate(klass.status(),
                          absl::StrCat("storage class ", *sc, " of pvc ", claim_name));
        }
        if (!kube::GetBool(*klass, {"allowVolumeExpansion"}).value_or(false)) {
          const std::string msg = absl::StrCat("storage class ", *sc, " of pvc ", claim_name,
                                               " does not allow volume expansion");
          writer_.Event(ctx.set, true, "FailedUpdatePVC", msg);
          return absl::FailedPreconditionError(msg);
        }
      }
      const Json* size = kube::FindPath(vct, {"spec", "resources", "requests", "storage"});
      Json ops = Json::array(
          {inplace::TestResourceVersionOp(*claim),
           {{"op", "add"}, {"path", "/spec/resources/requests/storage"}, {"value", *size}}});
      auto st = client_->Patch(res::PersistentVolumeClaims(), ctx.ns, claim_name,
                               kube::PatchType::kJson, ops);
      if (!st.ok()) {
        if (st.status().code() == absl::StatusCode::kInvalidArgument) {
          return absl::AbortedError(absl::StrCat("pvc ", claim_name, " changed; retrying"));
        }
        writer_.Event(
            ctx.set, true, "FailedResize",
            absl::StrCat("resize Claim ", claim_name, " for Pod ", kube::Name(pod),
                         " in StatefulSet ", ctx.name, " failed error: ", st.status().message()));
        return st.status();
      }
      writer_.Event(ctx.set, false, "SuccessfulResize",
                    absl::StrCat("resize Claim ", claim_name, " for Pod ", kube::Name(pod),
                                 " in StatefulSet ", ctx.name, " to ", size->dump(), " success"));
      all_done = false;
      continue;
    }
    if (!check.resize_done) all_done = false;
  }
  return all_done;
}

absl::Status AstsReconciler::WriteStatus(Context& ctx) {
  int64_t replicas = 0, ready = 0, available = 0, current = 0, updated = 0, updated_ready = 0,
          updated_available = 0;
  for (const AstsPod& v : ctx.views) {
    if (v.terminating || v.ordinal < 0) continue;
    ++replicas;
    const bool is_ready = v.phase == "Running" && v.ready;
    const bool is_available = IsAvailable(v, ctx.spec.min_ready_seconds, ctx.now);
    ready += is_ready;
    available += is_available;
    if (v.revision == ctx.current_revision_name) ++current;
    if (v.revision == ctx.update_revision_name) {
      ++updated;
      updated_ready += is_ready;
      updated_available += is_available;
    }
  }
  std::string current_rev = ctx.current_revision_name;
  if (updated == replicas && replicas == ctx.spec.replicas) {
    current_rev = ctx.update_revision_name;
    current = updated;
  }
  Json status = {{"observedGeneration", kube::Generation(ctx.set)},
                 {"replicas", replicas},
                 {"readyReplicas", ready},
                 {"availableReplicas", available},
                 {"currentReplicas", current},
                 {"updatedReplicas", updated},
                 {"updatedReadyReplicas", updated_ready},
                 {"updatedAvailableReplicas", updated_available},
                 {"currentRevision", current_rev},
                 {"updateRevision", ctx.update_revision_name},
                 {"collisionCount", ctx.collision_count},
                 {"labelSelector", ctx.selector.ToString()}};
  // status.volumeClaims: per template, the owned pods whose claim is compatible (at least the
  // template's size, same class and access modes) and of those the ones whose volume has it.
  if (const Json* vcts = kube::FindPath(ctx.set, {"spec", "volumeClaimTemplates"});
      vcts != nullptr && vcts->is_array() && !vcts->empty()) {
    const std::vector<int> owned_list =
        OwnedOrdinals(ctx.spec.replicas, ctx.spec.ordinals_start, ctx.spec.reserve_ordinals);
    const std::set<int> owned(owned_list.begin(), owned_list.end());
    Json claims = Json::array();
    for (const Json& vct : *vcts) {
      int64_t compatible = 0, compatible_ready = 0;
      for (const AstsPod& v : ctx.views) {
        if (owned.count(v.ordinal) == 0) continue;
        auto claim =
            inf_.pvcs->store().Get(ctx.ns, ClaimName(kube::Name(vct), ctx.name, v.ordinal));
        if (claim == nullptr || kube::IsBeingDeleted(*claim)) continue;
        ClaimCheck check = CompareClaim(*claim, vct);
        compatible += check.compatible;
        compatible_ready += check.compatible && check.ready;
      }
      claims.push_back({{"volumeClaimName", kube::Name(vct)},
                        {"compatibleReplicas", compatible},
                        {"compatibleReadyReplicas", compatible_ready}});
    }
    status["volumeClaims"] = std::move(claims);
  } else if (kube::FindPath(ctx.set, {"status", "volumeClaims"}) != nullptr) {
    status["volumeClaims"] = nullptr;  // merge patch: removed
  }
  if (Json conditions =
          workload::StepConditions(ctx.set, ctx.now, ctx.scale_result, ctx.update_result);
      !conditions.is_null()) {
    status["conditions"] = std::move(conditions);
  }
  return workload::WriteStatusIfChanged(client_, AdvancedStatefulSets(), ctx.set, status);
}

absl::StatusOr<kube::Result> AstsReconciler::Reconcile(const kube::Request& req) {
  Context ctx;
  ctx.key = req.Key();
  ctx.ns = req.ns;
  ctx.name = req.name;
  ctx.now = opts_.clock->Now();
  auto cached = inf_.statefulsets->store().Get(req.ns, req.name);
  if (cached == nullptr) {
    writer_.scale_expectations().Delete(ctx.key);
    return kube::Result{};
  }
  ctx.set = *cached;
  if (!writer_.scale_expectations().Satisfied(ctx.key)) {
    return kube::Result{opts_.expectation_recheck};  // the pod events bring us back sooner
  }
  auto spec = ParseAstsSpec(ctx.set);
  if (!spec.ok()) return writer_.InvalidSpec(ctx.set, spec.status());
  ctx.spec = *std::move(spec);
  auto lifecycle = workload::ParseLifecycle(ctx.set);
  if (!lifecycle.ok()) return writer_.InvalidSpec(ctx.set, lifecycle.status());
  ctx.lifecycle = *std::move(lifecycle);
  if (auto numbers = ScaleNumbers(ctx.spec); !numbers.ok()) {
    return writer_.InvalidSpec(ctx.set, numbers.status());
  }
  ASSIGN_OR_RETURN(ctx.selector, writer_.Selector(ctx.set));

  ASSIGN_OR_RETURN(
      std::vector<Json> claimed,
      writer_.ClaimPods(ctx.set, AstsOwnerRef(ctx.set, true), ctx.selector, inf_.pods));
  if (kube::IsBeingDeleted(ctx.set)) return kube::Result{};
  for (Json& p : claimed) {
    if (!writer_.rv_expectations().SatisfiedByCache(p))
      return kube::Result{opts_.expectation_recheck};
    auto view = ViewPod(p, ctx.name);
    if (!view.ok()) {
      Logger("statefulset")->warn("{}: {}", ctx.key, view.status().message());
      continue;
    }
    // An in-place update counts as incomplete until Refresh sets the lifecycle back.
    view->update_incomplete = view->lifecycle_state == workload::kStateUpdating;
    if (view->ordinal >= 0) ctx.by_ordinal[view->ordinal] = ctx.pods.size();
    ctx.views.push_back(*std::move(view));
    ctx.pods.push_back(std::move(p));
  }
  ASSIGN_OR_RETURN(bool have_revision, SyncRevisions(ctx));
  if (!have_revision) return kube::Result{absl::Seconds(1)};  // collision counted
  ctx.current_revision_name = kube::GetString(ctx.set, {"status", "currentRevision"}).value_or("");
  if (ctx.RevisionNamed(ctx.current_revision_name) == nullptr) {
    ctx.current_revision_name = ctx.update_revision_name;
  }

  if (absl::Status st = PreDownloadImages(ctx); !st.ok()) {
    Logger("statefulset")->warn("{}: image pre-download: {}", ctx.key, st.message());
  }
  absl::Status step = SyncClaimOwners(ctx);
  bool refreshed = false;
  if (step.ok()) {
    auto r = Refresh(ctx);
    if (!r.ok()) step = r.status();
    refreshed = r.ok() && *r;
  }
  if (step.ok() && !refreshed) {
    auto run_scale = [&]() -> absl::StatusOr<ScalePlan> {
      ASSIGN_OR_RETURN(ScalePlan plan,
                       PlanScale(ctx.spec, ctx.views, ctx.update_revision_name, ctx.now));
      ctx.Recheck(plan.recheck_after);
      for (int ord : plan.remove) {
        const Json& pod = ctx.pods[ctx.by_ordinal.at(ord)];
        const std::vector<int> owned =
            OwnedOrdinals(ctx.spec.replicas, ctx.spec.ordinals_start, ctx.spec.reserve_ordinals);
        const bool condemned = std::find(owned.begin(), owned.end(), ord) == owned.end();
        RETURN_IF_ERROR(
            DeletePod(ctx, pod, condemned, condemned ? "scale down" : "pod failed or succeeded"));
      }
      for (const Creation& c : plan.create) RETURN_IF_ERROR(CreatePod(ctx, c));
      return plan;
    };
    auto scale = run_scale();
    ctx.scale_result = scale.status();
    if (!scale.ok()) {
      step = scale.status();
    } else if (!scale->round_ends) {
      auto run_update = [&]() -> absl::Status {
        ASSIGN_OR_RETURN(UpdatePlan plan, PlanUpdate(ctx.spec, ctx.views, ctx.update_revision_name,
                                                     *scale, ctx.now));
        ctx.Recheck(plan.recheck_after);
        for (int ord : plan.specified_delete) {
          RETURN_IF_ERROR(DeletePod(ctx, ctx.pods[ctx.by_ordinal.at(ord)], false,
                                    "apps.kruise.io/specified-delete"));
        }
        const bool resize =
            opts_.auto_resize_pvc && kube::GetString(ctx.set, {"spec", "volumeClaimUpdateStrategy",
                                                               "type"}) == "OnPodRollingUpdate";
        for (int ord : plan.update) {
          const Json& pod = ctx.pods[ctx.by_ordinal.at(ord)];
          if (resize) {
            // Claims first: expanded to the template's size, and the pod updated only once the
            // volume has it (the pod's event or the claim's brings the set back).
            ASSIGN_OR_RETURN(bool claims_ready, ResizeClaims(ctx, pod));
            if (!claims_ready) continue;
          }
          RETURN_IF_ERROR(UpdatePod(ctx, pod));
          if (!ctx.held.empty()) break;  // the budget holds this one: none after it either
        }
        if (resize) {
          // Pods already at the update revision whose claims are smaller than a template that
          // grew since (a volumeClaimTemplates change makes no new revision): expanded online.
          const std::vector<int> owned =
              OwnedOrdinals(ctx.spec.replicas, ctx.spec.ordinals_start, ctx.spec.reserve_ordinals);
          for (size_t i = 0; i < ctx.pods.size(); ++i) {
            const AstsPod& v = ctx.views[i];
            if (v.terminating || v.revision != ctx.update_revision_name ||
                std::find(owned.begin(), owned.end(), v.ordinal) == owned.end()) {
              continue;
            }
            RETURN_IF_ERROR(ResizeClaims(ctx, ctx.pods[i]).status());
          }
        }
        return absl::OkStatus();
      };
      ctx.update_result = run_update();
      if (!ctx.held.empty()) {
        writer_.Event(ctx.set, true, inplace::kDisruptionDeniedReason, ctx.held.Message());
        ctx.Recheck(inplace::kDisruptionRetry);  // a fallback: our pods' events come first
      }
      step = *ctx.update_result;
    }
  }
  for (auto* result : {&ctx.scale_result, &ctx.update_result}) {
    if (result->has_value() && (kube::IsConflict(**result) || kube::IsNotFound(**result) ||
                                (*result)->code() == absl::StatusCode::kUnavailable)) {
      result->reset();
    }
  }
  if (absl::Status st = WriteStatus(ctx); !st.ok()) {
    if (kube::IsConflict(st)) return kube::Result{absl::Seconds(1)};
    return st;
  }
  // History beyond revisionHistoryLimit: revisions no pod uses, oldest first.
  std::set<std::string> in_use = {ctx.update_revision_name, ctx.current_revision_name};
  std::vector<std::string> names;
  for (const AstsPod& v : ctx.views) in_use.insert(v.revision);
  for (const Json& r : ctx.revisions) names.push_back(kube::Name(r));
  const int limit =
      static_cast<int>(kube::GetInt(ctx.set, {"spec", "revisionHistoryLimit"}).value_or(10));
  for (const std::string& n : revision::RevisionsToPrune(names, limit, in_use)) {
    absl::Status st = client_->Delete(res::ControllerRevisions(), ctx.ns, n);
    if (!st.ok() && !kube::IsNotFound(st)) return st;
  }
  if (!step.ok()) {
    if (kube::IsConflict(step) || kube::IsNotFound(step) ||
        step.code() == absl::StatusCode::kUnavailable) {
      return kube::Result{absl::Seconds(1)};
    }
    return step;
  }
  return kube::Result{ctx.recheck};
}

// ---- Controller group -------------------------------------------------------------------------

std::vector<kube::InformerOptions> AstsInformerOptions() {
  std::vector<kube::InformerOptions> out(4);
  out[0].resource = AdvancedStatefulSets();
  out[0].indexers[kube::kNamespaceIndex] = kube::NamespaceIndexFunc();
  out[1] = SharedInformers::PodOptions();
  out[2] = SharedInformers::ControllerRevisionOptions();
  out[3].resource = res::PersistentVolumeClaims();
  // Looked up by name; what the owner-reference bookkeeping needs, and what CompareClaim reads
  // (status.volumeClaims, volumeClaimUpdateStrategy): class, access modes, requested and
  // provisioned storage, condition types.
  out[3].transform = [meta = kube::KeepOnlyMetadata(
                          {"uid", "labels", "ownerReferences", "deletionTimestamp"})](Json& obj) {
    Json spec = Json::object();
    Json status = Json::object();
    if (const Json* c = kube::FindPath(obj, {"spec", "storageClassName"}); c && c->is_string()) {
      spec["storageClassName"] = *c;
    }
    if (const Json* m = kube::FindPath(obj, {"spec", "accessModes"}); m && m->is_array()) {
      spec["accessModes"] = *m;
    }
    if (const Json* r = kube::FindPath(obj, {"spec", "resources", "requests", "storage"}); r) {
      spec["resources"]["requests"]["storage"] = *r;
    }
    if (const Json* c = kube::FindPath(obj, {"status", "capacity", "storage"}); c) {
      status["capacity"]["storage"] = *c;
    }
    if (const Json* cs = kube::FindPath(obj, {"status", "conditions"}); cs && cs->is_array()) {
      for (const Json& c : *cs) {
        if (c.is_object() && c.contains("type"))
          status["conditions"].push_back({{"type", c["type"]}});
      }
    }
    meta(obj);
    obj["spec"] = std::move(spec);
    obj["status"] = std::move(status);
  };
  return out;
}

namespace {

class StatefulSetGroup : public ControllerGroup {
 public:
  std::string Name() const override { return "statefulset"; }

  absl::Status Register(const ControllerContext& ctx) override {
    RETURN_IF_ERROR(CheckControllerContext(ctx, "statefulset"));
    if (!kube::Served(ctx.client, AdvancedStatefulSets())) {
      Logger("statefulset")
          ->warn("Advanced StatefulSet CRD is not served: StatefulSet controller off");
      return absl::OkStatus();
    }
    std::vector<kube::InformerOptions> all = AstsInformerOptions();
    auto make = [&](kube::InformerOptions o) { return informers_.Make(ctx, std::move(o)); };
    AstsInformers inf;
    inf.statefulsets = make(all[0]);
    inf.pods = ctx.shared != nullptr ? ctx.shared->Pods() : make(all[1]);
    inf.revisions = ctx.shared != nullptr ? ctx.shared->ControllerRevisions() : make(all[2]);
    inf.pvcs = ctx.shared != nullptr
                   ? ctx.shared->Named("persistentvolumeclaims-sizes", [&] { return all[3]; })
                   : make(all[3]);

    if (ctx.feature_enabled(inplace::kPreDownloadGate)) {
      inf.image_pull_jobs = inplace::PreDownloadJobInformer(ctx, "statefulset", make);
    }

    AstsReconcilerOptions ro;
    ro.clock = ctx.clock;
    ro.pre_download_images = inf.image_pull_jobs != nullptr;
    ro.disruption_gate = ctx.disruption_gate;
    ro.auto_resize_pvc = ctx.feature_enabled(kAutoResizePvcGate);
    reconciler_ = std::make_unique<AstsReconciler>(ctx.client, inf, ctx.recorder, ro);
    AstsReconciler* r = reconciler_.get();
    r->ObserveThrough(inf.pods);
    kube::ControllerOptions co;
    co.clock = ctx.clock;
    co.workers = ctx.workers("statefulset", 3);
    controller_ = std::make_unique<kube::Controller>("statefulset", r, co);
    workload::WatchWorkload(controller_.get(), {"StatefulSet", inf.statefulsets, inf.pods,
                                                inf.revisions, inf.image_pull_jobs});
    // A claim's size or capacity (status.volumeClaims, a resize waited for): the sets of its
    // namespace whose selector matches its labels (claims carry the selector's matchLabels).
    kube::Informer* sets = inf.statefulsets;
    controller_->Watch(inf.pvcs, kube::EnqueueMapped([sets](const Json& claim) {
                         return workload::WorkloadsSelecting(sets, claim);
                       }),
                       {kube::ResourceVersionChanged()});
    ctx.manager->Add(controller_.get());
    return absl::OkStatus();
  }

 private:
  OwnedInformers informers_;
  std::unique_ptr<AstsReconciler> reconciler_;
  std::unique_ptr<kube::Controller> controller_;
};

}  // namespace

std::unique_ptr<ControllerGroup> NewStatefulSetControllerGroup() {
  return std::make_unique<StatefulSetGroup>();
}

}  // namespace kruise::manager::statefulset
