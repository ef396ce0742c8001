#include "manager/sidecarset/sidecarset_webhook.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/object.h"
#include "manager/sidecarset/sidecarset_revision.h"
#include "nlohmann/json.hpp"
#include "test/fakes/fake_clock.h"

namespace kruise::manager::sidecarset {
// Named, not anonymous: this file may share a unity-build unit with the other SidecarSet tests.
namespace webhook_test {

using nlohmann::json;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

json Set(const std::string& name, const std::string& spec_patch = "{}") {
  json ss = json::parse(R"({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
    "metadata": {"name": ""},
    "spec": {"selector": {"matchLabels": {"app": "web"}},
             "containers": [{"name": "log", "image": "fluentd:1"}]}})");
  ss["metadata"]["name"] = name;
  ss["spec"].merge_patch(json::parse(spec_patch));
  return ss;
}

json Pod(const std::string& ns = "team", const std::string& app = "web") {
  json pod = json::parse(R"({"apiVersion": "v1", "kind": "Pod",
    "metadata": {"generateName": "web-", "labels": {}},
    "spec": {"containers": [{"name": "app", "image": "nginx:1"}]}})");
  if (!ns.empty()) pod["metadata"]["namespace"] = ns;
  pod["metadata"]["labels"]["app"] = app;
  return pod;
}

json Namespace(const std::string& name, json labels) {
  return {{"metadata", {{"name", name}, {"labels", std::move(labels)}}}};
}

std::vector<std::string> Names(const std::vector<std::shared_ptr<const json>>& sets) {
  std::vector<std::string> out;
  for (const auto& s : sets) out.push_back(kube::Name(*s));
  return out;
}

TEST(SidecarSetCacheTest, MatchesSelectorNamespaceAndNamespaceLabelsAndFollowsChanges) {
  SidecarSetCache cache("kruise-system");
  cache.UpsertSidecarSet(Set("b-prod", R"({"namespaceSelector": {"matchLabels": {"env": "prod"}}})"));
  cache.UpsertSidecarSet(Set("a-all"));
  cache.UpsertSidecarSet(Set("c-paused", R"({"injectionStrategy": {"paused": true}})"));
  cache.UpsertSidecarSet(Set("d-other-ns", R"({"namespace": "other"})"));
  cache.UpsertSidecarSet(json::object());  // no name: ignored
  EXPECT_EQ(cache.size(), 4u);
  cache.UpsertNamespace(Namespace("team", {{"env", "prod"}}));
  cache.UpsertNamespace(Namespace("other", {{"env", "dev"}}));

  EXPECT_THAT(Names(cache.Matching(Pod("team"), "team")), ElementsAre("a-all", "b-prod"));
  EXPECT_THAT(Names(cache.Matching(Pod("other"), "other")), ElementsAre("a-all", "d-other-ns"));
  EXPECT_THAT(Names(cache.Matching(Pod("team", "db"), "team")), IsEmpty());
  // The namespace's labels change: the selector follows.
  cache.UpsertNamespace(Namespace("team", {{"env", "dev"}}));
  EXPECT_THAT(Names(cache.Matching(Pod("team"), "team")), ElementsAre("a-all"));
  // A set edited to another selector, then deleted.
  cache.UpsertSidecarSet(Set("a-all", R"({"selector": {"matchLabels": {"app": "db"}}})"));
  EXPECT_THAT(Names(cache.Matching(Pod("team", "db"), "team")), ElementsAre("a-all"));
  cache.RemoveSidecarSet("a-all");
  cache.RemoveSidecarSet("never-there");
  EXPECT_THAT(Names(cache.Matching(Pod("team", "db"), "team")), IsEmpty());
  // The cached set is the defaulted one (what the injector reads).
  auto other = cache.Matching(Pod("other"), "other");
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ((*other[0])["spec"]["containers"][0]["podInjectPolicy"], "BeforeAppContainer");
}

