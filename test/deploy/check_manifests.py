#!/usr/bin/python3
"""Structural checks of the rendered deploy/ kustomizations (no cluster needed).

Usage: check_manifests.py RENDER_DIR
RENDER_DIR holds one file per kustomization, named after its path with '/' replaced by '__'
(e.g. manager__overlays__strict-pods.yaml), each the output of `kubectl kustomize`.
Prints one line per failed check and exits 1 if any failed.
"""
import os
import sys

import yaml

failures = []
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)
    return cond


def load(render_dir, name):
    path = os.path.join(render_dir, name.replace("/", "__") + ".yaml")
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    objs = {}
    for d in docs:
        key = (d.get("kind"), d.get("metadata", {}).get("namespace", ""), d["metadata"]["name"])
        check(key not in objs, f"{name}: duplicate object {key}")
        objs[key] = d
    return objs


def get(objs, kind, name, ns=""):
    return objs.get((kind, ns, name))


def port_of(addr):
    return int(addr.rsplit(":", 1)[1])


def flag(args, name):
    for a in args:
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def env_of(container):
    return {e["name"]: e for e in container.get("env", [])}


# --- CRDs ---------------------------------------------------------------------------------------

BOTH = ["v1alpha1", "v1beta1"]
# name: (scope, served versions, storage version, printer columns, shortNames)
EXPECTED_CRDS = {
    "nodeimages.apps.kruise.io": ("Cluster", BOTH, "v1beta1", ["DESIRED", "PULLING", "SUCCEED", "FAILED", "AGE"],
                                  []),
    "imagepulljobs.apps.kruise.io": ("Namespaced", BOTH, "v1beta1",
                                     ["TOTAL", "ACTIVE", "SUCCEED", "FAILED", "AGE", "MESSAGE"], []),
    "containerrecreaterequests.apps.kruise.io": ("Namespaced", BOTH, "v1alpha1", ["PHASE", "POD", "NODE", "AGE"],
                                                 ["crr"]),
    "clonesets.apps.kruise.io": ("Namespaced", ["v1alpha1"], "v1alpha1",
                                 ["DESIRED", "UPDATED", "UPDATED_READY", "UPDATED_AVAILABLE", "READY", "TOTAL",
                                  "AGE", "CONTAINERS", "IMAGES", "SELECTOR"], ["clone"]),
    "sidecarsets.apps.kruise.io": ("Cluster", BOTH, "v1beta1", ["MATCHED", "UPDATED", "READY", "AGE"], []),
    "statefulsets.apps.kruise.io": ("Namespaced", BOTH, "v1beta1",
                                    ["DESIRED", "CURRENT", "UPDATED", "READY", "AGE", "CONTAINERS", "IMAGES"],
                                    ["sts", "asts"]),
    "daemonsets.apps.kruise.io": ("Namespaced", BOTH, "v1beta1",
                                  ["DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS",
                                   "IMAGES"], ["daemon", "ads"]),
    "podunavailablebudgets.policy.kruise.io": ("Namespaced", ["v1alpha1"], "v1alpha1",
                                               ["Allowed", "Current", "Desired", "Total"], ["pub"]),
    "workloadspreads.apps.kruise.io": ("Namespaced", ["v1alpha1"], "v1alpha1",
                                       ["WorkloadName", "WorkloadKind", "ScheduleStrategy", "Age"], ["ws"]),
}
# CRDs with a scale subresource (kubectl scale, HPA): its paths.
EXPECTED_SCALE = {
    "clonesets.apps.kruise.io": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                                 "labelSelectorPath": ".status.labelSelector"},
    "statefulsets.apps.kruise.io": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                                    "labelSelectorPath": ".status.labelSelector"},
}


