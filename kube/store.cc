#include "kube/store.h"

#include <utility>

#include "kube/key_dictionary.h"

namespace kruise::kube {

std::string StoreKey(const Json& obj) {
  const Json* meta = obj.is_object() && obj.contains("metadata") ? &obj["metadata"] : nullptr;
  std::string ns, name;
  if (meta && meta->is_object()) {
    auto n = meta->find("namespace");
    if (n != meta->end() && n->is_string()) ns = n->get<std::string>();
    auto m = meta->find("name");
    if (m != meta->end() && m->is_string()) name = m->get<std::string>();
  }
  return ns.empty() ? name : ns + "/" + name;
}

std::pair<std::string, std::string> SplitStoreKey(const std::string& key) {
  auto pos = key.find('/');
  if (pos == std::string::npos) return {"", key};
  return {key.substr(0, pos), key.substr(pos + 1)};
}

IndexFunc NamespaceIndexFunc() {
  return [](const Json& obj) -> std::vector<std::string> {
    auto [ns, name] = SplitStoreKey(StoreKey(obj));
    if (ns.empty()) return {};
    return {ns};
  };
}

namespace {

// metadata.ownerReferences when it is an array, else nullptr.
const Json* OwnerReferenceList(const Json& obj) {
  if (!obj.is_object()) return nullptr;
  auto m = obj.find("metadata");
  if (m == obj.end() || !m->is_object()) return nullptr;
  auto r = m->find("ownerReferences");
  return r != m->end() && r->is_array() ? &*r : nullptr;
}

}  // namespace

IndexFunc ControllerUidIndexFunc() {
  return [](const Json& obj) -> std::vector<std::string> {
    const Json* refs = OwnerReferenceList(obj);
    if (!refs) return {};
    for (const Json& ref : *refs) {
      if (!ref.is_object()) continue;
      auto c = ref.find("controller");
      auto uid = ref.find("uid");
      if (c != ref.end() && c->is_boolean() && c->get<bool>() && uid != ref.end() &&
          uid->is_string()) {
        return {uid->get<std::string>()};
      }
    }
    return {};
  };
}

IndexFunc OwnerUidIndexFunc() {
  return [](const Json& obj) -> std::vector<std::string> {
    std::vector<std::string> out;
    const Json* refs = OwnerReferenceList(obj);
    if (!refs) return out;
    for (const Json& ref : *refs) {
      if (!ref.is_object()) continue;
      auto uid = ref.find("uid");
      if (uid != ref.end() && uid->is_string()) out.push_back(uid->get<std::string>());
    }
    return out;
  };
}

IndexFunc FieldIndexFunc(const std::string& json_pointer) {
  Json::json_pointer ptr(json_pointer);
  return [ptr](const Json& obj) -> std::vector<std::string> {
    try {
      if (!obj.contains(ptr)) return {};
      const Json& v = obj.at(ptr);
      if (v.is_string()) return {v.get<std::string>()};
    } catch (const Json::exception&) {
    }
    return {};
  };
}

EncodedObject EncodedObject::Encode(const Json& obj) {
  EncodedObject e;
  std::vector<uint8_t> bytes = Json::to_msgpack(CompactKeys(obj));
  auto buf = std::make_shared<uint8_t[]>(bytes.size());
  std::memcpy(buf.get(), bytes.data(), bytes.size());
  e.bytes_ = std::move(buf);
  e.size_ = bytes.size();
  return e;
}

std::shared_ptr<const Json> EncodedObject::Decode() const {
  if (!bytes_) return nullptr;
  // Our own encoding: parsing cannot fail short of memory corruption; do not throw regardless.
  Json j = Json::from_msgpack(bytes_.get(), bytes_.get() + size_, /*strict=*/true,
                              /*allow_exceptions=*/false);
  ExpandKeys(j);
  return std::make_shared<const Json>(std::move(j));
}

Store::Store(Indexers indexers) {
  for (auto& [name, fn] : indexers) {
    index_names_.push_back(name);
    index_funcs_.push_back(std::move(fn));
  }
  indices_.resize(index_names_.size());
}

std::string Store::PackIndexValues(const std::vector<std::vector<std::string>>& values) {
  std::string packed;
  for (size_t i = 0; i < values.size(); ++i) {
    for (const std::string& v : values[i]) {
      packed.push_back(static_cast<char>(i));
      packed.append(v.data(), strnlen(v.data(), v.size()));  // values never contain NUL
      packed.push_back('\0');
    }
  }
  packed.shrink_to_fit();
  return packed;
}

template <typename Fn>
void Store::ForEachIndexValue(const std::string& packed, Fn fn) {
  size_t pos = 0;
  while (pos < packed.size()) {
    const size_t index = static_cast<unsigned char>(packed[pos]);
    const size_t end = packed.find('\0', pos + 1);
    fn(index, packed.substr(pos + 1, end - pos - 1));
    pos = end + 1;
  }
}

void Store::UnindexLocked(const std::string& key, const Item& item) {
  ForEachIndexValue(item.index_values, [&](size_t i, const std::string& v) {
    auto it = indices_[i].find(v);
    if (it == indices_[i].end()) return;
    it->second.erase(key);
    if (it->second.empty()) indices_[i].erase(it);
  });
}

EncodedObject Store::Upsert(const std::string& key, EncodedObject obj, const Json& decoded) {
  Item item;
  item.obj = std::move(obj);
  std::vector<std::vector<std::string>> values;
  values.reserve(index_funcs_.size());
  for (const IndexFunc& fn : index_funcs_) values.push_back(fn(decoded));
  item.index_values = PackIndexValues(values);
  absl::MutexLock lock(&mu_);
  EncodedObject previous;
  auto it = items_.find(key);
  if (it != items_.end()) {
    UnindexLocked(key, it->second);
    previous = it->second.obj;
    encoded_bytes_ -= previous.size();
  }
  ForEachIndexValue(item.index_values,
                    [&](size_t i, const std::string& v) { indices_[i][v].insert(key); });
  encoded_bytes_ += item.obj.size();
  items_.insert_or_assign(key, std::move(item));
  return previous;
}

EncodedObject Store::Remove(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = items_.find(key);
  if (it == items_.end()) return {};
  UnindexLocked(key, it->second);
  EncodedObject previous = std::move(it->second.obj);
  encoded_bytes_ -= previous.size();
  items_.erase(it);
  return previous;
}

EncodedObject Store::GetEncoded(const std::string& key) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = items_.find(key);
  return it == items_.end() ? EncodedObject() : it->second.obj;
}

