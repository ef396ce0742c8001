# kruise-cpp test bed: settings and helpers shared by `up` and `down`. Sourced, never executed.
# shellcheck shell=bash

TB_SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

TB_DIR=$(realpath -m "${KRUISE_TESTBED_DIR:-/tmp/kruise-testbed}")
TB_CACHE=$(realpath -m "${KRUISE_TESTBED_CACHE:-/var/cache/kruise-testbed}")
TB_PORT_BASE=${KRUISE_TESTBED_PORT_BASE:-16600}

tb_log() { printf '[testbed %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
tb_die() {
  tb_log "ERROR: $*"
  exit 1
}

case $TB_DIR in
  / | /tmp | /var | /var/tmp | /root | /home) tb_die "refusing to use $TB_DIR as the test bed dir" ;;
esac
[[ $TB_PORT_BASE =~ ^[0-9]+$ ]] || tb_die "KRUISE_TESTBED_PORT_BASE must be a number"
((TB_PORT_BASE >= 1024 && TB_PORT_BASE <= 65500)) || tb_die "KRUISE_TESTBED_PORT_BASE out of range"
# ../shared/kube-local owns 16400-16419.
if ((TB_PORT_BASE + 9 >= 16400 && TB_PORT_BASE <= 16419)); then
  tb_die "KRUISE_TESTBED_PORT_BASE=$TB_PORT_BASE collides with kube-local (16400-16419)"
fi

# Ports: base+0 plain registry, base+1 TLS registry, base+2 CRI streaming server.
TB_REGISTRY_PORT=$((TB_PORT_BASE + 0))
TB_REGISTRY_TLS_PORT=$((TB_PORT_BASE + 1))
TB_STREAM_PORT=$((TB_PORT_BASE + 2))
TB_REGISTRY=127.0.0.1:$TB_REGISTRY_PORT
TB_REGISTRY_TLS=127.0.0.1:$TB_REGISTRY_TLS_PORT
TB_REGISTRY_USER=kruise

TB_RUN=$TB_DIR/run
TB_LOGS=$TB_DIR/logs
TB_PKI=$TB_DIR/pki
TB_CTRD=$TB_DIR/containerd
TB_SOCK=$TB_CTRD/containerd.sock
TB_RUNC_ROOT=$TB_CTRD/runc
TB_CERTS_D=$TB_CTRD/certs.d
TB_ENV_FILE=$TB_DIR/env

# Bump when the image recipe changes so cached layouts are rebuilt.
TB_IMAGES_REV=1
TB_IMAGES=$TB_CACHE/images/r$TB_IMAGES_REV

TB_COMPONENTS="registry registry-tls containerd"

# Every daemon we start carries this marker in its environment; pid files are only trusted when the
# process still carries it (protects against pid reuse and against killing another instance's daemons).
export KRUISE_TESTBED_INSTANCE=$TB_DIR

# Prints the pid recorded for component $1 if that process is alive and belongs to this instance.
tb_pid_of() {
  local f=$TB_RUN/$1.pid p
  [[ -s $f ]] || return 1
  p=$(<"$f")
  [[ $p =~ ^[0-9]+$ ]] || return 1
  [[ -r /proc/$p/environ ]] || return 1
  { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | grep -qxF "KRUISE_TESTBED_INSTANCE=$TB_DIR" ||
    return 1
  echo "$p"
}

tb_password() { cat "$TB_PKI/registry-password" 2>/dev/null; }

# Health probe of one component; returns 0 when it answers.
tb_healthy() {
  local code
  case $1 in
    containerd)
      ctr --address "$TB_SOCK" --timeout 3s version >/dev/null 2>&1
      ;;
    registry)
      code=$(curl -s -m 3 -o /dev/null -w '%{http_code}' "http://$TB_REGISTRY/v2/" 2>/dev/null) || true
      [[ $code == 200 ]]
      ;;
    registry-tls)
      code=$(curl -s -m 3 -o /dev/null -w '%{http_code}' --cacert "$TB_PKI/ca.crt" \
        -u "$TB_REGISTRY_USER:$(tb_password)" "https://$TB_REGISTRY_TLS/v2/" 2>/dev/null) || true
      [[ $code == 200 ]]
      ;;
    *) return 1 ;;
  esac
}

# Prints the last lines of a log file to stderr (used when something fails).
tb_tail_log() {
  local f=$TB_LOGS/$1.log
  if [[ -f $f ]]; then
    tb_log "last lines of $f:"
    tail -n 25 "$f" >&2
  fi
}

# Sends SIGTERM to pid $1, waits up to $2 seconds, then SIGKILLs it. Returns when it is gone.
tb_stop_pid() {
  local p=$1 secs=${2:-10} i
  kill -TERM "$p" 2>/dev/null || return 0
  for ((i = 0; i < secs * 10; i++)); do
    kill -0 "$p" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$p" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    kill -0 "$p" 2>/dev/null || return 0
    sleep 0.1
  done
  tb_log "WARNING: pid $p survived SIGKILL"
}

# Pids of containerd shims serving this instance's containerd (matched on their -address argument).
tb_shim_pids() {
  local p cmd
  for p in $(pgrep -f '^/usr/bin/containerd-shim' 2>/dev/null || true); do
    cmd=$({ tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null) || continue
    [[ " $cmd " == *" -address $TB_SOCK "* ]] && echo "$p"
  done
  return 0
}

# Mount points at or below the test bed dir, deepest first.
tb_mounts() {
  findmnt -rn -o TARGET 2>/dev/null | awk -v d="$TB_DIR" 'index($0, d "/") == 1 || $0 == d' |
    sort -r || true
}
