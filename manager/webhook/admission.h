#pragma once

// Admission framework: AdmissionReview (admission.k8s.io/v1 and v1beta1) decoding, the Handler
// interface, response helpers (Allowed/Denied/PatchResponse) and a path -> handler registry.
//
//   HandlerRegistry registry;
//   registry.Register("/mutate-pod", std::make_shared<PodMutator>(), [&] { return gates.PodWebhook;
//   }); auto [code, body] = ServeAdmission(*registry.Find("/mutate-pod"), request_body);
//
// Thread-safety: ServeAdmission and the helpers are thread-safe; handlers must be too (they are
// called concurrently from server threads). The registry is filled before serving, then read-only.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace kruise::manager::webhook {

using Json = nlohmann::json;

struct GroupVersionKind {
  std::string group, version, kind;
};
struct GroupVersionResource {
  std::string group, version, resource;
};

struct UserInfo {
  std::string username;
  std::string uid;
  std::vector<std::string> groups;
  Json extra = Json::object();
};

struct AdmissionRequest {
  std::string api_version;  // "admission.k8s.io/v1" or "admission.k8s.io/v1beta1"
  std::string uid;
  GroupVersionKind kind;
  GroupVersionResource resource;
  std::string sub_resource;
  std::string namespace_;
  std::string name;
  std::string operation;  // CREATE | UPDATE | DELETE | CONNECT
  UserInfo user_info;
  Json object;      // null when absent (DELETE)
  Json old_object;  // null when absent (CREATE)
  bool dry_run = false;
};

struct Result {
  int code = 0;  // HTTP-style code; 0 = unset
  std::string message;
  std::string reason;
};

struct AdmissionResponse {
  bool allowed = true;
  Result result;
  std::optional<std::string> patch;  // raw JSON Patch document (a JSON array), not yet base64
  std::vector<std::string> warnings;
};

class FailOpen;  // fail_open.h

class Handler {
 public:
  virtual ~Handler() = default;
  // Should not throw; ServeAdmission turns any exception into a denial with code 500, or, on a
  // failurePolicy Ignore path (HandlerRegistry::SetFailOpen), into an allowed answer with a
  // warning.
  virtual AdmissionResponse Handle(const AdmissionRequest& request) = 0;
};

// A handler from a function.
class FuncHandler final : public Handler {
 public:
  explicit FuncHandler(std::function<AdmissionResponse(const AdmissionRequest&)> fn)
      : fn_(std::move(fn)) {}
  AdmissionResponse Handle(const AdmissionRequest& request) override { return fn_(request); }

 private:
  std::function<AdmissionResponse(const AdmissionRequest&)> fn_;
};

AdmissionResponse Allowed(std::string message = "");
AdmissionResponse Denied(int code, std::string message, std::string reason = "");
// Allowed, with the JSON Patch that turns `original` into `mutated` (no patch when equal).
AdmissionResponse PatchResponse(const Json& original, const Json& mutated);
// The JSON Patch PatchResponse sends: objects member by member, arrays of equal length element by
// element, an array that grew or shrank by one contiguous run as one add or remove per element,
// any other change (other changes of length, a type change) replaced whole. Empty when equal;
// applying it to `original` gives `mutated`.
Json JsonPatchDiff(const Json& original, const Json& mutated);
// Allowed, with an explicit list of JSON Patch operations (an array; none when empty).
AdmissionResponse PatchOpsResponse(const Json& ops);

// Decodes an AdmissionReview body. Moves `object`/`oldObject` out of the parsed document.
// DecodeAdmissionReview leaves out `metadata.managedFields` of `object` and `oldObject` (no handler
// reads them; a patch computed with PatchResponse never touches what both sides lack).
// Errors: kInvalidArgument with a message fit for a 400 response.
absl::StatusOr<AdmissionRequest> DecodeAdmissionReviewJson(Json review);
absl::StatusOr<AdmissionRequest> DecodeAdmissionReview(absl::string_view body);

// The AdmissionReview answering `request` (same apiVersion, uid echoed, patch base64-encoded with
// patchType JSONPatch), as the reply body; EncodeAdmissionReview parses it back (for tests).
std::string EncodeAdmissionReviewText(const AdmissionRequest& request,
                                      const AdmissionResponse& response);
Json EncodeAdmissionReview(const AdmissionRequest& request, const AdmissionResponse& response);

struct HttpReply {
  int status = 200;
  std::string body;
  // With the charset parameter on purpose: cpp-httplib (our server until the Beast one) gzips an
  // exact "application/json" reply whenever the client accepts gzip, and setting up zlib per reply
  // cost more than the whole admission; keep it so if a server ever compresses again.
  std::string content_type = "application/json; charset=utf-8";
};
// Decodes `body`, runs `handler`, encodes the answer. A malformed review gives 400 (text/plain
// message); a handler exception (any type) gives a denial (code 500) in a well-formed review, or,
// with `fail_open` (the path is a failurePolicy Ignore webhook), an allowed answer with a warning
// recorded there under `path`. Never throws.
HttpReply ServeAdmission(Handler& handler, absl::string_view body,
                         absl::string_view path = "", FailOpen* fail_open = nullptr);

// Validating handlers of features that share one path (/validate-pod: the PodUnavailableBudget
// check, then the WorkloadSpread deletion record), run in order: the first refusal is the answer
// and the handlers after it do not run; warnings add up. Validating paths only (patches of the
// handlers are dropped).
class ValidatingChain final : public Handler {
 public:
  explicit ValidatingChain(std::vector<std::shared_ptr<Handler>> handlers)
      : handlers_(std::move(handlers)) {}
  AdmissionResponse Handle(const AdmissionRequest& request) override;

 private:
  const std::vector<std::shared_ptr<Handler>> handlers_;
};

class HandlerRegistry {
 public:
  // Registers `handler` at `path` when `enabled` (a feature-gate predicate, evaluated now) holds.
  // Returns whether it was registered. Re-registering a path replaces the handler.
  bool Register(const std::string& path, std::shared_ptr<Handler> handler,
                const std::function<bool()>& enabled = nullptr);
  // As Register, but a handler already at `path` stays and runs first: both become a
  // ValidatingChain (validating paths only).
  bool Append(const std::string& path, std::shared_ptr<Handler> handler,
              const std::function<bool()>& enabled = nullptr);
  Handler* Find(absl::string_view path) const;
  // Marks `path` as a failurePolicy Ignore webhook (the pod webhooks): a handler exception there
  // allows with a warning (ServeAdmission), and a server that cannot take the review (busy, over
  // its memory budget) answers 429 without Retry-After, which the API server's client does not
  // retry, so the request is allowed at once instead of after the webhook's timeout.
  // `fail_open` must outlive the registry.
  void SetFailOpen(const std::string& path, FailOpen* fail_open) { fail_open_[path] = fail_open; }
  FailOpen* FailOpenAt(absl::string_view path) const {
    auto it = fail_open_.find(path);
    return it == fail_open_.end() ? nullptr : it->second;
  }
  bool Has(absl::string_view path) const { return Find(path) != nullptr; }
  std::vector<std::string> Paths() const;

 private:
  std::map<std::string, std::shared_ptr<Handler>, std::less<>> handlers_;
  std::map<std::string, FailOpen*, std::less<>> fail_open_;
};

}  // namespace kruise::manager::webhook
