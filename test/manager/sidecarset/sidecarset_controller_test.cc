// SidecarSet controller against the fake API server: real REST client, informers and event
// recorder, fake clock; the test plays the kubelet (a sidecar whose image changed restarts with a
// new container ID) and calls Reconcile itself, so every step is deterministic.
//
// The pods are owned by a ReplicaSet (not a Kruise workload), as a Deployment's pods with sidecars
// are: the shared pod cache keeps them whole because of kruise.io/sidecarset-injected-list.

#include "manager/sidecarset/sidecarset_controller.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "kube/object.h"
#include "kube/rest_client.h"
#include "manager/sidecarset/sidecarset_inject.h"
#include "manager/sidecarset/sidecarset_revision.h"
#include "manager/sidecarset/sidecarset_upgrade.h"
#include "manager/sidecarset/sidecarset_webhook.h"
#include "test/fakes/apiserver/fake_apiserver.h"
#include "test/fakes/apiserver/fake_cluster_test.h"
#include "test/fakes/fake_clock.h"
#include "test/manager/inplace/fake_disruption_gate.h"

namespace kruise::manager::sidecarset {
namespace controller_test {

using kube::Json;
constexpr char kSets[] = "sidecarsets.apps.kruise.io";
constexpr char kNs[] = "team";

class SidecarSetControllerTest : public testing::FakeClusterTest {
 protected:
  void SetUp() override {
    StartCluster();
    ASSERT_FALSE(HasFatalFailure());
    for (kube::InformerOptions o :
         {SidecarSetInformerOptions(), SharedInformers::PodOptions(), NamespaceInformerOptions()}) {
      AddInformer(o);
    }
    StartRecorder();
    SidecarSetReconcilerOptions ro;
    ro.clock = &clock_;
    ro.disruption_gate = gate_;
    reconciler_ = std::make_unique<SidecarSetReconciler>(
        client_.get(),
        SidecarSetInformers{informers_[0].get(), informers_[1].get(), informers_[2].get()},
        recorder_.get(), ro);
    reconciler_->ObserveThrough(informers_[1].get());
    SyncInformers();
  }

  // SidecarSet "log-set": sidecar "log" into pods labelled app=web of namespace team.
  static Json MakeSet(const std::string& image, const Json& strategy) {
    return {{"apiVersion", "apps.kruise.io/v1alpha1"},
            {"kind", "SidecarSet"},
            {"metadata", {{"name", "log-set"}}},
            {"spec",
             {{"selector", {{"matchLabels", {{"app", "web"}}}}},
              {"containers", {{{"name", "log"}, {"image", image}}}},
              {"updateStrategy", strategy}}}};
  }

  // The hot-upgrade variant: sidecar "log" injected as log-1 / log-2, idle on "empty:1".
  static Json MakeHotSet(const std::string& image, const Json& strategy) {
    Json set = MakeSet(image, strategy);
    set["spec"]["containers"][0]["upgradeStrategy"] = {{"upgradeType", "HotUpgrade"},
                                                       {"hotUpgradeEmptyImage", "empty:1"}};
    return set;
  }

  // The set (image fluentd:1) and `n` running, ready pods web-0.. it was injected into.
  void CreateSetAndPods(int n, const Json& strategy = {{"maxUnavailable", 1}}, bool hot = false) {
    Json set = hot ? MakeHotSet("fluentd:1", strategy) : MakeSet("fluentd:1", strategy);
    ASSERT_TRUE(server_->Seed(kSets, set).ok());
    for (int i = 0; i < n; ++i) {
      const std::string name = "web-" + std::to_string(i);
      Json pod = {{"apiVersion", "v1"},
                  {"kind", "Pod"},
                  {"metadata",
                   {{"name", name},
                    {"namespace", kNs},
                    {"labels", {{"app", "web"}}},
                    {"ownerReferences",
                     {{{"apiVersion", "apps/v1"},
                       {"kind", "ReplicaSet"},
                       {"name", "web-rs"},
                       {"uid", "rs-uid"},
                       {"controller", true}}}}}},
                  {"spec", {{"containers", {{{"name", "app"}, {"image", "nginx:1"}}}}}}};
      auto injected = InjectSidecars(&pod, {set}, clock_.Now());
      ASSERT_TRUE(injected.ok()) << injected.status();
      pod["spec"]["nodeName"] = "node-a";
      Json statuses = Json::array();
      for (const Json& c : pod["spec"]["containers"]) {
        const std::string cname = c["name"];
        statuses.push_back({{"name", cname},
                            {"image", c["image"]},
                            {"imageID", "sha256:" + cname},
                            {"containerID", "containerd://" + name + "-" + cname + "-0"},
                            {"restartCount", 0},
                            {"ready", true},
                            {"state", {{"running", {{"startedAt", "2020-01-01T00:00:00Z"}}}}}});
      }
      pod["status"] = {{"phase", "Running"},
                       {"conditions",
                        {{{"type", "Ready"},
                          {"status", "True"},
                          {"lastTransitionTime", "2020-01-01T00:00:00Z"}}}},
                       {"containerStatuses", statuses}};
      ASSERT_TRUE(server_->Seed("pods", pod).ok());
    }
  }

