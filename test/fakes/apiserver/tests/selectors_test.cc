#include "test/fakes/apiserver/selectors.h"

#include "gtest/gtest.h"

namespace kruise::testing::apiserver {
namespace {

bool Sel(const std::string& text, const std::map<std::string, std::string>& labels) {
  auto s = LabelSelector::Parse(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status();
  return s.ok() && s->Matches(labels);
}

TEST(LabelSelectorTest, Equality) {
  std::map<std::string, std::string> l = {{"app", "web"}, {"tier", "fe"}};
  EXPECT_TRUE(Sel("app=web", l));
  EXPECT_TRUE(Sel("app==web", l));
  EXPECT_FALSE(Sel("app=db", l));
  EXPECT_TRUE(Sel("app!=db", l));
  EXPECT_FALSE(Sel("app!=web", l));
  EXPECT_TRUE(Sel("missing!=x", l));  // != matches a missing key
  EXPECT_TRUE(Sel("app=web,tier=fe", l));
  EXPECT_FALSE(Sel("app=web,tier=be", l));
  EXPECT_TRUE(Sel("", l));
}

TEST(LabelSelectorTest, SetBasedAndExistence) {
  std::map<std::string, std::string> l = {{"app", "web"}, {"example.com/role", "x"}};
  EXPECT_TRUE(Sel("app in (web, db)", l));
  EXPECT_FALSE(Sel("app in (db)", l));
  EXPECT_TRUE(Sel("app notin (db,cache)", l));
  EXPECT_FALSE(Sel("app notin (web)", l));
  EXPECT_TRUE(Sel("nothere notin (web)", l));
  EXPECT_TRUE(Sel("example.com/role", l));
  EXPECT_FALSE(Sel("!example.com/role", l));
  EXPECT_TRUE(Sel("!other", l));
  EXPECT_TRUE(Sel("app in (web),!other,example.com/role=x", l));
}

TEST(LabelSelectorTest, RejectsMalformed) {
  for (const char* bad : {"app in web", "app in (web", "=x", "app=w b", "app >= 3", "!a=b", ","}) {
    EXPECT_FALSE(LabelSelector::Parse(bad).ok()) << bad;
  }
}

TEST(FieldSelectorTest, ParsesAndMatches) {
  auto s = FieldSelector::Parse("spec.nodeName=n1,status.phase!=Failed");
  ASSERT_TRUE(s.ok());
  std::map<std::string, std::string> f = {{"spec.nodeName", "n1"}, {"status.phase", "Running"}};
  auto get = [&](const std::string& p) { return f.count(p) ? f[p] : std::string(); };
  EXPECT_TRUE(s->Matches(get));
  f["status.phase"] = "Failed";
  EXPECT_FALSE(s->Matches(get));
  auto empty_node = FieldSelector::Parse("spec.nodeName==");
  ASSERT_TRUE(empty_node.ok());
  f.erase("spec.nodeName");
  EXPECT_TRUE(empty_node->Matches(get));
  EXPECT_FALSE(FieldSelector::Parse("spec.nodeName").ok());
}

}  // namespace
}  // namespace kruise::testing::apiserver
