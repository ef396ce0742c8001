#pragma once

// PullSecretCopies: the copies of ImagePullJob pull secrets in the daemon config namespace
// (kruise-daemon-config), the only Secrets kruise-daemon may read.
//
// One copy per source Secret (matched by the label imagepulljobs.kruise.io/source-uid = source
// uid), shared by every job naming it: the annotation imagepulljobs.kruise.io/references holds the
// sorted, comma-separated "namespace/job" keys of its users, imagepulljobs.kruise.io/source-key
// the source's "namespace/name". A copy follows its source's type and data. Only Secrets of type
// kubernetes.io/dockerconfigjson and kubernetes.io/dockercfg are copied (the only ones the daemon
// can read credentials from); others are skipped with a Warning event on the job naming the
// Secret and its type (once per job and Secret; never the contents).
//
// Lifetime: a job keeps its reference for its whole life, completed or not; the reference is
// released when the job is being deleted (Sync also releases Secrets a job no longer names).
// Releasing only edits the annotation: deleting a copy is Collect()'s decision alone, taken
//  - never within `grace` of the copy's creationTimestamp (the caller requeues for the rest),
//  - only when no job in the jobs cache is named in its references, and then only after asking
//    the API server: the copy is re-read, and every ImagePullJob of the source's namespace that
//    names the source Secret keeps it (a live one is added to the references; one being deleted
//    keeps it until it is gone, its deletion event brings the copy back here),
//  - with the re-read resourceVersion and uid as delete preconditions (a job that joined
//    meanwhile wins; the decision is taken again).
// So a copy whose jobs all vanished without releasing it (deleted while no manager ran, the
// finalizer removed by hand) is collected at the next start (every copy is collected once when
// the controller starts) or at the job's deletion event (CopiesUsableBy).
//
// Source Secrets are read with GET (the manager may not list Secrets cluster-wide); copies are
// read from an informer on the daemon config namespace, plus the copies this process wrote whose
// events the informer may not have delivered yet (so a quick second reconcile never makes a
// second copy).
//
// Thread-safety: all methods are safe from any thread; writes and Collect() are serialised by one
// mutex. Secret contents are never logged.

#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "kube/client.h"
#include "kube/controller.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"

namespace kruise::manager {

// How long a copy is kept after its creation whatever its references say: a daemon that saw the
// NodeImage tag naming it reads it within this time even when its job finished and was deleted
// at once.
inline constexpr absl::Duration kPullSecretCopyGrace = absl::Seconds(30);

struct PullSecretCopiesOptions {
  std::string daemon_namespace = "kruise-daemon-config";
  // The ImagePullJob resource (its served version) listed before a copy is deleted.
  kube::Resource image_pull_jobs;
  absl::Duration grace = kPullSecretCopyGrace;
};

class PullSecretCopies {
 public:
  // `copies` is an informer of Secrets in the daemon namespace, `jobs` one of ImagePullJobs; all
  // pointers must outlive this; `recorder` may be null.
  PullSecretCopies(kube::KubeClient* client, Clock* clock, kube::EventRecorder* recorder,
                   kube::Informer* copies, kube::Informer* jobs, PullSecretCopiesOptions opts);

  // Makes sure every Secret in `names` (in the job's namespace) has a copy that references the
  // job, and releases the job's references to copies of Secrets no longer named. Returns the
  // copies as NodeImage pullSecrets refs ({namespace, name}), in the order of `names`; missing
  // source Secrets and Secrets of other types than the docker ones are skipped. A job in the
  // daemon namespace itself uses its Secrets directly.
  absl::StatusOr<std::vector<kube::Json>> Sync(const kube::Json& job,
                                               const std::vector<std::string>& names);
  // Releases every reference of the job (the job is being deleted). Never deletes a copy.
  absl::Status ReleaseAll(const kube::Json& job);

  // Deletes the copy `name` (in the daemon namespace) when no job can use it any more (see the
  // header comment); a requeue delay while it is younger than the grace period.
  absl::StatusOr<kube::Result> Collect(const std::string& name);

  // The copies (requests in the daemon namespace) a job could have used: those naming it in their
  // references and those of the Secrets it names. For the job's deletion event. Reads the
  // informer only (no lock), so it is cheap on an event thread.
  std::vector<kube::Request> CopiesUsableBy(const kube::Json& job) const;

  // The keys in a copy's references annotation.
  static std::set<std::string> References(const kube::Json& copy);

 private:
  std::vector<kube::Json> CopiesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ReleaseLocked(const kube::Json& copy, const std::string& job_key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<kube::Json> EnsureLocked(const kube::Json& source, const std::string& job_key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WarnSkippedLocked(const kube::Json& job, const kube::Json& source)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  kube::KubeClient* const client_;
  Clock* const clock_;
  kube::EventRecorder* const recorder_;
  kube::Informer* const copies_;
  kube::Informer* const jobs_;
  const PullSecretCopiesOptions opts_;
  const std::string& ns_ = opts_.daemon_namespace;
  absl::Mutex mu_;
  // source uid -> the copy as we last wrote it (null: we deleted it).
  absl::flat_hash_map<std::string, kube::Json> recent_ ABSL_GUARDED_BY(mu_);
  // "job uid/secret name" of the skipped Secrets already reported with an event.
  absl::flat_hash_set<std::string> warned_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kruise::manager
