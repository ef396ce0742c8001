#!/usr/bin/env bash
# A leader that hangs instead of dying, on kube-local (issue 33, part 1): two kruise-manager
# replicas on the host with leader election (lease 4 s, renew deadline 3 s, retry 1 s); the leader
# is frozen with SIGSTOP (not killed) while its workload needs work, the other replica takes the
# Lease and does it, then the frozen one is thawed with SIGCONT while its caches are stale.
#
#   1. CRDs, webhooks and RBAC from deploy/overlays/kube-local; two managers, one Lease holder;
#   2. CloneSet frz (2 pods): the leader frozen, the CloneSet scaled to 5; the other replica takes
#      over and creates 3 pods; the frozen one thawed: it exits (lease lost) without a write, so
#      exactly 3 pods were created and never more than 5 lived at once (today's main created 24
#      pods for a CloneSet that needed 11 in this scenario, 12 alive at once);
#   3. the same for an Advanced DaemonSet's rolling update (Standard, maxUnavailable 1) of its pod
#      on this node: frozen before the template change, the successor recreates the pod once, the
#      thawed replica exits; one new pod, never two live pods on the node;
#   4. the leader killed (SIGKILL): the other replica takes over and scales the CloneSet.
# Prints the take-over times (SIGSTOP or SIGKILL -> the other replica holds the Lease).
#
# Everything it creates is deleted again, also on failure (namespace, managers, webhook
# configurations, RBAC, certificate Secret, Lease); CRDs and the kruise namespaces are left.
# Usage: leader_e2e.sh KRUISE_MANAGER_BINARY
# Environment: KRUISE_KUBE_LOCAL_ENV, KRUISE_E2E_KEEP_WORK=1, KRUISE_E2E_LEADER_PORT_BASE (default
# 16560; base..base+5: webhook, health, metrics of replicas a and b).
set -uo pipefail
# `... | apply_stdin`: its die ends the test at once, not a subshell.
shopt -s lastpipe

ROOT=$(cd "$(dirname "$(readlink -f "$0")")/../../.." && pwd)
# shellcheck source=../lib.sh
. "$ROOT/test/e2e/lib.sh"
manager_e2e_init leader 16560 6 "${1:-}"
NODE=$KUBE_LOCAL_NODE_NAME

# A frozen replica left behind by a failed run must not stay stopped (its pid is in PIDS too).
thaw_all() { local r; for r in a b; do [ -n "${MPID[$r]:-}" ] && kill -CONT "${MPID[$r]}" 2>/dev/null; done; true; }
# manager_e2e_exit reads the exit status from $?: keep it across thaw_all.
trap 'rc=$?; thaw_all; (exit "$rc"); manager_e2e_exit 25 - show_status clonesets.apps.kruise.io 20' EXIT

