#include "manager/workload/workload_admission.h"

#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kruise::manager::workload {
namespace {

using kube::Json;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<std::string> Problems(const std::function<void(kube::FieldErrors*)>& check) {
  kube::FieldErrors errors;
  check(&errors);
  return errors.Take();
}

TEST(WorkloadAdmission, DefaultTemplatesFillsPodSpecAndClaims) {
  Json spec = Json::parse(R"({
    "template": {"spec": {"containers": [{"name": "app", "image": "nginx:1.25"}]}},
    "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {}}]})");
  DefaultTemplates(&spec);
  const Json& pod = spec["template"]["spec"];
  EXPECT_EQ(pod["restartPolicy"], "Always");
  EXPECT_EQ(pod["terminationGracePeriodSeconds"], 30);
  EXPECT_EQ(pod["containers"][0]["imagePullPolicy"], "Always");  // OpenKruise: in-place pulls
  EXPECT_EQ(pod["containers"][0]["terminationMessagePath"], "/dev/termination-log");
  EXPECT_EQ(spec["volumeClaimTemplates"][0]["spec"]["volumeMode"], "Filesystem");
  // Idempotent, and a value the user set is kept.
  Json again = spec;
  again["template"]["spec"]["restartPolicy"] = "Never";
  DefaultTemplates(&again);
  EXPECT_EQ(again["template"]["spec"]["restartPolicy"], "Never");
  Json twice = spec;
  DefaultTemplates(&twice);
  EXPECT_EQ(twice, spec);
}

TEST(WorkloadAdmission, DefaultTemplatesLeavesMistypedPartsAlone) {
  for (const char* text : {R"({"template": 5})", R"({"template": {"spec": []}})",
                           R"({"volumeClaimTemplates": "x"})", R"([])"}) {
    Json spec = Json::parse(text);
    const Json before = spec;
    DefaultTemplates(&spec);
    EXPECT_EQ(spec, before) << text;
  }
  EXPECT_EQ(DefaultPodSpec(Json("x")), Json("x"));
}

TEST(WorkloadAdmission, ShouldInjectTemplateDefaultsOnCreateAndTemplateChange) {
  const Json old_obj = Json::parse(R"({"spec": {"replicas": 1, "template": {"a": 1}}})");
  Json scaled = old_obj;
  scaled["spec"]["replicas"] = 3;
  Json changed = old_obj;
  changed["spec"]["template"]["a"] = 2;
  EXPECT_TRUE(ShouldInjectTemplateDefaults(old_obj, nullptr));
  EXPECT_FALSE(ShouldInjectTemplateDefaults(scaled, &old_obj));
  EXPECT_TRUE(ShouldInjectTemplateDefaults(changed, &old_obj));
}

TEST(WorkloadAdmission, CheckTemplateNamesTheKind) {
  const Json spec = Json::parse(R"({"template": {"metadata": {"labels": {"app": "a"}},
    "spec": {"activeDeadlineSeconds": 5, "containers": [{"name": "app", "image": "x"}]}}})");
  EXPECT_THAT(Problems([&](kube::FieldErrors* e) {
                CheckTemplate(spec, std::nullopt, {}, "statefulset", e);
              }),
              ElementsAre("spec.template.spec.activeDeadlineSeconds: Forbidden: "
                          "activeDeadlineSeconds in statefulset is not Supported"));
}

TEST(WorkloadAdmission, VolumeClaimTemplatesCountAsVolumes) {
  const Json spec = Json::parse(R"({
    "volumeClaimTemplates": [{"metadata": {"name": "data"}}],
    "template": {"spec": {"containers": [{"name": "app", "image": "x",
        "volumeMounts": [{"name": "data", "mountPath": "/d"}, {"name": "nope", "mountPath": "/n"}]}]}}})");
  std::set<std::string> names;
  const auto problems = Problems([&](kube::FieldErrors* e) {
    names = CheckVolumeClaimTemplates(spec, e);
    CheckTemplate(spec, std::nullopt, names, "cloneset", e);
  });
  EXPECT_THAT(names, ElementsAre("data"));
  EXPECT_THAT(problems, ElementsAre("spec.template.spec.containers[0].volumeMounts[1].name: "
                                    "Not found: \"nope\" (no volume or volumeClaimTemplate of "
                                    "that name)"));
}

TEST(WorkloadAdmission, PriorityStrategyReportsUnderTheGivenPath) {
  const Json ps = Json::parse(R"({"weightPriority": [{"weight": 101, "matchSelector": {}}]})");
  EXPECT_THAT(Problems([&](kube::FieldErrors* e) { CheckPriorityStrategy(ps, "p.s", e); }),
              ElementsAre("p.s.weightPriority[0].weight: Invalid value: weight must be a number "
                          "in the range 0-100",
                          "p.s.weightPriority[0].matchSelector: Invalid value: selector can not "
                          "be empty"));
  EXPECT_THAT(Problems([&](kube::FieldErrors* e) {
                CheckInPlaceUpdateStrategy(Json{{"gracePeriodSeconds", 10}}, "ips", e);
              }),
              IsEmpty());
}

TEST(WorkloadAdmission, TemplateChangesBeyondImages) {
  const Json a = Json::parse(R"({"template": {"spec": {"containers": [
      {"name": "app", "image": "nginx:1.24", "env": [{"name": "A", "value": "1"}]}]}}})");
  Json image_only = a;
  image_only["template"]["spec"]["containers"][0]["image"] = "nginx:1.25";
  Json env = a;
  env["template"]["spec"]["containers"][0]["env"][0]["value"] = "2";
  Json labels = a;
  labels["template"]["metadata"] = Json{{"labels", {{"x", "y"}}}};
  EXPECT_FALSE(TemplateChangesBeyondImages(a, image_only));
  EXPECT_FALSE(TemplateChangesBeyondImages(a, labels));  // metadata is not the pod spec
  EXPECT_TRUE(TemplateChangesBeyondImages(a, env));
}

TEST(WorkloadAdmission, IntRangeAndIntOrPercent) {
  const Json obj = Json::parse(R"({"a": -1, "b": "x", "c": 301, "d": 7})");
  EXPECT_THAT(Problems([&](kube::FieldErrors* e) {
                for (const char* k : {"a", "b", "c", "d", "missing"}) {
                  CheckIntRange(obj, k, k, e, 300, "must be no more than 300");
                }
              }),
              ElementsAre("a: Invalid value: -1: must be greater than or equal to 0",
                          "b: Invalid value: \"x\": must be an integer",
                          "c: Invalid value: 301: must be no more than 300"));
  kube::FieldErrors errors;
  EXPECT_EQ(IntOrPercent(Json("50%"), 5, "p", &errors), 3);  // rounded up
  EXPECT_EQ(IntOrPercent(Json("150%"), 5, "p", &errors), std::nullopt);
  EXPECT_EQ(IntOrPercent(Json(-2), 5, "p", &errors), std::nullopt);
  EXPECT_EQ(errors.Take().size(), 2u);
}

}  // namespace
}  // namespace kruise::manager::workload
