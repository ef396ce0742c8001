#pragma once

// KubeClient: the Kubernetes REST API as our controllers and agents use it. Objects are raw JSON
// (nlohmann::json) so that no write drops a field we do not model: updates start from the server's
// object, or we patch.
//
// Errors: every method returns a status whose code is mapped from the HTTP status / Kubernetes
// `Status` object (see errors.h), message "<Reason>: <message>", and the Kubernetes reason kept as
// a payload. Transient failures of idempotent requests (GET/LIST, 5xx, 429 with Retry-After,
// connection errors) are retried with backoff inside the client; non-idempotent ones are not.
//
// Thread-safety: implementations are safe for concurrent use from many threads. Every call blocks
// until the server answers or the request's deadline passes.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace kruise::kube {

using Json = nlohmann::json;

// A REST resource: group "" is the core API (/api/v1), anything else /apis/<group>/<version>.
struct Resource {
  std::string group;     // "" | "apps.kruise.io" | "coordination.k8s.io" ...
  std::string version;   // "v1", "v1alpha1" ...
  std::string resource;  // plural, lower case: "pods", "nodeimages"
  std::string kind;      // "Pod", "NodeImage"
  bool namespaced = true;

  std::string ApiVersion() const { return group.empty() ? version : group + "/" + version; }
};

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int64_t limit = 0;             // 0: no limit (server default)
  std::string continue_token;    // from a previous page
  std::string resource_version;  // "" (most recent), "0" (any, from the cache), or a specific one
  std::string resource_version_match;  // "", "NotOlderThan", "Exact"
  // Watch only.
  int64_t timeout_seconds = 0;  // server-side watch timeout; 0: server default
  bool allow_watch_bookmarks = false;
};

struct ListResult {
  Json items = Json::array();
  std::string resource_version;  // of the list; start a watch from here
  std::string continue_token;    // non-empty when more pages remain
  int64_t remaining_item_count = -1;  // -1 when the server did not say
};

enum class PatchType {
  kMerge,           // application/merge-patch+json
  kJson,            // application/json-patch+json
  kStrategicMerge,  // application/strategic-merge-patch+json (built-in kinds only)
};

struct DeleteOptions {
  std::optional<std::string> precondition_uid;
  std::optional<std::string> precondition_resource_version;
  std::string propagation_policy;  // "", "Orphan", "Background", "Foreground"
  std::optional<int64_t> grace_period_seconds;
};

struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted, kBookmark };
  Type type;
  Json object;
};

// Called for every event of a watch, in order, on the watching thread. Return false to stop.
using WatchHandler = std::function<bool(WatchEvent&&)>;

// Lets another thread stop a blocking Watch. Cancel() is safe from any thread.
class WatchCanceller {
 public:
  void Cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }

 private:
  std::atomic<bool> cancelled_{false};
};

class KubeClient {
 public:
  virtual ~KubeClient() = default;

  // `ns` is ignored for cluster-scoped resources (pass ""). For namespaced resources an empty `ns`
  // in List/Watch means all namespaces.
  virtual absl::StatusOr<Json> Get(const Resource& r, const std::string& ns,
                                   const std::string& name) = 0;
  virtual absl::StatusOr<ListResult> List(const Resource& r, const std::string& ns,
                                          const ListOptions& opts) = 0;
  // Creates `obj` (metadata.name or metadata.generateName set). Returns the stored object.
  virtual absl::StatusOr<Json> Create(const Resource& r, const std::string& ns, const Json& obj) = 0;
  // PUT of the whole object (metadata.resourceVersion is the optimistic-concurrency check: a stale
  // one fails with kAborted/Conflict). `subresource` is "" or "status".
  virtual absl::StatusOr<Json> Update(const Resource& r, const std::string& ns, const Json& obj,
                                      const std::string& subresource = "") = 0;
  virtual absl::StatusOr<Json> Patch(const Resource& r, const std::string& ns,
                                     const std::string& name, PatchType type, const Json& patch,
                                     const std::string& subresource = "") = 0;
  virtual absl::Status Delete(const Resource& r, const std::string& ns, const std::string& name,
                              const DeleteOptions& opts = {}) = 0;

  // Streams events from opts.resource_version until the server ends the watch (returns OK), the
  // handler returns false or `canceller` is cancelled (OK), or an error (including an in-stream
  // ERROR event: 410 Gone maps to kOutOfRange; see errors.h). Blocks the calling thread.
  virtual absl::Status Watch(const Resource& r, const std::string& ns, const ListOptions& opts,
                             const WatchHandler& handler, WatchCanceller* canceller) = 0;
};

// Whether the API server serves `r` (its CRD is installed): a LIST of one item. Only a 404 counts
// as "not served"; any other failure counts as served, so that a passing API-server error does not
// switch a controller or webhook off for the life of the process (its informer retries).
inline bool Served(KubeClient* client, const Resource& r) {
  ListOptions probe;
  probe.limit = 1;
  auto listed = client->List(r, "", probe);
  return listed.ok() || listed.status().code() != absl::StatusCode::kNotFound;
}

}  // namespace kruise::kube
