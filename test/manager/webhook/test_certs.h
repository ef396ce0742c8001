#pragma once

// Helpers shared by the webhook tests: a temporary directory and a CA + server cert written as a
// cert dir.

#include <string>

#include "absl/time/time.h"
#include "common/tls.h"

namespace kruise::manager::webhook::testing {

// mkdtemp under $TMPDIR (or /tmp); removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct TestPki {
  tls::CertKeyPem ca;
  tls::CertKeyPem server;
};
// A CA and a server cert for `localhost` and 127.0.0.1, valid around `now`.
TestPki MakePki(absl::Time now = absl::Now());
// Writes `pki` into `dir` as a cert dir (ca-cert.pem, tls.crt, tls.key, ...).
void WritePki(const std::string& dir, const TestPki& pki);

}  // namespace kruise::manager::webhook::testing
