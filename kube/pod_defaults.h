#pragma once

// The core/v1 defaults the API server applies to parts of a pod template (Kubernetes'
// SetDefaults_Container, SetDefaults_Volume and friends), for admission webhooks that must default
// a template as the API server would, so that its hash does not change after a round trip
// (CloneSet templates, SidecarSet containers and volumes).
//
// Every function takes an object (callers check) and only adds members that are absent or null
// (Go's nil), or, for strings and the probe counters, empty/zero (Go cannot tell those apart from
// unset either). Malformed members are left as they are for validation to report.

#include <string>

#include "absl/functional/function_ref.h"
#include "nlohmann/json_fwd.hpp"

namespace kruise::kube {

// The building blocks, also for the workload webhooks' own defaults (CloneSet, SidecarSet).
namespace json_defaults {
// Member `key` absent or null (Go's nil).
bool Absent(const nlohmann::json& obj, const char* key);
void DefaultIfUnset(nlohmann::json* obj, const char* key, nlohmann::json value);
// Also when the member is "" (Go cannot tell it from unset).
void DefaultIfEmptyString(nlohmann::json* obj, const char* key, const std::string& value);
// The object member `key`, created empty when absent or null; nullptr when it holds something
// else (left as it is for validation to report).
nlohmann::json* ObjectMember(nlohmann::json* obj, const char* key);
// An existing object member; nullptr when absent or not an object.
nlohmann::json* ExistingObject(nlohmann::json* obj, const char* key);
// `fn` on every object element of the array member `key`.
void ForEachObject(nlohmann::json* obj, const char* key,
                   absl::FunctionRef<void(nlohmann::json*)> fn);
}  // namespace json_defaults

// Kubernetes' pull-policy rule: Always for the tag "latest" (or no tag and no digest),
// IfNotPresent otherwise (also for a non-string or a reference it cannot parse, such as "").
std::string DefaultPullPolicy(const nlohmann::json& image);

// A member `fieldRef` of `owner` (an env valueFrom, a downward-API item, ...) gets apiVersion v1.
void DefaultFieldRef(nlohmann::json* owner);

// A container's defaults except imagePullPolicy, which callers choose (DefaultPullPolicy, or
// OpenKruise's Always for in-place updatable containers): termination message path and policy,
// port protocol (and hostPort = containerPort on the host network), env fieldRefs, probes and
// lifecycle handlers' httpGet.
void DefaultContainerFields(nlohmann::json* container, bool host_network);

// A volume's defaults: emptyDir without a source, hostPath type, defaultMode 420 of secret,
// configMap, downwardAPI and projected sources, projected token expiry.
void DefaultVolumeFields(nlohmann::json* volume);

}  // namespace kruise::kube
