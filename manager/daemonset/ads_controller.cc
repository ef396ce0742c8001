#include "manager/daemonset/ads_controller.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kube/errors.h"
#include "kube/kruise_api.h"
#include "manager/inplace/inplace_apply.h"
#include "manager/inplace/inplace_update.h"
#include "manager/inplace/predownload.h"
#include "manager/revision/revision.h"
#include "manager/workload/lifecycle.h"
#include "manager/workload/pod_claim.h"
#include "manager/workload/update_revision.h"
#include "manager/workload/workload_status.h"

namespace kruise::manager::daemonset {

namespace res = kube::resources;

namespace {

// Names distinct from ads_plan.cc's and ads_admission.cc's file-local ones (unity builds).
constexpr char kAdsTemplateGenerationLabel[] = "pod-template-generation";
constexpr char kAdsPreDeleteNotReadyMessage[] = "the DaemonSet's preDelete hook holds this pod";

bool IsAdsOwner(const kube::OwnerReference& owner) {
  return owner.kind == "DaemonSet" && owner.api_version.rfind("apps.kruise.io/", 0) == 0;
}

std::string AdsOwnerKey(const Json& obj) {
  auto owner = kube::ControllerOf(obj);
  if (!owner.has_value() || !IsAdsOwner(*owner)) return "";
  return absl::StrCat(kube::Namespace(obj), "/", owner->name);
}

Json AdsOwnerRef(const Json& set) {
  return {{"apiVersion", set.value("apiVersion", "apps.kruise.io/v1beta1")},
          {"kind", "DaemonSet"},
          {"name", kube::Name(set)},
          {"uid", kube::Uid(set)},
          {"controller", true},
          {"blockOwnerDeletion", true}};
}

// Kubernetes' rand.String alphabet (no vowels, no 0/1/3), as generateName uses.
std::string AdsPodName(const std::string& set) {
  static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 2);
  std::string name = set.substr(0, 57) + "-";
  for (int i = 0; i < 5; ++i) name.push_back(kAlphabet[pick(rng)]);
  return name;
}

// Kubernetes' ReplaceDaemonSetPodNodeNameNodeAffinity: the required node affinity becomes one
// term naming the node (other required terms are dropped; preferred ones and pod affinities stay).
void SetNodeAffinity(Json& spec, const std::string& node) {
  Json requirement = {
      {"key", "metadata.name"}, {"operator", "In"}, {"values", Json::array({node})}};
  Json term = {{"matchFields", Json::array({requirement})}};
  if (!spec.contains("affinity") || !spec["affinity"].is_object())
    spec["affinity"] = Json::object();
  Json& affinity = spec["affinity"];
  if (!affinity.contains("nodeAffinity") || !affinity["nodeAffinity"].is_object()) {
    affinity["nodeAffinity"] = Json::object();
  }
  affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = {
      {"nodeSelectorTerms", Json::array({term})}};
}

// AddOrUpdateDaemonPodTolerations: each daemon toleration replaces an identical one (dropping
// its tolerationSeconds) or is appended.
void AddDaemonTolerations(Json& spec) {
  const bool host_network =
      spec.value("hostNetwork", Json(false)).is_boolean() && spec.value("hostNetwork", false);
  if (!spec.contains("tolerations") || !spec["tolerations"].is_array()) {
    spec["tolerations"] = Json::array();
  }
  Json& tols = spec["tolerations"];
  auto str = [](const Json& t, const char* k) {
    return t.is_object() && t.contains(k) && t[k].is_string() ? t[k].get<std::string>() : "";
  };
  for (const Toleration& want : DaemonPodTolerations(host_network)) {
    Json entry = {{"key", want.key}, {"operator", want.op}, {"effect", want.effect}};
    bool replaced = false;
    for (Json& t : tols) {
      if (str(t, "key") == want.key && str(t, "operator") == want.op &&
          str(t, "value") == want.value && str(t, "effect") == want.effect) {
        t = entry;
        replaced = true;
      }
    }
    if (!replaced) tols.push_back(std::move(entry));
  }
}

void AddReadinessGate(Json& spec, const std::string& type) {
  if (!spec.contains("readinessGates") || !spec["readinessGates"].is_array()) {
    spec["readinessGates"] = Json::array();
  }
  for (const Json& g : spec["readinessGates"]) {
    if (g.is_object() && g.value("conditionType", "") == type) return;
  }
  spec["readinessGates"].push_back({{"conditionType", type}});
}

// The hash a ControllerRevision stands for: its controller-revision-hash label, else its name
// without the "<set>-" prefix.
std::string AdsRevisionHash(const Json& rev, const std::string& set) {
  if (auto h = kube::Label(rev, revision::kControllerRevisionHashLabel); h && !h->empty()) {
    return *h;
  }
  const std::string name = kube::Name(rev);
  return name.rfind(set + "-", 0) == 0 ? name.substr(set.size() + 1) : name;
}

bool AdsRetryable(const absl::Status& st) {
  return kube::IsConflict(st) || kube::IsNotFound(st) ||
         st.code() == absl::StatusCode::kUnavailable;
}

}  // namespace

