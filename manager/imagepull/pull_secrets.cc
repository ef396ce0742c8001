#include "manager/imagepull/pull_secrets.h"

#include <algorithm>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "kube/errors.h"
#include "kube/object.h"
#include "kube/resources.h"
#include "manager/imagepull/imagepull_util.h"

namespace kruise::manager {
namespace {

using kube::Field;
using kube::IntField;
using kube::Json;
using kube::kConflictRetries;


int64_t Rv(const Json& obj) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(kube::ResourceVersion(obj), &v)) return 0;
  return v;
}

std::string SourceUid(const Json& copy) {
  return kube::Label(copy, kSourceSecretUidLabel).value_or("");
}

Json WithReferences(Json copy, const std::set<std::string>& refs) {
  copy["metadata"]["annotations"][kReferencesAnnotation] = absl::StrJoin(refs, ",");
  return copy;
}

// The Secret types kruise-daemon reads registry credentials from.
bool DockerType(const Json& secret) {
  const std::string type = secret.value("type", "");
  return type == "kubernetes.io/dockerconfigjson" || type == "kubernetes.io/dockercfg";
}

// True when `job` names `secret_name` in spec.pullSecrets.
bool NamesSecret(const Json& job, const std::string& secret_name) {
  const Json* names = kube::FindPath(job, {"spec", "pullSecrets"});
  if (names == nullptr || !names->is_array()) return false;
  for (const Json& n : *names) {
    if (n.is_string() && n.get<std::string>() == secret_name) return true;
  }
  return false;
}

bool SameContent(const Json& copy, const Json& source) {
  return copy.value("type", "") == source.value("type", "") &&
         copy.value("data", Json::object()) == source.value("data", Json::object());
}

}  // namespace

PullSecretCopies::PullSecretCopies(kube::KubeClient* client, Clock* clock,
                                   kube::EventRecorder* recorder, kube::Informer* copies,
                                   kube::Informer* jobs, PullSecretCopiesOptions opts)
    : client_(client),
      clock_(clock),
      recorder_(recorder),
      copies_(copies),
      jobs_(jobs),
      opts_(std::move(opts)) {}

std::set<std::string> PullSecretCopies::References(const Json& copy) {
  std::set<std::string> out;
  for (absl::string_view k :
       absl::StrSplit(kube::Annotation(copy, kReferencesAnnotation).value_or(""), ',',
                      absl::SkipWhitespace())) {
    out.insert(std::string(k));
  }
  return out;
}

std::vector<Json> PullSecretCopies::CopiesLocked() {
  absl::flat_hash_map<std::string, Json> by_uid;
  for (const auto& obj : copies_->store().List()) {
    std::string uid = SourceUid(*obj);
    if (uid.empty() || kube::IsBeingDeleted(*obj)) continue;
    by_uid[uid] = *obj;
  }
  for (auto it = recent_.begin(); it != recent_.end();) {
    auto cached = by_uid.find(it->first);
    const bool deleted = it->second.is_null();
    if (deleted) {
      // Deleted by us: hide it until the cache forgets it.
      if (cached == by_uid.end()) {
        recent_.erase(it++);
        continue;
      }
      by_uid.erase(cached);
    } else if (cached != by_uid.end() && Rv(cached->second) >= Rv(it->second)) {
      recent_.erase(it++);  // the cache caught up
      continue;
    } else {
      by_uid[it->first] = it->second;
    }
    ++it;
  }
  std::vector<Json> out;
  for (auto& [uid, obj] : by_uid) out.push_back(std::move(obj));
  return out;
}

absl::Status PullSecretCopies::ReleaseLocked(const Json& copy, const std::string& job_key) {
  Json current = copy;
  for (int attempt = 0;; ++attempt) {
    std::set<std::string> refs = References(current);
    if (!refs.erase(job_key)) return absl::OkStatus();
    // Only the reference goes: whether the copy goes too is Collect()'s decision.
    auto r = client_->Update(kube::resources::Secrets(), ns_, WithReferences(current, refs));
    if (r.ok()) {
      recent_[SourceUid(current)] = *r;
      Logger("imagepulljob")
          ->info("released pull secret copy {}/{} for {}", ns_, kube::Name(current), job_key);
      return absl::OkStatus();
    }
    if (kube::IsNotFound(r.status())) return absl::OkStatus();
    if (!kube::IsConflict(r.status()) || attempt >= kConflictRetries) return r.status();
    auto fresh = client_->Get(kube::resources::Secrets(), ns_, kube::Name(current));
    if (!fresh.ok()) return kube::IsNotFound(fresh.status()) ? absl::OkStatus() : fresh.status();
    current = std::move(*fresh);
  }
}

