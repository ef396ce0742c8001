#!/usr/bin/env bash
# Runs bench/pull_bench against the CRI test bed, starting the bed first if none is running in
# $KRUISE_TESTBED_DIR (and stopping it afterwards in that case). Extra arguments go to pull_bench.
# Environment: BUILD_DIR (default build), KRUISE_TESTBED_DIR, KRUISE_TESTBED_PORT_BASE.
set -euo pipefail
ROOT=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
BIN=$BUILD_DIR/bench/pull_bench
[[ -x $BIN ]] || {
  echo "build it first: ninja -C $BUILD_DIR pull_bench" >&2
  exit 2
}
TB=$ROOT/scripts/testbed
started=0
if ! "$TB/status" >/dev/null 2>&1; then
  "$TB/up" --quiet
  started=1
fi
cleanup() { if ((started)); then "$TB/down" --purge >/dev/null; fi; }
trap cleanup EXIT
# shellcheck disable=SC1091
source "${KRUISE_TESTBED_DIR:-/tmp/kruise-testbed}/env"
"$BIN" "$@"
