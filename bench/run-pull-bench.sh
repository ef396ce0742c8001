#!/usr/bin/env bash
# Runs bench/pull_bench against the CRI test bed, starting the bed first if none is running in
# $KRUISE_TESTBED_DIR (and stopping it afterwards in that case). Extra arguments go to pull_bench.
# Environment: BUILD_DIR (default build), KRUISE_TESTBED_DIR, KRUISE_TESTBED_PORT_BASE.
set -euo pipefail
ROOT=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
BIN=$BUILD_DIR/bench/pull_bench
# Benchmarks are not in the default build: build (or bring up to date) what this one runs.
ninja -C "$BUILD_DIR" pull_bench >&2
# shellcheck disable=SC1091
source "$ROOT/scripts/testbed/use.sh"
testbed_use
"$BIN" "$@"