absl::StatusOr<Json> PullSecretCopies::EnsureLocked(const Json& source,
                                                    const std::string& job_key) {
  const std::string uid = kube::Uid(source);
  const Json* found = nullptr;
  std::vector<Json> copies = CopiesLocked();
  for (const Json& c : copies) {
    if (SourceUid(c) == uid) found = &c;
  }
  Json current = found != nullptr ? *found : Json(nullptr);
  for (int attempt = 0;; ++attempt) {
    if (current.is_null()) {
      Json copy = {{"apiVersion", "v1"},
                   {"kind", "Secret"},
                   {"metadata",
                    {{"generateName", kube::Name(source) + "-"},
                     {"namespace", ns_},
                     {"labels", {{kSourceSecretUidLabel, uid}}},
                     {"annotations",
                      {{kSourceSecretKeyAnnotation, kube::NamespacedName(source)},
                       {kReferencesAnnotation, job_key}}}}}};
      if (source.contains("type")) copy["type"] = source["type"];
      if (source.contains("data")) copy["data"] = source["data"];
      auto created = client_->Create(kube::resources::Secrets(), ns_, copy);
      if (!created.ok()) return created.status();
      recent_[uid] = *created;
      Logger("imagepulljob")
          ->info("copied pull secret {} to {}/{}", kube::NamespacedName(source), ns_,
                 kube::Name(*created));
      return *created;
    }
    std::set<std::string> refs = References(current);
    if (refs.count(job_key) && SameContent(current, source)) return current;
    refs.insert(job_key);
    Json updated = WithReferences(current, refs);
    if (source.contains("type")) updated["type"] = source["type"];
    updated["data"] = source.value("data", Json::object());
    auto r = client_->Update(kube::resources::Secrets(), ns_, updated);
    if (r.ok()) {
      recent_[uid] = *r;
      return *r;
    }
    if (kube::IsNotFound(r.status())) {
      current = nullptr;  // deleted under us: copy again
    } else if (kube::IsConflict(r.status()) && attempt < kConflictRetries) {
      auto fresh = client_->Get(kube::resources::Secrets(), ns_, kube::Name(current));
      if (fresh.ok()) {
        current = std::move(*fresh);
      } else if (kube::IsNotFound(fresh.status())) {
        current = nullptr;
      } else {
        return fresh.status();
      }
    } else {
      return r.status();
    }
    if (attempt >= kConflictRetries) return absl::AbortedError("pull secret copy keeps changing");
  }
}

void PullSecretCopies::WarnSkippedLocked(const Json& job, const Json& source) {
  const std::string type = source.value("type", "");
  if (!warned_.insert(absl::StrCat(kube::Uid(job), "/", kube::Name(source))).second) return;
  const std::string msg = absl::StrCat(
      "pull secret ", kube::Name(source), " has type ", type.empty() ? "Opaque" : type,
      ": only kubernetes.io/dockerconfigjson and kubernetes.io/dockercfg Secrets are copied for "
      "kruise-daemon, the image is pulled without it");
  Logger("imagepulljob")->warn("ImagePullJob {}: {}", kube::NamespacedName(job), msg);
  if (recorder_ != nullptr) {
    recorder_->Event(job, kube::EventType::kWarning, "PullSecretSkipped", msg);
  }
}

absl::StatusOr<std::vector<Json>> PullSecretCopies::Sync(const Json& job,
                                                         const std::vector<std::string>& names) {
  const std::string job_ns = kube::Namespace(job);
  std::vector<Json> out;
  if (job_ns == ns_) {
    for (const std::string& n : names) out.push_back({{"namespace", ns_}, {"name", n}});
    return out;
  }
  const std::string job_key = kube::NamespacedName(job);
  // The sources first (no lock held for these GETs). A missing one stays wanted (its copy is kept
  // for when it comes back); one of another type is not.
  std::vector<Json> sources;
  std::set<std::string> wanted;
  for (const std::string& n : names) {
    wanted.insert(absl::StrCat(job_ns, "/", n));
    auto source = client_->Get(kube::resources::Secrets(), job_ns, n);
    if (!source.ok()) {
      if (kube::IsNotFound(source.status())) continue;
      return source.status();
    }
    sources.push_back(std::move(*source));
  }

  absl::MutexLock lock(&mu_);
  std::vector<const Json*> usable;
  for (const Json& source : sources) {
    if (DockerType(source)) {
      usable.push_back(&source);
    } else {
      wanted.erase(kube::NamespacedName(source));
      WarnSkippedLocked(job, source);
    }
  }
  for (const Json& c : CopiesLocked()) {
    if (!References(c).count(job_key)) continue;
    if (wanted.count(kube::Annotation(c, kSourceSecretKeyAnnotation).value_or(""))) continue;
    if (absl::Status s = ReleaseLocked(c, job_key); !s.ok()) return s;
  }
  for (const Json* source : usable) {
    auto copy = EnsureLocked(*source, job_key);
    if (!copy.ok()) return copy.status();
    out.push_back({{"namespace", ns_}, {"name", kube::Name(*copy)}});
  }
  return out;
}

