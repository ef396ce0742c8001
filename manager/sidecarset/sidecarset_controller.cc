#include "manager/sidecarset/sidecarset_controller.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kube/errors.h"
#include "kube/object.h"
#include "kube/resources.h"
#include "manager/sidecarset/sidecarset_inject.h"
#include "manager/sidecarset/sidecarset_not_injected.h"
#include "manager/sidecarset/sidecarset_revision.h"
#include "manager/sidecarset/sidecarset_upgrade.h"
#include "manager/sidecarset/sidecarset_webhook.h"

namespace kruise::manager::sidecarset {

namespace res = kube::resources;
using Json = nlohmann::json;

std::vector<kube::Request> SidecarSetsOfPod(const Json& pod) {
  std::vector<kube::Request> out;
  for (std::string& name : SharedInformers::InjectedSidecarSets(pod)) out.push_back({"", name});
  return out;
}

SidecarSetReconciler::SidecarSetReconciler(kube::KubeClient* client, SidecarSetInformers informers,
                                           kube::EventRecorder* recorder,
                                           SidecarSetReconcilerOptions opts)
    : client_(client),
      inf_(informers),
      recorder_(recorder),
      opts_(std::move(opts)),
      rv_expectations_(opts_.clock) {}

void SidecarSetReconciler::ObserveThrough(kube::Informer* pods) {
  kube::ResourceEventHandler h;
  h.on_delete = [this](const Json& pod, bool) {
    rv_expectations_.Delete(kube::NamespacedName(pod));
  };
  pods->AddEventHandler(std::move(h));
}

void SidecarSetReconciler::Event(const Json& set, bool warning, const std::string& reason,
                                 const std::string& message) {
  if (recorder_ != nullptr) {
    recorder_->Event(set, warning ? kube::EventType::kWarning : kube::EventType::kNormal, reason,
                     message);
  }
}

bool SidecarSetReconciler::FirstReport(const std::string& set, const std::string& hash,
                                       const std::string& pod_uid) {
  absl::MutexLock lock(&mu_);
  auto& [seen_hash, pods] = reported_[set];
  if (seen_hash != hash) {
    seen_hash = hash;
    pods.clear();
  }
  return pods.insert(pod_uid).second;
}

absl::StatusOr<std::optional<Json>> SidecarSetReconciler::PatchPlannedPod(
    const Json& pod, const Json& ops, absl::FunctionRef<void(const absl::Status&)> report) {
  auto patched = PatchPod(pod, ops);
  if (patched.ok()) return std::optional<Json>(*std::move(patched));
  if (kube::IsNotFound(patched.status())) return std::optional<Json>();
  if (!kube::IsConflict(patched.status())) report(patched.status());
  return patched.status();
}

absl::StatusOr<Json> SidecarSetReconciler::PatchPod(const Json& pod, const Json& ops,
                                                    const std::string& subresource) {
  ASSIGN_OR_RETURN(Json patched,
                   kube::PatchIfUnchanged(client_, res::Pods(), pod, ops, subresource));
  rv_expectations_.Expect(kube::NamespacedName(patched), kube::ResourceVersion(patched));
  return patched;
}

absl::Status SidecarSetReconciler::SetUpgradable(const std::string& set_name, const Json& pod,
                                                 bool upgradable, absl::Time now) {
  ASSIGN_OR_RETURN(Json ops, SidecarSetUpgradableConditionPatch(set_name, pod, upgradable, now));
  if (ops.empty()) return absl::OkStatus();
  auto patched = PatchPod(pod, ops, "status");
  if (!patched.ok() && kube::IsNotFound(patched.status())) return absl::OkStatus();
  return patched.status();
}

void SidecarSetReconciler::PodEvent(const Json& pod, bool warning, const std::string& reason,
                                    const std::string& message) {
  if (recorder_ == nullptr) return;
  const Json ref = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", kube::Name(pod)}, {"namespace", kube::Namespace(pod)}, {"uid", kube::Uid(pod)}}}};
  recorder_->Event(ref, warning ? kube::EventType::kWarning : kube::EventType::kNormal, reason,
                   message);
}

absl::StatusOr<SidecarSetReconciler::RevisionSync> SidecarSetReconciler::SyncRevisions(
    const Json& set, const std::vector<std::shared_ptr<const Json>>& pods) {
  const std::string& ns = opts_.manager_namespace;
  const std::string set_name = kube::Name(set);
  ASSIGN_OR_RETURN(auto cached,
                   inf_.revisions->store().ByIndex(kSidecarSetRevisionIndex, set_name));
  std::vector<Json> all;
  all.reserve(cached.size());
  for (const auto& r : cached) all.push_back(*r);
  std::vector<Json> sorted = RevisionsOfSidecarSet(set, all);
  RevisionSync out;
  out.collision_count = SidecarSetCollisionCount(set);
  LatestRevisionPlan plan = PlanLatestSidecarSetRevision(set, sorted, ns);
  Json latest;
  switch (plan.action) {
    case LatestRevisionPlan::Action::kKeep:
      latest = std::move(plan.revision);
      break;
    case LatestRevisionPlan::Action::kRenumber: {
      // A rollback to the spec of an older revision: it becomes the newest.
      const std::string name = kube::Name(plan.revision);
      Json renumber = {{"revision", plan.revision_number}};
      ASSIGN_OR_RETURN(latest, client_->Patch(res::ControllerRevisions(), ns, name,
                                              kube::PatchType::kMerge, renumber));
      sorted.erase(std::remove_if(sorted.begin(), sorted.end(),
                                  [&](const Json& r) { return kube::Name(r) == name; }),
                   sorted.end());
      sorted.push_back(latest);
      break;
    }
    case LatestRevisionPlan::Action::kCreate: {
      for (int attempt = 0;; ++attempt) {
        Json fresh = NewSidecarSetRevision(set, ns, plan.revision_number, out.collision_count);
        auto created = client_->Create(res::ControllerRevisions(), ns, fresh);
        if (created.ok()) {
          latest = *std::move(created);
          break;
        }
        if (!kube::IsAlreadyExists(created.status())) return created.status();
        ASSIGN_OR_RETURN(Json existing,
                         client_->Get(res::ControllerRevisions(), ns, kube::Name(fresh)));
        if (existing.contains("data") && existing["data"] == fresh["data"]) {
          latest = std::move(existing);  // ours; the cache had not seen it yet
          break;
        }
        // Another spec under this name: a hash collision. The next name, as Kubernetes does.
        if (attempt >= 8) {
          return absl::AbortedError(
              absl::StrCat("SidecarSet ", set_name, ": too many revision name collisions"));
        }
        ++out.collision_count;
      }
      sorted.push_back(latest);
      break;
    }
  }
  // The custom version follows the set onto its latest revision (OpenKruise patches the label).
  if (std::string cv = SidecarSetCustomVersion(set);
      !cv.empty() && kube::Label(latest, kSidecarSetCustomVersionLabel) != cv) {
    Json patch = {{"metadata", {{"labels", {{kSidecarSetCustomVersionLabel, cv}}}}}};
    ASSIGN_OR_RETURN(latest, client_->Patch(res::ControllerRevisions(), ns, kube::Name(latest),
                                            kube::PatchType::kMerge, patch));
    sorted.back() = latest;
  }
  out.latest = kube::Name(latest);
  // History beyond the limit, never what a pod, the injection strategy or the latest uses.
  std::set<std::string> used = {out.latest};
  for (const auto& p : pods) {
    if (std::string r = PodSidecarSetControllerRevision(*p, set_name); !r.empty()) used.insert(r);
  }
  for (const std::string& name : SidecarSetRevisionsToPrune(set, sorted, used)) {
    absl::Status st = client_->Delete(res::ControllerRevisions(), ns, name);
    if (!st.ok() && !kube::IsNotFound(st)) return st;
  }
  return out;
}

absl::StatusOr<kube::Result> SidecarSetReconciler::Reconcile(const kube::Request& req) {
  auto cached = inf_.sidecarsets->store().Get("", req.name);
  if (cached == nullptr) {
    absl::MutexLock lock(&mu_);
    reported_.erase(req.name);
    return kube::Result{};
  }
  const Json& set = *cached;
  if (kube::IsBeingDeleted(set)) return kube::Result{};
  auto target = ParseSidecarSetUpgradeTarget(set);
  if (!target.ok()) {
    Event(set, true, "InvalidSpec", std::string(target.status().message()));
    return kube::TerminalError(target.status());
  }

  // 1. Candidates: pods that name the set in their injected list and that it still selects.
  // The pod cache's index: only pods that list the set are decoded, however many pods there are.
  ASSIGN_OR_RETURN(
      std::vector<std::shared_ptr<const Json>> cached_pods,
      inf_.pods->store().ByIndex(SharedInformers::kInjectedSidecarSetIndex, target->name));
  const SidecarSetMatcher matcher = UpgradeMatcher(set);
  std::vector<std::shared_ptr<const Json>> pods;
  std::vector<const Json*> ptrs;
  for (auto& p : cached_pods) {
    const PodFacts facts = PodFacts::Of(*p, opts_.manager_namespace);
    std::shared_ptr<const Json> ns_obj;
    if (inf_.namespaces != nullptr) ns_obj = inf_.namespaces->store().Get("", facts.namespace_);
    if (!matcher.Matches(facts, ns_obj.get())) continue;
    // 2. A pod we patched must be in the cache as patched before we plan again.
    if (!rv_expectations_.SatisfiedByCache(*p)) return kube::Result{opts_.expectation_recheck};
    ptrs.push_back(p.get());
    pods.push_back(std::move(p));
  }

  // 2b. Revision history.
  std::optional<RevisionSync> revisions;
  if (inf_.revisions != nullptr) {
    auto synced = SyncRevisions(set, pods);
    if (!synced.ok()) {
      if (kube::IsConflict(synced.status())) return kube::Result{absl::Seconds(1)};
      return synced.status();
    }
    revisions = *std::move(synced);
    target->latest_revision = revisions->latest;
  }

  // 3. Plan and status.
  auto planned = PlanSidecarSetUpgrade(*target, ptrs);
  if (!planned.ok()) {
    Event(set, true, "InvalidSpec", std::string(planned.status().message()));
    return kube::TerminalError(planned.status());
  }
  const SidecarSetUpgradePlan& plan = *planned;
  Json status = {{"observedGeneration", kube::Generation(set)},
                 {"matchedPods", plan.matched_pods},
                 {"updatedPods", plan.updated_pods},
                 {"readyPods", plan.ready_pods},
                 {"updatedReadyPods", plan.updated_ready_pods}};
  if (revisions.has_value()) {
    status["latestRevision"] = revisions->latest;
    status["collisionCount"] = revisions->collision_count;
  }
  const Json* old = kube::FindPath(set, {"status"});
  bool changed = old == nullptr || !old->is_object();
  for (auto it = status.begin(); !changed && it != status.end(); ++it) {
    changed = !old->contains(it.key()) || (*old)[it.key()] != it.value();
  }
  if (changed) {
    auto st = client_->Patch(res::SidecarSets(), "", target->name, kube::PatchType::kMerge,
                             {{"status", status}}, "status");
    if (!st.ok() && !kube::IsNotFound(st.status())) return st.status();
  }
  bool upgrading = false;
  for (size_t i = 0; i < pods.size(); ++i) {
    upgrading |= plan.pods[i].upgrading;
    if (plan.pods[i].state == SidecarPodState::kMalformed) {
      Logger("sidecarset")
          ->debug("{}: pod {} skipped: {}", target->name, kube::NamespacedName(*pods[i]),
                  plan.pods[i].problem);
    }
  }

  // 4. Not upgradable pods: one event each per set hash.
  for (size_t i : plan.not_upgradable) {
    if (!FirstReport(target->name, target->hash, kube::Uid(*pods[i]))) continue;
    Event(set, false, "NotUpgradablePods",
          absl::StrCat("SidecarSet in-place update detected pod ", kube::NamespacedName(*pods[i]),
                       " not upgradable: more than sidecar images changed since it was injected "
                       "(applies to new pods only); skipping it"));
  }
  // Pod condition SidecarSetUpgradable: false for those (when the rollout would consider them),
  // true again for updated pods it marks false. Written only when it changes.
  const absl::Time now = opts_.clock->Now();
  absl::Status failure = absl::OkStatus();
  for (size_t i : plan.mark_not_upgradable) {
    failure = SetUpgradable(target->name, *pods[i], false, now);
    if (!failure.ok()) break;
  }
  for (size_t i = 0; failure.ok() && i < pods.size(); ++i) {
    if (plan.pods[i].state == SidecarPodState::kUpdated &&
        MarkedNotUpgradable(target->name, *pods[i])) {
      failure = SetUpgradable(target->name, *pods[i], true, now);
    }
  }

  // 4b. Hot upgrades whose new container is ready: the old one goes back to the empty image.
  for (size_t i : plan.reset) {
    if (!failure.ok()) break;
    const Json& pod = *pods[i];
    auto patch = SidecarPodHotUpgradeResetPatch(*target, pod, now);
    if (!patch.ok()) {
      PodEvent(
          pod, true, "ResetContainerFailed",
          absl::StrCat("reset sidecar container image empty failed: ", patch.status().message()));
      continue;
    }
    if (patch->ops.empty()) continue;
    auto patched = PatchPlannedPod(pod, patch->ops, [&](const absl::Status& st) {
      PodEvent(pod, true, "ResetContainerFailed",
               absl::StrCat("reset sidecar container image empty failed: ", st.message()));
    });
    if (!patched.ok()) {
      failure = patched.status();
      break;
    }
    if (!patched->has_value()) continue;  // gone
    PodEvent(pod, false, "ResetContainerSucceed",
             absl::StrCat("reset sidecar container(s) ", absl::StrJoin(patch->containers, ", "),
                          " image empty successfully (SidecarSet ", target->name, ")"));
  }

  // 5. Upgrade the pods picked, each guarded by its resourceVersion.
  std::vector<std::string> upgraded;
  std::set<std::string> containers;
  inplace::HeldPods held;
  for (size_t i : plan.upgrade) {
    if (!failure.ok()) break;
    const Json& pod = *pods[i];
    auto patch = SidecarPodUpgradePatch(*target, pod, now);
    if (!patch.ok() || !patch->missing.empty()) {
      const std::string why = patch.ok() ? absl::StrCat("it lacks sidecar container(s) ",
                                                        absl::StrJoin(patch->missing, ", "))
                                         : std::string(patch.status().message());
      Event(set, true, "FailedUpgradePod",
            absl::StrCat("cannot upgrade pod ", kube::NamespacedName(pod), ": ", why));
      continue;  // one bad pod does not stop the rollout
    }
    if (patch->ops.empty()) continue;
    if (opts_.disruption_gate != nullptr) {
      auto gate = opts_.disruption_gate->Allow(pod, inplace::DisruptionOperation::kUpdate,
                                               /*dry_run=*/false);
      if (!gate.ok()) {
        failure = gate.status();
        break;
      }
      if (!gate->allowed) {
        held.Add(kube::NamespacedName(pod), *gate);
        continue;  // the budget holds this pod; others may be under other budgets
      }
    }
    auto patched = PatchPlannedPod(pod, patch->ops, [&](const absl::Status& st) {
      Event(set, true, "FailedUpgradePod",
            absl::StrCat("failed to upgrade pod ", kube::NamespacedName(pod), ": ", st.message()));
    });
    if (!patched.ok()) {
      failure = patched.status();
      break;  // the plan was made on what is now stale: plan again
    }
    if (!patched->has_value()) continue;  // gone
    upgraded.push_back(kube::NamespacedName(pod));
    containers.insert(patch->containers.begin(), patch->containers.end());
    // OpenKruise marks the pod upgradable once patched; on the pod the server returned.
    failure = SetUpgradable(target->name, **patched, true, now);
  }
  if (!upgraded.empty()) {
    Event(set, false, "UpgradedPods",
          absl::StrCat("upgraded sidecar(s) ", absl::StrJoin(containers, ", "),
                       " in place in pod(s) ", absl::StrJoin(upgraded, ", ")));
  }
  if (!held.empty()) Event(set, true, inplace::kDisruptionDeniedReason, held.Message());
  if (!failure.ok()) {
    if (kube::IsConflict(failure)) return kube::Result{absl::Seconds(1)};
    return failure;
  }
  // A budget frees when a pod becomes available again, often one of ours, whose event brings
  // the set back first: the requeue is the fallback.
  if (!held.empty()) {
    return kube::Result{std::min(inplace::kDisruptionRetry, opts_.upgrading_recheck)};
  }
  // 6. Mid-upgrade: container restarts are pod events; the requeue is the fallback.
  if (upgrading || !upgraded.empty() || !plan.reset.empty()) {
    return kube::Result{opts_.upgrading_recheck};
  }
  return kube::Result{};
}

// ---- Controller group -------------------------------------------------------------------------

namespace {

class SidecarSetGroup : public ControllerGroup {
 public:
  std::string Name() const override { return "sidecarset"; }

