#!/usr/bin/env bash
# Keeps the webhook benchmark tools working (ctest: webhook_bench_smoke, label integration):
# webhook-bench-server answers a short open-loop load from webhook-loadgen on pod paths, a CRR path
# and /healthz with 200s; a wrong method is counted as non-200 and fails the run (exit 1); a bad URL
# exits 2; the server prints its own latency at exit. Figures are not asserted: speed is measured by
# bench/webhook/run.sh.
#   smoke_test.sh SERVER_BIN LOADGEN_BIN SOURCE_DIR
set -euo pipefail
server=$1 loadgen=$2 src=$3
work=$(mktemp -d) pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
  -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 \
  -keyout "$work/tls.key" -out "$work/tls.crt" 2>/dev/null
"$server" --cert "$work/tls.crt" --key "$work/tls.key" --addr 127.0.0.1:0 --port-file "$work/port" \
  --threads 2 >"$work/server.out" 2>"$work/server.log" &
pid=$!
for _ in $(seq 200); do
  [ -s "$work/port" ] && break
  kill -0 "$pid" 2>/dev/null || fail "server exited: $(cat "$work/server.log")"
  sleep 0.05
done
[ -s "$work/port" ] || fail "server did not write its port"
base=https://127.0.0.1:$(cat "$work/port")

# A pod CREATE review around the benchmark's running pod.
{
  printf '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"smoke",'
  printf '"kind":{"group":"","version":"v1","kind":"Pod"},'
  printf '"resource":{"group":"","version":"v1","resource":"pods"},"namespace":"default",'
  printf '"operation":"CREATE","object":'
  cat "$src/running-pod.json"
  printf '}}'
} >"$work/review-pod.json"

run() { "$loadgen" --rate 200 --duration 1.5 --warmup 0.5 --connections 4 --cacert "$work/tls.crt" "$@"; }
check() {  # check NAME LOADGEN_ARGS...: every request answered 200
  local name=$1 out rc=0
  shift
  out=$(run "$@") || rc=$?
  [ $rc -eq 0 ] || fail "$name: loadgen exit $rc: $out"
  grep -Eq ' 0 non-200, 0 errors, 0 unfinished; ' <<<"$out" || fail "$name: $out"
  echo "ok $name: $(head -1 <<<"$out")"
}
check kruise-mutate-pod --url "$base/kruise/mutate-pod" --body "$work/review-pod.json"
check peer-mutate-pod --url "$base/mutate-pod" --body "$work/review-pod.json"
check crr-mutate --url "$base/mutate-apps-kruise-io-v1alpha1-containerrecreaterequest" \
  --body "$src/review-crr-create.json"
check healthz --url "$base/healthz" --method GET --arrivals uniform

rc=0; out=$(run --url "$base/kruise/mutate-pod" --method GET) || rc=$?
[ $rc -eq 1 ] || fail "GET on an admission path: want exit 1, got $rc: $out"
grep -Eq ' 0 ok, [1-9][0-9]* non-200' <<<"$out" || fail "GET on an admission path: $out"
rc=0; "$loadgen" --url http://127.0.0.1:1/x --method GET >/dev/null 2>&1 || rc=$?
[ $rc -eq 2 ] || fail "http:// URL: want exit 2, got $rc"

kill "$pid"; wait "$pid" || true; pid=
grep -q 'server-side latency /kruise/mutate-pod' "$work/server.out" ||
  fail "no server-side latency at exit: $(cat "$work/server.out")"
echo PASS
