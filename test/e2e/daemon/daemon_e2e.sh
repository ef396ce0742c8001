#!/usr/bin/env bash
# kruise-daemon end to end on ../shared/kube-local (real kube-apiserver, kubelet, containerd and
# registries), rolled out as a DaemonSet from deploy/overlays/kube-local-daemon:
#
#   1. image: scripts/build-image the given kruise-daemon binary, push it to kube-local's plain
#      registry, render the overlay pinned to the pushed digest, apply it, wait for the rollout;
#   2. NodeImage for the node: a tag from the plain registry (through a rate-limited proxy, so the
#      pull takes seconds and its progress can be watched), one from the TLS + basic-auth registry
#      (pull secret in kruise-daemon-config) -> Succeeded with imageID, progress rising to 100;
#      a missing tag -> Failed after backoffLimit + 1 attempts with the runtime's message;
#   3. the daemon pod is deleted while a tag is pulling: the DaemonSet's new pod completes the tag
#      and no tag stays Pulling;
#   4. the daemon's RssAnon / VmRSS in the cluster, from /proc/<pid>/status of the pod's process;
#   5. ContainerRecreateRequests (when the daemon has a CRR controller): a running pod's container
#      is restarted by the kubelet (restartCount + 1) and the CRR ends Succeeded; two containers
#      with orderedRecreate; a preStop exec that leaves a marker file;
#   6. the daemon started before its containerd (a private one, started later) stays up, reports
#      the missing runtime on /healthz and recovers when containerd appears.
#
# Everything it creates is deleted again (NodeImage, secret, test namespace, the DaemonSet and its
# RBAC; CRDs and the two kruise namespaces are left, as test/deploy/validate.sh leaves them), so it
# can run again at once. Every wait polls a condition with a deadline.
#
# Usage: daemon_e2e.sh KRUISE_DAEMON_BINARY
# Exit 0 when everything passed, or (SKIP message) when kube-local is absent and
# KRUISE_E2E_REQUIRED is not 1. Environment: KRUISE_KUBE_LOCAL_ENV (default
# ${KUBE_LOCAL_STATE:-/tmp/kube-local}/env), KRUISE_E2E_DAEMON_PROXY_PORT (default 16431),
# KRUISE_E2E_DAEMON_LOCAL_PORT (health port of the locally started daemon, default 16432),
# KRUISE_E2E_DAEMON_SKIP_CRR=1 (skip part 5).
set -uo pipefail

HERE=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
BINARY=${1:-}
T0=$SECONDS
# shellcheck source=../lib.sh
. "$ROOT/test/e2e/lib.sh"


[ -n "$BINARY" ] && [ -x "$BINARY" ] || die "usage: $0 KRUISE_DAEMON_BINARY (got '${BINARY}')"
BINARY=$(readlink -f "$BINARY")

kube_local_preflight jq curl umoci skopeo ctr python3

NODE=$KUBE_LOCAL_NODE_NAME
REG=$KUBE_LOCAL_REGISTRY
REG_TLS=$KUBE_LOCAL_REGISTRY_TLS
REG_TLS_CREDS="$KUBE_LOCAL_REGISTRY_TLS_USER:$KUBE_LOCAL_REGISTRY_TLS_PASSWORD"
PROXY_PORT=${KRUISE_E2E_DAEMON_PROXY_PORT:-16431}
PROXY=127.0.0.1:$PROXY_PORT
LOCAL_PORT=${KRUISE_E2E_DAEMON_LOCAL_PORT:-16432}
CTR=($KUBE_LOCAL_CTR)
KNS=kruise-system
NS=kruise-e2e-daemon
SECRET=kruise-e2e-daemon-tls
REPO=kruise-e2e-daemon
LOCAL_NODE=kruise-e2e-daemon-local # NODE_NAME of the locally started daemon (part 6)
NORT_POD=kruise-e2e-daemon-noruntime
# Test images: random content (so a pull is cold once removed from containerd), built once per
# registry. big1/big2 go through the throttling proxy.
IMG_BIG1=$PROXY/$REPO/big1
IMG_BIG2=$PROXY/$REPO/big2
IMG_TLS=$REG_TLS/$REPO/small
IMG_MISSING=$REG/$REPO/missing
WORK=$(mktemp -d "${TMPDIR:-/tmp}/daemon-e2e.XXXXXX")
PIDS=()
# The kube-local overlays run the daemon on an ephemeral loopback port that it writes to a pod-local
# file (kube-local's nodes share one network); `kruise-daemon probe` inside the pod reads it.
DAEMON_BIN=/usr/local/bin/kruise-daemon       # where scripts/build-image puts it
DAEMON_ADDR_FILE=/var/run/kruise-daemon/addr  # deploy/overlays/kube-local*/daemonset-patch.yaml

