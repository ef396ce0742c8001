// kruise-manager: admission webhooks in every replica, leader-elected controllers. See
// manager/app/app.h for the start-up order and manager/app/options.h for flags and environment.

#include <malloc.h>

#include <cstdio>
#include <cstdlib>

#include "common/logging.h"
#include "kube/manager.h"
#include "manager/app/app.h"
#include "manager/app/options.h"

int main(int argc, char** argv) {
#if defined(__GLIBC__)
  // Two malloc arenas instead of glibc's 8 per core: with ~70 threads the caches' list decoding
  // and the first reconciles spread freed pages over every arena, where they stay. With 30k pods
  // (5k of CloneSets) and 1k NodeImages (bench/manager) RssAnon was 61-71 MiB with the default
  // and 48-53 MiB with two. Small allocations stay in per-thread caches, so the webhook threads
  // rarely meet on an arena lock. MALLOC_ARENA_MAX in the environment still decides.
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 2);
#endif
  // Before any thread exists: every thread inherits the blocked SIGTERM/SIGINT.
  std::stop_source stop = kruise::kube::StopOnSignals();
  auto config = kruise::manager::ParseManagerCommandLine(argc, argv, kruise::kube::ProcessEnv());
  if (absl::IsCancelled(config.status())) {  // --help
    std::fputs(std::string(config.status().message()).c_str(), stdout);
    return 0;
  }
  if (!config.ok()) {
    std::fprintf(stderr, "kruise-manager: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  auto format = kruise::ParseLogFormat(config->log_format);
  kruise::InitLogging({.format = format.ok() ? *format : kruise::LogFormat::kText,
                       .level = kruise::LevelFromVerbosity(config->verbosity)});
  return kruise::manager::RunManager(*config, stop.get_token());
}
