#pragma once

// kruise-manager's composition root.
//
// Start-up order (kube::Manager does the middle part):
//   1. Kubernetes client (--kubeconfig or in-cluster; --rest-config-qps/burst);
//   2. /healthz + /readyz (--health-probe-addr) and /metrics (--metrics-addr) servers, started
//      before anything waits, so probes answer from the first second (/readyz fails until ready);
//   3. caches (informers of the registered controller groups) synced;
//   4. every replica: certificate manager (Secret, cert dir, caBundle of both webhook
//      configurations), then the HTTPS webhook server once certificates exist, then the readiness
//      gate "webhook-ready" opens after a real TLS round trip to our own /healthz;
//   5. leader election on the Lease (--enable-leader-election), then, behind the gate, the
//      controllers of every ControllerGroup (ControllerGroups()).
// /healthz is liveness (the process serves HTTP); /readyz is webhook readiness: certificates in
// place AND the TLS round trip answers 200.
// A stop request (SIGTERM) shuts down in reverse: controllers, the Lease is released, webhook
// server and certificate manager, caches, then the probe servers. Certificates not served within
// --webhook-initialize-timeout, an unbindable webhook port or a lost Lease end the process with 1.

#include <memory>
#include <stop_token>
#include <string>
#include <vector>

#include "manager/app/options.h"
#include "manager/controller_group.h"
#include "manager/webhook/admission.h"
#include "manager/webhook/crr_handlers.h"
#include "manager/webhook/pod_webhook.h"

namespace kruise::manager {

// The controller families of this binary, in registration order (the one place to add one).
std::vector<std::unique_ptr<ControllerGroup>> ControllerGroups(const ManagerConfig& config);

// The admission handlers of this binary (each behind its feature gate): ContainerRecreateRequest
// (KruiseDaemon) and ImagePullJob defaulting/validation (ImagePullJobGate), on OpenKruise's
// versioned and version-less paths; the pod webhook /mutate-pod (PodWebhook), which never
// mutates pods in kube-system or `own_namespace`; `pod_mutators` (SidecarSet injection) run in
// its chain after the readiness gate. With `fail_open`, /mutate-pod is failurePolicy Ignore
// (manager/webhook/fail_open.h: infrastructure failures allow with a warning).
void RegisterAdmissionHandlers(const FeatureGates& gates, webhook::PodReader* pods,
                               webhook::HandlerRegistry* registry,
                               const std::string& own_namespace = "",
                               std::vector<std::unique_ptr<webhook::PodMutator>> pod_mutators = {},
                               webhook::FailOpen* fail_open = nullptr);

// Runs until `stop` (returns 0) or a fatal error (logged; returns 1).
int RunManager(const ManagerConfig& config, std::stop_token stop);

}  // namespace kruise::manager
