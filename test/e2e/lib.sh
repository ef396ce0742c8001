# Helpers shared by the kube-local end-to-end scripts (test/e2e/*/..._e2e.sh, test/deploy/validate.sh).
# Source it after setting T0=$SECONDS; results collected with `result` are in the array RESULTS.
# shellcheck shell=bash

# A line with the wall-clock time and the seconds since T0.
say() { echo "[$(date -u +%H:%M:%S) +$((SECONDS - T0))s] $*"; }
die() {
  say "FAIL $*"
  exit 1
}
# A missing test bed: a skip, or a failure where CI requires the e2e tests (KRUISE_E2E_REQUIRED=1).
skip_or_fail() {
  if [ "${KRUISE_E2E_REQUIRED:-0}" = 1 ]; then
    echo "FAIL (KRUISE_E2E_REQUIRED=1): $*"
    exit 1
  fi
  echo "SKIP: $*"
  exit 0
}
now_ms() { date +%s%3N; }
# Milliseconds as seconds with one decimal.
secs() { awk -v ms="$1" 'BEGIN { printf "%.1f", ms / 1000 }'; }
RESULTS=()
result() {
  RESULTS+=("$*")
  say "ok   $*"
}
# wait_for SECONDS WHAT COMMAND...: polls COMMAND every 0.2 s until it succeeds; dies after SECONDS
# with WHAT as the reason.
wait_for() {
  local secs=$1 what=$2
  shift 2
  local deadline=$(($(now_ms) + secs * 1000))
  until "$@"; do
    [ "$(now_ms)" -lt "$deadline" ] || die "timed out after ${secs}s waiting for $what"
    sleep 0.2
  done
}
