#pragma once

// ImageService: the CRI image operations the daemon needs (pull, inspect, list, remove, fs info).
//
// Thread-safety: implementations are safe to call concurrently from any thread.
// Blocking: every method blocks until the runtime answers or the call's deadline passes. The
// deadline is the implementation's default per-call timeout (GrpcCriOptions::default_timeout),
// except PullImage, which takes its own (usually much longer) timeout.
// Errors (absl::Status codes mirror the gRPC code the runtime returned, message kept verbatim):
//   DEADLINE_EXCEEDED  the deadline passed before the runtime answered;
//   UNAVAILABLE        the runtime socket cannot be reached (message says why);
//   NOT_FOUND, INVALID_ARGUMENT, UNKNOWN, ...  as returned by the runtime.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/cri_api.pb.h"

namespace kruise::cri {

namespace v1 = ::runtime::v1;

class ImageService {
 public:
  virtual ~ImageService() = default;

  // Pulls `image` (any reference the runtime accepts, e.g. "docker.io/library/busybox:1.36").
  // `auth` and `sandbox` may be null. Returns the runtime's image reference (PullImageResponse's
  // image_ref: an image id such as "sha256:..."). `timeout` bounds the whole pull.
  virtual absl::StatusOr<std::string> PullImage(const std::string& image,
                                                const v1::AuthConfig* auth,
                                                const v1::PodSandboxConfig* sandbox,
                                                absl::Duration timeout) = 0;

  // Returns the image known by `image` (name, tag, digest reference or id), or std::nullopt when
  // the runtime does not have it (the CRI reports absence as an empty response, not an error).
  virtual absl::StatusOr<std::optional<v1::Image>> ImageStatus(const std::string& image) = 0;

  // Lists images; `filter` may be empty (all images) or name one image spec.
  virtual absl::StatusOr<std::vector<v1::Image>> ListImages(const v1::ImageFilter& filter) = 0;
  absl::StatusOr<std::vector<v1::Image>> ListImages() { return ListImages(v1::ImageFilter()); }

  // Removes the image known by `image`. Idempotent at the runtime: removing an absent image is OK.
  virtual absl::Status RemoveImage(const std::string& image) = 0;

  // Usage of the filesystem(s) holding images.
  virtual absl::StatusOr<v1::ImageFsInfoResponse> ImageFsInfo() = 0;
};

}  // namespace kruise::cri