  void PatchSetSpec(const Json& spec_patch) {
    Json set = *server_->Get(kSets, "", "log-set");
    set["spec"].merge_patch(spec_patch);
    set["metadata"]["generation"] = kube::Generation(set) + 1;
    ASSERT_TRUE(server_->Put(kSets, set).ok());
  }

  // The kubelet: restarts every container whose spec image differs from its status.
  void RestartChanged(const std::string& name) {
    Json pod = *server_->Get("pods", kNs, name);
    clock_.Advance(absl::Seconds(2));
    for (Json& cs : pod["status"]["containerStatuses"]) {
      for (const Json& c : pod["spec"]["containers"]) {
        if (c["name"] != cs["name"] || c["image"] == cs["image"]) continue;
        cs["image"] = c["image"];
        cs["restartCount"] = cs["restartCount"].get<int>() + 1;
        cs["containerID"] = "containerd://" + name + "-" + cs["name"].get<std::string>() + "-" +
                            std::to_string(cs["restartCount"].get<int>());
        cs["state"] = {{"running", {{"startedAt", kube::FormatRfc3339(clock_.Now())}}}};
      }
    }
    ASSERT_TRUE(server_->Put("pods", pod).ok());
  }

  // Waits until the SidecarSet and pod caches hold what the server holds.
  void Sync() {
    const char* names[] = {kSets, "pods"};
    absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      bool same = true;
      for (int i = 0; i < 2 && same; ++i) {
        std::vector<Json> objs = server_->List(names[i]);
        for (const Json& o : objs) {
          auto cached = informers_[i]->store().Get(kube::StoreKey(o));
          if (cached == nullptr || kube::ResourceVersion(*cached) != kube::ResourceVersion(o)) {
            same = false;
          }
        }
        if (informers_[i]->store().size() != objs.size()) same = false;
        if (!informers_[i]->HandlersCaughtUp()) same = false;
      }
      if (same) return;
      absl::SleepFor(absl::Milliseconds(2));  // polling the cache against a deadline
    }
    FAIL() << "informers did not catch up";
  }

  kube::Result Reconcile(bool sync = true) {
    if (sync) Sync();
    auto r = reconciler_->Reconcile({"", "log-set"});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : kube::Result{};
  }

  // Names of the pods whose sidecar runs `image` in their spec.
  std::vector<std::string> PodsAt(const std::string& image) {
    std::vector<std::string> out;
    for (const Json& p : server_->List("pods", kNs)) {
      for (const Json& c : p["spec"]["containers"]) {
        if (c["name"] == "log" && c["image"] == image) out.push_back(kube::Name(p));
      }
    }
    return out;
  }

  Json Status() { return (*server_->Get(kSets, "", "log-set"))["status"]; }

  // Events with `reason` (after the recorder wrote what it had).
  std::vector<Json> Events(const std::string& reason) {
    EXPECT_TRUE(recorder_->WaitIdle(absl::Seconds(10)));
    std::vector<Json> out;
    for (const Json& e : server_->List("events")) {
      if (e.value("reason", "") == reason) out.push_back(e);
    }
    return out;
  }

