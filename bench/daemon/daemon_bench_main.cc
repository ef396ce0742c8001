// daemon_bench: end-to-end latencies and idle memory of the real kruise-daemon binary.
//
//   daemon_bench --daemon build/daemon/kruise-daemon [--kubeconfig K] [--runs 30]
//                [--scenarios nodeimage,crr,memory]
//
//   nodeimage  NodeImage tag update returned by the API server -> CRI PullImage arrives at a fake
//              CRI server (target <= 50 ms).
//   crr        ContainerRecreateRequest created -> CRI StopContainer arrives (target <= 100 ms).
//   memory     VmRSS / RssAnon of the daemon after it synced and idled --idle-seconds.
//
// The API server is the in-process fake (test/fakes/apiserver) unless --kubeconfig names a real
// one (its NodeImage/CRR CRDs must be applied). The CRI runtime is always the in-process fake on a
// temporary socket, which timestamps each call as it arrives. Prints a table; exit 0 when every
// scenario ran (targets are reported, not enforced, unless --enforce).

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/daemon/daemon_harness.h"
#include "cri/grpc_cri.h"
#include "kube/config.h"
#include "kube/object.h"
#include "kube/resources.h"
#include "kube/rest_client.h"
#include "test/fakes/apiserver/fake_apiserver.h"
#include "test/fakes/cri/fake_cri_server.h"

