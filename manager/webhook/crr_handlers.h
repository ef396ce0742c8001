#pragma once

// Admission for ContainerRecreateRequest (apps.kruise.io), as OpenKruise does it.
//
// CrrMutator (/mutate-apps-kruise-io-v1alpha1-containerrecreaterequest, CREATE):
//   * rejects: no spec.podName, no containers, duplicated or unknown container names, a bad
//     strategy.failurePolicy (Fail|Ignore), negative grace/minStarted/ttl values,
//     activeDeadlineSeconds < 3, a pod that is missing, terminating, finished or not scheduled,
//     and a container without a containerID in the pod status (not started yet);
//   * defaults strategy.failurePolicy to Fail and strategy.terminationGracePeriodSeconds to the
//     pod's;
//   * sets labels crr.apps.kruise.io/node-name, crr.apps.kruise.io/pod-uid and
//     crr.apps.kruise.io/active=true;
//   * for each container copies the pod container's lifecycle.preStop, its ports when the preStop
//     is an httpGet (a named port must resolve on the node), and statusContext {containerID,
//     restartCount} from the pod status.
//   Other operations are allowed unchanged. The answer is a JSON Patch.
// CrrValidator (/validate-apps-kruise-io-v1alpha1-containerrecreaterequest, CREATE/UPDATE):
//   CREATE repeats the static checks; UPDATE rejects any change of spec and of the pod-uid and
//   node-name labels.
// Both are also served on OpenKruise master's version-less paths (deploy/ uses those).
//
// The pod is read through PodReader. The manager uses ApiPodReader, a direct GET per CRR create:
// the webhook runs in every replica, and caching all pods in each of them only for this would
// cost far more memory than the rare GET; a GET is also never stale (a CRR is usually created
// right after looking at the pod).
//
// Thread-safety: handlers are stateless apart from the reader, which must be thread-safe.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kube/client.h"
#include "kube/kruise_api.h"
#include "manager/webhook/admission.h"

namespace kruise::manager::webhook {

using kube::kCrrActiveLabel;
using kube::kCrrNodeNameLabel;
using kube::kCrrPodUidLabel;

inline constexpr char kCrrMutatePath[] = "/mutate-apps-kruise-io-v1alpha1-containerrecreaterequest";
inline constexpr char kCrrValidatePath[] =
    "/validate-apps-kruise-io-v1alpha1-containerrecreaterequest";
inline constexpr char kCrrMutatePathVersionless[] =
    "/mutate-apps-kruise-io-containerrecreaterequest";
inline constexpr char kCrrValidatePathVersionless[] =
    "/validate-apps-kruise-io-containerrecreaterequest";

class PodReader {
 public:
  virtual ~PodReader() = default;
  // The pod, kNotFound when it does not exist, other errors when it cannot be read. Blocking,
  // thread-safe.
  virtual absl::StatusOr<Json> GetPod(const std::string& ns, const std::string& name) = 0;
};

// A GET on the API server per call; the pod comes without metadata.managedFields.
class ApiPodReader final : public PodReader {
 public:
  explicit ApiPodReader(kube::KubeClient* client) : client_(client) {}
  absl::StatusOr<Json> GetPod(const std::string& ns, const std::string& name) override;

 private:
  kube::KubeClient* client_;
};

class CrrMutator final : public Handler {
 public:
  explicit CrrMutator(PodReader* pods) : pods_(pods) {}
  AdmissionResponse Handle(const AdmissionRequest& request) override;

 private:
  PodReader* pods_;
};

class CrrValidator final : public Handler {
 public:
  AdmissionResponse Handle(const AdmissionRequest& request) override;
};

// Registers both handlers on the versioned and version-less paths when `enabled` holds.
void RegisterCrrHandlers(HandlerRegistry* registry, PodReader* pods,
                         const std::function<bool()>& enabled = nullptr);

// The static spec checks shared by both handlers: "" when valid, else the reason.
std::string ValidateCrrSpec(const Json& spec);

}  // namespace kruise::manager::webhook
