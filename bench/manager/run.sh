#!/usr/bin/env bash
# kruise-manager memory benchmark (GitHub issue 5: "Manager RSS idle and with 1k NodeImages + 30k
# pods cached: target <= 64 MiB"). See bench/manager/README.md.
#
#   bench/manager/run.sh [BUILD_DIR]        (default: build; Release recommended)
#
# For each scenario (empty cluster, then loaded cluster) it starts manager-bench-apiserver (the fake
# API server, seeded), runs kruise-manager against it as the leader with
# --feature-gates=ImagePullJobGate=true (so Pods are cached), waits until the caches are synced,
# the webhook is ready and the controllers are idle, and prints RssAnon / VmRSS from
# /proc/<pid>/status, then the same after malloc_trim(0) (through gdb, when installed).
#
# Environment: NODES (1000), PODS (30000), IMAGES_PER_NODE (4), RUNS (1), SCENARIOS ("empty loaded"),
# IDLE_SECONDS (5: no API writes and < 2% CPU for this long), TIMEOUT (300 s per scenario),
# KEEP_LOGS=1 (keep the work dir), MANAGER_ARGS (extra kruise-manager flags), FAKE_ARGS (extra
# manager-bench-apiserver flags, e.g. "--node-status-images 0"), TRIM=0 (skip the malloc_trim step).
set -euo pipefail
ROOT=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
BUILD=${1:-$ROOT/build}
MANAGER=$BUILD/manager/app/kruise-manager
FAKE=$BUILD/bench/manager/manager-bench-apiserver
# Benchmarks are not in the default build: build (or bring up to date) what this one runs.
ninja -C "$BUILD" kruise-manager manager-bench-apiserver >&2
NODES=${NODES:-1000}
PODS=${PODS:-30000}
IMAGES_PER_NODE=${IMAGES_PER_NODE:-4}
RUNS=${RUNS:-1}
SCENARIOS=${SCENARIOS:-"empty loaded"}
IDLE_SECONDS=${IDLE_SECONDS:-5}
TIMEOUT=${TIMEOUT:-300}
HZ=$(getconf CLK_TCK)

