#include "daemon/imagepull/image_puller.h"

#include <atomic>

#include "absl/synchronization/mutex.h"
#include "cri/grpc_cri.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/fakes/cri/fake_cri_server.h"
#include "test/fakes/fake_clock.h"

namespace kruise::daemon {
namespace {

using ::testing::HasSubstr;
using testing::FakeCriServer;

// Counts status changes so tests can wait for a condition with a deadline instead of sleeping.
class ChangeWaiter {
 public:
  void Notify() {
    absl::MutexLock lock(&mu_);
    ++changes_;
  }
  std::function<void()> callback() {
    return [this] { Notify(); };
  }
  // Re-evaluates `pred` after every change until it holds or `timeout` (real time) passes.
  bool WaitUntil(const std::function<bool()>& pred, absl::Duration timeout = absl::Seconds(20)) {
    absl::Time deadline = absl::Now() + timeout;
    absl::MutexLock lock(&mu_);
    while (true) {
      int64_t seen = changes_;
      mu_.Unlock();
      bool ok = pred();
      mu_.Lock();
      if (ok) return true;
      auto changed = [&] { return changes_ != seen; };
      if (!mu_.AwaitWithDeadline(absl::Condition(&changed), deadline)) return pred();
    }
  }

 private:
  absl::Mutex mu_;
  int64_t changes_ ABSL_GUARDED_BY(mu_) = 0;
};

class FixedCredentials : public CredentialSource {
 public:
  absl::StatusOr<std::vector<RegistryCredential>> Lookup(
      const std::string& repository, const std::vector<SecretRef>& secrets) override {
    absl::MutexLock lock(&mu_);
    lookups_.push_back(repository);
    if (!error_.ok()) return error_;
    (void)secrets;
    return creds_;
  }
  void Set(std::vector<RegistryCredential> creds) {
    absl::MutexLock lock(&mu_);
    creds_ = std::move(creds);
  }
  void SetError(absl::Status s) {
    absl::MutexLock lock(&mu_);
    error_ = std::move(s);
  }

 private:
  absl::Mutex mu_;
  std::vector<RegistryCredential> creds_;
  absl::Status error_;
  std::vector<std::string> lookups_;
};

TagSpec Tag(const std::string& tag, int64_t version = 1, int64_t backoff_limit = 3) {
  TagSpec t;
  t.tag = tag;
  t.version = version;
  t.pull_policy.backoff_limit = backoff_limit;
  t.pull_policy.timeout_seconds = 10;
  return t;
}

ImageSpec Image(const std::string& name, std::vector<TagSpec> tags) {
  ImageSpec i;
  i.name = name;
  i.tags = std::move(tags);
  return i;
}

class ImagePullerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = FakeCriServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    auto channel = cri::DialCri(server_->endpoint());
    ASSERT_TRUE(channel.ok());
    images_ = std::make_shared<cri::GrpcImageService>(*channel);
    content_ = std::make_shared<cri::GrpcContentService>(*channel);
    creds_ = std::make_shared<FixedCredentials>();
  }

  std::unique_ptr<ImagePuller> NewPuller(ImagePullerOptions options = {}) {
    options.backoff_initial = absl::Milliseconds(5);
    options.backoff_max = absl::Milliseconds(20);
    if (options.runtime_probe_interval == absl::Seconds(1)) {
      options.runtime_probe_interval = absl::Milliseconds(20);
    }
    if (options.progress_interval == absl::Milliseconds(500)) {
      options.progress_interval = absl::Milliseconds(20);
    }
    return std::make_unique<ImagePuller>(options, images_, content_, creds_, Clock::Real(),
                                         waiter_.callback());
  }

  // A copy: Statuses() returns a snapshot by value.
  static std::optional<TagStatus> Find(const ImageStatuses& s, const std::string& image,
                                       const std::string& tag) {
    auto it = s.find(image);
    if (it == s.end()) return std::nullopt;
    for (const TagStatus& t : it->second) {
      if (t.tag == tag) return t;
    }
    return std::nullopt;
  }

