#pragma once

// Helpers shared by the controller-runtime tests.

#include <functional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/store.h"

namespace kruise::kube::testing_util {

// Waits (real time, bounded) until `pred` holds, re-checking every millisecond; `tick` (optional)
// runs before each check (e.g. to advance a FakeClock past a backoff).
inline bool Eventually(const std::function<bool()>& pred,
                       absl::Duration timeout = absl::Seconds(10),
                       const std::function<void()>& tick = nullptr) {
  absl::Mutex mu;
  absl::MutexLock lock(&mu);
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (tick) tick();
    if (pred()) return true;
    if (absl::Now() >= deadline) return false;
    static const bool kNever = false;
    mu.AwaitWithTimeout(absl::Condition(&kNever), absl::Milliseconds(1));
  }
}

inline const Resource& PodResource() {
  static const Resource* r = new Resource{"", "v1", "pods", "Pod", true};
  return *r;
}

inline Json MakePod(const std::string& ns, const std::string& name, const std::string& node = "",
                    const std::string& owner_uid = "") {
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", name}, {"namespace", ns}, {"labels", {{"app", "demo"}}}}},
              {"spec", {{"containers", Json::array({{{"name", "c"}, {"image", "busybox"}}})}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  if (!owner_uid.empty()) {
    pod["metadata"]["ownerReferences"] = Json::array({{{"apiVersion", "apps/v1"},
                                                       {"kind", "ReplicaSet"},
                                                       {"name", "rs"},
                                                       {"uid", owner_uid},
                                                       {"controller", true}}});
  }
  pod["metadata"]["managedFields"] =
      Json::array({{{"manager", "kubectl"}, {"operation", "Update"}, {"fieldsV1", {{"f:x", {}}}}}});
  return pod;
}

// Records handler calls as strings ("add ns/name", "update ns/name", "delete ns/name",
// "delete-unknown ns/name").
class EventLog {
 public:
  ResourceEventHandler Handler() {
    ResourceEventHandler h;
    h.on_add = [this](const Json& o) { Push("add " + StoreKey(o), o); };
    h.on_update = [this](const Json&, const Json& o) { Push("update " + StoreKey(o), o); };
    h.on_delete = [this](const Json& o, bool unknown) {
      Push((unknown ? "delete-unknown " : "delete ") + StoreKey(o), o);
    };
    return h;
  }
  std::vector<std::string> entries() const {
    absl::MutexLock lock(&mu_);
    return entries_;
  }
  std::vector<Json> objects() const {
    absl::MutexLock lock(&mu_);
    return objects_;
  }
  size_t size() const {
    absl::MutexLock lock(&mu_);
    return entries_.size();
  }
  bool WaitForSize(size_t n, absl::Duration timeout = absl::Seconds(10)) const {
    absl::MutexLock lock(&mu_);
    auto cond = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return entries_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&cond), timeout);
  }

 private:
  void Push(std::string s, const Json& o) {
    absl::MutexLock lock(&mu_);
    entries_.push_back(std::move(s));
    objects_.push_back(o);
  }
  mutable absl::Mutex mu_;
  std::vector<std::string> entries_ ABSL_GUARDED_BY(mu_);
  std::vector<Json> objects_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kruise::kube::testing_util
