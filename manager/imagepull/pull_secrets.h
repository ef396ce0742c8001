#pragma once

// PullSecretCopies: the copies of ImagePullJob pull secrets in the daemon config namespace
// (kruise-daemon-config), the only Secrets kruise-daemon may read.
//
// One copy per source Secret (matched by the label imagepulljobs.kruise.io/source-uid = source
// uid), shared by every job naming it: the annotation imagepulljobs.kruise.io/references holds the
// sorted, comma-separated "namespace/job" keys of its users, imagepulljobs.kruise.io/source-key
// the source's "namespace/name". A copy follows its source's type and data; it is deleted when its
// last reference is released (delete with a resourceVersion precondition, so a job that joined
// meanwhile wins and the release is retried).
//
// Source Secrets are read with GET (the manager may not list Secrets cluster-wide); copies are
// read from an informer on the daemon config namespace, plus the copies this process wrote whose
// events the informer may not have delivered yet (so a quick second reconcile never makes a
// second copy).
//
// Thread-safety: all methods are safe from any thread; writes are serialised by one mutex.
// Secret contents are never logged.

#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kube/client.h"
#include "kube/informer.h"

namespace kruise::manager {

class PullSecretCopies {
 public:
  // `copies` is an informer of Secrets in `daemon_namespace`; both pointers must outlive this.
  PullSecretCopies(kube::KubeClient* client, kube::Informer* copies, std::string daemon_namespace);

  // Makes sure every Secret in `names` (in the job's namespace) has a copy that references the
  // job, and releases the job's references to copies of Secrets no longer named. Returns the
  // copies as NodeImage pullSecrets refs ({namespace, name}), in the order of `names`; missing
  // source Secrets are skipped. A job in the daemon namespace itself uses its Secrets directly.
  absl::StatusOr<std::vector<kube::Json>> Sync(const kube::Json& job,
                                               const std::vector<std::string>& names);
  // Releases every reference of the job (job finished or deleted).
  absl::Status ReleaseAll(const kube::Json& job);

  // The keys in a copy's references annotation.
  static std::set<std::string> References(const kube::Json& copy);

 private:
  std::vector<kube::Json> CopiesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ReleaseLocked(const kube::Json& copy, const std::string& job_key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<kube::Json> EnsureLocked(const kube::Json& source, const std::string& job_key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  kube::KubeClient* const client_;
  kube::Informer* const copies_;
  const std::string ns_;
  absl::Mutex mu_;
  // source uid -> the copy as we last wrote it (null: we deleted it).
  absl::flat_hash_map<std::string, kube::Json> recent_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kruise::manager
