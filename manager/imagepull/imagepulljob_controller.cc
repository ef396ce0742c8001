#include "manager/imagepull/imagepulljob_controller.h"

#include <algorithm>
#include <set>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "kube/errors.h"
#include "kube/object.h"
#include "kube/store.h"
#include "manager/imagepull/imagepull_util.h"

namespace kruise::manager {
namespace {

using kube::Field;
using kube::IntField;
using kube::Json;
using kube::kConflictRetries;

constexpr int64_t kNeverTtlSeconds = 24 * 3600;
constexpr int64_t kNeverActiveDeadlineSeconds = 1800;

std::optional<absl::Time> StatusTime(const Json& job, const char* key) {
  auto s = kube::GetString(job, {"status", key});
  if (!s) return std::nullopt;
  auto t = kube::ParseRfc3339(*s);
  if (!t.ok()) return std::nullopt;
  return *t;
}

bool SameRef(const Json& a, const Json& b) {
  return a.value("namespace", "") == b.value("namespace", "") &&
         a.value("name", "") == b.value("name", "");
}

bool ContainsRef(const Json* list, const Json& ref) {
  if (list == nullptr || !list->is_array()) return false;
  for (const Json& r : *list) {
    if (r.is_object() && SameRef(r, ref)) return true;
  }
  return false;
}

bool OwnedBy(const Json& tag, const std::string& uid) {
  const Json* refs = Field(tag, "ownerReferences");
  if (refs == nullptr || !refs->is_array()) return false;
  for (const Json& r : *refs) {
    if (r.is_object() && r.value("uid", "") == uid) return true;
  }
  return false;
}

std::string ProgressMessage(int64_t desired, int64_t succeeded, int64_t failed, bool completed) {
  if (completed) return "job has completed";
  if (desired == 0) return "job is running, no progress";
  return absl::StrFormat(
      "job is running, progress %.1f%%",
      100.0 * static_cast<double>(succeeded + failed) / static_cast<double>(desired));
}

Json Normalised(const Json* v) { return v == nullptr ? Json(nullptr) : *v; }

}  // namespace

ImagePullJobReconciler::ImagePullJobReconciler(ImagePullJobControllerOptions opts,
                                               kube::KubeClient* client, Clock* clock,
                                               kube::EventRecorder* recorder, kube::Informer* jobs,
                                               kube::Informer* node_images, kube::Informer* pods,
                                               PullSecretCopies* secrets)
    : opts_(std::move(opts)),
      client_(client),
      clock_(clock),
      recorder_(recorder),
      jobs_(jobs),
      node_images_(node_images),
      pods_(pods),
      secrets_(secrets),
      job_expectations_(clock),
      node_image_expectations_(clock) {}

Json ImagePullJobReconciler::TagPullPolicy(const ImagePullJobSpec& spec) {
  auto rand = [this](int64_t n) -> int64_t {
    if (n <= 0) return 0;
    if (opts_.rand) return opts_.rand(n);
    thread_local absl::BitGen gen;
    return absl::Uniform<int64_t>(gen, 0, n);
  };
  Json pp = {{"timeoutSeconds", spec.timeout_seconds}, {"backoffLimit", spec.backoff_limit}};
  if (spec.never) {
    pp["ttlSecondsAfterFinished"] = kNeverTtlSeconds + rand(1200) - 600;
    pp["activeDeadlineSeconds"] = std::max(kNeverActiveDeadlineSeconds, spec.timeout_seconds);
    return pp;
  }
  int64_t ttl = 0;
  if (spec.ttl_seconds_after_finished) {
    ttl = *spec.ttl_seconds_after_finished;
  } else if (spec.active_deadline_seconds) {
    ttl = *spec.active_deadline_seconds;
  } else {
    ttl = spec.timeout_seconds * spec.backoff_limit;
  }
  pp["ttlSecondsAfterFinished"] = ttl + opts_.default_ttl_for_always + rand(300);
  if (spec.active_deadline_seconds) pp["activeDeadlineSeconds"] = *spec.active_deadline_seconds;
  return pp;
}

absl::Status ImagePullJobReconciler::RemoveFinalizer(const Json& job) {
  Json current = job;
  for (int attempt = 0;; ++attempt) {
    if (!kube::HasFinalizer(current, kProtectionFinalizer)) return absl::OkStatus();
    Json fins = Json::array();
    for (const std::string& f : kube::Finalizers(current)) {
      if (f != kProtectionFinalizer) fins.push_back(f);
    }
    Json patch = {
        {"metadata", {{"resourceVersion", kube::ResourceVersion(current)}, {"finalizers", fins}}}};
    auto r = client_->Patch(opts_.image_pull_jobs, kube::Namespace(current), kube::Name(current),
                            kube::PatchType::kMerge, patch);
    if (r.ok()) {
      job_expectations_.Expect(kube::StoreKey(*r), kube::ResourceVersion(*r));
      return absl::OkStatus();
    }
    if (kube::IsNotFound(r.status())) return absl::OkStatus();
    if (!kube::IsConflict(r.status()) || attempt >= kConflictRetries) return r.status();
    auto fresh = client_->Get(opts_.image_pull_jobs, kube::Namespace(job), kube::Name(job));
    if (!fresh.ok()) return kube::IsNotFound(fresh.status()) ? absl::OkStatus() : fresh.status();
    current = std::move(*fresh);
  }
}

absl::StatusOr<kube::Result> ImagePullJobReconciler::Finish(const Json& job) {
  if (absl::Status s = secrets_->ReleaseAll(job); !s.ok()) return s;
  if (absl::Status s = RemoveFinalizer(job); !s.ok()) return s;
  return kube::Result{};
}

absl::StatusOr<kube::Result> ImagePullJobReconciler::AfterCompletion(const Json& job) {
  // The job keeps its pull-secret copies until it is deleted (by its TTL or by hand).
  auto ttl = kube::GetInt(job, {"spec", "completionPolicy", "ttlSecondsAfterFinished"});
  auto done = StatusTime(job, "completionTime");
  if (!ttl || !done) return kube::Result{};
  absl::Duration left = absl::Seconds(*ttl) - (clock_->Now() - *done);
  if (left > absl::ZeroDuration()) return kube::Result{left};
  kube::DeleteOptions del;
  del.precondition_uid = kube::Uid(job);
  absl::Status s =
      client_->Delete(opts_.image_pull_jobs, kube::Namespace(job), kube::Name(job), del);
  if (!s.ok() && !kube::IsNotFound(s)) return s;
  Logger("imagepulljob")
      ->info("deleted ImagePullJob {}: ttlSecondsAfterFinished passed", kube::NamespacedName(job));
  return kube::Result{};
}

std::vector<std::shared_ptr<const Json>> ImagePullJobReconciler::Targets(
    const Json& job, const ImagePullJobSpec& spec) {
  std::vector<std::shared_ptr<const Json>> out;
  auto add = [&out](std::shared_ptr<const Json> ni) {
    if (ni != nullptr && !kube::IsBeingDeleted(*ni)) out.push_back(std::move(ni));
  };
  if (!spec.pod_selector.is_null()) {
    auto sel = kube::LabelSelector::FromJson(spec.pod_selector);
    if (!sel.ok()) return out;
    std::set<std::string> nodes;
    auto pods = pods_->store().ByIndex(kube::kNamespaceIndex, kube::Namespace(job));
    if (!pods.ok()) return out;
    for (const auto& pod : *pods) {
      if (kube::IsBeingDeleted(*pod) || !sel->MatchesObject(*pod)) continue;
      const std::string phase = kube::GetString(*pod, {"status", "phase"}).value_or("");
      if (phase == "Succeeded" || phase == "Failed") continue;
      const std::string node = kube::GetString(*pod, {"spec", "nodeName"}).value_or("");
      if (!node.empty()) nodes.insert(node);
    }
    for (const std::string& n : nodes) add(node_images_->store().Get(n));
    return out;
  }
  if (spec.selector.is_object() && spec.selector.contains("names") &&
      spec.selector["names"].is_array()) {
    std::set<std::string> names;
    for (const Json& n : spec.selector["names"]) names.insert(n.get<std::string>());
    for (const std::string& n : names) add(node_images_->store().Get(n));
    return out;
  }
  kube::LabelSelector sel = kube::LabelSelector::Everything();
  if (spec.selector.is_object()) {
    Json labels = Json::object();
    if (spec.selector.contains("matchLabels")) labels["matchLabels"] = spec.selector["matchLabels"];
    if (spec.selector.contains("matchExpressions")) {
      labels["matchExpressions"] = spec.selector["matchExpressions"];
    }
    auto parsed = kube::LabelSelector::FromJson(labels);
    if (!parsed.ok()) return out;
    sel = *parsed;
  }
  for (auto& ni : node_images_->store().List()) {
    if (sel.MatchesObject(*ni)) add(ni);
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return kube::Name(*a) < kube::Name(*b); });
  return out;
}

