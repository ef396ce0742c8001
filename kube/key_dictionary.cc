#include "kube/key_dictionary.h"

#include <array>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"

namespace kruise::kube {
namespace {

// Field names common in Pods, Nodes and the apps.kruise.io objects we cache. Append only.
constexpr std::string_view kKeys[] = {
    "apiVersion",
    "kind",
    "metadata",
    "spec",
    "status",
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "generateName",
    "controller",
    "blockOwnerDeletion",
    "containers",
    "initContainers",
    "image",
    "imagePullPolicy",
    "command",
    "args",
    "env",
    "value",
    "valueFrom",
    "ports",
    "containerPort",
    "protocol",
    "hostPort",
    "resources",
    "requests",
    "limits",
    "cpu",
    "memory",
    "lifecycle",
    "preStop",
    "postStart",
    "exec",
    "httpGet",
    "tcpSocket",
    "path",
    "port",
    "host",
    "scheme",
    "nodeName",
    "restartPolicy",
    "terminationGracePeriodSeconds",
    "dnsPolicy",
    "schedulerName",
    "serviceAccountName",
    "serviceAccount",
    "securityContext",
    "priority",
    "priorityClassName",
    "preemptionPolicy",
    "enableServiceLinks",
    "hostNetwork",
    "readinessGates",
    "conditionType",
    "nodeSelector",
    "affinity",
    "phase",
    "conditions",
    "type",
    "lastProbeTime",
    "lastTransitionTime",
    "lastHeartbeatTime",
    "reason",
    "message",
    "hostIP",
    "hostIPs",
    "podIP",
    "podIPs",
    "ip",
    "startTime",
    "qosClass",
    "containerStatuses",
    "initContainerStatuses",
    "containerID",
    "imageID",
    "ready",
    "started",
    "restartCount",
    "state",
    "lastState",
    "running",
    "waiting",
    "terminated",
    "startedAt",
    "finishedAt",
    "exitCode",
    "signal",
    "selector",
    "matchLabels",
    "matchExpressions",
    "key",
    "operator",
    "values",
    "replicas",
    "template",
    "updateStrategy",
    "revisionHistoryLimit",
    "observedGeneration",
    "readyReplicas",
    "availableReplicas",
    "updatedReplicas",
    "updatedReadyReplicas",
    "currentRevision",
    "updateRevision",
    "collisionCount",
    "labelSelector",
    "partition",
    "maxUnavailable",
    "maxSurge",
    "paused",
    "priorityStrategy",
    "scatterStrategy",
    "inPlaceUpdateStrategy",
    "gracePeriodSeconds",
    "pullSecrets",
    "pullPolicy",
    "backoffLimit",
    "timeoutSeconds",
    "activeDeadlineSeconds",
    "ttlSecondsAfterFinished",
    "images",
    "tags",
    "tag",
    "version",
    "createdAt",
    "imageStatuses",
    "progress",
    "completionTime",
    "desired",
    "succeeded",
    "failed",
    "pulling",
    "allocatable",
    "capacity",
    "addresses",
    "address",
    "nodeInfo",
    "daemonEndpoints",
    "taints",
    "effect",
    "timeAdded",
    "podCIDR",
    "podCIDRs",
    "providerID",
    "unschedulable",
    "volumes",
    "volumeMounts",
    "mountPath",
    "readOnly",
    "tolerations",
    "tolerationSeconds",
    "fieldRef",
    "fieldPath",
    "configMap",
    "secret",
    "secretName",
    "defaultMode",
    "items",
    "emptyDir",
    "hostPath",
    "projected",
    "sources",
    "strategy",
    "failurePolicy",
    "orderedRecreate",
    "forceRecreate",
    "minStartedSeconds",
    "unreadyGracePeriodSeconds",
    "podName",
    "statusContext",
    "containerRecreateStates",
    "isKilled",
    "sidecarSetHash",
};

static_assert(std::size(kKeys) < 255, "two-byte codes hold at most 254 keys");

constexpr char kCodeMark = '\x01';
constexpr char kEscapeMark = '\x02';

struct Tables {
  absl::flat_hash_map<std::string_view, std::string> encode;
  std::array<std::string_view, 256> decode{};
  Tables() {
    for (size_t i = 0; i < std::size(kKeys); ++i) {
      const char code = static_cast<char>(i + 1);
      encode.emplace(kKeys[i], std::string{kCodeMark, code});
      decode[static_cast<unsigned char>(code)] = kKeys[i];
    }
  }
};

const Tables& GetTables() {
  static const Tables* tables = new Tables();
  return *tables;
}

std::string EncodeKey(const std::string& key, const Tables& t) {
  if (auto it = t.encode.find(key); it != t.encode.end()) return it->second;
  if (!key.empty() && (key[0] == kCodeMark || key[0] == kEscapeMark)) {
    return std::string(1, kEscapeMark) + key;
  }
  return key;
}

std::string DecodeKey(const std::string& key, const Tables& t) {
  if (key.size() == 2 && key[0] == kCodeMark) {
    std::string_view k = t.decode[static_cast<unsigned char>(key[1])];
    if (!k.empty()) return std::string(k);
  }
  if (!key.empty() && key[0] == kEscapeMark) return key.substr(1);
  return key;
}

bool NeedsDecoding(const std::string& key) {
  return !key.empty() && (key[0] == kCodeMark || key[0] == kEscapeMark);
}

}  // namespace

Json CompactKeys(const Json& obj) {
  const Tables& t = GetTables();
  if (obj.is_object()) {
    Json out = Json::object();
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      out.emplace(EncodeKey(it.key(), t), CompactKeys(it.value()));
    }
    return out;
  }
  if (obj.is_array()) {
    Json out = Json::array();
    out.get_ref<Json::array_t&>().reserve(obj.size());
    for (const Json& v : obj) out.push_back(CompactKeys(v));
    return out;
  }
  return obj;
}

void ExpandKeys(Json& obj) {
  const Tables& t = GetTables();
  if (obj.is_object()) {
    auto& map = obj.get_ref<Json::object_t&>();
    bool rename = false;
    for (auto& [k, v] : map) {
      ExpandKeys(v);
      rename = rename || NeedsDecoding(k);
    }
    if (!rename) return;
    Json::object_t fresh;
    for (auto& [k, v] : map) fresh.emplace(DecodeKey(k, t), std::move(v));
    map = std::move(fresh);
  } else if (obj.is_array()) {
    for (Json& v : obj) ExpandKeys(v);
  }
}

}  // namespace kruise::kube
