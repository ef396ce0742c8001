#include "manager/sidecarset/sidecarset_not_injected.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kube/errors.h"
#include "kube/object.h"
#include "kube/resources.h"
#include "manager/controller_group.h"

namespace kruise::manager::sidecarset {

using Json = nlohmann::json;

CreatedSidecarSet::CreatedSidecarSet(const Json& sidecarset)
    : matcher(sidecarset), created(kube::CreationTimestamp(sidecarset)) {}

std::vector<std::string> NotInjectedSidecarSetsNoted(const Json& pod) {
  std::vector<std::string> out;
  const Json* noted =
      kube::FindPath(pod, {"metadata", "annotations", kSidecarSetNotInjectedAnnotation});
  if (noted == nullptr || !noted->is_string()) return out;
  for (absl::string_view name :
       absl::StrSplit(noted->get_ref<const std::string&>(), ',', absl::SkipWhitespace())) {
    out.emplace_back(absl::StripAsciiWhitespace(name));
  }
  return out;
}

bool PodWebhookSkipsNamespace(const Json* namespace_obj) {
  if (namespace_obj == nullptr) return false;
  // deploy/manager/base/webhooks.yaml, mpod.kb.io's namespaceSelector (kube-system is not
  // injectable anyway).
  return kube::Label(*namespace_obj, "control-plane") == "openkruise" ||
         kube::Label(*namespace_obj, "pod-webhook.kruise.io/disabled").has_value();
}

std::vector<std::string> SidecarSetsNotInjected(const Json& pod,
                                                const std::vector<const CreatedSidecarSet*>& sets,
                                                const NamespaceLookup& namespace_of,
                                                absl::string_view manager_namespace) {
  std::vector<std::string> out;
  if (sets.empty() || !pod.is_object()) return out;
  const std::optional<absl::Time> created = kube::CreationTimestamp(pod);
  if (!created.has_value()) return out;
  // The cheap tests first: most pods are older than every set or have them all injected.
  std::set<std::string> skip;
  bool listed = false;
  std::vector<const CreatedSidecarSet*> candidates;
  for (const CreatedSidecarSet* s : sets) {
    if (s == nullptr || !s->created.has_value() || !(*s->created < *created) ||
        s->matcher.never()) {
      continue;
    }
    if (!listed) {
      listed = true;
      for (std::string& n : SharedInformers::InjectedSidecarSets(pod)) skip.insert(std::move(n));
      for (std::string& n : NotInjectedSidecarSetsNoted(pod)) skip.insert(std::move(n));
    }
    if (skip.count(s->matcher.name()) == 0) candidates.push_back(s);
  }
  if (candidates.empty()) return out;
  const PodFacts facts = PodFacts::Of(pod, manager_namespace);
  if (!facts.injectable) return out;
  std::shared_ptr<const Json> ns = namespace_of ? namespace_of(facts.namespace_) : nullptr;
  if (PodWebhookSkipsNamespace(ns.get())) return out;
  const std::optional<std::map<std::string, std::string>> ns_labels =
      SidecarSetMatcher::NamespaceLabels(ns.get(), facts.namespace_);
  for (const CreatedSidecarSet* s : candidates) {
    if (s->matcher.Matches(facts, ns_labels)) out.push_back(s->matcher.name());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Json SidecarSetNotInjectedPatch(const Json& pod, const std::vector<std::string>& names) {
  std::set<std::string> all(names.begin(), names.end());
  for (std::string& n : NotInjectedSidecarSetsNoted(pod)) all.insert(std::move(n));
  return {{"metadata",
           {{"resourceVersion", kube::ResourceVersion(pod)},
            {"annotations", {{kSidecarSetNotInjectedAnnotation, absl::StrJoin(all, ",")}}}}}};
}

std::string SidecarSetNotInjectedMessage(const std::vector<std::string>& names) {
  return absl::StrCat(names.size() == 1 ? "SidecarSet " : "SidecarSets ",
                      absl::StrJoin(names, ", "),
                      " matched this pod when it was created but the pod webhook did not inject ",
                      names.size() == 1 ? "its sidecars" : "their sidecars",
                      " (e.g. no kruise-manager was reachable: the webhook's failurePolicy Ignore "
                      "let the pod be created as sent); recreate the pod to get them");
}

// ---- CreatedSidecarSets -------------------------------------------------------------------------

CreatedSidecarSets::CreatedSidecarSets() : snapshot_(std::make_shared<const Snapshot>()) {}

std::shared_ptr<const CreatedSidecarSets::Snapshot> CreatedSidecarSets::Get() const {
  absl::MutexLock lock(&mu_);
  return snapshot_;
}

void CreatedSidecarSets::Set(
    std::map<std::string, std::shared_ptr<const CreatedSidecarSet>> by_name) {
  auto next = std::make_shared<Snapshot>();
  next->by_name = std::move(by_name);
  for (const auto& [name, set] : next->by_name) {  // by name: every list below stays sorted
    next->all.push_back(set.get());
    set->matcher.IndexInto(&next->index, set.get());
  }
  absl::MutexLock lock(&mu_);
  snapshot_ = std::move(next);
}

std::vector<const CreatedSidecarSet*> CreatedSidecarSets::Snapshot::For(const Json& pod) const {
  static const Json kNoLabels = Json::object();
  const Json* labels = kube::FindPath(pod, {"metadata", "labels"});
  return index.Candidates(labels != nullptr ? *labels : kNoLabels);
}

void CreatedSidecarSets::Upsert(const Json& sidecarset) {
  auto entry = std::make_shared<const CreatedSidecarSet>(sidecarset);
  const std::string name = kube::Name(sidecarset);
  if (name.empty()) return;
  absl::MutexLock write(&write_mu_);
  auto by_name = Get()->by_name;
  by_name[name] = std::move(entry);
  Set(std::move(by_name));
}

void CreatedSidecarSets::Remove(const std::string& name) {
  absl::MutexLock write(&write_mu_);
  auto by_name = Get()->by_name;
  if (by_name.erase(name) == 0) return;
  Set(std::move(by_name));
}

void CreatedSidecarSets::Attach(kube::Informer* sidecarsets) {
  sidecarsets->AddEventHandler({
      .on_add = [this](const Json& s) { Upsert(s); },
      .on_update = [this](const Json&, const Json& s) { Upsert(s); },
      .on_delete = [this](const Json& s, bool) { Remove(kube::Name(s)); },
  });
}

// ---- Reconciler ---------------------------------------------------------------------------------

SidecarSetNotInjectedReconciler::SidecarSetNotInjectedReconciler(
    kube::KubeClient* client, const CreatedSidecarSets* sets, kube::Informer* pods,
    kube::Informer* namespaces, kube::EventRecorder* recorder,
    std::function<void(const kube::Request&)> enqueue, SidecarSetNotInjectedOptions opts)
    : client_(client),
      sets_(sets),
      pods_(pods),
      namespaces_(namespaces),
      recorder_(recorder),
      enqueue_(std::move(enqueue)),
      opts_(std::move(opts)) {}

std::vector<std::string> SidecarSetNotInjectedReconciler::ToNote(const Json& pod) const {
  // `sets` points into the snapshot: it stays alive until the decision is made (a SidecarSet
  // update swaps the snapshot and frees the set it replaced).
  const std::shared_ptr<const CreatedSidecarSets::Snapshot> snapshot = sets_->Get();
  const std::vector<const CreatedSidecarSet*> sets = snapshot->For(pod);
  if (sets.empty()) return {};
  NamespaceLookup namespace_of;
  if (namespaces_ != nullptr) {
    namespace_of = [this](const std::string& name) { return namespaces_->store().Get("", name); };
  }
  return SidecarSetsNotInjected(pod, sets, namespace_of, opts_.manager_namespace);
}

absl::StatusOr<kube::Result> SidecarSetNotInjectedReconciler::Reconcile(const kube::Request& req) {
  if (req == AllPods()) {
    // Once per leader: the pods whose events came before their sets reached the cache. One pod
    // decoded at a time (the cache holds 30k of them encoded).
    if (auto sets = sets_->Get(); sets->index.empty()) {
      return kube::Result{};  // no set that can match a pod
    }
    size_t found = 0;
    for (const std::string& key : pods_->store().ListKeys()) {
      std::shared_ptr<const Json> pod = pods_->store().Get(key);
      if (pod == nullptr || ToNote(*pod).empty()) continue;
      ++found;
      if (enqueue_) enqueue_(kube::Request::FromKey(key));
    }
    if (found > 0) {
      Logger("sidecarset")
          ->info("{} pod(s) created without the sidecars of a matching SidecarSet", found);
    }
    return kube::Result{};
  }
  std::shared_ptr<const Json> cached = pods_->store().Get(req.ns, req.name);
  if (cached == nullptr) return kube::Result{};
  const Json& pod = *cached;
  const std::vector<std::string> names = ToNote(pod);
  if (names.empty()) return kube::Result{};
  auto patched = client_->Patch(kube::resources::Pods(), req.ns, req.name, kube::PatchType::kMerge,
                                SidecarSetNotInjectedPatch(pod, names));
  if (!patched.ok()) {
    if (kube::IsNotFound(patched.status())) return kube::Result{};
    // Changed since the cache saw it: its update event brings the pod back.
    if (kube::IsConflict(patched.status())) return kube::Result{opts_.conflict_recheck};
    return Annotate(patched.status(), absl::StrCat("noting pod ", req.Key()));
  }
  Logger("sidecarset")
      ->info("pod {} was created without the sidecars of SidecarSet(s) {}", req.Key(),
             absl::StrJoin(names, ", "));
  if (recorder_ != nullptr) {
    const Json ref = {{"apiVersion", "v1"},
                      {"kind", "Pod"},
                      {"metadata",
                       {{"name", kube::Name(*patched)},
                        {"namespace", kube::Namespace(*patched)},
                        {"uid", kube::Uid(*patched)}}}};
    recorder_->Event(ref, kube::EventType::kWarning, kSidecarSetNotInjectedReason,
                     SidecarSetNotInjectedMessage(names));
  }
  return kube::Result{};
}

void WatchPodsNotInjected(kube::Controller* controller,
                          const SidecarSetNotInjectedReconciler* reconciler, kube::Informer* pods) {
  kube::Predicate to_note;
  to_note.create = [reconciler](const Json& pod) { return !reconciler->ToNote(pod).empty(); };
  to_note.update = [reconciler](const Json&, const Json& pod) {
    return !reconciler->ToNote(pod).empty();
  };
  to_note.del = [](const Json&) { return false; };
  controller->Watch(pods, kube::EnqueueSelf(), {kube::ResourceVersionChanged(), to_note});
  controller->Enqueue(SidecarSetNotInjectedReconciler::AllPods());
}

}  // namespace kruise::manager::sidecarset
