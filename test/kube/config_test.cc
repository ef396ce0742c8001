#include "kube/config.h"

#include <filesystem>
#include <map>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/fakes/fake_clock.h"
#include "test/kube/client_test_util.h"

namespace kruise::kube {
namespace {

using ::testing::HasSubstr;
using testutil::TempDir;

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& k) -> std::optional<std::string> {
    auto it = vars.find(k);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

constexpr char kDataKubeconfig[] = R"(apiVersion: v1
kind: Config
current-context: main
clusters:
- name: c1
  cluster:
    server: https://10.1.2.3:6443/
    certificate-authority-data: Q0EtUEVN
- name: c2
  cluster:
    server: http://127.0.0.1:8080
    insecure-skip-tls-verify: true
users:
- name: u1
  user:
    token: sekret
    client-certificate-data: Q0VSVA==
    client-key-data: S0VZ
- name: u2
  user:
    tokenFile: tokens/t
contexts:
- name: main
  context: {cluster: c1, user: u1, namespace: kruise-system}
- name: other
  context: {cluster: c2, user: u2}
- name: broken
  context: {cluster: c1, user: nobody}
)";

TEST(LoadKubeconfigTest, InlineDataIsDecoded) {
  TempDir dir;
  std::string path = dir.Write("config", kDataKubeconfig);
  dir.Write("tokens/t", "filetoken\n");
  absl::StatusOr<RestConfig> cfg = LoadKubeconfig(path);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->host, "https://10.1.2.3:6443");
  EXPECT_EQ(cfg->ca_data, "CA-PEM");
  EXPECT_EQ(cfg->bearer_token, "sekret");
  EXPECT_EQ(cfg->client_cert_data, "CERT");
  EXPECT_EQ(cfg->client_key_data, "KEY");
  EXPECT_EQ(cfg->default_namespace, "kruise-system");
  EXPECT_FALSE(cfg->insecure_skip_tls_verify);
  EXPECT_THAT(cfg->source, HasSubstr("context main"));
}

TEST(LoadKubeconfigTest, ContextOverrideAndRelativeTokenFile) {
  TempDir dir;
  std::string path = dir.Write("config", kDataKubeconfig);
  std::string token = dir.Write("tokens/t", "filetoken\n");
  absl::StatusOr<RestConfig> cfg = LoadKubeconfig(path, "other");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->host, "http://127.0.0.1:8080");
  EXPECT_TRUE(cfg->insecure_skip_tls_verify);
  EXPECT_EQ(cfg->bearer_token_file, token);
  EXPECT_TRUE(cfg->bearer_token.empty());
  EXPECT_TRUE(cfg->default_namespace.empty());
}

TEST(LoadKubeconfigTest, RelativeFilePathsResolvedAgainstKubeconfigDir) {
  TempDir dir;
  std::string ca = dir.Write("pki/ca.crt", "ca");
  std::string cert = dir.Write("pki/admin.crt", "cert");
  std::string key = dir.Write("pki/admin.key", "key");
  std::string path = dir.Write("sub/../kubeconfig", R"(
current-context: x
clusters: [{name: c, cluster: {server: "https://127.0.0.1:16402", certificate-authority: pki/ca.crt}}]
users: [{name: u, user: {client-certificate: pki/admin.crt, client-key: ./pki/admin.key}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
)");
  absl::StatusOr<RestConfig> cfg = LoadKubeconfig(path);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->ca_file, ca);
  EXPECT_EQ(cfg->client_cert_file, cert);
  EXPECT_EQ(cfg->client_key_file, key);
  EXPECT_TRUE(cfg->ca_data.empty());
}

TEST(LoadKubeconfigTest, AbsolutePathsKept) {
  TempDir dir;
  std::string ca = dir.Write("ca.crt", "ca");
  std::string tok = dir.Write("tok", "abc");
  std::string path = dir.Write("kc",
                               "current-context: x\nclusters: [{name: c, cluster: {server: "
                               "'https://h:1', certificate-authority: " +
                                   ca + "}}]\nusers: [{name: u, user: {tokenFile: " + tok +
                                   "}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n");
  absl::StatusOr<RestConfig> cfg = LoadKubeconfig(path);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->ca_file, ca);
  EXPECT_EQ(cfg->bearer_token_file, tok);
}

struct BadCase {
  const char* name;
  std::string yaml;
  std::string context;
  absl::StatusCode code;
  std::string must_mention;
};

