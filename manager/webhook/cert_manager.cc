#include "manager/webhook/cert_manager.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/tls.h"
#include "common/url.h"
#include "kube/errors.h"

namespace kruise::manager::webhook {
namespace {

using kube::Json;

kube::Resource SecretsResource() { return {"", "v1", "secrets", "Secret", true}; }
kube::Resource MutatingResource() {
  return {"admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
          "MutatingWebhookConfiguration", false};
}
kube::Resource ValidatingResource() {
  return {"admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
          "ValidatingWebhookConfiguration", false};
}

constexpr char kCaKey[] = "ca-key.pem";
constexpr char kCaCert[] = "ca-cert.pem";
constexpr char kKey[] = "key.pem";
constexpr char kCert[] = "cert.pem";
constexpr char kTlsKey[] = "tls.key";
constexpr char kTlsCert[] = "tls.crt";
constexpr char kExternalCa[] = "ca.crt";

std::string DataField(const Json& secret, const char* key) {
  auto data = secret.find("data");
  if (data == secret.end() || !data->is_object()) return "";
  auto it = data->find(key);
  if (it == data->end() || !it->is_string()) return "";
  std::string out;
  if (!absl::Base64Unescape(it->get<std::string>(), &out)) return "";
  return out;
}

// The path a webhook entry calls: clientConfig.service.path or the path of clientConfig.url.
std::string WebhookPath(const Json& webhook) {
  auto cc = webhook.find("clientConfig");
  if (cc == webhook.end() || !cc->is_object()) return "";
  if (auto svc = cc->find("service"); svc != cc->end() && svc->is_object()) {
    auto p = svc->find("path");
    return p != svc->end() && p->is_string() ? p->get<std::string>() : "";
  }
  if (auto url = cc->find("url"); url != cc->end() && url->is_string()) {
    std::string u = url->get<std::string>();
    size_t scheme = u.find("://");
    size_t slash = u.find('/', scheme == std::string::npos ? 0 : scheme + 3);
    if (slash == std::string::npos) return "";
    std::string path = u.substr(slash);
    if (size_t q = path.find_first_of("?#"); q != std::string::npos) path.resize(q);
    return path;
  }
  return "";
}

}  // namespace

CertManager::CertManager(kube::KubeClient* client, const HandlerRegistry* registry, Options options)
    : client_(client), registry_(registry), options_(std::move(options)) {}

CertManager::~CertManager() { Stop(); }

std::string CertManager::DnsName() const {
  return absl::StrCat(options_.service_name, ".", options_.namespace_, ".svc");
}

bool CertManager::inited() const {
  absl::MutexLock lock(&mu_);
  return inited_;
}

bool CertManager::published() const {
  absl::MutexLock lock(&mu_);
  return published_;
}

std::string CertManager::ca_cert_pem() const {
  absl::MutexLock lock(&mu_);
  return ca_pem_;
}

absl::StatusOr<CertManager::Certs> CertManager::Generate(const Certs* keep_ca) {
  absl::Time now = options_.clock->Now();
  Certs out;
  if (keep_ca != nullptr) {
    out.ca_cert = keep_ca->ca_cert;
    out.ca_key = keep_ca->ca_key;
  } else {
    ASSIGN_OR_RETURN(tls::CertKeyPem ca, tls::GenerateCa({.not_before = now}));
    out.ca_cert = std::move(ca.cert_pem);
    out.ca_key = std::move(ca.key_pem);
  }
  tls::ServerCertOptions so = tls::ServerCertOptions::ForService(
      options_.service_name, options_.namespace_, options_.host, now);
  so.validity = options_.cert_validity;
  ASSIGN_OR_RETURN(tls::CertKeyPem server, tls::GenerateServerCert({out.ca_cert, out.ca_key}, so));
  out.cert = std::move(server.cert_pem);
  out.key = std::move(server.key_pem);
  return out;
}

bool CertManager::CertsValid(const Certs& c, bool* ca_ok) const {
  absl::Time now = options_.clock->Now();
  *ca_ok = false;
  if (c.ca_cert.empty() || c.ca_key.empty()) return false;
  if (!tls::KeyMatchesCert(c.ca_cert, c.ca_key).ok()) return false;
  absl::StatusOr<bool> ca_expiring = tls::ExpiresWithin(c.ca_cert, now, options_.ca_min_validity);
  if (!ca_expiring.ok() || *ca_expiring) return false;
  *ca_ok = true;
  if (c.cert.empty() || c.key.empty() || !tls::KeyMatchesCert(c.cert, c.key).ok()) return false;
  absl::Time at = now + options_.renew_before;
  if (!tls::VerifyCert(c.cert, c.ca_cert, DnsName(), at).ok()) return false;
  if (!options_.host.empty() && !tls::VerifyCert(c.cert, c.ca_cert, options_.host, at).ok()) {
    return false;
  }
  return true;
}

absl::StatusOr<CertManager::Certs> CertManager::EnsureSecret() {
  auto log = Logger("webhook");
  const kube::Resource secrets = SecretsResource();
  absl::StatusOr<Json> secret = client_->Get(secrets, options_.namespace_, options_.secret_name);
  if (!secret.ok() && kube::IsNotFound(secret.status())) {
    ASSIGN_OR_RETURN(Certs fresh, Generate(nullptr));
    Json obj = {{"apiVersion", "v1"},
                {"kind", "Secret"},
                {"metadata", {{"name", options_.secret_name}, {"namespace", options_.namespace_}}},
                {"type", "Opaque"},
                {"data",
                 {{kCaKey, absl::Base64Escape(fresh.ca_key)},
                  {kCaCert, absl::Base64Escape(fresh.ca_cert)},
                  {kKey, absl::Base64Escape(fresh.key)},
                  {kCert, absl::Base64Escape(fresh.cert)},
                  {kTlsKey, absl::Base64Escape(fresh.key)},
                  {kTlsCert, absl::Base64Escape(fresh.cert)}}}};
    absl::StatusOr<Json> created = client_->Create(secrets, options_.namespace_, obj);
    if (created.ok()) {
      log->info("created webhook certificate Secret {}/{}", options_.namespace_,
                options_.secret_name);
      return fresh;
    }
    if (!kube::IsAlreadyExists(created.status())) {
      return Annotate(created.status(), "creating webhook cert Secret");
    }
    // Another replica won the race: use its certificates.
    secret = client_->Get(secrets, options_.namespace_, options_.secret_name);
  }
  if (!secret.ok()) return Annotate(secret.status(), "reading webhook cert Secret");

  Certs cur{DataField(*secret, kCaKey), DataField(*secret, kCaCert), DataField(*secret, kCert),
            DataField(*secret, kKey)};
  bool ca_ok = false;
  if (CertsValid(cur, &ca_ok) && DataField(*secret, kTlsCert) == cur.cert &&
      DataField(*secret, kTlsKey) == cur.key) {
    return cur;
  }
  if (!ca_ok) {
    log->info("webhook CA in Secret {}/{} is missing, invalid or expiring: regenerating CA",
              options_.namespace_, options_.secret_name);
  } else {
    log->info("webhook serving certificate in Secret {}/{} needs renewal", options_.namespace_,
              options_.secret_name);
  }
  ASSIGN_OR_RETURN(Certs fresh, Generate(ca_ok ? &cur : nullptr));
  Json updated = *secret;
  Json& data = updated["data"];
  if (!data.is_object()) data = Json::object();
  data[kCaKey] = absl::Base64Escape(fresh.ca_key);
  data[kCaCert] = absl::Base64Escape(fresh.ca_cert);
  data[kKey] = absl::Base64Escape(fresh.key);
  data[kCert] = absl::Base64Escape(fresh.cert);
  data[kTlsKey] = absl::Base64Escape(fresh.key);
  data[kTlsCert] = absl::Base64Escape(fresh.cert);
  // resourceVersion is kept: a concurrent writer makes this fail with Conflict and the next sync
  // starts from the winner's Secret.
  absl::StatusOr<Json> stored = client_->Update(secrets, options_.namespace_, updated);
  if (!stored.ok()) return Annotate(stored.status(), "updating webhook cert Secret");
  return fresh;
}

absl::StatusOr<CertManager::Certs> CertManager::ReadExternal() {
  ASSIGN_OR_RETURN(Json secret,
                   client_->Get(SecretsResource(), options_.namespace_, options_.secret_name));
  Certs c{"", DataField(secret, kExternalCa), DataField(secret, kTlsCert),
          DataField(secret, kTlsKey)};
  if (c.ca_cert.empty() || c.cert.empty() || c.key.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("external webhook cert Secret ", options_.namespace_, "/",
                     options_.secret_name, " lacks ca.crt, tls.crt or tls.key"));
  }
  RETURN_IF_ERROR(Annotate(tls::KeyMatchesCert(c.cert, c.key), "external webhook certificate"));
  absl::Time now = options_.clock->Now();
  RETURN_IF_ERROR(
      Annotate(tls::VerifyCert(c.cert, c.ca_cert, DnsName(), now), "external webhook certificate"));
  if (!options_.host.empty()) {
    RETURN_IF_ERROR(Annotate(tls::VerifyCert(c.cert, c.ca_cert, options_.host, now),
                             "external webhook certificate"));
  }
  return c;
}

