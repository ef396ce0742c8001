#pragma once

// What every workload controller (CloneSet, Advanced StatefulSet, Advanced DaemonSet) does with
// the pods its selector and owner references name, before it plans anything:
//
//  - ClaimPods: the workload's pods from the shared pod cache. A pod it controls that no longer
//    matches the selector (and is not terminating) is released (its owner reference removed); a
//    pod of its namespace without a controller that matches is adopted (the workload's controller
//    reference added), unless the workload is being deleted. Each patch begins with a `test` of
//    the pod's resourceVersion, so a pod that changed since the cache saw it is not touched: a
//    conflict on adoption skips that pod this round; a pod gone is skipped. Events: ReleasedPod,
//    AdoptedPod (as OpenKruise's controllers name them). The pods returned are as the cache or
//    the server's reply has them.
//  - FeedExpectations: the pod informer's events into the controller's expectations: a create or
//    a delete (a pod turning terminating counts as deleted) is observed under the key `owner_key`
//    gives the pod (skipped when ""), and every update/delete under the pod's resourceVersion.
//  - WorkloadsSelecting / EnqueueAdopters: which workloads to wake for an object their selector
//    matches (an orphan pod they may adopt; a claim of theirs).
//
// Thread-safety: ClaimPods may run concurrently for different workloads; the callbacks are the
// caller's.

#include <functional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "kube/controller.h"
#include "kube/expectations.h"
#include "kube/informer.h"
#include "kube/object.h"

namespace kruise::manager::workload {

struct PodClaim {
  const kube::Json* owner = nullptr;  // the workload object (uid, namespace, deletion)
  kube::Json owner_ref;               // its controller reference, added on adoption
  const kube::LabelSelector* selector = nullptr;
  kube::Informer* pods =
      nullptr;  // SharedInformers::PodOptions(): controller-uid and orphan indexes
};

// `patch(pod, ops)`: the controller's resourceVersion-guarded pod patch (kube::PatchIfUnchanged
// plus its expectations). `event(reason, message)`: a Normal event on the workload.
absl::StatusOr<std::vector<kube::Json>> ClaimPods(
    const PodClaim& claim,
    absl::FunctionRef<absl::StatusOr<kube::Json>(const kube::Json&, const kube::Json&)> patch,
    absl::FunctionRef<void(const std::string&, const std::string&)> event);

// The workloads of `workloads` (an informer with kube::kNamespaceIndex) in `obj`'s namespace whose
// non-empty spec.selector matches `obj`'s labels.
std::vector<kube::Request> WorkloadsSelecting(kube::Informer* workloads, const kube::Json& obj);

// For a watch of the pod informer: a pod without a controller wakes the workloads that may adopt
// it (WorkloadsSelecting); a controlled pod wakes none.
kube::EventMapper EnqueueAdopters(kube::Informer* workloads);

// The watches every workload controller sets up: the workload itself (on a new resourceVersion),
// the pods (on a new resourceVersion), ControllerRevisions and pre-download ImagePullJobs (when
// `image_pull_jobs` is set) it controls as an apps.kruise.io `kind`, and the orphan pods it may
// adopt (EnqueueAdopters).
struct WorkloadWatches {
  std::string kind;                     // "CloneSet", "StatefulSet", "DaemonSet"
  kube::Informer* workloads = nullptr;  // indexed by kube::kNamespaceIndex
  kube::Informer* pods = nullptr;
  kube::Informer* revisions = nullptr;
  kube::Informer* image_pull_jobs = nullptr;  // optional
};
void WatchWorkload(kube::Controller* controller, const WorkloadWatches& w);

void FeedExpectations(kube::Informer* pods, kube::ScaleExpectations* scale,
                      kube::ResourceVersionExpectations* rv,
                      std::function<std::string(const kube::Json&)> owner_key);

}  // namespace kruise::manager::workload
