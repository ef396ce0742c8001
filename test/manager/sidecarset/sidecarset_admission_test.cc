#include "manager/sidecarset/sidecarset_admission.h"

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/client.h"

namespace kruise::manager::sidecarset {
namespace {

using kube::Json;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// OpenKruise's manual SidecarSet: selector app=nginx, one sidecar with a log volume.
Json Valid() {
  return Json::parse(R"({
    "apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
    "metadata": {"name": "test-sidecarset"},
    "spec": {
      "selector": {"matchLabels": {"app": "nginx"}},
      "updateStrategy": {"type": "RollingUpdate", "maxUnavailable": 1},
      "containers": [{"name": "sidecar1", "image": "centos:6.7", "command": ["sleep", "999d"],
                      "volumeMounts": [{"name": "log-volume", "mountPath": "/var/log"}]}],
      "volumes": [{"name": "log-volume", "emptyDir": {}}]
    }
  })");
}

// Valid() with the JSON merge patch `patch` applied (null removes a member; lists are replaced).
Json With(const std::string& patch) {
  Json ss = Valid();
  ss.merge_patch(Json::parse(patch));
  return ss;
}

std::string Problems(const Json& ss, const Json* old = nullptr) {
  return absl::StrJoin(SidecarSetProblems(ss, old), "\n");
}

// ---- Defaults -----------------------------------------------------------------------------------

TEST(SidecarSetAdmissionTest, DefaultsSpecAndStrategies) {
  Json ss = With(R"({"spec": {"updateStrategy": null}})");
  Json d = DefaultSidecarSet(ss);
  const Json& spec = d["spec"];
  EXPECT_EQ(spec["updateStrategy"],
            Json::parse(R"({"type": "RollingUpdate", "partition": 0, "maxUnavailable": 1})"));
  EXPECT_EQ(spec["injectionStrategy"], Json::object());
  EXPECT_EQ(spec["revisionHistoryLimit"], 10);
  EXPECT_EQ(d["metadata"], ss["metadata"]);
  EXPECT_EQ(spec["selector"], ss["spec"]["selector"]);
  EXPECT_FALSE(spec.contains("namespace"));
  EXPECT_FALSE(spec.contains("namespaceSelector"));
}

TEST(SidecarSetAdmissionTest, DefaultsSidecarContainers) {
  Json ss = With(R"({"spec": {
      "initContainers": [{"name": "init", "image": "busybox:1.35"}],
      "containers": [{"name": "proxy", "image": "envoy",
                      "ports": [{"containerPort": 15001}],
                      "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                      "livenessProbe": {"httpGet": {"port": 15020}},
                      "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 5},
                      "startupProbe": {"tcpSocket": {"port": 15001}},
                      "lifecycle": {"preStop": {"httpGet": {"port": 15020, "path": "/quit"}}},
                      "transferEnv": [{"sourceContainerNameFrom": {"fieldRef": {
                          "fieldPath": "metadata.labels['app']"}}, "envName": "TZ"}]}]}})");
  Json d = DefaultSidecarSet(ss);
  const Json& init = d["spec"]["initContainers"][0];
  EXPECT_EQ(init["podInjectPolicy"], "AfterAppContainer");  // OpenKruise: After for init
  EXPECT_EQ(init["upgradeStrategy"], Json::parse(R"({"upgradeType": "ColdUpgrade"})"));
  EXPECT_EQ(init["shareVolumePolicy"], Json::parse(R"({"type": "disabled"})"));
  EXPECT_EQ(init["imagePullPolicy"], "IfNotPresent");  // tag 1.35
  EXPECT_EQ(init["terminationMessagePath"], "/dev/termination-log");
  EXPECT_EQ(init["terminationMessagePolicy"], "File");

  const Json& c = d["spec"]["containers"][0];
  EXPECT_EQ(c["podInjectPolicy"], "BeforeAppContainer");
  EXPECT_EQ(c["upgradeStrategy"]["upgradeType"], "ColdUpgrade");
  EXPECT_EQ(c["shareVolumePolicy"]["type"], "disabled");
  EXPECT_EQ(c["imagePullPolicy"], "Always");  // no tag = latest
  EXPECT_EQ(c["ports"][0]["protocol"], "TCP");
  EXPECT_EQ(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
  EXPECT_EQ(c["livenessProbe"], Json::parse(R"({"httpGet": {"port": 15020, "path": "/",
      "scheme": "HTTP"}, "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1,
      "failureThreshold": 3})"));
  EXPECT_EQ(c["readinessProbe"]["periodSeconds"], 5);
  EXPECT_EQ(c["readinessProbe"]["timeoutSeconds"], 1);
  EXPECT_EQ(c["startupProbe"]["failureThreshold"], 3);
  EXPECT_EQ(c["lifecycle"]["preStop"]["httpGet"]["path"], "/quit");
  EXPECT_EQ(c["lifecycle"]["preStop"]["httpGet"]["scheme"], "HTTP");
  EXPECT_EQ(c["transferEnv"][0]["sourceContainerNameFrom"]["fieldRef"]["apiVersion"], "v1");
  EXPECT_FALSE(c.contains("shareVolumeDevicePolicy"));  // a pointer in OpenKruise: stays absent
}

TEST(SidecarSetAdmissionTest, DefaultsVolumesRevisionAndPatchPolicy) {
  Json ss = With(R"({"spec": {
      "volumes": [{"name": "scratch"}, {"name": "host", "hostPath": {"path": "/x"}},
                  {"name": "cfg", "configMap": {"name": "c"}},
                  {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}],
      "injectionStrategy": {"revision": {"customVersion": "v1"}},
      "patchPodMetadata": [{"annotations": {"a.example.com/x": "y"}}]}})");
  Json d = DefaultSidecarSet(ss);
  const Json& v = d["spec"]["volumes"];
  EXPECT_EQ(v[0], Json::parse(R"({"name": "scratch", "emptyDir": {}})"));
  EXPECT_EQ(v[1]["hostPath"]["type"], "");
  EXPECT_EQ(v[2]["configMap"]["defaultMode"], 420);
  EXPECT_EQ(v[3]["projected"]["defaultMode"], 420);
  EXPECT_EQ(v[3]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"], 3600);
  EXPECT_EQ(d["spec"]["injectionStrategy"]["revision"]["policy"], "Always");
  EXPECT_EQ(d["spec"]["patchPodMetadata"][0]["patchPolicy"], "Retain");
}

