#pragma once

// Container image references (docker/distribution grammar), normalised the way containerd and
// the kubelet do: "busybox" → registry "docker.io", repository "library/busybox", tag "latest".
//
//   ASSIGN_OR_RETURN(auto ref, kruise::ParseImageReference("busybox:1.36"));
//   ref.Normalized();  // "docker.io/library/busybox:1.36"
//   ref.Familiar();    // "busybox:1.36"
//
// Pure string code (no gRPC), shared by the daemon, the manager and the fakes. Thread-compatible
// value type.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kruise {

struct ImageReference {
  std::string registry;    // "docker.io", "127.0.0.1:5000", "localhost", "[::1]:5000"
  std::string repository;  // path without registry, "library/busybox" for docker.io singles
  std::string tag;         // "latest" when neither tag nor digest was given; may be empty
  std::string digest;      // "sha256:<64 hex>" or empty

  // registry/repository[:tag][@digest]
  std::string Normalized() const;
  // Docker's short form: drops "docker.io/" and "library/" (for docker.io), keeps tag/digest;
  // keeps "docker.io/" when the rest would read as another registry ("docker.io/localhost/x") and
  // "library/" before a 64-hex name (an image id alone), so it parses back to the same reference.
  std::string Familiar() const;
  // registry/repository
  std::string RepositoryWithRegistry() const;

  bool operator==(const ImageReference&) const = default;
};

// Parses and normalises `ref`. INVALID_ARGUMENT with a message naming the problem (empty
// reference, uppercase repository, invalid tag, invalid digest, bad registry port, ...).
absl::StatusOr<ImageReference> ParseImageReference(absl::string_view ref);

}  // namespace kruise