ImagePullJobReconciler::Progress ImagePullJobReconciler::Compute(
    const Json& job, const ImagePullJobSpec& spec,
    const std::vector<std::shared_ptr<const Json>>& targets, const std::vector<Json>& secret_refs) {
  Progress p;
  const std::string uid = kube::Uid(job);
  const std::string& image = spec.name_tag.name;
  const std::string& tag = spec.name_tag.tag;
  for (const auto& ni : targets) {
    const std::string name = kube::Name(*ni);
    const Json* img = kube::FindPath(*ni, {"spec", "images", image});
    int64_t version = -1;
    if (img != nullptr) {
      bool secrets_ok = true;
      for (const Json& ref : secret_refs) {
        secrets_ok = secrets_ok && ContainsRef(Field(*img, "pullSecrets"), ref);
      }
      const Json* tags = Field(*img, "tags");
      if (secrets_ok && tags != nullptr && tags->is_array()) {
        for (const Json& t : *tags) {
          if (t.is_object() && t.value("tag", "") == tag && OwnedBy(t, uid)) {
            version = IntField(t, "version", 0);
          }
        }
      }
    }
    if (version < 0) {
      p.not_synced.push_back(name);
      continue;
    }
    std::string phase;
    const Json* st = kube::FindPath(*ni, {"status", "imageStatuses", image, "tags"});
    if (st != nullptr && st->is_array()) {
      for (const Json& t : *st) {
        if (t.is_object() && t.value("tag", "") == tag && IntField(t, "version", -1) == version) {
          phase = t.value("phase", "");
        }
      }
    }
    if (phase == "Succeeded") {
      p.succeeded.push_back(name);
    } else if (phase == "Failed") {
      p.failed.push_back(name);
    } else {
      p.pulling.push_back(name);
    }
  }
  return p;
}

