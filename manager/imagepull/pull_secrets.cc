#include "manager/imagepull/pull_secrets.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

bool SameContent(const Json& copy, const Json& source) {
  return copy.value("type", "") == source.value("type", "") &&
         copy.value("data", Json::object()) == source.value("data", Json::object());
}

}  // namespace

PullSecretCopies::PullSecretCopies(kube::KubeClient* client, kube::Informer* copies,
                                   std::string daemon_namespace)
    : client_(client), copies_(copies), ns_(std::move(daemon_namespace)) {}

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
    absl::Status s;
    if (refs.empty()) {
      kube::DeleteOptions del;
      del.precondition_resource_version = kube::ResourceVersion(current);
      s = client_->Delete(kube::resources::Secrets(), ns_, kube::Name(current), del);
      if (s.ok() || kube::IsNotFound(s)) {
        recent_[SourceUid(current)] = nullptr;
        Logger("imagepulljob")
            ->info("deleted pull secret copy {}/{}: no job refers to it", ns_, kube::Name(current));
        return absl::OkStatus();
      }
    } else {
      auto r = client_->Update(kube::resources::Secrets(), ns_, WithReferences(current, refs));
      if (r.ok()) {
        recent_[SourceUid(current)] = *r;
        return absl::OkStatus();
      }
      if (kube::IsNotFound(r.status())) return absl::OkStatus();
      s = r.status();
    }
    if (!kube::IsConflict(s) || attempt >= kConflictRetries) return s;
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

absl::StatusOr<std::vector<Json>> PullSecretCopies::Sync(const Json& job,
                                                         const std::vector<std::string>& names) {
  const std::string job_ns = kube::Namespace(job);
  std::vector<Json> out;
  if (job_ns == ns_) {
    for (const std::string& n : names) out.push_back({{"namespace", ns_}, {"name", n}});
    return out;
  }
  const std::string job_key = kube::NamespacedName(job);
  std::set<std::string> wanted;
  for (const std::string& n : names) wanted.insert(absl::StrCat(job_ns, "/", n));

  absl::MutexLock lock(&mu_);
  for (const Json& c : CopiesLocked()) {
    if (!References(c).count(job_key)) continue;
    if (wanted.count(kube::Annotation(c, kSourceSecretKeyAnnotation).value_or(""))) continue;
    if (absl::Status s = ReleaseLocked(c, job_key); !s.ok()) return s;
  }
  for (const std::string& n : names) {
    auto source = client_->Get(kube::resources::Secrets(), job_ns, n);
    if (!source.ok()) {
      if (kube::IsNotFound(source.status())) continue;
      return source.status();
    }
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
  for (const Json& c : CopiesLocked()) {
    if (!References(c).count(job_key)) continue;
    if (absl::Status s = ReleaseLocked(c, job_key); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace kruise::manager
