#include "daemon/crr/crr_controller.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "daemon/crr/crr_executor.h"
#include "daemon/crr/crr_ordering.h"
#include "kube/errors.h"
#include "kube/object.h"
#include "kube/rate_limiter.h"
#include "kube/resources.h"

namespace kruise::daemon {
namespace {

using kube::Json;


kube::InformerOptions InformerFor(const CrrControllerOptions& o) {
  kube::InformerOptions io;
  io.resource = kube::resources::ContainerRecreateRequests();
  io.label_selector = CrrController::LabelSelector(o.node_name);
  io.indexers[kCrrPodUidIndex] = [](const Json& obj) -> std::vector<std::string> {
    std::optional<std::string> uid = kube::Label(obj, kCrrPodUidLabel);
    if (!uid || uid->empty()) return {};
    return {*uid};
  };
  return io;
}

std::optional<int64_t> ParseResourceVersion(const std::string& rv) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(rv.data(), rv.data() + rv.size(), v);
  if (ec != std::errc() || ptr != rv.data() + rv.size()) return std::nullopt;
  return v;
}

std::string Phase(const Json& crr) {
  return kube::GetString(crr, {"status", "phase"}).value_or("");
}

// containerRecreateStates by container name.
std::map<std::string, Json> StatesByName(const Json& crr) {
  std::map<std::string, Json> out;
  const Json* states = kube::FindPath(crr, {"status", "containerRecreateStates"});
  if (states == nullptr || !states->is_array()) return out;
  for (const Json& s : *states) {
    if (s.is_object() && s.contains("name") && s["name"].is_string()) {
      out[s["name"].get<std::string>()] = s;
    }
  }
  return out;
}

bool IsKilled(const Json& state) {
  auto it = state.find("isKilled");
  return it != state.end() && it->is_boolean() && it->get<bool>();
}

void MinInto(std::optional<absl::Duration>* target, absl::Duration d) {
  if (!target->has_value() || d < **target) *target = d;
}

}  // namespace

std::string CrrController::LabelSelector(const std::string& node_name) {
  return absl::StrCat(kCrrNodeNameLabel, "=", node_name, ",", kCrrActiveLabel, "=true");
}

CrrController::CrrController(CrrControllerOptions options, kube::KubeClient* client,
                             cri::RuntimeService* runtime, Clock* clock,
                             kube::EventRecorder* recorder, CrrObserver observer)
    : options_(std::move(options)),
      client_(client),
      clock_(clock),
      recorder_(recorder),
      observer_(std::move(observer)),
      executor_(runtime, clock, options_.executor),
      informer_(client, clock, InformerFor(options_)),
      queue_(clock, std::make_unique<kube::ItemExponentialRateLimiter>(options_.backoff_base,
                                                                       options_.backoff_max)) {
  kube::ResourceEventHandler handler;
  handler.on_add = [this](const Json& obj) { EnqueueCrr(obj); };
  handler.on_update = [this](const Json&, const Json& obj) { EnqueueCrr(obj); };
  handler.on_delete = [this](const Json& obj, bool) {
    {
      absl::MutexLock lock(&mu_);
      written_.erase(kube::StoreKey(obj));
    }
    // The deleted CRR may have been the active one: let the pod's next CRR start.
    EnqueueCrr(obj);
  };
  informer_.AddEventHandler(std::move(handler));
}

CrrController::~CrrController() { Stop(); }

void CrrController::Start() {
  {
    absl::MutexLock lock(&mu_);
    if (started_ || stopped_) return;
    started_ = true;
  }
  informer_.Start();
  int n = std::max(1, options_.workers);
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { WorkerLoop(); });
  Logger("crr")->info("ContainerRecreateRequest controller for node {} started ({} workers)",
                      options_.node_name, n);
}

void CrrController::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  queue_.ShutDownAndDiscard();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  informer_.Stop();
}

CrrControllerStats CrrController::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void CrrController::EnqueueCrr(const Json& crr) {
  std::optional<std::string> uid = kube::Label(crr, kCrrPodUidLabel);
  if (!uid || uid->empty()) {
    Logger("crr")->warn("ContainerRecreateRequest {} has no label {}; ignored",
                        kube::NamespacedName(crr), kCrrPodUidLabel);
    return;
  }
  queue_.Add(*uid);
}

void CrrController::WorkerLoop() {
  while (std::optional<std::string> key = queue_.Get()) {
    std::optional<absl::Duration> requeue_after;
    absl::Status s = SyncPod(*key, &requeue_after);
    if (!s.ok()) {
      {
        absl::MutexLock lock(&mu_);
        ++stats_.reconcile_errors;
      }
      Logger("crr")->warn("pod {}: {} (retrying with backoff)", *key, s);
      queue_.AddRateLimited(*key);
    } else {
      queue_.Forget(*key);
      if (requeue_after) queue_.AddAfter(*key, *requeue_after);
    }
    queue_.Done(*key);
  }
}

