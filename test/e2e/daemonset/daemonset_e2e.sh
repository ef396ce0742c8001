#!/usr/bin/env bash
# Advanced DaemonSet (apps.kruise.io DaemonSet) end to end on a 3-node ../shared/kube-local (GitHub
# issue 16): the real API server runs our CRD and webhooks, the real scheduler places the pods our
# controller creates (a node affinity per pod), the real kubelets restart the containers our
# in-place updates change. One kruise-manager runs on the host (webhooks by URL, as
# test/e2e/manager explains); pods are hostNetwork, as kube-local has no pod network. The sets are
# written as OpenKruise's documentation writes them (apps.kruise.io/v1alpha1).
#
#   1. `up --nodes 3` (the count found is restored at the end); deploy/overlays/kube-local without
#      the DaemonSet and the manager Deployment; the manager;
#   2. eligibility: a nodeSelector the third node lacks and a NoSchedule taint on the second: one
#      pod, on the first node; the taint removed, the label added, then the first node's label
#      removed: the pods follow (one per eligible node, never two on a node, never one elsewhere),
#      and desiredNumberScheduled/currentNumberScheduled/numberReady/updatedNumberScheduled say so;
#   3. rollingUpdateType InPlaceIfPossible, maxUnavailable 1, an image of another digest: every
#      pod keeps its name and UID, restarts once on the new image, goes InPlaceUpdateReady False
#      and back True; a watch over the update sees no other pod and never two unready at once;
#   4. an image that does not exist: the first pod updated in place (the highest node name) stays
#      in ImagePullBackOff and the rollout stops there (maxUnavailable 1: updatedNumberScheduled 1,
#      numberUnavailable 1, the two others untouched); then partition 1 and a good image: the
#      stuck pod is repaired in place and the second highest node updated, the lowest keeps the
#      old revision (updatedNumberScheduled 2); partition 0 updates it too;
#   5. rollingUpdate.selector naming that lowest node and another image: it alone updates, the two
#      others keep theirs; the selector removed, they update;
#   6. rollingUpdateType Standard with maxSurge 1 (maxUnavailable 0): on every node a new pod runs
#      and is Ready next to the old one before the old one is deleted; never more than 4 live pods,
#      never fewer than 3 Ready ones, every pod replaced once.
#
# Everything it creates is deleted again, also on failure (namespace, manager, webhook
# configurations, RBAC, certificate Secret, node labels and taints); CRDs and the kruise namespaces
# are left; the node count is restored.
# Usage: daemonset_e2e.sh KRUISE_MANAGER_BINARY
# Environment: KRUISE_KUBE_LOCAL_ENV, KUBE_LOCAL (the tool, default ../shared/kube-local),
# KRUISE_E2E_KEEP_WORK=1 (keep the work dir: manager log, watch streams),
# KRUISE_E2E_DAEMONSET_PORT_BASE (default 16540; base..base+2: manager webhook, health, metrics).
set -uo pipefail

HERE=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
T0=$SECONDS
# shellcheck source=../lib.sh
. "$ROOT/test/e2e/lib.sh"
[ -n "${1:-}" ] && [ -x "$1" ] || die "usage: $0 KRUISE_MANAGER_BINARY (got '${1:-}')"
MANAGER=$(readlink -f "$1")
kube_local_preflight jq curl python3
KL=${KUBE_LOCAL:-$ROOT/../shared/kube-local}
[ -x "$KL/up" ] || die "no kube-local tool at $KL (set KUBE_LOCAL)"
ENV_FILE=${KRUISE_KUBE_LOCAL_ENV:-${KUBE_LOCAL_STATE:-/tmp/kube-local}/env}

BASE=${KRUISE_E2E_DAEMONSET_PORT_BASE:-16540}
NS=kruise-e2e-daemonset
REG=$KUBE_LOCAL_REGISTRY
IMG0=$KUBE_LOCAL_BUSYBOX_IMAGE # three images of distinct digests
IMG1=$REG/busybox:v1
IMG2=$REG/busybox:v2
IMG_MISSING=$REG/busybox:kruise-e2e-missing # no such tag
ELIGIBLE=kruise-e2e-daemonset # node label (step 2's nodeSelector) and taint key
CANARY=kruise-e2e-daemonset-canary # node label (step 5's rollingUpdate.selector)
NODES_FOUND=$KUBE_LOCAL_NODES
WORK=$(mktemp -d "${TMPDIR:-/tmp}/daemonset-e2e.XXXXXX")
PIDS=()

