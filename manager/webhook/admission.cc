#include "manager/webhook/admission.h"

#include <exception>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "manager/webhook/fail_open.h"
#include "simdjson.h"

namespace kruise::manager::webhook {
namespace {

constexpr char kV1[] = "admission.k8s.io/v1";
constexpr char kV1beta1[] = "admission.k8s.io/v1beta1";

// Reads an optional string field; a present non-string value is an error.
bool GetString(const Json& obj, const char* key, std::string* out, std::string* err) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_string()) {
    *err = absl::StrCat("request.", key, " must be a string");
    return false;
  }
  *out = it->get<std::string>();
  return true;
}

bool GetObject(const Json& obj, const char* key, const Json** out, std::string* err) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    *out = nullptr;
    return true;
  }
  if (!it->is_object()) {
    *err = absl::StrCat("request.", key, " must be an object");
    return false;
  }
  *out = &*it;
  return true;
}

std::string Str(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

AdmissionResponse Allowed(std::string message) {
  AdmissionResponse r;
  r.allowed = true;
  if (!message.empty()) {
    r.result.code = 200;
    r.result.message = std::move(message);
  }
  return r;
}

AdmissionResponse Denied(int code, std::string message, std::string reason) {
  AdmissionResponse r;
  r.allowed = false;
  r.result.code = code;
  r.result.message = std::move(message);
  r.result.reason = std::move(reason);
  return r;
}

AdmissionResponse PatchOpsResponse(const Json& ops) {
  AdmissionResponse r = Allowed();
  if (ops.is_array() && !ops.empty()) r.patch = ops.dump();
  return r;
}

namespace {

void AppendPointerToken(std::string* path, const std::string& key) {
  path->push_back('/');
  for (char c : key) {
    if (c == '~') {
      path->append("~0");
    } else if (c == '/') {
      path->append("~1");
    } else {
      path->push_back(c);
    }
  }
}

// RFC 6902 operations turning `a` into `b` (which differ) at `path`. Unlike Json::diff, equal
// members are skipped after one comparison (no path strings or ops built for them). An array
// that grew or shrank by one contiguous run (a sidecar added in front of, between or after the
// app containers) gives one add or remove per element of the run; any other change of length
// replaces the array whole rather than rewriting every later element field by field.
void DiffInto(const Json& a, const Json& b, std::string* path, Json* ops) {
  const size_t len = path->size();
  if (a.is_object() && b.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      auto other = b.find(it.key());
      if (other != b.end() && *other == it.value()) continue;
      AppendPointerToken(path, it.key());
      if (other == b.end()) {
        ops->push_back({{"op", "remove"}, {"path", *path}});
      } else {
        DiffInto(it.value(), *other, path, ops);
      }
      path->resize(len);
    }
    for (auto it = b.begin(); it != b.end(); ++it) {
      if (a.contains(it.key())) continue;
      AppendPointerToken(path, it.key());
      ops->push_back({{"op", "add"}, {"path", *path}, {"value", it.value()}});
      path->resize(len);
    }
    return;
  }
  if (a.is_array() && b.is_array()) {
    if (a.size() == b.size()) {
      for (size_t i = 0; i < a.size(); ++i) {
        if (a[i] == b[i]) continue;
        AppendPointerToken(path, std::to_string(i));
        DiffInto(a[i], b[i], path, ops);
        path->resize(len);
      }
      return;
    }
    // The longer array is the shorter one with a run inserted at `prefix`?
    const Json& shorter = a.size() < b.size() ? a : b;
    const Json& longer = a.size() < b.size() ? b : a;
    size_t prefix = 0;
    while (prefix < shorter.size() && shorter[prefix] == longer[prefix]) ++prefix;
    size_t suffix = 0;
    while (prefix + suffix < shorter.size() &&
           shorter[shorter.size() - 1 - suffix] == longer[longer.size() - 1 - suffix]) {
      ++suffix;
    }
    if (!shorter.empty() && prefix + suffix == shorter.size()) {
      const size_t run = longer.size() - shorter.size();
      for (size_t i = 0; i < run; ++i) {
        // Removals all take the run's first index in turn; insertions go one after another.
        AppendPointerToken(path, std::to_string(a.size() < b.size() ? prefix + i : prefix));
        if (a.size() < b.size()) {
          ops->push_back({{"op", "add"}, {"path", *path}, {"value", b[prefix + i]}});
        } else {
          ops->push_back({{"op", "remove"}, {"path", *path}});
        }
        path->resize(len);
      }
      return;
    }
  }
  ops->push_back({{"op", "replace"}, {"path", *path}, {"value", b}});
}

}  // namespace

