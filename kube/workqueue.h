#pragma once

// WorkQueue: the de-duplicating, rate-limited queue of keys that controller workers drain.
//
// Invariants (as client-go's workqueue):
//   - a key added several times before a worker takes it is processed once ("dirty" set);
//   - a key is never handed to two workers at once ("processing" set);
//   - a key re-added while it is being processed is queued again only when Done() is called.
// Delayed adds (AddAfter, AddRateLimited) wait on the injected Clock, so tests drive them with a
// FakeClock. No background thread: blocked Get() callers promote due delayed items.
//
// Thread-safety: all methods are safe from any thread. Get() blocks until an item is available or
// the queue shuts down; ShutDownWithDrain() blocks until every item being processed is Done().

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "kube/rate_limiter.h"

namespace kruise::kube {

class WorkQueue {
 public:
  // `clock` must outlive the queue. `limiter` null: DefaultControllerRateLimiter(clock).
  explicit WorkQueue(Clock* clock, std::unique_ptr<RateLimiter> limiter = nullptr);
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `key` unless it is already queued (or deferred while processing). Ignored after
  // shutdown.
  void Add(const std::string& key);
  // Adds `key` once `delay` has passed on the clock (immediately when delay <= 0). Of several
  // pending delayed adds of one key, the earliest wins.
  void AddAfter(const std::string& key, absl::Duration delay);
  // AddAfter(key, limiter->When(key)).
  void AddRateLimited(const std::string& key);
  // Resets the key's backoff (call when it was processed successfully).
  void Forget(const std::string& key);
  int NumRequeues(const std::string& key);

  // Blocks until a key is available and returns it (marking it processing), or returns nullopt
  // once the queue is shut down and empty. The caller must call Done(key) afterwards.
  std::optional<std::string> Get();
  // Like Get() but gives up at `deadline` on the queue's clock (returns nullopt).
  std::optional<std::string> GetUntil(absl::Time deadline);
  // Marks `key` finished; re-queues it if it was added while processing.
  void Done(const std::string& key);

  // Number of keys ready to be handed out (excludes processing and still-delayed keys).
  int Len();
  // Number of keys waiting for their delay.
  int NumDelayed();
  int NumProcessing();

  // Stops accepting keys; Get() keeps handing out queued keys and then returns nullopt.
  void ShutDown();
  // ShutDown() and drops every queued key: Get() returns nullopt at once.
  void ShutDownAndDiscard();
  // ShutDown(), then blocks until every key being processed is Done().
  void ShutDownWithDrain();
  bool ShuttingDown();

 private:
  void AddLocked(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PromoteDueLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Clock* const clock_;
  std::unique_ptr<RateLimiter> limiter_;

  absl::Mutex mu_;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> dirty_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> processing_ ABSL_GUARDED_BY(mu_);
  // Delayed keys: ready time -> key, plus the pending ready time of each key.
  std::multimap<absl::Time, std::string> delayed_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, absl::Time> delayed_at_ ABSL_GUARDED_BY(mu_);
  uint64_t delayed_gen_ ABSL_GUARDED_BY(mu_) = 0;  // bumped when the earliest delay may change
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace kruise::kube
