// The WorkloadSpread webhooks against the fake API server: the injector's guarded status write
// goes through the real REST client; the caches are fed by hand (a stale cache is how another
// replica's concurrent write shows).

#include "manager/workloadspread/ws_webhook.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/object.h"
#include "kube/rest_client.h"
#include "manager/webhook/fail_open.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "test/fakes/apiserver/fake_apiserver.h"
#include "test/fakes/fake_clock.h"

namespace kruise::manager::workloadspread {
namespace webhook_test {

using kube::Json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
constexpr char kWs[] = "workloadspreads.apps.kruise.io";
constexpr char kNs[] = "team";

// Subset "a" (zone a, at most 2, a toleration, a label patch) then "b" (zone b, no limit, a
// preferred term), over CloneSet "web".
Json Spread(const std::string& name = "ws", const std::string& target_kind = "CloneSet",
            const std::string& target = "web") {
  Json ws = Json::parse(R"({
    "apiVersion": "apps.kruise.io/v1alpha1", "kind": "WorkloadSpread",
    "spec": {
      "subsets": [
        {"name": "a", "maxReplicas": 2,
         "requiredNodeSelectorTerm": {"matchExpressions": [
           {"key": "zone", "operator": "In", "values": ["a"]}]},
         "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
         "patch": {"metadata": {"labels": {"subset": "a"}}}},
        {"name": "b",
         "requiredNodeSelectorTerm": {"matchExpressions": [
           {"key": "zone", "operator": "In", "values": ["b"]}]},
         "preferredNodeSelectorTerms": [{"weight": 10, "preference": {"matchExpressions": [
           {"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}
      ]
    },
    "status": {"observedGeneration": 1, "subsetStatuses": [
      {"name": "a", "replicas": 0, "missingReplicas": 2},
      {"name": "b", "replicas": 0, "missingReplicas": -1}]}
  })");
  ws["metadata"] = {{"name", name}, {"namespace", kNs}};
  ws["spec"]["targetRef"] = {
      {"apiVersion", target_kind == "Deployment" ? "apps/v1" : "apps.kruise.io/v1alpha1"},
      {"kind", target_kind},
      {"name", target}};
  return ws;
}

Json Pod(const std::string& name, const std::string& owner = "web",
         const std::string& owner_kind = "CloneSet") {
  Json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"namespace", kNs},
        {"labels", {{"app", owner}}},
        {"ownerReferences",
         {{{"apiVersion", owner_kind == "ReplicaSet" ? "apps/v1" : "apps.kruise.io/v1alpha1"},
           {"kind", owner_kind},
           {"name", owner},
           {"uid", absl::StrCat(owner, "-uid")},
           {"controller", true}}}}}},
      {"spec", {{"containers", {{{"name", "app"}, {"image", "nginx:1"}}}}}}};
  if (!name.empty()) pod["metadata"]["name"] = name;
  return pod;
}

webhook::AdmissionRequest Create(const Json& pod, bool dry_run = false) {
  webhook::AdmissionRequest r;
  r.operation = "CREATE";
  r.namespace_ = kNs;
  r.name = kube::Name(pod);
  r.object = pod;
  r.dry_run = dry_run;
  return r;
}

class WorkloadSpreadInjectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_.SetTime(absl::FromUnixSeconds(1'800'000'000));
    testing::FakeApiServerOptions so;
    so.clock = &clock_;
    server_ = std::make_unique<testing::FakeApiServer>(so);
    server_->RegisterResource(
        {"apps.kruise.io", "v1alpha1", "workloadspreads", "WorkloadSpread", true, true});
    ASSERT_TRUE(server_->Start().ok());
    kube::RestConfig cfg;
    cfg.host = server_->base_url();
    cfg.qps = 0;
    auto client = kube::RestKubeClient::Create(cfg);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    handler_ = Handler(&cache_);
  }

  // A /mutate-pod handler whose chain is one injector over `cache`.
  std::unique_ptr<webhook::PodMutatingHandler> Handler(WorkloadSpreadCache* cache) {
    std::vector<std::unique_ptr<webhook::PodMutator>> chain;
    chain.push_back(std::make_unique<WorkloadSpreadInjector>(
        cache, client_.get(), &clock_, [this] { return absl::StrCat("uid-", ++uids_); }));
    return std::make_unique<webhook::PodMutatingHandler>(std::move(chain),
                                                         webhook::PodMutatingHandler::Options{});
  }

  Json Seed(const Json& ws) {
    auto stored = server_->Seed(kWs, ws);
    EXPECT_TRUE(stored.ok()) << stored.status();
    cache_.Upsert(*stored);
    return *stored;
  }

  // The pod as admitted (the response's patch applied); `subset` gets the chosen subset ("" when
  // the pod is unchanged).
  Json Admit(const Json& pod, std::string* subset, webhook::PodMutatingHandler* h = nullptr,
             bool dry_run = false) {
    auto r = (h ? h : handler_.get())->Handle(Create(pod, dry_run));
    EXPECT_TRUE(r.allowed) << r.result.message;
    subset->clear();
    if (!r.patch) return pod;
    Json out = pod.patch(Json::parse(*r.patch));
    if (auto m = MatchedOf(out)) *subset = m->subset;
    return out;
  }

  Json StoredSubset(const std::string& subset, const std::string& ws = "ws") {
    const Json stored = *server_->Get(kWs, kNs, ws);
    for (const Json& s : stored["status"]["subsetStatuses"]) {
      if (s["name"] == subset) return s;
    }
    return nullptr;
  }
  static std::vector<std::string> Creating(const Json& subset) {
    std::vector<std::string> out;
    if (subset.contains("creatingPods")) {
      for (const auto& [k, v] : subset["creatingPods"].items()) out.push_back(k);
    }
    return out;
  }

  testing::FakeClock clock_;
  std::unique_ptr<testing::FakeApiServer> server_;
  std::unique_ptr<kube::RestKubeClient> client_;
  WorkloadSpreadCache cache_;
  std::atomic<int> uids_{0};
  std::unique_ptr<webhook::PodMutatingHandler> handler_;
};

TEST_F(WorkloadSpreadInjectorTest, FillsSubsetAUpToMaxReplicasThenB) {
  Seed(Spread());
  std::string subset;
  Admit(Pod("web-0"), &subset);
  EXPECT_EQ(subset, "a");
  Admit(Pod("web-1"), &subset);
  EXPECT_EQ(subset, "a");
  Admit(Pod("web-2"), &subset);
  EXPECT_EQ(subset, "b");
  Admit(Pod("web-3"), &subset);
  EXPECT_EQ(subset, "b");
  Json a = StoredSubset("a");
  EXPECT_EQ(a["missingReplicas"], 0);
  EXPECT_THAT(Creating(a), UnorderedElementsAre("web-0", "web-1"));
  EXPECT_EQ(a["creatingPods"]["web-0"], kube::FormatRfc3339(clock_.Now()));
  // b has no limit: nothing is recorded for it (missingReplicas -1), so two writes in all.
  EXPECT_THAT(Creating(StoredSubset("b")), IsEmpty());
  EXPECT_EQ(server_->RequestCount("PATCH"), 2);
  // The status write went to the subresource; the cache holds what it returned.
  EXPECT_EQ(server_->RequestCount("PATCH", "/status"), 2);
  EXPECT_EQ(server_->RequestCount("GET"), 0);
}

TEST_F(WorkloadSpreadInjectorTest, InjectsAffinityTolerationsPatchAndAnnotation) {
  Seed(Spread());
  std::string subset;
  Json a = Admit(Pod("web-0"), &subset);
  ASSERT_EQ(subset, "a");
  EXPECT_EQ(a["spec"]["tolerations"],
            Json::parse(R"([{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}])"));
  EXPECT_EQ(a["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
             ["nodeSelectorTerms"],
            Json::parse(R"([{"matchExpressions": [
              {"key": "zone", "operator": "In", "values": ["a"]}]}])"));
  EXPECT_EQ(a["metadata"]["labels"]["subset"], "a");
  EXPECT_EQ(a["metadata"]["labels"]["app"], "web");
  EXPECT_EQ(a["metadata"]["annotations"][kMatchedWorkloadSpreadAnnotation],
            R"({"name":"ws","subset":"a"})");

  // b: its preferred term, its required term, no toleration of a's.
  Admit(Pod("web-1"), &subset);
  Json b = Admit(Pod("web-2"), &subset);
  ASSERT_EQ(subset, "b");
  EXPECT_FALSE(b["spec"].contains("tolerations"));
  const Json& na = b["spec"]["affinity"]["nodeAffinity"];
  EXPECT_EQ(na["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"], 10);
  EXPECT_EQ(na["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
              ["matchExpressions"][0]["values"][0],
            "b");
  EXPECT_FALSE(b["metadata"]["labels"].contains("subset"));
}

TEST_F(WorkloadSpreadInjectorTest, DeploymentPodsByTemplateHashAndGeneratedUid) {
  Seed(Spread("ws", "Deployment", "api"));
  Json pod = Pod("", "api-5f7d9", "ReplicaSet");
  pod["metadata"]["generateName"] = "api-5f7d9-";
  pod["metadata"]["labels"]["pod-template-hash"] = "5f7d9";
  std::string subset;
  Json out = Admit(pod, &subset);
  ASSERT_EQ(subset, "a");
  EXPECT_EQ(out["metadata"]["annotations"][kMatchedWorkloadSpreadAnnotation],
            R"({"name":"ws","subset":"a","uid":"uid-1"})");
  EXPECT_THAT(Creating(StoredSubset("a")), UnorderedElementsAre("uid-1"));
  // No ReplicaSet was read.
  EXPECT_EQ(server_->RequestCount("GET"), 0);
  // Without the label, or with a hash that is not the name's suffix: not the Deployment's.
  Json unlabelled = Pod("api-5f7d9-x", "api-5f7d9", "ReplicaSet");
  Admit(unlabelled, &subset);
  EXPECT_EQ(subset, "");
  unlabelled["metadata"]["labels"]["pod-template-hash"] = "other";
  Admit(unlabelled, &subset);
  EXPECT_EQ(subset, "");
  EXPECT_EQ(server_->RequestCount("PATCH"), 1);
}

TEST_F(WorkloadSpreadInjectorTest, OtherWorkloadsPodsAreUntouched) {
  Seed(Spread());
  std::string subset;
  Json db = Pod("db-0", "db");
  EXPECT_EQ(Admit(db, &subset), db);
  Json orphan = Pod("lonely");
  orphan["metadata"].erase("ownerReferences");
  EXPECT_EQ(Admit(orphan, &subset), orphan);
  // Another namespace's CloneSet "web".
  Json elsewhere = Pod("web-0");
  elsewhere["metadata"]["namespace"] = "other";
  auto r = handler_->Handle(Create(elsewhere));
  EXPECT_TRUE(r.allowed);
  EXPECT_FALSE(r.patch.has_value());
  // A finished pod.
  Json done = Pod("web-9");
  done["status"] = {{"phase", "Succeeded"}};
  EXPECT_EQ(Admit(done, &subset), done);
  EXPECT_EQ(server_->RequestCount("PATCH"), 0);
  EXPECT_EQ(StoredSubset("a")["missingReplicas"], 2);
}

TEST_F(WorkloadSpreadInjectorTest, DryRunChoosesButWritesNothing) {
  Seed(Spread());
  std::string subset;
  Json out = Admit(Pod("web-0"), &subset, nullptr, /*dry_run=*/true);
  EXPECT_EQ(subset, "a");
  EXPECT_TRUE(out["spec"].contains("affinity"));
  EXPECT_EQ(server_->RequestCount("PATCH"), 0);
  EXPECT_EQ(StoredSubset("a")["missingReplicas"], 2);
  EXPECT_THAT(Creating(StoredSubset("a")), IsEmpty());
}

TEST_F(WorkloadSpreadInjectorTest, StaleCacheConflictsRereadsAndChoosesAgain) {
  // Two replicas with the same view: a has room for one more pod.
  Json ws = Spread();
  ws["status"]["subsetStatuses"][0]["missingReplicas"] = 1;
  Seed(ws);
  WorkloadSpreadCache other_cache;
  other_cache.Upsert(*server_->Get(kWs, kNs, "ws"));
  auto other = Handler(&other_cache);
  std::string subset;
  Admit(Pod("web-0"), &subset);
  EXPECT_EQ(subset, "a");
  // The other replica's cache is stale: its test fails, it re-reads, and a is full by now.
  Admit(Pod("web-1"), &subset, other.get());
  EXPECT_EQ(subset, "b");
  EXPECT_EQ(server_->RequestCount("GET"), 1);
  Json a = StoredSubset("a");
  EXPECT_EQ(a["missingReplicas"], 0);
  EXPECT_THAT(Creating(a), UnorderedElementsAre("web-0"));
}

TEST_F(WorkloadSpreadInjectorTest, RacingCreatesNeverOverfillASubset) {
  Json ws = Spread();
  ws["status"]["subsetStatuses"][0]["missingReplicas"] = 1;
  Seed(ws);
  // Rounds of two admissions on two replicas at once, each replica starting from the same view.
  for (int round = 0; round < 10; ++round) {
    Json fresh = *server_->Get(kWs, kNs, "ws");
    fresh["status"]["subsetStatuses"][0]["missingReplicas"] = 1;
    fresh["status"]["subsetStatuses"][0].erase("creatingPods");
    auto put = server_->Put(kWs, fresh);
    ASSERT_TRUE(put.ok()) << put.status();
    WorkloadSpreadCache c1, c2;
    c1.Upsert(*put);
    c2.Upsert(*put);
    auto h1 = Handler(&c1), h2 = Handler(&c2);
    std::string s1, s2;
    std::atomic<bool> go{false};
    std::thread t1([&] {
      while (!go.load()) std::this_thread::yield();
      Admit(Pod(absl::StrCat("p", round, "-1")), &s1, h1.get());
    });
    std::thread t2([&] {
      while (!go.load()) std::this_thread::yield();
      Admit(Pod(absl::StrCat("p", round, "-2")), &s2, h2.get());
    });
    go = true;
    t1.join();
    t2.join();
    EXPECT_THAT((std::vector<std::string>{s1, s2}), UnorderedElementsAre("a", "b"))
        << "round " << round;
    Json a = StoredSubset("a");
    EXPECT_EQ(a["missingReplicas"], 0);
    EXPECT_EQ(Creating(a).size(), 1u) << a.dump();
  }
}

// Issue 33: /mutate-pod is failurePolicy Ignore, so with a FailOpen a failed record lets the pod
// through unspread, with a warning, a Warning event on the WorkloadSpread and the counter.
class WorkloadSpreadFailOpenTest : public WorkloadSpreadInjectorTest {
 protected:
  void SetUp() override {
    WorkloadSpreadInjectorTest::SetUp();
    ASSERT_FALSE(HasFatalFailure());
    fail_open_ = std::make_unique<webhook::FailOpen>(webhook::FailOpen::Options{
        .metrics = &metrics_,
        .event = [this](const Json& object, const std::string& reason, const std::string&) {
          events_.push_back(object);
          reasons_.push_back(reason);
        }});
    std::vector<std::unique_ptr<webhook::PodMutator>> chain;
    chain.push_back(std::make_unique<WorkloadSpreadInjector>(
        &cache_, client_.get(), &clock_, [this] { return absl::StrCat("uid-", ++uids_); },
        fail_open_.get()));
    webhook::PodMutatingHandler::Options o;
    o.fail_open = fail_open_.get();
    handler_ = std::make_unique<webhook::PodMutatingHandler>(std::move(chain), o);
  }
  std::string Metrics() { return prometheus::TextSerializer().Serialize(metrics_.Collect()); }

  prometheus::Registry metrics_;
  std::vector<Json> events_;
  std::vector<std::string> reasons_;
  std::unique_ptr<webhook::FailOpen> fail_open_;
};

TEST_F(WorkloadSpreadFailOpenTest, FailedWriteAllowsThePodUnspread) {
  Seed(Spread());
  testing::FakeFailure failure;
  failure.method = "PATCH";
  failure.path_substring = "workloadspreads";
  failure.http_code = 500;
  server_->FailNext(failure);
  auto r = handler_->Handle(Create(Pod("web-0")));
  EXPECT_TRUE(r.allowed) << r.result.message;
  EXPECT_FALSE(r.patch.has_value());  // unspread: no subset injected
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_THAT(r.warnings[0], HasSubstr("workloadspread: pod admitted without a subset"));
  EXPECT_THAT(r.warnings[0], HasSubstr("WorkloadSpread ws"));
  EXPECT_EQ(StoredSubset("a")["missingReplicas"], 2);
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0]["kind"], "WorkloadSpread");
  EXPECT_EQ(events_[0]["metadata"]["name"], "ws");
  EXPECT_EQ(events_[0]["metadata"]["namespace"], kNs);
  EXPECT_EQ(reasons_[0], webhook::FailOpen::kReason);
  EXPECT_THAT(Metrics(), HasSubstr("kruise_webhook_infrastructure_failures_total{handler="
                                   "\"workloadspread\",path=\"/mutate-pod\"} 1"));
}

TEST_F(WorkloadSpreadFailOpenTest, ConflictsPastTheRetriesAllowThePodUnspread) {
  Seed(Spread());
  testing::FakeFailure conflict;
  conflict.method = "PATCH";
  conflict.path_substring = "workloadspreads";
  conflict.http_code = 409;
  conflict.count = 100;
  server_->FailNext(conflict);
  auto r = handler_->Handle(Create(Pod("web-0")));
  EXPECT_TRUE(r.allowed) << r.result.message;
  EXPECT_FALSE(r.patch.has_value());
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_THAT(r.warnings[0], HasSubstr("changed too often"));
  EXPECT_EQ(fail_open_->count(), 1);
}

TEST_F(WorkloadSpreadInjectorTest, WithoutFailOpenAFailedWriteDeniesThePod) {
  Seed(Spread());
  testing::FakeFailure failure;
  failure.method = "PATCH";
  failure.path_substring = "workloadspreads";
  failure.http_code = 500;
  server_->FailNext(failure);
  auto r = handler_->Handle(Create(Pod("web-0")));
  EXPECT_FALSE(r.allowed);
  EXPECT_THAT(r.result.message, HasSubstr("WorkloadSpread ws"));
  EXPECT_EQ(StoredSubset("a")["missingReplicas"], 2);
  // The next admission, the API server healthy again, is recorded.
  std::string subset;
  Admit(Pod("web-0"), &subset);
  EXPECT_EQ(subset, "a");
  EXPECT_EQ(StoredSubset("a")["missingReplicas"], 1);
}

TEST_F(WorkloadSpreadInjectorTest, DeletedWorkloadSpreadLetsThePodThrough) {
  Seed(Spread());
  ASSERT_TRUE(server_->Remove(kWs, kNs, "ws").ok());
  std::string subset;
  Json pod = Pod("web-0");
  EXPECT_EQ(Admit(pod, &subset), pod);  // the cache still has it; the write finds it gone
  EXPECT_EQ(subset, "");
}

TEST_F(WorkloadSpreadInjectorTest, CacheKeepsItsNewerWriteOverAnOlderEvent) {
  Json stored = Seed(Spread());
  std::string subset;
  Admit(Pod("web-0"), &subset);
  // The informer's event for the seeded object arrives late.
  cache_.Upsert(stored);
  auto e = cache_.Targeting(kNs, "apps.kruise.io", "CloneSet", "web");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->ws->status.Find("a")->missing_replicas, 1);
  Admit(Pod("web-1"), &subset);
  EXPECT_EQ(server_->RequestCount("GET"), 0);  // no conflict
  cache_.Remove(kNs, "ws");
  EXPECT_EQ(cache_.size(), 0u);
}

