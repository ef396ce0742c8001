#pragma once

// NodeImage controller (kruise-manager side): one cluster-scoped NodeImage per Node.
//
//  - Creates the NodeImage (same name, Node labels) once the Node has been Ready for
//    `creation_delay` (OpenKruise's --nodeimage-creation-delay, default 30 s); never for
//    `type=virtual-kubelet` nodes. Keeps the labels equal to the Node's (ImagePullJob label
//    selectors match NodeImage labels). Deletes it when the Node is gone, unless it carries the
//    apps.kruise.io/fake-nodeimage label.
//  - Garbage-collects spec tags: tags without createdAt; ImagePullJob owner references whose job
//    no longer exists or has another uid (other owners are kept; a tag left without owners is
//    dropped, an image without tags too); tags whose pullPolicy.ttlSecondsAfterFinished has
//    passed since the tag's completionTime (status of the same version).
//  - Watchdog: a tag whose status has not reached the spec version `response_timeout` (10 min)
//    after createdAt is marked Failed "node has not responded for a long time"; a tag not
//    completed `activeDeadlineSeconds + response_timeout` after createdAt is marked Failed
//    "pulling exceeds the activeDeadlineSeconds" (both with completionTime, so the daemon does
//    not restart them). Warning events PullImageFailed go to the NodeImage and the tag's owners.
//
// Every write is a JSON merge patch carrying metadata.resourceVersion (optimistic concurrency):
// labels and spec.images.<image>.tags on the main resource, the touched imageStatuses and the
// counters on the status subresource; fields we do not model survive. Conflicts are retried with
// a fresh read (bounded), then surface as errors (rate-limited retry).
//
// Thread-safety: Reconcile() may run on several workers (never for the same NodeImage at once).

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "kube/client.h"
#include "kube/controller.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"

namespace kruise::manager {

// NodeImage informer index: the uids of every tag owner reference (to find the NodeImages a
// deleted ImagePullJob still owns tags in).
inline constexpr char kTagOwnerUidIndex[] = "tag-owner-uid";
kube::IndexFunc TagOwnerUidIndexFunc();

struct NodeImageControllerOptions {
  absl::Duration creation_delay = absl::Seconds(30);
  absl::Duration response_timeout = absl::Minutes(10);
  kube::Resource node_images;
  kube::Resource image_pull_jobs;
};

class NodeImageReconciler : public kube::Reconciler {
 public:
  // All pointers must outlive the reconciler; `recorder` may be null.
  NodeImageReconciler(NodeImageControllerOptions opts, kube::KubeClient* client, Clock* clock,
                      kube::EventRecorder* recorder, kube::Informer* nodes,
                      kube::Informer* node_images, kube::Informer* jobs);

  absl::StatusOr<kube::Result> Reconcile(const kube::Request& req) override;

 private:
  absl::StatusOr<kube::Result> CreateIfReady(const kube::Json& node);
  // Labels + tag GC. Sets *patched when it wrote.
  absl::Status SyncSpec(kube::Json ni, const kube::Json* node, absl::Duration* requeue,
                        bool* patched);
  kube::Json SpecPatch(const kube::Json& ni, const kube::Json* node, absl::Duration* requeue);
  absl::Status SyncStatus(kube::Json ni, absl::Duration* requeue);
  kube::Json StatusPatch(const kube::Json& ni, absl::Duration* requeue,
                         std::vector<std::pair<kube::Json, std::string>>* failures);
  bool JobAlive(const kube::Json& ref);

  const NodeImageControllerOptions opts_;
  kube::KubeClient* const client_;
  Clock* const clock_;
  kube::EventRecorder* const recorder_;
  kube::Informer* const nodes_;
  kube::Informer* const node_images_;
  kube::Informer* const jobs_;
};

// Node Ready condition: the time it became True, or nullopt when the node is not Ready.
std::optional<absl::Time> NodeReadySince(const kube::Json& node);

}  // namespace kruise::manager
