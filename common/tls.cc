#include "common/tls.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/asn1.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace kruise::tls {
namespace {

absl::Status SslError(absl::StatusCode code, absl::string_view what) {
  return absl::Status(code, absl::StrCat(what, ": ", OpenSslErrors()));
}

absl::Status Internal(absl::string_view what) {
  return SslError(absl::StatusCode::kInternal, what);
}

bool IsIpAddress(absl::string_view host, unsigned char* buf = nullptr) {
  unsigned char tmp[16];
  std::string h(host);
  return inet_pton(AF_INET, h.c_str(), buf ? buf : tmp) == 1 ||
         inet_pton(AF_INET6, h.c_str(), buf ? buf : tmp) == 1;
}

absl::Status SetValidity(X509* cert, absl::Time not_before, absl::Time not_after) {
  if (ASN1_TIME_set(X509_getm_notBefore(cert), absl::ToTimeT(not_before)) == nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(cert), absl::ToTimeT(not_after)) == nullptr) {
    return Internal("setting validity");
  }
  return absl::OkStatus();
}

absl::Status SetRandomSerial(X509* cert) {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) return Internal("RAND_bytes");
  bytes[0] &= 0x7f;  // positive
  bytes[0] |= 0x01;  // and never shorter than 16 bytes
  std::unique_ptr<BIGNUM, decltype(&BN_free)> bn(BN_bin2bn(bytes, sizeof(bytes), nullptr), BN_free);
  if (!bn || BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert)) == nullptr) {
    return Internal("setting serial");
  }
  return absl::OkStatus();
}

absl::Status SetSubjectCn(X509* cert, absl::string_view cn) {
  X509_NAME* name = X509_get_subject_name(cert);
  std::string c(cn);
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(c.c_str()), -1, -1,
                                 0) != 1) {
    return Internal("setting subject CN");
  }
  return absl::OkStatus();
}

absl::Status AddExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return Internal(absl::StrCat("extension ", OBJ_nid2sn(nid), "=", value));
  int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (ok != 1) return Internal("adding extension");
  return absl::OkStatus();
}

absl::StatusOr<std::string> BioToString(BIO* bio) {
  char* data = nullptr;
  long len = BIO_get_mem_data(bio, &data);
  if (len < 0) return Internal("reading memory BIO");
  return std::string(data, static_cast<size_t>(len));
}

BioPtr MemBio(absl::string_view text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

absl::StatusOr<absl::Time> AsnToTime(const ASN1_TIME* t) {
  struct tm tm;
  if (ASN1_TIME_to_tm(t, &tm) != 1) return Internal("decoding ASN1_TIME");
  return absl::FromTM(tm, absl::UTCTimeZone());
}

}  // namespace

