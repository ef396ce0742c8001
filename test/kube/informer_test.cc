#include "kube/informer.h"

#include <malloc.h>

#include <atomic>
#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/fakes/fake_clock.h"
#include "test/fakes/memory_kube_client.h"
#include "test/kube/informer_test_util.h"

namespace kruise::kube {
namespace {

using kruise::testing::FakeClock;
using kruise::testing::MemoryKubeClient;
using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;
using testing_util::EventLog;
using testing_util::Eventually;
using testing_util::MakePod;
using testing_util::PodResource;

class InformerTest : public ::testing::Test {
 protected:
  std::unique_ptr<Informer> MakeInformer(InformerOptions opts = {}) {
    opts.resource = PodResource();
    if (opts.page_size == 500) opts.page_size = 2;  // exercise pagination
    if (opts.indexers.empty()) {
      opts.indexers = {{kNamespaceIndex, NamespaceIndexFunc()},
                       {kOwnerUidIndex, OwnerUidIndexFunc()},
                       {"node", FieldIndexFunc("/spec/nodeName")}};
    }
    return std::make_unique<Informer>(&client_, &clock_, std::move(opts));
  }
  void CreatePod(const Json& pod) {
    ASSERT_TRUE(client_.Create(PodResource(), pod["metadata"]["namespace"], pod).ok());
  }
  // Advances the fake clock by a minute per poll: gets the reflector past any backoff.
  std::function<void()> AdvanceClock() {
    return [this] { clock_.Advance(absl::Minutes(1)); };
  }

