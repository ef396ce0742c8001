#include "manager/cloneset/cloneset_admission.h"
#include "manager/workload/workload_admission.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kruise::manager::cloneset {
// Named, not anonymous: this file shares a unity-build unit with cloneset_plan_test.cc.
namespace admission_test {

using kube::Json;
using ::testing::HasSubstr;
using workload::DefaultPodSpec;
using workload::ShouldInjectTemplateDefaults;

// A valid CloneSet: selector app=web, one container.
Json Valid() {
  return Json::parse(R"({
    "apiVersion": "apps.kruise.io/v1alpha1", "kind": "CloneSet",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {
      "replicas": 3,
      "selector": {"matchLabels": {"app": "web"}},
      "template": {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.35"}]}
      }
    }
  })");
}

// Valid() with the JSON merge patch `patch` applied (null removes a member).
Json With(const std::string& patch) {
  Json cs = Valid();
  cs.merge_patch(Json::parse(patch));
  return cs;
}

// ---- Defaults -----------------------------------------------------------------------------------

TEST(CloneSetAdmissionTest, DefaultsSpecAndStrategy) {
  Json cs = With(R"({"spec": {"replicas": null}})");
  Json d = DefaultCloneSet(cs);
  const Json& spec = d["spec"];
  EXPECT_EQ(spec["replicas"], 1);
  EXPECT_EQ(spec["revisionHistoryLimit"], 10);
  EXPECT_EQ(spec["scaleStrategy"], Json::object());
  EXPECT_EQ(spec["updateStrategy"]["type"], "ReCreate");
  EXPECT_EQ(spec["updateStrategy"]["partition"], 0);
  EXPECT_EQ(spec["updateStrategy"]["maxUnavailable"], "20%");
  EXPECT_EQ(spec["updateStrategy"]["maxSurge"], 0);
  EXPECT_FALSE(spec["updateStrategy"].contains("inPlaceUpdateStrategy"));  // only in-place types
  EXPECT_EQ(d["metadata"], cs["metadata"]);
  EXPECT_EQ(spec["selector"], cs["spec"]["selector"]);
}

TEST(CloneSetAdmissionTest, DefaultsKeepUserValues) {
  Json cs = With(R"({"spec": {
      "replicas": 0, "revisionHistoryLimit": 0, "minReadySeconds": 5,
      "scaleStrategy": {"podsToDelete": ["web-abcde"]},
      "updateStrategy": {"type": "InPlaceIfPossible", "partition": "50%", "maxUnavailable": 0,
                         "maxSurge": "10%", "inPlaceUpdateStrategy": {"gracePeriodSeconds": 10}},
      "template": {"spec": {"restartPolicy": "Always", "dnsPolicy": "Default",
                            "terminationGracePeriodSeconds": 0, "schedulerName": "mine",
                            "securityContext": {"runAsUser": 1000},
                            "containers": [{"name": "main", "image": "busybox:1.35",
                                            "imagePullPolicy": "Never",
                                            "terminationMessagePath": "/tmp/log",
                                            "terminationMessagePolicy": "FallbackToLogsOnError",
                                            "ports": [{"containerPort": 80, "protocol": "UDP"}]}]}}}})");
  Json d = DefaultCloneSet(cs);
  EXPECT_EQ(d, cs) << d.dump(2);
}

TEST(CloneSetAdmissionTest, InPlaceTypesGetAnInPlaceUpdateStrategy) {
  for (const char* type : {"InPlaceIfPossible", "InPlaceOnly"}) {
    Json d = DefaultCloneSet(
        With(absl::StrCat(R"({"spec": {"updateStrategy": {"type": ")", type, R"("}}})")));
    EXPECT_EQ(d["spec"]["updateStrategy"]["inPlaceUpdateStrategy"], Json::object()) << type;
    EXPECT_EQ(d["spec"]["updateStrategy"]["type"], type);
  }
  // An empty type reads as unset, as in Go.
  Json d = DefaultCloneSet(With(R"({"spec": {"updateStrategy": {"type": ""}}})"));
  EXPECT_EQ(d["spec"]["updateStrategy"]["type"], "ReCreate");
}

