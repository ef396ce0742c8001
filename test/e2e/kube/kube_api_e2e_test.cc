// End-to-end tests of RestKubeClient and the Informer against a real kube-apiserver (kube-local):
// CRUD + status subresource on our CRD, pagination, watch resume, 410 handling and bad inputs.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/errors.h"
#include "kube/informer.h"
#include "kube/object.h"
#include "kube/resources.h"
#include "kube/rest_client.h"
#include "test/e2e/kube/kube_local_env.h"

namespace kruise::testing {
namespace {

using kube::Json;
using ::testing::HasSubstr;
namespace res = kube::resources;

int64_t Rv(const Json& obj) {
  int64_t v = 0;
  EXPECT_TRUE(absl::SimpleAtoi(kube::ResourceVersion(obj), &v)) << obj.dump();
  return v;
}

Json ConfigMap(const std::string& name, const std::string& value) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}}},
          {"data", {{"v", value}}}};
}

Json WatchedConfigMap(const std::string& name, const std::string& value) {
  Json cm = ConfigMap(name, value);
  cm["metadata"]["labels"] = {{"kruise-e2e", "watch"}};
  return cm;
}

class KubeApiE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KRUISE_KUBE_LOCAL_OR_SKIP(env_);
    auto c = AdminClient(env_);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
    ns_ = std::make_unique<ScopedNamespace>(client_.get(), "kruise-e2e");
    ASSERT_TRUE(ns_->status().ok()) << ns_->status();
  }
  void TearDown() override {
    ns_.reset();
    // CRDs this test installed go again, so the next test starts from the cluster it found.
    if (installed_crds_) {
      std::string out;
      auto rc = RunCommand({env_.kubectl(), "--kubeconfig", env_.kubeconfig(), "delete", "-k",
                            std::string(KRUISE_SOURCE_DIR) + "/deploy/crds", "--wait=true",
                            "--timeout=120s"},
                           &out);
      EXPECT_TRUE(rc.ok() && *rc == 0) << out;
    }
  }

  // Applies deploy/crds when the ImagePullJob CRD is missing and waits until it is Established.
  void EnsureCrds() {
    const std::string crd = "imagepulljobs.apps.kruise.io";
    auto got = client_->Get(res::CustomResourceDefinitions(), "", crd);
    if (kube::IsNotFound(got.status())) {
      std::string out;
      // -k: deploy/crds is a kustomization (`apply -f` of the folder would also read
      // kustomization.yaml as an object and fail).
      auto rc = RunCommand({env_.kubectl(), "--kubeconfig", env_.kubeconfig(), "apply", "-k",
                            std::string(KRUISE_SOURCE_DIR) + "/deploy/crds"},
                           &out);
      ASSERT_TRUE(rc.ok()) << rc.status();
      ASSERT_EQ(*rc, 0) << out;
      installed_crds_ = true;
    } else {
      ASSERT_TRUE(got.ok()) << got.status();
    }
    bool established = PollUntil(
        [&] {
          auto c = client_->Get(res::CustomResourceDefinitions(), "", crd);
          if (!c.ok()) return false;
          const Json* conds = kube::FindPath(*c, {"status", "conditions"});
          if (conds == nullptr || !conds->is_array()) return false;
          for (const Json& cond : *conds) {
            if (cond.value("type", "") == "Established" && cond.value("status", "") == "True") {
              return true;
            }
          }
          return false;
        },
        absl::Seconds(30));
    ASSERT_TRUE(established) << crd << " not Established";
  }

  // Creates `n` ConfigMaps named prefix-<i> with `parallelism` threads.
  void CreateConfigMaps(const std::string& prefix, int n, int parallelism) {
    std::atomic<int> next{0};
    std::atomic<int> failures{0};
    absl::Mutex mu;
    std::string first_error;
    std::vector<std::thread> workers;
    for (int w = 0; w < parallelism; ++w) {
      workers.emplace_back([&] {
        for (int i = next++; i < n; i = next++) {
          auto st = client_->Create(res::ConfigMaps(), ns_->name(),
                                    ConfigMap(absl::StrCat(prefix, "-", i), std::to_string(i)));
          if (!st.ok()) {
            ++failures;
            absl::MutexLock lock(&mu);
            if (first_error.empty()) first_error = st.status().ToString();
          }
        }
      });
    }
    for (auto& t : workers) t.join();
    ASSERT_EQ(failures.load(), 0) << first_error;
  }

  KubeLocalEnv env_;
  std::unique_ptr<kube::RestKubeClient> client_;
  std::unique_ptr<ScopedNamespace> ns_;
  bool installed_crds_ = false;
};

