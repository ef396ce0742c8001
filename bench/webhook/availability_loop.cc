#include "bench/webhook/availability_loop.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "fmt/format.h"
#include "kube/client.h"
#include "kube/object.h"
#include "manager/pub/pub_webhook.h"
#include "manager/webhook/pod_handlers.h"
#include "manager/webhook/pod_webhook.h"
#include "manager/workloadspread/ws_webhook.h"

namespace kruise::bench {
namespace {

using manager::webhook::AdmissionRequest;
using manager::webhook::Handler;
using manager::webhook::Json;

constexpr char kNs[] = "load";

const kube::Resource& WsResource() {
  static const kube::Resource r = manager::workloadspread::WorkloadSpreadResource();
  return r;
}
const kube::Resource& PubResource() {
  static const kube::Resource r = manager::pub::PubResource();
  return r;
}

// 100 WorkloadSpreads in the namespace, over CloneSets ws-target-0..99; the one over "web" has a
// subset with room for every pod of a batch, then an unbounded one.
Json Spread(int i) {
  Json ws = Json::parse(R"({
    "apiVersion": "apps.kruise.io/v1alpha1", "kind": "WorkloadSpread",
    "spec": {"subsets": [
      {"name": "zone-a", "maxReplicas": 1000000,
       "requiredNodeSelectorTerm": {"matchExpressions": [
         {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}]},
       "patch": {"metadata": {"labels": {"subset": "zone-a"}}}},
      {"name": "zone-b",
       "requiredNodeSelectorTerm": {"matchExpressions": [
         {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-b"]}]}}]},
    "status": {"observedGeneration": 1, "subsetStatuses": [
      {"name": "zone-a", "replicas": 0, "missingReplicas": 1000000},
      {"name": "zone-b", "replicas": 0, "missingReplicas": -1}]}})");
  ws["metadata"] = {{"name", fmt::format("ws-{:03d}", i)}, {"namespace", kNs}};
  ws["spec"]["targetRef"] = {
      {"apiVersion", "apps.kruise.io/v1alpha1"},
      {"kind", "CloneSet"},
      {"name", i == 42 ? std::string("web") : fmt::format("ws-target-{}", i)}};
  return ws;
}

// 100 PUBs in the namespace; pub-042 selects tier=backend (the review pod) with room for every pod
// of a batch, the others other apps.
Json Budget(int i) {
  Json pub = {{"apiVersion", "policy.kruise.io/v1alpha1"},
              {"kind", "PodUnavailableBudget"},
              {"metadata", {{"name", fmt::format("pub-{:03d}", i)}, {"namespace", kNs}}},
              {"spec",
               {{"selector", {{"matchLabels", {{"app", fmt::format("other-{}", i)}}}}},
                {"maxUnavailable", "50%"}}},
              {"status",
               {{"observedGeneration", 1},
                {"unavailableAllowed", 1000000},
                {"currentAvailable", 2000000},
                {"desiredAvailable", 1000000},
                {"totalReplicas", 2000000}}}};
  if (i == 42) pub["spec"]["selector"] = {{"matchLabels", {{"tier", "backend"}}}};
  return pub;
}

// The review's pod, owned by CloneSet `owner` (a controller reference: what WorkloadSpread needs).
Json OwnedPod(Json pod, const std::string& owner) {
  pod["metadata"]["ownerReferences"] = {{{"apiVersion", "apps.kruise.io/v1alpha1"},
                                         {"kind", "CloneSet"},
                                         {"name", owner},
                                         {"uid", owner + "-uid"},
                                         {"controller", true}}};
  return pod;
}

// The two objects the admissions write, as an API client sees them: a status patch is applied to
// the stored object (its `test` of resourceVersion included), the version bumped, and the reply
// goes through text and back, as the REST client would parse the server's answer. Network and
// server time are not here: this is the manager's own cost per admission.
class StatusStore final : public kube::KubeClient {
 public:
  void Put(const Json& obj) {
    Json o = obj;
    o["metadata"]["resourceVersion"] = std::to_string(++version_);
    o["metadata"]["generation"] = 1;
    const std::string name = kube::Name(o);
    objects_[name] = std::move(o);
  }
  absl::StatusOr<Json> Get(const kube::Resource&, const std::string&,
                           const std::string& name) override {
    auto it = objects_.find(name);
    if (it == objects_.end()) return absl::NotFoundError(name);
    return Json::parse(it->second.dump());
  }
  absl::StatusOr<kube::ListResult> List(const kube::Resource&, const std::string&,
                                        const kube::ListOptions&) override {
    return absl::UnimplementedError("list");
  }
  absl::StatusOr<Json> Create(const kube::Resource&, const std::string&, const Json&) override {
    return absl::UnimplementedError("create");
  }
  absl::StatusOr<Json> Update(const kube::Resource&, const std::string&, const Json&,
                              const std::string&) override {
    return absl::UnimplementedError("update");
  }
  absl::StatusOr<Json> Patch(const kube::Resource&, const std::string&, const std::string& name,
                             kube::PatchType type, const Json& patch, const std::string&) override {
    ++patches;
    auto it = objects_.find(name);
    if (it == objects_.end()) return absl::NotFoundError(name);
    if (type != kube::PatchType::kJson) return absl::UnimplementedError("patch type");
    const std::string request = patch.dump();  // the client's request body
    // The API server's part (parse the body, apply it, write the answer) is not the manager's
    // cost: it is timed apart and subtracted.
    const auto server_start = std::chrono::steady_clock::now();
    std::string answer;
    bool applied = true;
    std::string failure;
    try {
      Json patched = it->second.patch(Json::parse(request));
      patched["metadata"]["resourceVersion"] = std::to_string(++version_);
      it->second = std::move(patched);
      answer = it->second.dump();
    } catch (const nlohmann::json::exception& e) {  // a failed test: the server's 422
      applied = false;
      failure = e.what();
    }
    server_time += std::chrono::steady_clock::now() - server_start;
    if (!applied) return absl::InvalidArgumentError(failure);
    if (on_write) on_write(Json::parse(answer));  // the watch event the informer parses
    return Json::parse(answer);                   // the reply the client parses
  }
  // The time spent playing the API server (see Patch).
  std::chrono::duration<double, std::micro> server_time{0};
  // Called with the written object after each write: the informer's update of the caches, work
  // the manager does for every write, so it is timed with the admission that caused it.
  std::function<void(const Json&)> on_write;
  absl::Status Delete(const kube::Resource&, const std::string&, const std::string&,
                      const kube::DeleteOptions&) override {
    return absl::UnimplementedError("delete");
  }
  absl::Status Watch(const kube::Resource&, const std::string&, const kube::ListOptions&,
                     const kube::WatchHandler&, kube::WatchCanceller*) override {
    return absl::UnimplementedError("watch");
  }
  int patches = 0;

 private:
  int64_t version_ = 0;
  std::map<std::string, Json> objects_;
};

struct Case {
  std::string name;
  Handler* handler;
  std::function<AdmissionRequest(int)> request;  // the i-th review of a batch
  std::function<void()> reset;                   // before each batch (not timed); may be empty
};

}  // namespace

int LoopAvailabilityReviews(const Json& review_pod, const Json& running_pod, int count, int batch) {
  batch = std::max(1, batch);
  StatusStore client;
  Clock* clock = Clock::Real();

  // Pod CREATE: the readiness-gate chain alone (today's /kruise/mutate-pod), and with the
  // WorkloadSpread injector over the 100 spreads.
  manager::workloadspread::WorkloadSpreadCache spreads;
  for (int i = 0; i < 100; ++i) {
    client.Put(Spread(i));
    spreads.Upsert(*client.Get(WsResource(), kNs, kube::Name(Spread(i))));
  }
  auto chain = [&](bool with_spread) {
    std::vector<std::unique_ptr<manager::webhook::PodMutator>> c;
    c.push_back(std::make_unique<manager::webhook::ReadinessGateInjector>(/*all_pods=*/false));
    if (with_spread) {
      c.push_back(std::make_unique<manager::workloadspread::WorkloadSpreadInjector>(
          &spreads, &client, clock));
    }
    return std::make_unique<manager::webhook::PodMutatingHandler>(
        std::move(c), manager::webhook::PodMutatingHandler::Options{});
  };
  auto plain_chain = chain(false);
  auto spread_chain = chain(true);
  auto create = [](Json pod, int i, bool generate_name) {
    AdmissionRequest r;
    r.operation = "CREATE";
    r.namespace_ = kNs;
    if (generate_name) {
      pod["metadata"].erase("name");
      pod["metadata"]["generateName"] = "web-";
    } else {
      pod["metadata"]["name"] = fmt::format("load-{:06d}", i);
    }
    r.name = kube::Name(pod);
    r.object = std::move(pod);
    return r;
  };
  const Json untargeted = OwnedPod(review_pod, "not-spread");
  const Json targeted = OwnedPod(review_pod, "web");
  auto reset_spread = [&] {
    client.Put(Spread(42));
    spreads.Upsert(*client.Get(WsResource(), kNs, "ws-042"));
  };

  // Pod DELETE: an allow-all validator (what /validate-pod costs without a budget), and the
  // budget validator over the 100 PUBs.
  manager::pub::PubCache budgets;
  for (int i = 0; i < 100; ++i) {
    client.Put(Budget(i));
    budgets.Upsert(*client.Get(PubResource(), kNs, kube::Name(Budget(i))));
  }
  client.on_write = [&](const Json& obj) {
    if (obj.value("kind", "") == "WorkloadSpread") {
      spreads.Upsert(obj);
    } else {
      budgets.Upsert(obj);
    }
  };
  manager::webhook::PodAllowValidator allow;
  manager::pub::PubPodValidatorOptions po;
  po.clock = clock;
  manager::pub::PubPodValidator budget(&budgets, &client, /*pods=*/nullptr, po);
  auto remove = [](Json pod, int i) {
    AdmissionRequest r;
    r.operation = "DELETE";
    r.namespace_ = kNs;
    pod["metadata"]["name"] = fmt::format("load-{:06d}", i);
    pod["metadata"]["namespace"] = kNs;
    r.name = kube::Name(pod);
    r.old_object = std::move(pod);
    return r;
  };
  Json uncovered = running_pod;
  uncovered["metadata"]["labels"] = {{"app", "unguarded"}};
  auto reset_budget = [&] {
    client.Put(Budget(42));
    budgets.Upsert(*client.Get(PubResource(), kNs, "pub-042"));
  };

  int batch_number = 0;  // distinct pod names across batches
  const std::vector<Case> cases = {
      {"create: readiness gate only", plain_chain.get(),
       [&](int i) { return create(untargeted, i, false); }, nullptr},
      {"create: + 100 spreads, none targets", spread_chain.get(),
       [&](int i) { return create(untargeted, i, false); }, nullptr},
      {"create: + spread targets (status write)", spread_chain.get(),
       [&](int i) { return create(targeted, i, true); }, reset_spread},
      {"delete: allow-all validator", &allow, [&](int i) { return remove(running_pod, i); },
       nullptr},
      {"delete: + 100 PUBs, none guards", &budget, [&](int i) { return remove(uncovered, i); },
       nullptr},
      {"delete: + PUB guards (status write)", &budget,
       [&](int i) { return remove(running_pod, batch_number * batch + i); }, reset_budget},
  };
  std::map<std::string, std::vector<double>> means;
  int denied = 0;
  for (int round = 0; round < 5; ++round) {
    for (const Case& c : cases) {
      std::chrono::duration<double, std::micro> took{0};
      int done = 0;
      for (; done < count; done += batch, ++batch_number) {
        if (c.reset) c.reset();
        std::vector<AdmissionRequest> requests;
        requests.reserve(batch);
        for (int i = 0; i < batch; ++i) requests.push_back(c.request(i));
        const auto server_before = client.server_time;
        const auto start = std::chrono::steady_clock::now();
        for (const AdmissionRequest& r : requests) {
          if (!c.handler->Handle(r).allowed) ++denied;
        }
        took += std::chrono::steady_clock::now() - start - (client.server_time - server_before);
      }
      means[c.name].push_back(took.count() / done);
      std::printf("%-42s round %d  %8.2f us/review\n", c.name.c_str(), round, took.count() / done);
    }
  }
  for (const Case& c : cases) {
    std::vector<double>& v = means[c.name];
    std::sort(v.begin(), v.end());
    std::printf("%-42s median %8.2f us/review (%.2f-%.2f)\n", c.name.c_str(), v[v.size() / 2],
                v.front(), v.back());
  }
  std::printf("status writes (both kinds): %d patches; denied: %d\n", client.patches, denied);
  return denied == 0 ? 0 : 1;
}

}  // namespace kruise::bench
