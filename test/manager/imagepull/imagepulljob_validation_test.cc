#include "manager/imagepull/imagepulljob_validation.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kruise::manager {
namespace {

using kube::Json;

Json Job(Json spec) {
  return {{"apiVersion", "apps.kruise.io/v1beta1"},
          {"kind", "ImagePullJob"},
          {"metadata", {{"name", "j"}, {"namespace", "default"}}},
          {"spec", spec}};
}

struct Case {
  std::string name;
  std::string spec;   // JSON
  std::string error;  // substring; "" = valid
};

TEST(ImagePullJobValidationTest, Table) {
  const std::string digest = "sha256:" + std::string(64, 'a');
  const std::vector<Case> cases = {
      {"minimal", R"({"image": "busybox"})", ""},
      {"digest", R"({"image": "registry.example.com/a/b@)" + digest + R"("})", ""},
      {"empty image", R"({"image": ""})", "spec.image: image can not be empty"},
      {"missing image", R"({})", "spec.image: image can not be empty"},
      {"bad image", R"({"image": "Busy Box:1"})", "spec.image: invalid image"},
      {"names xor labels",
       R"({"image": "busybox", "selector": {"names": ["n1"], "matchLabels": {"a": "b"}}})",
       "can not set both names and labelSelector"},
      {"duplicated names", R"({"image": "busybox", "selector": {"names": ["n1", "n1"]}})",
       "duplicated name n1"},
      {"bad label selector",
       R"({"image": "busybox", "selector": {"matchExpressions":
           [{"key": "a", "operator": "Bogus", "values": ["x"]}]}})",
       "spec.selector: invalid selector"},
      {"selector xor podSelector",
       R"({"image": "busybox", "selector": {"names": ["n1"]},
           "podSelector": {"matchLabels": {"app": "x"}}})",
       "can not set both selector and podSelector"},
      {"podSelector only", R"({"image": "busybox", "podSelector": {"matchLabels": {"app": "x"}}})",
       ""},
      {"parallelism int", R"({"image": "busybox", "parallelism": 3})", ""},
      {"parallelism zero pauses", R"({"image": "busybox", "parallelism": 0})", ""},
      {"parallelism string int", R"({"image": "busybox", "parallelism": "2"})", ""},
      {"parallelism negative", R"({"image": "busybox", "parallelism": -1})", "spec.parallelism"},
      {"parallelism percent", R"({"image": "busybox", "parallelism": "50%"})",
       "percentages are not supported"},
      {"timeout zero", R"({"image": "busybox", "pullPolicy": {"timeoutSeconds": 0}})",
       "timeoutSeconds"},
      {"backoff negative", R"({"image": "busybox", "pullPolicy": {"backoffLimit": -1}})",
       "backoffLimit"},
      {"deadline below default timeout",
       R"({"image": "busybox", "completionPolicy": {"activeDeadlineSeconds": 599}})",
       "must not be less than pullPolicy.timeoutSeconds (600)"},
      {"deadline equal to timeout",
       R"({"image": "busybox", "completionPolicy": {"activeDeadlineSeconds": 600}})", ""},
      {"deadline above custom timeout",
       R"({"image": "busybox", "pullPolicy": {"timeoutSeconds": 30},
           "completionPolicy": {"type": "Always", "activeDeadlineSeconds": 60}})",
       ""},
      {"never with deadline",
       R"({"image": "busybox", "completionPolicy": {"type": "Never", "activeDeadlineSeconds": 900}})",
       "can only work with type Always"},
      {"never with ttl",
       R"({"image": "busybox", "completionPolicy": {"type": "Never", "ttlSecondsAfterFinished": 10}})",
       "can only work with type Always"},
      {"never", R"({"image": "busybox", "completionPolicy": {"type": "Never"}})", ""},
      {"unknown type", R"({"image": "busybox", "completionPolicy": {"type": "Sometimes"}})",
       "unknown type Sometimes"},
      {"negative ttl",
       R"({"image": "busybox", "completionPolicy": {"ttlSecondsAfterFinished": -5}})",
       "ttlSecondsAfterFinished"},
      {"bad imagePullPolicy", R"({"image": "busybox", "imagePullPolicy": "Never"})",
       "spec.imagePullPolicy"},
      {"bad pullSecrets", R"({"image": "busybox", "pullSecrets": [1]})", "spec.pullSecrets"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> errs =
        ValidateImagePullJob(DefaultImagePullJob(Job(Json::parse(c.spec))));
    if (c.error.empty()) {
      EXPECT_TRUE(errs.empty()) << c.name << ": " << (errs.empty() ? "" : errs[0]);
    } else {
      bool found = false;
      for (const std::string& e : errs) found = found || e.find(c.error) != std::string::npos;
      EXPECT_TRUE(found) << c.name << ": wanted \"" << c.error << "\", got "
                         << (errs.empty() ? "no error" : errs[0]);
    }
  }
}