// 1. CRUD and the status subresource on a CRD, with every optimistic-concurrency failure.
TEST_F(KubeApiE2eTest, ImagePullJobCrudStatusPatchAndPreconditions) {
  ASSERT_NO_FATAL_FAILURE(EnsureCrds());
  const auto r = res::ImagePullJobs();
  const std::string& ns = ns_->name();
  Json job = {{"apiVersion", r.ApiVersion()},
              {"kind", r.kind},
              {"metadata", {{"name", "job-a"}, {"labels", {{"e2e", "crud"}}}}},
              {"spec", {{"image", "127.0.0.1:16408/busybox:1.35"}}},
              {"status", {{"desired", 42}}}};

  // Create: server fills uid/resourceVersion/generation, applies schema defaults, drops status.
  auto created = client_->Create(r, ns, job);
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string uid = kube::Uid(*created);
  EXPECT_FALSE(uid.empty());
  EXPECT_EQ(kube::Generation(*created), 1);
  EXPECT_EQ(kube::GetString(*created, {"spec", "imagePullPolicy"}), "IfNotPresent");
  EXPECT_EQ(kube::FindPath(*created, {"status", "desired"}), nullptr) << created->dump();
  EXPECT_TRUE(kube::IsAlreadyExists(client_->Create(r, ns, job).status()));

  // Get.
  auto got = client_->Get(r, ns, "job-a");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(kube::Uid(*got), uid);
  EXPECT_EQ(kube::ResourceVersion(*got), kube::ResourceVersion(*created));
  EXPECT_TRUE(kube::IsNotFound(client_->Get(r, ns, "no-such-job").status()));

  // Update of the spec (PUT): generation moves, a status in the body is ignored.
  Json stale = *got;
  Json upd = *got;
  upd["spec"]["parallelism"] = 3;
  upd["status"] = {{"desired", 7}};
  auto updated = client_->Update(r, ns, upd);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(kube::Generation(*updated), 2);
  EXPECT_EQ(kube::GetInt(*updated, {"spec", "parallelism"}), 3);
  EXPECT_EQ(kube::FindPath(*updated, {"status", "desired"}), nullptr);
  EXPECT_GT(Rv(*updated), Rv(*got));

  // Update through the status subresource: status changes, spec and generation do not.
  Json st = *updated;
  st["status"] = {{"desired", 5}, {"active", 2}, {"message", "pulling"}};
  st["spec"]["parallelism"] = 9;  // ignored by /status
  auto status_updated = client_->Update(r, ns, st, "status");
  ASSERT_TRUE(status_updated.ok()) << status_updated.status();
  EXPECT_EQ(kube::GetInt(*status_updated, {"status", "desired"}), 5);
  EXPECT_EQ(kube::GetString(*status_updated, {"status", "message"}), "pulling");
  EXPECT_EQ(kube::GetInt(*status_updated, {"spec", "parallelism"}), 3);
  EXPECT_EQ(kube::Generation(*status_updated), 2);

  // Stale update (the object as read before the first update): Conflict -> kAborted.
  stale["spec"]["parallelism"] = 4;
  auto conflict = client_->Update(r, ns, stale);
  EXPECT_TRUE(kube::IsConflict(conflict.status())) << conflict.status();
  EXPECT_EQ(kube::Reason(conflict.status()), "Conflict");
  auto conflict_status = client_->Update(r, ns, stale, "status");
  EXPECT_TRUE(kube::IsConflict(conflict_status.status())) << conflict_status.status();

  // Merge patch (main resource and status subresource).
  auto merged = client_->Patch(r, ns, "job-a", kube::PatchType::kMerge,
                               {{"metadata", {{"labels", {{"patched", "merge"}}}}},
                                {"spec", {{"pullSecrets", {"s1", "s2"}}}}});
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(kube::Label(*merged, "patched"), "merge");
  EXPECT_EQ(kube::Label(*merged, "e2e"), "crud");
  EXPECT_EQ(merged->at("spec").at("pullSecrets"), Json({"s1", "s2"}));
  auto status_merged = client_->Patch(r, ns, "job-a", kube::PatchType::kMerge,
                                      {{"status", {{"succeeded", 1}}}}, "status");
  ASSERT_TRUE(status_merged.ok()) << status_merged.status();
  EXPECT_EQ(kube::GetInt(*status_merged, {"status", "succeeded"}), 1);
  EXPECT_EQ(kube::GetInt(*status_merged, {"status", "desired"}), 5);

  // JSON patch with a passing and a failing `test` operation.
  Json jp = Json::array(
      {{{"op", "test"}, {"path", "/spec/image"}, {"value", "127.0.0.1:16408/busybox:1.35"}},
       {{"op", "replace"}, {"path", "/spec/image"}, {"value", "127.0.0.1:16408/busybox:v2"}},
       {{"op", "remove"}, {"path", "/spec/pullSecrets/0"}}});
  auto jpatched = client_->Patch(r, ns, "job-a", kube::PatchType::kJson, jp);
  ASSERT_TRUE(jpatched.ok()) << jpatched.status();
  EXPECT_EQ(kube::GetString(*jpatched, {"spec", "image"}), "127.0.0.1:16408/busybox:v2");
  EXPECT_EQ(jpatched->at("spec").at("pullSecrets"), Json({"s2"}));
  auto failed_test = client_->Patch(
      r, ns, "job-a", kube::PatchType::kJson,
      Json::array({{{"op", "test"}, {"path", "/spec/image"}, {"value", "something-else"}}}));
  EXPECT_FALSE(failed_test.ok());
  EXPECT_EQ(failed_test.status().code(), absl::StatusCode::kInvalidArgument)
      << failed_test.status();
  // A patch that carries a stale resourceVersion is an optimistic-concurrency check too.
  auto stale_patch =
      client_->Patch(r, ns, "job-a", kube::PatchType::kMerge,
                     {{"metadata", {{"resourceVersion", kube::ResourceVersion(*created)}}},
                      {"spec", {{"parallelism", 8}}}});
  EXPECT_TRUE(kube::IsConflict(stale_patch.status())) << stale_patch.status();

  // Schema validation: 422 Invalid -> kInvalidArgument.
  auto invalid = client_->Patch(r, ns, "job-a", kube::PatchType::kMerge,
                                {{"spec", {{"imagePullPolicy", "Sometimes"}}}});
  EXPECT_EQ(invalid.status().code(), absl::StatusCode::kInvalidArgument) << invalid.status();
  EXPECT_EQ(kube::Reason(invalid.status()), "Invalid");

  // Delete with preconditions: a wrong uid or resourceVersion is a conflict and deletes nothing.
  kube::DeleteOptions wrong_uid;
  wrong_uid.precondition_uid = "00000000-0000-0000-0000-000000000000";
  absl::Status del = client_->Delete(r, ns, "job-a", wrong_uid);
  EXPECT_TRUE(kube::IsConflict(del)) << del;
  kube::DeleteOptions wrong_rv;
  wrong_rv.precondition_resource_version = kube::ResourceVersion(*created);
  del = client_->Delete(r, ns, "job-a", wrong_rv);
  EXPECT_TRUE(kube::IsConflict(del)) << del;
  ASSERT_TRUE(client_->Get(r, ns, "job-a").ok());

  kube::DeleteOptions right;
  right.precondition_uid = uid;
  del = client_->Delete(r, ns, "job-a", right);
  ASSERT_TRUE(del.ok()) << del;
  EXPECT_TRUE(kube::IsNotFound(client_->Get(r, ns, "job-a").status()));
  EXPECT_TRUE(kube::IsNotFound(client_->Delete(r, ns, "job-a")));
}