std::shared_ptr<const Json> Store::Get(const std::string& key) const {
  // Decode outside the lock.
  return GetEncoded(key).Decode();
}

std::shared_ptr<const Json> Store::Get(const std::string& ns, const std::string& name) const {
  return Get(ns.empty() ? name : ns + "/" + name);
}

std::vector<std::shared_ptr<const Json>> Store::List() const {
  std::vector<EncodedObject> encoded;
  {
    absl::ReaderMutexLock lock(&mu_);
    encoded.reserve(items_.size());
    for (const auto& [key, item] : items_) encoded.push_back(item.obj);
  }
  std::vector<std::shared_ptr<const Json>> out;
  out.reserve(encoded.size());
  for (const auto& e : encoded) out.push_back(e.Decode());
  return out;
}

std::vector<std::string> Store::ListKeys() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (const auto& [key, item] : items_) out.push_back(key);
  return out;
}

absl::StatusOr<std::vector<std::string>> Store::IndexKeys(const std::string& index,
                                                          const std::string& value) const {
  size_t i = 0;
  while (i < index_names_.size() && index_names_[i] != index) ++i;
  if (i == index_names_.size()) return absl::NotFoundError("no index named " + index);
  absl::ReaderMutexLock lock(&mu_);
  std::vector<std::string> out;
  auto it = indices_[i].find(value);
  if (it != indices_[i].end()) out.assign(it->second.begin(), it->second.end());
  return out;
}

absl::StatusOr<std::vector<std::shared_ptr<const Json>>> Store::ByIndex(
    const std::string& index, const std::string& value) const {
  size_t i = 0;
  while (i < index_names_.size() && index_names_[i] != index) ++i;
  if (i == index_names_.size()) return absl::NotFoundError("no index named " + index);
  std::vector<EncodedObject> encoded;
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = indices_[i].find(value);
    if (it != indices_[i].end()) {
      for (const std::string& key : it->second) encoded.push_back(items_.at(key).obj);
    }
  }
  std::vector<std::shared_ptr<const Json>> out;
  out.reserve(encoded.size());
  for (const auto& e : encoded) out.push_back(e.Decode());
  return out;
}

size_t Store::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return items_.size();
}

size_t Store::EncodedBytes() const {
  absl::ReaderMutexLock lock(&mu_);
  return encoded_bytes_;
}

absl::flat_hash_map<std::string, EncodedObject> Store::Snapshot() const {
  absl::ReaderMutexLock lock(&mu_);
  absl::flat_hash_map<std::string, EncodedObject> out;
  out.reserve(items_.size());
  for (const auto& [key, item] : items_) out.emplace(key, item.obj);
  return out;
}

}  // namespace kruise::kube