absl::Status CertManager::EnsureWebhookConfig(const kube::Resource& r, const std::string& name,
                                              const std::string& ca_pem) {
  auto log = Logger("webhook");
  absl::StatusOr<Json> cfg = client_->Get(r, "", name);
  if (!cfg.ok()) {
    if (kube::IsNotFound(cfg.status())) {
      log->warn("{} {} not found: nothing to inject", r.kind, name);
      return absl::OkStatus();
    }
    return Annotate(cfg.status(), absl::StrCat("reading ", r.kind, " ", name));
  }
  Json obj = *cfg;
  Json& annotations = obj["metadata"]["annotations"];
  if (!annotations.is_object()) annotations = Json::object();
  Json tmpl;
  if (auto it = annotations.find(kTemplateAnnotation); it != annotations.end() && it->is_string()) {
    tmpl = Json::parse(it->get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (!tmpl.is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat(r.kind, " ", name, ": annotation 'template' is not a JSON array"));
    }
  } else {
    tmpl = obj.contains("webhooks") && obj["webhooks"].is_array() ? obj["webhooks"] : Json::array();
    annotations[kTemplateAnnotation] = tmpl.dump();
  }
  const std::string ca_b64 = absl::Base64Escape(ca_pem);
  Json webhooks = Json::array();
  for (const Json& entry : tmpl) {
    if (!entry.is_object()) continue;
    std::string path = WebhookPath(entry);
    if (path.empty() || !registry_->Has(path)) continue;
    Json w = entry;
    Json cc = Json::object();
    if (!options_.host.empty()) {
      cc["url"] = absl::StrCat("https://", UrlHost(options_.host), ":", options_.port, path);
    } else {
      cc["service"] = {{"name", options_.service_name},
                       {"namespace", options_.namespace_},
                       {"port", 443},
                       {"path", path}};
    }
    cc["caBundle"] = ca_b64;
    w["clientConfig"] = std::move(cc);
    webhooks.push_back(std::move(w));
  }
  obj["webhooks"] = std::move(webhooks);
  if (obj == *cfg) return absl::OkStatus();
  absl::StatusOr<Json> stored = client_->Update(r, "", obj);
  if (!stored.ok()) return Annotate(stored.status(), absl::StrCat("updating ", r.kind, " ", name));
  log->info("updated {} {} ({} webhooks)", r.kind, name, obj["webhooks"].size());
  return absl::OkStatus();
}