// The informer's echo of the version the cache already holds (same uid and resourceVersion) is
// not parsed or published again: the entry stays the very object cached first.
TEST_F(WorkloadSpreadInjectorTest, CacheIgnoresTheEchoOfTheVersionItHolds) {
  Json stored = Seed(Spread());
  auto first = cache_.Targeting(kNs, "apps.kruise.io", "CloneSet", "web");
  ASSERT_NE(first, nullptr);
  Json echo = stored;
  echo["metadata"]["labels"]["only-in-echo"] = "x";  // what a same-version copy cannot differ in
  cache_.Upsert(echo);
  EXPECT_EQ(cache_.Targeting(kNs, "apps.kruise.io", "CloneSet", "web"), first);
  // A later version replaces it.
  echo["metadata"]["resourceVersion"] =
      std::to_string(std::stoll(kube::ResourceVersion(stored)) + 1);
  cache_.Upsert(echo);
  auto next = cache_.Targeting(kNs, "apps.kruise.io", "CloneSet", "web");
  ASSERT_NE(next, nullptr);
  EXPECT_NE(next, first);
  EXPECT_EQ(kube::Label(*next->object, "only-in-echo"), "x");
}

// ---- Validating handler ----------------------------------------------------------------------

TEST(WorkloadSpreadValidatingHandlerTest, Table) {
  WorkloadSpreadCache cache;
  Json existing = Spread("taken", "CloneSet", "db");
  existing["metadata"]["resourceVersion"] = "5";
  cache.Upsert(existing);
  WorkloadSpreadValidatingHandler on(&cache, true), off(&cache, false);
  auto req = [](const std::string& op, Json obj, Json old = nullptr) {
    webhook::AdmissionRequest r;
    r.operation = op;
    r.namespace_ = kNs;
    r.name = kube::Name(obj);
    r.object = std::move(obj);
    r.old_object = std::move(old);
    return r;
  };
  Json no_subsets = Spread();
  no_subsets["spec"]["subsets"] = Json::array();
  Json no_ns = Spread();
  no_ns["metadata"].erase("namespace");
  Json moved = Spread("taken", "CloneSet", "web");
  Json bad_max = Spread();
  bad_max["spec"]["subsets"][0]["maxReplicas"] = -1;
  struct Case {
    std::string name;
    webhook::AdmissionRequest request;
    bool allowed;
    int code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"valid create", req("CREATE", Spread()), true, 0, ""},
      {"create without metadata.namespace", req("CREATE", no_ns), true, 0, ""},
      {"no subsets", req("CREATE", no_subsets), false, 400, "spec.subsets"},
      {"negative maxReplicas", req("CREATE", bad_max), false, 400, "maxReplicas"},
      {"second WorkloadSpread of CloneSet db", req("CREATE", Spread("ws", "CloneSet", "db")), false,
       400, "spec.targetRef"},
      {"update of itself", req("UPDATE", existing, existing), true, 0, ""},
      {"targetRef changed", req("UPDATE", moved, existing), false, 400, "targetRef"},
      {"delete", req("DELETE", nullptr, existing), true, 0, ""},
  };
  for (const Case& c : cases) {
    auto r = on.Handle(c.request);
    EXPECT_EQ(r.allowed, c.allowed) << c.name << ": " << r.result.message;
    if (!c.allowed) {
      EXPECT_EQ(r.result.code, c.code) << c.name;
      EXPECT_THAT(r.result.message, HasSubstr(c.message)) << c.name;
    }
  }
  // Gate off: every WorkloadSpread refused.
  auto r = off.Handle(req("CREATE", Spread()));
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.result.code, 403);
  EXPECT_THAT(r.result.message, HasSubstr("WorkloadSpread"));
}