TEST(CloneSetAdmissionTest, PodTemplateDefaults) {
  Json cs = With(R"({"spec": {"template": {"spec": {
      "volumes": [{"name": "scratch"}, {"name": "host", "hostPath": {"path": "/x"}},
                  {"name": "cfg", "configMap": {"name": "c"}},
                  {"name": "sec", "secret": {"secretName": "s"}},
                  {"name": "info", "downwardAPI": {"items": [{"path": "l",
                      "fieldRef": {"fieldPath": "metadata.labels"}}]}},
                  {"name": "proj", "projected": {"sources": [
                      {"serviceAccountToken": {"path": "t"}},
                      {"downwardAPI": {"items": [{"path": "n",
                          "fieldRef": {"fieldPath": "metadata.name"}}]}}]}}],
      "initContainers": [{"name": "init", "image": "busybox:1.35"},
                         {"name": "init2", "image": "busybox"}],
      "containers": [{"name": "main", "image": "busybox:1.35",
                      "ports": [{"containerPort": 8080}],
                      "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                      "livenessProbe": {"httpGet": {"port": 8080}},
                      "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 5},
                      "startupProbe": {"tcpSocket": {"port": 8080}},
                      "lifecycle": {"preStop": {"httpGet": {"port": 8080, "path": "/stop"}}}}]}}}})");
  Json d = DefaultCloneSet(cs);
  const Json& ps = d["spec"]["template"]["spec"];
  EXPECT_EQ(ps["restartPolicy"], "Always");
  EXPECT_EQ(ps["terminationGracePeriodSeconds"], 30);
  EXPECT_EQ(ps["dnsPolicy"], "ClusterFirst");
  EXPECT_EQ(ps["securityContext"], Json::object());
  EXPECT_EQ(ps["schedulerName"], "default-scheduler");

  const Json& c = ps["containers"][0];
  EXPECT_EQ(c["imagePullPolicy"], "Always");  // OpenKruise: Always for containers
  EXPECT_EQ(c["terminationMessagePath"], "/dev/termination-log");
  EXPECT_EQ(c["terminationMessagePolicy"], "File");
  EXPECT_EQ(c["ports"][0]["protocol"], "TCP");
  EXPECT_FALSE(c["ports"][0].contains("hostPort"));  // no hostNetwork
  EXPECT_EQ(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
  EXPECT_EQ(c["livenessProbe"], Json::parse(R"({"httpGet": {"port": 8080, "path": "/",
      "scheme": "HTTP"}, "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1,
      "failureThreshold": 3})"));
  EXPECT_EQ(c["readinessProbe"]["periodSeconds"], 5);
  EXPECT_EQ(c["readinessProbe"]["timeoutSeconds"], 1);
  EXPECT_EQ(c["startupProbe"]["failureThreshold"], 3);
  EXPECT_EQ(c["lifecycle"]["preStop"]["httpGet"]["path"], "/stop");
  EXPECT_EQ(c["lifecycle"]["preStop"]["httpGet"]["scheme"], "HTTP");

  // Init containers follow Kubernetes' rule: a tag other than latest -> IfNotPresent.
  EXPECT_EQ(ps["initContainers"][0]["imagePullPolicy"], "IfNotPresent");
  EXPECT_EQ(ps["initContainers"][1]["imagePullPolicy"], "Always");  // no tag = latest
  EXPECT_EQ(ps["initContainers"][0]["terminationMessagePath"], "/dev/termination-log");

  const Json& v = ps["volumes"];
  EXPECT_EQ(v[0], Json::parse(R"({"name": "scratch", "emptyDir": {}})"));
  EXPECT_EQ(v[1]["hostPath"]["type"], "");
  EXPECT_EQ(v[2]["configMap"]["defaultMode"], 420);
  EXPECT_EQ(v[3]["secret"]["defaultMode"], 420);
  EXPECT_EQ(v[4]["downwardAPI"]["defaultMode"], 420);
  EXPECT_EQ(v[4]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"], "v1");
  EXPECT_EQ(v[5]["projected"]["defaultMode"], 420);
  EXPECT_EQ(v[5]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"], 3600);
  EXPECT_EQ(v[5]["projected"]["sources"][1]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"],
            "v1");
}

TEST(CloneSetAdmissionTest, InitContainerPullPolicyFollowsTheTag) {
  struct Case {
    const char* image;
    const char* policy;
  };
  const std::string digest = "sha256:" + std::string(64, 'a');
  const std::vector<Case> cases = {
      {"busybox", "Always"},
      {"busybox:latest", "Always"},
      {"127.0.0.1:16408/busybox", "Always"},  // the port is not a tag
      {"127.0.0.1:16408/busybox:1.35", "IfNotPresent"},
      {"busybox:1.35", "IfNotPresent"},
  };
  for (const Case& c : cases) {
    Json d = DefaultCloneSet(With(absl::StrCat(
        R"({"spec": {"template": {"spec": {"initContainers": [{"name": "i", "image": ")", c.image,
        R"("}]}}}})")));
    EXPECT_EQ(d["spec"]["template"]["spec"]["initContainers"][0]["imagePullPolicy"], c.policy)
        << c.image;
  }
  Json d = DefaultCloneSet(With(absl::StrCat(
      R"({"spec": {"template": {"spec": {"initContainers": [{"name": "i", "image": "busybox@)",
      digest, R"("}]}}}})")));
  EXPECT_EQ(d["spec"]["template"]["spec"]["initContainers"][0]["imagePullPolicy"], "IfNotPresent");
}

