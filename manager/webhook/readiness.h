#pragma once

// ReadinessChecker: the manager's `webhook-ready` readiness check. Does a real HTTPS GET of
// https://<host>:<port>/healthz, trusting only the CA in `<cert_dir>/ca-cert.pem`, so it fails when
// the server is down, serves a certificate the CA does not sign, or serves it for another name.
// The CA file is re-read on every check and the curl handle rebuilt when its content changed
// (after a CA rotation); otherwise the handle, and its keep-alive connection, are reused.
//
// Thread-safety: Check() is thread-safe (serialised); it blocks up to `timeout`.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kruise::manager::webhook {

class ReadinessChecker {
 public:
  struct Options {
    std::string host = "localhost";  // must be a SAN of the served certificate
    int port = 9876;
    std::string cert_dir = "";
    absl::Duration timeout = absl::Seconds(3);
  };
  explicit ReadinessChecker(Options options);
  ~ReadinessChecker();

  // OK on HTTP 200. Errors: kFailedPrecondition (no CA file), kUnavailable (connect/TLS/HTTP
  // failure, with curl's reason).
  absl::Status Check();

 private:
  struct CurlDeleter {
    void operator()(void* h) const;
  };
  Options options_;
  absl::Mutex mu_;
  std::string ca_pem_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<void, CurlDeleter> curl_ ABSL_GUARDED_BY(mu_);
  int rebuilds_ ABSL_GUARDED_BY(mu_) = 0;

 public:
  int rebuilds() {
    absl::MutexLock lock(&mu_);
    return rebuilds_;
  }
};

}  // namespace kruise::manager::webhook
