#!/usr/bin/env bash
# SidecarSet end to end on ../shared/kube-local (GitHub issue 15): the real API server runs our CRD
# and webhooks, the real kubelet restarts the sidecar containers our controller patches. One
# kruise-manager on the host (webhooks by URL); pods are hostNetwork.
#
#   1. deploy/overlays/kube-local without the DaemonSet and the manager Deployment; the manager;
#   2. OpenKruise's basic SidecarSet (deploy/samples/sidecarset-v1alpha1.yaml, its namespace and
#      registry set to this test's): the webhook filled the defaults and the hash annotations, `kubectl get
#      sidecarset` shows it;
#   3. a Deployment (apps/v1, 3 pods labelled app=nginx) gets the sidecar at creation: sidecar1
#      before the app container, IS_INJECTED, the shared log volume, the SidecarSet annotations;
#      status matchedPods = updatedPods = readyPods = 3;
#   4. the sidecar image changes (busybox:1.35 -> busybox:v1, another digest): every pod is
#      upgraded in place (same UID, the app container's ID unchanged, sidecar1 restarted once on
#      the new image), and a watch over the whole upgrade sees one pod at a time mid-upgrade
#      (maxUnavailable 1: sidecar1's spec image not yet running, or not ready) and at most one
#      unready;
#  4b. partition 2 and busybox:v2: one pod upgraded, two kept (status updatedPods 1); partition 0:
#      all three;
#  4c. hot upgrade: OpenKruise's HotUpgrade example (deploy/samples/sidecarset-hotupgrade-v1alpha1.yaml)
#      on a Deployment of 2 pods (app=hotupgrade): sidecar-1 working on busybox:v1, sidecar-2 idle
#      on the empty image; busybox:v1 -> v2: every pod ends with the working container (the
#      annotation's) on v2 and the other on the empty image, both restarted and ready, UIDs kept,
#      condition SidecarSetUpgradable True; a watch over the whole upgrade sees, in every pod at
#      every moment, one container of the pair ready on a real image, and at most one pod mid
#      upgrade (maxUnavailable 1);
#   5. a change other than images (an env var): no existing pod is touched; a new pod (scale to 4)
#      gets it; status updatedPods 1 of matchedPods 4; the old pods get condition
#      SidecarSetUpgradable False (reason UpdateImmutableField), the new one has none;
#  5b. the revision history: status.latestRevision names a ControllerRevision in kruise-system
#      (label kruise.io/sidecarset-name), one per injectable spec so far (busybox:1.35, v1, v2,
#      v2 + env); with updateStrategy paused and injectionStrategy.revision naming the first, a
#      new pod (scale to 5) gets sidecar1 on busybox:1.35 and records that revision in its hash
#      annotation, the other pods untouched;
#   6. with the manager down, a pod is still created (the pod webhook's failurePolicy Ignore),
#      without the sidecar;
#  6b. the manager, started again, notes that pod (our addition, OpenKruise has no such note):
#      annotation kruise.io/sidecarset-not-injected=test-sidecarset and one Warning event
#      SidecarSetNotInjected on it; its first pass over the pod cache finds that one pod only, and
#      no pod injected earlier gets the annotation.
#
# Everything it creates is deleted again, also on failure (the SidecarSet, namespace, manager,
# webhook configurations, RBAC, certificate Secret); CRDs and the kruise namespaces are left.
# Usage: sidecarset_e2e.sh KRUISE_MANAGER_BINARY
# Environment: KRUISE_KUBE_LOCAL_ENV, KRUISE_E2E_KEEP_WORK=1 (keep the work dir),
# KRUISE_E2E_SIDECARSET_PORT_BASE (default 16490; base..base+2:
# webhook, health, metrics of the manager).
set -uo pipefail
# `... | apply_stdin`: the last command of a pipeline runs in this shell, so its `die` ends the test.
shopt -s lastpipe