std::string OpenSslErrors() {
  std::string out;
  unsigned long e;
  while ((e = ERR_get_error()) != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

ServerCertOptions ServerCertOptions::ForService(absl::string_view service, absl::string_view ns,
                                                absl::string_view host, absl::Time not_before) {
  ServerCertOptions o;
  std::string svc = absl::StrCat(service, ".", ns, ".svc");
  o.common_name = svc;
  o.dns_names = {svc, absl::StrCat(svc, ".cluster.local"), "localhost"};
  if (!host.empty()) {
    if (IsIpAddress(host)) {
      o.ip_addresses.emplace_back(host);
    } else if (host != "localhost" && host != svc) {
      o.dns_names.emplace_back(host);
    }
  }
  o.not_before = not_before;
  return o;
}

absl::StatusOr<PkeyPtr> GenerateKey() {
  PkeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return Internal("generating P-256 key");
  return key;
}

absl::StatusOr<CertKeyPem> GenerateCa(const CaOptions& options) {
  ASSIGN_OR_RETURN(PkeyPtr key, GenerateKey());
  X509Ptr cert(X509_new());
  if (!cert) return Internal("X509_new");
  X509_set_version(cert.get(), 2);
  RETURN_IF_ERROR(SetRandomSerial(cert.get()));
  // Backdate by an hour for clock skew between replicas and the API server.
  RETURN_IF_ERROR(SetValidity(cert.get(), options.not_before - absl::Hours(1),
                              options.not_before + options.validity));
  RETURN_IF_ERROR(SetSubjectCn(cert.get(), options.common_name));
  X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get()));
  X509_set_pubkey(cert.get(), key.get());
  RETURN_IF_ERROR(AddExt(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE"));
  RETURN_IF_ERROR(AddExt(cert.get(), cert.get(), NID_key_usage,
                         "critical,digitalSignature,keyCertSign,cRLSign"));
  RETURN_IF_ERROR(AddExt(cert.get(), cert.get(), NID_subject_key_identifier, "hash"));
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) return Internal("signing CA");
  CertKeyPem out;
  ASSIGN_OR_RETURN(out.cert_pem, CertToPem(cert.get()));
  ASSIGN_OR_RETURN(out.key_pem, KeyToPem(key.get()));
  return out;
}

absl::StatusOr<CertKeyPem> GenerateServerCert(const CertKeyPem& ca,
                                              const ServerCertOptions& options) {
  ASSIGN_OR_RETURN(X509Ptr ca_cert, ParseCertPem(ca.cert_pem));
  ASSIGN_OR_RETURN(PkeyPtr ca_key, ParseKeyPem(ca.key_pem));
  if (X509_check_private_key(ca_cert.get(), ca_key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError("CA key does not match the CA certificate");
  }
  ASSIGN_OR_RETURN(absl::Time ca_not_after, AsnToTime(X509_get0_notAfter(ca_cert.get())));
  ASSIGN_OR_RETURN(PkeyPtr key, GenerateKey());
  X509Ptr cert(X509_new());
  if (!cert) return Internal("X509_new");
  X509_set_version(cert.get(), 2);
  RETURN_IF_ERROR(SetRandomSerial(cert.get()));
  absl::Time not_after = std::min(options.not_before + options.validity, ca_not_after);
  RETURN_IF_ERROR(SetValidity(cert.get(), options.not_before - absl::Hours(1), not_after));
  RETURN_IF_ERROR(SetSubjectCn(cert.get(), options.common_name));
  X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_cert.get()));
  X509_set_pubkey(cert.get(), key.get());
  RETURN_IF_ERROR(AddExt(cert.get(), ca_cert.get(), NID_basic_constraints, "critical,CA:FALSE"));
  RETURN_IF_ERROR(AddExt(cert.get(), ca_cert.get(), NID_key_usage, "critical,digitalSignature"));
  RETURN_IF_ERROR(AddExt(cert.get(), ca_cert.get(), NID_ext_key_usage, "serverAuth"));
  RETURN_IF_ERROR(AddExt(cert.get(), ca_cert.get(), NID_authority_key_identifier, "keyid:always"));
  std::string san;
  for (const std::string& d : options.dns_names) {
    if (d.find_first_of(",\n") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("bad DNS name ", d));
    }
    absl::StrAppend(&san, san.empty() ? "" : ",", "DNS:", d);
  }
  for (const std::string& ip : options.ip_addresses) {
    if (!IsIpAddress(ip)) return absl::InvalidArgumentError(absl::StrCat("bad IP address ", ip));
    absl::StrAppend(&san, san.empty() ? "" : ",", "IP:", ip);
  }
  if (!san.empty()) {
    RETURN_IF_ERROR(AddExt(cert.get(), ca_cert.get(), NID_subject_alt_name, san));
  }
  if (X509_sign(cert.get(), ca_key.get(), EVP_sha256()) == 0) {
    return Internal("signing server cert");
  }
  CertKeyPem out;
  ASSIGN_OR_RETURN(out.cert_pem, CertToPem(cert.get()));
  ASSIGN_OR_RETURN(out.key_pem, KeyToPem(key.get()));
  return out;
}

