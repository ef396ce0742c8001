// CRR controller cases against the fake API server (real REST client, fake clock): the reconciler
// reads CRRs from a Store the test refreshes from the server, as the informer would.

#include "manager/crr/crr_controller.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/object.h"
#include "kube/resources.h"
#include "kube/rest_client.h"
#include "test/fakes/apiserver/fake_apiserver.h"
#include "test/fakes/apiserver/fake_cluster_test.h"
#include "test/fakes/fake_clock.h"

namespace kruise::manager::crr {
namespace {

using kube::Json;
constexpr char kCrrs[] = "containerrecreaterequests.apps.kruise.io";

class CrrControllerTest : public testing::FakeClusterTest {
 protected:
  void SetUp() override {
    StartCluster();
    ASSERT_FALSE(HasFatalFailure());
    CrrReconcilerOptions ro;
    ro.clock = &clock_;
    reconciler_ = std::make_unique<CrrReconciler>(client_.get(), &store_, ro);
  }

  Json SeedPod(const std::string& name, bool readiness_gate = false) {
    Json pod = {{"metadata", {{"name", name}, {"namespace", "default"}}},
                {"spec", {{"nodeName", "node-a"}, {"containers", {{{"name", "app"}}}}}},
                {"status",
                 {{"phase", "Running"},
                  {"conditions", {{{"type", "Ready"}, {"status", "True"}}}},
                  {"containerStatuses",
                   {{{"name", "app"},
                     {"ready", true},
                     {"restartCount", 1},
                     {"containerID", "containerd://new"},
                     {"state", {{"running", {{"startedAt", "2026-01-01T00:00:00Z"}}}}}}}}}}};
    if (readiness_gate) {
      pod["spec"]["readinessGates"] = {{{"conditionType", "KruisePodReady"}}};
      pod["status"]["conditions"].push_back({{"type", "KruisePodReady"}, {"status", "True"}});
    }
    auto stored = server_->Seed("pods", pod);
    EXPECT_TRUE(stored.ok()) << stored.status();
    return *stored;
  }

  // A CRR as the webhook leaves it (labels set), with `status`.
  void SeedCrr(const std::string& name, const std::string& pod_uid, Json spec_extra = {},
               Json status = Json::object()) {
    Json spec = {{"podName", "web-0"}, {"containers", {{{"name", "app"}}}}};
    if (spec_extra.is_object()) spec.update(spec_extra);
    Json crr = {{"apiVersion", "apps.kruise.io/v1alpha1"},
                {"kind", "ContainerRecreateRequest"},
                {"metadata",
                 {{"name", name},
                  {"namespace", "default"},
                  {"labels",
                   {{kCrrPodUidLabel, pod_uid},
                    {"crr.apps.kruise.io/node-name", "node-a"},
                    {kCrrActiveLabel, "true"}}}}},
                {"spec", spec}};
    if (!status.empty()) crr["status"] = status;
    ASSERT_TRUE(server_->Seed(kCrrs, crr).ok());
  }

  Json Get(const std::string& resource, const std::string& name) {
    auto obj = server_->Get(resource, "default", name);
    return obj.ok() ? *obj : Json();
  }

  // Refreshes the cache from the server and reconciles once.
  kube::Result Reconcile(const std::string& name) {
    auto obj = server_->Get(kCrrs, "default", name);
    if (obj.ok()) {
      store_.Upsert(kube::StoreKey(*obj), kube::EncodedObject::Encode(*obj), *obj);
    } else {
      store_.Remove("default/" + name);
    }
    auto result = reconciler_->Reconcile({"default", name});
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : kube::Result{};
  }