TEST(SidecarSetAdmissionTest, DefaultsKeepUserValues) {
  Json ss = Json::parse(R"({
    "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "metadata": {"name": "s"},
    "spec": {
      "selector": {"matchLabels": {"app": "x"}},
      "updateStrategy": {"type": "NotUpdate", "partition": "10%", "maxUnavailable": "50%"},
      "injectionStrategy": {"paused": true, "revision": {"revisionName": "s-1", "policy": "Partial"}},
      "revisionHistoryLimit": 0,
      "patchPodMetadata": [{"annotations": {"k": "{}"}, "patchPolicy": "MergePatchJson"}],
      "initContainers": [{"name": "i", "image": "busybox", "podInjectPolicy": "BeforeAppContainer",
                          "imagePullPolicy": "Never", "terminationMessagePath": "/t",
                          "terminationMessagePolicy": "FallbackToLogsOnError",
                          "upgradeStrategy": {"upgradeType": "ColdUpgrade"},
                          "shareVolumePolicy": {"type": "enabled"}}],
      "containers": [{"name": "c", "image": "busybox:1", "podInjectPolicy": "AfterAppContainer",
                      "imagePullPolicy": "Always", "terminationMessagePath": "/t",
                      "terminationMessagePolicy": "File",
                      "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "e:1"},
                      "shareVolumePolicy": {"type": "enabled"},
                      "ports": [{"containerPort": 53, "protocol": "UDP"}]}],
      "volumes": [{"name": "v", "secret": {"secretName": "s", "defaultMode": 256}}]
    }})");
  EXPECT_EQ(DefaultSidecarSet(ss), ss) << DefaultSidecarSet(ss).dump(2);
}

TEST(SidecarSetAdmissionTest, DefaultsTreatEmptyStringsAsUnset) {
  Json d = DefaultSidecarSet(With(R"({"spec": {"updateStrategy": {"type": ""},
      "containers": [{"name": "c", "image": "busybox:1", "podInjectPolicy": "",
                      "upgradeStrategy": {"upgradeType": ""}, "shareVolumePolicy": {"type": ""}}]}})"));
  EXPECT_EQ(d["spec"]["updateStrategy"]["type"], "RollingUpdate");
  const Json& c = d["spec"]["containers"][0];
  EXPECT_EQ(c["podInjectPolicy"], "BeforeAppContainer");
  EXPECT_EQ(c["upgradeStrategy"]["upgradeType"], "ColdUpgrade");
  EXPECT_EQ(c["shareVolumePolicy"]["type"], "disabled");
}

TEST(SidecarSetAdmissionTest, DefaultsLeaveWrongTypesForValidation) {
  Json ss = With(R"({"spec": {"updateStrategy": "fast", "injectionStrategy": [1],
      "containers": [{"name": "c", "image": "b", "upgradeStrategy": "hot",
                      "shareVolumePolicy": 3}]}})");
  Json d = DefaultSidecarSet(ss);
  EXPECT_EQ(d["spec"]["updateStrategy"], "fast");
  EXPECT_EQ(d["spec"]["injectionStrategy"], Json::parse("[1]"));
  EXPECT_EQ(d["spec"]["containers"][0]["upgradeStrategy"], "hot");
  EXPECT_EQ(d["spec"]["containers"][0]["shareVolumePolicy"], 3);
  EXPECT_FALSE(SidecarSetProblems(d, nullptr).empty());
}

// ---- Validation table ---------------------------------------------------------------------------

struct Case {
  const char* name;
  std::string patch;     // merge patch over Valid()
  const char* expected;  // "" = valid; else a substring of the problems
};