absl::StatusOr<X509Ptr> ParseCertPem(absl::string_view pem) {
  BioPtr bio = MemBio(pem);
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) {
    ERR_clear_error();
    return absl::InvalidArgumentError("not a PEM certificate");
  }
  return cert;
}

absl::StatusOr<std::vector<X509Ptr>> ParseCertChainPem(absl::string_view pem) {
  BioPtr bio = MemBio(pem);
  std::vector<X509Ptr> out;
  while (true) {
    X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (!cert) break;
    out.push_back(std::move(cert));
  }
  ERR_clear_error();  // the end of input shows up as an error
  if (out.empty()) return absl::InvalidArgumentError("no PEM certificate found");
  return out;
}

absl::StatusOr<PkeyPtr> ParseKeyPem(absl::string_view pem) {
  BioPtr bio = MemBio(pem);
  PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) {
    ERR_clear_error();
    return absl::InvalidArgumentError("not a PEM private key");
  }
  return key;
}

absl::StatusOr<std::string> CertToPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return Internal("encoding certificate");
  return BioToString(bio.get());
}

absl::StatusOr<std::string> KeyToPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return Internal("encoding key");
  }
  return BioToString(bio.get());
}

absl::StatusOr<absl::Time> NotAfter(absl::string_view cert_pem) {
  ASSIGN_OR_RETURN(X509Ptr cert, ParseCertPem(cert_pem));
  return AsnToTime(X509_get0_notAfter(cert.get()));
}

std::string SerialHex(X509* cert) {
  std::unique_ptr<BIGNUM, decltype(&BN_free)> bn(
      ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr), BN_free);
  if (!bn) return "";
  char* hex = BN_bn2hex(bn.get());
  std::string out(hex ? hex : "");
  OPENSSL_free(hex);
  return out;
}

absl::StatusOr<std::string> SerialHex(absl::string_view cert_pem) {
  ASSIGN_OR_RETURN(X509Ptr cert, ParseCertPem(cert_pem));
  return SerialHex(cert.get());
}

absl::Status KeyMatchesCert(absl::string_view cert_pem, absl::string_view key_pem) {
  ASSIGN_OR_RETURN(X509Ptr cert, ParseCertPem(cert_pem));
  ASSIGN_OR_RETURN(PkeyPtr key, ParseKeyPem(key_pem));
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError("private key does not match the certificate");
  }
  return absl::OkStatus();
}

