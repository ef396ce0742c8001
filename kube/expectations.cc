#include "kube/expectations.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "common/logging.h"
#include "kube/store.h"

namespace kruise::kube {
namespace {

int64_t ParseRv(const std::string& s) {
  int64_t v = 0;
  return absl::SimpleAtoi(s, &v) ? v : 0;
}

}  // namespace

ResourceVersionExpectations::ResourceVersionExpectations(Clock* clock, absl::Duration timeout)
    : clock_(clock), timeout_(timeout) {}

void ResourceVersionExpectations::Expect(const std::string& key,
                                         const std::string& resource_version) {
  const int64_t rv = ParseRv(resource_version);
  absl::MutexLock lock(&mu_);
  Entry& e = entries_[key];
  if (rv > e.expected) {
    e.expected = rv;
    e.since = clock_->Now();
  }
}

void ResourceVersionExpectations::Observe(const std::string& key,
                                          const std::string& resource_version) {
  const int64_t rv = ParseRv(resource_version);
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it != entries_.end()) it->second.observed = std::max(it->second.observed, rv);
}

namespace {
std::string RvOf(const Json& obj) {
  if (obj.is_object() && obj.contains("metadata") && obj["metadata"].is_object()) {
    return obj["metadata"].value("resourceVersion", "");
  }
  return "";
}
}  // namespace

void ResourceVersionExpectations::Observe(const Json& obj) { Observe(StoreKey(obj), RvOf(obj)); }

bool ResourceVersionExpectations::SatisfiedByCache(const Json& cached) {
  const std::string key = StoreKey(cached);
  Observe(key, RvOf(cached));
  return Satisfied(key);
}

bool ResourceVersionExpectations::Satisfied(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return true;
  if (it->second.observed >= it->second.expected) {
    entries_.erase(it);
    return true;
  }
  if (clock_->Now() - it->second.since >= timeout_) {
    Logger("expectations")
        ->warn("resourceVersion expectation for {} (rv {}) timed out after {}", key,
               it->second.expected, absl::FormatDuration(timeout_));
    entries_.erase(it);
    return true;
  }
  return false;
}

void ResourceVersionExpectations::Delete(const std::string& key) {
  absl::MutexLock lock(&mu_);
  entries_.erase(key);
}

size_t ResourceVersionExpectations::size() const {
  absl::MutexLock lock(&mu_);
  return entries_.size();
}

ScaleExpectations::ScaleExpectations(Clock* clock, absl::Duration timeout)
    : clock_(clock), timeout_(timeout) {}

ScaleExpectations::Entry& ScaleExpectations::EntryLocked(const std::string& key) {
  auto [it, inserted] = entries_.try_emplace(key);
  if (inserted) it->second.since = clock_->Now();
  return it->second;
}

void ScaleExpectations::ExpectCreations(const std::string& key, int n) {
  absl::MutexLock lock(&mu_);
  Entry& e = EntryLocked(key);
  e.creations += n;
  e.since = clock_->Now();
}

void ScaleExpectations::ExpectDeletions(const std::string& key, int n) {
  absl::MutexLock lock(&mu_);
  Entry& e = EntryLocked(key);
  e.deletions += n;
  e.since = clock_->Now();
}

void ScaleExpectations::CreationObserved(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it != entries_.end() && it->second.creations > 0) --it->second.creations;
}

void ScaleExpectations::DeletionObserved(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it != entries_.end() && it->second.deletions > 0) --it->second.deletions;
}

void ScaleExpectations::Expect(const std::string& key, Action action, const std::string& name) {
  absl::MutexLock lock(&mu_);
  Entry& e = EntryLocked(key);
  (action == Action::kCreate ? e.create_names : e.delete_names).insert(name);
  e.since = clock_->Now();
}

void ScaleExpectations::Observe(const std::string& key, Action action, const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  (action == Action::kCreate ? it->second.create_names : it->second.delete_names).erase(name);
}

bool ScaleExpectations::Satisfied(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return true;
  const Entry& e = it->second;
  if (e.creations <= 0 && e.deletions <= 0 && e.create_names.empty() && e.delete_names.empty()) {
    entries_.erase(it);
    return true;
  }
  if (clock_->Now() - e.since >= timeout_) {
    Logger("expectations")
        ->warn("scale expectation for {} timed out after {} ({} creations, {} deletions pending)",
               key, absl::FormatDuration(timeout_), e.creations + e.create_names.size(),
               e.deletions + e.delete_names.size());
    entries_.erase(it);
    return true;
  }
  return false;
}

void ScaleExpectations::Delete(const std::string& key) {
  absl::MutexLock lock(&mu_);
  entries_.erase(key);
}

}  // namespace kruise::kube
