#!/usr/bin/env bash
# CloneSet end to end on ../shared/kube-local (GitHub issue 14): the real API server runs our CRD and
# webhooks, the real kubelet restarts the containers our in-place updates change. One kruise-manager
# runs on the host (webhooks by URL, as test/e2e/manager explains); pods are hostNetwork, as
# kube-local has no pod network.
#
#   1. deploy/overlays/kube-local without the DaemonSet and the manager Deployment; the manager;
#   2. OpenKruise's basic CloneSet (deploy/samples/cloneset-v1alpha1.yaml, unchanged): the webhook
#      filled OpenKruise's defaults, 5 pods named <set>-<instance id> with the InPlaceUpdateReady
#      gate become Ready, status and `kubectl get clone` columns say so;
#   3. an invalid CloneSet (selector not matching the template) is refused with the webhook's reason;
#   4. in-place update to a tag with the same digest (busybox:1.35 -> busybox:latest, which
#      OpenKruise's digest check never completes): every pod keeps its UID and restarts once, and
#      a watch over the whole update never sees more than maxUnavailable (20% of 5: 1) pods unready;
#   5. `kubectl scale --replicas=6` (scale subresource): a sixth pod;
#   6. scaleStrategy.podsToDelete: that pod goes, another replaces it;
#   7. partition "50%" and an image with another digest: 3 of 6 pods updated, 3 kept;
#   8. ReCreate with maxSurge 1, maxUnavailable 0, an env change: both pods replaced, never fewer
#      than 2 Ready and never more than 3 pods;
#   9. lifecycle preDelete: a scale-down leaves the hooked pod PreparingDelete until its label goes;
#  10. two managers with leader election (lease 4 s); a CloneSet of 30 pods with a PVC each,
#      created at most 5 unavailable at a time (scaleStrategy.maxUnavailable); the leader gets
#      kill -9 mid scale-up: the other replica takes the Lease and finishes with exactly 30 pods
#      (a watch sees no 31st pod ever created), 30 distinct instance ids, one PVC per pod and none
#      without one.
#
# Everything it creates is deleted again, also on failure (namespace, manager, webhook
# configurations, RBAC, certificate Secret); CRDs and the kruise namespaces are left.
# Usage: cloneset_e2e.sh KRUISE_MANAGER_BINARY
# Environment: KRUISE_KUBE_LOCAL_ENV, KRUISE_E2E_KEEP_WORK=1 (keep the work dir),
# KRUISE_E2E_CLONESET_PORT_BASE (default 16470; base..base+5:
# webhook, health, metrics of the manager (and of replica a in step 10), the same of replica b).
set -uo pipefail
# `... | apply_stdin`: the last command of a pipeline runs in this shell, so its `die` ends the test
# at once instead of a subshell (which showed up later as a timeout).
shopt -s lastpipe

ROOT=$(cd "$(dirname "$(readlink -f "$0")")/../../.." && pwd)
# shellcheck source=../lib.sh
. "$ROOT/test/e2e/lib.sh"
manager_e2e_init cloneset 16470 6 "${1:-}"

# Hooked pods keep nothing that needs the manager (labels only), so the namespace goes at once.
trap 'manager_e2e_exit 25 - show_status clonesets 30' EXIT

# --- helpers -------------------------------------------------------------------------------------
cs_json() { k -n "$NS" get cloneset "$1" -o json; }
# jq over the CloneSet NAME; succeeds when the expression is true.
cs_is() { [ "$(cs_json "$1" 2>/dev/null | jq -r "$2")" = true ]; }
pods_json() { k -n "$NS" get pods -l "app=$1" -o json; }
# "name uid restartCount image ready" per live pod of app NAME, sorted by name.
pod_table() { app_pod_table "$1"; }
all_ready() { workload_ready cloneset "$@"; } # NAME N: N live pods, all Ready, and the status says so
# watch_stats FILE N: "max_unready max_pods min_ready" over every moment of the watch once its first
# N pods were listed, counting live pods (no deletionTimestamp) and Ready ones.
watch_stats() {
  PYTHONPATH="$ROOT/test/e2e" python3 - "$1" "$2" <<'PYEOF'
import sys
from watch_events import events
initial, listed = int(sys.argv[2]), False
pods = {}
max_unready = max_pods = 0
min_ready = None
for ev in events(sys.argv[1]):
    obj = ev.get("object", {})
    name = obj.get("metadata", {}).get("name")
    if ev.get("type") == "DELETED" or obj.get("metadata", {}).get("deletionTimestamp"):
        pods.pop(name, None)
    else:
        pods[name] = any(c.get("type") == "Ready" and c.get("status") == "True"
                         for c in obj.get("status", {}).get("conditions", []))
    listed = listed or len(pods) >= initial
    if not listed:
        continue
    ready = sum(pods.values())
    max_unready = max(max_unready, len(pods) - ready)
    max_pods = max(max_pods, len(pods))
    min_ready = ready if min_ready is None else min(min_ready, ready)
print(max_unready, max_pods, min_ready if min_ready is not None else 0)
PYEOF
}

