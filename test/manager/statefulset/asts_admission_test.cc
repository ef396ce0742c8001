#include "manager/statefulset/asts_admission.h"

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kruise::manager::statefulset {
// Named, not anonymous: this file shares a unity-build unit with asts_plan_test.cc.
namespace admission_test {

using kube::Json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A valid Advanced StatefulSet: selector app=db, one container, a volumeClaimTemplate.
Json Valid() {
  return Json::parse(R"({
    "apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet",
    "metadata": {"name": "db", "namespace": "default"},
    "spec": {
      "replicas": 3,
      "serviceName": "db",
      "selector": {"matchLabels": {"app": "db"}},
      "template": {
        "metadata": {"labels": {"app": "db"}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.35",
                                 "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}
      },
      "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                "spec": {"accessModes": ["ReadWriteOnce"],
                                         "resources": {"requests": {"storage": "1Gi"}}}}]
    }
  })");
}

// Valid() with the JSON merge patch `patch` applied (null removes a member).
Json With(const std::string& patch) {
  Json sts = Valid();
  sts.merge_patch(Json::parse(patch));
  return sts;
}

constexpr char kInPlaceGate[] =
    R"("template": {"spec": {"readinessGates": [{"conditionType": "InPlaceUpdateReady"}]}})";

// ---- Defaults -----------------------------------------------------------------------------------

TEST(AstsAdmissionTest, DefaultsAsOpenKruise) {
  Json d = DefaultAdvancedStatefulSet(With(R"({"spec": {"replicas": null}})"));
  const Json& spec = d["spec"];
  EXPECT_EQ(spec["replicas"], 1);
  EXPECT_EQ(spec["revisionHistoryLimit"], 10);
  EXPECT_EQ(spec["podManagementPolicy"], "OrderedReady");
  EXPECT_EQ(spec["updateStrategy"], Json::parse(R"({"type": "RollingUpdate", "rollingUpdate": {
      "partition": 0, "maxUnavailable": 1, "podUpdatePolicy": "ReCreate",
      "minReadySeconds": 0}})"));
  EXPECT_EQ(spec["persistentVolumeClaimRetentionPolicy"],
            Json::parse(R"({"whenDeleted": "Retain", "whenScaled": "Retain"})"));
  // The Pod template defaults are the CloneSet webhook's (OpenKruise's SetDefaultPodSpec).
  const Json& pod = spec["template"]["spec"];
  EXPECT_EQ(pod["restartPolicy"], "Always");
  EXPECT_EQ(pod["dnsPolicy"], "ClusterFirst");
  EXPECT_EQ(pod["terminationGracePeriodSeconds"], 30);
  EXPECT_EQ(pod["containers"][0]["imagePullPolicy"], "Always");
  EXPECT_EQ(pod["containers"][0]["terminationMessagePath"], "/dev/termination-log");
  EXPECT_EQ(spec["volumeClaimTemplates"][0]["spec"]["volumeMode"], "Filesystem");
  EXPECT_THAT(AdvancedStatefulSetProblems(d, nullptr), IsEmpty());
}

TEST(AstsAdmissionTest, DefaultsKeepUserValuesAndOnDeleteGetsNoRollingUpdate) {
  Json d = DefaultAdvancedStatefulSet(With(R"({"spec": {
      "podManagementPolicy": "Parallel", "revisionHistoryLimit": 0,
      "updateStrategy": {"type": "OnDelete"},
      "persistentVolumeClaimRetentionPolicy": {"whenScaled": "Delete"}}})"));
  const Json& spec = d["spec"];
  EXPECT_EQ(spec["podManagementPolicy"], "Parallel");
  EXPECT_EQ(spec["revisionHistoryLimit"], 0);
  EXPECT_EQ(spec["updateStrategy"], Json::parse(R"({"type": "OnDelete"})"));
  EXPECT_EQ(spec["persistentVolumeClaimRetentionPolicy"],
            Json::parse(R"({"whenDeleted": "Retain", "whenScaled": "Delete"})"));
  EXPECT_THAT(AdvancedStatefulSetProblems(d, nullptr), IsEmpty());

  Json partial = DefaultAdvancedStatefulSet(With(R"({"spec": {"updateStrategy": {
      "rollingUpdate": {"partition": 2, "maxUnavailable": "50%"}}}})"));
  EXPECT_EQ(partial["spec"]["updateStrategy"]["rollingUpdate"]["partition"], 2);
  EXPECT_EQ(partial["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"], "50%");
  EXPECT_EQ(partial["spec"]["updateStrategy"]["rollingUpdate"]["podUpdatePolicy"], "ReCreate");
}