absl::Status ImagePullJobReconciler::TagNode(const Json& job, const ImagePullJobSpec& spec,
                                             const std::string& node_image,
                                             const std::vector<Json>& secret_refs) {
  const std::string& image = spec.name_tag.name;
  const std::string& tag = spec.name_tag.tag;
  const Json owner = {{"apiVersion", opts_.image_pull_jobs.ApiVersion()},
                      {"kind", "ImagePullJob"},
                      {"name", kube::Name(job)},
                      {"namespace", kube::Namespace(job)},
                      {"uid", kube::Uid(job)}};
  for (int attempt = 0;; ++attempt) {
    auto ni = client_->Get(opts_.node_images, "", node_image);
    if (!ni.ok()) return kube::IsNotFound(ni.status()) ? absl::OkStatus() : ni.status();
    if (kube::IsBeingDeleted(*ni)) return absl::OkStatus();
    const Json* current = kube::FindPath(*ni, {"spec", "images", image});
    Json img = current != nullptr && current->is_object() ? *current : Json::object();
    bool changed = false;

    Json secrets = img.contains("pullSecrets") && img["pullSecrets"].is_array() ? img["pullSecrets"]
                                                                                : Json::array();
    for (const Json& ref : secret_refs) {
      if (!ContainsRef(&secrets, ref)) {
        secrets.push_back(ref);
        changed = true;
      }
    }
    Json tags = img.contains("tags") && img["tags"].is_array() ? img["tags"] : Json::array();
    const std::string now = kube::FormatRfc3339(clock_->Now());
    bool found = false;
    for (Json& t : tags) {
      if (!t.is_object() || t.value("tag", "") != tag) continue;
      found = true;
      if (OwnedBy(t, kube::Uid(job))) break;
      // Another job's tag: a new round (version + 1) that we own too.
      t["version"] = IntField(t, "version", 0) + 1;
      if (!t.contains("ownerReferences") || !t["ownerReferences"].is_array()) {
        t["ownerReferences"] = Json::array();
      }
      t["ownerReferences"].push_back(owner);
      t["createdAt"] = now;
      t["imagePullPolicy"] = spec.image_pull_policy;
      changed = true;
      break;
    }
    if (!found) {
      int64_t last = -1;
      const Json* st = kube::FindPath(*ni, {"status", "imageStatuses", image, "tags"});
      if (st != nullptr && st->is_array()) {
        for (const Json& s : *st) {
          if (s.is_object() && s.value("tag", "") == tag) last = IntField(s, "version", -1);
        }
      }
      tags.push_back({{"tag", tag},
                      {"version", last + 1},
                      {"pullPolicy", TagPullPolicy(spec)},
                      {"ownerReferences", Json::array({owner})},
                      {"createdAt", now},
                      {"imagePullPolicy", spec.image_pull_policy}});
      changed = true;
    }
    if (!changed) return absl::OkStatus();
    std::stable_sort(tags.begin(), tags.end(), [](const Json& a, const Json& b) {
      return a.value("tag", "") < b.value("tag", "");
    });
    Json image_patch = {
        {"tags", tags}, {"pullSecrets", secrets}, {"sandboxConfig", spec.sandbox_config}};
    Json patch = {{"metadata", {{"resourceVersion", kube::ResourceVersion(*ni)}}},
                  {"spec", {{"images", {{image, image_patch}}}}}};
    auto r = client_->Patch(opts_.node_images, "", node_image, kube::PatchType::kMerge, patch);
    if (r.ok()) {
      node_image_expectations_.Expect(kube::StoreKey(*r), kube::ResourceVersion(*r));
      Logger("imagepulljob")
          ->info("ImagePullJob {}: image {}:{} written to NodeImage {}", kube::NamespacedName(job),
                 image, tag, node_image);
      return absl::OkStatus();
    }
    if (!kube::IsConflict(r.status()) || attempt >= kConflictRetries) return r.status();
  }
}

