#!/usr/bin/env bash
# Runs the CRI e2e tests outside ctest: starts scripts/testbed, runs the test binaries with its env,
# and stops + purges the bed on exit. `ctest -L e2e` does the same through a fixture.
# Environment: BUILD_DIR (default build), KRUISE_TESTBED_DIR, KRUISE_TESTBED_PORT_BASE.
# Extra arguments go to every test binary (e.g. --gtest_filter=...).
set -euo pipefail
ROOT=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
export KRUISE_E2E_REQUIRED=1
"$ROOT/scripts/testbed/up" --quiet
trap '"$ROOT/scripts/testbed/down" --purge' EXIT
# shellcheck disable=SC1091
source "${KRUISE_TESTBED_DIR:-/tmp/kruise-testbed}/env"
rc=0
for t in testbed_e2e_test cri_e2e_test; do
  bin=$BUILD_DIR/test/e2e/$t
  if [[ ! -x $bin ]]; then
    echo "missing $bin (ninja -C $BUILD_DIR $t)" >&2
    rc=1
    continue
  fi
  "$bin" "$@" || rc=1
done
exit "$rc"
