#include "kube/informer.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/random/random.h"
#include "common/logging.h"
#include "kube/errors.h"
#include "kube/object.h"

namespace kruise::kube {
namespace {

std::string ResourceVersionOf(const Json& obj) {
  if (!obj.is_object()) return "";
  auto m = obj.find("metadata");
  if (m == obj.end() || !m->is_object()) return "";
  auto rv = m->find("resourceVersion");
  if (rv == m->end() || !rv->is_string()) return "";
  return rv->get<std::string>();
}

}  // namespace

void StripManagedFields(Json& obj) {
  if (!obj.is_object()) return;
  auto m = obj.find("metadata");
  if (m == obj.end() || !m->is_object()) return;
  m->erase("managedFields");
  auto a = m->find("annotations");
  if (a != m->end() && a->is_object()) {
    a->erase("kubectl.kubernetes.io/last-applied-configuration");
    if (a->empty()) m->erase("annotations");
  }
}

TransformFunc KeepOnlyMetadata(std::vector<std::string> fields) {
  for (const char* k : {"name", "namespace", "resourceVersion"}) fields.emplace_back(k);
  return [fields = std::move(fields)](Json& obj) {
    Json meta = Json::object();
    if (obj.is_object()) {
      if (auto m = obj.find("metadata"); m != obj.end() && m->is_object()) {
        for (const std::string& k : fields) {
          if (auto v = m->find(k); v != m->end()) meta[k] = std::move(*v);
        }
      }
    }
    obj = Json{{"metadata", std::move(meta)}};
  };
}

namespace {

// The members `keys` of object `from` (those present and not null).
Json Pick(const Json& from, std::initializer_list<const char*> keys) {
  Json out = Json::object();
  if (!from.is_object()) return out;
  for (const char* k : keys) {
    if (auto it = from.find(k); it != from.end() && !it->is_null()) out[k] = *it;
  }
  return out;
}

}  // namespace

void CompactPodForWorkloads(Json& pod) {
  if (!pod.is_object()) return;
  StripManagedFields(pod);
  Json out = Pick(pod, {"apiVersion", "kind"});
  if (const Json* m = Field(pod, "metadata"); m != nullptr) {
    out["metadata"] = Pick(*m, {"name", "namespace", "uid", "resourceVersion", "generation",
                                "labels", "annotations", "ownerReferences", "finalizers",
                                "creationTimestamp", "deletionTimestamp",
                                "deletionGracePeriodSeconds"});
  }
  Json spec = Json::object();
  if (const Json* s = Field(pod, "spec"); s != nullptr) {
    spec = Pick(*s, {"nodeName", "readinessGates"});
    if (const Json* cs = Field(*s, "containers"); cs != nullptr && cs->is_array()) {
      spec["containers"] = Json::array();
      for (const Json& c : *cs) spec["containers"].push_back(Pick(c, {"name", "image"}));
    }
  }
  out["spec"] = std::move(spec);
  if (const Json* st = Field(pod, "status"); st != nullptr && st->is_object()) {
    Json status = Pick(*st, {"phase"});
    if (const Json* conds = Field(*st, "conditions"); conds != nullptr && conds->is_array()) {
      status["conditions"] = Json::array();
      for (const Json& c : *conds) {
        Json kept = Pick(c, {"type", "status", "lastTransitionTime", "reason"});
        // The SidecarSet controller merges its entry into this condition's message (one entry
        // per SidecarSet, OpenKruise's format): only pods with injected sidecars have it.
        if (c.is_object() && c.value("type", Json()) == "SidecarSetUpgradable") {
          kept.update(Pick(c, {"message"}));
        }
        status["conditions"].push_back(std::move(kept));
      }
    }
    if (const Json* cs = Field(*st, "containerStatuses"); cs != nullptr && cs->is_array()) {
      status["containerStatuses"] = Json::array();
      for (const Json& c : *cs) {
        Json kept = Pick(c, {"name", "image", "imageID", "containerID", "restartCount", "ready"});
        if (const Json* started = FindPath(c, {"state", "running", "startedAt"}); started != nullptr) {
          kept["state"]["running"]["startedAt"] = *started;
        }
        status["containerStatuses"].push_back(std::move(kept));
      }
    }
    out["status"] = std::move(status);
  }
  pod = std::move(out);
}

bool HasController(const Json& obj) {
  const Json* refs = FindPath(obj, {"metadata", "ownerReferences"});
  if (refs == nullptr || !refs->is_array()) return false;
  for (const Json& r : *refs) {
    if (r.is_object() && r.value("controller", false)) return true;
  }
  return false;
}

void CompactNodeForManager(Json& node) {
  if (!node.is_object()) return;
  Json out = Json::object();
  for (const char* k : {"apiVersion", "kind"}) {
    if (auto it = node.find(k); it != node.end() && it->is_string()) out[k] = std::move(*it);
  }
  Json meta = Json::object();
  if (auto m = node.find("metadata"); m != node.end() && m->is_object()) {
    for (const char* f : {"name", "uid", "resourceVersion", "labels", "creationTimestamp",
                          "deletionTimestamp"}) {
      if (auto it = m->find(f); it != m->end() && !it->is_null()) meta[f] = std::move(*it);
    }
  }
  out["metadata"] = std::move(meta);
  if (auto spec = node.find("spec"); spec != node.end() && spec->is_object()) {
    Json kept = Json::object();
    for (const char* f : {"taints", "unschedulable"}) {
      if (auto it = spec->find(f); it != spec->end() && !it->is_null()) kept[f] = std::move(*it);
    }
    if (!kept.empty()) out["spec"] = std::move(kept);
  }
  if (const Json* conds = FindPath(node, {"status", "conditions"});
      conds != nullptr && conds->is_array()) {
    for (const Json& c : *conds) {
      if (!c.is_object() || c.value("type", "") != "Ready") continue;
      Json ready = Json::object();
      for (const char* f : {"type", "status", "lastTransitionTime"}) {
        if (auto it = c.find(f); it != c.end() && !it->is_null()) ready[f] = *it;
      }
      out["status"]["conditions"] = Json::array({std::move(ready)});
      break;
    }
  }
  node = std::move(out);
}

void CompactPodForManager(Json& pod) {
  if (!pod.is_object()) return;
  auto meta = pod.find("metadata");
  bool full = true;
  std::string controller_kind;
  bool kruise_daemonset = false;
  if (meta != pod.end() && meta->is_object()) {
    auto refs = meta->find("ownerReferences");
    if (refs != meta->end() && refs->is_array()) {
      for (const Json& r : *refs) {
        if (!r.is_object() || !r.value("controller", false)) continue;
        const std::string api_version = r.value("apiVersion", "");
        controller_kind = r.value("kind", "");
        full = api_version.rfind("apps.kruise.io/", 0) == 0 &&
               (controller_kind == "CloneSet" || controller_kind == "StatefulSet" ||
                controller_kind == "DaemonSet");
        kruise_daemonset = full && controller_kind == "DaemonSet";
        break;
      }
    }
  }
  if (!full && meta != pod.end() && meta->is_object()) {
    // A pod with injected sidecars is the SidecarSet controller's to upgrade, whoever owns it.
    if (const Json* list = FindPath(*meta, {"annotations", "kruise.io/sidecarset-injected-list"});
        list != nullptr && list->is_string() && !list->get_ref<const std::string&>().empty()) {
      full = true;
    }
  }
  if (full) {
    // A DaemonSet pod not scheduled yet is for the node its required node affinity names (the
    // controller must see it there, or it would create a second pod for that node).
    Json target;
    if (kruise_daemonset && GetString(pod, {"spec", "nodeName"}).value_or("").empty()) {
      if (const Json* req = FindPath(pod, {"spec", "affinity", "nodeAffinity",
                                           "requiredDuringSchedulingIgnoredDuringExecution"});
          req != nullptr) {
        target = *req;
      }
    }
    CompactPodForWorkloads(pod);
    if (!target.is_null()) {
      pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] =
          std::move(target);
    }
    return;
  }
  Json out = Json::object();
  Json kept = Json::object();
  // A pod a WorkloadSpread placed (its annotation names it) keeps what that controller reads
  // (manager/workloadspread/ws_controller.h): both annotations, its controller reference, the
  // Ready and PodScheduled conditions and its largest restart count.
  constexpr char kMatchedWorkloadSpread[] = "apps.kruise.io/matched-workloadspread";
  const Json* matched = meta != pod.end() && meta->is_object()
                            ? FindPath(*meta, {"annotations", kMatchedWorkloadSpread})
                            : nullptr;
  const bool spread =
      matched != nullptr && matched->is_string() && !matched->get_ref<const std::string&>().empty();
  if (meta != pod.end() && meta->is_object()) {
    for (const char* f : {"name", "namespace", "uid", "resourceVersion", "labels",
                          "creationTimestamp", "deletionTimestamp"}) {
      if (auto it = meta->find(f); it != meta->end() && !it->is_null()) kept[f] = std::move(*it);
    }
    if (spread) {
      for (const char* a : {kMatchedWorkloadSpread, "controller.kubernetes.io/pod-deletion-cost"}) {
        if (const Json* v = FindPath(*meta, {"annotations", a}); v != nullptr && v->is_string()) {
          kept["annotations"][a] = *v;
        }
      }
    }
    // With creationTimestamp, what the SidecarSet controller reads to note pods created without
    // the sidecars of a set that existed then (manager/sidecarset/sidecarset_not_injected.h).
    if (auto annotations = meta->find("annotations");
        annotations != meta->end() && annotations->is_object()) {
      constexpr char kNotInjected[] = "kruise.io/sidecarset-not-injected";
      if (auto noted = annotations->find(kNotInjected);
          noted != annotations->end() && noted->is_string()) {
        kept["annotations"][kNotInjected] = std::move(*noted);
      }
    }
    // Only that it has a controller, and its kind: full references cost a third of the cache.
    kept["ownerReferences"] = Json::array({{{"controller", true}, {"kind", controller_kind}}});
    if (auto refs = meta->find("ownerReferences");
        spread && refs != meta->end() && refs->is_array()) {
      for (const Json& r : *refs) {
        if (!r.is_object() || !r.value("controller", false)) continue;
        kept["ownerReferences"] =
            Json::array({Pick(r, {"apiVersion", "kind", "name", "uid", "controller"})});
        break;
      }
    }
  }
  out["metadata"] = std::move(kept);
  for (const char* f : {"apiVersion", "kind"}) {
    if (auto it = pod.find(f); it != pod.end() && it->is_string()) out[f] = std::move(*it);
  }
  if (const Json* n = FindPath(pod, {"spec", "nodeName"}); n != nullptr && n->is_string()) {
    out["spec"]["nodeName"] = *n;
  }
  if (const Json* p = FindPath(pod, {"status", "phase"}); p != nullptr && p->is_string()) {
    out["status"]["phase"] = *p;
    // Readiness, for PodUnavailableBudget (manager/pub/pub_controller.h PodFactsOfCached): a
    // Running pod's Ready condition only when it is not True (rare; a ready pod costs nothing).
    if (p->get_ref<const std::string&>() == "Running") {
      std::string ready;
      if (const Json* conds = FindPath(pod, {"status", "conditions"});
          conds != nullptr && conds->is_array()) {
        for (const Json& c : *conds) {
          if (c.is_object() && c.value("type", "") == "Ready") ready = c.value("status", "");
        }
      }
      if (ready != "True" && !spread) {
        out["status"]["conditions"] =
            Json::array({{{"type", "Ready"}, {"status", ready.empty() ? "Unknown" : ready}}});
      }
    }
  }
  if (spread) {
    if (const Json* conds = FindPath(pod, {"status", "conditions"});
        conds != nullptr && conds->is_array()) {
      Json kept_conds = Json::array();
      for (const Json& c : *conds) {
        const std::string type = c.is_object() ? c.value("type", "") : "";
        if (type == "Ready") {
          kept_conds.push_back(Pick(c, {"type", "status", "lastTransitionTime"}));
        } else if (type == "PodScheduled" && c.value("status", "") != "True") {
          kept_conds.push_back(Pick(c, {"type", "status", "reason", "lastTransitionTime"}));
        }
      }
      if (!kept_conds.empty()) out["status"]["conditions"] = std::move(kept_conds);
    }
    int64_t restarts = 0;
    if (const Json* cs = FindPath(pod, {"status", "containerStatuses"});
        cs != nullptr && cs->is_array()) {
      for (const Json& c : *cs) restarts = std::max(restarts, IntField(c, "restartCount", 0));
    }
    if (restarts > 0) {
      out["status"]["containerStatuses"] = Json::array({{{"restartCount", restarts}}});
    }
  }
  pod = std::move(out);
}

