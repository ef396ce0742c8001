// Runs the kruise-manager binary against an in-process fake API server (real HTTP) with
// WEBHOOK_HOST=127.0.0.1 and free ports: the certificate Secret appears, the webhook
// configurations (created first, from deploy/manager/base/webhooks.yaml) get a caBundle and a URL,
// /readyz turns 200, the Lease is held, the CRR controller runs, and SIGTERM exits 0 and releases
// the Lease.

#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "test/fakes/apiserver/fake_apiserver.h"
#include "yaml-cpp/yaml.h"

extern char** environ;

namespace kruise {
namespace {

using Json = nlohmann::json;

Json YamlToJson(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      Json o = Json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = YamlToJson(kv.second);
      return o;
    }
    case YAML::NodeType::Sequence: {
      Json a = Json::array();
      for (const auto& v : n) a.push_back(YamlToJson(v));
      return a;
    }
    case YAML::NodeType::Scalar: {
      std::string s = n.Scalar();
      int64_t i;
      if (n.Tag() != "!" && absl::SimpleAtoi(s, &i)) return i;
      if (n.Tag() != "!" && (s == "true" || s == "false")) return s == "true";
      return s;
    }
    default:
      return nullptr;
  }
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// Polls `cond` until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return cond();
}

class ManagerBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start().ok());
    dir_ = std::filesystem::temp_directory_path() / absl::StrCat("kruise-manager-smoke-", getpid());
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "kubeconfig")
        << "apiVersion: v1\nkind: Config\n"
        << "clusters:\n- name: fake\n  cluster:\n    server: " << server_.base_url() << "\n"
        << "users:\n- name: u\n  user:\n    token: t\n"
        << "contexts:\n- name: c\n  context:\n    cluster: fake\n"
        << "    user: u\ncurrent-context: c\n";
  }
  void TearDown() override {
    for (pid_t pid : {pid_, pid_b_}) {
      if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
    }
    std::filesystem::remove_all(dir_);
  }

  void Spawn(const std::vector<std::string>& args, const std::vector<std::string>& env,
             pid_t* pid = nullptr) {
    if (pid == nullptr) pid = &pid_;
    std::vector<std::string> all_env = env;
    for (char** e = environ; *e != nullptr; ++e) all_env.push_back(*e);
    std::vector<char*> argv, envp;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const std::string& e : all_env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    ASSERT_EQ(posix_spawn(pid, argv[0], nullptr, nullptr, argv.data(), envp.data()), 0);
  }

  testing::FakeApiServer server_;
  std::filesystem::path dir_;
  pid_t pid_ = -1;
  pid_t pid_b_ = -1;

  // The namespace and both webhook configurations, as deploy/ creates them (no caBundle).
  void SeedBed() {
    ASSERT_TRUE(server_
                    .Seed("namespaces", {{"metadata",
                                          {{"name", "kruise-system"},
                                           {"labels", {{"control-plane", "openkruise"}}}}}})
                    .ok());
    for (const YAML::Node& doc : YAML::LoadAllFromFile(std::string(KRUISE_SOURCE_DIR) +
                                                       "/deploy/manager/base/webhooks.yaml")) {
      Json obj = YamlToJson(doc);
      if (!obj.is_object()) continue;
      std::string res = obj.value("kind", "") == "MutatingWebhookConfiguration"
                            ? "mutatingwebhookconfigurations.admissionregistration.k8s.io"
                            : "validatingwebhookconfigurations.admissionregistration.k8s.io";
      ASSERT_TRUE(server_.Seed(res, obj).ok());
    }
  }

  void SeedOrphanCrr(const std::string& name) {
    ASSERT_TRUE(server_
                    .Seed("containerrecreaterequests.apps.kruise.io",
                          {{"apiVersion", "apps.kruise.io/v1alpha1"},
                           {"kind", "ContainerRecreateRequest"},
                           {"metadata",
                            {{"name", name},
                             {"namespace", "default"},
                             {"labels", {{"crr.apps.kruise.io/active", "true"}}}}},
                           {"spec", {{"podName", "gone"}, {"containers", {{{"name", "app"}}}}}}})
                    .ok());
  }
  bool CrrCompleted(const std::string& name) {
    auto crr = server_.Get("containerrecreaterequests.apps.kruise.io", "default", name);
    return crr.ok() && crr->contains("status") && (*crr)["status"].is_object() &&
           (*crr)["status"].value("phase", "") == "Completed";
  }
  std::string LeaseHolder() {
    auto lease = server_.Get("leases.coordination.k8s.io", "kruise-system", "kruise-manager");
    if (!lease.ok() || !lease->contains("spec")) return "";
    return (*lease)["spec"].value("holderIdentity", "");
  }
  // Starts a replica; returns its health port.
  int StartReplica(const std::string& tag, pid_t* pid) {
    const int health = FreePort(), metrics = FreePort(), hook = FreePort();
    Spawn(
        {KRUISE_MANAGER_BIN, "--kubeconfig", (dir_ / "kubeconfig").string(),
         "--webhook-bind-address=127.0.0.1", absl::StrCat("--health-probe-addr=127.0.0.1:", health),
         absl::StrCat("--metrics-addr=127.0.0.1:", metrics), "--leader-election-retry-period=200ms",
         "--leader-election-renew-deadline=1s", "--leader-election-lease-duration=2s"},
        {"POD_NAMESPACE=kruise-system", "WEBHOOK_HOST=127.0.0.1",
         absl::StrCat("WEBHOOK_PORT=", hook),
         absl::StrCat("WEBHOOK_CERT_DIR=", (dir_ / ("certs-" + tag)).string())},
        pid);
    return health;
  }
  static bool Ready(int port) {
    httplib::Client c("127.0.0.1", port);
    c.set_connection_timeout(2);
    auto r = c.Get("/readyz");
    return r && r->status == 200;
  }
  // SIGTERM (unless already sent), then the exit status (-1 if it did not exit within 30 s).
  static int Terminate(pid_t* pid, bool send = true) {
    if (send) kill(*pid, SIGTERM);
    int status = 0;
    if (!WaitFor([&] { return waitpid(*pid, &status, WNOHANG) == *pid; },
                 std::chrono::seconds(30))) {
      return -1;
    }
    *pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
};