  FakeClock clock_;
  MemoryKubeClient client_{&clock_};
};

TEST_F(InformerTest, ListsInPagesThenWatchesAndAppliesTransform) {
  for (int i = 0; i < 5; ++i) CreatePod(MakePod("ns", "p" + std::to_string(i)));
  auto inf = MakeInformer();
  EventLog log;
  inf->AddEventHandler(log.Handler());
  inf->Start();
  ASSERT_TRUE(inf->WaitForSync(clock_.Now() + absl::Hours(1)));
  EXPECT_EQ(inf->store().size(), 5u);
  EXPECT_EQ(client_.CallCount("list"), 3);  // pages of 2
  EXPECT_EQ(log.size(), 5u);
  auto p0 = inf->store().Get("ns", "p0");
  ASSERT_NE(p0, nullptr);
  EXPECT_FALSE((*p0)["metadata"].contains("managedFields"));
  EXPECT_EQ((*p0)["spec"]["containers"][0]["image"], "busybox");
  EXPECT_EQ(inf->LastSyncResourceVersion(), std::to_string(client_.CurrentResourceVersion()));

  ASSERT_TRUE(client_.WaitForWatches(1, absl::Seconds(10)));
  CreatePod(MakePod("ns", "new"));
  Json upd = *client_.Get(PodResource(), "ns", "p1");
  upd["metadata"]["labels"]["x"] = "y";
  ASSERT_TRUE(client_.Update(PodResource(), "ns", upd).ok());
  ASSERT_TRUE(client_.Delete(PodResource(), "ns", "p2").ok());
  ASSERT_TRUE(log.WaitForSize(8));
  auto e = log.entries();
  EXPECT_THAT(std::vector<std::string>(e.begin() + 5, e.end()),
              ElementsAre("add ns/new", "update ns/p1", "delete ns/p2"));
  // Handlers see transformed objects too.
  EXPECT_FALSE(log.objects()[5]["metadata"].contains("managedFields"));
  EXPECT_EQ(inf->store().size(), 5u);
  EXPECT_EQ((*inf->store().Get("ns/p1"))["metadata"]["labels"]["x"], "y");
  EXPECT_EQ(inf->store().Get("ns/p2"), nullptr);
  inf->Stop();
}

TEST_F(InformerTest, ResumesWatchFromLastResourceVersionAfterDisconnect) {
  CreatePod(MakePod("ns", "a"));
  auto inf = MakeInformer();
  EventLog log;
  inf->AddEventHandler(log.Handler());
  inf->Start();
  ASSERT_TRUE(inf->WaitForSync(clock_.Now() + absl::Hours(1)));
  ASSERT_TRUE(client_.WaitForWatches(1, absl::Seconds(10)));
  CreatePod(MakePod("ns", "b"));
  ASSERT_TRUE(log.WaitForSize(2));
  client_.CloseWatches();  // as a server timeout
  ASSERT_TRUE(Eventually([&] { return inf->stats().watches >= 2 && client_.OpenWatches() == 1; }));
  CreatePod(MakePod("ns", "c"));
  ASSERT_TRUE(log.WaitForSize(3));
  EXPECT_THAT(log.entries(), ElementsAre("add ns/a", "add ns/b", "add ns/c"));
  EXPECT_EQ(inf->stats().lists, 1u);  // no relist
  EXPECT_GE(inf->stats().watches, 2u);
  inf->Stop();
}

TEST_F(InformerTest, RelistsOnGoneAndEmitsDifferenceWithTombstones) {
  CreatePod(MakePod("ns", "keep"));
  CreatePod(MakePod("ns", "change"));
  CreatePod(MakePod("ns", "vanish"));
  auto inf = MakeInformer();
  EventLog log;
  inf->AddEventHandler(log.Handler());
  inf->Start();
  ASSERT_TRUE(inf->WaitForSync(clock_.Now() + absl::Hours(1)));
  ASSERT_TRUE(client_.WaitForWatches(1, absl::Seconds(10)));
  // Cut the informer off, change things behind its back and compact the history.
  client_.InjectError("watch", absl::UnavailableError("down"), -1);
  client_.BreakWatches(absl::UnavailableError("connection reset"));
  ASSERT_TRUE(Eventually([&] { return client_.OpenWatches() == 0; }));
  Json upd = *client_.Get(PodResource(), "ns", "change");
  upd["metadata"]["labels"]["v"] = "2";
  ASSERT_TRUE(client_.Update(PodResource(), "ns", upd).ok());
  ASSERT_TRUE(client_.Delete(PodResource(), "ns", "vanish").ok());
  CreatePod(MakePod("ns", "added"));
  client_.Compact();
  client_.ClearErrors();
  ASSERT_TRUE(Eventually([&] { return log.size() >= 6; }, absl::Seconds(10), AdvanceClock()));
  auto e = log.entries();
  EXPECT_THAT(std::vector<std::string>(e.begin() + 3, e.end()),
              UnorderedElementsAre("add ns/added", "update ns/change", "delete-unknown ns/vanish"));
  // The tombstone carries the last known state.
  for (size_t i = 3; i < e.size(); ++i) {
    if (e[i] == "delete-unknown ns/vanish") {
      EXPECT_EQ(log.objects()[i]["metadata"]["name"], "vanish");
    }
  }
  EXPECT_EQ(inf->stats().relists, 1u);
  EXPECT_EQ(inf->stats().lists, 2u);
  EXPECT_EQ(inf->store().size(), 3u);
  EXPECT_EQ((*inf->store().Get("ns/change"))["metadata"]["labels"]["v"], "2");
  inf->Stop();
}

TEST_F(InformerTest, BookmarksAdvanceResourceVersion) {
  CreatePod(MakePod("ns", "a"));
  auto inf = MakeInformer();
  inf->Start();
  ASSERT_TRUE(inf->WaitForSync(clock_.Now() + absl::Hours(1)));
  ASSERT_TRUE(client_.WaitForWatches(1, absl::Seconds(10)));
  const std::string before = inf->LastSyncResourceVersion();
  Resource cms{"", "v1", "configmaps", "ConfigMap", true};
  ASSERT_TRUE(client_.Create(cms, "ns", {{"metadata", {{"name", "cm"}}}}).ok());
  client_.SendBookmark();
  const std::string want = std::to_string(client_.CurrentResourceVersion());
  ASSERT_TRUE(Eventually([&] { return inf->LastSyncResourceVersion() == want; }));
  EXPECT_NE(before, want);
  EXPECT_EQ(inf->stats().bookmarks, 1u);
  EXPECT_EQ(inf->store().size(), 1u);
  inf->Stop();
}

TEST_F(InformerTest, ListErrorsBackOffOnTheClockThenSucceed) {
  CreatePod(MakePod("ns", "a"));
  client_.InjectError("list", absl::UnavailableError("apiserver down"), 3);
  auto inf = MakeInformer();
  inf->Start();
  // Without time passing the informer stays in backoff after the first failure.
  ASSERT_TRUE(Eventually([&] { return clock_.waiters() >= 1; }));
  EXPECT_FALSE(inf->HasSynced());
  EXPECT_EQ(client_.CallCount("list"), 1);
  ASSERT_TRUE(Eventually([&] { return inf->HasSynced(); }, absl::Seconds(10), AdvanceClock()));
  EXPECT_EQ(inf->stats().errors, 3u);
  inf->Stop();
}

TEST_F(InformerTest, IndexersAndLister) {
  CreatePod(MakePod("a", "p1", "node-1", "uid-rs1"));
  CreatePod(MakePod("a", "p2", "node-2", "uid-rs1"));
  CreatePod(MakePod("b", "p3", "node-1", "uid-rs2"));
  auto inf = MakeInformer();
  inf->Start();
  ASSERT_TRUE(inf->WaitForSync(clock_.Now() + absl::Hours(1)));
  auto keys = [&](const std::string& idx, const std::string& v) {
    auto k = inf->store().IndexKeys(idx, v);
    EXPECT_TRUE(k.ok());
    std::sort(k->begin(), k->end());
    return *k;
  };
  EXPECT_THAT(keys("node", "node-1"), ElementsAre("a/p1", "b/p3"));
  EXPECT_THAT(keys(kNamespaceIndex, "a"), ElementsAre("a/p1", "a/p2"));
  EXPECT_THAT(keys(kOwnerUidIndex, "uid-rs1"), ElementsAre("a/p1", "a/p2"));
  auto by = inf->store().ByIndex("node", "node-2");
  ASSERT_TRUE(by.ok());
  ASSERT_EQ(by->size(), 1u);
  EXPECT_EQ((*by)[0]->at("metadata").at("name"), "p2");
  EXPECT_FALSE(inf->store().ByIndex("nope", "x").ok());
  EXPECT_EQ(inf->store().List().size(), 3u);

  // Moving a pod to another node re-indexes it.
  ASSERT_TRUE(client_.WaitForWatches(1, absl::Seconds(10)));
  Json p1 = *client_.Get(PodResource(), "a", "p1");
  p1["spec"]["nodeName"] = "node-2";
  ASSERT_TRUE(client_.Update(PodResource(), "a", p1).ok());
  ASSERT_TRUE(Eventually([&] { return keys("node", "node-2").size() == 2; }));
  EXPECT_THAT(keys("node", "node-1"), ElementsAre("b/p3"));
  ASSERT_TRUE(client_.Delete(PodResource(), "b", "p3").ok());
  ASSERT_TRUE(Eventually([&] { return keys("node", "node-1").empty(); }));
  inf->Stop();
}

TEST_F(InformerTest, HandlersRunOutsideLocksAndMayReadTheCache) {
  auto inf = MakeInformer();
  std::atomic<int> seen{0};
  ResourceEventHandler h;
  h.on_add = [&](const Json& o) {
    // Reading the lister from a handler must not deadlock, and the object is already cached.
    if (inf->store().Get(StoreKey(o)) != nullptr) ++seen;
    (void)inf->store().List();
    (void)inf->HasSynced();
  };
  inf->AddEventHandler(h);
  inf->Start();
  ASSERT_TRUE(inf->WaitForSync(clock_.Now() + absl::Hours(1)));
  ASSERT_TRUE(client_.WaitForWatches(1, absl::Seconds(10)));
  for (int i = 0; i < 50; ++i) CreatePod(MakePod("ns", "p" + std::to_string(i)));
  ASSERT_TRUE(Eventually([&] { return seen.load() == 50; }));
  inf->Stop();
}

TEST_F(InformerTest, LateHandlerReceivesExistingObjects) {
  CreatePod(MakePod("ns", "a"));
  CreatePod(MakePod("ns", "b"));
  auto inf = MakeInformer();
  inf->Start();
  ASSERT_TRUE(inf->WaitForSync(clock_.Now() + absl::Hours(1)));
  EventLog log;
  inf->AddEventHandler(log.Handler());
  ASSERT_TRUE(log.WaitForSize(2));
  EXPECT_THAT(log.entries(), UnorderedElementsAre("add ns/a", "add ns/b"));
  inf->Stop();
}

TEST_F(InformerTest, StopIsPromptWhileWatching) {
  auto inf = MakeInformer();
  inf->Start();
  ASSERT_TRUE(inf->WaitForSync(clock_.Now() + absl::Hours(1)));
  ASSERT_TRUE(client_.WaitForWatches(1, absl::Seconds(10)));
  inf->Stop();
  EXPECT_EQ(client_.OpenWatches(), 0);
}

// A realistic ~5 KiB pod as the API server returns it, managedFields included.
Json RealisticPod(int i) {
  Json pod = MakePod("production", "web-frontend-7d9f8b6c5d-" + std::to_string(10000 + i),
                     "node-" + std::to_string(i % 300), "3f6e1c2a-8b1d-4c7e-9a2f-6d5e4b3a2c1d");
  auto& m = pod["metadata"];
  m["uid"] = "a1b2c3d4-e5f6-7890-abcd-ef12345678" + std::to_string(10 + i % 90);
  m["resourceVersion"] = std::to_string(123456789 + i);
  m["creationTimestamp"] = "2024-05-01T10:00:00Z";
  m["generateName"] = "web-frontend-7d9f8b6c5d-";
  m["labels"] = {{"app", "web-frontend"},
                 {"pod-template-hash", "7d9f8b6c5d"},
                 {"tier", "frontend"},
                 {"version", "v2.14.3"}};
  m["annotations"] = {{"prometheus.io/scrape", "true"}, {"prometheus.io/port", "9090"}};
  Json fields;
  for (const char* f : {"f:metadata", "f:spec", "f:status"}) {
    Json inner;
    for (int k = 0; k < 25; ++k) inner["f:field" + std::to_string(k)] = Json::object();
    fields[f] = inner;
  }
  m["managedFields"] = Json::array({{{"manager", "kube-controller-manager"},
                                     {"operation", "Update"},
                                     {"apiVersion", "v1"},
                                     {"time", "2024-05-01T10:00:00Z"},
                                     {"fieldsType", "FieldsV1"},
                                     {"fieldsV1", fields}},
                                    {{"manager", "kubelet"},
                                     {"operation", "Update"},
                                     {"apiVersion", "v1"},
                                     {"time", "2024-05-01T10:00:05Z"},
                                     {"fieldsType", "FieldsV1"},
                                     {"fieldsV1", fields}}});
  Json container = {
      {"name", "web"},
      {"image", "registry.example.com/team/web-frontend:v2.14.3"},
      {"imagePullPolicy", "IfNotPresent"},
      {"ports", Json::array({{{"containerPort", 8080}, {"name", "http"}, {"protocol", "TCP"}}})},
      {"env", Json::array({{{"name", "LOG_LEVEL"}, {"value", "info"}},
                           {{"name", "REGION"}, {"value", "eu-west-1"}}})},
      {"resources",
       {{"requests", {{"cpu", "250m"}, {"memory", "256Mi"}}},
        {"limits", {{"cpu", "1"}, {"memory", "512Mi"}}}}},
      {"volumeMounts", Json::array({{{"name", "kube-api-access-abcde"},
                                     {"mountPath", "/var/run/secrets/kubernetes.io/serviceaccount"},
                                     {"readOnly", true}}})},
      {"terminationMessagePath", "/dev/termination-log"},
      {"terminationMessagePolicy", "File"},
      {"readinessProbe",
       {{"httpGet", {{"path", "/healthz"}, {"port", 8080}}}, {"periodSeconds", 10}}}};
  pod["spec"]["containers"] = Json::array({container});
  pod["spec"]["restartPolicy"] = "Always";
  pod["spec"]["schedulerName"] = "default-scheduler";
  pod["spec"]["serviceAccountName"] = "web-frontend";
  pod["spec"]["tolerations"] = Json::array({{{"key", "node.kubernetes.io/not-ready"},
                                             {"operator", "Exists"},
                                             {"effect", "NoExecute"},
                                             {"tolerationSeconds", 300}},
                                            {{"key", "node.kubernetes.io/unreachable"},
                                             {"operator", "Exists"},
                                             {"effect", "NoExecute"},
                                             {"tolerationSeconds", 300}}});
  pod["spec"]["volumes"] = Json::array(
      {{{"name", "kube-api-access-abcde"},
        {"projected",
         {{"defaultMode", 420},
          {"sources",
           Json::array({{{"serviceAccountToken", {{"expirationSeconds", 3607}, {"path", "token"}}}},
                        {{"configMap", {{"name", "kube-root-ca.crt"}}}}})}}}}});
  pod["status"] = {
      {"phase", "Running"},
      {"hostIP", "10.0.1.17"},
      {"podIP", "10.244.3.41"},
      {"qosClass", "Burstable"},
      {"startTime", "2024-05-01T10:00:01Z"},
      {"conditions", Json::array()},
      {"containerStatuses",
       Json::array({{{"name", "web"},
                     {"ready", true},
                     {"restartCount", 0},
                     {"started", true},
                     {"image", "registry.example.com/team/web-frontend:v2.14.3"},
                     {"imageID",
                      "registry.example.com/team/web-frontend@sha256:"
                      "4b6c8e1f2a3d5c7e9b0a1f3e5d7c9b1a3f5e7d9c1b3a5f7e9d1c3b5a7f9e1d3c"},
                     {"containerID",
                      "containerd://9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a"
                      "39281706f5e4d3c2b1a0"},
                     {"state", {{"running", {{"startedAt", "2024-05-01T10:00:03Z"}}}}}}})}};
  for (const char* c : {"Initialized", "Ready", "ContainersReady", "PodScheduled"}) {
    pod["status"]["conditions"].push_back({{"type", c},
                                           {"status", "True"},
                                           {"lastProbeTime", nullptr},
                                           {"lastTransitionTime", "2024-05-01T10:00:04Z"}});
  }
  return pod;
}

// A transform a pod controller might use: drop managedFields and fields nobody reads.
void CompactPodTransform(Json& pod) {
  StripManagedFields(pod);
  if (pod.contains("spec")) {
    for (const char* f : {"volumes", "tolerations"}) pod["spec"].erase(f);
    if (pod["spec"].contains("containers")) {
      for (Json& c : pod["spec"]["containers"]) {
        for (const char* f : {"env", "volumeMounts", "terminationMessagePath",
                              "terminationMessagePolicy", "readinessProbe", "ports"}) {
          c.erase(f);
        }
      }
    }
  }
}

TEST(TransformTest, KeepOnlyMetadataKeepsIdentityAndTheNamedFields) {
  Json ns = Json::parse(R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a",
    "resourceVersion":"7","uid":"u1","labels":{"env":"prod"},"annotations":{"a":"b"}},
    "spec":{"finalizers":["kubernetes"]},"status":{"phase":"Active"}})");
  KeepOnlyMetadata({"labels"})(ns);
  EXPECT_EQ(ns, Json::parse(R"({"metadata":{"name":"team-a","resourceVersion":"7",
    "labels":{"env":"prod"}}})"));
  Json odd = Json::array();  // never throws on what is not an object
  KeepOnlyMetadata({"labels"})(odd);
  EXPECT_EQ(odd, Json::parse(R"({"metadata":{}})"));
}

