#!/usr/bin/env python3
"""Every printer column of our CRDs matches OpenKruise's (name, JSONPath, type, priority), so
`kubectl get` shows what an OpenKruise user expects (issue 13). OpenKruise's columns, from its
config/crd/bases (the same in every served version; priority 0 where it sets none)."""
import glob
import os
import sys

import yaml

OPENKRUISE = {
    "imagepulljobs.apps.kruise.io": [
        ("TOTAL", ".status.desired", "integer", 0),
        ("ACTIVE", ".status.active", "integer", 0),
        ("SUCCEED", ".status.succeeded", "integer", 0),
        ("FAILED", ".status.failed", "integer", 0),
        ("AGE", ".metadata.creationTimestamp", "date", 0),
        ("MESSAGE", ".status.message", "string", 0),
    ],
    "nodeimages.apps.kruise.io": [
        ("DESIRED", ".status.desired", "integer", 0),
        ("PULLING", ".status.pulling", "integer", 0),
        ("SUCCEED", ".status.succeeded", "integer", 0),
        ("FAILED", ".status.failed", "integer", 0),
        ("AGE", ".metadata.creationTimestamp", "date", 0),
    ],
    # OpenKruise 1.5+ (with status.updatedAvailableReplicas).
    "clonesets.apps.kruise.io": [
        ("DESIRED", ".spec.replicas", "integer", 0),
        ("UPDATED", ".status.updatedReplicas", "integer", 0),
        ("UPDATED_READY", ".status.updatedReadyReplicas", "integer", 0),
        ("UPDATED_AVAILABLE", ".status.updatedAvailableReplicas", "integer", 0),
        ("READY", ".status.readyReplicas", "integer", 0),
        ("TOTAL", ".status.replicas", "integer", 0),
        ("AGE", ".metadata.creationTimestamp", "date", 0),
        ("CONTAINERS", ".spec.template.spec.containers[*].name", "string", 1),
        ("IMAGES", ".spec.template.spec.containers[*].image", "string", 1),
        ("SELECTOR", ".status.labelSelector", "string", 1),
    ],
    # Advanced StatefulSet: the same in v1alpha1 and v1beta1 (OpenKruise's StatefulSet types).
    "statefulsets.apps.kruise.io": [
        ("DESIRED", ".spec.replicas", "integer", 0),
        ("CURRENT", ".status.replicas", "integer", 0),
        ("UPDATED", ".status.updatedReplicas", "integer", 0),
        ("READY", ".status.readyReplicas", "integer", 0),
        ("AGE", ".metadata.creationTimestamp", "date", 0),
        ("CONTAINERS", ".spec.template.spec.containers[*].name", "string", 1),
        ("IMAGES", ".spec.template.spec.containers[*].image", "string", 1),
    ],
    # Advanced DaemonSet: the same in v1alpha1 and v1beta1 (OpenKruise 1.9).
    "daemonsets.apps.kruise.io": [
        ("DESIRED", ".status.desiredNumberScheduled", "integer", 0),
        ("CURRENT", ".status.currentNumberScheduled", "integer", 0),
        ("READY", ".status.numberReady", "integer", 0),
        ("UP-TO-DATE", ".status.updatedNumberScheduled", "integer", 0),
        ("AVAILABLE", ".status.numberAvailable", "integer", 0),
        ("AGE", ".metadata.creationTimestamp", "date", 0),
        ("CONTAINERS", ".spec.template.spec.containers[*].name", "string", 1),
        ("IMAGES", ".spec.template.spec.containers[*].image", "string", 1),
    ],
    # The same in v1alpha1 and v1beta1 (OpenKruise 1.9).
    "sidecarsets.apps.kruise.io": [
        ("MATCHED", ".status.matchedPods", "integer", 0),
        ("UPDATED", ".status.updatedPods", "integer", 0),
        ("READY", ".status.readyPods", "integer", 0),
        ("AGE", ".metadata.creationTimestamp", "date", 0),
    ],
    # OpenKruise's v1alpha1 (and v1beta1) PodUnavailableBudget: no AGE column.
    "podunavailablebudgets.policy.kruise.io": [
        ("Allowed", ".status.unavailableAllowed", "integer", 0),
        ("Current", ".status.currentAvailable", "integer", 0),
        ("Desired", ".status.desiredAvailable", "integer", 0),
        ("Total", ".status.totalReplicas", "integer", 0),
    ],
    # OpenKruise's v1alpha1 WorkloadSpread (0.10 to 1.x).
    "workloadspreads.apps.kruise.io": [
        ("WorkloadName", ".spec.targetRef.name", "string", 0),
        ("WorkloadKind", ".spec.targetRef.kind", "string", 0),
        # OpenKruise: ("Adaptive", '.spec.scheduleStrategy.type[?(@ == "Adaptive")]', "boolean"),
        # always blank (a filter over a string matches nothing; validate.sh shows ours prints).
        ("ScheduleStrategy", ".spec.scheduleStrategy.type", "string", 0),
        ("Age", ".metadata.creationTimestamp", "date", 0),
    ],
    "containerrecreaterequests.apps.kruise.io": [
        ("PHASE", ".status.phase", "string", 0),
        ("POD", ".spec.podName", "string", 0),
        ("NODE", ".metadata.labels.crr\\.apps\\.kruise\\.io/node-name", "string", 0),
        ("AGE", ".metadata.creationTimestamp", "date", 0),
    ],
}


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    failures = []
    seen = set()
    for path in sorted(glob.glob(os.path.join(root, "deploy", "crds", "*.yaml"))):
        doc = yaml.safe_load(open(path))
        if not doc or doc.get("kind") != "CustomResourceDefinition":
            continue
        name = doc["metadata"]["name"]
        seen.add(name)
        want = OPENKRUISE.get(name)
        if want is None:
            failures.append(f"{name}: no OpenKruise printer columns recorded in this test")
            continue
        for version in doc["spec"]["versions"]:
            got = [(c.get("name"), c.get("jsonPath"), c.get("type"), c.get("priority", 0))
                   for c in version.get("additionalPrinterColumns", [])]
            if got != want:
                failures.append(f"{name} {version['name']}:\n  ours:       {got}\n  OpenKruise: {want}")
            else:
                print(f"ok   {name} {version['name']}: {', '.join(c[0] for c in got)}")
    for name in sorted(set(OPENKRUISE) - seen):
        failures.append(f"{name}: CRD missing from deploy/crds")
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