TEST(ImagePullJobValidationTest, DefaultsAsOpenKruise) {
  Json job = DefaultImagePullJob(Job({{"image", "busybox"}}), /*add_protection_finalizer=*/true);
  EXPECT_EQ(job["spec"]["completionPolicy"]["type"], "Always");
  EXPECT_EQ(job["spec"]["pullPolicy"]["timeoutSeconds"], 600);
  EXPECT_EQ(job["spec"]["pullPolicy"]["backoffLimit"], 3);
  EXPECT_EQ(job["spec"]["imagePullPolicy"], "IfNotPresent");
  EXPECT_EQ(job["metadata"]["finalizers"], Json::array({kProtectionFinalizer}));
  EXPECT_FALSE(job["spec"].contains("parallelism"));
  // Existing values are kept; the finalizer is not duplicated.
  Json again = DefaultImagePullJob(job, true);
  EXPECT_EQ(again, job);
  Json custom = DefaultImagePullJob(Job({{"image", "busybox"},
                                         {"pullPolicy", {{"timeoutSeconds", 30}}},
                                         {"imagePullPolicy", "Always"}}));
  EXPECT_EQ(custom["spec"]["pullPolicy"]["timeoutSeconds"], 30);
  EXPECT_EQ(custom["spec"]["imagePullPolicy"], "Always");
}

TEST(ImagePullJobValidationTest, ParseSpec) {
  auto spec = ParseImagePullJobSpec(Job({{"image", "docker.io/library/busybox:1.36"},
                                         {"parallelism", "4"},
                                         {"pullSecrets", {"a", "b"}},
                                         {"completionPolicy", {{"activeDeadlineSeconds", 900}}}}));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name_tag.name, "busybox");
  EXPECT_EQ(spec->name_tag.tag, "1.36");
  EXPECT_EQ(spec->parallelism, 4);
  EXPECT_EQ(spec->pull_secrets, (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(spec->never);
  EXPECT_EQ(spec->active_deadline_seconds, 900);
  EXPECT_EQ(spec->timeout_seconds, 600);
  EXPECT_EQ(spec->backoff_limit, 3);
  EXPECT_FALSE(ParseImagePullJobSpec(Job({{"image", "busybox"}, {"parallelism", "10%"}})).ok());
  auto dflt = ParseImagePullJobSpec(Job({{"image", "busybox"}}));
  ASSERT_TRUE(dflt.ok());
  EXPECT_EQ(dflt->parallelism, 1);
}

TEST(ImagePullJobValidationTest, ImageNameTag) {
  struct T {
    std::string in, name, tag;
  };
  for (const T& t : std::vector<T>{
           {"busybox", "busybox", "latest"},
           {"busybox:1.36", "busybox", "1.36"},
           {"docker.io/library/busybox:1", "busybox", "1"},
           {"docker.io/team/app:v2", "team/app", "v2"},
           {"127.0.0.1:5000/team/app:v1", "127.0.0.1:5000/team/app", "v1"},
           {"gcr.io/x/y@sha256:" + std::string(64, 'b'), "gcr.io/x/y",
            "sha256:" + std::string(64, 'b')},
       }) {
    auto nt = SplitImageNameTag(t.in);
    ASSERT_TRUE(nt.ok()) << t.in << ": " << nt.status();
    EXPECT_EQ(nt->name, t.name) << t.in;
    EXPECT_EQ(nt->tag, t.tag) << t.in;
  }
}

}  // namespace
}  // namespace kruise::manager
