#!/usr/bin/env bash
# WorkloadSpread end to end on ../shared/kube-local (GitHub issue 17): the real API server calls
# our pod webhook (/mutate-pod) on the pods a CloneSet creates, our controller keeps the
# WorkloadSpread's status and the pods' deletion costs, the real scheduler places (or does not
# place) the pods by the node affinity the webhook injected. One kruise-manager runs on the host
# (webhooks by URL, as test/e2e/manager explains); pods are hostNetwork, as kube-local has no pod
# network.
#
# One node, the one kube-local names (KUBE_LOCAL_NODE_NAME): a subset pinned to it (its hostname
# and, when it has one, its zone label, both read at run time) is schedulable; a subset of a zone
# no node has is not, so its pods stay Pending there.
#
#   1. deploy/overlays/kube-local without the DaemonSet and the manager Deployment; the manager;
#   2. validation: an invalid WorkloadSpread (two subsets of one name, 150%) is refused naming
#      both problems; a second WorkloadSpread for an already spread CloneSet is refused;
#   3. one subset without maxReplicas (the webhook alone decides): each pod of a CloneSet of 2
#      gets the subset's node affinity, its patch (a label) and the annotation
#      apps.kruise.io/matched-workloadspread, and runs on the node;
#   4. the OpenKruise 0.10 release blog's WorkloadSpread over a CloneSet of 5: subset-a (this
#      node, maxReplicas 3) gets exactly 3 Running pods, subset-b (a zone that does not exist)
#      the other 2, Pending with its affinity; status.subsetStatuses counts 3 (missing 0) and 2
#      (missing -1); pod-deletion-cost 200 on subset-a's pods, 100 on subset-b's; a deleted
#      subset-a pod is replaced in subset-a (subset-b's pods untouched);
#   5. scale-down: the CloneSet scaled to 3 removes subset-b's pods and keeps subset-a's (same
#      UIDs); subset-a's maxReplicas lowered to 2 gives one of its pods cost -100, and a scale to
#      2 removes exactly that pod;
#   6. Adaptive (rescheduleCriticalSeconds 5): a CloneSet of 2 whose first subset (maxReplicas 2)
#      is the absent zone: its pods stay Pending, the controller deletes them after 5 s and marks
#      the subset Schedulable False, and their replacements run on the node in the last subset.
#
# Everything it creates is deleted again, also on failure (namespace with its CloneSets and
# WorkloadSpreads, manager, its Lease, webhook configurations, RBAC, certificate Secret); CRDs and
# the kruise namespaces are left. Usage: workloadspread_e2e.sh KRUISE_MANAGER_BINARY
# Environment: KRUISE_KUBE_LOCAL_ENV, KRUISE_E2E_KEEP_WORK=1 (keep the work dir),
# KRUISE_E2E_WORKLOADSPREAD_PORT_BASE (default 16550; base..base+2: webhook, health, metrics).
set -uo pipefail
shopt -s lastpipe

ROOT=$(cd "$(dirname "$(readlink -f "$0")")/../../.." && pwd)
# shellcheck source=../lib.sh
. "$ROOT/test/e2e/lib.sh"
manager_e2e_init workloadspread 16550 3 "${1:-}"
NODE=$KUBE_LOCAL_NODE_NAME
ABSENT_ZONE=kruise-e2e-no-such-zone
WATCH_PID=

show_spreads() {
  say "pod annotations:"
  k -n "$NS" get pods -o json 2>/dev/null | jq -r '.items[] | "    \(.metadata.name) \(.metadata.annotations
    | with_entries(select(.key | test("workloadspread|deletion-cost"))) | tostring)"'
  say "workloadspreads:"
  k -n "$NS" get ws -o yaml 2>/dev/null | grep -A40 '^  status:' | indent
}
trap 'manager_e2e_exit 20 - show_spreads' EXIT