struct AdsReconciler::Context {
  Json set;
  std::string key;
  std::string ns;
  std::string name;
  AdsSpec spec;
  DaemonPlacement placement;
  kube::LabelSelector selector = kube::LabelSelector::Nothing();
  std::vector<Json> pods;  // claimed pods, same order as views
  std::vector<AdsPod> views;
  std::map<std::string, size_t> by_name;  // pod name -> index
  std::vector<NodeView> nodes;
  std::vector<Json> revisions;  // oldest first
  Json update_revision;
  std::string update_hash;
  std::map<std::string, Json> templates;  // revision hash -> pod template
  int64_t collision_count = 0;
  absl::Time now;
  absl::Duration recheck = absl::ZeroDuration();
  std::optional<absl::Status> scale_result;
  std::optional<absl::Status> update_result;
  inplace::HeldPods held;    // pods the disruption gate denied this round
  bool gate_closed = false;  // a denial ends the round's update

  void Recheck(absl::Duration d) {
    if (d > absl::ZeroDuration() && (recheck == absl::ZeroDuration() || d < recheck)) recheck = d;
  }
  const Json* RevisionNamed(const std::string& n) const {
    for (const Json& r : revisions) {
      if (kube::Name(r) == n) return &r;
    }
    return nullptr;
  }
  const Json* PodNamed(const std::string& n) const {
    auto it = by_name.find(n);
    return it == by_name.end() ? nullptr : &pods[it->second];
  }
};

AdsReconciler::AdsReconciler(kube::KubeClient* client, AdsInformers informers,
                             kube::EventRecorder* recorder, AdsReconcilerOptions opts)
    : client_(client), inf_(informers), opts_(opts), writer_(client, recorder, opts.clock) {}

void AdsReconciler::ObserveThrough(kube::Informer* pods) {
  writer_.ObserveThrough(pods, AdsOwnerKey);
}

absl::StatusOr<bool> AdsReconciler::SyncRevisions(Context& ctx) {
  ASSIGN_OR_RETURN(
      workload::UpdateRevision sync,
      workload::SyncUpdateRevision(client_, inf_.revisions, ctx.set, AdvancedDaemonSets()));
  ctx.revisions = std::move(sync.revisions);
  ctx.collision_count = sync.collision_count;
  if (!sync.revision.has_value()) return false;  // a collision was counted: come back
  ctx.update_revision = *std::move(sync.revision);
  ctx.update_hash = sync.hash;
  for (const Json& rev : ctx.revisions) {
    ctx.templates[AdsRevisionHash(rev, ctx.name)] = revision::RevisionTemplate(rev);
  }
  return true;
}

