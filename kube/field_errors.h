#pragma once

// The problems a validating webhook finds in one object, as Kubernetes' field.ErrorList prints
// them ("spec.replicas: Invalid value: ..."), in the order found. Shared by every resource's
// admission (CloneSet, SidecarSet, Advanced StatefulSet, PodUnavailableBudget, ...).

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kruise::kube {

class FieldErrors {
 public:
  // "<path>: <message>".
  void Add(const std::string& path, const std::string& message) {
    list_.push_back(absl::StrCat(path, ": ", message));
  }
  // A line already in that form (e.g. another validator's, its path renamed).
  void AddLine(std::string line) { list_.push_back(std::move(line)); }
  bool empty() const { return list_.empty(); }
  std::vector<std::string> Take() { return std::move(list_); }

 private:
  std::vector<std::string> list_;
};

// OK, or INVALID_ARGUMENT with the problems joined by "; " (an admission denial's message).
inline absl::Status FieldErrorsStatus(const std::vector<std::string>& problems) {
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(problems, "; "));
}

}  // namespace kruise::kube
