#include "manager/daemonset/ads_admission.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kruise::manager::daemonset {
// Named, not anonymous: this file shares a unity-build unit with ads_plan_test.cc.
namespace admission_test {

using kube::Json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A valid Advanced DaemonSet: selector app=agent, one container.
Json Valid() {
  return Json::parse(R"({
    "apiVersion": "apps.kruise.io/v1beta1", "kind": "DaemonSet",
    "metadata": {"name": "agent", "namespace": "default"},
    "spec": {
      "selector": {"matchLabels": {"app": "agent"}},
      "template": {
        "metadata": {"labels": {"app": "agent"}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.35"}]}
      }
    }
  })");
}

// Valid() with the JSON merge patch `patch` applied (null removes a member).
Json With(const std::string& patch) {
  Json ds = Valid();
  ds.merge_patch(Json::parse(patch));
  return ds;
}

std::vector<std::string> Problems(const std::string& patch) {
  return AdvancedDaemonSetProblems(With(patch), nullptr);
}

// ---- Defaults -----------------------------------------------------------------------------------

TEST(AdsAdmissionTest, DefaultsAsOpenKruise) {
  Json d = DefaultAdvancedDaemonSet(Valid());
  const Json& spec = d["spec"];
  EXPECT_EQ(spec["burstReplicas"], 250);
  EXPECT_EQ(spec["revisionHistoryLimit"], 10);
  EXPECT_EQ(spec["updateStrategy"], Json::parse(R"({"type": "RollingUpdate", "rollingUpdate": {
      "rollingUpdateType": "Standard", "maxUnavailable": 1, "maxSurge": 0}})"));
  // No partition default and no Pod template defaults (OpenKruise gives a DaemonSet none).
  EXPECT_EQ(spec["template"], Valid()["spec"]["template"]);
  EXPECT_THAT(AdvancedDaemonSetProblems(d, nullptr), IsEmpty());
  // Idempotent.
  EXPECT_EQ(DefaultAdvancedDaemonSet(d), d);
}

TEST(AdsAdmissionTest, DefaultsTable) {
  struct Case {
    const char* name;
    const char* patch;
    const char* want_strategy;
  };
  const Case cases[] = {
      {"maxSurge alone keeps maxUnavailable unset",
       R"({"spec": {"updateStrategy": {"rollingUpdate": {"maxSurge": "10%"}}}})",
       R"({"type": "RollingUpdate", "rollingUpdate": {"rollingUpdateType": "Standard",
           "maxSurge": "10%"}})"},
      {"deprecated Surging becomes Standard with maxSurge 1, maxUnavailable 0",
       R"({"spec": {"updateStrategy": {"rollingUpdate": {"rollingUpdateType": "Surging"}}}})",
       R"({"type": "RollingUpdate", "rollingUpdate": {"rollingUpdateType": "Standard",
           "maxSurge": 1, "maxUnavailable": 0}})"},
      {"Surging keeps a maxSurge the user set",
       R"({"spec": {"updateStrategy": {"rollingUpdate": {"rollingUpdateType": "Surging",
           "maxSurge": "20%"}}}})",
       R"({"type": "RollingUpdate", "rollingUpdate": {"rollingUpdateType": "Standard",
           "maxSurge": "20%", "maxUnavailable": 0}})"},
      {"InPlaceIfPossible, partition and selector are kept",
       R"({"spec": {"updateStrategy": {"rollingUpdate": {"rollingUpdateType": "InPlaceIfPossible",
           "partition": 3, "selector": {"matchLabels": {"pool": "a"}}}}}})",
       R"({"type": "RollingUpdate", "rollingUpdate": {"rollingUpdateType": "InPlaceIfPossible",
           "partition": 3, "selector": {"matchLabels": {"pool": "a"}}, "maxUnavailable": 1,
           "maxSurge": 0}})"},
      {"OnDelete gets no rollingUpdate", R"({"spec": {"updateStrategy": {"type": "OnDelete"}}})",
       R"({"type": "OnDelete"})"},
  };
  for (const Case& c : cases) {
    Json d = DefaultAdvancedDaemonSet(With(c.patch));
    EXPECT_EQ(d["spec"]["updateStrategy"], Json::parse(c.want_strategy)) << c.name;
    EXPECT_THAT(AdvancedDaemonSetProblems(d, nullptr), IsEmpty()) << c.name;
  }
  // User values are never rewritten.
  Json d = DefaultAdvancedDaemonSet(
      With(R"({"spec": {"burstReplicas": "10%", "revisionHistoryLimit": 0}})"));
  EXPECT_EQ(d["spec"]["burstReplicas"], "10%");
  EXPECT_EQ(d["spec"]["revisionHistoryLimit"], 0);
}

