#pragma once

// Store: the indexed, compact object cache behind an informer.
//
// Objects are kept as MessagePack bytes (nlohmann::json::to_msgpack) in an immutable shared
// string, not as nlohmann::json trees: a decoded pod tree costs several times its JSON size
// (a heap node per value and per map entry), the MessagePack form a bit less than the JSON text,
// and less again because well-known field names are stored as two-byte codes
// (kube/key_dictionary.h).
// Reads decode on access and hand out fresh, immutable copies, so callers can never mutate the
// cache. Keys are "namespace/name" (or "name" for cluster-scoped objects).
//
// Indexers map an object to index values (e.g. its namespace, owner UIDs, spec.nodeName);
// ByIndex(index, value) returns the objects with that value. Each item remembers its index values
// so updates and deletes do not need to decode the previous object.
//
// Thread-safety: all methods are safe from any thread; readers share a reader lock. No callback
// other than the index functions (called under the writer lock; they must not call the store)
// runs inside the store.

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kube/client.h"

namespace kruise::kube {

// "namespace/name", or "name" when the object has no namespace.
std::string StoreKey(const Json& obj);
// Splits a StoreKey into {namespace, name}.
std::pair<std::string, std::string> SplitStoreKey(const std::string& key);

// Returns the index values of an object (may be empty). Must not throw (catch inside).
using IndexFunc = std::function<std::vector<std::string>(const Json& obj)>;
using Indexers = std::map<std::string, IndexFunc>;

inline constexpr char kNamespaceIndex[] = "namespace";
inline constexpr char kOwnerUidIndex[] = "owner-uid";
IndexFunc NamespaceIndexFunc();  // metadata.namespace
IndexFunc OwnerUidIndexFunc();   // metadata.ownerReferences[*].uid
inline constexpr char kControllerUidIndex[] = "controller-uid";
IndexFunc ControllerUidIndexFunc();  // the uid of the ownerReference with controller: true
// The string at a JSON pointer such as "/spec/nodeName" (no value when absent or not a string).
IndexFunc FieldIndexFunc(const std::string& json_pointer);

// An encoded object. Cheap to copy (shared, immutable bytes).
class EncodedObject {
 public:
  EncodedObject() = default;
  static EncodedObject Encode(const Json& obj);
  // Decodes the object (a fresh tree). Null when empty.
  std::shared_ptr<const Json> Decode() const;
  size_t size() const { return size_; }
  bool empty() const { return !bytes_; }
  // MessagePack of nlohmann::json is deterministic (object keys are sorted), so equal bytes mean
  // equal objects.
  bool SameBytes(const EncodedObject& other) const {
    if (bytes_ == other.bytes_) return true;
    return size_ == other.size_ && bytes_ && other.bytes_ &&
           std::memcmp(bytes_.get(), other.bytes_.get(), size_) == 0;
  }

 private:
  // One allocation holds the reference counts and the bytes.
  std::shared_ptr<const uint8_t[]> bytes_;
  size_t size_ = 0;
};

class Store {
 public:
  explicit Store(Indexers indexers = {});

  // Inserts or replaces the object at StoreKey(obj). Returns the previous object (empty if none).
  EncodedObject Upsert(const std::string& key, EncodedObject obj, const Json& decoded);
  // Removes `key`; returns the removed object (empty if none).
  EncodedObject Remove(const std::string& key);

  // Lister API.
  std::shared_ptr<const Json> Get(const std::string& key) const;
  std::shared_ptr<const Json> Get(const std::string& ns, const std::string& name) const;
  EncodedObject GetEncoded(const std::string& key) const;
  std::vector<std::shared_ptr<const Json>> List() const;
  std::vector<std::string> ListKeys() const;
  // Objects whose index `index` contains `value`. kNotFound if no such index.
  absl::StatusOr<std::vector<std::shared_ptr<const Json>>> ByIndex(const std::string& index,
                                                                   const std::string& value) const;
  absl::StatusOr<std::vector<std::string>> IndexKeys(const std::string& index,
                                                     const std::string& value) const;
  size_t size() const;
  // Sum of the encoded objects' sizes (for memory accounting).
  size_t EncodedBytes() const;

  // Snapshot of every item (used to diff a relist).
  absl::flat_hash_map<std::string, EncodedObject> Snapshot() const;

 private:
  struct Item {
    EncodedObject obj;
    // Index values packed in one string: per value, one byte index number then the value and a
    // NUL (one allocation instead of a vector of vectors of strings).
    std::string index_values;
  };
  static std::string PackIndexValues(const std::vector<std::vector<std::string>>& values);
  template <typename Fn>
  static void ForEachIndexValue(const std::string& packed, Fn fn);
  void UnindexLocked(const std::string& key, const Item& item) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::vector<std::string> index_names_;
  std::vector<IndexFunc> index_funcs_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Item> items_ ABSL_GUARDED_BY(mu_);
  // index -> value -> keys
  std::vector<absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>>> indices_
      ABSL_GUARDED_BY(mu_);
  size_t encoded_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kruise::kube
