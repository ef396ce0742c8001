#!/usr/bin/env bash
# Advanced StatefulSet image update on kube-local (GitHub issue 16): podUpdatePolicy
# InPlaceIfPossible against ReCreate, same set, same image change, interleaved rounds. Per round
# and policy it creates an Advanced StatefulSet of PODS (30) busybox:v1 pods (hostNetwork,
# Parallel, rollingUpdate.maxUnavailable 20%, the InPlaceUpdateReady gate in both), waits until all
# are Ready, changes the image to busybox:v2 (another digest) and reports:
#   - total_s: image patch -> status says every pod updated and Ready;
#   - manager_cpu_s: CPU time (user + system, /proc/PID/stat) kruise-manager spent in that window;
#   - rss_anon_mib / rss_mib: kruise-manager's RssAnon and VmRSS (/proc/PID/status), the largest
#     of samples taken every 0.5 s during the update, and once after the set was Ready.
# With ROUNDS > 1 it ends with medians per policy.
#
#   bench/statefulset/update_bench.sh [BUILD_DIR]   (ROUNDS=1, PODS=30, PULL_POLICY=Always,
#                                                    KEEP_LOGS=1)
# Runs one kruise-manager on the host (URL webhooks) like test/e2e/statefulset; deletes what it
# made.
set -uo pipefail

HERE=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
T0=$SECONDS
# shellcheck source=../lib.sh
. "$ROOT/bench/lib.sh"
ROUNDS=${ROUNDS:-1}
PODS=${PODS:-30}
PULL_POLICY=${PULL_POLICY:-Always}
bench_start statefulset KRUISE_BENCH_STATEFULSET_PORT_BASE 16530 "${1:-$ROOT/build}"
bench_on_exit SAMPLER_PID

sts_is() { [ "$(k -n "$NS" get statefulsets.apps.kruise.io "$1" -o json 2>/dev/null | jq -r "$2")" = true ]; }
pods_gone() { [ "$(k -n "$NS" get pods -o name 2>/dev/null | wc -l)" = 0 ]; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$MANAGER_PID/stat"; }
# "RssAnon VmRSS" in KiB.
rss_kib() { awk '/^RssAnon:/ { a = $2 } /^VmRSS:/ { r = $2 } END { print a, r }' "/proc/$MANAGER_PID/status"; }
TICKS=$(getconf CLK_TCK)

# One measurement: POLICY ROUND.
measure() {
  local policy=$1 round=$2 name t_patch t_done c0 c1
  name=bench-$(tr '[:upper:]' '[:lower:]' <<<"$policy")-$round
  k -n "$NS" apply -f - >"$WORK/apply.log" 2>&1 <<EOF || die "creating $name: $(tail -2 "$WORK/apply.log")"
apiVersion: apps.kruise.io/v1beta1
kind: StatefulSet
metadata:
  name: $name
spec:
  replicas: $PODS
  serviceName: $name
  podManagementPolicy: Parallel
  selector:
    matchLabels: {app: $name}
  template:
    metadata:
      labels: {app: $name}
    spec:
      hostNetwork: true
      terminationGracePeriodSeconds: 1
      readinessGates:
      - conditionType: InPlaceUpdateReady
      containers:
      - name: main
        image: $REG/busybox:v1
        imagePullPolicy: $PULL_POLICY
        command: ["sh", "-c", "trap 'exit 0' TERM; sleep 86400 & wait"]
  updateStrategy:
    type: RollingUpdate
    rollingUpdate:
      podUpdatePolicy: $policy
      maxUnavailable: 20%
EOF
  wait_for 600 "$PODS Ready pods of $name" sts_is "$name" \
    ".status.readyReplicas == $PODS and .status.replicas == $PODS and .status.updatedReplicas == $PODS"
  read -r ready_anon ready_rss < <(rss_kib)
  : >"$WORK/$name.rss"
  (while :; do rss_kib >>"$WORK/$name.rss"; sleep 0.5; done) &
  SAMPLER_PID=$!
  c0=$(cpu_ticks)
  t_patch=$(now_ms)
  k -n "$NS" patch statefulsets.apps.kruise.io "$name" --type json -p "[{\"op\":\"replace\",
    \"path\":\"/spec/template/spec/containers/0/image\",\"value\":\"$REG/busybox:v2\"}]" >/dev/null ||
    die "patching $name"
  wait_for 900 "$name updated" sts_is "$name" \
    ".status.updatedReadyReplicas == $PODS and .status.readyReplicas == $PODS and .status.replicas == $PODS
     and .status.currentRevision == .status.updateRevision and .status.observedGeneration == .metadata.generation"
  t_done=$(now_ms)
  c1=$(cpu_ticks)
  kill "$SAMPLER_PID" 2>/dev/null
  wait "$SAMPLER_PID" 2>/dev/null
  SAMPLER_PID=
  awk -v p="$policy" -v r="$round" -v t=$((t_done - t_patch)) -v cpu=$((c1 - c0)) -v hz="$TICKS" \
    -v ra="$ready_anon" -v rr="$ready_rss" '
    { if ($1 > a) a = $1; if ($2 > m) m = $2 }
    END { printf "RESULT %s round %s: total_s %.1f manager_cpu_s %.2f rss_anon_mib %.1f rss_mib %.1f (Ready before: %.1f / %.1f)\n",
            p, r, t / 1000, cpu / hz, a / 1024, m / 1024, ra / 1024, rr / 1024 }' "$WORK/$name.rss"
  k -n "$NS" delete statefulsets.apps.kruise.io "$name" --wait=false >/dev/null
  wait_for 300 "the pods of $name to go" pods_gone
}

bench_rounds measure
bench_summary