  kube::Store store_;
  std::unique_ptr<CrrReconciler> reconciler_;
};

TEST_F(CrrControllerTest, PodGoneCompletesThenDropsActiveLabel) {
  SeedCrr("c1", "uid-x", {}, {{"phase", "Recreating"}});
  Reconcile("c1");
  Json crr = Get(kCrrs, "c1");
  EXPECT_EQ(crr["status"]["phase"], "Completed");
  EXPECT_EQ(crr["status"]["message"], kMessagePodGone);
  EXPECT_FALSE(crr["status"].value("completionTime", "").empty());
  // The same pass dropped the active label (from the patched object, not a stale cache).
  EXPECT_FALSE(crr["metadata"]["labels"].contains(kCrrActiveLabel));
  int64_t rv = server_->CurrentResourceVersion();
  Reconcile("c1");
  EXPECT_EQ(server_->CurrentResourceVersion(), rv);  // nothing left to write
  EXPECT_TRUE(crr["metadata"]["labels"].contains(kCrrPodUidLabel));
}

TEST_F(CrrControllerTest, ReplacedPodCompletes) {
  SeedPod("web-0");
  SeedCrr("c1", "old-uid", {}, {{"phase", "Recreating"}});
  Reconcile("c1");
  EXPECT_EQ(Get(kCrrs, "c1")["status"]["message"], kMessagePodGone);
}

TEST_F(CrrControllerTest, DaemonSilentForAMinuteCompletes) {
  Json pod = SeedPod("web-0");
  SeedCrr("c1", kube::Uid(pod));
  kube::Result r = Reconcile("c1");
  EXPECT_FALSE(Get(kCrrs, "c1").contains("status"));
  EXPECT_GT(r.requeue_after, absl::ZeroDuration());
  EXPECT_LE(r.requeue_after, absl::Seconds(3));
  clock_.Advance(absl::Seconds(59));
  r = Reconcile("c1");
  EXPECT_FALSE(Get(kCrrs, "c1").contains("status"));
  EXPECT_LE(r.requeue_after, absl::Seconds(1));  // wakes up exactly at the deadline
  clock_.Advance(absl::Seconds(1));
  Reconcile("c1");
  EXPECT_EQ(Get(kCrrs, "c1")["status"]["message"], kMessageDaemonTimeout);
}

TEST_F(CrrControllerTest, ActiveDeadlineCompletesEvenWhileRecreating) {
  Json pod = SeedPod("web-0");
  SeedCrr("c1", kube::Uid(pod), {{"activeDeadlineSeconds", 10}}, {{"phase", "Recreating"}});
  Reconcile("c1");
  EXPECT_EQ(Get(kCrrs, "c1")["status"]["phase"], "Recreating");
  clock_.Advance(absl::Seconds(10));
  Reconcile("c1");
  Json crr = Get(kCrrs, "c1");
  EXPECT_EQ(crr["status"]["phase"], "Completed");
  EXPECT_EQ(crr["status"]["message"], kMessageDeadline);
}

TEST_F(CrrControllerTest, RecreatingCopiesContainerStatusSnapshot) {
  Json pod = SeedPod("web-0");
  SeedCrr("c1", kube::Uid(pod), {}, {{"phase", "Recreating"}});
  kube::Result r = Reconcile("c1");
  EXPECT_EQ(r.requeue_after, absl::Seconds(3));
  Json snap = Get(kCrrs, "c1")["status"]["containerStatusSnapshot"];
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0]["name"], "app");
  EXPECT_EQ(snap[0]["containerID"], "containerd://new");
  EXPECT_EQ(snap[0]["ready"], true);
  EXPECT_EQ(snap[0]["restartCount"], 1);
  EXPECT_EQ(Get(kCrrs, "c1")["status"]["phase"], "Recreating");  // merge patch kept it
  // Unchanged -> no further write.
  int64_t rv = server_->CurrentResourceVersion();
  Reconcile("c1");
  EXPECT_EQ(server_->CurrentResourceVersion(), rv);
}