void CompactPodForControllers(Json& pod) {
  StripManagedFields(pod);
  auto spec = pod.find("spec");
  if (spec != pod.end() && spec->is_object()) {
    for (const char* f : {"volumes", "tolerations", "schedulerName", "enableServiceLinks",
                          "preemptionPolicy", "securityContext", "affinity", "dnsConfig"}) {
      spec->erase(f);
    }
    for (const char* list : {"containers", "initContainers", "ephemeralContainers"}) {
      auto cs = spec->find(list);
      if (cs == spec->end() || !cs->is_array()) continue;
      for (Json& c : *cs) {
        if (!c.is_object()) continue;
        for (const char* f :
             {"command", "args", "workingDir", "env", "envFrom", "volumeMounts", "volumeDevices",
              "terminationMessagePath", "terminationMessagePolicy", "readinessProbe",
              "livenessProbe", "startupProbe", "securityContext", "stdin", "tty"}) {
          c.erase(f);
        }
      }
    }
  }
  auto status = pod.find("status");
  if (status == pod.end() || !status->is_object()) return;
  // podIPs repeats podIP for single-stack pods; null lastProbeTime and empty lastState say nothing.
  if (auto ips = status->find("podIPs");
      ips != status->end() && ips->is_array() && ips->size() == 1 && status->contains("podIP")) {
    status->erase(ips);
  }
  if (auto conds = status->find("conditions"); conds != status->end() && conds->is_array()) {
    for (Json& c : *conds) {
      if (auto p = c.find("lastProbeTime"); c.is_object() && p != c.end() && p->is_null()) {
        c.erase(p);
      }
    }
  }
  for (const char* list : {"containerStatuses", "initContainerStatuses"}) {
    auto cs = status->find(list);
    if (cs == status->end() || !cs->is_array()) continue;
    for (Json& c : *cs) {
      if (!c.is_object()) continue;
      if (auto ls = c.find("lastState"); ls != c.end() && ls->is_object() && ls->empty()) {
        c.erase(ls);
      }
    }
  }
}