Json JsonPatchDiff(const Json& original, const Json& mutated) {
  Json ops = Json::array();
  if (original == mutated) return ops;
  std::string path;
  DiffInto(original, mutated, &path, &ops);
  return ops;
}

AdmissionResponse PatchResponse(const Json& original, const Json& mutated) {
  return PatchOpsResponse(JsonPatchDiff(original, mutated));
}

namespace {

// simdjson's DOM -> nlohmann::json. simdjson finds the structure of a review several times faster
// than nlohmann's character-at-a-time lexer, which was the largest cost of an admission. A key
// that appears twice keeps its last value, as in Go's encoding/json and nlohmann's parser (the
// first one used to win; found by test/fuzz/admission_review.cc).
Json ToJson(simdjson::dom::element e, bool is_object_root = false);

Json ObjectToJson(simdjson::dom::object obj, bool is_object_root) {
  Json out = Json::object();
  for (auto field : obj) {
    std::string key(field.key);
    if (is_object_root && key == "metadata" && field.value.is_object()) {
      // managedFields: never read by a handler, never touched by a patch computed as a diff, and
      // about half of a typical pod review.
      Json meta = Json::object();
      for (auto mf : simdjson::dom::object(field.value)) {
        if (mf.key == "managedFields") continue;
        meta[std::string(mf.key)] = ToJson(mf.value);
      }
      out[std::move(key)] = std::move(meta);
      continue;
    }
    out[std::move(key)] = ToJson(field.value);
  }
  return out;
}

Json ToJson(simdjson::dom::element e, bool is_object_root) {
  switch (e.type()) {
    case simdjson::dom::element_type::OBJECT:
      return ObjectToJson(simdjson::dom::object(e), is_object_root);
    case simdjson::dom::element_type::ARRAY: {
      Json out = Json::array();
      for (simdjson::dom::element v : simdjson::dom::array(e)) out.push_back(ToJson(v));
      return out;
    }
    case simdjson::dom::element_type::STRING:
      return Json(std::string(std::string_view(e)));
    case simdjson::dom::element_type::INT64:
      return Json(int64_t(e));
    case simdjson::dom::element_type::UINT64:
      return Json(uint64_t(e));
    case simdjson::dom::element_type::DOUBLE:
      return Json(double(e));
    case simdjson::dom::element_type::BOOL:
      return Json(bool(e));
    case simdjson::dom::element_type::NULL_VALUE:
      return Json(nullptr);
  }
  return Json(nullptr);
}

// simdjson (3.0) rejects integers beyond 64 bits, which the API server does send: Go's
// encoding/json prints a large float64 of a free-form field (a CRD's preserved unknown fields)
// without an exponent, 1e20 as 100000000000000000000. Such a body is read with nlohmann, which
// makes them doubles as Go does, with the same depth limit and managedFields left out (found by
// test/fuzz/admission_review.cc).
absl::StatusOr<AdmissionRequest> DecodeWithNlohmann(absl::string_view body) {
  constexpr int kMaxDepth = 1024;  // simdjson's default
  // nlohmann's lexer ends the input at a NUL byte, which JSON never has unescaped.
  if (body.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError("request body is not valid JSON: a NUL byte");
  }
  bool too_deep = false;
  Json review = Json::parse(
      body.begin(), body.end(),
      [&too_deep](int depth, Json::parse_event_t, Json&) {
        too_deep = too_deep || depth > kMaxDepth;
        return !too_deep;
      },
      /*allow_exceptions=*/false);
  if (too_deep) {
    return absl::InvalidArgumentError(
        "request body is not valid JSON: The JSON document was too deep (too many nested objects "
        "and arrays)");
  }
  if (review.is_discarded()) {
    return absl::InvalidArgumentError(
        "request body is not valid JSON: Problem while parsing a number");
  }
  if (auto r = review.find("request"); review.is_object() && r != review.end() && r->is_object()) {
    for (const char* key : {"object", "oldObject"}) {
      auto o = r->find(key);
      if (o == r->end() || !o->is_object()) continue;
      if (auto m = o->find("metadata"); m != o->end() && m->is_object()) m->erase("managedFields");
    }
  }
  return DecodeAdmissionReviewJson(std::move(review));
}

}  // namespace