require_free_ports KRUISE_E2E_DAEMONSET_PORT_BASE "$BASE" $((BASE + 1)) $((BASE + 2))

reload_env() { # after `up --nodes N`: the per-node variables changed
  # shellcheck disable=SC1090
  . "$ENV_FILE"
  NODE_NAMES=($KUBE_LOCAL_NODE_NAMES)
}
unmark_nodes() { # our labels and taint off every node (each node lacking them is fine)
  local node
  for node in $(k get nodes -o name 2>/dev/null); do
    k label "$node" "$ELIGIBLE-" "$CANARY-" >/dev/null 2>&1
    k taint "$node" "$ELIGIBLE-" >/dev/null 2>&1
  done
}

cleanup() {
  local rc=$?
  set +e
  local t0=$SECONDS
  if [ "$rc" != 0 ]; then
    say "pods:"
    k -n "$NS" get pods -o wide --show-labels 2>/dev/null | sed 's/^/    /'
    say "daemonsets:"
    k -n "$NS" get daemonsets.apps.kruise.io -o yaml 2>/dev/null | grep -A20 '^  status:' | sed 's/^/    /'
    say "events (last 25):"
    k -n "$NS" get events --sort-by=.lastTimestamp 2>/dev/null | tail -25 | sed 's/^/    /'
    say "manager log (tail):"
    tail -n 30 "$WORK/manager.log" 2>/dev/null | sed 's/^/    /'
  fi
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  delete_test_deployment "$WORK" "$NS"
  k -n kruise-system delete lease kruise-manager --ignore-not-found >/dev/null 2>&1
  unmark_nodes
  say "cleanup: test objects deleted ($((SECONDS - t0))s)"
  if [ "$(. "$ENV_FILE" && echo "$KUBE_LOCAL_NODES")" != "$NODES_FOUND" ]; then
    "$KL/up" --nodes "$NODES_FOUND" --quiet >/dev/null 2>&1 || say "restoring $NODES_FOUND nodes failed"
    say "cleanup: kube-local back to $NODES_FOUND node(s) ($((SECONDS - t0))s)"
  fi
  if [ -n "${KRUISE_E2E_KEEP_WORK:-}" ]; then say "kept $WORK"; else rm -rf "$WORK"; fi
  exit "$rc"
}
trap cleanup EXIT

