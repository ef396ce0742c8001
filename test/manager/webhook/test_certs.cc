#include "test/manager/webhook/test_certs.h"

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>

namespace kruise::manager::webhook::testing {

TempDir::TempDir() {
  const char* base = getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/webhook-test-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

TestPki MakePki(absl::Time now) {
  TestPki pki;
  auto ca = tls::GenerateCa({.not_before = now});
  if (!ca.ok()) throw std::runtime_error(std::string(ca.status().message()));
  pki.ca = *ca;
  auto opts = tls::ServerCertOptions::ForService("kruise-webhook-service", "kruise-system",
                                                 "127.0.0.1", now);
  auto server = tls::GenerateServerCert(pki.ca, opts);
  if (!server.ok()) throw std::runtime_error(std::string(server.status().message()));
  pki.server = *server;
  return pki;
}

void WritePki(const std::string& dir, const TestPki& pki) {
  auto r = tls::WriteCertDir(dir, pki.ca.cert_pem, pki.server.cert_pem, pki.server.key_pem);
  if (!r.ok()) throw std::runtime_error(std::string(r.status().message()));
}

}  // namespace kruise::manager::webhook::testing
