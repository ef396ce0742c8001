#!/usr/bin/env bash
# What SidecarSet injection costs a pod admission (issue 15: "a pod CREATE matched against 100
# SidecarSets stays within 2x the webhook's current cost"). One webhook-bench-server (CPU 0), the
# peers' pod review, interleaved rounds of the same load on
#   /kruise/mutate-pod             kruise-manager's pod webhook today (readiness-gate chain), and
#   /kruise/mutate-pod-sidecarsets the same chain plus SidecarSet injection over 100 cached sets,
#                                  one of which injects into this pod (server_main.cc says how);
# per round and path: saturation with h2load (HTTP/1.1, 16 connections, CPU 1) and an open-loop
# 1,000 req/s run (webhook-loadgen, Poisson, latency from scheduled send) with the server's own
# mean time per review (review read -> reply ready; wall time, so it includes waiting for the one
# CPU the server's threads share) and the server process's CPU time per review (TLS, HTTP and
# handlers: the cost of an admission) over the same window.
#   bench/webhook/sidecarset.sh [BUILD_DIR]   (Release recommended; env ROUNDS=5, SECS=10)
# Prints every round, then medians (min-max) and the ratios sets/base.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
PEERS=${PEERS_DIR:-$ROOT/../shared/peers}
REVIEW=${REVIEW:-$PEERS/review-pod-create.json}
ROUNDS=${ROUNDS:-5} SECS=${SECS:-10}
ninja -C "$BUILD" webhook-bench-server webhook-loadgen >&2
OURS=$BUILD/bench/webhook/webhook-bench-server
LOADGEN=$BUILD/bench/webhook/webhook-loadgen
command -v h2load >/dev/null || { echo "needs h2load (Debian package nghttp2-client)" >&2; exit 1; }
work=$(mktemp -d); pid=
cleanup() { [ -n "$pid" ] && { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }; rm -rf "$work"; }
trap cleanup EXIT

openssl ecparam -name prime256v1 -genkey -noout -out "$work/tls.key" 2>/dev/null
openssl req -x509 -new -key "$work/tls.key" -subj /CN=127.0.0.1 -days 2 \
  -addext subjectAltName=IP:127.0.0.1 -out "$work/tls.crt" 2>/dev/null
taskset -c 0 "$OURS" --cert "$work/tls.crt" --key "$work/tls.key" --addr 127.0.0.1:0 \
  --port-file "$work/port" >"$work/out" 2>"$work/log" &
pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
[ -s "$work/port" ] || { echo "server did not start: $(tail -3 "$work/log")" >&2; exit 1; }
BASE=https://127.0.0.1:$(cat "$work/port")
# The review must be injected on the sets path (and only there): check once.
curl -sk -H 'Content-Type: application/json' --data-binary @"$REVIEW" "$BASE/kruise/mutate-pod-sidecarsets" |
  grep -q '"patch"' || { echo "no patch from /kruise/mutate-pod-sidecarsets" >&2; exit 1; }

# report: the server's latency lines (mean µs per review per path) since the previous report.
report() {
  local n
  n=$(wc -l <"$work/out")
  kill -USR1 "$pid"
  # "-- window" and its lines reach the file in one flush.
  for _ in $(seq 50); do [ "$(wc -l <"$work/out")" -gt "$n" ] && break; sleep 0.1; done
  tail -n +$((n + 1)) "$work/out"
}
printf '%-10s %5s %12s %9s %9s %12s %12s\n' path round 'sat req/s' 'p50 ms' 'p99 ms' 'server µs' 'cpu µs'
for r in $(seq "$ROUNDS"); do
  for path in mutate-pod mutate-pod-sidecarsets; do
    url=$BASE/kruise/$path
    sat=$(taskset -c 1 h2load --h1 -n 20000 -c 16 -t 1 -d "$REVIEW" -H 'Content-Type: application/json' \
      "$url" | awk '/^finished/ {print $4}')
    report >/dev/null
    ol=$(taskset -c 1 "$LOADGEN" --url "$url" --body "$REVIEW" --rate 1000 --duration "$SECS" \
      --warmup 1 | head -1)
    window=$(report)
    mean=$(grep -F "/kruise/$path " <<<"$window" | sed -n 's/.*mean \([0-9.]*\) us.*/\1/p')
    cpu=$(sed -n 's/^server cpu \([0-9.]*\) us per review.*/\1/p' <<<"$window")
    p50=$(sed -n 's/.*p50[= ]\([0-9.]*\).*/\1/p' <<<"$ol")
    p99=$(sed -n 's/.*p99[= ]\([0-9.]*\).*/\1/p' <<<"$ol")
    name=base; [ "$path" = mutate-pod ] || name=100-sets
    printf '%-10s %5s %12s %9s %9s %12s %12s\n' "$name" "$r" "$sat" "$p50" "$p99" "$mean" "$cpu" |
      tee -a "$work/rows"
  done
done
echo "== medians (min-max) over $ROUNDS interleaved rounds; ratio = 100-sets / base"
python3 - "$work/rows" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
cols = {"saturation req/s": 2, "open-loop p50 ms": 3, "open-loop p99 ms": 4, "server µs/review": 5,
        "server cpu µs/review": 6}
for label, i in cols.items():
    vals = {k: [float(r[i]) for r in rows if r[0] == k and len(r) > i and r[i] not in ("", "-")]
            for k in ("base", "100-sets")}
    if not all(vals.values()):
        print(f"{label:18} (no data)"); continue
    med = {k: statistics.median(v) for k, v in vals.items()}
    print(f"{label:18} base {med['base']:.3f} ({min(vals['base']):.3f}-{max(vals['base']):.3f})  "
          f"100-sets {med['100-sets']:.3f} ({min(vals['100-sets']):.3f}-{max(vals['100-sets']):.3f})  "
          f"ratio {med['100-sets'] / med['base']:.2f}")
PY