size_t HeapInUse() { return mallinfo2().uordblks; }

// Measures the cache cost per object (reported by the test): bytes of the encoded form and heap
// growth per cached pod, against the alternative of caching decoded nlohmann::json trees.
TEST(StoreMemoryTest, RealisticPodCostsLessThanTwoKiBAfterTransform) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  // The sanitizers replace malloc: mallinfo2() does not see the heap they manage.
  GTEST_SKIP() << "heap accounting needs glibc's malloc (sanitizer build)";
#endif
  constexpr int kPods = 3000;
  const size_t raw = RealisticPod(0).dump().size();
  Json transformed = RealisticPod(0);
  CompactPodTransform(transformed);
  const size_t after_transform_json = transformed.dump().size();

  Store store(
      {{kNamespaceIndex, NamespaceIndexFunc()}, {"node", FieldIndexFunc("/spec/nodeName")}});
  const size_t before = HeapInUse();
  for (int i = 0; i < kPods; ++i) {
    Json pod = RealisticPod(i);
    CompactPodTransform(pod);
    store.Upsert(StoreKey(pod), EncodedObject::Encode(pod), pod);
  }
  const double per_pod = static_cast<double>(HeapInUse() - before) / kPods;
  const double encoded_per_pod = static_cast<double>(store.EncodedBytes()) / kPods;

  std::vector<std::shared_ptr<const Json>> trees;
  const size_t before_trees = HeapInUse();
  for (int i = 0; i < kPods; ++i) {
    Json pod = RealisticPod(i);
    CompactPodTransform(pod);
    trees.push_back(std::make_shared<const Json>(std::move(pod)));
  }
  const double tree_per_pod = static_cast<double>(HeapInUse() - before_trees) / kPods;

  std::printf(
      "[memory] raw pod JSON %zu B, after transform %zu B; store: msgpack %.0f B/pod, heap %.0f "
      "B/pod (incl. key, indexes); json tree would be %.0f B/pod; 30k pods ~ %.1f MiB\n",
      raw, after_transform_json, encoded_per_pod, per_pod, tree_per_pod,
      per_pod * 30000 / (1 << 20));
  EXPECT_GT(raw, 4000u);
  EXPECT_LT(per_pod, 2048.0);
  EXPECT_LT(per_pod, tree_per_pod);
  // Round trip is lossless.
  EXPECT_EQ(*store.Get(StoreKey(transformed)), transformed);
}


