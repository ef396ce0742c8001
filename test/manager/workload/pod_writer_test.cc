#include "manager/workload/pod_writer.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kube/controller.h"
#include "kube/errors.h"
#include "kube/event_recorder.h"
#include "kube/resources.h"
#include "test/fakes/fake_clock.h"
#include "test/fakes/memory_kube_client.h"

namespace kruise::manager::workload {
namespace {

using kube::Json;
using Action = kube::ScaleExpectations::Action;

constexpr char kKey[] = "default/web";

class PodWriterTest : public ::testing::Test {
 protected:
  Json MakePod(const std::string& name) {
    auto made = client_.Create(kube::resources::Pods(), "default",
                               {{"apiVersion", "v1"},
                                {"kind", "Pod"},
                                {"metadata", {{"name", name}, {"namespace", "default"}}},
                                {"spec", {{"containers", Json::array()}}}});
    EXPECT_TRUE(made.ok()) << made.status();
    return made.ok() ? *made : Json();
  }

  testing::FakeClock clock_;
  testing::MemoryKubeClient client_{&clock_};
  PodWriter writer_{&client_, /*recorder=*/nullptr, &clock_};
};

TEST_F(PodWriterTest, DeleteWaitsForTheCacheToSeeIt) {
  const Json pod = MakePod("web-0");
  ASSERT_TRUE(writer_.Delete(kKey, kube::resources::Pods(), pod).ok());
  EXPECT_TRUE(kube::IsNotFound(client_.Get(kube::resources::Pods(), "default", "web-0").status()));
  // Until the informer reports the deletion, the controller must not act on its stale cache.
  EXPECT_FALSE(writer_.scale_expectations().Satisfied(kKey));
  writer_.scale_expectations().Observe(kKey, Action::kDelete, "web-0");
  EXPECT_TRUE(writer_.scale_expectations().Satisfied(kKey));
}

TEST_F(PodWriterTest, DeleteThatDidNotHappenExpectsNothing) {
  const Json gone = MakePod("web-0");
  ASSERT_TRUE(client_.Delete(kube::resources::Pods(), "default", "web-0").ok());
  EXPECT_TRUE(kube::IsNotFound(writer_.Delete(kKey, kube::resources::Pods(), gone)));
  EXPECT_TRUE(writer_.scale_expectations().Satisfied(kKey));
}

TEST_F(PodWriterTest, DeleteNeverRemovesANewPodOfTheSameName) {
  const Json old_pod = MakePod("web-0");
  ASSERT_TRUE(client_.Delete(kube::resources::Pods(), "default", "web-0").ok());
  const Json new_pod = MakePod("web-0");
  ASSERT_NE(kube::Uid(old_pod), kube::Uid(new_pod));
  // The cache still holds the old pod: the uid precondition protects its successor.
  EXPECT_FALSE(writer_.Delete(kKey, kube::resources::Pods(), old_pod).ok());
  auto still = client_.Get(kube::resources::Pods(), "default", "web-0");
  ASSERT_TRUE(still.ok()) << still.status();
  EXPECT_EQ(kube::Uid(*still), kube::Uid(new_pod));
  EXPECT_TRUE(writer_.scale_expectations().Satisfied(kKey));
}

// The ops begin with a `test` of the resourceVersion the caller's cache had (PatchIfUnchanged).
Json Ops(const Json& pod, const Json& op) {
  return Json::array({{{"op", "test"},
                       {"path", "/metadata/resourceVersion"},
                       {"value", kube::ResourceVersion(pod)}},
                      op});
}

TEST_F(PodWriterTest, PatchPodExpectsItsResourceVersion) {
  const Json pod = MakePod("web-0");
  auto patched = writer_.PatchPod(
      pod, Ops(pod, {{"op", "add"}, {"path", "/metadata/labels"}, {"value", {{"a", "b"}}}}));
  ASSERT_TRUE(patched.ok()) << patched.status();
  EXPECT_EQ(kube::Label(*patched, "a"), "b");
  // A cache still at the old version is not enough; one at the patched version is.
  EXPECT_FALSE(writer_.rv_expectations().SatisfiedByCache(pod));
  EXPECT_TRUE(writer_.rv_expectations().SatisfiedByCache(*patched));
  // A patch planned on the pod as it was is refused as a conflict, and expects nothing.
  auto stale = writer_.PatchPod(
      pod, Ops(pod, {{"op", "add"}, {"path", "/metadata/labels/c"}, {"value", "d"}}));
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kAborted) << stale.status();
  EXPECT_TRUE(writer_.rv_expectations().SatisfiedByCache(*patched));
}

// The reasons of the Events in namespace default, once `recorder` has written them.
std::vector<std::string> EventReasons(kube::KubeClient* client, kube::EventRecorder* recorder) {
  EXPECT_TRUE(recorder->WaitIdle(absl::Seconds(10)));
  std::vector<std::string> reasons;
  auto listed = client->List(kube::resources::Events(), "default", {});
  EXPECT_TRUE(listed.ok()) << listed.status();
  if (listed.ok()) {
    for (const Json& e : listed->items) reasons.push_back(e.value("reason", ""));
  }
  return reasons;
}

Json Workload(const Json& selector) {
  Json w = {{"apiVersion", "apps.kruise.io/v1alpha1"},
            {"kind", "CloneSet"},
            {"metadata", {{"name", "web"}, {"namespace", "default"}, {"uid", "u-web"}}},
            {"spec", Json::object()}};
  if (!selector.is_null()) w["spec"]["selector"] = selector;
  return w;
}

TEST_F(PodWriterTest, SelectorRefusesOneThatSelectsEverythingOrIsMissing) {
  kube::EventRecorderOptions eo;
  eo.clock = &clock_;
  kube::EventRecorder recorder(&client_, eo);
  PodWriter writer(&client_, &recorder, &clock_);
  for (const Json& bad : {Json(), Json::object(), Json{{"matchLabels", {{"app", 7}}}}}) {
    auto got = writer.Selector(Workload(bad));
    ASSERT_FALSE(got.ok()) << bad.dump();
    EXPECT_TRUE(kube::IsTerminal(got.status())) << got.status();
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << got.status();
  }
  auto good = writer.Selector(Workload({{"matchLabels", {{"app", "web"}}}}));
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_TRUE(good->Matches({{"app", "web"}}));
  EXPECT_FALSE(good->Matches({{"app", "db"}}));
  const std::vector<std::string> reasons = EventReasons(&client_, &recorder);
  ASSERT_FALSE(reasons.empty());  // repeats may be aggregated into one Event
  for (const std::string& r : reasons) EXPECT_EQ(r, "InvalidSelector");
}

TEST_F(PodWriterTest, InvalidSpecIsTerminalAndReported) {
  kube::EventRecorderOptions eo;
  eo.clock = &clock_;
  kube::EventRecorder recorder(&client_, eo);
  PodWriter writer(&client_, &recorder, &clock_);
  const absl::Status st =
      writer.InvalidSpec(Workload(Json()), absl::InvalidArgumentError("spec.replicas: -1"));
  EXPECT_TRUE(kube::IsTerminal(st)) << st;
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("spec.replicas: -1"), std::string::npos) << st;
  EXPECT_EQ(EventReasons(&client_, &recorder), std::vector<std::string>{"InvalidSpec"});
}

}  // namespace
}  // namespace kruise::manager::workload