absl::Status VerifyCert(absl::string_view cert_pem, absl::string_view ca_pem,
                        absl::string_view host, absl::Time at) {
  ASSIGN_OR_RETURN(std::vector<X509Ptr> chain, ParseCertChainPem(cert_pem));
  ASSIGN_OR_RETURN(std::vector<X509Ptr> roots, ParseCertChainPem(ca_pem));
  X509StorePtr store(X509_STORE_new());
  if (!store) return Internal("X509_STORE_new");
  for (auto& r : roots) {
    if (X509_STORE_add_cert(store.get(), r.get()) != 1) return Internal("adding CA");
  }
  std::unique_ptr<STACK_OF(X509), decltype([](STACK_OF(X509) * s) { sk_X509_free(s); })> untrusted(
      sk_X509_new_null());
  for (size_t i = 1; i < chain.size(); ++i) sk_X509_push(untrusted.get(), chain[i].get());
  X509StoreCtxPtr ctx(X509_STORE_CTX_new());
  if (!ctx || X509_STORE_CTX_init(ctx.get(), store.get(), chain[0].get(), untrusted.get()) != 1) {
    return Internal("X509_STORE_CTX_init");
  }
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx.get());
  X509_VERIFY_PARAM_set_time(param, absl::ToTimeT(at));
  X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_SERVER);
  if (!host.empty()) {
    std::string h(host);
    int ok = IsIpAddress(h) ? X509_VERIFY_PARAM_set1_ip_asc(param, h.c_str())
                            : X509_VERIFY_PARAM_set1_host(param, h.data(), h.size());
    if (ok != 1) return Internal("setting verify host");
  }
  if (X509_verify_cert(ctx.get()) != 1) {
    int err = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    return absl::UnauthenticatedError(
        absl::StrCat("certificate verification failed: ", X509_verify_cert_error_string(err)));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> ExpiresWithin(absl::string_view cert_pem, absl::Time now,
                                   absl::Duration window) {
  ASSIGN_OR_RETURN(absl::Time not_after, NotAfter(cert_pem));
  return not_after < now + window;
}

absl::Status WriteFileAtomic(const std::string& path, absl::string_view content, int mode) {
  std::filesystem::path p(path);
  std::filesystem::path dir = p.parent_path().empty() ? "." : p.parent_path();
  std::string tmpl = (dir / ("." + p.filename().string() + ".tmpXXXXXX")).string();
  int fd = mkstemp(tmpl.data());
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("creating temp file in ", dir.string(), ": ", std::strerror(errno)));
  }
  auto fail = [&](absl::string_view what) {
    int e = errno;
    close(fd);
    unlink(tmpl.c_str());
    return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(e)));
  };
  if (fchmod(fd, static_cast<mode_t>(mode)) != 0) return fail("chmod");
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = write(fd, content.data() + off, content.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("writing");
    }
    off += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) return fail("fsync");
  if (close(fd) != 0) {
    unlink(tmpl.c_str());
    return absl::InternalError(absl::StrCat("closing ", path, ": ", std::strerror(errno)));
  }
  if (rename(tmpl.c_str(), path.c_str()) != 0) {
    int e = errno;
    unlink(tmpl.c_str());
    return absl::InternalError(absl::StrCat("renaming onto ", path, ": ", std::strerror(e)));
  }
  int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<bool> WriteCertDir(const std::string& dir, absl::string_view ca_cert_pem,
                                  absl::string_view cert_pem, absl::string_view key_pem) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("creating ", dir, ": ", ec.message()));
  // Keys before certificates (see the header).
  const std::pair<const char*, absl::string_view> files[] = {
      {kCaCertFile, ca_cert_pem}, {kKeyFile, key_pem},      {kCertFile, cert_pem},
      {kTlsKeyFile, key_pem},     {kTlsCertFile, cert_pem},
  };
  bool changed = false;
  for (const auto& [name, content] : files) {
    std::string path = absl::StrCat(dir, "/", name);
    absl::StatusOr<std::string> old = ReadFile(path);
    if (old.ok() && *old == content) continue;
    bool is_key = absl::string_view(name).find("key") != absl::string_view::npos;
    RETURN_IF_ERROR(WriteFileAtomic(path, content, is_key ? 0600 : 0644));
    changed = true;
  }
  return changed;
}

absl::Status ConfigureServerCtx(SSL_CTX* ctx) {
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
    return Internal("setting minimum TLS version");
  }
  // TLS 1.2: ECDHE + AEAD only (the Go and Kubernetes defaults); TLS 1.3 suites are OpenSSL's.
  if (SSL_CTX_set_cipher_list(ctx,
                              "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                              "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                              "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305") != 1) {
    return Internal("setting ciphers");
  }
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                               SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_SSLv3 | SSL_OP_NO_TLSv1 |
                               SSL_OP_NO_TLSv1_1);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
  static const unsigned char kSessionId[] = "kruise-webhook";
  SSL_CTX_set_session_id_context(ctx, kSessionId, sizeof(kSessionId) - 1);
  return absl::OkStatus();
}

absl::StatusOr<SslCtxPtr> NewServerCtx() {
  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (!ctx) return Internal("SSL_CTX_new");
  RETURN_IF_ERROR(ConfigureServerCtx(ctx.get()));
  return ctx;
}

// --- CertReloader ---

CertReloader::Loaded::~Loaded() {
  if (chain != nullptr) sk_X509_pop_free(chain, X509_free);
}

CertReloader::CertReloader(Options options) : options_(std::move(options)) {}

CertReloader::~CertReloader() { Stop(); }

namespace {
bool Stamp(const std::string& path, int64_t* mtime_ns, int64_t* size, uint64_t* inode) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return false;
  *mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  *size = st.st_size;
  *inode = st.st_ino;
  return true;
}
}  // namespace

