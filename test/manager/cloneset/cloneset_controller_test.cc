// CloneSet controller runs against the fake API server: real REST client and informers, fake
// clock; the test plays the kubelet (pods become ready, restarted containers get new IDs) and
// calls Reconcile itself, so every step is deterministic.

#include "manager/cloneset/cloneset_controller.h"

#include <memory>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/informer.h"
#include "kube/object.h"
#include "kube/rest_client.h"
#include "manager/cloneset/cloneset_api.h"
#include "manager/inplace/inplace_update.h"
#include "manager/inplace/predownload.h"
#include "test/fakes/apiserver/fake_apiserver.h"
#include "test/fakes/apiserver/fake_cluster_test.h"
#include "test/fakes/fake_clock.h"
#include "test/manager/inplace/fake_disruption_gate.h"

namespace kruise::manager::cloneset {
namespace {

using kube::Json;
constexpr char kSets[] = "clonesets.apps.kruise.io";
constexpr char kRevisions[] = "controllerrevisions.apps";

class CloneSetControllerTest : public testing::FakeClusterTest {
 protected:
  void SetUp() override {
    StartCluster();
    ASSERT_FALSE(HasFatalFailure());
    for (kube::InformerOptions& o : CloneSetInformerOptions()) AddInformer(o);
    CloneSetInformers inf{informers_[0].get(), informers_[1].get(), informers_[2].get(),
                          informers_[3].get(), informers_[4].get()};
    CloneSetReconcilerOptions ro;
    ro.clock = &clock_;
    if (pre_download_) {
      inf.image_pull_jobs = AddInformer(inplace::PreDownloadJobInformerOptions());
      ro.pre_download_images = true;
    }
    ro.disruption_gate = gate_;
    if (gate_ != nullptr) StartRecorder();
    reconciler_ = std::make_unique<CloneSetReconciler>(client_.get(), inf, recorder_.get(), ro);
    reconciler_->ObserveThrough(inf.pods);
    reconciler_->ObserveThrough(inf.pvcs);
    SyncInformers();
  }

  static Json Template(const std::string& image) {
    return {
        {"metadata", {{"labels", {{"app", "web"}}}}},
        {"spec",
         {{"containers", {{{"name", "main"}, {"image", image}}}}, {"restartPolicy", "Always"}}}};
  }

  void CreateSet(int replicas, Json update_strategy = Json::object(), Json extra = {}) {
    Json cs = {{"apiVersion", "apps.kruise.io/v1alpha1"},
               {"kind", "CloneSet"},
               {"metadata", {{"name", "web"}, {"namespace", "default"}}},
               {"spec",
                {{"replicas", replicas},
                 {"selector", {{"matchLabels", {{"app", "web"}}}}},
                 {"template", Template("registry.local/app:v1")},
                 {"updateStrategy", update_strategy}}}};
    if (extra.is_object()) cs["spec"].update(extra);
    ASSERT_TRUE(server_->Seed(kSets, cs).ok());
  }

  void PatchSpec(const Json& spec_patch) {
    Json cs = *server_->Get(kSets, "default", "web");
    cs["spec"].merge_patch(spec_patch);
    cs["metadata"]["generation"] = kube::Generation(cs) + 1;
    ASSERT_TRUE(server_->Put(kSets, cs).ok());
  }

  // Waits until every informer holds what the server holds.
  void Sync() {
    std::vector<std::string> names = {kSets, "pods", kRevisions, "persistentvolumeclaims"};
    if (pre_download_) names.insert(names.end(), {"nodes", "imagepulljobs.apps.kruise.io"});
    absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      bool same = true;
      for (size_t i = 0; i < names.size() && same; ++i) {
        std::vector<Json> objs = server_->List(names[i]);
        size_t expected = 0;
        for (const Json& o : objs) {
          if (i == 3 && !kube::Label(o, kInstanceIdLabel).has_value()) continue;
          ++expected;
          auto cached = informers_[i]->store().Get(kube::StoreKey(o));
          if (cached == nullptr || kube::ResourceVersion(*cached) != kube::ResourceVersion(o)) {
            same = false;
          }
        }
        if (informers_[i]->store().size() != expected) same = false;
        // The expectation observers run on the dispatcher thread, after the store has changed.
        if (!informers_[i]->HandlersCaughtUp()) same = false;
      }
      if (same) return;
      absl::SleepFor(absl::Milliseconds(2));  // polling the cache against a deadline
    }
    FAIL() << "informers did not catch up";
  }