# --- cleanup -------------------------------------------------------------------------------------
delete_daemon_objects() {
  # Everything the overlay created except CRDs and namespaces.
  [ -f "$WORK/daemon-objects.yaml" ] && k delete -f "$WORK/daemon-objects.yaml" --ignore-not-found \
    --wait=false >/dev/null 2>&1
}
remove_test_images() { remove_repo_images "$REPO" ${TEST_DIGESTS[@]+"${TEST_DIGESTS[@]}"}; }
daemon_pods_gone() {
  [ -z "$(k -n "$KNS" get pods -l control-plane=daemon -o name 2>/dev/null)" ]
}
cleanup() {
  local rc=$?
  set +e
  if [ "$rc" != 0 ] && [ -n "${DAEMON_POD:-}" ]; then
    say "daemon pod log (tail):"
    k -n "$KNS" logs "$DAEMON_POD" --tail=40 2>/dev/null | sed 's/^/    /'
  fi
  if [ "$rc" != 0 ] && [ -f "$WORK/local-daemon.log" ]; then
    say "local daemon log (tail):"
    tail -n 20 "$WORK/local-daemon.log" | sed 's/^/    /'
  fi
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  done
  [ -n "${PRIVATE_CTRD:-}" ] && umount -R "$PRIVATE_CTRD/root" 2>/dev/null
  k delete nodeimages.apps.kruise.io "$NODE" "$LOCAL_NODE" --ignore-not-found --wait=false >/dev/null 2>&1
  k -n kruise-daemon-config delete secret "$SECRET" --ignore-not-found >/dev/null 2>&1
  k delete namespace "$NS" --ignore-not-found --wait=false >/dev/null 2>&1
  k -n "$KNS" delete pod "$NORT_POD" --ignore-not-found --wait=false >/dev/null 2>&1
  delete_daemon_objects
  # The next run starts without an agent of ours: wait (bounded) for our pods to be gone.
  for _ in $(seq 150); do daemon_pods_gone && break; sleep 0.2; done
  remove_test_images
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT


# --- 0. leftovers of an interrupted run ----------------------------------------------------------
k delete nodeimages.apps.kruise.io "$NODE" "$LOCAL_NODE" --ignore-not-found >/dev/null 2>&1
k delete namespace "$NS" --ignore-not-found --wait=true --timeout=90s >/dev/null 2>&1

# --- 1. image, overlay, rollout ------------------------------------------------------------------
say "building the kruise-daemon image from $BINARY"
push_image kruise-daemon "$BINARY" e2e "$WORK/image" --user 0:0
DAEMON_IMAGE=$PUSHED_IMAGE
say "pushed $DAEMON_IMAGE ($(du -sk "$WORK/image/blobs" | cut -f1) KiB of blobs)"

render_overlay kube-local-daemon "$DAEMON_IMAGE" "$WORK/rendered.yaml" "$WORK/daemon-objects.yaml"
t=$(now_ms)
k apply -f "$WORK/rendered.yaml" >"$WORK/apply.log" 2>&1 || {
  cat "$WORK/apply.log"
  die "kubectl apply failed"
}
k wait --for condition=established --timeout=60s crd/nodeimages.apps.kruise.io \
  crd/containerrecreaterequests.apps.kruise.io >/dev/null || die "CRDs not established"
timeout 150 "$KUBECTL" -n "$KNS" rollout status ds/kruise-daemon --timeout=140s >/dev/null ||
  die "DaemonSet kruise-daemon did not roll out"
daemon_pod_ready() {
  DAEMON_POD=$(k -n "$KNS" get pods -l control-plane=daemon -o json | jq -r --arg img "$DAEMON_IMAGE" \
    '[.items[] | select(.metadata.deletionTimestamp == null)
       | select(.spec.containers[0].image == $img)
       | select(any(.status.conditions[]?; .type == "Ready" and .status == "True"))][0].metadata.name // empty')
  [ -n "$DAEMON_POD" ]
}
wait_for 60 "a Ready daemon pod" daemon_pod_ready
ROLLOUT_S=$(awk -v ms=$(($(now_ms) - t)) 'BEGIN { printf "%.1f", ms / 1000 }')
result "rollout: DaemonSet kruise-daemon ready in ${ROLLOUT_S}s (pod $DAEMON_POD)"

# A second agent from the same pod template, pointed at a socket that does not exist: checked near
# the end (after > 60 s, past the liveness probe's initial delay + 3 failures) to still run, never
# restarted, unready, /healthz 503 naming the socket.
NORT_PORT=${KRUISE_E2E_DAEMON_NORUNTIME_PORT:-16433}
python3 - "$WORK/rendered.yaml" "$NORT_POD" "$NORT_PORT" "$NODE" >"$WORK/noruntime.yaml" <<'PYEOF' ||
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
ds = next(d for d in docs if d["kind"] == "DaemonSet")
spec = ds["spec"]["template"]["spec"]
spec["nodeName"] = sys.argv[4]
c = spec["containers"][0]
port = int(sys.argv[3])
# A fixed port, for the curl below; --addr-file (if any) stays: this pod's own emptyDir, where its
# exec probes (kube-local overlays) find the port.
c["args"] = [a for a in c["args"] if not a.startswith(("--addr=", "--socket-file="))] + [
    f"--addr=127.0.0.1:{port}", "--socket-file=kruise-e2e-no-such.sock"]
if "ports" in c:
    c["ports"] = [{"name": "http", "containerPort": port, "protocol": "TCP"}]
for probe in ("livenessProbe", "readinessProbe"):
    if "httpGet" in c[probe]:
        c[probe]["httpGet"]["port"] = port
c["env"] = [e for e in c["env"] if e["name"] != "NODE_NAME"] + [
    {"name": "NODE_NAME", "value": "kruise-e2e-daemon-noruntime"}]
pod = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": sys.argv[2], "namespace": ds["metadata"]["namespace"],
                    "labels": {"app.kubernetes.io/name": "kruise-e2e-daemon-noruntime"}},
       "spec": spec}
