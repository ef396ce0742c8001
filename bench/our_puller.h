#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kruise::bench {

// Pulls and removes images through our CRI client (cri/): GrpcImageService on the test bed's
// socket. Not thread-safe; one call at a time.
class OurPuller {
 public:
  virtual ~OurPuller() = default;
  // CRI PullImage of `ref` (anonymous); blocks until containerd has pulled and unpacked it.
  virtual absl::Status Pull(const std::string& ref) = 0;
  // CRI RemoveImage of `ref`; OK when it is not present.
  virtual absl::Status Remove(const std::string& ref) = 0;
};

// Connects to the CRI endpoint `socket_path` (a unix socket path).
absl::StatusOr<std::unique_ptr<OurPuller>> MakeOurPuller(const std::string& socket_path);

// The baseline: a bare generated gRPC stub (runtime.v1.ImageService/PullImage) with no wrapper.
absl::StatusOr<std::unique_ptr<OurPuller>> MakeBareGrpcPuller(const std::string& socket_path);

}  // namespace kruise::bench