  kube::Result Reconcile(bool sync = true) {
    if (sync) Sync();
    auto r = reconciler_->Reconcile({"default", "web"});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : kube::Result{};
  }

  std::vector<Json> Pods() { return server_->List("pods", "default"); }
  Json Set() { return *server_->Get(kSets, "default", "web"); }

  // The kubelet: scheduled, running and ready (InPlaceUpdateReady as the controller left it).
  void MakeReady(const std::string& name) {
    Json pod = *server_->Get("pods", "default", name);
    pod["spec"]["nodeName"] = "node-a";
    Json& status = pod["status"];
    status["phase"] = "Running";
    Json conds = Json::array();
    if (status.contains("conditions")) {
      for (const Json& c : status["conditions"]) {
        if (c["type"] != "Ready") conds.push_back(c);
      }
    }
    bool gate_ok = true;
    for (const Json& c : conds) {
      if (c["type"] == inplace::kInPlaceUpdateReadyCondition && c["status"] != "True")
        gate_ok = false;
    }
    conds.push_back({{"type", "Ready"},
                     {"status", gate_ok ? "True" : "False"},
                     {"lastTransitionTime", kube::FormatRfc3339(clock_.Now())}});
    status["conditions"] = conds;
    if (!status.contains("containerStatuses")) {
      status["containerStatuses"] = {
          {{"name", "main"},
           {"ready", true},
           {"restartCount", 0},
           {"image", pod["spec"]["containers"][0]["image"]},
           {"imageID", "sha256:aaa"},
           {"containerID", "containerd://" + name + "-0"},
           {"state", {{"running", {{"startedAt", "2020-01-01T00:00:00Z"}}}}}}};
    }
    ASSERT_TRUE(server_->Put("pods", pod).ok());
  }

  // The kubelet restarts a container whose image changed (same digest: the imageID stays).
  void RestartChanged(const std::string& name) {
    Json pod = *server_->Get("pods", "default", name);
    Json& cs = pod["status"]["containerStatuses"][0];
    if (cs["image"] == pod["spec"]["containers"][0]["image"]) return;
    cs["image"] = pod["spec"]["containers"][0]["image"];
    cs["restartCount"] = cs["restartCount"].get<int>() + 1;
    cs["containerID"] =
        "containerd://" + name + "-" + std::to_string(cs["restartCount"].get<int>());
    clock_.Advance(absl::Seconds(2));
    cs["state"] = {{"running", {{"startedAt", kube::FormatRfc3339(clock_.Now())}}}};
    ASSERT_TRUE(server_->Put("pods", pod).ok());
  }

