#include "manager/inplace/inplace_update.h"

#include <functional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/object.h"

namespace kruise::manager::inplace {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;

Json Template() {
  return Json::parse(R"({
    "metadata": {"labels": {"app": "web", "tier": "front"}, "annotations": {"a": "1"}},
    "spec": {
      "initContainers": [{"name": "init", "image": "busybox:1.35"}],
      "containers": [
        {"name": "main", "image": "nginx:1.25", "env": [{"name": "MODE", "value": "x"}]},
        {"name": "sidecar", "image": "busybox:1.35", "ports": [{"containerPort": 9000}]}
      ]
    }
  })");
}

TEST(CalculateInPlaceUpdate, WhatMayChangeInPlace) {
  struct Case {
    const char* what;
    std::function<void(Json&)> change;
    bool in_place;
    std::string why_contains;  // for changes that need a new pod
  };
  const Case cases[] = {
      {"nothing", [](Json&) {}, true, ""},
      {"one container's image", [](Json& t) { t["spec"]["containers"][0]["image"] = "nginx:1.26"; },
       true, ""},
      {"both images",
       [](Json& t) {
         t["spec"]["containers"][0]["image"] = "nginx:1.26";
         t["spec"]["containers"][1]["image"] = "busybox:1.36";
       },
       true, ""},
      {"a label added and one removed",
       [](Json& t) {
         t["metadata"]["labels"]["version"] = "v2";
         t["metadata"]["labels"].erase("tier");
       },
       true, ""},
      {"annotations removed entirely", [](Json& t) { t["metadata"].erase("annotations"); }, true,
       ""},
      {"an init container's image",
       [](Json& t) { t["spec"]["initContainers"][0]["image"] = "busybox:1.36"; }, false,
       "spec.initContainers[0].image"},
      {"env", [](Json& t) { t["spec"]["containers"][0]["env"][0]["value"] = "y"; }, false,
       "spec.containers[0].env[0].value"},
      {"ports", [](Json& t) { t["spec"]["containers"][1]["ports"][0]["containerPort"] = 9001; },
       false, "spec.containers[1].ports[0].containerPort"},
      {"a container added",
       [](Json& t) {
         t["spec"]["containers"].push_back({{"name", "x"}, {"image", "y"}});
       },
       false, "spec.containers"},
      {"containers renamed", [](Json& t) { t["spec"]["containers"][1]["name"] = "helper"; }, false,
       "spec.containers[1].name"},
      {"pod-level field", [](Json& t) { t["spec"]["hostNetwork"] = true; }, false,
       "spec.hostNetwork"},
      {"the template's name", [](Json& t) { t["metadata"]["name"] = "x"; }, false, "metadata.name"},
  };
  for (const Case& c : cases) {
    Json next = Template();
    c.change(next);
    std::string why;
    auto spec = CalculateInPlaceUpdate(Template(), next, "web-2", &why);
    EXPECT_EQ(spec.has_value(), c.in_place) << c.what << ": " << why;
    if (!c.in_place) {
      EXPECT_THAT(why, HasSubstr(c.why_contains)) << c.what;
      EXPECT_THAT(why, HasSubstr("only container images and pod labels and annotations")) << c.what;
    }
  }
}

TEST(CalculateInPlaceUpdate, LabelsOnATemplateThatHadNoMetadata) {
  Json old_template = Template();
  old_template.erase("metadata");
  Json next = Template();
  auto spec = CalculateInPlaceUpdate(old_template, next, "web-2");
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->metadata_patch["labels"], Json::parse(R"({"app": "web", "tier": "front"})"));
}

TEST(CalculateInPlaceUpdate, SpecNamesImagesAndMetadataPatch) {
  Json next = Template();
  next["spec"]["containers"][1]["image"] = "busybox:1.36";
  next["metadata"]["labels"]["version"] = "v2";
  next["metadata"]["labels"].erase("tier");
  next["metadata"]["annotations"]["a"] = "2";
  auto spec = CalculateInPlaceUpdate(Template(), next, "web-7d9f");
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->revision, "web-7d9f");
  EXPECT_EQ(spec->container_images,
            (std::map<std::string, std::string>{{"sidecar", "busybox:1.36"}}));
  EXPECT_EQ(
      spec->metadata_patch,
      Json::parse(R"({"labels": {"version": "v2", "tier": null}, "annotations": {"a": "2"}})"));
}

