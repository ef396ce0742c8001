// Realistic objects for seeding benchmarks: the shape (and roughly the size) of what a busy
// cluster's apiserver returns, including managedFields.

#include "absl/strings/str_cat.h"
#include "test/fakes/apiserver/fake_apiserver.h"

namespace kruise::testing {

using Json = nlohmann::json;

namespace {

Json Container(const std::string& name, const std::string& image, int index) {
  return {
      {"name", name},
      {"image", image},
      {"imagePullPolicy", "IfNotPresent"},
      {"args", {"--port=8080", "--log-level=info", absl::StrCat("--shard=", index % 16)}},
      {"ports", {{{"name", "http"}, {"containerPort", 8080}, {"protocol", "TCP"}}}},
      {"env",
       {{{"name", "POD_NAME"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}},
        {{"name", "POD_NAMESPACE"},
         {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.namespace"}}}}}},
        {{"name", "GOMAXPROCS"}, {"value", "2"}}}},
      {"resources",
       {{"requests", {{"cpu", "250m"}, {"memory", "256Mi"}}},
        {"limits", {{"cpu", "1"}, {"memory", "512Mi"}}}}},
      {"readinessProbe",
       {{"httpGet", {{"path", "/healthz"}, {"port", 8080}, {"scheme", "HTTP"}}},
        {"periodSeconds", 10},
        {"timeoutSeconds", 1},
        {"successThreshold", 1},
        {"failureThreshold", 3}}},
      {"volumeMounts",
       {{{"name", "kube-api-access"},
         {"mountPath", "/var/run/secrets/kubernetes.io/serviceaccount"},
         {"readOnly", true}}}},
      {"terminationMessagePath", "/dev/termination-log"},
      {"terminationMessagePolicy", "File"},
  };
}

Json ContainerStatus(const std::string& name, const std::string& image, int index) {
  return {{"name", name},
          {"image", image},
          {"imageID", absl::StrCat(image, "@sha256:", std::string(60, 'a'), index % 10, "bcd")},
          {"containerID", absl::StrCat("containerd://", std::string(56, 'f'), index % 100000)},
          {"ready", true},
          {"started", true},
          {"restartCount", index % 3},
          {"state", {{"running", {{"startedAt", "2024-01-01T00:00:10Z"}}}}},
          {"lastState", Json::object()}};
}

}  // namespace

Json MakeRealisticPod(const std::string& ns, const std::string& name, const std::string& node_name,
                      int index) {
  const std::string app = absl::StrCat("app-", index % 50);
  const std::string owner_uid =
      absl::StrCat("7c1d2f3e-0000-4000-8000-", absl::Hex(index % 50, absl::kZeroPad12));
  Json conditions = Json::array();
  for (const char* type : {"Initialized", "Ready", "ContainersReady", "PodScheduled"}) {
    conditions.push_back({{"type", type},
                          {"status", "True"},
                          {"lastProbeTime", nullptr},
                          {"lastTransitionTime", "2024-01-01T00:00:12Z"}});
  }
  Json managed_fields =
      Json::array({{{"manager", "kube-controller-manager"},
                    {"operation", "Update"},
                    {"apiVersion", "v1"},
                    {"time", "2024-01-01T00:00:00Z"},
                    {"fieldsType", "FieldsV1"},
                    {"fieldsV1",
                     {{"f:metadata",
                       {{"f:generateName", Json::object()},
                        {"f:labels", {{".", Json::object()}, {"f:app", Json::object()}}},
                        {"f:ownerReferences", {{".", Json::object()}}}}},
                      {"f:spec",
                       {{"f:containers", {{"k:{\"name\":\"main\"}", {{".", Json::object()}}}}},
                        {"f:dnsPolicy", Json::object()},
                        {"f:restartPolicy", Json::object()}}}}}},
                   {{"manager", "kubelet"},
                    {"operation", "Update"},
                    {"apiVersion", "v1"},
                    {"time", "2024-01-01T00:00:12Z"},
                    {"fieldsType", "FieldsV1"},
                    {"subresource", "status"},
                    {"fieldsV1",
                     {{"f:status",
                       {{"f:conditions", {{"k:{\"type\":\"Ready\"}", {{".", Json::object()}}}}},
                        {"f:containerStatuses", Json::object()},
                        {"f:hostIP", Json::object()},
                        {"f:phase", Json::object()},
                        {"f:podIP", Json::object()},
                        {"f:startTime", Json::object()}}}}}}});
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", name},
        {"namespace", ns},
        {"generateName", app + "-"},
        {"labels",
         {{"app", app},
          {"tier", index % 3 == 0 ? "frontend" : "backend"},
          {"pod-template-hash", "5d8f7c9b6d"},
          {"apps.kruise.io/controller-revision-hash", absl::StrCat(app, "-7f9c")}}},
        {"annotations",
         {{"kubernetes.io/psp", "restricted"},
          {"prometheus.io/scrape", "true"},
          {"prometheus.io/port", "9090"}}},
        {"ownerReferences",
         {{{"apiVersion", "apps.kruise.io/v1alpha1"},
           {"kind", "CloneSet"},
           {"name", app},
           {"uid", owner_uid},
           {"controller", true},
           {"blockOwnerDeletion", true}}}},
        {"managedFields", managed_fields}}},
      {"spec",
       {{"nodeName", node_name},
        {"containers",
         {Container("main", absl::StrCat("registry.example.com/team/", app, ":v1.2.3"), index),
          Container("sidecar", "registry.example.com/infra/log-agent:v0.9.1", index)}},
        {"volumes",
         {{{"name", "kube-api-access"},
           {"projected",
            {{"defaultMode", 420},
             {"sources",
              {{{"serviceAccountToken", {{"expirationSeconds", 3607}, {"path", "token"}}}},
               {{"configMap",
                 {{"name", "kube-root-ca.crt"},
                  {"items", {{{"key", "ca.crt"}, {"path", "ca.crt"}}}}}}}}}}}}}},
        {"restartPolicy", "Always"},
        {"terminationGracePeriodSeconds", 30},
        {"dnsPolicy", "ClusterFirst"},
        {"serviceAccountName", "default"},
        {"schedulerName", "default-scheduler"},
        {"priority", 0},
        {"enableServiceLinks", true},
        {"preemptionPolicy", "PreemptLowerPriority"},
        {"tolerations",
         {{{"key", "node.kubernetes.io/not-ready"},
           {"operator", "Exists"},
           {"effect", "NoExecute"},
           {"tolerationSeconds", 300}},
          {{"key", "node.kubernetes.io/unreachable"},
           {"operator", "Exists"},
           {"effect", "NoExecute"},
           {"tolerationSeconds", 300}}}}}},
      {"status",
       {{"phase", "Running"},
        {"conditions", conditions},
        {"hostIP", absl::StrCat("10.0.", (index / 250) % 250, ".", index % 250)},
        {"podIP", absl::StrCat("172.16.", (index / 250) % 250, ".", index % 250)},
        {"podIPs", {{{"ip", absl::StrCat("172.16.", (index / 250) % 250, ".", index % 250)}}}},
        {"startTime", "2024-01-01T00:00:05Z"},
        {"qosClass", "Burstable"},
        {"containerStatuses",
         {ContainerStatus("main", absl::StrCat("registry.example.com/team/", app, ":v1.2.3"),
                          index),
          ContainerStatus("sidecar", "registry.example.com/infra/log-agent:v0.9.1", index)}}}},
  };
}

