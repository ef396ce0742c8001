#include "common/image_ref.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kruise {
namespace {

using ::testing::HasSubstr;

const std::string kHex(64, 'a');
const std::string kDigest = "sha256:" + std::string(64, 'a');

struct ValidCase {
  std::string input;
  std::string registry;
  std::string repository;
  std::string tag;
  std::string digest;
  std::string normalized;
  std::string familiar;
};

class ValidRefTest : public ::testing::TestWithParam<ValidCase> {};

TEST_P(ValidRefTest, ParsesAndNormalises) {
  const ValidCase& c = GetParam();
  absl::StatusOr<ImageReference> ref = ParseImageReference(c.input);
  ASSERT_TRUE(ref.ok()) << c.input << ": " << ref.status();
  EXPECT_EQ(ref->registry, c.registry) << c.input;
  EXPECT_EQ(ref->repository, c.repository) << c.input;
  EXPECT_EQ(ref->tag, c.tag) << c.input;
  EXPECT_EQ(ref->digest, c.digest) << c.input;
  EXPECT_EQ(ref->Normalized(), c.normalized) << c.input;
  EXPECT_EQ(ref->Familiar(), c.familiar) << c.input;
  EXPECT_EQ(ref->RepositoryWithRegistry(), c.registry + "/" + c.repository);
  // Normalising is idempotent.
  absl::StatusOr<ImageReference> again = ParseImageReference(ref->Normalized());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *ref);
}

INSTANTIATE_TEST_SUITE_P(
    Table, ValidRefTest,
    ::testing::Values(
        ValidCase{"busybox", "docker.io", "library/busybox", "latest", "",
                  "docker.io/library/busybox:latest", "busybox:latest"},
        ValidCase{"busybox:1.35", "docker.io", "library/busybox", "1.35", "",
                  "docker.io/library/busybox:1.35", "busybox:1.35"},
        ValidCase{"library/busybox", "docker.io", "library/busybox", "latest", "",
                  "docker.io/library/busybox:latest", "busybox:latest"},
        ValidCase{"docker.io/busybox", "docker.io", "library/busybox", "latest", "",
                  "docker.io/library/busybox:latest", "busybox:latest"},
        ValidCase{"index.docker.io/library/busybox", "docker.io", "library/busybox", "latest", "",
                  "docker.io/library/busybox:latest", "busybox:latest"},
        ValidCase{"openkruise/kruise-manager:v1.5.0", "docker.io", "openkruise/kruise-manager",
                  "v1.5.0", "", "docker.io/openkruise/kruise-manager:v1.5.0",
                  "openkruise/kruise-manager:v1.5.0"},
        ValidCase{"127.0.0.1:5000/a/b:tag", "127.0.0.1:5000", "a/b", "tag", "",
                  "127.0.0.1:5000/a/b:tag", "127.0.0.1:5000/a/b:tag"},
        ValidCase{"localhost/x", "localhost", "x", "latest", "", "localhost/x:latest",
                  "localhost/x:latest"},
        ValidCase{"localhost:5000/x", "localhost:5000", "x", "latest", "",
                  "localhost:5000/x:latest", "localhost:5000/x:latest"},
        ValidCase{"host.example.com:443/ns/repo@" + kDigest, "host.example.com:443", "ns/repo", "",
                  kDigest, "host.example.com:443/ns/repo@" + kDigest,
                  "host.example.com:443/ns/repo@" + kDigest},
        ValidCase{"repo:tag@" + kDigest, "docker.io", "library/repo", "tag", kDigest,
                  "docker.io/library/repo:tag@" + kDigest, "repo:tag@" + kDigest},
        ValidCase{"busybox@" + kDigest, "docker.io", "library/busybox", "", kDigest,
                  "docker.io/library/busybox@" + kDigest, "busybox@" + kDigest},
        ValidCase{"quay.io/a/b/c/d:1", "quay.io", "a/b/c/d", "1", "", "quay.io/a/b/c/d:1",
                  "quay.io/a/b/c/d:1"},
        ValidCase{"a_b.c__d-e--f:T_9.x-y", "docker.io", "library/a_b.c__d-e--f", "T_9.x-y", "",
                  "docker.io/library/a_b.c__d-e--f:T_9.x-y", "a_b.c__d-e--f:T_9.x-y"},
        ValidCase{"docker.io/library/a/b", "docker.io", "library/a/b", "latest", "",
                  "docker.io/library/a/b:latest", "library/a/b:latest"},
        ValidCase{"Registry.Example.com/app", "Registry.Example.com", "app", "latest", "",
                  "Registry.Example.com/app:latest", "Registry.Example.com/app:latest"},
        ValidCase{"[::1]:5000/app:v1", "[::1]:5000", "app", "v1", "", "[::1]:5000/app:v1",
                  "[::1]:5000/app:v1"},
        ValidCase{"registry-1.docker.io/x/y", "registry-1.docker.io", "x/y", "latest", "",
                  "registry-1.docker.io/x/y:latest", "registry-1.docker.io/x/y:latest"},
        ValidCase{"busybox:" + std::string(128, 'a'), "docker.io", "library/busybox",
                  std::string(128, 'a'), "", "docker.io/library/busybox:" + std::string(128, 'a'),
                  "busybox:" + std::string(128, 'a')}));

