#include "test/fakes/apiserver/fake_apiserver.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "test/fakes/apiserver/tests/test_client.h"
#include "test/fakes/fake_clock.h"

namespace kruise::testing {
namespace {

using Json = nlohmann::json;

constexpr char kPods[] = "/api/v1/namespaces/default/pods";
constexpr char kMerge[] = "application/merge-patch+json";
constexpr char kJsonPatch[] = "application/json-patch+json";

Json Pod(const std::string& name, Json labels = Json::object()) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"labels", labels}}},
          {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
}

int64_t Rv(const Json& obj) {
  return std::stoll(obj["metadata"]["resourceVersion"].get<std::string>());
}

class FakeApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override { StartWith({}); }
  void StartWith(FakeApiServerOptions opts) {
    client_.reset();
    server_ = std::make_unique<FakeApiServer>(std::move(opts));
    ASSERT_TRUE(server_->Start().ok());
    client_ = std::make_unique<TestClient>(server_->base_url());
  }
  Json MustCreate(const Json& pod) {
    HttpResult r = client_->Post(kPods, pod);
    EXPECT_EQ(r.status, 201) << r.raw;
    return r.body;
  }

  FakeClock clock_;  // outlives server_ (declared first)
  std::unique_ptr<FakeApiServer> server_;
  std::unique_ptr<TestClient> client_;
};

TEST_F(FakeApiServerTest, DiscoveryAndUnknownResources) {
  HttpResult r = client_->Get("/api/v1");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["kind"], "APIResourceList");
  r = client_->Get("/apis");
  ASSERT_EQ(r.status, 200);
  bool kruise = false;
  for (const Json& g : r.body["groups"]) kruise |= g["name"] == "apps.kruise.io";
  EXPECT_TRUE(kruise);
  r = client_->Get("/apis/apps.kruise.io/v1alpha1");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["groupVersion"], "apps.kruise.io/v1alpha1");
  r = client_->Get("/api/v1/namespaces/default/widgets");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body["kind"], "Status");
  EXPECT_EQ(r.body["reason"], "NotFound");
  EXPECT_EQ(client_->Get("/apis/nope.io/v1/things").status, 404);
}

TEST_F(FakeApiServerTest, CreateGetListDelete) {
  Json created = MustCreate(Pod("a"));
  EXPECT_EQ(created["metadata"]["namespace"], "default");
  EXPECT_FALSE(created["metadata"]["uid"].get<std::string>().empty());
  EXPECT_FALSE(created["metadata"]["creationTimestamp"].get<std::string>().empty());
  EXPECT_EQ(created["metadata"]["generation"], 1);
  EXPECT_EQ(Rv(created), server_->CurrentResourceVersion());

  HttpResult got = client_->Get(absl::StrCat(kPods, "/a"));
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(got.body, created);

  HttpResult dup = client_->Post(kPods, Pod("a"));
  EXPECT_EQ(dup.status, 409);
  EXPECT_EQ(dup.body["reason"], "AlreadyExists");

  Json nameless = Pod("");
  nameless["metadata"].erase("name");
  HttpResult invalid = client_->Post(kPods, nameless);
  EXPECT_EQ(invalid.status, 422);
  EXPECT_EQ(invalid.body["reason"], "Invalid");

  Json gen = Pod("");
  gen["metadata"].erase("name");
  gen["metadata"]["generateName"] = "web-";
  Json g1 = MustCreate(gen);
  Json g2 = MustCreate(gen);
  std::string n1 = g1["metadata"]["name"];
  EXPECT_EQ(n1.size(), 9u);
  EXPECT_EQ(n1.rfind("web-", 0), 0u);
  EXPECT_NE(n1, g2["metadata"]["name"].get<std::string>());

  HttpResult all = client_->Get("/api/v1/pods");
  ASSERT_EQ(all.status, 200);
  EXPECT_EQ(all.body["kind"], "PodList");
  EXPECT_EQ(all.body["items"].size(), 3u);
  EXPECT_EQ(all.body["metadata"]["resourceVersion"],
            std::to_string(server_->CurrentResourceVersion()));

  HttpResult del = client_->Delete(absl::StrCat(kPods, "/a"));
  ASSERT_EQ(del.status, 200);
  EXPECT_GT(Rv(del.body), Rv(created));
  EXPECT_EQ(client_->Get(absl::StrCat(kPods, "/a")).status, 404);
  EXPECT_EQ(client_->Delete(absl::StrCat(kPods, "/a")).status, 404);
  EXPECT_FALSE(server_->Get("pods", "default", "a").ok());
}

