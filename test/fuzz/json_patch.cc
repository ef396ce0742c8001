// webhook::JsonPatchDiff (manager/webhook/admission.h): every mutating admission answers with
// the diff between the object it was sent and the one it built. Property: applying
// diff(a, b) to a gives b (RFC 6902, nlohmann's patch()), the diff is empty exactly when a == b,
// and PatchResponse sends that same patch.
#include <exception>
#include <string>

#include "manager/webhook/admission.h"
#include "test/fuzz/fuzz_util.h"

using kruise::fuzz::SplitInput;
using kruise::manager::webhook::Json;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto docs = SplitInput(data, size, 2);
  if (docs.size() != 2) return 0;
  Json a = Json::parse(docs[0], nullptr, false);
  Json b = Json::parse(docs[1], nullptr, false);
  if (a.is_discarded() || b.is_discarded()) return 0;
  Json ops = kruise::manager::webhook::JsonPatchDiff(a, b);
  FUZZ_CHECK(ops.is_array());
  FUZZ_CHECK(ops.empty() == (a == b))
      << "a=" << a.dump() << " b=" << b.dump() << " ops=" << ops.dump();
  Json patched;
  try {
    patched = a.patch(ops);
  } catch (const std::exception& e) {
    FUZZ_CHECK(false) << "a=" << a.dump() << " b=" << b.dump() << " ops=" << ops.dump()
                      << ": patch does not apply: " << e.what();
  }
  FUZZ_CHECK(patched == b) << "a=" << a.dump() << " b=" << b.dump() << " ops=" << ops.dump()
                           << " gives " << patched.dump();
  auto response = kruise::manager::webhook::PatchResponse(a, b);
  FUZZ_CHECK(response.allowed);
  FUZZ_CHECK(response.patch.has_value() == !ops.empty());
  if (response.patch) FUZZ_CHECK(Json::parse(*response.patch) == ops);
  return 0;
}