TEST(WorkloadSpreadValidatingHandlerTest, WarningsReachTheClient) {
  WorkloadSpreadCache cache;
  Json ws = Spread();
  // a without maxReplicas first: b never gets a pod (Fixed).
  ws["spec"]["subsets"][0].erase("maxReplicas");
  webhook::AdmissionRequest r;
  r.operation = "CREATE";
  r.namespace_ = kNs;
  r.object = ws;
  auto resp = WorkloadSpreadValidatingHandler(&cache, true).Handle(r);
  EXPECT_TRUE(resp.allowed) << resp.result.message;
  EXPECT_FALSE(resp.warnings.empty());
}

TEST_F(WorkloadSpreadInjectorTest, HandlersRegisterOnBothPathsWhenServed) {
  webhook::HandlerRegistry registry;
  EXPECT_TRUE(RegisterWorkloadSpreadHandlers(&registry, &cache_, client_.get(), true));
  EXPECT_TRUE(registry.Has(kValidateWorkloadSpreadPath));
  EXPECT_TRUE(registry.Has(kValidateWorkloadSpreadUnversionedPath));
  testing::FakeApiServerOptions so;
  so.register_builtin_resources = true;
  testing::FakeApiServer bare(so);
  ASSERT_TRUE(bare.Start().ok());
  kube::RestConfig cfg;
  cfg.host = bare.base_url();
  cfg.qps = 0;
  auto client = kube::RestKubeClient::Create(cfg);
  ASSERT_TRUE(client.ok());
  webhook::HandlerRegistry none;
  EXPECT_FALSE(RegisterWorkloadSpreadHandlers(&none, &cache_, client->get(), true));
  EXPECT_FALSE(none.Has(kValidateWorkloadSpreadPath));
}

