#include "manager/sidecarset/sidecarset_inject.h"

#include <random>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kube/client.h"
#include "kube/object.h"
#include "manager/sidecarset/sidecarset_admission.h"

namespace kruise::manager::sidecarset {
// Named, not anonymous: this file may share a unity-build unit with the admission test.
namespace inject_test {

using kube::Json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const absl::Time kNow = absl::FromUnixSeconds(1764158400);  // 2025-11-26T12:00:00Z
constexpr char kNowText[] = "2025-11-26T12:00:00Z";

// A SidecarSet named `name` selecting app=web, with `spec_patch` merged into its spec.
Json Set(const std::string& name, const std::string& spec_patch = "{}") {
  Json ss = Json::parse(R"({
    "apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
    "metadata": {"name": ""},
    "spec": {
      "selector": {"matchLabels": {"app": "web"}},
      "containers": [{"name": "log", "image": "fluentd:1",
                      "volumeMounts": [{"name": "logs", "mountPath": "/var/log/app"}]}],
      "volumes": [{"name": "logs", "emptyDir": {}}]
    }
  })");
  ss["metadata"]["name"] = name;
  ss["spec"].merge_patch(Json::parse(spec_patch));
  return ss;
}

// A pod in namespace `ns` labelled app=web with one app container "app", `patch` merged in.
Json Pod(const std::string& patch = "{}", const std::string& ns = "team") {
  Json pod = Json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "p", "labels": {"app": "web"}},
    "spec": {"containers": [{"name": "app", "image": "nginx:1",
      "env": [{"name": "REGION", "value": "eu"}, {"name": "ZONE", "value": "a"}],
      "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
      "volumes": [{"name": "data", "emptyDir": {}}]}
  })");
  pod["metadata"]["namespace"] = ns;
  pod.merge_patch(Json::parse(patch));
  return pod;
}

Json Namespace(const std::string& name, const Json& labels) {
  Json ns = {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}};
  if (!labels.is_null()) ns["metadata"]["labels"] = labels;
  return ns;
}

std::vector<std::string> Names(const Json& list) {
  std::vector<std::string> out;
  if (!list.is_array()) return out;
  for (const Json& c : list) out.push_back(c.value("name", ""));
  return out;
}

const Json* Container(const Json& pod, const std::string& name, const char* key = "containers") {
  const Json& l = pod["spec"][key];
  for (const Json& c : l) {
    if (c.value("name", "") == name) return &c;
  }
  return nullptr;
}

Json Ann(const Json& pod, const std::string& key) {
  return Json::parse(pod["metadata"]["annotations"][key].get<std::string>());
}

// Injects and expects success.
Json Inject(Json pod, const std::vector<Json>& sets, InjectionResult* out = nullptr) {
  absl::StatusOr<InjectionResult> r = InjectSidecars(&pod, sets, kNow);
  EXPECT_TRUE(r.ok()) << r.status();
  if (r.ok() && out != nullptr) *out = *r;
  return pod;
}

// ---- Matching ---------------------------------------------------------------------------------

struct MatchCase {
  std::string name;
  std::string spec_patch;
  std::string pod_patch;
  std::string pod_ns;
  Json ns_obj;  // null: unknown
  bool want;
};

TEST(SidecarSetMatchTest, Table) {
  const Json team = Namespace("team", {{"env", "prod"}});
  const std::vector<MatchCase> cases = {
      {"selector matches", "{}", "{}", "team", nullptr, true},
      {"selector does not match", "{}", R"({"metadata": {"labels": {"app": "db"}}})", "team",
       nullptr, false},
      {"pod without labels", "{}", R"({"metadata": {"labels": null}})", "team", nullptr, false},
      {"empty selector matches nothing", R"({"selector": {"matchLabels": null}})", "{}", "team",
       nullptr, false},
      {"absent selector", R"({"selector": null})", "{}", "team", nullptr, false},
      {"malformed selector", R"({"selector": {"matchExpressions": [{"key": "app"}]}})", "{}",
       "team", nullptr, false},
      {"expression selector",
       R"({"selector": {"matchLabels": null, "matchExpressions":
           [{"key": "app", "operator": "In", "values": ["web", "api"]}]}})",
       "{}", "team", nullptr, true},
      {"kube-system never", "{}", "{}", "kube-system", nullptr, false},
      {"manager namespace never", "{}", "{}", "kruise-system", nullptr, false},
      {"no pod namespace reads as default", R"({"namespace": "default"})",
       R"({"metadata": {"namespace": null}})", "", nullptr, true},
      {"v1alpha1 namespace equal", R"({"namespace": "team"})", "{}", "team", nullptr, true},
      {"v1alpha1 namespace other", R"({"namespace": "other"})", "{}", "team", nullptr, false},
      {"namespace not a string", R"({"namespace": 5})", "{}", "team", nullptr, false},
      {"namespaceSelector matches labels",
       R"({"namespaceSelector": {"matchLabels": {"env": "prod"}}})", "{}", "team", team, true},
      {"namespaceSelector does not match",
       R"({"namespaceSelector": {"matchLabels": {"env": "dev"}}})", "{}", "team", team, false},
      {"namespaceSelector by metadata.name, namespace known",
       R"({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team"}}})", "{}",
       "team", Namespace("team", nullptr), true},
      {"namespaceSelector by metadata.name, namespace unknown",
       R"({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team"}}})", "{}",
       "team", nullptr, true},
      {"namespaceSelector by metadata.name, other namespace",
       R"({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "x"}}})", "{}",
       "team", nullptr, false},
      {"namespaceSelector on other labels, namespace unknown",
       R"({"namespaceSelector": {"matchLabels": {"env": "prod"}}})", "{}", "team", nullptr, false},
      {"NotIn on other labels, namespace unknown",
       R"({"namespaceSelector": {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["x"]}]}})",
       "{}", "team", nullptr, false},
      {"empty namespaceSelector matches every namespace", R"({"namespaceSelector": {}})", "{}",
       "team", team, true},
      {"namespace and namespaceSelector both hold",
       R"({"namespace": "team", "namespaceSelector": {"matchLabels": {"env": "prod"}}})", "{}",
       "team", team, true},
      {"namespace and namespaceSelector, one fails",
       R"({"namespace": "other", "namespaceSelector": {"matchLabels": {"env": "prod"}}})", "{}",
       "team", team, false},
      {"injection paused", R"({"injectionStrategy": {"paused": true}})", "{}", "team", nullptr,
       false},
      {"injection not paused", R"({"injectionStrategy": {"paused": false}})", "{}", "team", nullptr,
       true},
      {"pod being deleted", "{}", R"({"metadata": {"deletionTimestamp": "2025-01-01T00:00:00Z"}})",
       "team", nullptr, false},
      {"pod finished", "{}", R"({"status": {"phase": "Succeeded"}})", "team", nullptr, false},
  };
  for (const MatchCase& c : cases) {
    Json pod = Pod(c.pod_patch, c.pod_ns);
    if (c.pod_ns.empty()) pod["metadata"].erase("namespace");
    const Json* ns = c.ns_obj.is_null() ? nullptr : &c.ns_obj;
    EXPECT_EQ(SidecarSetMatchesPod(Set("s", c.spec_patch), pod, ns, "kruise-system"), c.want)
        << c.name;
  }
}

