#include "manager/imagepull/nodeimage_admission.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kube/object.h"

namespace kruise::manager {
namespace {

using kube::Json;

Json NodeImageWithImages(Json images) {
  return {{"apiVersion", "apps.kruise.io/v1alpha1"},
          {"kind", "NodeImage"},
          {"metadata", {{"name", "node-1"}}},
          {"spec", {{"images", std::move(images)}}}};
}

// The patch of OpenKruise's manual ("NodeImage (low-level)"), as a user writes it by hand.
TEST(NodeImageAdmissionTest, ManualPatchGetsCreatedAtAndPullPolicyDefaults) {
  const absl::Time now = absl::FromUnixSeconds(1'800'000'000);
  Json ni = NodeImageWithImages(
      {{"127.0.0.1:5000/busybox",
        {{"tags",
          {{{"tag", "v2"}, {"pullPolicy", {{"ttlSecondsAfterFinished", 300}}}},
           {{"tag", "v3"}}}},
         {"someFutureField", "kept"}}}});
  Json out = DefaultNodeImage(ni, now);
  const Json& tags = out["spec"]["images"]["127.0.0.1:5000/busybox"]["tags"];
  ASSERT_EQ(tags.size(), 2u);
  EXPECT_EQ(tags[0]["createdAt"], kube::FormatRfc3339(now));
  EXPECT_EQ(tags[0]["pullPolicy"],
            Json({{"ttlSecondsAfterFinished", 300}, {"timeoutSeconds", 600}, {"backoffLimit", 3}}));
  EXPECT_EQ(tags[1]["pullPolicy"], Json({{"timeoutSeconds", 600}, {"backoffLimit", 3}}));
  EXPECT_EQ(out["spec"]["images"]["127.0.0.1:5000/busybox"]["someFutureField"], "kept");
  // The first tag is then valid; the second lacks the TTL, which OpenKruise requires too.
  Json first_only = out;
  first_only["spec"]["images"]["127.0.0.1:5000/busybox"]["tags"].erase(1);
  EXPECT_TRUE(ValidateNodeImage(first_only).ok());
  absl::Status st = ValidateNodeImage(out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "pullPolicy.ttlSecondsAfterFinished for 127.0.0.1:5000/busybox/v3 must be set "
            "(seconds, >= 0)");
}

TEST(NodeImageAdmissionTest, ExistingValuesAreKept) {
  Json ni = NodeImageWithImages(
      {{"busybox",
        {{"tags",
          {{{"tag", "1"},
            {"createdAt", "2020-01-02T03:04:05Z"},
            {"version", 4},
            {"ownerReferences", {{{"kind", "ImagePullJob"}, {"name", "j"}, {"uid", "u"}}}},
            {"pullPolicy",
             {{"timeoutSeconds", 30}, {"backoffLimit", 0}, {"ttlSecondsAfterFinished", 1}}}}}}}}});
  EXPECT_EQ(DefaultNodeImage(ni, absl::Now()), ni);
  EXPECT_TRUE(ValidateNodeImage(ni).ok());
}

TEST(NodeImageAdmissionTest, WithoutImagesNothingToDo) {
  Json ni = {{"metadata", {{"name", "n"}}}, {"spec", Json::object()}};
  EXPECT_EQ(DefaultNodeImage(ni, absl::Now()), ni);
  EXPECT_TRUE(ValidateNodeImage(ni).ok());
  EXPECT_TRUE(ValidateNodeImage(Json::object()).ok());
}

struct NodeImageCase {
  std::string name;
  std::string images;  // JSON of spec.images, defaulted before validation
  std::string error;   // exact message; "" = valid
};

TEST(NodeImageAdmissionTest, ValidationTable) {
  const std::string ttl = R"("pullPolicy": {"ttlSecondsAfterFinished": 60})";
  const std::vector<NodeImageCase> cases = {
      {"one tag", R"({"busybox": {"tags": [{"tag": "1", )" + ttl + "}]}}", ""},
      {"no tags", R"({"busybox": {"tags": []}})", ""},
      {"empty tag", R"({"busybox": {"tags": [{"tag": "", )" + ttl + "}]}}",
       "tag for image busybox can not be empty"},
      {"missing tag", R"({"busybox": {"tags": [{)" + ttl + "}]}}",
       "tag for image busybox can not be empty"},
      {"duplicated tag",
       R"({"busybox": {"tags": [{"tag": "1", )" + ttl + R"(}, {"tag": "1", )" + ttl + "}]}}",
       "duplicated tag 1 for image busybox"},
      {"negative version", R"({"busybox": {"tags": [{"tag": "1", "version": -1, )" + ttl + "}]}}",
       "version for busybox/1 can not be less than 0"},
      {"bad createdAt",
       R"({"busybox": {"tags": [{"tag": "1", "createdAt": "yesterday", )" + ttl + "}]}}",
       "createdAt for busybox/1 must be an RFC 3339 time"},
      {"no ttl", R"({"busybox": {"tags": [{"tag": "1"}]}})",
       "pullPolicy.ttlSecondsAfterFinished for busybox/1 must be set (seconds, >= 0)"},
      {"negative ttl",
       R"({"busybox": {"tags": [{"tag": "1", "pullPolicy": {"ttlSecondsAfterFinished": -5}}]}})",
       "pullPolicy.ttlSecondsAfterFinished for busybox/1 must be set (seconds, >= 0)"},
      {"tags not a list", R"({"busybox": {"tags": "1"}})", "tags of image busybox must be a list"},
      {"empty image name", R"({"": {"tags": []}})", "image name can not be empty"},
      {"images not a map", R"(["busybox"])", "spec.images must be a map"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Json ni = DefaultNodeImage(NodeImageWithImages(Json::parse(c.images)), absl::Now());
    absl::Status st = ValidateNodeImage(ni);
    if (c.error.empty()) {
      EXPECT_TRUE(st.ok()) << st;
    } else {
      EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_EQ(st.message(), c.error);
    }
  }
}

TEST(NodeImageAdmissionTest, AtMost256Images) {
  Json images = Json::object();
  for (int i = 0; i <= kMaxImagesPerNodeImage; ++i) {
    images["img" + std::to_string(i)] = {{"tags", Json::array()}};
  }
  absl::Status st = ValidateNodeImage(NodeImageWithImages(images));
  EXPECT_EQ(st.message(), "spec images length 257 can not be more than 256");
  images.erase("img0");
  EXPECT_TRUE(ValidateNodeImage(NodeImageWithImages(images)).ok());
}

}  // namespace
}  // namespace kruise::manager