TEST_F(CrrControllerTest, UnreadyGraceMarksPodUnreadyAndRestoresIt) {
  Json pod = SeedPod("web-0", /*readiness_gate=*/true);
  SeedCrr("c1", kube::Uid(pod), {{"strategy", {{"unreadyGracePeriodSeconds", 5}}}},
          {{"phase", "Recreating"}});
  Reconcile("c1");
  Json crr = Get(kCrrs, "c1");
  EXPECT_THAT(kube::Finalizers(crr), ::testing::ElementsAre(kUnreadyAcquiredFinalizer));
  ASSERT_TRUE(crr["status"]["conditions"].is_array());
  EXPECT_EQ(crr["status"]["conditions"][0]["type"], kPreRecreateGraceCondition);
  EXPECT_EQ(crr["status"]["conditions"][0]["status"], "True");
  EXPECT_EQ(crr["status"]["phase"], "Recreating");
  Json p = Get("pods", "web-0");
  ASSERT_EQ(p["status"]["conditions"].size(), 2u);  // Ready kept, ours replaced in place
  EXPECT_EQ(p["status"]["conditions"][0]["type"], "Ready");
  EXPECT_EQ(p["status"]["conditions"][1]["type"], "KruisePodReady");
  EXPECT_EQ(p["status"]["conditions"][1]["status"], "False");
  EXPECT_THAT(p["status"]["conditions"][1].value("message", ""), ::testing::HasSubstr("c1"));

  // A second pass changes nothing (grace start stays stable).
  const std::string since = crr["status"]["conditions"][0]["lastTransitionTime"];
  clock_.Advance(absl::Seconds(2));
  Reconcile("c1");
  EXPECT_EQ(Get(kCrrs, "c1")["status"]["conditions"][0]["lastTransitionTime"], since);

  // The daemon finishes: pod ready again, finalizer and active label gone.
  Json done = Get(kCrrs, "c1");
  done["status"]["phase"] = "Completed";
  done["status"]["completionTime"] = kube::FormatRfc3339(clock_.Now());
  ASSERT_TRUE(server_->Put(kCrrs, done).ok());
  Reconcile("c1");
  p = Get("pods", "web-0");
  EXPECT_EQ(p["status"]["conditions"][1]["status"], "True");
  crr = Get(kCrrs, "c1");
  EXPECT_TRUE(kube::Finalizers(crr).empty());
  EXPECT_FALSE(crr["metadata"]["labels"].contains(kCrrActiveLabel));
}

TEST_F(CrrControllerTest, NoReadinessGateNoUnreadyMarking) {
  Json pod = SeedPod("web-0");
  SeedCrr("c1", kube::Uid(pod), {{"strategy", {{"unreadyGracePeriodSeconds", 5}}}},
          {{"phase", "Recreating"}});
  Reconcile("c1");
  EXPECT_TRUE(kube::Finalizers(Get(kCrrs, "c1")).empty());
}

TEST_F(CrrControllerTest, DeletedWithFinalizerReleasesThePod) {
  Json pod = SeedPod("web-0", true);
  SeedCrr("c1", kube::Uid(pod), {{"strategy", {{"unreadyGracePeriodSeconds", 5}}}},
          {{"phase", "Recreating"}});
  Reconcile("c1");
  ASSERT_EQ(Get("pods", "web-0")["status"]["conditions"][1]["status"], "False");
  ASSERT_TRUE(client_->Delete(kube::resources::ContainerRecreateRequests(), "default", "c1").ok());
  ASSERT_TRUE(Get(kCrrs, "c1").is_object());  // held by the finalizer
  Reconcile("c1");
  EXPECT_EQ(Get("pods", "web-0")["status"]["conditions"][1]["status"], "True");
  EXPECT_TRUE(Get(kCrrs, "c1").is_null());  // finalizer removed -> gone
}

TEST_F(CrrControllerTest, DeletedAfterTtl) {
  SeedCrr("c1", "uid", {{"ttlSecondsAfterFinished", 30}},
          {{"phase", "Completed"}, {"completionTime", kube::FormatRfc3339(clock_.Now())}});
  kube::Result r = Reconcile("c1");
  EXPECT_EQ(r.requeue_after, absl::Seconds(30));
  EXPECT_TRUE(Get(kCrrs, "c1").is_object());
  clock_.Advance(absl::Seconds(30));
  Reconcile("c1");
  EXPECT_TRUE(Get(kCrrs, "c1").is_null());
  // Gone from the cache too: nothing to do.
  EXPECT_EQ(Reconcile("c1").requeue_after, absl::ZeroDuration());
}

TEST_F(CrrControllerTest, CompletedWithoutTtlIsLeftAlone) {
  SeedCrr("c1", "uid", {}, {{"phase", "Completed"}});
  Reconcile("c1");
  int64_t rv = server_->CurrentResourceVersion();
  EXPECT_EQ(Reconcile("c1").requeue_after, absl::ZeroDuration());
  EXPECT_EQ(server_->CurrentResourceVersion(), rv);
}

}  // namespace
}  // namespace kruise::manager::crr
