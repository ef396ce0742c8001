#pragma once

// Helpers over raw Kubernetes objects (nlohmann::json): safe lookups that never throw, typed
// metadata accessors, label selectors, IntOrString scaling and metav1 time formats.
//
// Every accessor tolerates any JSON: a missing or mistyped field reads as absent (empty string,
// empty map, 0, nullopt), never as an exception. All functions are thread-compatible (no state).

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "kube/client.h"

namespace kruise::kube {

// ---- Safe lookups
// --------------------------------------------------------------------------------

// Follows object keys; nullptr when a key is missing or a value on the way is not an object.
const Json* FindPath(const Json& j, std::initializer_list<absl::string_view> path);
// RFC 6901 JSON pointer ("/spec/containers/0/image"); nullptr when absent or the pointer is
// malformed.
const Json* FindPointer(const Json& j, const std::string& pointer);
// A copy without nulls, empty objects and empty arrays, recursively: what Kubernetes' semantic
// equality (nil == empty) and Go's omitempty make of a JSON value. For immutability checks.
Json SemanticNormalized(const Json& v);

std::optional<std::string> GetString(const Json& j, std::initializer_list<absl::string_view> path);
std::optional<int64_t> GetInt(const Json& j, std::initializer_list<absl::string_view> path);
std::optional<bool> GetBool(const Json& j, std::initializer_list<absl::string_view> path);
// The member `key` of `obj`; nullptr when `obj` is not an object or the member is absent or null.
const Json* Field(const Json& obj, const char* key);
// The integer member `key` of `obj`, or `def` when it is absent, null or not an integer.
int64_t IntField(const Json& obj, const char* key, int64_t def);

// ---- Metadata
// ------------------------------------------------------------------------------------

std::string Name(const Json& obj);
std::string Namespace(const Json& obj);
std::string Uid(const Json& obj);
std::string ResourceVersion(const Json& obj);
int64_t Generation(const Json& obj);  // 0 when absent
// "namespace/name", or "name" for cluster-scoped objects (the workqueue key format).
std::string NamespacedName(const Json& obj);

std::map<std::string, std::string> Labels(const Json& obj);       // non-string values skipped
std::map<std::string, std::string> Annotations(const Json& obj);  // non-string values skipped
std::optional<std::string> Label(const Json& obj, const std::string& key);
std::optional<std::string> Annotation(const Json& obj, const std::string& key);

struct OwnerReference {
  std::string api_version;
  std::string kind;
  std::string name;
  std::string uid;
  bool controller = false;
  bool block_owner_deletion = false;

