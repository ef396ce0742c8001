#pragma once

// CrrExecutor: the node agent's side of a ContainerRecreateRequest (apps.kruise.io/v1alpha1),
// one reconcile step at a time.
//
//   CrrExecutor executor(runtime, Clock::Real());
//   ASSIGN_OR_RETURN(CrrStepResult step, executor.Reconcile(crr, clock->Now()));
//   if (step.HasPatch()) client->Patch(ContainerRecreateRequests(), ns, name, PatchType::kMerge,
//                                      step.status_patch, "status");
//   if (step.requeue_after) queue->AddAfter(key, *step.requeue_after);
//
// State machine (CRR phase "" | Pending → Recreating → Completed; per container
// Pending → Recreating → Succeeded | Failed):
//  * The runtime containers of the pod are listed by label io.kubernetes.pod.uid (from the CRR
//    label crr.apps.kruise.io/pod-uid); for each spec container the newest attempt wins
//    (metadata.attempt, then created_at). Its restart count is the kubelet annotation
//    io.kubernetes.container.restartCount, or metadata.attempt when absent.
//  * A container counts as recreated when its ID differs from statusContext.containerID (scheme
//    such as "containerd://" stripped) or its restart count is higher than statusContext's. It is
//    Succeeded once RUNNING for at least strategy.minStartedSeconds (started_at age on `now`);
//    when the manager has copied a containerStatusSnapshot entry for it, that entry must also
//    show the same container ID and ready=true. Until then it is Recreating.
//  * The original container exited → Recreating (kubelet restarts it). Still running → Pending
//    and killable. Created but not started → Pending, killable only with forceRecreate.
//    No runtime container → Pending with message "not found container on Node".
//  * Kill = preStop (exec via CRI ExecSync with the grace period as timeout; httpGet to host or
//    the sandbox IP, 127.0.0.1 for host-network pods; tcpSocket connect), then StopContainer with
//    the grace left after preStop, never below 2 s (grace = strategy.terminationGracePeriodSeconds,
//    default 30 s). A failing preStop is reported as an event and the stop still happens (as
//    kubelet does). The container becomes Recreating with isKilled: true.
//  * orderedRecreate: only the first unfinished container (spec order) may be killed, i.e. the
//    next one only after the previous is Succeeded or Failed. Otherwise every killable one is.
//  * A kill error marks the container Failed; failurePolicy Fail (the default) completes the CRR
//    at once, Ignore carries on.
//  * unreadyGracePeriodSeconds: nothing is killed until that long after the grace start, and the
//    step asks to be requeued at exactly the remaining time.
//  * All containers Succeeded/Failed → phase Completed with completionTime and a message;
//    activeDeadlineSeconds after metadata.creationTimestamp → Completed with a message.
//
// Where the Recreating start is recorded: OpenKruise has no field for it. We keep it in status
// only, as a status condition {type: "Recreating", status: "True", lastTransitionTime} written
// together with phase=Recreating (our CRD's v1alpha1 status schema has `conditions`). The unready
// grace period counts from the manager's PreRecreateGrace condition when it set one (it flips the
// pod unready at that moment), otherwise from our Recreating condition.
//
// Output is a JSON merge patch of `status` only (never a full update). Because merge patches
// replace arrays, containerRecreateStates and conditions are always sent whole. Fields that would
// not change are left out; an unchanged status gives an empty patch.
//
// Thread-safety: Reconcile may be called concurrently for different CRRs (the caller serialises
// the CRRs of one pod, see crr_ordering.h). Blocking: Reconcile performs CRI calls, and while
// killing it blocks for the preStop and the stop (up to the grace period per container).
// Errors: CRI failures while reading container state are returned as the call's status (retry
// with backoff); kill failures are reported in the patch instead. INVALID_ARGUMENT for a CRR
// without the pod-uid label.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "cri/runtime_service.h"
#include "kube/client.h"
#include "kube/kruise_api.h"

namespace kruise::daemon {

using kube::kCrrPodUidLabel;
inline constexpr char kCrrNotFoundMessage[] = "not found container on Node";
inline constexpr char kCrrRecreatingCondition[] = "Recreating";
// status.phase once the request is finished (Succeeded or Failed) and the pod is back.
inline constexpr char kCrrPhaseCompleted[] = "Completed";
using kube::kPreRecreateGraceCondition;

struct CrrExecutorOptions {
  // Grace period when strategy.terminationGracePeriodSeconds is unset.
  int64_t default_grace_seconds = 30;
  // Smallest grace passed to StopContainer (0 would mean SIGKILL at once).
  int64_t minimum_grace_seconds = 2;
  // How soon to look again while waiting for kubelet to recreate a killed container.
  absl::Duration poll_interval = absl::Seconds(3);
};

struct CrrEvent {
  std::string type;    // "Normal" | "Warning"
  std::string reason;  // "Killing", "FailedPreStopHook", "FailedKillContainer"
  std::string message;
};

struct CrrStepResult {
  // {"status": {...}} holding only changed fields, or an empty object when nothing changed.
  kube::Json status_patch = kube::Json::object();
  // When to reconcile again even without a new event; nullopt: only on the next event.
  std::optional<absl::Duration> requeue_after;
  std::vector<CrrEvent> events;

  bool HasPatch() const { return status_patch.contains("status"); }
};

class CrrExecutor {
 public:
  // `runtime` and `clock` must outlive the executor. `clock` measures how long preStop took.
  CrrExecutor(cri::RuntimeService* runtime, Clock* clock, CrrExecutorOptions options = {});

  // One reconcile step of `crr` (a ContainerRecreateRequest object) at time `now`.
  absl::StatusOr<CrrStepResult> Reconcile(const kube::Json& crr, absl::Time now);

  // "containerd://abc" → "abc"; strings without a scheme are returned unchanged.
  static std::string StripContainerIdScheme(const std::string& id);

 private:
  struct RuntimeContainer;
  struct KillOutcome;

  absl::StatusOr<std::vector<RuntimeContainer>> ListPodContainers(const std::string& pod_uid);
  KillOutcome Kill(const kube::Json& crr, const kube::Json& spec_container,
                   const RuntimeContainer& target, std::vector<CrrEvent>* events);
  std::string DefaultPreStopHost(const std::string& sandbox_id);

  cri::RuntimeService* runtime_;
  Clock* clock_;
  CrrExecutorOptions options_;
};

}  // namespace kruise::daemon
