#!/usr/bin/env bash
# Admission-webhook benchmark: our webhook-bench-server vs the Go peer (net/http), same load, same
# run. Servers are pinned to CPU 0, load generators to CPU 1. See bench/webhook/README.md.
#   bench/webhook/run.sh [BUILD_DIR]      (default build dir: build; Release recommended)
# Two kinds of load per path:
#   - ../shared/peers/bench-webhook (the peers' script): hey at 1,000 req/s over 10 connections
#     (closed loop; its workers fire together, so requests arrive in bursts of 10), then h2load at
#     saturation;
#   - webhook-loadgen: open loop, 1,000 req/s with Poisson arrivals, latency from each request's
#     scheduled send time; plus the same load on GET /healthz (no admission work: the floor that
#     TLS, HTTP, the kernel and this machine set for any server).
# At the end our server prints its own latency histogram (review read -> reply ready) per path.
# Env: OPEN_LOOP_SECONDS (20), OPEN_LOOP_RATE (1000).
# Needs: openssl, hey, nghttp2-client (h2load). The Go peer is built with ../shared/peers/build.sh
# when kube-local's cached Go tree exists; otherwise it is skipped with a message.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
PEERS=${PEERS_DIR:-$ROOT/../shared/peers}
REVIEW=${REVIEW:-$PEERS/review-pod-create.json}
OURS=${OURS_BIN:-$BUILD/bench/webhook/webhook-bench-server}
LOADGEN=$BUILD/bench/webhook/webhook-loadgen
PROBE=$BUILD/bench/webhook/stall-probe
# Benchmarks are not in the default build: build (or bring up to date) what this one runs.
[ -n "${OURS_BIN:-}" ] || ninja -C "$BUILD" webhook-bench-server >&2
ninja -C "$BUILD" webhook-loadgen stall-probe >&2
SECS=${OPEN_LOOP_SECONDS:-20} RATE=${OPEN_LOOP_RATE:-1000}
work=$(mktemp -d); pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

# One CA + a server cert for 127.0.0.1 (ECDSA P-256, as common/tls generates).
openssl ecparam -name prime256v1 -genkey -noout -out "$work/ca.key" 2>/dev/null
openssl req -x509 -new -key "$work/ca.key" -subj /CN=webhook-cert-ca -days 2 -out "$work/ca.crt"
openssl ecparam -name prime256v1 -genkey -noout -out "$work/tls.key" 2>/dev/null
openssl req -new -key "$work/tls.key" -subj /CN=127.0.0.1 -out "$work/tls.csr"
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > "$work/ext"
openssl x509 -req -in "$work/tls.csr" -CA "$work/ca.crt" -CAkey "$work/ca.key" -CAcreateserial \
  -days 2 -extfile "$work/ext" -out "$work/tls.crt" 2>/dev/null

# wait_port HOST:PORT PID: the server PID answers there (not a leftover from another run).
wait_port() {
  for _ in $(seq 100); do
    kill -0 "$2" 2>/dev/null || { echo "server for $1 exited (port in use?)" >&2; return 1; }
    curl -sk -o /dev/null "https://$1/healthz" -X GET && return 0
    sleep 0.1
  done
  echo "server on $1 did not come up" >&2; return 1
}

# open_loop URL [BODY [SERVER_PID]]: webhook-loadgen's one-line summary (GET without a body).
# With our server's PID, also its own latency over the same window (SIGUSR1 before and after).
open_loop() {
  local args=(--url "$1" --rate "$RATE" --duration "$SECS") pid=${3:-} lines=0
  if [ -n "${2:-}" ]; then args+=(--body "$2"); else args+=(--method GET); fi
  if [ -n "$pid" ]; then  # start the window
    lines=$(wc -l <"$work/ours.out")
    kill -USR1 "$pid"
    wait_lines "$work/ours.out" $((lines + 1))
  fi
  printf 'open loop %s req/s (webhook-loadgen, Poisson, from scheduled send): ' "$RATE"
  taskset -c 1 "$LOADGEN" "${args[@]}" | head -1 | sed 's/^[0-9]* requests (\([^)]*\)), /\1: /'
  if [ -n "$pid" ]; then
    lines=$(wc -l <"$work/ours.out")
    kill -USR1 "$pid"
    wait_lines "$work/ours.out" $((lines + 2))
    tail -n +$((lines + 2)) "$work/ours.out" | sed 's/^server-side latency [^ ]* /  server side, same window /'
  fi
}
# wait_lines FILE N: until FILE has N lines (the server flushes each report whole), at most 5 s.
wait_lines() {
  for _ in $(seq 50); do [ "$(wc -l <"$1")" -ge "$2" ] && return 0; sleep 0.1; done
}