  Json ToJson() const;
  bool operator==(const OwnerReference&) const = default;
};
// Entries missing apiVersion, kind, name or uid are skipped.
std::vector<OwnerReference> OwnerReferences(const Json& obj);
// The owner reference with controller: true, if any.
std::optional<OwnerReference> ControllerOf(const Json& obj);

std::vector<std::string> Finalizers(const Json& obj);
bool HasFinalizer(const Json& obj, const std::string& finalizer);

// nullopt when absent or unparsable.
std::optional<absl::Time> CreationTimestamp(const Json& obj);
std::optional<absl::Time> DeletionTimestamp(const Json& obj);
bool IsBeingDeleted(const Json& obj);  // metadata.deletionTimestamp is set

// ---- Times (metav1.Time / metav1.MicroTime) -----------------------------------------------------

// RFC 3339 with optional fraction and any offset ("2024-05-01T10:00:00Z",
// "2024-05-01T12:00:00.123456+02:00"). kInvalidArgument otherwise.
absl::StatusOr<absl::Time> ParseRfc3339(absl::string_view s);
// metav1.Time: UTC, whole seconds (truncated): "2024-05-01T10:00:00Z".
std::string FormatRfc3339(absl::Time t);
// metav1.MicroTime: UTC, exactly six fraction digits: "2024-05-01T10:00:00.123456Z".
std::string FormatRfc3339Micro(absl::Time t);
// RFC3339Nano as Go prints it: UTC, up to nine digits, trailing zeros (and a bare dot) dropped.
std::string FormatRfc3339Nano(absl::Time t);

// ---- IntOrString
// ---------------------------------------------------------------------------------

// Kubernetes' GetScaledValueFromIntOrPercent: an integer is returned as is; "N%" gives
// N * total / 100 rounded up (ceil) or down (floor), saturated to int's range. Anything else
// (null, "5", "abc%", 1.5) is kInvalidArgument.
absl::StatusOr<int> GetScaledValueFromIntOrPercent(const Json& int_or_percent, int total,
                                                   bool round_up);

// ---- Label selectors
// -----------------------------------------------------------------------------

// A set of requirements that all must hold (AND).
//
// Semantics, as in Kubernetes:
//  - An empty selector (metav1.LabelSelector `{}` or the string "") matches everything.
//  - A null or absent metav1.LabelSelector matches nothing (LabelSelectorAsSelector(nil)); this one
//    has no string form (ToString() returns "" and matches_nothing() is true), so callers must not
//    send it to the server as an empty labelSelector.
//  - NotIn and != also match objects without the key; Gt/Lt need an integer label value.
class LabelSelector {
 public:
  enum class Op { kIn, kNotIn, kExists, kDoesNotExist, kEquals, kNotEquals, kGt, kLt };
  struct Requirement {
    std::string key;
    Op op;
    std::vector<std::string> values;  // sorted, unique
  };

  static LabelSelector Everything() { return LabelSelector(false); }
  static LabelSelector Nothing() { return LabelSelector(true); }
  // metav1.LabelSelector JSON: {matchLabels: {k: v}, matchExpressions: [{key, operator, values}]}.
  static absl::StatusOr<LabelSelector> FromJson(const Json& selector);
  // The string form of ListOptions.labelSelector: "a=b,c!=d,e in (x,y),f notin (z),g,!h,i>1".
  static absl::StatusOr<LabelSelector> Parse(absl::string_view s);

  bool Matches(const std::map<std::string, std::string>& labels) const;
  // Matches the object's metadata.labels.
  bool MatchesObject(const Json& obj) const { return Matches(Labels(obj)); }

  // A requirement every matching label set meets by carrying one of its values (In or Equals;
  // the one with the fewest values), for indexing selectors by label; null when there is none.
  const Requirement* RequiredLabel() const;

  bool matches_everything() const { return !nothing_ && requirements_.empty(); }
  bool matches_nothing() const { return nothing_; }
  const std::vector<Requirement>& requirements() const { return requirements_; }
  // Canonical string form, requirements sorted by key (what Parse accepts).
  std::string ToString() const;

 private:
  explicit LabelSelector(bool nothing) : nothing_(nothing) {}
  absl::Status Add(Requirement r);

  bool nothing_;
  std::vector<Requirement> requirements_;
};

// A JSON patch of `obj` as the caller's cache saw it, whose `ops` begin with a `test` of
// /metadata/resourceVersion (optimistic concurrency without reading first). The real API server
// answers a failed test with a bare 422 Invalid, like a bad patch; this tells the two apart by
// reading the object again: when its resourceVersion moved, ABORTED (a conflict: plan again on a
// fresher cache). Any other result is Patch's. `obj` must name its namespace (if any) and name.
absl::StatusOr<Json> PatchIfUnchanged(KubeClient* client, const Resource& resource, const Json& obj,
                                      const Json& ops, const std::string& subresource = "");

// The JSON patch that writes a controller's computed status over `obj`'s without touching the
// status fields it does not compute: a `test` of /metadata/resourceVersion, then an `add` of each
// top-level field of `next` (the whole /status when `obj` has none), and a `remove` of each key of
// `removable` that the old status has and `next` lacks (a map the controller emptied). Send it to
// the status subresource.
Json StatusPatchOps(const Json& obj, const Json& next,
                    const std::vector<std::string>& removable = {});

}  // namespace kruise::kube