// 2. Pagination over 520 objects: limit 100 gives >= 6 pages and every object exactly once.
TEST_F(KubeApiE2eTest, ListPaginatesOver500ConfigMaps) {
  constexpr int kCount = 520;
  const absl::Time start = absl::Now();
  ASSERT_NO_FATAL_FAILURE(CreateConfigMaps("page", kCount, 8));
  const absl::Duration create_time = absl::Now() - start;

  std::map<std::string, int> seen;
  kube::ListOptions opts;
  opts.limit = 100;
  int pages = 0;
  std::string first_rv;
  while (true) {
    auto page = client_->List(res::ConfigMaps(), ns_->name(), opts);
    ASSERT_TRUE(page.ok()) << page.status();
    ++pages;
    ASSERT_LE(page->items.size(), 100u);
    if (first_rv.empty()) first_rv = page->resource_version;
    // All pages are served from one consistent snapshot.
    EXPECT_EQ(page->resource_version, first_rv);
    for (const Json& item : page->items) {
      EXPECT_EQ(item.value("kind", ""), "ConfigMap");
      ++seen[kube::Name(item)];
    }
    if (page->continue_token.empty()) break;
    EXPECT_GE(page->remaining_item_count, 0);
    opts.continue_token = page->continue_token;
    ASSERT_LT(pages, 50) << "pagination does not end";
  }
  EXPECT_GE(pages, 6);
  // The namespace also holds the root CA ConfigMap the controller-manager publishes.
  int ours = 0;
  for (const auto& [name, count] : seen) {
    EXPECT_EQ(count, 1) << name << " seen more than once";
    if (absl::StartsWith(name, "page-")) ++ours;
  }
  EXPECT_EQ(ours, kCount);
  std::cout << "created " << kCount << " ConfigMaps in " << create_time << ", listed in " << pages
            << " pages\n";

  // A label-free list without limit agrees.
  auto all = client_->List(res::ConfigMaps(), ns_->name(), {});
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->items.size(), seen.size());
  EXPECT_TRUE(all->continue_token.empty());
}

