#!/usr/bin/env bash
# Runs the README's run command (scripts/demo) against an already built kruise-daemon, on a test
# bed of its own (own dir and ports, so it never meets the CRI e2e bed), and checks that both
# images of its ImagePullJob YAML were pulled. Also checks that every shell script parses.
# Usage: demo_test.sh KRUISE_DAEMON_BINARY
set -uo pipefail
ROOT=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
daemon=${1:?usage: demo_test.sh KRUISE_DAEMON_BINARY}
failures=0

for f in "$ROOT"/scripts/demo "$ROOT"/scripts/test "$ROOT"/test/deploy/demo_cluster_test.sh "$ROOT"/scripts/install-deps \
  "$ROOT"/scripts/build-image "$ROOT"/scripts/testbed/up "$ROOT"/scripts/testbed/down \
  "$ROOT"/scripts/testbed/status "$ROOT"/scripts/testbed/lib.sh "$ROOT"/scripts/testbed/images.sh \
  "$ROOT"/scripts/testbed/use.sh "$ROOT"/bench/run-pull-bench.sh "$ROOT"/bench/daemon/run.sh; do
  if ! bash -n "$f"; then
    echo "FAIL bash -n $f"
    failures=$((failures + 1))
  fi
done

export KRUISE_TESTBED_DIR=${TMPDIR:-/tmp}/kruise-demo-test.$$
export KRUISE_TESTBED_PORT_BASE=${KRUISE_DEMO_TEST_PORT_BASE:-16700}
out=$(mktemp)
cleanup() {
  "$ROOT/scripts/testbed/down" --purge >/dev/null 2>&1 || echo "WARN: test bed teardown reported leftovers"
  rm -f "$out"
}
trap cleanup EXIT

if [ "$(id -u)" != 0 ]; then
  echo "SKIP: the demo's test bed (containerd) needs root"
  exit 77
fi
# The local demo is the default whatever the shell holds: run it the way a Kubernetes user's shell
# looks (KUBECONFIG set, pointing anywhere; NODE_NAME unset), issue 20.
env -u NODE_NAME -u HOST_RUN_DIR -u ADDR KUBECONFIG=/nonexistent/kubeconfig \
  KRUISE_DAEMON_BIN="$daemon" timeout 300 "$ROOT/scripts/demo" >"$out" 2>&1
rc=$?
tr '\r' '\n' <"$out" | tail -n 15
if [ "$rc" != 0 ]; then
  echo "FAIL scripts/demo exited $rc"
  failures=$((failures + 1))
fi
for want in "runtime: containerd" "summary: 2 pulled, 0 failed, 2 total" "Succeeded"; do
  if ! grep -q -- "$want" "$out"; then
    echo "FAIL demo output lacks: $want"
    failures=$((failures + 1))
  fi
done
[ "$failures" = 0 ] && echo "demo_test: ok"
exit $((failures > 0))
