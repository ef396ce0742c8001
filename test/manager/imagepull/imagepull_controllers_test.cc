// NodeImage and ImagePullJob controllers against the in-process fake API server. The test plays
// kruise-daemon: it writes NodeImage tag statuses. Semantic time (Node Ready delay, deadlines,
// TTLs, watchdog) runs on a FakeClock; waits are condition waits with real-time deadlines.

#include <algorithm>
#include <functional>
#include <iostream>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "kube/event_recorder.h"
#include "kube/manager.h"
#include "kube/object.h"
#include "kube/resources.h"
#include "kube/rest_client.h"
#include "manager/imagepull/imagepull_group.h"
#include "manager/imagepull/imagepull_util.h"
#include "test/fakes/apiserver/fake_apiserver.h"
#include "test/fakes/apiserver/rest_client_for.h"
#include "test/fakes/fake_clock.h"
#include "test/kube/informer_test_util.h"

namespace kruise::manager {
namespace {

using kube::Json;

constexpr char kNodeImages[] = "nodeimages.apps.kruise.io";
constexpr char kJobs[] = "imagepulljobs.apps.kruise.io";
constexpr char kDaemonNs[] = "kruise-daemon-config";

kube::Resource JobsV1beta1() {
  kube::Resource r = kube::resources::ImagePullJobs();
  r.version = "v1beta1";
  return r;
}

class ImagePullControllersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api_.Start().ok());
    auto client = testing::UnthrottledClientFor(api_);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  void TearDown() override {
    stop_.request_stop();
    if (runner_.joinable()) runner_.join();
  }

  void Start(ImagePullGroupOptions opts = {}) {
    kube::ManagerOptions mo;
    mo.clock = &clock_;
    manager_ = std::make_unique<kube::Manager>(client_.get(), mo);
    ControllerContext ctx;
    ctx.client = client_.get();
    ctx.manager = manager_.get();
    ctx.clock = &clock_;
    kube::EventRecorderOptions eo;
    eo.clock = &clock_;
    recorder_ = std::make_unique<kube::EventRecorder>(client_.get(), eo);
    ctx.recorder = recorder_.get();
    group_ = NewImagePullControllerGroup(opts);
    ASSERT_TRUE(group_->Register(ctx).ok());
    runner_ = std::thread([this] { manager_->Run(stop_.get_token()); });
    ASSERT_TRUE(Eventually([this] { return manager_->Elected(); }));
  }

  // Waits (real time, bounded) until `pred` holds (the fake API server has no push channel for
  // tests).
  static bool Eventually(const std::function<bool()>& pred,
                         absl::Duration timeout = absl::Seconds(20)) {
    return kube::testing_util::Eventually(pred, timeout);
  }

  Json Node(const std::string& name, Json labels, absl::Time ready_since) {
    return {{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata", {{"name", name}, {"labels", labels}}},
            {"status",
             {{"conditions",
               {{{"type", "Ready"},
                 {"status", "True"},
                 {"lastTransitionTime", kube::FormatRfc3339(ready_since)}}}}}}};
  }

  void SeedReadyNodes(int n) {
    for (int i = 0; i < n; ++i) {
      const std::string name = "node-" + std::to_string(i);
      ASSERT_TRUE(
          api_.Seed("nodes", Node(name, {{"pool", "a"}}, clock_.Now() - absl::Hours(1))).ok());
    }
    ASSERT_TRUE(Eventually([&] { return static_cast<int>(api_.List(kNodeImages).size()) == n; }));
  }

  std::optional<Json> Get(const std::string& resource, const std::string& ns,
                          const std::string& name) {
    auto r = api_.Get(resource, ns, name);
    if (!r.ok()) return std::nullopt;
    return *r;
  }

  absl::StatusOr<Json> CreateJob(const std::string& name, Json spec) {
    Json job = {{"apiVersion", "apps.kruise.io/v1beta1"},
                {"kind", "ImagePullJob"},
                {"metadata", {{"name", name}, {"namespace", "default"}}},
                {"spec", spec}};
    return client_->Create(JobsV1beta1(), "default", job);
  }

  Json JobStatus(const std::string& name) {
    auto job = Get(kJobs, "default", name);
    return job ? job->value("status", Json::object()) : Json::object();
  }

  // The spec tag of `image`:`tag` on a NodeImage, or null.
  static Json Tag(const Json& ni, const std::string& image, const std::string& tag) {
    const Json* tags = kube::FindPath(ni, {"spec", "images", image, "tags"});
    if (tags == nullptr || !tags->is_array()) return nullptr;
    for (const Json& t : *tags) {
      if (t.value("tag", "") == tag) return t;
    }
    return nullptr;
  }
  static Json TagStatus(const Json& ni, const std::string& image, const std::string& tag) {
    const Json* tags = kube::FindPath(ni, {"status", "imageStatuses", image, "tags"});
    if (tags == nullptr || !tags->is_array()) return nullptr;
    for (const Json& t : *tags) {
      if (t.value("tag", "") == tag) return t;
    }
    return nullptr;
  }

  // Plays the daemon: reports `phase` for the current version of the tag.
  void Report(const std::string& node, const std::string& image, const std::string& tag,
              const std::string& phase) {
    auto ni = Get(kNodeImages, "", node);
    ASSERT_TRUE(ni.has_value());
    Json t = Tag(*ni, image, tag);
    ASSERT_FALSE(t.is_null());
    Json st = {{"tag", tag}, {"phase", phase}, {"version", t["version"]}};
    if (phase == "Succeeded" || phase == "Failed") {
      st["completionTime"] = kube::FormatRfc3339(clock_.Now());
      st["progress"] = 100;
    }
    auto r =
        client_->Patch(kube::resources::NodeImages(), "", node, kube::PatchType::kMerge,
                       {{"status", {{"imageStatuses", {{image, {{"tags", {st}}}}}}}}}, "status");
    ASSERT_TRUE(r.ok()) << r.status();
  }

  static testing::FakeApiServerOptions OnClock(Clock* clock) {
    testing::FakeApiServerOptions o;
    o.clock = clock;
    return o;
  }

  // Seeds a Secret in `default`; returns its uid.
  std::string SeedSecret(const std::string& name, const std::string& type) {
    Json secret = {{"apiVersion", "v1"},
                   {"kind", "Secret"},
                   {"metadata", {{"name", name}, {"namespace", "default"}}},
                   {"type", type},
                   {"data", {{".dockerconfigjson", "e30="}}}};
    auto r = api_.Seed("secrets", secret);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? kube::Uid(*r) : "";
  }

  std::vector<Json> Copies() { return api_.List("secrets", kDaemonNs); }

  // Requests whose method is `method` and whose path contains `path`, as indexes into Requests().
  std::vector<size_t> RequestIndexes(const std::string& method, const std::string& path) {
    std::vector<size_t> out;
    auto all = api_.Requests();
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i].method == method && all[i].path.find(path) != std::string::npos) out.push_back(i);
    }
    return out;
  }

  // Advances the clock by `step` until `pred` holds (a requeue computed just before an Advance is
  // registered just after it, so one Advance is not always enough).
  bool AdvanceUntil(const std::function<bool()>& pred, absl::Duration step) {
    return Eventually([&] {
      if (pred()) return true;
      clock_.Advance(step);
      return false;
    });
  }

  testing::FakeClock clock_;
  // The API server's clock is the test's: copies' creationTimestamps age with Advance().
  testing::FakeApiServer api_{OnClock(&clock_)};
  std::unique_ptr<kube::RestKubeClient> client_;
  std::unique_ptr<kube::EventRecorder> recorder_;
  std::unique_ptr<kube::Manager> manager_;
  std::unique_ptr<ControllerGroup> group_;
  std::stop_source stop_;
  std::thread runner_;
};

