#!/usr/bin/env bash
# What the workload update benches (bench/cloneset, bench/statefulset) share: a kruise-manager on
# the host against kube-local (as the e2e tests run it), interleaved rounds of in-place against
# recreate, and medians with spread. Source it after setting T0; it sources test/e2e/lib.sh.
#
#   bench_start NAME PORT_VAR DEFAULT_PORT BUILD_DIR
#       builds kruise-manager, checks kube-local, takes three ports from $PORT_VAR (default
#       DEFAULT_PORT), makes $WORK, deploys the manager's objects in namespace kruise-bench-NAME
#       ($NS) and starts the manager ($MANAGER_PID). The exit trap stops what bench_on_exit names,
#       deletes what the bench made and, unless KEEP_LOGS=1, $WORK.
#   bench_rounds MEASURE        runs `MEASURE POLICY ROUND` for ROUNDS rounds, in-place first in
#                               odd rounds and recreate first in even ones; lines go to
#                               $WORK/results.
#   bench_summary               per policy, the median (min, max, n) of every number its RESULT
#                               lines carry, and the in-place / recreate ratio of total_s per round.
BENCH_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../test/e2e/lib.sh
. "$BENCH_LIB_DIR/../test/e2e/lib.sh"

BENCH_ON_EXIT=()
# Names a PID variable whose process the exit trap stops (a sampler, a watch).
bench_on_exit() { BENCH_ON_EXIT+=("$1"); }

# The e2e tests' cleanup (test/e2e/lib.sh manager_e2e_cleanup: the host manager, the deployment,
# the Lease, WORK), after the bench's own background processes.
bench_cleanup() {
  local rc=$? var
  set +e
  for var in "${BENCH_ON_EXIT[@]}"; do [ -n "${!var:-}" ] && kill "${!var}" 2>/dev/null; done
  [ "${KEEP_LOGS:-0}" = 1 ] && KRUISE_E2E_KEEP_WORK=1
  manager_e2e_cleanup "$rc"
}

bench_start() {
  local name=$1 port_var=$2 build
  build=$(readlink -f "$4")
  BASE=${!port_var:-$3}
  ninja -C "$build" kruise-manager >&2 || die "building kruise-manager"
  kube_local_preflight jq curl python3
  NS=kruise-bench-$name
  REG=$KUBE_LOCAL_REGISTRY
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/$name-bench.XXXXXX")
  PIDS=()
  require_free_ports "$port_var" $(seq "$BASE" $((BASE + 2)))
  trap bench_cleanup EXIT
  deploy_manager_objects "$WORK" "$NS"
  start_host_manager "$build/manager/app/kruise-manager" "$WORK" "$BASE"
}

bench_rounds() {
  local measure=$1 round order policy
  for round in $(seq "${ROUNDS:-1}"); do
    if [ $((round % 2)) = 1 ]; then order="InPlaceIfPossible ReCreate"; else order="ReCreate InPlaceIfPossible"; fi
    for policy in $order; do
      say "round $round: $policy, $PODS pods"
      "$measure" "$policy" "$round" | tee -a "$WORK/results"
    done
  done
  say "results:"
  cat "$WORK/results"
}

bench_summary() {
  python3 - "$WORK/results" <<'PYEOF'
import re, statistics, sys
rows = {}  # policy -> round -> {key: value}
for line in open(sys.argv[1]):
    m = re.match(r"RESULT (\S+) round (\d+): (.*)", line)
    if m:
        rows.setdefault(m[1], {})[int(m[2])] = {k: float(v) for k, v in re.findall(r"(\w+) (-?[\d.]+)\b", m[3])}
for policy, by_round in sorted(rows.items()):
    keys = [k for k in next(iter(by_round.values()))]
    parts = []
    for key in keys:
        xs = [r[key] for r in by_round.values() if key in r]
        parts.append(f"{key} {statistics.median(xs):g} ({min(xs):g}-{max(xs):g})")
    print(f"SUMMARY {policy} (n {len(by_round)}), median (min-max): " + ", ".join(parts))
inp, rec = rows.get("InPlaceIfPossible", {}), rows.get("ReCreate", {})
ratios = [inp[k]["total_s"] / rec[k]["total_s"] for k in sorted(inp)
          if k in rec and rec[k].get("total_s")]
if ratios:
    print(f"SUMMARY in-place / recreate total_s per round: {' '.join(f'{x:.2f}' for x in ratios)}; "
          f"median {statistics.median(ratios):.2f}")
PYEOF
}