TEST(AstsAdmissionTest, TemplateDefaultsOnlyWhenAsked) {
  Json d = DefaultAdvancedStatefulSet(Valid(), /*inject_template_defaults=*/false);
  EXPECT_EQ(d["spec"]["template"], Valid()["spec"]["template"]);
  EXPECT_EQ(d["spec"]["volumeClaimTemplates"], Valid()["spec"]["volumeClaimTemplates"]);
  EXPECT_EQ(d["spec"]["podManagementPolicy"], "OrderedReady");
}

TEST(AstsAdmissionTest, DefaultsLeaveNonObjectsAlone) {
  EXPECT_EQ(DefaultAdvancedStatefulSet(Json("x")), Json("x"));
  Json bad = With(R"({"spec": {"updateStrategy": 7}})");
  EXPECT_EQ(DefaultAdvancedStatefulSet(bad)["spec"]["updateStrategy"], 7);
}

// ---- Validation on CREATE -----------------------------------------------------------------------

struct Case {
  const char* name;
  const char* patch;   // merge patch over Valid()
  const char* expect;  // substring of the one problem expected; nullptr: valid
};

class AstsValidationTest : public ::testing::TestWithParam<Case> {};

TEST_P(AstsValidationTest, Create) {
  const Case& c = GetParam();
  Json sts = With(c.patch);
  std::vector<std::string> problems = AdvancedStatefulSetProblems(sts, nullptr);
  // The defaulted object is judged the same way (the API server runs the mutating webhook first).
  std::vector<std::string> after_defaults =
      AdvancedStatefulSetProblems(DefaultAdvancedStatefulSet(sts), nullptr);
  if (c.expect == nullptr) {
    EXPECT_THAT(problems, IsEmpty()) << absl::StrJoin(problems, "\n");
    EXPECT_THAT(after_defaults, IsEmpty()) << absl::StrJoin(after_defaults, "\n");
  } else {
    EXPECT_THAT(problems, ElementsAre(HasSubstr(c.expect))) << absl::StrJoin(problems, "\n");
    EXPECT_THAT(after_defaults, ElementsAre(HasSubstr(c.expect)))
        << absl::StrJoin(after_defaults, "\n");
  }
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(
    Table, AstsValidationTest,
    ::testing::Values(
        Case{"Valid", "{}", nullptr},
        Case{"ParallelWithPercentMaxUnavailable",
             R"({"spec": {"podManagementPolicy": "Parallel",
             "updateStrategy": {"rollingUpdate": {"maxUnavailable": "50%"}},
             "scaleStrategy": {"maxUnavailable": 2}}})",
             nullptr},
        Case{"ReserveOrdinalsAndRanges",
             R"({"spec": {"reserveOrdinals": [1, "3-5", 4], "ordinals": {"start": 2}}})", nullptr},
        Case{"UnorderedUpdateWithParallel",
             R"({"spec": {"podManagementPolicy": "Parallel", "updateStrategy": {"rollingUpdate": {
             "unorderedUpdate": {"priorityStrategy": {"weightPriority": [
               {"weight": 50, "matchSelector": {"matchLabels": {"tier": "a"}}}]}}}}}})",
             nullptr},
        Case{"MaxUnavailableOneIsFineWhenOrdered",
             R"({"spec": {"updateStrategy": {"rollingUpdate": {"maxUnavailable": 1}}}})", nullptr},
        Case{"NameNotDns", R"({"metadata": {"name": "DB_1"}})", "metadata.name: Invalid value"},
        Case{"NegativeReplicas", R"({"spec": {"replicas": -1}})",
             "spec.replicas: Invalid value: -1: must be greater than or equal to 0"},
        Case{"NoSelector", R"({"spec": {"selector": null}})", "spec.selector: Required value"},
        Case{"EmptySelector", R"({"spec": {"selector": {"matchLabels": null}}})",
             "spec.selector: Invalid value: empty selector is invalid for statefulset"},
        Case{"SelectorMismatch", R"({"spec": {"selector": {"matchLabels": {"app": "web"}}}})",
             "spec.template.metadata.labels: Invalid value: `selector` does not match template"},
        Case{"NoContainers", R"({"spec": {"template": {"spec": {"containers": []}}}})",
             "spec.template.spec.containers: Required value"},
        Case{"MountOfUnknownVolume",
             R"({"spec": {"volumeClaimTemplates": [{"metadata": {"name": "logs"}}]}})",
             "spec.template.spec.containers[0].volumeMounts[0].name: Not found: \"data\""},
        Case{"RestartPolicyNever",
             R"({"spec": {"template": {"spec": {"restartPolicy": "Never"}}}})",
             "spec.template.spec.restartPolicy: Unsupported value: \"Never\""},
        Case{"BadPodManagementPolicy", R"({"spec": {"podManagementPolicy": "Random"}})",
             "spec.podManagementPolicy: Unsupported value: \"Random\""},
        Case{"BadUpdateType", R"({"spec": {"updateStrategy": {"type": "InPlace"}}})",
             "spec.updateStrategy.type: Unsupported value: \"InPlace\""},
        Case{
            "OnDeleteWithRollingUpdate",
            R"({"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": {"partition": 1}}}})",
            "spec.updateStrategy.rollingUpdate: Invalid value: only allowed for updateStrategy "
            "type "
            "RollingUpdate"},
        Case{
            "NegativePartition",
            R"({"spec": {"updateStrategy": {"rollingUpdate": {"partition": -2}}}})",
            "spec.updateStrategy.rollingUpdate.partition: Invalid value: -2: must be greater than"},
        Case{"MinReadySecondsTooLong",
             R"({"spec": {"updateStrategy": {"rollingUpdate": {"minReadySeconds": 301}}}})",
             "spec.updateStrategy.rollingUpdate.minReadySeconds: Invalid value: 301: must be no "
             "more "
             "than 300 seconds"},
        Case{"MaxUnavailableTwoNeedsParallel",
             R"({"spec": {"updateStrategy": {"rollingUpdate": {"maxUnavailable": 2}}}})",
             "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: 2: a value other "
             "than 1 "
             "requires podManagementPolicy Parallel"},
        Case{"MaxUnavailableZero",
             R"({"spec": {"podManagementPolicy": "Parallel",
             "updateStrategy": {"rollingUpdate": {"maxUnavailable": "0%"}}}})",
             "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: \"0%\": must be at "
             "least 1"},
        Case{"MaxUnavailableNotPercent",
             R"({"spec": {"podManagementPolicy": "Parallel",
             "updateStrategy": {"rollingUpdate": {"maxUnavailable": "5"}}}})",
             "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: \"5\": must be an "
             "integer or a percentage"},
        Case{"ScaleMaxUnavailableNeedsParallel",
             R"({"spec": {"scaleStrategy": {"maxUnavailable": "50%"}}})",
             "spec.scaleStrategy.maxUnavailable: Invalid value: \"50%\": a value other than 1 "
             "requires "
             "podManagementPolicy Parallel"},
        Case{
            "InPlaceWithoutGate",
            R"({"spec": {"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "InPlaceIfPossible"}}}})",
            "spec.template.spec.readinessGates: Required value: must contain conditionType "
            "InPlaceUpdateReady when podUpdatePolicy is InPlaceIfPossible"},
        Case{"BadPodUpdatePolicy",
             R"({"spec": {"updateStrategy": {"rollingUpdate": {"podUpdatePolicy": "Restart"}}}})",
             "spec.updateStrategy.rollingUpdate.podUpdatePolicy: Unsupported value: \"Restart\""},
        Case{"UnorderedUpdateNeedsParallel",
             R"({"spec": {"updateStrategy": {"rollingUpdate": {"unorderedUpdate": {}}}}})",
             "spec.updateStrategy.rollingUpdate.unorderedUpdate: Invalid value: unorderedUpdate "
             "requires podManagementPolicy Parallel"},
        Case{"BadPriorityWeight",
             R"({"spec": {"podManagementPolicy": "Parallel", "updateStrategy": {"rollingUpdate": {
             "unorderedUpdate": {"priorityStrategy": {"weightPriority": [
               {"weight": 101, "matchSelector": {"matchLabels": {"tier": "a"}}}]}}}}}})",
             "spec.updateStrategy.rollingUpdate.unorderedUpdate.priorityStrategy.weightPriority[0]."
             "weight: Invalid value"},
        Case{"NegativeGracePeriod",
             R"({"spec": {"updateStrategy": {"rollingUpdate": {
             "inPlaceUpdateStrategy": {"gracePeriodSeconds": -1}}}}})",
             "spec.updateStrategy.rollingUpdate.inPlaceUpdateStrategy.gracePeriodSeconds"},
        Case{"PausedNotBool",
             R"({"spec": {"updateStrategy": {"rollingUpdate": {"paused": "yes"}}}})",
             "spec.updateStrategy.rollingUpdate.paused: Invalid value: must be a boolean"},
        Case{"NegativeReserveOrdinal", R"({"spec": {"reserveOrdinals": [0, -3]}})",
             "spec.reserveOrdinals[1]: Invalid value: -3 is negative"},
        Case{"BackwardsReserveRange", R"({"spec": {"reserveOrdinals": ["7-2"]}})",
             "spec.reserveOrdinals[0]: Invalid value: range \"7-2\" starts after it ends"},
        Case{"BadRetentionPolicy",
             R"({"spec": {"persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Keep"}}})",
             "spec.persistentVolumeClaimRetentionPolicy.whenDeleted: Unsupported value: \"Keep\""},
        Case{"NegativeOrdinalsStart", R"({"spec": {"ordinals": {"start": -1}}})",
             "spec.ordinals.start: Invalid value: -1: must be greater than or equal to 0"},
        Case{"NegativeRevisionHistoryLimit", R"({"spec": {"revisionHistoryLimit": -1}})",
             "spec.revisionHistoryLimit: Invalid value: -1"},
        Case{"BadLifecycleLabel",
             R"({"spec": {"lifecycle": {"preDelete": {"labelsHandler": {"bad key!": "x"}}}}})",
             "spec.lifecycle.preDelete.labelsHandler: Invalid value"}),
    CaseName);