// Collects watch events on a thread until cancelled.
class WatchRecorder {
 public:
  WatchRecorder(kube::KubeClient* client, const std::string& ns, const std::string& rv)
      : thread_([this, client, ns, rv] {
          kube::ListOptions opts;
          opts.resource_version = rv;
          opts.allow_watch_bookmarks = true;
          // Only this test's objects (the controller-manager adds kube-root-ca.crt meanwhile).
          opts.label_selector = "kruise-e2e=watch";
          absl::Status st = client->Watch(
              res::ConfigMaps(), ns, opts,
              [this](kube::WatchEvent&& ev) {
                absl::MutexLock lock(&mu_);
                if (ev.type == kube::WatchEvent::Type::kBookmark) {
                  ++bookmarks_;
                } else {
                  events_.push_back(std::move(ev));
                }
                return true;
              },
              &canceller_);
          absl::MutexLock lock(&mu_);
          result_ = st;
          done_ = true;
        }) {}
  ~WatchRecorder() { (void)Stop(); }

  // Waits until `n` non-bookmark events arrived (or the watch ended).
  bool WaitForEvents(size_t n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return done_ || events_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
    return events_.size() >= n;
  }
  absl::Status Stop() {
    canceller_.Cancel();
    if (thread_.joinable()) thread_.join();
    absl::MutexLock lock(&mu_);
    return result_;
  }
  std::vector<kube::WatchEvent> events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }

 private:
  kube::WatchCanceller canceller_;
  absl::Mutex mu_;
  std::vector<kube::WatchEvent> events_ ABSL_GUARDED_BY(mu_);
  int bookmarks_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status result_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