// ---- Pod DELETE and eviction (the /validate-pod recorder) -----------------------------------

class WorkloadSpreadDeletionRecorderTest : public WorkloadSpreadInjectorTest {
 protected:
  void SetUp() override {
    WorkloadSpreadInjectorTest::SetUp();
    ASSERT_FALSE(HasFatalFailure());
    reader_ = std::make_unique<webhook::ApiPodReader>(client_.get());
    recorder_ = std::make_shared<WorkloadSpreadDeletionRecorder>(&cache_, client_.get(),
                                                                 reader_.get(), &clock_);
    // Subset a holds one pod of its two places.
    Json ws = Spread();
    ws["status"]["subsetStatuses"][0]["replicas"] = 1;
    ws["status"]["subsetStatuses"][0]["missingReplicas"] = 1;
    Seed(ws);
  }

  // A running pod the webhook placed in `subset`.
  static Json Placed(const std::string& name, const std::string& subset = "a") {
    Json pod = Pod(name);
    pod["metadata"]["annotations"][kMatchedWorkloadSpreadAnnotation] =
        MatchedAnnotationValue("ws", subset, "");
    pod["status"] = {{"phase", "Running"}};
    return pod;
  }
  static webhook::AdmissionRequest Delete(const Json& pod, bool dry_run = false) {
    webhook::AdmissionRequest r;
    r.operation = "DELETE";
    r.namespace_ = kNs;
    r.name = kube::Name(pod);
    r.old_object = pod;
    r.dry_run = dry_run;
    return r;
  }
  static webhook::AdmissionRequest Evict(const std::string& name, bool dry_run = false) {
    webhook::AdmissionRequest r;
    r.operation = "CREATE";
    r.sub_resource = "eviction";
    r.namespace_ = kNs;
    r.name = name;
    r.object = {{"apiVersion", "policy/v1"},
                {"kind", "Eviction"},
                {"metadata", {{"name", name}, {"namespace", kNs}}}};
    if (dry_run) r.object["deleteOptions"] = {{"dryRun", {"All"}}};
    return r;
  }
  std::vector<std::string> Deleting(const std::string& subset = "a") {
    std::vector<std::string> out;
    const Json s = StoredSubset(subset);
    if (s.contains("deletingPods")) {
      for (const auto& [k, v] : s["deletingPods"].items()) out.push_back(k);
    }
    return out;
  }