TEST(AdsAdmissionTest, DefaultsNeverThrow) {
  for (const char* raw :
       {R"(null)", R"([])", R"({"spec": 3})", R"({"spec": {"updateStrategy": 1}})",
        R"({"spec": {"updateStrategy": {"type": 5, "rollingUpdate": []}}})",
        R"({"spec": {"updateStrategy": {"rollingUpdate": "x"}}})"}) {
    Json in = Json::parse(raw);
    Json out = DefaultAdvancedDaemonSet(in);
    (void)AdvancedDaemonSetProblems(out, nullptr);
    (void)AdvancedDaemonSetProblems(in, &in);
  }
}

// ---- Validation ---------------------------------------------------------------------------------

// OpenKruise's documentation example (docs "Advanced DaemonSet"), as a user would write it.
TEST(AdsAdmissionTest, OpenKruiseDocsExampleIsValid) {
  Json ds = Json::parse(R"({
    "apiVersion": "apps.kruise.io/v1alpha1", "kind": "DaemonSet",
    "metadata": {"name": "sample-ds"},
    "spec": {
      "selector": {"matchLabels": {"app": "sample"}},
      "template": {"metadata": {"labels": {"app": "sample"}},
                   "spec": {"containers": [{"name": "main", "image": "nginx:alpine"}]}},
      "updateStrategy": {
        "type": "RollingUpdate",
        "rollingUpdate": {
          "rollingUpdateType": "Standard",
          "selector": {"matchLabels": {"nodeType": "canary"}},
          "partition": 10,
          "maxUnavailable": 5,
          "paused": false
        }
      },
      "lifecycle": {"preDelete": {"labelsHandler": {"example.io/block-deleting": "true"}}}
    }
  })");
  EXPECT_THAT(AdvancedDaemonSetProblems(ds, nullptr), IsEmpty());
  EXPECT_THAT(AdvancedDaemonSetProblems(DefaultAdvancedDaemonSet(ds), nullptr), IsEmpty());
  // The surge variant of the same page: maxSurge with maxUnavailable 0.
  ds["spec"]["updateStrategy"]["rollingUpdate"] =
      Json::parse(R"({"rollingUpdateType": "Standard", "maxSurge": "30%", "maxUnavailable": 0})");
  EXPECT_THAT(AdvancedDaemonSetProblems(ds, nullptr), IsEmpty());
  // In-place, v1beta1 percentage partition, partitioned scaling.
  ds["spec"]["updateStrategy"]["rollingUpdate"] = Json::parse(
      R"({"rollingUpdateType": "InPlaceIfPossible", "maxUnavailable": "20%", "partition": "50%"})");
  ds["spec"]["scaleStrategy"] = Json::parse(R"({"partitionedScaling": true})");
  EXPECT_THAT(AdvancedDaemonSetProblems(ds, nullptr), IsEmpty());
}