absl::Status AdsReconciler::PreDownloadImages(Context& ctx) {
  if (!opts_.pre_download_images || inf_.image_pull_jobs == nullptr) return absl::OkStatus();
  const StatusCounts counts =
      CountStatus(ctx.spec, ctx.placement, ctx.nodes, ctx.views, ctx.update_hash, ctx.now);
  const int desired = counts.desired_number_scheduled;
  if (counts.updated_number_scheduled == desired) {
    // Every eligible node runs the update revision: the jobs have nothing left to warm.
    ASSIGN_OR_RETURN(auto jobs, inf_.image_pull_jobs->store().ByIndex(kube::kControllerUidIndex,
                                                                      kube::Uid(ctx.set)));
    return inplace::DeletePreDownloadJobs(client_, jobs);
  }
  // Done once per revision (PlanImagePreDownload checks it too; this spares the work below).
  if (inplace::PreDownloadDone(ctx.update_revision)) return absl::OkStatus();
  inplace::PreDownloadRequest req = inplace::PreDownloadRequestFor(ctx.set, ctx.update_revision);
  for (const auto& [hash, tmpl] : ctx.templates) {
    if (hash != ctx.update_hash) req.old_templates.push_back(tmpl);
  }
  // A new set's pods are created at its only revision: nothing to warm ahead of them.
  if (req.old_templates.empty()) return absl::OkStatus();
  int updated_ready = 0;
  for (const AdsPod& v : ctx.views) {
    if (!v.terminating && v.ready && IsUpdated(ctx.spec, v, ctx.update_hash)) ++updated_ready;
  }
  if (inplace::MinUpdatedReadyPodsToPreDownload(ctx.set, desired) > updated_ready) {
    return absl::OkStatus();
  }
  req.update_revision_hash = ctx.update_hash;
  req.replicas = desired;
  req.min_replicas = 0;
  ASSIGN_OR_RETURN(ScaledNumbers numbers, ScaleNumbers(ctx.spec, desired));
  req.partition = numbers.partition;
  // OpenKruise's own reading here: maxUnavailable as written (1 when unset), rounded down.
  const Json* max_unavailable =
      kube::FindPath(ctx.set, {"spec", "updateStrategy", "rollingUpdate", "maxUnavailable"});
  auto scaled = kube::GetScaledValueFromIntOrPercent(
      max_unavailable != nullptr && !max_unavailable->is_null() ? *max_unavailable : Json(1),
      desired, /*round_up=*/false);
  req.max_unavailable = scaled.ok() ? *scaled : 1;
  return inplace::CarryOutPreDownload(
      client_, ctx.set, req.update_revision, inplace::PlanImagePreDownload(req),
      [&](bool warning, const std::string& reason, const std::string& message) {
        writer_.Event(ctx.set, warning, reason, message);
      });
}

absl::StatusOr<bool> AdsReconciler::Refresh(Context& ctx) {
  bool modified = false;
  auto revision_template = [&ctx](const std::string& hash) -> std::optional<Json> {
    auto it = ctx.templates.find(hash);
    if (it == ctx.templates.end()) return std::nullopt;
    return it->second;
  };
  for (size_t i = 0; i < ctx.pods.size(); ++i) {
    const Json& pod = ctx.pods[i];
    if (kube::IsBeingDeleted(pod)) continue;
    // A new pod's gates start True: InPlaceUpdateReady (ours) and KruisePodReady (the pod
    // webhook adds it to pods of Kruise workloads).
    Json initial = inplace::InitialReadinessGateOps(
        pod, {inplace::kInPlaceUpdateReadyCondition, kube::kKruisePodReadyCondition}, ctx.now);
    if (!initial.empty()) {
      RETURN_IF_ERROR(writer_.PatchPod(pod, initial, "status").status());
      modified = true;
      continue;
    }
    // markPodNotReady: a pod the preDelete hook holds stays out of endpoints (a round that
    // stopped between its two patches is finished here); one back in Normal is ready again.
    if (ctx.views[i].lifecycle_state == workload::kStatePreparingDelete &&
        ctx.spec.pre_delete.has_value() && ctx.spec.pre_delete->mark_pod_not_ready) {
      if (!workload::KruisePodReadyOps(pod, false, workload::kStatePreparingDelete,
                                       kAdsPreDeleteNotReadyMessage, ctx.now)
               .empty()) {
        RETURN_IF_ERROR(MarkPodNotReady(ctx, pod));
        modified = true;
        continue;
      }
    }
    if (Json ops = workload::RestoreKruisePodReadyOps(pod, ctx.views[i].lifecycle_state, ctx.now);
        !ops.empty()) {
      ops.insert(ops.begin(), inplace::TestResourceVersionOp(pod));
      RETURN_IF_ERROR(writer_.PatchPod(pod, ops, "status").status());
      modified = true;
      continue;
    }
    if (ctx.views[i].lifecycle_state != workload::kStateUpdating) continue;
    inplace::InPlaceUpdateCheck check =
        inplace::CheckInPlaceUpdate(pod, /*grace_period_seconds=*/0, ctx.now, revision_template);
    if (check.step != inplace::InPlaceUpdateCheck::Step::kCompleted) continue;
    Json patched = pod;
    if (!check.status_ops.empty()) {
      ASSIGN_OR_RETURN(patched, writer_.PatchPod(pod, check.status_ops, "status"));
    }
    Json ops = Json::array({inplace::TestResourceVersionOp(patched)});
    inplace::AppendMapOps(patched, "/metadata/labels",
                          {{workload::kLifecycleStateLabel, workload::kStateNormal}}, &ops);
    RETURN_IF_ERROR(writer_.PatchPod(patched, ops).status());
    writer_.Event(ctx.set, false, "InPlaceUpdateCompleted",
                  absl::StrCat("pod ", kube::Name(pod), " runs revision ", check.revision));
    modified = true;
  }
  return modified;
}