echo "== this machine: time a pinned busy loop does not run (the floor under every latency below)"
taskset -c 0 "$PROBE" 10 & taskset -c 1 "$PROBE" 10; wait $!

echo "== ours: webhook-bench-server (C++, Boost.Beast + OpenSSL, simdjson decode), CPU 0"
taskset -c 0 "$OURS" --cert "$work/tls.crt" --key "$work/tls.key" --addr 127.0.0.1:16511 \
  2>"$work/ours.log" >"$work/ours.out" &
pids+=($!); ours=$!
wait_port 127.0.0.1:16511 "$ours"
echo "-- GET /healthz: no admission work, the floor of TLS + HTTP + this machine"
open_loop https://127.0.0.1:16511/healthz "" ""
for path in mutate-pod validate-pod; do
  echo "-- /$path (the Go peer's work)"
  "$PEERS/bench-webhook" "https://127.0.0.1:16511/$path" "$REVIEW" "$ours"
  open_loop "https://127.0.0.1:16511/$path" "$REVIEW" "$ours"
done
echo "-- /mutate-pod as kruise-manager serves it (readiness-gate chain; this pod needs no patch)"
"$PEERS/bench-webhook" "https://127.0.0.1:16511/kruise/mutate-pod" "$REVIEW" "$ours"
open_loop https://127.0.0.1:16511/kruise/mutate-pod "$REVIEW" "$ours"
CRR=$ROOT/bench/webhook/review-crr-create.json
for path in mutate-apps-kruise-io-v1alpha1-containerrecreaterequest \
  validate-apps-kruise-io-v1alpha1-containerrecreaterequest; do
  echo "-- /$path (ContainerRecreateRequest CREATE; the pod comes from bench/webhook/running-pod.json)"
  "$PEERS/bench-webhook" "https://127.0.0.1:16511/$path" "$CRR" "$ours"
  open_loop "https://127.0.0.1:16511/$path" "$CRR" "$ours"
done
kill "$ours"; wait "$ours" 2>/dev/null || true
echo "-- our server's own latency over the whole run, saturation included (review read -> reply ready):"
sed -n '/^-- whole run/,$ p' "$work/ours.out" | sed '1d; s/^server-side latency /   /'

peer=
if [ -x "${PEERS_BIN:-/var/cache/kube-local/peers-bin}/webhook" ]; then
  peer=${PEERS_BIN:-/var/cache/kube-local/peers-bin}/webhook
elif out=$("$PEERS/build.sh" 2>"$work/peer-build.log"); then
  peer=$out/webhook
else
  echo "== Go peer skipped: $PEERS/build.sh failed ($(tail -1 "$work/peer-build.log"))"
fi
if [ -n "$peer" ]; then
  echo "== Go peer: net/http webhook, GOMAXPROCS=1, CPU 0"
  GOMAXPROCS=1 taskset -c 0 "$peer" --cert "$work/tls.crt" --key "$work/tls.key" \
    --addr 127.0.0.1:16510 2>"$work/peer.log" &
  pids+=($!); gopid=$!
  wait_port 127.0.0.1:16510 "$gopid"
  for path in mutate-pod validate-pod; do
    echo "-- /$path"
    "$PEERS/bench-webhook" "https://127.0.0.1:16510/$path" "$REVIEW" "$gopid"
    open_loop "https://127.0.0.1:16510/$path" "$REVIEW"
  done
fi