TEST(AdsAdmissionTest, InvalidTable) {
  struct Case {
    const char* name;
    const char* patch;
    const char* want;  // a substring of the joined problems
  };
  const Case cases[] = {
      {"bad name", R"({"metadata": {"name": "Agent_1"}})", "metadata.name"},
      {"no selector", R"({"spec": {"selector": null}})", "spec.selector: Required value"},
      {"empty selector", R"({"spec": {"selector": {"matchLabels": null}}})",
       "empty selector is invalid for daemonset"},
      {"selector does not match labels", R"({"spec": {"selector": {"matchLabels": {"app": "x"}}}})",
       "spec.template.metadata.labels: Invalid value: `selector` does not match template `labels`"},
      {"no template", R"({"spec": {"template": null}})", "spec.template: Required value"},
      {"no containers", R"({"spec": {"template": {"spec": {"containers": []}}}})",
       "spec.template.spec.containers"},
      {"restartPolicy", R"({"spec": {"template": {"spec": {"restartPolicy": "OnFailure"}}}})",
       "spec.template.spec.restartPolicy: Unsupported value: \"OnFailure\""},
      {"activeDeadlineSeconds",
       R"({"spec": {"template": {"spec": {"activeDeadlineSeconds": 10}}}})",
       "activeDeadlineSeconds in daemonset is not Supported"},
      {"read-write GCE disk",
       R"({"spec": {"template": {"spec": {"volumes": [{"name": "d",
           "gcePersistentDisk": {"pdName": "x"}}]}}}})",
       "spec.template.spec.volumes[0].gcePersistentDisk.readOnly: Invalid value: false"},
      {"negative minReadySeconds", R"({"spec": {"minReadySeconds": -1}})", "spec.minReadySeconds"},
      {"negative revisionHistoryLimit", R"({"spec": {"revisionHistoryLimit": -1}})",
       "spec.revisionHistoryLimit"},
      {"bad strategy type", R"({"spec": {"updateStrategy": {"type": "Recreate"}}})",
       "spec.updateStrategy.type: Unsupported value: \"Recreate\""},
      {"both surge and unavailable",
       R"({"spec": {"updateStrategy": {"rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}}}})",
       "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: 1: may not be set when "
       "maxUnavailable is non-zero"},
      {"neither", R"({"spec": {"updateStrategy": {"rollingUpdate": {"maxUnavailable": 0}}}})",
       "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when "
       "maxSurge is 0"},
      {"neither as percentages",
       R"({"spec": {"updateStrategy": {"rollingUpdate": {"maxUnavailable": "0%",
           "maxSurge": "0%"}}}})",
       "cannot be 0 when maxSurge is 0"},
      {"percentage above 100",
       R"({"spec": {"updateStrategy": {"rollingUpdate": {"maxUnavailable": "150%"}}}})",
       "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: \"150%\""},
      {"negative maxSurge",
       R"({"spec": {"updateStrategy": {"rollingUpdate": {"maxSurge": -1, "maxUnavailable": 0}}}})",
       "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: -1"},
      {"not a percentage",
       R"({"spec": {"updateStrategy": {"rollingUpdate": {"maxUnavailable": "five"}}}})",
       "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: \"five\""},
      {"in-place with surge",
       R"({"spec": {"updateStrategy": {"rollingUpdate": {"rollingUpdateType": "InPlaceIfPossible",
           "maxSurge": 1, "maxUnavailable": 0}}}})",
       "spec.updateStrategy.rollingUpdate.maxSurge: Required value: must be 0 for "
       "InPlaceIfPossible type"},
      {"Surging with unavailable",
       R"({"spec": {"updateStrategy": {"rollingUpdate": {"rollingUpdateType": "Surging",
           "maxUnavailable": 2}}}})",
       "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: must be 0 for Surging "
       "type"},
      {"unknown rollingUpdateType",
       R"({"spec": {"updateStrategy": {"rollingUpdate": {"rollingUpdateType": "Inplace"}}}})",
       "spec.updateStrategy.rollingUpdate.rollingUpdateType: Unsupported value: \"Inplace\""},
      {"negative partition",
       R"({"spec": {"updateStrategy": {"rollingUpdate": {"partition": -1}}}})",
       "spec.updateStrategy.rollingUpdate.partition: Invalid value: -1"},
      {"bad node selector",
       R"({"spec": {"updateStrategy": {"rollingUpdate": {"selector": {"matchExpressions":
           [{"key": "pool", "operator": "Near"}]}}}}})",
       "spec.updateStrategy.rollingUpdate.selector: Invalid value"},
      {"paused not a boolean",
       R"({"spec": {"updateStrategy": {"rollingUpdate": {"paused": "yes"}}}})",
       "spec.updateStrategy.rollingUpdate.paused"},
      {"rollingUpdate not an object", R"({"spec": {"updateStrategy": {"rollingUpdate": 3}}})",
       "spec.updateStrategy.rollingUpdate: Invalid value: must be an object"},
      {"inPlaceUpdate hook",
       R"({"spec": {"lifecycle": {"inPlaceUpdate": {"labelsHandler": {"a": "b"}}}}})",
       "spec.lifecycle.inPlaceUpdate: Forbidden: inPlaceUpdate hook has not supported yet"},
      {"bad hook label",
       R"({"spec": {"lifecycle": {"preDelete": {"labelsHandler": {"a b": "c"}}}}})",
       "spec.lifecycle.preDelete"},
      {"bad burstReplicas", R"({"spec": {"burstReplicas": "lots"}})",
       "spec.burstReplicas: Invalid value: \"lots\""},
      {"partitionedScaling not a boolean",
       R"({"spec": {"scaleStrategy": {"partitionedScaling": "yes"}}})",
       "spec.scaleStrategy.partitionedScaling"},
  };
  for (const Case& c : cases) {
    const std::vector<std::string> problems = Problems(c.patch);
    std::string joined;
    for (const std::string& p : problems) joined += p + "\n";
    EXPECT_THAT(joined, HasSubstr(c.want)) << c.name;
    // Defaulting first changes nothing about the verdict.
    EXPECT_FALSE(
        AdvancedDaemonSetProblems(DefaultAdvancedDaemonSet(With(c.patch)), nullptr).empty())
        << c.name;
  }
}

