#include "manager/pub/pub_webhook.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "kube/errors.h"
#include "kube/object.h"
#include "manager/pub/pub_admission.h"

namespace kruise::manager::pub {

using kube::Json;
using webhook::AdmissionRequest;
using webhook::AdmissionResponse;

kube::InformerOptions PubInformerOptions() {
  kube::InformerOptions o;
  o.resource = PubResource();
  o.indexers[kube::kNamespaceIndex] = kube::NamespaceIndexFunc();
  return o;
}

// ---- PubCache -----------------------------------------------------------------------------------

void PubCache::Upsert(const Json& pub) {
  auto entry = std::make_shared<Entry>();
  entry->object = std::make_shared<const Json>(pub);
  if (auto parsed = ParsePub(pub); parsed.ok()) entry->pub = *std::move(parsed);
  const std::string ns = kube::Namespace(pub), name = kube::Name(pub);
  absl::MutexLock write(&write_mu_);
  std::shared_ptr<const Snapshot> current;
  {
    absl::MutexLock lock(&mu_);
    current = snapshot_;
  }
  auto next = std::make_shared<Snapshot>(*current);
  auto it = next->find(ns);
  auto space = it != next->end() ? std::make_shared<Namespace>(*it->second)
                                 : std::make_shared<Namespace>();
  (*space)[name] = std::move(entry);
  (*next)[ns] = std::move(space);
  absl::MutexLock lock(&mu_);
  snapshot_ = std::move(next);
}

void PubCache::Remove(const std::string& ns, const std::string& name) {
  absl::MutexLock write(&write_mu_);
  std::shared_ptr<const Snapshot> current;
  {
    absl::MutexLock lock(&mu_);
    current = snapshot_;
  }
  auto it = current->find(ns);
  if (it == current->end() || it->second->count(name) == 0) return;
  auto next = std::make_shared<Snapshot>(*current);
  auto space = std::make_shared<Namespace>(*it->second);
  space->erase(name);
  if (space->empty()) {
    next->erase(ns);
  } else {
    (*next)[ns] = std::move(space);
  }
  absl::MutexLock lock(&mu_);
  snapshot_ = std::move(next);
}

void PubCache::Attach(kube::Informer* pubs) {
  pubs->AddEventHandler({
      .on_add = [this](const Json& p) { Upsert(p); },
      .on_update = [this](const Json&, const Json& p) { Upsert(p); },
      .on_delete = [this](const Json& p, bool) { Remove(kube::Namespace(p), kube::Name(p)); },
  });
}

std::shared_ptr<const PubCache::Namespace> PubCache::In(const std::string& ns) const {
  std::shared_ptr<const Snapshot> snap;
  {
    absl::MutexLock lock(&mu_);
    snap = snapshot_;
  }
  auto it = snap->find(ns);
  return it != snap->end() ? it->second : nullptr;
}

std::vector<std::shared_ptr<const Json>> PubCache::ObjectsIn(const std::string& ns) const {
  std::vector<std::shared_ptr<const Json>> out;
  if (auto space = In(ns)) {
    for (const auto& [name, e] : *space) out.push_back(e->object);
  }
  return out;
}

std::shared_ptr<const PubCache::Entry> PubCache::Covering(const Json& pod) const {
  auto space = In(kube::Namespace(pod));
  if (space == nullptr) return nullptr;
  for (const auto& [name, e] : *space) {
    if (e->pub && PubCoversPod(*e->pub, pod)) return e;
  }
  return nullptr;
}

std::vector<std::string> PubCache::Concerning(const Json& pod) const {
  std::vector<std::string> out;
  auto space = In(kube::Namespace(pod));
  if (space == nullptr) return out;
  std::string owner_kind;
  if (const Json* refs = kube::FindPath(pod, {"metadata", "ownerReferences"});
      refs != nullptr && refs->is_array()) {
    for (const Json& r : *refs) {
      if (r.is_object() && r.value("controller", false)) {
        owner_kind = r.value("kind", "");
        break;
      }
    }
  }
  for (const auto& [name, e] : *space) {
    if (!e->pub) continue;
    if (e->pub->selector ? e->pub->selector->MatchesObject(pod)
                         : !owner_kind.empty() && e->pub->target_ref &&
                               owner_kind == OwnerKindOfTarget(*e->pub->target_ref)) {
      out.push_back(name);
    }
  }
  return out;
}

size_t PubCache::size() const {
  std::shared_ptr<const Snapshot> snap;
  {
    absl::MutexLock lock(&mu_);
    snap = snapshot_;
  }
  size_t n = 0;
  for (const auto& [ns, space] : *snap) n += space->size();
  return n;
}

// ---- PUB validation -----------------------------------------------------------------------------

AdmissionResponse PubValidatingHandler::Handle(const AdmissionRequest& req) {
  if (req.operation != "CREATE" && req.operation != "UPDATE") return webhook::Allowed();
  if (!req.object.is_object()) return webhook::Denied(400, "no object in the request");
  if (!enabled_) {
    return webhook::Denied(400,
                           "feature PodUnavailableBudget is off: enable feature gate "
                           "PodUnavailableBudgetDeleteGate or PodUnavailableBudgetUpdateGate");
  }
  const bool update = req.operation == "UPDATE" && req.old_object.is_object();
  std::vector<std::string> problems = PubProblems(req.object, update ? &req.old_object : nullptr);
  Json pub = req.object;
  // The request's namespace is the object's (a CREATE may leave metadata.namespace out).
  if (kube::Namespace(pub).empty() && !req.namespace_.empty() && pub["metadata"].is_object()) {
    pub["metadata"]["namespace"] = req.namespace_;
  }
  for (std::string& c : PubConflicts(pub, cache_->ObjectsIn(req.namespace_))) {
    problems.push_back(std::move(c));
  }
  if (!problems.empty()) {
    return webhook::Denied(422, absl::StrCat("PodUnavailableBudget ", kube::Name(pub), ": ",
                                             absl::StrJoin(problems, "; ")));
  }
  return webhook::Allowed();
}

// ---- Pod admission ------------------------------------------------------------------------------

namespace {

bool DryRunEviction(const Json& eviction) {
  const Json* dry = kube::FindPath(eviction, {"deleteOptions", "dryRun"});
  return dry != nullptr && dry->is_array() && !dry->empty();
}

}  // namespace

AdmissionResponse PubPodValidator::Handle(const AdmissionRequest& req) {
  if (std::find(opts_.excluded_namespaces.begin(), opts_.excluded_namespaces.end(),
                req.namespace_) != opts_.excluded_namespaces.end()) {
    return webhook::Allowed();
  }
  Operation op;
  bool dry_run = req.dry_run;
  Json fetched;
  const Json* pod = nullptr;
  if (req.operation == "DELETE") {
    if (!opts_.guard_delete || !req.sub_resource.empty() || !req.old_object.is_object()) {
      return webhook::Allowed();
    }
    op = Operation::kDelete;
    pod = &req.old_object;
  } else if (req.operation == "CREATE") {
    if (!opts_.guard_delete || req.sub_resource != "eviction") return webhook::Allowed();
    op = Operation::kEvict;
    dry_run = dry_run || DryRunEviction(req.object);
    auto got = pods_->GetPod(req.namespace_, req.name);
    if (!got.ok()) {
      if (kube::IsNotFound(got.status())) return webhook::Allowed();
      if (opts_.fail_open != nullptr) {
        const Json ref = webhook::ObjectRef("v1", "Pod", req.namespace_, req.name);
        return opts_.fail_open->Allow(kValidatePodPath, "podunavailablebudget",
                                      "eviction not checked: reading the pod", got.status(),
                                      &ref);
      }
      return webhook::Denied(500, absl::StrCat("reading pod ", req.namespace_, "/", req.name,
                                               " for its PodUnavailableBudget: ",
                                               got.status().message()));
    }
    fetched = *std::move(got);
    pod = &fetched;
  } else if (req.operation == "UPDATE") {
    if (!opts_.guard_update || !req.sub_resource.empty() || !req.old_object.is_object() ||
        !req.object.is_object() || !UpdateMakesUnavailable(req.old_object, req.object)) {
      return webhook::Allowed();
    }
    op = Operation::kUpdate;
    pod = &req.old_object;
  } else {
    return webhook::Allowed();
  }
  Json with_ns;
  if (kube::Namespace(*pod).empty()) {  // objects of a request may leave it out
    with_ns = *pod;
    if (with_ns["metadata"].is_object()) with_ns["metadata"]["namespace"] = req.namespace_;
    pod = &with_ns;
  }
  const BudgetVerdict v = JudgeDisruption(*cache_, client_, opts_.clock, *pod, op, dry_run);
  if (v.allowed) return webhook::Allowed();
  if (v.infrastructure && opts_.fail_open != nullptr) {
    const Json ref = webhook::ObjectRef("policy.kruise.io/v1alpha1", "PodUnavailableBudget",
                                        kube::Namespace(*pod), v.pub);
    return opts_.fail_open->Allow(
        kValidatePodPath, "podunavailablebudget",
        absl::StrCat(OperationName(op), " of pod ", kube::Name(*pod), " not counted"),
        absl::UnavailableError(v.message), &ref);
  }
  return webhook::Denied(v.code, v.message,
                         v.code == 403   ? "Forbidden"
                         : v.code == 409 ? "Conflict"
                                         : "");
}

namespace {

BudgetVerdict Deny(int code, std::string pub, std::string message) {
  return {.allowed = false,
          .code = code,
          .pub = std::move(pub),
          .message = std::move(message),
          .infrastructure = code != 403};
}

}  // namespace

BudgetVerdict JudgeDisruption(const PubCache& cache, kube::KubeClient* client, Clock* clock,
                              const Json& pod, Operation op, bool dry_run) {
  const PodFacts facts = PodFactsOf(pod);
  // Cheap exits before looking for the PUB (DecideDisruption says the same).
  if (facts.no_protect || !facts.ready || !facts.consistent) return {};
  auto entry = cache.Covering(pod);
  if (entry == nullptr) return {};
  Pub pub = *entry->pub;
  for (int attempt = 0; attempt <= kube::kConflictRetries; ++attempt) {
    Decision d = DecideDisruption(pub, facts, op, dry_run, clock->Now());
    if (!d.allowed) return Deny(403, pub.name, d.message);
    if (!d.new_status) return {.pub = pub.name};
    const Json status = d.new_status->ToJson();
    const char* map = op == Operation::kUpdate ? "unavailablePods" : "disruptedPods";
    Json patch = Json::array(
        {{{"op", "test"}, {"path", "/metadata/resourceVersion"}, {"value", pub.resource_version}},
         {{"op", "add"},
          {"path", "/status/unavailableAllowed"},
          {"value", status["unavailableAllowed"]}},
         {{"op", "add"}, {"path", absl::StrCat("/status/", map)}, {"value", status[map]}}});
    auto written = client->Patch(PubResource(), pub.namespace_, pub.name, kube::PatchType::kJson,
                                 patch, "status");
    if (written.ok()) {
      Logger("pub")->info(
          "{} of pod {}/{} allowed by PodUnavailableBudget {} (unavailableAllowed "
          "now {})",
          OperationName(op), pub.namespace_, facts.name, pub.name,
          d.new_status->unavailable_allowed);
      return {.pub = pub.name};
    }
    if (kube::IsNotFound(written.status())) return {};
    const bool maybe_conflict = kube::IsConflict(written.status()) ||
                                written.status().code() == absl::StatusCode::kInvalidArgument;
    if (!maybe_conflict) {
      return Deny(
          500, pub.name,
          absl::StrCat("recording the ", OperationName(op), " of pod ", facts.name,
                       " in PodUnavailableBudget ", pub.name, ": ", written.status().message()));
    }
    auto fresh = client->Get(PubResource(), pub.namespace_, pub.name);
    if (!fresh.ok()) {
      if (kube::IsNotFound(fresh.status())) return {};
      return Deny(500, pub.name,
                  absl::StrCat("re-reading PodUnavailableBudget ", pub.name, ": ",
                               fresh.status().message()));
    }
    if (kube::ResourceVersion(*fresh) == pub.resource_version) {
      // The test held: the patch itself was refused.
      return Deny(
          500, pub.name,
          absl::StrCat("recording the ", OperationName(op), " of pod ", facts.name,
                       " in PodUnavailableBudget ", pub.name, ": ", written.status().message()));
    }
    auto parsed = ParsePub(*fresh);
    if (!parsed.ok()) return {};  // no longer a valid budget: guards nothing
    pub = *std::move(parsed);
  }
  return Deny(409, pub.name,
              absl::StrCat("PodUnavailableBudget ", pub.name,
                           " changed too often while recording this pod: try again"));
}

bool RegisterPubHandlers(webhook::HandlerRegistry* registry, const PubCache* cache,
                         kube::KubeClient* client, webhook::PodReader* pods,
                         const PubHandlerOptions& opts) {
  if (!kube::Served(client, PubResource())) {
    Logger("pub")->warn("PodUnavailableBudget CRD is not served: no PUB webhooks");
    return false;
  }
  const bool enabled = opts.delete_gate || opts.update_gate;
  registry->Register(kPubValidatePath, std::make_shared<PubValidatingHandler>(cache, enabled));
  if (opts.pod_webhook && enabled) {
    PubPodValidatorOptions po;
    po.clock = opts.clock;
    po.guard_delete = opts.delete_gate;
    po.guard_update = opts.update_gate;
    if (!opts.manager_namespace.empty()) po.excluded_namespaces.push_back(opts.manager_namespace);
    po.fail_open = opts.fail_open;
    registry->Register(kValidatePodPath,
                       std::make_shared<PubPodValidator>(cache, client, pods, std::move(po)));
  }
  return true;
}

}  // namespace kruise::manager::pub
