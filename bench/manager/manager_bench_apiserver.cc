// manager-bench-apiserver: the fake API server seeded like a busy cluster as kruise-manager sees
// it, for bench/manager/run.sh (kruise-manager RSS, GitHub issue 5).
//
//   manager-bench-apiserver --port-file F --stats-file S --nodes 1000 --pods 30000
//
// Seeds: namespaces kruise-system (control-plane: openkruise), kruise-daemon-config and
// ns-0..ns-(N-1); N Ready Nodes (MakeRealisticNode plus --node-status-images entries in
// status.images, as a kubelet reports them); one NodeImage per Node (--node-images) with
// the Node's labels, --images-per-node images of one tag each written by a completed ImagePullJob
// (createdAt, version, pullPolicy, ownerReferences) and a Succeeded status per tag, plus
// managedFields, as OpenKruise's manager and daemon leave them; the --jobs completed ImagePullJobs
// those tags point to (their pull-secret copies are gone, as after a job completes); pods
// (MakeRealisticPod) spread over namespaces and nodes; the kruise mutating and validating webhook
// configurations (the paths of deploy/manager/base/webhooks.yaml) so the manager's certificate
// controller has something to inject into.
//
// The objects are built so that an idle manager has nothing to do: tags reference live jobs, their
// TTL is far away, NodeImage labels equal the Node labels.
//
// Every 250 ms --stats-file gets "writes <n>": the number of POST/PUT/PATCH/DELETE requests so far,
// leases excluded (the leader renews its lease every retry period), so a script can tell when the
// controllers went idle.

#include <signal.h>

#include <atomic>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/tls.h"
#include "test/fakes/apiserver/fake_apiserver.h"

