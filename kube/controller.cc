#include "kube/controller.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/cord.h"
#include "common/logging.h"

namespace kruise::kube {
namespace {

constexpr char kTerminalPayload[] = "kruise.io/terminal";

const Json* Meta(const Json& obj) {
  if (!obj.is_object()) return nullptr;
  auto m = obj.find("metadata");
  return (m != obj.end() && m->is_object()) ? &*m : nullptr;
}

Json MetaField(const Json& obj, const char* field) {
  const Json* m = Meta(obj);
  if (!m) return nullptr;
  auto it = m->find(field);
  return it == m->end() ? Json(nullptr) : *it;
}

}  // namespace

Request Request::FromKey(const std::string& key) {
  auto [ns, name] = SplitStoreKey(key);
  return Request{ns, name};
}

absl::Status TerminalError(absl::Status status) {
  if (status.ok()) return status;
  status.SetPayload(kTerminalPayload, absl::Cord("true"));
  return status;
}

bool IsTerminal(const absl::Status& status) {
  return status.GetPayload(kTerminalPayload).has_value();
}

EventMapper EnqueueSelf() {
  return [](const Json& obj) -> std::vector<Request> { return {Request::FromKey(StoreKey(obj))}; };
}

EventMapper EnqueueOwner(const std::string& kind, bool controller_only,
                         const std::string& api_group) {
  return [kind, controller_only, api_group](const Json& obj) -> std::vector<Request> {
    std::vector<Request> out;
    const Json* m = Meta(obj);
    if (!m) return out;
    auto refs = m->find("ownerReferences");
    if (refs == m->end() || !refs->is_array()) return out;
    const std::string ns = SplitStoreKey(StoreKey(obj)).first;
    for (const Json& ref : *refs) {
      if (!ref.is_object() || ref.value("kind", "") != kind) continue;
      if (controller_only && !ref.value("controller", false)) continue;
      if (!api_group.empty()) {
        const std::string av = ref.value("apiVersion", "");
        if (av.substr(0, av.find('/')) != api_group) continue;
      }
      const std::string name = ref.value("name", "");
      if (!name.empty()) out.push_back(Request{ns, name});
    }
    return out;
  };
}

EventMapper EnqueueMapped(std::function<std::vector<Request>(const Json& obj)> fn) { return fn; }

Predicate GenerationChanged() {
  Predicate p;
  p.update = [](const Json& o, const Json& n) {
    return MetaField(o, "generation") != MetaField(n, "generation");
  };
  return p;
}

Predicate LabelsChanged() {
  Predicate p;
  p.update = [](const Json& o, const Json& n) {
    return MetaField(o, "labels") != MetaField(n, "labels");
  };
  return p;
}

Predicate ResourceVersionChanged() {
  Predicate p;
  p.update = [](const Json& o, const Json& n) {
    return MetaField(o, "resourceVersion") != MetaField(n, "resourceVersion");
  };
  return p;
}

Controller::Controller(std::string name, Reconciler* reconciler, ControllerOptions opts)
    : name_(std::move(name)),
      reconciler_(reconciler),
      opts_(opts),
      queue_(opts.clock, DefaultControllerRateLimiter(opts.clock, opts.rate_limiter)) {}

Controller::~Controller() { queue_.ShutDown(); }

void Controller::Watch(Informer* informer, EventMapper mapper, std::vector<Predicate> predicates) {
  informers_.push_back(informer);
  auto shared_mapper = std::make_shared<EventMapper>(std::move(mapper));
  auto preds = std::make_shared<std::vector<Predicate>>(std::move(predicates));
  auto enqueue = [this, shared_mapper](const Json& obj) {
    for (const Request& r : (*shared_mapper)(obj)) queue_.Add(r.Key());
  };
  // Updates map both versions; a request both map to is added once (two adds could otherwise run
  // two reconciles when a worker takes the key in between).
  auto enqueue_both = [this, shared_mapper](const Json& old_obj, const Json& new_obj) {
    std::vector<std::string> keys;
    for (const Request& r : (*shared_mapper)(old_obj)) keys.push_back(r.Key());
    for (const Request& r : (*shared_mapper)(new_obj)) keys.push_back(r.Key());
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    for (const std::string& k : keys) queue_.Add(k);
  };
  ResourceEventHandler h;
  h.on_add = [enqueue, preds](const Json& obj) {
    for (const Predicate& p : *preds) {
      if (p.create && !p.create(obj)) return;
    }
    enqueue(obj);
  };
  h.on_update = [enqueue_both, preds](const Json& old_obj, const Json& new_obj) {
    for (const Predicate& p : *preds) {
      if (p.update && !p.update(old_obj, new_obj)) return;
    }
    enqueue_both(old_obj, new_obj);
  };
  h.on_delete = [enqueue, preds](const Json& obj, bool) {
    for (const Predicate& p : *preds) {
      if (p.del && !p.del(obj)) return;
    }
    enqueue(obj);
  };
  informer->AddEventHandler(std::move(h));
}

ControllerStats Controller::stats() const {
  return ControllerStats{success_.load(), requeue_after_.load(), errors_.load(), terminal_.load()};
}

void Controller::ProcessOne(const std::string& key) {
  auto log = Logger("controller");
  absl::StatusOr<Result> res = reconciler_->Reconcile(Request::FromKey(key));
  if (res.ok()) {
    queue_.Forget(key);
    if (res->requeue_after > absl::ZeroDuration()) {
      ++requeue_after_;
      queue_.AddAfter(key, res->requeue_after);
    } else {
      ++success_;
    }
    return;
  }
  if (IsTerminal(res.status())) {
    ++terminal_;
    queue_.Forget(key);
    log->error("{}: reconcile {} failed terminally: {}", name_, key, res.status());
    return;
  }
  ++errors_;
  log->warn("{}: reconcile {} failed (retry {}): {}", name_, key, queue_.NumRequeues(key),
            res.status());
  queue_.AddRateLimited(key);
}

void Controller::Worker() {
  while (auto key = queue_.Get()) {
    ProcessOne(*key);
    queue_.Done(*key);
  }
}

void Controller::Start(std::stop_token stop) {
  auto log = Logger("controller");
  const absl::Time deadline = opts_.clock->Now() + opts_.cache_sync_timeout;
  for (Informer* inf : informers_) {
    if (!inf->WaitForSync(deadline)) {
      log->error("{}: caches did not sync within {}", name_,
                 absl::FormatDuration(opts_.cache_sync_timeout));
      queue_.ShutDown();
      return;
    }
  }
  log->info("{}: starting {} workers", name_, opts_.workers);
  std::vector<std::thread> workers;
  for (int i = 0; i < std::max(1, opts_.workers); ++i) workers.emplace_back([this] { Worker(); });
  {
    absl::Mutex mu;
    bool stopped = false;
    // Registered before locking: the callback runs inline if stop was already requested.
    std::stop_callback cb(stop, [&] {
      absl::MutexLock l(&mu);
      stopped = true;
    });
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(&stopped));
  }
  // Stop handing out keys (queued ones are dropped: they are level-based and a future leader
  // relists); in-flight reconciles finish.
  queue_.ShutDownAndDiscard();
  for (auto& t : workers) t.join();
  log->info("{}: stopped", name_);
}

}  // namespace kruise::kube
