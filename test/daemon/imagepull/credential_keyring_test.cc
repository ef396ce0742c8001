#include "daemon/imagepull/credential_keyring.h"

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kruise::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<std::string> Users(const std::vector<RegistryCredential>& creds) {
  std::vector<std::string> out;
  for (const auto& c : creds) out.push_back(c.username);
  return out;
}

TEST(NormalizeRegistryKey, Table) {
  struct Case {
    const char* in;
    const char* want;
  } cases[] = {
      {"https://index.docker.io/v1/", "docker.io"},
      {"index.docker.io", "docker.io"},
      {"registry-1.docker.io", "docker.io"},
      {"docker.io", "docker.io"},
      {"http://127.0.0.1:5000", "127.0.0.1:5000"},
      {"https://127.0.0.1:5000/v2/", "127.0.0.1:5000"},
      {"Registry.Example.com/Team/", "registry.example.com/Team"},
      {"quay.io/v1/coreos", "quay.io/coreos"},
      {"*.gcr.io", "*.gcr.io"},
      {"", ""},
      {"https://", ""},
  };
  for (const auto& c : cases) EXPECT_EQ(NormalizeRegistryKey(c.in), c.want) << c.in;
}

TEST(RegistryKeyMatches, Table) {
  struct Case {
    const char* key;
    const char* repo;
    bool want;
  } cases[] = {
      {"registry.example.com", "registry.example.com/team/app", true},
      {"registry.example.com/team", "registry.example.com/team/app", true},
      {"registry.example.com/team", "registry.example.com/teamx/app", false},
      {"registry.example.com/other", "registry.example.com/team/app", false},
      {"*.example.com", "registry.example.com/app", true},
      {"*.example.com", "example.com/app", false},  // part counts differ
      {"*.example.com", "a.b.example.com/app", false},
      {"registry.example.com:5000", "registry.example.com:5000/app", true},
      {"registry.example.com:5000", "registry.example.com/app", false},
      {"registry.example.com", "registry.example.com:5000/app", false},
      {"127.0.0.1:5001", "127.0.0.1:5001/busybox", true},
      {"docker.io", "docker.io/library/busybox", true},
      {"quay.io", "docker.io/library/busybox", false},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(RegistryKeyMatches(c.key, c.repo), c.want) << c.key << " vs " << c.repo;
  }
}

TEST(CredentialKeyring, MostSpecificFirstAndAllMatches) {
  CredentialKeyring ring;
  ASSERT_TRUE(ring.AddDockerConfigJson(R"({"auths":{
      "quay.io": {"username": "broad", "password": "p1"},
      "quay.io/coreos": {"username": "narrow", "password": "p2"},
      "gcr.io": {"username": "other", "password": "p3"}}})",
                                       "test")
                  .ok());
  EXPECT_THAT(Users(ring.Lookup("quay.io/coreos/etcd")), ElementsAre("narrow", "broad"));
  EXPECT_THAT(Users(ring.Lookup("quay.io/prometheus/node")), ElementsAre("broad"));
  EXPECT_THAT(ring.Lookup("docker.io/library/busybox"), IsEmpty());
}

TEST(CredentialKeyring, DockerHubAliasesAndAuthField) {
  CredentialKeyring ring;
  std::string auth = absl::Base64Escape("hubuser:hub:pass");
  ASSERT_TRUE(ring.AddDockerConfigJson(
                      R"({"auths":{"https://index.docker.io/v1/":{"auth":")" + auth + R"("}}})",
                      "test")
                  .ok());
  auto creds = ring.Lookup("docker.io/library/busybox");
  ASSERT_EQ(creds.size(), 1u);
  EXPECT_EQ(creds[0].username, "hubuser");
  EXPECT_EQ(creds[0].password, "hub:pass");  // only the first colon separates
  EXPECT_EQ(ring.Lookup("index.docker.io/library/busybox").size(), 1u);
}

TEST(CredentialKeyring, LegacyDockerCfg) {
  CredentialKeyring ring;
  ASSERT_TRUE(
      ring.AddDockerCfg(R"({"127.0.0.1:5001":{"username":"u","password":"p"}})", "t").ok());
  EXPECT_THAT(Users(ring.Lookup("127.0.0.1:5001/busybox")), ElementsAre("u"));
}

nlohmann::json Secret(const std::string& type, const std::string& key, const std::string& value) {
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", {{"namespace", "kruise-daemon-config"}, {"name", "pull"}}},
          {"type", type},
          {"data", {{key, absl::Base64Escape(value)}}}};
}

TEST(CredentialKeyring, SecretsOfBothTypes) {
  CredentialKeyring ring;
  ASSERT_TRUE(ring.AddSecret(Secret("kubernetes.io/dockerconfigjson", ".dockerconfigjson",
                                    R"({"auths":{"a.io":{"username":"ua","password":"x"}}})"))
                  .ok());
  ASSERT_TRUE(ring.AddSecret(Secret("kubernetes.io/dockercfg", ".dockercfg",
                                    R"({"b.io":{"username":"ub","password":"y"}})"))
                  .ok());
  EXPECT_THAT(Users(ring.Lookup("a.io/x")), ElementsAre("ua"));
  EXPECT_THAT(Users(ring.Lookup("b.io/x")), ElementsAre("ub"));
  EXPECT_EQ(ring.Lookup("a.io/x")[0].source, "kruise-daemon-config/pull");
}

TEST(CredentialKeyring, BadInputIsAClearErrorWithoutSecrets) {
  CredentialKeyring ring;
  absl::Status s = ring.AddSecret(Secret("Opaque", "x", "y"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("kubernetes.io/dockerconfigjson"));

  s = ring.AddSecret(Secret("kubernetes.io/dockerconfigjson", ".dockerconfigjson", "{not json"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);

  auto missing = Secret("kubernetes.io/dockerconfigjson", ".other", "{}");
  EXPECT_EQ(ring.AddSecret(missing).code(), absl::StatusCode::kInvalidArgument);

  auto bad_b64 = Secret("kubernetes.io/dockercfg", ".dockercfg", "");
  bad_b64["data"][".dockercfg"] = "!!!not base64!!!";
  EXPECT_EQ(ring.AddSecret(bad_b64).code(), absl::StatusCode::kInvalidArgument);

  s = ring.AddDockerConfigJson(R"({"auths":{"r.io":{"auth":"c2VjcmV0"}}})", "t");  // "secret"
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::Not(::testing::HasSubstr("secret\"")));
  EXPECT_THAT(std::string(s.message()), ::testing::Not(::testing::HasSubstr("c2VjcmV0")));

  EXPECT_EQ(ring.AddSecret(nlohmann::json::array()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ring.empty());
}

TEST(CredentialKeyring, EntriesWithoutCredentialsAreSkipped) {
  CredentialKeyring ring;
  ASSERT_TRUE(ring.AddDockerConfigJson(R"({"auths":{"r.io":{}},"credsStore":"desktop"})", "t").ok());
  EXPECT_TRUE(ring.empty());
  EXPECT_TRUE(ring.AddDockerConfigJson(R"({})", "t").ok());
}

}  // namespace
}  // namespace kruise::daemon
