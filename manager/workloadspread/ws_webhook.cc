#include "manager/workloadspread/ws_webhook.h"

#include <utility>

#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kube/deployment_naming.h"
#include "kube/errors.h"
#include "kube/object.h"

namespace kruise::manager::workloadspread {

using kube::Json;
using webhook::AdmissionRequest;
using webhook::AdmissionResponse;

namespace ws_webhook_impl {

std::string TargetKey(const std::string& group, const std::string& kind, const std::string& name) {
  return absl::StrCat(group, "/", kind, "/", name);
}

// Whether the cached object already is `incoming` or a later version of it (same uid, a
// resourceVersion at least as high): then `incoming` changes nothing. The usual case is the
// informer's echo of a status this replica wrote and cached from the reply.
bool StoredIsAtLeastAsNew(const Json& stored, const Json& incoming) {
  if (kube::Uid(stored).empty() || kube::Uid(stored) != kube::Uid(incoming)) return false;
  uint64_t a = 0, b = 0;
  return absl::SimpleAtoi(kube::ResourceVersion(stored), &a) &&
         absl::SimpleAtoi(kube::ResourceVersion(incoming), &b) && a >= b;
}

std::string RandomUuid() {
  thread_local absl::BitGen gen;
  const uint64_t hi = absl::Uniform<uint64_t>(gen), lo = absl::Uniform<uint64_t>(gen);
  // Version 4, variant 10.
  const uint64_t h = (hi & 0xFFFFFFFFFFFF0FFFULL) | 0x0000000000004000ULL;
  const uint64_t l = (lo & 0x3FFFFFFFFFFFFFFFULL) | 0x8000000000000000ULL;
  return absl::StrFormat("%08x-%04x-%04x-%04x-%012x", h >> 32, (h >> 16) & 0xFFFF, h & 0xFFFF,
                         l >> 48, l & 0xFFFFFFFFFFFFULL);
}

// One write of `status`'s subsetStatuses over `*ws` (what the webhooks record): a JSON patch of
// the status subresource whose first operation tests metadata.resourceVersion. kWritten: stored,
// and the cache holds the reply. kRetry: refused (409, or the bare 422 of a failed test), `*ws`
// is now the re-read object (also in the cache). kGone: the WorkloadSpread was deleted or is no
// longer valid. Errors name `what` ("recording the pod").
enum class Written { kWritten, kRetry, kGone };
absl::StatusOr<Written> WriteSubsets(kube::KubeClient* client, WorkloadSpreadCache* cache,
                                     WorkloadSpread* ws, const WorkloadSpreadStatus& status,
                                     absl::string_view what) {
  const Json patch = Json::array(
      {{{"op", "test"}, {"path", "/metadata/resourceVersion"}, {"value", ws->resource_version}},
       {{"op", "add"},
        {"path", "/status/subsetStatuses"},
        {"value", status.ToJson().value("subsetStatuses", Json::array())}}});
  auto written = client->Patch(WorkloadSpreadResource(), ws->namespace_, ws->name,
                               kube::PatchType::kJson, patch, "status");
  if (written.ok()) {
    cache->Upsert(*written);
    return Written::kWritten;
  }
  if (kube::IsNotFound(written.status())) return Written::kGone;
  const bool conflict = kube::IsConflict(written.status());
  if (!conflict && written.status().code() != absl::StatusCode::kInvalidArgument) {
    return absl::UnavailableError(
        absl::StrCat(what, " in WorkloadSpread ", ws->name, ": ", written.status().message()));
  }
  auto fresh = client->Get(WorkloadSpreadResource(), ws->namespace_, ws->name);
  if (!fresh.ok()) {
    if (kube::IsNotFound(fresh.status())) return Written::kGone;
    return absl::UnavailableError(
        absl::StrCat("re-reading WorkloadSpread ", ws->name, ": ", fresh.status().message()));
  }
  if (!conflict && kube::ResourceVersion(*fresh) == ws->resource_version) {
    // The test held: the patch itself was refused.
    return absl::InternalError(
        absl::StrCat(what, " in WorkloadSpread ", ws->name, ": ", written.status().message()));
  }
  cache->Upsert(*fresh);
  auto parsed = ParseWorkloadSpread(*fresh);
  if (!parsed.ok()) return Written::kGone;  // no longer valid: spreads nothing
  *ws = *std::move(parsed);
  return Written::kRetry;
}

}  // namespace ws_webhook_impl

kube::InformerOptions WorkloadSpreadInformerOptions() {
  kube::InformerOptions o;
  o.resource = WorkloadSpreadResource();
  o.indexers[kube::kNamespaceIndex] = kube::NamespaceIndexFunc();
  return o;
}

// ---- WorkloadSpreadCache ------------------------------------------------------------------------

void WorkloadSpreadCache::Publish(const std::string& ns,
                                  std::map<std::string, std::shared_ptr<const Entry>> by_name) {
  std::shared_ptr<const Snapshot> current;
  {
    absl::MutexLock lock(&mu_);
    current = snapshot_;
  }
  auto next = std::make_shared<Snapshot>(*current);
  if (by_name.empty()) {
    next->erase(ns);
  } else {
    auto space = std::make_shared<Namespace>();
    for (const auto& [name, e] : by_name) {
      if (!e->ws) continue;
      const TargetRef& t = e->ws->target_ref;
      space->by_target[ws_webhook_impl::TargetKey(t.Group(), t.kind, t.name)][name] = e;
    }
    space->by_name = std::move(by_name);
    (*next)[ns] = std::move(space);
  }
  absl::MutexLock lock(&mu_);
  snapshot_ = std::move(next);
}

void WorkloadSpreadCache::Upsert(const Json& ws) {
  const std::string ns = kube::Namespace(ws), name = kube::Name(ws);
  if (name.empty()) return;
  if (auto space = In(ns)) {  // nothing new: spare the parse and the republish
    auto it = space->by_name.find(name);
    if (it != space->by_name.end() &&
        ws_webhook_impl::StoredIsAtLeastAsNew(*it->second->object, ws)) {
      return;
    }
  }
  // Parse outside the locks, once per change.
  auto entry = std::make_shared<Entry>();
  entry->object = std::make_shared<const Json>(ws);
  if (auto parsed = ParseWorkloadSpread(ws); parsed.ok()) entry->ws = *std::move(parsed);
  absl::MutexLock write(&write_mu_);
  std::map<std::string, std::shared_ptr<const Entry>> by_name;
  if (auto space = In(ns)) {
    by_name = space->by_name;
    auto it = by_name.find(name);
    if (it != by_name.end() && ws_webhook_impl::StoredIsAtLeastAsNew(*it->second->object, ws)) {
      return;
    }
  }
  by_name[name] = std::move(entry);
  Publish(ns, std::move(by_name));
}

void WorkloadSpreadCache::Remove(const std::string& ns, const std::string& name) {
  absl::MutexLock write(&write_mu_);
  auto space = In(ns);
  if (space == nullptr || space->by_name.count(name) == 0) return;
  auto by_name = space->by_name;
  by_name.erase(name);
  Publish(ns, std::move(by_name));
}

void WorkloadSpreadCache::Attach(kube::Informer* informer) {
  informer->AddEventHandler({
      .on_add = [this](const Json& w) { Upsert(w); },
      .on_update = [this](const Json&, const Json& w) { Upsert(w); },
      .on_delete = [this](const Json& w, bool) { Remove(kube::Namespace(w), kube::Name(w)); },
  });
}

std::shared_ptr<const WorkloadSpreadCache::Namespace> WorkloadSpreadCache::In(
    const std::string& ns) const {
  std::shared_ptr<const Snapshot> snap;
  {
    absl::MutexLock lock(&mu_);
    snap = snapshot_;
  }
  auto it = snap->find(ns);
  return it != snap->end() ? it->second : nullptr;
}

std::vector<std::shared_ptr<const Json>> WorkloadSpreadCache::ObjectsIn(
    const std::string& ns) const {
  std::vector<std::shared_ptr<const Json>> out;
  if (auto space = In(ns)) {
    for (const auto& [name, e] : space->by_name) out.push_back(e->object);
  }
  return out;
}

std::shared_ptr<const WorkloadSpreadCache::Entry> WorkloadSpreadCache::Named(
    const std::string& ns, const std::string& name) const {
  auto space = In(ns);
  if (space == nullptr) return nullptr;
  auto it = space->by_name.find(name);
  return it != space->by_name.end() ? it->second : nullptr;
}

std::shared_ptr<const WorkloadSpreadCache::Entry> WorkloadSpreadCache::Targeting(
    const std::string& ns, const std::string& group, const std::string& kind,
    const std::string& name) const {
  auto space = In(ns);
  if (space == nullptr) return nullptr;
  auto it = space->by_target.find(ws_webhook_impl::TargetKey(group, kind, name));
  if (it == space->by_target.end() || it->second.empty()) return nullptr;
  return it->second.begin()->second;
}

size_t WorkloadSpreadCache::size() const {
  std::shared_ptr<const Snapshot> snap;
  {
    absl::MutexLock lock(&mu_);
    snap = snapshot_;
  }
  size_t n = 0;
  for (const auto& [ns, space] : *snap) n += space->by_name.size();
  return n;
}

// ---- WorkloadSpread validation ------------------------------------------------------------------

AdmissionResponse WorkloadSpreadValidatingHandler::Handle(const AdmissionRequest& req) {
  if (req.operation != "CREATE" && req.operation != "UPDATE") return webhook::Allowed();
  if (!req.object.is_object()) return webhook::Denied(400, "no object in the request");
  if (!enabled_) {
    return webhook::Denied(403, "feature-gate WorkloadSpread is not enabled", "Forbidden");
  }
  const bool update = req.operation == "UPDATE" && req.old_object.is_object();
  std::vector<std::string> problems =
      WorkloadSpreadProblems(req.object, update ? &req.old_object : nullptr);
  Json ws = req.object;
  // The request's namespace is the object's (a CREATE may leave metadata.namespace out).
  if (kube::Namespace(ws).empty() && !req.namespace_.empty() && ws["metadata"].is_object()) {
    ws["metadata"]["namespace"] = req.namespace_;
  }
  const std::vector<std::shared_ptr<const Json>> objects = cache_->ObjectsIn(kube::Namespace(ws));
  std::vector<const Json*> others;
  others.reserve(objects.size());
  for (const auto& o : objects) others.push_back(o.get());
  for (std::string& c : WorkloadSpreadConflicts(ws, others)) problems.push_back(std::move(c));
  if (!problems.empty()) {
    return webhook::Denied(
        400, absl::StrCat("WorkloadSpread ", kube::Name(ws), ": ", absl::StrJoin(problems, "; ")),
        "BadRequest");
  }
  AdmissionResponse ok = webhook::Allowed();
  ok.warnings = WorkloadSpreadWarnings(req.object);
  return ok;
}

// ---- Pod CREATE
// -----------------------------------------------------------------------------------

std::string WorkloadSpreadInjector::NewUid() const {
  return new_uid_ ? new_uid_() : ws_webhook_impl::RandomUuid();
}

absl::Status WorkloadSpreadInjector::Mutate(const AdmissionRequest& req, webhook::PodEdit* edit,
                                            std::vector<std::string>* warnings) const {
  std::string ws_name;
  absl::Status st = Spread(req, edit, &ws_name);
  if (st.ok() || fail_open_ == nullptr || !webhook::IsInfrastructureFailure(st)) return st;
  // Nothing was injected (the record comes first): the pod goes on unspread.
  std::string ns = kube::Namespace(edit->pod());
  if (ns.empty()) ns = req.namespace_;
  const Json ref = webhook::ObjectRef("apps.kruise.io/v1alpha1", "WorkloadSpread", ns, ws_name);
  warnings->push_back(fail_open_->Record(webhook::kMutatePodPath, Name(),
                                         "pod admitted without a subset", st,
                                         ws_name.empty() ? nullptr : &ref));
  return absl::OkStatus();
}

absl::Status WorkloadSpreadInjector::Spread(const AdmissionRequest& req, webhook::PodEdit* edit,
                                            std::string* ws_name) const {
  if (req.operation != "CREATE" || !req.sub_resource.empty()) return absl::OkStatus();
  const Json& pod = edit->pod();
  if (!PodCanBeSpread(pod)) return absl::OkStatus();
  const kube::OwnerReference owner = *kube::ControllerOf(pod);
  std::string ns = kube::Namespace(pod);
  if (ns.empty()) ns = req.namespace_;
  // The WorkloadSpread of the pod's controller, or of the Deployment of its ReplicaSet.
  const std::string group = TargetRef{owner.api_version, owner.kind, owner.name}.Group();
  std::shared_ptr<const WorkloadSpreadCache::Entry> entry =
      cache_->Targeting(ns, group, owner.kind, owner.name);
  if (entry == nullptr && group == "apps" && owner.kind == "ReplicaSet") {
    if (auto deployment = kube::DeploymentOfReplicaSetPod(pod, owner.name)) {
      entry = cache_->Targeting(ns, "apps", "Deployment", *deployment);
    }
  }
  if (entry == nullptr) return absl::OkStatus();

  WorkloadSpread ws = *entry->ws;
  *ws_name = ws.name;
  const std::string pod_name =
      kube::Name(pod).empty()
          ? absl::StrCat(kube::GetString(pod, {"metadata", "generateName"}).value_or(""),
                         "<generated>")
          : kube::Name(pod);
  SubsetChoice choice;
  for (int attempt = 0;; ++attempt) {
    if (attempt > kube::kConflictRetries) {
      return absl::AbortedError(
          absl::StrCat("WorkloadSpread ", ws.name,
                       " changed too often while recording this pod's subset: try again"));
    }
    choice = ChooseSubset(ws, pod, kube::Name(pod).empty() ? NewUid() : "", clock_->Now());
    if (choice.subset.empty()) return absl::OkStatus();  // no suitable subset: unchanged
    if (!choice.new_status || req.dry_run) break;
    ASSIGN_OR_RETURN(ws_webhook_impl::Written written,
                     ws_webhook_impl::WriteSubsets(client_, cache_, &ws, *choice.new_status,
                                                   "recording the pod"));
    if (written == ws_webhook_impl::Written::kGone) return absl::OkStatus();  // unchanged
    if (written == ws_webhook_impl::Written::kWritten) {
      Logger("workloadspread")
          ->info("pod {}/{} goes to subset {} of WorkloadSpread {}", ns, pod_name, choice.subset,
                 ws.name);
      break;
    }
  }
  auto ops = PlanSubsetInjection(pod, ws, choice.subset, choice.generated_uid);
  if (!ops.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("subset ", choice.subset, " of WorkloadSpread ",
                                                   ws.name, ": ", ops.status().message()));
  }
  edit->AddOps(*std::move(ops));
  return absl::OkStatus();
}