def walk_schema(node, path, name):
    """Every node of a structural schema needs a type unless it is int-or-string or preserves."""
    if not isinstance(node, dict):
        return
    if not (node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")):
        check("type" in node, f"{name}: schema node {path} has no type")
    for key, child in node.get("properties", {}).items():
        walk_schema(child, f"{path}.{key}", name)
    if isinstance(node.get("items"), dict):
        walk_schema(node["items"], f"{path}[]", name)
    if isinstance(node.get("additionalProperties"), dict):
        walk_schema(node["additionalProperties"], f"{path}{{}}", name)


def check_crds(objs, where):
    for name, (scope, served, storage, columns, short) in EXPECTED_CRDS.items():
        crd = get(objs, "CustomResourceDefinition", name)
        if not check(crd is not None, f"{where}: CRD {name} missing"):
            continue
        spec = crd["spec"]
        check(crd["apiVersion"] == "apiextensions.k8s.io/v1", f"{name}: not apiextensions v1")
        check(spec["scope"] == scope, f"{name}: scope {spec['scope']} != {scope}")
        check(spec.get("conversion", {}).get("strategy") == "None", f"{name}: conversion is not None")
        check(spec["names"].get("shortNames", []) == short, f"{name}: shortNames")
        versions = spec["versions"]
        check([v["name"] for v in versions] == served, f"{name}: versions")
        check([v["name"] for v in versions if v["storage"]] == [storage], f"{name}: storage version")
        check(all(v["served"] for v in versions), f"{name}: a version is not served")
        schemas = [v["schema"]["openAPIV3Schema"] for v in versions]
        # Identical schemas are what makes `conversion: None` lossless (storage-version pruning).
        check(all(s == schemas[0] for s in schemas), f"{name}: versions have different schemas")
        for v in versions:
            check(v.get("subresources", {}).get("status") == {}, f"{name}/{v['name']}: no status subresource")
            check(v.get("subresources", {}).get("scale") == EXPECTED_SCALE.get(name),
                  f"{name}/{v['name']}: scale subresource {v.get('subresources', {}).get('scale')}")
            cols = [c["name"] for c in v.get("additionalPrinterColumns", [])]
            check(cols == columns, f"{name}/{v['name']}: printer columns {cols} != {columns}")
            walk_schema(v["schema"]["openAPIV3Schema"], "", f"{name}/{v['name']}")


# --- webhooks -----------------------------------------------------------------------------------

WEBHOOK_PATHS = {
    "mpod.kb.io": "/mutate-pod",
    "mimagepulljob.kb.io": "/mutate-apps-kruise-io-imagepulljob",
    "mcontainerrecreaterequest.kb.io": "/mutate-apps-kruise-io-containerrecreaterequest",
    "mnodeimage.kb.io": "/mutate-apps-kruise-io-nodeimage",
    "mcloneset.kb.io": "/mutate-apps-kruise-io-v1alpha1-cloneset",
    "msidecarset.kb.io": "/mutate-apps-kruise-io-v1alpha1-sidecarset",
    "mstatefulset.kb.io": "/mutate-apps-kruise-io-v1beta1-statefulset",
    "mdaemonset.kb.io": "/mutate-apps-kruise-io-v1beta1-daemonset",
    "vimagepulljob.kb.io": "/validate-apps-kruise-io-imagepulljob",
    "vcontainerrecreaterequest.kb.io": "/validate-apps-kruise-io-containerrecreaterequest",
    "vnodeimage.kb.io": "/validate-apps-kruise-io-nodeimage",
    "vcloneset.kb.io": "/validate-apps-kruise-io-v1alpha1-cloneset",
    "vsidecarset.kb.io": "/validate-apps-kruise-io-v1alpha1-sidecarset",
    "vstatefulset.kb.io": "/validate-apps-kruise-io-v1beta1-statefulset",
    "vdaemonset.kb.io": "/validate-apps-kruise-io-v1beta1-daemonset",
    "vpod.kb.io": "/validate-pod",
    "vpodeviction.kb.io": "/validate-pod",
    "vpodunavailablebudget.kb.io": "/validate-policy-kruise-io-podunavailablebudget",
    "vworkloadspread.kb.io": "/validate-apps-kruise-io-v1alpha1-workloadspread",
    "vdeletionprotection.kb.io": "/validate-deletion-protection",
}

# The pod webhooks: one failurePolicy (Ignore by default, Fail in strict-pods), a short timeout and
# the namespaces that must stay exempt (kube-system, our own).
POD_WEBHOOKS = {"mpod.kb.io", "vpod.kb.io", "vpodeviction.kb.io"}


def check_webhooks(objs, where, pod_policy):
    svc = get(objs, "Service", "kruise-webhook-service", "kruise-system")
    check(svc is not None, f"{where}: webhook Service missing")
    seen = set()
    for kind, name in (("MutatingWebhookConfiguration", "kruise-mutating-webhook-configuration"),
                       ("ValidatingWebhookConfiguration", "kruise-validating-webhook-configuration")):
        cfg = get(objs, kind, name)
        if not check(cfg is not None, f"{where}: {kind} {name} missing"):
            continue
        for hook in cfg["webhooks"]:
            hname = hook["name"]
            seen.add(hname)
            check(hname in WEBHOOK_PATHS, f"{where}: unexpected webhook {hname}")
            check(hname.startswith("m" if kind.startswith("Mutating") else "v"), f"{where}: {hname} kind")
            cc = hook["clientConfig"]
            check("caBundle" not in cc, f"{where}: {hname} ships a caBundle")
            svc_ref = cc.get("service", {})
            check(svc_ref.get("name") == "kruise-webhook-service" and svc_ref.get("namespace") == "kruise-system"
                  and svc_ref.get("port") == 443, f"{where}: {hname} service reference")
            check(svc_ref.get("path") == WEBHOOK_PATHS.get(hname), f"{where}: {hname} path {svc_ref.get('path')}")
            check(hook.get("sideEffects") == "None", f"{where}: {hname} sideEffects")
            check(hook.get("admissionReviewVersions") == ["v1", "v1beta1"], f"{where}: {hname} review versions")
            timeout = hook.get("timeoutSeconds", 10)
            if hname in POD_WEBHOOKS:
                check(hook.get("failurePolicy") == pod_policy, f"{where}: pod webhook failurePolicy "
                      f"{hook.get('failurePolicy')} != {pod_policy}")
                check(timeout <= 5, f"{where}: pod webhook timeout {timeout} > 5 s")
                exprs = {(e["key"], e["operator"], tuple(e.get("values", [])))
                         for e in hook.get("namespaceSelector", {}).get("matchExpressions", [])}
                check(("control-plane", "NotIn", ("openkruise",)) in exprs, f"{where}: pod webhook does not "
                      "exempt control-plane=openkruise namespaces")
                check(("kubernetes.io/metadata.name", "NotIn", ("kube-system",)) in exprs,
                      f"{where}: pod webhook does not exempt kube-system")
            else:
                check(hook.get("failurePolicy") == "Fail", f"{where}: {hname} failurePolicy is not Fail")
                check(timeout <= 10, f"{where}: {hname} timeout {timeout} > 10 s")
            if hname == "vdeletionprotection.kb.io":
                # Fail on DELETE of namespaces and CRDs: only objects that carry the label may
                # ever reach us, so an unlabelled namespace stays deletable with no manager.
                exprs = hook.get("objectSelector", {}).get("matchExpressions", [])
                check({"key": "policy.kruise.io/delete-protection", "operator": "Exists"} in exprs,
                      f"{where}: {hname} does not select labelled objects only")
    check(seen == set(WEBHOOK_PATHS), f"{where}: webhooks {sorted(seen)}")
    ns = get(objs, "Namespace", "kruise-system")
    if check(ns is not None, f"{where}: namespace kruise-system missing"):
        # Our own namespace must be exempt from the pod webhook (install chicken-and-egg).
        check(ns["metadata"].get("labels", {}).get("control-plane") == "openkruise",
              f"{where}: kruise-system is not labelled control-plane=openkruise")


# --- workloads ----------------------------------------------------------------------------------


def check_rbac(objs, where):
    for (kind, ns, name), o in objs.items():
        for rule in o.get("rules", []) if kind in ("Role", "ClusterRole") else []:
            check("*" not in rule.get("verbs", []) and "*" not in rule.get("resources", []),
                  f"{where}: {kind} {name} uses a wildcard")
            if kind == "ClusterRole" and name == "kruise-daemon-role":
                check("secrets" not in rule.get("resources", []), f"{where}: daemon reads secrets cluster-wide")
            if kind == "ClusterRole" and "secrets" in rule.get("resources", []):
                check(set(rule["verbs"]) <= {"get"}, f"{where}: {name} lists/writes secrets cluster-wide")
    if get(objs, "DaemonSet", "kruise-daemon", "kruise-system") is None:
        return
    role = get(objs, "Role", "kruise-daemon-secret-role", "kruise-daemon-config")
    if check(role is not None, f"{where}: daemon secret Role missing"):
        check(role["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]}],
              f"{where}: daemon secret Role is not read-only")


def bound_service_accounts(objs):
    out = set()
    for (kind, _, _), o in objs.items():
        if kind in ("RoleBinding", "ClusterRoleBinding"):
            for s in o.get("subjects", []):
                if s["kind"] == "ServiceAccount":
                    out.add((s["namespace"], s["name"]))
    return out


def check_daemonset(objs, where, kube_local=False):
    ds = get(objs, "DaemonSet", "kruise-daemon", "kruise-system")
    if not check(ds is not None, f"{where}: DaemonSet missing"):
        return
    spec = ds["spec"]
    pod = spec["template"]["spec"]
    c = pod["containers"][0]
    check(pod.get("hostNetwork") is True and pod.get("dnsPolicy") == "ClusterFirstWithHostNet",
          f"{where}: daemon not on the host network")
    check({"operator": "Exists"} in pod.get("tolerations", []), f"{where}: daemon does not tolerate all taints")
    check(spec["updateStrategy"]["rollingUpdate"]["maxUnavailable"] == "10%", f"{where}: daemon maxUnavailable")
    check(spec.get("minReadySeconds") == 3, f"{where}: daemon minReadySeconds")
    check(pod.get("terminationGracePeriodSeconds") == 10, f"{where}: daemon grace period")
    env = env_of(c)
    check(env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "spec.nodeName",
          f"{where}: NODE_NAME not from spec.nodeName")
    addr = flag(c["args"], "--addr")
    port = port_of(addr) if addr else None
    mounts = {m["name"]: m for m in c.get("volumeMounts", [])}
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    probe_paths = {"livenessProbe": "/healthz?exclude=runtime", "readinessProbe": "/readyz"}
    probe_timing = {"livenessProbe": {"initialDelaySeconds": 10, "periodSeconds": 10, "timeoutSeconds": 2,
                                      "failureThreshold": 3},
                    "readinessProbe": {"periodSeconds": 5, "timeoutSeconds": 2, "failureThreshold": 3}}
    for probe, timing in probe_timing.items():
        got = {k: c.get(probe, {}).get(k) for k in timing}
        check(got == timing, f"{where}: daemon {probe} timing {got} != {timing}")
    if kube_local:
        # All nodes share one network: an ephemeral loopback port published in a pod-local file,
        # exec probes reading it, no declared port (deploy/overlays/kube-local*/daemonset-patch.yaml).
        addr_file = flag(c["args"], "--addr-file")
        check(addr == "127.0.0.1:0", f"{where}: daemon --addr {addr} is not an ephemeral loopback port")
        check(addr_file is not None, f"{where}: daemon without --addr-file")
        check("ports" not in c, f"{where}: daemon declares ports {c.get('ports')}")
        if addr_file:
            addr_dir = os.path.dirname(addr_file)
            m = [m for m in mounts.values() if m["mountPath"] == addr_dir]
            check(len(m) == 1 and "emptyDir" in vols.get(m[0]["name"], {}),
                  f"{where}: --addr-file directory {addr_dir} is not an emptyDir mount")
        for probe, path in probe_paths.items():
            p = c.get(probe, {})
            check("httpGet" not in p, f"{where}: daemon {probe} still has httpGet")
            check(p.get("exec", {}).get("command") ==
                  ["/usr/local/bin/kruise-daemon", "probe", f"--addr-file={addr_file}", f"--path={path}",
                   "--timeout-seconds=1"],
                  f"{where}: daemon {probe} command {p.get('exec', {}).get('command')}")
    else:
        for probe, path in probe_paths.items():
            check(c.get(probe, {}).get("httpGet") == {"path": path, "port": port},
                  f"{where}: daemon {probe} httpGet {c.get(probe, {}).get('httpGet')} != {path} on --addr")
        check([p["containerPort"] for p in c.get("ports", [])] == [port], f"{where}: daemon container port")
    run_dir = flag(c["args"], "--host-run-dir")
    sock = [m for m in mounts.values() if m["mountPath"] == run_dir]
    if check(len(sock) == 1, f"{where}: nothing mounted at --host-run-dir {run_dir}"):
        check(sock[0].get("readOnly") is True, f"{where}: host run dir not read-only")
        hp = vols[sock[0]["name"]].get("hostPath", {}).get("path")
        check(hp == ("/run/kube-local-16400/node" if kube_local else "/var/run"), f"{where}: socket hostPath {hp}")
    sc = c.get("securityContext", {})
    check(sc.get("allowPrivilegeEscalation") is False and sc.get("readOnlyRootFilesystem") is True
          and sc.get("capabilities", {}).get("drop") == ["ALL"] and not sc.get("privileged"),
          f"{where}: daemon securityContext")
    lim = c["resources"]["limits"]
    check(lim.get("memory") == "64Mi", f"{where}: daemon memory limit {lim.get('memory')}")
    sa = pod.get("serviceAccountName")
    check(get(objs, "ServiceAccount", sa, "kruise-system") is not None, f"{where}: daemon SA {sa} missing")
    check(("kruise-system", sa) in bound_service_accounts(objs), f"{where}: daemon SA {sa} not bound")
    if kube_local:
        check(c["image"].startswith("127.0.0.1:16408/"), f"{where}: daemon image {c['image']}")
        check(env.get("KUBERNETES_SERVICE_HOST", {}).get("value") == "127.0.0.1", f"{where}: daemon in-cluster host")
    else:
        check(c["image"] == "kruise-cpp/kruise-daemon:latest", f"{where}: daemon image {c['image']}")


def check_deployment(objs, where, replicas, surge, unavailable, host_network, match_label_keys,
                     kube_local=False):
    dep = get(objs, "Deployment", "kruise-controller-manager", "kruise-system")
    if not check(dep is not None, f"{where}: Deployment missing"):
        return
    spec = dep["spec"]
    pod = spec["template"]["spec"]
    c = pod["containers"][0]
    labels = spec["template"]["metadata"]["labels"]
    check(spec["replicas"] == replicas, f"{where}: replicas {spec['replicas']} != {replicas}")
    ru = spec["strategy"]["rollingUpdate"]
    check(ru["maxSurge"] == surge and ru["maxUnavailable"] == unavailable,
          f"{where}: rolling update {ru} != surge {surge} unavailable {unavailable}")
    check(spec.get("minReadySeconds") == 3, f"{where}: manager minReadySeconds")
    check(labels.get("control-plane") == "controller-manager", f"{where}: manager pod label")
    check(bool(pod.get("hostNetwork")) == host_network, f"{where}: hostNetwork")
    if host_network:
        check(pod.get("dnsPolicy") == "ClusterFirstWithHostNet", f"{where}: dnsPolicy")
    tsc = pod["topologySpreadConstraints"][0]
    check(tsc["topologyKey"] == "topology.kubernetes.io/zone" and tsc["whenUnsatisfiable"] == "ScheduleAnyway",
          f"{where}: zone spread")
    check(("matchLabelKeys" in tsc) == match_label_keys, f"{where}: matchLabelKeys presence")
    env = env_of(c)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    check(int(env["WEBHOOK_PORT"]["value"]) == ports.get("webhook"), f"{where}: WEBHOOK_PORT != webhook port")
    check(port_of(flag(c["args"], "--metrics-addr")) == ports.get("metrics"), f"{where}: metrics port")
    health = port_of(flag(c["args"], "--health-probe-addr"))
    check(health == ports.get("health"), f"{where}: health port")
    check(c["readinessProbe"]["httpGet"] == dict({"path": "/readyz", "port": health},
                                                 **({"host": "127.0.0.1"} if kube_local else {})),
          f"{where}: readiness probe {c['readinessProbe']['httpGet']}")
    check(c["livenessProbe"]["httpGet"]["path"] == "/healthz" and c["livenessProbe"]["httpGet"]["port"] == health,
          f"{where}: liveness probe")
    check(flag(c["args"], "--leader-election-namespace") == "kruise-system" and "--enable-leader-election" in c["args"],
          f"{where}: leader election args")
    check(env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace", f"{where}: POD_NAMESPACE")
    check(env["SECRET_NAME"]["value"] == "kruise-webhook-certs", f"{where}: SECRET_NAME")
    check(env["SERVICE_NAME"]["value"] == "kruise-webhook-service", f"{where}: SERVICE_NAME")
    cert_dir = env["WEBHOOK_CERT_DIR"]["value"]
    check(any(m["mountPath"] == cert_dir for m in c["volumeMounts"]), f"{where}: cert dir not a volume")
    psc = pod.get("securityContext", {})
    check(psc.get("runAsNonRoot") is True and psc.get("runAsUser") == 65532, f"{where}: manager not non-root")
    check(c["securityContext"].get("readOnlyRootFilesystem") is True, f"{where}: manager rootfs writable")
    svc = get(objs, "Service", "kruise-webhook-service", "kruise-system")
    if svc:
        check(all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()), f"{where}: Service selects nothing")
        check(svc["spec"]["ports"][0]["targetPort"] in ports, f"{where}: Service targetPort unknown")
    sa = pod.get("serviceAccountName")
    check(("kruise-system", sa) in bound_service_accounts(objs), f"{where}: manager SA {sa} not bound")
    if kube_local:
        check(c["image"].startswith("127.0.0.1:16408/"), f"{where}: manager image {c['image']}")
        check(env.get("WEBHOOK_HOST", {}).get("value") == "127.0.0.1", f"{where}: WEBHOOK_HOST")
        check(env.get("KUBERNETES_SERVICE_PORT", {}).get("value") == "16402", f"{where}: in-cluster port")


def main():
    render = sys.argv[1]
    daemon = load(render, "daemonset")
    check_crds(daemon, "daemonset")
    check_rbac(daemon, "daemonset")
    check_daemonset(daemon, "daemonset")

    manager = load(render, "manager")
    check_crds(manager, "manager")
    check_rbac(manager, "manager")
    check_webhooks(manager, "manager", "Ignore")
    check_deployment(manager, "manager", 2, "100%", 0, False, False)

    everything = load(render, ".")
    check_crds(everything, "deploy")
    check_rbac(everything, "deploy")
    check_daemonset(everything, "deploy")
    check_webhooks(everything, "deploy", "Ignore")
    check_deployment(everything, "deploy", 2, "100%", 0, False, False)

    o = load(render, "manager/overlays/strict-pods")
    check_webhooks(o, "strict-pods", "Fail")
    o = load(render, "manager/overlays/small-cluster")
    check_deployment(o, "small-cluster", 1, 1, 0, False, False)
    o = load(render, "manager/overlays/host-network")
    check_deployment(o, "host-network", 2, 0, 1, True, False)
    o = load(render, "manager/overlays/match-label-keys")
    check_deployment(o, "match-label-keys", 2, "100%", 0, False, True)
    o = load(render, "overlays/kube-local")
    check_crds(o, "kube-local")
    check_webhooks(o, "kube-local", "Ignore")
    check_daemonset(o, "kube-local", kube_local=True)
    check_deployment(o, "kube-local", 1, 0, 1, True, False, kube_local=True)
    d = load(render, "overlays/kube-local-daemon")
    check_crds(d, "kube-local-daemon")
    check_rbac(d, "kube-local-daemon")
    check_daemonset(d, "kube-local-daemon", kube_local=True)
    # Its patch is a copy of overlays/kube-local's (see its kustomization.yaml): same DaemonSet.
    key = ("DaemonSet", "kruise-system", "kruise-daemon")
    check(d.get(key) == o.get(key), "kube-local-daemon: DaemonSet differs from overlays/kube-local's")

    for f in failures:
        print("FAIL:", f)
    print(f"check_manifests: {checks - len(failures)}/{checks} checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
