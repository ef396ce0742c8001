// webhook::DecodeAdmissionReview (manager/webhook/admission.h): the body of every admission
// request. Properties:
//  - decoding allocates at most a bounded multiple of the body (simdjson's buffers, the DOM);
//  - it decodes what nlohmann's parser (used for every other JSON we read) decodes to the same
//    request, and rejects only what that parser rejects or what nests deeper than simdjson's
//    1024 levels;
//  - the reply to a decoded review is valid JSON that echoes its uid.
#include <string>

#include "manager/webhook/admission.h"
#include "test/fuzz/fuzz_util.h"

using kruise::fuzz::AllocationMeter;
using kruise::manager::webhook::AdmissionRequest;
using kruise::manager::webhook::Json;

namespace {

// What DecodeAdmissionReview leaves out: object/oldObject metadata.managedFields.
void DropManagedFields(Json* review) {
  if (!review->is_object()) return;
  auto r = review->find("request");
  if (r == review->end() || !r->is_object()) return;
  for (const char* key : {"object", "oldObject"}) {
    auto o = r->find(key);
    if (o == r->end() || !o->is_object()) continue;
    auto m = o->find("metadata");
    if (m != o->end() && m->is_object()) m->erase("managedFields");
  }
}

std::string Show(const AdmissionRequest& r) {
  Json j = {
      {"apiVersion", r.api_version},
      {"uid", r.uid},
      {"kind", {r.kind.group, r.kind.version, r.kind.kind}},
      {"resource", {r.resource.group, r.resource.version, r.resource.resource}},
      {"subResource", r.sub_resource},
      {"namespace", r.namespace_},
      {"name", r.name},
      {"operation", r.operation},
      {"user", {r.user_info.username, r.user_info.uid, r.user_info.groups, r.user_info.extra}},
      {"object", r.object},
      {"oldObject", r.old_object},
      {"dryRun", r.dry_run}};
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static AllocationMeter meter;
  const std::string body(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<AdmissionRequest> req = absl::InvalidArgumentError("");
  // simdjson's buffers (~14 bytes per input byte: padded copy, tape, string buffer, structural
  // indexes) plus the nlohmann DOM (at most ~24 bytes per input byte: "[0,0,...]" is a 16-byte
  // value per 2 bytes, and vector growth copies).
  meter.Bound("DecodeAdmissionReview", size, 64, 256 << 10,
              [&] { req = kruise::manager::webhook::DecodeAdmissionReview(body); });

  if (body.find('\0') != std::string::npos) {
    // Never valid JSON (nlohmann's lexer would stop at it and take what precedes).
    FUZZ_CHECK(!req.ok()) << "accepted a body with a NUL byte: " << Show(*req);
    return 0;
  }
  Json reference = Json::parse(body, nullptr, false);
  if (reference.is_discarded()) {
    FUZZ_CHECK(!req.ok()) << "accepted a body nlohmann rejects: " << Show(*req);
    return 0;
  }
  DropManagedFields(&reference);
  absl::StatusOr<AdmissionRequest> want =
      kruise::manager::webhook::DecodeAdmissionReviewJson(std::move(reference));
  if (!req.ok()) {
    const std::string why(req.status().message());
    FUZZ_CHECK(!want.ok() || why.find("too deep") != std::string::npos)
        << "rejected (" << why << ") a review nlohmann decodes: " << Show(*want);
    return 0;
  }
  FUZZ_CHECK(want.ok()) << "accepted a review nlohmann's path rejects (" << want.status().ToString()
                        << "): " << Show(*req);
  FUZZ_CHECK(Show(*req) == Show(*want))
      << "simdjson: " << Show(*req) << "\nnlohmann: " << Show(*want);

  auto reply = kruise::manager::webhook::Denied(403, req->name + req->operation, req->namespace_);
  reply.warnings = req->user_info.groups;
  Json sent =
      Json::parse(kruise::manager::webhook::EncodeAdmissionReviewText(*req, reply), nullptr, false);
  FUZZ_CHECK(!sent.is_discarded());
  FUZZ_CHECK(sent["response"]["uid"] == req->uid);
  return 0;
}
