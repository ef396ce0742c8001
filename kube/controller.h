#pragma once

// Controller runtime: a Reconciler driven by a rate-limited WorkQueue fed by informer events.
//
//   class MyReconciler : public Reconciler {
//     absl::StatusOr<Result> Reconcile(const Request& req) override { ... }
//   };
//   Controller c("imagepulljob", &reconciler, {.clock = clock, .workers = 2});
//   c.Watch(job_informer, EnqueueSelf());
//   c.Watch(pod_informer, EnqueueOwner("ImagePullJob"), {GenerationChanged()});
//   manager.Add(&c);  // a leader-only Runnable
//
// Reconcile outcomes: OK with zero requeue_after -> Forget(key); OK with requeue_after -> Forget
// and AddAfter(key, requeue_after); an error -> AddRateLimited(key) (exponential backoff), unless
// the status is terminal (TerminalError()): logged, counted, not retried. Requests are level-based:
// only namespace/name, never the event.
//
// Thread-safety: Watch() before Start(). Start() blocks until the stop token is triggered; it runs
// `workers` threads that never process the same key concurrently (WorkQueue invariant).

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "kube/informer.h"
#include "kube/manager.h"
#include "kube/rate_limiter.h"
#include "kube/workqueue.h"

namespace kruise::kube {

struct Request {
  std::string ns;
  std::string name;
  std::string Key() const { return ns.empty() ? name : ns + "/" + name; }
  static Request FromKey(const std::string& key);
  bool operator==(const Request&) const = default;
};

struct Result {
  absl::Duration requeue_after = absl::ZeroDuration();  // > 0: check again after this delay
};

class Reconciler {
 public:
  virtual ~Reconciler() = default;
  // Called from a worker thread; never concurrently for the same request. May block (API calls).
  virtual absl::StatusOr<Result> Reconcile(const Request& req) = 0;
};

// Marks `status` as terminal: the controller will not retry it.
absl::Status TerminalError(absl::Status status);
bool IsTerminal(const absl::Status& status);

// Maps an informer object to the requests to enqueue.
using EventMapper = std::function<std::vector<Request>(const Json& obj)>;
// The object itself.
EventMapper EnqueueSelf();
// The owners of `kind` in metadata.ownerReferences (in the object's namespace); with
// `controller_only`, only the reference marked controller: true. `api_group` "" matches any group.
EventMapper EnqueueOwner(const std::string& kind, bool controller_only = true,
                         const std::string& api_group = "");
// Any mapping (e.g. a pod to the NodeImage of its node).
EventMapper EnqueueMapped(std::function<std::vector<Request>(const Json& obj)> fn);

// Filters events before mapping. Unset members accept.
struct Predicate {
  std::function<bool(const Json& obj)> create;
  std::function<bool(const Json& old_obj, const Json& new_obj)> update;
  std::function<bool(const Json& obj)> del;
};
// Updates pass only when metadata.generation changed (status-only updates are dropped).
Predicate GenerationChanged();
// Updates pass only when metadata.labels changed.
Predicate LabelsChanged();
// Updates pass only when metadata.resourceVersion changed (drops no-op relist duplicates).
Predicate ResourceVersionChanged();

struct ControllerOptions {
  Clock* clock = Clock::Real();
  int workers = 1;
  RateLimiterOptions rate_limiter;
  // Controllers wait for these informers to sync before starting workers (the manager normally has
  // already). Watch() adds its informer automatically.
  absl::Duration cache_sync_timeout = absl::Minutes(2);
};

struct ControllerStats {
  uint64_t success = 0;
  uint64_t requeue_after = 0;
  uint64_t errors = 0;
  uint64_t terminal = 0;
};

class Controller : public Runnable {
 public:
  // `reconciler` must outlive the controller.
  Controller(std::string name, Reconciler* reconciler, ControllerOptions opts = {});
  ~Controller() override;

  // Enqueues the mapped requests of every event of `informer` that passes all `predicates`. For
  // updates both the old and the new object are mapped (an owner change notifies both owners).
  // The informer must outlive the controller. Call before Start().
  void Watch(Informer* informer, EventMapper mapper, std::vector<Predicate> predicates = {});

  // Runnable: waits for the watched informers to sync, runs the workers until `stop`, then shuts
  // the queue down and waits for in-flight reconciles. Returns early (logging) if the caches do not
  // sync within cache_sync_timeout.
  void Start(std::stop_token stop) override;
  bool NeedLeaderElection() const override { return true; }
  std::string Name() const override { return name_; }

  // Enqueue by hand (e.g. from a periodic resync or tests).
  void Enqueue(const Request& req) { queue_.Add(req.Key()); }
  WorkQueue& queue() { return queue_; }
  ControllerStats stats() const;

 private:
  void Worker();
  void ProcessOne(const std::string& key);

  const std::string name_;
  Reconciler* const reconciler_;
  const ControllerOptions opts_;
  WorkQueue queue_;
  std::vector<Informer*> informers_;
  std::atomic<uint64_t> success_{0}, requeue_after_{0}, errors_{0}, terminal_{0};
};

}  // namespace kruise::kube