namespace kruise::bench {
namespace {

using Json = nlohmann::json;
namespace v1 = ::runtime::v1;

constexpr char kImage[] = "bench.local/app";
constexpr char kPodUid[] = "0b3f5c2e-bench-0000-0000-000000000001";

struct Row {
  std::string what;
  Summary s;
  std::string unit;
  double target = 0;
};

void PrintRows(const std::vector<Row>& rows) {
  std::printf("%-44s %4s %9s %9s %9s %9s %8s\n", "measurement", "n", "median", "p90", "max", "min",
              "target");
  for (const Row& r : rows) {
    std::printf("%-44s %4zu %9.2f %9.2f %9.2f %9.2f %8s\n", (r.what + " (" + r.unit + ")").c_str(),
                r.s.n, r.s.median, r.s.p90, r.s.max, r.s.min,
                r.target > 0 ? absl::StrCat("<=", r.target).c_str() : "-");
  }
}

Json NodeImageSpecPatch(const std::string& tag, int64_t version) {
  return {
      {"spec",
       {{"images", {{kImage, {{"tags", Json::array({{{"tag", tag}, {"version", version}}})}}}}}}}};
}

absl::Status CreateOrReplaceNodeImage(kube::KubeClient* client, const std::string& node,
                                      const std::string& tag) {
  (void)client->Delete(kube::resources::NodeImages(), "", node);
  Json obj = {{"apiVersion", "apps.kruise.io/v1alpha1"},
              {"kind", "NodeImage"},
              {"metadata", {{"name", node}}}};
  obj.merge_patch(NodeImageSpecPatch(tag, 0));
  // A delete just issued may still be in flight on a real server (no finalizers here, though).
  absl::Status last;
  for (int i = 0; i < 50; ++i) {
    auto created = client->Create(kube::resources::NodeImages(), "", obj);
    if (created.ok()) return absl::OkStatus();
    last = created.status();
    if (!absl::IsAlreadyExists(last)) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return last;
}

// Scenario nodeimage: returns the per-update latencies in ms.
absl::StatusOr<std::vector<double>> RunNodeImage(kube::KubeClient* client, Arrivals* pulls,
                                                 const std::string& node, int runs) {
  std::string run_id = absl::StrCat(absl::ToUnixMillis(absl::Now()) % 100000);
  std::string first = "w" + run_id;
  if (absl::Status s = CreateOrReplaceNodeImage(client, node, first); !s.ok()) return s;
  // Warm-up: the first pull also proves the daemon sees the object.
  if (auto w = pulls->Wait(":" + first, absl::Seconds(30)); !w.ok()) return w.status();
  std::vector<double> ms;
  for (int i = 1; i <= runs; ++i) {
    std::string tag = absl::StrCat("r", run_id, "-", i);
    auto patched = client->Patch(kube::resources::NodeImages(), "", node, kube::PatchType::kMerge,
                                 NodeImageSpecPatch(tag, 0));
    absl::Time returned = absl::Now();
    if (!patched.ok()) return patched.status();
    auto arrived = pulls->Wait(":" + tag, absl::Seconds(30));
    if (!arrived.ok()) return arrived.status();
    ms.push_back(absl::ToDoubleMilliseconds(*arrived - returned));
  }
  (void)client->Delete(kube::resources::NodeImages(), "", node);
  return ms;
}

// A running pod sandbox with one running container "app" for kPodUid, as kubelet would make it.
absl::StatusOr<std::string> AddRunningContainer(cri::GrpcRuntimeService* runtime,
                                                const std::string& sandbox_id,
                                                const v1::PodSandboxConfig& sandbox, int attempt) {
  v1::ContainerConfig config;
  config.mutable_metadata()->set_name("app");
  config.mutable_metadata()->set_attempt(attempt);
  config.mutable_image()->set_image(absl::StrCat(kImage, ":crr"));
  (*config.mutable_labels())["io.kubernetes.pod.uid"] = kPodUid;
  (*config.mutable_labels())["io.kubernetes.container.name"] = "app";
  auto id = runtime->CreateContainer(sandbox_id, config, sandbox);
  if (!id.ok()) return id.status();
  if (absl::Status s = runtime->StartContainer(*id); !s.ok()) return s;
  return *id;
}

// Scenario crr: CRR created (create returned) -> StopContainer of the pod's container arrives.
absl::StatusOr<std::vector<double>> RunCrr(kube::KubeClient* client,
                                           testing::FakeCriServer* cri_server, Arrivals* stops,
                                           const std::string& node, int runs, absl::Duration gap) {
  auto channel = cri::DialCri(cri_server->endpoint());
  if (!channel.ok()) return channel.status();
  cri::GrpcRuntimeService runtime(*channel);
  if (auto added = cri_server->AddImage(absl::StrCat(kImage, ":crr")); !added.ok()) {
    return added.status();
  }
  v1::PodSandboxConfig sandbox;
  sandbox.mutable_metadata()->set_name("bench-0");
  sandbox.mutable_metadata()->set_namespace_("default");
  sandbox.mutable_metadata()->set_uid(kPodUid);
  (*sandbox.mutable_labels())["io.kubernetes.pod.uid"] = kPodUid;
  auto sandbox_id = runtime.RunPodSandbox(sandbox, "");
  if (!sandbox_id.ok()) return sandbox_id.status();
  std::vector<double> ms;
  for (int i = 0; i <= runs; ++i) {  // run 0 is the warm-up
    auto container = AddRunningContainer(&runtime, *sandbox_id, sandbox, i);
    if (!container.ok()) return container.status();
    std::string name = absl::StrCat("bench-crr-", absl::ToUnixMillis(absl::Now()) % 100000, "-", i);
    Json crr = {
        {"apiVersion", "apps.kruise.io/v1alpha1"},
        {"kind", "ContainerRecreateRequest"},
        {"metadata",
         {{"name", name},
          {"namespace", "default"},
          {"labels",
           {{"crr.apps.kruise.io/node-name", node},
            {"crr.apps.kruise.io/pod-uid", kPodUid},
            {"crr.apps.kruise.io/active", "true"}}}}},
        {"spec",
         {{"podName", "bench-0"},
          {"containers",
           Json::array({{{"name", "app"},
                         {"statusContext",
                          {{"containerID", "containerd://" + *container}, {"restartCount", i}}}}})},
          {"strategy", {{"terminationGracePeriodSeconds", 0}}}}}};
    auto created = client->Create(kube::resources::ContainerRecreateRequests(), "default", crr);
    absl::Time returned = absl::Now();
    if (!created.ok()) return created.status();
    auto arrived = stops->Wait(*container, absl::Seconds(30));
    if (!arrived.ok()) return arrived.status();
    if (i > 0) ms.push_back(absl::ToDoubleMilliseconds(*arrived - returned));
    // Let the container exit as it would after the stop, then drop the CRR.
    (void)cri_server->ExitContainer(*container, 137, "Killed");
    (void)client->Delete(kube::resources::ContainerRecreateRequests(), "default", name);
    absl::SleepFor(gap);
  }
  return ms;
}

int Main(int argc, char** argv) {
  CLI::App app{"kruise-daemon end-to-end benchmarks"};
  std::string daemon;
  std::string kubeconfig;
  std::string node = "bench-node";
  int runs = 30;
  int idle_seconds = 10;
  std::string scenarios = "nodeimage,crr,memory";
  std::string log_file = "/tmp/daemon-bench-daemon.log";
  bool enforce = false;
  double crr_gap = 0;
  std::vector<std::string> daemon_args;
  app.add_option("--daemon", daemon, "kruise-daemon binary")->required();
  app.add_option("--kubeconfig", kubeconfig, "real API server (default: in-process fake)");
  app.add_option("--node", node, "node name the daemon runs as")->capture_default_str();
  app.add_option("--runs", runs, "timed updates per scenario")->capture_default_str();
  app.add_option("--idle-seconds", idle_seconds, "idle time before reading memory")
      ->capture_default_str();
  app.add_option("--scenarios", scenarios, "comma-separated: nodeimage, crr, memory")
      ->capture_default_str();
  app.add_option("--daemon-log", log_file, "the daemon's output")->capture_default_str();
  app.add_option("--crr-gap-seconds", crr_gap,
                 "pause between CRRs; 0: back to back; >= 2 lets the daemon's API throttle "
                 "(5 qps, burst 10) refill")
      ->capture_default_str();
  app.add_option("--daemon-arg", daemon_args, "extra kruise-daemon flag (repeatable)");
  app.add_flag("--enforce", enforce, "exit 3 when a median misses its target");
  CLI11_PARSE(app, argc, argv);
  std::vector<std::string> want = absl::StrSplit(scenarios, ',', absl::SkipEmpty());
  auto wants = [&](const std::string& s) {
    return std::find(want.begin(), want.end(), s) != want.end();
  };

  // API server.
  std::unique_ptr<testing::FakeApiServer> fake_api;
  std::string temp_dir = "/tmp/daemon-bench-XXXXXX";
  if (mkdtemp(temp_dir.data()) == nullptr) {
    std::perror("mkdtemp");
    return 2;
  }
  std::string api_desc;
  if (kubeconfig.empty()) {
    fake_api = std::make_unique<testing::FakeApiServer>();
    if (absl::Status s = fake_api->Start(); !s.ok()) {
      std::fprintf(stderr, "fake API server: %s\n", s.ToString().c_str());
      return 2;
    }
    kubeconfig = temp_dir + "/kubeconfig";
    if (absl::Status s = WriteKubeconfig(kubeconfig, fake_api->base_url()); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 2;
    }
    api_desc = "fake apiserver " + fake_api->base_url();
  } else {
    api_desc = "kubeconfig " + kubeconfig;
  }
  kube::ResolveOptions resolve;
  resolve.kubeconfig_flag = kubeconfig;
  auto config = kube::ResolveConfig(resolve);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
    return 2;
  }
  config->qps = 0;
  auto client = kube::RestKubeClient::Create(*config);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 2;
  }