TEST_F(FakeApiServerTest, ClusterScopedKruiseResourcesShareStorageAcrossVersions) {
  Json ni = {{"apiVersion", "apps.kruise.io/v1alpha1"},
             {"kind", "NodeImage"},
             {"metadata", {{"name", "node-1"}}},
             {"spec", {{"images", Json::object()}}}};
  HttpResult r = client_->Post("/apis/apps.kruise.io/v1alpha1/nodeimages", ni);
  ASSERT_EQ(r.status, 201) << r.raw;
  EXPECT_FALSE(r.body["metadata"].contains("namespace"));
  HttpResult beta = client_->Get("/apis/apps.kruise.io/v1beta1/nodeimages/node-1");
  ASSERT_EQ(beta.status, 200);
  EXPECT_EQ(beta.body["apiVersion"], "apps.kruise.io/v1beta1");
  EXPECT_EQ(beta.body["metadata"]["uid"], r.body["metadata"]["uid"]);
  // Namespaced kruise resource.
  Json crr = {{"metadata", {{"name", "crr-1"}}}, {"spec", {{"podName", "p"}}}};
  EXPECT_EQ(
      client_->Post("/apis/apps.kruise.io/v1alpha1/namespaces/ns1/containerrecreaterequests", crr)
          .status,
      201);
  EXPECT_TRUE(server_->Get("containerrecreaterequests.apps.kruise.io", "ns1", "crr-1").ok());
  HttpResult leases = client_->Get("/apis/coordination.k8s.io/v1/leases");
  EXPECT_EQ(leases.status, 200);
}

TEST_F(FakeApiServerTest, UpdateConflictsOnStaleResourceVersion) {
  Json pod = MustCreate(Pod("a"));
  Json v1 = pod;
  v1["metadata"]["labels"]["x"] = "1";
  HttpResult ok = client_->Put(absl::StrCat(kPods, "/a"), v1);
  ASSERT_EQ(ok.status, 200) << ok.raw;
  EXPECT_GT(Rv(ok.body), Rv(pod));
  Json stale = pod;  // still has the old resourceVersion
  stale["metadata"]["labels"]["x"] = "2";
  HttpResult conflict = client_->Put(absl::StrCat(kPods, "/a"), stale);
  EXPECT_EQ(conflict.status, 409);
  EXPECT_EQ(conflict.body["reason"], "Conflict");
  // An empty resourceVersion is an unconditional update.
  stale["metadata"].erase("resourceVersion");
  HttpResult uncond = client_->Put(absl::StrCat(kPods, "/a"), stale);
  ASSERT_EQ(uncond.status, 200);
  EXPECT_EQ(uncond.body["metadata"]["labels"]["x"], "2");
  // uid and creationTimestamp cannot change; a name mismatch is rejected.
  Json tamper = uncond.body;
  tamper["metadata"]["creationTimestamp"] = "2000-01-01T00:00:00Z";
  tamper["metadata"]["labels"]["y"] = "1";
  HttpResult kept = client_->Put(absl::StrCat(kPods, "/a"), tamper);
  ASSERT_EQ(kept.status, 200);
  EXPECT_EQ(kept.body["metadata"]["creationTimestamp"], pod["metadata"]["creationTimestamp"]);
  Json renamed = kept.body;
  renamed["metadata"]["name"] = "b";
  EXPECT_EQ(client_->Put(absl::StrCat(kPods, "/a"), renamed).status, 400);
  // A no-op update does not bump the resourceVersion.
  HttpResult noop = client_->Put(absl::StrCat(kPods, "/a"), kept.body);
  ASSERT_EQ(noop.status, 200);
  EXPECT_EQ(Rv(noop.body), Rv(kept.body));
  EXPECT_EQ(client_->Put(absl::StrCat(kPods, "/missing"), Pod("missing")).status, 404);
}