Json MakeRealisticNode(const std::string& name, int index) {
  Json conditions = Json::array();
  for (const auto& [type, status] :
       std::vector<std::pair<const char*, const char*>>{{"MemoryPressure", "False"},
                                                        {"DiskPressure", "False"},
                                                        {"PIDPressure", "False"},
                                                        {"Ready", "True"}}) {
    conditions.push_back({{"type", type},
                          {"status", status},
                          {"lastHeartbeatTime", "2024-01-01T00:00:00Z"},
                          {"lastTransitionTime", "2024-01-01T00:00:00Z"},
                          {"reason", absl::StrCat("Kubelet", type)},
                          {"message", "kubelet is posting ready status"}});
  }
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", name},
            {"labels",
             {{"kubernetes.io/hostname", name},
              {"kubernetes.io/os", "linux"},
              {"kubernetes.io/arch", "amd64"},
              {"topology.kubernetes.io/zone", absl::StrCat("zone-", index % 3)}}}}},
          {"spec", {{"podCIDR", absl::StrCat("10.244.", index % 250, ".0/24")}}},
          {"status",
           {{"capacity", {{"cpu", "16"}, {"memory", "65843432Ki"}, {"pods", "110"}}},
            {"allocatable", {{"cpu", "15800m"}, {"memory", "64692456Ki"}, {"pods", "110"}}},
            {"conditions", conditions},
            {"addresses",
             {{{"type", "InternalIP"},
               {"address", absl::StrCat("10.0.", index / 250, ".", index % 250)}},
              {{"type", "Hostname"}, {"address", name}}}},
            {"nodeInfo",
             {{"kubeletVersion", "v1.26.0"},
              {"containerRuntimeVersion", "containerd://1.6.20"},
              {"osImage", "Debian GNU/Linux 12 (bookworm)"},
              {"architecture", "amd64"},
              {"operatingSystem", "linux"}}}}}};
}

}  // namespace kruise::testing
