#!/usr/bin/env bash
# Checks deploy/systemd/kruise-daemon.service: the settings the daemon relies on are there, and
# `systemd-analyze verify` accepts the unit (ExecStart pointed at the built binary, given as $1, or
# /bin/true). Exit 77 (skip) when systemd-analyze is not installed.
set -uo pipefail
HERE=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
UNIT=$HERE/../../deploy/systemd/kruise-daemon.service
BIN=${1:-/bin/true}
[[ -x $BIN ]] || BIN=/bin/true
failures=0
fail() {
  echo "FAIL $*"
  failures=$((failures + 1))
}
for want in '^Type=notify$' '^WatchdogSec=30s$' '^Restart=always$' '^EnvironmentFile=/etc/default/kruise-daemon$' \
  '^Wants=.*containerd\.service' '^After=.*containerd\.service' '^ExecStart=/usr/local/bin/kruise-daemon .*--host-run-dir=/run' \
  '^NoNewPrivileges=yes$' '^ProtectSystem=strict$' '^RestrictAddressFamilies=.*AF_UNIX'; do
  grep -Eq "$want" "$UNIT" || fail "unit has no line matching $want"
done
# Nothing may hide or deny the CRI sockets under /run.
if grep -Eq '^(InaccessiblePaths|TemporaryFileSystem|PrivateNetwork|RootDirectory|RootImage)=' "$UNIT"; then
  fail "unit hides the host's /run or network"
fi
if ! command -v systemd-analyze >/dev/null; then
  echo "SKIP: systemd-analyze not installed; static checks: $failures failure(s)"
  ((failures == 0)) && exit 77
  exit 1
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/systemd-unit-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
: >"$WORK/env"
sed -e "s#/usr/local/bin/kruise-daemon#$BIN#" -e "s#^EnvironmentFile=.*#EnvironmentFile=$WORK/env#" \
  "$UNIT" >"$WORK/kruise-daemon.service"
if out=$(systemd-analyze verify "$WORK/kruise-daemon.service" 2>&1) && [[ -z $out ]]; then
  echo "ok   systemd-analyze verify"
else
  fail "systemd-analyze verify: ${out:-exit status non-zero}"
fi
((failures == 0)) && echo "ok   kruise-daemon.service" && exit 0
exit 1
