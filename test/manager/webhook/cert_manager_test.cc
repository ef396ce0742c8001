#include "manager/webhook/cert_manager.h"

#include <map>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/tls.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "manager/webhook/pod_handlers.h"
#include "test/fakes/fake_clock.h"
#include "test/manager/webhook/test_certs.h"

namespace kruise::manager::webhook {
namespace {

using kube::Json;
using ::testing::HasSubstr;
using testing::TempDir;

// Minimal in-memory KubeClient: Get/Create/Update/Delete with resourceVersion checks, enough for
// the certificate manager; plus "the next Get of X answers NotFound" to stage a create race.
class FakeClient final : public kube::KubeClient {
 public:
  absl::StatusOr<Json> Get(const kube::Resource& r, const std::string& ns,
                           const std::string& name) override {
    std::string key = Key(r, ns, name);
    ++gets[r.resource];
    if (hide_next_get.erase(key) > 0) return absl::NotFoundError("NotFound: hidden");
    auto it = objects.find(key);
    if (it == objects.end()) return absl::NotFoundError("NotFound: " + key);
    return it->second;
  }
  absl::StatusOr<kube::ListResult> List(const kube::Resource&, const std::string&,
                                        const kube::ListOptions&) override {
    return absl::UnimplementedError("List");
  }
  absl::StatusOr<Json> Create(const kube::Resource& r, const std::string& ns,
                              const Json& obj) override {
    std::string key = Key(r, ns, obj["metadata"]["name"]);
    ++creates[r.resource];
    if (objects.count(key)) return absl::AlreadyExistsError("AlreadyExists: " + key);
    Json stored = obj;
    stored["metadata"]["resourceVersion"] = std::to_string(++rv);
    objects[key] = stored;
    return stored;
  }
  absl::StatusOr<Json> Update(const kube::Resource& r, const std::string& ns, const Json& obj,
                              const std::string&) override {
    std::string key = Key(r, ns, obj["metadata"]["name"]);
    ++updates[r.resource];
    auto it = objects.find(key);
    if (it == objects.end()) return absl::NotFoundError("NotFound");
    if (it->second["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]) {
      return absl::AbortedError("Conflict");
    }
    Json stored = obj;
    stored["metadata"]["resourceVersion"] = std::to_string(++rv);
    it->second = stored;
    return stored;
  }
  absl::StatusOr<Json> Patch(const kube::Resource&, const std::string&, const std::string&,
                             kube::PatchType, const Json&, const std::string&) override {
    return absl::UnimplementedError("Patch");
  }
  absl::Status Delete(const kube::Resource& r, const std::string& ns, const std::string& name,
                      const kube::DeleteOptions&) override {
    return objects.erase(Key(r, ns, name)) ? absl::OkStatus() : absl::NotFoundError("NotFound");
  }
  absl::Status Watch(const kube::Resource&, const std::string&, const kube::ListOptions&,
                     const kube::WatchHandler&, kube::WatchCanceller*) override {
    return absl::UnimplementedError("Watch");
  }

  static std::string Key(const kube::Resource& r, const std::string& ns, const std::string& name) {
    return absl::StrCat(r.resource, "/", r.namespaced ? ns : "", "/", name);
  }

  std::map<std::string, Json> objects;
  std::set<std::string> hide_next_get;
  std::map<std::string, int> gets, creates, updates;
  int64_t rv = 100;
};

constexpr char kSecretKey[] = "secrets/kruise-system/kruise-webhook-certs";
constexpr char kMutKey[] = "mutatingwebhookconfigurations//kruise-mutating-webhook-configuration";
constexpr char kValKey[] =
    "validatingwebhookconfigurations//kruise-validating-webhook-configuration";

Json Webhook(const std::string& name, const std::string& path) {
  return {
      {"name", name},
      {"clientConfig",
       {{"service",
         {{"name", "kruise-webhook-service"}, {"namespace", "kruise-system"}, {"path", path}}}}},
      {"sideEffects", "None"},
      {"admissionReviewVersions", {"v1", "v1beta1"}}};
}

std::string Data(const Json& secret, const char* key) {
  std::string out;
  absl::Base64Unescape(secret["data"][key].get<std::string>(), &out);
  return out;
}

std::string Bundle(const Json& webhook) {
  std::string out;
  absl::Base64Unescape(webhook["clientConfig"]["caBundle"].get<std::string>(), &out);
  return out;
}

class CertManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.Register("/mutate-pod", std::make_shared<PodSidecarMutator>());
    registry_.Register("/validate-pod", std::make_shared<PodAllowValidator>());
    client_.objects[kMutKey] = {
        {"apiVersion", "admissionregistration.k8s.io/v1"},
        {"kind", "MutatingWebhookConfiguration"},
        {"metadata", {{"name", "kruise-mutating-webhook-configuration"}, {"resourceVersion", "1"}}},
        {"webhooks",
         {Webhook("mpod.kb.io", "/mutate-pod"),
          Webhook("mcloneset.kb.io", "/mutate-apps-kruise-io-v1alpha1-cloneset")}}};
    client_.objects[kValKey] = {
        {"apiVersion", "admissionregistration.k8s.io/v1"},
        {"kind", "ValidatingWebhookConfiguration"},
        {"metadata",
         {{"name", "kruise-validating-webhook-configuration"}, {"resourceVersion", "2"}}},
        {"webhooks", {Webhook("vpod.kb.io", "/validate-pod")}}};
  }