TEST(SidecarSetMatchTest, V1beta1Spelling) {
  Json ss = Set("s", R"({"namespaceSelector": {"matchLabels": {"env": "prod"}}})");
  ss["apiVersion"] = "apps.kruise.io/v1beta1";
  const Json team = Namespace("team", {{"env", "prod"}});
  EXPECT_TRUE(SidecarSetMatchesPod(ss, Pod(), &team, "kruise-system"));
  // v1alpha1's spec.namespace is honoured on a v1beta1 object too (one schema).
  ss["spec"]["namespace"] = "elsewhere";
  EXPECT_FALSE(SidecarSetMatchesPod(ss, Pod(), &team, "kruise-system"));
}

TEST(SidecarSetMatchTest, PreparedMatcherReusedAcrossPods) {
  std::vector<SidecarSetMatcher> matchers;
  matchers.emplace_back(Set("web"));
  matchers.emplace_back(Set("db", R"({"selector": {"matchLabels": {"app": "db"}}})"));
  matchers.emplace_back(Set("paused", R"({"injectionStrategy": {"paused": true}})"));
  matchers.emplace_back(Json("garbage"));
  EXPECT_EQ(matchers[1].name(), "db");
  EXPECT_EQ(matchers[3].name(), "");
  auto matching = [&](const Json& pod) {
    const PodFacts facts = PodFacts::Of(pod, "kruise-system");
    std::vector<std::string> out;
    for (const SidecarSetMatcher& m : matchers) {
      if (m.Matches(facts, nullptr)) out.push_back(m.name());
    }
    return out;
  };
  EXPECT_THAT(matching(Pod()), ElementsAre("web"));
  EXPECT_THAT(matching(Pod(R"({"metadata": {"labels": {"app": "db"}}})")), ElementsAre("db"));
  EXPECT_THAT(matching(Pod("{}", "kruise-system")), IsEmpty());
  EXPECT_FALSE(PodFacts::Of(Json("pod"), "").injectable);
}

// ---- Ordering and placement -------------------------------------------------------------------

TEST(SidecarSetInjectTest, ContainersBeforeAndAfterAppContainers) {
  Json ss = Set("s", R"({"containers": [
      {"name": "proxy", "image": "envoy:1"},
      {"name": "log", "image": "fluentd:1", "podInjectPolicy": "AfterAppContainer"},
      {"name": "agent", "image": "agent:1", "podInjectPolicy": "BeforeAppContainer"}]})");
  InjectionResult r;
  Json pod = Inject(Pod(), {ss}, &r);
  EXPECT_THAT(Names(pod["spec"]["containers"]), ElementsAre("proxy", "agent", "app", "log"));
  EXPECT_THAT(r.sidecarsets, ElementsAre("s"));
  EXPECT_THAT(r.containers, ElementsAre("proxy", "agent", "log"));
}

TEST(SidecarSetInjectTest, SetsInNameOrderWhateverTheInputOrder) {
  Json a = Set("a", R"({"containers": [{"name": "ca", "image": "x:1"}], "volumes": null})");
  Json b = Set("b", R"({"containers": [{"name": "cb", "image": "x:1"}], "volumes": null})");
  Json c = Set("c", R"({"containers": [{"name": "cc", "image": "x:1",
                        "podInjectPolicy": "AfterAppContainer"}], "volumes": null})");
  const Json want = Inject(Pod(), {a, b, c});
  EXPECT_THAT(Names(want["spec"]["containers"]), ElementsAre("ca", "cb", "app", "cc"));
  EXPECT_EQ(Inject(Pod(), {c, a, b}), want);
  EXPECT_EQ(Inject(Pod(), {b, c, a, b}), want);  // a duplicate is applied once
  EXPECT_EQ(want["metadata"]["annotations"]["kruise.io/sidecarset-injected-list"], "a,b,c");
}

TEST(SidecarSetInjectTest, InitContainersSortedByNameAfterThePodsOwn) {
  Json a = Set("a", R"({"initContainers": [{"name": "zinit", "image": "x:1"},
                                          {"name": "minit", "image": "x:1"}]})");
  Json b = Set("b", R"({"initContainers": [{"name": "binit", "image": "x:1"},
                         {"name": "first", "image": "x:1", "podInjectPolicy": "BeforeAppContainer"}]})");
  Json pod =
      Inject(Pod(R"({"spec": {"initContainers": [{"name": "own", "image": "y"}]}})"), {a, b});
  EXPECT_THAT(Names(pod["spec"]["initContainers"]),
              ElementsAre("first", "own", "binit", "minit", "zinit"));
  // Plain init containers are not in the sidecarList (only native sidecars are).
  EXPECT_EQ(Ann(pod, "kruise.io/sidecarset-hash")["a"]["sidecarList"], Json({"log"}));
}

TEST(SidecarSetInjectTest, NativeSidecarInitContainerIsListed) {
  Json ss = Set(
      "s", R"({"initContainers": [{"name": "mesh", "image": "x:1", "restartPolicy": "Always"}]})");
  Json pod = Inject(Pod(), {ss});
  EXPECT_EQ(Ann(pod, "kruise.io/sidecarset-hash")["s"]["sidecarList"], Json({"log", "mesh"}));
  EXPECT_EQ((*Container(pod, "mesh", "initContainers"))["restartPolicy"], "Always");
}

