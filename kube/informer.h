#pragma once

// Informer: keeps a local, indexed cache of one resource in sync with the API server and tells
// handlers about changes.
//
// Reflector loop (one thread): LIST in pages (InformerOptions::page_size), then WATCH from the
// list's resourceVersion with bookmarks and a server timeout randomised in [5, 10) min. When a
// watch ends or breaks it resumes from the last resourceVersion seen (events and bookmarks advance
// it). When the server says the resourceVersion is too old (410 Gone, kOutOfRange) it relists and
// emits the difference against the cache: adds, updates (object bytes changed) and deletes of
// objects that vanished meanwhile, flagged final_state_unknown (a "DeletedFinalStateUnknown"
// tombstone carrying the last known object). Errors back off exponentially with jitter (800 ms ->
// 30 s by default) on the injected Clock.
//
// Every object goes through the optional transform (e.g. drop metadata.managedFields) before it is
// stored or handed to handlers. The cache is a Store (store.h): compact MessagePack bytes, indexed.
//
// Handlers run on a dedicated dispatcher thread, in event order, never under an informer or store
// lock: a handler may read the cache (store()) or do anything else. A slow handler delays later
// notifications, not the watch. A handler added after Start() first receives adds for every object
// already cached.
//
// Thread-safety: all public methods are safe from any thread. Start()/Stop() are not re-entrant and
// Stop() must not be called from a handler.

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "kube/client.h"
#include "kube/store.h"

namespace kruise::kube {

// Handlers receive the transformed objects. Unset members are skipped.
struct ResourceEventHandler {
  std::function<void(const Json& obj)> on_add;
  std::function<void(const Json& old_obj, const Json& new_obj)> on_update;
  // `final_state_unknown`: the deletion was inferred by a relist; `obj` is the last state we knew.
  std::function<void(const Json& obj, bool final_state_unknown)> on_delete;
};

// Mutates an object in place before it is cached (must not throw; must keep metadata.name,
// metadata.namespace and metadata.resourceVersion).
using TransformFunc = std::function<void(Json& obj)>;

// Drops metadata.managedFields and the last-applied-configuration annotation: the usual transform.
void StripManagedFields(Json& obj);

// A transform keeping only metadata.name, namespace, resourceVersion and the metadata `fields`
// (e.g. {"labels"}): for caches read by selectors or by owner only.
TransformFunc KeepOnlyMetadata(std::vector<std::string> fields);

// The pod transform for controllers that cache every pod (the manager): StripManagedFields plus
// the pod fields no controller of ours reads: volumes, tolerations, affinity, security contexts,
// scheduler settings; per container command/args, env, volume mounts, probes, termination message
// settings; podIPs when it only repeats podIP, null lastProbeTime, empty lastState. Keeps metadata,
// nodeName, restartPolicy, terminationGracePeriodSeconds, readinessGates, container names,
// images, pull policy, resources, lifecycle (preStop) and ports, and the rest of status.
void CompactPodForControllers(Json& pod);
// What the workload controllers (CloneSet, ...) read of the pods they own: metadata (labels,
// annotations, owners, finalizers, times), spec.nodeName, readinessGates, containers' names and
// images; status phase, conditions (type, status, lastTransitionTime, reason) and container
// statuses (name, image, imageID, containerID, restartCount, ready, running.startedAt), and the
// message of condition SidecarSetUpgradable (the SidecarSet controller merges into it). Writers
// must patch single fields (a whole condition written back from this cache would lose its
// message).
void CompactPodForWorkloads(Json& pod);
// The transform of kruise-manager's one pod cache, shared by its controllers: pods whose controller
// is a Kruise workload (apps.kruise.io CloneSet, StatefulSet, DaemonSet), that have no controller
// (adoption candidates) or that carry injected sidecars (annotation
// kruise.io/sidecarset-injected-list, for the SidecarSet controller) as CompactPodForWorkloads
// keeps them (an apps.kruise.io DaemonSet's pod without spec.nodeName also keeps its required node
// affinity, which names the node it is for); any other pod reduced to what
// selectors and the SidecarSet controller's not-injected note need: metadata name, namespace, uid,
// resourceVersion, labels, creationTimestamp and deletionTimestamp, of the annotations only
// kruise.io/sidecarset-not-injected (that note), spec.nodeName, status.phase (for a Running pod
// whose Ready condition is not True also that condition, type and status only: a Running stub
// without one is ready; PodUnavailableBudget reads it), and as
// ownerReferences only [{controller: true, kind}] (so kube::ControllerOf, which wants complete
// references, finds none: use HasController). With full references 30k pods took 8 MiB more.
// Such a pod that carries the apps.kruise.io/matched-workloadspread annotation (a WorkloadSpread
// placed it) keeps, for the WorkloadSpread controller, also that annotation and
// controller.kubernetes.io/pod-deletion-cost, its controller reference in full (apiVersion, kind,
// name, uid, controller), its Ready condition (type, status, lastTransitionTime), its
// PodScheduled condition when not True (type, status, reason, lastTransitionTime) and, when
// above 0, its largest container restart count as status.containerStatuses [{restartCount}].
void CompactPodForManager(Json& pod);
// Nodes as kruise-manager's one node cache keeps them (every controller that reads nodes: NodeImage,
// CloneSet topology spread, Advanced DaemonSet eligibility): apiVersion, kind, metadata name, uid,
// resourceVersion, labels, creationTimestamp and deletionTimestamp, spec.taints and
// spec.unschedulable, and of status only the Ready condition (type, status, lastTransitionTime;
// no heartbeat time, so a kubelet heartbeat changes nothing a controller reads).
void CompactNodeForManager(Json& node);
// Whether any ownerReference of `obj` has controller: true (also the reduced ones above).
bool HasController(const Json& obj);

struct InformerOptions {
  Resource resource;
  std::string ns;  // "" = all namespaces (or cluster-scoped)
  std::string label_selector;
  std::string field_selector;
  int64_t page_size = 500;
  TransformFunc transform = StripManagedFields;
  Indexers indexers;
  absl::Duration min_watch_timeout = absl::Minutes(5);
  absl::Duration max_watch_timeout = absl::Minutes(10);
  absl::Duration initial_backoff = absl::Milliseconds(800);
  absl::Duration max_backoff = absl::Seconds(30);
};

struct InformerStats {
  uint64_t lists = 0;    // complete (re)lists
  uint64_t relists = 0;  // relists caused by 410 Gone
  uint64_t watches = 0;  // watch calls started
  uint64_t errors = 0;   // failed list/watch calls
  uint64_t events = 0;   // watch events applied (excluding bookmarks)
  uint64_t bookmarks = 0;
};

class Informer {
 public:
  // `client` and `clock` must outlive the informer.
  Informer(KubeClient* client, Clock* clock, InformerOptions opts);
  ~Informer();
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  void AddEventHandler(ResourceEventHandler handler);

