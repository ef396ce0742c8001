#pragma once

// WriteFence and FencedKubeClient: a leader that may have lost its lease writes nothing.
//
// The leader elector extends the fence after every successful renewal to
//   (the time the renewal round started) + renew_deadline
// and closes it when it stops leading. Another replica can only take the lease after it has seen
// the record unchanged for lease_duration (> renew_deadline), counted from a moment after our
// renewal was sent, so the fence closes at least lease_duration - renew_deadline before any
// successor can start. The fence is judged on the local clock at the moment of each write: a
// process that was frozen (SIGSTOP, a cgroup freeze, a stalled VM) and wakes up past the fence
// finds it closed before its elector has even noticed, so its stale caches drive no write.
//
// FencedKubeClient wraps the client the controllers use: reads pass through; Create, Update,
// Patch and Delete are refused with kFailedPrecondition ("not the leader: ...") once the fence is
// closed, and run under a ScopedCallDeadline at the fence, so a write waiting in the client-side
// throttle or for a connection, or a retry, is never sent after it (RestKubeClient honours the
// deadline; see call_deadline.h). What no client can prevent: a request the API server had
// already received before the fence and applies later; its send time was before the fence.
//
// Thread-safety: all methods are safe from any thread.

#include <atomic>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "kube/client.h"

namespace kruise::kube {

class WriteFence {
 public:
  // Starts closed. `clock` must outlive the fence.
  explicit WriteFence(Clock* clock = Clock::Real());

  // Open until `until` (never moves backwards while open; absl::InfiniteFuture() for a replica
  // that leads without election).
  void ExtendTo(absl::Time until);
  // Closed from now on, until the next ExtendTo (a new term).
  void Close();

  // OK while open; kFailedPrecondition saying since when it is closed otherwise.
  absl::Status Check() const;
  bool IsOpen() const { return Check().ok(); }
  // The end of the current term (absl::InfinitePast() when closed).
  absl::Time until() const;
  // Writes refused so far (for tests and metrics).
  int64_t refused() const { return refused_.load(); }

 private:
  friend class FencedKubeClient;
  void CountRefused() const { refused_.fetch_add(1); }

  Clock* const clock_;
  mutable absl::Mutex mu_;
  absl::Time until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  mutable std::atomic<int64_t> refused_{0};
};

class FencedKubeClient final : public KubeClient {
 public:
  // Both must outlive this.
  FencedKubeClient(KubeClient* inner, const WriteFence* fence);

  absl::StatusOr<Json> Get(const Resource& r, const std::string& ns,
                           const std::string& name) override;
  absl::StatusOr<ListResult> List(const Resource& r, const std::string& ns,
                                  const ListOptions& opts) override;
  absl::StatusOr<Json> Create(const Resource& r, const std::string& ns, const Json& obj) override;
  absl::StatusOr<Json> Update(const Resource& r, const std::string& ns, const Json& obj,
                              const std::string& subresource = "") override;
  absl::StatusOr<Json> Patch(const Resource& r, const std::string& ns, const std::string& name,
                             PatchType type, const Json& patch,
                             const std::string& subresource = "") override;
  absl::Status Delete(const Resource& r, const std::string& ns, const std::string& name,
                      const DeleteOptions& opts = {}) override;
  absl::Status Watch(const Resource& r, const std::string& ns, const ListOptions& opts,
                     const WatchHandler& handler, WatchCanceller* canceller) override;

 private:
  // Runs `write` under the fence; maps a deadline hit at the fence to the fence's error.
  template <typename F>
  auto Fenced(const char* verb, const Resource& r, const std::string& ns, const std::string& name,
              F&& write) -> decltype(write());

  KubeClient* const inner_;
  const WriteFence* const fence_;
};

}  // namespace kruise::kube