  // Fake CRI runtime that timestamps PullImage and StopContainer arrivals.
  testing::FakeCriServer::Options cri_options;
  cri_options.socket_path = temp_dir + "/cri.sock";
  cri_options.runtime_name = "containerd";
  auto cri_server = testing::FakeCriServer::Start(cri_options);
  if (!cri_server.ok()) {
    std::fprintf(stderr, "fake CRI: %s\n", cri_server.status().ToString().c_str());
    return 2;
  }
  Arrivals pulls;
  Arrivals stops;
  (*cri_server)->SetPullHook([&](const v1::PullImageRequest& req) {
    pulls.Record(req.image().image(), absl::Now());
    return absl::OkStatus();
  });
  // StopContainer has no hook: a latency of zero plus a recorded call is enough, but the time of
  // arrival must be ours, so poll the recorded calls from a watcher thread.
  std::atomic<bool> done{false};
  std::thread stop_watch([&] {
    size_t seen = 0;
    while (!done) {
      auto reqs = (*cri_server)->Requests<v1::StopContainerRequest>("StopContainer");
      absl::Time now = absl::Now();
      for (; seen < reqs.size(); ++seen) stops.Record(reqs[seen].container_id(), now);
      absl::SleepFor(absl::Microseconds(500));
    }
  });