TEST_F(FakeApiServerTest, GenerationBumpsOnlyOnSpecChanges) {
  Json pod = MustCreate(Pod("a"));
  Json labels = pod;
  labels["metadata"]["labels"]["l"] = "v";
  HttpResult r = client_->Put(absl::StrCat(kPods, "/a"), labels);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["metadata"]["generation"], 1);
  Json spec = r.body;
  spec["spec"]["containers"][0]["image"] = "nginx";
  r = client_->Put(absl::StrCat(kPods, "/a"), spec);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["metadata"]["generation"], 2);
  Json status = r.body;
  status["status"] = {{"phase", "Running"}};
  r = client_->Put(absl::StrCat(kPods, "/a/status"), status);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["metadata"]["generation"], 2);
  EXPECT_EQ(r.body["status"]["phase"], "Running");
}

TEST_F(FakeApiServerTest, StatusSubresourceSeparatesSpecAndStatus) {
  Json pod = Pod("a");
  pod["status"] = {{"phase", "Running"}};
  Json created = MustCreate(pod);
  EXPECT_FALSE(created.contains("status"));  // create drops status
  Json main = created;
  main["status"] = {{"phase", "Failed"}};
  main["metadata"]["labels"]["k"] = "v";
  HttpResult r = client_->Put(absl::StrCat(kPods, "/a"), main);
  ASSERT_EQ(r.status, 200);
  EXPECT_FALSE(r.body.contains("status"));
  EXPECT_EQ(r.body["metadata"]["labels"]["k"], "v");
  Json st = r.body;
  st["status"] = {{"phase", "Succeeded"}};
  st["metadata"]["labels"]["k"] = "ignored";
  st["spec"]["containers"][0]["image"] = "ignored";
  r = client_->Put(absl::StrCat(kPods, "/a/status"), st);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["status"]["phase"], "Succeeded");
  EXPECT_EQ(r.body["metadata"]["labels"]["k"], "v");
  EXPECT_EQ(r.body["spec"]["containers"][0]["image"], "busybox");
  // Resources without a status subresource have no /status.
  EXPECT_EQ(client_->Get("/api/v1/namespaces/default/configmaps/x/status").status, 404);
}