  bool pre_download_ = false;                // set before SetUp
  inplace::DisruptionGate* gate_ = nullptr;  // set before SetUp (then events are recorded)
  std::unique_ptr<CloneSetReconciler> reconciler_;
};

TEST_F(CloneSetControllerTest, ScaleUpCreatesNamedPodsWithGateRevisionAndPvcs) {
  CreateSet(3, Json::object(),
            {{"volumeClaimTemplates",
              {{{"metadata", {{"name", "data"}}},
                {"spec",
                 {{"accessModes", {"ReadWriteOnce"}},
                  {"resources", {{"requests", {{"storage", "1Gi"}}}}}}}}}}});
  Reconcile();
  auto pods = Pods();
  ASSERT_EQ(pods.size(), 3u);
  auto revisions = server_->List(kRevisions, "default");
  ASSERT_EQ(revisions.size(), 1u);
  const std::string rev = kube::Name(revisions[0]);
  EXPECT_THAT(rev, ::testing::StartsWith("web-"));
  std::set<std::string> ids;
  for (const Json& p : pods) {
    const std::string id = *kube::Label(p, kInstanceIdLabel);
    ids.insert(id);
    EXPECT_EQ(kube::Name(p), "web-" + id);
    EXPECT_EQ(kube::Label(p, "controller-revision-hash"), rev);
    EXPECT_EQ(kube::Label(p, kLifecycleStateLabel), kStateNormal);
    EXPECT_EQ(kube::ControllerOf(p)->kind, "CloneSet");
    EXPECT_EQ(p["spec"]["readinessGates"][0]["conditionType"], "InPlaceUpdateReady");
    EXPECT_EQ(p["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"], "data-web-" + id);
    auto pvc = server_->Get("persistentvolumeclaims", "default", "data-web-" + id);
    ASSERT_TRUE(pvc.ok());
    EXPECT_EQ(kube::Label(*pvc, kInstanceIdLabel), id);
  }
  EXPECT_EQ(ids.size(), 3u);
  // Next pass: InPlaceUpdateReady starts True; status is written.
  Reconcile();
  Reconcile();
  for (const Json& p : Pods()) {
    ASSERT_TRUE(p["status"].contains("conditions")) << p.dump();
    EXPECT_EQ(p["status"]["conditions"][0]["type"], "InPlaceUpdateReady");
    EXPECT_EQ(p["status"]["conditions"][0]["status"], "True");
  }
  Json st = Set()["status"];
  EXPECT_EQ(st["replicas"], 3);
  EXPECT_EQ(st["updatedReplicas"], 3);
  EXPECT_EQ(st["updateRevision"], rev);
  EXPECT_EQ(st["currentRevision"], rev);
  EXPECT_EQ(st["labelSelector"], "app=web");
  EXPECT_EQ(st["readyReplicas"], 0);
}

TEST_F(CloneSetControllerTest, KruisePodReadyGateStartsTrue) {
  CreateSet(1);
  Reconcile();
  // The pod webhook adds KruisePodReady to pods of Kruise workloads.
  Json pod = Pods()[0];
  pod["spec"]["readinessGates"].push_back({{"conditionType", "KruisePodReady"}});
  ASSERT_TRUE(server_->Put("pods", pod).ok());
  Reconcile();
  std::set<std::string> true_conditions;
  const Json updated = Pods()[0];
  for (const Json& c : updated["status"]["conditions"]) {
    if (c["status"] == "True") true_conditions.insert(c["type"].get<std::string>());
  }
  EXPECT_THAT(true_conditions,
              ::testing::UnorderedElementsAre("InPlaceUpdateReady", "KruisePodReady"))
      << updated.dump();
}

TEST_F(CloneSetControllerTest, StaleCacheNeverCreatesTwice) {
  CreateSet(4);
  Reconcile();
  ASSERT_EQ(Pods().size(), 4u);
  // The cache has not seen the pods yet: expectations hold the next passes back.
  for (int i = 0; i < 3; ++i) Reconcile(/*sync=*/false);
  EXPECT_EQ(Pods().size(), 4u);
  Reconcile();
  EXPECT_EQ(Pods().size(), 4u);
}

TEST_F(CloneSetControllerTest, ScaleDownDeletesPodsAndTheirPvcs) {
  CreateSet(
      3, Json::object(),
      {{"volumeClaimTemplates", {{{"metadata", {{"name", "data"}}}, {"spec", Json::object()}}}}});
  Reconcile();
  for (const Json& p : Pods()) MakeReady(kube::Name(p));
  PatchSpec({{"replicas", 1}});
  Reconcile();
  auto pods = Pods();
  ASSERT_EQ(pods.size(), 1u);
  auto pvcs = server_->List("persistentvolumeclaims", "default");
  ASSERT_EQ(pvcs.size(), 1u);
  EXPECT_EQ(kube::Label(pvcs[0], kInstanceIdLabel), kube::Label(pods[0], kInstanceIdLabel));
}

TEST_F(CloneSetControllerTest, PodsToDeleteIsReplaced) {
  CreateSet(2);
  Reconcile();
  for (const Json& p : Pods()) MakeReady(kube::Name(p));
  const std::string victim = kube::Name(Pods()[0]);
  PatchSpec({{"scaleStrategy", {{"podsToDelete", {victim}}}}});
  Reconcile();  // delete
  EXPECT_FALSE(server_->Get("pods", "default", victim).ok());
  Reconcile();  // replace
  auto pods = Pods();
  ASSERT_EQ(pods.size(), 2u);
  for (const Json& p : pods) EXPECT_NE(kube::Name(p), victim);
}

TEST_F(CloneSetControllerTest, InPlaceUpdateKeepsPodsAndRespectsMaxUnavailable) {
  CreateSet(3, {{"type", "InPlaceIfPossible"}, {"maxUnavailable", 1}});
  Reconcile();
  Reconcile();  // InPlaceUpdateReady True
  std::map<std::string, std::string> uids;
  for (const Json& p : Pods()) {
    MakeReady(kube::Name(p));
    uids[kube::Name(p)] = kube::Uid(p);
  }
  Reconcile();
  // A tag change that keeps the digest (the kubelet reports the same imageID).
  PatchSpec({{"template", Template("registry.local/app:v1-same-digest")}});
  int rounds = 0;
  while (rounds++ < 20) {
    Reconcile();
    int unready = 0, updated = 0;
    for (const Json& p : Pods()) {
      const Json* ready = nullptr;
      for (const Json& c : p["status"]["conditions"]) {
        if (c["type"] == "InPlaceUpdateReady") ready = &c;
      }
      if (ready == nullptr || (*ready)["status"] != "True") ++unready;
      if (p["spec"]["containers"][0]["image"] == "registry.local/app:v1-same-digest") ++updated;
    }
    EXPECT_LE(unready, 1) << "maxUnavailable 1";
    if (updated == 3 && unready == 0) break;
    for (const Json& p : Pods()) {
      RestartChanged(kube::Name(p));
      MakeReady(kube::Name(p));
    }
  }
  ASSERT_LT(rounds, 20) << "the update did not complete";
  for (const Json& p : Pods()) MakeReady(kube::Name(p));  // the kubelet sees the gate True
  auto pods = Pods();
  ASSERT_EQ(pods.size(), 3u);
  for (const Json& p : pods) {
    EXPECT_EQ(uids[kube::Name(p)], kube::Uid(p)) << "the pod was recreated";
    EXPECT_EQ(p["status"]["containerStatuses"][0]["restartCount"], 1) << "restarted once";
    EXPECT_EQ(kube::Label(p, kLifecycleStateLabel), kStateNormal);
    EXPECT_TRUE(kube::Annotation(p, inplace::kInPlaceUpdateStateAnnotation).has_value());
  }
  Reconcile();
  Json st = Set()["status"];
  EXPECT_EQ(st["updatedReplicas"], 3);
  EXPECT_EQ(st["updatedReadyReplicas"], 3);
  EXPECT_EQ(st["currentRevision"], st["updateRevision"]);
}

class CloneSetPreDownloadTest : public CloneSetControllerTest {
 protected:
  CloneSetPreDownloadTest() { pre_download_ = true; }
};

// PreDownloadImageForInPlaceUpdate: one ImagePullJob per changed image, once per revision, for
// the pods not yet updated; gone when every pod is at the new revision.
TEST_F(CloneSetPreDownloadTest, OneJobPerRevisionDeletedWhenDone) {
  CreateSet(
      4, {{"type", "InPlaceIfPossible"}, {"maxUnavailable", 1}},
      {{"template",
        {{"metadata", {{"labels", {{"app", "web"}}}}},
         {"spec",
          {{"containers",
            {{{"name", "main"}, {"image", "app:v1"}}, {{"name", "log"}, {"image", "log:v1"}}}},
           {"imagePullSecrets", {{{"name", "regcred"}}}}}}}}});
  Reconcile();
  Reconcile();
  for (const Json& p : Pods()) MakeReady(kube::Name(p));
  Reconcile();
  EXPECT_TRUE(server_->List("imagepulljobs.apps.kruise.io").empty()) << "no update, no job";
  Json tmpl = Set()["spec"]["template"];
  tmpl["spec"]["containers"][1]["image"] = "log:v2";
  PatchSpec({{"template", tmpl}});
  Reconcile();
  auto jobs = server_->List("imagepulljobs.apps.kruise.io", "default");
  ASSERT_EQ(jobs.size(), 1u);
  const std::string update_rev = Set()["status"]["updateRevision"];
  EXPECT_EQ(kube::Name(jobs[0]), update_rev + "-log");
  EXPECT_EQ(jobs[0]["spec"]["image"], "log:v2");
  EXPECT_EQ(jobs[0]["spec"]["pullSecrets"], Json({"regcred"}));
  EXPECT_EQ(kube::ControllerOf(jobs[0])->uid, kube::Uid(Set()));
  auto rev = server_->Get(kRevisions, "default", update_rev);
  ASSERT_TRUE(rev.ok());
  EXPECT_EQ(kube::Label(*rev, inplace::kImagePreDownloadCreatedLabel), "true");
  // The job is made once: deleting it (its TTL, or by hand) does not bring it back.
  ASSERT_TRUE(server_->Remove("imagepulljobs.apps.kruise.io", "default", kube::Name(jobs[0])).ok());
  Reconcile();
  EXPECT_TRUE(server_->List("imagepulljobs.apps.kruise.io").empty());
  // A stale leader that had not seen the label tries again: the name makes it a no-op.
  ASSERT_TRUE(server_->Seed("imagepulljobs.apps.kruise.io", jobs[0]).ok());
  Json unlabelled = *server_->Get(kRevisions, "default", update_rev);
  unlabelled["metadata"]["labels"].erase(inplace::kImagePreDownloadCreatedLabel);
  ASSERT_TRUE(server_->Put(kRevisions, unlabelled).ok());
  Reconcile();
  EXPECT_EQ(server_->List("imagepulljobs.apps.kruise.io").size(), 1u);
  // Roll every pod; once all are at the new revision the job goes.
  for (int round = 0; round < 20; ++round) {
    Reconcile();
    if (Set()["status"]["currentRevision"] == update_rev) break;
    for (const Json& p : Pods()) {
      Json pod = *server_->Get("pods", "default", kube::Name(p));
      if (pod["spec"]["containers"].size() > 1 &&
          pod["spec"]["containers"][1]["image"] == "log:v2") {
        Json& cs = pod["status"]["containerStatuses"];
        if (cs.size() < 2) {
          cs.push_back({{"name", "log"},
                        {"ready", true},
                        {"restartCount", 0},
                        {"image", "log:v1"},
                        {"imageID", "sha256:bbb"},
                        {"containerID", "containerd://" + kube::Name(p) + "-log-0"},
                        {"state", {{"running", {{"startedAt", "2020-01-01T00:00:00Z"}}}}}});
        }
        if (cs[1]["image"] != "log:v2") {
          clock_.Advance(absl::Seconds(2));
          cs[1] = {{"name", "log"},
                   {"ready", true},
                   {"restartCount", 1},
                   {"image", "log:v2"},
                   {"imageID", "sha256:ccc"},
                   {"containerID", "containerd://" + kube::Name(p) + "-log-1"},
                   {"state", {{"running", {{"startedAt", kube::FormatRfc3339(clock_.Now())}}}}}};
          ASSERT_TRUE(server_->Put("pods", pod).ok());
        }
      }
      MakeReady(kube::Name(p));
    }
  }
  ASSERT_EQ(Set()["status"]["currentRevision"], update_rev);
  Reconcile();
  EXPECT_TRUE(server_->List("imagepulljobs.apps.kruise.io").empty());
}

TEST_F(CloneSetPreDownloadTest, SmallSetsAndReCreateAreMarkedIgnored) {
  CreateSet(3, {{"type", "InPlaceIfPossible"}, {"maxUnavailable", 1}});
  Reconcile();
  Reconcile();
  PatchSpec({{"template", Template("registry.local/app:v2")}});
  Reconcile();
  EXPECT_TRUE(server_->List("imagepulljobs.apps.kruise.io").empty());
  auto rev = server_->Get(kRevisions, "default", Set()["status"]["updateRevision"]);
  ASSERT_TRUE(rev.ok());
  EXPECT_EQ(kube::Label(*rev, inplace::kImagePreDownloadIgnoredLabel), "true");
}

TEST_F(CloneSetControllerTest, PartitionKeepsOldPods) {
  CreateSet(3, {{"type", "InPlaceIfPossible"}, {"partition", 2}, {"maxUnavailable", 3}});
  Reconcile();
  Reconcile();
  for (const Json& p : Pods()) MakeReady(kube::Name(p));
  PatchSpec({{"template", Template("registry.local/app:v2")}});
  for (int i = 0; i < 4; ++i) Reconcile();
  int updated = 0;
  for (const Json& p : Pods()) {
    if (p["spec"]["containers"][0]["image"] == "registry.local/app:v2") ++updated;
  }
  EXPECT_EQ(updated, 1);
  EXPECT_EQ(Set()["status"]["expectedUpdatedReplicas"], 1);
}

TEST_F(CloneSetControllerTest, ReCreateMarksDeletesAndReplaces) {
  CreateSet(1, {{"type", "ReCreate"}});
  Reconcile();
  Reconcile();  // InPlaceUpdateReady True
  const std::string first = kube::Name(Pods()[0]);
  MakeReady(first);
  PatchSpec({{"template", Template("registry.local/app:v2")}});
  Reconcile();  // mark
  EXPECT_EQ(kube::Label(*server_->Get("pods", "default", first), kSpecifiedDeleteLabel), "true");
  Reconcile();  // delete
  Reconcile();  // create at the new revision
  auto pods = Pods();
  ASSERT_EQ(pods.size(), 1u);
  EXPECT_NE(kube::Name(pods[0]), first);
  EXPECT_EQ(pods[0]["spec"]["containers"][0]["image"], "registry.local/app:v2");
}

TEST_F(CloneSetControllerTest, InPlaceOnlyRefusesAnEnvChange) {
  CreateSet(1, {{"type", "InPlaceOnly"}});
  Reconcile();
  MakeReady(kube::Name(Pods()[0]));
  Json tmpl = Template("registry.local/app:v1");
  tmpl["spec"]["containers"][0]["env"] = {{{"name", "A"}, {"value", "1"}}};
  PatchSpec({{"template", tmpl}});
  Sync();
  Reconcile();  // refresh (InPlaceUpdateReady True)
  Sync();
  auto r = reconciler_->Reconcile({"default", "web"});
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("env"));
  EXPECT_EQ(Pods().size(), 1u);
  // The status says why: FailedUpdate with the reason; it goes once the update can proceed.
  Json conds = Set()["status"]["conditions"];
  ASSERT_EQ(conds.size(), 1u) << conds.dump();
  EXPECT_EQ(conds[0]["type"], "FailedUpdate");
  EXPECT_EQ(conds[0]["status"], "True");
  EXPECT_THAT(conds[0].value("message", ""), ::testing::HasSubstr("InPlaceOnly"));
  PatchSpec({{"template", Template("registry.local/app:v1")}});  // back: nothing to update
  Reconcile();
  EXPECT_TRUE(Set()["status"]["conditions"].empty()) << Set()["status"].dump();
}