  CertManager::Options Opts(const std::string& cert_dir) {
    CertManager::Options o;
    o.cert_dir = cert_dir;
    o.clock = &clock_;
    return o;
  }

  kruise::testing::FakeClock clock_{absl::FromUnixSeconds(1'800'000'000)};
  FakeClient client_;
  HandlerRegistry registry_;
};

TEST_F(CertManagerTest, FirstReplicaCreatesSecretWritesDirAndInjectsCaBundle) {
  TempDir dir;
  CertManager cm(&client_, &registry_, Opts(dir.path()));
  EXPECT_FALSE(cm.inited());
  ASSERT_TRUE(cm.Sync().ok());
  EXPECT_TRUE(cm.inited());
  ASSERT_TRUE(client_.objects.count(kSecretKey));
  const Json& secret = client_.objects[kSecretKey];
  for (const char* k : {"ca-key.pem", "ca-cert.pem", "key.pem", "cert.pem", "tls.key", "tls.crt"}) {
    EXPECT_FALSE(Data(secret, k).empty()) << k;
  }
  std::string ca = Data(secret, "ca-cert.pem");
  EXPECT_EQ(cm.ca_cert_pem(), ca);
  EXPECT_EQ(Data(secret, "tls.crt"), Data(secret, "cert.pem"));
  EXPECT_TRUE(tls::VerifyCert(Data(secret, "cert.pem"), ca,
                              "kruise-webhook-service.kruise-system.svc", clock_.Now())
                  .ok());
  EXPECT_EQ(*tls::ReadFile(dir.path() + "/ca-cert.pem"), ca);
  EXPECT_EQ(*tls::ReadFile(dir.path() + "/tls.crt"), Data(secret, "cert.pem"));
  EXPECT_EQ(*tls::ReadFile(dir.path() + "/key.pem"), Data(secret, "key.pem"));

  const Json& mut = client_.objects[kMutKey];
  // The unregistered CloneSet path is dropped; the template keeps it.
  ASSERT_EQ(mut["webhooks"].size(), 1u);
  EXPECT_EQ(mut["webhooks"][0]["name"], "mpod.kb.io");
  EXPECT_EQ(Bundle(mut["webhooks"][0]), ca);
  EXPECT_EQ(mut["webhooks"][0]["clientConfig"]["service"]["port"], 443);
  EXPECT_EQ(mut["webhooks"][0]["clientConfig"]["service"]["path"], "/mutate-pod");
  Json tmpl = Json::parse(mut["metadata"]["annotations"]["template"].get<std::string>());
  EXPECT_EQ(tmpl.size(), 2u);
  EXPECT_EQ(Bundle(client_.objects[kValKey]["webhooks"][0]), ca);

  // A second sync with nothing changed writes nothing.
  int updates = client_.updates["mutatingwebhookconfigurations"] +
                client_.updates["validatingwebhookconfigurations"] + client_.updates["secrets"];
  ASSERT_TRUE(cm.Sync().ok());
  EXPECT_EQ(client_.updates["mutatingwebhookconfigurations"] +
                client_.updates["validatingwebhookconfigurations"] + client_.updates["secrets"],
            updates);
}

TEST_F(CertManagerTest, PublishWhenServingLeavesConfigurationsUntilTheServerAnswers) {
  TempDir dir;
  auto opts = Opts(dir.path());
  opts.host = "127.0.0.1";
  opts.publish_when_serving = true;
  CertManager cm(&client_, &registry_, opts);
  const Json before = client_.objects[kMutKey];
  ASSERT_TRUE(cm.Sync().ok());
  EXPECT_TRUE(cm.inited());
  EXPECT_FALSE(cm.published());
  EXPECT_EQ(*tls::ReadFile(dir.path() + "/ca-cert.pem"), cm.ca_cert_pem());
  // Not serving yet: the API server must not be sent here.
  EXPECT_EQ(client_.objects[kMutKey], before);
  EXPECT_EQ(client_.updates["mutatingwebhookconfigurations"], 0);

  cm.SetServing();
  ASSERT_TRUE(cm.Sync().ok());
  EXPECT_TRUE(cm.published());
  const Json& cc = client_.objects[kMutKey]["webhooks"][0]["clientConfig"];
  EXPECT_EQ(cc["url"], "https://127.0.0.1:9876/mutate-pod");
  EXPECT_EQ(Bundle(client_.objects[kMutKey]["webhooks"][0]), cm.ca_cert_pem());
  EXPECT_EQ(Bundle(client_.objects[kValKey]["webhooks"][0]), cm.ca_cert_pem());
}

TEST_F(CertManagerTest, SecondReplicaConvergesOnSameCaAfterCreateConflict) {
  TempDir dir_a, dir_b;
  CertManager a(&client_, &registry_, Opts(dir_a.path()));
  CertManager b(&client_, &registry_, Opts(dir_b.path()));
  ASSERT_TRUE(a.Sync().ok());
  client_.hide_next_get.insert(kSecretKey);  // b saw no Secret, then loses the create race
  ASSERT_TRUE(b.Sync().ok());
  EXPECT_EQ(client_.creates["secrets"], 2);
  EXPECT_EQ(b.ca_cert_pem(), a.ca_cert_pem());
  EXPECT_EQ(*tls::ReadFile(dir_b.path() + "/tls.crt"), *tls::ReadFile(dir_a.path() + "/tls.crt"));
  EXPECT_EQ(client_.updates["secrets"], 0);
}

TEST_F(CertManagerTest, RenewsServerCertInsideWindowKeepingCa) {
  TempDir dir;
  auto opts = Opts(dir.path());
  opts.cert_validity = absl::Hours(24 * 365);  // expires in a year; renew 180 days before
  CertManager cm(&client_, &registry_, opts);
  ASSERT_TRUE(cm.Sync().ok());
  std::string ca = cm.ca_cert_pem();
  std::string cert = Data(client_.objects[kSecretKey], "cert.pem");
  clock_.Advance(absl::Hours(24 * 100));  // 265 days left: still fine
  ASSERT_TRUE(cm.Sync().ok());
  EXPECT_EQ(Data(client_.objects[kSecretKey], "cert.pem"), cert);
  clock_.Advance(absl::Hours(24 * 90));  // 175 days left: renew
  ASSERT_TRUE(cm.Sync().ok());
  std::string renewed = Data(client_.objects[kSecretKey], "cert.pem");
  EXPECT_NE(renewed, cert);
  EXPECT_EQ(cm.ca_cert_pem(), ca);
  EXPECT_EQ(*tls::ReadFile(dir.path() + "/tls.crt"), renewed);
  EXPECT_FALSE(*tls::ExpiresWithin(renewed, clock_.Now(), absl::Hours(24 * 180)));
}

TEST_F(CertManagerTest, RegeneratesCaWhenItExpiresWithinAYear) {
  TempDir dir;
  CertManager cm(&client_, &registry_, Opts(dir.path()));
  ASSERT_TRUE(cm.Sync().ok());
  std::string ca = cm.ca_cert_pem();
  clock_.Advance(absl::Hours(24 * 365 * 9 + 24 * 10));  // CA has < 1 year left
  ASSERT_TRUE(cm.Sync().ok());
  EXPECT_NE(cm.ca_cert_pem(), ca);
  EXPECT_EQ(Bundle(client_.objects[kMutKey]["webhooks"][0]), cm.ca_cert_pem());
  EXPECT_EQ(*tls::ReadFile(dir.path() + "/ca-cert.pem"), cm.ca_cert_pem());
}

TEST_F(CertManagerTest, DeletedSecretIsRecreatedAndCaBundleUpdated) {
  TempDir dir;
  CertManager cm(&client_, &registry_, Opts(dir.path()));
  ASSERT_TRUE(cm.Sync().ok());
  std::string ca = cm.ca_cert_pem();
  client_.objects.erase(kSecretKey);
  ASSERT_TRUE(cm.Sync().ok());
  ASSERT_TRUE(client_.objects.count(kSecretKey));
  EXPECT_NE(cm.ca_cert_pem(), ca);
  EXPECT_EQ(Bundle(client_.objects[kMutKey]["webhooks"][0]), cm.ca_cert_pem());
  EXPECT_EQ(Bundle(client_.objects[kValKey]["webhooks"][0]), cm.ca_cert_pem());
  EXPECT_EQ(*tls::ReadFile(dir.path() + "/ca-cert.pem"), cm.ca_cert_pem());
}

TEST_F(CertManagerTest, UrlModeAndTemplateRebuildUndoOutsideEdits) {
  TempDir dir;
  auto opts = Opts(dir.path());
  opts.host = "10.1.2.3";
  opts.port = 9443;
  CertManager cm(&client_, &registry_, opts);
  ASSERT_TRUE(cm.Sync().ok());
  Json& mut = client_.objects[kMutKey];
  ASSERT_EQ(mut["webhooks"].size(), 1u);
  const Json& cc = mut["webhooks"][0]["clientConfig"];
  EXPECT_EQ(cc["url"], "https://10.1.2.3:9443/mutate-pod");
  EXPECT_FALSE(cc.contains("service"));
  // Server cert carries the IP SAN.
  EXPECT_TRUE(tls::VerifyCert(*tls::ReadFile(dir.path() + "/tls.crt"), cm.ca_cert_pem(), "10.1.2.3",
                              clock_.Now())
                  .ok());
  // Someone edits the live webhooks: the next sync rebuilds them from the template.
  mut["webhooks"][0]["clientConfig"]["caBundle"] = absl::Base64Escape("wrong");
  mut["webhooks"][0]["failurePolicy"] = "Ignore";
  ASSERT_TRUE(cm.Sync().ok());
  EXPECT_EQ(Bundle(client_.objects[kMutKey]["webhooks"][0]), cm.ca_cert_pem());
  EXPECT_FALSE(client_.objects[kMutKey]["webhooks"][0].contains("failurePolicy"));
}

TEST_F(CertManagerTest, ExternalModeVerifiesAndDetectsMismatchWithoutWriting) {
  TempDir dir;
  auto pki = testing::MakePki(clock_.Now());
  auto so = tls::ServerCertOptions::ForService("kruise-webhook-service", "kruise-system", "",
                                               clock_.Now());
  auto server = tls::GenerateServerCert(pki.ca, so);
  ASSERT_TRUE(server.ok());
  client_.objects[kSecretKey] = {
      {"metadata", {{"name", "kruise-webhook-certs"}, {"resourceVersion", "5"}}},
      {"data",
       {{"ca.crt", absl::Base64Escape(pki.ca.cert_pem)},
        {"tls.crt", absl::Base64Escape(server->cert_pem)},
        {"tls.key", absl::Base64Escape(server->key_pem)}}}};
  auto opts = Opts(dir.path());
  opts.external_certs = true;
  CertManager cm(&client_, &registry_, opts);
  absl::Status s = cm.Sync();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("mpod.kb.io"));
  EXPECT_FALSE(cm.inited());
  // cainjector fixes the bundles: now the sync passes.
  for (const char* key : {kMutKey, kValKey}) {
    for (Json& w : client_.objects[key]["webhooks"]) {
      w["clientConfig"]["caBundle"] = absl::Base64Escape(pki.ca.cert_pem);
    }
  }
  ASSERT_TRUE(cm.Sync().ok());
  EXPECT_TRUE(cm.inited());
  EXPECT_EQ(*tls::ReadFile(dir.path() + "/tls.crt"), server->cert_pem);
  EXPECT_EQ(client_.creates["secrets"], 0);
  EXPECT_EQ(client_.updates["secrets"] + client_.updates["mutatingwebhookconfigurations"] +
                client_.updates["validatingwebhookconfigurations"],
            0);
  // A certificate for another name is rejected.
  auto wrong = tls::GenerateServerCert(
      pki.ca, tls::ServerCertOptions::ForService("other", "ns", "", clock_.Now()));
  client_.objects[kSecretKey]["data"]["tls.crt"] = absl::Base64Escape(wrong->cert_pem);
  client_.objects[kSecretKey]["data"]["tls.key"] = absl::Base64Escape(wrong->key_pem);
  EXPECT_EQ(cm.Sync().code(), absl::StatusCode::kUnauthenticated);
}

TEST_F(CertManagerTest, BackgroundLoopSyncsAtStartAndOnTrigger) {
  TempDir dir;
  CertManager cm(&client_, &registry_, Opts(dir.path()));
  cm.Start();
  absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!cm.inited() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_TRUE(cm.inited());
  std::string ca = cm.ca_cert_pem();
  // Wait until the loop is parked on its 1-minute timer, delete the Secret, trigger.
  while (clock_.waiters() == 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(2));
  client_.objects.erase(kSecretKey);  // the loop is parked: no concurrent access
  cm.Trigger();
  while (cm.ca_cert_pem() == ca && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_NE(cm.ca_cert_pem(), ca);
  cm.Stop();
}

}  // namespace
}  // namespace kruise::manager::webhook