std::set<std::string> AdsReconciler::FailedBackoffNodes(Context& ctx) {
  std::set<std::string> out;
  absl::MutexLock lock(&backoff_mu_);
  for (const AdsPod& v : ctx.views) {
    if (v.phase != "Failed" || v.terminating || v.node.empty()) continue;
    auto it = backoff_.find(absl::StrCat(kube::Uid(ctx.set), "/", v.node));
    if (it == backoff_.end()) continue;
    const absl::Duration since = ctx.now - it->second.last;
    if (since < it->second.delay) {
      out.insert(v.node);
      ctx.Recheck(it->second.delay - since);
    }
  }
  return out;
}

absl::Status AdsReconciler::CreatePods(Context& ctx, const std::vector<std::string>& nodes) {
  // Slow start, as Kubernetes' syncNodes: batches of 1, 2, 4, ...; a batch with a failure ends
  // the creations of this round.
  size_t next = 0;
  for (size_t batch = 1; next < nodes.size(); batch *= 2) {
    absl::Status first_error;
    const size_t end = std::min(nodes.size(), next + batch);
    for (; next < end; ++next) {
      absl::Status st = CreatePod(ctx, nodes[next]);
      if (!st.ok() && first_error.ok()) first_error = st;
    }
    if (!first_error.ok()) return first_error;
  }
  return absl::OkStatus();
}

absl::Status AdsReconciler::CreatePod(Context& ctx, const std::string& node) {
  Json tmpl = revision::RevisionTemplate(ctx.update_revision);
  if (!tmpl.is_object()) return absl::InternalError("revision without a template");
  Json meta =
      tmpl.contains("metadata") && tmpl["metadata"].is_object() ? tmpl["metadata"] : Json::object();
  meta.erase("creationTimestamp");
  meta["namespace"] = ctx.ns;
  if (!meta.contains("labels") || !meta["labels"].is_object()) meta["labels"] = Json::object();
  meta["labels"][revision::kControllerRevisionHashLabel] = ctx.update_hash;
  if (ctx.spec.template_generation.has_value()) {
    meta["labels"][kAdsTemplateGenerationLabel] = absl::StrCat(*ctx.spec.template_generation);
  }
  meta["labels"][workload::kLifecycleStateLabel] = workload::kStateNormal;
  meta["ownerReferences"] = Json::array({AdsOwnerRef(ctx.set)});
  Json spec = tmpl.contains("spec") && tmpl["spec"].is_object() ? tmpl["spec"] : Json::object();
  SetNodeAffinity(spec, node);
  AddDaemonTolerations(spec);
  if (ctx.spec.in_place_if_possible) AddReadinessGate(spec, inplace::kInPlaceUpdateReadyCondition);
  Json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", meta}, {"spec", spec}};
  // Names are ours (not generateName) so the expectation is named before the request; a name
  // already taken is drawn again.
  absl::Status st;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const std::string pod_name = AdsPodName(ctx.name);
    pod["metadata"]["name"] = pod_name;
    writer_.scale_expectations().Expect(ctx.key, kube::ScaleExpectations::Action::kCreate,
                                        pod_name);
    auto made = client_->Create(res::Pods(), ctx.ns, pod);
    if (made.ok()) {
      writer_.Event(ctx.set, false, "SuccessfulCreate",
                    absl::StrCat("Created pod: ", pod_name, " for node ", node));
      return absl::OkStatus();
    }
    writer_.scale_expectations().Observe(ctx.key, kube::ScaleExpectations::Action::kCreate,
                                         pod_name);
    st = made.status();
    if (!kube::IsAlreadyExists(st)) break;
  }
  writer_.Event(ctx.set, true, "FailedCreate",
                absl::StrCat("Error creating pod for node ", node, ": ", st.message()));
  return st;
}

absl::Status AdsReconciler::DeletePod(Context& ctx, const Json& pod, const std::string& why) {
  absl::Status st = writer_.Delete(ctx.key, res::Pods(), pod);
  if (!st.ok()) {
    // Gone already, or another pod of that name now (uid precondition): nothing of ours to do.
    if (kube::IsNotFound(st) || kube::IsConflict(st)) return absl::OkStatus();
    writer_.Event(ctx.set, true, "FailedDelete",
                  absl::StrCat("Error deleting pod ", kube::Name(pod), ": ", st.message()));
    return st;
  }
  writer_.Event(ctx.set, false, "SuccessfulDelete",
                absl::StrCat("Deleted pod: ", kube::Name(pod), " (", why, ")"));
  return absl::OkStatus();
}