std::vector<Case> Cases() {
  return {
      // Valid objects.
      {"manual example", "{}", ""},
      {"v1beta1 apiVersion", R"({"apiVersion": "apps.kruise.io/v1beta1"})", ""},
      {"namespace", R"({"spec": {"namespace": "default"}})", ""},
      {"namespaceSelector", R"({"spec": {"namespaceSelector": {"matchLabels": {"env": "prod"}}}})",
       ""},
      {"selector expressions", R"({"spec": {"selector": {"matchExpressions": [
          {"key": "app", "operator": "In", "values": ["a", "b"]}]}}})",
       ""},
      {"init containers only", R"({"spec": {"containers": null,
          "initContainers": [{"name": "init", "image": "busybox:1.35"}]}})",
       ""},
      {"hot upgrade", R"({"spec": {"containers": [{"name": "proxy", "image": "envoy:1",
          "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty:1"}}]}})",
       ""},
      {"percent strategy",
       R"({"spec": {"updateStrategy": {"partition": "30%", "maxUnavailable": "100%"}}})", ""},
      {"selector strategy with zero partition", R"({"spec": {"updateStrategy": {"partition": 0,
          "selector": {"matchLabels": {"canary": "true"}}}}})",
       ""},
      {"NotUpdate with native sidecar", R"({"spec": {"updateStrategy": {"type": "NotUpdate"},
          "initContainers": [{"name": "agent", "image": "busybox:1.35", "restartPolicy": "Always"}]}})",
       ""},
      {"transferEnv", R"({"spec": {"containers": [{"name": "c", "image": "b:1", "transferEnv": [
          {"sourceContainerName": "main", "envName": "TZ"},
          {"sourceContainerNameFrom": {"fieldRef": {"fieldPath": "metadata.annotations['Example.com/Src']"}},
           "envNames": ["A", "B_2"]},
          {"sourceContainerNameFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
           "envName": "X"}]}]}})",
       ""},
      {"injection revision", R"({"spec": {"injectionStrategy": {"paused": false,
          "revision": {"revisionName": "test-sidecarset-67d8b", "policy": "Partial"}}}})",
       ""},
      {"patchPodMetadata", R"({"spec": {"patchPodMetadata": [
          {"annotations": {"oom-score": "{\"log-agent\": 1}"}, "patchPolicy": "MergePatchJson"},
          {"annotations": {"example.com/owner": "mesh"}, "patchPolicy": "Overwrite"}]}})",
       ""},
      {"priority strategy", R"({"spec": {"updateStrategy": {"priorityStrategy": {"weightPriority": [
          {"weight": 50, "matchSelector": {"matchLabels": {"tier": "web"}}}]},
          "scatterStrategy": [{"key": "zone", "value": "a"}, {"key": "zone", "value": "b"}]}}})",
       ""},
      {"resources policy", R"j({"spec": {"containers": [{"name": "c", "image": "b:1",
          "resourcesPolicy": {"targetContainersMode": "sum", "targetContainersNameRegex": "^app$",
          "resourcesExpr": {"limits": {"cpu": "max(cpu*50%, 50m)"}}}}]}})j",
       ""},
      {"volume devices", R"({"spec": {"volumes": [{"name": "disk0",
          "persistentVolumeClaim": {"claimName": "pvc-0"}}], "containers": [{"name": "c",
          "image": "b:1", "volumeDevices": [{"name": "disk0", "devicePath": "/dev/nvme1"}]}]}})",
       ""},
      {"customVersion",
       R"({"apiVersion": "apps.kruise.io/v1beta1", "spec": {"customVersion": "v2"}})", ""},
      {"volume without source (defaults to emptyDir)",
       R"({"spec": {"volumes": [{"name": "log-volume"}]}})", ""},

      // Invalid: selector and namespaces.
      {"no selector", R"({"spec": {"selector": null}})", "spec.selector: Required value"},
      {"empty selector", R"({"spec": {"selector": {"matchLabels": null}}})",
       "empty selector is not valid"},
      {"bad selector value", R"({"spec": {"selector": {"matchExpressions": [
          {"key": "app", "operator": "NotIn", "values": ["app-risk-"]}]}}})",
       "spec.selector: Invalid value"},
      {"selector not an object", R"({"spec": {"selector": "app=nginx"}})", "label selector object"},
      {"namespace and namespaceSelector", R"({"spec": {"namespace": "default",
          "namespaceSelector": {"matchLabels": {"a": "b"}}}})",
       "mutually exclusive"},
      {"bad namespace", R"({"spec": {"namespace": "Not_A_Namespace"}})",
       "spec.namespace: Invalid value"},
      {"empty namespaceSelector", R"({"spec": {"namespaceSelector": {}}})",
       "spec.namespaceSelector: Invalid value: empty selector"},
      {"bad name", R"({"metadata": {"name": "bad.name"}})", "metadata.name: Invalid value"},
      {"no spec", R"({"spec": null})", "spec: Required value"},

      // Invalid: containers.
      {"no containers", R"({"spec": {"containers": null}})",
       "no initContainer or container defined"},
      {"empty container list", R"({"spec": {"containers": []}})", "no initContainer or container"},
      {"containers not a list", R"({"spec": {"containers": {"name": "c"}}})",
       "spec.containers: must be a list"},
      {"container without name", R"({"spec": {"containers": [{"image": "b:1"}]}})",
       "spec.containers[0].name: Required value"},
      {"container bad name", R"({"spec": {"containers": [{"name": "Side_Car", "image": "b:1"}]}})",
       "spec.containers[0].name: Invalid value"},
      {"init container without image", R"({"spec": {"initContainers": [{"name": "init"}]}})",
       "spec.initContainers[0].image: Required value"},
      {"duplicate container names", R"({"spec": {"containers": [{"name": "a", "image": "b:1"},
          {"name": "a", "image": "b:2"}]}})",
       "spec.containers[1].name: Duplicate value"},
      {"container clashes with init container", R"({"spec": {
          "initContainers": [{"name": "sidecar1", "image": "b:1"}]}})",
       "spec.containers[0].name: Duplicate value: \"sidecar1\""},
      {"bad podInjectPolicy", R"({"spec": {"containers": [{"name": "c", "image": "b:1",
          "podInjectPolicy": "Middle"}]}})",
       "spec.containers[0].podInjectPolicy: Unsupported value"},
      {"bad shareVolumePolicy", R"({"spec": {"containers": [{"name": "c", "image": "b:1",
          "shareVolumePolicy": {"type": "Enabled"}}]}})",
       "spec.containers[0].shareVolumePolicy.type: Unsupported value: \"Enabled\""},
      {"bad shareVolumeDevicePolicy", R"({"spec": {"containers": [{"name": "c", "image": "b:1",
          "shareVolumeDevicePolicy": {"type": "yes"}}]}})",
       "shareVolumeDevicePolicy.type: Unsupported"},
      {"bad upgradeType", R"({"spec": {"containers": [{"name": "c", "image": "b:1",
          "upgradeStrategy": {"upgradeType": "WarmUpgrade"}}]}})",
       "upgradeType: Unsupported value"},
      {"hot upgrade without empty image", R"({"spec": {"containers": [{"name": "c", "image": "b:1",
          "upgradeStrategy": {"upgradeType": "HotUpgrade"}}]}})",
       "hotUpgradeEmptyImage: Required value"},
      {"hot upgrade empty image equals image", R"({"spec": {"containers": [{"name": "c",
          "image": "b:1", "upgradeStrategy": {"upgradeType": "HotUpgrade",
          "hotUpgradeEmptyImage": "b:1"}}]}})",
       "must differ from the sidecar's image"},
      {"hot upgrade name too long",
       absl::StrCat(R"({"spec": {"containers": [{"name": ")", std::string(62, 'a'),
                    R"(", "image": "b:1", "upgradeStrategy": {"upgradeType": "HotUpgrade",
          "hotUpgradeEmptyImage": "e:1"}}]}})"),
       "at most 61 characters"},
      {"hot upgrade pair clashes", R"({"spec": {"containers": [{"name": "proxy", "image": "b:1",
          "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "e:1"}},
          {"name": "proxy-2", "image": "b:1"}]}})",
       "proxy-2 clashes with another container"},
      {"native sidecar with RollingUpdate", R"({"spec": {"initContainers": [{"name": "agent",
          "image": "b:1", "restartPolicy": "Always"}]}})",
       "spec.updateStrategy: Required value: spec.initContainers[0] has restartPolicy Always"},
      {"init restartPolicy OnFailure", R"({"spec": {"initContainers": [{"name": "i",
          "image": "b:1", "restartPolicy": "OnFailure"}]}})",
       "spec.initContainers[0].restartPolicy: Unsupported value"},
      {"bad container port", R"({"spec": {"containers": [{"name": "c", "image": "b:1",
          "ports": [{"containerPort": 70000}]}]}})",
       "spec.containers[0].ports[0].containerPort"},
      {"mount of an unknown volume", R"({"spec": {"containers": [{"name": "c", "image": "b:1",
          "volumeMounts": [{"name": "nope", "mountPath": "/x"}]}]}})",
       "spec.containers[0].volumeMounts[0].name: Not found: \"nope\""},
      {"mount without path", R"({"spec": {"containers": [{"name": "c", "image": "b:1",
          "volumeMounts": [{"name": "log-volume"}]}]}})",
       "volumeMounts[0].mountPath: Required value"},
      {"device of an unknown volume", R"({"spec": {"containers": [{"name": "c", "image": "b:1",
          "volumeDevices": [{"name": "disk0", "devicePath": "/dev/nvme1"}]}]}})",
       "volumeDevices[0].name: Not found"},
      {"device path used by a mount", R"({"spec": {"containers": [{"name": "c", "image": "b:1",
          "volumeMounts": [{"name": "log-volume", "mountPath": "/home/admin/log"}],
          "volumeDevices": [{"name": "log-volume", "devicePath": "/home/admin/log"}]}]}})",
       "devicePath is already used"},

      // Invalid: transferEnv.
      {"transferEnv without source", R"({"spec": {"containers": [{"name": "c", "image": "b:1",
          "transferEnv": [{"envName": "TZ"}]}]}})",
       "transferEnv[0]: Required value: sourceContainerName or sourceContainerNameFrom.fieldRef"},
      {"transferEnv without env", R"({"spec": {"containers": [{"name": "c", "image": "b:1",
          "transferEnv": [{"sourceContainerName": "main"}]}]}})",
       "Required value: envName or envNames"},
      {"transferEnv bad env name", R"({"spec": {"containers": [{"name": "c", "image": "b:1",
          "transferEnv": [{"sourceContainerName": "main", "envName": "1TZ"}]}]}})",
       "transferEnv[0].envName: Invalid value"},
      {"transferEnv bad fieldPath", R"({"spec": {"containers": [{"name": "c", "image": "b:1",
          "transferEnv": [{"sourceContainerNameFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
          "envName": "X"}]}]}})",
       "fieldRef.fieldPath: Unsupported value: \"spec.nodeName\""},
      {"transferEnv bad label key", R"({"spec": {"containers": [{"name": "c", "image": "b:1",
          "transferEnv": [{"sourceContainerNameFrom": {"fieldRef": {
          "fieldPath": "metadata.labels['-bad-']"}}, "envName": "X"}]}]}})",
       "fieldRef.fieldPath: Invalid value: \"metadata.labels['-bad-']\""},
      {"transferEnv bad apiVersion", R"({"spec": {"containers": [{"name": "c", "image": "b:1",
          "transferEnv": [{"sourceContainerNameFrom": {"fieldRef": {"apiVersion": "v2",
          "fieldPath": "metadata.name"}}, "envName": "X"}]}]}})",
       "fieldRef.apiVersion: Unsupported"},
      {"transferEnv not a list", R"({"spec": {"containers": [{"name": "c", "image": "b:1",
          "transferEnv": {"envName": "X"}}]}})",
       "spec.containers[0].transferEnv: must be a list"},

      // Invalid: resourcesPolicy.
      {"resourcesPolicy and resources", R"({"spec": {"containers": [{"name": "c", "image": "b:1",
          "resources": {"limits": {"cpu": "100m"}}, "resourcesPolicy": {"targetContainersMode": "sum",
          "resourcesExpr": {"limits": {"cpu": "cpu*50%"}}}}]}})",
       "cannot be used together"},
      {"resourcesPolicy bad mode", R"({"spec": {"containers": [{"name": "c", "image": "b:1",
          "resourcesPolicy": {"targetContainersMode": "invalid",
          "resourcesExpr": {"limits": {"cpu": "cpu*50%"}}}}]}})",
       "resourcesPolicy.targetContainersMode: Unsupported value"},
      {"resourcesPolicy without expressions", R"({"spec": {"containers": [{"name": "c",
          "image": "b:1", "resourcesPolicy": {"targetContainersMode": "max"}}]}})",
       "resourcesExpr: Required value"},

      // Invalid: volumes.
      {"duplicate volumes", R"({"spec": {"volumes": [{"name": "log-volume", "emptyDir": {}},
          {"name": "log-volume", "emptyDir": {}}]}})",
       "spec.volumes[1].name: Duplicate value"},
      {"volume with two sources", R"({"spec": {"volumes": [{"name": "log-volume", "emptyDir": {},
          "hostPath": {"path": "/x"}}]}})",
       "more than 1 volume type"},
      {"volume without name", R"({"spec": {"volumes": [{"emptyDir": {}}]}})",
       "spec.volumes[0].name: Required value"},

      // Invalid: updateStrategy.
      {"bad strategy type", R"({"spec": {"updateStrategy": {"type": "OnDelete"}}})",
       "spec.updateStrategy.type: Unsupported value: \"OnDelete\""},
      {"negative partition", R"({"spec": {"updateStrategy": {"partition": -1}}})",
       "spec.updateStrategy.partition: Invalid value: -1"},
      {"partition over 100%", R"({"spec": {"updateStrategy": {"partition": "150%"}}})",
       "between 0% and 100%"},
      {"maxUnavailable not a percentage",
       R"({"spec": {"updateStrategy": {"maxUnavailable": "five"}}})",
       "spec.updateStrategy.maxUnavailable: Invalid value: \"five\""},
      {"maxUnavailable float", R"({"spec": {"updateStrategy": {"maxUnavailable": 1.5}}})",
       "maxUnavailable: Invalid value: 1.5"},
      {"partition with selector", R"({"spec": {"updateStrategy": {"partition": 2,
          "selector": {"matchLabels": {"canary": "true"}}}}})",
       "partition and selector cannot be used together"},
      {"empty strategy selector", R"({"spec": {"updateStrategy": {"selector": {}}}})",
       "spec.updateStrategy.selector: Invalid value: empty selector"},
      {"duplicate scatter terms", R"({"spec": {"updateStrategy": {"scatterStrategy": [
          {"key": "key-1", "value": "value-1"}, {"key": "key-1", "value": "value-1"}]}}})",
       "scatterStrategy[1]: Duplicate value"},
      {"both priority kinds", R"({"spec": {"updateStrategy": {"priorityStrategy": {
          "weightPriority": [{"weight": 1, "matchSelector": {"matchLabels": {"a": "b"}}}],
          "orderPriority": [{"orderedKey": "k"}]}}}})",
       "only one of weightPriority and orderPriority"},
      {"priority weight out of range", R"({"spec": {"updateStrategy": {"priorityStrategy": {
          "weightPriority": [{"weight": 101, "matchSelector": {"matchLabels": {"a": "b"}}}]}}}})",
       "weightPriority[0].weight: Invalid value"},
      {"paused not a boolean", R"({"spec": {"updateStrategy": {"paused": "yes"}}})",
       "spec.updateStrategy.paused: Invalid value: must be a boolean"},

      // Invalid: injectionStrategy.
      {"revision without name or version", R"({"spec": {"injectionStrategy": {"revision": {
          "policy": "Always"}}}})",
       "revisionName and customVersion cannot be empty simultaneously"},
      {"revision bad policy", R"({"spec": {"injectionStrategy": {"revision": {
          "customVersion": "v1", "policy": "Sometimes"}}}})",
       "spec.injectionStrategy.revision.policy: Unsupported value: \"Sometimes\""},
      {"revision empty name",
       R"({"spec": {"injectionStrategy": {"revision": {"revisionName": ""}}}})",
       "revision.revisionName: Invalid value: \"\""},

      // Invalid: the rest.
      {"negative revisionHistoryLimit", R"({"spec": {"revisionHistoryLimit": -1}})",
       "spec.revisionHistoryLimit: Invalid value"},
      {"pull secret without name", R"({"spec": {"imagePullSecrets": [{}]}})",
       "spec.imagePullSecrets[0].name: Required value"},
      {"customVersion not a string", R"({"spec": {"customVersion": 2}})",
       "spec.customVersion: must be"},
      {"patch without annotations",
       R"({"spec": {"patchPodMetadata": [{"patchPolicy": "Retain"}]}})", "no annotations defined"},
      {"patch same key twice", R"({"spec": {"patchPodMetadata": [
          {"annotations": {"key1": "value1"}, "patchPolicy": "MergePatchJson"},
          {"annotations": {"key1": "value1"}, "patchPolicy": "Overwrite"}]}})",
       "Duplicate value: annotation \"key1\" is already patched by spec.patchPodMetadata[0]"},
      {"patch bad policy", R"({"spec": {"patchPodMetadata": [{"annotations": {"k": "v"},
          "patchPolicy": "Replace"}]}})",
       "patchPolicy: Unsupported value: \"Replace\""},
      {"patch bad annotation key", R"({"spec": {"patchPodMetadata": [
          {"annotations": {"bad key": "v"}}]}})",
       "annotations[bad key]: Invalid value"},
      {"MergePatchJson value not an object", R"({"spec": {"patchPodMetadata": [
          {"annotations": {"k": "not json"}, "patchPolicy": "MergePatchJson"}]}})",
       "a MergePatchJson value must be a JSON object"},
  };
}