absl::StatusOr<AdmissionRequest> DecodeAdmissionReview(absl::string_view body) {
  // One parser per thread keeps its buffers between reviews; a rare large review gets its own so
  // that its buffers are freed with it.
  constexpr size_t kReusedParserMax = 64 << 10;  // keeps at most ~1 MiB per thread
  thread_local simdjson::dom::parser reused;
  simdjson::dom::parser large;
  simdjson::dom::parser& parser = body.size() <= kReusedParserMax ? reused : large;
  simdjson::dom::element doc;
  if (auto error = parser.parse(body.data(), body.size()).get(doc); error != simdjson::SUCCESS) {
    if (error == simdjson::NUMBER_ERROR) return DecodeWithNlohmann(body);
    return absl::InvalidArgumentError(
        absl::StrCat("request body is not valid JSON: ", simdjson::error_message(error)));
  }
  Json review;
  if (doc.is_object()) {
    review = Json::object();
    for (auto field : simdjson::dom::object(doc)) {
      std::string key(field.key);
      if (key == "request" && field.value.is_object()) {
        Json request = Json::object();
        for (auto rf : simdjson::dom::object(field.value)) {
          const bool object_root = rf.key == "object" || rf.key == "oldObject";
          request[std::string(rf.key)] = ToJson(rf.value, object_root);
        }
        review[std::move(key)] = std::move(request);
      } else {
        review[std::move(key)] = ToJson(field.value);
      }
    }
  } else {
    review = ToJson(doc);
  }
  return DecodeAdmissionReviewJson(std::move(review));
}

absl::StatusOr<AdmissionRequest> DecodeAdmissionReviewJson(Json review) {
  if (!review.is_object()) return absl::InvalidArgumentError("AdmissionReview must be an object");
  AdmissionRequest req;
  req.api_version = Str(review, "apiVersion");
  if (req.api_version != kV1 && req.api_version != kV1beta1) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported AdmissionReview apiVersion \"",
                                                   req.api_version, "\" (want ", kV1, " or ",
                                                   kV1beta1, ")"));
  }
  if (Str(review, "kind") != "AdmissionReview") {
    return absl::InvalidArgumentError("kind must be AdmissionReview");
  }
  auto rit = review.find("request");
  if (rit == review.end() || !rit->is_object()) {
    return absl::InvalidArgumentError("AdmissionReview has no request");
  }
  Json& r = *rit;
  std::string err;
  const Json* kind = nullptr;
  const Json* resource = nullptr;
  const Json* user = nullptr;
  if (!GetString(r, "uid", &req.uid, &err) ||
      !GetString(r, "subResource", &req.sub_resource, &err) ||
      !GetString(r, "namespace", &req.namespace_, &err) || !GetString(r, "name", &req.name, &err) ||
      !GetString(r, "operation", &req.operation, &err) || !GetObject(r, "kind", &kind, &err) ||
      !GetObject(r, "resource", &resource, &err) || !GetObject(r, "userInfo", &user, &err)) {
    return absl::InvalidArgumentError(err);
  }
  if (req.uid.empty()) return absl::InvalidArgumentError("request.uid is required");
  if (kind != nullptr) {
    req.kind = {Str(*kind, "group"), Str(*kind, "version"), Str(*kind, "kind")};
  }
  if (resource != nullptr) {
    req.resource = {Str(*resource, "group"), Str(*resource, "version"), Str(*resource, "resource")};
  }
  if (user != nullptr) {
    req.user_info.username = Str(*user, "username");
    req.user_info.uid = Str(*user, "uid");
    if (auto g = user->find("groups"); g != user->end() && g->is_array()) {
      for (const Json& v : *g) {
        if (v.is_string()) req.user_info.groups.push_back(v.get<std::string>());
      }
    }
    if (auto e = user->find("extra"); e != user->end() && e->is_object()) req.user_info.extra = *e;
  }
  if (auto d = r.find("dryRun"); d != r.end() && !d->is_null()) {
    if (!d->is_boolean()) return absl::InvalidArgumentError("request.dryRun must be a boolean");
    req.dry_run = d->get<bool>();
  }
  if (auto o = r.find("object"); o != r.end()) req.object = std::move(*o);
  if (auto o = r.find("oldObject"); o != r.end()) req.old_object = std::move(*o);
  return req;
}