TEST(SidecarSetInjectTest, ExistingContainerOfTheSameNameIsReplacedInPlace) {
  Json pod = Pod(R"({"spec": {"containers": [
      {"name": "app", "image": "nginx:1"}, {"name": "log", "image": "old-fluentd:0"}]}})");
  InjectionResult r;
  Json out = Inject(pod, {Set("s")}, &r);
  EXPECT_THAT(Names(out["spec"]["containers"]), ElementsAre("app", "log"));
  EXPECT_EQ((*Container(out, "log"))["image"], "fluentd:1");
  EXPECT_THAT(r.containers, ElementsAre("log"));
}

TEST(SidecarSetInjectTest, SidecarOnlyFieldsRemovedAndEnvAdded) {
  Json ss = Set("s", R"({"containers": [{"name": "log", "image": "fluentd:1",
      "env": [{"name": "A", "value": "1"}],
      "upgradeStrategy": {"upgradeType": "ColdUpgrade"}, "shareVolumePolicy": {"type": "disabled"},
      "transferEnv": [], "resourcesPolicy": null}]})");
  Json pod = Inject(Pod(), {ss});
  const Json& c = *Container(pod, "log");
  for (const char* f : {"podInjectPolicy", "upgradeStrategy", "shareVolumePolicy",
                        "shareVolumeDevicePolicy", "transferEnv", "resourcesPolicy"}) {
    EXPECT_FALSE(c.contains(f)) << f;
  }
  EXPECT_EQ(c["env"], Json::parse(R"([{"name": "A", "value": "1"},
                                      {"name": "IS_INJECTED", "value": "true"}])"));
  // Kubernetes container defaults come from DefaultSidecarSet.
  EXPECT_EQ(c["imagePullPolicy"], "IfNotPresent");
  EXPECT_EQ(c["terminationMessagePath"], "/dev/termination-log");
}

// ---- Volumes ----------------------------------------------------------------------------------

TEST(SidecarSetInjectTest, VolumesTable) {
  struct Case {
    std::string name, spec_patch, pod_patch;
    std::vector<std::string> want;
  };
  const std::vector<Case> cases = {
      {"used volume added", "{}", "{}", {"data", "logs"}},
      {"unused volume not added",
       R"({"volumes": [{"name": "logs", "emptyDir": {}}, {"name": "spare", "emptyDir": {}}]})",
       "{}",
       {"data", "logs"}},
      {"pod's volume of that name wins",
       "{}",
       R"({"spec": {"volumes": [{"name": "data", "emptyDir": {}}, {"name": "logs", "hostPath": {"path": "/l"}}]}})",
       {"data", "logs"}},
      {"mount of a pod volume not in the set",
       R"({"containers": [{"name": "log", "image": "x:1", "volumeMounts": [{"name": "data", "mountPath": "/d"}]}]})",
       "{}",
       {"data"}},
      {"two sidecars, one volume",
       R"({"containers": [{"name": "log", "image": "x:1", "volumeMounts": [{"name": "logs", "mountPath": "/l"}]},
                         {"name": "log2", "image": "x:1", "volumeMounts": [{"name": "logs", "mountPath": "/l"}]}]})",
       "{}",
       {"data", "logs"}},
      {"pod without volumes", "{}", R"({"spec": {"volumes": null}})", {"logs"}},
  };
  for (const Case& c : cases) {
    Json pod = Inject(Pod(c.pod_patch), {Set("s", c.spec_patch)});
    EXPECT_EQ(Names(pod["spec"]["volumes"]), c.want) << c.name;
  }
  // The pod's definition is kept.
  Json pod = Inject(Pod(R"({"spec": {"volumes": [{"name": "logs", "hostPath": {"path": "/l"}}]}})"),
                    {Set("s")});
  EXPECT_EQ(pod["spec"]["volumes"][0]["hostPath"]["path"], "/l");
  // Two sets with the same volume definition: added once.
  Json two = Inject(Pod(), {Set("a"), Set("b", R"({"containers": [{"name": "other", "image": "x:1",
      "volumeMounts": [{"name": "logs", "mountPath": "/l"}]}]})")});
  EXPECT_EQ(Names(two["spec"]["volumes"]), std::vector<std::string>({"data", "logs"}));
}

TEST(SidecarSetInjectTest, ShareVolumePolicy) {
  Json ss = Set("s", R"({"containers": [{"name": "log", "image": "fluentd:1",
      "shareVolumePolicy": {"type": "enabled"},
      "volumeMounts": [{"name": "logs", "mountPath": "/var/log/app"},
                       {"name": "logs", "mountPath": "/data"}]}]})");
  Json pod = Pod(R"j({"spec": {"containers": [
      {"name": "app", "image": "nginx:1", "env": [{"name": "POD", "value": "p1"}],
       "volumeMounts": [{"name": "data", "mountPath": "/data"},
                        {"name": "cfg", "mountPath": "/cfg", "subPathExpr": "x/$(POD)/$(MISSING)"}]},
      {"name": "injected", "image": "x", "env": [{"name": "IS_INJECTED", "value": "true"}],
       "volumeMounts": [{"name": "other", "mountPath": "/other"}]}]}})j");
  Json out = Inject(pod, {ss});
  const Json& c = *Container(out, "log");
  // Its own mounts first; /data already mounted by the sidecar; injected containers not shared.
  EXPECT_EQ(c["volumeMounts"], Json::parse(R"j([{"name": "logs", "mountPath": "/var/log/app"},
      {"name": "logs", "mountPath": "/data"},
      {"name": "cfg", "mountPath": "/cfg", "subPathExpr": "x/$(POD)/$(MISSING)"}])j"));
  // The env var the subPathExpr uses comes along.
  EXPECT_EQ(c["env"], Json::parse(R"([{"name": "IS_INJECTED", "value": "true"},
                                      {"name": "POD", "value": "p1"}])"));
  // Disabled (the default): only its own mounts.
  Json plain = Inject(Pod(), {Set("s")});
  EXPECT_EQ((*Container(plain, "log"))["volumeMounts"].size(), 1u);
}

TEST(SidecarSetInjectTest, ShareVolumeDevicePolicy) {
  Json ss = Set("s", R"({"containers": [{"name": "log", "image": "x:1", "volumeMounts": null,
      "shareVolumeDevicePolicy": {"type": "enabled"}}]})");
  Json pod = Pod(R"({"spec": {"containers": [{"name": "app", "image": "n",
      "volumeDevices": [{"name": "blk", "devicePath": "/dev/xvda"}]}]}})");
  Json out = Inject(pod, {ss});
  EXPECT_EQ((*Container(out, "log"))["volumeDevices"],
            Json::parse(R"([{"name": "blk", "devicePath": "/dev/xvda"}])"));
}