# --- helpers -------------------------------------------------------------------------------------
# gone PID: the process has exited (a zombie of this shell counts).
gone() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null); [ -z "$st" ] || [[ "$st" == Z* ]]; }
# point_webhooks_at R: the webhook configurations' URLs name replica R's port. It stands in for
# the Service, which kube-local lacks: in a cluster a frozen pod fails its readiness probe and
# leaves the endpoints, here the URL is whichever replica wrote it last (see manager_e2e.sh).
point_webhooks_at() {
  local port=$BASE kind
  [ "$1" = b ] && port=$((BASE + 3))
  for kind in mutatingwebhookconfiguration/kruise-mutating-webhook-configuration \
    validatingwebhookconfiguration/kruise-validating-webhook-configuration; do
    k get "$kind" -o json | jq --arg p "$port" \
      '.webhooks[].clientConfig.url |= (if . then sub(":[0-9]+/"; ":" + $p + "/") else . end)' |
      k replace -f - >/dev/null || die "pointing $kind at replica $1"
  done
}
# freeze_leader [COMMAND...]: SIGSTOP of the Lease holder (OLD), the webhooks pointed at the other
# replica, COMMAND run (the change the frozen leader must not act on); waits for the other replica
# to take the Lease (LEADER); TAKEOVER_MS is how long that took from the SIGSTOP.
freeze_leader() {
  local t other=a
  OLD=$LEADER
  [ "$OLD" = a ] && other=b
  kill -STOP "${MPID[$OLD]}" || die "SIGSTOP of replica $OLD"
  t=$(now_ms)
  say "froze leader $OLD (pid ${MPID[$OLD]})"
  point_webhooks_at "$other"
  "$@"
  wait_for 60 "the other replica to take the Lease" replica_took_over
  TAKEOVER_MS=$(($(now_ms) - t))
}
# thaw_old: SIGCONT of the frozen replica; it must see that it lost the Lease and exit, at once.
thaw_old() {
  local t
  kill -CONT "${MPID[$OLD]}" || die "SIGCONT of replica $OLD"
  t=$(now_ms)
  wait_for 20 "the thawed replica $OLD to exit" gone "${MPID[$OLD]}"
  EXIT_MS=$(($(now_ms) - t))
  grep -q "lost lease" "$WORK/manager-$OLD.log" || die "replica $OLD exited without saying it lost the Lease"
  REFUSED=$(grep -c "refused .*not the leader" "$WORK/manager-$OLD.log")
}
# restart_replicas: the survivor stopped cleanly (it releases the Lease), then two fresh replicas.
restart_replicas() {
  kill "${MPID[$LEADER]}" 2>/dev/null
  wait_for 30 "replica $LEADER to stop" gone "${MPID[$LEADER]}"
  start_leader_replicas
}
# watch_stats FILE IMAGE: "created max_live created_with_image" over a pod watch: pods created
# (distinct uids first seen as ADDED after the initial listing of INITIAL pods), the most pods
# alive at once, and how many created pods run IMAGE.
watch_stats() {
  PYTHONPATH="$ROOT/test/e2e" python3 - "$1" "$2" "$3" <<'PYEOF'
import sys
from watch_events import events
path, initial, image = sys.argv[1], int(sys.argv[2]), sys.argv[3]
seen, live, created, with_image, max_live = set(), {}, 0, 0, 0
for ev in events(path):
    meta = ev.get("object", {}).get("metadata", {})
    uid = meta.get("uid")
    if uid not in seen:
        seen.add(uid)
        if len(seen) > initial:
            created += 1
            containers = ev["object"].get("spec", {}).get("containers", [])
            with_image += any(c.get("image") == image for c in containers)
    if ev.get("type") == "DELETED" or meta.get("deletionTimestamp"):
        live.pop(uid, None)
    else:
        live[uid] = True
    max_live = max(max_live, len(live))
print(created, max_live, with_image)
PYEOF
}
cs_ready() { workload_ready clonesets.apps.kruise.io "$@"; }

# --- 1 -------------------------------------------------------------------------------------------
step 1 "CRDs, webhooks and RBAC from deploy/overlays/kube-local; two managers with leader election"
deploy_manager_objects "$WORK" "$NS" daemonsets.apps.kruise.io
start_leader_replicas
step_done "replica $LEADER holds the Lease"

# --- 2 -------------------------------------------------------------------------------------------
step 2 "CloneSet scaled 2 -> 5 while its leader is frozen; the thawed leader writes nothing"
cat <<YAML | apply_stdin
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata:
  name: frz
spec:
  replicas: 2
  selector:
    matchLabels:
      app: frz
  template:
    metadata:
      labels:
        app: frz
    spec:
      hostNetwork: true
      terminationGracePeriodSeconds: 2
      nodeSelector:
        kubernetes.io/hostname: $NODE
      containers:
      - name: main
        image: $KUBE_LOCAL_BUSYBOX_IMAGE
        command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
YAML
wait_for 120 "2 Ready pods of frz" cs_ready frz 2
watch_app_pods frz "$WORK/watch2.json"
wait_for 20 "the watch's first events" watch_started "$WORK/watch2.json" 2
scale_frz() {
  k -n "$NS" patch clonesets.apps.kruise.io frz --type merge -p '{"spec":{"replicas":5}}' >/dev/null ||
    die "scaling frz"
}
freeze_leader scale_frz
FROZEN_TAKEOVER_MS=$TAKEOVER_MS
wait_for 120 "5 Ready pods of frz, made by replica $LEADER" cs_ready frz 5
thaw_old
kill "$WATCH_PID" 2>/dev/null
read -r created max_live _ < <(watch_stats "$WORK/watch2.json" 2 "$KUBE_LOCAL_BUSYBOX_IMAGE")
[ "$created" = 3 ] || die "$created pods were created for a scale-up by 3"
[ "$max_live" -le 5 ] || die "$max_live pods of frz lived at once (replicas 5)"
live=$(app_pod_table frz | wc -l)
[ "$live" = 5 ] || die "$live live pods of frz"
step_done "frozen $OLD -> $LEADER took the Lease in $(secs "$TAKEOVER_MS")s; 3 pods created, at most $max_live alive; thawed $OLD exited after $(secs "$EXIT_MS")s with $REFUSED refused write(s)"

