#include "daemon/crr/crr_ordering.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "kube/object.h"

namespace kruise::daemon {
namespace {

int PhaseWeight(const kube::Json& crr) {
  std::string phase = kube::GetString(crr, {"status", "phase"}).value_or("");
  if (phase == "Completed") return 0;
  if (phase == "Recreating") return 1;
  if (phase == "Pending") return 2;
  return 3;
}

}  // namespace

CrrSelection SelectActive(const std::vector<kube::Json>& crrs_of_pod) {
  std::vector<size_t> order(crrs_of_pod.size());
  std::iota(order.begin(), order.end(), size_t{0});
  auto key = [&](size_t i) {
    const kube::Json& crr = crrs_of_pod[i];
    absl::Time created = kube::CreationTimestamp(crr).value_or(absl::InfiniteFuture());
    return std::make_tuple(PhaseWeight(crr), created, kube::Name(crr));
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  CrrSelection out;
  for (size_t i : order) {
    if (PhaseWeight(crrs_of_pod[i]) == 0) continue;
    if (!out.active) {
      out.active = i;
    } else {
      out.to_mark_pending.push_back(i);
    }
  }
  return out;
}

kube::Json PendingPatch(const kube::Json& crr, const std::string& active_name) {
  std::string message =
      absl::StrCat("waiting for ContainerRecreateRequest ", active_name, " of the same pod");
  if (kube::GetString(crr, {"status", "phase"}).value_or("") == "Pending" &&
      kube::GetString(crr, {"status", "message"}).value_or("") == message) {
    return nullptr;
  }
  return {{"status", {{"phase", "Pending"}, {"message", message}}}};
}

}  // namespace kruise::daemon
