#include "common/tls.h"

#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/fakes/fake_clock.h"
#include "test/manager/webhook/test_certs.h"

namespace kruise::tls {
namespace {

using ::kruise::manager::webhook::testing::TempDir;
using ::testing::HasSubstr;

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);
constexpr char kSvcDns[] = "kruise-webhook-service.kruise-system.svc";

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ca = GenerateCa({.not_before = kNow});
    ASSERT_TRUE(ca.ok()) << ca.status();
    ca_ = *ca;
    auto opts =
        ServerCertOptions::ForService("kruise-webhook-service", "kruise-system", "127.0.0.1", kNow);
    opts.validity = absl::Hours(24 * 365);
    auto server = GenerateServerCert(ca_, opts);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *server;
  }
  CertKeyPem ca_, server_;
};

TEST_F(TlsTest, CaHasExpectedSubjectValidityAndIsCa) {
  auto cert = ParseCertPem(ca_.cert_pem);
  ASSERT_TRUE(cert.ok());
  char cn[128] = {0};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert->get()), NID_commonName, cn, sizeof(cn));
  EXPECT_STREQ(cn, "webhook-cert-ca");
  EXPECT_EQ(X509_check_ca(cert->get()), 1);
  auto not_after = NotAfter(ca_.cert_pem);
  ASSERT_TRUE(not_after.ok());
  EXPECT_EQ(*not_after, kNow + absl::Hours(24 * 365 * 10));
  EXPECT_EQ(EVP_PKEY_get_base_id(X509_get0_pubkey(cert->get())), EVP_PKEY_EC);
}

TEST_F(TlsTest, ServerCertVerifiesForEveryName) {
  for (const char* host : {kSvcDns, "kruise-webhook-service.kruise-system.svc.cluster.local",
                           "localhost", "127.0.0.1"}) {
    EXPECT_TRUE(VerifyCert(server_.cert_pem, ca_.cert_pem, host, kNow + absl::Hours(1)).ok())
        << host;
  }
  auto cert = ParseCertPem(server_.cert_pem);
  ASSERT_TRUE(cert.ok());
  EXPECT_EQ(X509_check_ca(cert->get()), 0);
  EXPECT_TRUE(X509_get_extended_key_usage(cert->get()) & XKU_SSL_SERVER);
  EXPECT_TRUE(KeyMatchesCert(server_.cert_pem, server_.key_pem).ok());
}

