#!/usr/bin/env bash
# The webhook server under hostile or slow conditions (issue 33), three short runs:
#   1. memory: 8 concurrent 4 MiB pod reviews (207 containers x 400 env entries: the DOM-heavy
#      shape) against a server in a cgroup-v1 memory cgroup with the manager Deployment's limit
#      (256 MiB, deploy/manager/base/deployment.yaml) holding 55 MiB of ballast for the manager's
#      caches (bench/manager: 52-55 MiB RssAnon at 30k pods); twice with the decode budget
#      disabled (as before), then with the default; peak RSS (VmHWM), the cgroup's peak, the
#      answers and whether the server survived;
#   2. idle connections: 5,000 idle TLS connections (handshake done, no request), with the default
#      max_sessions and with the cap raised to 5,000: RssAnon before and while held;
#   3. slow API server: the fake API server answers pod GETs after 20 s; 8 connections keep CRR
#      reviews in flight (each waits on a pod GET until the webhook client's 2 s deadline) while
#      GET /healthz and POST /kruise/mutate-pod run at 100/s for 5 s each: their latency.
#   bench/webhook/limits.sh [BUILD_DIR]    (root, for the cgroup; MALLOC_ARENA_MAX=2 as the manager)
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
HERE=$ROOT/bench/webhook
PEERS=${PEERS_DIR:-$ROOT/../shared/peers}
ninja -C "$BUILD" webhook-bench-server webhook-loadgen fake-apiserver >&2
SERVER=$BUILD/bench/webhook/webhook-bench-server
LOADGEN=$BUILD/bench/webhook/webhook-loadgen
FAKE=$BUILD/test/fakes/apiserver/fake-apiserver
work=$(mktemp -d); pids=(); cg=
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  [ -n "$cg" ] && rmdir "$cg" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cd "$work"
openssl ecparam -name prime256v1 -genkey -noout -out tls.key 2>/dev/null
openssl req -x509 -new -key tls.key -subj /CN=127.0.0.1 -days 2 -out tls.crt 2>/dev/null
python3 - "$PEERS/review-pod-create.json" <<'PY'
import json, sys
review = json.load(open(sys.argv[1]))
pod = review["request"]["object"]
base = pod["spec"]["containers"][0]
containers = []
while True:
    c = json.loads(json.dumps(base))
    c["name"] = f"c{len(containers)}"
    c["env"] = [{"name": f"VAR_{len(containers)}_{j}", "value": f"value-{j:06d}"} for j in range(400)]
    containers.append(c)
    pod["spec"]["containers"] = containers
    text = json.dumps(review, separators=(",", ":"))
    if len(text) > 3_950_000:
        break
open("review-4mib.json", "w").write(text)
PY
up() { for _ in $(seq 100); do curl -sk -o /dev/null "https://127.0.0.1:$1/healthz" && return 0; sleep 0.1; done; return 1; }
rss() { awk '/^RssAnon/{printf "RssAnon %.1f MiB", $2/1024}' "/proc/$1/status"; }

echo "== 1. 8 concurrent 4 MiB reviews ($(stat -c %s review-4mib.json) bytes), 256 MiB memory cgroup, 55 MiB ballast"
memory_run() {  # LABEL BUDGET_MIB
  cg=/sys/fs/cgroup/memory/kruise-webhook-bench-$$
  mkdir "$cg"; echo $((256 << 20)) >"$cg/memory.limit_in_bytes"
  sh -c "echo \$\$ > $cg/cgroup.procs; exec env MALLOC_ARENA_MAX=2 $SERVER --cert tls.crt --key tls.key \
    --addr 127.0.0.1:16612 --decode-budget-mib $2 --ballast-mib 55" >srv.out 2>srv.log &
  local sp=$!
  up 16612
  echo "-- $1"
  for round in 1 2; do
    printf '   round %s: ' "$round"
    python3 "$HERE/limits.py" post https://127.0.0.1:16612/kruise/mutate-pod review-4mib.json 8 | tail -1
  done
  if kill -0 "$sp" 2>/dev/null; then
    echo "   alive: peak RSS (VmHWM) $(awk '/VmHWM/{printf "%.0f", $2/1024}' /proc/$sp/status) MiB," \
      "cgroup peak $(($(cat "$cg/memory.max_usage_in_bytes") >> 20)) MiB, $(rss $sp) after," \
      "/healthz $(curl -sk -o /dev/null -w '%{http_code}' https://127.0.0.1:16612/healthz)"
    kill "$sp"; wait "$sp" 2>/dev/null || true
  else
    wait "$sp" 2>/dev/null || echo "   server died (exit $?), cgroup peak $(($(cat "$cg/memory.max_usage_in_bytes") >> 20)) MiB, $(grep oom_kill "$cg/memory.oom_control" | tail -1)"
  fi
  rmdir "$cg"; cg=
}
memory_run "decode budget off (the server before issue 33 had none)" 1000000
memory_run "default decode budget (112 MiB at 14x the body)" 112

echo "== 2. 5,000 idle TLS connections"
idle_run() {  # MAX_SESSIONS
  MALLOC_ARENA_MAX=2 "$SERVER" --cert tls.crt --key tls.key --addr 127.0.0.1:16613 \
    --max-sessions "$1" --idle-timeout-seconds 300 >srv.out 2>srv.log &
  local sp=$!
  up 16613
  local before; before=$(rss $sp)
  python3 "$HERE/limits.py" idle 127.0.0.1 16613 5000 4 >idle.out &
  local cp=$!
  until grep -q opened idle.out 2>/dev/null; do sleep 0.2; done
  sleep 1
  echo "-- max_sessions $1: $(head -1 idle.out); server $before before, $(rss $sp) while held"
  wait "$cp"
  kill "$sp"; wait "$sp" 2>/dev/null || true
}
idle_run 512
idle_run 5000

echo "== 3. API server answering pod GETs after 20 s"
"$FAKE" --addr 127.0.0.1:0 --port-file api.port --pod-get-latency 20s >api.log 2>&1 &
pids+=($!)
until [ -s api.port ]; do sleep 0.1; done
MALLOC_ARENA_MAX=2 "$SERVER" --cert tls.crt --key tls.key --addr 127.0.0.1:16614 \
  --apiserver "http://127.0.0.1:$(cat api.port)" >srv.out 2>srv.log &
sp=$!; pids+=($sp)
up 16614
"$LOADGEN" --url https://127.0.0.1:16614/mutate-apps-kruise-io-v1alpha1-containerrecreaterequest \
  --body "$HERE/review-crr-create.json" --rate 8 --duration 16 --warmup 0 --connections 8 >crr.out 2>&1 &
lp=$!
sleep 3
echo "-- while 8 CRR reviews are in flight (4 on handler threads waiting on the API server, 4 queued):"
printf '   GET /healthz:            '
"$LOADGEN" --url https://127.0.0.1:16614/healthz --method GET --rate 100 --duration 5 --warmup 0 | head -1
printf '   POST /kruise/mutate-pod: '
"$LOADGEN" --url https://127.0.0.1:16614/kruise/mutate-pod --body "$PEERS/review-pod-create.json" \
  --rate 100 --duration 5 --warmup 0 | head -1
wait "$lp" || true
printf '   CRR reviews (closed by the 8 connections; each ends at the 2 s deadline): '
head -1 crr.out