std::string EncodeAdmissionReviewText(const AdmissionRequest& request,
                                      const AdmissionResponse& response) {
  // Written out rather than built as a Json and dumped: the base64 patch is most of a mutating
  // reply, needs no escaping, and nlohmann's dump looks at it a character at a time.
  auto quoted = [](const std::string& s) {
    return Json(s).dump(-1, ' ', false, Json::error_handler_t::replace);
  };
  std::string out = absl::StrCat("{\"apiVersion\":", quoted(request.api_version),
                                 ",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":",
                                 quoted(request.uid), ",\"allowed\":",
                                 response.allowed ? "true" : "false");
  if (response.result.code != 0 || !response.result.message.empty() ||
      !response.result.reason.empty()) {
    Json status = Json::object();
    if (response.result.code != 0) status["code"] = response.result.code;
    if (!response.result.message.empty()) status["message"] = response.result.message;
    if (!response.result.reason.empty()) status["reason"] = response.result.reason;
    if (!response.allowed) status["status"] = "Failure";
    absl::StrAppend(&out, ",\"status\":",
                    status.dump(-1, ' ', false, Json::error_handler_t::replace));
  }
  if (response.patch.has_value()) {
    absl::StrAppend(&out, ",\"patchType\":\"JSONPatch\",\"patch\":\"",
                    absl::Base64Escape(*response.patch), "\"");
  }
  if (!response.warnings.empty()) {
    absl::StrAppend(&out, ",\"warnings\":",
                    Json(response.warnings).dump(-1, ' ', false, Json::error_handler_t::replace));
  }
  out.append("}}");
  return out;
}

Json EncodeAdmissionReview(const AdmissionRequest& request, const AdmissionResponse& response) {
  return Json::parse(EncodeAdmissionReviewText(request, response));
}

HttpReply ServeAdmission(Handler& handler, absl::string_view body, absl::string_view path,
                         FailOpen* fail_open) {
  absl::StatusOr<AdmissionRequest> req;
  try {
    req = DecodeAdmissionReview(body);
  } catch (const std::exception& e) {  // std::bad_alloc on a huge review
    return {500, absl::StrCat("decoding the AdmissionReview: ", e.what(), "\n"), "text/plain"};
  } catch (...) {
    return {500, "decoding the AdmissionReview failed\n", "text/plain"};
  }
  if (!req.ok()) {
    return {400, absl::StrCat("bad AdmissionReview: ", req.status().message(), "\n"), "text/plain"};
  }
  std::string error;
  try {
    AdmissionResponse resp = handler.Handle(*req);
    return {200, EncodeAdmissionReviewText(*req, resp)};
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "unknown exception";
  }
  Logger("webhook")->error("admission handler failed for {}: {}", req->uid, error);
  AdmissionResponse resp =
      fail_open != nullptr
          ? fail_open->Allow(path, "handler", "internal error", absl::InternalError(error))
          : Denied(500, absl::StrCat("internal error: ", error), "InternalError");
  try {
    return {200, EncodeAdmissionReviewText(*req, resp)};
  } catch (...) {
    return {500, "encoding the AdmissionReview failed\n", "text/plain"};
  }
}

bool HandlerRegistry::Register(const std::string& path, std::shared_ptr<Handler> handler,
                               const std::function<bool()>& enabled) {
  if (enabled && !enabled()) return false;
  handlers_[path] = std::move(handler);
  return true;
}

bool HandlerRegistry::Append(const std::string& path, std::shared_ptr<Handler> handler,
                             const std::function<bool()>& enabled) {
  if (enabled && !enabled()) return false;
  auto it = handlers_.find(path);
  if (it == handlers_.end()) {
    handlers_[path] = std::move(handler);
  } else {
    it->second = std::make_shared<ValidatingChain>(
        std::vector<std::shared_ptr<Handler>>{it->second, std::move(handler)});
  }
  return true;
}

AdmissionResponse ValidatingChain::Handle(const AdmissionRequest& request) {
  AdmissionResponse out = Allowed();
  for (const std::shared_ptr<Handler>& h : handlers_) {
    AdmissionResponse r = h->Handle(request);
    for (std::string& w : r.warnings) out.warnings.push_back(std::move(w));
    if (!r.allowed) {
      r.warnings = std::move(out.warnings);
      return r;
    }
  }
  return out;
}

Handler* HandlerRegistry::Find(absl::string_view path) const {
  auto it = handlers_.find(path);
  return it == handlers_.end() ? nullptr : it->second.get();
}

std::vector<std::string> HandlerRegistry::Paths() const {
  std::vector<std::string> out;
  for (const auto& [p, h] : handlers_) out.push_back(p);
  return out;
}

}  // namespace kruise::manager::webhook