TEST_F(FakeApiServerTest, MergeAndJsonPatch) {
  Json pod = MustCreate(Pod("a", {{"keep", "1"}, {"drop", "1"}}));
  HttpResult r = client_->Patch(absl::StrCat(kPods, "/a"), kMerge,
                                {{"metadata", {{"labels", {{"drop", nullptr}, {"new", "2"}}}}}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["metadata"]["labels"], Json({{"keep", "1"}, {"new", "2"}}));
  EXPECT_GT(Rv(r.body), Rv(pod));

  r = client_->Patch(
      absl::StrCat(kPods, "/a"), kJsonPatch,
      Json::array({{{"op", "test"}, {"path", "/metadata/labels/keep"}, {"value", "1"}},
                   {{"op", "replace"}, {"path", "/spec/containers/0/image"}, {"value", "nginx"}}}));
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["spec"]["containers"][0]["image"], "nginx");
  EXPECT_EQ(r.body["metadata"]["generation"], 2);

  HttpResult failed = client_->Patch(
      absl::StrCat(kPods, "/a"), kJsonPatch,
      Json::array({{{"op", "test"}, {"path", "/metadata/labels/keep"}, {"value", "9"}}}));
  EXPECT_EQ(failed.status, 422);
  EXPECT_EQ(failed.body["reason"], "Invalid");

  // A patch carrying a stale resourceVersion is an optimistic-concurrency check.
  HttpResult stale = client_->Patch(absl::StrCat(kPods, "/a"), kMerge,
                                    {{"metadata", {{"resourceVersion", std::to_string(Rv(pod))}}}});
  EXPECT_EQ(stale.status, 409);

  r = client_->Patch(absl::StrCat(kPods, "/a/status"), "application/strategic-merge-patch+json",
                     {{"status", {{"phase", "Running"}}}, {"spec", {{"nodeName", "ignored"}}}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["status"]["phase"], "Running");
  EXPECT_FALSE(r.body["spec"].contains("nodeName"));

  EXPECT_EQ(
      client_->Patch(absl::StrCat(kPods, "/a"), "application/apply-patch+yaml", Json::object())
          .status,
      415);
  EXPECT_EQ(client_->Patch(absl::StrCat(kPods, "/zzz"), kMerge, Json::object()).status, 404);
}

TEST_F(FakeApiServerTest, FinalizersDelayDeletionUntilRemoved) {
  Json pod = Pod("a");
  pod["metadata"]["finalizers"] = {"example.com/hold"};
  Json created = MustCreate(pod);
  WatchReader w(server_->base_url(), absl::StrCat(kPods, "?watch=1&resourceVersion=", Rv(created)));
  HttpResult del = client_->Delete(absl::StrCat(kPods, "/a"));
  ASSERT_EQ(del.status, 200);
  EXPECT_TRUE(del.body["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(del.body["metadata"]["deletionGracePeriodSeconds"], 0);
  HttpResult still = client_->Get(absl::StrCat(kPods, "/a"));
  ASSERT_EQ(still.status, 200);
  // Deleting again changes nothing.
  EXPECT_EQ(Rv(client_->Delete(absl::StrCat(kPods, "/a")).body), Rv(still.body));
  HttpResult r =
      client_->Patch(absl::StrCat(kPods, "/a"), kMerge, {{"metadata", {{"finalizers", nullptr}}}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(client_->Get(absl::StrCat(kPods, "/a")).status, 404);
  ASSERT_TRUE(w.WaitForEvents(2));
  auto ev = w.events();
  EXPECT_EQ(ev[0]["type"], "MODIFIED");
  EXPECT_TRUE(ev[0]["object"]["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(ev[1]["type"], "DELETED");
  EXPECT_EQ(ev[1]["object"]["metadata"]["resourceVersion"], r.body["metadata"]["resourceVersion"]);
}

TEST_F(FakeApiServerTest, DeletePreconditions) {
  Json pod = MustCreate(Pod("a"));
  HttpResult r =
      client_->Delete(absl::StrCat(kPods, "/a"), {{"preconditions", {{"uid", "not-the-uid"}}}});
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(r.body["reason"], "Conflict");
  r = client_->Delete(absl::StrCat(kPods, "/a"), {{"preconditions", {{"resourceVersion", "1"}}}});
  EXPECT_EQ(r.status, 409);
  r = client_->Delete(absl::StrCat(kPods, "/a"),
                      {{"preconditions",
                        {{"uid", pod["metadata"]["uid"]},
                         {"resourceVersion", pod["metadata"]["resourceVersion"]}}}});
  EXPECT_EQ(r.status, 200) << r.raw;
}

TEST_F(FakeApiServerTest, BackgroundPropagationDeletesDependents) {
  Json owner = MustCreate(Pod("owner"));
  Json dep = Pod("dep");
  dep["metadata"]["ownerReferences"] = {{{"apiVersion", "v1"},
                                         {"kind", "Pod"},
                                         {"name", "owner"},
                                         {"uid", owner["metadata"]["uid"]}}};
  MustCreate(dep);
  Json orphan_owner = MustCreate(Pod("owner2"));
  Json dep2 = dep;
  dep2["metadata"]["name"] = "dep2";
  dep2["metadata"]["ownerReferences"][0]["uid"] = orphan_owner["metadata"]["uid"];
  MustCreate(dep2);
  EXPECT_EQ(
      client_->Delete(absl::StrCat(kPods, "/owner"), {{"propagationPolicy", "Background"}}).status,
      200);
  EXPECT_EQ(client_->Get(absl::StrCat(kPods, "/dep")).status, 404);
  EXPECT_EQ(
      client_->Delete(absl::StrCat(kPods, "/owner2"), {{"propagationPolicy", "Orphan"}}).status,
      200);
  EXPECT_EQ(client_->Get(absl::StrCat(kPods, "/dep2")).status, 200);
}

TEST_F(FakeApiServerTest, LabelAndFieldSelectors) {
  for (int i = 0; i < 6; ++i) {
    Json pod =
        Pod(absl::StrCat("p", i), {{"app", i % 2 ? "web" : "db"}, {"idx", std::to_string(i)}});
    pod["spec"]["nodeName"] = i < 3 ? "n1" : "n2";
    pod["status"] = {{"phase", i == 0 ? "Pending" : "Running"}};
    ASSERT_TRUE(server_->Seed("pods", pod).ok());
  }
  auto names = [&](const std::string& query) {
    HttpResult r = client_->Get(absl::StrCat("/api/v1/pods?", query));
    EXPECT_EQ(r.status, 200) << query << " " << r.raw;
    std::vector<std::string> out;
    for (const Json& item : r.body["items"]) out.push_back(item["metadata"]["name"]);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names("labelSelector=app%3Dweb"), V({"p1", "p3", "p5"}));
  EXPECT_EQ(names("labelSelector=app%21%3Dweb"), V({"p0", "p2", "p4"}));
  EXPECT_EQ(names("labelSelector=idx%20in%20(1,2)"), V({"p1", "p2"}));
  EXPECT_EQ(names("labelSelector=idx%20notin%20(1,2),app%3Ddb"), V({"p0", "p4"}));
  EXPECT_EQ(names("labelSelector=%21app"), V({}));
  EXPECT_EQ(names("fieldSelector=spec.nodeName%3Dn2"), V({"p3", "p4", "p5"}));
  EXPECT_EQ(names("fieldSelector=status.phase%21%3DRunning"), V({"p0"}));
  EXPECT_EQ(names("fieldSelector=metadata.name%3D%3Dp4"), V({"p4"}));
  EXPECT_EQ(names("fieldSelector=spec.containers.0.image%3Dbusybox&limit=2").size(), 0u)
      << "array indexes are not dotted paths";
  EXPECT_EQ(names("fieldSelector=metadata.labels.idx%3D5"), V({"p5"}));
  EXPECT_EQ(client_->Get("/api/v1/pods?labelSelector=a%20in%20b").status, 400);
}

TEST_F(FakeApiServerTest, PaginationOverAThousandObjects) {
  for (int i = 0; i < 1000; ++i) {
    Json pod = Pod(absl::StrCat("pod-", i));
    pod["metadata"]["namespace"] = i % 2 ? "ns-a" : "ns-b";
    ASSERT_TRUE(server_->Seed("pods", pod).ok());
  }
  std::vector<std::string> keys;
  std::string cont;
  int pages = 0;
  std::string first_rv;
  do {
    std::string q = "/api/v1/pods?limit=97";
    if (!cont.empty()) q += "&continue=" + cont;
    HttpResult r = client_->Get(q);
    ASSERT_EQ(r.status, 200) << r.raw;
    if (pages == 0) first_rv = r.body["metadata"]["resourceVersion"];
    EXPECT_EQ(r.body["metadata"]["resourceVersion"], first_rv);
    for (const Json& item : r.body["items"]) {
      keys.push_back(absl::StrCat(item["metadata"]["namespace"].get<std::string>(), "/",
                                  item["metadata"]["name"].get<std::string>()));
    }
    cont = r.body["metadata"].value("continue", "");
    if (!cont.empty()) {
      EXPECT_EQ(r.body["metadata"]["remainingItemCount"], 1000 - static_cast<int>(keys.size()));
      EXPECT_EQ(r.body["items"].size(), 97u);
    }
    ++pages;
  } while (!cont.empty() && pages < 100);
  EXPECT_EQ(pages, 11);
  ASSERT_EQ(keys.size(), 1000u);
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()).size(), 1000u);
  // One namespace only, with a selector.
  HttpResult r = client_->Get("/api/v1/namespaces/ns-a/pods?limit=1000");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body["items"].size(), 500u);
  EXPECT_FALSE(r.body["metadata"].contains("continue"));
}

TEST_F(FakeApiServerTest, ContinueAfterCompactionIsExpired) {
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(server_->Seed("pods", Pod(absl::StrCat("p", i))).ok());
  HttpResult r = client_->Get("/api/v1/pods?limit=3");
  ASSERT_EQ(r.status, 200);
  std::string cont = r.body["metadata"]["continue"];
  ASSERT_TRUE(server_->Seed("pods", Pod("later")).ok());
  server_->CompactNow();
  HttpResult gone = client_->Get("/api/v1/pods?limit=3&continue=" + cont);
  EXPECT_EQ(gone.status, 410);
  EXPECT_EQ(gone.body["reason"], "Expired");
  EXPECT_EQ(client_->Get("/api/v1/pods?limit=3&continue=garbage").status, 400);
}

TEST_F(FakeApiServerTest, WatchReplaysFromResourceVersionInOrderThenLive) {
  Json a = MustCreate(Pod("a"));
  const int64_t from = Rv(a);
  MustCreate(Pod("b"));
  ASSERT_EQ(
      client_->Patch(absl::StrCat(kPods, "/a"), kMerge, {{"metadata", {{"labels", {{"x", "1"}}}}}})
          .status,
      200);
  ASSERT_TRUE(
      server_->Seed("configmaps", {{"metadata", {{"name", "cm"}}}}).ok());  // other resource
  ASSERT_EQ(client_->Delete(absl::StrCat(kPods, "/b")).status, 200);
  WatchReader w(server_->base_url(), absl::StrCat(kPods, "?watch=true&resourceVersion=", from));
  ASSERT_TRUE(w.WaitForEvents(3));
  for (int i = 0; i < 20; ++i) MustCreate(Pod(absl::StrCat("live-", i)));
  ASSERT_TRUE(w.WaitForEvents(23));
  auto ev = w.events();
  ASSERT_EQ(ev.size(), 23u);
  EXPECT_EQ(ev[0]["type"], "ADDED");
  EXPECT_EQ(ev[0]["object"]["metadata"]["name"], "b");
  EXPECT_EQ(ev[1]["type"], "MODIFIED");
  EXPECT_EQ(ev[2]["type"], "DELETED");
  int64_t prev = from;
  for (size_t i = 0; i < ev.size(); ++i) {
    int64_t rv = Rv(ev[i]["object"]);
    EXPECT_GT(rv, prev) << i;
    prev = rv;
    if (i >= 3) {
      EXPECT_EQ(ev[i]["object"]["metadata"]["name"], absl::StrCat("live-", i - 3));
    }
  }
  EXPECT_EQ(server_->OpenWatches(), 1);
}

TEST_F(FakeApiServerTest, WatchFromZeroSendsCurrentObjectsFirst) {
  MustCreate(Pod("a", {{"app", "x"}}));
  MustCreate(Pod("b", {{"app", "y"}}));
  WatchReader w(server_->base_url(), absl::StrCat(kPods, "?watch=1&labelSelector=app%3Dx"));
  ASSERT_TRUE(w.WaitForEvents(1));
  MustCreate(Pod("c", {{"app", "y"}}));  // filtered out
  MustCreate(Pod("d", {{"app", "x"}}));
  ASSERT_TRUE(w.WaitForEvents(2));
  auto ev = w.events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0]["type"], "ADDED");
  EXPECT_EQ(ev[0]["object"]["metadata"]["name"], "a");
  EXPECT_EQ(ev[1]["object"]["metadata"]["name"], "d");
}

TEST_F(FakeApiServerTest, WatchFromCompactedResourceVersionGetsExpiredError) {
  Json a = MustCreate(Pod("a"));
  MustCreate(Pod("b"));
  server_->Compact(Rv(a) + 1);
  EXPECT_EQ(server_->CompactedResourceVersion(), Rv(a) + 1);
  WatchReader w(server_->base_url(), absl::StrCat(kPods, "?watch=1&resourceVersion=", Rv(a)));
  ASSERT_TRUE(w.WaitForEnd());
  auto ev = w.events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0]["type"], "ERROR");
  EXPECT_EQ(ev[0]["object"]["code"], 410);
  EXPECT_EQ(ev[0]["object"]["reason"], "Expired");
  EXPECT_EQ(w.http_status(), 200);
  // From the compaction point itself it works.
  WatchReader ok(server_->base_url(), absl::StrCat(kPods, "?watch=1&resourceVersion=", Rv(a) + 1));
  MustCreate(Pod("c"));
  ASSERT_TRUE(ok.WaitForEvents(1));
  EXPECT_EQ(ok.events()[0]["object"]["metadata"]["name"], "c");
}