yaml.safe_dump(pod, sys.stdout)
PYEOF
  die "rendering the no-runtime pod"
k -n "$KNS" delete pod "$NORT_POD" --ignore-not-found >/dev/null
k apply -f "$WORK/noruntime.yaml" >/dev/null || die "creating the no-runtime pod"
T_NORT=$(now_ms)

# --- 2. NodeImage --------------------------------------------------------------------------------
# Random-content images, pushed once per registry.
TEST_DIGESTS=()
manifest_digest() { # NAME REGISTRY [tls]
  local args=(-sfI -H "$ACCEPT") url=http://$2/v2/$REPO/$1/manifests/1
  [ -n "${3:-}" ] && args+=(--cacert "$KUBE_LOCAL_REGISTRY_TLS_CA" -u "$REG_TLS_CREDS") &&
    url=https://$2/v2/$REPO/$1/manifests/1
  curl "${args[@]}" "$url" | tr -d '\r' | awk -F': ' 'tolower($1)=="docker-content-digest" {print $2}'
}
ensure_image() { # NAME MIB REGISTRY [tls]
  local name=$1 mib=$2 reg=$3 tls=${4:-} digest
  digest=$(manifest_digest "$name" "$reg" "$tls")
  if [ -n "$digest" ]; then
    TEST_DIGESTS+=("$digest")
    return 0
  fi
  say "building test image $REPO/$name:1 ($mib MiB random layer) for $reg"
  make_image "$WORK/img-$name" "$mib" >"$WORK/img-$name.log" 2>&1 || die "building image $name failed"
  local args=(--dest-tls-verify=false)
  [ -n "$tls" ] && args=(--dest-creds "$REG_TLS_CREDS" --dest-tls-verify=false)
  skopeo copy --quiet "${args[@]}" "oci:$WORK/img-$name:1" "docker://$reg/$REPO/$name:1" ||
    die "pushing $name to $reg failed"
  TEST_DIGESTS+=("$(manifest_digest "$name" "$reg" "$tls")")
}
ensure_image big1 48 "$REG"
ensure_image big2 48 "$REG"
ensure_image small 2 "$REG_TLS" tls
remove_test_images