absl::StatusOr<kube::Result> ImagePullJobReconciler::Reconcile(const kube::Request& req) {
  auto cached = jobs_->store().Get(req.ns, req.name);
  if (cached == nullptr) return kube::Result{};
  const Json& job = *cached;
  // Our last write to this job has not reached the cache: its event brings us back.
  if (!job_expectations_.SatisfiedByCache(job)) return kube::Result{};
  if (kube::IsBeingDeleted(job)) return Finish(job);
  if (!kube::HasFinalizer(job, kProtectionFinalizer)) {
    Json fins = Json::array();
    for (const std::string& f : kube::Finalizers(job)) fins.push_back(f);
    fins.push_back(kProtectionFinalizer);
    Json patch = {
        {"metadata", {{"resourceVersion", kube::ResourceVersion(job)}, {"finalizers", fins}}}};
    auto r =
        client_->Patch(opts_.image_pull_jobs, req.ns, req.name, kube::PatchType::kMerge, patch);
    if (!r.ok()) return kube::IsNotFound(r.status()) ? absl::OkStatus() : r.status();
    job_expectations_.Expect(kube::StoreKey(*r), kube::ResourceVersion(*r));
    return kube::Result{};
  }
  if (kube::GetString(job, {"status", "completionTime"})) return AfterCompletion(job);

  auto spec = ParseImagePullJobSpec(job);
  if (!spec.ok()) {
    const std::string msg = absl::StrCat("invalid spec: ", spec.status().message());
    if (kube::GetString(job, {"status", "message"}) != msg) {
      auto r = client_->Patch(opts_.image_pull_jobs, req.ns, req.name, kube::PatchType::kMerge,
                              {{"status", {{"message", msg}}}}, "status");
      if (!r.ok()) return r.status();
      if (recorder_ != nullptr)
        recorder_->Event(job, kube::EventType::kWarning, "InvalidSpec", msg);
    }
    return kube::TerminalError(spec.status());
  }

  auto targets = Targets(job, *spec);
  for (const auto& ni : targets) {
    // A NodeImage we tagged is not in the cache yet: counting it now would exceed parallelism.
    // Wait for its next event (TakeWaitersFor); registering first and then looking again means
    // an event that lands in between finds us registered or has already updated the cache. The
    // requeue after 5 s is only a fallback.
    if (node_image_expectations_.SatisfiedByCache(*ni)) continue;
    {
      absl::MutexLock lock(&waiters_mu_);
      waiters_[kube::Name(*ni)].insert(kube::NamespacedName(job));
    }
    auto fresh = node_images_->store().Get("", kube::Name(*ni));
    if (fresh == nullptr || !node_image_expectations_.SatisfiedByCache(*fresh)) {
      return kube::Result{absl::Seconds(5)};
    }
  }
  auto secret_refs = secrets_->Sync(job, spec->pull_secrets);
  if (!secret_refs.ok()) return secret_refs.status();
  Progress p = Compute(job, *spec, targets, *secret_refs);

  const absl::Time now = clock_->Now();
  const absl::Time start = StatusTime(job, "startTime").value_or(now);
  const int64_t desired = static_cast<int64_t>(targets.size());
  bool completed = false;
  std::string message;
  std::vector<std::string> failed = p.failed;
  int64_t active = static_cast<int64_t>(p.pulling.size());
  const bool deadline_passed = !spec->never && spec->active_deadline_seconds &&
                               now - start >= absl::Seconds(*spec->active_deadline_seconds);
  const int64_t done = static_cast<int64_t>(p.succeeded.size() + p.failed.size());
  if (deadline_passed && desired != done) {
    completed = true;
    failed.insert(failed.end(), p.pulling.begin(), p.pulling.end());
    failed.insert(failed.end(), p.not_synced.begin(), p.not_synced.end());
    active = 0;
    message = "job exceeds activeDeadlineSeconds";
  } else {
    completed = !spec->never && desired == done;
    message = ProgressMessage(desired, static_cast<int64_t>(p.succeeded.size()),
                              static_cast<int64_t>(p.failed.size()), completed);
    if (!completed) {
      // Exactly `parallelism` nodes in flight: only the free slots get new tags.
      int64_t slots =
          std::min<int64_t>(spec->parallelism - active, static_cast<int64_t>(p.not_synced.size()));
      for (int64_t i = 0; i < slots; ++i) {
        if (absl::Status s = TagNode(job, *spec, p.not_synced[i], *secret_refs); !s.ok()) {
          return s;
        }
      }
    }
  }
  std::sort(failed.begin(), failed.end());

  Json status = {{"startTime", kube::FormatRfc3339(start)},
                 {"desired", desired},
                 {"active", active},
                 {"succeeded", static_cast<int64_t>(p.succeeded.size())},
                 {"failed", static_cast<int64_t>(failed.size())},
                 {"message", message}};
  status["failedNodes"] = failed.empty() ? Json(nullptr) : Json(failed);
  status["completionTime"] = completed ? Json(kube::FormatRfc3339(now)) : Json(nullptr);
  const Json* old = Field(job, "status");
  bool differs = false;
  for (const auto& [k, v] : status.items()) {
    Json have = old != nullptr ? Normalised(Field(*old, k.c_str())) : Json(nullptr);
    if (have.is_array() && have.empty()) have = nullptr;
    if (have != v) differs = true;
  }
  if (differs) {
    auto r = client_->Patch(opts_.image_pull_jobs, req.ns, req.name, kube::PatchType::kMerge,
                            {{"status", status}}, "status");
    if (!r.ok()) return kube::IsNotFound(r.status()) ? absl::OkStatus() : r.status();
    job_expectations_.Expect(kube::StoreKey(*r), kube::ResourceVersion(*r));
    if (completed && recorder_ != nullptr) {
      recorder_->Event(job, kube::EventType::kNormal, "Completed", message);
    }
  }
  if (!completed && !spec->never && spec->active_deadline_seconds) {
    absl::Duration left = absl::Seconds(*spec->active_deadline_seconds) - (now - start);
    return kube::Result{std::max(left, absl::Seconds(1))};
  }
  return kube::Result{};
}

std::vector<kube::Request> ImagePullJobReconciler::TakeWaitersFor(const std::string& node_image) {
  std::set<std::string> keys;
  {
    absl::MutexLock lock(&waiters_mu_);
    auto it = waiters_.find(node_image);
    if (it == waiters_.end()) return {};
    keys = std::move(it->second);
    waiters_.erase(it);
  }
  std::vector<kube::Request> out;
  for (const std::string& key : keys) out.push_back(kube::Request::FromKey(key));
  return out;
}

}  // namespace kruise::manager
