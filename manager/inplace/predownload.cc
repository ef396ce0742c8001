#include "manager/inplace/predownload.h"

#include <algorithm>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "kube/errors.h"
#include "kube/object.h"
#include "kube/resources.h"
#include "manager/revision/revision.h"

namespace kruise::manager::inplace {

using Json = nlohmann::json;

namespace {

constexpr int kDefaultParallelism = 1;
constexpr int kDefaultTimeoutSeconds = 300;
constexpr int kBackoffLimit = 1;
constexpr int kTtlSecondsAfterFinished = 600;

// A positive integer annotation of the workload, or `def` when absent or not one.
int PositiveAnnotation(const Json& owner, const char* key, int def) {
  auto v = kube::Annotation(owner, key);
  int n = 0;
  if (v.has_value() && absl::SimpleAtoi(*v, &n) && n > 0) return n;
  return def;
}

Json StringMap(const Json* m) {
  Json out = Json::object();
  if (m == nullptr || !m->is_object()) return out;
  for (const auto& [k, v] : m->items()) {
    if (v.is_string()) out[k] = v;
  }
  return out;
}

// Container name -> image of a template's regular containers (image "" when it has none).
std::map<std::string, std::string> ImagesByContainer(const Json& tmpl) {
  std::map<std::string, std::string> out;
  const Json* cs = kube::FindPath(tmpl, {"spec", "containers"});
  if (cs == nullptr || !cs->is_array()) return out;
  for (const Json& c : *cs) {
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string()) continue;
    out[c["name"].get<std::string>()] =
        c.contains("image") && c["image"].is_string() ? c["image"].get<std::string>() : "";
  }
  return out;
}

}  // namespace

std::map<std::string, std::string> ChangedImagesFromAny(const std::vector<Json>& old_templates,
                                                        const Json& update_template) {
  std::vector<std::map<std::string, std::string>> olds;
  for (const Json& t : old_templates) olds.push_back(ImagesByContainer(t));
  std::map<std::string, std::string> out;
  for (const auto& [name, image] : ImagesByContainer(update_template)) {
    if (name.empty() || image.empty()) continue;
    bool found = false;
    for (const auto& old : olds) {
      auto it = old.find(name);
      if (it == old.end()) continue;
      found = true;
      if (it->second != image) out[name] = image;
    }
    if (!found) out[name] = image;
  }
  return out;
}

std::map<std::string, std::string> ChangedImages(const Json& current_template,
                                                 const Json& update_template) {
  return ChangedImagesFromAny({current_template}, update_template);
}

int MinUpdatedReadyPodsToPreDownload(const Json& owner, int replicas) {
  auto v = kube::Annotation(owner, kImagePreDownloadMinUpdatedReadyPodsAnnotation);
  if (!v.has_value()) return 0;
  int n = 0;
  Json value = absl::SimpleAtoi(*v, &n) ? Json(n) : Json(*v);
  auto scaled = kube::GetScaledValueFromIntOrPercent(value, replicas, /*round_up=*/true);
  return scaled.ok() && *scaled > 0 ? *scaled : 0;
}

bool PreDownloadDone(const Json& revision) {
  return kube::Label(revision, kImagePreDownloadCreatedLabel).has_value() ||
         kube::Label(revision, kImagePreDownloadIgnoredLabel).has_value();
}

PreDownloadRequest PreDownloadRequestFor(const Json& owner, const Json& update_revision) {
  PreDownloadRequest req;
  req.owner = owner;
  if (const Json* sel = kube::FindPath(owner, {"spec", "selector"})) req.selector = *sel;
  req.update_revision = kube::Name(update_revision);
  if (const Json* l = kube::FindPath(update_revision, {"metadata", "labels"})) {
    req.revision_labels = *l;
  }
  req.update_template = revision::RevisionTemplate(update_revision);
  return req;
}