TEST_F(CloneSetControllerTest, PreDeleteHookHoldsThePod) {
  CreateSet(2, Json::object(),
            {{"lifecycle", {{"preDelete", {{"labelsHandler", {{"example.com/hold", "true"}}}}}}}});
  Reconcile();
  for (const Json& p : Pods()) {
    MakeReady(kube::Name(p));
    Json pod = *server_->Get("pods", "default", kube::Name(p));
    pod["metadata"]["labels"]["example.com/hold"] = "true";
    ASSERT_TRUE(server_->Put("pods", pod).ok());
  }
  PatchSpec({{"replicas", 1}});
  Reconcile();
  auto pods = Pods();
  ASSERT_EQ(pods.size(), 2u);
  std::string held;
  for (const Json& p : pods) {
    if (kube::Label(p, kLifecycleStateLabel) == kStatePreparingDelete) held = kube::Name(p);
  }
  ASSERT_FALSE(held.empty());
  Reconcile();
  EXPECT_EQ(Pods().size(), 2u) << "the hook still holds it";
  Json pod = *server_->Get("pods", "default", held);
  pod["metadata"]["labels"].erase("example.com/hold");
  ASSERT_TRUE(server_->Put("pods", pod).ok());
  Reconcile();
  EXPECT_EQ(Pods().size(), 1u);
  EXPECT_FALSE(server_->Get("pods", "default", held).ok());
}