// ---- Pod DELETE and eviction -------------------------------------------------------------------

AdmissionResponse WorkloadSpreadDeletionRecorder::Handle(const AdmissionRequest& req) {
  Json fetched;
  const Json* pod = nullptr;
  if (req.operation == "DELETE") {
    if (!req.sub_resource.empty() || !req.old_object.is_object() || req.dry_run) {
      return webhook::Allowed();
    }
    pod = &req.old_object;
  } else if (req.operation == "CREATE" && req.sub_resource == "eviction") {
    const Json* dry = kube::FindPath(req.object, {"deleteOptions", "dryRun"});
    if (req.dry_run || (dry != nullptr && dry->is_array() && !dry->empty())) {
      return webhook::Allowed();
    }
    auto got = pods_->GetPod(req.namespace_, req.name);
    if (!got.ok()) {
      if (kube::IsNotFound(got.status())) return webhook::Allowed();
      if (fail_open_ != nullptr) {
        const Json ref = webhook::ObjectRef("v1", "Pod", req.namespace_, req.name);
        return fail_open_->Allow(webhook::kValidatePodPath, "workloadspread",
                                 "eviction not recorded: reading the pod", got.status(), &ref);
      }
      Logger("workloadspread")
          ->warn("eviction of pod {}/{}: reading the pod: {}", req.namespace_, req.name,
                 got.status());
      return webhook::Allowed();
    }
    fetched = *std::move(got);
    pod = &fetched;
  } else {
    return webhook::Allowed();
  }
  if (!kube::Annotation(*pod, kMatchedWorkloadSpreadAnnotation)) return webhook::Allowed();
  Json with_ns;
  if (kube::Namespace(*pod).empty()) {  // objects of a request may leave it out
    with_ns = *pod;
    if (with_ns["metadata"].is_object()) with_ns["metadata"]["namespace"] = req.namespace_;
    pod = &with_ns;
  }
  const std::string operation = req.operation == "DELETE" ? "deletion" : "eviction";
  std::string ws_name;
  absl::Status st = Record(*pod, operation, &ws_name);
  if (st.ok()) return webhook::Allowed();
  if (fail_open_ != nullptr) {
    const Json ref = webhook::ObjectRef("apps.kruise.io/v1alpha1", "WorkloadSpread",
                                        kube::Namespace(*pod), ws_name);
    return fail_open_->Allow(webhook::kValidatePodPath, "workloadspread",
                             absl::StrCat("the pod's ", operation, " is not recorded"), st, &ref);
  }
  Logger("workloadspread")
      ->warn("pod {}/{} goes unrecorded: {}", req.namespace_, kube::Name(*pod), st);
  return webhook::Allowed();
}

