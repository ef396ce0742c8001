#!/usr/bin/env bash
# kruise-manager end to end on ../shared/kube-local (real kube-apiserver, kubelet, containerd and
# registries), with kruise-daemon rolled out as a DaemonSet (as test/e2e/daemon does it).
#
# The two managers run as HOST PROCESSES, not as the Deployment: kube-local has no kube-proxy, so
# the API server cannot reach a webhook through a Service (issue 5 allows this). Each replica sets
# WEBHOOK_HOST=127.0.0.1 and registers its webhooks by URL (https://127.0.0.1:<port>/...). Two
# processes cannot share one port (the webhook server never sets SO_REUSEPORT), so the replicas
# listen on WEBHOOK_PORT base and base+1, and the URL in the webhook configurations is the port of
# whichever replica wrote them last (each rewrites them at start-up and on its one-minute resync).
# Both serve the same CA, so either URL works while both run; after the URL's replica dies, the
# webhooks fail until the survivor's next resync (measured in step 6). The managers use a
# kubeconfig with the token of the ServiceAccount kruise-manager, so deploy/'s RBAC is exercised.
#
#   1. deploy/overlays/kube-local without the manager Deployment (CRDs, namespaces, RBAC, Service,
#      webhook configurations, the daemon DaemonSet pinned to a freshly built image); two managers
#      with leader election (lease 4 s / renew 3 s / retry 1 s): both /readyz 200 with one CA, one
#      Lease holder;
#   2. ImagePullJobs over the node from the TLS + basic-auth registry sharing a pull secret: one
#      copy in kruise-daemon-config, named by the NodeImage tags; pull-tls (Always) succeeds and
#      its ttlSecondsAfterFinished deletes it, keep-tls (Never) keeps the copy; kruise-daemon's
#      pod is deleted and a new one started, then after-restart pulls cold with the same copy;
#      the watch histories show the copy naming every job for its whole life and deleted only
#      after the last job was gone (issue 40);
#  2b. the NodeImage patch of OpenKruise's manual ("NodeImage (low-level)") by hand: the webhook
#      defaults createdAt and the pull policy, the tag is Succeeded with an imageID and counted in
#      status.succeeded, the controller removes it after its ttlSecondsAfterFinished; a tag
#      without the TTL is refused with the webhook's reason;
#  2c. PreDownloadImageForInPlaceUpdate: a 4-pod CloneSet (partition 4) gets a new image: the
#      ImagePullJob <revision>-main, owned by it, pulls the image on the node while no pod
#      updates; lifting the partition updates the pods in place and the job is deleted;
#   3. an invalid ImagePullJob is denied by kubectl with the webhook's message;
#   4. a ContainerRecreateRequest with only podName + a container name: the webhook adds the labels
#      and statusContext, it ends Completed/Succeeded and the kubelet reports restartCount + 1;
#   5. Secret kruise-webhook-certs deleted: recreated with a new CA, caBundle of both webhook
#      configurations and both replicas' cert dirs follow (the Secret is watched), admission works
#      again; the pod webhook injects KruisePodReady into a CloneSet-controlled pod only, never in
#      kube-system (server-side dry runs);
#   6. kill -9 of the leader while a job's pull runs (through a throttling proxy): the other replica
#      takes the Lease and completes the job; the webhook URL moves to it;
#  6b. containerd killed with kill -9 while three jobs' pulls run through the proxy, started again
#      ~5 s later by kube-local's `up`: the agent reports that it waits for the runtime, no
#      attempt is spent (backoffLimit 0), the three jobs succeed and no tag is left Pulling;
#   7. both managers stopped: pods in kube-system and in a normal namespace are still created
#      (pod webhook failurePolicy Ignore), an ImagePullJob is refused (failurePolicy Fail).
#   8. the manager as the kube-local overlay's Deployment, its image built by scripts/build-image,
#      with no NodeImage left (as a fresh install): an ImagePullJob created as soon as its webhook
#      admits one has status.desired = 1 within 3 s (OpenKruise's e2e bound; the start-up timeline
#      from the manager's log is printed); rollout Ready (readiness is a TLS round trip to its own
#      webhook), it takes the Lease, an ImagePullJob is admitted through it; its in-cluster memory
#      is printed.
#
# Everything it creates is deleted again, also on failure (managers, webhook configurations, RBAC,
# Service, DaemonSet, the certificate Secret, Lease, NodeImage, pull-secret copies, test namespace);
# CRDs and the two kruise namespaces are left. Every wait polls a condition with a deadline.
#
# Usage: manager_e2e.sh KRUISE_MANAGER_BINARY KRUISE_DAEMON_BINARY
# Exit 0 when everything passed, or (SKIP message) when kube-local is absent and
# KRUISE_E2E_REQUIRED is not 1. Environment: KRUISE_KUBE_LOCAL_ENV (default
# ${KUBE_LOCAL_STATE:-/tmp/kube-local}/env), KRUISE_E2E_MANAGER_PORT_BASE (default 16440; uses
# base..base+6: webhooks, health, metrics of the two managers, the throttling proxy), KUBE_LOCAL
# (default ../shared/kube-local: the tool whose `up` starts containerd again in step 6b).
set -uo pipefail

HERE=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
T0=$SECONDS
# shellcheck source=../lib.sh
. "$ROOT/test/e2e/lib.sh"


binaries_from_args "${1:-}" "${2:-}"

kube_local_preflight jq curl umoci skopeo ctr python3 base64

NODE=$KUBE_LOCAL_NODE_NAME
REG=$KUBE_LOCAL_REGISTRY
REG_TLS=$KUBE_LOCAL_REGISTRY_TLS
BB=$KUBE_LOCAL_BUSYBOX_IMAGE
# shellcheck disable=SC2206 # a command line, split on purpose
CTR=($KUBE_LOCAL_CTR)
BASE=${KRUISE_E2E_MANAGER_PORT_BASE:-16440}
HOOK_A=$BASE HOOK_B=$((BASE + 1))
HEALTH_A=$((BASE + 2)) HEALTH_B=$((BASE + 3))
METRICS_A=$((BASE + 4)) METRICS_B=$((BASE + 5))
PROXY=127.0.0.1:$((BASE + 6))
KNS=kruise-system
DNS=kruise-daemon-config
NS=kruise-e2e-manager
CERT_SECRET=kruise-webhook-certs
LEASE=kruise-manager
MWC=kruise-mutating-webhook-configuration
VWC=kruise-validating-webhook-configuration
PULL_SECRET=kl-tls
IMG_TLS=$REG_TLS/busybox # step 2, tag v1
IMG_SLOW=$PROXY/sized    # step 6, tag 10m, through the throttling proxy
OUTAGE_REPO=kruise-e2e-manager # step 6b: img-1..3, random layers, built when missing
KUBE_LOCAL_DIR=${KUBE_LOCAL:-$ROOT/../shared/kube-local} # its `up` restarts containerd (step 6b)
[ -x "$KUBE_LOCAL_DIR/up" ] || die "no kube-local tool at $KUBE_LOCAL_DIR (set KUBE_LOCAL)"
CONTAINERD_KILLED=
WORK=$(mktemp -d "${TMPDIR:-/tmp}/manager-e2e.XXXXXX")
declare -A MPID        # manager pid by replica (a, b)
declare -A HOOK=([a]=$HOOK_A [b]=$HOOK_B)
declare -A HEALTH=([a]=$HEALTH_A [b]=$HEALTH_B)
declare -A METRICS=([a]=$METRICS_A [b]=$METRICS_B)
PIDS=()
STEP=0
STEP_T=0
step() {
  STEP=$1
  STEP_T=$(now_ms)
  say "=== step $1: $2"
}
step_done() {
  local ms=$(($(now_ms) - STEP_T))
  result "step $STEP ($(secs "$ms")s): $*"
}

# Before any cleanup trap: a busy port may be another run of this test.
require_free_ports KRUISE_E2E_MANAGER_PORT_BASE "$HOOK_A" "$HOOK_B" "$HEALTH_A" "$HEALTH_B" "$METRICS_A" "$METRICS_B" "${PROXY#*:}"

