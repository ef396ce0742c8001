#include "manager/webhook/readiness.h"

#include <curl/curl.h>

#include "absl/strings/str_cat.h"
#include "common/tls.h"
#include "common/url.h"

namespace kruise::manager::webhook {
namespace {

size_t Discard(char*, size_t size, size_t n, void*) { return size * n; }

}  // namespace

void ReadinessChecker::CurlDeleter::operator()(void* h) const {
  curl_easy_cleanup(static_cast<CURL*>(h));
}

ReadinessChecker::ReadinessChecker(Options options) : options_(std::move(options)) {}
ReadinessChecker::~ReadinessChecker() = default;

absl::Status ReadinessChecker::Check() {
  absl::MutexLock lock(&mu_);
  std::string ca_path = absl::StrCat(options_.cert_dir, "/", tls::kCaCertFile);
  absl::StatusOr<std::string> ca = tls::ReadFile(ca_path);
  if (!ca.ok() || ca->empty()) {
    return absl::FailedPreconditionError(absl::StrCat("no CA certificate at ", ca_path));
  }
  if (!curl_ || *ca != ca_pem_) {
    curl_.reset(curl_easy_init());
    if (!curl_) return absl::InternalError("curl_easy_init failed");
    ca_pem_ = std::move(*ca);
    ++rebuilds_;
    CURL* h = static_cast<CURL*>(curl_.get());
    curl_blob blob{ca_pem_.data(), ca_pem_.size(), CURL_BLOB_COPY};
    curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
    curl_easy_setopt(h, CURLOPT_CAPATH, nullptr);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(h, CURLOPT_SSLVERSION, CURL_SSLVERSION_TLSv1_2);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &Discard);
    curl_easy_setopt(
        h, CURLOPT_URL,
        absl::StrCat("https://", UrlHost(options_.host), ":", options_.port, "/healthz").c_str());
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(absl::ToInt64Milliseconds(options_.timeout)));
  }
  CURL* h = static_cast<CURL*>(curl_.get());
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  CURLcode rc = curl_easy_perform(h);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, nullptr);
  if (rc != CURLE_OK) {
    return absl::UnavailableError(absl::StrCat("webhook /healthz: ", curl_easy_strerror(rc),
                                               errbuf[0] ? absl::StrCat(" (", errbuf, ")") : ""));
  }
  long code = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
  if (code != 200) {
    return absl::UnavailableError(absl::StrCat("webhook /healthz answered HTTP ", code));
  }
  return absl::OkStatus();
}

}  // namespace kruise::manager::webhook
