#pragma once

// Expectations: remember the writes a controller made so it does not act again on an informer
// cache that has not caught up with them yet.
//
//   ResourceVersionExpectations: "I updated object X to resourceVersion R": Satisfied(X) once the
//     cache has observed X at R or newer (resourceVersions compared as integers, as OpenKruise
//     does).
//   ScaleExpectations: "I created/deleted N objects (or these named objects) for controller key K":
//     Satisfied(K) once every creation/deletion was observed.
// Both give up after `timeout` (default 5 min, OpenKruise's --expectation-timeout) measured on the
// injected Clock: an expectation never observed (lost watch event, failed write) is then treated as
// satisfied and cleared, so a controller never stalls forever.
//
// Thread-safety: all methods are safe from any thread; nothing blocks.

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "kube/client.h"

namespace kruise::kube {

class ResourceVersionExpectations {
 public:
  explicit ResourceVersionExpectations(Clock* clock, absl::Duration timeout = absl::Minutes(5));

  // Expects `key` at `resource_version` or newer (keeps the highest expectation).
  void Expect(const std::string& key, const std::string& resource_version);
  // Records that the cache saw `key` at `resource_version` (call from informer handlers).
  void Observe(const std::string& key, const std::string& resource_version);
  // Observe(StoreKey(obj), obj.metadata.resourceVersion).
  void Observe(const Json& obj);
  // True when nothing is expected, the expectation was observed, or it timed out (it is then
  // cleared). Clears satisfied expectations.
  bool Satisfied(const std::string& key);
  // Preferred form: `cached` is the object as the informer cache has it now (its
  // resourceVersion counts as observed), so an event delivered before Expect() is not missed.
  bool SatisfiedByCache(const Json& cached);
  void Delete(const std::string& key);
  size_t size() const;

 private:
  struct Entry {
    int64_t expected = 0;
    int64_t observed = 0;
    absl::Time since;
  };
  Clock* const clock_;
  const absl::Duration timeout_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

class ScaleExpectations {
 public:
  enum class Action { kCreate, kDelete };
  explicit ScaleExpectations(Clock* clock, absl::Duration timeout = absl::Minutes(5));

  // Counted expectations: N more creations/deletions for `key`.
  void ExpectCreations(const std::string& key, int n);
  void ExpectDeletions(const std::string& key, int n);
  void CreationObserved(const std::string& key);
  void DeletionObserved(const std::string& key);
  // Named expectations: the object `name` will be created/deleted for `key`. Observing the same
  // name twice is harmless.
  void Expect(const std::string& key, Action action, const std::string& name);
  void Observe(const std::string& key, Action action, const std::string& name);

  bool Satisfied(const std::string& key);
  void Delete(const std::string& key);

 private:
  struct Entry {
    int creations = 0;
    int deletions = 0;
    absl::flat_hash_set<std::string> create_names;
    absl::flat_hash_set<std::string> delete_names;
    absl::Time since;
  };
  Entry& EntryLocked(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Clock* const clock_;
  const absl::Duration timeout_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kruise::kube