TEST(LoadKubeconfigTest, ErrorsNameFileAndKey) {
  const BadCase cases[] = {
      {"unknown context", kDataKubeconfig, "nope", absl::StatusCode::kNotFound, "\"nope\""},
      {"missing user", kDataKubeconfig, "broken", absl::StatusCode::kNotFound, "\"nobody\""},
      {"no current-context", "clusters: []\n", "", absl::StatusCode::kNotFound, "current-context"},
      {"malformed yaml", "current-context: [unclosed\n", "", absl::StatusCode::kInvalidArgument,
       "malformed kubeconfig YAML"},
      {"not a map", "- a\n- b\n", "", absl::StatusCode::kInvalidArgument, "expected a map"},
      {"no server",
       "current-context: x\nclusters: [{name: c, cluster: {}}]\ncontexts: [{name: x, context: "
       "{cluster: c}}]\n",
       "", absl::StatusCode::kInvalidArgument, "clusters[name=c].cluster.server is missing"},
      {"bad base64",
       "current-context: x\nclusters: [{name: c, cluster: {server: 'https://a', "
       "certificate-authority-data: '!!!'}}]\ncontexts: [{name: x, context: {cluster: c}}]\n",
       "", absl::StatusCode::kInvalidArgument, "certificate-authority-data: not valid base64"},
      {"missing ca file",
       "current-context: x\nclusters: [{name: c, cluster: {server: 'https://a', "
       "certificate-authority: nothere.crt}}]\ncontexts: [{name: x, context: {cluster: c}}]\n",
       "", absl::StatusCode::kNotFound, "nothere.crt"},
      {"exec unsupported",
       "current-context: x\nclusters: [{name: c, cluster: {server: 'https://a'}}]\nusers: "
       "[{name: u, user: {exec: {command: foo}}}]\ncontexts: [{name: x, context: {cluster: c, "
       "user: u}}]\n",
       "", absl::StatusCode::kUnimplemented, "exec"},
      {"cert without key",
       "current-context: x\nclusters: [{name: c, cluster: {server: 'https://a'}}]\nusers: "
       "[{name: u, user: {client-certificate-data: Q0VSVA==}}]\ncontexts: [{name: x, context: "
       "{cluster: c, user: u}}]\n",
       "", absl::StatusCode::kInvalidArgument, "together"},
      {"clusters not a list",
       "current-context: x\nclusters: 3\ncontexts: [{name: x, context: "
       "{cluster: c}}]\n",
       "", absl::StatusCode::kInvalidArgument, "\"clusters\" is not a list"},
  };
  for (const BadCase& c : cases) {
    TempDir dir;
    std::string path = dir.Write("kubeconfig", c.yaml);
    absl::StatusOr<RestConfig> cfg = LoadKubeconfig(path, c.context);
    ASSERT_FALSE(cfg.ok()) << c.name;
    EXPECT_EQ(cfg.status().code(), c.code) << c.name << ": " << cfg.status();
    EXPECT_THAT(std::string(cfg.status().message()), HasSubstr(path)) << c.name;
    EXPECT_THAT(std::string(cfg.status().message()), HasSubstr(c.must_mention)) << c.name;
  }
}

TEST(LoadKubeconfigTest, MissingFile) {
  absl::StatusOr<RestConfig> cfg = LoadKubeconfig("/nonexistent/kubeconfig");
  ASSERT_FALSE(cfg.ok());
  EXPECT_THAT(std::string(cfg.status().message()), HasSubstr("/nonexistent/kubeconfig"));
}