// The cache checks a pod only against the sets its labels can match (indexed by a label each
// selector requires); the answer must be what testing every set gives, in name order.
TEST(SidecarSetCacheTest, LabelIndexGivesWhatTestingEverySetGives) {
  const std::vector<std::string> selectors = {
      R"({"matchLabels": {"app": "web"}})",
      R"({"matchLabels": {"app": "web", "tier": "front"}})",
      R"({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "db"]}]})",
      R"({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]},
                               {"key": "app", "operator": "In", "values": ["db", "web", "x"]}]})",
      R"({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]})",
      R"({"matchExpressions": [{"key": "tier", "operator": "Exists"}]})",
      R"({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]})",
      R"({"matchLabels": {"app": "db"},
          "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["back"]}]})",
      R"({})",  // empty: never injects
  };
  SidecarSetCache cache("kruise-system");
  std::vector<json> sets;
  for (size_t i = 0; i < selectors.size(); ++i) {
    // Names out of selector order, so the index has to sort.
    json set = Set(absl::StrCat("s", (i * 7) % selectors.size()));
    set["spec"]["selector"] = json::parse(selectors[i]);
    set["spec"]["containers"][0]["name"] = absl::StrCat("c", i);
    cache.UpsertSidecarSet(set);
    sets.push_back(set);
  }
  cache.UpsertNamespace(Namespace("team", json::object()));
  const json team = Namespace("team", json::object());
  for (const std::string app : {"web", "db", "x", ""}) {
    for (const std::string tier : {"front", "back", ""}) {
      json pod = Pod("team", app);
      if (app.empty()) pod["metadata"]["labels"].erase("app");
      if (!tier.empty()) pod["metadata"]["labels"]["tier"] = tier;
      std::vector<std::string> want;
      for (const json& set : sets) {
        if (SidecarSetMatchesPod(DefaultSidecarSet(set), pod, &team, "kruise-system")) {
          want.push_back(kube::Name(set));
        }
      }
      std::sort(want.begin(), want.end());
      EXPECT_EQ(Names(cache.Matching(pod, "team")), want) << "app=" << app << " tier=" << tier;
    }
  }
  // An edit moves a set between index entries; a removal drops it.
  json moved = sets[0];
  moved["spec"]["selector"] = json::parse(R"({"matchLabels": {"app": "x"}})");
  cache.UpsertSidecarSet(moved);
  EXPECT_THAT(Names(cache.Matching(Pod("team", "x"), "team")), Contains(kube::Name(moved)));
  EXPECT_THAT(Names(cache.Matching(Pod("team", "web"), "team")),
              Not(Contains(kube::Name(moved))));
  cache.RemoveSidecarSet(kube::Name(moved));
  EXPECT_THAT(Names(cache.Matching(Pod("team", "x"), "team")), Not(Contains(kube::Name(moved))));
}

TEST(SidecarSetCacheTest, HashesAreRecordedOnceAndAnOpenKruiseHashIsKept) {
  SidecarSetCache cache("");
  cache.UpsertSidecarSet(Set("computed"));
  json migrated = Set("migrated");
  migrated["metadata"]["annotations"] = {{"kruise.io/sidecarset-hash", "from-openkruise"}};
  cache.UpsertSidecarSet(migrated);
  auto sets = cache.Matching(Pod(), "team");
  ASSERT_EQ(sets.size(), 2u);
  EXPECT_EQ(kube::Annotation(*sets[0], kSidecarSetHashAnnotation), SidecarSetHash(Set("computed")));
  EXPECT_EQ(kube::Annotation(*sets[0], kSidecarSetHashWithoutImageAnnotation),
            SidecarSetHashWithoutImage(Set("computed")));
  EXPECT_EQ(kube::Annotation(*sets[1], kSidecarSetHashAnnotation), "from-openkruise");
  json odd = Set("odd");
  odd["metadata"]["annotations"] = "not-a-map";  // never throws
  cache.UpsertSidecarSet(odd);
  EXPECT_EQ(cache.size(), 3u);
}

