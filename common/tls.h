#pragma once

// TLS and certificate helpers on OpenSSL 3: RAII handles, a self-signed CA and CA-signed server
// certificates, PEM encoding, chain/host/time verification, atomic cert-dir writes, a hardened
// server SSL_CTX and CertReloader (hot reload of the served certificate without restart).
//
// Key algorithm: ECDSA P-256. Generating a key takes ~1 ms (RSA-2048: 50-500 ms, which matters for
// tests and for every replica's first start), a P-256 signature in the TLS handshake is several
// times cheaper for the server than an RSA-2048 one, and every TLS client we care about
// (kube-apiserver's Go crypto/tls, curl, OpenSSL) supports it. Keys are written as PKCS#8
// ("BEGIN PRIVATE KEY"), which Go, OpenSSL and cert-manager all read.
//
// Thread-safety: the free functions are thread-safe (they touch only their arguments).
// CertReloader is thread-safe; see its comment.

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace kruise::tls {

struct PkeyDeleter {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct X509Deleter {
  void operator()(X509* p) const { X509_free(p); }
};
struct SslCtxDeleter {
  void operator()(SSL_CTX* p) const { SSL_CTX_free(p); }
};
struct SslDeleter {
  void operator()(SSL* p) const { SSL_free(p); }
};
struct BioDeleter {
  void operator()(BIO* p) const { BIO_free_all(p); }
};
struct X509StoreDeleter {
  void operator()(X509_STORE* p) const { X509_STORE_free(p); }
};
struct X509StoreCtxDeleter {
  void operator()(X509_STORE_CTX* p) const { X509_STORE_CTX_free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyDeleter>;
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxDeleter>;
using SslPtr = std::unique_ptr<SSL, SslDeleter>;
using BioPtr = std::unique_ptr<BIO, BioDeleter>;
using X509StorePtr = std::unique_ptr<X509_STORE, X509StoreDeleter>;
using X509StoreCtxPtr = std::unique_ptr<X509_STORE_CTX, X509StoreCtxDeleter>;

// The OpenSSL error queue as text (and cleared), for status messages.
std::string OpenSslErrors();

// A certificate and its private key, both PEM.
struct CertKeyPem {
  std::string cert_pem;
  std::string key_pem;
};

struct CaOptions {
  std::string common_name = "webhook-cert-ca";
  absl::Time not_before;  // required: take it from a Clock
  absl::Duration validity = absl::Hours(24 * 365 * 10);
};

struct ServerCertOptions {
  std::string common_name;
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;  // textual IPv4/IPv6
  absl::Time not_before;                  // required
  absl::Duration validity = absl::Hours(24 * 365 * 10);

  // CN `<service>.<ns>.svc`; SANs `<service>.<ns>.svc`, `<service>.<ns>.svc.cluster.local`,
  // `localhost`, plus `host` as an IP SAN (if it parses as an IP) or a DNS SAN (otherwise, if
  // non-empty).
  static ServerCertOptions ForService(absl::string_view service, absl::string_view ns,
                                      absl::string_view host, absl::Time not_before);
};

// A fresh ECDSA P-256 key.
absl::StatusOr<PkeyPtr> GenerateKey();
// A self-signed CA (basicConstraints CA:TRUE critical, keyUsage keyCertSign|cRLSign).
absl::StatusOr<CertKeyPem> GenerateCa(const CaOptions& options);
// A server certificate signed by `ca` (extKeyUsage serverAuth, SANs from options). The notAfter is
// clipped to the CA's notAfter so the chain never outlives its root.
absl::StatusOr<CertKeyPem> GenerateServerCert(const CertKeyPem& ca,
                                              const ServerCertOptions& options);

// PEM decoding/encoding. Errors: kInvalidArgument for text that is not the expected PEM.
absl::StatusOr<X509Ptr> ParseCertPem(absl::string_view pem);
absl::StatusOr<std::vector<X509Ptr>> ParseCertChainPem(absl::string_view pem);
absl::StatusOr<PkeyPtr> ParseKeyPem(absl::string_view pem);
absl::StatusOr<std::string> CertToPem(X509* cert);
absl::StatusOr<std::string> KeyToPem(EVP_PKEY* key);

absl::StatusOr<absl::Time> NotAfter(absl::string_view cert_pem);
// Serial number as upper-case hex.
std::string SerialHex(X509* cert);
absl::StatusOr<std::string> SerialHex(absl::string_view cert_pem);
// OK when the key belongs to the certificate.
absl::Status KeyMatchesCert(absl::string_view cert_pem, absl::string_view key_pem);

// OK when `cert_pem` (leaf, optionally followed by intermediates) chains to `ca_pem`, is valid at
// time `at` (every certificate of the chain) and, when `host` is non-empty, is valid for `host`
// (an IP address is matched against IP SANs, anything else against DNS SANs).
// Errors: kInvalidArgument (bad PEM), kUnauthenticated (verification failed, with the reason).
absl::Status VerifyCert(absl::string_view cert_pem, absl::string_view ca_pem,
                        absl::string_view host, absl::Time at);

// True when the certificate's notAfter is before now + window (or already passed).
absl::StatusOr<bool> ExpiresWithin(absl::string_view cert_pem, absl::Time now,
                                   absl::Duration window);

// Writes `content` to `path` atomically: a temporary file in the same directory, fsync, rename
// over `path`, fsync of the directory. Readers see the old or the new content, never a mix.
absl::Status WriteFileAtomic(const std::string& path, absl::string_view content, int mode = 0600);

// The cert-dir file names OpenKruise uses.
inline constexpr char kCaCertFile[] = "ca-cert.pem";
inline constexpr char kCertFile[] = "cert.pem";
inline constexpr char kKeyFile[] = "key.pem";
inline constexpr char kTlsCertFile[] = "tls.crt";
inline constexpr char kTlsKeyFile[] = "tls.key";

// Writes ca-cert.pem, cert.pem, key.pem, tls.crt and tls.key into `dir` (created if missing),
// each atomically, skipping files whose content is already right. The server certificate and key
// are written key first, then cert, so a reloader never pairs a new cert with an old key for long
// (CertReloader also refuses mismatched pairs). Returns whether any file changed.
absl::StatusOr<bool> WriteCertDir(const std::string& dir, absl::string_view ca_cert_pem,
                                  absl::string_view cert_pem, absl::string_view key_pem);

absl::StatusOr<std::string> ReadFile(const std::string& path);

// Applies our server policy to `ctx`: TLS 1.2 minimum, AEAD-only TLS 1.2 ciphers with forward
// secrecy (ECDHE), server cipher preference, no compression/renegotiation, session cache on.
absl::Status ConfigureServerCtx(SSL_CTX* ctx);
// A new server SSL_CTX with ConfigureServerCtx applied.
absl::StatusOr<SslCtxPtr> NewServerCtx();

// CertReloader keeps the current certificate/key pair of a cert dir (or two explicit files) and
// serves it on every TLS handshake through SSL_CTX_set_cert_cb, so replacing the files changes what
// new connections get without restarting the listener; established connections keep their session.
//
//   CertReloader reloader({.cert_file = dir + "/tls.crt", .key_file = dir + "/tls.key"});
//   RETURN_IF_ERROR(reloader.Load());
//   reloader.Install(ctx);      // ctx must not outlive the reloader
//   reloader.Start();           // polls every `poll_interval` on `clock`
//
// Change detection: (mtime, size, inode) of both files, then content. A pair whose key does not
// match its certificate (caught between two renames) is ignored and retried on the next poll.
// Thread-safety: all methods are thread-safe; the cert callback runs on server threads.
class CertReloader {
 public:
  struct Options {
    std::string cert_file = "";
    std::string key_file = "";
    Clock* clock = Clock::Real();
    absl::Duration poll_interval = absl::Seconds(2);
  };
  struct Loaded {
    X509Ptr cert;
    STACK_OF(X509) * chain = nullptr;  // intermediates (owned)
    PkeyPtr key;
    std::string serial_hex;
    ~Loaded();
  };

  explicit CertReloader(Options options);
  ~CertReloader();
  CertReloader(const CertReloader&) = delete;
  CertReloader& operator=(const CertReloader&) = delete;

  // Loads the files now. Errors: kNotFound / kInvalidArgument; the previous pair stays in use.
  absl::Status Load();
  // Reloads when the files changed. Returns whether a new pair was installed.
  absl::StatusOr<bool> PollOnce();
  void Install(SSL_CTX* ctx);
  void Start();
  void Stop();

  std::shared_ptr<const Loaded> Current() const;
  int64_t reload_count() const { return reloads_.load(); }

 private:
  struct FileStamp {
    int64_t mtime_ns = 0;
    int64_t size = -1;
    uint64_t inode = 0;
    bool operator==(const FileStamp&) const = default;
  };
  static int CertCallback(SSL* ssl, void* arg);
  absl::Status LoadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(load_mu_);
  void Run();

  const Options options_;
  absl::Mutex load_mu_;  // serialises loads
  FileStamp cert_stamp_ ABSL_GUARDED_BY(load_mu_);
  FileStamp key_stamp_ ABSL_GUARDED_BY(load_mu_);
  std::string cert_text_ ABSL_GUARDED_BY(load_mu_);
  std::string key_text_ ABSL_GUARDED_BY(load_mu_);
  mutable absl::Mutex mu_;
  std::shared_ptr<const Loaded> current_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
  std::atomic<int64_t> reloads_{0};
};

}  // namespace kruise::tls
