#include "manager/imagepull/imagepull_group.h"

#include <vector>

#include "common/logging.h"
#include "kube/controller.h"
#include "kube/errors.h"
#include "kube/informer.h"
#include "kube/object.h"
#include "kube/resources.h"
#include "manager/imagepull/imagepull_util.h"
#include "manager/imagepull/imagepulljob_controller.h"
#include "manager/imagepull/nodeimage_controller.h"
#include "manager/imagepull/pull_secrets.h"

namespace kruise::manager {
namespace {

using kube::Json;
using kube::Request;

std::vector<Request> JobsOwningTags(const Json& ni) {
  std::vector<Request> out;
  const Json* images = kube::FindPath(ni, {"spec", "images"});
  if (images == nullptr || !images->is_object()) return out;
  for (const auto& [name, image] : images->items()) {
    if (!image.is_object() || !image.contains("tags") || !image["tags"].is_array()) continue;
    for (const Json& t : image["tags"]) {
      if (!t.is_object() || !t.contains("ownerReferences") || !t["ownerReferences"].is_array()) {
        continue;
      }
      for (const Json& r : t["ownerReferences"]) {
        if (IsImagePullJobRef(r)) out.push_back({r.value("namespace", ""), r.value("name", "")});
      }
    }
  }
  return out;
}

class CopyCollector : public kube::Reconciler {
 public:
  explicit CopyCollector(PullSecretCopies* copies) : copies_(copies) {}
  absl::StatusOr<kube::Result> Reconcile(const Request& req) override {
    return copies_->Collect(req.name);
  }

 private:
  PullSecretCopies* const copies_;
};

class ImagePullGroup : public ControllerGroup {
 public:
  explicit ImagePullGroup(ImagePullGroupOptions opts) : opts_(std::move(opts)) {}

  std::string Name() const override { return "imagepull"; }

