#pragma once

// NodeImageController: keeps the ImagePuller in step with this node's NodeImage and writes the
// pull statuses back.
//
//  - watches only the NodeImage named after the node (fieldSelector metadata.name=<node>);
//  - a spec change re-syncs the puller; a status that completed at a tag's version (e.g. written
//    before a restart) is not pulled again;
//  - status writes are JSON merge patches of the status subresource (fields we do not model, such
//    as firstSyncStatus, are kept), sent only when the status changed. Progress-only changes are
//    rate-limited by a token bucket (OpenKruise: 0.5 qps, burst 5) yet sent at once while under
//    budget; a phase change or completion (StatusChangeIsUrgent) never waits for a token (it
//    takes one when there is one), since jobs and rollouts wait on it (issue 13);
//  - events PullImageSucceed / PullImageFailed on the NodeImage and on each tag's owners.
//
// Thread-safety: Start/Stop from one thread; everything else runs on internal threads.

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "daemon/imagepull/image_puller.h"
#include "kube/client.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "kube/throttle.h"

namespace kruise::daemon {

struct NodeImageControllerOptions {
  std::string node_name;
  kube::Resource resource;  // apps.kruise.io NodeImage, v1alpha1 by default (see resources.h)
  double status_qps = 0.5;
  int status_burst = 5;
};

struct NodeImageControllerStats {
  uint64_t status_writes = 0;
  uint64_t urgent_status_writes = 0;  // of status_writes: sent without waiting for a token
  uint64_t status_write_errors = 0;
  uint64_t syncs = 0;
};

class NodeImageController {
 public:
  // `client`, `clock` and `recorder` (may be null) must outlive the controller. The controller
  // creates and owns the puller from `make_puller`, passing it the change callback.
  using PullerFactory =
      std::function<std::unique_ptr<ImagePuller>(std::function<void()> on_change)>;
  NodeImageController(NodeImageControllerOptions options, kube::KubeClient* client, Clock* clock,
                      kube::EventRecorder* recorder, PullerFactory make_puller);
  ~NodeImageController();

  void Start();
  void Stop();
  bool HasSynced() const { return informer_.HasSynced(); }
  bool WaitForSync(absl::Time deadline) { return informer_.WaitForSync(deadline); }
  NodeImageControllerStats stats() const;
  ImagePuller& puller() { return *puller_; }

 private:
  void OnNodeImage(const nlohmann::json& obj);
  void WriterLoop();
  absl::Status WriteStatus(const nlohmann::json& cached, const nlohmann::json& status);

 public:
  // Emits PullImageSucceed / PullImageFailed on the NodeImage and on the tag's owners (wire it to
  // the puller's PullObserver).
  void RecordOutcome(const std::string& image, const std::string& tag, bool ok,
                     const std::string& message);

 private:
  const NodeImageControllerOptions options_;
  kube::KubeClient* const client_;
  Clock* const clock_;
  kube::EventRecorder* const recorder_;
  kube::Informer informer_;
  kube::TokenBucket bucket_;
  std::unique_ptr<ImagePuller> puller_;

  mutable absl::Mutex mu_;
  bool dirty_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<ImageSpec> spec_ ABSL_GUARDED_BY(mu_);
  std::optional<nlohmann::json> last_spec_ ABSL_GUARDED_BY(mu_);
  std::optional<nlohmann::json> last_written_ ABSL_GUARDED_BY(mu_);
  absl::Time last_write_time_ ABSL_GUARDED_BY(mu_);
  NodeImageControllerStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread writer_;
};

}  // namespace kruise::daemon