TEST(SidecarSetAdmissionTest, ValidationTable) {
  int valid = 0, invalid = 0;
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    Json ss = With(c.patch);
    const std::string problems = Problems(ss);
    absl::Status st = ValidateSidecarSet(ss, nullptr);
    if (std::string(c.expected).empty()) {
      ++valid;
      EXPECT_THAT(problems, IsEmpty());
      EXPECT_TRUE(st.ok()) << st;
      // Also valid once defaulted (what the API server stores after the mutating webhook).
      EXPECT_THAT(Problems(DefaultSidecarSet(ss)), IsEmpty());
    } else {
      ++invalid;
      EXPECT_THAT(problems, HasSubstr(c.expected));
      EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(std::string(st.message()), HasSubstr(c.expected));
      // Defaulting never turns an invalid object valid (absent fields read as their defaults).
      EXPECT_THAT(Problems(DefaultSidecarSet(ss)), HasSubstr(c.expected));
    }
  }
  EXPECT_GE(valid, 15);
  EXPECT_GE(invalid, 60);
}

TEST(SidecarSetAdmissionTest, ReportsEveryProblem) {
  Json ss = With(R"({"spec": {"selector": null, "updateStrategy": {"partition": -1},
      "containers": [{"name": "c"}], "volumes": [{"name": "v"}, {"name": "v"}]}})");
  std::vector<std::string> problems = SidecarSetProblems(ss, nullptr);
  EXPECT_EQ(problems.size(), 4u) << absl::StrJoin(problems, "\n");
}