TEST_F(ImagePullControllersTest, NodeImageFollowsNodeLifecycleAndLabels) {
  Start();
  ASSERT_TRUE(api_.Seed("nodes", Node("node-a", {{"zone", "z1"}, {"pool", "a"}},
                                      clock_.Now() - absl::Hours(1)))
                  .ok());
  // Ready just now: created only after the 30 s creation delay.
  ASSERT_TRUE(api_.Seed("nodes", Node("node-b", {{"zone", "z2"}}, clock_.Now())).ok());
  // A virtual-kubelet node never gets one.
  ASSERT_TRUE(api_.Seed("nodes", Node("virtual", {{"type", "virtual-kubelet"}},
                                      clock_.Now() - absl::Hours(1)))
                  .ok());
  ASSERT_TRUE(Eventually([&] { return Get(kNodeImages, "", "node-a").has_value(); }));
  auto ni = Get(kNodeImages, "", "node-a");
  EXPECT_EQ(kube::Labels(*ni), (std::map<std::string, std::string>{{"zone", "z1"}, {"pool", "a"}}));
  EXPECT_FALSE(Get(kNodeImages, "", "node-b").has_value());
  clock_.Advance(absl::Seconds(31));
  ASSERT_TRUE(Eventually([&] { return Get(kNodeImages, "", "node-b").has_value(); }));
  EXPECT_FALSE(Get(kNodeImages, "", "virtual").has_value());

  // Labels follow the Node (changed, added and removed keys).
  auto node = Get("nodes", "", "node-a");
  (*node)["metadata"]["labels"] = {{"zone", "z9"}, {"disk", "ssd"}};
  ASSERT_TRUE(api_.Put("nodes", *node).ok());
  ASSERT_TRUE(Eventually([&] {
    auto n = Get(kNodeImages, "", "node-a");
    return n &&
           kube::Labels(*n) == std::map<std::string, std::string>{{"zone", "z9"}, {"disk", "ssd"}};
  }));

  // Deleted with its Node.
  ASSERT_TRUE(api_.Remove("nodes", "", "node-a").ok());
  ASSERT_TRUE(Eventually([&] { return !Get(kNodeImages, "", "node-a").has_value(); }));
  EXPECT_TRUE(Get(kNodeImages, "", "node-b").has_value());
}

