#include "manager/inplace/predownload.h"

#include <functional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/object.h"

namespace kruise::manager::inplace {
namespace {

using Json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

Json Template(const char* main_image, const char* side_image) {
  return {{"metadata", {{"labels", {{"app", "web"}}}, {"annotations", {{"team", "a"}}}}},
          {"spec",
           {{"initContainers", {{{"name", "init"}, {"image", "busybox:1"}}}},
            {"containers",
             {{{"name", "main"}, {"image", main_image}},
              {{"name", "side"}, {"image", side_image}}}},
            {"imagePullSecrets", {{{"name", "regcred"}}}}}}};
}

PreDownloadRequest Request() {
  PreDownloadRequest r;
  r.owner = {{"apiVersion", "apps.kruise.io/v1alpha1"},
             {"kind", "CloneSet"},
             {"metadata", {{"name", "web"}, {"namespace", "ns"}, {"uid", "u-1"}}}};
  r.selector = {{"matchLabels", {{"app", "web"}}}};
  r.update_revision = "web-7c9d";
  r.revision_labels = Json::object();
  r.current_template = Template("nginx:1.25", "busybox:1");
  r.update_template = Template("nginx:1.26", "busybox:1");
  r.recreate_only = false;
  r.replicas = 10;
  r.partition = 0;
  r.max_unavailable = 2;
  return r;
}

TEST(ChangedImages, OnlyRegularContainersWhoseImageDiffers) {
  Json cur = Template("nginx:1.25", "busybox:1");
  EXPECT_TRUE(ChangedImages(cur, cur).empty());
  EXPECT_THAT(ChangedImages(cur, Template("nginx:1.26", "busybox:2")),
              ElementsAre(Pair("main", "nginx:1.26"), Pair("side", "busybox:2")));
  Json init_changed = cur;
  init_changed["spec"]["initContainers"][0]["image"] = "busybox:9";
  EXPECT_TRUE(ChangedImages(cur, init_changed).empty());
  Json added = cur;
  added["spec"]["containers"].push_back({{"name", "new"}, {"image", "envoy:1"}});
  EXPECT_THAT(ChangedImages(cur, added), ElementsAre(Pair("new", "envoy:1")));
  // Malformed templates give nothing rather than throwing.
  EXPECT_TRUE(ChangedImages(Json("x"), Json::array()).empty());
  EXPECT_TRUE(ChangedImages(cur, {{"spec", {{"containers", {1, {{"name", 2}}}}}}}).empty());
}

TEST(PlanImagePreDownload, WhenItIsSkipped) {
  struct Case {
    const char* what;
    std::function<void(PreDownloadRequest&)> change;
    bool done;
    std::string ignore_contains;  // "" = jobs planned
  };
  const Case cases[] = {
      {"a plain image change", [](PreDownloadRequest&) {}, false, ""},
      {"already created", [](PreDownloadRequest& r) {
         r.revision_labels[kImagePreDownloadCreatedLabel] = "true"; }, true, ""},
      {"already ignored", [](PreDownloadRequest& r) {
         r.revision_labels[kImagePreDownloadIgnoredLabel] = "true"; }, true, ""},
      {"recreate", [](PreDownloadRequest& r) { r.recreate_only = true; }, false, "recreates"},
      {"3 replicas", [](PreDownloadRequest& r) { r.replicas = 3; }, false, "replicas 3 <= 3"},
      {"4 replicas", [](PreDownloadRequest& r) { r.replicas = 4; }, false, ""},
      {"one batch", [](PreDownloadRequest& r) { r.max_unavailable = 10; }, false, "one batch"},
      {"one batch but a partition",
       [](PreDownloadRequest& r) { r.max_unavailable = 10; r.partition = 1; }, false, ""},
  };
  for (const Case& c : cases) {
    PreDownloadRequest r = Request();
    c.change(r);
    PreDownloadPlan plan = PlanImagePreDownload(r);
    EXPECT_EQ(plan.already_done, c.done) << c.what;
    if (c.done || !c.ignore_contains.empty()) {
      EXPECT_TRUE(plan.jobs.empty()) << c.what;
      EXPECT_THAT(plan.ignore_reason, HasSubstr(c.ignore_contains)) << c.what;
    } else {
      EXPECT_EQ(plan.ignore_reason, "") << c.what;
      EXPECT_EQ(plan.jobs.size(), 1u) << c.what;
    }
  }
}

TEST(PlanImagePreDownload, TheJob) {
  PreDownloadRequest r = Request();
  r.revision_labels = {{"controller.kubernetes.io/hash", "7c9d"}};
  PreDownloadPlan plan = PlanImagePreDownload(r);
  ASSERT_EQ(plan.jobs.size(), 1u);
  const Json& job = plan.jobs[0];
  EXPECT_EQ(job["kind"], "ImagePullJob");
  EXPECT_EQ(kube::Name(job), "web-7c9d-main");
  EXPECT_EQ(kube::Namespace(job), "ns");
  auto owner = kube::ControllerOf(job);
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(owner->uid, "u-1");
  EXPECT_EQ(owner->kind, "CloneSet");
  EXPECT_EQ(job["metadata"]["labels"],
            Json({{"app", "web"}, {"controller-revision-hash", "web-7c9d"}}));
  EXPECT_EQ(job["metadata"]["annotations"], Json({{"team", "a"}}));
  const Json& spec = job["spec"];
  EXPECT_EQ(spec["image"], "nginx:1.26");
  EXPECT_EQ(spec["parallelism"], 1);
  EXPECT_EQ(spec["pullPolicy"], Json({{"timeoutSeconds", 300}, {"backoffLimit", 1}}));
  EXPECT_EQ(spec["completionPolicy"],
            Json({{"type", "Always"}, {"ttlSecondsAfterFinished", 600}}));
  EXPECT_EQ(spec["pullSecrets"], Json({"regcred"}));
  EXPECT_EQ(spec["sandboxConfig"]["labels"], Json({{"app", "web"}}));
  // The workload's pods not at the new revision (by name or by bare hash).
  EXPECT_EQ(spec["podSelector"],
            Json::parse(R"({"matchLabels": {"app": "web"}, "matchExpressions": [
              {"key": "controller-revision-hash", "operator": "NotIn",
               "values": ["web-7c9d", "7c9d"]}]})"));
  auto sel = kube::LabelSelector::FromJson(spec["podSelector"]);
  ASSERT_TRUE(sel.ok());
  EXPECT_TRUE(sel->Matches({{"app", "web"}, {"controller-revision-hash", "web-11aa"}}));
  EXPECT_FALSE(sel->Matches({{"app", "web"}, {"controller-revision-hash", "web-7c9d"}}));
  EXPECT_FALSE(sel->Matches({{"app", "db"}, {"controller-revision-hash", "web-11aa"}}));
}

TEST(PlanImagePreDownload, OneJobPerChangedContainerAndTheAnnotations) {
  PreDownloadRequest r = Request();
  r.update_template = Template("nginx:1.26", "busybox:2");
  r.selector["matchExpressions"] = {{{"key", "tier"}, {"operator", "Exists"}}};
  r.owner["metadata"]["annotations"] = {{kImagePreDownloadParallelismAnnotation, "5"},
                                        {kImagePreDownloadTimeoutAnnotation, "60"}};
  PreDownloadPlan plan = PlanImagePreDownload(r);
  ASSERT_EQ(plan.jobs.size(), 2u);
  EXPECT_EQ(kube::Name(plan.jobs[0]), "web-7c9d-main");
  EXPECT_EQ(kube::Name(plan.jobs[1]), "web-7c9d-side");
  EXPECT_EQ(plan.jobs[1]["spec"]["image"], "busybox:2");
  EXPECT_EQ(plan.jobs[0]["spec"]["parallelism"], 5);
  EXPECT_EQ(plan.jobs[0]["spec"]["pullPolicy"]["timeoutSeconds"], 60);
  EXPECT_EQ(plan.jobs[0]["spec"]["podSelector"]["matchExpressions"].size(), 2u);
  // Malformed annotations fall back to the defaults.
  r.owner["metadata"]["annotations"] = {{kImagePreDownloadParallelismAnnotation, "many"},
                                        {kImagePreDownloadTimeoutAnnotation, "-4"}};
  plan = PlanImagePreDownload(r);
  EXPECT_EQ(plan.jobs[0]["spec"]["parallelism"], 1);
  EXPECT_EQ(plan.jobs[0]["spec"]["pullPolicy"]["timeoutSeconds"], 300);
  // Nothing changed in the images (a label change): no job, not ignored.
  r.update_template = r.current_template;
  r.update_template["metadata"]["labels"]["v"] = "2";
  plan = PlanImagePreDownload(r);
  EXPECT_TRUE(plan.jobs.empty());
  EXPECT_EQ(plan.ignore_reason, "");
}

TEST(MinUpdatedReadyPodsToPreDownload, IntPercentAndGarbage) {
  Json owner = {{"metadata", {{"name", "web"}}}};
  EXPECT_EQ(MinUpdatedReadyPodsToPreDownload(owner, 10), 0);
  owner["metadata"]["annotations"][kImagePreDownloadMinUpdatedReadyPodsAnnotation] = "3";
  EXPECT_EQ(MinUpdatedReadyPodsToPreDownload(owner, 10), 3);
  owner["metadata"]["annotations"][kImagePreDownloadMinUpdatedReadyPodsAnnotation] = "25%";
  EXPECT_EQ(MinUpdatedReadyPodsToPreDownload(owner, 10), 3);  // rounded up
  owner["metadata"]["annotations"][kImagePreDownloadMinUpdatedReadyPodsAnnotation] = "x";
  EXPECT_EQ(MinUpdatedReadyPodsToPreDownload(owner, 10), 0);
}

// The min-updated-ready-pods annotation counts status.updatedReadyReplicas only while the status
// speaks of the same update revision.
TEST(PreDownloadHeldBack, CountsReadyPodsOfTheSameRevisionOnly) {
  Json owner = {{"metadata", {{"name", "web"}}}};
  EXPECT_FALSE(PreDownloadHeldBack(owner, "web-2", 10));  // no annotation: never held
  owner["metadata"]["annotations"][kImagePreDownloadMinUpdatedReadyPodsAnnotation] = "2";
  EXPECT_TRUE(PreDownloadHeldBack(owner, "web-2", 10));
  owner["status"] = {{"updateRevision", "web-1"}, {"updatedReadyReplicas", 5}};
  EXPECT_TRUE(PreDownloadHeldBack(owner, "web-2", 10));  // 5 ready pods of another revision
  owner["status"]["updateRevision"] = "web-2";
  owner["status"]["updatedReadyReplicas"] = 1;
  EXPECT_TRUE(PreDownloadHeldBack(owner, "web-2", 10));
  owner["status"]["updatedReadyReplicas"] = 2;
  EXPECT_FALSE(PreDownloadHeldBack(owner, "web-2", 10));
}

TEST(PreDownloadRequestFor, OwnerSelectorAndTheRevisionsNameLabelsTemplate) {
  Json owner = {{"metadata", {{"name", "web"}, {"namespace", "team"}}},
                {"spec", {{"selector", {{"matchLabels", {{"app", "web"}}}}}}}};
  Json revision = {
      {"metadata", {{"name", "web-2"}, {"labels", {{kImagePreDownloadIgnoredLabel, "true"}}}}},
      {"data", {{"spec", {{"template", {{"spec", {{"containers", Json::array()}}}}}}}}}};
  PreDownloadRequest r = PreDownloadRequestFor(owner, revision);
  EXPECT_EQ(r.owner, owner);
  EXPECT_EQ(r.selector, owner["spec"]["selector"]);
  EXPECT_EQ(r.update_revision, "web-2");
  EXPECT_EQ(r.revision_labels, revision["metadata"]["labels"]);
  EXPECT_TRUE(PreDownloadDone(revision));
  EXPECT_FALSE(PreDownloadDone(owner));
  EXPECT_TRUE(PlanImagePreDownload(r).already_done);
}

// Advanced DaemonSet's request (OpenKruise's daemonset_predownload_image.go): no minimum size,
// every older revision compared, pods labelled with the bare hash.
TEST(PlanImagePreDownload, DaemonSetRequest) {
  PreDownloadRequest r = Request();
  r.owner["kind"] = "DaemonSet";
  r.update_revision = "agent-7c9d";
  r.update_revision_hash = "7c9d";
  r.revision_labels = {{"controller-revision-hash", "7c9d"}};
  r.current_template = Json();
  r.min_replicas = 0;
  r.replicas = 2;
  r.max_unavailable = 1;
  // "side" is busybox:1 in the newest old revision but busybox:0 in an older one: pulled.
  r.old_templates = {Template("nginx:1.26", "busybox:1"), Template("nginx:1.26", "busybox:0")};
  r.update_template = Template("nginx:1.26", "busybox:1");
  PreDownloadPlan plan = PlanImagePreDownload(r);
  EXPECT_EQ(plan.ignore_reason, "");
  ASSERT_EQ(plan.jobs.size(), 1u);
  EXPECT_EQ(kube::Name(plan.jobs[0]), "agent-7c9d-side");
  EXPECT_EQ(kube::Label(plan.jobs[0], "controller-revision-hash"), "7c9d");
  EXPECT_EQ(plan.jobs[0]["spec"]["podSelector"]["matchExpressions"][0]["values"],
            Json({"agent-7c9d", "7c9d"}));
  // A container no old revision has is pulled too; the same image everywhere is not.
  r.update_template["spec"]["containers"].push_back({{"name", "new"}, {"image", "envoy:1"}});
  r.old_templates = {Template("nginx:1.26", "busybox:1")};
  plan = PlanImagePreDownload(r);
  ASSERT_EQ(plan.jobs.size(), 1u);
  EXPECT_EQ(kube::Name(plan.jobs[0]), "agent-7c9d-new");
  // One node, or maxUnavailable covering every node: one batch, ignored.
  r.replicas = 1;
  EXPECT_THAT(PlanImagePreDownload(r).ignore_reason, HasSubstr("one batch"));
  r.replicas = 0;
  r.max_unavailable = 0;
  EXPECT_THAT(PlanImagePreDownload(r).ignore_reason, HasSubstr("one batch"));
}

}  // namespace
}  // namespace kruise::manager::inplace