TEST(LoadKubeconfigTest, ErrorsNeverContainTheToken) {
  TempDir dir;
  std::string path = dir.Write("kc", R"(current-context: x
clusters: [{name: c, cluster: {server: 'ftp://a'}}]
users: [{name: u, user: {token: topsecret-token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
)");
  absl::StatusOr<RestConfig> cfg = LoadKubeconfig(path);
  ASSERT_FALSE(cfg.ok());
  EXPECT_THAT(std::string(cfg.status().message()), HasSubstr("must start with https://"));
  EXPECT_THAT(std::string(cfg.status().message()), ::testing::Not(HasSubstr("topsecret")));
}

TEST(InClusterConfigTest, ReadsServiceAccountAndEnv) {
  TempDir dir;
  dir.Write("token", "tok\n");
  std::string ca = dir.Write("ca.crt", "ca");
  dir.Write("namespace", "kruise-system\n");
  InClusterOptions opts;
  opts.service_account_dir = dir.path();
  opts.env = FakeEnv({{"KUBERNETES_SERVICE_HOST", "10.0.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}});
  absl::StatusOr<RestConfig> cfg = InClusterConfig(opts);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->host, "https://10.0.0.1:443");
  EXPECT_EQ(cfg->ca_file, ca);
  EXPECT_EQ(cfg->bearer_token_file, dir.path() + "/token");
  EXPECT_EQ(cfg->default_namespace, "kruise-system");
  EXPECT_EQ(cfg->source, "in-cluster");
}

TEST(InClusterConfigTest, Ipv6HostGetsBrackets) {
  TempDir dir;
  dir.Write("token", "tok");
  dir.Write("ca.crt", "ca");
  InClusterOptions opts;
  opts.service_account_dir = dir.path();
  opts.env = FakeEnv({{"KUBERNETES_SERVICE_HOST", "fd00::1"}, {"KUBERNETES_SERVICE_PORT", "6443"}});
  absl::StatusOr<RestConfig> cfg = InClusterConfig(opts);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->host, "https://[fd00::1]:6443");
}

TEST(InClusterConfigTest, NotInClusterAndMissingFiles) {
  TempDir dir;
  InClusterOptions opts;
  opts.service_account_dir = dir.path();
  opts.env = FakeEnv({});
  EXPECT_EQ(InClusterConfig(opts).status().code(), absl::StatusCode::kNotFound);
  opts.env = FakeEnv({{"KUBERNETES_SERVICE_HOST", "10.0.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}});
  absl::StatusOr<RestConfig> cfg = InClusterConfig(opts);
  ASSERT_FALSE(cfg.ok());
  EXPECT_THAT(std::string(cfg.status().message()), HasSubstr("token"));
}

constexpr char kSimpleKubeconfig[] = R"(current-context: x
clusters: [{name: c, cluster: {server: 'https://from-file:1'}}]
contexts: [{name: x, context: {cluster: c}}]
)";

TEST(ResolveConfigTest, Precedence) {
  TempDir dir;
  std::string flag = dir.Write("flag", std::string(kSimpleKubeconfig));
  std::string env_file = dir.Write("envkc", R"(current-context: x
clusters: [{name: c, cluster: {server: 'https://from-env:1'}}]
contexts: [{name: x, context: {cluster: c}}]
)");
  dir.Write("home/.kube/config", R"(current-context: x
clusters: [{name: c, cluster: {server: 'https://from-home:1'}}]
contexts: [{name: x, context: {cluster: c}}]
)");
  TempDir sa;
  sa.Write("token", "t");
  sa.Write("ca.crt", "c");

  ResolveOptions opts;
  opts.in_cluster.service_account_dir = sa.path();
  std::map<std::string, std::string> env = {{"KUBECONFIG", "/nonexistent:" + env_file},
                                            {"KUBERNETES_SERVICE_HOST", "10.9.9.9"},
                                            {"KUBERNETES_SERVICE_PORT", "443"},
                                            {"HOME", dir.path() + "/home"}};
  opts.env = FakeEnv(env);
  opts.kubeconfig_flag = flag;
  EXPECT_EQ(ResolveConfig(opts)->host, "https://from-file:1");
  opts.kubeconfig_flag.clear();
  EXPECT_EQ(ResolveConfig(opts)->host, "https://from-env:1");
  env.erase("KUBECONFIG");
  opts.env = FakeEnv(env);
  EXPECT_EQ(ResolveConfig(opts)->host, "https://10.9.9.9:443");
  env.erase("KUBERNETES_SERVICE_HOST");
  opts.env = FakeEnv(env);
  EXPECT_EQ(ResolveConfig(opts)->host, "https://from-home:1");
  env.erase("HOME");
  opts.env = FakeEnv(env);
  EXPECT_EQ(ResolveConfig(opts).status().code(), absl::StatusCode::kNotFound);
}

TEST(ResolveConfigTest, ExplicitFlagMustLoad) {
  ResolveOptions opts;
  opts.kubeconfig_flag = "/nonexistent/flag-kubeconfig";
  opts.env = FakeEnv({});
  absl::StatusOr<RestConfig> cfg = ResolveConfig(opts);
  ASSERT_FALSE(cfg.ok());
  EXPECT_THAT(std::string(cfg.status().message()), HasSubstr("flag-kubeconfig"));
}

TEST(BearerTokenSourceTest, StaticToken) {
  testing::FakeClock clock;
  BearerTokenSource src("abc", "", &clock);
  EXPECT_EQ(*src.Token(), "abc");
  EXPECT_FALSE(src.from_file());
  EXPECT_FALSE(src.Refresh());
}

TEST(BearerTokenSourceTest, RereadsRotatedFile) {
  TempDir dir;
  std::string file = dir.Write("token", "one\n");
  testing::FakeClock clock;
  BearerTokenSource src("", file, &clock, absl::Seconds(10), absl::Minutes(1));
  EXPECT_EQ(*src.Token(), "one");
  dir.Write("token", "two");
  // Force a different mtime even on coarse file systems.
  std::filesystem::last_write_time(
      file, std::filesystem::last_write_time(file) + std::chrono::seconds(5));
  EXPECT_EQ(*src.Token(), "one");  // not checked again yet
  clock.Advance(absl::Seconds(11));
  EXPECT_EQ(*src.Token(), "two");  // mtime changed
  dir.Write("token", "three");
  std::filesystem::last_write_time(
      file, std::filesystem::last_write_time(file) - std::chrono::seconds(5));
  clock.Advance(absl::Minutes(1));
  EXPECT_EQ(*src.Token(), "three");  // max age reached
  dir.Write("token", "four");
  EXPECT_TRUE(src.Refresh());
  EXPECT_EQ(*src.Token(), "four");
}

TEST(BearerTokenSourceTest, MissingFileKeepsLastToken) {
  TempDir dir;
  std::string file = dir.Write("token", "one");
  testing::FakeClock clock;
  BearerTokenSource src("", file, &clock);
  EXPECT_EQ(*src.Token(), "one");
  std::filesystem::remove(file);
  clock.Advance(absl::Minutes(2));
  EXPECT_EQ(*src.Token(), "one");
  BearerTokenSource none("", dir.path() + "/absent", &clock);
  EXPECT_FALSE(none.Token().ok());
}

}  // namespace
}  // namespace kruise::kube
