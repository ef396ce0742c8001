// The in-place engine's patches, checked by applying them (nlohmann's RFC 6902 implementation) to
// the pod they were built for and looking at the result.

#include "manager/inplace/inplace_apply.h"

#include <optional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/object.h"

namespace kruise::manager::inplace {
namespace {

using Json = nlohmann::json;

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);

Json Pod(bool gate = true) {
  Json pod = Json::parse(R"({
    "metadata": {"name": "web-0", "resourceVersion": "7",
                 "labels": {"app": "web", "controller-revision-hash": "web-old"}},
    "spec": {"containers": [{"name": "main", "image": "nginx:1.25"},
                            {"name": "side", "image": "busybox:1.35"}]},
    "status": {"phase": "Running",
               "conditions": [{"type": "Ready", "status": "True",
                               "lastTransitionTime": "2020-01-01T00:00:00Z"}],
               "containerStatuses": [
                 {"name": "main", "image": "nginx:1.25", "imageID": "sha256:a",
                  "containerID": "containerd://m1", "restartCount": 0,
                  "state": {"running": {"startedAt": "2020-01-01T00:00:00Z"}}},
                 {"name": "side", "image": "busybox:1.35", "imageID": "sha256:b",
                  "containerID": "containerd://s1", "restartCount": 0}]}
  })");
  if (gate) pod["spec"]["readinessGates"] = {{{"conditionType", kInPlaceUpdateReadyCondition}}};
  return pod;
}

Json Apply(const Json& obj, const Json& ops) {
  EXPECT_TRUE(ops.is_array());
  return obj.patch(ops);  // throws (fails the test) on a bad op or a failed test
}

InPlaceUpdateSpec Update() {
  InPlaceUpdateSpec u;
  u.revision = "web-new";
  u.container_images = {{"main", "nginx:1.26"}};
  u.metadata_patch = {{"labels", {{"tier", "front"}}}, {"annotations", {{"note", "x"}}}};
  return u;
}

TEST(AppendMapOps, Table) {
  struct Case {
    const char* what;
    Json obj;
    Json entries;
    Json want_labels;  // null: no labels map after the patch
  };
  const Case cases[] = {
      {"creates the map", Json::parse(R"({"metadata": {}})"), {{"a", "1"}}, {{"a", "1"}}},
      {"adds and replaces",
       Json::parse(R"({"metadata": {"labels": {"a": "0", "b": "2"}}})"),
       {{"a", "1"}, {"c", "3"}},
       {{"a", "1"}, {"b", "2"}, {"c", "3"}}},
      {"null removes",
       Json::parse(R"({"metadata": {"labels": {"a": "0", "b": "2"}}})"),
       {{"a", nullptr}},
       {{"b", "2"}}},
      {"null on a missing key does nothing",
       Json::parse(R"({"metadata": {"labels": {}}})"),
       {{"a", nullptr}},
       Json::object()},
      {"null without a map does nothing",
       Json::parse(R"({"metadata": {}})"),
       {{"a", nullptr}},
       nullptr},
      {"keys with / and ~",
       Json::parse(R"({"metadata": {"labels": {}}})"),
       {{"apps.kruise.io/x~y", "v"}},
       {{"apps.kruise.io/x~y", "v"}}},
  };
  for (const Case& c : cases) {
    Json ops = Json::array();
    AppendMapOps(c.obj, "/metadata/labels", c.entries, &ops);
    Json out = Apply(c.obj, ops);
    const Json* labels = kube::FindPath(out, {"metadata", "labels"});
    if (c.want_labels.is_null()) {
      EXPECT_EQ(labels, nullptr) << c.what;
    } else {
      ASSERT_NE(labels, nullptr) << c.what;
      EXPECT_EQ(*labels, c.want_labels) << c.what;
    }
  }
}

TEST(AppendConditionOps, FlipsTouchTransitionTimeOnlyWhenStatusChanges) {
  Json pod = Pod();
  Json ops = Json::array();
  AppendConditionOps(pod,
                     {{{"type", "Ready"},
                       {"status", "True"},
                       {"reason", "R"},
                       {"lastTransitionTime", "2030-01-01T00:00:00Z"}},
                      {{"type", "New"}, {"status", "False"}}},
                     &ops);
  Json out = Apply(pod, ops);
  const Json* ready = FindCondition(out, "Ready");
  ASSERT_NE(ready, nullptr);
  EXPECT_EQ((*ready)["reason"], "R");
  EXPECT_EQ((*ready)["lastTransitionTime"], "2020-01-01T00:00:00Z") << "no flip, time kept";
  ASSERT_NE(FindCondition(out, "New"), nullptr);

  ops = Json::array();
  AppendConditionOps(
      pod,
      {{{"type", "Ready"}, {"status", "False"}, {"lastTransitionTime", "2030-01-01T00:00:00Z"}}},
      &ops);
  EXPECT_EQ((*FindCondition(Apply(pod, ops), "Ready"))["lastTransitionTime"],
            "2030-01-01T00:00:00Z");

  Json bare = {{"metadata", {{"name", "p"}}}};
  ops = Json::array();
  AppendConditionOps(bare, {{{"type", "X"}, {"status", "True"}}}, &ops);
  EXPECT_EQ(Apply(bare, ops)["status"]["conditions"].size(), 1u);
}

