# Sourced by benchmark scripts: use the running test bed, or start one for this script only.
#   source "$ROOT/scripts/testbed/use.sh"; testbed_use
# Afterwards the KRUISE_TESTBED_* variables are set; a bed started here is purged on exit (EXIT
# trap), one that was already running is left alone.
testbed_use() {
  local tb
  tb=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  _testbed_started=0
  if ! "$tb/status" >/dev/null 2>&1; then
    "$tb/up" --quiet
    _testbed_started=1
  fi
  _testbed_dir=$tb
  trap 'if ((_testbed_started)); then "$_testbed_dir/down" --purge >/dev/null; fi' EXIT
  # shellcheck disable=SC1091
  source "${KRUISE_TESTBED_DIR:-/tmp/kruise-testbed}/env"
}