"$HERE/throttle_proxy.py" --listen "$PROXY" --upstream "http://$REG" --rate $((12 << 20)) \
  --log "$WORK/proxy.log" >"$WORK/proxy.out" 2>&1 &
PIDS+=($!)
wait_for 10 "the throttling proxy on $PROXY" grep -q ready "$WORK/proxy.out"

k -n kruise-daemon-config delete secret "$SECRET" --ignore-not-found >/dev/null
k -n kruise-daemon-config create secret docker-registry "$SECRET" --docker-server="$REG_TLS" \
  --docker-username="$KUBE_LOCAL_REGISTRY_TLS_USER" \
  --docker-password="$KUBE_LOCAL_REGISTRY_TLS_PASSWORD" >/dev/null || die "creating the pull secret"

# Every version of the NodeImage, for the progress history.
"$KUBECTL" get nodeimages.apps.kruise.io --field-selector "metadata.name=$NODE" -o json --watch \
  >"$WORK/watch.json" 2>"$WORK/watch.err" &
PIDS+=($!)

CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ)
cat >"$WORK/nodeimage.yaml" <<EOF
apiVersion: apps.kruise.io/v1beta1
kind: NodeImage
metadata:
  name: $NODE
spec:
  images:
    $IMG_BIG1:
      tags:
      - {tag: "1", version: 1, createdAt: "$CREATED", imagePullPolicy: Always}
    $IMG_TLS:
      pullSecrets:
      - {namespace: kruise-daemon-config, name: $SECRET}
      tags:
      - {tag: "1", version: 1, createdAt: "$CREATED", imagePullPolicy: Always}
    $IMG_MISSING:
      tags:
      - tag: nope
        version: 1
        createdAt: "$CREATED"
        pullPolicy: {backoffLimit: 1, timeoutSeconds: 30}
EOF
T_NI=$(now_ms)
k apply -f "$WORK/nodeimage.yaml" >/dev/null || die "creating NodeImage $NODE"

ni_json() { k get nodeimages.apps.kruise.io "$NODE" -o json >"$WORK/ni.json" 2>/dev/null; }
tag_field() { # IMAGE TAG FIELD
  jq -r --arg i "$1" --arg t "$2" --arg f "$3" \
    '(.status.imageStatuses[$i].tags // [])[] | select(.tag == $t) | .[$f] // empty' "$WORK/ni.json"
}
tag_done() { # IMAGE TAG PHASE...
  ni_json || return 1
  local phase
  phase=$(tag_field "$1" "$2" phase)
  shift 2
  for p in "$@"; do [ "$phase" = "$p" ] && return 0; done
  return 1
}
declare -A DONE_MS
wait_tag() { # IMAGE TAG PHASE SECS
  wait_for "$4" "$1:$2 to be $3" tag_done "$1" "$2" "$3"
  DONE_MS["$1:$2"]=$(($(now_ms) - T_NI))
}
wait_tag "$IMG_MISSING" nope Failed 60
wait_tag "$IMG_TLS" 1 Succeeded 60
wait_tag "$IMG_BIG1" 1 Succeeded 90
ni_json
for ref in "$IMG_BIG1:1" "$IMG_TLS:1"; do
  img=${ref%:*}
  id=$(tag_field "$img" 1 imageID)
  [[ "$id" == *sha256:* ]] || die "$ref Succeeded without an imageID (got '$id')"
  [ "$(tag_field "$img" 1 progress)" = 100 ] || die "$ref Succeeded with progress $(tag_field "$img" 1 progress)"
  result "NodeImage: $ref Succeeded in $(secs "${DONE_MS[$ref]}")s, imageID $id"
