#pragma once

// ImagePullJob controller: turns a job into NodeImage tags, `parallelism` nodes at a time, and
// reports progress in the job's status.
//
// Per reconcile of a job (level-based, from the informer caches):
//  1. Being deleted: release the pull-secret copies (PullSecretCopies::ReleaseAll), drop the
//     deletion-protection finalizer.
//  2. Adds the finalizer apps.kruise.io/deletion-protection (so copies are always released),
//     also to a finished job. A finished job (status.completionTime) keeps its copies (a daemon
//     may still read them) and nothing else is done but its ttlSecondsAfterFinished: it is
//     deleted once that time has passed since completionTime.
//  3. Target NodeImages: all; or spec.selector.names; or spec.selector labels matched against
//     NodeImage labels (= Node labels); or the nodes of active, scheduled pods in the job's
//     namespace matching spec.podSelector.
//  4. Pull secrets are copied into the daemon config namespace (PullSecretCopies).
//  5. Status per node: "synced" when the image's tag carries an owner reference with the job's
//     uid and the image lists every secret copy; then the tag status of the same version gives
//     Succeeded / Failed / otherwise (or none yet) active. desired = number of targets.
//  6. Type Always completes when succeeded + failed = desired, or when activeDeadlineSeconds has
//     passed since startTime (the rest counted failed, message "job exceeds
//     activeDeadlineSeconds"). Type Never never completes: nodes that appear later are pulled
//     too (keeps new nodes warm).
//  7. New nodes: parallelism - active of the unsynced ones (sorted by name) get the tag: a tag
//     another job already owns gets our owner reference and version+1; otherwise a new tag with
//     version = last status version + 1, createdAt, imagePullPolicy and pullPolicy
//     {timeoutSeconds, backoffLimit, activeDeadlineSeconds, ttlSecondsAfterFinished}; the image
//     gets the job's sandboxConfig and the secret refs. TTL of the node tag: Always: the job's
//     ttlSecondsAfterFinished, else activeDeadlineSeconds, else timeout x backoffLimit, plus
//     `default_ttl_for_always` (300 s) + rand[0, 300) s; Never: 24 h +- 10 min with
//     activeDeadlineSeconds 1800.
//  8. Writes: NodeImage spec as a JSON merge patch of spec.images.<image> carrying
//     metadata.resourceVersion (conflict: re-read and retry); status as a merge patch of the
//     status subresource. resourceVersion expectations keep a reconcile from acting on a cache
//     that has not seen our previous NodeImage/job writes (which is what makes `parallelism`
//     exact).
//
// Thread-safety: Reconcile() may run on several workers (never for the same job at once).

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "kube/client.h"
#include "kube/controller.h"
#include "kube/event_recorder.h"
#include "kube/expectations.h"
#include "kube/informer.h"
#include "manager/imagepull/imagepulljob_validation.h"
#include "manager/imagepull/pull_secrets.h"

namespace kruise::manager {

struct ImagePullJobControllerOptions {
  kube::Resource node_images;
  kube::Resource image_pull_jobs;
  // Extra TTL for NodeImage tags of Always jobs (--default-ttlseconds-for-always-nodeimage).
  int64_t default_ttl_for_always = 300;
  // Uniform random integer in [0, n) (jitter of tag TTLs); default absl::BitGen.
  std::function<int64_t(int64_t n)> rand;
};

class ImagePullJobReconciler : public kube::Reconciler {
 public:
  // All pointers must outlive the reconciler; `recorder` may be null.
  ImagePullJobReconciler(ImagePullJobControllerOptions opts, kube::KubeClient* client, Clock* clock,
                         kube::EventRecorder* recorder, kube::Informer* jobs,
                         kube::Informer* node_images, kube::Informer* pods,
                         PullSecretCopies* secrets);

  absl::StatusOr<kube::Result> Reconcile(const kube::Request& req) override;

  // The tag pullPolicy this job writes (exposed for tests).
  kube::Json TagPullPolicy(const ImagePullJobSpec& spec);

  // Jobs that found NodeImage `name` in the cache behind a write of ours and wait for it (see
  // Reconcile). The NodeImage's next event requeues them: the group's NodeImage watch calls this,
  // which also forgets them.
  std::vector<kube::Request> TakeWaitersFor(const std::string& node_image);

 private:
  struct Progress {
    std::vector<std::string> not_synced, pulling, succeeded, failed;
  };
  absl::StatusOr<kube::Result> Finish(const kube::Json& job);
  absl::StatusOr<kube::Result> AfterCompletion(const kube::Json& job);
  absl::Status RemoveFinalizer(const kube::Json& job);
  std::vector<std::shared_ptr<const kube::Json>> Targets(const kube::Json& job,
                                                         const ImagePullJobSpec& spec);
  Progress Compute(const kube::Json& job, const ImagePullJobSpec& spec,
                   const std::vector<std::shared_ptr<const kube::Json>>& targets,
                   const std::vector<kube::Json>& secret_refs);
  absl::Status TagNode(const kube::Json& job, const ImagePullJobSpec& spec,
                       const std::string& node_image, const std::vector<kube::Json>& secret_refs);

  const ImagePullJobControllerOptions opts_;
  kube::KubeClient* const client_;
  Clock* const clock_;
  kube::EventRecorder* const recorder_;
  kube::Informer* const jobs_;
  kube::Informer* const node_images_;
  kube::Informer* const pods_;
  PullSecretCopies* const secrets_;
  kube::ResourceVersionExpectations job_expectations_;
  kube::ResourceVersionExpectations node_image_expectations_;
  absl::Mutex waiters_mu_;
  std::map<std::string, std::set<std::string>> waiters_ ABSL_GUARDED_BY(waiters_mu_);
};

}  // namespace kruise::manager