struct InvalidCase {
  std::string input;
  std::string message;  // substring of the error
};

class InvalidRefTest : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(InvalidRefTest, RejectedWithClearMessage) {
  const InvalidCase& c = GetParam();
  absl::StatusOr<ImageReference> ref = ParseImageReference(c.input);
  ASSERT_FALSE(ref.ok()) << "accepted: " << c.input;
  EXPECT_EQ(ref.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ref.status().message()), HasSubstr(c.message)) << c.input;
}

INSTANTIATE_TEST_SUITE_P(
    Table, InvalidRefTest,
    ::testing::Values(
        InvalidCase{"", "empty"}, InvalidCase{"busybox:", "empty tag"},
        InvalidCase{"BusyBox", "lowercase"}, InvalidCase{"library/BusyBox:1", "lowercase"},
        InvalidCase{"busy box", "whitespace"}, InvalidCase{" busybox", "whitespace"},
        InvalidCase{"busybox:1.0 ", "whitespace"}, InvalidCase{"busybox@", "empty digest"},
        InvalidCase{"busybox@sha256:abc", "64 hex"},
        InvalidCase{"busybox@sha256:" + std::string(64, 'A'), "lowercase hex"},
        InvalidCase{"busybox@sha256:" + std::string(63, 'a') + "g", "lowercase hex"},
        InvalidCase{"busybox@md5", "<algorithm>:<hex>"},
        InvalidCase{"busybox@:" + kHex, "algorithm is empty"},
        InvalidCase{"busybox@1sha:" + kHex, "invalid digest algorithm"},
        InvalidCase{"busybox:-tag", "must start with"},
        InvalidCase{"busybox:.tag", "must start with"},
        InvalidCase{"busybox:ta+g", "invalid character"},
        InvalidCase{"busybox:" + std::string(129, 'a'), "longer than 128"},
        InvalidCase{"a//b", "empty path component"}, InvalidCase{"a/b/", "empty path component"},
        InvalidCase{"/busybox", "empty path component"},
        InvalidCase{"-busybox", "must start and end"},
        InvalidCase{"busybox-", "must not end with a separator"},
        InvalidCase{"bu..sybox", "invalid separator"},
        InvalidCase{"bu___sybox", "invalid separator"},
        InvalidCase{"localhost:abc/x", "port must be a number"},
        InvalidCase{"localhost:/x", "port must be a number"},
        InvalidCase{"host..example.com/x", "empty host label"},
        InvalidCase{"-host.example.com/x", "must not start or end with '-'"},
        InvalidCase{"host_name.com/x", "invalid character"},
        InvalidCase{"[::1/x", "unterminated IPv6"},
        InvalidCase{"example.com/", "empty repository name"},
        InvalidCase{":tag", "empty repository name"},
        InvalidCase{"a@b@sha256:" + kHex, "more than one '@'"}, InvalidCase{kHex, "image id"},
        InvalidCase{"example.com/" + std::string(250, 'a'), "longer than 255"},
        InvalidCase{"busy\x01"
                    "box",
                    "non-printable"}));

TEST(ImageRefTest, FamiliarKeepsLibraryForNonDockerHub) {
  auto ref = ParseImageReference("quay.io/library/busybox:1");
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->Familiar(), "quay.io/library/busybox:1");
}

// Found by test/fuzz/image_reference.cc: a Docker Hub repository whose first component looks like
// a registry lost its "docker.io/" and named another registry's image.
TEST(ImageRefTest, FamiliarParsesBackToTheSameImage) {
  for (const char* input :
       {"docker.io/localhost/app:1", "docker.io/a.b/app", "docker.io/a.b.c/d/e:t",
        "index.docker.io/library/busybox", "docker.io/team/app"}) {
    auto ref = ParseImageReference(input);
    ASSERT_TRUE(ref.ok()) << input << ": " << ref.status();
    auto again = ParseImageReference(ref->Familiar());
    ASSERT_TRUE(again.ok()) << ref->Familiar() << ": " << again.status();
    EXPECT_EQ(*again, *ref) << input << " -> " << ref->Familiar();
  }
  EXPECT_EQ(ParseImageReference("docker.io/localhost/app:1")->Familiar(),
            "docker.io/localhost/app:1");
  EXPECT_EQ(ParseImageReference("docker.io/team/app")->Familiar(), "team/app:latest");
  // "library/<64 hex>" is a repository; the bare hex string would be an image id.
  const std::string hex(64, 'f');
  auto official = ParseImageReference("library/" + hex);
  ASSERT_TRUE(official.ok()) << official.status();
  EXPECT_EQ(official->Familiar(), "library/" + hex + ":latest");
  EXPECT_EQ(*ParseImageReference(official->Familiar()), *official);
}

TEST(ImageRefTest, TagWithDigestNotDefaulted) {
  auto ref = ParseImageReference("busybox@" + kDigest);
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_TRUE(ref->tag.empty());
}

}  // namespace
}  // namespace kruise
