#include "manager/app/feature_gates.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace kruise::manager {

const std::vector<FeatureGateSpec>& KnownFeatureGates() {
  static const auto* gates = new std::vector<FeatureGateSpec>{
      {"PodWebhook", true, "Beta"},
      {"KruiseDaemon", true, "Beta"},
      {"DaemonWatchingPod", true, "Beta"},
      {"ImagePullJobGate", false, "Alpha"},
      {"PreDownloadImageForInPlaceUpdate", false, "Alpha"},
      {"PreDownloadImageForDaemonSetUpdate", false, "Alpha"},
      {"InPlaceUpdateEnvFromMetadata", true, "Beta"},
      {"PodProbeMarkerGate", true, "Beta"},
      {"WorkloadSpread", true, "Beta"},
      {"PodUnavailableBudgetDeleteGate", true, "Beta"},
      {"PodUnavailableBudgetUpdateGate", false, "Alpha"},
      {"ResourcesDeletionProtection", true, "Beta"},
      {"DeletionProtectionForCRDCascadingGate", false, "Alpha"},
      {"KruisePodReadinessGate", false, "Alpha"},
      {"CloneSetShortHash", false, "Alpha"},
      {"CloneSetPartitionRollback", false, "Alpha"},
      {"CloneSetEventHandlerOptimization", false, "Alpha"},
      {"PreparingUpdateAsUpdate", false, "Alpha"},
      {"RecreatePodWhenChangeVCTInCloneSetGate", false, "Alpha"},
      {"TemplateNoDefaults", false, "Alpha"},
      {"StatefulSetAutoDeletePVC", true, "Beta"},
      {"StatefulSetStartOrdinal", false, "Alpha"},
      {"StatefulSetAutoResizePVCGate", false, "Alpha"},
      {"SidecarSetPatchPodMetadataDefaultsAllowed", false, "Alpha"},
      {"SidecarTerminator", false, "Alpha"},
      {"EnableSortSidecarContainerByName", false, "Alpha"},
      {"ResourceDistributionGate", false, "Beta"},
      {"EnhancedLivenessProbe", false, "Alpha"},
      {"EnableExternalCerts", false, "Alpha"},
      {"ForceDeleteTimeoutExpectationGate", false, "Alpha"},
      {"InPlaceWorkloadVerticalScaling", false, "Alpha"},
      {"InPlacePodVerticalScaling", false, "Alpha"},
      {"EnablePodProbeMarkerOnServerless", false, "Alpha"},
      {"PodIndexLabel", true, "Beta"},
      {"DefaultHostNetworkHostPortsInPodTemplates", false, "Alpha"},
      {"DaemonSetPruneIneligibleNodes", false, "Alpha"},
  };
  return *gates;
}

namespace {

// Gates that only work with the node agent.
constexpr const char* kNeedDaemon[] = {"PreDownloadImageForInPlaceUpdate",
                                       "DaemonWatchingPod",
                                       "InPlaceUpdateEnvFromMetadata",
                                       "PreDownloadImageForDaemonSetUpdate",
                                       "PodProbeMarkerGate",
                                       "SidecarTerminator",
                                       "ImagePullJobGate",
                                       "EnhancedLivenessProbe"};
// Gates that only work through the pod webhook.
constexpr const char* kNeedPodWebhook[] = {"KruisePodReadinessGate",
                                           "PodUnavailableBudgetDeleteGate",
                                           "PodUnavailableBudgetUpdateGate",
                                           "WorkloadSpread",
                                           "SidecarSetPatchPodMetadataDefaultsAllowed",
                                           "EnhancedLivenessProbe",
                                           "EnablePodProbeMarkerOnServerless"};

}  // namespace

FeatureGates::FeatureGates() {
  for (const FeatureGateSpec& g : KnownFeatureGates()) enabled_[g.name] = g.default_enabled;
}

absl::StatusOr<FeatureGates> FeatureGates::Parse(absl::string_view spec) {
  FeatureGates gates;
  std::map<std::string, bool, std::less<>> explicit_values;
  for (absl::string_view item : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(item, absl::MaxSplits('=', 1));
    std::string name(absl::StripAsciiWhitespace(kv.first));
    std::string value = absl::AsciiStrToLower(absl::StripAsciiWhitespace(kv.second));
    if (gates.enabled_.find(name) == gates.enabled_.end()) {
      std::vector<std::string> known;
      for (const FeatureGateSpec& g : KnownFeatureGates()) known.push_back(g.name);
      return absl::InvalidArgumentError(
          absl::StrCat("--feature-gates: unknown feature gate \"", name,
                       "\"; known gates: ", absl::StrJoin(known, ", ")));
    }
    bool on;
    if (value == "true" || value == "1") {
      on = true;
    } else if (value == "false" || value == "0") {
      on = false;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("--feature-gates: gate ", name,
                                                     " needs =true or =false, got \"",
                                                     std::string(kv.second), "\""));
    }
    explicit_values[name] = on;
  }
  gates.Resolve(explicit_values);
  return gates;
}

void FeatureGates::Resolve(const std::map<std::string, bool, std::less<>>& explicit_values) {
  for (const auto& [name, on] : explicit_values) enabled_[name] = on;
  auto force_off = [&](const char* gate, const char* because) {
    if (!enabled_[gate]) return;
    enabled_[gate] = false;
    auto it = explicit_values.find(gate);
    if (it != explicit_values.end() && it->second) {
      warnings_.push_back(absl::StrCat(gate, "=true ignored: it requires ", because));
    }
  };
  // Pre-download of images is done with ImagePullJobs.
  if (enabled_["PreDownloadImageForInPlaceUpdate"] ||
      enabled_["PreDownloadImageForDaemonSetUpdate"]) {
    enabled_["ImagePullJobGate"] = true;
  }
  if (!enabled_["KruiseDaemon"]) {
    for (const char* g : kNeedDaemon) force_off(g, "KruiseDaemon");
  }
  if (!enabled_["PodWebhook"]) {
    for (const char* g : kNeedPodWebhook) force_off(g, "PodWebhook");
  }
  if (!enabled_["ResourcesDeletionProtection"]) {
    force_off("DeletionProtectionForCRDCascadingGate", "ResourcesDeletionProtection");
  }
}

bool FeatureGates::Enabled(absl::string_view gate) const {
  auto it = enabled_.find(gate);
  return it != enabled_.end() && it->second;
}

std::string FeatureGates::String() const {
  return absl::StrJoin(enabled_, ",", [](std::string* out, const auto& kv) {
    absl::StrAppend(out, kv.first, "=", kv.second ? "true" : "false");
  });
}

}  // namespace kruise::manager