# --- 3 -------------------------------------------------------------------------------------------
step 3 "Advanced DaemonSet rolling update while its leader is frozen"
restart_replicas
cat <<YAML | apply_stdin
apiVersion: apps.kruise.io/v1alpha1
kind: DaemonSet
metadata:
  name: frd
spec:
  selector:
    matchLabels:
      app: frd
  template:
    metadata:
      labels:
        app: frd
    spec:
      hostNetwork: true
      terminationGracePeriodSeconds: 2
      nodeSelector:
        kubernetes.io/hostname: $NODE
      containers:
      - name: main
        image: $KUBE_LOCAL_BUSYBOX_IMAGE
        command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
      rollingUpdateType: Standard
      maxUnavailable: 1
YAML
ads_json() { k -n "$NS" get daemonsets.apps.kruise.io frd -o json 2>/dev/null; }
ads_done() { # IMAGE: one live Ready pod running IMAGE, and the status says the rollout is over
  [ "$(app_pod_table frd | awk -v img="$1" '$4 == img && $5 == "true"' | wc -l)" = 1 ] &&
    [ "$(app_pod_table frd | wc -l)" = 1 ] &&
    ads_json | jq -e '.status.observedGeneration == .metadata.generation and .status.updatedNumberScheduled == 1
      and .status.numberReady == 1 and .status.desiredNumberScheduled == 1' >/dev/null
}
wait_for 120 "the pod of frd on $NODE" ads_done "$KUBE_LOCAL_BUSYBOX_IMAGE"
watch_app_pods frd "$WORK/watch3.json"
wait_for 20 "the watch's first events" watch_started "$WORK/watch3.json" 1
NEW_IMAGE=$REG/busybox:v1
update_frd() {
  k -n "$NS" patch daemonsets.apps.kruise.io frd --type json -p "[{\"op\":\"replace\",
    \"path\":\"/spec/template/spec/containers/0/image\",\"value\":\"$NEW_IMAGE\"}]" >/dev/null ||
    die "updating frd"
}
freeze_leader update_frd
wait_for 120 "frd's pod recreated on $NEW_IMAGE by replica $LEADER" ads_done "$NEW_IMAGE"
thaw_old
kill "$WATCH_PID" 2>/dev/null
read -r created max_live with_image < <(watch_stats "$WORK/watch3.json" 1 "$NEW_IMAGE")
[ "$created" = 1 ] && [ "$with_image" = 1 ] || die "$created pods created ($with_image on $NEW_IMAGE), want 1"
[ "$max_live" -le 1 ] || die "$max_live pods of frd lived at once on $NODE"
step_done "frozen $OLD -> $LEADER took the Lease in $(secs "$TAKEOVER_MS")s; 1 pod recreated, at most $max_live alive; thawed $OLD exited after $(secs "$EXIT_MS")s with $REFUSED refused write(s)"

FROZEN2_TAKEOVER_MS=$TAKEOVER_MS

# --- 4 -------------------------------------------------------------------------------------------
step 4 "a killed leader (SIGKILL): the other replica takes over and scales frz 5 -> 6"
restart_replicas
kill_leader "killed leader"
KILLED_TAKEOVER_MS=$TAKEOVER_MS
point_webhooks_at "$LEADER"
k -n "$NS" patch clonesets.apps.kruise.io frz --type merge -p '{"spec":{"replicas":6}}' >/dev/null ||
  die "scaling frz to 6"
wait_for 120 "6 Ready pods of frz, made by replica $LEADER" cs_ready frz 6
step_done "killed $OLD -> $LEADER took the Lease in $(secs "$KILLED_TAKEOVER_MS")s and scaled frz"

k -n "$NS" delete daemonsets.apps.kruise.io frd clonesets.apps.kruise.io frz --wait=false >/dev/null 2>&1
say "all steps passed (take-over of a frozen leader: $(secs "$FROZEN_TAKEOVER_MS")s and $(secs "$FROZEN2_TAKEOVER_MS")s; of a killed one: $(secs "$KILLED_TAKEOVER_MS")s):"
for r in "${RESULTS[@]}"; do echo "  $r"; done