TEST_F(TlsTest, VerifyRejectsWrongHostIpTimeAndCa) {
  auto s = VerifyCert(server_.cert_pem, ca_.cert_pem, "evil.example.com", kNow);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(s.message()), HasSubstr("mismatch"));
  EXPECT_FALSE(VerifyCert(server_.cert_pem, ca_.cert_pem, "10.0.0.1", kNow).ok());
  // Expired (validity one year) and not yet valid (backdated one hour only).
  s = VerifyCert(server_.cert_pem, ca_.cert_pem, kSvcDns, kNow + absl::Hours(24 * 366));
  EXPECT_THAT(std::string(s.message()), HasSubstr("expired"));
  EXPECT_FALSE(VerifyCert(server_.cert_pem, ca_.cert_pem, kSvcDns, kNow - absl::Hours(2)).ok());
  auto other = GenerateCa({.not_before = kNow});
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(VerifyCert(server_.cert_pem, other->cert_pem, kSvcDns, kNow).ok());
  EXPECT_EQ(VerifyCert("garbage", ca_.cert_pem, kSvcDns, kNow).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(TlsTest, ServerCertNeverOutlivesCa) {
  auto opts = ServerCertOptions::ForService("s", "ns", "", kNow + absl::Hours(24 * 365 * 9));
  opts.validity = absl::Hours(24 * 365 * 5);
  auto server = GenerateServerCert(ca_, opts);
  ASSERT_TRUE(server.ok());
  EXPECT_EQ(*NotAfter(server->cert_pem), *NotAfter(ca_.cert_pem));
}

TEST_F(TlsTest, HostnameSanAndIpv6) {
  auto opts = ServerCertOptions::ForService("svc", "ns", "webhook.example.com", kNow);
  EXPECT_THAT(opts.dns_names, ::testing::Contains("webhook.example.com"));
  EXPECT_TRUE(opts.ip_addresses.empty());
  auto v6 = ServerCertOptions::ForService("svc", "ns", "::1", kNow);
  ASSERT_EQ(v6.ip_addresses.size(), 1u);
  auto cert = GenerateServerCert(ca_, v6);
  ASSERT_TRUE(cert.ok());
  EXPECT_TRUE(VerifyCert(cert->cert_pem, ca_.cert_pem, "::1", kNow).ok());
  opts.ip_addresses = {"not-an-ip"};
  EXPECT_EQ(GenerateServerCert(ca_, opts).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TlsTest, ExpiresWithinWindow) {
  EXPECT_FALSE(*ExpiresWithin(server_.cert_pem, kNow, absl::Hours(24 * 180)));
  EXPECT_TRUE(
      *ExpiresWithin(server_.cert_pem, kNow + absl::Hours(24 * 200), absl::Hours(24 * 180)));
  EXPECT_TRUE(*ExpiresWithin(server_.cert_pem, kNow + absl::Hours(24 * 400), absl::ZeroDuration()));
  EXPECT_FALSE(ExpiresWithin("nope", kNow, absl::Hours(1)).ok());
}

TEST_F(TlsTest, PemRoundTripAndMismatchedKey) {
  auto cert = ParseCertPem(server_.cert_pem);
  ASSERT_TRUE(cert.ok());
  EXPECT_EQ(*CertToPem(cert->get()), server_.cert_pem);
  auto key = ParseKeyPem(server_.key_pem);
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(*KeyToPem(key->get()), server_.key_pem);
  EXPECT_FALSE(KeyMatchesCert(server_.cert_pem, ca_.key_pem).ok());
  EXPECT_EQ(
      ParseKeyPem("-----BEGIN PRIVATE KEY-----\nxx\n-----END PRIVATE KEY-----\n").status().code(),
      absl::StatusCode::kInvalidArgument);
  auto chain = ParseCertChainPem(server_.cert_pem + ca_.cert_pem);
  ASSERT_TRUE(chain.ok());
  EXPECT_EQ(chain->size(), 2u);
  // Serial numbers are random: two certs differ.
  EXPECT_NE(*SerialHex(server_.cert_pem), *SerialHex(ca_.cert_pem));
}

TEST(AtomicWriteTest, WritesContentModeAndLeavesNoTempFiles) {
  TempDir dir;
  std::string path = dir.path() + "/file.pem";
  ASSERT_TRUE(WriteFileAtomic(path, "one", 0600).ok());
  ASSERT_TRUE(WriteFileAtomic(path, "two-longer", 0640).ok());
  EXPECT_EQ(*ReadFile(path), "two-longer");
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
  EXPECT_FALSE(WriteFileAtomic(dir.path() + "/missing/dir/x", "a").ok());
}

TEST_F(TlsTest, WriteCertDirWritesOpenKruiseFilesOnlyWhenChanged) {
  TempDir dir;
  std::string sub = dir.path() + "/certs";
  auto changed = WriteCertDir(sub, ca_.cert_pem, server_.cert_pem, server_.key_pem);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(*ReadFile(sub + "/ca-cert.pem"), ca_.cert_pem);
  EXPECT_EQ(*ReadFile(sub + "/cert.pem"), server_.cert_pem);
  EXPECT_EQ(*ReadFile(sub + "/tls.crt"), server_.cert_pem);
  EXPECT_EQ(*ReadFile(sub + "/key.pem"), server_.key_pem);
  EXPECT_EQ(*ReadFile(sub + "/tls.key"), server_.key_pem);
  struct stat st;
  ASSERT_EQ(stat((sub + "/tls.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_FALSE(*WriteCertDir(sub, ca_.cert_pem, server_.cert_pem, server_.key_pem));
}

TEST_F(TlsTest, CertReloaderPicksUpChangesAndIgnoresMismatchedPairs) {
  TempDir dir;
  ASSERT_TRUE(*WriteCertDir(dir.path(), ca_.cert_pem, server_.cert_pem, server_.key_pem));
  testing::FakeClock clock;
  CertReloader reloader({.cert_file = dir.path() + "/tls.crt",
                         .key_file = dir.path() + "/tls.key",
                         .clock = &clock,
                         .poll_interval = absl::Seconds(2)});
  ASSERT_TRUE(reloader.Load().ok());
  std::string first = reloader.Current()->serial_hex;
  EXPECT_EQ(first, *SerialHex(server_.cert_pem));
  EXPECT_FALSE(*reloader.PollOnce());

  auto next = GenerateServerCert(
      ca_, ServerCertOptions::ForService("kruise-webhook-service", "kruise-system", "", kNow));
  ASSERT_TRUE(next.ok());
  // Only the certificate replaced: the pair does not match, the old one stays.
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/tls.crt", next->cert_pem).ok());
  EXPECT_FALSE(reloader.PollOnce().ok());
  EXPECT_EQ(reloader.Current()->serial_hex, first);
  ASSERT_TRUE(WriteFileAtomic(dir.path() + "/tls.key", next->key_pem).ok());

  // The background poller, driven by the fake clock.
  reloader.Start();
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (reloader.Current()->serial_hex == first && absl::Now() < deadline) {
    clock.Advance(absl::Seconds(2));
    absl::SleepFor(absl::Milliseconds(5));  // yield to the poller; the loop is bounded
  }
  EXPECT_EQ(reloader.Current()->serial_hex, *SerialHex(next->cert_pem));
  EXPECT_EQ(reloader.reload_count(), 2);
  reloader.Stop();
}

}  // namespace
}  // namespace kruise::tls
