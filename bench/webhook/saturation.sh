#!/usr/bin/env bash
# Saturation throughput of our webhook server against the Go peer, interleaved rounds in one run
# (issue 33: ours must stay >= 2.6x the peer with handlers on their own threads).
#   bench/webhook/saturation.sh [BUILD_DIR]   Env: ROUNDS (5), REQUESTS (20000 per round),
#   BASELINE_BIN (another webhook-bench-server, e.g. built from the commit before, measured in
#   the same rounds on CPU 0 too)
# Both servers on CPU 0 (Go with GOMAXPROCS=1), h2load on CPU 1, HTTP/1.1, 16 connections, the
# peers' /mutate-pod work on the peers' 9.5 KB review. Prints each round and the medians.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
PEERS=${PEERS_DIR:-$ROOT/../shared/peers}
REVIEW=$PEERS/review-pod-create.json
ROUNDS=${ROUNDS:-5} REQUESTS=${REQUESTS:-20000}
ninja -C "$BUILD" webhook-bench-server >&2
peer=${PEERS_BIN:-/var/cache/kube-local/peers-bin}/webhook
[ -x "$peer" ] || peer=$("$PEERS/build.sh")/webhook
work=$(mktemp -d); pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
openssl ecparam -name prime256v1 -genkey -noout -out "$work/tls.key" 2>/dev/null
openssl req -x509 -new -key "$work/tls.key" -subj /CN=127.0.0.1 -days 2 -out "$work/tls.crt" 2>/dev/null
MALLOC_ARENA_MAX=2 taskset -c 0 "$BUILD/bench/webhook/webhook-bench-server" --cert "$work/tls.crt" \
  --key "$work/tls.key" --addr 127.0.0.1:16521 >"$work/ours.out" 2>"$work/ours.log" &
pids+=($!)
GOMAXPROCS=1 taskset -c 0 "$peer" --cert "$work/tls.crt" --key "$work/tls.key" \
  --addr 127.0.0.1:16520 2>"$work/peer.log" &
pids+=($!)
if [ -n "${BASELINE_BIN:-}" ]; then
  MALLOC_ARENA_MAX=2 taskset -c 0 "$BASELINE_BIN" --cert "$work/tls.crt" --key "$work/tls.key" \
    --addr 127.0.0.1:16522 >/dev/null 2>&1 &
  pids+=($!)
fi
for port in 16521 16520 ${BASELINE_BIN:+16522}; do
  for _ in $(seq 100); do curl -sk -o /dev/null "https://127.0.0.1:$port/healthz" && break; sleep 0.1; done
done
sat() {  # URL -> req/s
  taskset -c 1 h2load --h1 -n "$REQUESTS" -c 16 -t 1 -d "$REVIEW" -H 'Content-Type: application/json' "$1" \
    | awk '/^finished/ {print $4} /^requests:/ && $10 != 0 {print "FAILED " $10 > "/dev/stderr"}'
}
ours=() go=() base=()
for r in $(seq "$ROUNDS"); do
  o=$(sat https://127.0.0.1:16521/mutate-pod); g=$(sat https://127.0.0.1:16520/mutate-pod)
  ours+=("$o"); go+=("$g")
  b=; [ -n "${BASELINE_BIN:-}" ] && { b=$(sat https://127.0.0.1:16522/mutate-pod); base+=("$b"); }
  echo "round $r: ours $o req/s, Go $g req/s, ratio $(echo "$o $g" | awk '{printf "%.2f", $1/$2}')${b:+, baseline $b req/s}"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {printf "%.0f (%.0f-%.0f)", a[int((NR+1)/2)], a[1], a[NR]}'; }
ratios=(); for i in "${!ours[@]}"; do ratios+=("$(echo "${ours[$i]} ${go[$i]}" | awk '{print $1/$2}')"); done
echo "median: ours $(median "${ours[@]}") req/s, Go $(median "${go[@]}") req/s, ratio $(printf '%s\n' "${ratios[@]}" | sort -g | awk '{a[NR]=$1} END {printf "%.2f (%.2f-%.2f)", a[int((NR+1)/2)], a[1], a[NR]}')"
[ -n "${BASELINE_BIN:-}" ] && echo "baseline: $(median "${base[@]}") req/s"
true