// ---- transferEnv ------------------------------------------------------------------------------

TEST(SidecarSetInjectTest, TransferEnvTable) {
  struct Case {
    std::string name, transfer, pod_patch;
    std::vector<std::string> want_env;  // after IS_INJECTED
    size_t notes;
  };
  const std::vector<Case> cases = {
      {"envName", R"([{"sourceContainerName": "app", "envName": "REGION"}])", "{}", {"REGION"}, 0},
      {"envNames sorted",
       R"([{"sourceContainerName": "app", "envNames": ["ZONE", "REGION"]}])",
       "{}",
       {"REGION", "ZONE"},
       0},
      {"missing variable skipped",
       R"([{"sourceContainerName": "app", "envNames": ["NOPE", "ZONE"]}])",
       "{}",
       {"ZONE"},
       1},
      {"missing container skipped",
       R"([{"sourceContainerName": "ghost", "envName": "REGION"}])",
       "{}",
       {},
       1},
      {"source from a label",
       R"([{"sourceContainerNameFrom": {"fieldRef": {"fieldPath": "metadata.labels['main']"}}, "envName": "REGION"}])",
       R"({"metadata": {"labels": {"main": "app"}}})",
       {"REGION"},
       0},
      {"source from an annotation",
       R"([{"sourceContainerNameFrom": {"fieldRef": {"fieldPath": "metadata.annotations['main']"}}, "envName": "ZONE"}])",
       R"({"metadata": {"annotations": {"main": "app"}}})",
       {"ZONE"},
       0},
      {"unsupported fieldPath",
       R"([{"sourceContainerNameFrom": {"fieldRef": {"fieldPath": "metadata.name"}}, "envName": "ZONE"}])",
       "{}",
       {},
       1},
      {"the sidecar's own variable wins",
       R"([{"sourceContainerName": "app", "envName": "OWN"}])",
       R"({"spec": {"containers": [{"name": "app", "image": "n", "env": [{"name": "OWN", "value": "app"}]}]}})",
       {},
       0},
  };
  for (const Case& c : cases) {
    Json ss = Set("s", R"({"containers": [{"name": "log", "image": "x:1",
                            "env": [{"name": "OWN", "value": "sidecar"}]}]})");
    ss["spec"]["containers"][0]["transferEnv"] = Json::parse(c.transfer);
    InjectionResult r;
    Json pod = Inject(Pod(c.pod_patch), {ss}, &r);
    std::vector<std::string> want = {"OWN", "IS_INJECTED"};
    want.insert(want.end(), c.want_env.begin(), c.want_env.end());
    EXPECT_EQ(Names((*Container(pod, "log"))["env"]), want) << c.name;
    EXPECT_EQ(r.notes.size(), c.notes) << c.name;
  }
  // Values travel with the name.
  Json ss = Set("s", R"({"containers": [{"name": "log", "image": "x:1",
      "transferEnv": [{"sourceContainerName": "app", "envName": "REGION"}]}]})");
  EXPECT_EQ((*Container(Inject(Pod(), {ss}), "log"))["env"][1],
            Json::parse(R"({"name": "REGION", "value": "eu"})"));
}

TEST(SidecarSetInjectTest, TransferEnvSeesPatchedAnnotations) {
  Json ss = Set("s", R"({"patchPodMetadata": [{"annotations": {"main": "app"}}],
      "containers": [{"name": "log", "image": "x:1", "transferEnv": [{"envName": "REGION",
        "sourceContainerNameFrom": {"fieldRef": {"fieldPath": "metadata.annotations['main']"}}}]}]})");
  Json pod = Inject(Pod(), {ss});
  EXPECT_THAT(Names((*Container(pod, "log"))["env"]), ElementsAre("IS_INJECTED", "REGION"));
}

// ---- imagePullSecrets and patchPodMetadata ----------------------------------------------------

TEST(SidecarSetInjectTest, ImagePullSecretsWithoutDuplicates) {
  Json a = Set("a", R"({"imagePullSecrets": [{"name": "reg"}, {"name": "shared"}]})");
  Json b = Set(
      "b",
      R"({"imagePullSecrets": [{"name": "shared"}], "containers": [{"name": "x", "image": "x:1"}]})");
  Json pod =
      Inject(Pod(R"({"spec": {"imagePullSecrets": [{"name": "own"}, {"name": "reg"}]}})"), {a, b});
  EXPECT_THAT(Names(pod["spec"]["imagePullSecrets"]), ElementsAre("own", "reg", "shared"));
  EXPECT_FALSE(Inject(Pod(), {Set("s")})["spec"].contains("imagePullSecrets"));
}

TEST(SidecarSetInjectTest, PatchPodMetadataTable) {
  struct Case {
    std::string name, policy, value, pod_value;  // pod_value "" = absent
    std::string want;
  };
  const std::vector<Case> cases = {
      {"Retain sets a missing key", "Retain", "v", "", "v"},
      {"Retain keeps the pod's", "Retain", "v", "mine", "mine"},
      {"absent policy is Retain", "", "v", "mine", "mine"},
      {"Overwrite", "Overwrite", "v", "mine", "v"},
      {"MergePatchJson into a JSON value", "MergePatchJson", R"({"b":2,"c":null})",
       R"({"a":1,"c":3})", R"({"a":1,"b":2})"},
      {"MergePatchJson without a pod value", "MergePatchJson", R"({"b":2})", "", R"({"b":2})"},
  };
  for (const Case& c : cases) {
    Json patch = {{"annotations", {{"k", c.value}}}};
    if (!c.policy.empty()) patch["patchPolicy"] = c.policy;
    Json ss = Set("s");
    ss["spec"]["patchPodMetadata"] = Json::array({patch});
    Json pod = Pod();
    if (!c.pod_value.empty()) pod["metadata"]["annotations"]["k"] = c.pod_value;
    Json out = Inject(pod, {ss});
    EXPECT_EQ(out["metadata"]["annotations"]["k"], c.want) << c.name;
  }
  Json ss = Set(
      "s",
      R"({"patchPodMetadata": [{"annotations": {"k": "{"}, "patchPolicy": "MergePatchJson"}]})");
  Json pod = Pod(R"({"metadata": {"annotations": {"k": "{}"}}})");
  const Json before = pod;
  absl::StatusOr<InjectionResult> r = InjectSidecars(&pod, {ss}, kNow);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pod, before);
}