TEST(CloneSetAdmissionTest, HostNetworkPortsGetHostPorts) {
  Json d = DefaultCloneSet(With(R"({"spec": {"template": {"spec": {"hostNetwork": true,
      "containers": [{"name": "main", "image": "busybox:1.35",
                      "ports": [{"containerPort": 8080}, {"containerPort": 9090, "hostPort": 9091}]}]}}}})"));
  const Json& ports = d["spec"]["template"]["spec"]["containers"][0]["ports"];
  EXPECT_EQ(ports[0]["hostPort"], 8080);
  EXPECT_EQ(ports[1]["hostPort"], 9091);
}

TEST(CloneSetAdmissionTest, VolumeClaimTemplatesGetFilesystemMode) {
  Json d = DefaultCloneSet(With(R"({"spec": {"volumeClaimTemplates": [
      {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}},
      {"metadata": {"name": "raw"}, "spec": {"volumeMode": "Block"}}]}})"));
  EXPECT_EQ(d["spec"]["volumeClaimTemplates"][0]["spec"]["volumeMode"], "Filesystem");
  EXPECT_EQ(d["spec"]["volumeClaimTemplates"][1]["spec"]["volumeMode"], "Block");
}

TEST(CloneSetAdmissionTest, TemplateDefaultsOnlyWhenAsked) {
  Json d = DefaultCloneSet(Valid(), /*inject_template_defaults=*/false);
  EXPECT_EQ(d["spec"]["template"], Valid()["spec"]["template"]);
  EXPECT_EQ(d["spec"]["replicas"], 3);
  EXPECT_EQ(d["spec"]["updateStrategy"]["type"], "ReCreate");

  Json old = DefaultCloneSet(Valid());
  EXPECT_TRUE(ShouldInjectTemplateDefaults(Valid(), nullptr));
  EXPECT_FALSE(ShouldInjectTemplateDefaults(old, &old));
  Json changed = With(R"({"spec": {"template": {"spec": {"containers": [
      {"name": "main", "image": "busybox:1.36"}]}}}})");
  EXPECT_TRUE(ShouldInjectTemplateDefaults(changed, &old));
  Json scaled = old;
  scaled["spec"]["replicas"] = 5;
  EXPECT_FALSE(ShouldInjectTemplateDefaults(scaled, &old));
}

TEST(CloneSetAdmissionTest, DefaultingIsIdempotentAndValid) {
  const std::vector<Json> inputs = {
      Valid(),
      With(R"({"spec": {"replicas": null, "updateStrategy": {"type": "InPlaceOnly"}}})"),
      With(R"({"spec": {"template": {"spec": {"hostNetwork": true, "volumes": [{"name": "v"}],
          "containers": [{"name": "main", "image": "busybox", "ports": [{"containerPort": 1}],
                          "livenessProbe": {"httpGet": {"port": 1}}}]}},
          "volumeClaimTemplates": [{"metadata": {"name": "data"}}]}})"),
  };
  for (const Json& in : inputs) {
    Json once = DefaultCloneSet(in);
    EXPECT_EQ(DefaultCloneSet(once), once) << once.dump();
    EXPECT_TRUE(ValidateCloneSet(once, nullptr).ok()) << ValidateCloneSet(once, nullptr);
  }
}

