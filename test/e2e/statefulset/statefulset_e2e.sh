#!/usr/bin/env bash
# Advanced StatefulSet end to end on ../shared/kube-local (GitHub issue 16): the real API server runs
# our CRD and webhooks, the real kubelet restarts the containers our in-place updates change. One
# kruise-manager runs on the host (webhooks by URL, as test/e2e/manager explains); pods are
# hostNetwork, as kube-local has no pod network.
#
#   1. deploy/overlays/kube-local without the DaemonSet and the manager Deployment; the manager;
#   2. OpenKruise 0.10's scale-up example (podManagementPolicy Parallel, scaleStrategy.maxUnavailable
#      2), 8 replicas with a 2 s readiness delay: a watch over the scale-up sees pods created in
#      parallel (2 unready at once) and never more than 2 unready;
#   3. reserveOrdinals [1, 4]: the pods are <set>-{0,2,3,5,6,7,8,9}; reserving 2 as well deletes
#      <set>-2 and creates <set>-10;
#   4. in-place update with a partition: 4 replicas with a PVC each (volumeClaimTemplates, the
#      default StorageClass), podUpdatePolicy InPlaceIfPossible, partition 2, an image of another
#      digest: the 2 pods above the partition keep name, UID and PVC, restart once on the new
#      image (the kubelet), updatedReplicas/updatedReadyReplicas 2; the 2 below stay at the old
#      revision and image;
#   5. two managers with leader election (lease 4 s); the set of step 2 recreated pod by pod (an env
#      change, which is not updatable in place); the leader gets kill -9 mid rollout: the other
#      replica takes the Lease and finishes, every ordinal was created exactly twice (old and new
#      revision), no pod outside the set's ordinals ever existed, no pod was deleted twice
#      (SuccessfulDelete events per pod) and never more than 8 pods lived at once.
#
# Everything it creates is deleted again, also on failure (namespace, managers, webhook
# configurations, RBAC, certificate Secret, Lease); CRDs and the kruise namespaces are left.
# Usage: statefulset_e2e.sh KRUISE_MANAGER_BINARY
# Environment: KRUISE_KUBE_LOCAL_ENV, KRUISE_E2E_KEEP_WORK=1 (keep the work dir: manager logs,
# watch streams), KRUISE_E2E_STATEFULSET_PORT_BASE (default 16510;
# base..base+5: webhook, health, metrics of the manager (and of replica a in step 5), the same of
# replica b).
set -uo pipefail

ROOT=$(cd "$(dirname "$(readlink -f "$0")")/../../.." && pwd)
# shellcheck source=../lib.sh
. "$ROOT/test/e2e/lib.sh"
manager_e2e_init statefulset 16510 6 "${1:-}"

trap 'manager_e2e_exit 25 - show_status asts 30' EXIT

# --- helpers -------------------------------------------------------------------------------------
sts_json() { k -n "$NS" get statefulsets.apps.kruise.io "$1" -o json; }
# jq over the StatefulSet NAME; succeeds when the expression is true.
sts_is() { [ "$(sts_json "$1" 2>/dev/null | jq -r "$2")" = true ]; }
pods_json() { k -n "$NS" get pods -l "app=$1" -o json; }
# "name uid restartCount image ready revision" per live pod of app NAME, sorted by name.
pod_table() { app_pod_table "$1" '.metadata.labels["controller-revision-hash"]'; }
# The live pods' names of app NAME, sorted, on one line.
pod_names() { pod_table "$1" | cut -f1 | sort -V | tr '\n' ' ' | sed 's/ $//'; }
all_ready() { workload_ready statefulsets.apps.kruise.io "$@"; } # NAME N: N live pods, all Ready, and the status says so
# watch_running FILE: the watch answers (an empty list gives no event: wait for its process and a
# listing of the namespace to have happened after it started).
watch_running() { kill -0 "$WATCH_PID" 2>/dev/null && [ -f "$1" ]; }
# watch_stats FILE: "max_unready max_pods pods_seen uids_per_name_max" over the whole watch,
# counting live pods (no deletionTimestamp) and Ready ones; pods_seen is every name ever seen.
watch_stats() {
  PYTHONPATH="$ROOT/test/e2e" python3 - "$1" <<'PYEOF'
import sys
from watch_events import events
pods, uids = {}, {}
max_unready = max_pods = 0
for ev in events(sys.argv[1]):
    obj = ev.get("object", {})
    meta = obj.get("metadata", {})
    name = meta.get("name")
    uids.setdefault(name, set()).add(meta.get("uid"))
    if ev.get("type") == "DELETED" or meta.get("deletionTimestamp"):
        pods.pop(name, None)
    else:
        pods[name] = any(c.get("type") == "Ready" and c.get("status") == "True"
                         for c in obj.get("status", {}).get("conditions", []))
    ready = sum(pods.values())
    max_unready = max(max_unready, len(pods) - ready)
    max_pods = max(max_pods, len(pods))
names = sorted(uids, key=lambda n: int(n.rsplit("-", 1)[1]))
print(max_unready, max_pods, ",".join(names), max(len(u) for u in uids.values()) if uids else 0,
      min(len(u) for u in uids.values()) if uids else 0)
PYEOF
}