Informer::Informer(KubeClient* client, Clock* clock, InformerOptions opts)
    : client_(client), clock_(clock), opts_(std::move(opts)), store_(opts_.indexers) {}

Informer::~Informer() { Stop(); }

void Informer::AddEventHandler(ResourceEventHandler handler) {
  absl::MutexLock lock(&mu_);
  handlers_.push_back(std::make_shared<const ResourceEventHandler>(std::move(handler)));
  if (!listed_) return;  // the first list will notify every handler
  const int target = static_cast<int>(handlers_.size()) - 1;
  for (auto& [key, obj] : store_.Snapshot()) {
    EnqueueLocked(Notification{NoteType::kAdd, {}, obj, false, target});
  }
}

void Informer::Start() {
  absl::MutexLock lock(&mu_);
  if (started_) return;
  started_ = true;
  reflector_ = std::thread([this] { ReflectorLoop(); });
  dispatcher_ = std::thread([this] { DispatchLoop(); });
}

void Informer::RequestStop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  if (canceller_) canceller_->Cancel();
}

void Informer::Stop() {
  RequestStop();
  if (reflector_.joinable()) reflector_.join();
  if (dispatcher_.joinable()) dispatcher_.join();
}

bool Informer::HasSynced() const {
  absl::MutexLock lock(&mu_);
  return listed_ && delivered_seq_ >= initial_seq_;
}