# --- cleanup -------------------------------------------------------------------------------------
alive() { # PID: running and not a zombie
  local st
  st=$(ps -o stat= -p "$1" 2>/dev/null) && [[ "$st" != Z* ]]
}
stop_pid() { # PID (a child): SIGTERM, up to 5 s, then SIGKILL; reaped
  local pid=$1
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do alive "$pid" || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
}
# Jobs and CRRs of the test namespace keep finalizers that only a running manager removes.
strip_finalizers() {
  local kind name
  for kind in imagepulljobs.apps.kruise.io containerrecreaterequests.apps.kruise.io; do
    for name in $(k -n "$NS" get "$kind" -o name 2>/dev/null); do
      k -n "$NS" patch "$name" --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1
    done
  done
}
delete_leftovers() { # everything but the DaemonSet objects
  # Webhook configurations first: with no manager their failurePolicy Fail entries would refuse
  # every later write of ImagePullJobs, CRRs and NodeImages (also other tests' ones).
  k delete mutatingwebhookconfiguration "$MWC" --ignore-not-found >/dev/null 2>&1
  k delete validatingwebhookconfiguration "$VWC" --ignore-not-found >/dev/null 2>&1
  strip_finalizers
  # Pods first, at once: the namespace then goes in seconds, not after the kubelet's next sync.
  k -n "$NS" delete pods --all --grace-period=0 --force >/dev/null 2>&1
  k delete namespace "$NS" --ignore-not-found --wait=false >/dev/null 2>&1
  k -n "$KNS" delete secret "$CERT_SECRET" --ignore-not-found >/dev/null 2>&1
  k -n "$KNS" delete lease "$LEASE" --ignore-not-found >/dev/null 2>&1
  k -n kube-system delete pod kruise-e2e-manager-ks --ignore-not-found --grace-period=0 --force \
    >/dev/null 2>&1
  # Pull-secret copies made for jobs of our namespace.
  local copies
  copies=$(k -n "$DNS" get secrets -o json 2>/dev/null | jq -r --arg ns "$NS/" '.items[]
    | select((.metadata.annotations["imagepulljobs.kruise.io/source-key"] // "") | startswith($ns))
    | .metadata.name')
  [ -z "$copies" ] || k -n "$DNS" delete secret $copies --ignore-not-found >/dev/null 2>&1
  k delete nodeimages.apps.kruise.io "$NODE" --ignore-not-found --wait=false >/dev/null 2>&1
}
remove_slow_image() { # every name of the step 6 image in containerd, so its pull is cold
  local digest refs
  digest=$(awk '$1 == "sized:10m" { print $2 }' "$KUBE_LOCAL_IMAGE_DIGESTS" 2>/dev/null)
  [ -n "$digest" ] || return 0
  mapfile -t refs < <("${CTR[@]}" images ls 2>/dev/null | awk -v d="$digest" 'NR > 1 && $3 == d { print $1 }')
  [ "${#refs[@]}" = 0 ] || "${CTR[@]}" images rm --sync "${refs[@]}" >/dev/null 2>&1
}
cleanup() {
  local rc=$?
  set +e
  if [ "$rc" != 0 ]; then
    for r in a b; do
      [ -f "$WORK/manager-$r.log" ] || continue
      say "manager $r log (tail):"
      tail -n 25 "$WORK/manager-$r.log" | sed 's/^/    /'
    done
    if [ -n "${DAEMON_POD:-}" ]; then
      say "daemon pod log (tail):"
      k -n "$KNS" logs "$DAEMON_POD" --tail=20 2>/dev/null | sed 's/^/    /'
    fi
  fi
  local t0=$SECONDS
  # A failure in step 6b may leave containerd dead: start it again first.
  [ -n "$CONTAINERD_KILLED" ] && "$KUBE_LOCAL_DIR/up" --quiet >/dev/null 2>&1
  for r in a b; do [ -n "${MPID[$r]:-}" ] && stop_pid "${MPID[$r]}"; done
  for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
  say "cleanup: processes stopped ($((SECONDS - t0))s)"
  delete_leftovers
  say "cleanup: test objects deleted ($((SECONDS - t0))s)"
  [ -f "$WORK/deployment.yaml" ] &&
    k delete -f "$WORK/deployment.yaml" --ignore-not-found --wait=false >/dev/null 2>&1
  [ -f "$WORK/own-objects.yaml" ] &&
    k delete -f "$WORK/own-objects.yaml" --ignore-not-found --wait=false >/dev/null 2>&1
  # The next run starts without an agent of ours: wait (bounded) for our daemon pods to be gone.
  local deadline=$((SECONDS + 60))
  until daemon_pods_stopped || [ "$SECONDS" -ge "$deadline" ]; do sleep 0.2; done
  say "cleanup: DaemonSet and RBAC deleted ($((SECONDS - t0))s)"
  remove_slow_image
  declare -F drop_outage_leases >/dev/null && drop_outage_leases
  remove_repo_images "$OUTAGE_REPO"
  rm -rf "$WORK"
  say "cleanup done in $((SECONDS - t0))s"
  exit "$rc"
}
trap cleanup EXIT


# --- 0. leftovers of an interrupted run ----------------------------------------------------------
delete_leftovers
k delete namespace "$NS" --ignore-not-found --wait=true --timeout=90s >/dev/null 2>&1

# --- 1. deploy, daemon, two managers -------------------------------------------------------------
step 1 "deploy/ (CRDs, namespaces, RBAC, webhooks, daemon DaemonSet) and two manager processes"
push_image kruise-daemon "$DAEMON" manager-e2e "$WORK/image" --user 0:0
DAEMON_IMAGE=$PUSHED_IMAGE
# The kube-local overlay minus the manager Deployment (the managers run on the host, see above).
render_overlay kube-local "$DAEMON_IMAGE" "$WORK/rendered.yaml" "$WORK/own-objects.yaml"
k apply -f "$WORK/rendered.yaml" >"$WORK/apply.log" 2>&1 || {
  cat "$WORK/apply.log"
  die "kubectl apply failed"
}
k wait --for condition=established --timeout=60s crd/nodeimages.apps.kruise.io \
  crd/imagepulljobs.apps.kruise.io crd/containerrecreaterequests.apps.kruise.io \
  crd/clonesets.apps.kruise.io >/dev/null ||
  die "CRDs not established"

# Kubeconfig of the ServiceAccount kruise-manager (its token Secret comes from the token controller).
sa_token() {
  local secret
  secret=$(k -n "$KNS" get sa kruise-manager -o jsonpath='{.secrets[0].name}' 2>/dev/null)
  [ -n "$secret" ] && TOKEN=$(k -n "$KNS" get secret "$secret" -o jsonpath='{.data.token}' 2>/dev/null |
    base64 -d) && [ -n "$TOKEN" ]
}
wait_for 30 "the token of ServiceAccount $KNS/kruise-manager" sa_token
(
  umask 077
  cat >"$WORK/manager.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kube-local
  cluster: {server: "$KUBE_LOCAL_APISERVER", certificate-authority: "$KUBE_LOCAL_CA"}
users:
- name: kruise-manager
  user: {token: "$TOKEN"}
contexts:
- name: kruise-manager
  context: {cluster: kube-local, user: kruise-manager, namespace: $KNS}
current-context: kruise-manager
EOF
)
unset TOKEN

start_manager() { # REPLICA
  local r=$1
  env POD_NAMESPACE="$KNS" WEBHOOK_HOST=127.0.0.1 WEBHOOK_PORT="${HOOK[$r]}" \
    WEBHOOK_CERT_DIR="$WORK/certs-$r" \
    "$MANAGER" --kubeconfig "$WORK/manager.kubeconfig" --enable-leader-election \
    --leader-election-namespace="$KNS" --leader-election-lease-duration=4s \
    --leader-election-renew-deadline=3s --leader-election-retry-period=1s \
    --webhook-bind-address=127.0.0.1 --health-probe-addr="127.0.0.1:${HEALTH[$r]}" --metrics-addr="127.0.0.1:${METRICS[$r]}" \
    --feature-gates=ImagePullJobGate=true,PreDownloadImageForInPlaceUpdate=true \
    --nodeimage-creation-delay=0s >"$WORK/manager-$r.log" 2>&1 &
  MPID[$r]=$!
}
ready() { # REPLICA
  [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:${HEALTH[$1]}/readyz")" = 200 ]
}
lease_holder() { k -n "$KNS" get lease "$LEASE" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }
# The replica (a/b) whose log says it acquired the Lease now held; "" if none.
leader_replica() {
  local holder r
  holder=$(lease_holder)
  [ -n "$holder" ] || return 1
  for r in a b; do
    grep -qF "$holder acquired lease" "$WORK/manager-$r.log" && echo "$r" && return 0
  done
  return 1
}
has_leader() { LEADER=$(leader_replica) && [ -n "$LEADER" ]; }

# The daemon and both managers start together.
t_daemon=$(now_ms)
T_MGR=$(now_ms)
start_manager a
start_manager b
wait_for 60 "manager a /readyz" ready a
READY_A_MS=$(($(now_ms) - T_MGR))
wait_for 60 "manager b /readyz" ready b
READY_B_MS=$(($(now_ms) - T_MGR))
wait_for 30 "a Lease holder among the managers" has_leader
LEAD_MS=$(($(now_ms) - T_MGR))
cmp -s "$WORK/certs-a/ca-cert.pem" "$WORK/certs-b/ca-cert.pem" || die "the replicas serve different CAs"
CA1=$(k -n "$KNS" get secret "$CERT_SECRET" -o jsonpath='{.data.ca-cert\.pem}' | base64 -d)
[ "$CA1" = "$(cat "$WORK/certs-a/ca-cert.pem")" ] || die "the replicas' CA is not the Secret's"
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
DAEMON_MS=$(($(now_ms) - t_daemon))
# Which port the webhook configurations call.
hook_ports() { # CONFIG-KIND NAME -> distinct ports of the entries' URLs
  k get "$1" "$2" -o json | jq -r '[.webhooks[].clientConfig.url // empty | capture(":(?<p>[0-9]+)/").p] | unique | join(",")'
}
URL_PORT=$(hook_ports mutatingwebhookconfiguration "$MWC")
for r in a b; do # both registered their URL (the last writer's stays)
  grep -q "updated MutatingWebhookConfiguration $MWC" "$WORK/manager-$r.log" ||
    die "manager $r did not register its webhook URL"
done
step_done "managers a (webhook :$HOOK_A) and b (:$HOOK_B) /readyz 200 after $(secs "$READY_A_MS")s / $(secs "$READY_B_MS")s, one CA in both, Lease held by $LEADER after $(secs "$LEAD_MS")s; webhook URLs on port $URL_PORT; daemon pod $DAEMON_POD Ready after $(secs "$DAEMON_MS")s"

# The CRR target of step 4 starts meanwhile. PID 1 ignores SIGTERM without a handler (notes:
# containerd item 4), hence the trap.
k create namespace "$NS" >/dev/null || die "creating namespace $NS"
cat >"$WORK/pod.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: crr-target, namespace: $NS}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 5
  containers:
  - name: app
    image: $BB
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
EOF
k apply -f "$WORK/pod.yaml" >/dev/null || die "creating pod crr-target"

# --- 2. ImagePullJobs with a private-registry secret ----------------------------------------------
step 2 "ImagePullJobs from the TLS + basic-auth registry sharing a pull secret: its copy lives as long as a job names it, a restarted daemon pulls with it"
k -n "$NS" create secret docker-registry "$PULL_SECRET" --docker-server="$REG_TLS" \
  --docker-username="$KUBE_LOCAL_REGISTRY_TLS_USER" \
  --docker-password="$KUBE_LOCAL_REGISTRY_TLS_PASSWORD" >/dev/null || die "creating the pull secret"
SRC_UID=$(k -n "$NS" get secret "$PULL_SECRET" -o jsonpath='{.metadata.uid}')
tls_job() { # NAME TAG COMPLETION-POLICY: an ImagePullJob of $IMG_TLS:TAG on the node with the secret
  cat <<EOF
apiVersion: apps.kruise.io/v1beta1
kind: ImagePullJob
metadata: {name: $1, namespace: $NS}
spec:
  image: $IMG_TLS:$2
  parallelism: 1
  selector: {names: [$NODE]}
  pullSecrets: [$PULL_SECRET]
  imagePullPolicy: Always
  pullPolicy: {timeoutSeconds: 60, backoffLimit: 1}
  completionPolicy: $3
EOF
}
tls_job pull-tls v1 "{type: Always, activeDeadlineSeconds: 120, ttlSecondsAfterFinished: 5}" >"$WORK/job-tls.yaml"
# stamped_watch FILE ARGS...: `kubectl get ARGS --watch` in the background, one line per event with
# its arrival time in ms: {t, type, name, refs (a copy's references), deleting, desired (a job's)}.
# The jq behind kubectl ends when kubectl is stopped.
stamped_watch() {
  local file=$1
  shift
  "$KUBECTL" get "$@" --watch --output-watch-events -o json 2>"$file.err" > >(jq --unbuffered -c \
    '{t: (now * 1000 | floor), type, name: .object.metadata.name,
      refs: .object.metadata.annotations["imagepulljobs.kruise.io/references"],
      deleting: (.object.metadata.deletionTimestamp != null), desired: .object.status.desired}' \
    >"$file") &
  PIDS+=($!)
}
# The pull from the local registry takes well under a second: the copy, the jobs and the tag are
# checked in watch histories.
stamped_watch "$WORK/copies.watch" -n "$DNS" secrets -l "imagepulljobs.kruise.io/source-uid=$SRC_UID"
stamped_watch "$WORK/jobs.watch" -n "$NS" imagepulljobs.apps.kruise.io
"$KUBECTL" get nodeimages.apps.kruise.io --field-selector "metadata.name=$NODE" --watch -o json \
  >"$WORK/ni.watch" 2>"$WORK/ni.err" &
PIDS+=($!)
watching() { [ -s "$WORK/ni.watch" ]; } # the NodeImage's current version arrived
wait_for 10 "the NodeImage watch" watching
t=$(now_ms)
k create -f "$WORK/job-tls.yaml" -o json >"$WORK/job-tls.json" || die "creating ImagePullJob pull-tls"
copies_of_source() {
  k -n "$DNS" get secrets -l "imagepulljobs.kruise.io/source-uid=$SRC_UID" -o json 2>/dev/null |
    jq -r '.items[].metadata.name'
}
copy_added() { COPY=$(jq -r 'select(.type == "ADDED") | .name' "$WORK/copies.watch" | head -n 1) && [ -n "$COPY" ]; }
wait_for 30 "the copy of $PULL_SECRET in $DNS" copy_added
# A second job, Never (it never completes), names the same secret: the copy is shared.
tls_job keep-tls v2 "{type: Never}" | k create -f - >/dev/null || die "creating ImagePullJob keep-tls"
ni_json() { k get nodeimages.apps.kruise.io "$NODE" -o json >"$WORK/ni.json" 2>/dev/null; }
# The job's tag in the NodeImage spec (owner reference = the job).
tag_written() { # IMAGE TAG JOB_UID
  ni_json && jq -e --arg i "$1" --arg t "$2" --arg u "$3" '.spec.images[$i].tags[]?
    | select(.tag == $t) | select(any(.ownerReferences[]?; .uid == $u))' "$WORK/ni.json" >/dev/null
}
tag_phase() { # IMAGE TAG
  jq -r --arg i "$1" --arg t "$2" \
    '(.status.imageStatuses[$i].tags // [])[] | select(.tag == $t) | .phase // empty' "$WORK/ni.json"
}
tag_is() { ni_json && [ "$(tag_phase "$1" "$2")" = "$3" ]; }
job_json() { k -n "$NS" get imagepulljobs.apps.kruise.io "$1" -o json >"$WORK/job-$1.json" 2>/dev/null; }
job_completed() { # JOB: succeeded=1, completionTime set
  job_json "$1" && jq -e '.status.succeeded == 1 and (.status.completionTime // "") != ""' \
    "$WORK/job-$1.json" >/dev/null
}
job_succeeded_once() { job_json "$1" && jq -e '.status.succeeded == 1' "$WORK/job-$1.json" >/dev/null; }
job_gone() { ! k -n "$NS" get imagepulljobs.apps.kruise.io "$1" >/dev/null 2>&1; }
job_status_ok() { # JOB: desired 1, failed 0 (dies otherwise)
  local st
  st=$(jq -c '.status | {desired, succeeded, failed, active, completionTime}' "$WORK/job-$1.json")
  [ "$(jq -r .desired <<<"$st")" = 1 ] && [ "$(jq -r .failed <<<"$st")" = 0 ] || die "job $1 status: $st"
}
wait_for 60 "job pull-tls to complete" job_completed pull-tls
DONE_MS=$(($(now_ms) - t))
job_status_ok pull-tls
wait_for 60 "job keep-tls (Never) to pull $IMG_TLS:v2" job_succeeded_once keep-tls
job_status_ok keep-tls
wait_for 30 "job pull-tls to be deleted by its TTL (5 s)" job_gone pull-tls
TTL_MS=$(($(now_ms) - t))
copy_refs() { k -n "$DNS" get secret "$1" -o json 2>/dev/null | jq -r '.metadata.annotations["imagepulljobs.kruise.io/references"] // ""'; }
[ "$(copies_of_source)" = "$COPY" ] && [ "$(copy_refs "$COPY")" = "$NS/keep-tls" ] ||
  die "after pull-tls was deleted: copies '$(copies_of_source | tr '\n' ' ')', references '$(copy_refs "$COPY")'; want $COPY for $NS/keep-tls"

# kruise-daemon restarted after the copy was made: the new process has never read the copy, and a
# job started now pulls cold (the image is removed from containerd) with the shared copy.
OLD_POD=$DAEMON_POD
T_RESTART=$(now_ms)
k -n "$KNS" delete pod "$OLD_POD" --wait=false >/dev/null || die "deleting the daemon pod"
old_pod_gone() { ! k -n "$KNS" get pod "$OLD_POD" >/dev/null 2>&1; }
wait_for "$POD_GONE_TIMEOUT" "the old daemon pod $OLD_POD to be gone" old_pod_gone
new_pod_ready() { daemon_pod_ready && [ "$DAEMON_POD" != "$OLD_POD" ]; }
wait_for 120 "a new Ready daemon pod" new_pod_ready
RESTART_MS=$(($(now_ms) - T_RESTART))
v1_refs() { # the names of $IMG_TLS:v1 in containerd (tag and digest)
  local listed digest
  listed=$("${CTR[@]}" images ls 2>/dev/null)
  digest=$(awk -v r="$IMG_TLS:v1" '$1 == r { print $3 }' <<<"$listed")
  [ -n "$digest" ] && awk -v d="$digest" -v p="$IMG_TLS" 'index($1, p) == 1 && $3 == d { print $1 }' <<<"$listed"
}
mapfile -t v1_names < <(v1_refs)
[ "${#v1_names[@]}" = 0 ] || "${CTR[@]}" images rm --sync "${v1_names[@]}" >/dev/null 2>&1
[ -z "$(v1_refs)" ] || die "could not remove $IMG_TLS:v1 from containerd"
tls_job after-restart v1 "{type: Always, activeDeadlineSeconds: 120}" | k create -f - -o json \
  >"$WORK/job-after.json" || die "creating ImagePullJob after-restart"
AFTER_UID=$(jq -r .metadata.uid "$WORK/job-after.json")
t=$(now_ms)
wait_for 60 "job after-restart to complete" job_completed after-restart
AFTER_MS=$(($(now_ms) - t))
job_status_ok after-restart
[ -n "$(v1_refs)" ] || die "$IMG_TLS:v1 is not in containerd after job after-restart"

# The last jobs deleted: the copy goes after them.
T_DEL=$(now_ms)
k -n "$NS" delete imagepulljobs.apps.kruise.io keep-tls after-restart --wait=false >/dev/null ||
  die "deleting jobs keep-tls and after-restart"
jobs_gone() { job_gone keep-tls && job_gone after-restart; }
wait_for 30 "jobs keep-tls and after-restart to be gone" jobs_gone
copy_deleted() { grep -q '"type":"DELETED"' "$WORK/copies.watch"; }
wait_for 45 "the copy $COPY to be deleted (at most 30 s after its creation)" copy_deleted
COPY_GONE_MS=$(($(now_ms) - T_DEL))
for pid in "${PIDS[@]: -3}"; do stop_pid "$pid"; done
PIDS=("${PIDS[@]:0:${#PIDS[@]}-3}")
# Histories: one copy, added once and deleted once, after the last job was gone; once a job was
# named in the copy's references, it stayed there until the job was being deleted.
if ! verdict=$(python3 - "$WORK/copies.watch" "$WORK/jobs.watch" "$NS" <<'PYEOF'
import json, sys
copies = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
jobs = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
ns = sys.argv[3]
bad = []
names = {e["name"] for e in copies}
types = [e["type"] for e in copies]
if len(names) != 1 or types.count("ADDED") != 1 or types.count("DELETED") != 1 or types[-1] != "DELETED":
    bad.append("copy events: " + " ".join("%s %s" % (e["type"], e["name"]) for e in copies))
gone = max((e["t"] for e in jobs if e["type"] == "DELETED"), default=None)
deleted = [e["t"] for e in copies if e["type"] == "DELETED"]
if gone is None or not deleted or deleted[0] < gone:
    bad.append("copy deleted at %s, the last job gone at %s" % (deleted, gone))
lives = []
for job in ("pull-tls", "keep-tls", "after-restart"):
    ev = [e for e in jobs if e["name"] == job]
    if not ev:
        bad.append("no watch event of job " + job)
        continue
    start = ev[0]["t"]
    end = min(e["t"] for e in ev if e["deleting"] or e["type"] == "DELETED")
    key = ns + "/" + job
    named = lambda e: e["type"] != "DELETED" and key in (e["refs"] or "").split(",")
    first = next((i for i, e in enumerate(copies) if named(e)), None)
    if first is None:
        bad.append("job %s never in the copy's references" % job)
        continue
    # The first version after that without it (or the copy's deletion) came after the job's
    # deletion began (1 s allowed between the two watches' arrivals).
    released = next((e for e in copies[first:] if not named(e)), None)
    if released is None or released["t"] < end - 1000:
        bad.append("job %s (deleted at %d) released by the copy at %s" % (job, end, released))
    desired = next((e["t"] for e in ev if e["desired"] is not None), None)
    lives.append("%s lived %.1fs (status.desired after %s)" % (job, (end - start) / 1000,
                 "%.2fs" % ((desired - start) / 1000) if desired else "never"))
if bad:
    print("; ".join(bad))
    sys.exit(1)
print("copy deleted %.1fs after the last job was gone; %s" % ((deleted[0] - gone) / 1000, ", ".join(lives)))
PYEOF
); then
  die "pull-secret copy history: $verdict"
fi
JOB_UID=$(jq -r .metadata.uid "$WORK/job-tls.json")
for u in "$JOB_UID" "$AFTER_UID"; do # the tags of both Always jobs named the copy
  owned=$(jq -c --arg i "$IMG_TLS" --arg u "$u" 'select(any(.spec.images[$i].tags[]?;
    any(.ownerReferences[]?; .uid == $u))) | [.spec.images[$i].pullSecrets[]? | "\(.namespace)/\(.name)"]' \
    "$WORK/ni.watch" | sort -u | tr '\n' ' ')
  [ "$owned" = "[\"$DNS/$COPY\"] " ] || die "NodeImage tag of job $u with pull secrets: '$owned', want $DNS/$COPY"
done
phases=$(jq -r --arg i "$IMG_TLS" '(.status.imageStatuses[$i].tags // [])[] | select(.tag == "v1") | .phase' \
  "$WORK/ni.watch" | uniq | tr '\n' ' ')
grep -q "Succeeded" <<<"$phases" || die "$IMG_TLS:v1 never Succeeded on $NODE: $phases"
step_done "copy $DNS/$COPY shared by pull-tls (complete after $(secs "$DONE_MS")s, deleted by its TTL after $(secs "$TTL_MS")s) and keep-tls (Never); daemon restarted ($OLD_POD -> $DAEMON_POD in $(secs "$RESTART_MS")s), then after-restart pulled $IMG_TLS:v1 cold with the copy in $(secs "$AFTER_MS")s; $verdict; copy gone $(secs "$COPY_GONE_MS")s after the last jobs' deletion"

# --- 2b. a NodeImage edited by hand (OpenKruise manual, "NodeImage (low-level)") ---------------
step 2b "the manual's kubectl patch of the NodeImage: defaulted by the webhook, pulled, counted, removed by its TTL"
HAND_IMG=${BB%:*} HAND_TAG=${BB##*:}
# The manual's patch, with a 5 s TTL so that the removal is observed here (the manual uses 300).
HAND_PATCH=$(jq -cn --arg i "$HAND_IMG" --arg t "$HAND_TAG" '{spec: {images: {($i): {tags: [{tag: $t,
  pullPolicy: {ttlSecondsAfterFinished: 5, timeoutSeconds: 600, backoffLimit: 3, activeDeadlineSeconds: 1200}}]}}}}')