// markPodNotReady: a hook that holds a pod takes it out of endpoints through the KruisePodReady
// gate, and the pod is ready again once it is back to Normal.
TEST_F(CloneSetControllerTest, MarkPodNotReadyThroughKruisePodReady) {
  Json hook = {{"labelsHandler", {{"example.com/hold", "true"}}}, {"markPodNotReady", true}};
  CreateSet(2, {{"type", "InPlaceIfPossible"}, {"maxUnavailable", 1}},
            {{"lifecycle", {{"inPlaceUpdate", hook}, {"preDelete", hook}}}});
  Reconcile();
  for (const Json& p : Pods()) {
    Json pod = *server_->Get("pods", "default", kube::Name(p));
    pod["spec"]["readinessGates"].push_back({{"conditionType", "KruisePodReady"}});
    pod["metadata"]["labels"]["example.com/hold"] = "true";
    ASSERT_TRUE(server_->Put("pods", pod).ok());
  }
  Reconcile();
  for (const Json& p : Pods()) MakeReady(kube::Name(p));
  auto kruise_ready = [&](const std::string& name) -> std::string {
    Json pod = *server_->Get("pods", "default", name);
    for (const Json& c : pod["status"]["conditions"]) {
      if (c["type"] == "KruisePodReady")
        return c["status"].get<std::string>() + "/" + c.value("reason", "");
    }
    return "none";
  };
  for (const Json& p : Pods()) EXPECT_EQ(kruise_ready(kube::Name(p)), "True/");
  // In-place update: the hooked pod goes PreparingUpdate and not ready, and stays so while held.
  PatchSpec({{"template", Template("registry.local/app:v2")}});
  Reconcile();
  std::string held;
  for (const Json& p : Pods()) {
    if (kube::Label(p, kLifecycleStateLabel) == kStatePreparingUpdate) held = kube::Name(p);
  }
  ASSERT_FALSE(held.empty());
  EXPECT_EQ(kruise_ready(held), "False/PreparingUpdate");
  Reconcile();
  EXPECT_EQ(kruise_ready(held), "False/PreparingUpdate");
  // The hook lets go; the update runs; the hook label comes back; the pod is Normal and ready.
  Json pod = *server_->Get("pods", "default", held);
  pod["metadata"]["labels"].erase("example.com/hold");
  ASSERT_TRUE(server_->Put("pods", pod).ok());
  for (int i = 0; i < 10 && kube::Label(*server_->Get("pods", "default", held),
                                        kLifecycleStateLabel) != kStateNormal;
       ++i) {
    Reconcile();
    RestartChanged(held);
    MakeReady(held);
    Json p = *server_->Get("pods", "default", held);
    if (!p["metadata"]["labels"].contains("example.com/hold") &&
        kube::Label(p, kLifecycleStateLabel) == kStateUpdated) {
      p["metadata"]["labels"]["example.com/hold"] = "true";
      ASSERT_TRUE(server_->Put("pods", p).ok());
    }
  }
  ASSERT_EQ(kube::Label(*server_->Get("pods", "default", held), kLifecycleStateLabel),
            kStateNormal);
  Reconcile();
  EXPECT_EQ(kruise_ready(held), "True/");
  // preDelete with markPodNotReady: scale down holds one pod, not ready.
  PatchSpec({{"replicas", 1}, {"updateStrategy", {{"paused", true}}}});
  Reconcile();
  std::string deleting;
  for (const Json& p : Pods()) {
    if (kube::Label(p, kLifecycleStateLabel) == kStatePreparingDelete) deleting = kube::Name(p);
  }
  ASSERT_FALSE(deleting.empty());
  EXPECT_EQ(kruise_ready(deleting), "False/PreparingDelete");
  // With markPodNotReady the PreparingDelete is final (OpenKruise's rule: the pod may already
  // be out of service): a scale-up does not take it back; it goes when the hook lets go, and
  // a new pod replaces it.
  PatchSpec({{"replicas", 2}});
  Reconcile();
  EXPECT_EQ(kube::Label(*server_->Get("pods", "default", deleting), kLifecycleStateLabel),
            kStatePreparingDelete);
  EXPECT_EQ(kruise_ready(deleting), "False/PreparingDelete");
  pod = *server_->Get("pods", "default", deleting);
  pod["metadata"]["labels"].erase("example.com/hold");
  ASSERT_TRUE(server_->Put("pods", pod).ok());
  Reconcile();
  EXPECT_FALSE(server_->Get("pods", "default", deleting).ok());
  Reconcile();
  EXPECT_EQ(Pods().size(), 2u);
}

