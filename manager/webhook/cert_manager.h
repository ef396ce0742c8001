#pragma once

// CertManager: self-managed webhook TLS, as OpenKruise's webhook controller does it, over the
// abstract KubeClient. One Sync():
//   1. Secret `kruise-webhook-certs` in the manager's namespace holds ca-key.pem, ca-cert.pem,
//      key.pem, cert.pem, tls.key, tls.crt. Missing -> generate and create (AlreadyExists ->
//      re-read and use the winner's, so all replicas converge on one CA). The server certificate is
//      regenerated when it does not verify against the CA for `<service>.<ns>.svc` (and
//      WEBHOOK_HOST if set) at now + renew_before; the CA too when it expires within
//      ca_min_validity.
//   2. The PEMs are written atomically into cert_dir (the server's CertReloader picks them up).
//   3. (With publish_when_serving, only after SetServing().) The mutating and validating webhook
//      configurations are rebuilt from their `template`
//      annotation (saved from the original `webhooks` on first sight): caBundle set, clientConfig
//      pointed at the Service (port 443) or, when `host` is set, at https://host:port/path; entries
//      whose path has no registered handler dropped. Updated only when something changed.
// External-certificates mode never writes to the API: it reads ca.crt/tls.crt/tls.key from the
// Secret, verifies them, writes the local cert dir, and fails if any caBundle differs from ca.crt.
//
// Run Sync() from Start()'s loop (every resync_period, and at once on Trigger() — call it from
// Secret/webhook-configuration watch events). All time comes from the injected Clock.
// Thread-safety: Sync() calls are serialised; Trigger/inited/ca_cert_pem are thread-safe.

#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "kube/client.h"
#include "manager/webhook/admission.h"

namespace kruise::manager::webhook {

inline constexpr char kTemplateAnnotation[] = "template";

class CertManager {
 public:
  struct Options {
    std::string namespace_ = "kruise-system";  // POD_NAMESPACE
    std::string secret_name = "kruise-webhook-certs";
    std::string service_name = "kruise-webhook-service";
    std::string cert_dir;  // WEBHOOK_CERT_DIR
    std::string host;      // WEBHOOK_HOST: URL mode when set
    int port = 9876;       // WEBHOOK_PORT (URL mode)
    absl::Duration renew_before = absl::Hours(24 * 180);
    absl::Duration ca_min_validity = absl::Hours(24 * 365);
    absl::Duration cert_validity = absl::Hours(24 * 365 * 10);
    absl::Duration resync_period = absl::Minutes(1);
    bool external_certs = false;
    // When set, Sync() leaves the webhook configurations alone until SetServing(): the API server
    // is never pointed at (URL mode) or handed a caBundle for a server that is not listening yet.
    bool publish_when_serving = false;
    std::string mutating_config = "kruise-mutating-webhook-configuration";
    std::string validating_config = "kruise-validating-webhook-configuration";
    Clock* clock = Clock::Real();
  };

  // `client` and `registry` must outlive the manager.
  CertManager(kube::KubeClient* client, const HandlerRegistry* registry, Options options);
  ~CertManager();

  absl::Status Sync();

  void Start();
  void Stop();
  void Trigger();
  // The webhook server answers now: publish the configurations (at once, in the background loop).
  void SetServing();

  // True once a Sync() put the certificates in place.
  bool inited() const;
  // True once a Sync() also wrote (or, external mode, verified) the webhook configurations.
  bool published() const;
  // The CA currently in use (PEM), "" before the first successful sync.
  std::string ca_cert_pem() const;
  std::string DnsName() const;

 private:
  struct Certs {
    std::string ca_key, ca_cert, cert, key;
  };
  absl::StatusOr<Certs> EnsureSecret();
  absl::StatusOr<Certs> ReadExternal();
  absl::Status EnsureWebhookConfig(const kube::Resource& r, const std::string& name,
                                   const std::string& ca_pem);
  absl::Status VerifyWebhookConfig(const kube::Resource& r, const std::string& name,
                                   const std::string& ca_pem);
  absl::StatusOr<Certs> Generate(const Certs* keep_ca);
  bool CertsValid(const Certs& c, bool* ca_ok) const;
  void Run();

  kube::KubeClient* client_;
  const HandlerRegistry* registry_;
  Options options_;
  absl::Mutex sync_mu_;
  mutable absl::Mutex mu_;
  bool inited_ ABSL_GUARDED_BY(mu_) = false;
  bool serving_ ABSL_GUARDED_BY(mu_) = false;
  bool published_ ABSL_GUARDED_BY(mu_) = false;
  std::string ca_pem_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool triggered_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace kruise::manager::webhook