std::string Describe(const kube::WatchEvent& ev) {
  static const char* kNames[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK"};
  return absl::StrCat(kNames[static_cast<int>(ev.type)], " ", kube::Name(ev.object), "@",
                      kube::ResourceVersion(ev.object));
}

// 3. A watch cancelled and resumed from the last resourceVersion it saw misses and repeats nothing.
TEST_F(KubeApiE2eTest, WatchResumesFromLastSeenResourceVersion) {
  const std::string& ns = ns_->name();
  auto list = client_->List(res::ConfigMaps(), ns, {});
  ASSERT_TRUE(list.ok()) << list.status();

  constexpr int kFirst = 10;
  WatchRecorder first(client_.get(), ns, list->resource_version);
  for (int i = 0; i < kFirst; ++i) {
    ASSERT_TRUE(
        client_->Create(res::ConfigMaps(), ns, WatchedConfigMap(absl::StrCat("w1-", i), "x")).ok());
  }
  ASSERT_TRUE(first.WaitForEvents(kFirst, absl::Seconds(30)));
  absl::Status st = first.Stop();
  EXPECT_TRUE(st.ok()) << st;
  std::vector<kube::WatchEvent> a = first.events();
  ASSERT_EQ(a.size(), static_cast<size_t>(kFirst));
  const std::string last_rv = kube::ResourceVersion(a.back().object);

  // While nobody watches: more creates, an update and a delete of first-batch objects.
  constexpr int kSecond = 10;
  for (int i = 0; i < kSecond; ++i) {
    ASSERT_TRUE(
        client_->Create(res::ConfigMaps(), ns, WatchedConfigMap(absl::StrCat("w2-", i), "y")).ok());
  }
  ASSERT_TRUE(client_
                  ->Patch(res::ConfigMaps(), ns, "w1-3", kube::PatchType::kMerge,
                          {{"data", {{"v", "changed"}}}})
                  .ok());
  ASSERT_TRUE(client_->Delete(res::ConfigMaps(), ns, "w1-4").ok());

  WatchRecorder second(client_.get(), ns, last_rv);
  ASSERT_TRUE(second.WaitForEvents(kSecond + 2, absl::Seconds(30)));
  // One more live event after the replay.
  ASSERT_TRUE(client_->Create(res::ConfigMaps(), ns, WatchedConfigMap("w3-0", "z")).ok());
  ASSERT_TRUE(second.WaitForEvents(kSecond + 3, absl::Seconds(30)));
  st = second.Stop();
  EXPECT_TRUE(st.ok()) << st;
  std::vector<kube::WatchEvent> b = second.events();

  std::vector<std::string> got;
  for (const auto& ev : a) got.push_back(Describe(ev));
  for (const auto& ev : b) got.push_back(Describe(ev));
  // Resource versions strictly increase across both watches: nothing repeated, nothing reordered.
  int64_t prev = 0;
  std::set<std::string> keys;
  for (const auto* evs : {&a, &b}) {
    for (const auto& ev : *evs) {
      int64_t rv = Rv(ev.object);
      EXPECT_GT(rv, prev) << ::testing::PrintToString(got);
      prev = rv;
      keys.insert(Describe(ev));
    }
  }
  EXPECT_EQ(keys.size(), got.size()) << "duplicate events: " << ::testing::PrintToString(got);
  ASSERT_EQ(b.size(), static_cast<size_t>(kSecond + 3)) << ::testing::PrintToString(got);
  for (int i = 0; i < kSecond; ++i) {
    EXPECT_EQ(b[i].type, kube::WatchEvent::Type::kAdded);
    EXPECT_EQ(kube::Name(b[i].object), absl::StrCat("w2-", i));
  }
  EXPECT_EQ(b[kSecond].type, kube::WatchEvent::Type::kModified);
  EXPECT_EQ(kube::Name(b[kSecond].object), "w1-3");
  EXPECT_EQ(b[kSecond + 1].type, kube::WatchEvent::Type::kDeleted);
  EXPECT_EQ(kube::Name(b[kSecond + 1].object), "w1-4");
  EXPECT_EQ(b[kSecond + 2].type, kube::WatchEvent::Type::kAdded);
  EXPECT_EQ(kube::Name(b[kSecond + 2].object), "w3-0");
}

// 4a. A resourceVersion far older than the apiserver's watch window: 410 Gone -> kOutOfRange.
TEST_F(KubeApiE2eTest, WatchFromAncientResourceVersionIsOutOfRange) {
  kube::ListOptions opts;
  opts.resource_version = "1";
  int events = 0;
  kube::WatchCanceller canceller;
  const absl::Time start = absl::Now();
  absl::Status st = client_->Watch(
      res::ConfigMaps(), ns_->name(), opts,
      [&](kube::WatchEvent&&) {
        ++events;
        return true;
      },
      &canceller);
  EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange) << st;
  EXPECT_TRUE(kube::IsGone(st));
  EXPECT_EQ(events, 0);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

// Wraps a client; while "partitioned", watches end at once (the informer cannot see events), and
// after the partition the next watch starts from resourceVersion "1" so the real server answers
// 410 Gone, as it would after a long disconnection.
class PartitionableClient final : public kube::KubeClient {
 public:
  explicit PartitionableClient(kube::KubeClient* inner) : inner_(inner) {}

  // Cuts the client off: the open watch is cancelled and Partition() returns only once that call
  // has returned, and no event of a watch opened before the partition is delivered afterwards
  // (libcurl notices a cancel only at its next progress callback, up to a second later, and the
  // API server may still be sending; without both guards those events would arrive after
  // HealWithGone as ordinary watch events).
  void Partition() {
    absl::MutexLock lock(&mu_);
    partitioned_ = true;
    ++generation_;
    if (active_ != nullptr) active_->Cancel();
    auto closed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return active_ == nullptr; };
    ASSERT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&closed), absl::Seconds(30)))
        << "the watch open at the partition did not return";
  }
  // Ends the partition; the next watch is sent with resourceVersion "1".
  void HealWithGone() {
    absl::MutexLock lock(&mu_);
    partitioned_ = false;
    force_gone_ = true;
  }
  int gone_watches() const { return gone_watches_.load(); }

  absl::StatusOr<Json> Get(const kube::Resource& r, const std::string& ns,
                           const std::string& name) override {
    return inner_->Get(r, ns, name);
  }
  absl::StatusOr<kube::ListResult> List(const kube::Resource& r, const std::string& ns,
                                        const kube::ListOptions& opts) override {
    return inner_->List(r, ns, opts);
  }
  absl::StatusOr<Json> Create(const kube::Resource& r, const std::string& ns,
                              const Json& obj) override {
    return inner_->Create(r, ns, obj);
  }
  absl::StatusOr<Json> Update(const kube::Resource& r, const std::string& ns, const Json& obj,
                              const std::string& sub) override {
    return inner_->Update(r, ns, obj, sub);
  }
  absl::StatusOr<Json> Patch(const kube::Resource& r, const std::string& ns,
                             const std::string& name, kube::PatchType type, const Json& patch,
                             const std::string& sub) override {
    return inner_->Patch(r, ns, name, type, patch, sub);
  }
  absl::Status Delete(const kube::Resource& r, const std::string& ns, const std::string& name,
                      const kube::DeleteOptions& opts) override {
    return inner_->Delete(r, ns, name, opts);
  }
  absl::Status Watch(const kube::Resource& r, const std::string& ns, const kube::ListOptions& opts,
                     const kube::WatchHandler& handler, kube::WatchCanceller* canceller) override {
    kube::ListOptions o = opts;
    kube::WatchCanceller mine;
    uint64_t generation = 0;
    {
      absl::MutexLock lock(&mu_);
      if (partitioned_) return absl::UnavailableError("test partition");
      generation = generation_;
      if (force_gone_) {
        force_gone_ = false;
        o.resource_version = "1";
        ++gone_watches_;
      }
      active_ = &mine;
    }
    // Forward the caller's cancellation to our canceller.
    std::atomic<bool> done{false};
    std::thread forward([&] {
      while (!done.load()) {
        if (canceller != nullptr && canceller->cancelled()) mine.Cancel();
        absl::SleepFor(absl::Milliseconds(20));
      }
    });
    // Events that arrive once partitioned are dropped (the cancel takes effect only at libcurl's
    // next progress callback), so the partition is exact.
    const kube::WatchHandler gated = [this, &handler, generation](kube::WatchEvent&& ev) {
      {
        absl::MutexLock lock(&mu_);
        if (partitioned_ || generation != generation_) return false;
      }
      return handler(std::move(ev));
    };
    absl::Status st = inner_->Watch(r, ns, o, gated, &mine);
    done = true;
    forward.join();
    absl::MutexLock lock(&mu_);
    active_ = nullptr;
    if (st.ok() && (partitioned_ || generation != generation_)) {
      return absl::UnavailableError("test partition");
    }
    return st;
  }

 private:
  kube::KubeClient* inner_;
  absl::Mutex mu_;
  bool partitioned_ ABSL_GUARDED_BY(mu_) = false;
  bool force_gone_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // counts partitions
  kube::WatchCanceller* active_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::atomic<int> gone_watches_{0};
};

