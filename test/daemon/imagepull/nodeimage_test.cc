#include "daemon/imagepull/nodeimage.h"

#include "gtest/gtest.h"

namespace kruise::daemon {
namespace {

using Json = nlohmann::json;

TEST(NodeImage, ParsesSpecWithDefaults) {
  Json ni = Json::parse(R"({
    "apiVersion": "apps.kruise.io/v1alpha1", "kind": "NodeImage",
    "metadata": {"name": "node-1"},
    "spec": {"images": {
      "busybox": {
        "pullSecrets": [{"namespace": "kruise-daemon-config", "name": "s1"}],
        "sandboxConfig": {"labels": {"a": "b"}, "annotations": {"c": "d"}},
        "tags": [
          {"tag": "1.35", "version": 2, "imagePullPolicy": "IfNotPresent",
           "pullPolicy": {"timeoutSeconds": 30, "backoffLimit": 1, "activeDeadlineSeconds": 90},
           "ownerReferences": [{"kind": "ImagePullJob", "name": "j", "uid": "u"}]},
          {"tag": "latest"}
        ]}}}})");
  auto spec = ParseNodeImageSpec(ni);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->size(), 1u);
  const ImageSpec& image = (*spec)[0];
  EXPECT_EQ(image.name, "busybox");
  ASSERT_EQ(image.pull_secrets.size(), 1u);
  EXPECT_EQ(image.pull_secrets[0].name, "s1");
  EXPECT_EQ(image.sandbox_labels.at("a"), "b");
  EXPECT_EQ(image.sandbox_annotations.at("c"), "d");
  ASSERT_EQ(image.tags.size(), 2u);
  EXPECT_EQ(image.tags[0].version, 2);
  EXPECT_TRUE(image.tags[0].if_not_present());
  EXPECT_EQ(image.tags[0].pull_policy.timeout_seconds, 30);
  EXPECT_EQ(image.tags[0].pull_policy.backoff_limit, 1);
  EXPECT_EQ(image.tags[0].pull_policy.active_deadline_seconds, 90);
  EXPECT_EQ(image.tags[0].owner_references.size(), 1u);
  EXPECT_EQ(image.tags[1].pull_policy.timeout_seconds, 600);
  EXPECT_EQ(image.tags[1].pull_policy.backoff_limit, 3);
  EXPECT_FALSE(image.tags[1].if_not_present());
}

TEST(NodeImage, BadSpecIsAClearError) {
  EXPECT_TRUE(ParseNodeImageSpec(Json::object())->empty());
  EXPECT_EQ(ParseNodeImageSpec(Json::parse(R"({"spec":{"images":[]}})")).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto s = ParseNodeImageSpec(Json::parse(R"({"spec":{"images":{"x":{"tags":[{"version":1}]}}}})"));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.status().message()).find("images[x]"), std::string::npos);
}

TEST(NodeImage, StatusRoundTripAndCounters) {
  std::vector<ImageSpec> spec(2);
  spec[0].name = "a";
  spec[0].tags.resize(3);
  spec[0].tags[0].tag = "3";
  spec[0].tags[1].tag = "1";
  spec[0].tags[2].tag = "2";
  spec[1].name = "b";
  spec[1].tags.resize(1);
  spec[1].tags[0].tag = "x";
  TagStatus s1;
  s1.tag = "1";
  s1.version = 1;
  s1.phase = TagPhase::kSucceeded;
  s1.progress = 100;
  s1.start_time = absl::FromUnixSeconds(1700000000);
  s1.completion_time = absl::FromUnixSeconds(1700000010);
  s1.image_id = "a@sha256:1";
  TagStatus s3;
  s3.tag = "3";
  s3.version = 1;
  s3.phase = TagPhase::kFailed;
  s3.message = "401";
  TagStatus s2;
  s2.tag = "2";
  s2.version = 1;
  s2.phase = TagPhase::kPulling;
  s2.progress = 40;
  Json status = BuildNodeImageStatus(spec, {{"a", {s3, s1, s2}}});
  EXPECT_EQ(status["desired"], 4);
  EXPECT_EQ(status["succeeded"], 1);
  EXPECT_EQ(status["failed"], 1);
  EXPECT_EQ(status["pulling"], 1);
  EXPECT_EQ(status["waiting"], 1);  // b:x has no status yet
  auto& tags = status["imageStatuses"]["a"]["tags"];
  ASSERT_EQ(tags.size(), 3u);
  EXPECT_EQ(tags[0]["tag"], "1");  // sorted
  EXPECT_EQ(tags[0]["startTime"], "2023-11-14T22:13:20Z");
  EXPECT_EQ(tags[2]["phase"], "Failed");

  Json ni = {{"status", status}};
  ImageStatuses back = ParseNodeImageStatus(ni);
  ASSERT_EQ(back["a"].size(), 3u);
  EXPECT_EQ(back["a"][0], s1);
  EXPECT_EQ(back["a"][2], s3);
}

TEST(NodeImage, StatusChangeIsUrgentOnlyBeyondProgressAndMessages) {
  auto status = [](const std::string& phase, int progress, const std::string& message) {
    Json tag = {{"tag", "1"}, {"phase", phase}, {"version", 1}};
    if (progress > 0) tag["progress"] = progress;
    if (!message.empty()) tag["message"] = message;
    return Json{{"desired", 1}, {"succeeded", phase == "Succeeded" ? 1 : 0},
                {"failed", 0},  {"pulling", phase == "Pulling" ? 1 : 0},
                {"waiting", 0}, {"imageStatuses", {{"busybox", {{"tags", Json::array({tag})}}}}}};
  };
  struct Case {
    const char* what;
    Json current, next;
    bool urgent;
  };
  Json pulling = status("Pulling", 10, "");
  Json with_id = status("Succeeded", 100, "");
  with_id["imageStatuses"]["busybox"]["tags"][0]["imageID"] = "busybox@sha256:1";
  Json other_version = pulling;
  other_version["imageStatuses"]["busybox"]["tags"][0]["version"] = 2;
  Json two_tags = pulling;
  two_tags["imageStatuses"]["busybox"]["tags"].push_back({{"tag", "2"}, {"phase", "Pulling"}});
  const Case cases[] = {
      {"same status", pulling, pulling, false},
      {"progress only", pulling, status("Pulling", 60, ""), false},
      {"message only (attempt failed, retrying)", pulling, status("Pulling", 10, "attempt 1"),
       false},
      {"first status (nothing on the server)", Json::object(), pulling, true},
      {"Pulling -> Succeeded", pulling, with_id, true},
      {"Pulling -> Failed", pulling, status("Failed", 10, "not found"), true},
      {"a tag's version", pulling, other_version, true},
      {"a tag added", pulling, two_tags, true},
      {"a tag removed", two_tags, pulling, true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(StatusChangeIsUrgent(c.current, c.next), c.urgent) << c.what;
  }
}

}  // namespace
}  // namespace kruise::daemon
