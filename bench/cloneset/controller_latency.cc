// controller_latency: how long the CloneSet controller takes from a template change to its first
// pod write (issue 14: "spec change -> first pod patched <= 50 ms"), in process, without kubectl:
// the fake API server (HTTP on loopback, real clock), the real REST client, informers, work queue
// and controller. A CloneSet of --pods pods is created and made Ready (the bench plays the
// kubelet); then, per round, the image changes (a PUT at the server) and the time until a pod
// watch sees the first pod with InPlaceUpdateReady False is recorded; the kubelet part (restart,
// Ready) follows so that the next round starts from a settled set.
//
//   controller_latency [--pods 100] [--rounds 20]

#include <algorithm>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/flags.h"
#include "kube/controller.h"
#include "kube/informer.h"
#include "kube/object.h"
#include "kube/rest_client.h"
#include "manager/cloneset/cloneset_controller.h"
#include "test/fakes/apiserver/fake_apiserver.h"

namespace {

using kruise::kube::Json;
namespace kube = kruise::kube;
namespace cs = kruise::manager::cloneset;
constexpr char kSets[] = "clonesets.apps.kruise.io";

Json Template(int version) {
  return {{"metadata", {{"labels", {{"app", "lat"}}}}},
          {"spec", {{"containers", {{{"name", "main"}, {"image", absl::StrCat("img:", version)}}}}}}};
}

bool Ready(const Json& pod, bool* gate_false) {
  bool ready = false;
  *gate_false = false;
  const Json* conds = kube::FindPath(pod, {"status", "conditions"});
  if (conds == nullptr) return false;
  for (const Json& c : *conds) {
    if (c.value("type", "") == "InPlaceUpdateReady" && c.value("status", "") == "False") {
      *gate_false = true;
    }
    if (c.value("type", "") == "Ready" && c.value("status", "") == "True") ready = true;
  }
  return ready;
}

}  // namespace

