#pragma once

// ControllerGroup: how kruise-manager's composition root (manager/app) hands its shared parts to a
// family of controllers without knowing them. A group owns its informers, reconcilers and
// kube::Controllers; Register() creates them and adds them to the kube::Manager (informers with
// AddInformer, controllers with Add; kube::Controller is a leader-only Runnable), so they start
// after the caches, the webhook readiness gate and leader election.
//
//   auto group = NewImagePullControllerGroup();
//   RETURN_IF_ERROR(group->Register(ctx));
//   manager.Run(stop);  // group must outlive Run()
//
// Thread-safety: Register() is called once, from the composition root, before Manager::Run().
// Errors: a group returns INVALID_ARGUMENT for bad options; it never starts threads itself.

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/clock.h"
#include "kube/client.h"
#include "kube/event_recorder.h"
#include "kube/manager.h"

namespace kruise::manager {

struct ControllerContext {
  kube::KubeClient* client = nullptr;
  kube::Manager* manager = nullptr;
  kube::EventRecorder* recorder = nullptr;
  Clock* clock = Clock::Real();
  // Namespace of the manager itself (POD_NAMESPACE, default kruise-system).
  std::string namespace_name = "kruise-system";
  // Namespace holding pull secrets copied for the daemons.
  std::string daemon_config_namespace = "kruise-daemon-config";
  // Resolved feature gates (name → enabled).
  std::function<bool(absl::string_view gate)> feature_enabled = [](absl::string_view) {
    return true;
  };
  // Worker count for a controller: the --<name>-workers flag or `fallback`.
  std::function<int(absl::string_view controller, int fallback)> workers =
      [](absl::string_view, int fallback) { return fallback; };
};

class ControllerGroup {
 public:
  virtual ~ControllerGroup() = default;
  virtual std::string Name() const = 0;
  virtual absl::Status Register(const ControllerContext& ctx) = 0;
};

}  // namespace kruise::manager