TEST(InitialReadinessGateOps, OnlyGatesWithoutACondition) {
  Json pod = Pod();
  Json ops = InitialReadinessGateOps(pod, {kInPlaceUpdateReadyCondition, "KruisePodReady"}, kNow);
  Json out = Apply(pod, ops);
  const Json* c = FindCondition(out, kInPlaceUpdateReadyCondition);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ((*c)["status"], "True");
  EXPECT_EQ(FindCondition(out, "KruisePodReady"), nullptr) << "the pod has no such gate";
  EXPECT_TRUE(InitialReadinessGateOps(out, {kInPlaceUpdateReadyCondition}, kNow).empty());
  EXPECT_TRUE(InitialReadinessGateOps(Pod(false), {kInPlaceUpdateReadyCondition}, kNow).empty());
}

TEST(StartInPlaceUpdateStatusOps, GateAndReadyFalse) {
  EXPECT_TRUE(StartInPlaceUpdateStatusOps(Pod(false), kNow).empty()) << "no gate, no status patch";
  Json pod = Pod();
  Json ops = StartInPlaceUpdateStatusOps(pod, kNow);
  EXPECT_EQ(ops[0]["op"], "test");
  Json out = Apply(pod, ops);
  for (const char* type : {kInPlaceUpdateReadyCondition, "Ready"}) {
    const Json* c = FindCondition(out, type);
    ASSERT_NE(c, nullptr) << type;
    EXPECT_EQ((*c)["status"], "False") << type;
    EXPECT_EQ((*c)["reason"], kStartInPlaceUpdateReason) << type;
  }
  Json stale = pod;
  stale["metadata"]["resourceVersion"] = "8";
  EXPECT_ANY_THROW(stale.patch(ops)) << "the test op guards against a changed pod";
}

TEST(InPlaceUpdatePodOps, ImagesLabelsStateAndPrecedence) {
  Json pod = Pod();
  InPlaceUpdatePatchOptions opts;
  opts.labels = {{"lifecycle.apps.kruise.io/state", "Updating"}, {"tier", "workload-wins"}};
  opts.annotations = {{"lifecycle.apps.kruise.io/timestamp", "t"}};
  Json out = Apply(pod, InPlaceUpdatePodOps(pod, Update(), opts, kNow));
  EXPECT_EQ(out["spec"]["containers"][0]["image"], "nginx:1.26");
  EXPECT_EQ(out["spec"]["containers"][1]["image"], "busybox:1.35");
  EXPECT_EQ(kube::Label(out, "controller-revision-hash"), "web-new");
  EXPECT_EQ(kube::Label(out, "lifecycle.apps.kruise.io/state"), "Updating");
  EXPECT_EQ(kube::Label(out, "tier"), "workload-wins");
  EXPECT_EQ(kube::Annotation(out, "note"), "x");
  EXPECT_EQ(kube::Annotation(out, "lifecycle.apps.kruise.io/timestamp"), "t");
  EXPECT_FALSE(kube::Annotation(out, kInPlaceUpdateGraceAnnotation).has_value());
  auto state = ParseInPlaceUpdateState(*kube::Annotation(out, kInPlaceUpdateStateAnnotation));
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->revision, "web-new");
  EXPECT_EQ(state->update_timestamp, kNow);
  EXPECT_EQ(state->last_container_statuses.at("main").container_id, "containerd://m1");
}

TEST(InPlaceUpdatePodOps, GracePeriodHoldsTheImages) {
  Json pod = Pod();
  InPlaceUpdatePatchOptions opts;
  opts.grace_period_seconds = 30;
  Json out = Apply(pod, InPlaceUpdatePodOps(pod, Update(), opts, kNow));
  EXPECT_EQ(out["spec"]["containers"][0]["image"], "nginx:1.25") << "not before the grace ends";
  EXPECT_EQ(kube::Label(out, "controller-revision-hash"), "web-new");
  Json pending = Json::parse(*kube::Annotation(out, kInPlaceUpdateGraceAnnotation));
  EXPECT_EQ(pending["containerImages"]["main"], "nginx:1.26");
}

