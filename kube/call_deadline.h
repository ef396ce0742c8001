#pragma once

// ScopedCallDeadline: a deadline for every Kubernetes API call the current thread makes while the
// object lives. RestKubeClient honours it: a call whose deadline has passed is not sent, the
// client-side throttle is not waited past it, no retry starts after it, and each HTTP attempt's
// timeout is capped at what is left (kDeadlineExceeded in every case). Scopes nest: the earliest
// deadline wins.
//
// It is how a caller with a budget (a leader-election renew round, an admission handler under the
// webhook's timeoutSeconds, a fenced write) passes that budget through KubeClient without a new
// parameter on every method. Other KubeClient implementations may ignore it, except the fakes that
// model time (their hung calls end at the deadline).
//
//   {
//     kube::ScopedCallDeadline budget(clock->Now() + absl::Seconds(2));
//     auto pod = client->Get(kube::resources::Pods(), ns, name);  // kDeadlineExceeded after 2 s
//   }
//
// Thread-safety: the deadline is per thread; a scope must end on the thread that began it.

#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace kruise::kube {

class ScopedCallDeadline {
 public:
  explicit ScopedCallDeadline(absl::Time deadline);
  ~ScopedCallDeadline();
  ScopedCallDeadline(const ScopedCallDeadline&) = delete;
  ScopedCallDeadline& operator=(const ScopedCallDeadline&) = delete;

 private:
  std::optional<absl::Time> previous_;
};

// The current thread's deadline for API calls, if any scope set one.
std::optional<absl::Time> CurrentCallDeadline();

// kDeadlineExceeded naming the call.
absl::Status CallDeadlineExceeded(absl::string_view what);

}  // namespace kruise::kube