TEST_F(ImagePullControllersTest, ParallelismOneTagsOneNodeAtATime) {
  Start();
  SeedReadyNodes(3);
  auto job = CreateJob("warm", {{"image", "busybox:1.36"}, {"parallelism", 1}});
  ASSERT_TRUE(job.ok()) << job.status();

  auto tagged = [&] {
    std::vector<std::string> out;
    for (const Json& ni : api_.List(kNodeImages)) {
      if (!Tag(ni, "busybox", "1.36").is_null()) out.push_back(kube::Name(ni));
    }
    return out;
  };
  std::set<std::string> done;
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(Eventually([&] { return static_cast<int>(tagged().size()) == round + 1; }))
        << "round " << round << ": " << tagged().size() << " tagged";
    std::string current;
    for (const std::string& n : tagged()) {
      if (!done.count(n)) current = n;
    }
    ASSERT_FALSE(current.empty());
    auto ni = Get(kNodeImages, "", current);
    Json tag = Tag(*ni, "busybox", "1.36");
    EXPECT_EQ(tag["version"], 0);
    EXPECT_EQ(tag["imagePullPolicy"], "IfNotPresent");
    EXPECT_EQ(tag["pullPolicy"]["timeoutSeconds"], 600);
    EXPECT_EQ(tag["pullPolicy"]["backoffLimit"], 3);
    // Always without ttl/deadline: timeout x backoff + 300 + [0, 300).
    const int64_t ttl = tag["pullPolicy"]["ttlSecondsAfterFinished"].get<int64_t>();
    EXPECT_GE(ttl, 600 * 3 + 300);
    EXPECT_LT(ttl, 600 * 3 + 600);
    EXPECT_TRUE(tag.contains("createdAt"));
    ASSERT_EQ(tag["ownerReferences"].size(), 1u);
    EXPECT_EQ(tag["ownerReferences"][0]["kind"], "ImagePullJob");
    EXPECT_EQ(tag["ownerReferences"][0]["uid"], kube::Uid(*job));
    // While this node pulls, no other node is tagged and the status says so.
    ASSERT_TRUE(Eventually([&] {
      Json s = JobStatus("warm");
      return s.value("active", -1) == 1 && s.value("succeeded", -1) == round;
    })) << JobStatus("warm").dump();
    Json s = JobStatus("warm");
    EXPECT_EQ(s["desired"], 3);
    EXPECT_TRUE(s.contains("startTime"));
    EXPECT_EQ(s["message"], round == 0 ? "job is running, progress 0.0%"
                                       : (round == 1 ? "job is running, progress 33.3%"
                                                     : "job is running, progress 66.7%"));
    EXPECT_EQ(static_cast<int>(tagged().size()), round + 1);
    Report(current, "busybox", "1.36", "Succeeded");
    done.insert(current);
  }
  ASSERT_TRUE(Eventually([&] { return JobStatus("warm").contains("completionTime"); }));
  Json s = JobStatus("warm");
  EXPECT_EQ(s["desired"], 3);
  EXPECT_EQ(s["succeeded"], 3);
  EXPECT_EQ(s["failed"], 0);
  EXPECT_EQ(s["active"], 0);
  EXPECT_EQ(s["message"], "job has completed");
  // Finished: the protection finalizer stays until the job is deleted (its pull-secret copies
  // are kept as long, issue 40).
  auto j = Get(kJobs, "default", "warm");
  ASSERT_TRUE(j.has_value());
  EXPECT_TRUE(kube::HasFinalizer(*j, kProtectionFinalizer));
}

TEST_F(ImagePullControllersTest, FailedNodesAndSelectors) {
  Start();
  SeedReadyNodes(3);
  // Only node-1 (by name) with parallelism 2; node-0 and node-2 by label later.
  auto job = CreateJob(
      "named",
      {{"image", "nginx:1"}, {"parallelism", 2}, {"selector", {{"names", {"node-1", "missing"}}}}});
  ASSERT_TRUE(job.ok());
  ASSERT_TRUE(Eventually([&] {
    auto ni = Get(kNodeImages, "", "node-1");
    return ni && !Tag(*ni, "nginx", "1").is_null();
  }));
  Report("node-1", "nginx", "1", "Failed");
  ASSERT_TRUE(Eventually([&] { return JobStatus("named").contains("completionTime"); }));
  Json s = JobStatus("named");
  EXPECT_EQ(s["desired"], 1);
  EXPECT_EQ(s["failed"], 1);
  EXPECT_EQ(s["failedNodes"], Json::array({"node-1"}));
  for (const char* other : {"node-0", "node-2"}) {
    EXPECT_TRUE(Tag(*Get(kNodeImages, "", other), "nginx", "1").is_null()) << other;
  }

  // Label selector against NodeImage labels (= Node labels).
  auto node = Get("nodes", "", "node-2");
  (*node)["metadata"]["labels"]["gpu"] = "yes";
  ASSERT_TRUE(api_.Put("nodes", *node).ok());
  ASSERT_TRUE(Eventually([&] {
    auto ni = Get(kNodeImages, "", "node-2");
    return ni && kube::Label(*ni, "gpu") == "yes";
  }));
  ASSERT_TRUE(CreateJob("labelled",
                        {{"image", "redis:7"}, {"selector", {{"matchLabels", {{"gpu", "yes"}}}}}})
                  .ok());
  ASSERT_TRUE(
      Eventually([&] { return !Tag(*Get(kNodeImages, "", "node-2"), "redis", "7").is_null(); }));
  ASSERT_TRUE(Eventually([&] { return JobStatus("labelled").value("desired", -1) == 1; }));

  // podSelector: the nodes of active pods.
  ASSERT_TRUE(
      api_.Seed("pods", {{"apiVersion", "v1"},
                         {"kind", "Pod"},
                         {"metadata",
                          {{"name", "p0"}, {"namespace", "default"}, {"labels", {{"app", "web"}}}}},
                         {"spec", {{"nodeName", "node-0"}, {"containers", Json::array()}}},
                         {"status", {{"phase", "Running"}}}})
          .ok());
  ASSERT_TRUE(CreateJob("bypod", {{"image", "alpine:3"},
                                  {"podSelector", {{"matchLabels", {{"app", "web"}}}}},
                                  {"completionPolicy", {{"type", "Never"}}}})
                  .ok());
  ASSERT_TRUE(
      Eventually([&] { return !Tag(*Get(kNodeImages, "", "node-0"), "alpine", "3").is_null(); }));
  Json never_tag = Tag(*Get(kNodeImages, "", "node-0"), "alpine", "3");
  EXPECT_EQ(never_tag["pullPolicy"]["activeDeadlineSeconds"], 1800);
  const int64_t never_ttl = never_tag["pullPolicy"]["ttlSecondsAfterFinished"].get<int64_t>();
  EXPECT_GE(never_ttl, 24 * 3600 - 600);
  EXPECT_LT(never_ttl, 24 * 3600 + 600);
  // Never keeps new targets warm: a second pod on node-1 adds node-1.
  ASSERT_TRUE(
      api_.Seed("pods", {{"apiVersion", "v1"},
                         {"kind", "Pod"},
                         {"metadata",
                          {{"name", "p1"}, {"namespace", "default"}, {"labels", {{"app", "web"}}}}},
                         {"spec", {{"nodeName", "node-1"}, {"containers", Json::array()}}},
                         {"status", {{"phase", "Running"}}}})
          .ok());
  Report("node-0", "alpine", "3", "Succeeded");
  ASSERT_TRUE(
      Eventually([&] { return !Tag(*Get(kNodeImages, "", "node-1"), "alpine", "3").is_null(); }));
  Report("node-1", "alpine", "3", "Succeeded");
  ASSERT_TRUE(Eventually([&] {
    Json st = JobStatus("bypod");
    return st.value("succeeded", -1) == 2 && st.value("desired", -1) == 2;
  }));
  EXPECT_FALSE(JobStatus("bypod").contains("completionTime"));
  EXPECT_TRUE(Tag(*Get(kNodeImages, "", "node-2"), "alpine", "3").is_null());
}

