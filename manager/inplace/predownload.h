#pragma once

// Image pre-download before an in-place update (feature gate PreDownloadImageForInPlaceUpdate,
// issue 14), shared by the workloads that update in place; it knows no workload. When a workload
// gets a new revision, OpenKruise creates one ImagePullJob per changed container image, owned by
// the workload and aimed at the nodes of its pods that are not at the new revision yet, so the
// daemon warms those nodes while the rollout proceeds batch by batch. It does this once per
// revision: the ControllerRevision is then labelled "created" or "ignored".
//
//   PreDownloadRequest req{...};
//   PreDownloadPlan plan = PlanImagePreDownload(req);
//   if (!plan.ignore_reason.empty()) label the revision kImagePreDownloadIgnoredLabel;
//   else { create plan.jobs (AlreadyExists is success); label kImagePreDownloadCreatedLabel; }
//
// Rules, as OpenKruise: not for a ReCreate-only workload, not for replicas <= 3, not when every
// pod updates in one batch (partition 0 and maxUnavailable >= replicas); jobs are named
// `<revision>-<container>` (deterministic, so a second leader's attempt is an AlreadyExists, never
// a second job), select the workload's pods whose controller-revision-hash is not the new
// revision, pull with parallelism 1 (annotation apps.kruise.io/image-predownload-parallelism),
// timeout 300 s (apps.kruise.io/image-predownload-timeout-seconds), backoffLimit 1, and are
// removed 600 s after they finish; pull secrets from the template, sandboxConfig from its labels
// and annotations. Pure functions: table tests in test/manager/inplace.
//
// Advanced DaemonSet (gate PreDownloadImageForDaemonSetUpdate) asks with three differences, as
// OpenKruise's daemonset_predownload_image.go: no minimum size (`min_replicas` 0; its "replicas"
// are the nodes that should run a pod, so only "every pod in one batch" skips), images compared
// with every older revision (`old_templates`), and pods labelled with the revision's bare hash
// (`update_revision_hash`). The I/O around a plan is shared too: CarryOutPreDownload creates the
// jobs and labels the revision, DeletePreDownloadJobs removes a workload's jobs once every pod is
// at one revision; both read jobs from the one cache of PreDownloadJobInformerOptions.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "manager/controller_group.h"
#include "nlohmann/json.hpp"

