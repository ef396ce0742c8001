#pragma once

// FakeApiServer: an in-process Kubernetes API server for tests and benchmarks. It speaks the real
// REST protocol over HTTP (or HTTPS) on 127.0.0.1 and models the semantics our clients depend on:
//
//   * URL forms /api/v1/RES, /api/v1/namespaces/NS/RES[/NAME[/status]], /apis/G/V/..., lists across
//     all namespaces, minimal discovery (/api, /apis, /api/v1, /apis/G, /apis/G/V).
//   * One global, monotonically increasing resourceVersion (decimal string). Create assigns uid,
//     creationTimestamp, resourceVersion, generation=1; generateName appends a random 5-character
//     suffix. Errors are Kubernetes `Status` bodies with the real codes and reasons (404 NotFound,
//     409 AlreadyExists / Conflict, 410 Expired, 422 Invalid, 401 Unauthorized, 415, 400
//     BadRequest).
//   * PUT: a non-empty metadata.resourceVersion must equal the stored one (else 409 Conflict); an
//     empty one is an unconditional update. A main-resource PUT keeps the stored status when the
//     resource has a status subresource; PUT .../status changes only status. generation increases
//     only when something outside metadata and status changed. uid and creationTimestamp are
//     immutable. A no-op update changes nothing (no new resourceVersion, no event).
//     HTTP create of a resource with a status subresource drops `status` (as the real server does);
//     Seed() keeps it.
//   * PATCH: merge-patch (RFC 7386), json-patch (RFC 6902; a failed `test` or a bad path is 422
//     Invalid), strategic-merge-patch (handled as a merge patch: lists are replaced wholesale and
//     `$patch` directives are not interpreted). A patch that sets metadata.resourceVersion is an
//     optimistic-concurrency check like PUT. apply-patch is 415. Also on /status.
//   * DELETE: DeleteOptions preconditions (uid, resourceVersion) → 409 Conflict on mismatch. With
//     metadata.finalizers the object gets deletionTimestamp (+deletionGracePeriodSeconds 0) and
//     stays (MODIFIED event) until an update empties its finalizers (then DELETED). Otherwise it is
//     removed at once (DELETED event carrying the final object at a new resourceVersion). The
//     response is the object (200). propagationPolicy Background/Foreground also deletes dependents
//     whose ownerReferences name the deleted uid (recursively); Orphan or none leaves them. Pods
//     are deleted immediately (no kubelet grace period).
//   * LIST: labelSelector (=, ==, !=, in, notin, exists, !key), fieldSelector (any dotted path with
//     =, ==, !=; metadata.name/namespace, spec.nodeName and status.phase are indexed), limit +
//     continue (opaque token holding the list resourceVersion and the last key; items ordered by
//     namespace/name; a page continued after compaction of its resourceVersion is 410 Expired;
//     later pages show the current data, not a snapshot), remainingItemCount (only without
//     selectors, as the real server). The list resourceVersion is the current global one.
//   * WATCH (?watch=1|true): chunked stream of newline-terminated {"type","object"} JSON lines.
//   With
//     a resourceVersion, every event after it is replayed from the event log in order, then live
//     events follow; a resourceVersion older than the compaction point yields a single ERROR event
//     (Status 410 Expired) and the stream ends. "" or "0" → synthetic ADDED events for the current
//     objects, then live events. Selectors filter events by the event's object (an object that
//     stops matching is simply no longer reported; no synthetic DELETED). allowWatchBookmarks →
//     BOOKMARK events every bookmark interval and on EmitBookmarkNow(). timeoutSeconds ends the
//     stream cleanly. A watcher that falls behind the compaction point gets the 410 ERROR.
//     Watches on a dead connection are noticed at their next write (event, bookmark or timeout).
//   * Fault injection and observation: Compact/CompactNow, DropWatches, SetLatency, FailNext,
//     RequireToken, request log and counters.
//
// Time (creationTimestamp, deletionTimestamp, bookmark interval, watch timeouts, latency) comes
// from the Clock given in the options (real clock by default), so FakeClock drives it in tests.
//
// Thread-safety: every public method is safe to call from any thread while the server runs.
// Objects are JSON (nlohmann::json); the store keeps each object serialized (compact JSON), so 30k
// ~5 KiB pods take ~200 MB and a full list is a concatenation, not a re-serialization.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "nlohmann/json.hpp"

namespace kruise::testing {

// A REST resource the server serves. Several versions of one group/resource share one storage
// (like CRD versions without conversion: only apiVersion differs in what is served).
struct FakeResource {
  std::string group;     // "" for the core API
  std::string version;   // "v1", "v1alpha1", ...
  std::string resource;  // plural, lower case
  std::string kind;      // "Pod"
  bool namespaced = true;
  bool has_status_subresource = false;
};

struct FakeApiServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port (see port()/base_url() after Start)
  // HTTPS when both are set (PEM files).
  std::string cert_file;
  std::string key_file;
  // Time source; nullptr means Clock::Real(). Not owned; must outlive the server.
  Clock* clock = nullptr;
  // BOOKMARK period for watches that allow bookmarks.
  absl::Duration bookmark_interval = absl::Seconds(60);
  // Event-log capacity: when exceeded, the oldest events are dropped and the compaction point
  // moves up to the newest dropped event (watchers/continues behind it get 410).
  size_t max_event_log = 500'000;
  // Pre-register the built-in resources (core, coordination, apiextensions, admissionregistration,
  // apps.kruise.io NodeImage/ImagePullJob/ContainerRecreateRequest, ...).
  bool register_builtin_resources = true;
};

