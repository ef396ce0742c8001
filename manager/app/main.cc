// kruise-manager: admission webhooks in every replica, leader-elected controllers. See
// manager/app/app.h for the start-up order and manager/app/options.h for flags and environment.

#include <cstdio>

#include "common/logging.h"
#include "kube/manager.h"
#include "manager/app/app.h"
#include "manager/app/options.h"

int main(int argc, char** argv) {
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