TEST_F(ImagePullControllersTest, PullSecretCopySharedAndReleased) {
  Start();
  SeedReadyNodes(1);
  ASSERT_TRUE(api_.Seed("secrets", {{"apiVersion", "v1"},
                                    {"kind", "Secret"},
                                    {"metadata", {{"name", "regcred"}, {"namespace", "default"}}},
                                    {"type", "kubernetes.io/dockerconfigjson"},
                                    {"data", {{".dockerconfigjson", "e30="}}}})
                  .ok());
  Json never = {{"type", "Never"}};
  ASSERT_TRUE(
      CreateJob("a",
                {{"image", "busybox:1"}, {"pullSecrets", {"regcred"}}, {"completionPolicy", never}})
          .ok());
  ASSERT_TRUE(
      CreateJob("b",
                {{"image", "nginx:1"}, {"pullSecrets", {"regcred"}}, {"completionPolicy", never}})
          .ok());
  auto copies = [&] { return api_.List("secrets", kDaemonNs); };
  ASSERT_TRUE(Eventually([&] {
    auto c = copies();
    return c.size() == 1 && kube::Annotation(c[0], kReferencesAnnotation) == "default/a,default/b";
  })) << (copies().empty() ? "no copy" : copies()[0].dump());
  Json copy = copies()[0];
  EXPECT_EQ(copy["type"], "kubernetes.io/dockerconfigjson");
  EXPECT_EQ(copy["data"][".dockerconfigjson"], "e30=");
  EXPECT_EQ(kube::Annotation(copy, kSourceSecretKeyAnnotation), "default/regcred");
  // Both images on the NodeImage reference the one copy.
  ASSERT_TRUE(Eventually([&] {
    auto ni = Get(kNodeImages, "", "node-0");
    Json want = {{"namespace", kDaemonNs}, {"name", kube::Name(copy)}};
    const Json* a = kube::FindPath(*ni, {"spec", "images", "busybox", "pullSecrets"});
    const Json* b = kube::FindPath(*ni, {"spec", "images", "nginx", "pullSecrets"});
    return a && b && *a == Json::array({want}) && *b == Json::array({want});
  }));
  for (const char* j : {"a", "b"}) {
    ASSERT_TRUE(Eventually([&] {
      auto job = Get(kJobs, "default", j);
      return job && kube::HasFinalizer(*job, kProtectionFinalizer);
    }));
  }

  ASSERT_TRUE(client_->Delete(JobsV1beta1(), "default", "a").ok());
  ASSERT_TRUE(Eventually([&] {
    auto c = copies();
    return c.size() == 1 && kube::Annotation(c[0], kReferencesAnnotation) == "default/b" &&
           !Get(kJobs, "default", "a").has_value();
  }));
  ASSERT_TRUE(client_->Delete(JobsV1beta1(), "default", "b").ok());
  // Released, and kept for the rest of its grace period (30 s after its creation).
  ASSERT_TRUE(Eventually([&] {
    auto c = copies();
    return c.size() == 1 && kube::Annotation(c[0], kReferencesAnnotation) == "" &&
           !Get(kJobs, "default", "b").has_value();
  }));
  EXPECT_EQ(RequestIndexes("DELETE", "/secrets/"), std::vector<size_t>{});
  ASSERT_TRUE(AdvanceUntil([&] { return copies().empty(); }, absl::Seconds(31)));
  // The deleted jobs' tags are garbage-collected from the NodeImage.
  ASSERT_TRUE(Eventually([&] {
    auto ni = Get(kNodeImages, "", "node-0");
    return ni && kube::FindPath(*ni, {"spec", "images", "busybox"}) == nullptr &&
           kube::FindPath(*ni, {"spec", "images", "nginx"}) == nullptr;
  }));
}

// Issue 40: a completed job keeps its copy (and its reference) until the job is deleted; only
// then, and only after the copy's grace period, is the copy deleted.
TEST_F(ImagePullControllersTest, PullSecretCopyLivesAsLongAsItsCompletedJob) {
  Start();
  SeedReadyNodes(1);
  SeedSecret("regcred", "kubernetes.io/dockerconfigjson");
  ASSERT_TRUE(CreateJob("once", {{"image", "busybox:1"},
                                 {"pullSecrets", {"regcred"}},
                                 {"completionPolicy", {{"ttlSecondsAfterFinished", 60}}}})
                  .ok());
  ASSERT_TRUE(Eventually([&] {
    auto c = Copies();
    return c.size() == 1 && kube::Annotation(c[0], kReferencesAnnotation) == "default/once";
  }));
  const std::string copy = kube::Name(Copies()[0]);
  ASSERT_TRUE(Eventually([&] {
    auto ni = Get(kNodeImages, "", "node-0");
    const Json* refs = kube::FindPath(*ni, {"spec", "images", "busybox", "pullSecrets"});
    return refs && *refs == Json::array({{{"namespace", kDaemonNs}, {"name", copy}}});
  }));
  Report("node-0", "busybox", "1", "Succeeded");
  ASSERT_TRUE(Eventually([&] { return JobStatus("once").contains("completionTime"); }));
  // Completed, past the grace period, TTL not yet: the copy and its reference stay.
  clock_.Advance(absl::Seconds(40));
  ASSERT_TRUE(Eventually([&] {
    auto job = Get(kJobs, "default", "once");
    return job && kube::HasFinalizer(*job, kProtectionFinalizer);
  }));
  auto c = Copies();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(kube::Name(c[0]), copy);
  EXPECT_EQ(kube::Annotation(c[0], kReferencesAnnotation), "default/once");
  // The TTL deletes the job; the copy goes after it.
  clock_.Advance(absl::Seconds(21));
  ASSERT_TRUE(Eventually([&] { return !Get(kJobs, "default", "once").has_value(); }));
  ASSERT_TRUE(AdvanceUntil([&] { return Copies().empty(); }, absl::Seconds(1)));
  // In the request log: the copy was written (its reference released) and deleted only after the
  // job's deletion.
  auto job_deletes = RequestIndexes("DELETE", "/imagepulljobs/once");
  ASSERT_EQ(job_deletes.size(), 1u);
  for (const char* method : {"PUT", "DELETE"}) {
    for (size_t i : RequestIndexes(method, std::string("/secrets/") + copy)) {
      EXPECT_GT(i, job_deletes[0]) << method << " of the copy before the job's deletion";
    }
  }
  EXPECT_EQ(RequestIndexes("DELETE", std::string("/secrets/") + copy).size(), 1u);
}

