#pragma once

// FailOpen: what a pod webhook does when its own machinery fails (issue 33, part 3).
//
// The pod webhooks (`/mutate-pod`, `/validate-pod`) are failurePolicy Ignore in
// deploy/manager/base/webhooks.yaml: a manager that does not answer never blocks pod creation,
// deletion or eviction. An error inside a handler must mean the same thing, or a failing API
// call would deny what an unreachable manager lets through. So:
//   * policy decisions (a PodUnavailableBudget spent, two SidecarSets in conflict, a pod the
//     author must fix) deny with a readable reason, as before;
//   * infrastructure failures (an API call failing or timing out, a status write that keeps
//     conflicting, an exception) allow the request, with
//       - an AdmissionReview warning (kubectl prints it),
//       - a Warning event (reason kReason) on the object whose record could not be written,
//         when there is one (a WorkloadSpread, a PodUnavailableBudget, an existing pod),
//       - the counter kruise_webhook_infrastructure_failures_total{path,handler},
//       - a log line.
// Webhooks whose failurePolicy is Fail (our own resources, CRR, deletion protection) keep failing
// closed and do not use this.
//
//   webhook::FailOpen fail_open({.metrics = registry.get(), .event = ...});
//   if (IsInfrastructureFailure(st)) {
//     response.warnings.push_back(fail_open.Record(kMutatePodPath, "workloadspread", st, &ws));
//   }
//
// Thread-safety: Record() is safe from any thread; the event sink must be too.

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "manager/webhook/admission.h"

namespace prometheus {
class Registry;
template <typename T>
class Family;
class Counter;
}  // namespace prometheus

namespace kruise::manager::webhook {

// True for the status codes of a failing environment rather than of a decision: kUnavailable,
// kDeadlineExceeded, kAborted (conflicts past the retries), kInternal, kUnknown,
// kResourceExhausted, kCancelled, kDataLoss. Policy answers use kInvalidArgument,
// kFailedPrecondition, kPermissionDenied, ...
bool IsInfrastructureFailure(const absl::Status& status);

class FailOpen {
 public:
  static constexpr char kReason[] = "WebhookInfrastructureFailure";
  // Writes a Warning event about `object` (kind, apiVersion, metadata.name/namespace). Must not
  // block (kube::EventRecorder::Event queues).
  using EventSink =
      std::function<void(const Json& object, const std::string& reason, const std::string& message)>;
  struct Options {
    prometheus::Registry* metrics = nullptr;  // null: no counter
    EventSink event = nullptr;                // null: no events
  };
  explicit FailOpen(Options options);
  FailOpen(const FailOpen&) = delete;
  FailOpen& operator=(const FailOpen&) = delete;

  // Records one infrastructure failure of `handler` on `path` (counter, log, event about
  // `object` when non-null) and returns the admission warning for it ("<handler>: <what>:
  // <status message>; allowed without it (failurePolicy Ignore)").
  std::string Record(absl::string_view path, absl::string_view handler, absl::string_view what,
                     const absl::Status& status, const Json* object = nullptr);
  // Allowed, with Record's warning.
  AdmissionResponse Allow(absl::string_view path, absl::string_view handler,
                          absl::string_view what, const absl::Status& status,
                          const Json* object = nullptr);
  int64_t count() const { return count_.load(); }

 private:
  Options options_;
  prometheus::Family<prometheus::Counter>* counter_ = nullptr;
  std::atomic<int64_t> count_{0};
};

// A minimal object reference for events: {apiVersion, kind, metadata{name, namespace}}.
Json ObjectRef(const std::string& api_version, const std::string& kind, const std::string& ns,
               const std::string& name);

}  // namespace kruise::manager::webhook
