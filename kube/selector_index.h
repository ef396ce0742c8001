#pragma once

// SelectorIndex<T>: objects that select pods by label (SidecarSets today; PodUnavailableBudgets
// and WorkloadSpreads are the same shape), indexed by one label their selector requires
// (LabelSelector::RequiredLabel), so that a pod is tested against the objects its labels can
// match plus the few that require no label value, instead of against every object.
//
//   SelectorIndex<Entry> index;
//   for (const Entry& e : entries) {
//     if (const auto* r = e.selector.RequiredLabel()) index.Add(&e, r->key, r->values);
//     else index.AddUnindexed(&e);
//   }
//   for (const Entry* e : index.Candidates(pod_labels)) if (e->selector.Matches(...)) ...
//
// Candidates are a superset of the matches: the caller still runs its full test on each. Items
// are held by pointer and must outlive the index (build it inside the snapshot that owns them).
// Thread-compatible: build once, then read from any number of threads.

#include <map>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace kruise::kube {

template <typename T>
class SelectorIndex {
 public:
  // `item` can match only pods whose label `key` has one of `values`.
  void Add(const T* item, const std::string& key, const std::vector<std::string>& values) {
    auto& by_value = by_label_[key];
    for (const std::string& v : values) {
      std::vector<const T*>& items = by_value[v];
      if (items.empty() || items.back() != item) items.push_back(item);  // a value listed twice
    }
  }
  // `item` requires no label value: a candidate for every pod.
  void AddUnindexed(const T* item) { unindexed_.push_back(item); }

  bool empty() const { return by_label_.empty() && unindexed_.empty(); }

  // The candidates for a pod with these labels: the unindexed items in the order added, then the
  // indexed ones whose key and value the labels carry, by key, each list in the order added.
  std::vector<const T*> Candidates(const std::map<std::string, std::string>& labels) const {
    std::vector<const T*> out = unindexed_;
    for (const auto& [key, by_value] : by_label_) {
      auto label = labels.find(key);
      if (label != labels.end()) Append(by_value, label->second, &out);
    }
    return out;
  }
  // The same for a pod's metadata.labels object as JSON (a non-object reads as no labels;
  // non-string values never match).
  std::vector<const T*> Candidates(const nlohmann::json& labels) const {
    std::vector<const T*> out = unindexed_;
    if (by_label_.empty() || !labels.is_object()) return out;
    for (const auto& [key, by_value] : by_label_) {
      auto label = labels.find(key);
      if (label != labels.end() && label->is_string()) {
        Append(by_value, label->template get_ref<const std::string&>(), &out);
      }
    }
    return out;
  }

 private:
  using ByValue = std::map<std::string, std::vector<const T*>>;
  static void Append(const ByValue& by_value, const std::string& value,
                     std::vector<const T*>* out) {
    auto items = by_value.find(value);
    if (items != by_value.end()) out->insert(out->end(), items->second.begin(), items->second.end());
  }

  std::map<std::string, ByValue> by_label_;
  std::vector<const T*> unindexed_;
};

}  // namespace kruise::kube