  std::unique_ptr<webhook::ApiPodReader> reader_;
  std::shared_ptr<WorkloadSpreadDeletionRecorder> recorder_;
};

TEST_F(WorkloadSpreadDeletionRecorderTest, DeleteRecordsThePodInItsSubset) {
  auto r = recorder_->Handle(Delete(Placed("web-0")));
  EXPECT_TRUE(r.allowed);
  const Json a = StoredSubset("a");
  EXPECT_THAT(Deleting(), ElementsAre("web-0"));
  EXPECT_EQ(a["deletingPods"]["web-0"], kube::FormatRfc3339(clock_.Now()));
  EXPECT_EQ(a["missingReplicas"], 2);
  // A retried DELETE of the same pod records nothing more.
  server_->ClearRequests();
  EXPECT_TRUE(recorder_->Handle(Delete(Placed("web-0"))).allowed);
  EXPECT_EQ(server_->RequestCount("PATCH"), 0);
  EXPECT_EQ(StoredSubset("a")["missingReplicas"], 2);
}

TEST_F(WorkloadSpreadDeletionRecorderTest, NothingForDryRunsUnplacedPodsOrUnlimitedSubsets) {
  EXPECT_TRUE(recorder_->Handle(Delete(Placed("web-0"), /*dry_run=*/true)).allowed);
  EXPECT_TRUE(recorder_->Handle(Delete(Pod("web-1"))).allowed);          // no annotation
  EXPECT_TRUE(recorder_->Handle(Delete(Placed("web-2", "b"))).allowed);  // b has no limit
  ASSERT_TRUE(server_->Seed("pods", Placed("web-3")).ok());
  EXPECT_TRUE(recorder_->Handle(Evict("web-3", /*dry_run=*/true)).allowed);
  EXPECT_EQ(server_->RequestCount("PATCH"), 0);
  EXPECT_THAT(Deleting(), IsEmpty());
}

