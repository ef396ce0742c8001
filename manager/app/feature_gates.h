#pragma once

// FeatureGates: OpenKruise's --feature-gates ("Name=true,Other=false"), with the code defaults of
// the gates OpenKruise knows (pkg/features), so an existing command line keeps working, and the
// dependency rules OpenKruise applies once at start-up, so the effective set is derived:
//   * KruiseDaemon=false forces off every gate that needs the node agent (ImagePullJobGate,
//     DaemonWatchingPod, PreDownloadImageFor*, InPlaceUpdateEnvFromMetadata, PodProbeMarkerGate,
//     SidecarTerminator, EnhancedLivenessProbe);
//   * PodWebhook=false forces off the gates that work through the pod webhook;
//   * PreDownloadImageForInPlaceUpdate / PreDownloadImageForDaemonSetUpdate turn ImagePullJobGate
//   on;
//   * ResourcesDeletionProtection=false forces DeletionProtectionForCRDCascadingGate off.
// A gate asked for explicitly and then forced off is reported in warnings() (OpenKruise does this
// silently).
//
// Thread-safety: immutable after Parse(); Enabled() is safe from any thread.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kruise::manager {

struct FeatureGateSpec {
  const char* name;
  bool default_enabled;
  const char* stage;  // "Alpha" | "Beta" | "GA"
};

// Every gate OpenKruise knows, with its code default.
const std::vector<FeatureGateSpec>& KnownFeatureGates();

class FeatureGates {
 public:
  // Defaults only.
  FeatureGates();

  // Parses "A=true,B=false" (spaces around items allowed, empty string = defaults) and resolves
  // the dependencies. Errors: kInvalidArgument naming an unknown gate (and listing the known
  // ones) or a value that is not a boolean.
  static absl::StatusOr<FeatureGates> Parse(absl::string_view spec);

  // false for unknown names.
  bool Enabled(absl::string_view gate) const;
  // "A=true,B=false" of every gate, sorted (for the start-up log line).
  std::string String() const;
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  void Resolve(const std::map<std::string, bool, std::less<>>& explicit_values);

  std::map<std::string, bool, std::less<>> enabled_;
  std::vector<std::string> warnings_;
};

}  // namespace kruise::manager