// One injected failure: the next `count` requests whose method matches (empty: any) and whose
// path-with-query contains `path_substring` (empty: any) get `http_code` with `raw_body` (default:
// a Status object whose reason matches the code) and, if set, a Retry-After header.
struct FakeFailure {
  std::string method;
  std::string path_substring;
  int http_code = 500;
  int count = 1;
  std::optional<int> retry_after_seconds;
  std::optional<std::string> raw_body;
};

struct RecordedRequest {
  std::string method;
  std::string path;   // without the query
  std::string query;  // "a=1&b=2" (as parsed; keys sorted) or ""
  int status = 0;     // HTTP status sent (200 for watches that started)
};

class FakeApiServer {
 public:
  using Json = nlohmann::json;

  explicit FakeApiServer(FakeApiServerOptions options = {});
  ~FakeApiServer();  // Stop()s.
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  // Binds and starts serving on background threads. Fails if already started or bind fails.
  absl::Status Start();
  // Ends open watch streams (cleanly), stops accepting and joins all server threads. Idempotent.
  void Stop();
  int port() const;
  // "http://127.0.0.1:PORT" (https when TLS is on). Valid after Start().
  std::string base_url() const;

  // Registers (or replaces) a served group/version/resource. Safe at any time.
  void RegisterResource(const FakeResource& r);

  // ---- Direct store access (no HTTP, no auth, no faults) ----
  // `resource` names a registered resource as "pods" (core) or "<plural>.<group>", e.g.
  // "nodeimages.apps.kruise.io", "leases.coordination.k8s.io".
  //
  // Creates `obj` like an HTTP create would (uid, timestamps, resourceVersion, ADDED event) but
  // keeps `status`. The namespace comes from obj.metadata.namespace (default "default" for
  // namespaced resources). Returns the stored object.
  absl::StatusOr<Json> Seed(const std::string& resource, const Json& obj);
  absl::StatusOr<Json> Get(const std::string& resource, const std::string& ns,
                           const std::string& name) const;
  // Replaces the stored object (matched by metadata.namespace/name) without checks except
  // existence; assigns a new resourceVersion and emits MODIFIED. Returns the stored object.
  absl::StatusOr<Json> Put(const std::string& resource, const Json& obj);
  // Removes immediately, ignoring finalizers (DELETED event).
  absl::Status Remove(const std::string& resource, const std::string& ns, const std::string& name);
  // Objects ordered by namespace/name; `ns` "" means all namespaces.
  std::vector<Json> List(const std::string& resource, const std::string& ns = "") const;
  int64_t CurrentResourceVersion() const;

  // ---- Fault injection ----
  // Sets the compaction point: resourceVersions below `rv` can no longer be watched from or
  // continued (410). Never moves backwards.
  void Compact(int64_t rv);
  void CompactNow();  // Compact(CurrentResourceVersion())
  int64_t CompactedResourceVersion() const;
  // Closes every open watch stream abruptly (no terminating chunk). With `truncate_mid_event`,
  // each stream first gets the first half of a (fake) event line, so the client sees a truncated
  // JSON line. Returns the number of streams that were open.
  int DropWatches(bool truncate_mid_event = false);
  // Delays every request (before handling) by `d` on the server's clock.
  void SetLatency(absl::Duration d);
  // Delays requests whose method matches (empty: any) and whose path-with-query contains
  // `path_substring` by `d` (instead of SetLatency's); zero removes the rule. Rules are matched
  // in the order they were first set.
  void SetPathLatency(const std::string& method, const std::string& path_substring,
                      absl::Duration d);
  void FailNext(const FakeFailure& failure);
  // Requests must carry "Authorization: Bearer <token>" (401 otherwise). Empty disables.
  void RequireToken(const std::string& token);
  void SetBookmarkInterval(absl::Duration d);
  // Every open watch that allows bookmarks sends a BOOKMARK now.
  void EmitBookmarkNow();

  // ---- Observation ----
  // A request is recorded before it takes effect (whatever sees its effect sees it here too);
  // its status is 0 until the reply is made.
  std::vector<RecordedRequest> Requests() const;
  void ClearRequests();
  // Requests whose method matches (empty: any) and whose path contains `path_substring`.
  int64_t RequestCount(const std::string& method, const std::string& path_substring = "") const;
  int OpenWatches() const;
  // Number of watch streams ever started.
  int64_t WatchesStarted() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Builds a realistic ~5 KiB pod (labels, ownerReferences, two containers with resources,
// managedFields, status conditions) for seeding benchmarks.
nlohmann::json MakeRealisticPod(const std::string& ns, const std::string& name,
                                const std::string& node_name, int index);
nlohmann::json MakeRealisticNode(const std::string& name, int index);

}  // namespace kruise::testing