done
msg=$(tag_field "$IMG_MISSING" nope message)
grep -qi "not found" <<<"$msg" || die "missing tag: message is not the runtime's not-found error: $msg"
attempts=$(k -n "$KNS" logs "$DAEMON_POD" | grep -c "pull $IMG_MISSING:nope attempt [0-9]*/2 failed")
[ "$attempts" = 2 ] || die "missing tag: $attempts attempts logged, want backoffLimit + 1 = 2"
result "NodeImage: $IMG_MISSING:nope Failed after $attempts attempts in $(secs "${DONE_MS[$IMG_MISSING:nope]}")s: $msg"
# Progress of big1 as the API saw it: non-decreasing, at least one value strictly between 0 and 100.
kill "${PIDS[-1]}" 2>/dev/null
mapfile -t progress < <(jq -r --arg i "$IMG_BIG1" \
  '(.status.imageStatuses[$i].tags // [])[] | select(.tag == "1") | (.progress // 0)' \
  "$WORK/watch.json" | uniq)
say "big1 progress as written to the API: ${progress[*]}"
prev=0
mid=0
for p in "${progress[@]}"; do
  [ "$p" -ge "$prev" ] || die "big1 progress went down: ${progress[*]}"
  ((p > 0 && p < 100)) && mid=$((mid + 1))
  prev=$p
done
[ "$prev" = 100 ] && [ "$mid" -ge 1 ] || die "big1 progress did not rise through intermediate values: ${progress[*]}"
result "NodeImage: progress of $IMG_BIG1:1 rose ${progress[*]}"
counts=$(jq -c '.status | {desired, succeeded, failed, pulling, waiting}' "$WORK/ni.json")
[ "$counts" = '{"desired":3,"succeeded":2,"failed":1,"pulling":0,"waiting":0}' ] ||
  die "NodeImage status counts: $counts"

# --- 3. restart the daemon mid-pull --------------------------------------------------------------
k patch nodeimages.apps.kruise.io "$NODE" --type merge -p "{\"spec\":{\"images\":{\"$IMG_BIG2\":{\"tags\":[{\"tag\":\"1\",\"version\":1,\"createdAt\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\",\"imagePullPolicy\":\"Always\"}]}}}}" >/dev/null ||
  die "adding big2 to the NodeImage"
T_NI=$(now_ms)
big2_pulling() {
  ni_json || return 1
  [ "$(tag_field "$IMG_BIG2" 1 phase)" = Pulling ] && [ "$(tag_field "$IMG_BIG2" 1 progress)" -gt 0 ] 2>/dev/null
}
wait_for 30 "big2 to be Pulling with progress" big2_pulling
at=$(tag_field "$IMG_BIG2" 1 progress)
OLD_POD=$DAEMON_POD
k -n "$KNS" delete pod "$OLD_POD" --wait=false >/dev/null || die "deleting the daemon pod"
T_RESTART=$(now_ms)
old_pod_gone() { ! k -n "$KNS" get pod "$OLD_POD" >/dev/null 2>&1; }
wait_for 120 "the old daemon pod to be gone" old_pod_gone
GONE_MS=$(($(now_ms) - T_RESTART))
new_pod_ready() { daemon_pod_ready && [ "$DAEMON_POD" != "$OLD_POD" ]; }
wait_for 120 "a new Ready daemon pod" new_pod_ready
RESTART_MS=$(($(now_ms) - T_RESTART))
wait_tag "$IMG_BIG2" 1 Succeeded 90
ni_json
pulling=$(jq '[.status.imageStatuses[].tags[] | select(.phase == "Pulling")] | length' "$WORK/ni.json")
[ "$pulling" = 0 ] && [ "$(jq .status.pulling "$WORK/ni.json")" = 0 ] || die "$pulling tags still Pulling"
[[ "$(tag_field "$IMG_BIG2" 1 imageID)" == *sha256:* ]] || die "big2 has no imageID"
[ "$(tag_field "$IMG_BIG1" 1 phase)" = Succeeded ] || die "big1 lost its Succeeded status"
blob_gets=$(grep -c "^GET /v2/$REPO/big2/blobs/" "$WORK/proxy.log")
result "restart mid-pull: pod deleted at big2 progress ${at}%, old pod gone after $(secs "$GONE_MS")s, new pod Ready after $(secs "$RESTART_MS")s, big2 Succeeded $(secs "${DONE_MS[$IMG_BIG2:1]}")s after it was added ($blob_gets blob GETs), nothing Pulling"