TEST(CloneSetAdmissionTest, DefaultingToleratesAnyJson) {
  for (const char* raw : {"null", "5", "\"x\"", "[]", "{}", R"({"spec": 3})", R"({"spec": null})",
                          R"({"spec": {"updateStrategy": "x", "template": []}})",
                          R"({"spec": {"template": {"spec": {"containers": [1, "x", null,
                              {"ports": "p", "env": [3], "livenessProbe": []}],
                              "volumes": {"a": 1}}}, "volumeClaimTemplates": [{"spec": 4}]}})"}) {
    Json in = Json::parse(raw);
    Json out;
    EXPECT_NO_THROW(out = DefaultCloneSet(in)) << raw;
    EXPECT_NO_THROW(CloneSetProblems(out, &in)) << raw;
    EXPECT_NO_THROW(CloneSetProblems(in, nullptr)) << raw;
  }
  EXPECT_EQ(DefaultCloneSet(Json("x")), Json("x"));
  EXPECT_EQ(DefaultCloneSet(
                Json::parse(R"({"spec": {"updateStrategy": "x"}})"))["spec"]["updateStrategy"],
            "x");
  EXPECT_EQ(DefaultPodSpec(Json::parse(R"({"containers": []})"))["dnsPolicy"], "ClusterFirst");
}

// ---- Validation ---------------------------------------------------------------------------------

struct ValidationCase {
  std::string name;
  std::string patch;  // JSON merge patch over Valid()
  std::string error;  // substring naming the field; "" = valid
};

