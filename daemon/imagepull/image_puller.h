#pragma once

// ImagePuller: pulls the tags a NodeImage asks for, through CRI, with bounded concurrency,
// per-attempt timeouts, a deadline over all attempts, backoff, credentials and real progress.
//
// Semantics (OpenKruise's, except where marked "ours"):
//  - one worker per (image, tag); a tag whose `version` changes restarts its worker; a removed
//    tag or image stops it; a tag already complete at the same version is not pulled again;
//  - a worker reports Waiting while it waits for a pull slot (ours: at most `max_workers`
//    pulls run at once; OpenKruise's default is unlimited), then Pulling with startTime;
//  - attempts = backoffLimit + 1, each bounded by timeoutSeconds and by what remains of
//    activeDeadlineSeconds (counted from the worker's start); 1 s backoff doubling to 30 s;
//  - imagePullPolicy IfNotPresent succeeds at once when the runtime has the image;
//  - every matching credential is tried in turn; anonymous only when none matched;
//  - progress (ours): bytes done / bytes known of the layers containerd is downloading while
//    PullImage runs (content service ListStatuses), monotonic within an attempt, 100 on success.
//    Runtimes without that service report 0 then 100.
//
// Thread-safety: all public methods are thread-safe. `on_change` is called (from worker threads,
// never under the puller's lock) whenever any status changes; it must not block for long.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "cri/content_status.h"
#include "cri/image_service.h"
#include "daemon/imagepull/credential_keyring.h"
#include "daemon/imagepull/nodeimage.h"

namespace kruise::daemon {

// Resolves pull secrets to credentials for one repository ("registry/path").
// Errors (e.g. a referenced secret cannot be read) fail the pull with the message.
class CredentialSource {
 public:
  virtual ~CredentialSource() = default;
  virtual absl::StatusOr<std::vector<RegistryCredential>> Lookup(
      const std::string& repository, const std::vector<SecretRef>& secrets) = 0;
};

struct ImagePullerOptions {
  int max_workers = 2;  // <= 0: unlimited
  absl::Duration backoff_initial = absl::Seconds(1);
  absl::Duration backoff_max = absl::Seconds(30);
  absl::Duration progress_interval = absl::Milliseconds(500);
  // After a PullImage fails, the runtime is asked (ImageStatus) whether it answers. If it is
  // UNAVAILABLE, the runtime is down (restarting, socket gone): that is the node's
  // state, not the image's, so the attempt is not counted and the worker waits, asking every
  // runtime_probe_interval, until it answers; then the same attempt runs again. The tag's
  // activeDeadlineSeconds still bounds the whole pull.
  absl::Duration runtime_probe_interval = absl::Seconds(1);
};

// Observer of pull outcomes, for metrics and events. Called from worker threads.
struct PullObserver {
  std::function<void(const std::string& image, const std::string& tag)> on_start;
  std::function<void(const std::string& image, const std::string& tag, absl::Duration took,
                     int64_t bytes)>
      on_success;
  std::function<void(const std::string& image, const std::string& tag, const std::string& message)>
      on_failure;
};

class ImagePuller {
 public:
  // `images` and `credentials` must outlive the puller (shared ownership keeps them alive for
  // workers that are still inside a blocking CRI call after Stop()). `content` may be null.
  ImagePuller(ImagePullerOptions options, std::shared_ptr<cri::ImageService> images,
              std::shared_ptr<cri::ContentStatusReader> content,
              std::shared_ptr<CredentialSource> credentials, Clock* clock,
              std::function<void()> on_change, PullObserver observer = {});
  ~ImagePuller();

  // Makes the running workers match `spec`. `known` is the status last written to the API
  // (tags complete at their spec version there are not pulled again).
  void Sync(const std::vector<ImageSpec>& spec, const ImageStatuses& known);

  // Current statuses of every tag the puller knows about.
  ImageStatuses Statuses() const;

  // Number of pulls currently holding a slot (for metrics and tests).
  int active_pulls() const;

  // Stops every worker; waits for them, except those blocked inside a CRI call, which are
  // abandoned (their results are dropped).
  void Stop();

 private:
  // Workers share Impl, so a worker abandoned inside a blocking CRI call after Stop() never
  // touches a destroyed puller.
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace kruise::daemon