TEST(AstsAdmissionTest, InPlaceWithGateIsValid) {
  for (const char* policy : {"InPlaceIfPossible", "InPlaceOnly"}) {
    Json sts = With(std::string(R"({"spec": {)") + kInPlaceGate +
                    R"(, "updateStrategy": {"rollingUpdate": {"podUpdatePolicy": ")" + policy +
                    R"("}}}})");
    EXPECT_THAT(AdvancedStatefulSetProblems(sts, nullptr), IsEmpty()) << policy;
  }
}

TEST(AstsAdmissionTest, SeveralProblemsAreAllReported) {
  absl::Status st = ValidateAdvancedStatefulSet(
      With(R"({"spec": {"replicas": -1, "podManagementPolicy": "x"}})"), nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("spec.replicas"));
  EXPECT_THAT(st.message(), HasSubstr("; spec.podManagementPolicy"));
  EXPECT_THAT(AdvancedStatefulSetProblems(Json::parse(R"({"metadata": {}})"), nullptr),
              ElementsAre("spec: Required value"));
  EXPECT_TRUE(ValidateAdvancedStatefulSet(Valid(), nullptr).ok());
}

// ---- Validation on UPDATE -----------------------------------------------------------------------

TEST(AstsAdmissionTest, UpdateMayChangeTheMutableFields) {
  Json old_sts = DefaultAdvancedStatefulSet(Valid());
  Json now = old_sts;
  now.merge_patch(Json::parse(R"({"spec": {
      "replicas": 5, "reserveOrdinals": [1], "revisionHistoryLimit": 3, "ordinals": {"start": 1},
      "template": {"spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}},
      "volumeClaimTemplates": [],
      "updateStrategy": {"rollingUpdate": {"partition": 2, "paused": true}},
      "scaleStrategy": {"maxUnavailable": 1},
      "lifecycle": {"preDelete": {"finalizersHandler": ["example.com/hold"]}},
      "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete"}}})"));
  EXPECT_THAT(AdvancedStatefulSetProblems(now, &old_sts), IsEmpty());
  // The request may also come before defaulting: absent fields read as their defaults.
  EXPECT_THAT(AdvancedStatefulSetProblems(Valid(), &old_sts), IsEmpty());
}