bool Informer::HandlersCaughtUp() const {
  absl::MutexLock lock(&mu_);
  return delivered_seq_ >= enqueued_seq_;
}

bool Informer::WaitForSync(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto cond = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return stopping_ || (listed_ && delivered_seq_ >= initial_seq_);
  };
  clock_->AwaitWithDeadline(&mu_, absl::Condition(&cond), deadline);
  return listed_ && delivered_seq_ >= initial_seq_;
}

std::string Informer::LastSyncResourceVersion() const {
  absl::MutexLock lock(&mu_);
  return last_rv_;
}

InformerStats Informer::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void Informer::EnqueueLocked(Notification n) {
  notes_.push_back(std::move(n));
  ++enqueued_seq_;
}

absl::Duration Informer::RandomWatchTimeout() {
  static thread_local absl::BitGen gen;
  const double lo = absl::ToDoubleSeconds(opts_.min_watch_timeout);
  const double hi = absl::ToDoubleSeconds(opts_.max_watch_timeout);
  if (hi <= lo) return opts_.min_watch_timeout;
  return absl::Seconds(absl::Uniform(gen, lo, hi));
}

bool Informer::BackoffWait(int attempt) {
  static thread_local absl::BitGen gen;
  const double base =
      absl::ToDoubleSeconds(opts_.initial_backoff) * std::pow(2.0, std::min(attempt, 30));
  const double capped = std::min(base, absl::ToDoubleSeconds(opts_.max_backoff));
  // Jitter: +-20 % so that many informers (and many replicas) do not retry in lockstep.
  const absl::Duration delay = absl::Seconds(capped * absl::Uniform(gen, 0.8, 1.2));
  absl::MutexLock lock(&mu_);
  auto stopping = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_; };
  clock_->AwaitWithDeadline(&mu_, absl::Condition(&stopping), clock_->Now() + delay);
  return !stopping_;
}