TEST_F(CloneSetControllerTest, AdoptsOrphansAndReleasesMismatches) {
  Json orphan = {
      {"metadata", {{"name", "orphan"}, {"namespace", "default"}, {"labels", {{"app", "web"}}}}},
      {"spec", {{"containers", {{{"name", "main"}, {"image", "x"}}}}}}};
  ASSERT_TRUE(server_->Seed("pods", orphan).ok());
  CreateSet(1, {{"paused", true}});  // paused: the adopted pod is not replaced by an update
  Reconcile();
  auto adopted = *server_->Get("pods", "default", "orphan");
  ASSERT_TRUE(kube::ControllerOf(adopted).has_value());
  EXPECT_EQ(kube::ControllerOf(adopted)->name, "web");
  Reconcile();
  EXPECT_EQ(Pods().size(), 1u) << "the adopted pod counts";
  adopted["metadata"]["labels"]["app"] = "other";
  ASSERT_TRUE(server_->Put("pods", adopted).ok());
  Reconcile();
  EXPECT_FALSE(kube::ControllerOf(*server_->Get("pods", "default", "orphan")).has_value());
  Reconcile();
  EXPECT_EQ(Pods().size(), 2u) << "a new pod replaces the released one";
}

TEST_F(CloneSetControllerTest, PausedStopsUpdates) {
  CreateSet(2, {{"type", "InPlaceIfPossible"}, {"paused", true}});
  Reconcile();
  Reconcile();
  for (const Json& p : Pods()) MakeReady(kube::Name(p));
  PatchSpec({{"template", Template("registry.local/app:v2")}});
  for (int i = 0; i < 3; ++i) Reconcile();
  for (const Json& p : Pods()) {
    EXPECT_EQ(p["spec"]["containers"][0]["image"], "registry.local/app:v1");
  }
}

