#pragma once

// EventRecorder: writes core/v1 Events about objects, asynchronously.
//
//   recorder.Event(pod, EventType::kWarning, "PullImageFailed", "image not found");
//
// - Never blocks the caller: events go to a bounded queue drained by one worker thread; when the
//   queue is full the event is dropped and counted (stats().dropped).
// - Spam filter: a token bucket per involved object (burst 25, one token per 5 min by default, as
//   client-go) applied when the event is recorded; refused events are counted (rate_limited).
// - Aggregation: the same (object, type, reason, message) again within 10 min PATCHes the existing
//   Event's count and lastTimestamp instead of creating a new one (re-created if it is gone).
// Timestamps come from the injected Clock.
//
// Thread-safety: Event() is safe from any thread. The destructor stops the worker (events still
// queued are dropped).

#include <cstdint>
#include <deque>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "kube/client.h"

namespace kruise::kube {

const Resource& EventResource();

enum class EventType { kNormal, kWarning };

struct EventRecorderOptions {
  std::string component = "kruise-manager";  // source.component / reportingComponent
  std::string host;                          // source.host / reportingInstance
  Clock* clock = Clock::Real();
  size_t queue_capacity = 1000;
  int burst = 25;
  absl::Duration refill_interval = absl::Minutes(5);  // one token per interval
  absl::Duration aggregation_window = absl::Minutes(10);
  size_t max_tracked_objects = 4096;  // bounds the spam-filter and aggregation caches
};

struct EventRecorderStats {
  uint64_t created = 0;
  uint64_t patched = 0;  // aggregated into an existing Event
  uint64_t dropped = 0;  // queue full
  uint64_t rate_limited = 0;
  uint64_t failed = 0;  // API errors
};

class EventRecorder {
 public:
  // `client` must outlive the recorder.
  EventRecorder(KubeClient* client, EventRecorderOptions opts);
  ~EventRecorder();
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // Records an event about `object` (needs kind, apiVersion, metadata.name; namespace and uid
  // when it has them). Returns at once.
  void Event(const Json& object, EventType type, const std::string& reason,
             const std::string& message);

  EventRecorderStats stats() const;
  // Blocks (real time, bounded) until every accepted event was written or failed. For tests and
  // orderly shutdown.
  bool WaitIdle(absl::Duration timeout);

 private:
  struct Pending {
    Json involved;  // involvedObject
    std::string ns;
    EventType type;
    std::string reason;
    std::string message;
    absl::Time at;
  };
  struct Aggregate {
    std::string ns;
    std::string name;  // Event object name
    int64_t count = 0;
    std::string first_timestamp;
    absl::Time last;
  };
  struct Bucket {
    double tokens;
    absl::Time last;
  };
  void Loop();
  void Write(const Pending& p);

  KubeClient* const client_;
  const EventRecorderOptions opts_;
  mutable absl::Mutex mu_;
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
  EventRecorderStats stats_ ABSL_GUARDED_BY(mu_);
  // Worker thread only.
  absl::flat_hash_map<std::string, Aggregate> aggregates_;
  uint64_t name_seq_ = 0;
  std::thread worker_;
};

}  // namespace kruise::kube