// The pod after steps 1 and 2, as the API server would have it.
Json Updated(int grace_seconds) {
  Json pod = Pod();
  pod = Apply(pod, StartInPlaceUpdateStatusOps(pod, kNow));
  InPlaceUpdatePatchOptions opts;
  opts.grace_period_seconds = grace_seconds;
  return Apply(pod, InPlaceUpdatePodOps(pod, Update(), opts, kNow));
}

std::optional<Json> NewTemplate(const std::string& name) {
  if (name != "web-new") return std::nullopt;
  return Json::parse(R"({"spec": {"containers": [{"name": "main", "image": "nginx:1.26"},
                                                  {"name": "side", "image": "busybox:1.35"}]}})");
}

void Restart(Json* pod, absl::Time at) {
  Json& s = (*pod)["status"]["containerStatuses"][0];
  s["containerID"] = "containerd://m2";
  s["restartCount"] = 1;
  s["state"]["running"]["startedAt"] = kube::FormatRfc3339(at);
}

TEST(CheckInPlaceUpdate, Steps) {
  using Step = InPlaceUpdateCheck::Step;
  EXPECT_EQ(CheckInPlaceUpdate(Pod(), 0, kNow, NewTemplate).step, Step::kNone);

  // Grace: waits, then applies the images and drops the annotation.
  Json graced = Updated(30);
  InPlaceUpdateCheck c = CheckInPlaceUpdate(graced, 30, kNow + absl::Seconds(10), NewTemplate);
  EXPECT_EQ(c.step, Step::kInGrace);
  EXPECT_EQ(c.grace_left, absl::Seconds(20));
  c = CheckInPlaceUpdate(graced, 30, kNow + absl::Seconds(30), NewTemplate);
  ASSERT_EQ(c.step, Step::kGraceOver);
  Json applied = Apply(graced, c.pod_ops);
  EXPECT_EQ(applied["spec"]["containers"][0]["image"], "nginx:1.26");
  EXPECT_FALSE(kube::Annotation(applied, kInPlaceUpdateGraceAnnotation).has_value());

  // A malformed grace annotation is dropped, nothing applied.
  Json bad = graced;
  bad["metadata"]["annotations"][kInPlaceUpdateGraceAnnotation] = "{not json";
  c = CheckInPlaceUpdate(bad, 30, kNow, NewTemplate);
  ASSERT_EQ(c.step, Step::kGraceOver);
  Json dropped = Apply(bad, c.pod_ops);
  EXPECT_EQ(dropped["spec"]["containers"][0]["image"], "nginx:1.25");
  EXPECT_FALSE(kube::Annotation(dropped, kInPlaceUpdateGraceAnnotation).has_value());

  // Running until the kubelet restarts the container, then completed with the gate True.
  Json pod = Updated(0);
  c = CheckInPlaceUpdate(pod, 0, kNow, NewTemplate);
  EXPECT_EQ(c.step, Step::kRunning);
  EXPECT_THAT(c.waiting_for, ::testing::HasSubstr("main"));
  EXPECT_EQ(c.revision, "web-new");
  Restart(&pod, kNow + absl::Seconds(2));
  c = CheckInPlaceUpdate(pod, 0, kNow + absl::Seconds(3), NewTemplate);
  ASSERT_EQ(c.step, Step::kCompleted);
  Json done = Apply(pod, c.status_ops);
  EXPECT_EQ((*FindCondition(done, kInPlaceUpdateReadyCondition))["status"], "True");
  EXPECT_TRUE(CheckInPlaceUpdate(done, 0, kNow, NewTemplate).status_ops.empty())
      << "already True: nothing to send";

  // The revision gone from history: the pod's own spec says what to expect.
  auto gone = [](const std::string&) { return std::optional<Json>(); };
  EXPECT_EQ(CheckInPlaceUpdate(pod, 0, kNow, gone).step, Step::kCompleted);

  // A pod without the gate completes without a status patch.
  Json no_gate = Pod(false);
  no_gate = Apply(no_gate, InPlaceUpdatePodOps(no_gate, Update(), {}, kNow));
  Restart(&no_gate, kNow + absl::Seconds(1));
  c = CheckInPlaceUpdate(no_gate, 0, kNow, NewTemplate);
  EXPECT_EQ(c.step, Step::kCompleted);
  EXPECT_TRUE(c.status_ops.empty());
}

