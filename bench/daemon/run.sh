#!/usr/bin/env bash
# Runs the kruise-daemon benchmarks and prints their tables.
#
#   bench/daemon/run.sh [latency|pull|all] [extra daemon_bench flags]
#
#   latency  daemon_bench: NodeImage -> PullImage, CRR -> StopContainer, idle memory. Uses
#            kube-local's real API server when it is up (applies deploy/crds first), else the
#            in-process fake API server; the CRI runtime is the fake one (timestamps arrivals).
#   pull     daemon_pull_bench: cold pulls daemon vs bare CRI vs ctr on the CRI test bed
#            (scripts/testbed; started and stopped here when not already running).
#
# Environment: BUILD_DIR (default build), RUNS (default 30 latency / 5 pull), KUBE_LOCAL_STATE,
# KRUISE_TESTBED_DIR, USE_FAKE_API=1 (ignore kube-local).
set -euo pipefail
ROOT=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
what=${1:-all}
shift || true
DAEMON=$BUILD_DIR/daemon/kruise-daemon
# Benchmarks are not in the default build: build (or bring up to date) what this one runs.
ninja -C "$BUILD_DIR" kruise-daemon daemon_bench daemon_pull_bench >&2

if [[ $what == latency || $what == all ]]; then
  args=()
  KL_ENV=${KUBE_LOCAL_STATE:-/tmp/kube-local}/env
  if [[ ${USE_FAKE_API:-0} != 1 && -f $KL_ENV ]] && "$ROOT/../shared/kube-local/status" >/dev/null 2>&1; then
    # shellcheck disable=SC1090
    source "$KL_ENV"
    kubectl apply -k "$ROOT/deploy/crds" >/dev/null
    kubectl wait --for condition=established --timeout=60s crd/nodeimages.apps.kruise.io crd/containerrecreaterequests.apps.kruise.io >/dev/null
    echo "API server: kube-local ($KUBE_LOCAL_APISERVER)"
    args+=(--kubeconfig "$KUBECONFIG" --node "bench-$$")
  else
    echo "API server: in-process fake"
  fi
  "$BUILD_DIR/bench/daemon/daemon_bench" --daemon "$DAEMON" --runs "${RUNS:-30}" "${args[@]}" "$@"
fi

if [[ $what == pull || $what == all ]]; then
  # shellcheck disable=SC1091
  source "$ROOT/scripts/testbed/use.sh"
  testbed_use
  "$BUILD_DIR/bench/daemon/daemon_pull_bench" --daemon "$DAEMON" --runs "${PULL_RUNS:-5}" "$@"
fi
