#!/usr/bin/env bash
# Admission-webhook benchmark: our webhook-bench-server vs the Go peer (net/http), same load script,
# same run. Servers are pinned to CPU 0; /work/shared/peers/bench-webhook pins the load to CPU 1.
#   bench/webhook/run.sh [BUILD_DIR]      (default build dir: build)
# Needs: openssl, hey, nghttp2-client (h2load). The Go peer is built with /work/shared/peers/build.sh
# when kube-local's cached Go tree exists; otherwise it is skipped with a message.
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
PEERS=${PEERS_DIR:-/work/shared/peers}
REVIEW=${REVIEW:-$PEERS/review-pod-create.json}
OURS=${OURS_BIN:-$BUILD/bench/webhook/webhook-bench-server}
[ -x "$OURS" ] || { ninja -C "$BUILD" webhook-bench-server; }
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

wait_port() {
  for _ in $(seq 100); do curl -sk -o /dev/null "https://$1/healthz" -X GET && return 0; sleep 0.1; done
  echo "server on $1 did not come up" >&2; return 1
}

echo "== ours: webhook-bench-server (C++, Boost.Beast + OpenSSL, simdjson decode), CPU 0"
taskset -c 0 "$OURS" --cert "$work/tls.crt" --key "$work/tls.key" --addr 127.0.0.1:16511 \
  2>"$work/ours.log" &
pids+=($!); ours=$!
wait_port 127.0.0.1:16511
for path in mutate-pod validate-pod; do
  echo "-- /$path (the Go peer's work)"
  "$PEERS/bench-webhook" "https://127.0.0.1:16511/$path" "$REVIEW" "$ours"
done
echo "-- /mutate-pod as kruise-manager serves it (readiness-gate chain; this pod needs no patch)"
"$PEERS/bench-webhook" "https://127.0.0.1:16511/kruise/mutate-pod" "$REVIEW" "$ours"
CRR=$ROOT/bench/webhook/review-crr-create.json
for path in mutate-apps-kruise-io-v1alpha1-containerrecreaterequest \
  validate-apps-kruise-io-v1alpha1-containerrecreaterequest; do
  echo "-- /$path (ContainerRecreateRequest CREATE; the pod comes from bench/webhook/running-pod.json)"
  "$PEERS/bench-webhook" "https://127.0.0.1:16511/$path" "$CRR" "$ours"
done

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
  wait_port 127.0.0.1:16510
  for path in mutate-pod validate-pod; do
    echo "-- /$path"
    "$PEERS/bench-webhook" "https://127.0.0.1:16510/$path" "$REVIEW" "$gopid"
  done
fi