  bool WaitPhase(ImagePuller& p, const std::string& image, const std::string& tag,
                 TagPhase phase) {
    return waiter_.WaitUntil([&] {
      auto t = Find(p.Statuses(), image, tag);
      return t.has_value() && t->phase == phase;
    });
  }

  std::unique_ptr<FakeCriServer> server_;
  std::shared_ptr<cri::ImageService> images_;
  std::shared_ptr<cri::ContentStatusReader> content_;
  std::shared_ptr<FixedCredentials> creds_;
  ChangeWaiter waiter_;
};

TEST_F(ImagePullerTest, PullsEveryTagAndReportsSucceeded) {
  auto puller = NewPuller();
  puller->Sync({Image("busybox", {Tag("1.35"), Tag("1.36")}),
                Image("127.0.0.1:5000/team/app", {Tag("v1")})},
               {});
  ASSERT_TRUE(WaitPhase(*puller, "busybox", "1.35", TagPhase::kSucceeded));
  ASSERT_TRUE(WaitPhase(*puller, "busybox", "1.36", TagPhase::kSucceeded));
  ASSERT_TRUE(WaitPhase(*puller, "127.0.0.1:5000/team/app", "v1", TagPhase::kSucceeded));
  auto t = Find(puller->Statuses(), "busybox", "1.35");
  EXPECT_EQ(t->progress, 100);
  EXPECT_EQ(t->version, 1);
  EXPECT_TRUE(t->start_time.has_value());
  EXPECT_TRUE(t->completion_time.has_value());
  EXPECT_THAT(t->image_id, ::testing::StartsWith("busybox@"));
  EXPECT_TRUE(server_->HasImage("docker.io/library/busybox:1.35"));
  EXPECT_TRUE(server_->HasImage("127.0.0.1:5000/team/app:v1"));

  // The sandbox config carries our annotation (some runtimes need a non-nil config).
  auto pulls = server_->Requests<runtime::v1::PullImageRequest>("PullImage");
  ASSERT_EQ(pulls.size(), 3u);
  EXPECT_EQ(pulls[0].sandbox_config().annotations().at("apps.kruise.io/pulling-image-by"),
            "kruise-daemon");
  EXPECT_FALSE(pulls[0].has_auth());
}

TEST_F(ImagePullerTest, ConcurrencyIsBoundedAndOthersWait) {
  ImagePullerOptions options;
  options.max_workers = 1;
  auto puller = NewPuller(options);
  server_->SetHang("PullImage", true);
  puller->Sync({Image("a", {Tag("1")}), Image("b", {Tag("1")}), Image("c", {Tag("1")})}, {});
  ASSERT_TRUE(server_->WaitForHungCalls("PullImage", 1, absl::Seconds(10)));
  ASSERT_TRUE(waiter_.WaitUntil([&] {
    int pulling = 0, waiting = 0;
    for (const auto& [image, tags] : puller->Statuses()) {
      for (const TagStatus& t : tags) {
        pulling += t.phase == TagPhase::kPulling;
        waiting += t.phase == TagPhase::kWaiting;
      }
    }
    return pulling == 1 && waiting == 2;
  }));
  EXPECT_EQ(puller->active_pulls(), 1);
  EXPECT_EQ(server_->CallCount("PullImage"), 1);
  server_->SetHang("PullImage", false);
  server_->ReleaseHangs();
  for (const char* image : {"a", "b", "c"}) {
    ASSERT_TRUE(WaitPhase(*puller, image, "1", TagPhase::kSucceeded)) << image;
  }
  EXPECT_EQ(server_->CallCount("PullImage"), 3);
}

TEST_F(ImagePullerTest, FailsAfterBackoffLimitPlusOneAttemptsWithRuntimeMessage) {
  auto puller = NewPuller();
  for (int i = 0; i < 3; ++i) {
    server_->InjectError("PullImage", absl::NotFoundError("manifest unknown: no such tag"));
  }
  puller->Sync({Image("missing", {Tag("v9", 1, /*backoff_limit=*/2)})}, {});
  ASSERT_TRUE(WaitPhase(*puller, "missing", "v9", TagPhase::kFailed));
  auto t = Find(puller->Statuses(), "missing", "v9");
  EXPECT_THAT(t->message, HasSubstr("manifest unknown"));
  EXPECT_TRUE(t->completion_time.has_value());
  EXPECT_EQ(server_->CallCount("PullImage"), 3);
}