  DaemonProcess::Options dopts;
  dopts.binary = daemon;
  dopts.node_name = node;
  dopts.kubeconfig = kubeconfig;
  dopts.socket = (*cri_server)->socket_path();
  dopts.log_file = log_file;
  dopts.extra_args = daemon_args;
  auto proc = DaemonProcess::Start(dopts);
  int rc = 0;
  std::vector<Row> rows;
  std::string failures;
  absl::Time started = absl::Now();
  if (!proc.ok()) {
    failures = proc.status().ToString();
  } else if (absl::Status s = (*proc)->WaitReady(absl::Seconds(60)); !s.ok()) {
    failures = s.ToString();
  } else {
    std::printf("kruise-daemon pid %d ready in %.0f ms (%s, fake CRI %s)\n", (*proc)->pid(),
                absl::ToDoubleMilliseconds(absl::Now() - started), api_desc.c_str(),
                (*cri_server)->socket_path().c_str());
    // The runtime's unit state is listed (informational: no bus here, so it is "ok").
    auto healthz = (*proc)->Get("/healthz");
    if (!healthz.ok() || healthz->find("[+]runtime-unit ok") == std::string::npos) {
      absl::StrAppend(&failures, "/healthz lacks the runtime-unit check: ",
                      healthz.ok() ? *healthz : healthz.status().ToString(), "\n");
    }
    if (wants("nodeimage")) {
      auto ms = RunNodeImage(client->get(), &pulls, node, runs);
      if (ms.ok()) {
        rows.push_back({"NodeImage update -> PullImage", Summarize(*ms), "ms", 50});
      } else {
        absl::StrAppend(&failures, "nodeimage: ", ms.status().ToString(), "\n");
      }
    }
    if (wants("crr")) {
      auto ms =
          RunCrr(client->get(), cri_server->get(), &stops, node, runs, absl::Seconds(crr_gap));
      if (ms.ok()) {
        rows.push_back({absl::StrCat("CRR created -> StopContainer, gap ", crr_gap, " s"),
                        Summarize(*ms), "ms", 100});
      } else {
        absl::StrAppend(&failures, "crr: ", ms.status().ToString(), "\n");
      }
    }
    if (wants("memory")) {
      absl::SleepFor(absl::Seconds(idle_seconds));
      auto mem = ReadMemory((*proc)->pid());
      if (mem.ok()) {
        Summary rss{1, mem->rss_kib / 1024.0, mem->rss_kib / 1024.0, mem->rss_kib / 1024.0,
                    mem->rss_kib / 1024.0};
        Summary anon{1, mem->rss_anon_kib / 1024.0, mem->rss_anon_kib / 1024.0,
                     mem->rss_anon_kib / 1024.0, mem->rss_anon_kib / 1024.0};
        rows.push_back({absl::StrCat("idle VmRSS after ", idle_seconds, " s"), rss, "MiB", 0});
        rows.push_back({absl::StrCat("idle RssAnon after ", idle_seconds, " s"), anon, "MiB", 0});
      } else {
        absl::StrAppend(&failures, "memory: ", mem.status().ToString(), "\n");
      }
    }
  }
  done = true;
  stop_watch.join();
  if (proc.ok()) (*proc)->Stop();
  PrintRows(rows);
  for (const Row& r : rows) {
    if (enforce && r.target > 0 && r.s.median > r.target) rc = 3;
  }
  if (!failures.empty()) {
    std::fprintf(stderr, "FAILED: %s(daemon log: %s)\n", failures.c_str(), log_file.c_str());
    rc = 1;
  }
  std::string rm = "rm -rf " + temp_dir;
  (void)std::system(rm.c_str());
  return rc;
}

}  // namespace
}  // namespace kruise::bench

int main(int argc, char** argv) { return kruise::bench::Main(argc, argv); }
