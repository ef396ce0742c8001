#include "manager/app/feature_gates.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/config.h"
#include "manager/app/app.h"
#include "manager/app/options.h"

namespace kruise::manager {
namespace {

using ::testing::HasSubstr;

TEST(FeatureGatesTest, DefaultsFollowOpenKruise) {
  FeatureGates g;
  EXPECT_TRUE(g.Enabled("PodWebhook"));
  EXPECT_TRUE(g.Enabled("KruiseDaemon"));
  EXPECT_FALSE(g.Enabled("ImagePullJobGate"));
  EXPECT_FALSE(g.Enabled("NoSuchGate"));
}

TEST(FeatureGatesTest, ParsesValues) {
  auto g = FeatureGates::Parse(" ImagePullJobGate=true, PodWebhook=false ,");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->Enabled("ImagePullJobGate"));
  EXPECT_FALSE(g->Enabled("PodWebhook"));
  EXPECT_THAT(g->String(), HasSubstr("ImagePullJobGate=true"));
}

TEST(FeatureGatesTest, UnknownGateIsAClearError) {
  auto g = FeatureGates::Parse("ImagePullJobGate=true,Bogus=true");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("unknown feature gate \"Bogus\""));
  EXPECT_THAT(g.status().message(), HasSubstr("ImagePullJobGate"));  // lists the known ones
}

TEST(FeatureGatesTest, BadValueIsAnError) {
  auto g = FeatureGates::Parse("ImagePullJobGate=yes");
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("=true or =false"));
  EXPECT_FALSE(FeatureGates::Parse("ImagePullJobGate").ok());
}

TEST(FeatureGatesTest, ImagePullJobGateRequiresKruiseDaemon) {
  auto g = FeatureGates::Parse("ImagePullJobGate=true,KruiseDaemon=false");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_FALSE(g->Enabled("ImagePullJobGate"));
  EXPECT_FALSE(g->Enabled("DaemonWatchingPod"));
  ASSERT_EQ(g->warnings().size(), 1u);
  EXPECT_THAT(g->warnings()[0],
              HasSubstr("ImagePullJobGate=true ignored: it requires KruiseDaemon"));
}

TEST(FeatureGatesTest, PreDownloadTurnsImagePullJobGateOn) {
  auto g = FeatureGates::Parse("PreDownloadImageForInPlaceUpdate=true");
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g->Enabled("ImagePullJobGate"));
  auto off = FeatureGates::Parse("PreDownloadImageForInPlaceUpdate=true,KruiseDaemon=false");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->Enabled("ImagePullJobGate"));
  EXPECT_FALSE(off->Enabled("PreDownloadImageForInPlaceUpdate"));
}

TEST(FeatureGatesTest, PodWebhookOffForcesDependentsOff) {
  auto g = FeatureGates::Parse("PodWebhook=false,KruisePodReadinessGate=true");
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(g->Enabled("KruisePodReadinessGate"));
  EXPECT_FALSE(g->Enabled("WorkloadSpread"));
  EXPECT_TRUE(g->Enabled("KruiseDaemon"));
}

TEST(FeatureGatesTest, CascadingDeletionNeedsDeletionProtection) {
  auto g = FeatureGates::Parse(
      "DeletionProtectionForCRDCascadingGate=true,ResourcesDeletionProtection=false");
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE(g->Enabled("DeletionProtectionForCRDCascadingGate"));
  // ResourcesDeletionProtection is on by default (OpenKruise master: Beta, default true).
  g = FeatureGates::Parse("DeletionProtectionForCRDCascadingGate=true");
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g->Enabled("ResourcesDeletionProtection"));
  EXPECT_TRUE(g->Enabled("DeletionProtectionForCRDCascadingGate"));
  EXPECT_FALSE(FeatureGates().Enabled("DeletionProtectionForCRDCascadingGate"));
}

// ---- Flags and environment

kube::EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& k) -> std::optional<std::string> {
    auto it = vars.find(k);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

absl::StatusOr<ManagerConfig> Parse(std::vector<std::string> args,
                                    std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), "kruise-manager");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return ParseManagerCommandLine(static_cast<int>(argv.size()), argv.data(), Env(env));
}