// ---- Annotations ------------------------------------------------------------------------------

TEST(SidecarSetInjectTest, HashAnnotationsShape) {
  Json ss = Set("s");
  ss["status"]["latestRevision"] = "s-abc";
  Json pod = Inject(Pod(), {ss});
  const Json& anns = pod["metadata"]["annotations"];
  const std::string hash = SidecarSetHash(ss);
  const std::string wo = SidecarSetHashWithoutImage(ss);
  // OpenKruise's field order (Go struct order); the set names in sorted order.
  EXPECT_EQ(anns["kruise.io/sidecarset-hash"],
            std::string(R"({"s":{"updateTimestamp":")") + kNowText + R"(","hash":")" + hash +
                R"(","sidecarSetName":"s","sidecarList":["log"],"controllerRevision":"s-abc"}})");
  EXPECT_EQ(anns["kruise.io/sidecarset-hash-without-image"],
            std::string(R"({"s":{"updateTimestamp":")") + kNowText + R"(","hash":")" + wo +
                R"(","sidecarSetName":"s","sidecarList":["log"]}})");
  EXPECT_EQ(anns["kruise.io/sidecarset-injected-list"], "s");
  // The set's recorded annotation is what the pod gets.
  ss["metadata"]["annotations"] = {{"kruise.io/sidecarset-hash", "from-openkruise"},
                                   {"kruise.io/sidecarset-hash-without-image", "wo-openkruise"}};
  Json pod2 = Inject(Pod(), {ss});
  EXPECT_EQ(Ann(pod2, "kruise.io/sidecarset-hash")["s"]["hash"], "from-openkruise");
  EXPECT_EQ(Ann(pod2, "kruise.io/sidecarset-hash-without-image")["s"]["hash"], "wo-openkruise");
}

TEST(SidecarSetInjectTest, ExistingAnnotationsMerged) {
  Json pod = Pod(R"({"metadata": {"annotations": {
      "kruise.io/sidecarset-hash": "{\"old\":\"h1\"}",
      "kruise.io/sidecarset-hash-without-image": "{\"z\":{\"hash\":\"w\",\"sidecarSetName\":\"z\"}}",
      "kruise.io/sidecarset-injected-list": "old,z"}}})");
  Json out = Inject(pod, {Set("s")});
  Json h = Ann(out, "kruise.io/sidecarset-hash");
  EXPECT_EQ(h["old"]["hash"], "h1");  // older name -> hash form converted
  EXPECT_EQ(h["old"]["sidecarSetName"], "old");
  EXPECT_TRUE(h.contains("s"));
  Json w = Ann(out, "kruise.io/sidecarset-hash-without-image");
  EXPECT_EQ(w["z"], Json::parse(R"({"hash":"w","sidecarSetName":"z"})"));
  EXPECT_EQ(out["metadata"]["annotations"]["kruise.io/sidecarset-injected-list"], "old,s,z");

  for (const char* bad : {"not json", "[1]", "{\"a\": 5}"}) {
    Json p = Pod();
    p["metadata"]["annotations"]["kruise.io/sidecarset-hash"] = bad;
    const Json before = p;
    absl::StatusOr<InjectionResult> r = InjectSidecars(&p, {Set("s")}, kNow);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(p, before) << bad;
  }
}

TEST(SidecarSetInjectTest, HotUpgrade) {
  Json ss = Set("s", R"({"containers": [{"name": "mesh", "image": "envoy:2",
      "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty:1"}}]})");
  Json pod = Inject(Pod(), {ss});
  EXPECT_THAT(Names(pod["spec"]["containers"]), ElementsAre("mesh-1", "mesh-2", "app"));
  EXPECT_EQ((*Container(pod, "mesh-1"))["image"], "envoy:2");
  EXPECT_EQ((*Container(pod, "mesh-2"))["image"], "empty:1");
  EXPECT_EQ((*Container(pod, "mesh-2"))["env"][2]["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.annotations['versionalt.sidecarset.kruise.io/mesh-2']");
  EXPECT_THAT(Names((*Container(pod, "mesh-1"))["env"]),
              ElementsAre("IS_INJECTED", "SIDECARSET_VERSION", "SIDECARSET_VERSION_ALT"));
  const Json& anns = pod["metadata"]["annotations"];
  EXPECT_EQ(anns["version.sidecarset.kruise.io/mesh-1"], "1");
  EXPECT_EQ(anns["versionalt.sidecarset.kruise.io/mesh-1"], "0");
  EXPECT_EQ(anns["version.sidecarset.kruise.io/mesh-2"], "0");
  EXPECT_EQ(anns["versionalt.sidecarset.kruise.io/mesh-2"], "1");
  EXPECT_EQ(anns["kruise.io/sidecarset-working-hotupgrade-container"], R"({"mesh":"mesh-1"})");
  EXPECT_EQ(Ann(pod, "kruise.io/sidecarset-hash")["s"]["sidecarList"], Json({"mesh"}));
}

// ---- Hashes -----------------------------------------------------------------------------------

TEST(SidecarSetHashTest, FormatAndStability) {
  Json ss = Set("s");
  const std::string h = SidecarSetHash(ss);
  ASSERT_EQ(h.size(), 64u);
  EXPECT_EQ(h.find_first_not_of("bcdfghjklmnpqrstvwxz2456789"), std::string::npos);
  // Same across defaulting, key order, a float written for an integer, and fields that are not
  // the containers'.
  EXPECT_EQ(SidecarSetHash(DefaultSidecarSet(ss)), h);
  EXPECT_EQ(SidecarSetHash(DefaultSidecarSet(DefaultSidecarSet(ss))), h);
  Json reordered = Json::parse(ss.dump());  // nlohmann sorts keys; the text order does not matter
  EXPECT_EQ(SidecarSetHash(reordered), h);
  Json other_fields = ss;
  other_fields["metadata"]["labels"] = {{"x", "y"}};
  other_fields["spec"]["updateStrategy"] = {{"partition", 3}};
  other_fields["spec"]["volumes"] = Json::array();
  other_fields["status"] = {{"matchedPods", 4}};
  EXPECT_EQ(SidecarSetHash(other_fields), h);
  Json empties = ss;
  empties["spec"]["containers"][0]["args"] = Json::array();
  empties["spec"]["containers"][0]["workingDir"] = "";
  empties["spec"]["containers"][0]["securityContext"] = Json::object();
  empties["spec"]["containers"][0]["stdin"] = nullptr;
  EXPECT_EQ(SidecarSetHash(empties), h);
  Json with_port = Set("s", R"({"containers": [{"name": "log", "image": "fluentd:1",
      "ports": [{"containerPort": 80}]}]})");
  Json with_float_port = with_port;
  with_float_port["spec"]["containers"][0]["ports"][0]["containerPort"] = 80.0;
  EXPECT_EQ(SidecarSetHash(with_float_port), SidecarSetHash(with_port));
  EXPECT_EQ(SidecarSetHash(Json("garbage")), "");
  EXPECT_EQ(SidecarSetHash(Json::object()), "");
}