// ---- UPDATE ----------------------------------------------------------------------------------

TEST(SidecarSetAdmissionTest, UpgradeTypeIsImmutable) {
  Json old = DefaultSidecarSet(Valid());
  Json hot = With(R"({"spec": {"containers": [{"name": "sidecar1", "image": "centos:6.8",
      "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty:1"}}]}})");
  EXPECT_THAT(Problems(hot, &old),
              HasSubstr("spec.containers[0].upgradeStrategy.upgradeType: Invalid value: "
                        "\"HotUpgrade\": container sidecar1 upgradeType is immutable"));
  // The same change without a stored upgradeType (written before the webhook) is allowed, as in
  // OpenKruise.
  Json bare = Valid();
  EXPECT_THAT(Problems(hot, &bare), IsEmpty());
}

TEST(SidecarSetAdmissionTest, UpdatesAllowedOtherwise) {
  Json old = DefaultSidecarSet(Valid());
  // New image, a new container, a new selector, a removed volume mount: all fine.
  Json now = With(R"({"spec": {"selector": {"matchLabels": {"app": "web"}},
      "containers": [{"name": "sidecar1", "image": "centos:7"},
                     {"name": "sidecar2", "image": "busybox:1.35",
                      "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "e:1"}}]}})");
  EXPECT_THAT(Problems(now, &old), IsEmpty());
  EXPECT_THAT(Problems(DefaultSidecarSet(now), &old), IsEmpty());
  // An unchanged object is valid against itself; a garbage old object is tolerated.
  EXPECT_THAT(Problems(old, &old), IsEmpty());
  Json garbage = Json::parse(R"({"spec": {"containers": [1, {"name": 2}, {"name": "sidecar1",
      "upgradeStrategy": 7}]}})");
  EXPECT_THAT(Problems(old, &garbage), IsEmpty());
}