TEST(SidecarSetCacheTest, RequestNamespaceCountsWhenThePodNamesNoneAndSystemNamespacesNever) {
  SidecarSetCache cache("kruise-system");
  cache.UpsertSidecarSet(Set("a", R"({"namespace": "team"})"));
  EXPECT_THAT(Names(cache.Matching(Pod(""), "team")), ElementsAre("a"));
  EXPECT_THAT(Names(cache.Matching(Pod(""), "")), IsEmpty());  // "default"
  cache.UpsertSidecarSet(Set("b"));
  EXPECT_THAT(Names(cache.Matching(Pod(""), "kube-system")), IsEmpty());
  EXPECT_THAT(Names(cache.Matching(Pod(""), "kruise-system")), IsEmpty());
  EXPECT_THAT(Names(cache.Matching(Pod("kruise-system"), "kruise-system")), IsEmpty());
}

TEST(SidecarSetCacheTest, ReadersNeverSeeAHalfWrittenSnapshot) {
  SidecarSetCache cache("");
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int i = 0; i < 500; ++i) {
      cache.UpsertSidecarSet(Set("s" + std::to_string(i % 7)));
      if (i % 3 == 0) cache.RemoveSidecarSet("s" + std::to_string(i % 5));
      cache.UpsertNamespace(Namespace("team", {{"i", std::to_string(i)}}));
    }
    done = true;
  });
  size_t reads = 0;
  while (!done || reads == 0) {
    auto sets = cache.Matching(Pod(), "team");
    ASSERT_LE(sets.size(), 7u);
    for (size_t i = 1; i < sets.size(); ++i) {
      ASSERT_LT(kube::Name(*sets[i - 1]), kube::Name(*sets[i]));
    }
    ++reads;
  }
  writer.join();
}

class InjectorTest : public ::testing::Test {
 protected:
  InjectorTest() : cache_("kruise-system") {
    std::vector<std::unique_ptr<webhook::PodMutator>> chain;
    chain.push_back(std::make_unique<webhook::ReadinessGateInjector>(false));
    chain.push_back(std::make_unique<SidecarSetInjector>(&cache_, &clock_));
    handler_ = std::make_unique<webhook::PodMutatingHandler>(std::move(chain),
                                                             webhook::PodMutatingHandler::Options{});
  }
  webhook::AdmissionResponse Create(json pod, const std::string& ns = "team") {
    webhook::AdmissionRequest req;
    req.operation = "CREATE";
    req.namespace_ = ns;
    req.resource = {"", "v1", "pods"};
    req.object = std::move(pod);
    return handler_->Handle(req);
  }

  kruise::testing::FakeClock clock_{absl::FromUnixSeconds(1764158400)};  // 2025-11-26T12:00:00Z
  SidecarSetCache cache_;
  std::unique_ptr<webhook::PodMutatingHandler> handler_;
};

TEST_F(InjectorTest, MatchingPodGetsTheSidecarAndTheRecords) {
  cache_.UpsertSidecarSet(Set("logging"));
  json pod = Pod("");
  webhook::AdmissionResponse resp = Create(pod);
  ASSERT_TRUE(resp.allowed) << resp.result.message;
  ASSERT_TRUE(resp.patch.has_value());
  json out = pod.patch(json::parse(*resp.patch));
  ASSERT_EQ(out["spec"]["containers"].size(), 2u);
  EXPECT_EQ(out["spec"]["containers"][0]["name"], "log");  // BeforeAppContainer
  EXPECT_EQ(out["spec"]["containers"][0]["image"], "fluentd:1");
  EXPECT_EQ(out["spec"]["containers"][1]["name"], "app");
  const json& ann = out["metadata"]["annotations"];
  EXPECT_EQ(ann["kruise.io/sidecarset-injected-list"], "logging");
  json hash = json::parse(ann["kruise.io/sidecarset-hash"].get<std::string>());
  EXPECT_EQ(hash["logging"]["updateTimestamp"], "2025-11-26T12:00:00Z");
  EXPECT_EQ(hash["logging"]["hash"], SidecarSetRecordedHash(Set("logging")));
  EXPECT_THAT(resp.warnings, IsEmpty());
}