TEST(CompactNodeForManagerTest, KeepsWhatNodeReadersNeedAndNoHeartbeat) {
  Json node = Json::parse(R"({
    "apiVersion": "v1", "kind": "Node",
    "metadata": {"name": "n1", "uid": "u1", "resourceVersion": "7", "labels": {"zone": "a"},
                 "creationTimestamp": "2026-01-01T00:00:00Z", "annotations": {"big": "x"},
                 "managedFields": [{}]},
    "spec": {"podCIDR": "10.0.0.0/24", "unschedulable": true,
             "taints": [{"key": "k", "effect": "NoSchedule"}]},
    "status": {"images": [{"names": ["a"]}], "capacity": {"cpu": "2"},
               "conditions": [{"type": "MemoryPressure", "status": "False"},
                              {"type": "Ready", "status": "True", "reason": "KubeletReady",
                               "lastHeartbeatTime": "2026-01-02T00:00:00Z",
                               "lastTransitionTime": "2026-01-01T00:00:10Z"}]}})");
  CompactNodeForManager(node);
  EXPECT_EQ(node, Json::parse(R"({
    "apiVersion": "v1", "kind": "Node",
    "metadata": {"name": "n1", "uid": "u1", "resourceVersion": "7", "labels": {"zone": "a"},
                 "creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {"unschedulable": true, "taints": [{"key": "k", "effect": "NoSchedule"}]},
    "status": {"conditions": [{"type": "Ready", "status": "True",
                               "lastTransitionTime": "2026-01-01T00:00:10Z"}]}})"));
  Json odd = Json::parse(R"({"metadata": 5, "spec": [], "status": {"conditions": {}}})");
  CompactNodeForManager(odd);
  EXPECT_EQ(odd, Json::parse(R"({"metadata": {}})"));
}