std::vector<Json> CrrController::CrrsOfPod(const std::string& pod_uid) {
  std::vector<Json> out;
  auto cached = informer_.store().ByIndex(kCrrPodUidIndex, pod_uid);
  if (!cached.ok()) return out;
  absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  for (const auto& obj : *cached) {
    const std::string key = kube::StoreKey(*obj);
    auto it = written_.find(key);
    if (it == written_.end()) {
      out.push_back(*obj);
      continue;
    }
    std::optional<int64_t> cache_rv = ParseResourceVersion(kube::ResourceVersion(*obj));
    std::optional<int64_t> our_rv = ParseResourceVersion(kube::ResourceVersion(it->second.obj));
    bool cache_caught_up = !cache_rv || !our_rv || *cache_rv >= *our_rv ||
                           kube::Uid(*obj) != kube::Uid(it->second.obj);
    if (cache_caught_up || now - it->second.at > options_.expectation_timeout) {
      written_.erase(it);
      out.push_back(*obj);
    } else {
      out.push_back(it->second.obj);
    }
  }
  return out;
}

absl::StatusOr<std::optional<Json>> CrrController::PatchStatus(const Json& crr, const Json& patch) {
  auto r = client_->Patch(kube::resources::ContainerRecreateRequests(), kube::Namespace(crr),
                          kube::Name(crr), kube::PatchType::kMerge, patch, "status");
  if (!r.ok()) {
    if (kube::IsNotFound(r.status())) return std::optional<Json>();
    return Annotate(r.status(), absl::StrCat("patching status of ContainerRecreateRequest ",
                                             kube::NamespacedName(crr)));
  }
  absl::MutexLock lock(&mu_);
  ++stats_.status_patches;
  written_[kube::StoreKey(*r)] = Written{*r, clock_->Now()};
  return std::optional<Json>(*r);
}

absl::Status CrrController::SyncPod(const std::string& pod_uid,
                                    std::optional<absl::Duration>* requeue_after) {
  std::vector<Json> crrs;
  for (Json& crr : CrrsOfPod(pod_uid)) {
    // A CRR being deleted (e.g. held by the manager's finalizer) must not kill anything more.
    if (!kube::IsBeingDeleted(crr)) crrs.push_back(std::move(crr));
  }
  if (crrs.empty()) return absl::OkStatus();
  CrrSelection selection = SelectActive(crrs);
  if (!selection.active) return absl::OkStatus();
  const Json& active = crrs[*selection.active];

  for (size_t i : selection.to_mark_pending) {
    Json patch = PendingPatch(crrs[i], kube::Name(active));
    if (patch.is_null()) continue;
    auto r = PatchStatus(crrs[i], patch);
    if (!r.ok()) return r.status();
    absl::MutexLock lock(&mu_);
    ++stats_.pending_marks;
  }

  absl::StatusOr<CrrStepResult> step = executor_.Reconcile(active, clock_->Now());
  {
    absl::MutexLock lock(&mu_);
    ++stats_.reconciles;
  }
  if (!step.ok()) {
    return Annotate(step.status(), absl::StrCat("reconciling ContainerRecreateRequest ",
                                                kube::NamespacedName(active)));
  }
  if (recorder_ != nullptr) {
    for (const CrrEvent& e : step->events) {
      recorder_->Event(active,
                       e.type == "Warning" ? kube::EventType::kWarning : kube::EventType::kNormal,
                       e.reason, e.message);
    }
  }
  if (step->HasPatch()) {
    auto r = PatchStatus(active, step->status_patch);
    if (!r.ok()) return r.status();
    if (!r->has_value()) return absl::OkStatus();  // deleted meanwhile
    const Json& after = **r;
    Report(active, after);
    // Completed: the pod's next CRR (if any) starts now, not at the next event.
    if (Phase(after) == kCrrPhaseCompleted) MinInto(requeue_after, absl::ZeroDuration());
  }
  if (step->requeue_after) MinInto(requeue_after, *step->requeue_after);
  return absl::OkStatus();
}

void CrrController::Report(const Json& before, const Json& after) {
  if (observer_.on_container_killed) {
    std::map<std::string, Json> old_states = StatesByName(before);
    for (const auto& [name, state] : StatesByName(after)) {
      if (!IsKilled(state)) continue;
      auto old = old_states.find(name);
      if (old == old_states.end() || !IsKilled(old->second)) {
        observer_.on_container_killed(after, name);
      }
    }
  }
  if (Phase(after) == kCrrPhaseCompleted && Phase(before) != kCrrPhaseCompleted) {
    std::map<std::string, Json> states = StatesByName(after);
    bool succeeded = !states.empty();
    for (const auto& [name, state] : states) {
      if (state.value("phase", "") != "Succeeded") succeeded = false;
    }
    absl::Duration took = absl::ZeroDuration();
    if (auto created = kube::CreationTimestamp(after)) took = clock_->Now() - *created;
    Logger("crr")->info("ContainerRecreateRequest {} completed ({}) after {}",
                        kube::NamespacedName(after), succeeded ? "succeeded" : "failed",
                        absl::FormatDuration(took));
    if (observer_.on_completed) observer_.on_completed(after, succeeded, took);
  }
}

}  // namespace kruise::daemon
