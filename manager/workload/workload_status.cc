#include "manager/workload/workload_status.h"

#include <algorithm>
#include <string>
#include <utility>

#include "kube/errors.h"
#include "kube/object.h"

namespace kruise::manager::workload {

using kube::Json;

Json StepConditions(const Json& workload, absl::Time now,
                    const std::optional<absl::Status>& scale_result,
                    const std::optional<absl::Status>& update_result) {
  const Json* old = kube::FindPath(workload, {"status", "conditions"});
  Json conditions = old != nullptr && old->is_array() ? *old : Json::array();
  const std::string at = kube::FormatRfc3339(now);
  for (const auto& [type, result] :
       {std::pair<const char*, const std::optional<absl::Status>*>{"FailedScale", &scale_result},
        {"FailedUpdate", &update_result}}) {
    if (!result->has_value()) continue;
    auto it = std::find_if(conditions.begin(), conditions.end(), [type = type](const Json& c) {
      return c.is_object() && c.value("type", "") == type;
    });
    if ((*result)->ok()) {
      if (it != conditions.end()) conditions.erase(it);
      continue;
    }
    Json c = {{"type", type},
              {"status", "True"},
              {"lastTransitionTime", at},
              {"reason", type},
              {"message", std::string((*result)->message())}};
    if (it == conditions.end()) {
      conditions.push_back(std::move(c));
    } else if (it->value("message", "") != c["message"] || it->value("status", "") != "True") {
      if (it->value("status", "") == "True") c["lastTransitionTime"] = (*it)["lastTransitionTime"];
      *it = std::move(c);
    }
  }
  if (conditions.empty() && old == nullptr) return nullptr;
  return conditions;
}

absl::Status WriteStatusIfChanged(kube::KubeClient* client, const kube::Resource& resource,
                                  const Json& workload, const Json& status) {
  const Json* old = kube::FindPath(workload, {"status"});
  bool changed = old == nullptr || !old->is_object();
  for (const auto& [k, v] : status.items()) {
    if (changed) break;
    if (!old->contains(k) || (*old)[k] != v) changed = true;
  }
  if (!changed) return absl::OkStatus();
  const Json patch = {{"metadata", {{"resourceVersion", kube::ResourceVersion(workload)}}},
                      {"status", status}};
  auto st = client->Patch(resource, kube::Namespace(workload), kube::Name(workload),
                          kube::PatchType::kMerge, patch, "status");
  if (!st.ok() && !kube::IsNotFound(st.status())) return st.status();
  return absl::OkStatus();
}

}  // namespace kruise::manager::workload