Json Pod(const std::string& image, const std::string& container_id, int restarts,
         const std::string& started_at = "2026-11-26T10:00:05Z") {
  return {{"spec", {{"containers", {{{"name", "main"}, {"image", image}}}}}},
          {"status",
           {{"containerStatuses",
             {{{"name", "main"},
               {"image", "docker.io/library/" + image},
               {"imageID", "docker.io/library/nginx@sha256:aaa"},
               {"containerID", container_id},
               {"restartCount", restarts},
               {"state", {{"running", {{"startedAt", started_at}}}}}}}}}}};
}

TEST(InPlaceUpdateState, RecordedBeforeThePatchAndRoundTrips) {
  InPlaceUpdateSpec spec;
  spec.revision = "web-2";
  spec.container_images = {{"main", "nginx:1.26"}};
  const absl::Time now = absl::FromUnixSeconds(1795000000);
  InPlaceUpdateState state =
      NewInPlaceUpdateState(Pod("nginx:1.25", "containerd://c1", 3), spec, now);
  EXPECT_EQ(state.revision, "web-2");
  EXPECT_TRUE(state.update_images);
  EXPECT_EQ(state.last_container_statuses["main"].container_id, "containerd://c1");
  EXPECT_EQ(state.last_container_statuses["main"].restart_count, 3);

  const std::string annotation = FormatInPlaceUpdateState(state);
  // OpenKruise's field names, readable by its tooling.
  Json j = Json::parse(annotation);
  EXPECT_EQ(j["revision"], "web-2");
  EXPECT_EQ(j["lastContainerStatuses"]["main"]["imageID"], "docker.io/library/nginx@sha256:aaa");
  EXPECT_EQ(j["updateImages"], true);
  auto back = ParseInPlaceUpdateState(annotation);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->revision, "web-2");
  EXPECT_EQ(back->update_timestamp, now);
  EXPECT_EQ(back->last_container_statuses["main"].restart_count, 3);

  // OpenKruise's own annotation (no containerID/restartCount, extra fields) parses too.
  auto theirs = ParseInPlaceUpdateState(
      R"({"revision":"web-1","updateTimestamp":"2026-11-26T10:00:00Z",)"
      R"("lastContainerStatuses":{"main":{"imageID":"x@sha256:1"}},"nextContainerImages":{}})");
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  EXPECT_EQ(theirs->last_container_statuses["main"].image_id, "x@sha256:1");

  for (const char* bad : {"", "[]", "{\"updateTimestamp\":\"2026-11-26T10:00:00Z\"}",
                          "{\"revision\":\"r\",\"updateTimestamp\":\"yesterday\"}",
                          "{\"revision\":\"r\",\"lastContainerStatuses\":{\"main\":1}}"}) {
    auto s = ParseInPlaceUpdateState(bad);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(kInPlaceUpdateStateAnnotation)) << bad;
  }
}

TEST(InPlaceUpdateCompleted, ARestartWithTheNewSpecCompletesWhateverTheDigest) {
  InPlaceUpdateState state;
  state.revision = "web-2";
  state.update_timestamp = *kube::ParseRfc3339("2026-11-26T10:00:00Z");
  state.last_container_statuses["main"] = {"docker.io/library/nginx@sha256:aaa", "containerd://c1",
                                           3};
  const std::map<std::string, std::string> images = {{"main", "nginx:1.26"}};
  struct Case {
    const char* what;
    Json pod;
    bool completed;
    std::string waiting_contains;
  };
  Json no_status = Pod("nginx:1.26", "containerd://c2", 4);
  no_status["status"]["containerStatuses"] = Json::array();
  const Case cases[] = {
      {"patch not landed yet", Pod("nginx:1.25", "containerd://c1", 3), false, "spec image"},
      {"patched, not restarted", Pod("nginx:1.26", "containerd://c1", 3), false, "not restarted"},
      // The digest did not change (the tag moved to the same image): still complete.
      {"restarted: new container id, same digest", Pod("nginx:1.26", "containerd://c2", 3), true,
       ""},
      {"restarted: restart count", Pod("nginx:1.26", "containerd://c1", 4), true, ""},
      {"a restart that began before the update",
       Pod("nginx:1.26", "containerd://c2", 4, "2026-11-26T09:59:59Z"), false, "predates"},
      {"no container status", no_status, false, "no status"},
  };
  for (const Case& c : cases) {
    std::string waiting;
    EXPECT_EQ(InPlaceUpdateCompleted(c.pod, state, images, &waiting), c.completed) << c.what;
    if (!c.completed) {
      EXPECT_THAT(waiting, HasSubstr(c.waiting_contains)) << c.what;
    }
  }
}

}  // namespace
}  // namespace kruise::manager::inplace