  absl::Status Register(const ControllerContext& ctx) override {
    RETURN_IF_ERROR(CheckControllerContext(ctx, "sidecarset"));
    if (!kube::Served(ctx.client, res::SidecarSets())) {
      Logger("sidecarset")->warn("SidecarSet CRD is not served: SidecarSet controller off");
      return absl::OkStatus();
    }
    auto make = [&](kube::InformerOptions o) { return informers_.Make(ctx, std::move(o)); };
    SidecarSetInformers inf;
    // The same SidecarSet and Namespace caches as the pod webhook's (manager/app).
    auto shared = [&](const char* name, kube::InformerOptions (*options)()) {
      return ctx.shared != nullptr ? ctx.shared->Named(name, options) : make(options());
    };
    inf.sidecarsets = shared(kSidecarSetInformer, &SidecarSetInformerOptions);
    inf.pods = ctx.shared != nullptr ? ctx.shared->Pods() : make(SharedInformers::PodOptions());
    inf.namespaces = shared(kNamespaceInformer, &NamespaceInformerOptions);
    auto revision_options = [ns = ctx.namespace_name] {
      return SidecarSetRevisionInformerOptions(ns);
    };
    inf.revisions = ctx.shared != nullptr
                        ? ctx.shared->Named(kSidecarSetRevisionInformer, revision_options)
                        : make(revision_options());

    SidecarSetReconcilerOptions ro;
    ro.clock = ctx.clock;
    ro.manager_namespace = ctx.namespace_name;
    ro.disruption_gate = ctx.disruption_gate;
    reconciler_ = std::make_unique<SidecarSetReconciler>(ctx.client, inf, ctx.recorder, ro);
    reconciler_->ObserveThrough(inf.pods);
    kube::ControllerOptions co;
    co.clock = ctx.clock;
    co.workers = ctx.workers("sidecarset", 3);
    controller_ = std::make_unique<kube::Controller>("sidecarset", reconciler_.get(), co);
    controller_->Watch(inf.sidecarsets, kube::EnqueueSelf(), {kube::ResourceVersionChanged()});
    controller_->Watch(inf.pods, kube::EnqueueMapped(SidecarSetsOfPod),
                       {kube::ResourceVersionChanged()});
    // A revision deleted or changed by someone else: its set makes sure of its history again.
    auto set_of_revision = [](const Json& r) {
      std::vector<kube::Request> out;
      if (auto set = kube::Label(r, kSidecarSetNameLabel)) out.push_back({"", *set});
      return out;
    };
    controller_->Watch(inf.revisions, kube::EnqueueMapped(set_of_revision),
                       {kube::ResourceVersionChanged()});
    ctx.manager->Add(controller_.get());

    // Pods created without the sidecars of a matching set (sidecarset_not_injected.h). Without
    // the pod webhook no pod is ever injected: nothing to say then.
    if (ctx.feature_enabled("PodWebhook")) {
      created_sets_.Attach(inf.sidecarsets);
      SidecarSetNotInjectedOptions no;
      no.manager_namespace = ctx.namespace_name;
      not_injected_ = std::make_unique<SidecarSetNotInjectedReconciler>(
          ctx.client, &created_sets_, inf.pods, inf.namespaces, ctx.recorder,
          [this](const kube::Request& r) { not_injected_controller_->Enqueue(r); }, no);
      kube::ControllerOptions nco;
      nco.clock = ctx.clock;
      not_injected_controller_ =
          std::make_unique<kube::Controller>("sidecarset-not-injected", not_injected_.get(), nco);
      // The manager starts it once every cache synced (kube/manager.h): the AllPods pass sees
      // every set.
      WatchPodsNotInjected(not_injected_controller_.get(), not_injected_.get(), inf.pods);
      ctx.manager->Add(not_injected_controller_.get());
    }
    return absl::OkStatus();
  }

 private:
  OwnedInformers informers_;
  std::unique_ptr<SidecarSetReconciler> reconciler_;
  std::unique_ptr<kube::Controller> controller_;
  CreatedSidecarSets created_sets_;
  std::unique_ptr<SidecarSetNotInjectedReconciler> not_injected_;
  std::unique_ptr<kube::Controller> not_injected_controller_;
};

}  // namespace

std::unique_ptr<ControllerGroup> NewSidecarSetControllerGroup() {
  return std::make_unique<SidecarSetGroup>();
}

}  // namespace kruise::manager::sidecarset