TEST(SidecarSetHashTest, WhatChangesWhich) {
  struct Case {
    std::string name, spec_patch;
    bool hash_changes, without_image_changes;
  };
  const std::vector<Case> cases = {
      {"image", R"({"containers": [{"name": "log", "image": "fluentd:2",
          "volumeMounts": [{"name": "logs", "mountPath": "/var/log/app"}]}]})",
       true, false},
      {"command", R"({"containers": [{"name": "log", "image": "fluentd:1", "command": ["x"],
          "volumeMounts": [{"name": "logs", "mountPath": "/var/log/app"}]}]})",
       true, true},
      {"podInjectPolicy", R"({"containers": [{"name": "log", "image": "fluentd:1",
          "podInjectPolicy": "AfterAppContainer",
          "volumeMounts": [{"name": "logs", "mountPath": "/var/log/app"}]}]})",
       true, true},
      {"plain init container", R"({"initContainers": [{"name": "i", "image": "x:1"}]})", false,
       false},
      {"native sidecar init container",
       R"({"initContainers": [{"name": "i", "image": "x:1", "restartPolicy": "Always"}]})", true,
       true},
      {"volumes", R"({"volumes": [{"name": "logs", "hostPath": {"path": "/x"}}]})", false, false},
      {"selector", R"({"selector": {"matchLabels": {"app": "db"}}})", false, false},
  };
  const Json base = Set("s");
  for (const Case& c : cases) {
    Json changed = Set("s", c.spec_patch);
    EXPECT_EQ(SidecarSetHash(changed) != SidecarSetHash(base), c.hash_changes) << c.name;
    EXPECT_EQ(SidecarSetHashWithoutImage(changed) != SidecarSetHashWithoutImage(base),
              c.without_image_changes)
        << c.name;
  }
  // A native sidecar's image is left out of the without-image hash too.
  Json n1 =
      Set("s", R"({"initContainers": [{"name": "i", "image": "x:1", "restartPolicy": "Always"}]})");
  Json n2 =
      Set("s", R"({"initContainers": [{"name": "i", "image": "x:2", "restartPolicy": "Always"}]})");
  EXPECT_NE(SidecarSetHash(n1), SidecarSetHash(n2));
  EXPECT_EQ(SidecarSetHashWithoutImage(n1), SidecarSetHashWithoutImage(n2));
  // Recorded hashes prefer the set's annotations.
  Json annotated = base;
  annotated["metadata"]["annotations"] = {{"kruise.io/sidecarset-hash", "h"}};
  EXPECT_EQ(SidecarSetRecordedHash(annotated), "h");
  EXPECT_EQ(SidecarSetRecordedHashWithoutImage(annotated), SidecarSetHashWithoutImage(base));
}

// The mutating webhook's stamp: computed on CREATE; on UPDATE a hash that did not change keeps
// the value the set carries (OpenKruise's, for a migrated set).
TEST(SidecarSetHashTest, WebhookStampsAndKeepsUnchangedHashes) {
  const Json base = DefaultSidecarSet(Set("s"));
  Json created = WithSidecarSetHashes(base, nullptr);
  EXPECT_EQ(kube::Annotation(created, "kruise.io/sidecarset-hash"), SidecarSetHash(base));
  EXPECT_EQ(kube::Annotation(created, "kruise.io/sidecarset-hash-without-image"),
            SidecarSetHashWithoutImage(base));
  // A set stamped by OpenKruise: a label change keeps both of its values.
  Json migrated = base;
  migrated["metadata"]["annotations"] = {{"kruise.io/sidecarset-hash", "ok-hash"},
                                         {"kruise.io/sidecarset-hash-without-image", "ok-wo"}};
  Json relabelled = migrated;
  relabelled["metadata"]["labels"] = {{"team", "x"}};
  Json kept = WithSidecarSetHashes(relabelled, &migrated);
  EXPECT_EQ(kube::Annotation(kept, "kruise.io/sidecarset-hash"), "ok-hash");
  EXPECT_EQ(kube::Annotation(kept, "kruise.io/sidecarset-hash-without-image"), "ok-wo");
  // An image change recomputes the hash and keeps the without-image value.
  Json new_image = migrated;
  new_image["spec"]["containers"][0]["image"] = "fluentd:9";
  Json imaged = WithSidecarSetHashes(new_image, &migrated);
  EXPECT_EQ(kube::Annotation(imaged, "kruise.io/sidecarset-hash"), SidecarSetHash(new_image));
  EXPECT_EQ(kube::Annotation(imaged, "kruise.io/sidecarset-hash-without-image"), "ok-wo");
  // A user cannot pin a stale hash on CREATE; garbage passes through.
  Json forged = base;
  forged["metadata"]["annotations"] = {{"kruise.io/sidecarset-hash", "forged"}};
  EXPECT_EQ(kube::Annotation(WithSidecarSetHashes(forged, nullptr), "kruise.io/sidecarset-hash"),
            SidecarSetHash(base));
  EXPECT_EQ(WithSidecarSetHashes(Json("x"), nullptr), Json("x"));
  Json no_meta = {{"spec", base["spec"]}, {"metadata", 3}};
  EXPECT_NO_THROW(WithSidecarSetHashes(no_meta, &no_meta));
}

// ---- Conflicts --------------------------------------------------------------------------------