absl::Status PullSecretCopies::ReleaseAll(const Json& job) {
  if (kube::Namespace(job) == ns_) return absl::OkStatus();
  const std::string job_key = kube::NamespacedName(job);
  absl::MutexLock lock(&mu_);
  for (auto it = warned_.begin(); it != warned_.end();) {
    if (absl::StartsWith(*it, kube::Uid(job) + "/")) {
      warned_.erase(it++);
    } else {
      ++it;
    }
  }
  for (const Json& c : CopiesLocked()) {
    if (!References(c).count(job_key)) continue;
    if (absl::Status s = ReleaseLocked(c, job_key); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<kube::Result> PullSecretCopies::Collect(const std::string& name) {
  absl::MutexLock lock(&mu_);
  std::optional<Json> copy;
  for (Json& c : CopiesLocked()) {
    if (kube::Name(c) == name) copy = std::move(c);
  }
  if (!copy) return kube::Result{};
  // A job of the cache named in the references keeps it; its deletion event brings us back.
  for (const std::string& key : References(*copy)) {
    const kube::Request job = kube::Request::FromKey(key);
    if (jobs_->store().Get(job.ns, job.name) != nullptr) return kube::Result{};
  }
  // Never within the grace period: a daemon may be about to read it.
  if (auto created = kube::CreationTimestamp(*copy)) {
    const absl::Duration age = clock_->Now() - *created;
    if (age < opts_.grace) return kube::Result{std::min(opts_.grace, opts_.grace - age)};
  }
  // The API server's view decides: the copy as it is now, and every job that names its source.
  for (int attempt = 0;; ++attempt) {
    auto fresh = client_->Get(kube::resources::Secrets(), ns_, name);
    if (!fresh.ok()) {
      if (!kube::IsNotFound(fresh.status())) return fresh.status();
      recent_[SourceUid(*copy)] = nullptr;
      return kube::Result{};
    }
    const std::string uid = SourceUid(*fresh);
    if (uid.empty()) return kube::Result{};  // not a copy of ours (any more)
    std::set<std::string> users;
    bool terminating = false;
    if (DockerType(*fresh)) {
      const kube::Request source =
          kube::Request::FromKey(kube::Annotation(*fresh, kSourceSecretKeyAnnotation).value_or(""));
      if (!source.ns.empty() && !source.name.empty() && source.ns != ns_) {
        auto jobs = client_->List(opts_.image_pull_jobs, source.ns, {});
        if (!jobs.ok()) return jobs.status();
        for (const Json& job : jobs->items) {
          if (!NamesSecret(job, source.name)) continue;
          if (kube::IsBeingDeleted(job)) {
            terminating = true;  // keeps it until gone; its deletion event brings us back
          } else {
            users.insert(kube::NamespacedName(job));
          }
        }
      }
    }
    const std::set<std::string> refs = References(*fresh);
    absl::Status s;
    if (!users.empty() || terminating) {
      std::set<std::string> want = refs;
      want.insert(users.begin(), users.end());
      if (want == refs) return kube::Result{};
      auto r = client_->Update(kube::resources::Secrets(), ns_, WithReferences(*fresh, want));
      if (r.ok()) {
        recent_[uid] = *r;
        Logger("imagepulljob")
            ->info("kept pull secret copy {}/{}: referenced again by {}", ns_, name,
                   absl::StrJoin(users, ","));
        return kube::Result{};
      }
      s = r.status();
    } else {
      kube::DeleteOptions del;
      del.precondition_uid = kube::Uid(*fresh);
      del.precondition_resource_version = kube::ResourceVersion(*fresh);
      s = client_->Delete(kube::resources::Secrets(), ns_, name, del);
      if (s.ok() || kube::IsNotFound(s)) {
        recent_[uid] = nullptr;
        Logger("imagepulljob")
            ->info("deleted pull secret copy {}/{}: no ImagePullJob names {}", ns_, name,
                   kube::Annotation(*fresh, kSourceSecretKeyAnnotation).value_or("its source"));
        return kube::Result{};
      }
    }
    // Changed since the GET (a job joined): decide again.
    if (!kube::IsConflict(s) || attempt >= kConflictRetries) return s;
  }
}

std::vector<kube::Request> PullSecretCopies::CopiesUsableBy(const Json& job) const {
  std::vector<kube::Request> out;
  const std::string job_key = kube::NamespacedName(job);
  const std::string job_ns = kube::Namespace(job);
  for (const auto& c : copies_->store().List()) {
    if (SourceUid(*c).empty()) continue;
    const kube::Request source =
        kube::Request::FromKey(kube::Annotation(*c, kSourceSecretKeyAnnotation).value_or(""));
    if (References(*c).count(job_key) || (source.ns == job_ns && NamesSecret(job, source.name))) {
      out.push_back({ns_, kube::Name(*c)});
    }
  }
  return out;
}

}  // namespace kruise::manager