TEST_F(FakeApiServerTest, EventLogCapacityExpiresLaggingWatchers) {
  FakeApiServerOptions opts;
  opts.max_event_log = 5;
  StartWith(opts);
  Json a = MustCreate(Pod("a"));
  for (int i = 0; i < 10; ++i) MustCreate(Pod(absl::StrCat("p", i)));
  EXPECT_GT(server_->CompactedResourceVersion(), Rv(a));
  WatchReader w(server_->base_url(), absl::StrCat(kPods, "?watch=1&resourceVersion=", Rv(a)));
  ASSERT_TRUE(w.WaitForEnd());
  ASSERT_EQ(w.events().size(), 1u);
  EXPECT_EQ(w.events()[0]["type"], "ERROR");
}

TEST_F(FakeApiServerTest, BookmarksPeriodicAndOnDemand) {
  FakeApiServerOptions opts;
  opts.clock = &clock_;
  opts.bookmark_interval = absl::Seconds(30);
  StartWith(opts);
  WatchReader w(server_->base_url(), absl::StrCat(kPods, "?watch=1&allowWatchBookmarks=true"));
  MustCreate(Pod("a"));
  ASSERT_TRUE(w.WaitForEvents(1));  // the watch loop is running
  server_->EmitBookmarkNow();
  ASSERT_TRUE(w.WaitForEvents(2));
  Json bm = w.events()[1];
  EXPECT_EQ(bm["type"], "BOOKMARK");
  EXPECT_EQ(bm["object"]["kind"], "Pod");
  EXPECT_EQ(bm["object"]["metadata"]["resourceVersion"],
            std::to_string(server_->CurrentResourceVersion()));
  clock_.Advance(absl::Seconds(31));
  ASSERT_TRUE(w.WaitForEvents(3));
  EXPECT_EQ(w.events()[2]["type"], "BOOKMARK");
  // No bookmarks for watches that did not ask.
  WatchReader plain(server_->base_url(), absl::StrCat(kPods, "?watch=1"));
  ASSERT_TRUE(plain.WaitForEvents(1));  // synthetic ADDED for "a"
  server_->EmitBookmarkNow();
  MustCreate(Pod("b"));
  ASSERT_TRUE(plain.WaitForEvents(2));
  EXPECT_EQ(plain.events()[1]["type"], "ADDED");
}