// 4b. An informer whose watch gets 410 Gone relists and emits the differences: adds, updates, and
// deletes (tombstones with the last known state) for objects deleted while it was not watching.
TEST_F(KubeApiE2eTest, InformerRelistsAfterGoneAndEmitsTombstones) {
  const std::string& ns = ns_->name();
  ASSERT_NO_FATAL_FAILURE(CreateConfigMaps("inf", 6, 2));
  PartitionableClient pc(client_.get());

  struct Seen {
    std::vector<std::string> adds, updates, deletes;
    std::map<std::string, bool> delete_unknown;
    std::map<std::string, std::string> delete_last_value;
  };
  absl::Mutex mu;
  Seen seen;
  kube::InformerOptions opts;
  opts.resource = res::ConfigMaps();
  opts.ns = ns;
  opts.label_selector = "";
  opts.page_size = 2;  // several pages
  opts.initial_backoff = absl::Milliseconds(50);
  opts.max_backoff = absl::Milliseconds(400);
  kube::Informer informer(&pc, Clock::Real(), opts);
  kube::ResourceEventHandler h;
  h.on_add = [&](const Json& o) {
    absl::MutexLock l(&mu);
    seen.adds.push_back(kube::Name(o));
  };
  h.on_update = [&](const Json&, const Json& o) {
    absl::MutexLock l(&mu);
    seen.updates.push_back(kube::Name(o));
  };
  h.on_delete = [&](const Json& o, bool unknown) {
    absl::MutexLock l(&mu);
    seen.deletes.push_back(kube::Name(o));
    seen.delete_unknown[kube::Name(o)] = unknown;
    seen.delete_last_value[kube::Name(o)] = kube::GetString(o, {"data", "v"}).value_or("");
  };
  informer.AddEventHandler(h);
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(absl::Now() + absl::Seconds(30)));
  // The namespace's kube-root-ca.crt may or may not exist yet; count only ours.
  auto count_ours = [&](const std::vector<std::string>& v, const std::string& prefix) {
    int n = 0;
    for (const auto& s : v) n += absl::StartsWith(s, prefix) ? 1 : 0;
    return n;
  };
  {
    absl::MutexLock l(&mu);
    EXPECT_EQ(count_ours(seen.adds, "inf-"), 6);
  }

  // A live event through the watch (normal path).
  ASSERT_TRUE(client_
                  ->Patch(res::ConfigMaps(), ns, "inf-0", kube::PatchType::kMerge,
                          {{"data", {{"v", "live"}}}})
                  .ok());
  {
    absl::MutexLock l(&mu);
    auto got = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return count_ours(seen.updates, "inf-0") == 1;
    };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&got), absl::Seconds(30)));
  }

  // Partition, then change things behind the informer's back.
  ASSERT_NO_FATAL_FAILURE(pc.Partition());
  const uint64_t lists_before = informer.stats().lists;
  ASSERT_TRUE(client_->Delete(res::ConfigMaps(), ns, "inf-1").ok());
  ASSERT_TRUE(client_->Delete(res::ConfigMaps(), ns, "inf-2").ok());
  ASSERT_TRUE(client_
                  ->Patch(res::ConfigMaps(), ns, "inf-3", kube::PatchType::kMerge,
                          {{"data", {{"v", "offline"}}}})
                  .ok());
  ASSERT_TRUE(client_->Create(res::ConfigMaps(), ns, ConfigMap("inf-new", "n")).ok());
  {
    absl::MutexLock l(&mu);
    // Nothing of that reached the informer.
    EXPECT_EQ(count_ours(seen.deletes, "inf-"), 0);
  }
  pc.HealWithGone();

  {
    absl::MutexLock l(&mu);
    auto relisted = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return count_ours(seen.deletes, "inf-") >= 2 && count_ours(seen.adds, "inf-new") >= 1 &&
             count_ours(seen.updates, "inf-3") >= 1;
    };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&relisted), absl::Seconds(30)))
        << "adds " << ::testing::PrintToString(seen.adds) << " updates "
        << ::testing::PrintToString(seen.updates) << " deletes "
        << ::testing::PrintToString(seen.deletes);
    EXPECT_EQ(count_ours(seen.deletes, "inf-"), 2);
    EXPECT_TRUE(seen.delete_unknown["inf-1"]);
    EXPECT_TRUE(seen.delete_unknown["inf-2"]);
    EXPECT_EQ(seen.delete_last_value["inf-1"], "1");
    EXPECT_EQ(count_ours(seen.updates, "inf-0"), 1);  // unchanged objects are not re-emitted
    EXPECT_EQ(count_ours(seen.updates, "inf-4"), 0);
  }
  EXPECT_GE(pc.gone_watches(), 1);
  kube::InformerStats stats = informer.stats();
  EXPECT_GE(stats.relists, 1u);
  EXPECT_GT(stats.lists, lists_before);
  EXPECT_EQ(informer.store().Get(ns, "inf-1"), nullptr);
  auto inf3 = informer.store().Get(ns, "inf-3");
  ASSERT_NE(inf3, nullptr);
  EXPECT_EQ(kube::GetString(*inf3, {"data", "v"}), "offline");
  EXPECT_EQ(kube::FindPath(*inf3, {"metadata", "managedFields"}), nullptr);

  // After the relist the watch works again.
  ASSERT_TRUE(client_->Delete(res::ConfigMaps(), ns, "inf-5").ok());
  {
    absl::MutexLock l(&mu);
    auto got = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return seen.delete_unknown.count("inf-5") > 0;
    };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&got), absl::Seconds(30)));
    EXPECT_FALSE(seen.delete_unknown["inf-5"]);
  }
  informer.Stop();
}