# --- 4. memory of the daemon in the cluster ------------------------------------------------------
cid=$(k -n "$KNS" get pod "$DAEMON_POD" -o jsonpath='{.status.containerStatuses[0].containerID}')
cid=${cid#containerd://}
pid=$("${CTR[@]}" tasks ls | awk -v id="$cid" '$1 == id { print $2 }')
[ -n "$pid" ] && [ -r "/proc/$pid/status" ] || die "no process for container $cid"
rss() { awk -v k="$1:" '$1 == k { print $2 " " $3 }' "/proc/$pid/status"; }
result "memory: daemon pid $pid in pod $DAEMON_POD: VmRSS $(rss VmRSS), RssAnon $(rss RssAnon), RssFile $(rss RssFile), VmHWM $(rss VmHWM), threads $(awk '$1 == "Threads:" {print $2}' "/proc/$pid/status")"

# --- 4b. the agent without a runtime, in the cluster ---------------------------------------------
nort_running() {
  [ "$(k -n "$KNS" get pod "$NORT_POD" -o jsonpath='{.status.containerStatuses[0].state.running.startedAt}')" != "" ]
}
wait_for 30 "the no-runtime daemon pod to run" nort_running
left=$((65000 - ($(now_ms) - T_NORT)))
if [ "$left" -gt 0 ]; then
  say "waiting $((left / 1000))s more so the no-runtime pod outlives its liveness probe's failure window"
  nort_aged() { [ $(($(now_ms) - T_NORT)) -ge 65000 ]; }
  wait_for 90 "65 s of no-runtime pod life" nort_aged
fi
k -n "$KNS" get pod "$NORT_POD" -o json >"$WORK/nort.json" || die "reading the no-runtime pod"
restarts=$(jq '.status.containerStatuses[0].restartCount' "$WORK/nort.json")
ready=$(jq -r '.status.containerStatuses[0].ready' "$WORK/nort.json")
code=$(curl -s -o "$WORK/nort.body" -w '%{http_code}' "http://127.0.0.1:$NORT_PORT/healthz")
[ "$restarts" = 0 ] || die "the daemon without a runtime was restarted $restarts times (liveness probe)"
[ "$ready" = false ] || die "the daemon without a runtime is Ready"
[ "$code" = 503 ] && grep -q "kruise-e2e-no-such.sock" "$WORK/nort.body" ||
  die "/healthz of the daemon without a runtime: HTTP $code $(head -c 200 "$WORK/nort.body")"
result "no runtime in the cluster: agent up $(secs $(($(now_ms) - T_NORT)))s, 0 restarts, unready, /healthz 503 naming the socket"
k -n "$KNS" delete pod "$NORT_POD" --wait=false >/dev/null

# --- 5. ContainerRecreateRequests ----------------------------------------------------------------
# Binaries built before the CRR controller existed export no kruise_daemon_crr_* metrics. /metrics
# is read inside the daemon pod: its port is ephemeral, in the pod's $DAEMON_ADDR_FILE.
if [ "${KRUISE_E2E_DAEMON_SKIP_CRR:-0}" = 1 ]; then
  say "skipping the CRR cases (KRUISE_E2E_DAEMON_SKIP_CRR=1)"
else
  METRICS=$(k -n "$KNS" exec "$DAEMON_POD" -- "$DAEMON_BIN" probe --addr-file="$DAEMON_ADDR_FILE" \
    --path=/metrics 2>"$WORK/metrics.err") ||
    die "/metrics of $DAEMON_POD (kubectl exec ... probe): $(head -c 400 "$WORK/metrics.err")"
  if ! grep -q "kruise_daemon_crr" <<<"$METRICS"; then
    say "SKIP the CRR cases: this kruise-daemon has no CRR controller (no kruise_daemon_crr_* metrics)"
  else
    # shellcheck source=test/e2e/daemon/crr_cases.sh
    . "$HERE/crr_cases.sh"
  fi
fi

# --- 6. daemon before containerd (local process, private containerd) -----------------------------
# shellcheck source=test/e2e/daemon/late_containerd.sh
. "$HERE/late_containerd.sh"

say "all passed in $((SECONDS - T0))s"
for r in "${RESULTS[@]}"; do echo "  $r"; done