TEST(AstsAdmissionTest, UpdateRefusesImmutableFields) {
  Json old_sts = DefaultAdvancedStatefulSet(Valid());
  struct UpdateCase {
    const char* patch;
    const char* expect;
  };
  for (const UpdateCase& c : std::vector<UpdateCase>{
           {R"({"spec": {"selector": {"matchLabels": {"app": "db", "x": "y"}},
                "template": {"metadata": {"labels": {"x": "y"}}}}})",
            "spec.selector: Invalid value: field is immutable"},
           {R"({"spec": {"serviceName": "other"}})",
            "spec.serviceName: Invalid value: field is immutable"},
           {R"({"spec": {"podManagementPolicy": "Parallel"}})",
            "spec.podManagementPolicy: Invalid value: field is immutable"},
           {R"({"spec": {"someFutureField": 1}})",
            "spec: Forbidden: updates to statefulset spec for fields other than 'replicas'"},
       }) {
    Json now = old_sts;
    now.merge_patch(Json::parse(c.patch));
    EXPECT_THAT(AdvancedStatefulSetProblems(now, &old_sts), ElementsAre(HasSubstr(c.expect)))
        << c.patch;
  }
}

TEST(AstsAdmissionTest, InPlaceOnlyUpdateMayChangeOnlyImages) {
  Json old_sts = DefaultAdvancedStatefulSet(With(std::string(R"({"spec": {)") + kInPlaceGate +
                                                 R"(, "updateStrategy": {"rollingUpdate": {
      "podUpdatePolicy": "InPlaceOnly"}}}})"));
  Json images = old_sts;
  images["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.36";
  images["spec"]["template"]["metadata"]["annotations"] = {{"note", "metadata may change"}};
  EXPECT_THAT(AdvancedStatefulSetProblems(images, &old_sts), IsEmpty());

  Json env = images;
  env["spec"]["template"]["spec"]["containers"][0]["env"] = {{{"name", "A"}, {"value", "1"}}};
  EXPECT_THAT(AdvancedStatefulSetProblems(env, &old_sts),
              ElementsAre(HasSubstr("spec.template.spec: Forbidden: with podUpdatePolicy "
                                    "InPlaceOnly only container images may change")));
}