namespace {

using Json = nlohmann::json;
using kruise::testing::FakeApiServer;

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

// A completed ImagePullJob (completionPolicy Always, no TTL: the job controller leaves it alone).
Json CompletedJob(int i, int nodes, absl::Time done) {
  return {{"apiVersion", "apps.kruise.io/v1alpha1"},
          {"kind", "ImagePullJob"},
          {"metadata", {{"name", absl::StrCat("warm-", i)}, {"namespace", "ns-0"}}},
          {"spec",
           {{"image", absl::StrCat("registry.example.com/team/app-", i, ":v1.2.3")},
            {"parallelism", 10},
            {"pullSecrets", {absl::StrCat("regcred-", i)}},
            {"pullPolicy", {{"backoffLimit", 3}, {"timeoutSeconds", 600}}},
            {"completionPolicy", {{"type", "Always"}, {"activeDeadlineSeconds", 1200}}},
            {"imagePullPolicy", "IfNotPresent"}}},
          {"status",
           {{"desired", nodes},
            {"active", 0},
            {"succeeded", nodes},
            {"failed", 0},
            {"startTime", Rfc3339(done - absl::Minutes(4))},
            {"completionTime", Rfc3339(done)},
            {"message", absl::StrCat("job has completed (", nodes, "/", nodes, " succeeded)")}}}};
}

// The NodeImage of `node` (labels copied), its tags owned by `jobs` (stored objects, for uids).
Json RealisticNodeImage(const Json& node, const std::vector<Json>& jobs, int images, int index,
                        absl::Time done) {
  Json spec_images = Json::object();
  Json statuses = Json::object();
  for (int k = 0; k < images; ++k) {
    const Json& job = jobs[(index + k) % jobs.size()];
    const std::string image = job["spec"]["image"].get<std::string>();
    const std::string repo = image.substr(0, image.rfind(':'));
    const std::string tag = image.substr(image.rfind(':') + 1);
    Json t = {{"tag", tag},
              {"createdAt", Rfc3339(done - absl::Minutes(5))},
              {"version", 1},
              {"pullPolicy",
               {{"backoffLimit", 3},
                {"timeoutSeconds", 600},
                {"activeDeadlineSeconds", 1200},
                {"ttlSecondsAfterFinished", 30 * 86400 + index % 300}}},
              {"ownerReferences",
               {{{"apiVersion", "apps.kruise.io/v1alpha1"},
                 {"kind", "ImagePullJob"},
                 {"name", job["metadata"]["name"]},
                 {"namespace", job["metadata"]["namespace"]},
                 {"uid", job["metadata"]["uid"]}}}}};
    spec_images[repo] = {{"tags", {t}},
                         {"pullSecrets",
                          {{{"name", absl::StrCat("regcred-", (index + k) % jobs.size(), "-copy")},
                            {"namespace", "kruise-daemon-config"}}}}};
    statuses[repo] = {
        {"tags",
         {{{"tag", tag},
           {"phase", "Succeeded"},
           {"progress", 100},
           {"version", 1},
           {"startTime", Rfc3339(done - absl::Minutes(4))},
           {"completionTime", Rfc3339(done - absl::Minutes(3))},
           {"imageID", absl::StrCat(repo, "@sha256:", std::string(56, 'c'), 1000 + index % 9000)},
           {"message", "image pulled"}}}}};
  }
  Json managed = Json::array({{{"manager", "kruise-manager"},
                               {"operation", "Update"},
                               {"apiVersion", "apps.kruise.io/v1alpha1"},
                               {"time", Rfc3339(done - absl::Minutes(5))},
                               {"fieldsType", "FieldsV1"},
                               {"fieldsV1",
                                {{"f:metadata", {{"f:labels", {{".", Json::object()}}}}},
                                 {"f:spec", {{"f:images", Json::object()}}}}}},
                              {{"manager", "kruise-daemon"},
                               {"operation", "Update"},
                               {"apiVersion", "apps.kruise.io/v1alpha1"},
                               {"time", Rfc3339(done - absl::Minutes(3))},
                               {"fieldsType", "FieldsV1"},
                               {"subresource", "status"},
                               {"fieldsV1",
                                {{"f:status",
                                  {{"f:desired", Json::object()},
                                   {"f:succeeded", Json::object()},
                                   {"f:imageStatuses", Json::object()}}}}}}});
  return {{"apiVersion", "apps.kruise.io/v1alpha1"},
          {"kind", "NodeImage"},
          {"metadata",
           {{"name", node["metadata"]["name"]},
            {"labels", node["metadata"]["labels"]},
            {"managedFields", managed}}},
          {"spec", {{"images", spec_images}}},
          {"status",
           {{"desired", images},
            {"succeeded", images},
            {"failed", 0},
            {"pulling", 0},
            {"waiting", 0},
            {"imageStatuses", statuses}}}};
}

// status.images as the kubelet reports them (by default the 50 largest images on the node): names
// (digest and tag references) and size.
Json NodeStatusImages(int count, int index) {
  Json images = Json::array();
  for (int k = 0; k < count; ++k) {
    const int app = (index + k * 7) % 50;
    const std::string repo = absl::StrCat("registry.example.com/team/app-", app);
    images.push_back({{"names",
                       {absl::StrCat(repo, "@sha256:", std::string(58, 'd'), 100000 + app * 7 + k),
                        absl::StrCat(repo, ":v1.", k % 4, ".3")}},
                      {"sizeBytes", 50'000'000 + 1'234'567 * app}});
  }
  return images;
}

Json WebhookConfig(const std::string& kind, const std::string& name,
                   const std::vector<std::pair<std::string, std::string>>& hooks) {
  Json webhooks = Json::array();
  for (const auto& [hook, path] : hooks) {
    const std::string resource = path.substr(path.rfind('-') + 1) + "s";
    webhooks.push_back(
        {{"name", hook},
         {"clientConfig",
          {{"service",
            {{"namespace", "kruise-system"},
             {"name", "kruise-webhook-service"},
             {"path", path},
             {"port", 443}}}}},
         {"rules",
          {{{"apiGroups", {resource == "pods" ? "" : "apps.kruise.io"}},
            {"apiVersions", resource == "pods" ? Json{"v1"} : Json{"v1alpha1", "v1beta1"}},
            {"resources", {resource}},
            {"operations", {"CREATE", "UPDATE"}},
            {"scope", "*"}}}},
         {"failurePolicy", "Fail"},
         {"timeoutSeconds", 10},
         {"sideEffects", "None"},
         {"admissionReviewVersions", {"v1", "v1beta1"}}});
  }
  return {{"apiVersion", "admissionregistration.k8s.io/v1"},
          {"kind", kind},
          {"metadata", {{"name", name}}},
          {"webhooks", webhooks}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Fake API server seeded for the kruise-manager memory benchmark"};
  std::string addr = "127.0.0.1:0";
  std::string port_file;
  std::string stats_file;
  int nodes = 1000;
  int pods = 30000;
  int namespaces = 10;
  int jobs = 8;
  int images_per_node = 4;
  bool node_images = true;
  int node_status_images = 25;
  int cloneset_pods = 5000;
  int replicasets = 0;
  app.add_option("--addr", addr, "host:port to listen on (port 0: any free port)");
  app.add_option("--port-file", port_file, "write the bound port to this file once serving");
  app.add_option("--stats-file", stats_file, "write 'writes <n>' here every 250 ms");
  app.add_option("--nodes", nodes, "Ready nodes");
  app.add_option("--pods", pods, "realistic pods");
  app.add_option("--namespaces", namespaces, "pods are spread over this many namespaces");
  app.add_option("--jobs", jobs, "completed ImagePullJobs the NodeImage tags belong to");
  app.add_option("--images-per-node", images_per_node, "images (one tag each) per NodeImage");
  app.add_option("--node-images", node_images, "one NodeImage per node (true|false)");
  app.add_option("--node-status-images", node_status_images,
                 "images a Node's status lists (kubelet reports up to 50)");
  app.add_option("--cloneset-pods", cloneset_pods,
                 "the first N pods belong to 50 paused CloneSets (the rest to ReplicaSets)");
  app.add_option("--replicasets", replicasets,
                 "ReplicaSets with full pod templates, 4 per Deployment (one current, three old "
                 "at 0 replicas, as a Deployment's history keeps them): what the WorkloadSpread "
                 "controller's workload caches hold");
  CLI11_PARSE(app, argc, argv);
  namespaces = std::max(1, namespaces);
  jobs = std::max(1, jobs);
  images_per_node = std::clamp(images_per_node, 0, jobs);

  kruise::testing::FakeApiServerOptions opts;
  size_t colon = addr.rfind(':');
  opts.host = colon == std::string::npos ? addr : addr.substr(0, colon);
  if (colon != std::string::npos && !absl::SimpleAtoi(addr.substr(colon + 1), &opts.port)) {
    std::cerr << "bad --addr " << addr << "\n";
    return 2;
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  FakeApiServer server(opts);
  auto seed = [&server](const std::string& resource, const Json& obj) -> Json {
    auto st = server.Seed(resource, obj);
    if (!st.ok()) {
      std::cerr << "seed " << resource << ": " << st.status() << "\n";
      std::exit(1);
    }
    return *std::move(st);
  };
  const absl::Time done = absl::Now() - absl::Minutes(10);
  seed("namespaces",
       {{"metadata", {{"name", "kruise-system"}, {"labels", {{"control-plane", "openkruise"}}}}}});
  seed("namespaces", {{"metadata", {{"name", "kruise-daemon-config"}}}});
  for (int i = 0; i < namespaces; ++i) {
    seed("namespaces", {{"metadata", {{"name", absl::StrCat("ns-", i)}}}});
  }
  seed("mutatingwebhookconfigurations.admissionregistration.k8s.io",
       WebhookConfig("MutatingWebhookConfiguration", "kruise-mutating-webhook-configuration",
                     {{"mpod.kb.io", "/mutate-pod"},
                      {"mimagepulljob.kb.io", "/mutate-apps-kruise-io-imagepulljob"},
                      {"mcontainerrecreaterequest.kb.io",
                       "/mutate-apps-kruise-io-containerrecreaterequest"}}));
  seed("validatingwebhookconfigurations.admissionregistration.k8s.io",
       WebhookConfig("ValidatingWebhookConfiguration", "kruise-validating-webhook-configuration",
                     {{"vimagepulljob.kb.io", "/validate-apps-kruise-io-imagepulljob"},
                      {"vcontainerrecreaterequest.kb.io",
                       "/validate-apps-kruise-io-containerrecreaterequest"},
                      {"vnodeimage.kb.io", "/validate-apps-kruise-io-nodeimage"}}));
  std::vector<Json> job_objs;
  for (int i = 0; node_images && i < jobs; ++i) {
    job_objs.push_back(seed("imagepulljobs.apps.kruise.io", CompletedJob(i, nodes, done)));
  }
  for (int i = 0; i < nodes; ++i) {
    Json node = kruise::testing::MakeRealisticNode(absl::StrCat("node-", i), i);
    node["status"]["images"] = NodeStatusImages(node_status_images, i);
    node = seed("nodes", node);
    if (node_images) {
      seed("nodeimages.apps.kruise.io",
           RealisticNodeImage(node, job_objs, images_per_node, i, done));
    }
  }
  // MakeRealisticPod gives pod i the owner "app-<i % 50>" (a CloneSet). The first
  // --cloneset-pods keep it, and their 50 CloneSets exist, paused (so an idle manager only writes
  // each one's first revision and status); the others belong to ReplicaSets.
  constexpr int kApps = 50;
  std::vector<int> per_app(kApps, 0);
  for (int i = 0; i < std::min(pods, cloneset_pods); ++i) ++per_app[i % kApps];
  std::vector<std::string> set_uids(kApps);
  for (int a = 0; a < kApps; ++a) {
    if (per_app[a] == 0) continue;
    Json probe = kruise::testing::MakeRealisticPod("x", "x", "", a);
    const std::string app_name = absl::StrCat("app-", a);
    Json tmpl = {{"metadata", {{"labels", {{"app", app_name}}}}},
                 {"spec", {{"containers", probe["spec"]["containers"]}}}};
    Json cs = {{"apiVersion", "apps.kruise.io/v1alpha1"},
               {"kind", "CloneSet"},
               {"metadata", {{"name", app_name}, {"namespace", absl::StrCat("ns-", a % namespaces)}}},
               {"spec",
                {{"replicas", per_app[a]},
                 {"selector", {{"matchLabels", {{"app", app_name}}}}},
                 {"template", tmpl},
                 {"updateStrategy", {{"type", "InPlaceIfPossible"}, {"paused", true}}}}}};
    set_uids[a] = seed("clonesets.apps.kruise.io", cs)["metadata"]["uid"].get<std::string>();
  }
  for (int i = 0; i < pods; ++i) {
    std::string node = nodes > 0 ? absl::StrCat("node-", i % nodes) : "";
    // A CloneSet's pods live in its namespace.
    const int ns = i < cloneset_pods ? (i % kApps) % namespaces : i % namespaces;
    Json pod = kruise::testing::MakeRealisticPod(absl::StrCat("ns-", ns), absl::StrCat("pod-", i),
                                                 node, i);
    Json& owner = pod["metadata"]["ownerReferences"][0];
    if (i < cloneset_pods) {
      owner["uid"] = set_uids[i % kApps];
    } else {
      owner["apiVersion"] = "apps/v1";
      owner["kind"] = "ReplicaSet";
      owner["name"] = absl::StrCat(owner["name"].get<std::string>(), "-5d8f7c9b6d");
    }
    seed("pods", pod);
  }
  // Deployments and their ReplicaSets (the pods above keep their own owners: these are the other
  // workloads of a cluster, cached by the WorkloadSpread controller, not owning pods here).
  for (int r = 0; r < replicasets; ++r) {
    const int d = r / 4;
    const std::string ns = absl::StrCat("ns-", d % namespaces);
    const std::string name = absl::StrCat("deploy-", d);
    Json probe = kruise::testing::MakeRealisticPod(ns, "x", "", d);
    Json tmpl = {
        {"metadata", {{"labels", {{"app", name}, {"pod-template-hash", absl::StrCat(r)}}}}},
        {"spec", probe["spec"]}};
    tmpl["spec"].erase("nodeName");
    std::string deployment_uid;
    if (r % 4 == 0) {
      Json dep = {
          {"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"generation", 4}}},
          {"spec",
           {{"replicas", 3}, {"selector", {{"matchLabels", {{"app", name}}}}}, {"template", tmpl}}},
          {"status", {{"replicas", 3}, {"readyReplicas", 3}, {"observedGeneration", 4}}}};
      deployment_uid = seed("deployments.apps", dep)["metadata"]["uid"].get<std::string>();
    }
    Json rs = {{"apiVersion", "apps/v1"},
               {"kind", "ReplicaSet"},
               {"metadata",
                {{"name", absl::StrCat(name, "-", r)},
                 {"namespace", ns},
                 {"labels", tmpl["metadata"]["labels"]},
                 {"annotations",
                  {{"deployment.kubernetes.io/revision", absl::StrCat(r % 4 + 1)},
                   {"deployment.kubernetes.io/desired-replicas", "3"},
                   {"deployment.kubernetes.io/max-replicas", "4"}}},
                 {"ownerReferences",
                  {{{"apiVersion", "apps/v1"},
                    {"kind", "Deployment"},
                    {"name", name},
                    {"uid", deployment_uid.empty() ? absl::StrCat("uid-", name) : deployment_uid},
                    {"controller", true},
                    {"blockOwnerDeletion", true}}}}}},
               {"spec",
                {{"replicas", r % 4 == 3 ? 3 : 0},
                 {"selector", {{"matchLabels", tmpl["metadata"]["labels"]}}},
                 {"template", tmpl}}},
               {"status", {{"replicas", r % 4 == 3 ? 3 : 0}, {"observedGeneration", 1}}}};
    seed("replicasets.apps", rs);
  }
  if (absl::Status st = server.Start(); !st.ok()) {
    std::cerr << "start: " << st << "\n";
    return 1;
  }
  std::atomic<bool> stop{false};
  std::thread stats;
  if (!stats_file.empty()) {
    stats = std::thread([&] {
      while (!stop.load()) {
        int64_t writes = 0;
        for (const char* m : {"POST", "PUT", "PATCH", "DELETE"}) {
          writes += server.RequestCount(m) - server.RequestCount(m, "/leases");
        }
        // A failed write is retried on the next tick; run.sh reads whichever file is complete.
        kruise::tls::WriteFileAtomic(stats_file, absl::StrCat("writes ", writes, "\n"), 0644)
            .IgnoreError();
        absl::SleepFor(absl::Milliseconds(250));
      }
    });
  }
  if (!port_file.empty()) {
    absl::Status written =
        kruise::tls::WriteFileAtomic(port_file, absl::StrCat(server.port(), "\n"), 0644);
    if (!written.ok()) {
      std::cerr << "--port-file: " << written << "\n";
      return 1;
    }
  }
  std::cerr << "manager-bench-apiserver serving on " << server.base_url() << ": " << nodes
            << " nodes, " << (node_images ? nodes : 0) << " NodeImages, " << pods << " pods ("
            << std::min(pods, cloneset_pods) << " of CloneSets)\n";
  int sig = 0;
  sigwait(&signals, &sig);
  stop = true;
  if (stats.joinable()) stats.join();
  server.Stop();
  return 0;
}