int main(int argc, char** argv) {
  int pods = 100, rounds = 20;
  kruise::Flags flags("CloneSet template change -> first pod write (controller_latency)");
  flags.Add("--pods", &pods, "pods in the CloneSet");
  flags.Add("--rounds", &rounds, "image changes to time");
  if (auto exit_code = flags.ParseOrExitCode(argc, argv)) return *exit_code;
  kruise::testing::FakeApiServer server;
  if (!server.Start().ok()) return 1;
  kube::RestConfig cfg;
  cfg.host = server.base_url();
  cfg.qps = 0;
  auto client = kube::RestKubeClient::Create(cfg);
  if (!client.ok()) return 1;
  std::vector<std::unique_ptr<kube::Informer>> infs;
  for (kube::InformerOptions& o : cs::CloneSetInformerOptions()) {
    infs.push_back(std::make_unique<kube::Informer>(client->get(), kruise::Clock::Real(), o));
  }
  cs::CloneSetInformers ci{infs[0].get(), infs[1].get(), infs[2].get(), infs[3].get(),
                           infs[4].get()};
  cs::CloneSetReconciler reconciler(client->get(), ci, nullptr, {});
  reconciler.ObserveThrough(ci.pods);
  reconciler.ObserveThrough(ci.pvcs);
  // The first pod seen with InPlaceUpdateReady False in this round.
  absl::Mutex mu;
  absl::Time first_false = absl::InfiniteFuture();
  kube::ResourceEventHandler stamp;
  stamp.on_update = [&](const Json&, const Json& pod) {
    bool gate_false = false;
    Ready(pod, &gate_false);
    if (!gate_false) return;
    absl::MutexLock lock(&mu);
    first_false = std::min(first_false, absl::Now());
  };
  ci.pods->AddEventHandler(stamp);
  kube::ControllerOptions co;
  co.workers = 3;
  kube::Controller controller("cloneset", &reconciler, co);
  controller.Watch(ci.clonesets, kube::EnqueueSelf(), {kube::ResourceVersionChanged()});
  controller.Watch(ci.pods, kube::EnqueueOwner("CloneSet", true, "apps.kruise.io"),
                   {kube::ResourceVersionChanged()});
  for (auto& i : infs) i->Start();
  std::stop_source stop;
  std::thread run([&] { controller.Start(stop.get_token()); });

  Json set = {{"apiVersion", "apps.kruise.io/v1alpha1"},
              {"kind", "CloneSet"},
              {"metadata", {{"name", "lat"}, {"namespace", "default"}}},
              {"spec",
               {{"replicas", pods},
                {"selector", {{"matchLabels", {{"app", "lat"}}}}},
                {"template", Template(0)},
                {"updateStrategy", {{"type", "InPlaceIfPossible"}, {"maxUnavailable", "20%"}}}}}};
  if (!server.Seed(kSets, set).ok()) return 1;
  // Play the kubelet until every pod runs `version` and is Ready; returns false on timeout.
  auto settle = [&](int version) {
    const std::string image = absl::StrCat("img:", version);
    absl::Time deadline = absl::Now() + absl::Seconds(120);
    while (absl::Now() < deadline) {
      int done = 0;
      std::vector<Json> all = server.List("pods", "default");
      for (Json pod : all) {
        bool gate_false = false;
        const bool ready = Ready(pod, &gate_false);
        const std::string spec_image = pod["spec"]["containers"][0].value("image", "");
        Json& st = pod["status"];
        Json& c0 = st["containerStatuses"][0];
        bool changed = false;
        if (!c0.is_object() || c0.value("image", "") != spec_image) {
          const int restarts = c0.is_object() ? c0.value("restartCount", 0) + 1 : 0;
          c0 = {{"name", "main"}, {"image", spec_image}, {"imageID", "sha256:x"},
                {"ready", true}, {"restartCount", restarts},
                {"containerID", absl::StrCat("containerd://", kube::Name(pod), "-", restarts)},
                {"state", {{"running", {{"startedAt", kube::FormatRfc3339(absl::Now() + absl::Seconds(1))}}}}}};
          changed = true;
        }
        bool gates_true = true;
        Json conds = Json::array();
        for (const Json& c : st.value("conditions", Json::array())) {
          if (c.value("type", "") == "Ready") continue;
          if (c.value("status", "") != "True") gates_true = false;
          conds.push_back(c);
        }
        const bool want_ready = gates_true && !conds.empty();
        if (want_ready != ready || changed) {
          conds.push_back({{"type", "Ready"}, {"status", want_ready ? "True" : "False"}});
          st["conditions"] = conds;
          st["phase"] = "Running";
          pod["spec"]["nodeName"] = "node-a";
          server.Put("pods", pod).IgnoreError();
        }
        if (spec_image == image && want_ready && !changed) ++done;
      }
      if (done == pods && static_cast<int>(all.size()) == pods) return true;
      absl::SleepFor(absl::Milliseconds(20));  // the kubelet's pace, not a synchronisation
    }
    return false;
  };
  if (!settle(0)) {
    std::fprintf(stderr, "the CloneSet did not become Ready\n");
    return 1;
  }
  std::vector<double> ms;
  for (int r = 1; r <= rounds; ++r) {
    {
      absl::MutexLock lock(&mu);
      first_false = absl::InfiniteFuture();
    }
    Json current = *server.Get(kSets, "default", "lat");
    current["spec"]["template"] = Template(r);
    current["metadata"]["generation"] = kube::Generation(current) + 1;
    const absl::Time t0 = absl::Now();
    if (!server.Put(kSets, current).ok()) return 1;
    {
      absl::MutexLock lock(&mu);
      mu.AwaitWithTimeout(absl::Condition(
                              +[](absl::Time* t) { return *t != absl::InfiniteFuture(); },
                              &first_false),
                          absl::Seconds(10));
      if (first_false == absl::InfiniteFuture()) {
        std::fprintf(stderr, "round %d: no pod write within 10 s\n", r);
        return 1;
      }
      ms.push_back(absl::ToDoubleMilliseconds(first_false - t0));
    }
    if (!settle(r)) {
      std::fprintf(stderr, "round %d did not settle\n", r);
      return 1;
    }
  }
  std::sort(ms.begin(), ms.end());
  std::printf("template change -> first pod InPlaceUpdateReady False, %d pods, %d rounds: "
              "median %.1f ms, min %.1f, p90 %.1f, max %.1f\n",
              pods, rounds, ms[ms.size() / 2], ms.front(), ms[ms.size() * 9 / 10], ms.back());
  stop.request_stop();
  run.join();
  for (auto& i : infs) i->RequestStop();
  for (auto& i : infs) i->Stop();
  return 0;
}
