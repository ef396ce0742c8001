#include "manager/workload/workload_status.h"

#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "kube/object.h"
#include "kube/resources.h"
#include "test/fakes/fake_clock.h"
#include "test/fakes/memory_kube_client.h"

namespace kruise::manager::workload {
namespace {

using kube::Json;

const absl::Time kT0 = absl::FromUnixSeconds(1700000000);

Json WithConditions(Json conditions) {
  return {{"status", {{"conditions", std::move(conditions)}}}};
}

TEST(StepConditionsTest, NoneNeededAndNoneThereIsNull) {
  EXPECT_TRUE(StepConditions(Json::object(), kT0, absl::OkStatus(), std::nullopt).is_null());
}

TEST(StepConditionsTest, AFailingStepGetsATrueConditionWithItsError) {
  const Json c =
      StepConditions(Json::object(), kT0, absl::UnavailableError("quota exceeded"), std::nullopt);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0]["type"], "FailedScale");
  EXPECT_EQ(c[0]["status"], "True");
  EXPECT_EQ(c[0]["reason"], "FailedScale");
  EXPECT_EQ(c[0]["message"], "quota exceeded");
  EXPECT_EQ(c[0]["lastTransitionTime"], kube::FormatRfc3339(kT0));
}

TEST(StepConditionsTest, StillFailingKeepsItsTransitionTimeAndTakesTheNewMessage) {
  const Json first = StepConditions(Json::object(), kT0, std::nullopt,
                                    absl::FailedPreconditionError("image pull failed"));
  const Json later = StepConditions(WithConditions(first), kT0 + absl::Minutes(3), std::nullopt,
                                    absl::FailedPreconditionError("budget exhausted"));
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(later[0]["message"], "budget exhausted");
  EXPECT_EQ(later[0]["lastTransitionTime"], kube::FormatRfc3339(kT0));
}

TEST(StepConditionsTest, SuccessRemovesOnlyItsOwnConditionAndAStepNotRunKeepsIts) {
  const Json old = Json::array({{{"type", "FailedScale"}, {"status", "True"}},
                                {{"type", "FailedUpdate"}, {"status", "True"}},
                                {{"type", "Progressing"}, {"status", "True"}}});
  const Json c = StepConditions(WithConditions(old), kT0, absl::OkStatus(), std::nullopt);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0]["type"], "FailedUpdate");
  EXPECT_EQ(c[1]["type"], "Progressing");
  // The last condition gone: an empty list, so the patch clears what is there.
  const Json none = StepConditions(WithConditions(Json::array({old[0]})), kT0, absl::OkStatus(),
                                   absl::OkStatus());
  EXPECT_TRUE(none.is_array() && none.empty());
}

class WriteStatusTest : public ::testing::Test {
 protected:
  Json MakeConfigMap() {
    auto made = client_.Create(kube::resources::ConfigMaps(), "default",
                               {{"apiVersion", "v1"},
                                {"kind", "ConfigMap"},
                                {"metadata", {{"name", "web"}, {"namespace", "default"}}},
                                {"status", {{"replicas", 1}, {"kept", "x"}}}});
    EXPECT_TRUE(made.ok()) << made.status();
    return made.ok() ? *made : Json();
  }
  testing::FakeClock clock_;
  testing::MemoryKubeClient client_{&clock_};
};

TEST_F(WriteStatusTest, WritesOnlyWhatChangedAndKeepsTheRest) {
  const Json obj = MakeConfigMap();
  ASSERT_TRUE(
      WriteStatusIfChanged(&client_, kube::resources::ConfigMaps(), obj, {{"replicas", 1}}).ok());
  auto same = client_.Get(kube::resources::ConfigMaps(), "default", "web");
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(kube::ResourceVersion(*same), kube::ResourceVersion(obj)) << "no write when equal";

  ASSERT_TRUE(
      WriteStatusIfChanged(&client_, kube::resources::ConfigMaps(), obj, {{"replicas", 3}}).ok());
  auto now = client_.Get(kube::resources::ConfigMaps(), "default", "web");
  ASSERT_TRUE(now.ok());
  EXPECT_EQ((*now)["status"]["replicas"], 3);
  EXPECT_EQ((*now)["status"]["kept"], "x");
}

TEST_F(WriteStatusTest, AStaleWorkloadIsRefusedAsAConflict) {
  const Json stale = MakeConfigMap();
  ASSERT_TRUE(
      WriteStatusIfChanged(&client_, kube::resources::ConfigMaps(), stale, {{"replicas", 2}}).ok());
  const absl::Status st =
      WriteStatusIfChanged(&client_, kube::resources::ConfigMaps(), stale, {{"replicas", 5}});
  EXPECT_EQ(st.code(), absl::StatusCode::kAborted) << st;
  auto now = client_.Get(kube::resources::ConfigMaps(), "default", "web");
  ASSERT_TRUE(now.ok());
  EXPECT_EQ((*now)["status"]["replicas"], 2);
}

TEST_F(WriteStatusTest, AWorkloadGoneIsDone) {
  const Json obj = MakeConfigMap();
  ASSERT_TRUE(client_.Delete(kube::resources::ConfigMaps(), "default", "web").ok());
  EXPECT_TRUE(
      WriteStatusIfChanged(&client_, kube::resources::ConfigMaps(), obj, {{"replicas", 2}}).ok());
}

}  // namespace
}  // namespace kruise::manager::workload