namespace kruise::manager::inplace {

inline constexpr char kPreDownloadGate[] = "PreDownloadImageForInPlaceUpdate";
inline constexpr char kPreDownloadDaemonSetGate[] = "PreDownloadImageForDaemonSetUpdate";
// OpenKruise's label keys on the ControllerRevision (the first one is spelled so upstream).
inline constexpr char kImagePreDownloadCreatedLabel[] = "apps.kruise.io/pre-predownload-created";
inline constexpr char kImagePreDownloadIgnoredLabel[] = "apps.kruise.io/image-predownload-ignored";
// Annotations on the workload.
inline constexpr char kImagePreDownloadParallelismAnnotation[] =
    "apps.kruise.io/image-predownload-parallelism";
inline constexpr char kImagePreDownloadTimeoutAnnotation[] =
    "apps.kruise.io/image-predownload-timeout-seconds";
inline constexpr char kImagePreDownloadMinUpdatedReadyPodsAnnotation[] =
    "apps.kruise.io/image-predownload-min-updated-ready-pods";
// Workloads with at most this many replicas are not worth a job.
inline constexpr int kMinimumReplicasToPreDownload = 3;

struct PreDownloadRequest {
  nlohmann::json owner;            // the workload (apiVersion, kind, metadata with uid)
  nlohmann::json selector;         // its spec.selector
  std::string update_revision;     // the new ControllerRevision's name (the pods' hash label)
  nlohmann::json revision_labels;  // that revision's labels
  nlohmann::json current_template;  // pod templates of the current and the new revision
  nlohmann::json update_template;
  bool recreate_only = false;  // the workload replaces pods on update (CloneSet ReCreate)
  int replicas = 0;
  int partition = 0;        // resolved against replicas
  int max_unavailable = 0;  // resolved against replicas
  // Workloads with at most this many replicas get no job (Advanced DaemonSet: 0, no minimum).
  int min_replicas = kMinimumReplicasToPreDownload;
  // When not empty, the images are compared with each of these templates instead of
  // `current_template`: a container's image is pulled when it differs from its container in any
  // of them, or when none has that container (Advanced DaemonSet: every older revision).
  std::vector<nlohmann::json> old_templates = {};
  // The value of the pods' controller-revision-hash label for the new revision when it is not
  // the revision's name (Advanced DaemonSet: the bare hash): also excluded by the job's pod
  // selector and put on the job's controller-revision-hash label.
  std::string update_revision_hash = {};
};

struct PreDownloadPlan {
  std::string ignore_reason;  // non-empty: label the revision ignored, create nothing
  bool already_done = false;  // the revision is labelled created or ignored: nothing to do
  std::vector<nlohmann::json> jobs;  // ImagePullJobs to create (may be empty: no image changed)
};

// Container name -> new image, for the regular containers whose image in `update_template`
// differs from the container of the same name in `current_template` (or that are new).
std::map<std::string, std::string> ChangedImages(const nlohmann::json& current_template,
                                                 const nlohmann::json& update_template);

// ChangedImages against several old templates (PreDownloadRequest::old_templates).
std::map<std::string, std::string> ChangedImagesFromAny(
    const std::vector<nlohmann::json>& old_templates, const nlohmann::json& update_template);

PreDownloadPlan PlanImagePreDownload(const PreDownloadRequest& req);

// The cache of ImagePullJobs the workloads read to delete theirs: metadata only, indexed by
// kube::kControllerUidIndex; one informer for every workload (SharedInformers::Named with
// kPreDownloadJobInformer).
inline constexpr char kPreDownloadJobInformer[] = "imagepulljobs-metadata";
kube::InformerOptions PreDownloadJobInformerOptions();

// The ImagePullJob cache for a controller group that pre-downloads: ctx.shared's one
// kPreDownloadJobInformer, or (no shared informers) one from `make`; null, with a warning in
// `controller`'s log, when the ImagePullJob CRD is not served (a LIST probe).
kube::Informer* PreDownloadJobInformer(
    const ControllerContext& ctx, const std::string& controller,
    absl::FunctionRef<kube::Informer*(kube::InformerOptions)> make);

// `event(warning, reason, message)`: an event on the workload.
using PreDownloadEvent = absl::FunctionRef<void(bool, const std::string&, const std::string&)>;

// Carries out `plan` for the workload `owner` whose new ControllerRevision (in its namespace) is
// `revision`: nothing when plan.already_done; else creates plan.jobs (AlreadyExists is success;
// another failure is a Warning FailedCreateImagePullJob and not retried, the update goes on, as
// OpenKruise; a created one is a Normal CreatedImagePullJob), then labels the revision created,
// or ignored when plan.ignore_reason is set (a merge patch; the revision gone is not an error).
absl::Status CarryOutPreDownload(kube::KubeClient* client, const nlohmann::json& owner,
                                 const std::string& revision, const PreDownloadPlan& plan,
                                 PreDownloadEvent event);

// Deletes the ImagePullJobs `jobs` (the owner's, from PreDownloadJobInformerOptions' cache) that
// are not being deleted already, with a uid precondition; gone or replaced ones are skipped.
absl::Status DeletePreDownloadJobs(kube::KubeClient* client,
                                   const std::vector<std::shared_ptr<const nlohmann::json>>& jobs);

// Whether the ControllerRevision `revision` is labelled created or ignored already: the work is
// done once per revision.
bool PreDownloadDone(const nlohmann::json& revision);

// A request with the fields every workload fills alike: `owner`, its spec.selector, and the name,
// labels and pod template of its update ControllerRevision `update_revision`. The caller adds the
// rest (current or old templates, hash, recreate_only, the numbers).
PreDownloadRequest PreDownloadRequestFor(const nlohmann::json& owner,
                                         const nlohmann::json& update_revision);

// Whether the workload's apps.kruise.io/image-predownload-min-updated-ready-pods still holds the
// jobs back (a canary first): fewer ready pods at `update_revision` than it asks, counting the
// owner's status.updatedReadyReplicas only while its status.updateRevision is that revision.
// For workloads whose status has those fields (CloneSet, Advanced StatefulSet).
bool PreDownloadHeldBack(const nlohmann::json& owner, const std::string& update_revision,
                         int replicas);

// The workload's apps.kruise.io/image-predownload-min-updated-ready-pods (int or percent of
// `replicas`, rounded up): 0 when absent or malformed.
int MinUpdatedReadyPodsToPreDownload(const nlohmann::json& owner, int replicas);

}  // namespace kruise::manager::inplace
