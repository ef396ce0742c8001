// metav1.Time / MicroTime parsing and formatting (kube/object.h) and IntOrString percentages:
// both arrive in every object the API server sends. Properties: a parsed time formats and parses
// back to itself (RFC3339Nano exactly, Micro and whole seconds truncated); a percentage of a
// non-negative total between 0% and 100% stays within [0, total]; no undefined behaviour
// (UBSan: float-to-int overflow) whatever the numbers.
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "kube/object.h"
#include "test/fuzz/fuzz_util.h"

namespace {

void CheckRoundTrip(const std::string& input, absl::Time t, const char* form,
                    const std::string& text, absl::Time want) {
  absl::StatusOr<absl::Time> again = kruise::kube::ParseRfc3339(text);
  FUZZ_CHECK(again.ok()) << "\"" << input << "\": " << form << " \"" << text
                         << "\" does not parse: " << again.status().ToString();
  FUZZ_CHECK(*again == want) << "\"" << input << "\": " << form << " \"" << text << "\" parses to "
                             << absl::FormatTime(*again) << ", want " << absl::FormatTime(want);
}

void FuzzTime(const std::string& input) {
  absl::StatusOr<absl::Time> t = kruise::kube::ParseRfc3339(input);
  if (!t.ok() || *t == absl::InfiniteFuture() || *t == absl::InfinitePast()) return;
  CheckRoundTrip(input, *t, "RFC3339Nano", kruise::kube::FormatRfc3339Nano(*t), *t);
  CheckRoundTrip(input, *t, "MicroTime", kruise::kube::FormatRfc3339Micro(*t),
                 absl::UnixEpoch() + absl::Floor(*t - absl::UnixEpoch(), absl::Microseconds(1)));
  CheckRoundTrip(input, *t, "Time", kruise::kube::FormatRfc3339(*t),
                 absl::UnixEpoch() + absl::Floor(*t - absl::UnixEpoch(), absl::Seconds(1)));
}

void FuzzIntOrString(const uint8_t* data, size_t size) {
  if (size < 5) return;
  int total = 0;
  std::memcpy(&total, data, sizeof(total));
  const bool round_up = data[4] & 1;
  nlohmann::json v = nlohmann::json::parse(data + 5, data + size, nullptr, false);
  if (v.is_discarded()) return;
  absl::StatusOr<int> got = kruise::kube::GetScaledValueFromIntOrPercent(v, total, round_up);
  if (!got.ok() || !v.is_string() || total < 0) return;
  const std::string s = v.get<std::string>();
  int percent = 0;
  if (!absl::SimpleAtoi(s.substr(0, s.size() - 1), &percent) || percent < 0 || percent > 100) {
    return;
  }
  FUZZ_CHECK(*got >= 0 && *got <= total)
      << v.dump() << " of " << total << " (round_up " << round_up << ") gave " << *got;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the parser, so one corpus serves both.
  if (data[0] == 'I') {
    FuzzIntOrString(data + 1, size - 1);
  } else {
    FuzzTime(std::string(reinterpret_cast<const char*>(data), size));
  }
  return 0;
}