TEST(CompactPodForManagerTest, OtherControllersKeepOnlyWhatSelectorsNeed) {
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", "p"},
                {"namespace", "ns"},
                {"uid", "u1"},
                {"resourceVersion", "7"},
                {"creationTimestamp", "2024-05-01T10:00:00Z"},
                {"labels", {{"app", "a"}}},
                {"annotations", {{"big", std::string(500, 'x')}}},
                {"ownerReferences",
                 {{{"apiVersion", "apps/v1"},
                   {"kind", "ReplicaSet"},
                   {"name", "rs"},
                   {"uid", "rs-uid"},
                   {"controller", true}}}}}},
              {"spec", {{"nodeName", "n1"}, {"containers", {{{"name", "c"}, {"image", "i"}}}}}},
              {"status",
               {{"phase", "Running"},
                {"podIP", "10.0.0.1"},
                {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
  Json compact = pod;
  CompactPodForManager(compact);
  EXPECT_EQ(compact, Json::parse(R"({"apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                 "creationTimestamp": "2024-05-01T10:00:00Z", "labels": {"app": "a"},
                 "ownerReferences": [{"controller": true, "kind": "ReplicaSet"}]},
    "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}})"));
  EXPECT_TRUE(HasController(compact));
  EXPECT_FALSE(ControllerOf(compact).has_value());  // incomplete on purpose
  EXPECT_TRUE(ControllerUidIndexFunc()(compact).empty());
  // A Running pod that is not ready keeps its Ready condition (PodUnavailableBudget reads it);
  // without one it reads as Unknown.
  Json unready = pod;
  unready["status"]["conditions"][0]["status"] = "False";
  CompactPodForManager(unready);
  EXPECT_EQ(unready["status"],
            Json::parse(R"({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]})"));
  Json unknown = pod;
  unknown["status"].erase("conditions");
  CompactPodForManager(unknown);
  EXPECT_EQ(unknown["status"]["conditions"][0]["status"], "Unknown");

  // Of the annotations, only the SidecarSet controller's not-injected note is kept.
  Json noted = pod;
  noted["metadata"]["annotations"]["kruise.io/sidecarset-not-injected"] = "a,b";
  CompactPodForManager(noted);
  EXPECT_EQ(noted["metadata"]["annotations"],
            Json({{"kruise.io/sidecarset-not-injected", "a,b"}}));

  // The same pod with injected sidecars keeps what the SidecarSet controller reads.
  Json injected = pod;
  injected["metadata"]["annotations"]["kruise.io/sidecarset-injected-list"] = "logging";
  CompactPodForManager(injected);
  EXPECT_EQ(injected["metadata"]["annotations"]["kruise.io/sidecarset-injected-list"], "logging");
  EXPECT_EQ(injected["spec"]["containers"][0], Json({{"name", "c"}, {"image", "i"}}));
  EXPECT_EQ(injected["metadata"]["ownerReferences"][0]["name"], "rs");
  Json empty_list = pod;
  empty_list["metadata"]["annotations"]["kruise.io/sidecarset-injected-list"] = "";
  CompactPodForManager(empty_list);
  EXPECT_FALSE(empty_list["spec"].contains("containers"));
}

TEST(CompactPodForManagerTest, WorkloadSpreadPodsKeepWhatItsControllerReads) {
  Json pod = Json::parse(R"({"apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
      "creationTimestamp": "2024-05-01T10:00:00Z", "labels": {"app": "a"},
      "annotations": {"apps.kruise.io/matched-workloadspread": "{\"name\":\"ws\",\"subset\":\"a\"}",
                      "controller.kubernetes.io/pod-deletion-cost": "200",
                      "big": "xxxxxxxx"},
      "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                           "uid": "rs-uid", "controller": true, "blockOwnerDeletion": true}]},
    "spec": {"containers": [{"name": "c", "image": "i"}], "schedulerName": "default"},
    "status": {"phase": "Pending",
      "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                      "message": "0/3 nodes", "lastTransitionTime": "2024-05-01T10:00:01Z",
                      "lastProbeTime": null},
                     {"type": "Initialized", "status": "True"}],
      "containerStatuses": [{"name": "c", "restartCount": 0, "image": "i"},
                            {"name": "d", "restartCount": 3, "image": "j"}]}})");
  CompactPodForManager(pod);
  EXPECT_EQ(pod, Json::parse(R"({"apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
      "creationTimestamp": "2024-05-01T10:00:00Z", "labels": {"app": "a"},
      "annotations": {"apps.kruise.io/matched-workloadspread": "{\"name\":\"ws\",\"subset\":\"a\"}",
                      "controller.kubernetes.io/pod-deletion-cost": "200"},
      "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                           "uid": "rs-uid", "controller": true}]},
    "status": {"phase": "Pending",
      "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                      "lastTransitionTime": "2024-05-01T10:00:01Z"}],
      "containerStatuses": [{"restartCount": 3}]}})"));
  EXPECT_EQ(ControllerOf(pod)->name, "rs");
}