TEST_F(FakeApiServerTest, WatchTimeoutEndsStreamCleanly) {
  FakeApiServerOptions opts;
  opts.clock = &clock_;
  StartWith(opts);
  MustCreate(Pod("a"));
  WatchReader w(server_->base_url(), absl::StrCat(kPods, "?watch=1&timeoutSeconds=30"));
  ASSERT_TRUE(w.WaitForEvents(1));
  MustCreate(Pod("b"));
  ASSERT_TRUE(w.WaitForEvents(2));  // the loop has started its timer
  EXPECT_FALSE(w.ended());
  clock_.Advance(absl::Seconds(31));
  ASSERT_TRUE(w.WaitForEnd());
  EXPECT_TRUE(w.clean_end());
  EXPECT_TRUE(w.bad_lines().empty());
}

TEST_F(FakeApiServerTest, DropWatchesClosesAbruptlyWithTruncatedLine) {
  WatchReader w(server_->base_url(), absl::StrCat(kPods, "?watch=1"));
  MustCreate(Pod("a"));
  ASSERT_TRUE(w.WaitForEvents(1));
  EXPECT_EQ(server_->DropWatches(/*truncate_mid_event=*/true), 1);
  ASSERT_TRUE(w.WaitForEnd());
  EXPECT_FALSE(w.clean_end());
  ASSERT_EQ(w.bad_lines().size(), 1u);
  EXPECT_EQ(w.bad_lines()[0].rfind("{\"type\":\"MODIFIED\"", 0), 0u);
  EXPECT_EQ(server_->OpenWatches(), 0);
}