absl::Status AdsReconciler::PrepareDelete(Context& ctx, const Json& pod) {
  Json ops = Json::array({inplace::TestResourceVersionOp(pod)});
  for (Json& op : workload::LifecycleStateOps(pod, workload::kStatePreparingDelete, ctx.now)) {
    ops.push_back(std::move(op));
  }
  auto patched = writer_.PatchPod(pod, ops);
  if (!patched.ok()) {
    if (kube::IsNotFound(patched.status())) return absl::OkStatus();
    return patched.status();
  }
  writer_.Event(ctx.set, false, "PreparingDelete",
                absl::StrCat("pod ", kube::Name(pod), " waits for its preDelete hook"));
  if (ctx.spec.pre_delete.has_value() && ctx.spec.pre_delete->mark_pod_not_ready) {
    return MarkPodNotReady(ctx, *patched);
  }
  return absl::OkStatus();
}

absl::Status AdsReconciler::MarkPodNotReady(Context& ctx, const Json& pod) {
  Json ops = workload::KruisePodReadyOps(pod, false, workload::kStatePreparingDelete,
                                         kAdsPreDeleteNotReadyMessage, ctx.now);
  if (ops.empty()) return absl::OkStatus();  // no KruisePodReady gate, or already not ready
  ops.insert(ops.begin(), inplace::TestResourceVersionOp(pod));
  auto st = writer_.PatchPod(pod, ops, "status");
  if (!st.ok() && !kube::IsNotFound(st.status())) return st.status();
  return absl::OkStatus();
}

absl::StatusOr<bool> AdsReconciler::AdmitDisruption(Context& ctx, const Json& pod,
                                                    inplace::DisruptionOperation op) {
  if (ctx.gate_closed) return false;
  if (opts_.disruption_gate == nullptr) return true;
  if (op == inplace::DisruptionOperation::kDelete && !opts_.disruption_gate_deletes) return true;
  ASSIGN_OR_RETURN(inplace::GateDecision decision,
                   opts_.disruption_gate->Allow(pod, op, /*dry_run=*/false));
  if (decision.allowed) return true;
  ctx.held.Add(kube::Name(pod), decision);
  ctx.gate_closed = true;
  return false;
}

absl::Status AdsReconciler::ApplyDeletions(Context& ctx, const Deletions& deletions) {
  // A Standard update's deletion (or its move to PreparingDelete) asks the disruption gate first.
  auto admitted = [&](const PodAction& a, const Json& pod) -> absl::StatusOr<bool> {
    if (a.reason != DeleteReason::kUpdate) return true;
    return AdmitDisruption(ctx, pod, inplace::DisruptionOperation::kDelete);
  };
  for (const PodAction& a : deletions.prepare_delete) {
    const Json* pod = ctx.PodNamed(a.pod);
    if (pod == nullptr) continue;
    ASSIGN_OR_RETURN(bool go, admitted(a, *pod));
    if (go) RETURN_IF_ERROR(PrepareDelete(ctx, *pod));
  }
  for (const PodAction& a : deletions.remove) {
    const Json* pod = ctx.PodNamed(a.pod);
    if (pod == nullptr) continue;
    ASSIGN_OR_RETURN(bool go, admitted(a, *pod));
    if (!go) continue;
    std::string why;
    switch (a.reason) {
      case DeleteReason::kFailed: {
        writer_.Event(ctx.set, true, "FailedDaemonPod",
                      absl::StrCat("Found failed daemon pod ", ctx.ns, "/", a.pod, " on node ",
                                   a.node, ", will try to kill it"));
        absl::MutexLock lock(&backoff_mu_);
        Backoff& b = backoff_[absl::StrCat(kube::Uid(ctx.set), "/", a.node)];
        if (b.last == absl::Time() || ctx.now - b.last > 2 * opts_.failed_backoff_max) {
          b.delay = opts_.failed_backoff_initial;
        } else {
          b.delay = std::min(b.delay * 2, opts_.failed_backoff_max);
        }
        b.last = ctx.now;
        why = "failed";
        break;
      }
      case DeleteReason::kPreparingDelete:
        why = "preDelete hook released it";
        break;
      case DeleteReason::kExcess:
        why = "more than one pod on the node";
        break;
      case DeleteReason::kNotEligible:
        why = absl::StrCat("node ", a.node, " should not run it");
        break;
      case DeleteReason::kNodeGone:
        why = absl::StrCat("node ", a.node, " does not exist");
        break;
      case DeleteReason::kUpdate:
        why = absl::StrCat("update to revision ", ctx.update_hash);
        break;
    }
    RETURN_IF_ERROR(DeletePod(ctx, *pod, why));
  }
  return absl::OkStatus();
}

