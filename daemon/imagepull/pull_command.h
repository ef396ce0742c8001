#pragma once

// `kruise-daemon pull`: node-local pre-pull without a cluster. Reads the images of ImagePullJob
// and NodeImage YAML documents (or plain image references), pulls them into the local runtime
// through the same ImagePuller as the daemon, draws a progress bar per image and prints a summary.
// Useful to warm a node before it joins a cluster.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/imagepull/nodeimage.h"

namespace kruise::daemon {

struct PullCommandOptions {
  std::vector<std::string> files;   // YAML files ("-" = stdin)
  std::vector<std::string> images;  // plain references
  std::string docker_config;        // ~/.docker/config.json style credentials
  std::string host_run_dir = "/var/run";
  std::string socket_file;
  int max_workers = 2;
  int64_t timeout_seconds = 600;
  int64_t backoff_limit = 3;
  bool always = false;  // imagePullPolicy Always instead of IfNotPresent
};

// ImageSpecs for the images named by YAML text (multi-document) and plain references.
// INVALID_ARGUMENT names the document and what is wrong.
absl::StatusOr<std::vector<ImageSpec>> ImagesFromYaml(const std::string& yaml,
                                                      const PullCommandOptions& options);
absl::StatusOr<std::vector<ImageSpec>> ImagesFromReferences(const std::vector<std::string>& refs,
                                                            const PullCommandOptions& options);

// Runs the command; returns the process exit code (0: every image pulled).
int RunPullCommand(const PullCommandOptions& options);

}  // namespace kruise::daemon