TEST(CompactPodForManagerTest, KruiseWorkloadPodsKeepWhatTheirControllersRead) {
  Json pod = Json::parse(R"({
    "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                 "labels": {"app": "a"}, "annotations": {"apps.kruise.io/inplace-update-state": "{}"},
                 "finalizers": ["f"], "managedFields": [{"manager": "x"}],
                 "ownerReferences": [{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
                                      "name": "cs", "uid": "cs-uid", "controller": true}]},
    "spec": {"nodeName": "n1", "readinessGates": [{"conditionType": "InPlaceUpdateReady"}],
             "containers": [{"name": "c", "image": "i:1", "env": [{"name": "A"}],
                             "resources": {"limits": {"cpu": "1"}}}],
             "volumes": [{"name": "v"}]},
    "status": {"phase": "Running", "podIP": "10.0.0.1",
               "conditions": [{"type": "Ready", "status": "True", "message": "m",
                               "lastTransitionTime": "2026-01-01T00:00:00Z"},
                              {"type": "SidecarSetUpgradable", "status": "True",
                               "reason": "AllSidecarsetUpgradable", "message": "{\"s\":true}"}],
               "containerStatuses": [{"name": "c", "image": "i:1", "imageID": "sha256:1",
                                      "containerID": "containerd://1", "restartCount": 2,
                                      "ready": true, "lastState": {},
                                      "state": {"running": {"startedAt": "2026-01-01T00:00:01Z"}}}]}})");
  CompactPodForManager(pod);
  EXPECT_EQ(pod, Json::parse(R"({
    "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                 "labels": {"app": "a"}, "annotations": {"apps.kruise.io/inplace-update-state": "{}"},
                 "finalizers": ["f"],
                 "ownerReferences": [{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
                                      "name": "cs", "uid": "cs-uid", "controller": true}]},
    "spec": {"nodeName": "n1", "readinessGates": [{"conditionType": "InPlaceUpdateReady"}],
             "containers": [{"name": "c", "image": "i:1"}]},
    "status": {"phase": "Running",
               "conditions": [{"type": "Ready", "status": "True",
                               "lastTransitionTime": "2026-01-01T00:00:00Z"},
                              {"type": "SidecarSetUpgradable", "status": "True",
                               "reason": "AllSidecarsetUpgradable", "message": "{\"s\":true}"}],
               "containerStatuses": [{"name": "c", "image": "i:1", "imageID": "sha256:1",
                                      "containerID": "containerd://1", "restartCount": 2,
                                      "ready": true,
                                      "state": {"running": {"startedAt": "2026-01-01T00:00:01Z"}}}]}})"))
      << pod.dump();
  EXPECT_EQ(ControllerUidIndexFunc()(pod), std::vector<std::string>{"cs-uid"});
  // No controller at all (an adoption candidate): kept like a workload's pod.
  Json orphan = {{"metadata", {{"name", "o"}, {"managedFields", Json::array()}}},
                 {"spec", {{"containers", {{{"name", "c"}, {"image", "i"}, {"env", Json::array()}}}}}}};
  CompactPodForManager(orphan);
  EXPECT_EQ(orphan["spec"]["containers"][0], Json({{"name", "c"}, {"image", "i"}}));
  EXPECT_FALSE(HasController(orphan));
}