  absl::Status Register(const ControllerContext& ctx) override {
    if (ctx.client == nullptr || ctx.manager == nullptr || ctx.clock == nullptr) {
      return absl::InvalidArgumentError("imagepull controllers need a client, manager and clock");
    }
    if (opts_.nodeimage_creation_delay < absl::ZeroDuration() ||
        opts_.response_timeout <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError("imagepull controllers: negative delay or timeout");
    }
    if (!ctx.feature_enabled("KruiseDaemon")) {
      Logger("imagepull")->info("KruiseDaemon gate off: NodeImage/ImagePullJob controllers off");
      return absl::OkStatus();
    }
    const bool jobs_on = ctx.feature_enabled("ImagePullJobGate");
    std::string version = opts_.api_version;
    if (version.empty()) {
      // Discovery by LIST (limit 1): v1beta1 when served, else v1alpha1; neither served (CRDs
      // not installed) makes the group a no-op, as OpenKruise's controllers are.
      kube::ListOptions probe;
      probe.limit = 1;
      auto beta = ctx.client->List(kube::resources::NodeImagesV1beta1(), "", probe);
      if (beta.ok()) {
        version = "v1beta1";
      } else {
        auto alpha = ctx.client->List(kube::resources::NodeImages(), "", probe);
        if (!alpha.ok() && kube::IsNotFound(alpha.status()) && kube::IsNotFound(beta.status())) {
          Logger("imagepull")
              ->warn("NodeImage CRD is not served: NodeImage/ImagePullJob controllers off");
          return absl::OkStatus();
        }
        version = "v1alpha1";
      }
    } else if (version != "v1alpha1" && version != "v1beta1") {
      return absl::InvalidArgumentError(
          "imagepull controllers: api_version must be v1alpha1|v1beta1");
    }
    kube::Resource node_images = kube::resources::NodeImages();
    kube::Resource jobs = kube::resources::ImagePullJobs();
    node_images.version = version;
    jobs.version = version;

    auto make = [&](kube::InformerOptions o) { return informers_.Make(ctx, std::move(o)); };
    kube::Informer* nodes = ctx.shared != nullptr ? ctx.shared->Nodes()
                                                   : make(SharedInformers::NodeOptions());
    kube::InformerOptions o;
    o.resource = node_images;
    o.indexers[kTagOwnerUidIndex] = TagOwnerUidIndexFunc();
    kube::Informer* nis = make(o);
    o = {};
    o.resource = jobs;
    kube::Informer* job_inf = make(o);

    NodeImageControllerOptions nio;
    nio.creation_delay = opts_.nodeimage_creation_delay;
    nio.response_timeout = opts_.response_timeout;
    nio.node_images = node_images;
    nio.image_pull_jobs = jobs;
    ni_reconciler_ = std::make_unique<NodeImageReconciler>(nio, ctx.client, ctx.clock, ctx.recorder,
                                                           nodes, nis, job_inf);
    kube::ControllerOptions co;
    co.clock = ctx.clock;
    co.workers = ctx.workers("nodeimage", 3);
    ni_controller_ = std::make_unique<kube::Controller>("nodeimage", ni_reconciler_.get(), co);
    ni_controller_->Watch(nodes, kube::EnqueueSelf());
    ni_controller_->Watch(nis, kube::EnqueueSelf(), {kube::ResourceVersionChanged()});
    // A deleted job: the NodeImages still holding its tags.
    kube::Predicate deletes_only;
    deletes_only.create = [](const Json&) { return false; };
    deletes_only.update = [](const Json&, const Json&) { return false; };
    ni_controller_->Watch(job_inf, kube::EnqueueMapped([nis](const Json& job) {
                            std::vector<Request> out;
                            auto owned = nis->store().ByIndex(kTagOwnerUidIndex, kube::Uid(job));
                            if (owned.ok()) {
                              for (const auto& ni : *owned) out.push_back({"", kube::Name(*ni)});
                            }
                            return out;
                          }),
                          {deletes_only});
    ctx.manager->Add(ni_controller_.get());

    if (!jobs_on) {
      Logger("imagepull")->info("ImagePullJobGate off: ImagePullJob controller off");
      return absl::OkStatus();
    }
    kube::Informer* pods = nullptr;
    if (ctx.shared != nullptr) {
      pods = ctx.shared->Pods();  // the manager's one pod cache
    } else {
      o = {};
      o.resource = kube::resources::Pods();
      o.transform = CompactPodForImagePullJobs;
      o.indexers[kube::kNamespaceIndex] = kube::NamespaceIndexFunc();
      pods = make(o);
    }
    o = {};
    o.resource = kube::resources::Secrets();
    o.ns = ctx.daemon_config_namespace;
    kube::Informer* copies = make(o);
    PullSecretCopiesOptions so;
    so.daemon_namespace = ctx.daemon_config_namespace;
    so.image_pull_jobs = jobs;
    secrets_ = std::make_unique<PullSecretCopies>(ctx.client, ctx.clock, ctx.recorder, copies,
                                                  job_inf, std::move(so));

    ImagePullJobControllerOptions jo;
    jo.node_images = node_images;
    jo.image_pull_jobs = jobs;
    jo.default_ttl_for_always = opts_.default_ttl_for_always_seconds;
    job_reconciler_ = std::make_unique<ImagePullJobReconciler>(
        jo, ctx.client, ctx.clock, ctx.recorder, job_inf, nis, pods, secrets_.get());
    co.workers = ctx.workers("imagepulljob", 3);
    job_controller_ = std::make_unique<kube::Controller>("imagepulljob", job_reconciler_.get(), co);
    job_controller_->Watch(job_inf, kube::EnqueueSelf(), {kube::ResourceVersionChanged()});
    // Tag status changes reach the jobs owning the tags, and jobs that waited for this NodeImage's
    // cache to catch up with a write (ImagePullJobReconciler::TakeWaitersFor).
    job_controller_->Watch(nis, kube::EnqueueMapped([r = job_reconciler_.get()](const Json& ni) {
                             std::vector<Request> out = JobsOwningTags(ni);
                             for (Request& w : r->TakeWaitersFor(kube::Name(ni))) {
                               out.push_back(std::move(w));
                             }
                             return out;
                           }),
                           {kube::ResourceVersionChanged()});
    // A new NodeImage, or one whose labels changed, may be a target of any unfinished job.
    kube::Predicate new_or_relabelled = kube::LabelsChanged();
    new_or_relabelled.del = [](const Json&) { return false; };
    job_controller_->Watch(
        nis, kube::EnqueueMapped([job_inf](const Json&) { return UnfinishedJobs(job_inf, ""); }),
        {new_or_relabelled});
    // Pods move the targets of podSelector jobs in their namespace.
    kube::Predicate pod_moved;
    pod_moved.update = [](const Json& a, const Json& b) {
      return kube::GetString(a, {"spec", "nodeName"}) != kube::GetString(b, {"spec", "nodeName"}) ||
             kube::GetString(a, {"status", "phase"}) != kube::GetString(b, {"status", "phase"}) ||
             kube::Labels(a) != kube::Labels(b) ||
             kube::IsBeingDeleted(a) != kube::IsBeingDeleted(b);
    };
    job_controller_->Watch(
        pods, kube::EnqueueMapped([job_inf](const Json& pod) {
          std::vector<Request> out;
          for (const Request& r : UnfinishedJobs(job_inf, kube::Namespace(pod))) {
            auto job = job_inf->store().Get(r.ns, r.name);
            if (job != nullptr && kube::FindPath(*job, {"spec", "podSelector"})) {
              out.push_back(r);
            }
          }
          return out;
        }),
        {pod_moved});
    // A copy changed or vanished: its referencing jobs re-check.
    job_controller_->Watch(copies, kube::EnqueueMapped([](const Json& secret) {
                             std::vector<Request> out;
                             for (const std::string& key : PullSecretCopies::References(secret)) {
                               out.push_back(Request::FromKey(key));
                             }
                             return out;
                           }));
    ctx.manager->Add(job_controller_.get());

    // Copies no job can use any more are deleted (PullSecretCopies::Collect): every copy once at
    // start (orphans of jobs deleted while no manager ran), a copy whenever it changes (a job
    // released it), and the copies a deleted job could have used.
    copy_reconciler_ = std::make_unique<CopyCollector>(secrets_.get());
    co.workers = 1;
    copy_controller_ =
        std::make_unique<kube::Controller>("pullsecretcopy", copy_reconciler_.get(), co);
    kube::Predicate labelled;
    labelled.create = [](const Json& s) { return kube::Label(s, kSourceSecretUidLabel).has_value(); };
    labelled.update = [](const Json&, const Json& s) {
      return kube::Label(s, kSourceSecretUidLabel).has_value();
    };
    labelled.del = [](const Json&) { return false; };
    copy_controller_->Watch(copies, kube::EnqueueSelf(), {labelled});
    copy_controller_->Watch(job_inf, kube::EnqueueMapped([s = secrets_.get()](const Json& job) {
                              return s->CopiesUsableBy(job);
                            }),
                            {deletes_only});
    ctx.manager->Add(copy_controller_.get());
    Logger("imagepull")->info("NodeImage and ImagePullJob controllers registered ({})", version);
    return absl::OkStatus();
  }

 private:
  static std::vector<Request> UnfinishedJobs(kube::Informer* jobs, const std::string& ns) {
    std::vector<Request> out;
    for (const auto& job : jobs->store().List()) {
      if (!ns.empty() && kube::Namespace(*job) != ns) continue;
      if (kube::GetString(*job, {"status", "completionTime"})) continue;
      out.push_back({kube::Namespace(*job), kube::Name(*job)});
    }
    return out;
  }

  const ImagePullGroupOptions opts_;
  OwnedInformers informers_;
  std::unique_ptr<PullSecretCopies> secrets_;
  std::unique_ptr<NodeImageReconciler> ni_reconciler_;
  std::unique_ptr<ImagePullJobReconciler> job_reconciler_;
  std::unique_ptr<kube::Controller> ni_controller_;
  std::unique_ptr<kube::Controller> job_controller_;
  std::unique_ptr<CopyCollector> copy_reconciler_;
  std::unique_ptr<kube::Controller> copy_controller_;
};

}  // namespace

std::unique_ptr<ControllerGroup> NewImagePullControllerGroup(ImagePullGroupOptions opts) {
  return std::make_unique<ImagePullGroup>(std::move(opts));
}

}  // namespace kruise::manager
