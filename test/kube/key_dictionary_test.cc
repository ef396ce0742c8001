#include "kube/key_dictionary.h"

#include <gtest/gtest.h>

#include "kube/informer.h"
#include "kube/store.h"

namespace kruise::kube {
namespace {

TEST(KeyDictionaryTest, KnownKeysBecomeTwoBytesAndComeBack) {
  Json obj = {{"metadata", {{"name", "a"}, {"labels", {{"app", "web"}}}}},
              {"status", {{"conditions", Json::array({{{"lastTransitionTime", "t"}}})}}}};
  Json compact = CompactKeys(obj);
  for (auto it = compact.begin(); it != compact.end(); ++it) {
    EXPECT_EQ(it.key().size(), 2u) << it.key();
  }
  EXPECT_LT(Json::to_msgpack(compact).size(), Json::to_msgpack(obj).size());
  ExpandKeys(compact);
  EXPECT_EQ(compact, obj);
}

TEST(KeyDictionaryTest, UnknownAndHostileKeysRoundTrip) {
  // Keys that look like our codes or escapes must survive unchanged (CRDs may carry anything).
  Json obj = {{std::string("\x01\x05"), 1},
              {std::string("\x02xyz"), 2},
              {std::string("\x01"), 3},
              {std::string("\x02"), 4},
              {"", 5},
              {"example.com/annotation", {{"nested", Json::array({{{"\x01\x01", true}}})}}}};
  Json copy = CompactKeys(obj);
  ExpandKeys(copy);
  EXPECT_EQ(copy, obj);
}

TEST(KeyDictionaryTest, StoreRoundTripIsLosslessAndSmaller) {
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", "p"},
                {"namespace", "ns"},
                {"resourceVersion", "7"},
                {"ownerReferences", Json::array({{{"apiVersion", "apps.kruise.io/v1alpha1"},
                                                  {"kind", "CloneSet"},
                                                  {"name", "c"},
                                                  {"uid", "u"},
                                                  {"controller", true},
                                                  {"blockOwnerDeletion", true}}})}}},
              {"status",
               {{"containerStatuses", Json::array({{{"containerID", "containerd://x"},
                                                    {"restartCount", 2},
                                                    {"state", {{"running", {{"startedAt", "t"}}}}},
                                                    {"\x01weird", nullptr}}})}}}};
  EncodedObject e = EncodedObject::Encode(pod);
  EXPECT_LT(e.size(), Json::to_msgpack(pod).size() * 3 / 4);
  EXPECT_EQ(*e.Decode(), pod);
}

TEST(CompactPodTest, DropsUnreadFieldsKeepsWhatControllersUse) {
  Json pod = Json::parse(R"({
    "metadata": {"name": "p", "namespace": "n", "resourceVersion": "1",
                 "managedFields": [{"manager": "kubelet"}]},
    "spec": {"nodeName": "node-1", "schedulerName": "default-scheduler",
             "readinessGates": [{"conditionType": "KruisePodReady"}],
             "containers": [{"name": "c", "image": "busybox", "args": ["x"], "command": ["sh"],
                             "env": [{"name": "A", "value": "b"}],
                             "ports": [{"containerPort": 80}],
                             "lifecycle": {"preStop": {"exec": {"command": ["true"]}}}}]},
    "status": {"podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}],
               "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": null}],
               "containerStatuses": [{"name": "c", "lastState": {}, "restartCount": 1}]}})");
  CompactPodForControllers(pod);
  EXPECT_FALSE(pod["metadata"].contains("managedFields"));
  EXPECT_FALSE(pod["spec"].contains("schedulerName"));
  const Json& c = pod["spec"]["containers"][0];
  EXPECT_FALSE(c.contains("args"));
  EXPECT_FALSE(c.contains("command"));
  EXPECT_FALSE(c.contains("env"));
  EXPECT_EQ(c["image"], "busybox");
  EXPECT_EQ(c["ports"][0]["containerPort"], 80);
  EXPECT_TRUE(c["lifecycle"]["preStop"].contains("exec"));
  EXPECT_EQ(pod["spec"]["readinessGates"][0]["conditionType"], "KruisePodReady");
  EXPECT_FALSE(pod["status"].contains("podIPs"));
  EXPECT_EQ(pod["status"]["podIP"], "10.0.0.1");
  EXPECT_FALSE(pod["status"]["conditions"][0].contains("lastProbeTime"));
  EXPECT_FALSE(pod["status"]["containerStatuses"][0].contains("lastState"));
  EXPECT_EQ(pod["status"]["containerStatuses"][0]["restartCount"], 1);
}

}  // namespace
}  // namespace kruise::kube