TEST_F(ImagePullerTest, RetriesThenSucceeds) {
  auto puller = NewPuller();
  server_->InjectError("PullImage", absl::UnavailableError("connection refused"));
  server_->InjectError("PullImage", absl::UnavailableError("connection refused"));
  puller->Sync({Image("flaky", {Tag("1")})}, {});
  ASSERT_TRUE(WaitPhase(*puller, "flaky", "1", TagPhase::kSucceeded));
  EXPECT_EQ(server_->CallCount("PullImage"), 3);
  EXPECT_TRUE(Find(puller->Statuses(), "flaky", "1")->message.empty());
}

// Issue 13 part 4: containerd restarted while tags pull. Without a runtime every attempt fails at
// once, so backoffLimit used to be spent in milliseconds and the tags ended Failed for a cause
// that has nothing to do with the images. Now the attempts pause until a runtime answers on the
// socket again, and the same attempt resumes.
TEST_F(ImagePullerTest, RuntimeOutageDoesNotSpendAttempts) {
  server_->SetPullDuration(absl::Seconds(30), 1 << 20);  // still pulling when the runtime goes
  ImagePullerOptions options;
  options.max_workers = 3;
  auto puller = NewPuller(options);
  const std::vector<std::string> names = {"outage-a", "outage-b", "outage-c"};
  std::vector<ImageSpec> specs;
  for (const std::string& n : names) {
    TagSpec tag = Tag("1", 1, /*backoff_limit=*/1);
    tag.pull_policy.timeout_seconds = 60;
    specs.push_back(Image(n, {tag}));
  }
  puller->Sync(specs, {});
  ASSERT_TRUE(server_->WaitForInFlightPulls(3, absl::Seconds(10)));

  const std::string socket = server_->socket_path();
  server_->Shutdown();  // the in-flight pulls fail; the socket stops answering
  auto all_waiting = [&] {
    ImageStatuses s = puller->Statuses();
    for (const std::string& n : names) {
      auto t = Find(s, n, "1");
      if (!t || t->message.find("container runtime unavailable") == std::string::npos) return false;
    }
    return true;
  };
  ASSERT_TRUE(waiter_.WaitUntil(all_waiting));
  // The outage lasts: two attempts with 5-20 ms backoffs would have been spent many times over.
  absl::SleepFor(absl::Milliseconds(300));
  for (const std::string& n : names) {
    EXPECT_EQ(Find(puller->Statuses(), n, "1")->phase, TagPhase::kPulling) << n;
  }

  FakeCriServer::Options restarted_options;
  restarted_options.socket_path = socket;
  auto restarted = FakeCriServer::Start(restarted_options);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  for (const std::string& n : names) {
    ASSERT_TRUE(WaitPhase(*puller, n, "1", TagPhase::kSucceeded)) << n;
    EXPECT_TRUE(Find(puller->Statuses(), n, "1")->message.empty()) << n;
  }
  EXPECT_EQ((*restarted)->CallCount("PullImage"), 3);  // one attempt each on the new runtime
  puller.reset();
}

// An error from a runtime that answers (the registry refused, say) still counts as an attempt.
TEST_F(ImagePullerTest, UnavailableFromAnAnsweringRuntimeCounts) {
  for (int i = 0; i < 2; ++i) {
    server_->InjectError("PullImage", absl::UnavailableError("registry: connection refused"));
  }
  auto puller = NewPuller();
  puller->Sync({Image("refused", {Tag("1", 1, /*backoff_limit=*/1)})}, {});
  ASSERT_TRUE(WaitPhase(*puller, "refused", "1", TagPhase::kFailed));
  EXPECT_THAT(Find(puller->Statuses(), "refused", "1")->message, HasSubstr("connection refused"));
  EXPECT_EQ(server_->CallCount("PullImage"), 2);
}