// ApplyInPlaceUpdate against a one-pod "server": a patch whose resourceVersion test fails is
// ABORTED (what kube::PatchIfUnchanged makes of the API server's 422); a write bumps the version;
// `kubelet_writes` status writes of its own follow our status patch, as the kubelet's do.
class InPlaceServer {
 public:
  explicit InPlaceServer(Json pod) : pod_(std::move(pod)) { pod_["metadata"]["uid"] = "u1"; }
  absl::StatusOr<Json> Patch(const Json& ops, const std::string& sub) {
    ++patches_;
    if (ops[0]["value"] != pod_["metadata"]["resourceVersion"]) {
      return absl::AbortedError("pod changed since the cache saw it");
    }
    pod_ = pod_.patch(ops);
    Bump();
    Json reply = pod_;
    if (sub == "status") {
      for (int i = 0; i < kubelet_writes; ++i) Bump();  // the kubelet reacts to the gate
    }
    return reply;
  }
  absl::StatusOr<Json> Get() {
    ++gets_;
    return pod_;
  }
  void Bump() {
    const int rv = std::stoi(pod_["metadata"]["resourceVersion"].get<std::string>());
    pod_["metadata"]["resourceVersion"] = std::to_string(rv + 1);
  }
  absl::StatusOr<Json> Run(const Json& cached) {
    return ApplyInPlaceUpdate(
        cached, Update(), {}, kNow,
        [this](const Json&, const Json& ops, const std::string& sub) { return Patch(ops, sub); },
        [this](const Json&) { return Get(); });
  }
  int kubelet_writes = 0;
  Json pod_;
  int patches_ = 0;
  int gets_ = 0;
};

TEST(ApplyInPlaceUpdate, RereadsOnceWhenTheKubeletWritesAfterTheGateFlip) {
  InPlaceServer server(Pod());
  server.kubelet_writes = 1;
  Json cached = server.pod_;
  auto updated = server.Run(cached);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(kube::Label(*updated, "controller-revision-hash"), "web-new");
  EXPECT_EQ((*updated)["spec"]["containers"][0]["image"], "nginx:1.26");
  EXPECT_EQ(server.patches_, 3);  // status, stale pod patch, pod patch on the re-read pod
  EXPECT_EQ(server.gets_, 1);
}

TEST(ApplyInPlaceUpdate, NoRereadWithoutAConflictNorAGate) {
  InPlaceServer server(Pod(/*gate=*/false));
  auto updated = server.Run(server.pod_);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(server.patches_, 1);  // no gate: no status step
  EXPECT_EQ(server.gets_, 0);
}

TEST(ApplyInPlaceUpdate, GivesUpWhenThePodKeepsChangingOrWasReplaced) {
  InPlaceServer busy(Pod());
  busy.kubelet_writes = 1;
  // Every read is stale by the time it is used: a writer that never stops.
  auto updated = ApplyInPlaceUpdate(
      busy.pod_, Update(), {}, kNow,
      [&](const Json&, const Json& ops, const std::string& sub) { return busy.Patch(ops, sub); },
      [&](const Json&) {
        auto got = busy.Get();
        busy.Bump();
        return got;
      });
  EXPECT_EQ(updated.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(busy.gets_, kMaxInPlacePatchRetries);

  InPlaceServer replaced(Pod());
  replaced.kubelet_writes = 1;
  auto gone = ApplyInPlaceUpdate(
      replaced.pod_, Update(), {}, kNow,
      [&](const Json&, const Json& ops, const std::string& sub) {
        return replaced.Patch(ops, sub);
      },
      [&](const Json&) -> absl::StatusOr<Json> {
        Json other = replaced.pod_;
        other["metadata"]["uid"] = "u2";
        return other;
      });
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kNotFound);
}

TEST(ApplyInPlaceUpdate, APodAlreadyAtTheRevisionIsReturnedAsItIs) {
  InPlaceServer server(Pod());
  server.kubelet_writes = 1;
  auto updated = ApplyInPlaceUpdate(
      server.pod_, Update(), {}, kNow,
      [&](const Json&, const Json& ops, const std::string& sub) { return server.Patch(ops, sub); },
      [&](const Json&) -> absl::StatusOr<Json> {
        Json done = server.pod_;
        done["metadata"]["labels"]["controller-revision-hash"] = "web-new";
        return done;
      });
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(server.patches_, 2);  // status, the stale pod patch; none after the read
}

}  // namespace
}  // namespace kruise::manager::inplace