# A CloneSet NAME with REPLICAS pods of busybox IMAGE, hostNetwork; EXTRA_SPEC (YAML, indented by
# two spaces) is appended to its spec, EXTRA_LABELS to the template's labels.
set_yaml() {
  local name=$1 replicas=$2 image=$3 extra_spec=${4:-} extra_labels=${5:-}
  cat <<EOF
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata:
  name: $name
spec:
  replicas: $replicas
  selector:
    matchLabels:
      app: $name
  template:
    metadata:
      labels:
        app: $name
$extra_labels
    spec:
      hostNetwork: true
      terminationGracePeriodSeconds: 5
      containers:
      - name: main
        image: $image
        command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
$extra_spec
EOF
}

# --- 1 -------------------------------------------------------------------------------------------
step 1 "CRDs, webhooks and RBAC from deploy/overlays/kube-local; kruise-manager on the host"
deploy_manager_objects "$WORK" "$NS"
start_host_manager "$MANAGER" "$WORK" "$BASE"
step_done "manager ready"

# --- 2 -------------------------------------------------------------------------------------------
step 2 "OpenKruise's basic CloneSet, unchanged"
k -n "$NS" apply -f "$ROOT/deploy/samples/cloneset-v1alpha1.yaml" >"$WORK/apply.log" 2>&1 ||
  die "applying the sample: $(tail -3 "$WORK/apply.log")"
defaults=$(cs_json sample | jq -c '[.spec.updateStrategy.maxUnavailable, .spec.updateStrategy.partition,
  .spec.updateStrategy.maxSurge, .spec.revisionHistoryLimit, .spec.template.spec.dnsPolicy,
  .spec.template.spec.containers[0].imagePullPolicy]')
[ "$defaults" = '["20%",0,0,10,"ClusterFirst","Always"]' ] ||
  die "webhook defaults: $defaults"
wait_for 120 "5 Ready pods of the sample" all_ready sample 5
pods=$(pods_json sample)
bad=$(jq -r '.items[] | select((.metadata.name != "sample-" + .metadata.labels["apps.kruise.io/cloneset-instance-id"])
  or (any(.spec.readinessGates[]?; .conditionType == "InPlaceUpdateReady") | not)
  or (any(.status.conditions[]?; .type == "InPlaceUpdateReady" and .status == "True") | not)
  or (.metadata.ownerReferences[0].kind != "CloneSet")) | .metadata.name' <<<"$pods")
[ -z "$bad" ] || die "pods without instance-id name, gate, condition or owner: $bad"
columns=$(k -n "$NS" get clone sample --no-headers | awk '{ print $2, $3, $4, $5, $6 }')
[ "$columns" = "5 5 5 5 5" ] || die "kubectl get clone: DESIRED UPDATED UPDATED_READY READY TOTAL = $columns"
step_done "defaults filled, 5 Ready pods, kubectl get clone: $columns"

# --- 3 -------------------------------------------------------------------------------------------
step 3 "an invalid CloneSet is refused with the webhook's reason"
set_yaml bad 1 "$KUBE_LOCAL_BUSYBOX_IMAGE" | sed 's/^      app: bad$/      app: other/' \
  >"$WORK/bad.yaml"
if k -n "$NS" apply -f "$WORK/bad.yaml" >"$WORK/bad.log" 2>&1; then
  die "an invalid CloneSet was admitted"
fi
grep -q 'selector' "$WORK/bad.log" || die "refused without naming the selector: $(cat "$WORK/bad.log")"
step_done "refused: $(grep -o 'denied the request: .*' "$WORK/bad.log" | head -c 160)"

# --- 4 -------------------------------------------------------------------------------------------
step 4 "in-place update to a tag with the same digest (busybox:1.35 -> busybox:latest)"
pod_table sample >"$WORK/before.tsv"
watch_app_pods sample "$WORK/watch4.json"
wait_for 20 "the watch's first events" watch_started "$WORK/watch4.json" 5
k -n "$NS" patch cloneset sample --type json \
  -p "[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/image\",\"value\":\"$REG/busybox:latest\"}]" \
  >/dev/null || die "patching the image"
