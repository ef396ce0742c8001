#pragma once

// The ImagePullJob controller family for kruise-manager: the NodeImage controller (one NodeImage
// per Node, tag GC, watchdog) and the ImagePullJob controller (see nodeimage_controller.h and
// imagepulljob_controller.h).
//
//   auto group = NewImagePullControllerGroup();
//   RETURN_IF_ERROR(group->Register(ctx));  // informers + two leader-only controllers
//
// Register() creates informers for Nodes, NodeImages, ImagePullJobs, Pods (compacted) and the
// Secrets of ctx.daemon_config_namespace, adds them to ctx.manager, and adds the controllers
// "nodeimage" (gate KruiseDaemon; --nodeimage-workers, default 3), "imagepulljob" (gates
// KruiseDaemon and ImagePullJobGate; --imagepulljob-workers, default 3) and "pullsecretcopy"
// (same gates, one worker: deletes the pull-secret copies no job can use any more, see
// pull_secrets.h). With the gates off it
// registers nothing. The apps.kruise.io version is v1beta1 when the API server serves it (one
// LIST with limit 1 at Register), else v1alpha1; owner references written into NodeImages use
// the same version. When neither version is served (CRDs not installed) the group registers
// nothing, like OpenKruise's controllers.
//
// Left out (compared with OpenKruise): NodeImage pull-secret refs whose Secret vanished are not
// garbage-collected; podSelector targets are sorted by node name, not by the owner's pod order.
//
// Thread-safety: as ControllerGroup. The group must outlive the manager's Run().

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "manager/controller_group.h"

namespace kruise::manager {

struct ImagePullGroupOptions {
  // Wait after a Node became Ready before its NodeImage is created (OpenKruise
  // --nodeimage-creation-delay, 30 s).
  absl::Duration nodeimage_creation_delay = absl::Seconds(30);
  // NodeImage watchdog: how long the daemon may stay silent about a tag (OpenKruise: 10 min).
  absl::Duration response_timeout = absl::Minutes(10);
  // Extra TTL of NodeImage tags of Always jobs (--default-ttlseconds-for-always-nodeimage).
  int64_t default_ttl_for_always_seconds = 300;
  // "" (probe: v1beta1 if served, else v1alpha1), "v1alpha1" or "v1beta1".
  std::string api_version;
};

std::unique_ptr<ControllerGroup> NewImagePullControllerGroup(ImagePullGroupOptions opts = {});

}  // namespace kruise::manager