absl::Status Informer::ListAndReplace() {
  ListOptions lo;
  lo.label_selector = opts_.label_selector;
  lo.field_selector = opts_.field_selector;
  lo.limit = opts_.page_size;
  std::string rv;
  absl::flat_hash_map<std::string, EncodedObject> fresh;
  while (true) {
    absl::StatusOr<ListResult> page = client_->List(opts_.resource, opts_.ns, lo);
    if (!page.ok() && IsGone(page.status()) && !lo.continue_token.empty()) {
      // The continue token expired mid-way: list everything in one go.
      fresh.clear();
      lo.continue_token.clear();
      lo.limit = 0;
      continue;
    }
    if (!page.ok()) return page.status();
    for (Json& obj : page->items) {
      if (opts_.transform) opts_.transform(obj);
      std::string key = StoreKey(obj);
      fresh.insert_or_assign(std::move(key), EncodedObject::Encode(obj));
    }
    rv = page->resource_version;
    if (page->continue_token.empty()) break;
    lo.continue_token = page->continue_token;
  }

  absl::MutexLock lock(&mu_);
  const bool first = !listed_;
  auto old = store_.Snapshot();
  for (auto& [key, enc] : fresh) {
    auto decoded_obj = enc.Decode();
    auto it = old.find(key);
    if (it == old.end()) {
      store_.Upsert(key, enc, *decoded_obj);
      EnqueueLocked(Notification{NoteType::kAdd, {}, enc});
    } else if (!it->second.SameBytes(enc)) {
      EncodedObject prev = store_.Upsert(key, enc, *decoded_obj);
      EnqueueLocked(Notification{NoteType::kUpdate, prev, enc});
    }
  }
  for (auto& [key, enc] : old) {
    if (fresh.contains(key)) continue;
    EncodedObject prev = store_.Remove(key);
    EnqueueLocked(Notification{NoteType::kDelete, {}, prev, /*final_state_unknown=*/true});
  }
  last_rv_ = rv;
  ++stats_.lists;
  if (first) {
    listed_ = true;
    initial_seq_ = enqueued_seq_;
  }
  return absl::OkStatus();
}

bool Informer::HandleWatchEvent(WatchEvent&& ev, bool* delivered) {
  const std::string rv = ResourceVersionOf(ev.object);
  if (ev.type == WatchEvent::Type::kBookmark) {
    absl::MutexLock lock(&mu_);
    if (!rv.empty()) last_rv_ = rv;
    ++stats_.bookmarks;
    return !stopping_;
  }
  if (opts_.transform) opts_.transform(ev.object);
  const std::string key = StoreKey(ev.object);
  EncodedObject enc = EncodedObject::Encode(ev.object);
  absl::MutexLock lock(&mu_);
  if (ev.type == WatchEvent::Type::kDeleted) {
    EncodedObject prev = store_.Remove(key);
    EnqueueLocked(Notification{NoteType::kDelete, {}, enc});
  } else {
    EncodedObject prev = store_.Upsert(key, enc, ev.object);
    if (prev.empty()) {
      EnqueueLocked(Notification{NoteType::kAdd, {}, enc});
    } else {
      EnqueueLocked(Notification{NoteType::kUpdate, prev, enc});
    }
  }
  if (!rv.empty()) last_rv_ = rv;
  ++stats_.events;
  *delivered = true;
  return !stopping_;
}

