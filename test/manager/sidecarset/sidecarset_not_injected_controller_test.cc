// The note on pods created without the sidecars of a matching SidecarSet
// (sidecarset_not_injected.h) against the fake API server: the whole "sidecarset" controller
// group run by a kube::Manager (its own informers, the pod cache's real transform, so pods owned
// by a ReplicaSet are cached as stubs), restarted as a new leader would be; and the reconciler
// alone for a pod that changed behind the cache. Semantic time (creation timestamps) runs on a
// FakeClock; waits are condition waits with real-time deadlines.

#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "kube/manager.h"
#include "kube/object.h"
#include "kube/rest_client.h"
#include "manager/controller_group.h"
#include "manager/sidecarset/sidecarset_controller.h"
#include "manager/sidecarset/sidecarset_inject.h"
#include "manager/sidecarset/sidecarset_not_injected.h"
#include "manager/sidecarset/sidecarset_webhook.h"
#include "test/fakes/apiserver/fake_apiserver.h"
#include "test/fakes/apiserver/rest_client_for.h"
#include "test/fakes/fake_clock.h"
#include "test/kube/informer_test_util.h"

namespace kruise::manager::sidecarset {
namespace not_injected_controller_test {

using kube::Json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
constexpr char kSets[] = "sidecarsets.apps.kruise.io";
constexpr char kNs[] = "team";

// Waits (real time, bounded) until `pred` holds.
bool Eventually(const std::function<bool()>& pred, absl::Duration timeout = absl::Seconds(20)) {
  return kube::testing_util::Eventually(pred, timeout);
}

class NotInjectedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_.SetTime(absl::FromUnixSeconds(1'800'000'000));
    testing::FakeApiServerOptions so;
    so.clock = &clock_;
    api_ = std::make_unique<testing::FakeApiServer>(so);
    ASSERT_TRUE(api_->Start().ok());
    auto client = testing::UnthrottledClientFor(*api_);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    ASSERT_TRUE(
        api_->Seed("namespaces",
                   {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", kNs}}}})
            .ok());
  }

  // SidecarSet `name` injecting sidecar `name`-c into pods labelled app=web.
  void SeedSet(const std::string& name) {
    Json set = {{"apiVersion", "apps.kruise.io/v1alpha1"},
                {"kind", "SidecarSet"},
                {"metadata", {{"name", name}}},
                {"spec",
                 {{"selector", {{"matchLabels", {{"app", "web"}}}}},
                  {"containers", {{{"name", name + "-c"}, {"image", "busybox:1"}}}}}}};
    ASSERT_TRUE(api_->Seed(kSets, set).ok());
  }

  // Running pod `name` labelled app=web, owned by a ReplicaSet (a stub in the manager's pod
  // cache unless it has injected sidecars), with annotation keep=me and `annotations`.
  void SeedPod(const std::string& name, const Json& annotations = Json::object()) {
    Json pod = {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata",
                 {{"name", name},
                  {"namespace", kNs},
                  {"labels", {{"app", "web"}}},
                  {"annotations", {{"keep", "me"}}},
                  {"ownerReferences",
                   {{{"apiVersion", "apps/v1"},
                     {"kind", "ReplicaSet"},
                     {"name", "web-rs"},
                     {"uid", "rs-uid"},
                     {"controller", true}}}}}},
                {"spec", {{"containers", {{{"name", "main"}, {"image", "busybox:1"}}}}}},
                {"status", {{"phase", "Running"}}}};
    pod["metadata"]["annotations"].update(annotations);
    ASSERT_TRUE(api_->Seed("pods", pod).ok());
  }

  Json Pod(const std::string& name) { return *api_->Get("pods", kNs, name); }
  std::optional<std::string> Noted(const std::string& name) {
    return kube::Annotation(Pod(name), kSidecarSetNotInjectedAnnotation);
  }
  // PATCHes of the pod itself (not of its status).
  int64_t PodPatches(const std::string& name) {
    const std::string path = std::string("/namespaces/") + kNs + "/pods/" + name;
    return api_->RequestCount("PATCH", path) - api_->RequestCount("PATCH", path + "/status");
  }
  // SidecarSetNotInjected events, after the recorder wrote what it had.
  std::vector<Json> Events() {
    if (recorder_ != nullptr) {
      EXPECT_TRUE(recorder_->WaitIdle(absl::Seconds(10)));
    }
    std::vector<Json> out;
    for (const Json& e : api_->List("events")) {
      if (e.value("reason", "") == kSidecarSetNotInjectedReason) out.push_back(e);
    }
    return out;
  }
  static std::vector<std::string> InvolvedPods(const std::vector<Json>& events) {
    std::vector<std::string> out;
    for (const Json& e : events) out.push_back(e["involvedObject"].value("name", ""));
    std::sort(out.begin(), out.end());
    return out;
  }

  testing::FakeClock clock_;
  std::unique_ptr<testing::FakeApiServer> api_;
  std::unique_ptr<kube::RestKubeClient> client_;
  std::unique_ptr<kube::EventRecorder> recorder_;
};

// ---- The controller group, run and restarted ----------------------------------------------------

class NotInjectedGroupTest : public NotInjectedTest {
 protected:
  void TearDown() override { StopManager(); }

  // A fresh leader: recorder, manager and group, as a restarted kruise-manager has.
  void StartManager() {
    kube::EventRecorderOptions eo;
    eo.clock = &clock_;
    recorder_ = std::make_unique<kube::EventRecorder>(client_.get(), eo);
    kube::ManagerOptions mo;
    mo.clock = &clock_;
    manager_ = std::make_unique<kube::Manager>(client_.get(), mo);
    ControllerContext ctx;
    ctx.client = client_.get();
    ctx.manager = manager_.get();
    ctx.recorder = recorder_.get();
    ctx.clock = &clock_;
    group_ = NewSidecarSetControllerGroup();
    ASSERT_TRUE(group_->Register(ctx).ok());
    stop_ = std::stop_source();
    runner_ = std::thread([this] { manager_->Run(stop_.get_token()); });
    ASSERT_TRUE(Eventually([this] { return manager_->Elected(); }));
  }
  void StopManager() {
    stop_.request_stop();
    if (runner_.joinable()) runner_.join();
    if (recorder_ != nullptr) {
      EXPECT_TRUE(recorder_->WaitIdle(absl::Seconds(10)));
    }
    group_.reset();
    manager_.reset();
  }

  std::unique_ptr<kube::Manager> manager_;
  std::unique_ptr<ControllerGroup> group_;
  std::stop_source stop_;
  std::thread runner_;
};

TEST_F(NotInjectedGroupTest, PodsCreatedAfterTheirSetsAreNotedOnceAcrossRestarts) {
  SeedPod("old");  // before any set: legitimately untouched
  clock_.Advance(absl::Seconds(10));
  SeedSet("log-set");
  SeedSet("audit-set");
  clock_.Advance(absl::Seconds(10));
  SeedPod("injected", {{kSidecarSetInjectedListAnnotation, "audit-set,log-set"}});
  SeedPod("half", {{kSidecarSetInjectedListAnnotation, "log-set"}});
  SeedPod("plain");  // created while no manager answered

  // The leader's first pass finds the pods that were created while it was away.
  StartManager();
  ASSERT_TRUE(Eventually([&] { return Noted("plain") == "audit-set,log-set"; }))
      << Pod("plain").dump();
  ASSERT_TRUE(Eventually([&] { return Noted("half") == "audit-set"; })) << Pod("half").dump();
  // A pod created while it runs: its own event.
  clock_.Advance(absl::Seconds(10));
  SeedPod("late");
  ASSERT_TRUE(Eventually([&] { return Noted("late") == "audit-set,log-set"; }));

  EXPECT_EQ(Noted("old"), std::nullopt);
  EXPECT_EQ(Noted("injected"), std::nullopt);
  for (const char* name : {"plain", "half", "late", "old", "injected"}) {
    const Json pod = Pod(name);
    EXPECT_EQ(kube::Annotation(pod, "keep"), "me") << name;  // other annotations untouched
    EXPECT_EQ(kube::Label(pod, "app"), "web") << name;
    EXPECT_EQ(pod["spec"]["containers"].size(), 1u) << name;
  }
  EXPECT_EQ(kube::Annotation(Pod("half"), kSidecarSetInjectedListAnnotation), "log-set");
  EXPECT_EQ(PodPatches("plain"), 1);
  EXPECT_EQ(PodPatches("late"), 1);
  EXPECT_EQ(PodPatches("old"), 0);
  // The recorder sends an event after the patch it reports: wait for it, not only the patch.
  ASSERT_TRUE(Eventually([&] { return InvolvedPods(Events()).size() >= 3; }));
  std::vector<Json> events = Events();
  EXPECT_THAT(InvolvedPods(events), ElementsAre("half", "late", "plain"));
  for (const Json& e : events) {
    const std::string pod = e["involvedObject"].value("name", "");
    EXPECT_EQ(e.value("type", ""), "Warning") << pod;
    EXPECT_EQ(e.value("count", 0), 1) << pod;
    EXPECT_EQ(e["involvedObject"].value("kind", ""), "Pod") << pod;
    EXPECT_EQ(e["involvedObject"].value("uid", ""), kube::Uid(Pod(pod))) << pod;
    const std::string message = e.value("message", "");
    EXPECT_THAT(message, HasSubstr("pod webhook did not inject")) << pod;
    if (pod == "half") {
      EXPECT_THAT(message, HasSubstr("SidecarSet audit-set "));
      EXPECT_THAT(message, Not(HasSubstr("log-set")));
    } else {
      EXPECT_THAT(message, HasSubstr("SidecarSets audit-set, log-set "));
    }
  }

  // A new leader (restart): its first pass notes nothing again. A pod created after the restart
  // is noted, and the single worker has gone through the first pass (queued first) by then.
  StopManager();
  clock_.Advance(absl::Seconds(10));
  StartManager();
  SeedPod("after-restart");
  ASSERT_TRUE(Eventually([&] { return Noted("after-restart") == "audit-set,log-set"; }));
  EXPECT_EQ(PodPatches("plain"), 1);
  EXPECT_EQ(PodPatches("late"), 1);
  EXPECT_EQ(PodPatches("old"), 0);
  EXPECT_EQ(PodPatches("injected"), 0);
  EXPECT_EQ(Noted("half"), "audit-set");
  ASSERT_TRUE(Eventually([&] { return InvolvedPods(Events()).size() >= 4; }));
  EXPECT_THAT(InvolvedPods(Events()), ElementsAre("after-restart", "half", "late", "plain"));
}

// ---- The reconciler alone ----------------------------------------------------------------------

class NotInjectedReconcilerTest : public NotInjectedTest {
 protected:
  void StartCaches() {
    for (kube::InformerOptions o :
         {SidecarSetInformerOptions(), SharedInformers::PodOptions(), NamespaceInformerOptions()}) {
      informers_.push_back(std::make_unique<kube::Informer>(client_.get(), &clock_, o));
    }
    sets_.Attach(informers_[0].get());
    reconciler_ = std::make_unique<SidecarSetNotInjectedReconciler>(
        client_.get(), &sets_, informers_[1].get(), informers_[2].get(), nullptr,
        [this](const kube::Request& r) { enqueued_.push_back(r.Key()); },
        SidecarSetNotInjectedOptions{});
    for (auto& i : informers_) i->Start();
    for (auto& i : informers_) ASSERT_TRUE(i->WaitForSync(clock_.Now() + absl::Seconds(10)));
  }
  void TearDown() override {
    for (auto& i : informers_) i->RequestStop();
    for (auto& i : informers_) i->Stop();
  }
  // Waits until the pod cache holds what the server holds and its handlers saw it.
  void SyncPods() {
    ASSERT_TRUE(Eventually([&] {
      for (const Json& p : api_->List("pods", kNs)) {
        auto cached = informers_[1]->store().Get(kube::StoreKey(p));
        if (cached == nullptr || kube::ResourceVersion(*cached) != kube::ResourceVersion(p)) {
          return false;
        }
      }
      return informers_[1]->HandlersCaughtUp();
    }));
  }

  std::vector<std::unique_ptr<kube::Informer>> informers_;  // sets, pods, namespaces
  CreatedSidecarSets sets_;
  std::unique_ptr<SidecarSetNotInjectedReconciler> reconciler_;
  std::vector<std::string> enqueued_;
};

// The pod changed on the server behind the cache's back: the merge patch's resourceVersion makes
// the API server refuse it, nothing is written, the pod is requeued; with the cache caught up the
// next reconcile writes the note.
TEST_F(NotInjectedReconcilerTest, PodChangedSinceTheCacheSawItIsNotWrittenFromStaleData) {
  SeedSet("log-set");
  clock_.Advance(absl::Seconds(5));
  SeedPod("plain");
  StartCaches();
  SyncPods();
  auto r = reconciler_->Reconcile(SidecarSetNotInjectedReconciler::AllPods());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(enqueued_, ElementsAre("team/plain"));

  informers_[1]->Stop();  // the pod cache is frozen from here on
  Json changed = Pod("plain");
  changed["metadata"]["annotations"][kSidecarSetNotInjectedAnnotation] = "other-set";
  ASSERT_TRUE(api_->Put("pods", changed).ok());
  r = reconciler_->Reconcile({kNs, "plain"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->requeue_after, absl::ZeroDuration());
  EXPECT_EQ(PodPatches("plain"), 1);       // refused
  EXPECT_EQ(Noted("plain"), "other-set");  // the other writer's value stands

  // A fresh cache: the names already there are merged with ours.
  TearDown();
  informers_.clear();
  StartCaches();
  SyncPods();
  r = reconciler_->Reconcile({kNs, "plain"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->requeue_after, absl::ZeroDuration());
  EXPECT_EQ(Noted("plain"), "log-set,other-set");
  EXPECT_EQ(kube::Annotation(Pod("plain"), "keep"), "me");
  SyncPods();
  EXPECT_THAT(reconciler_->ToNote(*informers_[1]->store().Get(kNs, "plain")), IsEmpty());
  r = reconciler_->Reconcile({kNs, "plain"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(PodPatches("plain"), 2);
  // A pod gone: nothing to do.
  r = reconciler_->Reconcile({kNs, "gone"});
  ASSERT_TRUE(r.ok()) << r.status();
}

}  // namespace not_injected_controller_test
}  // namespace kruise::manager::sidecarset
