#include "daemon/crr/crr_ordering.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace kruise::daemon {
namespace {

using kube::Json;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

Json Crr(const std::string& name, const std::string& created, const std::string& phase) {
  Json crr = {{"metadata", {{"name", name}, {"creationTimestamp", created}}}};
  if (!phase.empty()) crr["status"] = {{"phase", phase}};
  return crr;
}

TEST(CrrOrderingTest, OldestUnfinishedIsActiveOthersWait) {
  std::vector<Json> crrs = {Crr("c", "2024-05-01T10:00:03Z", ""),
                            Crr("a", "2024-05-01T10:00:01Z", ""),
                            Crr("b", "2024-05-01T10:00:02Z", "")};
  CrrSelection s = SelectActive(crrs);
  ASSERT_TRUE(s.active.has_value());
  EXPECT_EQ(*s.active, 1u);
  EXPECT_THAT(s.to_mark_pending, ElementsAre(2u, 0u));
}

TEST(CrrOrderingTest, RecreatingBeatsOlderPendingAndCompletedIsSkipped) {
  std::vector<Json> crrs = {Crr("old-done", "2024-05-01T10:00:00Z", "Completed"),
                            Crr("older-pending", "2024-05-01T10:00:01Z", "Pending"),
                            Crr("running", "2024-05-01T10:00:05Z", "Recreating"),
                            Crr("new", "2024-05-01T10:00:00Z", "")};
  CrrSelection s = SelectActive(crrs);
  ASSERT_TRUE(s.active.has_value());
  EXPECT_EQ(*s.active, 2u);
  // Pending ones sort before phase-less ones, regardless of creation time.
  EXPECT_THAT(s.to_mark_pending, ElementsAre(1u, 3u));
}

TEST(CrrOrderingTest, AllCompletedMeansNothingToDo) {
  CrrSelection s = SelectActive({Crr("a", "2024-05-01T10:00:00Z", "Completed")});
  EXPECT_FALSE(s.active.has_value());
  EXPECT_THAT(s.to_mark_pending, IsEmpty());
  EXPECT_FALSE(SelectActive({}).active.has_value());
}

TEST(CrrOrderingTest, SameCreationTimeFallsBackToName) {
  CrrSelection s = SelectActive(
      {Crr("zeta", "2024-05-01T10:00:00Z", ""), Crr("alpha", "2024-05-01T10:00:00Z", "")});
  ASSERT_TRUE(s.active.has_value());
  EXPECT_EQ(*s.active, 1u);
  EXPECT_THAT(s.to_mark_pending, ElementsAre(0u));
}

TEST(CrrOrderingTest, PendingPatchIsStatusOnlyAndIdempotent) {
  Json crr = Crr("b", "2024-05-01T10:00:02Z", "");
  Json patch = PendingPatch(crr, "a");
  ASSERT_TRUE(patch.is_object());
  EXPECT_EQ(patch.size(), 1u);
  EXPECT_EQ(patch["status"]["phase"], "Pending");
  EXPECT_THAT(patch["status"]["message"].get<std::string>(), ::testing::HasSubstr("a"));
  crr.merge_patch(patch);
  EXPECT_TRUE(PendingPatch(crr, "a").is_null());
  EXPECT_FALSE(PendingPatch(crr, "other").is_null());
}

}  // namespace
}  // namespace kruise::daemon
