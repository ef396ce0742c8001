#pragma once

// ContentStatusReader: in-flight content ingestions (layer/manifest downloads) of a runtime's
// content store, for pull-progress reporting. With containerd this is the content service's
// ListStatuses in one containerd namespace ("k8s.io" for CRI-pulled images).
//
// Thread-safety: implementations are safe to call concurrently. Blocking: one round-trip bounded
// by the implementation's per-call timeout. Errors: as ImageService (gRPC code mapped, message
// kept); UNIMPLEMENTED when the runtime has no such service (e.g. CRI-O).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kruise::cri {

struct ContentStatus {
  std::string ref;     // ingestion ref, e.g. "layer-sha256:..." (containerd's naming)
  int64_t offset = 0;  // bytes received so far
  int64_t total = 0;   // expected size in bytes (0 when unknown)
};

class ContentStatusReader {
 public:
  virtual ~ContentStatusReader() = default;

  // Active ingestions matching every filter (containerd filter syntax, e.g. "ref~=sha256"); an
  // empty list means all.
  virtual absl::StatusOr<std::vector<ContentStatus>> ListStatuses(
      const std::vector<std::string>& filters) = 0;
};

}  // namespace kruise::cri