# --- helpers -------------------------------------------------------------------------------------
ws_json() { k -n "$NS" get ws "$1" -o json; }
# jq over the WorkloadSpread NAME; succeeds when the expression is true.
ws_is() { [ "$(ws_json "$1" 2>/dev/null | jq -r "$2")" = true ]; }
# The controller has written a status for the current generation (the webhook spreads nothing
# before it does).
ws_observed() {
  ws_is "$1" '.status.observedGeneration == .metadata.generation and (.status.subsetStatuses | length) > 0'
}
# "name uid subset phase node cost" per live pod of app NAME (subset "-" when not spread, cost
# "-" when none), sorted by name.
pod_table() {
  k -n "$NS" get pods -l "app=$1" -o json | jq -r '.items[] | select(.metadata.deletionTimestamp == null)
    | [.metadata.name, .metadata.uid,
       ((.metadata.annotations["apps.kruise.io/matched-workloadspread"] // "{}" | fromjson | .subset) // "-"),
       .status.phase, (.spec.nodeName // "-"),
       (.metadata.annotations["controller.kubernetes.io/pod-deletion-cost"] // "-")] | @tsv' | sort
}
# count_pods NAME AWK-CONDITION: live pods of app NAME whose pod_table row matches.
count_pods() { pod_table "$1" | awk -F'\t' "$2" | wc -l; }
# A CloneSet NAME of REPLICAS busybox pods, hostNetwork, Ready once started.
cloneset_yaml() {
  cat <<EOF
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata:
  name: $1
spec:
  replicas: $2
  selector:
    matchLabels:
      app: $1
  template:
    metadata:
      labels:
        app: $1
    spec:
      hostNetwork: true
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: $KUBE_LOCAL_BUSYBOX_IMAGE
        command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
EOF
}
cs_is() { [ "$(k -n "$NS" get cloneset "$1" -o json 2>/dev/null | jq -r "$2")" = true ]; }
# The node term of a subset on this node: its hostname, and its zone when it has one.
here_term() {
  cat <<EOF
      matchExpressions:
      - key: kubernetes.io/hostname
        operator: In
        values: [$NODE]
EOF
  [ -z "$ZONE" ] || cat <<EOF
      - key: topology.kubernetes.io/zone
        operator: In
        values: [$ZONE]
EOF
}
absent_term() {
  cat <<EOF
      matchExpressions:
      - key: topology.kubernetes.io/zone
        operator: In
        values: [$ABSENT_ZONE]
EOF
}
# The zones named by a pod's injected required node affinity, space separated.
pod_affinity_values() {
  k -n "$NS" get pod "$1" -o json | jq -r '[.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution
    .nodeSelectorTerms[]?.matchExpressions[]? | "\(.key)=\(.values | join(","))"] | join(" ")'
}
delete_objects() { # KIND NAME...: deletes them without waiting (no_pods waits for their pods)
  local kind=$1
  shift
  k -n "$NS" delete "$kind" "$@" --ignore-not-found --wait=false >/dev/null 2>&1
}
no_pods() { [ -z "$(k -n "$NS" get pods -l "app=$1" -o name 2>/dev/null)" ]; }

# --- 1 -------------------------------------------------------------------------------------------
step 1 "CRDs, webhooks and RBAC from deploy/overlays/kube-local; kruise-manager on the host"
k get node "$NODE" >/dev/null || die "node $NODE not found"
ZONE=$(k get node "$NODE" -o jsonpath='{.metadata.labels.topology\.kubernetes\.io/zone}')
[ "$ZONE" != "$ABSENT_ZONE" ] || die "node $NODE is in zone $ABSENT_ZONE, the zone this test needs absent"
[ -z "$(k get nodes -l "topology.kubernetes.io/zone=$ABSENT_ZONE" -o name)" ] ||
  die "a node is in zone $ABSENT_ZONE, the zone this test needs absent"
deploy_manager_objects "$WORK" "$NS" workloadspreads.apps.kruise.io
start_host_manager "$MANAGER" "$WORK" "$BASE"
step_done "manager ready; node $NODE, zone '${ZONE:-none}'"

# --- 2 -------------------------------------------------------------------------------------------
step 2 "an invalid WorkloadSpread and a second one for the same CloneSet are refused"
cat >"$WORK/bad.yaml" <<EOF
apiVersion: apps.kruise.io/v1alpha1
kind: WorkloadSpread
metadata:
  name: bad
spec:
  targetRef:
    apiVersion: apps.kruise.io/v1alpha1
    kind: CloneSet
    name: web
  subsets:
  - name: twin
    maxReplicas: 150%
  - name: twin
EOF
if k -n "$NS" apply -f "$WORK/bad.yaml" >"$WORK/bad.log" 2>&1; then
  die "an invalid WorkloadSpread was admitted"
fi
grep -q 'twin' "$WORK/bad.log" && grep -q '150%' "$WORK/bad.log" ||
  die "refused without naming both problems: $(cat "$WORK/bad.log")"
bad_reason=$(grep -o 'denied the request: .*' "$WORK/bad.log" | head -c 200)
cat >"$WORK/single.yaml" <<EOF
apiVersion: apps.kruise.io/v1alpha1
kind: WorkloadSpread
metadata:
  name: ws-single
spec:
  targetRef:
    apiVersion: apps.kruise.io/v1alpha1
    kind: CloneSet
    name: single
  subsets:
  - name: only
    requiredNodeSelectorTerm:
$(here_term)
    patch:
      metadata:
        labels:
          example.com/subset: only
EOF
apply_stdin <"$WORK/single.yaml"
sed -e 's/name: ws-single/name: ws-single-2/' "$WORK/single.yaml" >"$WORK/second.yaml"
if k -n "$NS" apply -f "$WORK/second.yaml" >"$WORK/second.log" 2>&1; then
  die "a second WorkloadSpread for CloneSet single was admitted"
fi
grep -Eq 'WorkloadSpread ws-single([^-]|$)' "$WORK/second.log" && grep -q 'spec.targetRef' "$WORK/second.log" ||
  die "refused without naming the other one: $(cat "$WORK/second.log")"
second_reason=$(grep -o 'denied the request: .*' "$WORK/second.log" | head -c 200)
columns=$(k -n "$NS" get ws ws-single --no-headers | awk '{ print $2, $3 }')
[ "$columns" = "single CloneSet" ] || die "kubectl get ws: WORKLOADNAME WORKLOADKIND = $columns"
step_done "refused: $bad_reason; $second_reason"

# --- 3 -------------------------------------------------------------------------------------------
step 3 "one subset without maxReplicas: every pod gets its affinity, patch and annotation"
cloneset_yaml single 2 | apply_stdin
single_running() {
  [ "$(count_pods single "\$3 == \"only\" && \$4 == \"Running\" && \$5 == \"$NODE\"")" = 2 ] &&
    [ "$(count_pods single 1)" = 2 ]
}
wait_for 120 "2 pods of CloneSet single running in subset only" single_running
for pod in $(pod_table single | cut -f1); do
  k -n "$NS" get pod "$pod" -o json >"$WORK/pod.json"
  jq -e '.metadata.labels["example.com/subset"] == "only"' "$WORK/pod.json" >/dev/null ||
    die "$pod lacks the subset's patch label"
  [ "$(jq -r '.metadata.annotations["apps.kruise.io/matched-workloadspread"] | fromjson | .name' "$WORK/pod.json")" = ws-single ] ||
    die "$pod's matched-workloadspread annotation does not name ws-single"
  affinity=$(pod_affinity_values "$pod")
  [[ "$affinity" == *"kubernetes.io/hostname=$NODE"* ]] || die "$pod's required node affinity: '$affinity'"
done
step_done "2 pods on $NODE with the subset's label, annotation and affinity ($affinity)"
delete_objects cloneset single
delete_objects ws ws-single

# --- 4 -------------------------------------------------------------------------------------------
step 4 "the 0.10 blog's WorkloadSpread: subset-a (this node) fills to maxReplicas 3, subset-b the rest"
cat >"$WORK/blog.yaml" <<EOF
apiVersion: apps.kruise.io/v1alpha1
kind: WorkloadSpread
metadata:
  name: workloadspread-demo
spec:
  targetRef:
    apiVersion: apps.kruise.io/v1alpha1
    kind: CloneSet
    name: web
  subsets:
  - name: subset-a
    requiredNodeSelectorTerm:
$(here_term)
    maxReplicas: 3
  - name: subset-b
    requiredNodeSelectorTerm:
$(absent_term)
EOF
apply_stdin <"$WORK/blog.yaml"
wait_for 60 "the controller's first status of workloadspread-demo" ws_observed workloadspread-demo
wait_for "$POD_GONE_TIMEOUT" "no pod of CloneSet single left" no_pods single
cloneset_yaml web 5 | apply_stdin
spread_3_2() {
  [ "$(count_pods web "\$3 == \"subset-a\" && \$4 == \"Running\" && \$5 == \"$NODE\"")" = 3 ] &&
    [ "$(count_pods web '$3 == "subset-b" && $4 == "Pending" && $5 == "-"')" = 2 ] &&
    [ "$(count_pods web 1)" = 5 ]
}
wait_for 120 "3 pods Running in subset-a, 2 Pending in subset-b" spread_3_2
for pod in $(pod_table web | awk -F'\t' '$3 == "subset-b" { print $1 }'); do
  affinity=$(pod_affinity_values "$pod")
  [[ "$affinity" == *"topology.kubernetes.io/zone=$ABSENT_ZONE"* ]] || die "$pod's required node affinity: '$affinity'"
done
status_3_2() {
  ws_is workloadspread-demo '.status.observedGeneration == .metadata.generation
    and ([.status.subsetStatuses[] | [.name, .replicas, .missingReplicas]]
         == [["subset-a", 3, 0], ["subset-b", 2, -1]])'
}
wait_for 60 "subsetStatuses subset-a 3/missing 0, subset-b 2/missing -1" status_3_2
costs_set() {
  [ "$(count_pods web '$3 == "subset-a" && $6 == "200"')" = 3 ] &&
    [ "$(count_pods web '$3 == "subset-b" && $6 == "100"')" = 2 ]
}
wait_for 60 "pod-deletion-cost 200 on subset-a's pods and 100 on subset-b's" costs_set
# A deleted subset-a pod frees its place (the DELETE is recorded in deletingPods, the controller
# then counts the pod gone): its replacement goes to subset-a again, subset-b keeps its 2 pods.
pod_table web | awk -F'\t' '$3 == "subset-b" { print $2 }' >"$WORK/b-uids"
victim=$(pod_table web | awk -F'\t' '$3 == "subset-a" { print $1 }' | head -1)
k -n "$NS" delete pod "$victim" --wait=false >/dev/null || die "deleting $victim"
replaced_in_a() {
  ! pod_table web | cut -f1 | grep -qx "$victim" && spread_3_2 &&
    cmp -s "$WORK/b-uids" <(pod_table web | awk -F'\t' '$3 == "subset-b" { print $2 }')
}
wait_for 60 "$victim replaced in subset-a" replaced_in_a
wait_for 60 "status and costs for the replacement" eval 'status_3_2 && costs_set'
step_done "3 Running in subset-a, 2 Pending in subset-b (affinity $ABSENT_ZONE); status and costs 200/100; deleted $victim replaced in subset-a"

# --- 5 -------------------------------------------------------------------------------------------
step 5 "scale-down removes subset-b's pods first, then the pod beyond a lowered maxReplicas"
pod_table web | awk -F'\t' '$3 == "subset-a" { print $1 "\t" $2 }' >"$WORK/a-pods.tsv"
k -n "$NS" scale cloneset web --replicas=3 >/dev/null || die "kubectl scale"
only_a() {
  [ "$(count_pods web 1)" = 3 ] && [ "$(count_pods web '$3 == "subset-b"')" = 0 ] &&
    cmp -s "$WORK/a-pods.tsv" <(pod_table web | cut -f1,2) &&
    cs_is web '.status.replicas == 3 and .status.observedGeneration == .metadata.generation'
}
wait_for 60 "subset-b's 2 pods deleted, subset-a's 3 kept" only_a
k -n "$NS" patch ws workloadspread-demo --type json \
  -p '[{"op":"replace","path":"/spec/subsets/0/maxReplicas","value":2}]' >/dev/null ||
  die "lowering subset-a's maxReplicas"
one_extra() {
  EXTRA=$(pod_table web | awk -F'\t' '$3 == "subset-a" && $6 == "-100" { print $1 }')
  [ "$(wc -w <<<"$EXTRA")" = 1 ] && [ "$(count_pods web '$3 == "subset-a" && $6 == "200"')" = 2 ] &&
    ws_is workloadspread-demo '.status.observedGeneration == .metadata.generation
      and .status.subsetStatuses[0].replicas == 3 and .status.subsetStatuses[0].missingReplicas == 0'
}
wait_for 60 "one subset-a pod at cost -100, two at 200" one_extra
k -n "$NS" scale cloneset web --replicas=2 >/dev/null || die "kubectl scale"
extra_gone() {
  [ "$(count_pods web 1)" = 2 ] && ! pod_table web | cut -f1 | grep -qx "$EXTRA" &&
    cs_is web '.status.replicas == 2 and .status.observedGeneration == .metadata.generation'
}
wait_for 60 "$EXTRA (cost -100) deleted" extra_gone
step_done "scale to 3 removed both subset-b pods; with maxReplicas 2 the scale to 2 removed $EXTRA (cost -100)"
delete_objects cloneset web
delete_objects ws workloadspread-demo

# --- 6 -------------------------------------------------------------------------------------------
step 6 "Adaptive: pods Pending too long in the first subset are recreated in the last one"
cat <<EOF | apply_stdin
apiVersion: apps.kruise.io/v1alpha1
kind: WorkloadSpread
metadata:
  name: ws-adaptive
spec:
  targetRef:
    apiVersion: apps.kruise.io/v1alpha1
    kind: CloneSet
    name: adaptive
  scheduleStrategy:
    type: Adaptive
    adaptive:
      rescheduleCriticalSeconds: 5
  subsets:
  - name: elsewhere
    requiredNodeSelectorTerm:
$(absent_term)
    maxReplicas: 2
  - name: here
    requiredNodeSelectorTerm:
$(here_term)
EOF
wait_for 60 "the controller's first status of ws-adaptive" ws_observed ws-adaptive
wait_for "$POD_GONE_TIMEOUT" "no pod of CloneSet web left" no_pods web
watch_app_pods adaptive "$WORK/watch6.json"
t=$(now_ms)
cloneset_yaml adaptive 2 | apply_stdin
moved() {
  [ "$(count_pods adaptive "\$3 == \"here\" && \$4 == \"Running\" && \$5 == \"$NODE\"")" = 2 ] &&
    [ "$(count_pods adaptive 1)" = 2 ]
}
wait_for 120 "2 pods Running in subset here" moved
moved_ms=$(($(now_ms) - t))
kill "$WATCH_PID" 2>/dev/null
wait "$WATCH_PID" 2>/dev/null
WATCH_PID=
# Pods first admitted to subset elsewhere, and whether the watch saw each of them go.
read -r first gone < <(PYTHONPATH="$ROOT/test/e2e" python3 - "$WORK/watch6.json" <<'PY'
import json, sys
from watch_events import events
elsewhere, gone = set(), set()
for ev in events(sys.argv[1]):
    meta = ev.get("object", {}).get("metadata", {})
    subset = json.loads(meta.get("annotations", {}).get("apps.kruise.io/matched-workloadspread", "{}")).get("subset")
    if subset == "elsewhere":
        elsewhere.add(meta.get("uid"))
        if ev.get("type") == "DELETED" or meta.get("deletionTimestamp"):
            gone.add(meta.get("uid"))
print(len(elsewhere), len(gone))
PY
)
[ "$first" -ge 2 ] || die "only $first pods were first admitted to subset elsewhere"
[ "$gone" = "$first" ] || die "$gone of $first pods of subset elsewhere were deleted"
ws_is ws-adaptive '[.status.subsetStatuses[] | select(.name == "elsewhere") | .conditions[]?
  | select(.type == "Schedulable") | .status] == ["False"]' ||
  die "subset elsewhere is not Schedulable False: $(ws_json ws-adaptive | jq -c .status.subsetStatuses)"
step_done "$first pods Pending in subset elsewhere were deleted; 2 replacements Running in subset here after $(secs "$moved_ms")s; elsewhere Schedulable False"

say "all steps passed:"
for r in "${RESULTS[@]}"; do echo "  $r"; done