TEST_F(ImagePullerTest, IfNotPresentSucceedsWithoutPullingButAlwaysPulls) {
  ASSERT_TRUE(server_->AddImage("docker.io/library/busybox:1.35").ok());
  auto puller = NewPuller();
  TagSpec if_not_present = Tag("1.35");
  if_not_present.image_pull_policy = "IfNotPresent";
  puller->Sync({Image("busybox", {if_not_present})}, {});
  ASSERT_TRUE(WaitPhase(*puller, "busybox", "1.35", TagPhase::kSucceeded));
  EXPECT_EQ(server_->CallCount("PullImage"), 0);

  TagSpec always = Tag("1.35", /*version=*/2);
  always.image_pull_policy = "Always";
  puller->Sync({Image("busybox", {always})}, {});
  ASSERT_TRUE(waiter_.WaitUntil([&] {
    auto t = Find(puller->Statuses(), "busybox", "1.35");
    return t && t->version == 2 && t->phase == TagPhase::kSucceeded;
  }));
  EXPECT_EQ(server_->CallCount("PullImage"), 1);
}

TEST_F(ImagePullerTest, VersionChangeRestartsAndRemovalStops) {
  auto puller = NewPuller();
  server_->SetHang("PullImage", true);
  puller->Sync({Image("app", {Tag("1", 1)})}, {});
  ASSERT_TRUE(server_->WaitForHungCalls("PullImage", 1, absl::Seconds(10)));
  puller->Sync({Image("app", {Tag("1", 2)})}, {});
  ASSERT_TRUE(server_->WaitForHungCalls("PullImage", 2, absl::Seconds(10)));
  auto t = Find(puller->Statuses(), "app", "1");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->version, 2);

  puller->Sync({}, {});
  EXPECT_TRUE(puller->Statuses().empty());
  server_->SetHang("PullImage", false);
  server_->ReleaseHangs();
  // The abandoned pulls finish at the runtime but never resurrect a status.
  puller->Sync({}, {});
  EXPECT_TRUE(puller->Statuses().empty());
}

TEST_F(ImagePullerTest, TagCompleteAtSameVersionIsNotPulledAgain) {
  auto puller = NewPuller();
  TagStatus done;
  done.tag = "1";
  done.version = 3;
  done.phase = TagPhase::kSucceeded;
  done.progress = 100;
  done.image_id = "app@sha256:abc";
  puller->Sync({Image("app", {Tag("1", 3)})}, {{"app", {done}}});
  auto statuses = puller->Statuses();
  ASSERT_TRUE(Find(statuses, "app", "1").has_value());
  EXPECT_EQ(Find(statuses, "app", "1")->image_id, "app@sha256:abc");
  EXPECT_EQ(server_->CallCount("PullImage"), 0);
  // A newer version is pulled.
  puller->Sync({Image("app", {Tag("1", 4)})}, {{"app", {done}}});
  ASSERT_TRUE(waiter_.WaitUntil([&] {
    auto t = Find(puller->Statuses(), "app", "1");
    return t && t->version == 4 && t->phase == TagPhase::kSucceeded;
  }));
  EXPECT_EQ(server_->CallCount("PullImage"), 1);
}

TEST_F(ImagePullerTest, ProgressRisesMonotonicallyFromContentStatuses) {
  server_->SetPullDuration(absl::Milliseconds(800), 10 << 20);
  std::vector<int> seen;
  absl::Mutex seen_mu;
  ImagePullerOptions options;
  options.progress_interval = absl::Milliseconds(20);
  ImagePuller* raw = nullptr;
  auto puller = std::make_unique<ImagePuller>(
      options, images_, content_, creds_, Clock::Real(), [&] {
        if (raw == nullptr) return;
        auto t = Find(raw->Statuses(), "sized", "10m");
        if (t.has_value()) {
          absl::MutexLock lock(&seen_mu);
          seen.push_back(t->progress);
        }
        waiter_.Notify();
      });
  raw = puller.get();
  puller->Sync({Image("sized", {Tag("10m")})}, {});
  ASSERT_TRUE(WaitPhase(*puller, "sized", "10m", TagPhase::kSucceeded));
  absl::MutexLock lock(&seen_mu);
  int intermediate = 0;
  for (size_t i = 1; i < seen.size(); ++i) {
    EXPECT_GE(seen[i], seen[i - 1]) << "progress went back within one attempt";
    if (seen[i] > 0 && seen[i] < 100) ++intermediate;
  }
  EXPECT_GE(intermediate, 2) << "expected intermediate progress values";
  EXPECT_EQ(seen.back(), 100);
}