ROOT=$(cd "$(dirname "$(readlink -f "$0")")/../../.." && pwd)
# shellcheck source=../lib.sh
. "$ROOT/test/e2e/lib.sh"
manager_e2e_init sidecarset 16490 3 "${1:-}"
SET=test-sidecarset
HOT_SET=hotupgrade-sidecarset

show_sidecarset() {
  say "sidecarset:"
  k get sidecarset "$SET" -o yaml 2>/dev/null | grep -A12 '^status:' | indent
}
delete_sidecarsets() { # cluster-scoped: not in NS
  k delete sidecarset "$HOT_SET" --ignore-not-found >/dev/null 2>&1
  k delete sidecarset "$SET" --ignore-not-found >/dev/null 2>&1
  k -n kruise-system delete controllerrevisions -l "kruise.io/sidecarset-name=$SET" \
    --ignore-not-found >/dev/null 2>&1
}
trap 'manager_e2e_exit 25 delete_sidecarsets show_sidecarset' EXIT

# --- helpers -------------------------------------------------------------------------------------
ss_json() { k get sidecarset "$SET" -o json; }
ss_is() { [ "$(ss_json 2>/dev/null | jq -r "$1")" = true ]; }
pods_json() { k -n "$NS" get pods -l app=nginx -o json; }
# "name uid sidecar-image sidecar-restarts sidecar-ready app-container-id ready" per live pod.
pod_table() {
  pods_json | jq -r '.items[] | select(.metadata.deletionTimestamp == null)
    | [.metadata.name, .metadata.uid,
       ((.spec.containers[] | select(.name == "sidecar1") | .image) // "-"),
       ((.status.containerStatuses[]? | select(.name == "sidecar1") | .restartCount) // "-"),
       ((.status.containerStatuses[]? | select(.name == "sidecar1") | .ready) // "-"),
       ((.status.containerStatuses[]? | select(.name == "main") | .containerID) // "-"),
       (any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | @tsv' | sort
}
ready_pods() { # N: N live pods, all Ready
  [ "$(pod_table | wc -l)" = "$1" ] && [ "$(pod_table | awk '$7 == "true"' | wc -l)" = "$1" ]
}
status_is() { # "matched updated ready"
  ss_is "(.status.observedGeneration == .metadata.generation) and
    ([.status.matchedPods, .status.updatedPods, .status.readyPods] | map(tostring) | join(\" \")) == \"$1\""
}
deployment() { # REPLICAS
  cat <<EOF
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: $1
  selector:
    matchLabels:
      app: nginx
  template:
    metadata:
      labels:
        app: nginx
    spec:
      hostNetwork: true
      terminationGracePeriodSeconds: 2
      containers:
      - name: main
        image: $REG/busybox:1.35
        command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
EOF
}

# sample FILE: deploy/samples/FILE in this test's namespace, its images from this instance's registry
# (the samples name the default instance's, 127.0.0.1:16408: another instance's containerd would
# hold those images under both names and report the other name in container statuses).
sample() {
  sed -e "s/^  namespace: default$/  namespace: $NS/" -e "s|127\.0\.0\.1:16408/|$REG/|g" \
    "$ROOT/deploy/samples/$1"
}

# --- 1 -------------------------------------------------------------------------------------------
step 1 "CRDs, webhooks and RBAC from deploy/overlays/kube-local; kruise-manager on the host"
k delete sidecarset "$SET" "$HOT_SET" --ignore-not-found >/dev/null 2>&1  # a crashed earlier run's
deploy_manager_objects "$WORK" "$NS" sidecarsets.apps.kruise.io
start_host_manager "$MANAGER" "$WORK" "$BASE"
step_done "manager ready"

# --- 2 -------------------------------------------------------------------------------------------
step 2 "OpenKruise's basic SidecarSet, in this test's namespace"
sample sidecarset-v1alpha1.yaml | grep -q "namespace: $NS" || die "the sample no longer names namespace: default"
sample sidecarset-v1alpha1.yaml | k apply -f - >"$WORK/apply.log" 2>&1 ||
  die "applying the sample: $(tail -3 "$WORK/apply.log")"
defaults=$(ss_json | jq -c '[.spec.containers[0].podInjectPolicy, .spec.containers[0].upgradeStrategy.upgradeType,
  .spec.containers[0].shareVolumePolicy.type, .spec.containers[0].imagePullPolicy,
  (.metadata.annotations["kruise.io/sidecarset-hash"] | length > 0),
  (.metadata.annotations["kruise.io/sidecarset-hash-without-image"] | length > 0)]')
[ "$defaults" = '["BeforeAppContainer","ColdUpgrade","disabled","IfNotPresent",true,true]' ] ||
  die "webhook defaults and hashes: $defaults"
k get sidecarset "$SET" >/dev/null || die "kubectl get sidecarset failed"
step_done "defaults and hash annotations filled: $defaults"

# --- 3 -------------------------------------------------------------------------------------------
step 3 "a Deployment's pods get the sidecar at creation"
deployment 3 | apply_stdin
wait_for 120 "3 Ready pods of the Deployment" ready_pods 3
bad=$(pods_json | jq -r '.items[] | select(
    ([.spec.containers[].name] != ["sidecar1", "main"])
    or (any(.spec.containers[0].env[]?; .name == "IS_INJECTED" and .value == "true") | not)
    or (any(.spec.containers[0].volumeMounts[]?; .name == "log-volume" and .mountPath == "/var/log") | not)
    or (any(.spec.volumes[]?; .name == "log-volume") | not)
    or (.metadata.annotations["kruise.io/sidecarset-injected-list"] != "test-sidecarset")
    or ((.metadata.annotations["kruise.io/sidecarset-hash"] | fromjson)["test-sidecarset"].hash == null)) | .metadata.name')
[ -z "$bad" ] || die "pods without the sidecar, env, volume or annotations: $bad"
wait_for 60 "status matchedPods/updatedPods/readyPods 3 3 3" status_is "3 3 3"
step_done "3 pods injected (sidecar1 before main, IS_INJECTED, log-volume, annotations); status 3/3/3"

# --- 4 -------------------------------------------------------------------------------------------
step 4 "the sidecar image changes: every pod upgraded in place, at most 1 unready at once"
pod_table >"$WORK/before4"
watch_app_pods nginx "$WORK/watch4.json"
wait_for 30 "the pod watch to list the 3 pods" watch_started "$WORK/watch4.json" 3
k patch sidecarset "$SET" --type json \
  -p "[{\"op\":\"replace\",\"path\":\"/spec/containers/0/image\",\"value\":\"$REG/busybox:v1\"}]" >/dev/null ||
  die "patching the sidecar image"
upgraded() {
  [ "$(pod_table | awk -v img="$REG/busybox:v1" '$3 == img && $5 == "true" && $7 == "true"' | wc -l)" = 3 ]
}
wait_for 240 "3 pods running sidecar1 on busybox:v1, Ready" upgraded
wait_for 60 "status 3 3 3 after the upgrade" status_is "3 3 3"
kill "$WATCH_PID" 2>/dev/null
pod_table >"$WORK/after4"
python3 - "$WORK/before4" "$WORK/after4" <<'PYEOF' || die "$(cat "$WORK/why4")"
import sys
def rows(p):
    return {r[0]: r for r in (l.split("\t") for l in open(p).read().splitlines())}
before, after = rows(sys.argv[1]), rows(sys.argv[2])
why = []
if before.keys() != after.keys():
    why.append(f"pods changed: {sorted(before)} -> {sorted(after)}")
for name, b in before.items():
    a = after.get(name)
    if not a:
        continue
    if a[1] != b[1]: why.append(f"{name}: UID changed")
    if a[5] != b[5]: why.append(f"{name}: app container restarted ({b[5]} -> {a[5]})")
    if int(a[3]) != int(b[3]) + 1: why.append(f"{name}: sidecar restarts {b[3]} -> {a[3]}, want +1")
open(sys.argv[2].replace("after4", "why4"), "w").write("; ".join(why))
sys.exit(1 if why else 0)
PYEOF
# Over every moment of the watch: pods unready, and pods mid-upgrade (sidecar1's spec image not
# yet the image it runs, or it is not ready): the controller's maxUnavailable bounds both.
read -r max_unready max_upgrading < <(PYTHONPATH="$ROOT/test/e2e" python3 - "$WORK/watch4.json" <<'PYEOF'
import sys
from watch_events import events
pods = {}
worst_unready = worst_upgrading = 0
for ev in events(sys.argv[1]):
    obj = ev.get("object", {})
    spec = next((c.get("image") for c in obj.get("spec", {}).get("containers", [])
                 if c.get("name") == "sidecar1"), None)
    st = next((c for c in obj.get("status", {}).get("containerStatuses", [])
               if c.get("name") == "sidecar1"), {})
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in obj.get("status", {}).get("conditions", []))
    upgrading = spec != st.get("image") or not st.get("ready", False)
    pods[obj["metadata"]["name"]] = (ready, upgrading)
    worst_unready = max(worst_unready, sum(1 for r, _ in pods.values() if not r))
    worst_upgrading = max(worst_upgrading, sum(1 for _, u in pods.values() if u))
print(worst_unready, worst_upgrading)
PYEOF
)
[ "$max_unready" -le 1 ] || die "$max_unready pods were unready at once (maxUnavailable 1)"
[ "$max_upgrading" = 1 ] || die "$max_upgrading pods were mid-upgrade at once, want exactly 1 (maxUnavailable 1)"
step_done "3 pods upgraded in place (UIDs and app containers kept, sidecar restarted once), one at a time (at most $max_upgrading mid-upgrade, $max_unready unready)"

# --- 4b ------------------------------------------------------------------------------------------
step 4b "partition 2: one of three pods gets busybox:v2, then the rest once the partition goes"
k patch sidecarset "$SET" --type json -p "[
  {\"op\":\"replace\",\"path\":\"/spec/containers/0/image\",\"value\":\"$REG/busybox:v2\"},
  {\"op\":\"add\",\"path\":\"/spec/updateStrategy/partition\",\"value\":2}]" >/dev/null ||
  die "patching image and partition"
on_v2() { # N: N Ready pods run sidecar1 on v2, the others still on v1
  [ "$(pod_table | awk -v img="$REG/busybox:v2" '$3 == img && $5 == "true" && $7 == "true"' | wc -l)" = "$1" ] &&
    [ "$(pod_table | awk -v img="$REG/busybox:v1" '$3 == img' | wc -l)" = $((3 - $1)) ]
}
wait_for 120 "1 pod on busybox:v2, 2 kept on v1 by the partition" on_v2 1
wait_for 60 "status 3 1 3 with partition 2" status_is "3 1 3"
on_v2 1 || die "the partition let more than one pod move"
k patch sidecarset "$SET" --type json -p '[{"op":"replace","path":"/spec/updateStrategy/partition","value":0}]' \
  >/dev/null || die "removing the partition"
wait_for 180 "all 3 pods on busybox:v2" on_v2 3
wait_for 60 "status 3 3 3 without partition" status_is "3 3 3"
step_done "partition 2 held two pods on v1 (status updated 1 of 3); partition 0 finished the rollout"

# --- 4c ------------------------------------------------------------------------------------------
step 4c "hot upgrade (OpenKruise's example): the working container swaps, one always runs"
HOT_EMPTY=$REG/busybox:1.35
sample sidecarset-hotupgrade-v1alpha1.yaml | grep -q "namespace: $NS" ||
  die "the hot sample no longer names namespace: default"
sample sidecarset-hotupgrade-v1alpha1.yaml | k apply -f - >"$WORK/apply.log" 2>&1 ||
  die "applying the hot sample: $(tail -3 "$WORK/apply.log")"
deployment 2 | sed -e 's/^  name: web$/  name: hot/' -e 's/app: nginx$/app: hotupgrade/' | apply_stdin
hot_json() { k -n "$NS" get pods -l app=hotupgrade -o json; }
# "name uid working working-image other-image settled" per live pod; settled: every container runs
# its spec image and is ready, and the pod is Ready.
hot_table() {
  hot_json | jq -r '.items[] | select(.metadata.deletionTimestamp == null)
    | (.metadata.annotations["kruise.io/sidecarset-working-hotupgrade-container"] // "{}" | fromjson | .sidecar // "-") as $w
    | ($w | if . == "sidecar-1" then "sidecar-2" else "sidecar-1" end) as $o
    | . as $p
    | [.metadata.name, .metadata.uid, $w,
       (.spec.containers[] | select(.name == $w) | .image),
       (.spec.containers[] | select(.name == $o) | .image),
       (([.spec.containers[] as $c | $p.status.containerStatuses[]? | select(.name == $c.name)
          | (.image == $c.image or .image == ("docker.io/" + $c.image)) and .ready]
         | length == ($p.spec.containers | length) and all)
        and any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | @tsv' | sort
}
hot_at() { # IMAGE: 2 live pods, the working container on IMAGE, the other on the empty image, all settled
  [ "$(hot_table | awk -v img="$1" -v empty="$HOT_EMPTY" '$4 == img && $5 == empty && $6 == "true"' | wc -l)" = 2 ] &&
    [ "$(hot_table | wc -l)" = 2 ]
}
wait_for 120 "2 Ready hot pods, sidecar-1 working on busybox:v1, sidecar-2 on the empty image" hot_at "$REG/busybox:v1"
bad=$(hot_json | jq -r '.items[] | select(
    ([.spec.containers[].name] != ["sidecar-1", "sidecar-2", "main"])
    or (.metadata.annotations["kruise.io/sidecarset-working-hotupgrade-container"] != "{\"sidecar\":\"sidecar-1\"}")
    or (.metadata.annotations["version.sidecarset.kruise.io/sidecar-1"] != "1")
    or (.metadata.annotations["version.sidecarset.kruise.io/sidecar-2"] != "0")) | .metadata.name')
[ -z "$bad" ] || die "hot pods injected otherwise than OpenKruise does: $bad"
hot_table >"$WORK/before4c"
watch_app_pods hotupgrade "$WORK/watch4c.json"
HOT_WATCH_PID=$WATCH_PID
wait_for 30 "the pod watch to list the 2 hot pods" watch_started "$WORK/watch4c.json" 2
k patch sidecarset "$HOT_SET" --type json \
  -p "[{\"op\":\"replace\",\"path\":\"/spec/containers/0/image\",\"value\":\"$REG/busybox:v2\"}]" >/dev/null ||
  die "patching the hot sidecar image"
wait_for 240 "2 hot pods with the working container on busybox:v2, the other reset to the empty image" hot_at "$REG/busybox:v2"
hot_status_done() {
  k get sidecarset "$HOT_SET" -o json | jq -e '.status.observedGeneration == .metadata.generation
    and .status.matchedPods == 2 and .status.updatedPods == 2 and .status.readyPods == 2' >/dev/null
}
wait_for 60 "hot set status matched 2 updated 2 ready 2" hot_status_done
kill "$HOT_WATCH_PID" 2>/dev/null
hot_table >"$WORK/after4c"
[ "$(cut -f1,2 "$WORK/before4c")" = "$(cut -f1,2 "$WORK/after4c")" ] ||
  die "hot pods replaced: $(cut -f1,2 "$WORK/before4c" | tr '\n' ' ') -> $(cut -f1,2 "$WORK/after4c" | tr '\n' ' ')"
[ "$(awk '$3 == "sidecar-2"' "$WORK/after4c" | wc -l)" = 2 ] ||
  die "the working container did not swap to sidecar-2: $(tr '\n' ' ' <"$WORK/after4c")"
unmarked=$(hot_json | jq -r '.items[] | select(any(.status.conditions[]?; .type == "SidecarSetUpgradable"
  and .status == "True" and .reason == "AllSidecarsetUpgradable") | not) | .metadata.name')
[ -z "$unmarked" ] || die "hot pods without SidecarSetUpgradable True: $unmarked"
# Over every moment of the watch: in each pod, how many of the pair run a real image (by their
# status, not the empty one) and are ready; pods seen with both running; pods mid upgrade at once.
read -r min_working both_seen max_mid < <(PYTHONPATH="$ROOT/test/e2e" python3 - "$WORK/watch4c.json" "$HOT_EMPTY" <<'PYEOF'
import sys
from watch_events import events
empty = sys.argv[2]
pods, both, min_working, max_mid = {}, set(), 2, 0
def same(spec, status):
    return spec is not None and status in (spec, "docker.io/" + spec)
def real(img):
    return not same(empty, img)
for ev in events(sys.argv[1]):
    obj = ev.get("object", {})
    if ev.get("type") == "DELETED" or obj.get("metadata", {}).get("deletionTimestamp"):
        continue
    name = obj["metadata"]["name"]
    st = {c["name"]: c for c in obj.get("status", {}).get("containerStatuses", [])}
    spec = {c["name"]: c.get("image") for c in obj.get("spec", {}).get("containers", [])}
    pair = ("sidecar-1", "sidecar-2")
    working = sum(1 for n in pair if n in st and st[n].get("ready") and real(st[n].get("image", "")))
    if working == 2:
        both.add(name)
    # Mid upgrade: a container of the pair not yet running its spec image, or both on real images.
    mid = any(not same(spec.get(n), st.get(n, {}).get("image")) for n in pair) or \
        all(real(spec.get(n) or empty) for n in pair)
    pods[name] = (working, mid)
    min_working = min(min_working, min(w for w, _ in pods.values()))
    max_mid = max(max_mid, sum(1 for _, m in pods.values() if m))
print(min_working, len(both), max_mid)
PYEOF
)
[ "$min_working" -ge 1 ] || die "a hot pod had no ready sidecar on a real image at some moment"
[ "$both_seen" = 2 ] || die "$both_seen of 2 pods seen with both sidecars running (new before old reset)"
[ "$max_mid" = 1 ] || die "$max_mid hot pods were mid upgrade at once, want exactly 1 (maxUnavailable 1)"
k -n "$NS" delete deployment hot --wait=false >/dev/null 2>&1
k delete sidecarset "$HOT_SET" >/dev/null 2>&1 || die "deleting the hot SidecarSet"
hot_gone() { [ "$(hot_json | jq '.items | length')" = 0 ]; }
wait_for "$POD_GONE_TIMEOUT" "the hot pods to be gone" hot_gone
step_done "2 pods hot-upgraded in place (UIDs kept, sidecar-2 working on v2, sidecar-1 back on the empty image, SidecarSetUpgradable True); at every moment >= $min_working working sidecar per pod, both ran together in $both_seen pods, at most $max_mid pod mid upgrade"

# --- 5 -------------------------------------------------------------------------------------------
step 5 "a change other than images reaches new pods only"
pod_table >"$WORK/before5"
k patch sidecarset "$SET" --type json \
  -p '[{"op":"add","path":"/spec/containers/0/env","value":[{"name":"LOG_LEVEL","value":"debug"}]}]' >/dev/null ||
  die "patching the sidecar env"
deployment 4 | apply_stdin
wait_for 120 "4 Ready pods" ready_pods 4
wait_for 60 "status matched 4, updated 1, ready 4" status_is "4 1 4"
with_env=$(pods_json | jq -r '[.items[] | select(any(.spec.containers[0].env[]?; .name == "LOG_LEVEL"))] | length')
[ "$with_env" = 1 ] || die "$with_env pods have LOG_LEVEL, want only the new one"
marked() { # the 3 old pods have SidecarSetUpgradable False for this set, the new pod has none
  [ "$(pods_json | jq -r --arg s "$SET" '[.items[] | select(any(.status.conditions[]?;
      .type == "SidecarSetUpgradable" and .status == "False" and .reason == "UpdateImmutableField"
      and ((.message | fromjson)[$s] == false)))] | length')" = 3 ] &&
  [ "$(pods_json | jq '[.items[] | select(any(.status.conditions[]?; .type == "SidecarSetUpgradable"))] | length')" = 3 ]
}
wait_for 60 "condition SidecarSetUpgradable False on the 3 old pods" marked
pod_table | grep -F -f <(cut -f1 "$WORK/before5") | cut -f1-6 >"$WORK/kept5"
cut -f1-6 "$WORK/before5" | cmp -s - "$WORK/kept5" || die "existing pods changed: $(diff <(cut -f1-6 "$WORK/before5") "$WORK/kept5" | tr '\n' ' ')"
step_done "old pods untouched (condition SidecarSetUpgradable False), the new pod has LOG_LEVEL; status matched 4 updated 1"

# --- 5b ------------------------------------------------------------------------------------------
step 5b "revision history; injectionStrategy.revision injects the first revision into a new pod"
revisions_json() { k -n kruise-system get controllerrevisions -l "kruise.io/sidecarset-name=$SET" -o json; }
latest_recorded() { # the set's latestRevision exists and records its current spec (v2 + env)
  local latest
  latest=$(ss_json | jq -r '.status.latestRevision // ""')
  [ -n "$latest" ] && revisions_json | jq -e --arg n "$latest" '.items[] | select(.metadata.name == $n)
    | .data.spec.containers[0].env[]? | select(.name == "LOG_LEVEL")' >/dev/null
}
wait_for 60 "status.latestRevision naming the revision of the current spec" latest_recorded
images=$(revisions_json | jq -r '[.items | sort_by(.revision)[] | .data.spec.containers[0].image | sub(".*/"; "")] | join(" ")')
[ "$images" = "busybox:1.35 busybox:v1 busybox:v2 busybox:v2" ] || die "revisions by number: $images"
first=$(revisions_json | jq -r --arg img "$REG/busybox:1.35" \
  '[.items[] | select(.data.spec.containers[0].image == $img)][0].metadata.name')
pod_table >"$WORK/before5b"
k patch sidecarset "$SET" --type json -p "[
  {\"op\":\"add\",\"path\":\"/spec/updateStrategy/paused\",\"value\":true},
  {\"op\":\"add\",\"path\":\"/spec/injectionStrategy/revision\",
   \"value\":{\"revisionName\":\"$first\",\"policy\":\"Always\"}}]" >/dev/null ||
  die "patching updateStrategy.paused and injectionStrategy.revision"
# The webhook's cache sees the set change through its informer: new pods until then could get
# the latest; wait until the set it holds names the revision (a server-side dry run shows it).
dry_run_image() {
  k -n "$NS" run probe-5b --image="$REG/busybox:1.35" --labels=app=nginx --dry-run=server -o json \
    2>/dev/null | jq -r '(.spec.containers[] | select(.name == "sidecar1") | .image) // "-"'
}
injects_first() { [ "$(dry_run_image)" = "$REG/busybox:1.35" ]; }
wait_for 30 "the pod webhook to inject the first revision (server-side dry run)" injects_first
deployment 5 | apply_stdin
wait_for 120 "5 Ready pods" ready_pods 5
new_pod=$(pod_table | grep -v -F -f <(cut -f1 "$WORK/before5b") | cut -f1)
[ "$(echo "$new_pod" | wc -w)" = 1 ] || die "new pods: '$new_pod', want one"
got=$(pods_json | jq -r --arg p "$new_pod" '.items[] | select(.metadata.name == $p)
  | [(.spec.containers[] | select(.name == "sidecar1") | .image),
     ((.metadata.annotations["kruise.io/sidecarset-hash"] | fromjson)["test-sidecarset"].controllerRevision)]
  | @tsv')
[ "$got" = "$REG/busybox:1.35	$first" ] || die "new pod $new_pod: sidecar image and recorded revision '$got', want busybox:1.35 and $first"
pod_table | grep -F -f <(cut -f1 "$WORK/before5b") | cut -f1-6 >"$WORK/kept5b"
cut -f1-6 "$WORK/before5b" | cmp -s - "$WORK/kept5b" || die "existing pods changed while paused"
step_done "4 revisions (1.35, v1, v2, v2+env), latestRevision recorded; new pod $new_pod got busybox:1.35 from $first"

# --- 6 -------------------------------------------------------------------------------------------
step 6 "with the manager down, pods are still created (without the sidecar)"
kill "$MANAGER_PID" 2>/dev/null && wait "$MANAGER_PID" 2>/dev/null
MANAGER_PID=
deployment 6 | apply_stdin
wait_for 120 "6 Ready pods" ready_pods 6
plain=$(pods_json | jq -r '[.items[] | select([.spec.containers[].name] == ["main"])] | length')
[ "$plain" = 1 ] || die "$plain pods without the sidecar, want the one created while the manager was down"
plain_pod=$(pods_json | jq -r '.items[] | select([.spec.containers[].name] == ["main"]) | .metadata.name')
step_done "the pod created with no manager answering exists, without sidecar1"

step 6b "the manager started again notes the pod created without the sidecar, and only it"
mv "$WORK/manager.log" "$WORK/manager-before-6.log"
start_host_manager "$MANAGER" "$WORK" "$BASE"
noted() { # POD: its kruise.io/sidecarset-not-injected
  k -n "$NS" get pod "$1" -o json | jq -r '.metadata.annotations["kruise.io/sidecarset-not-injected"] // ""'
}
plain_noted() { [ "$(noted "$plain_pod")" = "$SET" ]; }
wait_for 60 "annotation kruise.io/sidecarset-not-injected=$SET on $plain_pod" plain_noted
not_injected_events() { # the SidecarSetNotInjected events of this namespace: "pod type count message"
  k -n "$NS" get events -o json | jq -r '.items[] | select(.reason == "SidecarSetNotInjected")
    | [.involvedObject.name, .type, .count, .message] | @tsv'
}
has_event() { [ -n "$(not_injected_events)" ]; }
wait_for 30 "a SidecarSetNotInjected event" has_event
events=$(not_injected_events)
[ "$(wc -l <<<"$events")" = 1 ] || die "SidecarSetNotInjected events: $events; want one, on $plain_pod"
IFS=$'\t' read -r ev_pod ev_type ev_count ev_message <<<"$events"
[ "$ev_pod $ev_type $ev_count" = "$plain_pod Warning 1" ] ||
  die "event on '$ev_pod', type '$ev_type', count '$ev_count'; want $plain_pod Warning 1"
case "$ev_message" in *"$SET"*"pod webhook did not inject"*) ;; *) die "event message: $ev_message" ;; esac
# The manager's first pass counts every pod it would note before noting any.
found=$(grep -o '[0-9]* pod(s) created without the sidecars of a matching SidecarSet' "$WORK/manager.log" | head -1)
[ "${found%% *}" = 1 ] || die "the first pass found '${found:-nothing}'; want 1 pod"
all_pods=$(k -n "$NS" get pods -o json)
others=$(jq -r --arg p "$plain_pod" '[.items[]
  | select(.metadata.name != $p and .metadata.annotations["kruise.io/sidecarset-not-injected"] != null)
  | .metadata.name] | join(" ")' <<<"$all_pods")
[ -z "$others" ] || die "injected pods noted too: $others"
step_done "$plain_pod noted ($SET) with one Warning event SidecarSetNotInjected; the $(jq '.items | length - 1' <<<"$all_pods") other pods untouched"

say "all steps passed:"
for r in "${RESULTS[@]}"; do echo "  $r"; done