# An Advanced StatefulSet NAME with REPLICAS pods of busybox IMAGE, hostNetwork, Ready 2 s after
# start (a readiness probe); EXTRA_SPEC (YAML, indented by two spaces) is appended to its spec.
set_yaml() {
  local name=$1 replicas=$2 image=$3 extra_spec=${4:-} gates=""
  # InPlaceIfPossible needs the InPlaceUpdateReady gate (the webhook refuses it otherwise).
  [[ "$extra_spec" == *InPlaceIfPossible* ]] &&
    gates=$'      readinessGates:\n      - conditionType: InPlaceUpdateReady'
  cat <<EOF
apiVersion: apps.kruise.io/v1beta1
kind: StatefulSet
metadata:
  name: $name
spec:
  replicas: $replicas
  serviceName: $name
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
$gates
      containers:
      - name: main
        image: $image
        command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
        readinessProbe:
          exec:
            command: ["true"]
          initialDelaySeconds: 2
          periodSeconds: 1
$extra_spec
EOF
}

# --- 1 -------------------------------------------------------------------------------------------
step 1 "CRDs, webhooks and RBAC from deploy/overlays/kube-local; kruise-manager on the host"
deploy_manager_objects "$WORK" "$NS" statefulsets.apps.kruise.io
start_host_manager "$MANAGER" "$WORK" "$BASE"
step_done "manager ready"

# --- 2 -------------------------------------------------------------------------------------------
step 2 "Parallel scale-up of 8 pods, scaleStrategy.maxUnavailable 2"
watch_app_pods par "$WORK/watch2.json"
# The watch must be running before the set exists (an empty list prints nothing to wait on).
wait_for 10 "the pod watch" watch_running "$WORK/watch2.json"
k -n "$NS" get pods -l app=par -o name >/dev/null
set_yaml par 8 "$KUBE_LOCAL_BUSYBOX_IMAGE" "  podManagementPolicy: Parallel
  reserveOrdinals: [1, 4]
  scaleStrategy:
    maxUnavailable: 2
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 2" >"$WORK/par.yaml"
apply_stdin <"$WORK/par.yaml"
wait_for 180 "8 Ready pods of par" all_ready par 8
kill "$WATCH_PID" 2>/dev/null
read -r max_unready max_pods _ _ _ < <(watch_stats "$WORK/watch2.json")
[ "$max_unready" -le 2 ] || die "$max_unready pods were unready at once (scaleStrategy.maxUnavailable 2)"
[ "$max_unready" = 2 ] || die "at most $max_unready pod unready at once: not created in parallel"
[ "$max_pods" = 8 ] || die "$max_pods pods at once, want 8"
step_done "8 Ready pods, created 2 at a time (at most $max_unready unready at once)"

# --- 3 -------------------------------------------------------------------------------------------
step 3 "reserveOrdinals"
names=$(pod_names par)
[ "$names" = "par-0 par-2 par-3 par-5 par-6 par-7 par-8 par-9" ] || die "pod names: $names"
k -n "$NS" patch statefulsets.apps.kruise.io par --type merge -p '{"spec":{"reserveOrdinals":[1,2,4]}}' \
  >/dev/null || die "patching reserveOrdinals"