TEST_F(WorkloadSpreadDeletionRecorderTest, EvictionReadsThePodAndRecordsIt) {
  ASSERT_TRUE(server_->Seed("pods", Placed("web-0")).ok());
  EXPECT_TRUE(recorder_->Handle(Evict("web-0")).allowed);
  EXPECT_THAT(Deleting(), ElementsAre("web-0"));
  EXPECT_TRUE(recorder_->Handle(Evict("gone")).allowed);  // no such pod: nothing to record
}

TEST_F(WorkloadSpreadDeletionRecorderTest, StaleCacheRereadsAndKeepsTheOtherWrite) {
  // Another replica's injector placed web-9 meanwhile; this replica's cache does not know.
  Json fresh = *server_->Get(kWs, kNs, "ws");
  fresh["status"]["subsetStatuses"][0]["creatingPods"] = {
      {"web-9", kube::FormatRfc3339(clock_.Now())}};
  fresh["status"]["subsetStatuses"][0]["missingReplicas"] = 0;
  ASSERT_TRUE(server_->Put(kWs, fresh).ok());
  EXPECT_TRUE(recorder_->Handle(Delete(Placed("web-0"))).allowed);
  const Json a = StoredSubset("a");
  EXPECT_THAT(Creating(a), ElementsAre("web-9"));
  EXPECT_THAT(Deleting(), ElementsAre("web-0"));
  EXPECT_EQ(a["missingReplicas"], 1);
}

