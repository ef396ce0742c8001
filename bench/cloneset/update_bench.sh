#!/usr/bin/env bash
# CloneSet image update on kube-local (GitHub issue 14): InPlaceIfPossible against ReCreate, same
# CloneSet, same image change, interleaved rounds. Per round and strategy it creates a CloneSet of
# PODS (100) busybox:v1 pods (hostNetwork, default maxUnavailable 20%), waits until all are Ready,
# then changes the image to busybox:v2 (another digest) and measures, from a pod watch whose
# events are stamped on arrival:
#   - total_s: image patch -> status says every pod updated and Ready (and the watch agrees);
#   - first_pod_ms: image patch -> the first pod event showing the update (InPlaceUpdateReady False
#     or the specified-delete label), as seen by the watch (includes kubectl's start-up, ~0.2 s);
#   - controller_ms: the CloneSet's new generation -> that first pod event, both as watches saw
#     them: what the controller took to act on the spec change (+ one watch delivery);
#   - creates / deletes: pods created and deleted during the update;
#   - kubelet_pod_requests: the kubelet's pod requests during the update (GET + PATCH status +
#     DELETE, told apart by their protobuf encoding in the API server's counters) and their rate:
#     the kubelet's client is limited to 5 requests/s (kubeAPIQPS default), which bounds both.
# With ROUNDS > 1 it ends with medians (min, max) per strategy and the ratio of each round.
#
#   bench/cloneset/update_bench.sh [BUILD_DIR]     (ROUNDS=1, PODS=100, PULL_POLICY=Always,
#                                                   KEEP_LOGS=1)
# Runs one kruise-manager on the host (URL webhooks) like test/e2e/cloneset; deletes what it made.
set -uo pipefail

HERE=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
T0=$SECONDS
# shellcheck source=../lib.sh
. "$ROOT/bench/lib.sh"
ROUNDS=${ROUNDS:-1}
PODS=${PODS:-100}
# The webhook defaults a CloneSet's containers to Always (as OpenKruise): every restart and every
# new pod then asks the registry, and containerd serialises concurrent pulls of one reference.
PULL_POLICY=${PULL_POLICY:-Always}
bench_start cloneset KRUISE_BENCH_CLONESET_PORT_BASE 16480 "${1:-$ROOT/build}"
bench_on_exit WATCH_PID
bench_on_exit CS_WATCH_PID

# The kubelet's pod requests so far, from the API server's request counters: it talks protobuf
# (kruise-manager and kubectl send JSON), so GET pods (its status manager reads before each
# write), PATCH pods/status and DELETE pods (the final removal) in protobuf are its own.
kubelet_pod_requests() {
  k get --raw /metrics 2>/dev/null | awk '/^apiserver_request_total/ && /resource="pods"/ &&
    /contentType="application\/vnd.kubernetes.protobuf"/ && /scope="resource"/ {
      v = ""
      if ($0 ~ /verb="GET"/ && $0 ~ /subresource=""/) v = "get"
      if ($0 ~ /verb="PATCH"/ && $0 ~ /subresource="status"/) v = "patch"
      if ($0 ~ /verb="DELETE"/ && $0 ~ /subresource=""/) v = "delete"
      if (v != "") n[v] += $NF
    } END { printf "%d %d %d\n", n["get"], n["patch"], n["delete"] }'
}

cs_is() { [ "$(k -n "$NS" get cloneset "$1" -o json 2>/dev/null | jq -r "$2")" = true ]; }
pods_gone() { [ "$(k -n "$NS" get pods -o name 2>/dev/null | wc -l)" = 0 ]; }