// ---- Properties -------------------------------------------------------------------------------

TEST(SidecarSetAdmissionTest, DefaultingIsIdempotentAndSurvivesSerialisation) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    Json once = DefaultSidecarSet(With(c.patch));
    EXPECT_EQ(DefaultSidecarSet(once), once);
    // What the API server stores and hands back: the same JSON.
    EXPECT_EQ(Json::parse(once.dump()), once);
  }
}

TEST(SidecarSetAdmissionTest, DefaultingOnlyAdds) {
  // Every member of the input is still there, with its value, unless it was null (unset) or an
  // empty string the defaults fill: the merge of the input into its defaulted form is a no-op.
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    Json in = With(c.patch);
    Json out = DefaultSidecarSet(in);
    Json merged = out;
    merged.merge_patch(in);
    // merge_patch removes members that are null in `in`; put back what the defaults set there.
    Json again = DefaultSidecarSet(merged);
    EXPECT_EQ(again, out);
  }
}

TEST(SidecarSetAdmissionTest, VersionDoesNotMatter) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    Json a = With(c.patch);
    Json b = a;
    b["apiVersion"] = "apps.kruise.io/v1beta1";
    EXPECT_EQ(SidecarSetProblems(a, nullptr), SidecarSetProblems(b, nullptr));
    Json da = DefaultSidecarSet(a);
    Json db = DefaultSidecarSet(b);
    db["apiVersion"] = a["apiVersion"];
    EXPECT_EQ(da, db);
  }
}

// ---- Any JSON ---------------------------------------------------------------------------------

TEST(SidecarSetAdmissionTest, NonObjectsAreNotDefaultedAndAreInvalid) {
  for (const char* text : {"null", "1", "\"s\"", "[]", "[{}]", "true", "{}", R"({"spec": 5})",
                           R"({"spec": []})", R"({"metadata": 1, "spec": {}})"}) {
    SCOPED_TRACE(text);
    Json j = Json::parse(text);
    Json d = DefaultSidecarSet(j);
    if (!j.is_object()) {
      EXPECT_EQ(d, j);
    }
    EXPECT_FALSE(ValidateSidecarSet(j, nullptr).ok());
    EXPECT_FALSE(ValidateSidecarSet(j, &j).ok());
  }
}

// Random JSON values in every position of a realistic object: no exception, no crash.
Json RandomValue(std::mt19937* rng, int depth) {
  std::uniform_int_distribution<int> kind(0, depth > 2 ? 5 : 7);
  switch (kind(*rng)) {
    case 0:
      return nullptr;
    case 1:
      return static_cast<int>((*rng)() % 200) - 100;
    case 2:
      return 1.5;
    case 3:
      return (*rng)() % 2 == 0;
    case 4:
      return std::string((*rng)() % 3 == 0 ? "" : "x\xff\xfe%");  // invalid UTF-8 too
    case 5:
      return "50%";
    case 6: {
      Json a = Json::array();
      for (int i = 0; i < 2; ++i) a.push_back(RandomValue(rng, depth + 1));
      return a;
    }
    default: {
      Json o = Json::object();
      for (const char* k : {"name", "type", "image", "matchLabels", "fieldRef", "annotations"}) {
        if ((*rng)() % 3 == 0) o[k] = RandomValue(rng, depth + 1);
      }
      return o;
    }
  }
}

void Mutate(Json* node, std::mt19937* rng, int depth) {
  if (node->is_object()) {
    for (auto it = node->begin(); it != node->end(); ++it) {
      if ((*rng)() % 4 == 0) {
        *it = RandomValue(rng, depth);
      } else {
        Mutate(&*it, rng, depth + 1);
      }
    }
  } else if (node->is_array()) {
    for (Json& e : *node) Mutate(&e, rng, depth + 1);
  }
}