t=$(now_ms)
k patch nodeimages.apps.kruise.io "$NODE" --type=merge -p "$HAND_PATCH" >/dev/null ||
  die "kubectl patch nodeimage/$NODE (the manual's patch)"
ni_json || die "reading NodeImage $NODE"
hand_tag=$(jq -c --arg i "$HAND_IMG" --arg t "$HAND_TAG" '.spec.images[$i].tags[]? | select(.tag == $t)' "$WORK/ni.json")
[ "$(jq -r '.createdAt // ""' <<<"$hand_tag")" != "" ] &&
  [ "$(jq -cS '.pullPolicy' <<<"$hand_tag")" = '{"activeDeadlineSeconds":1200,"backoffLimit":3,"timeoutSeconds":600,"ttlSecondsAfterFinished":5}' ] ||
  die "the hand-written tag was not defaulted by the NodeImage webhook: $hand_tag"
hand_succeeded() {
  ni_json && jq -e --arg i "$HAND_IMG" --arg t "$HAND_TAG" '(.status.imageStatuses[$i].tags // [])[]
    | select(.tag == $t and .phase == "Succeeded" and (.imageID // "") != "")' "$WORK/ni.json" >/dev/null
}
wait_for 60 "the hand-written tag $HAND_IMG:$HAND_TAG to be Succeeded with an imageID" hand_succeeded
HAND_MS=$(($(now_ms) - t))
counted=$(jq -c '.status | {desired, succeeded, failed, pulling}' "$WORK/ni.json")
[ "$(jq -r '.succeeded // 0' <<<"$counted")" -ge 1 ] || die "status.succeeded does not count the tag: $counted"
image_id=$(jq -r --arg i "$HAND_IMG" --arg t "$HAND_TAG" '.status.imageStatuses[$i].tags[] | select(.tag == $t) | .imageID' "$WORK/ni.json")
hand_gone() {
  ni_json && ! jq -e --arg i "$HAND_IMG" --arg t "$HAND_TAG" '.spec.images[$i].tags[]? | select(.tag == $t)' \
    "$WORK/ni.json" >/dev/null
}
wait_for 60 "the hand-written tag to be removed after its 5 s TTL" hand_gone
GONE_MS=$(($(now_ms) - t))
# Without the TTL the tag is refused with the webhook's reason (OpenKruise requires it too).
no_ttl=$(jq -cn --arg i "$HAND_IMG" '{spec: {images: {($i): {tags: [{tag: "no-ttl"}]}}}}')
why=$(k patch nodeimages.apps.kruise.io "$NODE" --type=merge -p "$no_ttl" 2>&1) &&
  die "a tag without ttlSecondsAfterFinished was accepted"
grep -q "pullPolicy.ttlSecondsAfterFinished for $HAND_IMG/no-ttl must be set" <<<"$why" ||
  die "denial without the webhook's reason: $why"
step_done "tag defaulted (createdAt, pullPolicy), Succeeded with imageID ${image_id:0:19}... after $(secs "$HAND_MS")s, status $counted, removed $(secs "$GONE_MS")s after the patch (TTL 5 s); a tag without TTL is refused: $(tail -n 1 <<<"$why" | cut -c1-120)"

# --- 2c. image pre-download for a CloneSet's in-place update -----------------------------------
step 2c "PreDownloadImageForInPlaceUpdate: a CloneSet's new image is pulled on its node before its pods update"
# Four pods (pre-download skips sets of three or fewer) on this node; partition 4 holds every pod
# back, so the job's pull is all that happens until the partition is lifted.
cat >"$WORK/cs-predl.yaml" <<EOF
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata: {name: predl, namespace: $NS}
spec:
  replicas: 4
  selector: {matchLabels: {app: predl}}
  template:
    metadata: {labels: {app: predl}}
    spec:
      hostNetwork: true
      nodeSelector: {kubernetes.io/hostname: $NODE}
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: $REG/busybox:v1
        imagePullPolicy: IfNotPresent
        command: ["sh", "-c", "trap 'exit 0' TERM; sleep 86400 & wait"]
  updateStrategy: {type: InPlaceIfPossible, partition: 4}
EOF
k apply -f "$WORK/cs-predl.yaml" >/dev/null || die "creating CloneSet predl"
cs_json() { k -n "$NS" get clonesets.apps.kruise.io predl -o json >"$WORK/cs.json" 2>/dev/null; }
cs_ready() { cs_json && jq -e '.status.readyReplicas == 4 and .status.updatedReplicas == 4' "$WORK/cs.json" >/dev/null; }
wait_for 180 "4 Ready pods of CloneSet predl" cs_ready
OLD_REV=$(jq -r '.status.updateRevision' "$WORK/cs.json")
t=$(now_ms)
k -n "$NS" patch clonesets.apps.kruise.io predl --type json -p "[{\"op\":\"replace\",
  \"path\":\"/spec/template/spec/containers/0/image\",\"value\":\"$REG/busybox:v2\"}]" >/dev/null ||
  die "patching CloneSet predl's image"
new_revision() {
  cs_json && REV=$(jq -r '.status.updateRevision // ""' "$WORK/cs.json") && [ -n "$REV" ] &&
    [ "$REV" != "$OLD_REV" ]
}
wait_for 30 "CloneSet predl's new revision" new_revision
PJOB=$REV-main
pjob_json() { k -n "$NS" get imagepulljobs.apps.kruise.io "$PJOB" -o json >"$WORK/pjob.json" 2>/dev/null; }
wait_for 30 "ImagePullJob $PJOB" pjob_json
JOB_MS=$(($(now_ms) - t))
jq -e --arg img "$REG/busybox:v2" --arg rev "$REV" '.spec.image == $img
  and .metadata.ownerReferences[0].kind == "CloneSet" and .metadata.ownerReferences[0].controller
  and .spec.parallelism == 1 and .spec.completionPolicy.type == "Always"
  and ([.spec.podSelector.matchExpressions[] | select(.key == "controller-revision-hash"
        and .operator == "NotIn" and (.values | index($rev)))] | length == 1)' "$WORK/pjob.json" >/dev/null ||
  die "ImagePullJob $PJOB is not what pre-download makes: $(jq -c '{owners: .metadata.ownerReferences, spec}' "$WORK/pjob.json")"
[ "$(k -n "$NS" get controllerrevisions "$REV" -o json | jq -r '.metadata.labels["apps.kruise.io/pre-predownload-created"] // ""')" = true ] ||
  die "revision $REV is not labelled apps.kruise.io/pre-predownload-created"
pjob_done() { pjob_json && jq -e '.status.succeeded == 1 and .status.desired == 1' "$WORK/pjob.json" >/dev/null; }
wait_for 120 "ImagePullJob $PJOB to pull on $NODE" pjob_done
PULL_MS=$(($(now_ms) - t))
v2_pods=$(k -n "$NS" get pods -l app=predl -o json |
  jq '[.items[] | select(.spec.containers[0].image | endswith(":v2"))] | length')
[ "$v2_pods" = 0 ] || die "partition 4 should hold every pod back, $v2_pods run v2"
# Lifting the partition updates the pods in place; once all run the new revision the job goes.
k -n "$NS" patch clonesets.apps.kruise.io predl --type merge \
  -p '{"spec":{"updateStrategy":{"partition":0}}}' >/dev/null || die "lifting predl's partition"
cs_updated() {
  cs_json && jq -e '.status.updatedReadyReplicas == 4 and .status.currentRevision == .status.updateRevision' \
    "$WORK/cs.json" >/dev/null
}
wait_for 240 "CloneSet predl updated in place" cs_updated
UPD_MS=$(($(now_ms) - t))
pjob_gone() { ! k -n "$NS" get imagepulljobs.apps.kruise.io "$PJOB" >/dev/null 2>&1; }
wait_for 30 "ImagePullJob $PJOB deleted once every pod runs the new revision" pjob_gone
k -n "$NS" delete clonesets.apps.kruise.io predl --wait=false >/dev/null
predl_gone() { [ -z "$(k -n "$NS" get pods -l app=predl -o name 2>/dev/null)" ]; }
wait_for 120 "the pods of CloneSet predl to go" predl_gone
step_done "ImagePullJob $PJOB (owned by the CloneSet, pods NotIn the new revision) $(secs "$JOB_MS")s after the image patch, pulled on $NODE after $(secs "$PULL_MS")s while partition 4 held every pod; in-place update done at $(secs "$UPD_MS")s, then the job was deleted"

# --- 3. invalid objects -------------------------------------------------------------------------
step 3 "an invalid ImagePullJob (and a CRR for an unknown container) is denied with a readable message"
cat >"$WORK/job-bad.yaml" <<EOF
apiVersion: apps.kruise.io/v1beta1
kind: ImagePullJob
metadata: {name: pull-bad, namespace: $NS}
spec:
  image: "$REG/Bad Image:1"
  selector: {names: [$NODE]}
  completionPolicy: {type: Always, activeDeadlineSeconds: 100}
EOF
denied() { # FILE WANT...: kubectl create -f FILE fails and prints every WANT
  local f=$1 out
  shift
  if k create -f "$f" >"$f.out" 2>&1; then die "$f was accepted"; fi
  out=$(cat "$f.out")
  for want in "$@"; do
    grep -qF "$want" <<<"$out" || die "denial message lacks '$want': $out"
  done
  DENIAL=$out
}
denied "$WORK/job-bad.yaml" 'admission webhook "vimagepulljob.kb.io" denied the request: ' \
  'spec.image: invalid image' \
  'spec.completionPolicy.activeDeadlineSeconds: must not be less than pullPolicy.timeoutSeconds (600)'
job_gone pull-bad || die "the invalid job exists"
JOB_DENIAL=$DENIAL
cat >"$WORK/crr-bad.yaml" <<EOF
apiVersion: apps.kruise.io/v1alpha1
kind: ContainerRecreateRequest
metadata: {name: crr-bad, namespace: $NS}
spec:
  podName: crr-target
  containers: [{name: nope}]
EOF
# The pod must run for the container check (else "not scheduled" / "not active").
pod_ready() {
  [ "$(k -n "$NS" get pod "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
wait_for 90 "pod crr-target to be Ready" pod_ready crr-target
denied "$WORK/crr-bad.yaml" 'admission webhook "mcontainerrecreaterequest.kb.io" denied the request: ' \
  "container nope is not in pod $NS/crr-target"
step_done "kubectl: '$JOB_DENIAL' / '$DENIAL'"

# --- 4. CRR with only podName and a container ----------------------------------------------------
step 4 "a minimal ContainerRecreateRequest is defaulted by the webhook and restarts the container"
k -n "$NS" get pod crr-target -o json >"$WORK/pod.json" || die "reading pod crr-target"
POD_UID=$(jq -r .metadata.uid "$WORK/pod.json")
OLD_ID=$(jq -r '.status.containerStatuses[0].containerID' "$WORK/pod.json")
OLD_COUNT=$(jq -r '.status.containerStatuses[0].restartCount' "$WORK/pod.json")
make_crr() { # NAME
  cat <<EOF | k create -f - -o json >"$WORK/crr-$1.json" || die "creating CRR $1"
apiVersion: apps.kruise.io/v1alpha1
kind: ContainerRecreateRequest
metadata: {name: $1, namespace: $NS}
spec:
  podName: crr-target
  containers:
  - name: app
EOF
}
check_crr_defaults() { # NAME: what the mutating webhook must have added
  local f=$WORK/crr-$1.json
  [ "$(jq -r '.metadata.labels["crr.apps.kruise.io/node-name"]' "$f")" = "$NODE" ] &&
    [ "$(jq -r '.metadata.labels["crr.apps.kruise.io/pod-uid"]' "$f")" = "$POD_UID" ] &&
    [ "$(jq -r '.metadata.labels["crr.apps.kruise.io/active"]' "$f")" = true ] ||
    die "CRR $1 lacks the webhook's labels: $(jq -c .metadata.labels "$f")"
}
t=$(now_ms)
make_crr crr-min
check_crr_defaults crr-min
ctx=$(jq -c '.spec.containers[0].statusContext' "$WORK/crr-crr-min.json")
[ "$(jq -r .containerID <<<"$ctx")" = "$OLD_ID" ] || die "CRR statusContext $ctx, pod container $OLD_ID"
strategy=$(jq -c '.spec.strategy' "$WORK/crr-crr-min.json")
crr_completed() {
  k -n "$NS" get containerrecreaterequests.apps.kruise.io "$1" -o json >"$WORK/crr-$1.json" 2>/dev/null &&
    [ "$(jq -r '.status.phase // empty' "$WORK/crr-$1.json")" = Completed ]
}
wait_for 60 "CRR crr-min to complete" crr_completed crr-min
CRR_MS=$(($(now_ms) - t))
phase=$(jq -r '.status.containerRecreateStates[]? | select(.name == "app") | .phase' "$WORK/crr-crr-min.json")
[ "$phase" = Succeeded ] || die "CRR crr-min container app ended '$phase': $(jq -c .status "$WORK/crr-crr-min.json")"
restarted() {
  k -n "$NS" get pod crr-target -o json >"$WORK/pod.json" 2>/dev/null &&
    jq -e --arg id "$OLD_ID" --argjson n $((OLD_COUNT + 1)) '.status.containerStatuses[0]
      | .containerID != $id and .restartCount == $n and .state.running != null' "$WORK/pod.json" >/dev/null
}
wait_for 30 "the kubelet to report app restarted" restarted
inactive() {
  k -n "$NS" get containerrecreaterequests.apps.kruise.io crr-min -o json 2>/dev/null |
    jq -e '.metadata.labels["crr.apps.kruise.io/active"] == null' >/dev/null
}
wait_for 20 "the active label of crr-min to be dropped" inactive
step_done "crr-min got labels node-name=$NODE, pod-uid, active=true, statusContext $ctx, strategy $strategy; Completed/Succeeded after $(secs "$CRR_MS")s, restartCount $OLD_COUNT -> $((OLD_COUNT + 1)), active label dropped"

# --- 5. webhook certificate Secret deleted -------------------------------------------------------
step 5 "Secret $CERT_SECRET deleted: new CA, caBundle updated, admission still works"
k -n "$KNS" delete secret "$CERT_SECRET" >/dev/null || die "deleting $CERT_SECRET"
t=$(now_ms)
new_ca() {
  CA2=$(k -n "$KNS" get secret "$CERT_SECRET" -o jsonpath='{.data.ca-cert\.pem}' 2>/dev/null | base64 -d) &&
    [ -n "$CA2" ] && [ "$CA2" != "$CA1" ]
}
# Both replicas watch the Secret: a deletion is repaired at once, not at the next resync.
wait_for 15 "$CERT_SECRET to be recreated with a new CA" new_ca
RECREATED_MS=$(($(now_ms) - t))
bundles_are() { # PEM: every caBundle of both configurations decodes to it
  local kind b
  for kind in mutatingwebhookconfiguration:$MWC validatingwebhookconfiguration:$VWC; do
    for b in $(k get "${kind%%:*}" "${kind#*:}" -o json | jq -r '.webhooks[].clientConfig.caBundle // "-"'); do
      [ "$(base64 -d <<<"$b" 2>/dev/null)" = "$1" ] || return 1
    done
  done
}
wait_for 30 "the caBundles to carry the new CA" bundles_are "$CA2"
BUNDLE_MS=$(($(now_ms) - t))
# A real TLS handshake with each replica, trusting only the new CA (the PEMs are written first,
# then the server's certificate reloader picks them up).
echo "$CA2" >"$WORK/ca2.pem"
serves_ca() { curl -sf --max-time 2 --cacert "$WORK/ca2.pem" "https://127.0.0.1:${HOOK[$1]}/healthz" >/dev/null; }
wait_for 20 "manager a to serve a certificate of the new CA" serves_ca a
wait_for 20 "manager b to serve a certificate of the new CA" serves_ca b
BOTH_MS=$(($(now_ms) - t))
wait_for 10 "manager a /readyz after the rotation" ready a
wait_for 10 "manager b /readyz after the rotation" ready b
make_crr crr-after-rotation
check_crr_defaults crr-after-rotation
URL_PORT=$(hook_ports mutatingwebhookconfiguration "$MWC")
step_done "Secret recreated with a new CA after $(secs "$RECREATED_MS")s, caBundles updated after $(secs "$BUNDLE_MS")s, both replicas serving it after $(secs "$BOTH_MS")s (Secret watch); CRR crr-after-rotation admitted and labelled through :$URL_PORT"

# The pod webhook (/mutate-pod) with both replicas up, through server-side dry runs (admission
# runs, nothing is stored, so no garbage collector races the dangling owner reference): a pod
# controlled by an apps.kruise.io workload gets the KruisePodReady readiness gate, a plain pod does
# not, and neither does one in kube-system (the handler itself skips it: on 1.20 the namespace
# selector cannot).
dry_pod_gates() { # NAMESPACE OWNER_API_VERSION -> the readinessGates' condition types
  jq -n --arg ns "$1" --arg owner "$2" --arg image "$BB" '{
      apiVersion: "v1", kind: "Pod",
      metadata: ({generateName: "gate-", namespace: $ns} + (if $owner == "" then {} else
        {ownerReferences: [{apiVersion: $owner, kind: "CloneSet", name: "web", controller: true,
                            uid: "9d3f0c1e-0000-4000-8000-000000000001"}]} end)),
      spec: {nodeName: "kruise-e2e-nowhere", containers: [{name: "c", image: $image}]}}' |
    k create --dry-run=server -o json -f - | jq -r '[.spec.readinessGates[]?.conditionType] | join(",")'
}
gates=$(dry_pod_gates "$NS" apps.kruise.io/v1alpha1) || die "dry-run pod creation failed"
[ "$gates" = KruisePodReady ] || die "a CloneSet-controlled pod got readinessGates '$gates', want KruisePodReady"
gates=$(dry_pod_gates "$NS" "") || die "dry-run pod creation failed"
[ -z "$gates" ] || die "a plain pod got readinessGates '$gates'"
gates=$(dry_pod_gates kube-system apps.kruise.io/v1alpha1) || die "dry-run pod creation failed"
[ -z "$gates" ] || die "a kube-system pod was mutated: readinessGates '$gates'"
say "pod webhook: KruisePodReady injected for a CloneSet pod; plain and kube-system pods untouched"

# --- 6. kill -9 the leader mid-job ---------------------------------------------------------------
step 6 "kill -9 the leader while a pull runs: the other replica takes over and completes the job"
remove_slow_image
"$ROOT/test/e2e/daemon/throttle_proxy.py" --listen "$PROXY" --upstream "http://$REG" \
  --rate $((1 << 20)) --log "$WORK/proxy.log" >"$WORK/proxy.out" 2>&1 &
PIDS+=($!)
wait_for 10 "the throttling proxy on $PROXY" grep -q ready "$WORK/proxy.out"
wait_for 10 "a Lease holder" has_leader
OLD_LEADER=$LEADER
SURVIVOR=$([ "$OLD_LEADER" = a ] && echo b || echo a)
OLD_HOLDER=$(lease_holder)
cat <<EOF | k create -f - -o json >"$WORK/job-slow.json" || die "creating ImagePullJob pull-slow"
apiVersion: apps.kruise.io/v1beta1
kind: ImagePullJob
metadata: {name: pull-slow, namespace: $NS}
spec:
  image: $IMG_SLOW:10m
  parallelism: 1
  selector: {names: [$NODE]}
  imagePullPolicy: Always
  pullPolicy: {timeoutSeconds: 60, backoffLimit: 1}
  completionPolicy: {type: Always, activeDeadlineSeconds: 120}
EOF
SLOW_UID=$(jq -r .metadata.uid "$WORK/job-slow.json")
t=$(now_ms)
slow_pulling() { tag_written "$IMG_SLOW" 10m "$SLOW_UID" && [ "$(tag_phase "$IMG_SLOW" 10m)" = Pulling ]; }
wait_for 30 "$IMG_SLOW:10m to be Pulling" slow_pulling
job_json pull-slow
active=$(jq -r '.status.active // 0' "$WORK/job-pull-slow.json")
exec 3>&2 2>/dev/null # without bash's "Killed" job notice
kill -9 "${MPID[$OLD_LEADER]}"
T_KILL=$(now_ms)
wait "${MPID[$OLD_LEADER]}"
exec 2>&3 3>&-
unset "MPID[$OLD_LEADER]"
say "killed leader $OLD_LEADER ($OLD_HOLDER) $(secs $((T_KILL - t)))s after creating pull-slow (tag Pulling, job active=$active)"
took_over() {
  local h
  h=$(lease_holder)
  [ -n "$h" ] && [ "$h" != "$OLD_HOLDER" ] && grep -qF "$h acquired lease" "$WORK/manager-$SURVIVOR.log"
}
wait_for 30 "manager $SURVIVOR to take the Lease" took_over
TAKEOVER_MS=$(($(now_ms) - T_KILL))
wait_for 60 "job pull-slow to complete" job_completed pull-slow
SLOW_DONE_MS=$(($(now_ms) - T_KILL))
ni_json
[ "$(tag_phase "$IMG_SLOW" 10m)" = Succeeded ] || die "$IMG_SLOW:10m is $(tag_phase "$IMG_SLOW" 10m)"
blob_gets=$(grep -c "^GET /v2/sized/blobs/" "$WORK/proxy.log")
# The webhook URL: the dead replica's port until the survivor's next resync rewrites it.
url_is_survivor() { [ "$(hook_ports mutatingwebhookconfiguration "$MWC")" = "${HOOK[$SURVIVOR]}" ] &&
  [ "$(hook_ports validatingwebhookconfiguration "$VWC")" = "${HOOK[$SURVIVOR]}" ]; }
wait_for 75 "the webhook URLs to point at manager $SURVIVOR" url_is_survivor
URL_MS=$(($(now_ms) - T_KILL))
# Deleting the job needs the survivor (finalizer, through its webhook).
k -n "$NS" delete imagepulljobs.apps.kruise.io pull-slow --wait=false >/dev/null || die "deleting pull-slow"
wait_for 30 "job pull-slow to be gone" job_gone pull-slow
step_done "leader $OLD_LEADER killed mid-pull; $SURVIVOR took the Lease after $(secs "$TAKEOVER_MS")s (lease 4 s); pull-slow completed $(secs "$SLOW_DONE_MS")s after the kill ($blob_gets blob GETs); webhook URLs on the survivor's port $(secs "$URL_MS")s after the kill; job deleted through the survivor"

# --- 6b. containerd killed while three pulls run -------------------------------------------------
step 6b "containerd killed mid-pull and restarted: no attempt is spent, the three jobs succeed"
# Three images of their own (random layers, 3 MiB each), fetched through the proxy at 384 KiB/s:
# every pull is still running when containerd dies (the agent runs two at once, the third waits).
for i in 1 2 3; do
  curl -sfI -H "$ACCEPT" "http://$REG/v2/$OUTAGE_REPO/img-$i/manifests/1" >/dev/null && continue
  make_image "$WORK/outage-$i" 3 >"$WORK/outage-$i.log" 2>&1 || die "building image img-$i"
  skopeo copy --quiet --dest-tls-verify=false "oci:$WORK/outage-$i:1" \
    "docker://$REG/$OUTAGE_REPO/img-$i:1" || die "pushing $OUTAGE_REPO/img-$i:1"
done
remove_repo_images "$OUTAGE_REPO"
# The pulls containerd was running when killed keep their leases (24 h): they would hold these
# images' layers after the images are removed, and the next run's pulls would not be cold.
LEASES_BEFORE=$("${CTR[@]}" leases ls -q 2>/dev/null)
stop_pid "${PIDS[-1]}" # step 6's proxy (1 MiB/s): the same port, slower
"$ROOT/test/e2e/daemon/throttle_proxy.py" --listen "$PROXY" --upstream "http://$REG" \
  --rate $((384 << 10)) --log "$WORK/proxy-6b.log" >"$WORK/proxy-6b.out" 2>&1 &
PIDS+=($!)
wait_for 10 "the throttling proxy on $PROXY" grep -q ready "$WORK/proxy-6b.out"
declare -A OUT_UID
for i in 1 2 3; do
  # backoffLimit 0: an attempt counted for the outage would fail the tag at once.
  cat <<EOT | k create -f - -o json >"$WORK/job-out-$i.json" || die "creating ImagePullJob pull-out-$i"
apiVersion: apps.kruise.io/v1beta1
kind: ImagePullJob
metadata: {name: pull-out-$i, namespace: $NS}
spec:
  image: $PROXY/$OUTAGE_REPO/img-$i:1
  selector: {names: [$NODE]}
  pullPolicy: {timeoutSeconds: 120, backoffLimit: 0}
  completionPolicy: {type: Always, activeDeadlineSeconds: 300}
EOT
  OUT_UID[$i]=$(jq -r .metadata.uid "$WORK/job-out-$i.json")
done
t=$(now_ms)
out_phases() { # -> "phase1 phase2 phase3" of the three tags in the NodeImage status
  ni_json && for i in 1 2 3; do printf '%s ' "$(tag_phase "$PROXY/$OUTAGE_REPO/img-$i" 1)"; done
}
two_pulling() {
  local p
  p=$(out_phases) || return 1
  [ "$(grep -o Pulling <<<"$p" | wc -l)" -ge 2 ]
}
wait_for 30 "two of the three tags to be Pulling" two_pulling
blob_gets() { grep -c "^GET /v2/$OUTAGE_REPO/img-./blobs/" "$WORK/proxy-6b.log" 2>/dev/null; }
pulling_at_kill=$(out_phases)
CONTAINERD_PID=$(cat "$KUBE_LOCAL_STATE/run/containerd.pid")
kill -9 "$CONTAINERD_PID" || die "kill -9 containerd ($CONTAINERD_PID)"
T_KILL=$(now_ms)
CONTAINERD_KILLED=1
say "killed containerd $(secs $((T_KILL - t)))s after creating the jobs (tags: $pulling_at_kill; blobs fetched completely: $(blob_gets))"
drop_outage_leases() { # the leases made since the step began: only the killed pulls' are left
  local id
  [ -n "${LEASES_BEFORE+x}" ] || return 0
  for id in $("${CTR[@]}" leases ls -q 2>/dev/null); do
    grep -qxF "$id" <<<"$LEASES_BEFORE" || "${CTR[@]}" leases delete "$id" >/dev/null 2>&1
  done
}
runtime_wait_reported() {
  ni_json && jq -e --arg r "$PROXY/$OUTAGE_REPO/" '[.status.imageStatuses | to_entries[]
    | select(.key | startswith($r)) | .value.tags[]? | .message // ""
    | select(contains("container runtime unavailable"))] | length > 0' "$WORK/ni.json" >/dev/null
}
wait_for 30 "the agent to report that it waits for the runtime" runtime_wait_reported
REPORT_MS=$(($(now_ms) - T_KILL))
# Down for at least 5 s, then back as kube-local starts it (the node run dir's socket link renewed).
until [ $(($(now_ms) - T_KILL)) -ge 5000 ]; do sleep 0.2; done
"$KUBE_LOCAL_DIR/up" --quiet >"$WORK/up-6b.log" 2>&1 || die "restarting containerd: $(tail -3 "$WORK/up-6b.log")"
CONTAINERD_KILLED=
RESTART_MS=$(($(now_ms) - T_KILL))
all_done() { for i in 1 2 3; do job_completed "pull-out-$i" || return 1; done; }
wait_for 180 "the three jobs to complete" all_done
DONE_MS=$(($(now_ms) - T_KILL))
for i in 1 2 3; do
  status=$(jq -c '.status | {succeeded, failed, active}' "$WORK/job-pull-out-$i.json")
  [ "$(jq -r '"\(.succeeded) \(.failed) \(.active)"' <<<"$status")" = "1 0 0" ] ||
    die "job pull-out-$i status: $status"
done
ni_json
[ "$(out_phases)" = "Succeeded Succeeded Succeeded " ] || die "tags after the outage: $(out_phases)"
for i in 1 2 3; do
  k -n "$NS" delete imagepulljobs.apps.kruise.io "pull-out-$i" --wait=false >/dev/null ||
    die "deleting pull-out-$i"
done
for i in 1 2 3; do wait_for 30 "job pull-out-$i to be gone" job_gone "pull-out-$i"; done
drop_outage_leases
remove_repo_images "$OUTAGE_REPO"
step_done "containerd killed with the three tags $pulling_at_kill; the wait for the runtime reported after $(secs "$REPORT_MS")s, containerd back after $(secs "$RESTART_MS")s, all three jobs succeeded (backoffLimit 0, failed 0) $(secs "$DONE_MS")s after the kill ($(blob_gets) blob GETs)"

# --- 7. both managers stopped --------------------------------------------------------------------
step 7 "both managers stopped: pods are still created"
kill "${MPID[$SURVIVOR]}"
t=$(now_ms)
exited() { ! alive "${MPID[$SURVIVOR]}"; }
wait_for 20 "manager $SURVIVOR to exit on SIGTERM" exited
wait "${MPID[$SURVIVOR]}"
rc=$?
unset "MPID[$SURVIVOR]"
STOP_MS=$(($(now_ms) - t))
[ "$rc" = 0 ] || die "manager $SURVIVOR exited $rc on SIGTERM"
[ -z "$(lease_holder)" ] || die "the Lease is still held by $(lease_holder)"
# Pods bound to a node that does not exist: created, never started.
create_pod() { # NAMESPACE NAME; sets CREATE_MS
  local t0
  t0=$(now_ms)
  cat <<EOF | k create -f - >"$WORK/pod-$2.out" 2>&1 || die "creating pod $1/$2 with the managers down: $(cat "$WORK/pod-$2.out")"
apiVersion: v1
kind: Pod
metadata: {name: $2, namespace: $1}
spec:
  nodeName: kruise-e2e-nowhere
  containers: [{name: c, image: $BB}]
EOF
  CREATE_MS=$(($(now_ms) - t0))
}
create_pod kube-system kruise-e2e-manager-ks
KS_MS=$CREATE_MS
create_pod "$NS" plain-pod
NS_MS=$CREATE_MS
ks_label=$(k get namespace kube-system -o jsonpath='{.metadata.labels.kubernetes\.io/metadata\.name}')
k -n kube-system delete pod kruise-e2e-manager-ks --grace-period=0 --force >/dev/null 2>&1
k -n "$NS" delete pod plain-pod --grace-period=0 --force >/dev/null 2>&1
# Our own kinds keep failurePolicy Fail: refused while no replica answers.
if k -n "$NS" create -f "$WORK/job-tls.yaml" --dry-run=server >"$WORK/job-down.out" 2>&1; then
  die "an ImagePullJob was admitted with both managers down"
fi
grep -q 'failed calling webhook' "$WORK/job-down.out" || die "unexpected refusal: $(cat "$WORK/job-down.out")"
why=$(grep -o 'connect: [a-z ]*' "$WORK/job-down.out" | head -1)
step_done "manager $SURVIVOR exited 0 in $(secs "$STOP_MS")s, Lease released; pod in kube-system created in ${KS_MS} ms (namespace label kubernetes.io/metadata.name='${ks_label}': on 1.20 not excluded by the selector, admitted by failurePolicy Ignore), pod in $NS created in ${NS_MS} ms (failurePolicy Ignore); ImagePullJob refused: failed calling webhook (${why:-?})"

# --- 8. the manager as a Deployment ------------------------------------------------------------
step 8 "the manager as the kube-local Deployment (image from scripts/build-image): Ready, leads, admits"
push_image kruise-manager "$MANAGER" manager-e2e "$WORK/manager-image"
MDIGEST=${PUSHED_IMAGE##*@}
render_overlay kube-local "$DAEMON_IMAGE" "$WORK/deployment.yaml" "$WORK/deployment-own.yaml" "$PUSHED_IMAGE"
DEPLOY=$(python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["metadata"]["name"])' "$WORK/deployment.yaml")
# As on a fresh install: no NodeImage (the new manager creates it), and the first ImagePullJob is
# created the moment the new manager's webhook admits it. Its status.desired is timed: OpenKruise's
# e2e expects desired = the node count within 3 s of the creation. Measured (issue 40): with the
# Lease released by the previous manager (step 7), controllers start 0.2 s after the webhook
# listens and desired follows the job in ~0.3 s. The one start-up wait that can break the 3 s is
# the Lease: webhooks serve on every replica before leadership, so with a Lease its previous
# holder did not release (killed, force-deleted) the job is admitted at once but reconciled only
# when the Lease is taken, lease-duration + up to 1.2 x retry-period after the new manager's first
# look at it (15 s + 2.4 s by default, as client-go: the holder's renewTime is not trusted across
# clocks). A stale Lease measured here: job admitted at 3.3 s, lease taken at 17.5 s, desired
# 14.8 s after the creation; the manager's log then shows "new leader observed: <old holder>"
# long before "acquired lease".
k delete nodeimages.apps.kruise.io "$NODE" --ignore-not-found --wait=true --timeout=30s >/dev/null 2>&1
cat >"$WORK/job-first.yaml" <<EOF
apiVersion: apps.kruise.io/v1beta1
kind: ImagePullJob
metadata: {name: first-job, namespace: $NS}
spec:
  image: $BB
  parallelism: 1
  selector: {names: [$NODE]}
  completionPolicy: {type: Always}
EOF
t=$(now_ms)
k apply -f "$WORK/deployment.yaml" >/dev/null || die "applying the manager Deployment"
first_created() { k create -f "$WORK/job-first.yaml" >/dev/null 2>&1; }
wait_for 120 "the first ImagePullJob to be admitted by the new manager" first_created
FIRST_T=$(now_ms)
first_desired() { job_json first-job && jq -e '.status.desired == 1' "$WORK/job-first-job.json" >/dev/null; }
wait_for 60 "status.desired = 1 of the first ImagePullJob" first_desired
DESIRED_MS=$(($(now_ms) - FIRST_T))
if ! k -n "$KNS" rollout status "deployment/$DEPLOY" --timeout=120s >"$WORK/rollout.log" 2>&1; then
  k -n "$KNS" describe pods -l "$(k -n "$KNS" get deploy "$DEPLOY" -o jsonpath='{.spec.selector.matchLabels}' |
    jq -r 'to_entries | map("\(.key)=\(.value)") | join(",")')" 2>/dev/null | tail -30
  k -n "$KNS" logs "deployment/$DEPLOY" --tail=30 2>/dev/null
  die "the manager Deployment did not become Ready: $(cat "$WORK/rollout.log")"
fi
ROLLOUT_MS=$(($(now_ms) - t))
MPOD=$(k -n "$KNS" get pods -o json | jq -r --arg img "$MDIGEST" \
  '.items[] | select(.spec.containers[0].image | endswith($img)) | .metadata.name' | head -1)
[ -n "$MPOD" ] || die "no pod of the manager Deployment"
held_by_pod() { [[ "$(lease_holder)" == "${MPOD}_"* ]]; }  # identity: POD_NAME_<random>
wait_for 30 "the Deployment's replica $MPOD to take the Lease" held_by_pod
LEAD_MS=$(($(now_ms) - t))
admits() { k -n "$NS" create -f "$WORK/job-tls.yaml" --dry-run=server >/dev/null 2>&1; }
wait_for 30 "an ImagePullJob to be admitted through the Deployment's webhook" admits
# The manager's start-up from its log (ms after the Deployment was applied).
MLOG=$(k -n "$KNS" logs "$MPOD" 2>/dev/null)
log_at() { # TEXT: ms after the apply of the first log line containing TEXT, or "-"
  local ts
  ts=$(grep -m1 -F "$1" <<<"$MLOG" | cut -d' ' -f1)
  [ -n "$ts" ] && ts=$(date -d "$ts" +%s%3N 2>/dev/null) && echo $((ts - t)) || echo -
}
STARTUP="log: first line $(log_at "$(head -n 1 <<<"$MLOG" | cut -d' ' -f1)") ms, caches synced $(log_at "caches synced") ms, webhook listening $(log_at "webhook server listening") ms, lease $(log_at "acquired lease") ms, controllers $(log_at "leader-only runnables") ms, imagepulljob workers $(log_at "imagepulljob: starting") ms, NodeImage created $(log_at "created NodeImage $NODE") ms; first job created at $((FIRST_T - t)) ms, status.desired=1 $((DESIRED_MS)) ms later"
say "manager start-up: $STARTUP"
[ "$DESIRED_MS" -le 3000 ] || die "the first ImagePullJob got status.desired = 1 only after $DESIRED_MS ms ($STARTUP)"
k -n "$NS" delete imagepulljobs.apps.kruise.io first-job --wait=true --timeout=30s >/dev/null 2>&1 ||
  die "deleting the first ImagePullJob through the Deployment's manager"
mpid=$(pgrep -x kruise-manager | head -1)
MEM="?"
[ -n "$mpid" ] && MEM=$(awk '/^RssAnon/ {a=$2} /^VmRSS/ {r=$2} END {printf "RssAnon %.1f MiB, VmRSS %.1f MiB", a/1024, r/1024}' "/proc/$mpid/status")
k delete -f "$WORK/deployment.yaml" --wait=true --timeout=60s >/dev/null 2>&1 || die "deleting the manager Deployment"
step_done "image kruise-manager@${MDIGEST:7:12}; rollout Ready (readiness = TLS round trip to itself) after $(secs "$ROLLOUT_MS")s, $MPOD took the Lease after $(secs "$LEAD_MS")s, ImagePullJob admitted through it; first ImagePullJob after the start: $STARTUP; in-cluster idle $MEM"

say "all passed in $((SECONDS - T0))s"
for r in "${RESULTS[@]}"; do echo "  $r"; done
