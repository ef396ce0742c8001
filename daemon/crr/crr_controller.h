#pragma once

// CrrController: runs ContainerRecreateRequests (apps.kruise.io/v1alpha1) addressed to this node.
//
//   CrrController crr({.node_name = node}, client, runtime, Clock::Real(), &recorder, observer);
//   crr.Start();
//   ...
//   crr.Stop();
//
// Watch: an informer on containerrecreaterequests in all namespaces with the label selector
// `crr.apps.kruise.io/node-name=<node>,crr.apps.kruise.io/active=true` (the manager removes the
// active label once a CRR is Completed, so finished CRRs leave the cache), indexed by the label
// crr.apps.kruise.io/pod-uid.
//
// Queue: keyed by POD UID, so every CRR of one pod is handled by one worker at a time (the work
// queue never hands a key to two workers). Per pod, SelectActive (crr_ordering.h) picks the CRR
// to run; the others are parked with PendingPatch; CrrExecutor::Reconcile runs one step of the
// active one. Its status change goes out as a JSON merge patch of the status subresource (never a
// full update, so fields we do not model survive) and its events are recorded on the CRR. The key
// is requeued after the step's requeue_after, with rate-limited backoff (500 ms doubling to 50 s,
// as OpenKruise's daemon) on errors, and at once when the step completed the CRR so that the
// pod's next CRR starts without waiting for an event.
//
// Stale reads: the informer may not yet show a status we just wrote. The object returned by each
// patch is kept and used instead of the cached one until the cache reaches its resourceVersion
// (compared as integers, as OpenKruise's resourceVersion expectations do) or
// `expectation_timeout` passes.
//
// Thread-safety: Start()/Stop() from one thread (Stop() is idempotent; the destructor calls it).
// The observer's callbacks and the recorder are called from worker threads, concurrently for
// different pods. Blocking: a worker blocks while the executor kills containers (preStop plus the
// stop, up to the grace period), and Stop() waits for workers in such a step.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "cri/runtime_service.h"
#include "daemon/crr/crr_executor.h"
#include "kube/client.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "kube/kruise_api.h"
#include "kube/workqueue.h"

namespace kruise::daemon {

using kube::kCrrActiveLabel;
using kube::kCrrNodeNameLabel;
// Informer index of CRRs by kCrrPodUidLabel.
inline constexpr char kCrrPodUidIndex[] = "pod-uid";

struct CrrControllerOptions {
  std::string node_name;
  // Pods worked on at once (each worker handles one pod's CRRs). Values below 1 mean 1.
  int workers = 4;
  CrrExecutorOptions executor;
  // Backoff of a pod key whose reconcile failed: base doubling per failure up to max.
  absl::Duration backoff_base = absl::Milliseconds(500);
  absl::Duration backoff_max = absl::Seconds(50);
  // How long a written status may be preferred over an informer cache that has not caught up.
  absl::Duration expectation_timeout = absl::Seconds(10);
};

// Callbacks for metrics; unset members are skipped. Called from worker threads.
struct CrrObserver {
  // This controller moved `crr` (the object as stored after the patch) to Completed.
  // `succeeded`: every container ended Succeeded. `took`: from metadata.creationTimestamp to now.
  std::function<void(const kube::Json& crr, bool succeeded, absl::Duration took)> on_completed;
  // A container of `crr` was stopped for recreation (StopContainer issued and recorded isKilled).
  std::function<void(const kube::Json& crr, const std::string& container)> on_container_killed;
};

struct CrrControllerStats {
  uint64_t reconciles = 0;        // executor steps run
  uint64_t reconcile_errors = 0;  // steps or patches that failed (key retried with backoff)
  uint64_t status_patches = 0;    // status patches written (active and Pending)
  uint64_t pending_marks = 0;     // of which PendingPatch
};

class CrrController {
 public:
  // `client`, `runtime`, `clock` and `recorder` (may be null) must outlive the controller.
  CrrController(CrrControllerOptions options, kube::KubeClient* client,
                cri::RuntimeService* runtime, Clock* clock, kube::EventRecorder* recorder,
                CrrObserver observer = {});
  ~CrrController();
  CrrController(const CrrController&) = delete;
  CrrController& operator=(const CrrController&) = delete;

  // Starts the informer and the workers. Returns at once.
  void Start();
  // Stops the queue (queued keys are dropped), waits for the workers, stops the informer.
  void Stop();

  bool HasSynced() const { return informer_.HasSynced(); }
  bool WaitForSync(absl::Time deadline) { return informer_.WaitForSync(deadline); }
  CrrControllerStats stats() const;
  // The informer cache (tests, debugging).
  const kube::Store& store() const { return informer_.store(); }

  // "crr.apps.kruise.io/node-name=<node>,crr.apps.kruise.io/active=true".
  static std::string LabelSelector(const std::string& node_name);

 private:
  struct Written {
    kube::Json obj;  // as returned by the patch
    absl::Time at;
  };

  void EnqueueCrr(const kube::Json& crr);
  void WorkerLoop();
  // One pass over the CRRs of `pod_uid`. Sets `*requeue_after` when the key must come back.
  absl::Status SyncPod(const std::string& pod_uid, std::optional<absl::Duration>* requeue_after);
  // The CRRs of the pod: cache objects, or what we wrote when the cache is older.
  std::vector<kube::Json> CrrsOfPod(const std::string& pod_uid);
  // Merge-patches status; remembers the result. NotFound (deleted meanwhile) yields nullopt.
  absl::StatusOr<std::optional<kube::Json>> PatchStatus(const kube::Json& crr,
                                                        const kube::Json& patch);
  void Report(const kube::Json& before, const kube::Json& after);

  const CrrControllerOptions options_;
  kube::KubeClient* const client_;
  Clock* const clock_;
  kube::EventRecorder* const recorder_;
  const CrrObserver observer_;
  CrrExecutor executor_;
  kube::Informer informer_;
  kube::WorkQueue queue_;

  mutable absl::Mutex mu_;
  std::map<std::string, Written> written_ ABSL_GUARDED_BY(mu_);  // by store key
  CrrControllerStats stats_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace kruise::daemon
