#pragma once

// Sample pod handlers, doing the same work as the Go peer webhook (/work/shared/peers/go/webhook):
// PodSidecarMutator adds one container `injected-sidecar` (image sidecar:v1) and the label
// `injected=true` with a JSON Patch; PodAllowValidator allows everything. Used by the benchmark
// server and the tests; the real pod webhooks (readiness gates, SidecarSet, ...) come later.

#include "manager/webhook/admission.h"

namespace kruise::manager::webhook {

class PodSidecarMutator final : public Handler {
 public:
  AdmissionResponse Handle(const AdmissionRequest& request) override;
};

class PodAllowValidator final : public Handler {
 public:
  AdmissionResponse Handle(const AdmissionRequest& request) override;
};

}  // namespace kruise::manager::webhook