  // Patches of pods (not of their status subresource).
  int64_t PodPatches() {
    int64_t n = server_->RequestCount("PATCH", "/pods/");
    for (const Json& p : server_->List("pods", kNs)) {
      n -= server_->RequestCount("PATCH", "/pods/" + kube::Name(p) + "/status");
    }
    return n;
  }
  int64_t PodStatusPatches() {
    int64_t n = 0;
    for (const Json& p : server_->List("pods", kNs)) {
      n += server_->RequestCount("PATCH", "/pods/" + kube::Name(p) + "/status");
    }
    return n;
  }
  // The pod's SidecarSetUpgradable condition (null when absent).
  Json Upgradable(const std::string& pod) {
    const Json p = *server_->Get("pods", kNs, pod);
    for (const Json& c : p["status"]["conditions"]) {
      if (c["type"] == kSidecarSetUpgradableCondition) return c;
    }
    return nullptr;
  }
  static std::string Image(const Json& pod, const std::string& container) {
    for (const Json& c : pod["spec"]["containers"]) {
      if (c["name"] == container) return c["image"];
    }
    return "";
  }
  // Hot pods: how many of log-1 / log-2 run a real image (by their status) and are ready.
  static int WorkingSidecars(const Json& pod) {
    int n = 0;
    for (const Json& cs : pod["status"]["containerStatuses"]) {
      n += (cs["name"] == "log-1" || cs["name"] == "log-2") && cs["image"] != "empty:1" &&
           cs["ready"] == true;
    }
    return n;
  }