// A copy is never deleted within its grace period, even when its only job is deleted at once;
// a job that names the Secret meanwhile takes it over.
TEST_F(ImagePullControllersTest, PullSecretCopyGracePeriodAndTakeOver) {
  Start();
  SeedReadyNodes(1);
  SeedSecret("regcred", "kubernetes.io/dockercfg");
  Json never = {{"type", "Never"}};
  ASSERT_TRUE(CreateJob("first", {{"image", "busybox:1"},
                                  {"pullSecrets", {"regcred"}},
                                  {"completionPolicy", never}})
                  .ok());
  ASSERT_TRUE(Eventually([&] {
    auto c = Copies();
    auto job = Get(kJobs, "default", "first");
    return c.size() == 1 && kube::Annotation(c[0], kReferencesAnnotation) == "default/first" &&
           job && kube::HasFinalizer(*job, kProtectionFinalizer);
  }));
  const std::string copy = kube::Name(Copies()[0]);
  EXPECT_EQ(Copies()[0]["type"], "kubernetes.io/dockercfg");
  ASSERT_TRUE(client_->Delete(JobsV1beta1(), "default", "first").ok());
  ASSERT_TRUE(Eventually([&] {
    auto c = Copies();
    return !Get(kJobs, "default", "first").has_value() && c.size() == 1 &&
           kube::Annotation(c[0], kReferencesAnnotation) == "";
  }));
  clock_.Advance(absl::Seconds(20));  // still within the 30 s
  ASSERT_TRUE(CreateJob("second", {{"image", "nginx:1"},
                                   {"pullSecrets", {"regcred"}},
                                   {"completionPolicy", never}})
                  .ok());
  ASSERT_TRUE(Eventually([&] {
    auto c = Copies();
    return c.size() == 1 && kube::Annotation(c[0], kReferencesAnnotation) == "default/second";
  }));
  EXPECT_EQ(kube::Name(Copies()[0]), copy);  // the same copy, taken over
  clock_.Advance(absl::Seconds(20));          // past the grace period: kept, it has a job
  ASSERT_TRUE(Eventually([&] {
    auto ni = Get(kNodeImages, "", "node-0");
    return kube::FindPath(*ni, {"spec", "images", "nginx", "pullSecrets"}) != nullptr;
  }));
  EXPECT_EQ(Copies().size(), 1u);
  EXPECT_EQ(RequestIndexes("DELETE", "/secrets/"), std::vector<size_t>{});
  ASSERT_TRUE(client_->Delete(JobsV1beta1(), "default", "second").ok());
  ASSERT_TRUE(Eventually([&] { return Copies().empty(); }));
}

// Copies left by jobs that vanished without releasing them (deleted while no manager ran) are
// collected at start; a copy still named by a job is kept and gets the job's reference back.
TEST_F(ImagePullControllersTest, PullSecretCopyOrphansCollectedAtStart) {
  const std::string old_uid = SeedSecret("oldcred", "kubernetes.io/dockerconfigjson");
  const std::string reg_uid = SeedSecret("regcred", "kubernetes.io/dockerconfigjson");
  auto seed_copy = [&](const std::string& name, const std::string& uid, const std::string& source,
                       const std::string& refs) {
    Json c = {{"apiVersion", "v1"},
              {"kind", "Secret"},
              {"metadata",
               {{"name", name},
                {"namespace", kDaemonNs},
                {"labels", {{kSourceSecretUidLabel, uid}}},
                {"annotations",
                 {{kSourceSecretKeyAnnotation, "default/" + source},
                  {kReferencesAnnotation, refs}}}}},
              {"type", "kubernetes.io/dockerconfigjson"},
              {"data", {{".dockerconfigjson", "e30="}}}};
    ASSERT_TRUE(api_.Seed("secrets", c).ok());
  };
  seed_copy("oldcred-orphan", old_uid, "oldcred", "default/gone");
  seed_copy("regcred-kept", reg_uid, "regcred", "");
  // Another Secret in the daemon namespace (not a copy) is never touched.
  ASSERT_TRUE(api_.Seed("secrets", {{"apiVersion", "v1"},
                                    {"kind", "Secret"},
                                    {"metadata", {{"name", "mine"}, {"namespace", kDaemonNs}}},
                                    {"type", "Opaque"}})
                  .ok());
  // A completed job that names regcred (its reference was released by an older manager).
  Json done = {{"apiVersion", "apps.kruise.io/v1beta1"},
               {"kind", "ImagePullJob"},
               {"metadata", {{"name", "done"}, {"namespace", "default"}}},
               {"spec", {{"image", "busybox:1"}, {"pullSecrets", {"regcred"}}}},
               {"status",
                {{"desired", 0}, {"completionTime", kube::FormatRfc3339(clock_.Now())}}}};
  ASSERT_TRUE(api_.Seed(kJobs, done).ok());
  clock_.Advance(absl::Seconds(31));
  Start();
  ASSERT_TRUE(Eventually([&] { return !Get("secrets", kDaemonNs, "oldcred-orphan").has_value(); }));
  ASSERT_TRUE(Eventually([&] {
    auto kept = Get("secrets", kDaemonNs, "regcred-kept");
    return kept && kube::Annotation(*kept, kReferencesAnnotation) == "default/done";
  }));
  EXPECT_TRUE(Get("secrets", kDaemonNs, "mine").has_value());
  ASSERT_TRUE(client_->Delete(JobsV1beta1(), "default", "done").ok());
  ASSERT_TRUE(Eventually([&] { return !Get("secrets", kDaemonNs, "regcred-kept").has_value(); }));
  EXPECT_TRUE(Get("secrets", kDaemonNs, "mine").has_value());
}