absl::Status CertReloader::Load() {
  absl::MutexLock lock(&load_mu_);
  cert_stamp_ = {};
  key_stamp_ = {};
  return LoadLocked();
}

absl::Status CertReloader::LoadLocked() {
  FileStamp cs, ks;
  if (!Stamp(options_.cert_file, &cs.mtime_ns, &cs.size, &cs.inode)) {
    return absl::NotFoundError(absl::StrCat("cannot stat ", options_.cert_file));
  }
  if (!Stamp(options_.key_file, &ks.mtime_ns, &ks.size, &ks.inode)) {
    return absl::NotFoundError(absl::StrCat("cannot stat ", options_.key_file));
  }
  ASSIGN_OR_RETURN(std::string cert_text, ReadFile(options_.cert_file));
  ASSIGN_OR_RETURN(std::string key_text, ReadFile(options_.key_file));
  if (cert_text == cert_text_ && key_text == key_text_) {
    cert_stamp_ = cs;
    key_stamp_ = ks;
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(std::vector<X509Ptr> chain, ParseCertChainPem(cert_text));
  ASSIGN_OR_RETURN(PkeyPtr key, ParseKeyPem(key_text));
  if (X509_check_private_key(chain[0].get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::FailedPreconditionError("key does not match certificate (files mid-update?)");
  }
  auto loaded = std::make_shared<Loaded>();
  loaded->serial_hex = SerialHex(chain[0].get());
  loaded->cert = std::move(chain[0]);
  loaded->chain = sk_X509_new_null();
  for (size_t i = 1; i < chain.size(); ++i) sk_X509_push(loaded->chain, chain[i].release());
  loaded->key = std::move(key);
  {
    absl::MutexLock lock(&mu_);
    current_ = std::move(loaded);
  }
  cert_stamp_ = cs;
  key_stamp_ = ks;
  cert_text_ = std::move(cert_text);
  key_text_ = std::move(key_text);
  reloads_.fetch_add(1);
  Logger("tls")->info("serving certificate {} (serial {})", options_.cert_file,
                      Current()->serial_hex);
  return absl::OkStatus();
}

absl::StatusOr<bool> CertReloader::PollOnce() {
  absl::MutexLock lock(&load_mu_);
  FileStamp cs, ks;
  bool have = Stamp(options_.cert_file, &cs.mtime_ns, &cs.size, &cs.inode) &&
              Stamp(options_.key_file, &ks.mtime_ns, &ks.size, &ks.inode);
  if (!have || (cs == cert_stamp_ && ks == key_stamp_)) return false;
  int64_t before = reloads_.load();
  RETURN_IF_ERROR(LoadLocked());
  return reloads_.load() != before;
}

std::shared_ptr<const CertReloader::Loaded> CertReloader::Current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

int CertReloader::CertCallback(SSL* ssl, void* arg) {
  auto* self = static_cast<CertReloader*>(arg);
  std::shared_ptr<const Loaded> cur = self->Current();
  if (!cur) return 0;
  // SSL_use_cert_and_key takes its own references.
  if (SSL_use_cert_and_key(ssl, cur->cert.get(), cur->key.get(), cur->chain, 1) != 1) return 0;
  return 1;
}

void CertReloader::Install(SSL_CTX* ctx) { SSL_CTX_set_cert_cb(ctx, &CertCallback, this); }

void CertReloader::Start() {
  absl::MutexLock lock(&mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
}

void CertReloader::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void CertReloader::Run() {
  auto log = Logger("tls");
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      absl::Time deadline = options_.clock->Now() + options_.poll_interval;
      if (options_.clock->AwaitWithDeadline(&mu_, absl::Condition(&stop_), deadline)) return;
    }
    absl::StatusOr<bool> r = PollOnce();
    if (!r.ok()) log->warn("certificate reload of {} failed: {}", options_.cert_file, r.status());
  }
}

}  // namespace kruise::tls