// 6. Bad inputs fail clearly and quickly.
class KubeBadInputE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KRUISE_KUBE_LOCAL_OR_SKIP(env_);
    auto config = kube::LoadKubeconfig(env_.kubeconfig());
    ASSERT_TRUE(config.ok()) << config.status();
    config_ = *config;
  }
  KubeLocalEnv env_;
  kube::RestConfig config_;
};

TEST_F(KubeBadInputE2eTest, WrongCaIsAClearTlsError) {
  // The TLS registry's CA did not sign the apiserver's certificate.
  std::string other_ca = env_.Get("KUBE_LOCAL_REGISTRY_TLS_CA");
  if (other_ca.empty() || access(other_ca.c_str(), R_OK) != 0) {
    GTEST_SKIP() << "no second CA in the env file (KUBE_LOCAL_REGISTRY_TLS_CA)";
  }
  kube::RestConfig c = config_;
  c.ca_data.clear();
  c.ca_file = other_ca;
  auto client = kube::RestKubeClient::Create(c);
  ASSERT_TRUE(client.ok()) << client.status();
  const absl::Time start = absl::Now();
  auto got = (*client)->Get(res::Namespaces(), "", "default");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnauthenticated) << got.status();
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("TLS verification"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  // The token must never appear in the message.
  if (!c.bearer_token.empty()) {
    EXPECT_THAT(std::string(got.status().message()), ::testing::Not(HasSubstr(c.bearer_token)));
  }
}