# --- helpers -------------------------------------------------------------------------------------
ads_json() { k -n "$NS" get daemonsets.apps.kruise.io "$1" -o json; }
# jq over the DaemonSet NAME; succeeds when the expression is true.
ads_is() { [ "$(ads_json "$1" 2>/dev/null | jq -r "$2")" = true ]; }
# The status counters of NAME on one line, for messages.
ads_status() {
  ads_json "$1" 2>/dev/null | jq -c '.status | {desiredNumberScheduled, currentNumberScheduled,
    numberReady, numberAvailable, updatedNumberScheduled, numberMisscheduled, numberUnavailable}'
}
# settled NAME DESIRED UPDATED: the status of the current generation counts DESIRED pods scheduled,
# Ready and available, UPDATED of them at the update revision, none misscheduled or unavailable.
settled() {
  ads_is "$1" ".status.observedGeneration == .metadata.generation
    and .status.desiredNumberScheduled == $2 and .status.currentNumberScheduled == $2
    and .status.numberReady == $2 and .status.numberAvailable == $2
    and .status.updatedNumberScheduled == $3 and .status.numberMisscheduled == 0
    and (.status.numberUnavailable // 0) == 0"
}
pods_json() { k -n "$NS" get pods -l "app=$1" -o json; }
# The node a pod is for: spec.nodeName once scheduled, else the node its affinity names.
JQ_NODE='(.spec.nodeName // .spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0].values[0] // "-")'
# "node name uid restarts image ready revision in-place-ready" per live pod of app NAME, by node.
pod_table() {
  pods_json "$1" | jq -r ".items[] | select(.metadata.deletionTimestamp == null)
    | [$JQ_NODE, .metadata.name, .metadata.uid, (.status.containerStatuses[0].restartCount // 0),
       .spec.containers[0].image,
       (any(.status.conditions[]?; .type == \"Ready\" and .status == \"True\")),
       .metadata.labels[\"controller-revision-hash\"],
       ([.status.conditions[]? | select(.type == \"InPlaceUpdateReady\") | .status][0] // \"-\")]
    | @tsv" | sort
}
# The nodes of app NAME's live pods, sorted, one line.
pod_nodes() { pod_table "$1" | cut -f1 | tr '\n' ' ' | sed 's/ $//'; }
# pods_on NAME NODES...: exactly one live pod on each of NODES (sorted), none elsewhere, all Ready,
# and the status settled on that many (all updated).
pods_on() {
  local name=$1
  shift
  [ "$(pod_nodes "$name")" = "$*" ] &&
    [ "$(pod_table "$name" | awk -F'\t' '$6 == "true"' | wc -l)" = $# ] && settled "$name" $# $#
}
# watch_pods NAME FILE: streams the pods' watch events into FILE (background; pid in WATCH_PID).
watch_pods() {
  "$KUBECTL" -n "$NS" get pods -l "app=$1" -w --output-watch-events -o json >"$2" 2>/dev/null &
  PIDS+=($!)
  WATCH_PID=$!
}
watch_started() { [ "$(grep -c '^{"type":"ADDED"' "$1" 2>/dev/null)" -ge "$2" ]; }
apply_set() { # YAML on stdin -> kubectl apply in NS (not at the end of a pipeline: die must exit)
  k -n "$NS" apply -f - >"$WORK/apply.log" 2>&1 || die "kubectl apply: $(tail -3 "$WORK/apply.log")"
}
patch_set() { # NAME JSON-PATCH
  k -n "$NS" patch daemonsets.apps.kruise.io "$1" --type json -p "$2" >"$WORK/patch.log" 2>&1 ||
    die "patching $1: $(tail -3 "$WORK/patch.log")"
}
# An Advanced DaemonSet NAME of busybox IMAGE (hostNetwork, Ready 2 s after start), OpenKruise's
# documented shape; ROLLING_UPDATE (YAML lines indented for rollingUpdate) and TEMPLATE_EXTRA (pod
# spec lines, indented for the pod spec) are added.
set_yaml() {
  local name=$1 image=$2 rolling_update=$3 template_extra=${4:-}
  cat <<EOF
apiVersion: apps.kruise.io/v1alpha1
kind: DaemonSet
metadata:
  name: $name
spec:
  selector:
    matchLabels:
      app: $name
  template:
    metadata:
      labels:
        app: $name
    spec:
      hostNetwork: true
      terminationGracePeriodSeconds: 2
$template_extra
      containers:
      - name: main
        image: $image
        command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
        readinessProbe:
          exec:
            command: ["true"]
          initialDelaySeconds: 2
          periodSeconds: 1
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
$rolling_update
EOF
}
# joined_rows BEFORE AFTER: "node uid_before uid_after restarts_before restarts_after image_after
# revision_after" per node present in both tables (tab-separated, by node).
joined_rows() {
  join -t $'\t' "$1" "$2" | awk -F'\t' -v OFS='\t' '{ print $1, $3, $10, $4, $11, $12, $14 }'
}
# expect_in_place BEFORE AFTER NODE IMAGE REVISION: NODE's pod kept its UID, restarted once more and
# runs IMAGE at REVISION. expect_kept ... NODE IMAGE REVISION: the same pod, not restarted.
expect_in_place() {
  awk -F'\t' -v n="$3" -v img="$4" -v rev="$5" '$1 == n { found = 1
      if ($2 != $3 || $5 != $4 + 1 || $6 != img || $7 != rev) { print; exit 1 } }
    END { if (!found) { print "no pod on " n; exit 1 } }' <(joined_rows "$1" "$2") >"$WORK/bad.txt" ||
    die "$3's pod was not updated in place to $4 ($5): $(cat "$WORK/bad.txt")"
}
expect_kept() {
  awk -F'\t' -v n="$3" -v img="$4" -v rev="$5" '$1 == n { found = 1
      if ($2 != $3 || $5 != $4 || $6 != img || $7 != rev) { print; exit 1 } }
    END { if (!found) { print "no pod on " n; exit 1 } }' <(joined_rows "$1" "$2") >"$WORK/bad.txt" ||
    die "$3's pod changed although it should keep $4 ($5): $(cat "$WORK/bad.txt")"
}
update_revision() { ads_json "$1" | jq -r .status.updateRevision; }

# --- 1 -------------------------------------------------------------------------------------------
step 1 "3 nodes; CRDs, webhooks and RBAC from deploy/overlays/kube-local; kruise-manager on the host"
"$KL/up" --nodes 3 --quiet >"$WORK/up.log" 2>&1 || die "up --nodes 3: $(tail -3 "$WORK/up.log")"
reload_env
[ "${#NODE_NAMES[@]}" = 3 ] || die "kube-local has nodes '${NODE_NAMES[*]}', want 3"
three_ready() {
  [ "$(k get nodes -o json | jq '[.items[] | select(any(.status.conditions[]; .type == "Ready" and .status == "True"))] | length')" = 3 ]
}
wait_for 120 "3 Ready nodes" three_ready
# The nodes by name, as the update walks them (partition keeps the lowest names).
mapfile -t SORTED < <(printf '%s\n' "${NODE_NAMES[@]}" | sort)
N1=${SORTED[0]} N2=${SORTED[1]} N3=${SORTED[2]}
unmark_nodes # leftovers of an interrupted run
deploy_manager_objects "$WORK" "$NS"
k wait --for condition=established --timeout=60s crd/daemonsets.apps.kruise.io >/dev/null ||
  die "the DaemonSet CRD is not established"
start_host_manager "$MANAGER" "$WORK" "$BASE"
step_done "nodes $N1 $N2 $N3 Ready, manager ready"

# --- 2 -------------------------------------------------------------------------------------------
step 2 "one pod per eligible node: nodeSelector, an untolerated taint, both changed live"
k label node "$N1" "$N2" "$ELIGIBLE=yes" >/dev/null || die "labelling $N1 $N2"
k taint node "$N2" "$ELIGIBLE=blocked:NoSchedule" >/dev/null || die "tainting $N2"
watch_pods elig "$WORK/watch2.json"
wait_for 10 "the pod watch" kill -0 "$WATCH_PID"
set_yaml elig "$IMG0" "      maxUnavailable: 1" "      nodeSelector:
        $ELIGIBLE: \"yes\"" >"$WORK/elig.yaml"
apply_set <"$WORK/elig.yaml"
wait_for 120 "one Ready pod of elig, on $N1" pods_on elig "$N1"
O1=$(stat -c %s "$WORK/watch2.json") # what the watch saw while only N1 was eligible
k taint node "$N2" "$ELIGIBLE-" >/dev/null || die "untainting $N2"
wait_for 120 "elig's pods on $N1 and $N2 once $N2 is untainted" pods_on elig "$N1" "$N2"
O2=$(stat -c %s "$WORK/watch2.json") # ... while N1 and N2 were
k label node "$N3" "$ELIGIBLE=yes" >/dev/null || die "labelling $N3"
wait_for 120 "elig's pods on every node once $N3 is labelled" pods_on elig "$N1" "$N2" "$N3"
k label node "$N1" "$ELIGIBLE-" >/dev/null || die "unlabelling $N1"
wait_for 120 "elig's pod on $N1 gone once $N1 lost the label" pods_on elig "$N2" "$N3"
kill "$WATCH_PID" 2>/dev/null
# Over the whole step: never two live pods for one node, and pods only for nodes eligible then
# (the watch up to the taint's removal: N1 only; up to N3's label: N1 and N2).
head -c "$O1" "$WORK/watch2.json" >"$WORK/watch2a.json"
head -c "$O2" "$WORK/watch2.json" >"$WORK/watch2b.json"
PYTHONPATH="$ROOT/test/e2e" python3 - "$WORK" "$N1" "$N2" "$N3" >"$WORK/watch2.txt" <<'PYEOF' ||
import sys
from watch_events import events
work, n1, n2, n3 = sys.argv[1:5]
def node_of(pod):
    spec = pod.get("spec", {})
    if spec.get("nodeName"):
        return spec["nodeName"]
    terms = (spec.get("affinity", {}).get("nodeAffinity", {})
             .get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", []))
    return terms[0]["matchFields"][0]["values"][0] if terms else "?"
bad = []
for part, allowed in (("watch2a", {n1}), ("watch2b", {n1, n2}), ("watch2", {n1, n2, n3})):
    for ev in events(f"{work}/{part}.json"):
        node = node_of(ev.get("object", {}))
        if node not in allowed:
            bad.append(f"{part}: pod {ev['object']['metadata'].get('name')} for node {node}")
live, most, uids = {}, 0, set()
for ev in events(f"{work}/watch2.json"):
    meta = ev.get("object", {}).get("metadata", {})
    uids.add(meta.get("uid"))
    if ev.get("type") == "DELETED" or meta.get("deletionTimestamp"):
        live.pop(meta.get("name"), None)
    else:
        live[meta.get("name")] = node_of(ev["object"])
    per_node = {}
    for n in live.values():
        per_node[n] = per_node.get(n, 0) + 1
    most = max([most] + list(per_node.values()))
print(most, len(uids))
if most > 1 or bad:
    print("bad:", most, bad)
    sys.exit(1)
PYEOF
  die "watch over step 2: $(cat "$WORK/watch2.txt")"
read -r most pods_seen <"$WORK/watch2.txt"
counts=$(ads_status elig)
k -n "$NS" delete daemonsets.apps.kruise.io elig --wait=false >/dev/null
step_done "1 pod on $N1 (selector and taint), then $N1+$N2, $N1+$N2+$N3, $N2+$N3; at most $most pod per node, $pods_seen pods in all; status $counts"

# --- 3 -------------------------------------------------------------------------------------------
step 3 "in-place update, maxUnavailable 1: same pods, restarted once on the new image"
set_yaml inp "$IMG0" "      rollingUpdateType: InPlaceIfPossible
      maxUnavailable: 1" >"$WORK/inp.yaml"
apply_set <"$WORK/inp.yaml"
wait_for 120 "3 Ready pods of inp" pods_on inp "$N1" "$N2" "$N3"
gates=$(pods_json inp | jq -r '[.items[] | select(any(.spec.readinessGates[]?; .conditionType == "InPlaceUpdateReady"))
  | select(any(.status.conditions[]?; .type == "InPlaceUpdateReady" and .status == "True"))] | length')
[ "$gates" = 3 ] || die "$gates of 3 pods carry the InPlaceUpdateReady gate, True"
pod_table inp >"$WORK/before3.tsv"
REV0=$(update_revision inp)
watch_pods inp "$WORK/watch3.json"
wait_for 20 "the watch's first events" watch_started "$WORK/watch3.json" 3
t=$(now_ms)
patch_set inp "[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/image\",\"value\":\"$IMG1\"}]"
new_revision() { ads_is inp ".status.observedGeneration == .metadata.generation and .status.updateRevision != \"$REV0\""; }
wait_for 30 "inp's new update revision" new_revision
REV1=$(update_revision inp)
all_in_place() { # every pod on IMAGE with InPlaceUpdateReady True, status settled
  settled inp 3 3 && [ "$(pod_table inp | awk -F'\t' -v img="$1" '$5 == img && $6 == "true" && $8 == "True"' | wc -l)" = 3 ]
}
wait_for 180 "the 3 pods of inp updated in place" all_in_place "$IMG1"
UPDATE_MS=$(($(now_ms) - t))
kill "$WATCH_PID" 2>/dev/null
pod_table inp >"$WORK/after3.tsv"
for n in "$N1" "$N2" "$N3"; do expect_in_place "$WORK/before3.tsv" "$WORK/after3.tsv" "$n" "$IMG1" "$REV1"; done
# The watch: the same 3 UIDs throughout, at most one pod unready at once, each pod seen with
# InPlaceUpdateReady False (the gate held it out of service while its container restarted).
watch_update_stats() {
  PYTHONPATH="$ROOT/test/e2e" python3 - "$1" <<'PYEOF'
import sys
from watch_events import events
ready, gate_false, uids = {}, set(), set()
max_unready = 0
for ev in events(sys.argv[1]):
    pod = ev.get("object", {})
    meta = pod.get("metadata", {})
    uids.add(meta.get("uid"))
    conds = {c.get("type"): c.get("status") for c in pod.get("status", {}).get("conditions", [])}
    if conds.get("InPlaceUpdateReady") == "False":
        gate_false.add(meta.get("name"))
    if ev.get("type") == "DELETED" or meta.get("deletionTimestamp"):
        ready.pop(meta.get("name"), None)
    else:
        ready[meta.get("name")] = conds.get("Ready") == "True"
    max_unready = max(max_unready, sum(1 for r in ready.values() if not r))
print(max_unready, len(uids), len(gate_false))
PYEOF
}
read -r max_unready uids gated < <(watch_update_stats "$WORK/watch3.json")
[ "$uids" = 3 ] || die "$uids pods seen during the in-place update, want the same 3"
[ "$max_unready" = 1 ] || die "$max_unready pods unready at once during the update (maxUnavailable 1)"
[ "$gated" = 3 ] || die "$gated of 3 pods were seen with InPlaceUpdateReady False"
step_done "3 pods updated in place in $(secs "$UPDATE_MS")s ($REV0 -> $REV1): same UIDs, restartCount +1, InPlaceUpdateReady False then True, at most $max_unready unready at once; status $(ads_status inp)"

# --- 4 -------------------------------------------------------------------------------------------
step 4 "a missing image stops the rollout at one pod; partition 1 with a good image repairs it"
pod_table inp >"$WORK/before4.tsv"
patch_set inp "[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/image\",\"value\":\"$IMG_MISSING\"}]"
wait_for 30 "inp's new update revision" ads_is inp ".status.observedGeneration == .metadata.generation and .status.updateRevision != \"$REV1\""
REV_BAD=$(update_revision inp)
stuck() { # N3's pod on the missing image, waiting for it, out of service; the status says so
  pods_json inp | jq -e --arg n "$N3" --arg img "$IMG_MISSING" '[.items[] | select(.spec.nodeName == $n)
    | select(.spec.containers[0].image == $img)
    | select(.status.containerStatuses[0].state.waiting.reason | IN("ErrImagePull", "ImagePullBackOff"))
    | select(any(.status.conditions[]?; .type == "InPlaceUpdateReady" and .status == "False"))] | length == 1' >/dev/null &&
    ads_is inp '.status.observedGeneration == .metadata.generation and .status.updatedNumberScheduled == 1
      and .status.numberReady == 2 and .status.numberUnavailable == 1 and .status.desiredNumberScheduled == 3'
}
wait_for 120 "$N3's pod stuck on the missing image" stuck
pod_table inp >"$WORK/stuck4.tsv"
expect_kept "$WORK/before4.tsv" "$WORK/stuck4.tsv" "$N1" "$IMG1" "$REV1"
expect_kept "$WORK/before4.tsv" "$WORK/stuck4.tsv" "$N2" "$IMG1" "$REV1"
[ "$(awk -F'\t' -v n="$N3" '$1 == n { print $3 }' "$WORK/stuck4.tsv")" = "$(awk -F'\t' -v n="$N3" '$1 == n { print $3 }' "$WORK/before4.tsv")" ] ||
  die "$N3's pod was replaced instead of updated in place"
stuck_counts=$(ads_status inp)
patch_set inp "[{\"op\":\"add\",\"path\":\"/spec/updateStrategy/rollingUpdate/partition\",\"value\":1},
  {\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/image\",\"value\":\"$IMG2\"}]"
wait_for 30 "inp's new update revision" ads_is inp ".status.observedGeneration == .metadata.generation and .status.updateRevision != \"$REV_BAD\""
REV2=$(update_revision inp)
two_updated() {
  settled inp 3 2 && [ "$(pod_table inp | awk -F'\t' -v img="$IMG2" '$5 == img && $6 == "true" && $8 == "True"' | wc -l)" = 2 ]
}
wait_for 180 "2 pods of inp updated above partition 1" two_updated
pod_table inp >"$WORK/after4.tsv"
expect_kept "$WORK/before4.tsv" "$WORK/after4.tsv" "$N1" "$IMG1" "$REV1"
expect_in_place "$WORK/before4.tsv" "$WORK/after4.tsv" "$N2" "$IMG2" "$REV2"
expect_in_place "$WORK/before4.tsv" "$WORK/after4.tsv" "$N3" "$IMG2" "$REV2"
counts=$(ads_status inp)
patch_set inp '[{"op":"replace","path":"/spec/updateStrategy/rollingUpdate/partition","value":0}]'
wait_for 120 "the last pod of inp updated with partition 0" all_in_place "$IMG2"
pod_table inp >"$WORK/after4b.tsv"
expect_in_place "$WORK/after4.tsv" "$WORK/after4b.tsv" "$N1" "$IMG2" "$REV2"
step_done "missing image: $N3 stuck, the others untouched ($stuck_counts); partition 1 and a good image: $N3 repaired and $N2 updated in place, $N1 kept at $REV1 ($counts); partition 0: $N1 updated too"

# --- 5 -------------------------------------------------------------------------------------------
step 5 "rollingUpdate.selector: the matching node updates first, alone"
k label node "$N1" "$CANARY=true" >/dev/null || die "labelling $N1"
pod_table inp >"$WORK/before5.tsv"
patch_set inp "[{\"op\":\"add\",\"path\":\"/spec/updateStrategy/rollingUpdate/selector\",
  \"value\":{\"matchLabels\":{\"$CANARY\":\"true\"}}},
  {\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/image\",\"value\":\"$IMG0\"}]"
wait_for 30 "inp's update revision back to $REV0" ads_is inp ".status.observedGeneration == .metadata.generation and .status.updateRevision == \"$REV0\""
canary_updated() {
  settled inp 3 1 && [ "$(pod_table inp | awk -F'\t' -v img="$IMG0" '$5 == img && $6 == "true" && $8 == "True"' | wc -l)" = 1 ]
}
wait_for 120 "the pod of $N1 (selected) updated" canary_updated
pod_table inp >"$WORK/after5.tsv"
expect_in_place "$WORK/before5.tsv" "$WORK/after5.tsv" "$N1" "$IMG0" "$REV0"
expect_kept "$WORK/before5.tsv" "$WORK/after5.tsv" "$N2" "$IMG2" "$REV2"
expect_kept "$WORK/before5.tsv" "$WORK/after5.tsv" "$N3" "$IMG2" "$REV2"
counts=$(ads_status inp)
patch_set inp '[{"op":"remove","path":"/spec/updateStrategy/rollingUpdate/selector"}]'
wait_for 120 "the other pods of inp updated once the selector is gone" all_in_place "$IMG0"
pod_table inp >"$WORK/after5b.tsv"
expect_kept "$WORK/after5.tsv" "$WORK/after5b.tsv" "$N1" "$IMG0" "$REV0"
expect_in_place "$WORK/after5.tsv" "$WORK/after5b.tsv" "$N2" "$IMG0" "$REV0"
expect_in_place "$WORK/after5.tsv" "$WORK/after5b.tsv" "$N3" "$IMG0" "$REV0"
step_done "selector on $N1: only $N1 updated ($counts), back to the existing revision $REV0; selector removed: $N2, $N3 updated"

# --- 6 -------------------------------------------------------------------------------------------
step 6 "Standard update with maxSurge 1: the new pod runs next to the old one first"
set_yaml surge "$IMG0" "      rollingUpdateType: Standard
      maxSurge: 1
      maxUnavailable: 0" >"$WORK/surge.yaml"
apply_set <"$WORK/surge.yaml"
wait_for 120 "3 Ready pods of surge" pods_on surge "$N1" "$N2" "$N3"
pod_table surge >"$WORK/before6.tsv"
watch_pods surge "$WORK/watch6.json"
wait_for 20 "the watch's first events" watch_started "$WORK/watch6.json" 3
t=$(now_ms)
patch_set surge "[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/image\",\"value\":\"$IMG1\"}]"
surge_done() {
  settled surge 3 3 && [ "$(pod_table surge | awk -F'\t' -v img="$IMG1" '$5 == img && $6 == "true" && $4 == 0' | wc -l)" = 3 ]
}
wait_for 240 "the 3 pods of surge replaced" surge_done
SURGE_MS=$(($(now_ms) - t))
kill "$WATCH_PID" 2>/dev/null
pod_table surge >"$WORK/after6.tsv"
kept=$(join -t $'\t' "$WORK/before6.tsv" "$WORK/after6.tsv" | awk -F'\t' '$3 == $10' | wc -l)
[ "$kept" = 0 ] || die "$kept pods of surge were kept (a Standard update replaces them)"
# Per node: the new pod Ready while the old one was still live (no deletionTimestamp), the old
# one's deletion after that; overall at most 4 live pods and, once 3 were listed, at least 3 Ready.
PYTHONPATH="$ROOT/test/e2e" python3 - "$WORK/watch6.json" "$IMG0" "$IMG1" >"$WORK/watch6.txt" <<'PYEOF' ||
import sys
from watch_events import events
path, old_img, new_img = sys.argv[1:4]
live = {}  # name -> (node, image, ready)
overlap, max_live, min_ready, started = set(), 0, None, False
uids_per_node = {}
for ev in events(path):
    pod = ev.get("object", {})
    meta, spec = pod.get("metadata", {}), pod.get("spec", {})
    terms = (spec.get("affinity", {}).get("nodeAffinity", {})
             .get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", []))
    node = spec.get("nodeName") or (terms[0]["matchFields"][0]["values"][0] if terms else "?")
    uids_per_node.setdefault(node, set()).add(meta.get("uid"))
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in pod.get("status", {}).get("conditions", []))
    if ev.get("type") == "DELETED" or meta.get("deletionTimestamp"):
        live.pop(meta.get("name"), None)
    else:
        live[meta.get("name")] = (node, spec["containers"][0]["image"], ready)
    images = {}
    for n, img, r in live.values():
        images.setdefault(n, {})[img] = r
    for n, imgs in images.items():
        if imgs.get(new_img) and old_img in imgs:
            overlap.add(n)  # the new pod Ready while the old one still lived
    max_live = max(max_live, len(live))
    if len(live) >= 3:
        started = True
    if started:
        r = sum(1 for _, _, ok in live.values() if ok)
        min_ready = r if min_ready is None else min(min_ready, r)
print(len(overlap), max_live, min_ready, max(len(u) for u in uids_per_node.values()),
      min(len(u) for u in uids_per_node.values()), ",".join(sorted(overlap)))
PYEOF
  die "reading the watch of step 6"
read -r overlapped max_live min_ready max_uids min_uids overlap_nodes <"$WORK/watch6.txt"
[ "$overlapped" = 3 ] || die "only on '$overlap_nodes' was a new pod seen Ready next to the old one"
[ "$max_live" -le 4 ] || die "$max_live live pods at once (3 nodes, maxSurge 1)"
[ "$min_ready" -ge 3 ] || die "only $min_ready pods Ready at one point (maxUnavailable 0)"
[ "$max_uids" = 2 ] && [ "$min_uids" = 2 ] || die "each node should have had 2 pods (old, new): between $min_uids and $max_uids"
step_done "3 pods replaced in $(secs "$SURGE_MS")s; on every node the new pod was Ready beside the old one; at most $max_live live, at least $min_ready Ready; status $(ads_status surge)"

say "all steps passed in $((SECONDS - T0))s:"
for r in "${RESULTS[@]}"; do echo "  $r"; done