TEST_F(WorkloadSpreadDeletionRecorderTest, FailedWriteStillAllowsTheDeletion) {
  testing::FakeFailure failure;
  failure.method = "PATCH";
  failure.path_substring = "workloadspreads";
  failure.http_code = 500;
  server_->FailNext(failure);
  EXPECT_TRUE(recorder_->Handle(Delete(Placed("web-0"))).allowed);
  EXPECT_THAT(Deleting(), IsEmpty());
}

TEST_F(WorkloadSpreadDeletionRecorderTest, FailedWriteWarnsAndRecordsAnEventWithFailOpen) {
  prometheus::Registry metrics;
  std::vector<Json> events;
  webhook::FailOpen fail_open({.metrics = &metrics,
                               .event = [&](const Json& object, const std::string&,
                                            const std::string&) { events.push_back(object); }});
  auto recorder = std::make_shared<WorkloadSpreadDeletionRecorder>(
      &cache_, client_.get(), reader_.get(), &clock_, &fail_open);
  testing::FakeFailure failure;
  failure.method = "PATCH";
  failure.path_substring = "workloadspreads";
  failure.http_code = 500;
  server_->FailNext(failure);
  auto r = recorder->Handle(Delete(Placed("web-0")));
  EXPECT_TRUE(r.allowed);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_THAT(r.warnings[0], HasSubstr("deletion is not recorded"));
  EXPECT_THAT(Deleting(), IsEmpty());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["kind"], "WorkloadSpread");
  EXPECT_EQ(events[0]["metadata"]["name"], "ws");
  EXPECT_THAT(prometheus::TextSerializer().Serialize(metrics.Collect()),
              HasSubstr("kruise_webhook_infrastructure_failures_total{handler="
                        "\"workloadspread\",path=\"/validate-pod\"} 1"));
}

TEST_F(WorkloadSpreadDeletionRecorderTest, ChainedAfterADenialRecordsNothing) {
  webhook::HandlerRegistry registry;
  bool budget_allows = false;
  registry.Register("/validate-pod",
                    std::make_shared<webhook::FuncHandler>([&](const webhook::AdmissionRequest&) {
                      return budget_allows ? webhook::Allowed()
                                           : webhook::Denied(403, "budget spent");
                    }));
  registry.Append("/validate-pod", recorder_);
  auto r = registry.Find("/validate-pod")->Handle(Delete(Placed("web-0")));
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.result.message, "budget spent");
  EXPECT_THAT(Deleting(), IsEmpty());
  budget_allows = true;
  EXPECT_TRUE(registry.Find("/validate-pod")->Handle(Delete(Placed("web-0"))).allowed);
  EXPECT_THAT(Deleting(), ElementsAre("web-0"));
}

}  // namespace webhook_test
}  // namespace kruise::manager::workloadspread
