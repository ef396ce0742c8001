#pragma once

// MemoryKubeClient: an in-memory KubeClient for fast, deterministic unit tests of the controller
// runtime. It models what the runtime depends on:
//   - a global, monotonically increasing resourceVersion; every write bumps it;
//   - optimistic concurrency: Update/Patch/Delete with a stale resourceVersion fail with kAborted
//     (Conflict), Create of an existing name with kAlreadyExists;
//   - paginated List (limit/continue) returning the list's resourceVersion;
//   - Watch from a resourceVersion, replaying the event log after it; versions older than the
//     compaction point (Compact()) fail with kOutOfRange (410 Expired), as etcd compaction does;
//     bookmarks on demand (SendBookmark) to watches that asked for them;
//   - simple equality label selectors ("a=b,c=d") and field selectors ("spec.nodeName=x");
//   - error injection per verb, call counting, closing every open watch (a server timeout).
// Not modelled: generation bumps beyond creation, strategic merge (treated as a merge patch),
// admission, finalizers, graceful deletion.
//
// Thread-safety: safe from any thread. Watch blocks; it polls its canceller every few ms.

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "kube/client.h"

namespace kruise::testing {

class MemoryKubeClient : public kube::KubeClient {
 public:
  // `clock` (for creationTimestamp) must outlive the client.
  explicit MemoryKubeClient(Clock* clock = Clock::Real());
  ~MemoryKubeClient() override;

  // kube::KubeClient
  absl::StatusOr<kube::Json> Get(const kube::Resource& r, const std::string& ns,
                                 const std::string& name) override;
  absl::StatusOr<kube::ListResult> List(const kube::Resource& r, const std::string& ns,
                                        const kube::ListOptions& opts) override;
  absl::StatusOr<kube::Json> Create(const kube::Resource& r, const std::string& ns,
                                    const kube::Json& obj) override;
  absl::StatusOr<kube::Json> Update(const kube::Resource& r, const std::string& ns,
                                    const kube::Json& obj,
                                    const std::string& subresource = "") override;
  absl::StatusOr<kube::Json> Patch(const kube::Resource& r, const std::string& ns,
                                   const std::string& name, kube::PatchType type,
                                   const kube::Json& patch,
                                   const std::string& subresource = "") override;
  absl::Status Delete(const kube::Resource& r, const std::string& ns, const std::string& name,
                      const kube::DeleteOptions& opts = {}) override;
  absl::Status Watch(const kube::Resource& r, const std::string& ns, const kube::ListOptions& opts,
                     const kube::WatchHandler& handler, kube::WatchCanceller* canceller) override;

  // --- Test controls ---
  // Forgets the event log up to the current resourceVersion: watches from older versions (and
  // continue tokens issued before) now fail with kOutOfRange.
  void Compact();
  // Ends every open watch cleanly (as a server-side timeout does).
  void CloseWatches();
  // Makes every open watch (that allows bookmarks) receive a BOOKMARK at the current version.
  void SendBookmark();
  // The next `times` calls of `verb` ("get", "list", "create", "update", "patch", "delete",
  // "watch") fail with `status` (times < 0: until ClearErrors()).
  void InjectError(const std::string& verb, absl::Status status, int times = 1);
  void ClearErrors();
  // Makes an open watch fail with `status` (e.g. kOutOfRange) instead of ending cleanly.
  void BreakWatches(absl::Status status);

  int CallCount(const std::string& verb) const;
  int OpenWatches() const;
  // Blocks (real time) until at least `n` watches are open; false on timeout.
  bool WaitForWatches(int n, absl::Duration timeout) const;
  int64_t CurrentResourceVersion() const;
  // Every stored object of `r` (all namespaces), sorted by key.
  std::vector<kube::Json> Objects(const kube::Resource& r) const;

 private:
  struct Event {
    int64_t rv;
    std::string resource_key;
    kube::WatchEvent::Type type;
    kube::Json object;
  };
  using ObjectMap = std::map<std::string, kube::Json>;  // "ns/name" -> object

  static std::string ResourceKey(const kube::Resource& r);
  absl::Status TakeInjectedLocked(const std::string& verb) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecordLocked(const kube::Resource& r, kube::WatchEvent::Type type, const kube::Json& obj)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<kube::Json> StoreUpdateLocked(const kube::Resource& r, const std::string& key,
                                               kube::Json obj, const std::string& expected_rv)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Clock* const clock_;
  mutable absl::Mutex mu_;
  int64_t rv_ ABSL_GUARDED_BY(mu_) = 1000;
  int64_t compacted_rv_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t uid_seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, ObjectMap> objects_ ABSL_GUARDED_BY(mu_);
  std::deque<Event> log_ ABSL_GUARDED_BY(mu_);
  uint64_t close_gen_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status break_status_ ABSL_GUARDED_BY(mu_);
  int open_watches_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::deque<std::pair<absl::Status, int>>> injected_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> calls_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kruise::testing