TEST_F(InjectorTest, PodsNoSetMatchesAreAllowedUnchanged) {
  cache_.UpsertSidecarSet(Set("logging"));
  EXPECT_FALSE(Create(Pod("", "db")).patch.has_value());
  EXPECT_FALSE(Create(Pod("kube-system"), "kube-system").patch.has_value());
  cache_.RemoveSidecarSet("logging");
  EXPECT_FALSE(Create(Pod("")).patch.has_value());
}

TEST_F(InjectorTest, ConflictingSetsDenyThePodNamingBoth) {
  cache_.UpsertSidecarSet(Set("one"));
  cache_.UpsertSidecarSet(Set("two", R"({"containers": [{"name": "log", "image": "vector:2"}]})"));
  webhook::AdmissionResponse resp = Create(Pod(""));
  EXPECT_FALSE(resp.allowed);
  EXPECT_EQ(resp.result.code, 422);
  EXPECT_THAT(resp.result.message, HasSubstr("sidecarset"));
  EXPECT_THAT(resp.result.message, HasSubstr("one"));
  EXPECT_THAT(resp.result.message, HasSubstr("two"));
}

TEST_F(InjectorTest, NotesAndMissingRevisionBecomeWarnings) {
  cache_.UpsertSidecarSet(Set("logging", R"({
    "containers": [{"name": "log", "image": "fluentd:1",
                    "transferEnv": [{"sourceContainerName": "app", "envName": "MISSING"}]}],
    "injectionStrategy": {"revision": {"customVersion": "v1"}}})"));
  webhook::AdmissionResponse resp = Create(Pod(""));
  ASSERT_TRUE(resp.allowed) << resp.result.message;
  ASSERT_EQ(resp.warnings.size(), 2u);
  EXPECT_THAT(resp.warnings[0], HasSubstr("injectionStrategy.revision customVersion \"v1\""));
  EXPECT_THAT(resp.warnings[1], HasSubstr("MISSING"));
}

// The hash annotation entry of `set` in an admitted pod.
json HashEntry(const json& pod, const std::string& set) {
  return json::parse(
      pod["metadata"]["annotations"]["kruise.io/sidecarset-hash"].get<std::string>())[set];
}

class RevisionInjectorTest : public InjectorTest {
 protected:
  RevisionInjectorTest() {
    std::vector<std::unique_ptr<webhook::PodMutator>> chain;
    chain.push_back(std::make_unique<SidecarSetInjector>(&cache_, &clock_, [this] {
      return draws_.empty() ? 0.99 : draws_[next_draw_++ % draws_.size()];
    }));
    handler_ = std::make_unique<webhook::PodMutatingHandler>(
        std::move(chain), webhook::PodMutatingHandler::Options{});
    // History: fluentd:1 (revision 1, custom version "stable"), fluentd:2 (2); the set is now at
    // fluentd:3 (its revision 3 not yet recorded).
    json v1 = Set("logging");
    v1["metadata"]["labels"] = {{kSidecarSetCustomVersionLabel, "stable"}};
    rev1_ = NewSidecarSetRevision(v1, "kruise-system", 1, 0);
    rev2_ = NewSidecarSetRevision(
        Set("logging", R"({"containers": [{"name": "log", "image": "fluentd:2"}]})"),
        "kruise-system", 2, 0);
    cache_.UpsertRevision(rev1_);
    cache_.UpsertRevision(rev2_);
  }
  json Admit(const json& pod, webhook::AdmissionResponse* resp_out = nullptr) {
    webhook::AdmissionResponse resp = Create(pod);
    EXPECT_TRUE(resp.allowed) << resp.result.message;
    if (resp_out != nullptr) *resp_out = resp;
    return resp.patch ? pod.patch(json::parse(*resp.patch)) : pod;
  }
  static std::string At(const std::string& revision_strategy, const std::string& update = "{}") {
    return absl::StrCat(R"({"containers": [{"name": "log", "image": "fluentd:3"}],
                            "injectionStrategy": {"revision": )",
                        revision_strategy, R"(}, "updateStrategy": )", update, "}");
  }