// Issue 34: only docker config Secrets are copied; another type is skipped with a Warning event
// on the job that names the Secret and its type.
TEST_F(ImagePullControllersTest, PullSecretOfOtherTypeSkippedWithEvent) {
  Start();
  SeedReadyNodes(1);
  SeedSecret("regcred", "kubernetes.io/dockerconfigjson");
  SeedSecret("tlscert", "kubernetes.io/tls");
  ASSERT_TRUE(CreateJob("mixed", {{"image", "busybox:1"},
                                  {"pullSecrets", {"tlscert", "regcred"}},
                                  {"completionPolicy", {{"type", "Never"}}}})
                  .ok());
  ASSERT_TRUE(Eventually([&] {
    auto ni = Get(kNodeImages, "", "node-0");
    return kube::FindPath(*ni, {"spec", "images", "busybox", "pullSecrets"}) != nullptr;
  }));
  auto c = Copies();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(kube::Annotation(c[0], kSourceSecretKeyAnnotation), "default/regcred");
  EXPECT_EQ(*kube::FindPath(*Get(kNodeImages, "", "node-0"),
                            {"spec", "images", "busybox", "pullSecrets"}),
            Json::array({{{"namespace", kDaemonNs}, {"name", kube::Name(c[0])}}}));
  Json event;
  ASSERT_TRUE(Eventually([&] {
    for (const Json& e : api_.List("events", "default")) {
      if (e.value("reason", "") == "PullSecretSkipped") event = e;
    }
    return !event.is_null();
  }));
  EXPECT_EQ(event["type"], "Warning");
  EXPECT_EQ(event["involvedObject"]["name"], "mixed");
  const std::string msg = event.value("message", "");
  EXPECT_NE(msg.find("tlscert"), std::string::npos) << msg;
  EXPECT_NE(msg.find("kubernetes.io/tls"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("e30="), std::string::npos) << msg;
}

TEST_F(ImagePullControllersTest, AlwaysDeadlineCompletesAsFailed) {
  Start();
  SeedReadyNodes(2);
  ASSERT_TRUE(CreateJob("slow", {{"image", "busybox:1"},
                                 {"parallelism", 1},
                                 {"completionPolicy", {{"activeDeadlineSeconds", 900}}}})
                  .ok());
  ASSERT_TRUE(Eventually([&] { return JobStatus("slow").value("active", -1) == 1; }));
  Json tag = Tag(*Get(kNodeImages, "", "node-0"), "busybox", "1");
  EXPECT_EQ(tag["pullPolicy"]["activeDeadlineSeconds"], 900);
  clock_.Advance(absl::Seconds(901));
  ASSERT_TRUE(Eventually([&] { return JobStatus("slow").contains("completionTime"); }));
  Json s = JobStatus("slow");
  EXPECT_EQ(s["message"], "job exceeds activeDeadlineSeconds");
  EXPECT_EQ(s["failed"], 2);
  EXPECT_EQ(s["failedNodes"], Json::array({"node-0", "node-1"}));
  EXPECT_EQ(s["succeeded"], 0);
}

TEST_F(ImagePullControllersTest, TtlDeletesFinishedJob) {
  Start();
  SeedReadyNodes(1);
  ASSERT_TRUE(CreateJob("short", {{"image", "busybox:1"},
                                  {"completionPolicy", {{"ttlSecondsAfterFinished", 60}}}})
                  .ok());
  ASSERT_TRUE(
      Eventually([&] { return !Tag(*Get(kNodeImages, "", "node-0"), "busybox", "1").is_null(); }));
  Json tag = Tag(*Get(kNodeImages, "", "node-0"), "busybox", "1");
  const int64_t ttl = tag["pullPolicy"]["ttlSecondsAfterFinished"].get<int64_t>();
  EXPECT_GE(ttl, 60 + 300);
  EXPECT_LT(ttl, 60 + 600);
  Report("node-0", "busybox", "1", "Succeeded");
  ASSERT_TRUE(Eventually([&] { return JobStatus("short").contains("completionTime"); }));
  EXPECT_TRUE(Get(kJobs, "default", "short").has_value());
  clock_.Advance(absl::Seconds(61));
  ASSERT_TRUE(Eventually([&] { return !Get(kJobs, "default", "short").has_value(); }));
  // The node tag outlives the job only until GC notices the owner is gone.
  ASSERT_TRUE(Eventually([&] {
    return kube::FindPath(*Get(kNodeImages, "", "node-0"), {"spec", "images", "busybox"}) ==
           nullptr;
  }));
}

TEST_F(ImagePullControllersTest, TagGarbageCollection) {
  Start();
  // A live job whose tags must stay (it targets no node, so it completes at once).
  auto live = CreateJob("live", {{"image", "x:1"}, {"selector", {{"names", {"none"}}}}});
  ASSERT_TRUE(live.ok());
  const std::string now = kube::FormatRfc3339(clock_.Now());
  const std::string long_ago = kube::FormatRfc3339(clock_.Now() - absl::Seconds(61));
  Json live_ref = {{"apiVersion", "apps.kruise.io/v1beta1"},
                   {"kind", "ImagePullJob"},
                   {"namespace", "default"},
                   {"name", "live"},
                   {"uid", kube::Uid(*live)}};
  Json dead_ref = {{"apiVersion", "apps.kruise.io/v1alpha1"},
                   {"kind", "ImagePullJob"},
                   {"namespace", "default"},
                   {"name", "gone"},
                   {"uid", "uid-gone"}};
  Json stale_uid_ref = live_ref;
  stale_uid_ref["uid"] = "uid-of-an-older-live";
  Json other_ref = {{"apiVersion", "apps/v1"},
                    {"kind", "Deployment"},
                    {"namespace", "default"},
                    {"name", "web"},
                    {"uid", "u-web"}};
  Json ni = {
      {"apiVersion", "apps.kruise.io/v1beta1"},
      {"kind", "NodeImage"},
      {"metadata", {{"name", "fake-node"}, {"labels", {{kFakeNodeImageLabel, "true"}}}}},
      {"spec",
       {{"images",
         {{"nocreated", {{"tags", {{{"tag", "1"}, {"version", 0}}}}}},
          {"deadowner",
           {{"tags",
             {{{"tag", "1"}, {"createdAt", now}, {"ownerReferences", {dead_ref}}},
              {{"tag", "2"}, {"createdAt", now}, {"ownerReferences", {stale_uid_ref}}}}}}},
          {"mixed",
           {{"sandboxConfig", {{"labels", {{"k", "v"}}}}},
            {"tags",
             {{{"tag", "1"}, {"createdAt", now}, {"ownerReferences", {live_ref, dead_ref}}},
              {{"tag", "2"}, {"createdAt", now}, {"ownerReferences", {other_ref}}}}}}},
          {"expired",
           {{"tags",
             {{{"tag", "old"},
               {"version", 2},
               {"createdAt", long_ago},
               {"pullPolicy", {{"ttlSecondsAfterFinished", 60}}}},
              {{"tag", "fresh"},
               {"version", 1},
               {"createdAt", now},
               {"pullPolicy", {{"ttlSecondsAfterFinished", 60}}}}}}}}}}}},
      {"status",
       {{"imageStatuses",
         {{"expired",
           {{"tags",
             {{{"tag", "old"},
               {"version", 2},
               {"phase", "Succeeded"},
               {"completionTime", long_ago}},
              {{"tag", "fresh"},
               {"version", 1},
               {"phase", "Succeeded"},
               {"completionTime", now}}}}}},
          {"mixed",
           {{"tags",
             {{{"tag", "1"}, {"version", 0}, {"phase", "Succeeded"}, {"completionTime", now}},
              {{"tag", "2"}, {"version", 0}, {"phase", "Succeeded"}, {"completionTime", now}}}}}},
          {"deadowner",
           {{"tags",
             {{{"tag", "1"}, {"version", 0}, {"phase", "Pulling"}},
              {{"tag", "2"}, {"version", 0}, {"phase", "Pulling"}}}}}}}}}}};
  ASSERT_TRUE(api_.Seed(kNodeImages, ni).ok());
  auto gc_done = [&] {
    auto got = Get(kNodeImages, "", "fake-node");
    if (!got) return false;
    const Json& images = (*got)["spec"]["images"];
    return !images.contains("nocreated") && !images.contains("deadowner") &&
           images.contains("expired") && images["expired"]["tags"].size() == 1 &&
           images.contains("mixed") && images["mixed"]["tags"][0]["ownerReferences"].size() == 1;
  };
  ASSERT_TRUE(Eventually(gc_done)) << Get(kNodeImages, "", "fake-node")->dump();
  Json images = (*Get(kNodeImages, "", "fake-node"))["spec"]["images"];
  EXPECT_EQ(images["expired"]["tags"][0]["tag"], "fresh");
  EXPECT_EQ(images["mixed"]["tags"][0]["ownerReferences"][0]["name"], "live");
  EXPECT_EQ(images["mixed"]["tags"][1]["ownerReferences"][0]["kind"], "Deployment");
  EXPECT_EQ(images["mixed"]["sandboxConfig"]["labels"]["k"], "v");
  // Without a Node but with the fake label, the NodeImage stays.
  EXPECT_TRUE(Get(kNodeImages, "", "fake-node").has_value());
  // The fresh tag expires 60 s after its completion. The reconcile that patched the GC above may
  // schedule that check only after this thread saw the patch, i.e. after an Advance made here (a
  // run under load then waited for a deadline the fake clock never reached): so every poll moves
  // the clock past one more TTL.
  ASSERT_TRUE(Eventually([&] {
    clock_.Advance(absl::Seconds(61));
    return kube::FindPath(*Get(kNodeImages, "", "fake-node"), {"spec", "images", "expired"}) ==
           nullptr;
  }));
}

TEST_F(ImagePullControllersTest, WatchdogFailsSilentAndOverdueTags) {
  Start();
  const std::string now = kube::FormatRfc3339(clock_.Now());
  Json ni = {{"apiVersion", "apps.kruise.io/v1beta1"},
             {"kind", "NodeImage"},
             {"metadata", {{"name", "quiet"}, {"labels", {{kFakeNodeImageLabel, "true"}}}}},
             {"spec",
              {{"images",
                {{"silent", {{"tags", {{{"tag", "1"}, {"version", 3}, {"createdAt", now}}}}}},
                 {"overdue",
                  {{"tags",
                    {{{"tag", "1"},
                      {"version", 0},
                      {"createdAt", now},
                      {"pullPolicy", {{"activeDeadlineSeconds", 60}}}}}}}},
                 {"done", {{"tags", {{{"tag", "1"}, {"version", 0}, {"createdAt", now}}}}}}}}}},
             {"status",
              {{"firstSyncStatus", {{"status", "Succeeded"}}},
               {"imageStatuses",
                {{"silent", {{"tags", {{{"tag", "1"}, {"version", 2}, {"phase", "Succeeded"}}}}}},
                 {"overdue", {{"tags", {{{"tag", "1"}, {"version", 0}, {"phase", "Pulling"}}}}}},
                 {"done",
                  {{"tags",
                    {{{"tag", "1"},
                      {"version", 0},
                      {"phase", "Succeeded"},
                      {"completionTime", now}}}}}}}}}}};
  ASSERT_TRUE(api_.Seed(kNodeImages, ni).ok());
  clock_.Advance(absl::Seconds(601));
  ASSERT_TRUE(Eventually([&] {
    return TagStatus(*Get(kNodeImages, "", "quiet"), "silent", "1").value("phase", "") == "Failed";
  }));
  Json got = *Get(kNodeImages, "", "quiet");
  Json silent = TagStatus(got, "silent", "1");
  EXPECT_EQ(silent["version"], 3);
  EXPECT_EQ(silent["message"], kNotRespondedMessage);
  EXPECT_TRUE(silent.contains("completionTime"));
  // 601 s < 60 s deadline + 600 s response timeout: still pulling.
  EXPECT_EQ(TagStatus(got, "overdue", "1")["phase"], "Pulling");
  EXPECT_EQ(got["status"]["failed"], 1);
  EXPECT_EQ(got["status"]["desired"], 3);
  EXPECT_EQ(got["status"]["firstSyncStatus"]["status"], "Succeeded");
  clock_.Advance(absl::Seconds(60));
  ASSERT_TRUE(Eventually([&] {
    return TagStatus(*Get(kNodeImages, "", "quiet"), "overdue", "1").value("phase", "") == "Failed";
  }));
  got = *Get(kNodeImages, "", "quiet");
  EXPECT_EQ(TagStatus(got, "overdue", "1")["message"], kDeadlineExceededMessage);
  EXPECT_EQ(TagStatus(got, "done", "1")["phase"], "Succeeded");
  EXPECT_EQ(got["status"]["failed"], 2);
  EXPECT_EQ(got["status"]["succeeded"], 1);
}

// Scale check: 200 nodes, parallelism 20, the test answering as every node's daemon. Never more
// than `parallelism` nodes in flight in any snapshot; prints the wall time and API requests.
TEST_F(ImagePullControllersTest, TwoHundredNodesParallelismTwenty) {
  constexpr int kNodes = 200;
  constexpr int kParallelism = 20;
  Start();
  SeedReadyNodes(kNodes);
  api_.ClearRequests();
  const absl::Time start = absl::Now();
  ASSERT_TRUE(CreateJob("big", {{"image", "busybox:1.36"}, {"parallelism", kParallelism}}).ok());
  int max_in_flight = 0;
  auto step = [&] {
    int in_flight = 0;
    std::vector<std::string> to_finish;
    for (const Json& ni : api_.List(kNodeImages)) {
      Json tag = Tag(ni, "busybox", "1.36");
      if (tag.is_null()) continue;
      Json st = TagStatus(ni, "busybox", "1.36");
      if (!st.is_null() && st["version"] == tag["version"] && st["phase"] == "Succeeded") continue;
      ++in_flight;
      to_finish.push_back(kube::Name(ni));
    }
    max_in_flight = std::max(max_in_flight, in_flight);
    for (const std::string& n : to_finish) Report(n, "busybox", "1.36", "Succeeded");
    return JobStatus("big").contains("completionTime");
  };
  ASSERT_TRUE(Eventually(step, absl::Seconds(120)));
  const absl::Duration took = absl::Now() - start;
  Json s = JobStatus("big");
  EXPECT_EQ(s["succeeded"], kNodes);
  EXPECT_LE(max_in_flight, kParallelism);
  EXPECT_GT(max_in_flight, 0);
  std::cout << "200 nodes, parallelism 20: completed in " << absl::FormatDuration(took)
            << ", max in flight " << max_in_flight << ", API requests " << api_.RequestCount("")
            << " (PATCH " << api_.RequestCount("PATCH") << ", GET " << api_.RequestCount("GET")
            << ")" << std::endl;
}

TEST(ImagePullGroupTest, NoOpWithoutCrdsAndGatesOff) {
  testing::FakeApiServerOptions o;
  o.register_builtin_resources = false;
  testing::FakeApiServer api(o);
  ASSERT_TRUE(api.Start().ok());
  auto client = testing::UnthrottledClientFor(api);
  ASSERT_TRUE(client.ok());
  testing::FakeClock clock;
  kube::ManagerOptions mo;
  mo.clock = &clock;
  kube::Manager manager(client->get(), mo);
  ControllerContext ctx;
  ctx.client = client->get();
  ctx.manager = &manager;
  ctx.clock = &clock;
  auto group = NewImagePullControllerGroup();
  EXPECT_EQ(group->Name(), "imagepull");
  // No CRDs served: nothing registered, so Run() has nothing to sync and exits cleanly.
  ASSERT_TRUE(group->Register(ctx).ok());
  std::stop_source stop;
  stop.request_stop();
  EXPECT_EQ(manager.Run(stop.get_token()), 0);

  // Gate off: likewise.
  ctx.feature_enabled = [](absl::string_view gate) { return gate != "KruiseDaemon"; };
  EXPECT_TRUE(NewImagePullControllerGroup()->Register(ctx).ok());
  // Bad options.
  ImagePullGroupOptions bad;
  bad.api_version = "v2";
  ctx.feature_enabled = [](absl::string_view) { return true; };
  EXPECT_EQ(NewImagePullControllerGroup(bad)->Register(ctx).code(),
            absl::StatusCode::kInvalidArgument);
  ctx.client = nullptr;
  EXPECT_EQ(NewImagePullControllerGroup()->Register(ctx).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kruise::manager