TEST(CompactPodForManagerTest, UnscheduledDaemonSetPodKeepsItsTargetNode) {
  Json pod = Json::parse(R"({
    "metadata": {"name": "d", "namespace": "ns", "uid": "u1",
                 "ownerReferences": [{"apiVersion": "apps.kruise.io/v1beta1", "kind": "DaemonSet",
                                      "name": "ds", "uid": "ds-uid", "controller": true}]},
    "spec": {"containers": [{"name": "c", "image": "i"}],
             "affinity": {"podAntiAffinity": {"x": 1},
                          "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [],
                                           "requiredDuringSchedulingIgnoredDuringExecution": {
                                             "nodeSelectorTerms": [{"matchFields": [
                                               {"key": "metadata.name", "operator": "In",
                                                "values": ["n1"]}]}]}}}}})");
  Json compact = pod;
  CompactPodForManager(compact);
  EXPECT_EQ(compact["spec"]["affinity"],
            Json({{"nodeAffinity",
                   {{"requiredDuringSchedulingIgnoredDuringExecution",
                     pod["spec"]["affinity"]["nodeAffinity"]
                        ["requiredDuringSchedulingIgnoredDuringExecution"]}}}}));
  // Once scheduled, spec.nodeName says it all.
  pod["spec"]["nodeName"] = "n1";
  CompactPodForManager(pod);
  EXPECT_FALSE(pod["spec"].contains("affinity"));
}

}  // namespace
}  // namespace kruise::kube