bool PreDownloadHeldBack(const Json& owner, const std::string& update_revision, int replicas) {
  int64_t updated_ready = 0;
  if (kube::GetString(owner, {"status", "updateRevision"}) == update_revision) {
    updated_ready = kube::GetInt(owner, {"status", "updatedReadyReplicas"}).value_or(0);
  }
  return MinUpdatedReadyPodsToPreDownload(owner, replicas) > updated_ready;
}

PreDownloadPlan PlanImagePreDownload(const PreDownloadRequest& req) {
  PreDownloadPlan plan;
  if (req.revision_labels.is_object() &&
      (req.revision_labels.contains(kImagePreDownloadCreatedLabel) ||
       req.revision_labels.contains(kImagePreDownloadIgnoredLabel))) {
    plan.already_done = true;
    return plan;
  }
  if (req.recreate_only) {
    plan.ignore_reason = "the update strategy recreates pods";
    return plan;
  }
  if (req.min_replicas > 0 && req.replicas <= req.min_replicas) {
    plan.ignore_reason = absl::StrCat("replicas ", req.replicas, " <= ", req.min_replicas);
    return plan;
  }
  if (req.partition == 0 && req.max_unavailable >= req.replicas) {
    plan.ignore_reason = "every pod is updated in one batch";
    return plan;
  }

  // The workload's pods that are not at the new revision yet.
  Json selector = req.selector.is_object() ? req.selector : Json::object();
  Json values = Json::array({req.update_revision});
  if (!req.update_revision_hash.empty() && req.update_revision_hash != req.update_revision) {
    values.push_back(req.update_revision_hash);
  }
  if (req.revision_labels.is_object()) {
    // apps/v1 controllers label their revisions with the bare hash; pods may carry either.
    auto it = req.revision_labels.find("controller.kubernetes.io/hash");
    if (it != req.revision_labels.end() && it->is_string() && *it != req.update_revision) {
      if (std::find(values.begin(), values.end(), *it) == values.end()) values.push_back(*it);
    }
  }
  if (!selector.contains("matchExpressions") || !selector["matchExpressions"].is_array()) {
    selector["matchExpressions"] = Json::array();
  }
  selector["matchExpressions"].push_back(
      {{"key", "controller-revision-hash"}, {"operator", "NotIn"}, {"values", values}});

  Json secrets = Json::array();
  if (const Json* ps = kube::FindPath(req.update_template, {"spec", "imagePullSecrets"});
      ps != nullptr && ps->is_array()) {
    for (const Json& s : *ps) {
      if (s.is_object() && s.contains("name") && s["name"].is_string()) secrets.push_back(s["name"]);
    }
  }
  // As OpenKruise: the job carries the template's labels (so it matches the workload's selector,
  // like everything the workload owns) and the revision; the sandbox gets the same metadata.
  Json labels = StringMap(kube::FindPath(req.update_template, {"metadata", "labels"}));
  labels["controller-revision-hash"] =
      req.update_revision_hash.empty() ? req.update_revision : req.update_revision_hash;
  Json annotations = StringMap(kube::FindPath(req.update_template, {"metadata", "annotations"}));
  Json sandbox = {{"labels", StringMap(kube::FindPath(req.update_template, {"metadata", "labels"}))}};
  if (!annotations.empty()) sandbox["annotations"] = annotations;

  Json owner_ref = {{"apiVersion", req.owner.value("apiVersion", "")},
                    {"kind", req.owner.value("kind", "")},
                    {"name", kube::Name(req.owner)},
                    {"uid", kube::Uid(req.owner)},
                    {"controller", true},
                    {"blockOwnerDeletion", true}};
  const int parallelism =
      PositiveAnnotation(req.owner, kImagePreDownloadParallelismAnnotation, kDefaultParallelism);
  const int timeout =
      PositiveAnnotation(req.owner, kImagePreDownloadTimeoutAnnotation, kDefaultTimeoutSeconds);

  const std::map<std::string, std::string> changed =
      req.old_templates.empty() ? ChangedImages(req.current_template, req.update_template)
                                : ChangedImagesFromAny(req.old_templates, req.update_template);
  for (const auto& [container, image] : changed) {
    Json job = {
        {"apiVersion", "apps.kruise.io/v1alpha1"},
        {"kind", "ImagePullJob"},
        {"metadata",
         {{"name", absl::StrCat(req.update_revision, "-", container)},
          {"namespace", kube::Namespace(req.owner)},
          {"labels", labels},
          {"ownerReferences", Json::array({owner_ref})}}},
        {"spec",
         {{"image", image},
          {"parallelism", parallelism},
          {"podSelector", selector},
          {"pullPolicy", {{"timeoutSeconds", timeout}, {"backoffLimit", kBackoffLimit}}},
          {"completionPolicy",
           {{"type", "Always"}, {"ttlSecondsAfterFinished", kTtlSecondsAfterFinished}}},
          {"sandboxConfig", sandbox}}}};
    if (!annotations.empty()) job["metadata"]["annotations"] = annotations;
    if (!secrets.empty()) job["spec"]["pullSecrets"] = secrets;
    plan.jobs.push_back(std::move(job));
  }
  return plan;
}

