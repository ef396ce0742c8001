#include "manager/crr/crr_controller.h"

#include <algorithm>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kube/informer.h"
#include "kube/object.h"
#include "kube/resources.h"

namespace kruise::manager::crr {

using kube::Json;
namespace res = kube::resources;

namespace {

std::string PodReadyMessage(const Json& crr) {
  return absl::StrCat("ContainerRecreateRequest ", kube::Name(crr), " is recreating containers");
}

// Index of the condition `type` in obj.status.conditions, -1 when absent.
int ConditionIndex(const Json& obj, const std::string& type) {
  const Json* conds = kube::FindPath(obj, {"status", "conditions"});
  if (conds == nullptr || !conds->is_array()) return -1;
  for (size_t i = 0; i < conds->size(); ++i) {
    if ((*conds)[i].is_object() && (*conds)[i].value("type", "") == type)
      return static_cast<int>(i);
  }
  return -1;
}

// JSON patch ops that put `cond` (replacing the same type) into obj.status.conditions.
Json SetConditionOps(const Json& obj, const Json& cond) {
  Json ops = Json::array();
  const Json* status = kube::FindPath(obj, {"status"});
  const Json* conds = kube::FindPath(obj, {"status", "conditions"});
  int idx = ConditionIndex(obj, cond.value("type", ""));
  if (status == nullptr || !status->is_object()) {
    ops.push_back({{"op", "add"}, {"path", "/status"}, {"value", {{"conditions", {cond}}}}});
  } else if (conds == nullptr || !conds->is_array()) {
    ops.push_back({{"op", "add"}, {"path", "/status/conditions"}, {"value", {cond}}});
  } else if (idx < 0) {
    ops.push_back({{"op", "add"}, {"path", "/status/conditions/-"}, {"value", cond}});
  } else {
    ops.push_back(
        {{"op", "replace"}, {"path", absl::StrCat("/status/conditions/", idx)}, {"value", cond}});
  }
  return ops;
}

Json TestResourceVersion(const Json& obj) {
  return {
      {"op", "test"}, {"path", "/metadata/resourceVersion"}, {"value", kube::ResourceVersion(obj)}};
}

bool PodHasKruiseReadinessGate(const Json& pod) {
  const Json* gates = kube::FindPath(pod, {"spec", "readinessGates"});
  if (gates == nullptr || !gates->is_array()) return false;
  for (const Json& g : *gates) {
    if (g.is_object() && g.value("conditionType", "") == kKruisePodReadyCondition) return true;
  }
  return false;
}

}  // namespace

CrrReconciler::CrrReconciler(kube::KubeClient* client, const kube::Store* crrs,
                             CrrReconcilerOptions opts)
    : client_(client), crrs_(crrs), opts_(opts) {}

absl::StatusOr<kube::Result> CrrReconciler::Reconcile(const kube::Request& req) {
  std::shared_ptr<const Json> cached = crrs_->Get(req.ns, req.name);
  if (!cached) return kube::Result{};
  const Json& crr = *cached;
  if (kube::IsBeingDeleted(crr)) {
    if (kube::HasFinalizer(crr, kUnreadyAcquiredFinalizer)) RETURN_IF_ERROR(ReleaseUnready(crr));
    return kube::Result{};
  }
  std::string phase = kube::GetString(crr, {"status", "phase"}).value_or("");
  if (phase == "Completed") return HandleCompleted(crr);

  const absl::Time now = opts_.clock->Now();
  const absl::Time created = kube::CreationTimestamp(crr).value_or(now);
  std::optional<int64_t> ads = kube::GetInt(crr, {"spec", "activeDeadlineSeconds"});

  std::string pod_name = kube::GetString(crr, {"spec", "podName"}).value_or("");
  absl::StatusOr<Json> pod = client_->Get(res::Pods(), req.ns, pod_name);
  if (!pod.ok() && !absl::IsNotFound(pod.status())) return pod.status();
  std::string want_uid = kube::Label(crr, kCrrPodUidLabel).value_or("");
  std::string message;
  if (!pod.ok() || kube::IsBeingDeleted(*pod) ||
      (!want_uid.empty() && kube::Uid(*pod) != want_uid)) {
    message = kMessagePodGone;
  } else if (ads && now >= created + absl::Seconds(*ads)) {
    message = kMessageDeadline;
  } else if (phase.empty() && now >= created + opts_.daemon_response_timeout) {
    message = kMessageDaemonTimeout;
  }
  if (!message.empty()) {
    // Go on with the stored object the patch returned (the cache may not have it yet), so the
    // completion is written once.
    ASSIGN_OR_RETURN(std::optional<Json> completed, Complete(crr, message));
    if (!completed) return kube::Result{};
    return HandleCompleted(*completed);
  }

  std::optional<int64_t> unready =
      kube::GetInt(crr, {"spec", "strategy", "unreadyGracePeriodSeconds"});
  if (unready && *unready > 0 && PodHasKruiseReadinessGate(*pod) &&
      (!kube::HasFinalizer(crr, kUnreadyAcquiredFinalizer) ||
       ConditionIndex(crr, kPreRecreateGraceCondition) < 0)) {
    RETURN_IF_ERROR(AcquireUnready(crr, *pod));
  }
  if (phase == "Recreating") RETURN_IF_ERROR(SyncSnapshot(crr, *pod));

  absl::Duration next = opts_.poll_interval;
  if (phase.empty()) next = std::min(next, created + opts_.daemon_response_timeout - now);
  if (ads) next = std::min(next, created + absl::Seconds(*ads) - now);
  return kube::Result{.requeue_after = std::max(next, absl::Milliseconds(1))};
}

absl::StatusOr<std::optional<Json>> CrrReconciler::Complete(const Json& crr,
                                                            const std::string& message) {
  Json patch = {{"status",
                 {{"phase", "Completed"},
                  {"completionTime", kube::FormatRfc3339(opts_.clock->Now())},
                  {"message", message}}}};
  Logger("crr")->info("completing ContainerRecreateRequest {}: {}", kube::NamespacedName(crr),
                      message);
  absl::StatusOr<Json> out =
      client_->Patch(res::ContainerRecreateRequests(), kube::Namespace(crr), kube::Name(crr),
                     kube::PatchType::kMerge, patch, "status");
  if (absl::IsNotFound(out.status())) return std::optional<Json>();
  if (!out.ok()) return out.status();
  return std::optional<Json>(*std::move(out));
}

absl::StatusOr<kube::Result> CrrReconciler::HandleCompleted(const Json& crr) {
  const std::string ns = kube::Namespace(crr), name = kube::Name(crr);
  if (kube::HasFinalizer(crr, kUnreadyAcquiredFinalizer)) RETURN_IF_ERROR(ReleaseUnready(crr));
  if (kube::Label(crr, kCrrActiveLabel).has_value()) {
    Json patch = {{"metadata", {{"labels", {{kCrrActiveLabel, nullptr}}}}}};
    absl::StatusOr<Json> out =
        client_->Patch(res::ContainerRecreateRequests(), ns, name, kube::PatchType::kMerge, patch);
    if (absl::IsNotFound(out.status())) return kube::Result{};
    RETURN_IF_ERROR(out.status());
  }
  std::optional<int64_t> ttl = kube::GetInt(crr, {"spec", "ttlSecondsAfterFinished"});
  if (!ttl) return kube::Result{};
  const absl::Time now = opts_.clock->Now();
  absl::Time completed = now;
  if (std::optional<std::string> t = kube::GetString(crr, {"status", "completionTime"})) {
    if (absl::StatusOr<absl::Time> parsed = kube::ParseRfc3339(*t); parsed.ok())
      completed = *parsed;
  }
  absl::Duration left = completed + absl::Seconds(*ttl) - now;
  if (left > absl::ZeroDuration()) return kube::Result{.requeue_after = left};
  kube::DeleteOptions del;
  del.precondition_uid = kube::Uid(crr);
  absl::Status st = client_->Delete(res::ContainerRecreateRequests(), ns, name, del);
  if (!st.ok() && !absl::IsNotFound(st)) return st;
  Logger("crr")->info("deleted ContainerRecreateRequest {}/{} {}s after it finished", ns, name,
                      *ttl);
  return kube::Result{};
}

absl::Status CrrReconciler::SetPodReadyCondition(const Json& pod, bool ready,
                                                 const std::string& message) {
  Json cond = {{"type", kKruisePodReadyCondition},
               {"status", ready ? "True" : "False"},
               {"lastProbeTime", nullptr},
               {"lastTransitionTime", kube::FormatRfc3339(opts_.clock->Now())}};
  if (!message.empty()) cond["message"] = message;
  Json ops = Json::array({TestResourceVersion(pod)});
  for (Json& op : SetConditionOps(pod, cond)) ops.push_back(std::move(op));
  return client_
      ->Patch(res::Pods(), kube::Namespace(pod), kube::Name(pod), kube::PatchType::kJson, ops,
              "status")
      .status();
}

absl::Status CrrReconciler::AcquireUnready(const Json& crr_in, const Json& pod) {
  const std::string ns = kube::Namespace(crr_in), name = kube::Name(crr_in);
  Json crr = crr_in;
  if (!kube::HasFinalizer(crr, kUnreadyAcquiredFinalizer)) {
    Json ops = Json::array({TestResourceVersion(crr)});
    if (kube::FindPath(crr, {"metadata", "finalizers"}) == nullptr) {
      ops.push_back({{"op", "add"},
                     {"path", "/metadata/finalizers"},
                     {"value", {kUnreadyAcquiredFinalizer}}});
    } else {
      ops.push_back({{"op", "add"},
                     {"path", "/metadata/finalizers/-"},
                     {"value", kUnreadyAcquiredFinalizer}});
    }
    ASSIGN_OR_RETURN(crr, client_->Patch(res::ContainerRecreateRequests(), ns, name,
                                         kube::PatchType::kJson, ops));
  }
  int idx = ConditionIndex(pod, kKruisePodReadyCondition);
  const Json* cond = idx >= 0 ? &pod["status"]["conditions"][static_cast<size_t>(idx)] : nullptr;
  if (cond == nullptr || cond->value("status", "") != "False") {
    RETURN_IF_ERROR(SetPodReadyCondition(pod, false, PodReadyMessage(crr)));
  }
  if (ConditionIndex(crr, kPreRecreateGraceCondition) < 0) {
    Json grace = {{"type", kPreRecreateGraceCondition},
                  {"status", "True"},
                  {"lastTransitionTime", kube::FormatRfc3339(opts_.clock->Now())}};
    Json ops = Json::array({TestResourceVersion(crr)});
    for (Json& op : SetConditionOps(crr, grace)) ops.push_back(std::move(op));
    RETURN_IF_ERROR(client_
                        ->Patch(res::ContainerRecreateRequests(), ns, name, kube::PatchType::kJson,
                                ops, "status")
                        .status());
  }
  Logger("crr")->info("pod {}/{} marked unready for ContainerRecreateRequest {}", ns,
                      kube::Name(pod), name);
  return absl::OkStatus();
}

absl::Status CrrReconciler::ReleaseUnready(const Json& crr) {
  const std::string ns = kube::Namespace(crr), name = kube::Name(crr);
  std::string pod_name = kube::GetString(crr, {"spec", "podName"}).value_or("");
  absl::StatusOr<Json> pod = client_->Get(res::Pods(), ns, pod_name);
  if (!pod.ok() && !absl::IsNotFound(pod.status())) return pod.status();
  std::string want_uid = kube::Label(crr, kCrrPodUidLabel).value_or("");
  if (pod.ok() && (want_uid.empty() || kube::Uid(*pod) == want_uid)) {
    int idx = ConditionIndex(*pod, kKruisePodReadyCondition);
    if (idx >= 0) {
      const Json& cond = (*pod)["status"]["conditions"][static_cast<size_t>(idx)];
      if (cond.value("status", "") == "False" &&
          cond.value("message", "") == PodReadyMessage(crr)) {
        RETURN_IF_ERROR(SetPodReadyCondition(*pod, true, ""));
      }
    }
  }
  std::vector<std::string> finalizers = kube::Finalizers(crr);
  auto it = std::find(finalizers.begin(), finalizers.end(), kUnreadyAcquiredFinalizer);
  if (it == finalizers.end()) return absl::OkStatus();
  Json ops =
      Json::array({TestResourceVersion(crr),
                   {{"op", "remove"},
                    {"path", absl::StrCat("/metadata/finalizers/", it - finalizers.begin())}}});
  absl::StatusOr<Json> out =
      client_->Patch(res::ContainerRecreateRequests(), ns, name, kube::PatchType::kJson, ops);
  if (absl::IsNotFound(out.status())) return absl::OkStatus();
  return out.status();
}

absl::Status CrrReconciler::SyncSnapshot(const Json& crr, const Json& pod) {
  Json snapshot = Json::array();
  const Json* statuses = kube::FindPath(pod, {"status", "containerStatuses"});
  const Json* containers = kube::FindPath(crr, {"spec", "containers"});
  if (statuses == nullptr || !statuses->is_array() || containers == nullptr ||
      !containers->is_array()) {
    return absl::OkStatus();
  }
  for (const Json& c : *containers) {
    std::string cname = c.is_object() ? c.value("name", "") : "";
    for (const Json& s : *statuses) {
      if (!s.is_object() || s.value("name", "") != cname) continue;
      if (kube::FindPath(s, {"state", "running"}) == nullptr) continue;
      snapshot.push_back({{"name", cname},
                          {"ready", s.value("ready", false)},
                          {"restartCount", s.value("restartCount", 0)},
                          {"containerID", s.value("containerID", "")}});
    }
  }
  const Json* current = kube::FindPath(crr, {"status", "containerStatusSnapshot"});
  if (current != nullptr && *current == snapshot) return absl::OkStatus();
  if (current == nullptr && snapshot.empty()) return absl::OkStatus();
  Json patch = {{"status", {{"containerStatusSnapshot", snapshot}}}};
  absl::StatusOr<Json> out =
      client_->Patch(res::ContainerRecreateRequests(), kube::Namespace(crr), kube::Name(crr),
                     kube::PatchType::kMerge, patch, "status");
  if (absl::IsNotFound(out.status())) return absl::OkStatus();
  return out.status();
}

namespace {

class CrrControllerGroup final : public ControllerGroup {
 public:
  std::string Name() const override { return "crr"; }
  absl::Status Register(const ControllerContext& ctx) override {
    if (ctx.client == nullptr || ctx.manager == nullptr) {
      return absl::InvalidArgumentError("crr controller group: client and manager are required");
    }
    if (!ctx.feature_enabled("KruiseDaemon")) {
      Logger("crr")->info("KruiseDaemon gate is off: ContainerRecreateRequest controller disabled");
      return absl::OkStatus();
    }
    kube::InformerOptions io;
    io.resource = res::ContainerRecreateRequests();
    informer_ = std::make_unique<kube::Informer>(ctx.client, ctx.clock, io);
    CrrReconcilerOptions ro;
    ro.clock = ctx.clock;
    reconciler_ = std::make_unique<CrrReconciler>(ctx.client, &informer_->store(), ro);
    kube::ControllerOptions co;
    co.clock = ctx.clock;
    co.workers = ctx.workers("crr", 3);
    controller_ = std::make_unique<kube::Controller>("crr", reconciler_.get(), co);
    controller_->Watch(informer_.get(), kube::EnqueueSelf());
    ctx.manager->AddInformer(informer_.get());
    ctx.manager->Add(controller_.get());
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<kube::Informer> informer_;
  std::unique_ptr<CrrReconciler> reconciler_;
  std::unique_ptr<kube::Controller> controller_;
};

}  // namespace

std::unique_ptr<ControllerGroup> NewCrrControllerGroup() {
  return std::make_unique<CrrControllerGroup>();
}

}  // namespace kruise::manager::crr