# par-2 gone from the API server, not only terminating: step 5's watch counts every pod it sees.
reserved_moved() {
  [ "$(pod_names par)" = "par-0 par-3 par-5 par-6 par-7 par-8 par-9 par-10" ] && all_ready par 8 &&
    ! k -n "$NS" get pod par-2 >/dev/null 2>&1
}
wait_for 120 "par-2 deleted and gone, par-10 created" reserved_moved
step_done "ordinals 1 and 4 skipped; reserving 2 moved its pod to par-10"

# --- 4 -------------------------------------------------------------------------------------------
step 4 "in-place update above partition 2, pods keep UID and PVC"
set_yaml web 4 "$KUBE_LOCAL_BUSYBOX_IMAGE" "  podManagementPolicy: Parallel
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
      podUpdatePolicy: InPlaceIfPossible
      partition: 2
      maxUnavailable: 1
  volumeClaimTemplates:
  - metadata:
      name: data
    spec:
      accessModes: [ReadWriteOnce]
      resources:
        requests:
          storage: 1Mi" | sed 's|^        readinessProbe:|        volumeMounts:\n        - name: data\n          mountPath: /data\n        readinessProbe:|' >"$WORK/web.yaml"
apply_stdin <"$WORK/web.yaml"
wait_for 180 "4 Ready pods of web" all_ready web 4
gates=$(pods_json web | jq -r '[.items[] | select(any(.spec.readinessGates[]?; .conditionType == "InPlaceUpdateReady"))] | length')
[ "$gates" = 4 ] || die "$gates of 4 pods carry the InPlaceUpdateReady readiness gate"
pvcs() { # "pvc-name pvc-uid" of web's claims, sorted
  k -n "$NS" get pvc -o json | jq -r '.items[] | select(.metadata.name | startswith("data-web-"))
    | "\(.metadata.name) \(.metadata.uid)"' | sort
}
pvcs >"$WORK/pvcs-before.txt"
[ "$(wc -l <"$WORK/pvcs-before.txt")" = 4 ] || die "PVCs: $(cat "$WORK/pvcs-before.txt")"
pod_table web >"$WORK/before4.tsv"
old_rev=$(sts_json web | jq -r .status.currentRevision)
# A JSON patch: a merge patch would replace the whole containers list.
k -n "$NS" patch statefulsets.apps.kruise.io web --type json -p "[
  {\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/image\",\"value\":\"$REG/busybox:v1\"}]" \
  >/dev/null || die "patching the image"
above_partition_updated() {
  sts_is web '.status.updatedReplicas == 2 and .status.updatedReadyReplicas == 2 and .status.readyReplicas == 4
    and .status.currentRevision != .status.updateRevision and .status.observedGeneration == .metadata.generation'
}
wait_for 180 "web-2 and web-3 updated in place" above_partition_updated
new_rev=$(sts_json web | jq -r .status.updateRevision)
pod_table web >"$WORK/after4.tsv"
join -t $'\t' "$WORK/before4.tsv" "$WORK/after4.tsv" >"$WORK/joined.tsv"
[ "$(wc -l <"$WORK/joined.tsv")" = 4 ] || die "pods were replaced: $(cut -f1 "$WORK/after4.tsv" | tr '\n' ' ')"
# joined: name uid restarts image ready rev | uid restarts image ready rev
awk -F'\t' -v img="$REG/busybox:v1" -v old="$KUBE_LOCAL_BUSYBOX_IMAGE" -v newrev="$new_rev" -v oldrev="$old_rev" '
  { ord = substr($1, 5) + 0 }
  ord >= 2 && ($2 != $7 || $8 != $3 + 1 || $9 != img || $11 != newrev) { bad = bad " " $1 " (" $0 ")" }
  ord < 2 && ($2 != $7 || $8 != $3 || $9 != old || $11 != oldrev) { bad = bad " " $1 " (" $0 ")" }
  END { if (bad) { print bad; exit 1 } }' "$WORK/joined.tsv" >"$WORK/bad.txt" ||
  die "not updated as the partition says:$(cat "$WORK/bad.txt")"
pvcs >"$WORK/pvcs-after.txt"
cmp -s "$WORK/pvcs-before.txt" "$WORK/pvcs-after.txt" || die "PVCs changed: $(cat "$WORK/pvcs-after.txt")"
claims=$(pods_json web | jq -r '.items[] | "\(.metadata.name) \(.spec.volumes[] | select(.name == "data") | .persistentVolumeClaim.claimName)"' | sort)
[ "$claims" = "$(printf 'web-%s data-web-%s\n' 0 0 1 1 2 2 3 3)" ] || die "pod claims: $claims"
step_done "web-2, web-3 updated in place (same UID and PVC, restarted once); web-0, web-1 kept at $old_rev"

# --- 5 -------------------------------------------------------------------------------------------
step 5 "the leader killed mid rollout of par (recreate); the standby finishes it"
start_leader_replicas
wait_for 60 "the new leader's first status of par" all_ready par 8
t_events=$(date -u +%Y-%m-%dT%H:%M:%SZ)
watch_app_pods par "$WORK/watch5.json"
wait_for 20 "the watch's first events" watch_started "$WORK/watch5.json" 8
old_par_rev=$(sts_json par | jq -r .status.updateRevision)
k -n "$NS" patch statefulsets.apps.kruise.io par --type json -p '[{"op":"add","path":"/spec/template/spec/containers/0/env",
  "value":[{"name":"VERSION","value":"2"}]}]' >/dev/null || die "patching env"
