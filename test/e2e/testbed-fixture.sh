#!/usr/bin/env bash
# ctest fixture for the CRI e2e tests: `testbed-fixture.sh up` starts scripts/testbed (unless a healthy
# one already runs in $KRUISE_TESTBED_DIR, which is then left alone), `testbed-fixture.sh down` stops
# and purges it only if `up` started it.
set -euo pipefail
ROOT=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
TB=$ROOT/scripts/testbed
DIR=$(realpath -m "${KRUISE_TESTBED_DIR:-/tmp/kruise-testbed}")
MARK=$DIR/.started-by-ctest

case ${1:-} in
  up)
    if [[ ! -f $MARK ]] && "$TB/status" >/dev/null 2>&1; then
      echo "reusing the running test bed in $DIR"
      exit 0
    fi
    mkdir -p "$DIR"
    touch "$MARK"
    exec "$TB/up" --quiet
    ;;
  down)
    if [[ -f $MARK ]]; then
      exec "$TB/down" --purge
    fi
    echo "test bed in $DIR was not started by ctest: left running"
    ;;
  *)
    echo "usage: $0 up|down" >&2
    exit 2
    ;;
esac
