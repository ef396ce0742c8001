// WorkloadSpread's subset injection (manager/workloadspread/ws_core.h): a subset's `patch` is a
// strategic merge patch of every pod the webhook places in that subset. Input: a pod, '\x01', a
// patch, and optionally '\x01' and {"tolerations", "requiredTerm", "preferredTerms"}.
// Properties:
//  - StrategicMergePod leaves the pod unchanged when it fails;
//  - PlanSubsetInjection's RFC 6902 operations (taken against part of the pod) apply to the whole
//    pod; with a patch only, they give what StrategicMergePod gives on the whole pod plus the
//    matched-workloadspread annotation, and they fail exactly when the merge fails.
#include <exception>
#include <string>

#include "manager/workloadspread/ws_core.h"
#include "test/fuzz/fuzz_util.h"

using Json = nlohmann::json;
using kruise::fuzz::SplitInput;
namespace ws = kruise::manager::workloadspread;

namespace {

// What the injection adds after the patch: the matched-workloadspread annotation (`value`), with
// metadata and annotations created when absent or null.
bool AddAnnotation(Json* pod, const Json& value) {
  Json& meta = (*pod)["metadata"];
  if (meta.is_null()) meta = Json::object();
  if (!meta.is_object()) return false;
  Json& annotations = meta["annotations"];
  if (annotations.is_null()) annotations = Json::object();
  if (!annotations.is_object()) return false;
  annotations[ws::kMatchedWorkloadSpreadAnnotation] = value;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto docs = SplitInput(data, size, 3);
  if (docs.size() < 2) return 0;
  const Json pod = Json::parse(docs[0], nullptr, false);
  const Json patch = Json::parse(docs[1], nullptr, false);
  if (pod.is_discarded() || patch.is_discarded()) return 0;
  Json extras = docs.size() > 2 ? Json::parse(docs[2], nullptr, false) : Json::object();
  if (!extras.is_object()) return 0;

  Json merged = pod;
  absl::Status merge = ws::StrategicMergePod(&merged, patch);
  if (!merge.ok()) FUZZ_CHECK(merged == pod) << "a failed merge changed the pod";

  ws::WorkloadSpread spread;
  spread.namespace_ = "ns";
  spread.name = "spread";
  ws::Subset subset;
  subset.name = "zone-a";
  subset.patch = patch.is_object() ? patch : Json();
  subset.required_term = extras.value("requiredTerm", Json());
  subset.preferred_terms = extras.value("preferredTerms", Json::array());
  subset.tolerations = extras.value("tolerations", Json::array());
  if (!subset.preferred_terms.is_array() || !subset.tolerations.is_array()) return 0;
  spread.subsets.push_back(subset);
  absl::StatusOr<Json> ops = ws::PlanSubsetInjection(pod, spread, "zone-a", "uid-1");
  if (!ops.ok()) {
    Json annotated = merged;
    FUZZ_CHECK(!merge.ok() || !extras.empty() || !pod.is_object() ||
               !AddAnnotation(&annotated, "x"))
        << "injection failed (" << ops.status().ToString()
        << ") where the merge did not; pod=" << pod.dump() << " patch=" << patch.dump();
    return 0;
  }
  Json injected;
  try {
    injected = pod.patch(*ops);
  } catch (const std::exception& e) {
    FUZZ_CHECK(false) << "pod=" << pod.dump() << " patch=" << patch.dump() << " ops=" << ops->dump()
                      << ": ops do not apply: " << e.what();
  }
  FUZZ_CHECK(injected.is_object());
  FUZZ_CHECK(injected["metadata"]["annotations"].contains(ws::kMatchedWorkloadSpreadAnnotation));
  if (!extras.empty() || !patch.is_object()) return 0;
  FUZZ_CHECK(merge.ok()) << "injection succeeded where the merge failed (" << merge.ToString()
                         << "); pod=" << pod.dump() << " patch=" << patch.dump();
  FUZZ_CHECK(AddAnnotation(
      &merged, injected["metadata"]["annotations"][ws::kMatchedWorkloadSpreadAnnotation]))
      << "injection succeeded on a merged pod whose metadata or annotations are no objects: "
      << merged.dump();
  FUZZ_CHECK(injected == merged) << "pod=" << pod.dump() << " patch=" << patch.dump()
                                 << "\ninjection ops give " << injected.dump()
                                 << "\nthe merge gives     " << merged.dump();
  return 0;
}