kube::InformerOptions PreDownloadJobInformerOptions() {
  kube::InformerOptions o;
  o.resource = kube::resources::ImagePullJobs();
  o.indexers[kube::kControllerUidIndex] = kube::ControllerUidIndexFunc();
  o.transform = kube::KeepOnlyMetadata({"uid", "ownerReferences", "deletionTimestamp"});
  return o;
}

kube::Informer* PreDownloadJobInformer(
    const ControllerContext& ctx, const std::string& controller,
    absl::FunctionRef<kube::Informer*(kube::InformerOptions)> make) {
  if (!kube::Served(ctx.client, kube::resources::ImagePullJobs())) {
    Logger(controller)->warn("ImagePullJob CRD is not served: no image pre-download");
    return nullptr;
  }
  if (ctx.shared != nullptr) {
    return ctx.shared->Named(kPreDownloadJobInformer, &PreDownloadJobInformerOptions);
  }
  return make(PreDownloadJobInformerOptions());
}

absl::Status CarryOutPreDownload(kube::KubeClient* client, const Json& owner,
                                 const std::string& revision, const PreDownloadPlan& plan,
                                 PreDownloadEvent event) {
  if (plan.already_done) return absl::OkStatus();
  const std::string ns = kube::Namespace(owner);
  for (const Json& job : plan.jobs) {
    auto created = client->Create(kube::resources::ImagePullJobs(), ns, job);
    if (created.ok()) {
      event(false, "CreatedImagePullJob",
            absl::StrCat("created ImagePullJob ", kube::Name(job), " for image ",
                         job["spec"]["image"].get<std::string>()));
    } else if (!kube::IsAlreadyExists(created.status())) {
      event(true, "FailedCreateImagePullJob",
            absl::StrCat("failed to create ImagePullJob ", kube::Name(job), ": ",
                         created.status().message()));
    }
  }
  const char* mark =
      plan.ignore_reason.empty() ? kImagePreDownloadCreatedLabel : kImagePreDownloadIgnoredLabel;
  Json patch = {{"metadata", {{"labels", {{mark, "true"}}}}}};
  auto st = client->Patch(kube::resources::ControllerRevisions(), ns, revision,
                          kube::PatchType::kMerge, patch);
  if (!st.ok() && !kube::IsNotFound(st.status())) return st.status();
  return absl::OkStatus();
}

absl::Status DeletePreDownloadJobs(kube::KubeClient* client,
                                   const std::vector<std::shared_ptr<const Json>>& jobs) {
  for (const auto& job : jobs) {
    if (kube::IsBeingDeleted(*job)) continue;
    kube::DeleteOptions del;
    del.precondition_uid = kube::Uid(*job);
    absl::Status st = client->Delete(kube::resources::ImagePullJobs(), kube::Namespace(*job),
                                     kube::Name(*job), del);
    if (!st.ok() && !kube::IsNotFound(st) && !kube::IsConflict(st)) return st;
  }
  return absl::OkStatus();
}

}  // namespace kruise::manager::inplace