TEST(SidecarSetInjectTest, ConflictsTable) {
  struct Case {
    std::string name, a_patch, b_patch;
    std::string want;  // "" = no conflict
  };
  const std::vector<Case> cases = {
      {"same container, same content", "{}", "{}", ""},
      {"same container, other image", "{}",
       R"({"containers": [{"name": "log", "image": "fluentd:2",
           "volumeMounts": [{"name": "logs", "mountPath": "/var/log/app"}]}]})",
       "both inject container log"},
      {"same init container, other content",
       R"({"initContainers": [{"name": "i", "image": "x:1"}]})",
       R"({"initContainers": [{"name": "i", "image": "x:2"}], "containers": [{"name": "o", "image": "x:1"}]})",
       "both inject container i"},
      {"same volume, other definition", "{}",
       R"({"containers": [{"name": "o", "image": "x:1", "volumeMounts": [{"name": "logs", "mountPath": "/l"}]}],
           "volumes": [{"name": "logs", "hostPath": {"path": "/l"}}]})",
       "define volume logs differently"},
      {"Overwrite vs Retain, different values",
       R"({"patchPodMetadata": [{"annotations": {"k": "1"}, "patchPolicy": "Overwrite"}]})",
       R"({"containers": [{"name": "o", "image": "x:1"}],
           "patchPodMetadata": [{"annotations": {"k": "2"}}]})",
       "patch pod annotation k"},
      {"MergePatchJson vs Overwrite",
       R"({"patchPodMetadata": [{"annotations": {"k": "{}"}, "patchPolicy": "MergePatchJson"}]})",
       R"({"containers": [{"name": "o", "image": "x:1"}],
           "patchPodMetadata": [{"annotations": {"k": "{\"a\":1}"}, "patchPolicy": "Overwrite"}]})",
       "patch pod annotation k"},
      {"Retain vs Retain never conflicts", R"({"patchPodMetadata": [{"annotations": {"k": "1"}}]})",
       R"({"containers": [{"name": "o", "image": "x:1"}], "patchPodMetadata": [{"annotations": {"k": "2"}}]})",
       ""},
      {"same value never conflicts",
       R"({"patchPodMetadata": [{"annotations": {"k": "1"}, "patchPolicy": "Overwrite"}]})",
       R"({"containers": [{"name": "o", "image": "x:1"}],
           "patchPodMetadata": [{"annotations": {"k": "1"}, "patchPolicy": "Overwrite"}]})",
       ""},
  };
  for (const Case& c : cases) {
    Json pod = Pod();
    const Json before = pod;
    absl::StatusOr<InjectionResult> r =
        InjectSidecars(&pod, {Set("a", c.a_patch), Set("b", c.b_patch)}, kNow);
    if (c.want.empty()) {
      EXPECT_TRUE(r.ok()) << c.name << ": " << r.status();
      continue;
    }
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << c.name;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.want)) << c.name;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("SidecarSets a and b")) << c.name;
    EXPECT_EQ(pod, before) << c.name;
  }
  // Identical duplicates are injected once.
  Json pod = Inject(Pod(), {Set("a"), Set("b")});
  EXPECT_THAT(Names(pod["spec"]["containers"]), ElementsAre("log", "app"));
  EXPECT_EQ(Ann(pod, "kruise.io/sidecarset-hash").size(), 2u);
}

// ---- Idempotence and robustness ---------------------------------------------------------------

TEST(SidecarSetInjectTest, Idempotent) {
  const std::vector<Json> sets = {
      Set("a", R"({"containers": [{"name": "log", "image": "fluentd:1",
          "shareVolumePolicy": {"type": "enabled"},
          "transferEnv": [{"sourceContainerName": "app", "envName": "REGION"}],
          "volumeMounts": [{"name": "logs", "mountPath": "/var/log/app"}]},
          {"name": "tail", "image": "t:1", "podInjectPolicy": "AfterAppContainer"}],
          "initContainers": [{"name": "init", "image": "i:1"}],
          "imagePullSecrets": [{"name": "reg"}],
          "patchPodMetadata": [{"annotations": {"m": "{\"a\":1}"}, "patchPolicy": "MergePatchJson"},
                               {"annotations": {"o": "v"}, "patchPolicy": "Overwrite"}]})"),
      Set("b", R"({"containers": [{"name": "mesh", "image": "envoy:1",
          "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "empty:1"}}]})"),
  };
  const Json once = Inject(Pod(), sets);
  EXPECT_EQ(Inject(once, sets), once);
  EXPECT_THAT(Names(once["spec"]["containers"]),
              ElementsAre("log", "mesh-1", "mesh-2", "app", "tail"));
}

TEST(SidecarSetInjectTest, NoCopyGivesTheSameResult) {
  const Json a = Set("a"), b = Set("b", R"({"containers": [{"name": "x", "image": "x:1"}]})");
  Json p1 = Pod(), p2 = Pod();
  ASSERT_TRUE(InjectSidecars(&p1, {b, a}, kNow).ok());
  ASSERT_TRUE(InjectSidecarsNoCopy(&p2, {&b, &a}, kNow).ok());
  EXPECT_EQ(p1, p2);
}

// What the pod webhook sends: element-wise operations on the unmodified pod, never a list or the
// annotations replaced whole when the pod has them.
TEST(SidecarSetInjectTest, PlanIsASmallPatchOfThePod) {
  const Json a = Set("a", R"({"containers": [{"name": "log", "image": "fluentd:1",
      "volumeMounts": [{"name": "logs", "mountPath": "/var/log/app"}]},
      {"name": "tail", "image": "t:1", "podInjectPolicy": "AfterAppContainer"}],
      "initContainers": [{"name": "init", "image": "i:1"}],
      "imagePullSecrets": [{"name": "reg"}, {"name": "old"}]})");
  const Json pod = Pod(R"({"metadata": {"annotations": {"keep": "me"}},
      "spec": {"imagePullSecrets": [{"name": "old"}],
               "containers": [{"name": "app", "image": "nginx:1"},
                              {"name": "tail", "image": "stale:0"}]}})");
  Json patch;
  absl::StatusOr<InjectionResult> r = PlanSidecarInjection(pod, {&a}, kNow, false, &patch);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<std::string> ops;
  for (const Json& op : patch) ops.push_back(absl::StrCat(op["op"].get<std::string>(), " ",
                                                          op["path"].get<std::string>()));
  EXPECT_THAT(ops, ElementsAre("add /spec/initContainers",  // the pod had none: the whole list
                               "replace /spec/containers/1",  // same name: where it is
                               "add /spec/containers/0",
                               "add /spec/volumes/-",
                               "add /spec/imagePullSecrets/-",  // "old" is there already
                               "add /metadata/annotations/kruise.io~1sidecarset-hash",
                               "add /metadata/annotations/kruise.io~1sidecarset-hash-without-image",
                               "add /metadata/annotations/kruise.io~1sidecarset-injected-list"));
  EXPECT_THAT(r->containers, ElementsAre("init", "log", "tail"));
  // Applied, the patch gives what InjectSidecars makes of the pod.
  Json injected = pod;
  ASSERT_TRUE(InjectSidecars(&injected, {a}, kNow).ok());
  EXPECT_EQ(pod.patch(patch), injected);
  EXPECT_THAT(Names(injected["spec"]["containers"]), ElementsAre("log", "app", "tail"));
  EXPECT_EQ(injected["metadata"]["annotations"]["keep"], "me");
  // A pod without metadata: the annotations come in one add.
  Json bare = Pod();
  bare.erase("metadata");
  ASSERT_TRUE(PlanSidecarInjection(bare, {&a}, kNow, false, &patch).ok());
  EXPECT_EQ(patch.back()["path"], "/metadata");
}

