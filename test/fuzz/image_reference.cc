// kruise::ParseImageReference (common/image_ref.h): image names come from pod specs, ImagePullJobs
// and NodeImages. Properties: parsing allocates a bounded multiple of the input; a parsed
// reference's Normalized() and Familiar() forms parse back to the same reference.
#include <string>

#include "common/image_ref.h"
#include "test/fuzz/fuzz_util.h"

using kruise::ImageReference;
using kruise::fuzz::AllocationMeter;

namespace {

std::string Show(const ImageReference& r) {
  return "{registry=" + r.registry + " repository=" + r.repository + " tag=" + r.tag +
         " digest=" + r.digest + "}";
}

void CheckReparses(const std::string& input, const ImageReference& ref, const char* form,
                   const std::string& text) {
  absl::StatusOr<ImageReference> again = kruise::ParseImageReference(text);
  FUZZ_CHECK(again.ok()) << "input \"" << input << "\": " << form << " form \"" << text
                         << "\" does not parse: " << again.status().ToString();
  FUZZ_CHECK(*again == ref) << "input \"" << input << "\": " << form << " form \"" << text
                            << "\" parses to " << Show(*again) << ", not " << Show(ref);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static AllocationMeter meter;
  const std::string input(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ImageReference> ref = absl::InvalidArgumentError("");
  meter.Bound("ParseImageReference", size, 16, 4096,
              [&] { ref = kruise::ParseImageReference(input); });
  if (!ref.ok()) return 0;
  FUZZ_CHECK(!ref->registry.empty() && !ref->repository.empty());
  FUZZ_CHECK(!ref->tag.empty() || !ref->digest.empty());
  CheckReparses(input, *ref, "normalized", ref->Normalized());
  CheckReparses(input, *ref, "familiar", ref->Familiar());
  return 0;
}