TEST_F(FakeApiServerTest, StopEndsOpenWatchesPromptly) {
  std::vector<std::unique_ptr<WatchReader>> readers;
  for (int i = 0; i < 5; ++i) {
    readers.push_back(
        std::make_unique<WatchReader>(server_->base_url(), absl::StrCat(kPods, "?watch=1")));
  }
  MustCreate(Pod("a"));
  for (auto& r : readers) ASSERT_TRUE(r->WaitForEvents(1));
  client_.reset();
  absl::Time start = absl::Now();
  server_->Stop();
  absl::Duration took = absl::Now() - start;
  EXPECT_LT(took, absl::Seconds(3)) << took;
  for (auto& r : readers) EXPECT_TRUE(r->WaitForEnd(absl::Seconds(5)));
}

TEST_F(FakeApiServerTest, WatchFanOutToManyWatchers) {
  constexpr int kWatchers = 40;
  constexpr int kEvents = 50;
  std::vector<std::unique_ptr<WatchReader>> readers;
  int64_t from = server_->CurrentResourceVersion();
  for (int i = 0; i < kWatchers; ++i) {
    readers.push_back(std::make_unique<WatchReader>(
        server_->base_url(), absl::StrCat(kPods, "?watch=1&resourceVersion=", from)));
  }
  for (int i = 0; i < kEvents; ++i) {
    ASSERT_TRUE(server_->Seed("pods", Pod(absl::StrCat("p", i))).ok());
  }
  for (auto& r : readers) {
    ASSERT_TRUE(r->WaitForEvents(kEvents, absl::Seconds(30)));
    auto ev = r->events();
    for (int i = 0; i < kEvents; ++i) {
      ASSERT_EQ(ev[i]["object"]["metadata"]["name"], absl::StrCat("p", i));
    }
  }
}