TEST(SidecarSetInjectTest, NoSetsOrBadInput) {
  Json pod = Pod();
  const Json before = pod;
  absl::StatusOr<InjectionResult> r = InjectSidecars(&pod, {}, kNow);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(pod, before);
  r = InjectSidecars(&pod, {Json("x"), Json::object()}, kNow);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->notes.size(), 2u);
  EXPECT_EQ(pod, before);
  EXPECT_EQ(InjectSidecars(nullptr, {Set("s")}, kNow).status().code(),
            absl::StatusCode::kInvalidArgument);
  for (const char* bad : {R"("pod")", R"({"spec": 1})", R"({"spec": {"containers": {}}})",
                          R"({"spec": {"containers": [], "volumes": "v"}})",
                          R"({"metadata": {"annotations": {"a": 1}}, "spec": {}})"}) {
    Json p = Json::parse(bad);
    EXPECT_EQ(InjectSidecars(&p, {Set("s")}, kNow).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

Json RandomValue(std::mt19937* rng, int depth) {
  switch ((*rng)() % (depth > 2 ? 6 : 8)) {
    case 0:
      return nullptr;
    case 1:
      return static_cast<int>((*rng)() % 5) - 1;
    case 2:
      return "x";
    case 3:
      return "";
    case 4:
      return true;
    case 5:
      return 1.5;
    case 6:
      return Json::array({RandomValue(rng, depth + 1), "Always"});
    default:
      return Json{{"name", RandomValue(rng, depth + 1)}, {"type", "enabled"}};
  }
}

void Mutate(Json* node, std::mt19937* rng, int depth) {
  if (node->is_object()) {
    for (auto it = node->begin(); it != node->end(); ++it) {
      if ((*rng)() % 6 == 0) {
        *it = RandomValue(rng, depth);
      } else {
        Mutate(&*it, rng, depth + 1);
      }
    }
  } else if (node->is_array()) {
    for (Json& e : *node) Mutate(&e, rng, depth + 1);
  }
}

TEST(SidecarSetInjectTest, AnyJsonIsSafe) {
  std::mt19937 rng(15);
  const Json rich_set = Set("s", R"({
      "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team"}},
      "initContainers": [{"name": "i", "image": "b", "restartPolicy": "Always",
        "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "e"}}],
      "containers": [{"name": "c", "image": "b:1", "shareVolumePolicy": {"type": "enabled"},
        "shareVolumeDevicePolicy": {"type": "enabled"},
        "upgradeStrategy": {"upgradeType": "HotUpgrade", "hotUpgradeEmptyImage": "e"},
        "transferEnv": [{"sourceContainerNameFrom": {"fieldRef": {"fieldPath": "metadata.labels['a']"}},
                         "envNames": ["A"]}, {"sourceContainerName": "app", "envName": "REGION"}],
        "volumeMounts": [{"name": "v", "mountPath": "/v"}]}],
      "imagePullSecrets": [{"name": "s"}],
      "patchPodMetadata": [{"annotations": {"k": "{}"}, "patchPolicy": "MergePatchJson"}],
      "volumes": [{"name": "v", "emptyDir": {}}]})");
  const Json rich_pod = Pod(R"j({"metadata": {"labels": {"a": "app"}, "annotations": {
      "k": "{\"x\":1}", "kruise.io/sidecarset-hash": "{\"o\":\"h\"}",
      "kruise.io/sidecarset-working-hotupgrade-container": "{\"c\":\"c-2\"}"}},
      "spec": {"initContainers": [{"name": "own", "image": "i"}],
               "containers": [{"name": "app", "image": "n", "env": [{"name": "A", "value": "1"}],
                 "volumeMounts": [{"name": "data", "mountPath": "/d", "subPathExpr": "$(A)"}],
                 "volumeDevices": [{"name": "b", "devicePath": "/dev/b"}]}]}})j");
  const Json ns = Namespace("team", {{"k", "v"}});
  int injected = 0, refused = 0;
  for (int i = 0; i < 2000; ++i) {
    Json ss = rich_set, pod = rich_pod, other = Set("o");
    Mutate(&ss, &rng, 0);
    Mutate(&pod, &rng, 0);
    if (i % 3 == 0) Mutate(&other, &rng, 0);
    EXPECT_NO_THROW(SidecarSetMatchesPod(ss, pod, &ns, "kruise-system"));
    EXPECT_NO_THROW(SidecarSetMatchesPod(ss, pod, nullptr, ""));
    EXPECT_NO_THROW(SidecarSetHash(ss));
    EXPECT_NO_THROW(SidecarSetRecordedHashWithoutImage(ss));
    const Json before = pod;
    absl::StatusOr<InjectionResult> r;
    EXPECT_NO_THROW(r = InjectSidecars(&pod, {ss, other}, kNow));
    if (!r.ok()) {
      ++refused;
      EXPECT_EQ(pod, before);
    } else {
      if (!r->containers.empty()) ++injected;
      // Whatever was injected, doing it again changes nothing.
      Json again = pod;
      absl::StatusOr<InjectionResult> r2;
      EXPECT_NO_THROW(r2 = InjectSidecars(&again, {ss, other}, kNow));
      if (r2.ok()) {
        EXPECT_EQ(again, pod) << ss.dump() << "\n" << before.dump();
      }
    }
  }
  // Both paths are exercised.
  EXPECT_GT(injected, 200) << refused;
  EXPECT_GT(refused, 20) << injected;
}

}  // namespace inject_test
}  // namespace kruise::manager::sidecarset