# Counted only once the status is the patched generation's: before that it still reports all 8
# pods updated, to the old revision.
some_updated() {
  UPDATED=$(sts_json par | jq --arg old "$old_par_rev" 'if .status.observedGeneration == .metadata.generation
    and .status.updateRevision != $old then .status.updatedReplicas // 0 else 0 end') &&
    [ "$UPDATED" -ge 2 ]
}
wait_for 120 "the rollout under way (2 pods updated)" some_updated
[ "$UPDATED" -lt 8 ] || die "all 8 pods were updated before the leader could be killed"
kill_leader "with $UPDATED of 8 pods updated"
rolled_out() {
  all_ready par 8 && sts_is par '.status.updatedReplicas == 8 and .status.updatedReadyReplicas == 8
    and .status.currentRevision == .status.updateRevision'
}
wait_for 300 "all 8 pods of par recreated" rolled_out
kill "$WATCH_PID" 2>/dev/null
names=$(pod_names par)
[ "$names" = "par-0 par-3 par-5 par-6 par-7 par-8 par-9 par-10" ] || die "pod names after the rollout: $names"
read -r max_unready max_pods seen max_uids min_uids < <(watch_stats "$WORK/watch5.json")
[ "$seen" = "par-0,par-3,par-5,par-6,par-7,par-8,par-9,par-10" ] || die "pods seen over the rollout: $seen"
[ "$max_uids" = 2 ] && [ "$min_uids" = 2 ] || die "each ordinal should have had 2 pods (old, new): between $min_uids and $max_uids"
[ "$max_pods" -le 8 ] || die "$max_pods pods lived at once"
# SuccessfulDelete events since the update (count summed per pod): one per ordinal.
deletes=$(k -n "$NS" get events -o json | jq -r --arg t "$t_events" '[.items[]
  | select(.involvedObject.name == "par" and .reason == "SuccessfulDelete" and .lastTimestamp >= $t)
  | {pod: (.message | capture("delete Pod (?<p>[^ ]+)").p), n: (.count // 1)}]
  | group_by(.pod) | map("\(.[0].pod)=\(map(.n) | add)") | join(" ")')
twice=$(tr ' ' '\n' <<<"$deletes" | grep -v '=1$' | grep . || true)
[ -z "$twice" ] || die "pods deleted more than once: $twice (all: $deletes)"
[ "$(wc -w <<<"$deletes")" = 8 ] || die "delete events for $(wc -w <<<"$deletes") pods, want 8: $deletes"
step_done "leader $OLD killed at $UPDATED/8 updated, $LEADER took over in $(secs "$TAKEOVER_MS")s; 8 ordinals recreated once each, at most $max_pods pods and $max_unready unready at once, one delete per pod"

say "all steps passed:"
for r in "${RESULTS[@]}"; do echo "  $r"; done