work=$(mktemp -d /tmp/manager-bench.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  if [[ ${KEEP_LOGS:-0} == 1 ]]; then echo "logs kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
status_kib() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
threads() { awk '$1 == "Threads:" { print $2 }' "/proc/$1/status"; }
stop_pid() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# Runs one scenario; prints one "key: value" block.
scenario() {
  local name=$1 run=$2 dir=$work/$1-$2
  mkdir -p "$dir/certs"
  local fake_args=(--port-file "$dir/port" --stats-file "$dir/stats")
  if [[ $name == empty ]]; then
    fake_args+=(--nodes 0 --pods 0 --node-images false)
  else
    fake_args+=(--nodes "$NODES" --pods "$PODS" --images-per-node "$IMAGES_PER_NODE")
  fi
  # shellcheck disable=SC2206
  fake_args+=(${FAKE_ARGS:-})
  local t0 fake_pid
  t0=$(now)
  "$FAKE" "${fake_args[@]}" 2>"$dir/fake.log" &
  fake_pid=$!
  pids+=("$fake_pid")
  local deadline=$((SECONDS + TIMEOUT))
  until [[ -s $dir/port ]]; do
    kill -0 "$fake_pid" 2>/dev/null || { echo "fake API server died:" >&2; cat "$dir/fake.log" >&2; exit 1; }
    ((SECONDS < deadline)) || { echo "fake API server did not start within ${TIMEOUT}s" >&2; exit 1; }
    sleep 0.2
  done
  local port seed_s
  port=$(cat "$dir/port")
  seed_s=$(elapsed "$t0" "$(now)")
  cat >"$dir/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: http://127.0.0.1:$port
users:
- name: bench
  user: {}
contexts:
- name: fake
  context:
    cluster: fake
    user: bench
current-context: fake
EOF
  local webhook_port health_port metrics_port
  webhook_port=$(free_port)
  health_port=$(free_port)
  metrics_port=$(free_port)
  local m0 mgr_pid
  m0=$(now)
  # shellcheck disable=SC2086
  POD_NAMESPACE=kruise-system WEBHOOK_HOST=127.0.0.1 WEBHOOK_PORT=$webhook_port \
    WEBHOOK_CERT_DIR=$dir/certs \
    "$MANAGER" --kubeconfig "$dir/kubeconfig" --enable-leader-election=true \
    --leader-election-namespace kruise-system \
    --health-probe-addr "127.0.0.1:$health_port" --metrics-addr "127.0.0.1:$metrics_port" \
    --feature-gates=ImagePullJobGate=true ${MANAGER_ARGS:-} >"$dir/manager.log" 2>&1 &
  mgr_pid=$!
  pids+=("$mgr_pid")

  # 1. Caches synced (log line), leader-only runnables started, webhook ready (/readyz).
  local sync_s="" ready_s=""
  until [[ -n $sync_s && -n $ready_s ]]; do
    kill -0 "$mgr_pid" 2>/dev/null || { echo "kruise-manager died:" >&2; tail -20 "$dir/manager.log" >&2; exit 1; }
    ((SECONDS < deadline)) || { echo "kruise-manager not synced/ready within ${TIMEOUT}s" >&2; tail -20 "$dir/manager.log" >&2; exit 1; }
    if [[ -z $sync_s ]] && grep -q "caches synced" "$dir/manager.log"; then sync_s=$(elapsed "$m0" "$(now)"); fi
    if [[ -n $sync_s && -z $ready_s ]] && grep -q "starting .* leader-only runnables" "$dir/manager.log" &&
      curl -sf -o /dev/null "http://127.0.0.1:$health_port/readyz"; then
      ready_s=$(elapsed "$m0" "$(now)")
    fi
    sleep 0.1
  done
  # 2. Idle: no API writes (leases excluded) and < 2% of one CPU for IDLE_SECONDS in a row.
  local quiet=0 last_writes=-1 last_ticks writes ticks
  last_ticks=$(cpu_ticks "$mgr_pid")
  while ((quiet < IDLE_SECONDS)); do
    ((SECONDS < deadline)) || { echo "kruise-manager did not go idle within ${TIMEOUT}s" >&2; exit 1; }
    sleep 1
    writes=$(awk '{ print $2 }' "$dir/stats" 2>/dev/null || echo 0)
    ticks=$(cpu_ticks "$mgr_pid")
    if [[ $writes == "$last_writes" ]] && (((ticks - last_ticks) * 50 <= HZ)); then
      quiet=$((quiet + 1))
    else
      quiet=0
    fi
    last_writes=$writes
    last_ticks=$ticks
  done
  local idle_s anon rss
  idle_s=$(elapsed "$m0" "$(now)")
  anon=$(status_kib "$mgr_pid" RssAnon)
  rss=$(status_kib "$mgr_pid" VmRSS)
  echo "== $name run $run ($( [[ $name == empty ]] && echo "no nodes, no pods" || echo "$NODES nodes + $NODES NodeImages, $PODS pods"))"
  echo "seed_s: $seed_s"
  echo "cache_sync_s: $sync_s"
  echo "ready_s: $ready_s"
  echo "idle_s: $idle_s"
  echo "api_writes: $writes"
  echo "cpu_s: $(awk -v t="$ticks" -v h="$HZ" 'BEGIN { printf "%.1f", t / h }')"
  echo "threads: $(threads "$mgr_pid")"
  echo "rss_anon_mib: $(mib "$anon")"
  echo "vm_rss_mib: $(mib "$rss")"
  if [[ ${TRIM:-1} == 1 ]] && command -v gdb >/dev/null; then
    # How much of RssAnon is free heap glibc keeps (not live data): trim and read again.
    if gdb -p "$mgr_pid" -batch -ex 'call (int) malloc_trim(0)' >"$dir/gdb.log" 2>&1; then
      echo "after_malloc_trim_rss_anon_mib: $(mib "$(status_kib "$mgr_pid" RssAnon)")"
      echo "after_malloc_trim_vm_rss_mib: $(mib "$(status_kib "$mgr_pid" VmRSS)")"
    else
      echo "after_malloc_trim: gdb could not attach ($(tail -1 "$dir/gdb.log"))"
    fi
  fi
  echo "SUMMARY $name run $run: RssAnon $(mib "$anon") MiB, VmRSS $(mib "$rss") MiB, caches synced in ${sync_s} s, idle after ${idle_s} s"
  stop_pid "$mgr_pid"
  stop_pid "$fake_pid"
}

for ((run = 1; run <= RUNS; run++)); do
  for s in $SCENARIOS; do scenario "$s" "$run"; done
done
