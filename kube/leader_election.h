#pragma once

// LeaderElector: leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.
//
// A candidate reads the Lease every retry_period. It takes the lease when it is absent, released
// (holderIdentity "") or expired. Expiry is judged by *local observation*: the lease is expired
// when its record has not changed for leaseDurationSeconds since we last saw it change, so clock
// skew between replicas does not matter. The leader renews every retry_period. Unlike client-go,
// whose renew round may run past renew_deadline while a call hangs, leadership here ends at the
// latest renew_deadline after the start of the last successful renewal round: every call of a
// round is bounded by that moment (ScopedCallDeadline), and a configured WriteFence closes then
// too, so writes stop even before this thread notices (a frozen process). Seeing another holder
// while leading ends it at once. On loss, on_lost runs first (the process should exit there), then
// OnStoppedLeading. On a clean stop the leader releases the lease (holderIdentity "",
// leaseDurationSeconds 1) so a successor takes over at once. Write conflicts are resolved by
// re-reading on the next retry.
//
// Timestamps are MicroTime ("2006-01-02T15:04:05.000000Z"). Requires
// lease_duration > renew_deadline > 1.2 * retry_period (validated by Create()).
//
// Thread-safety: Run() blocks its caller; IsLeader()/GetLeader() are safe from any thread.
// Callbacks run on the Run() thread (OnStartedLeading runs on its own thread: it may block until
// the stop token it receives fires).

#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "kube/client.h"
#include "kube/write_fence.h"

namespace kruise::kube {

const Resource& LeaseResource();

// "2006-01-02T15:04:05.000000Z" and back.
std::string FormatMicroTime(absl::Time t);
absl::StatusOr<absl::Time> ParseMicroTime(const std::string& s);

// `base` (default: the hostname) + "_" + a random suffix, unique per process.
std::string DefaultLeaderIdentity(absl::string_view base = "");

struct LeaderCallbacks {
  // Runs on a dedicated thread once we lead; `stop` fires when leadership ends.
  std::function<void(std::stop_token stop)> on_started_leading;
  // Runs when leadership is lost or released (only if we had led).
  std::function<void()> on_stopped_leading;
  // Runs when the observed leader changes (including to ourselves).
  std::function<void(const std::string& identity)> on_new_leader;
  // Runs on the Run() thread the moment the lease is lost (not on a clean stop), after the fence
  // closed and before on_started_leading's stop token fires and is waited for. A process that must
  // not drain its in-flight work (controller-runtime exits at once) exits here.
  std::function<void()> on_lost;
};

struct LeaderElectionConfig {
  std::string lease_namespace = "kruise-system";
  std::string lease_name = "kruise-manager";
  std::string identity;  // "" -> DefaultLeaderIdentity()
  absl::Duration lease_duration = absl::Seconds(15);
  absl::Duration renew_deadline = absl::Seconds(10);
  absl::Duration retry_period = absl::Seconds(2);
  bool release_on_cancel = true;
  Clock* clock = Clock::Real();
  // Optional: opened to (renewal round start + renew_deadline) at each successful acquire or
  // renewal, closed when leadership ends (write_fence.h). Must outlive the elector.
  WriteFence* fence = nullptr;
  LeaderCallbacks callbacks;
};

class LeaderElector {
 public:
  // Validates the timings (kInvalidArgument). `client` must outlive the elector.
  static absl::StatusOr<std::unique_ptr<LeaderElector>> Create(KubeClient* client,
                                                               LeaderElectionConfig config);
  ~LeaderElector();

  // Campaigns until leading, then renews until leadership is lost or `stop` fires (then releases
  // the lease if configured). Returns true if leadership ended because `stop` fired or we never
  // led, false if the lease was lost.
  bool Run(std::stop_token stop);

  bool IsLeader() const;
  std::string GetLeader() const;
  const std::string& identity() const { return config_.identity; }

 private:
  LeaderElector(KubeClient* client, LeaderElectionConfig config);
  enum class Attempt { kHeld, kFailed, kTakenByOther };
  // One read-modify-write started at `now`, every call of it bounded by `deadline`. kHeld: we
  // hold the lease afterwards; kTakenByOther: we were leading and another identity holds it.
  Attempt TryAcquireOrRenew(absl::Time now, absl::Time deadline);
  void SetLeading(bool leading, absl::Time fence_until);
  void Release();
  // Waits `d` on the clock or until stop; false when stopped.
  bool Wait(std::stop_token& stop, absl::Duration d);
  void ObserveLeader(const std::string& holder);

  KubeClient* const client_;
  LeaderElectionConfig config_;

  mutable absl::Mutex mu_;
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool leading_ ABSL_GUARDED_BY(mu_) = false;
  std::string observed_holder_ ABSL_GUARDED_BY(mu_);
  // The last lease spec we saw (compared to detect changes) and when we saw it change.
  Json observed_spec_ ABSL_GUARDED_BY(mu_);
  absl::Time observed_time_ ABSL_GUARDED_BY(mu_);
  std::string reported_leader_;  // Run() thread only
};

}  // namespace kruise::kube