TEST(ManagerOptionsTest, Defaults) {
  auto c = Parse({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->metrics_addr, ":8080");
  EXPECT_EQ(c->health_probe_addr, ":8000");
  EXPECT_TRUE(c->enable_leader_election);
  EXPECT_EQ(c->leader_election_namespace, "kruise-system");
  EXPECT_EQ(c->leader_election_id, "kruise-manager");
  EXPECT_EQ(c->lease_duration, absl::Seconds(15));
  EXPECT_EQ(c->renew_deadline, absl::Seconds(10));
  EXPECT_EQ(c->retry_period, absl::Seconds(2));
  EXPECT_EQ(c->rest_qps, 30);
  EXPECT_EQ(c->rest_burst, 50);
  EXPECT_EQ(c->webhook_port, 9876);
  EXPECT_EQ(c->secret_name, "kruise-webhook-certs");
  EXPECT_EQ(c->service_name, "kruise-webhook-service");
  EXPECT_EQ(c->webhook_cert_dir, "/tmp/kruise-webhook-certs");
  EXPECT_EQ(c->Workers("crr", 3), 3);
  EXPECT_EQ(c->nodeimage_creation_delay, absl::Seconds(30));
  EXPECT_EQ(c->default_ttl_for_always_nodeimage_seconds, 300);
  EXPECT_EQ(c->webhook_bind_address, "");  // all interfaces
  EXPECT_EQ(c->webhook_cert_renew_before, absl::Hours(24 * 180));
}

TEST(ManagerOptionsTest, FlagsAndEnvironment) {
  auto c = Parse({"--enable-leader-election=false", "--metrics-addr=127.0.0.1:0",
                  "--leader-election-lease-duration", "30s", "--crr-workers=5",
                  "--feature-gates=ImagePullJobGate=true", "--log-format=json", "-v", "4",
                  "--nodeimage-creation-delay=1m", "--default-ttlseconds-for-always-nodeimage=5",
                  "--webhook-bind-address=127.0.0.1", "--webhook-cert-renew-before=720h"},
                 {{"POD_NAMESPACE", "kruise"},
                  {"WEBHOOK_PORT", "19876"},
                  {"WEBHOOK_HOST", "127.0.0.1"},
                  {"SECRET_NAME", "s"},
                  {"SERVICE_NAME", "svc"},
                  {"WEBHOOK_CERT_DIR", "/tmp/x"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->enable_leader_election);
  EXPECT_EQ(c->metrics_addr, "127.0.0.1:0");
  EXPECT_EQ(c->webhook_bind_address, "127.0.0.1");
  EXPECT_EQ(c->webhook_cert_renew_before, absl::Hours(720));
  EXPECT_EQ(c->lease_duration, absl::Seconds(30));
  EXPECT_EQ(c->Workers("crr", 3), 5);
  EXPECT_EQ(c->Workers("imagepulljob", 3), 3);
  EXPECT_TRUE(c->feature_gates.Enabled("ImagePullJobGate"));
  EXPECT_EQ(c->log_format, "json");
  EXPECT_EQ(c->verbosity, 4);
  EXPECT_EQ(c->nodeimage_creation_delay, absl::Minutes(1));
  EXPECT_EQ(c->default_ttl_for_always_nodeimage_seconds, 5);
  EXPECT_EQ(c->namespace_name, "kruise");
  EXPECT_EQ(c->leader_election_namespace, "kruise");  // follows POD_NAMESPACE
  EXPECT_EQ(c->webhook_port, 19876);
  EXPECT_EQ(c->webhook_host, "127.0.0.1");
  EXPECT_EQ(c->secret_name, "s");
  EXPECT_EQ(c->service_name, "svc");
  EXPECT_EQ(c->webhook_cert_dir, "/tmp/x");
  auto bare = Parse({"--enable-leader-election", "--leader-election-namespace=other"});
  ASSERT_TRUE(bare.ok());
  EXPECT_TRUE(bare->enable_leader_election);
  EXPECT_EQ(bare->leader_election_namespace, "other");
}

TEST(ManagerOptionsTest, Errors) {
  auto gate = Parse({"--feature-gates=Nope=true"});
  ASSERT_FALSE(gate.ok());
  EXPECT_THAT(gate.status().message(), HasSubstr("unknown feature gate \"Nope\""));
  auto dur = Parse({"--leader-election-retry-period=soon"});
  ASSERT_FALSE(dur.ok());
  EXPECT_THAT(dur.status().message(), HasSubstr("--leader-election-retry-period"));
  auto port = Parse({}, {{"WEBHOOK_PORT", "http"}});
  ASSERT_FALSE(port.ok());
  EXPECT_THAT(port.status().message(), HasSubstr("WEBHOOK_PORT"));
  EXPECT_FALSE(Parse({"--no-such-flag"}).ok());
  EXPECT_FALSE(Parse({"--webhook-cert-renew-before=0s"}).ok());
  EXPECT_FALSE(Parse({"--log-format=xml"}).ok());
  EXPECT_TRUE(absl::IsCancelled(Parse({"--help"}).status()));
}

TEST(RegisterAdmissionHandlersTest, PathsFollowTheFeatureGates) {
  auto defaults = FeatureGates::Parse("");
  ASSERT_TRUE(defaults.ok());
  webhook::HandlerRegistry on;
  RegisterAdmissionHandlers(*defaults, nullptr, &on, "kruise-system");
  EXPECT_TRUE(on.Has("/mutate-pod"));
  EXPECT_TRUE(on.Has("/mutate-apps-kruise-io-v1alpha1-containerrecreaterequest"));
  EXPECT_FALSE(on.Has("/validate-apps-kruise-io-imagepulljob"));  // ImagePullJobGate is Alpha
  // SidecarSet: no gate; both versions' paths and the versionless ones.
  for (const char* path :
       {"/mutate-apps-kruise-io-v1alpha1-sidecarset",
        "/validate-apps-kruise-io-v1alpha1-sidecarset", "/mutate-apps-kruise-io-v1beta1-sidecarset",
        "/validate-apps-kruise-io-v1beta1-sidecarset", "/mutate-apps-kruise-io-sidecarset",
        "/validate-apps-kruise-io-sidecarset"}) {
    EXPECT_TRUE(on.Has(path)) << path;
  }
  // Advanced StatefulSet: no gate; one handler pair for v1beta1, v1alpha1 and versionless paths.
  for (const char* path : {"/mutate-apps-kruise-io-v1beta1-statefulset",
                           "/validate-apps-kruise-io-v1beta1-statefulset",
                           "/mutate-apps-kruise-io-v1alpha1-statefulset",
                           "/validate-apps-kruise-io-v1alpha1-statefulset",
                           "/mutate-apps-kruise-io-statefulset",
                           "/validate-apps-kruise-io-statefulset"}) {
    EXPECT_TRUE(on.Has(path)) << path;
  }

  auto off = FeatureGates::Parse("PodWebhook=false,ImagePullJobGate=true");
  ASSERT_TRUE(off.ok());
  webhook::HandlerRegistry some;
  RegisterAdmissionHandlers(*off, nullptr, &some, "kruise-system");
  EXPECT_FALSE(some.Has("/mutate-pod"));
  EXPECT_TRUE(some.Has("/validate-apps-kruise-io-imagepulljob"));
}

}  // namespace
}  // namespace kruise::manager
