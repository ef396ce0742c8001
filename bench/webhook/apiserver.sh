#!/usr/bin/env bash
# Admission as a user sees it: pod CREATEs through a real kube-apiserver (../shared/kube-local) at
# 100/s (hey, 5 connections), as server-side dry runs (dryRun=All: authentication, admission with
# the webhook call, validation; no etcd write, so the store does not grow during the run and the
# figures isolate what admission costs), in one run: without a webhook, with our webhook-bench-server and
# with the Go peer, each registered in turn as a MutatingWebhookConfiguration by URL for one
# namespace (the peers README's "pod CREATE through kube-apiserver" figure). The webhook work is the
# Go peer's /mutate-pod (sidecar + label). Webhook servers run on CPU 0; the API server is not pinned.
#
#   . /tmp/kube-local/env && bench/webhook/apiserver.sh [BUILD_DIR]
# Env: KRUISE_KUBE_LOCAL_ENV (the kube-local env file, default /tmp/kube-local/env), SECONDS_PER (5),
# ROUNDS (4): each round runs every kind for SECONDS_PER, interleaved.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
PEERS=${PEERS_DIR:-$ROOT/../shared/peers}
OURS=$BUILD/bench/webhook/webhook-bench-server
ninja -C "$BUILD" webhook-bench-server >&2  # not in the default build
ENV_FILE=${KRUISE_KUBE_LOCAL_ENV:-/tmp/kube-local/env}
[ -r "$ENV_FILE" ] || { echo "no kube-local env file at $ENV_FILE: run ../shared/kube-local/up" >&2; exit 2; }
# shellcheck disable=SC1090
. "$ENV_FILE"
kubectl get --raw /readyz >/dev/null || { echo "kube-local's API server is not ready" >&2; exit 2; }
PER=${SECONDS_PER:-5} ROUNDS=${ROUNDS:-4}
NS=bench-webhook-$$
work=$(mktemp -d) pids=()
cleanup() {
  kubectl delete mutatingwebhookconfiguration "$NS" --ignore-not-found >/dev/null 2>&1 || true
  kubectl delete namespace "$NS" --wait=false --ignore-not-found >/dev/null 2>&1 || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# Serving certificate for 127.0.0.1, signed by the cluster CA (the API server trusts it via caBundle).
openssl ecparam -name prime256v1 -genkey -noout -out "$work/tls.key" 2>/dev/null
openssl req -new -key "$work/tls.key" -subj /CN=127.0.0.1 -out "$work/tls.csr"
printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$work/ext"
openssl x509 -req -in "$work/tls.csr" -CA "$KUBE_LOCAL_CA" -CAkey "$KUBE_LOCAL_CA_KEY" \
  -CAcreateserial -CAserial "$work/ca.srl" -days 1 -extfile "$work/ext" -out "$work/tls.crt" 2>/dev/null

kubectl create namespace "$NS" >/dev/null
kubectl label namespace "$NS" bench-webhook=on >/dev/null
# The peers' pod (8.8 KiB with managedFields, which the API server replaces), never scheduled.
python3 - "$PEERS/review-pod-create.json" "$NS" >"$work/pod.json" <<'EOF'
import json, sys
pod = json.load(open(sys.argv[1]))["request"]["object"]
meta = pod["metadata"]
for k in ("name", "uid", "resourceVersion", "creationTimestamp", "ownerReferences"):
    meta.pop(k, None)
meta["generateName"] = "bench-"
meta["namespace"] = sys.argv[2]
pod["spec"]["schedulerName"] = "no-such-scheduler"
pod["spec"].pop("nodeName", None)
pod.pop("status", None)
print(json.dumps(pod))
EOF

# register URL: the webhook for pods in $NS only, failurePolicy Fail (a broken webhook shows up).
register() {
  local ca
  ca=$(base64 -w0 <"$KUBE_LOCAL_CA")
  kubectl apply -f - >/dev/null <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: $NS}
webhooks:
- name: bench.kruise.io
  clientConfig: {url: "$1", caBundle: "$ca"}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  namespaceSelector: {matchLabels: {bench-webhook: "on"}}
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: 10
EOF
  # Until the API server applies it: a dry-run create comes back with the webhook's label.
  for _ in $(seq 100); do
    kubectl create --dry-run=server -f "$work/pod.json" -o jsonpath='{.metadata.labels.injected}' \
      2>/dev/null | grep -q true && return 0
    sleep 0.1
  done
  echo "the webhook at $1 was not called within 10 s" >&2
  return 1
}

# load KIND: PER seconds of pod CREATEs; hey's per-request CSV is kept per kind across rounds.
load() {
  hey -z "${PER}s" -c 5 -q 20 -m POST -T application/json -H "Authorization: Bearer $KUBE_LOCAL_TOKEN" \
    -o csv -D "$work/pod.json" "$KUBE_LOCAL_APISERVER/api/v1/namespaces/$NS/pods?dryRun=All" |
    tail -n +2 >>"$work/$1.csv"
}

# summary KIND LABEL: requests, status codes and p50/p90/p99 over every round of KIND.
summary() {
  printf '%-30s' "$2:"
  awk -F, '{print $1 * 1000, $7}' "$work/$1.csv" | sort -n | awk '
    {ms[NR] = $1; codes[$2]++}
    END {
      line = ""
      for (c in codes) line = line " [" c "]" codes[c]
      printf "%d requests, p50 %.1f ms, p90 %.1f ms, p99 %.1f ms, replies%s\n", NR,
        ms[int(NR * 0.5) + 1], ms[int(NR * 0.9) + 1], ms[int(NR * 0.99) + 1], line
    }'
}

# unregister: remove the webhook and wait until a dry-run create is no longer mutated.
unregister() {
  kubectl delete mutatingwebhookconfiguration "$NS" --ignore-not-found >/dev/null
  for _ in $(seq 100); do
    [ -z "$(kubectl create --dry-run=server -f "$work/pod.json" \
      -o jsonpath='{.metadata.labels.injected}' 2>/dev/null)" ] && return 0
    sleep 0.1
  done
}

taskset -c 0 "$OURS" --cert "$work/tls.crt" --key "$work/tls.key" --addr 127.0.0.1:16511 \
  2>"$work/ours.log" >"$work/ours.out" &
pids+=($!)
kinds=(none ours)
peer=${PEERS_BIN:-/var/cache/kube-local/peers-bin}/webhook
if [ -x "$peer" ]; then
  GOMAXPROCS=1 taskset -c 0 "$peer" --cert "$work/tls.crt" --key "$work/tls.key" \
    --addr 127.0.0.1:16510 2>"$work/peer.log" &
  pids+=($!)
  kinds+=(go)
else
  echo "Go peer skipped: no $peer (build it with $PEERS/build.sh)"
fi
echo "== pod CREATE through kube-apiserver, 100/s (hey, 5 conns), $ROUNDS rounds of ${PER} s per kind,"
echo "   kinds interleaved so that the API server's drift (more pods stored) hits each alike"
for round in $(seq "$ROUNDS"); do
  for kind in "${kinds[@]}"; do
    case $kind in
      none) unregister ;;
      ours) register https://127.0.0.1:16511/mutate-pod ;;
      go) register https://127.0.0.1:16510/mutate-pod ;;
    esac
    load "$kind"
  done
  printf '.'
done
echo
summary none "no webhook"
summary ours "ours (webhook-bench-server)"
[ -x "$peer" ] && summary go "Go peer (net/http)"
