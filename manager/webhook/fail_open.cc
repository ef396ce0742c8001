#include "manager/webhook/fail_open.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"

namespace kruise::manager::webhook {

bool IsInfrastructureFailure(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kDataLoss:
      return true;
    default:
      return false;
  }
}

FailOpen::FailOpen(Options options) : options_(std::move(options)) {
  if (options_.metrics != nullptr) {
    counter_ = &prometheus::BuildCounter()
                    .Name("kruise_webhook_infrastructure_failures_total")
                    .Help("Admissions of failurePolicy-Ignore webhooks allowed because a handler's "
                          "API call or write failed, by webhook path and handler")
                    .Register(*options_.metrics);
  }
}

std::string FailOpen::Record(absl::string_view path, absl::string_view handler,
                             absl::string_view what, const absl::Status& status,
                             const Json* object) {
  count_.fetch_add(1, std::memory_order_relaxed);
  if (counter_ != nullptr) {
    counter_->Add({{"path", std::string(path)}, {"handler", std::string(handler)}}).Increment();
  }
  std::string message = absl::StrCat(handler, ": ", what, ": ", status.message(),
                                     "; allowed without it (failurePolicy Ignore)");
  Logger("webhook")->warn("{} {}", path, message);
  if (object != nullptr && options_.event) options_.event(*object, kReason, message);
  return message;
}

AdmissionResponse FailOpen::Allow(absl::string_view path, absl::string_view handler,
                                  absl::string_view what, const absl::Status& status,
                                  const Json* object) {
  AdmissionResponse r = Allowed();
  r.warnings.push_back(Record(path, handler, what, status, object));
  return r;
}

Json ObjectRef(const std::string& api_version, const std::string& kind, const std::string& ns,
               const std::string& name) {
  Json meta = {{"name", name}};
  if (!ns.empty()) meta["namespace"] = ns;
  return {{"apiVersion", api_version}, {"kind", kind}, {"metadata", std::move(meta)}};
}

}  // namespace kruise::manager::webhook