TEST(SidecarSetAdmissionTest, AnyJsonIsSafe) {
  std::mt19937 rng(15);
  const Json rich = DefaultSidecarSet(Json::parse(R"({
    "apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "metadata": {"name": "s"},
    "spec": {
      "selector": {"matchLabels": {"app": "x"}}, "namespaceSelector": {"matchLabels": {"a": "b"}},
      "updateStrategy": {"partition": "10%", "selector": {"matchLabels": {"c": "d"}},
        "priorityStrategy": {"weightPriority": [{"weight": 1, "matchSelector": {"matchLabels": {"a": "b"}}}]},
        "scatterStrategy": [{"key": "k", "value": "v"}]},
      "injectionStrategy": {"revision": {"customVersion": "v1"}},
      "patchPodMetadata": [{"annotations": {"k": "{}"}, "patchPolicy": "MergePatchJson"}],
      "imagePullSecrets": [{"name": "s"}],
      "initContainers": [{"name": "i", "image": "b", "restartPolicy": "Always"}],
      "containers": [{"name": "c", "image": "b:1", "ports": [{"containerPort": 1}],
        "env": [{"name": "E", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "livenessProbe": {"httpGet": {"port": 1}}, "lifecycle": {"preStop": {"httpGet": {"port": 1}}},
        "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "e"},
        "transferEnv": [{"sourceContainerNameFrom": {"fieldRef": {"fieldPath": "metadata.labels['a']"}},
                         "envNames": ["A"]}],
        "resourcesPolicy": {"targetContainersMode": "sum", "resourcesExpr": {"limits": {"cpu": "cpu"}}},
        "volumeMounts": [{"name": "v", "mountPath": "/v"}],
        "volumeDevices": [{"name": "v", "devicePath": "/d"}]}],
      "volumes": [{"name": "v", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}]
    }})"));
  for (int i = 0; i < 3000; ++i) {
    Json j = rich;
    Mutate(&j, &rng, 0);
    Json old = rich;
    Mutate(&old, &rng, 0);
    Json d;
    EXPECT_NO_THROW(d = DefaultSidecarSet(j));
    EXPECT_NO_THROW(SidecarSetProblems(j, nullptr));
    EXPECT_NO_THROW(SidecarSetProblems(d, &old));
    EXPECT_NO_THROW(ValidateSidecarSet(j, &old).ok());
    // Defaulting stays idempotent on garbage too.
    EXPECT_EQ(DefaultSidecarSet(d), d);
  }
}

// ---- Conflicts with other SidecarSets ---------------------------------------------------------

namespace conflicts {

// A set named `name` selecting `selector`, with `extra` merged into its spec.
Json Set(const std::string& name, const std::string& selector, const std::string& extra = "{}") {
  Json ss = Json::parse(absl::StrCat(R"({"apiVersion": "apps.kruise.io/v1alpha1",
      "kind": "SidecarSet", "metadata": {"name": ")",
                                     name, R"("}, "spec": {"selector": )", selector, "}}"));
  ss["spec"].merge_patch(Json::parse(extra));
  return ss;
}

constexpr char kAB[] = R"({"matchLabels": {"a": "b"}})";
constexpr char kNames[] = R"({"containers": [{"name": "container-name", "image": "b:1"}],
    "initContainers": [{"name": "init-name", "image": "b:1"}],
    "volumes": [{"name": "volume-name", "emptyDir": {}}]})";

TEST(SidecarSetConflictsTest, ContainerAndInitContainerNamesOfOverlappingSets) {
  // OpenKruise's TestSidecarSetNameConflict "test1": same selector, same names, equal volumes.
  Json mine = Set("sidecarset2", kAB, kNames);
  std::vector<Json> others = {Set("sidecarset1", kAB, kNames)};
  std::vector<std::string> got = SidecarSetConflicts(mine, others);
  EXPECT_EQ(got.size(), 2u) << absl::StrJoin(got, "\n");
  EXPECT_THAT(absl::StrJoin(got, "\n"),
              HasSubstr("spec.containers[0].name: Invalid value: \"container-name\": container "
                        "container-name already exists in sidecarset sidecarset1"));
  EXPECT_THAT(absl::StrJoin(got, "\n"), HasSubstr("spec.initContainers[0].name"));
  // The set itself (an UPDATE lists it too) is not a conflict.
  EXPECT_THAT(SidecarSetConflicts(mine, {mine}), IsEmpty());
  // An init container name used by the other set's containers is not one either (as OpenKruise).
  Json init_only =
      Set("s3", kAB, R"({"initContainers": [{"name": "container-name", "image": "b"}]})");
  EXPECT_THAT(SidecarSetConflicts(init_only, others), IsEmpty());
}

TEST(SidecarSetConflictsTest, VolumesConflictOnlyWhenDifferent) {
  Json mine = Set("a", kAB, R"({"volumes": [{"name": "v", "emptyDir": {}}]})");
  EXPECT_THAT(SidecarSetConflicts(mine, {Set("b", kAB, R"({"volumes": [{"name": "v",
      "emptyDir": {}}]})")}),
              IsEmpty());
  std::vector<std::string> got = SidecarSetConflicts(
      mine, {Set("b", kAB, R"({"volumes": [{"name": "v", "hostPath": {"path": "/x"}}]})")});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_THAT(got[0], HasSubstr("spec.volumes[0].name: Invalid value: \"v\": volume v is in "
                                "conflict with sidecarset b"));
}