absl::Status AdsReconciler::UpdateInPlace(Context& ctx, const Json& pod,
                                          const inplace::InPlaceUpdateSpec& update) {
  inplace::InPlaceUpdatePatchOptions po;
  po.labels = {{workload::kLifecycleStateLabel, workload::kStateUpdating}};
  if (ctx.spec.template_generation.has_value()) {
    po.labels[kAdsTemplateGenerationLabel] = absl::StrCat(*ctx.spec.template_generation);
  }
  po.annotations = {{workload::kLifecycleTimestampAnnotation, kube::FormatRfc3339(ctx.now)}};
  return writer_.UpdateInPlace(ctx.set, pod, update, po, ctx.now, ctx.update_hash);
}

absl::Status AdsReconciler::WriteStatus(Context& ctx) {
  const StatusCounts c =
      CountStatus(ctx.spec, ctx.placement, ctx.nodes, ctx.views, ctx.update_hash, ctx.now);
  Json status = {{"observedGeneration", kube::Generation(ctx.set)},
                 {"desiredNumberScheduled", c.desired_number_scheduled},
                 {"currentNumberScheduled", c.current_number_scheduled},
                 {"numberMisscheduled", c.number_misscheduled},
                 {"numberReady", c.number_ready},
                 {"numberAvailable", c.number_available},
                 {"numberUnavailable", c.number_unavailable},
                 {"updatedNumberScheduled", c.updated_number_scheduled},
                 {"updateRevision", ctx.update_hash},
                 {"daemonSetHash", ctx.update_hash},
                 {"collisionCount", ctx.collision_count}};
  if (Json conditions =
          workload::StepConditions(ctx.set, ctx.now, ctx.scale_result, ctx.update_result);
      !conditions.is_null()) {
    status["conditions"] = std::move(conditions);
  }
  return workload::WriteStatusIfChanged(client_, AdvancedDaemonSets(), ctx.set, status);
}