TEST(AstsAdmissionTest, VolumeClaimUpdateStrategy) {
  EXPECT_THAT(
      AdvancedStatefulSetProblems(
          With(R"({"spec": {"volumeClaimUpdateStrategy": {"type": "OnPodRollingUpdate"}}})"),
          nullptr),
      IsEmpty());
  EXPECT_THAT(
      AdvancedStatefulSetProblems(
          With(R"({"spec": {"volumeClaimUpdateStrategy": {"type": "OnDelete"}}})"), nullptr),
      IsEmpty());
  EXPECT_THAT(
      AdvancedStatefulSetProblems(
          With(R"({"spec": {"volumeClaimUpdateStrategy": {"type": "Recreate"}}})"), nullptr),
      ElementsAre("spec.volumeClaimUpdateStrategy.type: Unsupported value: \"Recreate\": "
                  "supported values: \"OnPodRollingUpdate\", \"OnDelete\""));
  EXPECT_THAT(AdvancedStatefulSetProblems(
                  With(R"({"spec": {"volumeClaimUpdateStrategy": "OnDelete"}})"), nullptr),
              ElementsAre("spec.volumeClaimUpdateStrategy: Invalid value: must be an object"));
}

TEST(AstsAdmissionTest, OnPodRollingUpdateLetsOnlyTheClaimSizeChange) {
  const Json old_sts = DefaultAdvancedStatefulSet(
      With(R"({"spec": {"volumeClaimUpdateStrategy": {"type": "OnPodRollingUpdate"}}})"));
  auto problems = [&](const std::function<void(Json&)>& edit) {
    Json now = old_sts;
    edit(now["spec"]["volumeClaimTemplates"]);
    return AdvancedStatefulSetProblems(now, &old_sts);
  };
  EXPECT_THAT(problems([](Json& v) { v[0]["spec"]["resources"]["requests"]["storage"] = "5Gi"; }),
              IsEmpty());
  EXPECT_THAT(problems([](Json& v) { v[0]["spec"]["accessModes"] = {"ReadWriteMany"}; }),
              ElementsAre(HasSubstr("spec.volumeClaimTemplates[data]: Forbidden: only the storage "
                                    "size may change while volumeClaimUpdateStrategy is "
                                    "OnPodRollingUpdate")));
  EXPECT_THAT(problems([](Json& v) {
                v.push_back(v[0]);
                v[1]["metadata"]["name"] = "logs";
              }),
              ::testing::Contains(HasSubstr("spec.volumeClaimTemplates: Forbidden: templates may "
                                            "not be added or removed")));
  EXPECT_THAT(problems([](Json& v) { v[0]["metadata"]["name"] = "data2"; }),
              ::testing::Contains(HasSubstr("spec.volumeClaimTemplates[data2].name: Forbidden")));
  // OnDelete: anything goes (the user deletes claims to have them made again).
  Json on_delete = old_sts;
  on_delete["spec"]["volumeClaimUpdateStrategy"]["type"] = "OnDelete";
  Json now = on_delete;
  now["spec"]["volumeClaimTemplates"][0]["spec"]["accessModes"] = {"ReadWriteMany"};
  EXPECT_THAT(AdvancedStatefulSetProblems(now, &on_delete), IsEmpty());
}

}  // namespace admission_test
}  // namespace kruise::manager::statefulset
