// Checks the test bed itself with containerd's own client (ctr): the registries serve the images
// the env file names, the TLS registry enforces basic auth, containerd's CRI config is what the CRI
// tests rely on, and removed images leave no content behind. No project code is involved.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "test/e2e/testbed_env.h"
#include "test/e2e/testbed_util.h"

namespace kruise::testing {
namespace {

using ::testing::HasSubstr;

class TestbedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KRUISE_LOAD_TESTBED_OR_SKIP(env_);
    ctr_ = SplitCommandLine(env_.Get("KRUISE_TESTBED_CTR"));
    ASSERT_FALSE(ctr_.empty()) << "KRUISE_TESTBED_CTR is empty";
  }

  // Runs `ctr <args...>`; returns the exit code, output in *out.
  int Ctr(std::vector<std::string> args, std::string* out) {
    std::vector<std::string> argv = ctr_;
    argv.insert(argv.end(), args.begin(), args.end());
    absl::StatusOr<int> rc = RunCommand(argv, out);
    EXPECT_TRUE(rc.ok()) << rc.status();
    return rc.ok() ? *rc : -1;
  }

  TestbedEnv env_;
  std::vector<std::string> ctr_;
};

TEST_F(TestbedTest, EnvFileNamesEverything) {
  for (const char* key :
       {"KRUISE_TESTBED_CRI_SOCKET", "KRUISE_TESTBED_CONTAINERD_ROOT", "KRUISE_TESTBED_REGISTRY",
        "KRUISE_TESTBED_REGISTRY_TLS", "KRUISE_TESTBED_REGISTRY_TLS_CA",
        "KRUISE_TESTBED_REGISTRY_USER", "KRUISE_TESTBED_REGISTRY_PASSWORD",
        "KRUISE_TESTBED_BUSYBOX_IMAGE", "KRUISE_TESTBED_PAUSE_IMAGE", "KRUISE_TESTBED_SIZED_10M",
        "KRUISE_TESTBED_SIZED_100M", "KRUISE_TESTBED_CTR"}) {
    EXPECT_FALSE(env_.Get(key).empty()) << key;
  }
  EXPECT_NE(env_.Get("KRUISE_TESTBED_CRI_SOCKET"), "/run/containerd/containerd.sock");
}

TEST_F(TestbedTest, ContainerdConfigHasTheCriSettingsTheTestsNeed) {
  std::string out;
  ASSERT_EQ(Ctr({"version"}, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("1.6."));
  // The CRI plugin's effective config is not reachable through ctr; check the file it was started
  // with.
  const std::string config = env_.Get("KRUISE_TESTBED_DIR") + "/containerd/config.toml";
  ASSERT_EQ(RunCommand({"grep", "-c", "restrict_oom_score_adj = true", config}, &out).value_or(-1),
            0)
      << config;
  ASSERT_EQ(
      RunCommand({"grep", "-F", env_.Get("KRUISE_TESTBED_PAUSE_IMAGE"), config}, &out).value_or(-1),
      0)
      << "sandbox_image must be the bed's pause image";
}

TEST_F(TestbedTest, PlainPullThenRemoveLeavesNoContent) {
  absl::StatusOr<std::vector<TestbedImage>> images =
      ReadImagesFile(env_.Get("KRUISE_TESTBED_IMAGES_FILE"));
  ASSERT_TRUE(images.ok()) << images.status();
  const TestbedImage* sized = nullptr;
  for (const TestbedImage& image : *images) {
    if (image.name_tag == "sized:10m") {
      sized = &image;
    }
  }
  ASSERT_NE(sized, nullptr);
  EXPECT_GE(sized->blobs.size(), 2u + 3u) << "sized:10m needs >= 3 layers";

  const std::string ref = env_.Get("KRUISE_TESTBED_SIZED_10M");
  std::string out;
  ASSERT_EQ(Ctr({"images", "pull", "--plain-http", ref}, &out), 0) << out;
  absl::StatusOr<std::set<std::string>> content = ContentDigests(ctr_);
  ASSERT_TRUE(content.ok()) << content.status();
  for (const std::string& blob : sized->blobs) {
    EXPECT_EQ(content->count(blob), 1u) << blob << " missing after the pull";
  }
  ASSERT_EQ(Ctr({"images", "rm", "--sync", ref}, &out), 0) << out;
  // The CRI plugin adds a "sha256:<config>" name to every image in k8s.io; remove it too.
  Ctr({"images", "rm", "--sync", sized->blobs[1]}, &out);
  const bool gone = WaitFor(
      [&] {
        absl::StatusOr<std::set<std::string>> now = ContentDigests(ctr_);
        if (!now.ok()) {
          return false;
        }
        for (const std::string& blob : sized->blobs) {
          if (now->count(blob) > 0) {
            return false;
          }
        }
        return true;
      },
      absl::Seconds(30), absl::Milliseconds(100));
  EXPECT_TRUE(gone) << "content of " << ref << " still present 30 s after removing the image";
}

TEST_F(TestbedTest, TlsRegistryNeedsTheRightPassword) {
  const std::string ref = env_.Get("KRUISE_TESTBED_BUSYBOX_IMAGE_TLS");
  const std::string hosts = env_.Get("KRUISE_TESTBED_HOSTS_DIR");
  const std::string user = env_.Get("KRUISE_TESTBED_REGISTRY_USER");
  std::string out;
  EXPECT_NE(Ctr({"images", "pull", "--hosts-dir", hosts, "--user", user + ":wrong", ref}, &out), 0);
  EXPECT_THAT(out, HasSubstr("401"));
  ASSERT_EQ(Ctr({"images", "pull", "--hosts-dir", hosts, "--user",
                 user + ":" + env_.Get("KRUISE_TESTBED_REGISTRY_PASSWORD"), ref},
                &out),
            0)
      << out;
  EXPECT_EQ(Ctr({"images", "rm", "--sync", ref}, &out), 0) << out;
}

TEST_F(TestbedTest, BusyboxRunsAsAContainer) {
  const std::string ref = env_.Get("KRUISE_TESTBED_BUSYBOX_IMAGE");
  const std::string id = absl::StrCat("testbed-smoke-", getpid());
  std::string out;
  ASSERT_EQ(Ctr({"images", "pull", "--plain-http", ref}, &out), 0) << out;
  ASSERT_EQ(Ctr({"run", "--rm", ref, id, "sh", "-c", "echo hello-$((6*7))"}, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("hello-42"));
}

}  // namespace
}  // namespace kruise::testing