TEST(SidecarSetConflictsTest, Namespaces) {
  // OpenKruise's "test2" and "test3": equal namespaceSelectors conflict, disjoint ones do not.
  Json mine = Set("s2", kAB, R"({"namespaceSelector": {"matchLabels": {"app": "nginx"}},
      "containers": [{"name": "container-name", "image": "b"}]})");
  EXPECT_EQ(SidecarSetConflicts(mine, {Set("s1", kAB, R"({"namespaceSelector": {"matchLabels":
      {"app": "nginx"}}, "containers": [{"name": "container-name", "image": "b"}]})")})
                .size(),
            1u);
  EXPECT_THAT(SidecarSetConflicts(mine, {Set("s1", kAB, R"({"namespaceSelector": {"matchLabels":
      {"app": "redis"}}, "containers": [{"name": "container-name", "image": "b"}]})")}),
              IsEmpty());
  // Different namespaces never overlap; a namespace and a selector do unless its labels say no.
  Json in_default = Set("n1", kAB, R"({"namespace": "default",
      "containers": [{"name": "container-name", "image": "b"}]})");
  EXPECT_THAT(SidecarSetConflicts(in_default, {Set("n2", kAB, R"({"namespace": "other",
      "containers": [{"name": "container-name", "image": "b"}]})")}),
              IsEmpty());
  const Json prod_only = Set("n3", kAB, R"({"namespaceSelector": {"matchLabels": {"env": "prod"}},
      "containers": [{"name": "container-name", "image": "b"}]})");
  EXPECT_EQ(SidecarSetConflicts(in_default, {prod_only}).size(), 1u);  // labels unknown
  NamespaceLabelsFn labels =
      [](const std::string& ns) -> std::optional<std::map<std::string, std::string>> {
    if (ns == "default") return std::map<std::string, std::string>{{"env", "dev"}};
    return std::nullopt;
  };
  EXPECT_THAT(SidecarSetConflicts(in_default, {prod_only}, labels), IsEmpty());
  EXPECT_THAT(SidecarSetConflicts(prod_only, {in_default}, labels), IsEmpty());
}

TEST(SidecarSetConflictsTest, PatchedAnnotations) {
  auto patch = [](const char* policy) {
    return absl::StrCat(
        R"({"patchPodMetadata": [{"annotations": {"oom-score": "{}"}, "patchPolicy": ")", policy,
        R"("}]})");
  };
  Json overwrite = Set("a", kAB, patch("Overwrite"));
  Json merge = Set("b", kAB, patch("MergePatchJson"));
  Json retain = Set("c", kAB, patch("Retain"));
  EXPECT_THAT(absl::StrJoin(SidecarSetConflicts(overwrite, {merge}), ""),
              HasSubstr("spec.patchPodMetadata[0].annotations[oom-score]: Invalid value: "
                        "annotation oom-score is in conflict with sidecarset b"));
  EXPECT_EQ(SidecarSetConflicts(merge, {overwrite}).size(), 1u);
  EXPECT_THAT(SidecarSetConflicts(merge, {Set("d", kAB, patch("MergePatchJson"))}), IsEmpty());
  EXPECT_THAT(SidecarSetConflicts(retain, {overwrite}), IsEmpty());
  EXPECT_THAT(SidecarSetConflicts(overwrite, {retain}), IsEmpty());
}

TEST(SidecarSetConflictsTest, SelectorOverlapAsOpenKruise) {
  struct {
    const char* a;
    const char* b;
    bool overlap;
  } cases[] = {
      // OpenKruise's TestSelectorConflict cases.
      {R"({"matchLabels": {"a": "h"}})", R"({"matchLabels": {"a": "h"}})", true},
      {R"({"matchLabels": {"a": "h"}})", R"({"matchLabels": {"a": "i"}})", false},
      {R"({"matchLabels": {"a": "h"}})", R"({"matchLabels": {"b": "i"}})", true},
      {R"({"matchLabels": {"a": "h", "b": "i", "c": "j"}})",
       R"({"matchLabels": {"a": "h", "b": "x", "c": "j"}})", false},
      {R"({"matchLabels": {"a": "h"}})",
       R"({"matchExpressions": [{"key": "a", "operator": "In", "values": ["h", "i", "j"]}]})",
       true},
      {R"({"matchLabels": {"a": "h"}})",
       R"({"matchExpressions": [{"key": "a", "operator": "In", "values": ["i", "j"]}]})", false},
      {R"({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["h", "i"]}]})",
       R"({"matchLabels": {"a": "h"}})", false},
      {R"({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["h"]}]})",
       R"({"matchExpressions": [{"key": "a", "operator": "In", "values": ["h", "i"]}]})", true},
      {R"({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]})",
       R"({"matchLabels": {"a": "h"}})", false},
      {R"({"matchExpressions": [{"key": "a", "operator": "Exists"}]})",
       R"({"matchLabels": {"a": "h"}})", true},
      // OpenKruise's approximation: a key required by one and not mentioned by the other.
      {R"({"matchLabels": {"a": "h"}})",
       R"({"matchExpressions": [{"key": "c", "operator": "Exists"}]})", false},
      {R"({"matchLabels": {"a": "h"}})", "null", false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.a, " / ", c.b));
    EXPECT_EQ(SelectorsMayOverlap(Json::parse(c.a), Json::parse(c.b)), c.overlap);
    EXPECT_EQ(SelectorsMayOverlap(Json::parse(c.b), Json::parse(c.a)), c.overlap);  // symmetric
  }
}

TEST(SidecarSetConflictsTest, MalformedSetsAreSkipped) {
  Json mine = Set("a", kAB, kNames);
  std::vector<Json> others = {Json(), Json(1), Json::parse(R"({"spec": 2})"),
                              Json::parse(R"({"metadata": {"name": "x"}, "spec": {"selector": 3,
                                  "containers": [{"name": "container-name"}]}})"),
                              Json::parse(R"({"metadata": {"name": "y"}, "spec": {
                                  "selector": {"matchLabels": {"a": "b"}}, "containers": 5,
                                  "volumes": [1, {"name": 2}], "patchPodMetadata": {"x": 1}}})")};
  EXPECT_THAT(SidecarSetConflicts(mine, others), IsEmpty());
  EXPECT_THAT(SidecarSetConflicts(Json("garbage"), others), IsEmpty());
}

}  // namespace conflicts

}  // namespace
}  // namespace kruise::manager::sidecarset