absl::StatusOr<kube::Result> AdsReconciler::Reconcile(const kube::Request& req) {
  Context ctx;
  ctx.key = req.Key();
  ctx.ns = req.ns;
  ctx.name = req.name;
  ctx.now = opts_.clock->Now();
  auto cached = inf_.daemonsets->store().Get(req.ns, req.name);
  if (cached == nullptr) {
    writer_.scale_expectations().Delete(ctx.key);
    return kube::Result{};
  }
  ctx.set = *cached;
  if (!writer_.scale_expectations().Satisfied(ctx.key)) {
    return kube::Result{opts_.expectation_recheck};  // the pod events bring us back sooner
  }
  auto spec = ParseAdsSpec(ctx.set);
  if (!spec.ok()) return writer_.InvalidSpec(ctx.set, spec.status());
  ctx.spec = *std::move(spec);
  const Json* tmpl = kube::FindPath(ctx.set, {"spec", "template"});
  auto placement = ParsePlacement(tmpl != nullptr ? *tmpl : Json::object());
  if (!placement.ok()) return writer_.InvalidSpec(ctx.set, placement.status());
  ctx.placement = *std::move(placement);
  if (auto numbers = ScaleNumbers(ctx.spec, 1); !numbers.ok()) {
    return writer_.InvalidSpec(ctx.set, numbers.status());
  }
  ASSIGN_OR_RETURN(ctx.selector, writer_.Selector(ctx.set));

  ASSIGN_OR_RETURN(std::vector<Json> claimed,
                   writer_.ClaimPods(ctx.set, AdsOwnerRef(ctx.set), ctx.selector, inf_.pods));
  if (kube::IsBeingDeleted(ctx.set)) return kube::Result{};
  for (Json& p : claimed) {
    if (!writer_.rv_expectations().SatisfiedByCache(p))
      return kube::Result{opts_.expectation_recheck};
    auto view = ViewPod(p);
    if (!view.ok()) {
      Logger("daemonset")->warn("{}: {}", ctx.key, view.status().message());
      continue;
    }
    ctx.by_name[kube::Name(p)] = ctx.pods.size();
    ctx.views.push_back(*std::move(view));
    ctx.pods.push_back(std::move(p));
  }
  for (const auto& n : inf_.nodes->store().List()) ctx.nodes.push_back(ViewNode(*n));
  std::sort(ctx.nodes.begin(), ctx.nodes.end(),
            [](const NodeView& a, const NodeView& b) { return a.name < b.name; });
  ASSIGN_OR_RETURN(bool have_revision, SyncRevisions(ctx));
  if (!have_revision) return kube::Result{absl::Seconds(1)};  // collision counted
  if (absl::Status st = PreDownloadImages(ctx); !st.ok()) {
    Logger("daemonset")->warn("{}: image pre-download: {}", ctx.key, st.message());
  }

  absl::Status step;
  auto refreshed = Refresh(ctx);
  if (!refreshed.ok()) step = refreshed.status();
  if (step.ok() && !*refreshed) {
    auto run_scale = [&]() -> absl::StatusOr<bool> {
      const std::set<std::string> backoff = FailedBackoffNodes(ctx);
      ASSIGN_OR_RETURN(ScalePlan plan, PlanScale(ctx.spec, ctx.placement, ctx.nodes, ctx.views,
                                                 ctx.update_hash, ctx.now, backoff));
      ctx.Recheck(plan.recheck_after);
      const bool acted = !plan.create.empty() || !plan.deletions.remove.empty() ||
                         !plan.deletions.prepare_delete.empty();
      RETURN_IF_ERROR(ApplyDeletions(ctx, plan.deletions));
      RETURN_IF_ERROR(CreatePods(ctx, plan.create));
      return acted;
    };
    auto scaled = run_scale();
    ctx.scale_result = scaled.status();
    if (!scaled.ok()) {
      step = scaled.status();
    } else if (!*scaled) {
      auto run_update = [&]() -> absl::Status {
        std::map<std::string, Json> none;
        ASSIGN_OR_RETURN(UpdatePlan plan,
                         PlanUpdate(ctx.spec, ctx.placement, ctx.nodes, ctx.views, ctx.update_hash,
                                    ctx.spec.in_place_if_possible ? ctx.templates : none, ctx.now));
        RETURN_IF_ERROR(ApplyDeletions(ctx, plan.deletions));
        RETURN_IF_ERROR(CreatePods(ctx, plan.create));
        for (const InPlaceAction& a : plan.in_place) {
          const Json* pod = ctx.PodNamed(a.pod);
          if (pod == nullptr) continue;
          ASSIGN_OR_RETURN(bool go,
                           AdmitDisruption(ctx, *pod, inplace::DisruptionOperation::kUpdate));
          if (!go) break;
          RETURN_IF_ERROR(UpdateInPlace(ctx, *pod, a.update));
        }
        return absl::OkStatus();
      };
      ctx.update_result = run_update();
      step = *ctx.update_result;
      if (!ctx.held.empty()) {
        writer_.Event(ctx.set, true, inplace::kDisruptionDeniedReason, ctx.held.Message());
        // A budget frees when a pod becomes available again: usually one of ours, whose event
        // comes first; the requeue covers a budget shared with other workloads.
        ctx.Recheck(inplace::kDisruptionRetry);
      }
    }
  }
  for (auto* result : {&ctx.scale_result, &ctx.update_result}) {
    if (result->has_value() && AdsRetryable(**result)) result->reset();
  }
  if (absl::Status st = WriteStatus(ctx); !st.ok()) {
    if (kube::IsConflict(st)) return kube::Result{absl::Seconds(1)};
    return st;
  }
  // History beyond revisionHistoryLimit: revisions no pod uses, oldest first.
  std::set<std::string> in_use = {kube::Name(ctx.update_revision)};
  std::vector<std::string> names;
  for (const Json& r : ctx.revisions) {
    names.push_back(kube::Name(r));
    if (std::string h = AdsRevisionHash(r, ctx.name); std::any_of(
            ctx.views.begin(), ctx.views.end(), [&](const AdsPod& v) { return v.revision == h; })) {
      in_use.insert(kube::Name(r));
    }
  }
  const int limit =
      static_cast<int>(kube::GetInt(ctx.set, {"spec", "revisionHistoryLimit"}).value_or(10));
  for (const std::string& n : revision::RevisionsToPrune(names, limit, in_use)) {
    absl::Status st = client_->Delete(res::ControllerRevisions(), ctx.ns, n);
    if (!st.ok() && !kube::IsNotFound(st)) return st;
  }
  if (!step.ok()) {
    if (AdsRetryable(step)) return kube::Result{absl::Seconds(1)};
    return step;
  }
  // A pod Ready but not yet available for minReadySeconds: no event will say when it is.
  if (ctx.spec.min_ready_seconds > 0) {
    for (const AdsPod& v : ctx.views) {
      if (!v.terminating && v.ready && !IsAvailable(v, ctx.spec.min_ready_seconds, ctx.now) &&
          v.ready_since != absl::InfinitePast()) {
        ctx.Recheck(v.ready_since + absl::Seconds(ctx.spec.min_ready_seconds) - ctx.now);
      }
    }
  }
  return kube::Result{ctx.recheck};
}

