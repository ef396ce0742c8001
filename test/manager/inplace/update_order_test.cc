#include "manager/inplace/update_order.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kruise::manager::inplace {
namespace {

using Json = nlohmann::json;
using ::testing::ElementsAreArray;

PodFacts Facts(const std::string& name, std::map<std::string, std::string> labels = {}) {
  PodFacts p;
  p.name = name;
  p.scheduled = true;
  p.phase = "Running";
  p.ready = true;
  p.ready_since = absl::FromUnixSeconds(100);
  p.created = absl::FromUnixSeconds(10);
  p.labels = std::move(labels);
  return p;
}

std::vector<std::string> Sorted(const Json& priority, const Json& scatter,
                                const std::vector<PodFacts>& pods) {
  std::vector<const PodFacts*> ptrs;
  std::vector<size_t> order;
  for (size_t i = 0; i < pods.size(); ++i) {
    ptrs.push_back(&pods[i]);
    order.push_back(i);
  }
  SortUpdateOrder(priority, scatter, ptrs, &order);
  std::vector<std::string> names;
  for (size_t i : order) names.push_back(pods[i].name);
  return names;
}

TEST(UpdateOrderTest, ActivePodLessTable) {
  struct Case {
    const char* name;
    PodFacts a, b;
    bool with_cost = false;
    int rank_a = 0, rank_b = 0;
    bool want;
  };
  auto with = [](PodFacts p, auto f) {
    f(p);
    return p;
  };
  const PodFacts base = Facts("a");
  const PodFacts b = Facts("b");
  std::vector<Case> cases = {
      {"unscheduled first", with(base, [](PodFacts& p) { p.scheduled = false; }), b, false, 0, 0,
       true},
      {"pending before running", with(base, [](PodFacts& p) { p.phase = "Pending"; }), b, false, 0,
       0, true},
      {"unknown after pending", with(base, [](PodFacts& p) { p.phase = "Unknown"; }),
       with(b, [](PodFacts& p) { p.phase = "Pending"; }), false, 0, 0, false},
      {"not ready first", with(base, [](PodFacts& p) { p.ready = false; }), b, false, 0, 0, true},
      {"lower cost first", with(base, [](PodFacts& p) { p.deletion_cost = -1; }), b, true, 0, 0,
       true},
      {"cost ignored for updates", with(base, [](PodFacts& p) { p.deletion_cost = 5; }), b, false,
       0, 0, true},
      {"higher rank first", base, b, true, 1, 2, false},
      {"ready for less time first",
       with(base, [](PodFacts& p) { p.ready_since += absl::Seconds(1); }), b, false, 0, 0, true},
      {"more restarts first", base, with(b, [](PodFacts& p) { p.restarts = 2; }), false, 0, 0,
       false},
      {"newer first", with(base, [](PodFacts& p) { p.created += absl::Seconds(1); }), b, false, 0,
       0, true},
      {"name breaks ties", base, b, false, 0, 0, true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ActivePodLess(c.a, c.b, c.rank_a, c.rank_b, c.with_cost), c.want) << c.name;
  }
}

TEST(UpdateOrderTest, SortUpdateOrderTable) {
  struct Case {
    const char* name;
    Json priority, scatter;
    std::vector<PodFacts> pods;
    std::vector<std::string> want;
  };
  PodFacts not_ready = Facts("z");
  not_ready.ready = false;
  std::vector<Case> cases = {
      {"active pods order", nullptr, nullptr, {Facts("b"), not_ready, Facts("a")}, {"z", "a", "b"}},
      {"weightPriority",
       Json::parse(R"({"weightPriority":[{"weight":50,"matchSelector":{"matchLabels":{"k":"x"}}},
                                          {"weight":10,"matchSelector":{"matchLabels":{"k":"y"}}}]})"),
       nullptr,
       {Facts("a", {{"k", "y"}}), Facts("b"), Facts("c", {{"k", "x"}})},
       {"c", "a", "b"}},
      {"orderPriority: integer or trailing digits, missing last",
       Json::parse(R"({"orderPriority":[{"orderedKey":"o"}]})"),
       nullptr,
       {Facts("a", {{"o", "pod-2"}}), Facts("b"), Facts("c", {{"o", "12"}})},
       {"c", "a", "b"}},
      {"scatter spreads the hits",
       nullptr,
       Json::parse(R"([{"key":"z","value":"1"}])"),
       {Facts("a", {{"z", "1"}}), Facts("b", {{"z", "1"}}), Facts("c"), Facts("d")},
       {"c", "a", "d", "b"}},
      {"scatter with one hit keeps the order",
       nullptr,
       Json::parse(R"([{"key":"z","value":"1"}])"),
       {Facts("a", {{"z", "1"}}), Facts("b")},
       {"a", "b"}},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(Sorted(c.priority, c.scatter, c.pods), ElementsAreArray(c.want)) << c.name;
  }
}

TEST(UpdateOrderTest, ScalePartitionTable) {
  struct Case {
    Json partition;
    int replicas;
    int want;
  };
  for (const Case& c : std::vector<Case>{{0, 5, 0},
                                         {3, 5, 3},
                                         {9, 5, 5},
                                         {-2, 5, 0},
                                         {"40%", 5, 2},
                                         {"50%", 5, 3},
                                         {"99%", 5, 4},
                                         {"90%", 2, 1},
                                         {"90%", 1, 1},
                                         {"100%", 5, 5},
                                         {"50%", 0, 0}}) {
    auto got = ScalePartition(c.partition, c.replicas);
    ASSERT_TRUE(got.ok()) << c.partition << " " << got.status();
    EXPECT_EQ(*got, c.want) << c.partition << " of " << c.replicas;
  }
  for (const Json& bad : {Json(nullptr), Json("5"), Json("abc%"), Json(1.5)}) {
    EXPECT_EQ(ScalePartition(bad, 5).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(UpdateOrderTest, ReadPodFacts) {
  const Json pod = Json::parse(R"({
    "metadata": {"name": "p", "labels": {"a": "b"}, "creationTimestamp": "2024-05-01T10:00:00Z",
                 "annotations": {"controller.kubernetes.io/pod-deletion-cost": "7"}},
    "spec": {"nodeName": "n1"},
    "status": {"phase": "Running",
               "conditions": [{"type": "Ready", "status": "True",
                               "lastTransitionTime": "2024-05-01T10:01:00Z"}],
               "containerStatuses": [{"restartCount": 2}, {"restartCount": 1}]}})");
  PodFacts f = ReadPodFacts(pod);
  EXPECT_EQ(f.name, "p");
  EXPECT_TRUE(f.scheduled);
  EXPECT_EQ(f.phase, "Running");
  EXPECT_TRUE(f.ready);
  EXPECT_EQ(f.ready_since - f.created, absl::Minutes(1));
  EXPECT_EQ(f.restarts, 3);
  EXPECT_EQ(f.deletion_cost, 7);
  EXPECT_EQ(f.labels.at("a"), "b");
  PodFacts empty = ReadPodFacts(Json::object());
  EXPECT_FALSE(empty.scheduled || empty.ready);
  EXPECT_EQ(empty.ready_since, absl::InfinitePast());
}

}  // namespace
}  // namespace kruise::manager::inplace