updated_in_place() {
  cs_is sample '.status.updatedReplicas == 5 and .status.updatedReadyReplicas == 5 and .status.readyReplicas == 5
    and .status.currentRevision == .status.updateRevision and .status.observedGeneration == .metadata.generation'
}
wait_for 240 "all 5 pods updated in place and Ready" updated_in_place
kill "$WATCH_PID" 2>/dev/null
pod_table sample >"$WORK/after.tsv"
join -t $'\t' "$WORK/before.tsv" "$WORK/after.tsv" >"$WORK/joined.tsv"
[ "$(wc -l <"$WORK/joined.tsv")" = 5 ] || die "pods were replaced: $(cut -f1 "$WORK/after.tsv" | tr '\n' ' ')"
awk -F'\t' '$2 != $6 || $7 != $3 + 1 || $8 != "'"$REG"'/busybox:latest" { bad = bad " " $1 } END { if (bad) { print bad; exit 1 } }' \
  "$WORK/joined.tsv" >"$WORK/bad.txt" || die "not updated in place once:$(cat "$WORK/bad.txt")"
read -r max_unready _ _ < <(watch_stats "$WORK/watch4.json" 5)
[ "$max_unready" -le 1 ] || die "$max_unready pods were unready at once (maxUnavailable 1)"
step_done "5 pods kept their UIDs, each restarted once; at most $max_unready unready at once"

# --- 5 -------------------------------------------------------------------------------------------
step 5 "kubectl scale --replicas=6"
k -n "$NS" scale cloneset sample --replicas=6 >/dev/null || die "kubectl scale"
wait_for 120 "6 Ready pods" all_ready sample 6
selector=$(cs_json sample | jq -r .status.labelSelector)
[ "$selector" = "app=sample" ] || die "status.labelSelector: $selector"
step_done "6 Ready pods, status.labelSelector $selector"

# --- 6 -------------------------------------------------------------------------------------------
step 6 "scaleStrategy.podsToDelete"
victim=$(pod_table sample | head -1 | cut -f1)
k -n "$NS" patch cloneset sample --type merge -p "{\"spec\":{\"scaleStrategy\":{\"podsToDelete\":[\"$victim\"]}}}" \
  >/dev/null || die "patching podsToDelete"
victim_replaced() {
  ! pod_table sample | cut -f1 | grep -qx "$victim" && all_ready sample 6
}
wait_for 120 "$victim deleted and replaced" victim_replaced
step_done "$victim deleted, 6 Ready pods again"

