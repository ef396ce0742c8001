#include "manager/workload/update_revision.h"

#include <algorithm>
#include <utility>

#include "common/status_macros.h"
#include "kube/errors.h"
#include "kube/resources.h"
#include "manager/revision/revision.h"

namespace kruise::manager::workload {

using kube::Json;

const Json* UpdateRevision::Named(const std::string& n) const {
  for (const Json& r : revisions) {
    if (kube::Name(r) == n) return &r;
  }
  return nullptr;
}

absl::StatusOr<UpdateRevision> SyncUpdateRevision(kube::KubeClient* client,
                                                  kube::Informer* revisions_cache,
                                                  const Json& workload,
                                                  const kube::Resource& resource) {
  UpdateRevision out;
  const std::string ns = kube::Namespace(workload);
  const std::string workload_name = kube::Name(workload);
  ASSIGN_OR_RETURN(
      auto owned, revisions_cache->store().ByIndex(kube::kControllerUidIndex, kube::Uid(workload)));
  for (const auto& r : owned) out.revisions.push_back(*r);
  std::sort(out.revisions.begin(), out.revisions.end(), [](const Json& a, const Json& b) {
    return kube::IntField(a, "revision", 0) < kube::IntField(b, "revision", 0);
  });
  const Json* tmpl_ptr = kube::FindPath(workload, {"spec", "template"});
  const Json tmpl = tmpl_ptr != nullptr ? *tmpl_ptr : Json::object();
  out.collision_count = kube::GetInt(workload, {"status", "collisionCount"}).value_or(0);
  std::optional<int32_t> collision;
  if (out.collision_count > 0) collision = static_cast<int32_t>(out.collision_count);
  out.hash = revision::TemplateHash(tmpl, collision);
  out.name = revision::RevisionName(workload_name, out.hash);
  int64_t max_revision = 0;
  for (const Json& r : out.revisions) {
    max_revision = std::max<int64_t>(max_revision, kube::IntField(r, "revision", 0));
  }
  if (const Json* r = out.Named(out.name); r != nullptr && revision::RevisionTemplate(*r) == tmpl) {
    out.revision = *r;
    return out;
  }
  Json fresh = revision::NewControllerRevision(workload, tmpl, max_revision + 1, collision);
  auto created = client->Create(kube::resources::ControllerRevisions(), ns, fresh);
  if (created.ok()) {
    out.revisions.push_back(*created);
    out.revision = *std::move(created);
    return out;
  }
  if (!kube::IsAlreadyExists(created.status())) return created.status();
  ASSIGN_OR_RETURN(Json existing,
                   client->Get(kube::resources::ControllerRevisions(), ns, out.name));
  auto owner = kube::ControllerOf(existing);
  if (revision::RevisionTemplate(existing) == tmpl && owner.has_value() &&
      owner->uid == kube::Uid(workload)) {
    if (out.Named(out.name) == nullptr) out.revisions.push_back(existing);  // cache behind
    out.revision = std::move(existing);
    return out;
  }
  // Someone else's revision under our name: count the collision and come back.
  Json patch = {{"metadata", {{"resourceVersion", kube::ResourceVersion(workload)}}},
                {"status", {{"collisionCount", out.collision_count + 1}}}};
  RETURN_IF_ERROR(
      client->Patch(resource, ns, workload_name, kube::PatchType::kMerge, patch, "status")
          .status());
  return out;
}

}  // namespace kruise::manager::workload