  json rev1_, rev2_;
  std::vector<double> draws_;
  size_t next_draw_ = 0;
};

TEST_F(RevisionInjectorTest, AlwaysInjectsTheNamedRevisionAndRecordsIt) {
  cache_.UpsertSidecarSet(
      Set("logging", At(R"({"revisionName": ")" + kube::Name(rev1_) + R"("})")));
  webhook::AdmissionResponse resp;
  json out = Admit(Pod(""), &resp);
  EXPECT_EQ(out["spec"]["containers"][0]["image"], "fluentd:1");
  json entry = HashEntry(out, "logging");
  EXPECT_EQ(entry["controllerRevision"], kube::Name(rev1_));
  EXPECT_EQ(entry["hash"], SidecarSetRecordedHash(Set("logging")));  // fluentd:1's hash
  EXPECT_THAT(resp.warnings, IsEmpty());
  // By custom version: the newest revision labelled with it.
  cache_.UpsertSidecarSet(Set("logging", At(R"({"customVersion": "stable"})")));
  EXPECT_EQ(Admit(Pod(""))["spec"]["containers"][0]["image"], "fluentd:1");
  // The revision goes away (pruned): the latest spec, with a warning.
  cache_.RemoveRevision(rev1_);
  out = Admit(Pod(""), &resp);
  EXPECT_EQ(out["spec"]["containers"][0]["image"], "fluentd:3");
  ASSERT_EQ(resp.warnings.size(), 1u);
  EXPECT_THAT(resp.warnings[0],
              HasSubstr("customVersion \"stable\" matches no ControllerRevision"));
}

TEST_F(RevisionInjectorTest, PartialFollowsTheUpdateStrategy) {
  const std::string partial =
      R"({"revisionName": ")" + kube::Name(rev2_) + R"(", "policy": "Partial"})";
  // A 40% partition: draws below 0.4 get the old revision.
  cache_.UpsertSidecarSet(Set("logging", At(partial, R"({"partition": "40%"})")));
  draws_ = {0.1, 0.7, 0.39, 0.4};
  std::vector<std::string> images;
  for (int i = 0; i < 4; ++i) {
    images.push_back(Admit(Pod(""))["spec"]["containers"][0]["image"].get<std::string>());
  }
  EXPECT_THAT(images, ElementsAre("fluentd:2", "fluentd:3", "fluentd:2", "fluentd:3"));
  // Pods the update strategy's selector leaves out keep the old revision; selected ones get the
  // latest (no percentage partition).
  cache_.UpsertSidecarSet(
      Set("logging", At(partial, R"({"selector": {"matchLabels": {"canary": "true"}}})")));
  EXPECT_EQ(Admit(Pod(""))["spec"]["containers"][0]["image"], "fluentd:2");
  json canary = Pod("");
  canary["metadata"]["labels"]["canary"] = "true";
  json out = Admit(canary);
  EXPECT_EQ(out["spec"]["containers"][0]["image"], "fluentd:3");
  // The latest records the revision the controller will create for it.
  EXPECT_EQ(HashEntry(out, "logging")["controllerRevision"],
            LatestSidecarSetRevisionName(Set("logging", At(partial)), {}));
}

TEST_F(RevisionInjectorTest, LatestRecordsTheRevisionRecordingItsSpec) {
  // The set went back to fluentd:2: its revision is rev2, whatever the collision count says.
  cache_.UpsertSidecarSet(
      Set("logging", R"({"containers": [{"name": "log", "image": "fluentd:2"}]})"));
  EXPECT_EQ(HashEntry(Admit(Pod("")), "logging")["controllerRevision"], kube::Name(rev2_));
}

}  // namespace webhook_test
}  // namespace kruise::manager::sidecarset
