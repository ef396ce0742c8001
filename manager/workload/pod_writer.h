#pragma once

// PodWriter: the writes every workload controller (CloneSet, Advanced StatefulSet, Advanced
// DaemonSet) makes to the objects it owns, each paired with the expectation that keeps a stale
// cache from making the controller repeat it.
//
//  - ObserveThrough feeds the expectations from an informer's events (FeedExpectations): the pods,
//    and any other kind the workload creates and deletes (CloneSet's claims).
//  - PatchPod: kube::PatchIfUnchanged (the caller's ops begin with a `test` of the pod's
//    resourceVersion), then the new resourceVersion is expected, so the next round waits until
//    the cache has it.
//  - Delete: the scale expectation first, a DELETE with the object's uid as precondition, and the
//    expectation dropped again when the DELETE did not happen (the caller reports it).
//  - ClaimPods (pod_claim.h) and UpdateInPlace (inplace::ApplyInPlaceUpdate) through PatchPod,
//    with OpenKruise's events: AdoptedPod/ReleasedPod and SuccessfulUpdatePodInPlace/
//    FailedUpdatePodInPlace.
//  - InvalidSpec and Selector: a spec the controller cannot act on ends the reconcile with a
//    terminal error and an InvalidSpec (InvalidSelector) warning on the workload.
//
// Creation stays with each controller: what an AlreadyExists means differs (a deterministic
// StatefulSet name, a generated DaemonSet one), and so does its expectation.
//
// Thread-safety: safe for concurrent use (the expectations are; the client and recorder must be).

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "kube/client.h"
#include "kube/event_recorder.h"
#include "kube/expectations.h"
#include "kube/informer.h"
#include "kube/object.h"
#include "manager/inplace/inplace_apply.h"

namespace kruise::manager::workload {

class PodWriter {
 public:
  // `client` and `clock` must outlive the writer; `recorder` may be null (no events).
  PodWriter(kube::KubeClient* client, kube::EventRecorder* recorder, Clock* clock);

  // `owner_key(obj)`: the expectations key of the workload that controls `obj` ("" for none).
  // Before the informer starts.
  void ObserveThrough(kube::Informer* informer,
                      std::function<std::string(const kube::Json&)> owner_key);

  // A Normal (or Warning) event on `workload`.
  void Event(const kube::Json& workload, bool warning, const std::string& reason,
             const std::string& message) const;
  // A spec the controller cannot act on: an InvalidSpec warning on `workload` with `why`'s message,
  // and `why` as the reconcile's terminal error (kube::TerminalError: not retried).
  absl::Status InvalidSpec(const kube::Json& workload, const absl::Status& why) const;
  // The workload's spec.selector. Missing, invalid, or selecting everything or nothing: an
  // InvalidSelector warning and a terminal error, as OpenKruise's workload controllers refuse it.
  absl::StatusOr<kube::LabelSelector> Selector(const kube::Json& workload) const;

  // `ops`: a JSON Patch that begins with a `test` of the pod's resourceVersion; `subresource` ""
  // or "status". ABORTED when the pod changed meanwhile.
  absl::StatusOr<kube::Json> PatchPod(const kube::Json& pod, const kube::Json& ops,
                                      const std::string& subresource = "");

  // Deletes `obj` (uid precondition added) under the scale expectation `key`. The API's error as
  // it is (NOT_FOUND when gone already, ABORTED when another object holds the name now).
  absl::Status Delete(const std::string& key, const kube::Resource& resource, const kube::Json& obj,
                      kube::DeleteOptions options = {});

  // The workload's pods from `pods` (SharedInformers::PodOptions()), adopting and releasing as
  // ClaimPods does; `owner_ref` is the workload's controller reference.
  absl::StatusOr<std::vector<kube::Json>> ClaimPods(const kube::Json& workload,
                                                    kube::Json owner_ref,
                                                    const kube::LabelSelector& selector,
                                                    kube::Informer* pods);

  // Updates `pod` in place to `update` (the workload's update revision, named `revision` in the
  // events) with the workload's `options`; an event either way.
  absl::Status UpdateInPlace(const kube::Json& workload, const kube::Json& pod,
                             const inplace::InPlaceUpdateSpec& update,
                             const inplace::InPlaceUpdatePatchOptions& options, absl::Time now,
                             const std::string& revision);

  kube::ScaleExpectations& scale_expectations() { return scale_; }
  kube::ResourceVersionExpectations& rv_expectations() { return rv_; }

 private:
  kube::KubeClient* const client_;
  kube::EventRecorder* const recorder_;
  kube::ScaleExpectations scale_;
  kube::ResourceVersionExpectations rv_;
};

}  // namespace kruise::manager::workload