TEST_F(ImagePullerTest, EachMatchingCredentialIsTriedInTurn) {
  server_->SetPullHook([](const runtime::v1::PullImageRequest& req) {
    if (req.auth().username() == "good" && req.auth().password() == "right") {
      return absl::OkStatus();
    }
    return absl::UnknownError("unexpected status: 401 Unauthorized");
  });
  creds_->Set({{"bad", "wrong", "r.io", "ns/old"}, {"good", "right", "r.io", "ns/new"}});
  auto puller = NewPuller();
  ImageSpec image = Image("r.io/team/app", {Tag("1", 1, /*backoff_limit=*/0)});
  image.pull_secrets = {{"kruise-daemon-config", "pull"}};
  puller->Sync({image}, {});
  ASSERT_TRUE(WaitPhase(*puller, "r.io/team/app", "1", TagPhase::kSucceeded));
  auto pulls = server_->Requests<runtime::v1::PullImageRequest>("PullImage");
  ASSERT_EQ(pulls.size(), 2u);
  EXPECT_EQ(pulls[0].auth().username(), "bad");
  EXPECT_EQ(pulls[1].auth().username(), "good");
}

TEST_F(ImagePullerTest, CredentialErrorFailsTheTagWithItsMessage) {
  creds_->SetError(absl::PermissionDeniedError("secret kruise-daemon-config/pull: forbidden"));
  auto puller = NewPuller();
  ImageSpec image = Image("r.io/app", {Tag("1")});
  image.pull_secrets = {{"kruise-daemon-config", "pull"}};
  puller->Sync({image}, {});
  ASSERT_TRUE(WaitPhase(*puller, "r.io/app", "1", TagPhase::kFailed));
  EXPECT_THAT(Find(puller->Statuses(), "r.io/app", "1")->message, HasSubstr("forbidden"));
  EXPECT_EQ(server_->CallCount("PullImage"), 0);
}

TEST_F(ImagePullerTest, ActiveDeadlineBoundsAllAttempts) {
  server_->SetHang("PullImage", true);
  auto puller = NewPuller();
  TagSpec tag = Tag("1", 1, /*backoff_limit=*/100);
  tag.pull_policy.timeout_seconds = 1;
  tag.pull_policy.active_deadline_seconds = 2;
  absl::Time start = absl::Now();
  puller->Sync({Image("slow", {tag})}, {});
  ASSERT_TRUE(WaitPhase(*puller, "slow", "1", TagPhase::kFailed));
  EXPECT_LT(absl::Now() - start, absl::Seconds(6));
  EXPECT_THAT(Find(puller->Statuses(), "slow", "1")->message,
              HasSubstr("exceeds the activeDeadlineSeconds"));
}

TEST_F(ImagePullerTest, MalformedImageNameFailsClearly) {
  auto puller = NewPuller();
  puller->Sync({Image("Bad Name", {Tag("1")})}, {});
  ASSERT_TRUE(WaitPhase(*puller, "Bad Name", "1", TagPhase::kFailed));
  EXPECT_FALSE(Find(puller->Statuses(), "Bad Name", "1")->message.empty());
  EXPECT_EQ(server_->CallCount("PullImage"), 0);
}

TEST_F(ImagePullerTest, StopAbandonsAPullStuckInTheRuntime) {
  server_->SetHang("PullImage", true);
  auto puller = NewPuller();
  puller->Sync({Image("stuck", {Tag("1")})}, {});
  ASSERT_TRUE(server_->WaitForHungCalls("PullImage", 1, absl::Seconds(10)));
  absl::Time start = absl::Now();
  puller->Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  puller.reset();
  server_->ReleaseHangs();
}

}  // namespace
}  // namespace kruise::daemon
