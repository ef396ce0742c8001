#pragma once

// Label and field selectors as the Kubernetes API parses them (internal to the fake apiserver).
//
//   labels: "a=b,c==d,e!=f,g in (x,y),h notin (z),i,!j"  (",": AND; "!=" and "notin" match a
//           missing key, like the real server)
//   fields: "path=v,path==v,path!=v"  (a missing field reads as "")

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kruise::testing::apiserver {

struct LabelRequirement {
  enum class Op { kEquals, kNotEquals, kIn, kNotIn, kExists, kNotExists };
  std::string key;
  Op op = Op::kExists;
  std::set<std::string> values;
};

class LabelSelector {
 public:
  // An empty string selects everything. Malformed input → kInvalidArgument.
  static absl::StatusOr<LabelSelector> Parse(const std::string& text);
  bool Matches(const std::map<std::string, std::string>& labels) const;
  bool empty() const { return reqs_.empty(); }

 private:
  std::vector<LabelRequirement> reqs_;
};

struct FieldRequirement {
  std::string path;  // dotted, e.g. "spec.nodeName"
  bool negate = false;
  std::string value;
};

class FieldSelector {
 public:
  static absl::StatusOr<FieldSelector> Parse(const std::string& text);
  // `get` returns the value of a dotted path as a string ("" when absent).
  bool Matches(const std::function<std::string(const std::string&)>& get) const;
  bool empty() const { return reqs_.empty(); }
  const std::vector<FieldRequirement>& requirements() const { return reqs_; }

 private:
  std::vector<FieldRequirement> reqs_;
};

}  // namespace kruise::testing::apiserver