TEST(CloneSetAdmissionTest, ValidationTable) {
  const std::vector<ValidationCase> cases = {
      {"valid", "{}", ""},
      {"replicas zero", R"({"spec": {"replicas": 0}})", ""},
      {"replicas negative", R"({"spec": {"replicas": -1}})", "spec.replicas: "},
      {"replicas not an integer", R"({"spec": {"replicas": "3"}})", "spec.replicas: "},
      {"no spec", R"({"spec": null})", "spec: Required value"},
      {"bad name", R"({"metadata": {"name": "Web_1"}})", "metadata.name: "},
      // Selector.
      {"selector missing", R"({"spec": {"selector": null}})", "spec.selector: Required value"},
      {"selector empty", R"({"spec": {"selector": {"matchLabels": null}}})",
       "spec.selector: Invalid value: empty selector is invalid for cloneset"},
      {"selector empty expressions",
       R"({"spec": {"selector": {"matchLabels": null, "matchExpressions": []}}})",
       "spec.selector: Invalid value: empty selector"},
      {"selector bad operator",
       R"({"spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "Is"}]}}})",
       "spec.selector: Invalid value"},
      {"selector bad key", R"({"spec": {"selector": {"matchLabels": {"-app": "web"}}}})",
       "spec.selector: Invalid value"},
      {"selector does not match", R"({"spec": {"selector": {"matchLabels": {"app": "db"}}}})",
       "spec.template.metadata.labels: Invalid value: `selector` does not match template"},
      {"selector expression matches",
       R"({"spec": {"selector": {"matchLabels": null, "matchExpressions":
           [{"key": "app", "operator": "In", "values": ["web", "api"]}]}}})",
       ""},
      {"template label invalid",
       R"({"spec": {"template": {"metadata": {"labels": {"bad key": "x"}}}}})",
       "spec.template.metadata.labels: Invalid value"},
      // Template.
      {"template missing", R"({"spec": {"template": null}})", "spec.template: Required value"},
      {"containers empty", R"({"spec": {"template": {"spec": {"containers": []}}}})",
       "spec.template.spec.containers: Required value"},
      {"container without image",
       R"({"spec": {"template": {"spec": {"containers": [{"name": "a"}]}}}})",
       "spec.template.spec.containers[0].image: Required value"},
      {"container without name",
       R"({"spec": {"template": {"spec": {"containers": [{"image": "b"}]}}}})",
       "spec.template.spec.containers[0].name: Required value"},
      {"container bad name",
       R"({"spec": {"template": {"spec": {"containers": [{"name": "Main", "image": "b"}]}}}})",
       "spec.template.spec.containers[0].name: Invalid value"},
      {"container names collide with init",
       R"({"spec": {"template": {"spec": {"initContainers": [{"name": "main", "image": "b"}]}}}})",
       "spec.template.spec.containers[0].name: Duplicate value"},
      {"init container without image",
       R"({"spec": {"template": {"spec": {"initContainers": [{"name": "init"}]}}}})",
       "spec.template.spec.initContainers[0].image: Required value"},
      {"restartPolicy Never", R"({"spec": {"template": {"spec": {"restartPolicy": "Never"}}}})",
       "spec.template.spec.restartPolicy: Unsupported value"},
      {"activeDeadlineSeconds", R"({"spec": {"template": {"spec": {"activeDeadlineSeconds": 5}}}})",
       "spec.template.spec.activeDeadlineSeconds: Forbidden"},
      {"bad container port",
       R"({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "b",
           "ports": [{"containerPort": 70000}]}]}}}})",
       "spec.template.spec.containers[0].ports[0].containerPort"},
      {"mount of an unknown volume",
       R"({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "b",
           "volumeMounts": [{"name": "data", "mountPath": "/d"}]}]}}}})",
       "spec.template.spec.containers[0].volumeMounts[0].name: Not found"},
      {"mount of a volumeClaimTemplate",
       R"({"spec": {"volumeClaimTemplates": [{"metadata": {"name": "data"}}],
           "template": {"spec": {"containers": [{"name": "a", "image": "b",
           "volumeMounts": [{"name": "data", "mountPath": "/d"}]}]}}}})",
       ""},
      {"duplicate volumes",
       R"({"spec": {"template": {"spec": {"volumes": [{"name": "v", "emptyDir": {}},
           {"name": "v", "emptyDir": {}}]}}}})",
       "spec.template.spec.volumes[1].name: Duplicate value"},
      // volumeClaimTemplates.
      {"vct without name", R"({"spec": {"volumeClaimTemplates": [{"spec": {}}]}})",
       "spec.volumeClaimTemplates[0].metadata.name: Required value"},
      {"vct duplicate names",
       R"({"spec": {"volumeClaimTemplates": [{"metadata": {"name": "d"}}, {"metadata": {"name": "d"}}]}})",
       "spec.volumeClaimTemplates[1].metadata.name: Duplicate value"},
      {"vct named like a volume",
       R"({"spec": {"volumeClaimTemplates": [{"metadata": {"name": "v"}}],
           "template": {"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}}}})",
       "spec.volumeClaimTemplates: Duplicate value: \"v\""},
      // updateStrategy.
      {"type unknown", R"({"spec": {"updateStrategy": {"type": "Rolling"}}})",
       "spec.updateStrategy.type: Unsupported value"},
      {"type InPlaceOnly", R"({"spec": {"updateStrategy": {"type": "InPlaceOnly"}}})", ""},
      {"partition percent", R"({"spec": {"updateStrategy": {"partition": "100%"}}})", ""},
      {"partition above replicas", R"({"spec": {"updateStrategy": {"partition": 10}}})", ""},
      {"partition negative", R"({"spec": {"updateStrategy": {"partition": -1}}})",
       "spec.updateStrategy.partition: "},
      {"partition over 100%", R"({"spec": {"updateStrategy": {"partition": "101%"}}})",
       "spec.updateStrategy.partition: "},
      {"partition not a percentage", R"({"spec": {"updateStrategy": {"partition": "5"}}})",
       "spec.updateStrategy.partition: "},
      {"maxUnavailable garbage", R"({"spec": {"updateStrategy": {"maxUnavailable": "a%"}}})",
       "spec.updateStrategy.maxUnavailable: "},
      {"maxUnavailable negative percent",
       R"({"spec": {"updateStrategy": {"maxUnavailable": "-10%"}}})",
       "spec.updateStrategy.maxUnavailable: "},
      {"maxSurge float", R"({"spec": {"updateStrategy": {"maxSurge": 1.5}}})",
       "spec.updateStrategy.maxSurge: "},
      {"maxSurge with InPlaceOnly",
       R"({"spec": {"updateStrategy": {"type": "InPlaceOnly", "maxSurge": 1}}})",
       "spec.updateStrategy.maxSurge: Invalid value: 1: can not use maxSurge with strategy type "
       "InPlaceOnly"},
      {"maxSurge 0% with InPlaceOnly",
       R"({"spec": {"updateStrategy": {"type": "InPlaceOnly", "maxSurge": "0%"}}})", ""},
      {"both zero", R"({"spec": {"updateStrategy": {"maxUnavailable": 0, "maxSurge": 0}}})",
       "spec.updateStrategy.maxUnavailable: Invalid value: maxUnavailable and maxSurge should not "
       "both be less than 1"},
      {"both zero percent",
       R"({"spec": {"updateStrategy": {"maxUnavailable": "0%"}, "replicas": 4}})",
       "should not both be less than 1"},
      {"both zero without replicas",
       R"({"spec": {"replicas": 0, "updateStrategy": {"maxUnavailable": 0}}})", ""},
      {"surge only", R"({"spec": {"updateStrategy": {"maxUnavailable": 0, "maxSurge": "1%"}}})",
       ""},
      {"paused not bool", R"({"spec": {"updateStrategy": {"paused": "yes"}}})",
       "spec.updateStrategy.paused: "},
      {"grace negative",
       R"({"spec": {"updateStrategy": {"inPlaceUpdateStrategy": {"gracePeriodSeconds": -1}}}})",
       "spec.updateStrategy.inPlaceUpdateStrategy.gracePeriodSeconds: "},
      // priorityStrategy / scatterStrategy.
      {"weight priority",
       R"({"spec": {"updateStrategy": {"priorityStrategy": {"weightPriority":
           [{"weight": 50, "matchSelector": {"matchLabels": {"z": "a"}}}]}}}})",
       ""},
      {"weight out of range",
       R"({"spec": {"updateStrategy": {"priorityStrategy": {"weightPriority":
           [{"weight": 101, "matchSelector": {"matchLabels": {"z": "a"}}}]}}}})",
       "spec.updateStrategy.priorityStrategy.weightPriority[0].weight: "},
      {"weight empty selector",
       R"({"spec": {"updateStrategy": {"priorityStrategy": {"weightPriority":
           [{"weight": 1, "matchSelector": {}}]}}}})",
       "spec.updateStrategy.priorityStrategy.weightPriority[0].matchSelector: Invalid value: "
       "selector can not be empty"},
      {"weight bad selector",
       R"({"spec": {"updateStrategy": {"priorityStrategy": {"weightPriority":
           [{"weight": 1, "matchSelector": {"matchExpressions": [{"key": "z", "operator": "In"}]}}]}}}})",
       "spec.updateStrategy.priorityStrategy.weightPriority[0].matchSelector: Invalid value"},
      {"weight and order",
       R"({"spec": {"updateStrategy": {"priorityStrategy": {
           "weightPriority": [{"weight": 1, "matchSelector": {"matchLabels": {"z": "a"}}}],
           "orderPriority": [{"orderedKey": "z"}]}}}})",
       "spec.updateStrategy.priorityStrategy: Invalid value: only one of weightPriority and "
       "orderPriority"},
      {"order key empty",
       R"({"spec": {"updateStrategy": {"priorityStrategy": {"orderPriority": [{"orderedKey": ""}]}}}})",
       "spec.updateStrategy.priorityStrategy.orderPriority[0].orderedKey: Required value"},
      {"scatter", R"({"spec": {"updateStrategy": {"scatterStrategy": [{"key": "zone", "value": "a"},
           {"key": "zone", "value": "b"}]}}})",
       ""},
      {"scatter empty key",
       R"({"spec": {"updateStrategy": {"scatterStrategy": [{"value": "a"}]}}})",
       "spec.updateStrategy.scatterStrategy[0].key: Required value"},
      {"scatter duplicate",
       R"({"spec": {"updateStrategy": {"scatterStrategy": [{"key": "zone", "value": "a"},
           {"key": "zone", "value": "a"}]}}})",
       "spec.updateStrategy.scatterStrategy[1]: Duplicate value: duplicated key=zone value=a"},
      // scaleStrategy.
      {"podsToDelete",
       R"({"spec": {"scaleStrategy": {"podsToDelete": ["web-abcde", "web-fghij"]}}})", ""},
      {"podsToDelete duplicate",
       R"({"spec": {"scaleStrategy": {"podsToDelete": ["web-abcde", "web-abcde"]}}})",
       "spec.scaleStrategy.podsToDelete: Invalid value: duplicated items [web-abcde]"},
      {"podsToDelete bad name", R"({"spec": {"scaleStrategy": {"podsToDelete": ["Web_1"]}}})",
       "spec.scaleStrategy.podsToDelete[0]: Invalid value"},
      {"scale maxUnavailable", R"({"spec": {"scaleStrategy": {"maxUnavailable": "150%"}}})",
       "spec.scaleStrategy.maxUnavailable: "},
      {"scale maxUnavailable ok", R"({"spec": {"scaleStrategy": {"maxUnavailable": 2}}})", ""},
      // Plain integers.
      {"revisionHistoryLimit negative", R"({"spec": {"revisionHistoryLimit": -1}})",
       "spec.revisionHistoryLimit: Invalid value: -1: must be greater than or equal to 0"},
      {"minReadySeconds negative", R"({"spec": {"minReadySeconds": -5}})",
       "spec.minReadySeconds: Invalid value: -5: must be greater than or equal to 0"},
      {"progressDeadlineSeconds negative", R"({"spec": {"progressDeadlineSeconds": -5}})",
       "spec.progressDeadlineSeconds: Invalid value: -5: must be greater than or equal to 0"},
      // Lifecycle.
      {"lifecycle hooks",
       R"({"spec": {"lifecycle": {
           "preDelete": {"finalizersHandler": ["example.com/unready"], "markPodNotReady": true},
           "inPlaceUpdate": {"labelsHandler": {"example.com/unready": "true"}},
           "preNormal": {"labelsHandler": {"ready": ""}}}}})",
       ""},
      {"lifecycle bad label key",
       R"({"spec": {"lifecycle": {"preDelete": {"labelsHandler": {"bad key": "true"}}}}})",
       "spec.lifecycle.preDelete.labelsHandler: Invalid value"},
      {"lifecycle bad label value",
       R"({"spec": {"lifecycle": {"inPlaceUpdate": {"labelsHandler": {"k": "no spaces"}}}}})",
       "spec.lifecycle.inPlaceUpdate.labelsHandler: Invalid value"},
      {"lifecycle bad finalizer",
       R"({"spec": {"lifecycle": {"preNormal": {"finalizersHandler": ["Example.com/x"]}}}})",
       "spec.lifecycle.preNormal.finalizersHandler[0]: Invalid value"},
      {"lifecycle finalizers not a list",
       R"({"spec": {"lifecycle": {"preDelete": {"finalizersHandler": "x"}}}})",
       "spec.lifecycle.preDelete.finalizersHandler: "},
      {"lifecycle markPodNotReady not bool",
       R"({"spec": {"lifecycle": {"preDelete": {"markPodNotReady": "true"}}}})",
       "spec.lifecycle.preDelete.markPodNotReady: "},
  };
  int valid = 0, invalid = 0;
  for (const ValidationCase& c : cases) {
    Json cs = With(c.patch);
    absl::Status st = ValidateCloneSet(cs, nullptr);
    if (c.error.empty()) {
      ++valid;
      EXPECT_TRUE(st.ok()) << c.name << ": " << st;
      // Defaults never make a valid object invalid.
      EXPECT_TRUE(ValidateCloneSet(DefaultCloneSet(cs), nullptr).ok()) << c.name;
    } else {
      ++invalid;
      EXPECT_TRUE(absl::IsInvalidArgument(st)) << c.name << ": " << st;
      EXPECT_THAT(std::string(st.message()), HasSubstr(c.error)) << c.name;
    }
  }
  EXPECT_GE(valid, 15);
  EXPECT_GE(invalid, 50);
}

