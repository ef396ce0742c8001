#pragma once

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kruise::testing {

// Runs argv[0] (looked up in PATH) with stdin from /dev/null; captures stdout (and stderr, merged)
// when `output` is non-null, otherwise discards both. Blocks until the process exits. Returns the
// exit code (128+signal when killed), or an error when it could not be started.
absl::StatusOr<int> RunCommand(const std::vector<std::string>& argv, std::string* output = nullptr);

// Splits a command line at spaces (used for KRUISE_TESTBED_CTR, which holds no quoted parts).
std::vector<std::string> SplitCommandLine(const std::string& line);

// One image of the test bed's images.txt: "name:tag manifest-digest config-digest
// layer-digests...".
struct TestbedImage {
  std::string name_tag;
  std::vector<std::string> blobs;  // manifest, config and every layer digest ("sha256:<hex>")
};

// Parses $KRUISE_TESTBED_IMAGES_FILE.
absl::StatusOr<std::vector<TestbedImage>> ReadImagesFile(const std::string& path);

// Pids of containerd shims (containerd-shim-runc-v2) whose -address is `socket` and, when `id` is
// not empty, whose -id is `id` (a sandbox or container id).
std::vector<int> ShimPids(const std::string& socket, const std::string& id = "");

// Digests held by containerd's content store (`<ctr> content ls -q`).
absl::StatusOr<std::set<std::string>> ContentDigests(const std::vector<std::string>& ctr);

}  // namespace kruise::testing
