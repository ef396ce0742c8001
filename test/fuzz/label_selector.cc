// kube::LabelSelector (kube/object.h): the string form (ListOptions.labelSelector, flags) and the
// metav1.LabelSelector JSON form (every workload, SidecarSet, PUB, WorkloadSpread). Properties:
// parsing allocates a bounded multiple of the input; ToString() parses back to a selector with
// the same string form that matches exactly the same label sets.
#include <map>
#include <string>
#include <vector>

#include "kube/object.h"
#include "test/fuzz/fuzz_util.h"

using kruise::fuzz::AllocationMeter;
using kruise::kube::LabelSelector;

namespace {

// Label sets that tell requirements apart: each key absent, and set to each value the selector
// names, to "", and to numbers around a Gt/Lt bound.
std::vector<std::map<std::string, std::string>> Probes(const LabelSelector& s) {
  std::vector<std::map<std::string, std::string>> out = {{}};
  for (const LabelSelector::Requirement& r : s.requirements()) {
    std::vector<std::string> values = r.values;
    values.push_back("");
    values.push_back("0");
    for (const std::string& v : r.values) {
      int64_t n = 0;
      if (absl::SimpleAtoi(v, &n) && n > INT64_MIN && n < INT64_MAX) {
        values.push_back(std::to_string(n - 1));
        values.push_back(std::to_string(n + 1));
      }
    }
    const size_t before = out.size();
    for (size_t i = 0; i < before && out.size() < 256; ++i) {
      for (const std::string& v : values) {
        auto labels = out[i];
        labels[r.key] = v;
        out.push_back(std::move(labels));
      }
    }
  }
  return out;
}

void CheckRoundTrip(const std::string& input, const LabelSelector& s) {
  if (s.matches_nothing()) return;  // no string form
  const std::string text = s.ToString();
  absl::StatusOr<LabelSelector> again = LabelSelector::Parse(text);
  FUZZ_CHECK(again.ok()) << "input \"" << input << "\": ToString \"" << text
                         << "\" does not parse: " << again.status().ToString();
  FUZZ_CHECK(again->ToString() == text) << "input \"" << input << "\": \"" << text
                                        << "\" reparses as \"" << again->ToString() << "\"";
  for (const auto& labels : Probes(s)) {
    FUZZ_CHECK(s.Matches(labels) == again->Matches(labels))
        << "input \"" << input << "\": \"" << text << "\" matches differently after a round trip";
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static AllocationMeter meter;
  if (size == 0) return 0;
  // A leading '{' or 'n' (null) is the JSON form; anything else the string form.
  const std::string input(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<LabelSelector> s = absl::InvalidArgumentError("");
  if (data[0] == '{' || data[0] == 'n') {
    nlohmann::json j = nlohmann::json::parse(input, nullptr, false);
    if (j.is_discarded()) return 0;
    s = LabelSelector::FromJson(j);
  } else {
    // Up to a token per byte (a 40-byte Token, and the vector's growth), requirements, messages.
    meter.Bound("LabelSelector::Parse", size, 256, 4096, [&] { s = LabelSelector::Parse(input); });
  }
  if (s.ok()) CheckRoundTrip(input, *s);
  return 0;
}