TEST(CloneSetAdmissionTest, ReportsEveryProblem) {
  std::vector<std::string> problems =
      CloneSetProblems(With(R"({"spec": {"replicas": -1, "minReadySeconds": -1,
                        "updateStrategy": {"type": "x"}}})"),
                       nullptr);
  EXPECT_EQ(problems.size(), 3u) << ::testing::PrintToString(problems);
}

// ---- UPDATE rules -------------------------------------------------------------------------------

struct UpdateCase {
  std::string name;
  std::string old_patch;
  std::string new_patch;
  std::string error;
};

TEST(CloneSetAdmissionTest, UpdateTable) {
  const std::vector<UpdateCase> cases = {
      {"scale", "{}", R"({"spec": {"replicas": 10}})", ""},
      {"new image", "{}",
       R"({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}}})",
       ""},
      {"strategy, lifecycle and history", "{}",
       R"({"spec": {"updateStrategy": {"partition": 1, "paused": true}, "minReadySeconds": 3,
           "revisionHistoryLimit": 2, "lifecycle": {"preDelete": {"markPodNotReady": true}},
           "scaleStrategy": {"podsToDelete": ["web-abcde"]},
           "volumeClaimTemplates": [{"metadata": {"name": "data"}}]}})",
       ""},
      {"selector changed", "{}",
       R"({"spec": {"selector": {"matchLabels": {"app": "web", "tier": "x"}},
           "template": {"metadata": {"labels": {"tier": "x"}}}}})",
       "spec.selector: Invalid value: field is immutable"},
      {"selector spelled differently but equal",
       R"({"spec": {"selector": {"matchExpressions": []}}})", "{}", ""},
      {"progressDeadlineSeconds may change", "{}", R"({"spec": {"progressDeadlineSeconds": 60}})",
       ""},
      {"other spec field added", "{}", R"({"spec": {"serviceName": "web"}})",
       "spec: Forbidden: updates to cloneset spec for fields other than"},
      {"InPlaceOnly image change", R"({"spec": {"updateStrategy": {"type": "InPlaceOnly"}}})",
       R"({"spec": {"updateStrategy": {"type": "InPlaceOnly"}, "template": {"spec":
           {"containers": [{"name": "main", "image": "busybox:1.36"}]}}}})",
       ""},
      {"InPlaceOnly metadata change", R"({"spec": {"updateStrategy": {"type": "InPlaceOnly"}}})",
       R"({"spec": {"updateStrategy": {"type": "InPlaceOnly"}, "template": {"metadata":
           {"annotations": {"a": "b"}}}}})",
       ""},
      {"InPlaceOnly env change", R"({"spec": {"updateStrategy": {"type": "InPlaceOnly"}}})",
       R"({"spec": {"updateStrategy": {"type": "InPlaceOnly"}, "template": {"spec":
           {"containers": [{"name": "main", "image": "busybox:1.35",
                            "env": [{"name": "A", "value": "1"}]}]}}}})",
       "spec.template.spec: Forbidden: only allowed to update images in spec for InPlaceOnly"},
      {"InPlaceOnly container added", R"({"spec": {"updateStrategy": {"type": "InPlaceOnly"}}})",
       R"({"spec": {"updateStrategy": {"type": "InPlaceOnly"}, "template": {"spec":
           {"containers": [{"name": "main", "image": "busybox:1.35"},
                           {"name": "side", "image": "busybox:1.35"}]}}}})",
       "spec.template.spec: Forbidden"},
      {"InPlaceIfPossible env change",
       R"({"spec": {"updateStrategy": {"type": "InPlaceIfPossible"}}})",
       R"({"spec": {"updateStrategy": {"type": "InPlaceIfPossible"}, "template": {"spec":
           {"containers": [{"name": "main", "image": "busybox:1.35",
                            "env": [{"name": "A", "value": "1"}]}]}}}})",
       ""},
      {"update still validates the object", "{}", R"({"spec": {"replicas": -2}})",
       "spec.replicas: "},
  };
  for (const UpdateCase& c : cases) {
    const Json old_cs = DefaultCloneSet(With(c.old_patch));
    const Json new_cs = DefaultCloneSet(With(c.new_patch),
                                        ShouldInjectTemplateDefaults(With(c.new_patch), &old_cs));
    absl::Status st = ValidateCloneSet(new_cs, &old_cs);
    if (c.error.empty()) {
      EXPECT_TRUE(st.ok()) << c.name << ": " << st;
    } else {
      EXPECT_TRUE(absl::IsInvalidArgument(st)) << c.name << ": " << st;
      EXPECT_THAT(std::string(st.message()), HasSubstr(c.error)) << c.name;
    }
  }
}

}  // namespace admission_test
}  // namespace kruise::manager::cloneset