// Two replicas: both serve the webhook and are ready with the same CA; only the first holds the
// Lease; when it stops, the second takes over at once (released Lease) and runs the controllers.
TEST_F(ManagerBinaryTest, SecondReplicaServesWebhooksAndTakesOverOnLeaderExit) {
  SeedBed();
  int health_a = StartReplica("a", &pid_);
  std::string holder_a;
  ASSERT_TRUE(WaitFor([&] { return Ready(health_a) && !(holder_a = LeaseHolder()).empty(); },
                      std::chrono::seconds(30)));
  int health_b = StartReplica("b", &pid_b_);
  ASSERT_TRUE(WaitFor([&] { return Ready(health_b); }, std::chrono::seconds(30)));
  EXPECT_EQ(LeaseHolder(), holder_a);  // b is ready without leading
  auto read = [](const std::filesystem::path& p) {
    std::ifstream f(p);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  EXPECT_EQ(read(dir_ / "certs-a" / "ca-cert.pem"), read(dir_ / "certs-b" / "ca-cert.pem"));
  EXPECT_FALSE(read(dir_ / "certs-a" / "ca-cert.pem").empty());

  auto stopped = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(pid_, SIGTERM), 0);
  std::string holder_b;
  ASSERT_TRUE(WaitFor(
      [&] {
        holder_b = LeaseHolder();
        return !holder_b.empty() && holder_b != holder_a;
      },
      std::chrono::seconds(30)));
  std::printf("failover: new leader %.2f s after SIGTERM to the old one\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count());
  ASSERT_EQ(Terminate(&pid_, /*send=*/false), 0);
  SeedOrphanCrr("after-failover");
  EXPECT_TRUE(WaitFor([&] { return CrrCompleted("after-failover"); }, std::chrono::seconds(30)));
  ASSERT_EQ(Terminate(&pid_b_), 0);
  EXPECT_EQ(LeaseHolder(), "");
}

TEST_F(ManagerBinaryTest, StartsServesReadyLeadsAndReleasesOnSigterm) {
  ASSERT_TRUE(server_
                  .Seed("namespaces", {{"metadata",
                                        {{"name", "kruise-system"},
                                         {"labels", {{"control-plane", "openkruise"}}}}}})
                  .ok());
  // The webhook configurations, as deploy/ creates them (no caBundle).
  std::vector<YAML::Node> docs =
      YAML::LoadAllFromFile(std::string(KRUISE_SOURCE_DIR) + "/deploy/manager/base/webhooks.yaml");
  int configs = 0;
  for (const YAML::Node& doc : docs) {
    Json obj = YamlToJson(doc);
    if (!obj.is_object()) continue;
    std::string kind = obj.value("kind", "");
    std::string res = kind == "MutatingWebhookConfiguration"
                          ? "mutatingwebhookconfigurations.admissionregistration.k8s.io"
                          : "validatingwebhookconfigurations.admissionregistration.k8s.io";
    ASSERT_TRUE(server_.Seed(res, obj).ok()) << kind;
    ++configs;
  }
  ASSERT_EQ(configs, 2);
  // A CRR whose pod does not exist: the leader's CRR controller completes it.
  ASSERT_TRUE(server_
                  .Seed("containerrecreaterequests.apps.kruise.io",
                        {{"apiVersion", "apps.kruise.io/v1alpha1"},
                         {"kind", "ContainerRecreateRequest"},
                         {"metadata",
                          {{"name", "orphan"},
                           {"namespace", "default"},
                           {"labels", {{"crr.apps.kruise.io/active", "true"}}}}},
                         {"spec", {{"podName", "gone"}, {"containers", {{{"name", "app"}}}}}}})
                  .ok());

  const int health_port = FreePort(), metrics_port = FreePort(), webhook_port = FreePort();
  Spawn({KRUISE_MANAGER_BIN, "--kubeconfig", (dir_ / "kubeconfig").string(),
         absl::StrCat("--health-probe-addr=127.0.0.1:", health_port),
         absl::StrCat("--metrics-addr=127.0.0.1:", metrics_port), "--enable-leader-election",
         "--leader-election-retry-period=200ms", "--leader-election-renew-deadline=1s",
         "--leader-election-lease-duration=2s", "--feature-gates=ImagePullJobGate=true"},
        {"POD_NAMESPACE=kruise-system", "WEBHOOK_HOST=127.0.0.1",
         absl::StrCat("WEBHOOK_PORT=", webhook_port),
         absl::StrCat("WEBHOOK_CERT_DIR=", (dir_ / "certs").string())});
  const auto kStart = std::chrono::steady_clock::now();

  // The certificate Secret appears.
  ASSERT_TRUE(
      WaitFor([&] { return server_.Get("secrets", "kruise-system", "kruise-webhook-certs").ok(); },
              std::chrono::seconds(30)));
  auto secret = server_.Get("secrets", "kruise-system", "kruise-webhook-certs");
  for (const char* key : {"ca-cert.pem", "cert.pem", "key.pem", "tls.crt", "tls.key"}) {
    EXPECT_TRUE((*secret)["data"].contains(key)) << key;
  }

  // caBundle injected into every remaining entry, which now points at our URL.
  for (std::string res : {"mutatingwebhookconfigurations.admissionregistration.k8s.io",
                          "validatingwebhookconfigurations.admissionregistration.k8s.io"}) {
    std::string name = res.rfind("mutating", 0) == 0 ? "kruise-mutating-webhook-configuration"
                                                     : "kruise-validating-webhook-configuration";
    ASSERT_TRUE(WaitFor(
        [&] {
          auto cfg = server_.Get(res, "", name);
          if (!cfg.ok() || !(*cfg)["webhooks"].is_array() || (*cfg)["webhooks"].empty()) {
            return false;
          }
          for (const Json& w : (*cfg)["webhooks"]) {
            if (w["clientConfig"].value("caBundle", "").empty()) return false;
          }
          return true;
        },
        std::chrono::seconds(30)))
        << name;
    auto cfg = server_.Get(res, "", name);
    bool crr_found = false;
    bool statefulset_found = false;  // the Advanced StatefulSet paths are served, so kept
    bool daemonset_found = false;  // so are the Advanced DaemonSet ones
    for (const Json& w : (*cfg)["webhooks"]) {
      std::string url = w["clientConfig"].value("url", "");
      EXPECT_EQ(url.rfind(absl::StrCat("https://127.0.0.1:", webhook_port, "/"), 0), 0u) << url;
      if (url.find("containerrecreaterequest") != std::string::npos) crr_found = true;
      if (absl::EndsWith(url, "-v1beta1-statefulset")) statefulset_found = true;
      if (absl::EndsWith(url, "-v1beta1-daemonset")) daemonset_found = true;
    }
    EXPECT_TRUE(crr_found) << name;
    EXPECT_TRUE(statefulset_found) << name;
    EXPECT_TRUE(daemonset_found) << name;
  }

  // /readyz turns 200; /healthz is 200.
  httplib::Client probe("127.0.0.1", health_port);
  probe.set_connection_timeout(2);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto r = probe.Get("/readyz");
        return r && r->status == 200;
      },
      std::chrono::seconds(30)));
  const double ready_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - kStart).count();
  auto healthz = probe.Get("/healthz");
  ASSERT_TRUE(healthz);
  EXPECT_EQ(healthz->status, 200);
  httplib::Client metrics("127.0.0.1", metrics_port);
  auto m = metrics.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);

  // Admission through the live HTTPS webhook, trusting only our CA (the server certificate names
  // WEBHOOK_HOST's IP).
  ASSERT_TRUE(
      server_
          .Seed(
              "pods",
              {{"metadata", {{"name", "web-0"}, {"namespace", "default"}}},
               {"spec", {{"nodeName", "node-a"}, {"containers", {{{"name", "app"}}}}}},
               {"status",
                {{"phase", "Running"},
                 {"containerStatuses",
                  {{{"name", "app"}, {"containerID", "containerd://abc"}, {"restartCount", 0}}}}}}})
          .ok());
  httplib::SSLClient hook("127.0.0.1", webhook_port);
  hook.set_ca_cert_path((dir_ / "certs" / "ca-cert.pem").string().c_str());
  hook.enable_server_certificate_verification(true);
  auto review = [&](const std::string& path, const Json& obj) -> Json {
    Json body = {
        {"apiVersion", "admission.k8s.io/v1"},
        {"kind", "AdmissionReview"},
        {"request",
         {{"uid", "u-1"},
          {"kind", {{"group", "apps.kruise.io"}, {"version", "v1alpha1"}, {"kind", "X"}}},
          {"resource", {{"group", "apps.kruise.io"}, {"version", "v1alpha1"}, {"resource", "x"}}},
          {"namespace", "default"},
          {"name", "n"},
          {"operation", "CREATE"},
          {"userInfo", {{"username", "test"}}},
          {"object", obj}}}};
    auto r = hook.Post(path, body.dump(), "application/json");
    if (!r || r->status != 200) {
      ADD_FAILURE() << path << ": "
                    << (r ? std::to_string(r->status) : httplib::to_string(r.error()));
      return Json::object();
    }
    return Json::parse(r->body)["response"];
  };
  Json crr = {{"apiVersion", "apps.kruise.io/v1alpha1"},
              {"kind", "ContainerRecreateRequest"},
              {"metadata", {{"name", "n"}, {"namespace", "default"}}},
              {"spec", {{"podName", "web-0"}, {"containers", {{{"name", "app"}}}}}}};
  Json allowed = review("/mutate-apps-kruise-io-containerrecreaterequest", crr);
  EXPECT_EQ(allowed.value("allowed", false), true) << allowed.dump();
  EXPECT_EQ(allowed.value("patchType", ""), "JSONPatch");
  crr["spec"]["podName"] = "missing";
  Json denied = review("/mutate-apps-kruise-io-v1alpha1-containerrecreaterequest", crr);
  EXPECT_EQ(denied.value("allowed", true), false) << denied.dump();
  Json job = {{"apiVersion", "apps.kruise.io/v1alpha1"},
              {"kind", "ImagePullJob"},
              {"metadata", {{"name", "j"}, {"namespace", "default"}}},
              {"spec", Json::object()}};
  Json bad_job = review("/validate-apps-kruise-io-imagepulljob", job);
  EXPECT_EQ(bad_job.value("allowed", true), false) << bad_job.dump();
  // SidecarSet: one handler per kind for both versions; defaults come back as a JSON patch and a
  // missing selector is denied with its field path.
  Json sidecarset = {{"apiVersion", "apps.kruise.io/v1beta1"},
                     {"kind", "SidecarSet"},
                     {"metadata", {{"name", "s"}}},
                     {"spec",
                      {{"selector", {{"matchLabels", {{"app", "x"}}}}},
                       {"containers", {{{"name", "c"}, {"image", "busybox:1.35"}}}}}}};
  Json defaulted = review("/mutate-apps-kruise-io-v1beta1-sidecarset", sidecarset);
  EXPECT_EQ(defaulted.value("allowed", false), true) << defaulted.dump();
  EXPECT_EQ(defaulted.value("patchType", ""), "JSONPatch") << defaulted.dump();
  sidecarset["spec"].erase("selector");
  Json no_selector = review("/validate-apps-kruise-io-v1alpha1-sidecarset", sidecarset);
  EXPECT_EQ(no_selector.value("allowed", true), false) << no_selector.dump();
  EXPECT_NE(no_selector.dump().find("spec.selector: Required value"), std::string::npos)
      << no_selector.dump();

  // Advanced StatefulSet: defaults as a JSON patch; in-place updates without the
  // InPlaceUpdateReady readiness gate are denied naming the field.
  Json asts = {{"apiVersion", "apps.kruise.io/v1beta1"},
               {"kind", "StatefulSet"},
               {"metadata", {{"name", "db"}, {"namespace", "default"}}},
               {"spec",
                {{"selector", {{"matchLabels", {{"app", "db"}}}}},
                 {"template",
                  {{"metadata", {{"labels", {{"app", "db"}}}}},
                   {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox:1.35"}}}}}}}}}}};
  Json asts_defaulted = review("/mutate-apps-kruise-io-v1beta1-statefulset", asts);
  EXPECT_EQ(asts_defaulted.value("allowed", false), true) << asts_defaulted.dump();
  EXPECT_EQ(asts_defaulted.value("patchType", ""), "JSONPatch") << asts_defaulted.dump();
  asts["spec"]["updateStrategy"] = {{"rollingUpdate", {{"podUpdatePolicy", "InPlaceIfPossible"}}}};
  Json no_gate = review("/validate-apps-kruise-io-v1beta1-statefulset", asts);
  EXPECT_EQ(no_gate.value("allowed", true), false) << no_gate.dump();
  EXPECT_NE(no_gate.dump().find("spec.template.spec.readinessGates"), std::string::npos)
      << no_gate.dump();

  // Advanced DaemonSet: defaults as a JSON patch; maxSurge with InPlaceIfPossible is denied.
  Json ads = {{"apiVersion", "apps.kruise.io/v1beta1"},
              {"kind", "DaemonSet"},
              {"metadata", {{"name", "agent"}, {"namespace", "default"}}},
              {"spec",
               {{"selector", {{"matchLabels", {{"app", "agent"}}}}},
                {"template",
                 {{"metadata", {{"labels", {{"app", "agent"}}}}},
                  {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox:1.35"}}}}}}}}}}};
  Json ads_defaulted = review("/mutate-apps-kruise-io-v1beta1-daemonset", ads);
  EXPECT_EQ(ads_defaulted.value("allowed", false), true) << ads_defaulted.dump();
  EXPECT_EQ(ads_defaulted.value("patchType", ""), "JSONPatch") << ads_defaulted.dump();
  ads["spec"]["updateStrategy"] = {
      {"rollingUpdate", {{"rollingUpdateType", "InPlaceIfPossible"}, {"maxSurge", 1}}}};
  Json surge_in_place = review("/validate-apps-kruise-io-v1beta1-daemonset", ads);
  EXPECT_EQ(surge_in_place.value("allowed", true), false) << surge_in_place.dump();
  EXPECT_NE(surge_in_place.dump().find("must be 0 for InPlaceIfPossible"), std::string::npos)
      << surge_in_place.dump();

  // The Lease is held.
  std::string holder;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto lease = server_.Get("leases.coordination.k8s.io", "kruise-system", "kruise-manager");
        if (!lease.ok()) return false;
        holder = (*lease)["spec"].value("holderIdentity", "");
        return !holder.empty();
      },
      std::chrono::seconds(30)));

  // The leader runs the CRR controller.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto crr = server_.Get("containerrecreaterequests.apps.kruise.io", "default", "orphan");
        return crr.ok() && crr->contains("status") && (*crr)["status"].is_object() &&
               (*crr)["status"].value("phase", "") == "Completed" &&
               !(*crr)["metadata"]["labels"].contains("crr.apps.kruise.io/active");
      },
      std::chrono::seconds(30)));
  RecordProperty("seconds_to_ready", std::to_string(ready_seconds));
  std::printf("kruise-manager ready after %.2f s (holder %s)\n", ready_seconds, holder.c_str());

  // Resident memory of the running manager (reported, not asserted).
  {
    std::ifstream st(absl::StrCat("/proc/", pid_, "/status"));
    std::string line;
    while (std::getline(st, line)) {
      if (line.rfind("VmRSS:", 0) == 0 || line.rfind("VmHWM:", 0) == 0) {
        std::printf("kruise-manager %s\n", line.c_str());
      }
    }
  }

  // SIGTERM: exit 0, Lease released.
  const auto kStop = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(pid_, SIGTERM), 0);
  int status = 0;
  bool exited =
      WaitFor([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, std::chrono::seconds(30));
  ASSERT_TRUE(exited);
  pid_ = -1;
  std::printf("kruise-manager stopped %.2f s after SIGTERM\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - kStop).count());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  auto lease = server_.Get("leases.coordination.k8s.io", "kruise-system", "kruise-manager");
  ASSERT_TRUE(lease.ok());
  EXPECT_EQ((*lease)["spec"].value("holderIdentity", ""), "");
}

TEST_F(ManagerBinaryTest, UnknownFeatureGateExitsWithUsageError) {
  Spawn({KRUISE_MANAGER_BIN, "--feature-gates=Bogus=true"}, {});
  int status = 0;
  ASSERT_EQ(waitpid(pid_, &status, 0), pid_);
  pid_ = -1;
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
}

}  // namespace
}  // namespace kruise