TEST(AdsAdmissionTest, ValidVariants) {
  for (const char* patch : {
           R"({"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": {"maxSurge": 5,
               "maxUnavailable": 5}}}})",  // ignored with OnDelete, as OpenKruise
           R"({"spec": {"updateStrategy": {"rollingUpdate": {"maxSurge": "100%"}}}})",
           R"({"spec": {"updateStrategy": {"rollingUpdate": {"rollingUpdateType": "Surging"}}}})",
           R"({"spec": {"burstReplicas": "50%", "minReadySeconds": 30}})",
           R"({"spec": {"lifecycle": {"preNormal": {"finalizersHandler": ["example.io/x"]}}}})",
           R"({"spec": {"template": {"spec": {"volumes": [{"name": "d",
               "gcePersistentDisk": {"pdName": "x", "readOnly": true}}]}}}})",
       }) {
    EXPECT_THAT(Problems(patch), IsEmpty()) << patch;
  }
}

// ---- UPDATE -------------------------------------------------------------------------------------

TEST(AdsAdmissionTest, UpdateRules) {
  const Json old_ds = DefaultAdvancedDaemonSet(Valid());
  // The mutable fields, changed together.
  Json ok = With(R"({"spec": {
      "burstReplicas": 10, "minReadySeconds": 5, "revisionHistoryLimit": 3,
      "template": {"spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}},
      "updateStrategy": {"rollingUpdate": {"partition": 2, "paused": true}},
      "scaleStrategy": {"partitionedScaling": true},
      "lifecycle": {"preDelete": {"finalizersHandler": ["example.io/hold"]}}}})");
  EXPECT_THAT(AdvancedDaemonSetProblems(ok, &old_ds), IsEmpty());
  // An absent field equals its default.
  EXPECT_THAT(AdvancedDaemonSetProblems(Valid(), &old_ds), IsEmpty());

  Json moved = With(R"({"spec": {"selector": {"matchLabels": {"app": "agent", "v": "2"}},
                                 "template": {"metadata": {"labels": {"v": "2"}}}}})");
  EXPECT_THAT(AdvancedDaemonSetProblems(moved, &old_ds),
              ElementsAre("spec.selector: Invalid value: field is immutable"));
  Json extra = With(R"({"spec": {"someField": 1}})");
  EXPECT_THAT(
      AdvancedDaemonSetProblems(extra, &old_ds),
      ElementsAre(HasSubstr("spec: Forbidden: updates to daemonset spec for fields other")));
  // The new object is validated too.
  Json bad = With(R"({"spec": {"minReadySeconds": -3}})");
  EXPECT_THAT(AdvancedDaemonSetProblems(bad, &old_ds), ElementsAre(HasSubstr("minReadySeconds")));
  EXPECT_FALSE(ValidateAdvancedDaemonSet(bad, &old_ds).ok());
  EXPECT_TRUE(ValidateAdvancedDaemonSet(ok, &old_ds).ok());
}

}  // namespace admission_test
}  // namespace kruise::manager::daemonset
