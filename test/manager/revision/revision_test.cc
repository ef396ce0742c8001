#include "manager/revision/revision.h"

#include "gtest/gtest.h"

namespace kruise::manager::revision {
namespace {

using Json = nlohmann::json;

Json Template(const std::string& image = "nginx:1.25") {
  return {{"metadata", {{"labels", {{"app", "web"}}}}},
          {"spec", {{"containers", {{{"name", "main"}, {"image", image}}}}}}};
}

TEST(TemplateHash, PinnedValuesStableAcrossReleases) {
  // Computed independently (FNV-1a 32 over the canonical JSON, SafeEncodeString of the decimal).
  // A change here renames every revision, so every pod would look outdated after an upgrade.
  EXPECT_EQ(TemplateHash(Template()), "7546fd5764");
  EXPECT_EQ(TemplateHash(Template(), 2), "79fb87974b");
}

TEST(TemplateHash, DependsOnContentNotKeyOrder) {
  Json a = Json::parse(R"({"spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]},
                           "metadata": {"labels": {"app": "web"}}})");
  EXPECT_EQ(TemplateHash(a), TemplateHash(Template()));
  EXPECT_NE(TemplateHash(Template("nginx:1.26")), TemplateHash(Template()));
  // A set collision count changes the hash, also 0 (as Kubernetes' ComputeHash with a non-nil 0).
  EXPECT_NE(TemplateHash(Template(), 0), TemplateHash(Template()));
  EXPECT_NE(TemplateHash(Template(), 1), TemplateHash(Template(), 0));
  for (char c : TemplateHash(Template("x"), 7)) {
    EXPECT_NE(std::string("bcdfghjklmnpqrstvwxz2456789").find(c), std::string::npos) << c;
  }
}

TEST(ControllerRevision, RecordsTheTemplateAsOpenKruiseDoes) {
  Json owner = {{"apiVersion", "apps.kruise.io/v1alpha1"},
                {"kind", "CloneSet"},
                {"metadata", {{"name", "web"}, {"namespace", "prod"}, {"uid", "u-1"}}}};
  Json rev = NewControllerRevision(owner, Template(), 3);
  const std::string hash = TemplateHash(Template());
  EXPECT_EQ(rev["metadata"]["name"], "web-" + hash);
  EXPECT_EQ(RevisionName("web", hash), "web-" + hash);
  EXPECT_EQ(rev["metadata"]["namespace"], "prod");
  EXPECT_EQ(rev["metadata"]["labels"]["app"], "web");
  EXPECT_EQ(rev["metadata"]["labels"][kControllerRevisionHashLabel], hash);
  EXPECT_EQ(rev["metadata"]["ownerReferences"][0]["uid"], "u-1");
  EXPECT_EQ(rev["metadata"]["ownerReferences"][0]["controller"], true);
  EXPECT_EQ(rev["revision"], 3);
  EXPECT_EQ(rev["data"]["spec"]["template"]["$patch"], "replace");
  EXPECT_EQ(RevisionTemplate(rev), Template());
  EXPECT_TRUE(RevisionTemplate(Json::object()).is_null());
  EXPECT_TRUE(RevisionTemplate(Json{{"data", {{"spec", 1}}}}).is_null());
}

TEST(RevisionsToPrune, OldestFirstNeverTheNewestNorKept) {
  const std::vector<std::string> h = {"r1", "r2", "r3", "r4"};
  EXPECT_EQ(RevisionsToPrune(h, 10, {}), std::vector<std::string>{});
  EXPECT_EQ(RevisionsToPrune(h, 2, {}), (std::vector<std::string>{"r1", "r2"}));
  EXPECT_EQ(RevisionsToPrune(h, 2, {"r1"}), (std::vector<std::string>{"r2", "r3"}));
  EXPECT_EQ(RevisionsToPrune(h, 0, {}), (std::vector<std::string>{"r1", "r2", "r3"}));
  EXPECT_EQ(RevisionsToPrune(h, 1, {"r1", "r2", "r3"}), std::vector<std::string>{});
  EXPECT_EQ(RevisionsToPrune(h, -1, {}), std::vector<std::string>{});
}

}  // namespace
}  // namespace kruise::manager::revision