absl::Status WorkloadSpreadDeletionRecorder::Record(const Json& pod, const std::string& operation,
                                                    std::string* ws_name) {
  std::optional<MatchedWorkloadSpread> matched = MatchedOf(pod);
  if (!matched) return absl::OkStatus();
  *ws_name = matched->name;
  std::shared_ptr<const WorkloadSpreadCache::Entry> entry =
      cache_->Named(kube::Namespace(pod), matched->name);
  if (entry == nullptr || !entry->ws) return absl::OkStatus();
  WorkloadSpread ws = *entry->ws;
  for (int attempt = 0; attempt <= kube::kConflictRetries; ++attempt) {
    std::optional<WorkloadSpreadStatus> status = RecordDeletion(ws, pod, clock_->Now());
    if (!status) return absl::OkStatus();
    ASSIGN_OR_RETURN(ws_webhook_impl::Written written,
                     ws_webhook_impl::WriteSubsets(client_, cache_, &ws, *status,
                                                   absl::StrCat("recording the ", operation)));
    if (written == ws_webhook_impl::Written::kGone) return absl::OkStatus();
    if (written == ws_webhook_impl::Written::kWritten) {
      Logger("workloadspread")
          ->info("{} of pod {}/{} recorded in subset {} of WorkloadSpread {}", operation,
                 ws.namespace_, kube::Name(pod), matched->subset, ws.name);
      return absl::OkStatus();
    }
  }
  return absl::AbortedError(
      absl::StrCat("WorkloadSpread ", ws.name, " changed on every write of the ", operation));
}

bool RegisterWorkloadSpreadHandlers(webhook::HandlerRegistry* registry,
                                    const WorkloadSpreadCache* cache, kube::KubeClient* client,
                                    bool enabled) {
  if (!kube::Served(client, WorkloadSpreadResource())) {
    Logger("workloadspread")->warn("WorkloadSpread CRD is not served: no WorkloadSpread webhooks");
    return false;
  }
  auto handler = std::make_shared<WorkloadSpreadValidatingHandler>(cache, enabled);
  registry->Register(kValidateWorkloadSpreadPath, handler);
  registry->Register(kValidateWorkloadSpreadUnversionedPath, handler);
  return true;
}

}  // namespace kruise::manager::workloadspread
