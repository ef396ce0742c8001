#include "kube/call_deadline.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kruise::kube {
namespace {

thread_local std::optional<absl::Time> current_deadline;

}  // namespace

ScopedCallDeadline::ScopedCallDeadline(absl::Time deadline) : previous_(current_deadline) {
  current_deadline = previous_ ? std::min(*previous_, deadline) : deadline;
}

ScopedCallDeadline::~ScopedCallDeadline() { current_deadline = previous_; }

std::optional<absl::Time> CurrentCallDeadline() { return current_deadline; }

absl::Status CallDeadlineExceeded(absl::string_view what) {
  return absl::DeadlineExceededError(
      absl::StrCat(what, ": the call's deadline passed before the API server answered"));
}

}  // namespace kruise::kube