# One measurement: STRATEGY ROUND.
measure() {
  local strategy=$1 round=$2 name t_patch
  name=bench-$(tr '[:upper:]' '[:lower:]' <<<"$strategy")-$round
  k -n "$NS" apply -f - >"$WORK/apply.log" 2>&1 <<EOF || die "creating $name: $(tail -2 "$WORK/apply.log")"
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata:
  name: $name
  labels: {bench: $name}
spec:
  replicas: $PODS
  selector:
    matchLabels: {app: $name}
  template:
    metadata:
      labels: {app: $name}
    spec:
      hostNetwork: true
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: $REG/busybox:v1
        imagePullPolicy: $PULL_POLICY
        # One process that sleeps: a loop of `sleep 1` in 100 pods forks 100 times a second and
        # slows this 2-core kubelet down for both strategies alike.
        command: ["sh", "-c", "trap 'exit 0' TERM; sleep 86400 & wait"]
  updateStrategy:
    type: $strategy
EOF
  wait_for 600 "$PODS Ready pods of $name" cs_is "$name" \
    ".status.readyReplicas == $PODS and .status.replicas == $PODS and .status.updatedReplicas == $PODS"
  python3 "$HERE/watch_stamp.py" "$KUBECTL" "$NS" "app=$name" >"$WORK/$name.watch" &
  WATCH_PID=$!
  python3 "$HERE/watch_stamp.py" "$KUBECTL" "$NS" "bench=$name" clonesets >"$WORK/$name.cs-watch" &
  CS_WATCH_PID=$!
  wait_for 30 "the watch's first events" \
    bash -c "[ \$(grep -c ' {\"type\":\"ADDED\"' '$WORK/$name.watch') -ge $PODS ]"
  local kubelet_before kubelet_after
  kubelet_before=$(kubelet_pod_requests)
  t_patch=$(now_ms)
  k -n "$NS" patch cloneset "$name" --type json -p "[{\"op\":\"replace\",
    \"path\":\"/spec/template/spec/containers/0/image\",\"value\":\"$REG/busybox:v2\"}]" >/dev/null ||
    die "patching $name"
  wait_for 900 "$name updated" cs_is "$name" \
    ".status.updatedReadyReplicas == $PODS and .status.readyReplicas == $PODS and .status.replicas == $PODS
     and .status.observedGeneration == .metadata.generation"
  local t_done
  t_done=$(now_ms)
  kubelet_after=$(kubelet_pod_requests)
  kill "$WATCH_PID" "$CS_WATCH_PID" 2>/dev/null
  wait "$WATCH_PID" "$CS_WATCH_PID" 2>/dev/null
  WATCH_PID=
  python3 - "$WORK/$name.watch" "$t_patch" "$t_done" "$strategy" "$round" "$WORK/$name.cs-watch" \
    "$kubelet_before" "$kubelet_after" <<'PYEOF'
import json, sys
path, t_patch, t_done, strategy, rnd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
kb = [int(x) for x in sys.argv[7].split()]
ka = [int(x) for x in sys.argv[8].split()]
kget, kpatch, kdelete = (a - b for a, b in zip(ka, kb))
t_cs = None
for line in open(sys.argv[6]):
    ms, _, body = line.partition(" ")
    if int(ms) >= t_patch and json.loads(body)["object"]["metadata"].get("generation", 1) > 1:
        t_cs = int(ms)
        break
seen, created, deleted, first = set(), 0, 0, None
initial = None
for line in open(path):
    ms, _, body = line.partition(" ")
    ms = int(ms)
    ev = json.loads(body)
    obj = ev["object"]
    name = obj["metadata"]["name"]
    if ev["type"] == "ADDED" and ms < t_patch:
        seen.add(name)
        continue
    if ev["type"] == "ADDED" and name not in seen:
        created += 1
        seen.add(name)
    if ev["type"] == "DELETED":
        deleted += 1
    labels = obj["metadata"].get("labels", {})
    updating = ("apps.kruise.io/specified-delete" in labels
                or any(c.get("type") == "InPlaceUpdateReady" and c.get("status") == "False"
                       for c in obj.get("status", {}).get("conditions", [])))
    if first is None and ms >= t_patch and updating:
        first = ms - t_patch
controller = None if first is None or t_cs is None else first + t_patch - t_cs
total_s = (t_done - t_patch) / 1000
kubelet = kget + kpatch + kdelete
print(f"RESULT {strategy} round {rnd}: total_s {total_s:.1f} "
      f"first_pod_ms {first} controller_ms {controller} creates {created} deletes {deleted} "
      f"kubelet_pod_requests {kubelet} kubelet_requests_per_s {kubelet / total_s:.2f} "
      f"(get {kget} patch_status {kpatch} delete {kdelete})")
PYEOF
  k -n "$NS" delete cloneset "$name" --wait=false >/dev/null
  wait_for 300 "the pods of $name to go" pods_gone
}

bench_rounds measure
bench_summary