// ---- Controller group -------------------------------------------------------------------------

std::vector<kube::InformerOptions> AdsInformerOptions() {
  std::vector<kube::InformerOptions> out(4);
  out[0].resource = AdvancedDaemonSets();
  out[0].indexers[kube::kNamespaceIndex] = kube::NamespaceIndexFunc();
  out[1] = SharedInformers::PodOptions();
  out[2] = SharedInformers::ControllerRevisionOptions();
  out[3] = SharedInformers::NodeOptions();
  return out;
}

namespace {

class DaemonSetGroup : public ControllerGroup {
 public:
  std::string Name() const override { return "daemonset"; }

  absl::Status Register(const ControllerContext& ctx) override {
    RETURN_IF_ERROR(CheckControllerContext(ctx, "daemonset"));
    if (!kube::Served(ctx.client, AdvancedDaemonSets())) {
      Logger("daemonset")->warn("Advanced DaemonSet CRD is not served: DaemonSet controller off");
      return absl::OkStatus();
    }
    std::vector<kube::InformerOptions> all = AdsInformerOptions();
    auto make = [&](kube::InformerOptions o) { return informers_.Make(ctx, std::move(o)); };
    AdsInformers inf;
    inf.daemonsets = make(all[0]);
    inf.pods = ctx.shared != nullptr ? ctx.shared->Pods() : make(all[1]);
    inf.revisions = ctx.shared != nullptr ? ctx.shared->ControllerRevisions() : make(all[2]);
    inf.nodes = ctx.shared != nullptr ? ctx.shared->Nodes() : make(all[3]);
    if (ctx.feature_enabled(inplace::kPreDownloadDaemonSetGate)) {
      inf.image_pull_jobs = inplace::PreDownloadJobInformer(ctx, "daemonset", make);
    }

    AdsReconcilerOptions ro;
    ro.clock = ctx.clock;
    ro.pre_download_images = inf.image_pull_jobs != nullptr;
    ro.disruption_gate = ctx.disruption_gate;
    ro.disruption_gate_deletes = ctx.feature_enabled("PodUnavailableBudgetDeleteGate");
    reconciler_ = std::make_unique<AdsReconciler>(ctx.client, inf, ctx.recorder, ro);
    AdsReconciler* r = reconciler_.get();
    r->ObserveThrough(inf.pods);
    kube::ControllerOptions co;
    co.clock = ctx.clock;
    co.workers = ctx.workers("daemonset", 3);
    controller_ = std::make_unique<kube::Controller>("daemonset", r, co);
    workload::WatchWorkload(controller_.get(), {"DaemonSet", inf.daemonsets, inf.pods,
                                                inf.revisions, inf.image_pull_jobs});
    kube::Informer* sets = inf.daemonsets;
    // A node added, removed, or whose labels, taints or schedulability changed: every set.
    kube::Predicate node_changed;
    node_changed.update = [](const Json& old_obj, const Json& new_obj) {
      return kube::Labels(old_obj) != kube::Labels(new_obj) ||
             old_obj.value("spec", Json::object()) != new_obj.value("spec", Json::object());
    };
    controller_->Watch(inf.nodes, kube::EnqueueMapped([sets](const Json&) {
                         std::vector<kube::Request> out;
                         for (const auto& s : sets->store().List()) {
                           out.push_back({kube::Namespace(*s), kube::Name(*s)});
                         }
                         return out;
                       }),
                       {node_changed});
    ctx.manager->Add(controller_.get());
    return absl::OkStatus();
  }

 private:
  OwnedInformers informers_;
  std::unique_ptr<AdsReconciler> reconciler_;
  std::unique_ptr<kube::Controller> controller_;
};

}  // namespace

std::unique_ptr<ControllerGroup> NewDaemonSetControllerGroup() {
  return std::make_unique<DaemonSetGroup>();
}

}  // namespace kruise::manager::daemonset