  // Starts the reflector and dispatcher threads. Returns immediately.
  void Start();
  // Cancels the watch, stops both threads and joins them. Idempotent.
  void Stop();
  // Cancels the watch and asks both threads to stop without joining them (Stop() still must be
  // called). Lets an owner of many informers cancel them all before waiting for any.
  void RequestStop();

  // True once the first list is cached and its notifications were delivered to the handlers.
  bool HasSynced() const;
  // Waits until HasSynced(), Stop() or `deadline` on the clock. Returns HasSynced().
  bool WaitForSync(absl::Time deadline);

  // True when every change the cache holds has been delivered to the handlers (the store is
  // updated and its notification queued under one lock). Tests that wait for the cache to hold an
  // object use it to know that handlers, such as expectation observers, have seen it too.
  bool HandlersCaughtUp() const;

  // The cache (lister API: Get, List, ByIndex).
  const Store& store() const { return store_; }
  const Resource& resource() const { return opts_.resource; }
  std::string LastSyncResourceVersion() const;
  InformerStats stats() const;

 private:
  enum class NoteType { kAdd, kUpdate, kDelete };
  struct Notification {
    NoteType type;
    EncodedObject old_obj;
    EncodedObject new_obj;
    bool final_state_unknown = false;
    int target = -1;  // handler index, -1 for all
  };

  void ReflectorLoop();
  void DispatchLoop();
  // One LIST (all pages) + replace. Sets last_rv_.
  absl::Status ListAndReplace();
  absl::Status WatchOnce(bool* delivered);
  bool HandleWatchEvent(WatchEvent&& ev, bool* delivered);
  void EnqueueLocked(Notification n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Backoff wait; returns false when stopping.
  bool BackoffWait(int attempt);
  absl::Duration RandomWatchTimeout();

  KubeClient* const client_;
  Clock* const clock_;
  const InformerOptions opts_;
  Store store_;

  mutable absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool listed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t initial_seq_ ABSL_GUARDED_BY(mu_) = 0;  // seq of the last note of the first list
  uint64_t enqueued_seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t delivered_seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_rv_ ABSL_GUARDED_BY(mu_);
  std::deque<Notification> notes_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<const ResourceEventHandler>> handlers_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<WatchCanceller> canceller_ ABSL_GUARDED_BY(mu_);
  InformerStats stats_ ABSL_GUARDED_BY(mu_);

  std::thread reflector_;
  std::thread dispatcher_;
};

}  // namespace kruise::kube
