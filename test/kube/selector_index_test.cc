#include "kube/selector_index.h"

#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kruise::kube {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

struct Item {
  std::string name;
};

TEST(SelectorIndex, CandidatesAreUnindexedThenTheLabelsMatches) {
  const Item any{"any"}, web{"web"}, web_or_api{"web-or-api"}, tier{"tier"};
  SelectorIndex<Item> index;
  EXPECT_TRUE(index.empty());
  index.Add(&web, "app", {"web"});
  index.AddUnindexed(&any);
  index.Add(&web_or_api, "app", {"web", "api", "api"});  // a value listed twice counts once
  index.Add(&tier, "tier", {"front"});
  EXPECT_FALSE(index.empty());

  auto names = [](const std::vector<const Item*>& items) {
    std::vector<std::string> out;
    for (const Item* i : items) out.push_back(i->name);
    return out;
  };
  const std::map<std::string, std::string> web_front = {{"app", "web"}, {"tier", "front"}};
  EXPECT_THAT(names(index.Candidates(web_front)), ElementsAre("any", "web", "web-or-api", "tier"));
  EXPECT_THAT(names(index.Candidates(std::map<std::string, std::string>{{"app", "api"}})),
              ElementsAre("any", "web-or-api"));
  EXPECT_THAT(names(index.Candidates(std::map<std::string, std::string>{{"app", "db"}})),
              ElementsAre("any"));
  // JSON labels give the same; a non-string value or a non-object never matches.
  EXPECT_THAT(names(index.Candidates(nlohmann::json{{"app", "web"}, {"tier", "front"}})),
              ElementsAre("any", "web", "web-or-api", "tier"));
  EXPECT_THAT(names(index.Candidates(nlohmann::json{{"app", 5}})), ElementsAre("any"));
  EXPECT_THAT(names(index.Candidates(nlohmann::json::array())), ElementsAre("any"));
}

TEST(SelectorIndex, EmptyIndexHasNoCandidates) {
  SelectorIndex<Item> index;
  EXPECT_THAT(index.Candidates(std::map<std::string, std::string>{{"a", "b"}}), IsEmpty());
  EXPECT_THAT(index.Candidates(nlohmann::json{{"a", "b"}}), IsEmpty());
}

}  // namespace
}  // namespace kruise::kube