absl::Status CertManager::VerifyWebhookConfig(const kube::Resource& r, const std::string& name,
                                              const std::string& ca_pem) {
  absl::StatusOr<Json> cfg = client_->Get(r, "", name);
  if (!cfg.ok()) {
    if (kube::IsNotFound(cfg.status())) return absl::OkStatus();
    return Annotate(cfg.status(), absl::StrCat("reading ", r.kind, " ", name));
  }
  std::vector<std::string> bad;
  if (auto ws = cfg->find("webhooks"); ws != cfg->end() && ws->is_array()) {
    for (const Json& w : *ws) {
      std::string bundle;
      if (auto cc = w.find("clientConfig"); cc != w.end() && cc->is_object()) {
        if (auto b = cc->find("caBundle"); b != cc->end() && b->is_string()) {
          absl::Base64Unescape(b->get<std::string>(), &bundle);
        }
      }
      if (bundle != ca_pem) bad.push_back(w.value("name", std::string("<unnamed>")));
    }
  }
  if (!bad.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(r.kind, " ", name, ": caBundle does not match the external CA for ",
                     absl::StrJoin(bad, ", ")));
  }
  return absl::OkStatus();
}

absl::Status CertManager::Sync() {
  absl::MutexLock sync_lock(&sync_mu_);
  Certs certs;
  if (options_.external_certs) {
    ASSIGN_OR_RETURN(certs, ReadExternal());
  } else {
    ASSIGN_OR_RETURN(certs, EnsureSecret());
  }
  if (!options_.cert_dir.empty()) {
    RETURN_IF_ERROR(Annotate(
        tls::WriteCertDir(options_.cert_dir, certs.ca_cert, certs.cert, certs.key).status(),
        "writing webhook cert dir"));
  }
  if (options_.external_certs) {  // read-only: nothing is pointed anywhere
    RETURN_IF_ERROR(
        VerifyWebhookConfig(MutatingResource(), options_.mutating_config, certs.ca_cert));
    RETURN_IF_ERROR(
        VerifyWebhookConfig(ValidatingResource(), options_.validating_config, certs.ca_cert));
  }
  bool publish = true;
  if (options_.publish_when_serving) {
    absl::MutexLock lock(&mu_);
    ca_pem_ = certs.ca_cert;
    inited_ = true;
    publish = serving_;
  }
  if (!publish) return absl::OkStatus();
  if (!options_.external_certs) {
    RETURN_IF_ERROR(
        EnsureWebhookConfig(MutatingResource(), options_.mutating_config, certs.ca_cert));
    RETURN_IF_ERROR(
        EnsureWebhookConfig(ValidatingResource(), options_.validating_config, certs.ca_cert));
  }
  absl::MutexLock lock(&mu_);
  ca_pem_ = certs.ca_cert;
  inited_ = true;
  published_ = true;
  return absl::OkStatus();
}

void CertManager::Start() {
  absl::MutexLock lock(&mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  triggered_ = true;  // first sync at once
  thread_ = std::thread([this] { Run(); });
}

void CertManager::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void CertManager::SetServing() {
  absl::MutexLock lock(&mu_);
  serving_ = true;
  triggered_ = true;
}

void CertManager::Trigger() {
  absl::MutexLock lock(&mu_);
  triggered_ = true;
}

void CertManager::Run() {
  auto log = Logger("webhook");
  absl::Duration backoff = absl::Seconds(1);
  absl::Time next = options_.clock->Now();
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto wake = [this] { return stop_ || triggered_; };
      options_.clock->AwaitWithDeadline(&mu_, absl::Condition(&wake), next);
      if (stop_) return;
      triggered_ = false;
    }
    absl::Status s = Sync();
    if (s.ok()) {
      backoff = absl::Seconds(1);
      next = options_.clock->Now() + options_.resync_period;
    } else {
      log->warn("webhook certificate sync failed: {}", s);
      next = options_.clock->Now() + backoff;
      backoff = std::min(backoff * 2, options_.resync_period);
    }
  }
}

}  // namespace kruise::manager::webhook