TEST_F(FakeApiServerTest, FailNextInjectsErrorsAndRetryAfter) {
  MustCreate(Pod("a"));
  server_->FailNext({.method = "GET",
                     .path_substring = "/pods/a",
                     .http_code = 429,
                     .count = 2,
                     .retry_after_seconds = 1,
                     .raw_body = std::nullopt});
  HttpResult r = client_->Get(absl::StrCat(kPods, "/a"));
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.body["reason"], "TooManyRequests");
  auto retry_after = r.headers.find("Retry-After");
  ASSERT_NE(retry_after, r.headers.end());
  EXPECT_EQ(retry_after->second, "1");
  EXPECT_EQ(client_->Get(absl::StrCat(kPods, "/a")).status, 429);
  EXPECT_EQ(client_->Get(absl::StrCat(kPods, "/a")).status, 200);
  server_->FailNext({.method = "",
                     .path_substring = "",
                     .http_code = 200,
                     .count = 1,
                     .retry_after_seconds = std::nullopt,
                     .raw_body = "{not json"});
  HttpResult bad = client_->Get(absl::StrCat(kPods, "/a"));
  EXPECT_EQ(bad.status, 200);
  EXPECT_EQ(bad.raw, "{not json");
  EXPECT_EQ(server_->RequestCount("GET", "/pods/a"), 4);
  auto log = server_->Requests();
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log.back().status, 200);
  EXPECT_EQ(log.back().path, absl::StrCat(kPods, "/a"));
}

TEST_F(FakeApiServerTest, RequireTokenAndLatency) {
  server_->RequireToken("s3cret");
  HttpResult r = client_->Get(kPods);
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.body["reason"], "Unauthorized");
  TestClient authed(server_->base_url(), "s3cret");
  EXPECT_EQ(authed.Get(kPods).status, 200);
  server_->SetLatency(absl::Milliseconds(200));
  absl::Time start = absl::Now();
  EXPECT_EQ(authed.Get(kPods).status, 200);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
  auto log = server_->Requests();
  ASSERT_GE(log.size(), 3u);
  EXPECT_EQ(log[0].status, 401);
}

TEST_F(FakeApiServerTest, DirectStoreAccess) {
  auto seeded = server_->Seed("pods", Pod("a"));
  ASSERT_TRUE(seeded.ok());
  Json changed = *seeded;
  changed["metadata"]["labels"]["k"] = "v";
  auto put = server_->Put("pods", changed);
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_GT(Rv(*put), Rv(*seeded));
  EXPECT_EQ(server_->List("pods").size(), 1u);
  EXPECT_EQ(server_->List("pods", "other").size(), 0u);
  EXPECT_TRUE(server_->Remove("pods", "default", "a").ok());
  EXPECT_TRUE(server_->List("pods").empty());
  EXPECT_FALSE(server_->Seed("widgets", Pod("x")).ok());
}

// A large unpaginated list works and returns realistic objects in key order. How fast it is
// belongs to bench/informer (informer_bench seeds 30k pods), not to a timed test.
TEST_F(FakeApiServerTest, LargeUnpaginatedListReturnsEveryPod) {
  constexpr int kPods = 10000;
  for (int i = 0; i < kPods; ++i) {
    ASSERT_TRUE(
        server_
            ->Seed("pods", MakeRealisticPod(absl::StrCat("ns-", i % 10), absl::StrCat("pod-", i),
                                            absl::StrCat("node-", i % 100), i))
            .ok());
  }
  httplib::Client raw(server_->base_url());
  raw.set_read_timeout(600, 0);
  auto r = raw.Get("/api/v1/pods");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_GT(r->body.size() / kPods, 3000u);  // realistic sizes
  Json list = Json::parse(r->body);
  ASSERT_EQ(list["items"].size(), static_cast<size_t>(kPods));
  EXPECT_EQ(list["items"][kPods - 1]["metadata"]["name"], "pod-9999");  // ns-9 sorts last
}

}  // namespace
}  // namespace kruise::testing