absl::Status Informer::WatchOnce(bool* delivered) {
  ListOptions lo;
  lo.label_selector = opts_.label_selector;
  lo.field_selector = opts_.field_selector;
  lo.allow_watch_bookmarks = true;
  lo.timeout_seconds = absl::ToInt64Seconds(RandomWatchTimeout());
  auto canceller = std::make_shared<WatchCanceller>();
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::CancelledError("informer stopping");
    lo.resource_version = last_rv_;
    canceller_ = canceller;
    ++stats_.watches;
  }
  absl::Status st = client_->Watch(
      opts_.resource, opts_.ns, lo,
      [this, delivered](WatchEvent&& ev) { return HandleWatchEvent(std::move(ev), delivered); },
      canceller.get());
  absl::MutexLock lock(&mu_);
  canceller_.reset();
  return st;
}

void Informer::ReflectorLoop() {
  auto log = Logger("informer");
  const std::string what = opts_.resource.resource;
  bool need_list = true;
  int attempt = 0;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    if (need_list) {
      absl::Status st = ListAndReplace();
      if (!st.ok()) {
        log->warn("list {} failed: {}", what, st);
        {
          absl::MutexLock lock(&mu_);
          ++stats_.errors;
        }
        if (!BackoffWait(attempt++)) return;
        continue;
      }
      need_list = false;
      attempt = 0;
    }
    bool delivered = false;
    const absl::Time started = clock_->Now();
    absl::Status st = WatchOnce(&delivered);
    if (delivered) attempt = 0;
    if (st.ok()) {
      // The server closed the watch (timeout) or we were cancelled: resume from the last RV. A
      // watch that ends at once without events is throttled like an error.
      if (!delivered && clock_->Now() - started < absl::Seconds(1)) {
        if (!BackoffWait(attempt++)) return;
      }
      continue;
    }
    if (st.code() == absl::StatusCode::kCancelled) continue;  // loop checks stopping_
    {
      absl::MutexLock lock(&mu_);
      ++stats_.errors;
    }
    if (IsGone(st)) {
      log->info("watch {}: resourceVersion too old ({}), relisting", what, st);
      absl::MutexLock lock(&mu_);
      ++stats_.relists;
      need_list = true;
      continue;
    }
    log->warn("watch {} failed: {}", what, st);
    if (!BackoffWait(attempt++)) return;
  }
}

void Informer::DispatchLoop() {
  while (true) {
    std::deque<Notification> batch;
    std::vector<std::shared_ptr<const ResourceEventHandler>> handlers;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_ || !notes_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (stopping_) return;
      batch.swap(notes_);
      handlers = handlers_;
    }
    // No lock held from here on: handlers may call back into the informer or the store.
    for (Notification& n : batch) {
      auto cur = n.new_obj.Decode();
      std::shared_ptr<const Json> old = n.type == NoteType::kUpdate ? n.old_obj.Decode() : nullptr;
      for (size_t i = 0; i < handlers.size(); ++i) {
        if (n.target >= 0 && static_cast<size_t>(n.target) != i) continue;
        const ResourceEventHandler& h = *handlers[i];
        switch (n.type) {
          case NoteType::kAdd:
            if (h.on_add) h.on_add(*cur);
            break;
          case NoteType::kUpdate:
            if (h.on_update) h.on_update(*old, *cur);
            break;
          case NoteType::kDelete:
            if (h.on_delete) h.on_delete(*cur, n.final_state_unknown);
            break;
        }
      }
      absl::MutexLock lock(&mu_);
      ++delivered_seq_;
    }
  }
}

}  // namespace kruise::kube