  inplace::DisruptionGate* gate_ = nullptr;  // set before SetUp
  std::unique_ptr<SidecarSetReconciler> reconciler_;
};

TEST_F(SidecarSetControllerTest, ImageChangeUpgradesOnePodAtATime) {
  CreateSetAndPods(3);
  EXPECT_EQ(Reconcile().requeue_after, absl::ZeroDuration());
  Json status = Status();
  EXPECT_EQ(status["observedGeneration"], 1);
  EXPECT_EQ(status["matchedPods"], 3);
  EXPECT_EQ(status["updatedPods"], 3);
  EXPECT_EQ(status["readyPods"], 3);
  EXPECT_EQ(status["updatedReadyPods"], 3);
  EXPECT_FALSE(status.contains("latestRevision"));
  EXPECT_EQ(PodPatches(), 0);

  PatchSetSpec({{"containers", {{{"name", "log"}, {"image", "fluentd:2"}}}}});
  std::vector<std::string> order;
  for (int round = 1; round <= 3; ++round) {
    EXPECT_GT(Reconcile().requeue_after, absl::ZeroDuration());
    std::vector<std::string> upgraded = PodsAt("fluentd:2");
    ASSERT_EQ(upgraded.size(), static_cast<size_t>(round)) << "round " << round;
    std::string picked;
    for (const std::string& n : upgraded) {
      if (std::find(order.begin(), order.end(), n) == order.end()) picked = n;
    }
    order.push_back(picked);
    Json pod = *server_->Get("pods", kNs, picked);
    EXPECT_TRUE(kube::Annotations(pod).count(kSidecarSetInPlaceUpdateStateAnnotation));
    // Mid-upgrade (the kubelet has not restarted it): nobody else is picked.
    EXPECT_GT(Reconcile().requeue_after, absl::ZeroDuration());
    EXPECT_EQ(PodsAt("fluentd:2").size(), static_cast<size_t>(round));
    status = Status();
    EXPECT_EQ(status["observedGeneration"], 2);
    EXPECT_EQ(status["updatedPods"], round);
    EXPECT_EQ(status["readyPods"], 2);  // the upgrading pod is not ready
    EXPECT_EQ(status["updatedReadyPods"], round - 1);
    RestartChanged(picked);
  }
  EXPECT_EQ(PodPatches(), 3);
  EXPECT_EQ(Reconcile().requeue_after, absl::ZeroDuration());
  status = Status();
  EXPECT_EQ(status["matchedPods"], 3);
  EXPECT_EQ(status["updatedPods"], 3);
  EXPECT_EQ(status["readyPods"], 3);
  EXPECT_EQ(status["updatedReadyPods"], 3);
  EXPECT_EQ(PodPatches(), 3);
  EXPECT_EQ(Events("UpgradedPods").size(), 3u);
  EXPECT_THAT(Events("NotUpgradablePods"), ::testing::IsEmpty());
}

TEST_F(SidecarSetControllerTest, PartitionKeepsPodsAtTheOldVersion) {
  CreateSetAndPods(3, {{"partition", 2}, {"maxUnavailable", 3}});
  Reconcile();
  PatchSetSpec({{"containers", {{{"name", "log"}, {"image", "fluentd:2"}}}}});
  Reconcile();
  std::vector<std::string> upgraded = PodsAt("fluentd:2");
  ASSERT_EQ(upgraded.size(), 1u);
  RestartChanged(upgraded[0]);
  EXPECT_EQ(Reconcile().requeue_after, absl::ZeroDuration());
  EXPECT_EQ(PodsAt("fluentd:2").size(), 1u);
  EXPECT_EQ(PodsAt("fluentd:1").size(), 2u);
  Json status = Status();
  EXPECT_EQ(status["matchedPods"], 3);
  EXPECT_EQ(status["updatedPods"], 1);
  EXPECT_EQ(status["updatedReadyPods"], 1);
  EXPECT_EQ(status["readyPods"], 3);
}

TEST_F(SidecarSetControllerTest, NonImageChangeUpgradesNothingAndReportsEachPodOnce) {
  CreateSetAndPods(3);
  // A pod injected by the set whose labels no longer match is not the set's.
  Json stray = *server_->Get("pods", kNs, "web-2");
  stray["metadata"]["labels"]["app"] = "other";
  ASSERT_TRUE(server_->Put("pods", stray).ok());
  Reconcile();
  EXPECT_EQ(Status()["matchedPods"], 2);

  PatchSetSpec(
      {{"containers",
        {{{"name", "log"}, {"image", "fluentd:2"}, {"env", {{{"name", "A"}, {"value", "1"}}}}}}}});
  EXPECT_EQ(Reconcile().requeue_after, absl::ZeroDuration());
  Reconcile();  // again: no second report
  EXPECT_EQ(PodPatches(), 0);
  EXPECT_EQ(PodsAt("fluentd:1").size(), 3u);
  Json status = Status();
  EXPECT_EQ(status["matchedPods"], 2);
  EXPECT_EQ(status["updatedPods"], 0);
  EXPECT_EQ(status["readyPods"], 2);
  EXPECT_EQ(status["updatedReadyPods"], 0);
  std::vector<Json> events = Events("NotUpgradablePods");
  ASSERT_EQ(events.size(), 2u);
  for (const Json& e : events) {
    EXPECT_EQ(e["involvedObject"]["kind"], "SidecarSet");
    EXPECT_EQ(e.value("count", 1), 1);
  }
  EXPECT_THAT(events[0]["message"].get<std::string>(), ::testing::HasSubstr("not upgradable"));
}

// The pod cache stops seeing changes: the pod just patched still looks old and ready there, but
// is neither patched again nor lets another pod take its place in the maxUnavailable budget.
TEST_F(SidecarSetControllerTest, StaleCacheNeverPatchesAPodTwice) {
  CreateSetAndPods(3);
  Reconcile();
  PatchSetSpec({{"containers", {{{"name", "log"}, {"image", "fluentd:2"}}}}});
  Sync();
  informers_[1]->Stop();  // the pod cache is frozen from here on
  auto r = reconciler_->Reconcile({"", "log-set"});
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<std::string> upgraded = PodsAt("fluentd:2");
  ASSERT_EQ(upgraded.size(), 1u);
  EXPECT_EQ(PodPatches(), 1);
  for (int i = 0; i < 2; ++i) {
    r = reconciler_->Reconcile({"", "log-set"});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_GT(r->requeue_after, absl::ZeroDuration());  // waits for the cache
  }
  EXPECT_EQ(PodPatches(), 1);
  EXPECT_EQ(PodsAt("fluentd:2"), upgraded);
}

// Every pod changed on the server behind the cache's back: the resourceVersion test refuses the
// patch, nothing changes, the set is requeued, and the next round tries again on fresh data only.
TEST_F(SidecarSetControllerTest, ConflictPatchesNothingAndRequeues) {
  CreateSetAndPods(3);
  Reconcile();
  PatchSetSpec({{"containers", {{{"name", "log"}, {"image", "fluentd:2"}}}}});
  Sync();
  informers_[1]->Stop();
  for (const Json& p : server_->List("pods", kNs)) {
    Json touched = p;
    touched["metadata"]["labels"]["touched"] = "yes";
    ASSERT_TRUE(server_->Put("pods", touched).ok());
  }
  auto r = reconciler_->Reconcile({"", "log-set"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->requeue_after, absl::ZeroDuration());
  EXPECT_EQ(PodPatches(), 1);  // one refused patch, no retry within the round
  EXPECT_THAT(PodsAt("fluentd:2"), ::testing::IsEmpty());
  for (const Json& p : server_->List("pods", kNs)) {
    EXPECT_EQ(kube::Label(p, "touched"), "yes");  // the other writer's change stands
  }
  EXPECT_THAT(Events("FailedUpgradePod"), ::testing::IsEmpty());
}

TEST_F(SidecarSetControllerTest, HotUpgradeCompletesInTwoStepsPerPod) {
  CreateSetAndPods(2, {{"maxUnavailable", 1}}, /*hot=*/true);
  Reconcile();
  EXPECT_EQ(Status()["readyPods"], 2);
  Json hot = MakeHotSet("fluentd:2", {})["spec"]["containers"];
  PatchSetSpec({{"containers", hot}});
  auto every_pod_keeps_a_working_sidecar = [&] {
    for (const Json& p : server_->List("pods", kNs)) {
      EXPECT_GE(WorkingSidecars(p), 1) << kube::Name(p);
    }
  };
  std::vector<std::string> done;
  for (int round = 1; round <= 2; ++round) {
    // Step 1: one pod (maxUnavailable 1): its idle log-2 gets the image and works.
    EXPECT_GT(Reconcile().requeue_after, absl::ZeroDuration());
    std::string picked;
    for (const Json& p : server_->List("pods", kNs)) {
      if (Image(p, "log-2") == "fluentd:2" &&
          std::find(done.begin(), done.end(), kube::Name(p)) == done.end()) {
        picked = kube::Name(p);
      }
    }
    ASSERT_FALSE(picked.empty()) << "round " << round;
    Json pod = *server_->Get("pods", kNs, picked);
    EXPECT_EQ(Image(pod, "log-1"), "fluentd:1");  // the working one is left alone
    EXPECT_EQ(kube::Annotations(pod)[kSidecarSetWorkingHotUpgradeContainerAnnotation],
              R"({"log":"log-2"})");
    // The set's resourceVersion as the controller saw it (OpenKruise's value), not injection's.
    const std::string version = kube::Annotations(pod)["version.sidecarset.kruise.io/log-2"];
    EXPECT_NE(version, "0");
    EXPECT_NE(version, "1");
    EXPECT_FALSE(version.empty());
    EXPECT_EQ(kube::Annotations(pod)["versionalt.sidecarset.kruise.io/log-1"], version);
    EXPECT_EQ(Upgradable(picked)["status"], "True");
    every_pod_keeps_a_working_sidecar();
    // Waiting for the kubelet: nothing else happens.
    Reconcile();
    EXPECT_EQ(Image(*server_->Get("pods", kNs, picked), "log-1"), "fluentd:1");
    EXPECT_EQ(Status()["updatedPods"], round);
    EXPECT_EQ(Status()["readyPods"], 1);
    RestartChanged(picked);  // log-2 on fluentd:2, ready
    every_pod_keeps_a_working_sidecar();

    // Step 2: log-1 back to the empty image; no other pod starts in that round.
    Reconcile();
    pod = *server_->Get("pods", kNs, picked);
    EXPECT_EQ(Image(pod, "log-1"), "empty:1");
    EXPECT_EQ(Image(pod, "log-2"), "fluentd:2");
    EXPECT_EQ(kube::Annotations(pod)["version.sidecarset.kruise.io/log-1"], "0");
    int upgrading = 0;
    for (const Json& p : server_->List("pods", kNs)) upgrading += Image(p, "log-2") == "fluentd:2";
    EXPECT_EQ(upgrading, round);
    every_pod_keeps_a_working_sidecar();
    // Still unavailable until the kubelet restarted log-1.
    Reconcile();
    EXPECT_EQ(Status()["readyPods"], 1);
    RestartChanged(picked);
    every_pod_keeps_a_working_sidecar();
    done.push_back(picked);
  }
  EXPECT_EQ(Reconcile().requeue_after, absl::ZeroDuration());
  Json status = Status();
  EXPECT_EQ(status["matchedPods"], 2);
  EXPECT_EQ(status["updatedPods"], 2);
  EXPECT_EQ(status["readyPods"], 2);
  EXPECT_EQ(status["updatedReadyPods"], 2);
  EXPECT_EQ(PodPatches(), 4);        // two steps per pod
  EXPECT_EQ(PodStatusPatches(), 2);  // SidecarSetUpgradable once per pod
  EXPECT_EQ(Events("UpgradedPods").size(), 2u);
  std::vector<Json> resets = Events("ResetContainerSucceed");
  ASSERT_EQ(resets.size(), 2u);
  EXPECT_EQ(resets[0]["involvedObject"]["kind"], "Pod");
}

TEST_F(SidecarSetControllerTest, UpgradableConditionIsWrittenOnlyWhenItChanges) {
  CreateSetAndPods(2, {{"maxUnavailable", 2}});
  Reconcile();
  PatchSetSpec(
      {{"containers",
        {{{"name", "log"}, {"image", "fluentd:2"}, {"env", {{{"name", "A"}, {"value", "1"}}}}}}}});
  Reconcile();
  Reconcile();
  Reconcile();
  EXPECT_EQ(PodStatusPatches(), 2);  // once per pod, however many rounds
  EXPECT_EQ(PodPatches(), 0);
  for (const char* pod : {"web-0", "web-1"}) {
    Json c = Upgradable(pod);
    EXPECT_EQ(c["status"], "False") << pod;
    EXPECT_EQ(c["reason"], "UpdateImmutableField");
    EXPECT_EQ(c["message"], R"({"log-set":false})");
  }
  // Back to an image-only change: upgraded, and marked upgradable again.
  PatchSetSpec({{"containers", {{{"name", "log"}, {"image", "fluentd:2"}}}}});
  Reconcile();
  EXPECT_EQ(PodsAt("fluentd:2").size(), 2u);
  Reconcile();
  for (const char* pod : {"web-0", "web-1"}) {
    Json c = Upgradable(pod);
    EXPECT_EQ(c["status"], "True") << pod;
    EXPECT_EQ(c["reason"], "AllSidecarsetUpgradable");
    EXPECT_EQ(c["message"], R"({"log-set":true})");
  }
  EXPECT_EQ(PodStatusPatches(), 4);
}

TEST(SidecarSetsOfPod, ReadsTheInjectedList) {
  Json pod = {
      {"metadata",
       {{"namespace", "team"}, {"annotations", {{kSidecarSetInjectedListAnnotation, "a, b,,c"}}}}}};
  std::vector<std::string> names;
  for (const kube::Request& r : SidecarSetsOfPod(pod)) {
    EXPECT_EQ(r.ns, "");
    names.push_back(r.name);
  }
  EXPECT_THAT(names, ::testing::ElementsAre("a", "b", "c"));
  EXPECT_THAT(SidecarSetsOfPod(Json::object()), ::testing::IsEmpty());
  // The pod cache's index reads the list the same way (the controller looks pods up by it).
  EXPECT_THAT(
      SharedInformers::PodOptions().indexers[SharedInformers::kInjectedSidecarSetIndex](pod),
      ::testing::ElementsAre("a", "b", "c"));
}

// The same with the revision history kept (informer of SidecarSet ControllerRevisions in
// kruise-system, as the manager wires it).
class SidecarSetRevisionControllerTest : public SidecarSetControllerTest {
 protected:
  static constexpr char kRevisions[] = "controllerrevisions.apps";
  static constexpr char kManagerNs[] = "kruise-system";

  void SetUp() override {
    StartCluster();
    ASSERT_FALSE(HasFatalFailure());
    for (kube::InformerOptions o :
         {SidecarSetInformerOptions(), SharedInformers::PodOptions(), NamespaceInformerOptions(),
          SidecarSetRevisionInformerOptions(kManagerNs)}) {
      AddInformer(o);
    }
    StartRecorder();
    SidecarSetReconcilerOptions ro;
    ro.clock = &clock_;
    ro.manager_namespace = kManagerNs;
    reconciler_ = std::make_unique<SidecarSetReconciler>(
        client_.get(),
        SidecarSetInformers{informers_[0].get(), informers_[1].get(), informers_[2].get(),
                            informers_[3].get()},
        recorder_.get(), ro);
    reconciler_->ObserveThrough(informers_[1].get());
    SyncInformers();
  }

  // Reconciles once the revision cache holds what the server holds (then the set and pods).
  kube::Result ReconcileAll() {
    absl::Time deadline = absl::Now() + absl::Seconds(10);
    for (;;) {
      std::vector<Json> objs = server_->List(kRevisions, kManagerNs);
      bool same = informers_[3]->store().size() == objs.size() && informers_[3]->HandlersCaughtUp();
      for (const Json& o : objs) {
        auto cached = informers_[3]->store().Get(kube::StoreKey(o));
        same =
            same && cached != nullptr && kube::ResourceVersion(*cached) == kube::ResourceVersion(o);
      }
      if (same) break;
      if (absl::Now() > deadline) {
        ADD_FAILURE() << "revision informer did not catch up";
        break;
      }
      absl::SleepFor(absl::Milliseconds(2));  // polling the cache against a deadline
    }
    return Reconcile();
  }

  // Revision name -> revision number, of what the server holds.
  std::map<std::string, int64_t> Revisions() {
    std::map<std::string, int64_t> out;
    for (const Json& r : server_->List(kRevisions, kManagerNs)) {
      out[kube::Name(r)] = r.value("revision", int64_t{0});
    }
    return out;
  }

  std::string NameAt(const std::string& image) {
    Json set = MakeSet(image, {{"paused", true}});
    return kube::Name(NewSidecarSetRevision(set, kManagerNs, 1, 0));
  }
};

TEST_F(SidecarSetRevisionControllerTest, RevisionCreatedOnceLatestRecordedRollbackRenumbers) {
  CreateSetAndPods(2);
  ReconcileAll();
  const std::string rev1 = NameAt("fluentd:1");
  EXPECT_EQ(Revisions(), (std::map<std::string, int64_t>{{rev1, 1}}));
  Json r1 = *server_->Get(kRevisions, kManagerNs, rev1);
  EXPECT_EQ(kube::Label(r1, kSidecarSetNameLabel), "log-set");
  auto owner = kube::ControllerOf(r1);
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(owner->uid, kube::Uid(*server_->Get(kSets, "", "log-set")));
  EXPECT_EQ(Status()["latestRevision"], rev1);
  EXPECT_EQ(Status()["collisionCount"], 0);
  // Reconciled again: still one revision, created once.
  ReconcileAll();
  Reconcile();
  EXPECT_EQ(Revisions().size(), 1u);
  EXPECT_EQ(server_->RequestCount("POST", "/controllerrevisions"), 1);

  // A new image: a second revision, recorded by status and by the pods upgraded.
  PatchSetSpec({{"containers", {{{"name", "log"}, {"image", "fluentd:2"}}}}});
  ReconcileAll();
  const std::string rev2 = NameAt("fluentd:2");
  EXPECT_EQ(Revisions(), (std::map<std::string, int64_t>{{rev1, 1}, {rev2, 2}}));
  EXPECT_EQ(Status()["latestRevision"], rev2);
  std::vector<std::string> upgraded = PodsAt("fluentd:2");
  ASSERT_EQ(upgraded.size(), 1u);
  EXPECT_EQ(PodSidecarSetControllerRevision(*server_->Get("pods", kNs, upgraded[0]), "log-set"),
            rev2);

  // Back to fluentd:1: no new revision, the first one becomes the newest.
  PatchSetSpec({{"containers", {{{"name", "log"}, {"image", "fluentd:1"}}}}});
  ReconcileAll();
  EXPECT_EQ(Revisions(), (std::map<std::string, int64_t>{{rev1, 3}, {rev2, 2}}));
  EXPECT_EQ(Status()["latestRevision"], rev1);
}

TEST_F(SidecarSetRevisionControllerTest, HistoryPrunedAtTheLimitKeepingRevisionsPodsUse) {
  CreateSetAndPods(1, {{"paused", true}});  // no upgrades: pods keep what they record
  PatchSetSpec({{"revisionHistoryLimit", 2}});
  ReconcileAll();
  const std::string rev1 = NameAt("fluentd:1");
  // web-0 records revision 1 (as if injected from it).
  Json pod = *server_->Get("pods", kNs, "web-0");
  Json hash =
      Json::parse(pod["metadata"]["annotations"][kSidecarSetHashAnnotation].get<std::string>());
  hash["log-set"]["controllerRevision"] = rev1;
  pod["metadata"]["annotations"][kSidecarSetHashAnnotation] = hash.dump();
  ASSERT_TRUE(server_->Put("pods", pod).ok());
  for (const char* image : {"fluentd:2", "fluentd:3", "fluentd:4"}) {
    PatchSetSpec({{"containers", {{{"name", "log"}, {"image", image}}}}});
    ReconcileAll();
  }
  // Four revisions, limit 2: revision 1 is in use, 2 and 3 go.
  EXPECT_EQ(Revisions(), (std::map<std::string, int64_t>{{rev1, 1}, {NameAt("fluentd:4"), 4}}));
  EXPECT_EQ(Status()["latestRevision"], NameAt("fluentd:4"));
  // Nobody uses revision 1 any more: the limit holds.
  pod = *server_->Get("pods", kNs, "web-0");
  hash["log-set"].erase("controllerRevision");
  pod["metadata"]["annotations"][kSidecarSetHashAnnotation] = hash.dump();
  ASSERT_TRUE(server_->Put("pods", pod).ok());
  PatchSetSpec({{"containers", {{{"name", "log"}, {"image", "fluentd:5"}}}}});
  ReconcileAll();
  EXPECT_EQ(Revisions(),
            (std::map<std::string, int64_t>{{NameAt("fluentd:4"), 4}, {NameAt("fluentd:5"), 5}}));
}

// The PodUnavailableBudget (issue 17), through a stand-in gate: each pod picked is put to it
// first; a denied pod is skipped, the others go on.
class SidecarSetPubTest : public SidecarSetControllerTest {
 protected:
  SidecarSetPubTest() { gate_ = &fake_gate_; }
  testing::FakeDisruptionGate fake_gate_;
};

TEST_F(SidecarSetPubTest, SpentBudgetHoldsTheUpgradeUntilItFrees) {
  CreateSetAndPods(3, {{"maxUnavailable", 3}});
  Reconcile();
  PatchSetSpec({{"containers", {{{"name", "log"}, {"image", "fluentd:2"}}}}});

  EXPECT_EQ(Reconcile().requeue_after, inplace::kDisruptionRetry);
  EXPECT_EQ(fake_gate_.TakeAsked().size(), 3u) << "each pod asked, none stops the others";
  EXPECT_EQ(PodPatches(), 0);
  EXPECT_THAT(PodsAt("fluentd:2"), ::testing::IsEmpty());
  std::vector<Json> events = Events(inplace::kDisruptionDeniedReason);
  ASSERT_EQ(events.size(), 1u) << "one event for the round";
  EXPECT_EQ(events[0]["type"], "Warning");
  EXPECT_EQ(events[0]["involvedObject"]["kind"], "SidecarSet");
  const std::string message = events[0]["message"];
  EXPECT_THAT(message, ::testing::HasSubstr("held by PodUnavailableBudget web-pub"));
  for (const char* pod : {"team/web-0", "team/web-1", "team/web-2"}) {
    EXPECT_THAT(message, ::testing::HasSubstr(pod));
  }
  EXPECT_THAT(Events("UpgradedPods"), ::testing::IsEmpty());

  // One pod's worth frees: one pod is upgraded, the other two are held again.
  fake_gate_.SetBudget(1);
  EXPECT_EQ(Reconcile().requeue_after, inplace::kDisruptionRetry);
  EXPECT_EQ(PodsAt("fluentd:2").size(), 1u);
  EXPECT_EQ(PodPatches(), 1);
}

}  // namespace controller_test
}  // namespace kruise::manager::sidecarset