# --- 7 -------------------------------------------------------------------------------------------
step 7 "partition 50% with an image of another digest"
# One JSON patch: a merge patch would replace the whole containers list (CRDs have no strategic
# merge), dropping the command.
k -n "$NS" patch cloneset sample --type json -p "[
  {\"op\":\"add\",\"path\":\"/spec/updateStrategy/partition\",\"value\":\"50%\"},
  {\"op\":\"add\",\"path\":\"/spec/updateStrategy/inPlaceUpdateStrategy/gracePeriodSeconds\",\"value\":0},
  {\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/image\",\"value\":\"$REG/busybox:v1\"}]" \
  >/dev/null || die "patching partition and image"
pod_table sample >"$WORK/before7.tsv"
half_updated() {
  cs_is sample '.status.updatedReplicas == 3 and .status.updatedReadyReplicas == 3 and .status.expectedUpdatedReplicas == 3
    and .status.readyReplicas == 6 and .status.observedGeneration == .metadata.generation'
}
wait_for 180 "3 of 6 pods on busybox:v1" half_updated
on_v1=$(pod_table sample | awk -F'\t' -v img="$REG/busybox:v1" '$4 == img' | wc -l)
[ "$on_v1" = 3 ] || die "$on_v1 pods run busybox:v1, want 3"
kept=$(join -t $'\t' "$WORK/before7.tsv" <(pod_table sample) | awk -F'\t' '$2 == $6' | wc -l)
[ "$kept" = 6 ] || die "only $kept of 6 pods kept their UID (the update is in place)"
step_done "3 pods updated in place, 3 kept by the partition"

# --- 8 -------------------------------------------------------------------------------------------
step 8 "ReCreate with maxSurge 1 and maxUnavailable 0"
set_yaml surge 2 "$KUBE_LOCAL_BUSYBOX_IMAGE" "  updateStrategy:
    type: ReCreate
    maxSurge: 1
    maxUnavailable: 0" | apply_stdin
wait_for 120 "2 Ready pods of surge" all_ready surge 2
pod_table surge | cut -f1 >"$WORK/surge-before.txt"
watch_app_pods surge "$WORK/watch8.json"
wait_for 20 "the watch's first events" watch_started "$WORK/watch8.json" 2
k -n "$NS" patch cloneset surge --type json -p '[{"op":"add","path":"/spec/template/spec/containers/0/env",
  "value":[{"name":"VERSION","value":"2"}]}]' >/dev/null || die "patching env"
recreated() {
  all_ready surge 2 && cs_is surge '.status.updatedReplicas == 2 and .status.updatedReadyReplicas == 2' &&
    [ -z "$(pod_table surge | cut -f1 | grep -xF -f "$WORK/surge-before.txt")" ]
}
wait_for 180 "both pods replaced" recreated
kill "$WATCH_PID" 2>/dev/null
read -r _ max_pods min_ready < <(watch_stats "$WORK/watch8.json" 2)
[ "$max_pods" -le 3 ] || die "$max_pods pods at once (maxSurge 1)"
[ "$min_ready" -ge 2 ] || die "only $min_ready Ready pods at one point (maxUnavailable 0)"
step_done "2 pods recreated, at most $max_pods pods and at least $min_ready Ready at any time"

# --- 9 -------------------------------------------------------------------------------------------
step 9 "lifecycle preDelete holds a pod in PreparingDelete until its label goes"
set_yaml hooked 2 "$KUBE_LOCAL_BUSYBOX_IMAGE" "  lifecycle:
    preDelete:
      labelsHandler:
        example.com/hold: \"true\"" "        example.com/hold: \"true\"" | apply_stdin
wait_for 120 "2 Ready pods of hooked" all_ready hooked 2
k -n "$NS" scale cloneset hooked --replicas=1 >/dev/null || die "kubectl scale"
held_pod() {
  HELD=$(pods_json hooked | jq -r '.items[] | select(.metadata.labels["lifecycle.apps.kruise.io/state"] == "PreparingDelete")
    | .metadata.name')
  [ -n "$HELD" ]
}
wait_for 60 "a pod in PreparingDelete" held_pod
# Held: still there after another full reconcile (pausing updates changes the generation; the
# status then reports it, written after the scale step ran).
k -n "$NS" patch cloneset hooked --type merge -p '{"spec":{"updateStrategy":{"paused":true}}}' >/dev/null ||
  die "pausing hooked"
wait_for 30 "a reconcile of the new generation" cs_is hooked '.status.observedGeneration == .metadata.generation'
k -n "$NS" get pod "$HELD" >/dev/null 2>&1 || die "$HELD was deleted while its hook held it"
k -n "$NS" label pod "$HELD" example.com/hold- >/dev/null || die "removing the hook label"
held_gone() { ! k -n "$NS" get pod "$HELD" >/dev/null 2>&1 && all_ready hooked 1; }
wait_for "$POD_GONE_TIMEOUT" "$HELD deleted after its hook went" held_gone
step_done "$HELD waited in PreparingDelete and went once its label was removed"

# --- 10 ------------------------------------------------------------------------------------------
step 10 "the leader killed during a scale-up of 30 pods; the standby finishes it"
start_leader_replicas
watch_app_pods big "$WORK/watch10.json"
set_yaml big 30 "$KUBE_LOCAL_BUSYBOX_IMAGE" "  scaleStrategy:
    maxUnavailable: 5
  volumeClaimTemplates:
  - metadata:
      name: data
    spec:
      accessModes: [ReadWriteOnce]
      resources:
        requests:
          storage: 1Mi" | apply_stdin
some_pods() { N=$(pods_json big | jq '.items | length') && [ "$N" -ge 8 ]; }
wait_for 120 "the scale-up under way (8 pods)" some_pods
[ "$N" -lt 30 ] || die "all 30 pods existed before the leader could be killed"
kill_leader "with $N of 30 pods created"
wait_for 300 "30 Ready pods of big" all_ready big 30
kill "$WATCH_PID" 2>/dev/null
created=$(grep -o '"name":"big-[a-z0-9]*"' "$WORK/watch10.json" | sort -u | wc -l)
[ "$created" = 30 ] || die "$created pods were created over the whole scale-up, want exactly 30"
ids=$(pods_json big | jq -r '.items[].metadata.labels["apps.kruise.io/cloneset-instance-id"]' | sort -u | wc -l)
[ "$ids" = 30 ] || die "$ids distinct instance ids, want 30"
pods_json big | jq -r '.items[].metadata.labels["apps.kruise.io/cloneset-instance-id"]' | sort >"$WORK/pod-ids"
k -n "$NS" get pvc -o json | jq -r '.items[] | select(.metadata.name | startswith("data-big-"))
  | .metadata.labels["apps.kruise.io/cloneset-instance-id"]' | sort >"$WORK/pvc-ids"
cmp -s "$WORK/pod-ids" "$WORK/pvc-ids" ||
  die "PVCs do not pair with pods one to one: $(diff "$WORK/pod-ids" "$WORK/pvc-ids" | grep '^[<>]' | tr '\n' ' ')"
step_done "leader $OLD killed at $N/30 pods, $LEADER took over in $(secs "$TAKEOVER_MS")s; 30 pods ever created, 30 ids, 30 PVCs, no orphan"

say "all steps passed:"
for r in "${RESULTS[@]}"; do echo "  $r"; done
