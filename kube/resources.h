#pragma once

// The API resources kruise-cpp talks to. Functions rather than globals (Resource holds strings, and
// globals must be trivially destructible); each call returns a fresh value.

#include "kube/client.h"

namespace kruise::kube::resources {

// core/v1
inline Resource Pods() { return {"", "v1", "pods", "Pod", true}; }
inline Resource Nodes() { return {"", "v1", "nodes", "Node", false}; }
inline Resource Namespaces() { return {"", "v1", "namespaces", "Namespace", false}; }
inline Resource Secrets() { return {"", "v1", "secrets", "Secret", true}; }
inline Resource Events() { return {"", "v1", "events", "Event", true}; }
inline Resource ConfigMaps() { return {"", "v1", "configmaps", "ConfigMap", true}; }
inline Resource PersistentVolumeClaims() {
  return {"", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", true};
}

// apps/v1
inline Resource ControllerRevisions() {
  return {"apps", "v1", "controllerrevisions", "ControllerRevision", true};
}

// coordination.k8s.io/v1
inline Resource Leases() { return {"coordination.k8s.io", "v1", "leases", "Lease", true}; }

// apiextensions.k8s.io/v1
inline Resource CustomResourceDefinitions() {
  return {"apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
          false};
}

// admissionregistration.k8s.io/v1
inline Resource MutatingWebhookConfigurations() {
  return {"admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
          "MutatingWebhookConfiguration", false};
}
inline Resource ValidatingWebhookConfigurations() {
  return {"admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
          "ValidatingWebhookConfiguration", false};
}

// apps.kruise.io
inline constexpr char kKruiseGroup[] = "apps.kruise.io";
// NodeImage is cluster-scoped, one per node, named after the node.
inline Resource NodeImages() {
  return {kKruiseGroup, "v1alpha1", "nodeimages", "NodeImage", false};
}
inline Resource NodeImagesV1beta1() {
  return {kKruiseGroup, "v1beta1", "nodeimages", "NodeImage", false};
}
inline Resource ImagePullJobs() {
  return {kKruiseGroup, "v1alpha1", "imagepulljobs", "ImagePullJob", true};
}
inline Resource CloneSets() { return {kKruiseGroup, "v1alpha1", "clonesets", "CloneSet", true}; }
inline Resource SidecarSets() {
  return {kKruiseGroup, "v1alpha1", "sidecarsets", "SidecarSet", false};
}
inline Resource ContainerRecreateRequests() {
  return {kKruiseGroup, "v1alpha1", "containerrecreaterequests", "ContainerRecreateRequest", true};
}

}  // namespace kruise::kube::resources
