#pragma once

// The manager's ContainerRecreateRequest controller (the daemon does the recreating; this side
// watches over it), as OpenKruise's pkg/controller/containerrecreaterequest:
//
//   * completes a CRR (status.phase Completed, completionTime, message) when its pod is gone,
//     terminating or replaced (UID differs from the crr.apps.kruise.io/pod-uid label), when the
//     daemon has not set any phase within `daemon_response_timeout` (1 min) of creation, or when
//     activeDeadlineSeconds since creation have passed;
//   * unreadyGracePeriodSeconds on a pod with the KruisePodReady readiness gate: adds the finalizer
//     crr.apps.kruise.io/unready-acquired, sets the pod condition KruisePodReady=False (message
//     names the CRR) and the CRR status condition PreRecreateGrace=True (its lastTransitionTime is
//     when the grace started; the daemon counts from it). On completion or deletion it sets the
//     pod condition back to True (only if the False is ours) and removes the finalizer;
//   * while Recreating, copies the pod's container statuses of the CRR's containers into
//     status.containerStatusSnapshot [{name, ready, restartCount, containerID}] (the daemon reads
//     it to see the new container Ready);
//   * once Completed: removes the crr.apps.kruise.io/active label (the daemons' informers select
//     on it) and deletes the CRR ttlSecondsAfterFinished after completionTime.
//
// Every write is a patch: merge patches for labels and scalar status fields; JSON patches guarded
// by a `test` of metadata.resourceVersion where an array is changed (finalizers, pod conditions,
// CRR conditions), so a concurrent writer makes the patch fail with Conflict and the request is
// retried instead of losing the other writer's entries.
//
// Reads: the CRR from the informer cache; the pod by a direct GET per reconcile (pods are not
// cached: the manager would otherwise hold every pod of the cluster only for the few pods that
// have a CRR). Active CRRs are re-checked every `poll_interval` (3 s), which is also how a pod
// that disappears is noticed.
//
// Thread-safety: Reconcile is safe for concurrent calls on different requests (controller
// runtime guarantee for the same one).

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "kube/client.h"
#include "kube/controller.h"
#include "kube/kruise_api.h"
#include "kube/store.h"
#include "manager/controller_group.h"

namespace kruise::manager::crr {

inline constexpr char kUnreadyAcquiredFinalizer[] = "crr.apps.kruise.io/unready-acquired";
using kube::kCrrActiveLabel;
using kube::kCrrPodUidLabel;
using kube::kKruisePodReadyCondition;
using kube::kPreRecreateGraceCondition;

inline constexpr char kMessagePodGone[] = "pod has gone";
inline constexpr char kMessageDaemonTimeout[] = "daemon has not responded for a long time";
inline constexpr char kMessageDeadline[] = "recreating has exceeded the activeDeadlineSeconds";

struct CrrReconcilerOptions {
  Clock* clock = Clock::Real();
  absl::Duration daemon_response_timeout = absl::Minutes(1);
  absl::Duration poll_interval = absl::Seconds(3);
};

class CrrReconciler final : public kube::Reconciler {
 public:
  // `crrs` is the CRR informer's store; `client` and `crrs` must outlive the reconciler.
  CrrReconciler(kube::KubeClient* client, const kube::Store* crrs, CrrReconcilerOptions opts);
  absl::StatusOr<kube::Result> Reconcile(const kube::Request& req) override;

 private:
  absl::StatusOr<kube::Result> HandleCompleted(const kube::Json& crr);
  // The stored object after the patch; nullopt when the CRR is gone.
  absl::StatusOr<std::optional<kube::Json>> Complete(const kube::Json& crr,
                                                     const std::string& message);
  absl::Status AcquireUnready(const kube::Json& crr, const kube::Json& pod);
  absl::Status ReleaseUnready(const kube::Json& crr);
  absl::Status SyncSnapshot(const kube::Json& crr, const kube::Json& pod);
  absl::Status SetPodReadyCondition(const kube::Json& pod, bool ready, const std::string& message);

  kube::KubeClient* const client_;
  const kube::Store* const crrs_;
  const CrrReconcilerOptions opts_;
};

// The "crr" controller group: a CRR informer (all namespaces), the reconciler and a
// kube::Controller with --crr-workers (default 3). No-op when the KruiseDaemon gate is off.
std::unique_ptr<ControllerGroup> NewCrrControllerGroup();

}  // namespace kruise::manager::crr
