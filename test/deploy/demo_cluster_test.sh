#!/usr/bin/env bash
# The README's run command in its explicit cluster mode (`scripts/demo --cluster`) against
# kube-local: kruise-daemon starts as the node agent of kube-local's node, finds that node's
# containerd, reports ready on /healthz, and stops cleanly on SIGTERM (what Ctrl-C in a terminal
# sends to the foreground process group is SIGINT; both are checked).
# Usage: demo_cluster_test.sh KRUISE_DAEMON_BINARY
set -uo pipefail
ROOT=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
daemon=${1:?usage: demo_cluster_test.sh KRUISE_DAEMON_BINARY}
T0=$SECONDS
# shellcheck source=test/e2e/lib.sh
. "$ROOT/test/e2e/lib.sh"
kube_local_preflight curl
[ -S "$KUBE_LOCAL_CRI_SOCKET" ] || skip_or_fail "no containerd socket at $KUBE_LOCAL_CRI_SOCKET"
PORT=${KRUISE_DEMO_CLUSTER_PORT:-16791}
out=$(mktemp)
pid=""
cleanup() {
  [ -z "$pid" ] || kill -KILL "$pid" 2>/dev/null
  rm -f "$out"
}
trap cleanup EXIT

healthy() { curl -fsS "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1; }
exited() { ! kill -0 "$pid" 2>/dev/null; }

# start SIGNAL: runs the demo in cluster mode with a clean environment (no KUBECONFIG/NODE_NAME:
# everything comes from the flags), waits for /healthz, sends SIGNAL and checks the exit.
run_once() {
  local sig=$1
  env -u KUBECONFIG -u NODE_NAME -u HOST_RUN_DIR -u ADDR KRUISE_DAEMON_BIN="$daemon" \
    "$ROOT/scripts/demo" --cluster --kubeconfig "$KUBE_LOCAL_STATE/kubeconfig" \
    --node "$KUBE_LOCAL_NODE_NAME" --host-run-dir "$(dirname "$KUBE_LOCAL_CRI_SOCKET")" \
    --socket-file "$(basename "$KUBE_LOCAL_CRI_SOCKET")" --addr "127.0.0.1:$PORT" >"$out" 2>&1 &
  pid=$!
  wait_for 60 "the agent's /healthz (log: $(tail -n 5 "$out" | tr '\n' ' '))" healthy
  local body
  body=$(curl -fsS "http://127.0.0.1:$PORT/healthz")
  grep -q "containerd" "$out" || die "the agent's log does not name containerd: $(tail -n 20 "$out")"
  result "SIG$sig run: agent for $KUBE_LOCAL_NODE_NAME ready ($body)"
  kill -"$sig" "$pid"
  wait_for 30 "kruise-daemon to exit after SIG$sig" exited
  wait "$pid"
  local rc=$?
  pid=""
  [ "$rc" = 0 ] || die "kruise-daemon exited $rc after SIG$sig: $(tail -n 20 "$out")"
  result "SIG$sig: clean exit"
}

# Misuse is a clear error, not a crash or a silent local run.
msg=$(env -u KUBECONFIG -u NODE_NAME KRUISE_DAEMON_BIN="$daemon" "$ROOT/scripts/demo" --cluster 2>&1)
rc=$?
[ "$rc" = 2 ] && grep -q -- "--cluster needs a kubeconfig" <<<"$msg" ||
  die "scripts/demo --cluster without a kubeconfig: rc=$rc: $msg"
result "--cluster without a kubeconfig: exit 2 with a usage message"

run_once TERM
run_once INT
say "demo_cluster_test: ok"