// The PodUnavailableBudget (issue 17), through a stand-in gate: as OpenKruise's CloneSet, each
// pod picked is put to it first and the first denial ends the round.
class CloneSetPubTest : public CloneSetControllerTest {
 protected:
  CloneSetPubTest() { gate_ = &fake_gate_; }

  std::vector<Json> Events(const std::string& reason) {
    EXPECT_TRUE(recorder_->WaitIdle(absl::Seconds(10)));
    std::vector<Json> out;
    for (const Json& e : server_->List("events")) {
      if (e.value("reason", "") == reason) out.push_back(e);
    }
    return out;
  }
  int AtImage(const std::string& image) {
    int n = 0;
    for (const Json& p : Pods()) n += p["spec"]["containers"][0]["image"] == image;
    return n;
  }

  testing::FakeDisruptionGate fake_gate_;
};

TEST_F(CloneSetPubTest, SpentBudgetHoldsTheInPlaceRolloutUntilItFrees) {
  CreateSet(3, {{"type", "InPlaceIfPossible"}, {"maxUnavailable", 3}});
  Reconcile();
  Reconcile();
  for (const Json& p : Pods()) MakeReady(kube::Name(p));
  Reconcile();
  EXPECT_THAT(fake_gate_.TakeAsked(), ::testing::IsEmpty()) << "nothing to update yet";
  PatchSpec({{"template", Template("registry.local/app:v2")}});

  // Spent: no pod is touched, one Warning event names the budget, a retry is scheduled.
  const int64_t pod_patches = server_->RequestCount("PATCH", "/pods/");
  EXPECT_EQ(Reconcile().requeue_after, inplace::kDisruptionRetry);
  EXPECT_EQ(fake_gate_.TakeAsked().size(), 1u) << "the round ends at the first denial";
  EXPECT_EQ(server_->RequestCount("PATCH", "/pods/"), pod_patches);
  EXPECT_EQ(AtImage("registry.local/app:v2"), 0);
  std::vector<Json> events = Events(inplace::kDisruptionDeniedReason);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "Warning");
  EXPECT_EQ(events[0]["involvedObject"]["kind"], "CloneSet");
  EXPECT_THAT(events[0]["message"].get<std::string>(),
              ::testing::HasSubstr("PodUnavailableBudget web-pub"));

  // One pod's worth frees: that pod is updated in place, the next is held again.
  fake_gate_.SetBudget(1);
  EXPECT_EQ(Reconcile().requeue_after, inplace::kDisruptionRetry);
  EXPECT_EQ(fake_gate_.TakeAsked().size(), 2u);
  EXPECT_EQ(AtImage("registry.local/app:v2"), 1);

  // Enough for all: the rest follow, the pod already allowed costs nothing again.
  fake_gate_.SetBudget(2);
  Reconcile();
  EXPECT_EQ(AtImage("registry.local/app:v2"), 3);
  std::set<std::string> uids;
  for (const Json& p : Pods()) uids.insert(kube::Uid(p));
  EXPECT_EQ(uids.size(), 3u);
}

TEST_F(CloneSetPubTest, ReCreateAsksTooBeforeMarking) {
  CreateSet(2, {{"type", "ReCreate"}, {"maxUnavailable", 2}});
  Reconcile();
  Reconcile();
  for (const Json& p : Pods()) MakeReady(kube::Name(p));
  Reconcile();
  PatchSpec({{"template", Template("registry.local/app:v2")}});
  Reconcile();
  EXPECT_EQ(fake_gate_.TakeAsked().size(), 1u);
  for (const Json& p : Pods()) EXPECT_FALSE(kube::Label(p, kSpecifiedDeleteLabel).has_value());
  fake_gate_.SetBudget(1);
  Reconcile();
  int marked = 0;
  for (const Json& p : Pods()) marked += kube::Label(p, kSpecifiedDeleteLabel).has_value();
  EXPECT_EQ(marked, 1);
}

}  // namespace
}  // namespace kruise::manager::cloneset
