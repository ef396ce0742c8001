#include "kube/expectations.h"

#include "gtest/gtest.h"
#include "test/fakes/fake_clock.h"

namespace kruise::kube {
namespace {

using kruise::testing::FakeClock;

TEST(ResourceVersionExpectationsTest, SatisfiedOnceObservedAtOrAfterVersion) {
  FakeClock clock;
  ResourceVersionExpectations exp(&clock, absl::Minutes(5));
  EXPECT_TRUE(exp.Satisfied("ns/a"));  // nothing expected
  exp.Expect("ns/a", "105");
  EXPECT_FALSE(exp.Satisfied("ns/a"));
  exp.Observe("ns/a", "104");
  EXPECT_FALSE(exp.Satisfied("ns/a"));
  exp.Observe(Json{{"metadata", {{"namespace", "ns"}, {"name", "a"}, {"resourceVersion", "106"}}}});
  EXPECT_TRUE(exp.Satisfied("ns/a"));
  EXPECT_EQ(exp.size(), 0u);
}

TEST(ResourceVersionExpectationsTest, CachedObjectCountsAsObserved) {
  FakeClock clock;
  ResourceVersionExpectations exp(&clock);
  exp.Expect("ns/a", "10");
  Json stale = {{"metadata", {{"namespace", "ns"}, {"name", "a"}, {"resourceVersion", "9"}}}};
  Json fresh = {{"metadata", {{"namespace", "ns"}, {"name", "a"}, {"resourceVersion", "10"}}}};
  EXPECT_FALSE(exp.SatisfiedByCache(stale));
  EXPECT_TRUE(exp.SatisfiedByCache(fresh));
}

TEST(ResourceVersionExpectationsTest, TimesOutOnTheClock) {
  FakeClock clock;
  ResourceVersionExpectations exp(&clock, absl::Seconds(10));
  exp.Expect("ns/a", "5");
  clock.Advance(absl::Seconds(9));
  EXPECT_FALSE(exp.Satisfied("ns/a"));
  clock.Advance(absl::Seconds(1));
  EXPECT_TRUE(exp.Satisfied("ns/a"));
  EXPECT_EQ(exp.size(), 0u);
}

TEST(ScaleExpectationsTest, CountedCreationsAndDeletions) {
  FakeClock clock;
  ScaleExpectations exp(&clock);
  exp.ExpectCreations("ns/job", 2);
  exp.ExpectDeletions("ns/job", 1);
  EXPECT_FALSE(exp.Satisfied("ns/job"));
  exp.CreationObserved("ns/job");
  exp.CreationObserved("ns/job");
  EXPECT_FALSE(exp.Satisfied("ns/job"));
  exp.DeletionObserved("ns/job");
  EXPECT_TRUE(exp.Satisfied("ns/job"));
  exp.CreationObserved("ns/job");  // unexpected observation: no negative debt
  exp.ExpectCreations("ns/job", 1);
  EXPECT_FALSE(exp.Satisfied("ns/job"));
}

TEST(ScaleExpectationsTest, NamedExpectationsAreIdempotent) {
  FakeClock clock;
  ScaleExpectations exp(&clock, absl::Minutes(1));
  exp.Expect("k", ScaleExpectations::Action::kCreate, "pod-a");
  exp.Expect("k", ScaleExpectations::Action::kDelete, "pod-b");
  exp.Observe("k", ScaleExpectations::Action::kCreate, "pod-a");
  exp.Observe("k", ScaleExpectations::Action::kCreate, "pod-a");
  EXPECT_FALSE(exp.Satisfied("k"));
  exp.Observe("k", ScaleExpectations::Action::kDelete, "pod-b");
  EXPECT_TRUE(exp.Satisfied("k"));
}

TEST(ScaleExpectationsTest, TimesOut) {
  FakeClock clock;
  ScaleExpectations exp(&clock, absl::Minutes(5));
  exp.ExpectCreations("k", 3);
  clock.Advance(absl::Minutes(4));
  EXPECT_FALSE(exp.Satisfied("k"));
  clock.Advance(absl::Minutes(1));
  EXPECT_TRUE(exp.Satisfied("k"));
  exp.ExpectDeletions("k", 1);
  exp.Delete("k");
  EXPECT_TRUE(exp.Satisfied("k"));
}

}  // namespace
}  // namespace kruise::kube