TEST_F(KubeBadInputE2eTest, BadTokenIsUnauthenticated) {
  kube::RestConfig c = config_;
  c.bearer_token = "not-a-valid-token-0123456789";
  c.bearer_token_file.clear();
  c.client_cert_data.clear();
  c.client_cert_file.clear();
  c.client_key_data.clear();
  c.client_key_file.clear();
  auto client = kube::RestKubeClient::Create(c);
  ASSERT_TRUE(client.ok()) << client.status();
  auto got = (*client)->List(res::Namespaces(), "", {});
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnauthenticated) << got.status();
  EXPECT_EQ(kube::Reason(got.status()), "Unauthorized");
  EXPECT_THAT(std::string(got.status().message()), ::testing::Not(HasSubstr(c.bearer_token)));
}

TEST_F(KubeBadInputE2eTest, ClientCertificateAuthWorks) {
  const std::string cert = env_.Get("KUBE_LOCAL_ADMIN_CERT");
  const std::string key = env_.Get("KUBE_LOCAL_ADMIN_KEY");
  if (cert.empty() || key.empty()) GTEST_SKIP() << "no admin client certificate in the env file";
  kube::RestConfig c = config_;
  c.bearer_token.clear();
  c.bearer_token_file.clear();
  c.client_cert_data.clear();
  c.client_key_data.clear();
  c.client_cert_file = cert;
  c.client_key_file = key;
  auto client = kube::RestKubeClient::Create(c);
  ASSERT_TRUE(client.ok()) << client.status();
  auto got = (*client)->Get(res::Namespaces(), "", "default");
  EXPECT_TRUE(got.ok()) << got.status();
}

int UnusedLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  close(fd);  // nothing listens there now
  return ntohs(addr.sin_port);
}

TEST_F(KubeBadInputE2eTest, UnreachablePortIsUnavailableWithinABound) {
  const int port = UnusedLoopbackPort();
  ASSERT_GT(port, 0);
  kube::RestConfig c = config_;
  c.host = absl::StrCat("https://127.0.0.1:", port);
  auto client = kube::RestKubeClient::Create(c);  // default retries (5 attempts with backoff)
  ASSERT_TRUE(client.ok()) << client.status();
  absl::Time start = absl::Now();
  auto got = (*client)->Get(res::Namespaces(), "", "default");
  absl::Duration took = absl::Now() - start;
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  EXPECT_LT(took, absl::Seconds(15));
  EXPECT_EQ((*client)->attempts(), 5);
  std::cout << "GET to a closed port failed after " << took << " and " << (*client)->attempts()
            << " attempts: " << got.status() << "\n";

  kube::RestClientOptions once;
  once.max_attempts = 1;
  auto single = kube::RestKubeClient::Create(c, Clock::Real(), once);
  ASSERT_TRUE(single.ok()) << single.status();
  start = absl::Now();
  kube::WatchCanceller canceller;
  absl::Status st = (*single)->Watch(
      res::ConfigMaps(), "default", {}, [](kube::WatchEvent&&) { return true; }, &canceller);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

}  // namespace
}  // namespace kruise::testing
