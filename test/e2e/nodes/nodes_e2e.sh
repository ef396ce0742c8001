#!/usr/bin/env bash
# kruise-daemon on every node of a 3-node kube-local, ImagePullJob fan-out across real nodes, a CRR
# on an extra node (GitHub issue 18). Each node is its own kubelet and containerd; one DaemonSet
# (deploy/overlays/kube-local: the node run dir, an ephemeral health port per agent) serves them.
#
#   1. `up --nodes 3` (the count found is restored at the end); deploy/overlays/kube-local without
#      the manager Deployment, one kruise-manager on the host; one Ready agent per node;
#   2. an ImagePullJob over all nodes: succeeded=3, the image in each node's containerd (so each
#      agent pulled into its own node's runtime);
#   3. parallelism 1 (pulls slowed by a throttling proxy): the NodeImages, watched throughout,
#      never show more than one node's tag Pulling;
#   4. selector by zone label (zone-b), selector.names (localhost, kl-node-3), podSelector (a pod
#      on kl-node-3): the image lands on the selected nodes and on no other;
#   5. a ContainerRecreateRequest on a pod of kl-node-2 is executed by kl-node-2's agent only;
#   6. a node deleted during a job (`up --nodes 2` while it pulls, parallelism 1): the job
#      completes with the nodes that remain (desired 2), kl-node-3's NodeImage goes with its Node,
#      failedNodes names no node.
#
# Everything it creates is deleted again, also on failure; the node count is restored.
# Usage: nodes_e2e.sh KRUISE_MANAGER_BINARY KRUISE_DAEMON_BINARY
# Environment: KRUISE_KUBE_LOCAL_ENV, KUBE_LOCAL (the tool, default ../shared/kube-local),
# KRUISE_E2E_NODES_PORT_BASE (default 16460; base..base+3: manager webhook, health, metrics, proxy).
set -uo pipefail

HERE=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
T0=$SECONDS
# shellcheck source=../lib.sh
. "$ROOT/test/e2e/lib.sh"
binaries_from_args "${1:-}" "${2:-}"
kube_local_preflight jq curl umoci skopeo ctr python3
KL=${KUBE_LOCAL:-$ROOT/../shared/kube-local}
[ -x "$KL/up" ] || die "no kube-local tool at $KL (set KUBE_LOCAL)"
ENV_FILE=${KRUISE_KUBE_LOCAL_ENV:-${KUBE_LOCAL_STATE:-/tmp/kube-local}/env}

BASE=${KRUISE_E2E_NODES_PORT_BASE:-16460}
PROXY=127.0.0.1:$((BASE + 3))
NS=kruise-e2e-nodes
REPO=kruise-e2e-nodes # test images img-<step>:1, random layers, built when missing
REG=$KUBE_LOCAL_REGISTRY
NODES_FOUND=$KUBE_LOCAL_NODES
WORK=$(mktemp -d "${TMPDIR:-/tmp}/nodes-e2e.XXXXXX")
PIDS=()

require_free_ports KRUISE_E2E_NODES_PORT_BASE "$BASE" $((BASE + 1)) $((BASE + 2)) $((BASE + 3))

reload_env() { # after `up --nodes N`: the per-node variables changed
  # shellcheck disable=SC1090
  . "$ENV_FILE"
  NODE_NAMES=($KUBE_LOCAL_NODE_NAMES)
}
ctr_of() { # NODE -> that node's ctr command line
  local i
  [ "$1" = "$KUBE_LOCAL_NODE_NAME" ] && { echo "$KUBE_LOCAL_CTR"; return; }
  for i in 2 3 4; do
    local n="KUBE_LOCAL_NODE_NAME_$i" c="KUBE_LOCAL_CTR_$i"
    [ "${!n:-}" = "$1" ] && { echo "${!c}"; return; }
  done
  return 1
}
remove_test_images_everywhere() {
  local node c
  for node in "${NODE_NAMES[@]}"; do
    c=$(ctr_of "$node") || continue
    # shellcheck disable=SC2206 # a command line, split on purpose
    CTR=($c)
    remove_repo_images "$REPO"
  done
}
has_image() { # NODE REF
  local c
  c=$(ctr_of "$1") || return 1
  # Not `ctr | grep -q`: grep quitting at the first match makes ctr die of SIGPIPE, and pipefail
  # turns a found image into a miss.
  grep -qxF "$2" <<<"$($c images ls -q 2>/dev/null)"
}
nodes_with() { # REF -> the nodes whose containerd holds it, sorted, space separated
  local node out=()
  for node in "${NODE_NAMES[@]}"; do has_image "$node" "$1" && out+=("$node"); done
  echo "${out[*]}"
}

cleanup() {
  local rc=$?
  set +e
  local t0=$SECONDS
  if [ "$rc" != 0 ]; then
    say "manager log (tail):"
    tail -n 20 "$WORK/manager.log" 2>/dev/null | sed 's/^/    /'
    say "daemon pods:"
    k -n kruise-system get pods -l control-plane=daemon -o wide 2>&1 | sed 's/^/    /'
    k -n kruise-system get events --sort-by=.lastTimestamp 2>/dev/null | tail -n 15 | sed 's/^/    /'
  fi
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  delete_test_deployment "$WORK" "$NS"
  remove_test_images_everywhere
  say "cleanup: test objects deleted ($((SECONDS - t0))s)"
  if [ "$(. "$ENV_FILE" && echo "$KUBE_LOCAL_NODES")" != "$NODES_FOUND" ]; then
    "$KL/up" --nodes "$NODES_FOUND" --quiet >/dev/null 2>&1 || say "restoring $NODES_FOUND nodes failed"
    say "cleanup: kube-local back to $NODES_FOUND node(s) ($((SECONDS - t0))s)"
  fi
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT

# --- 1. three nodes, the agent on each ------------------------------------------------------------
step 1 "3 nodes, the daemon DaemonSet on each, one manager"
"$KL/up" --nodes 3 --quiet >"$WORK/up.log" 2>&1 || die "up --nodes 3: $(tail -3 "$WORK/up.log")"
reload_env
[ "${#NODE_NAMES[@]}" = 3 ] || die "kube-local has nodes '${NODE_NAMES[*]}', want 3"
all_ready() {
  [ "$(k get nodes -o json | jq '[.items[] | select(any(.status.conditions[]; .type == "Ready" and .status == "True"))] | length')" = 3 ]
}
wait_for 120 "3 Ready nodes" all_ready
delete_test_deployment "$WORK" "$NS" # leftovers of an interrupted run
k delete namespace "$NS" --ignore-not-found --wait=true --timeout=90s >/dev/null 2>&1
push_image kruise-daemon "$DAEMON" nodes-e2e "$WORK/image" --user 0:0
DAEMON_IMAGE=$PUSHED_IMAGE
render_overlay kube-local "$DAEMON_IMAGE" "$WORK/rendered.yaml" "$WORK/own-objects.yaml"
k apply -f "$WORK/rendered.yaml" >"$WORK/apply.log" 2>&1 || die "kubectl apply: $(tail -3 "$WORK/apply.log")"
k create namespace "$NS" >/dev/null || die "creating namespace $NS"
k wait --for condition=established --timeout=60s crd/nodeimages.apps.kruise.io \
  crd/imagepulljobs.apps.kruise.io crd/containerrecreaterequests.apps.kruise.io >/dev/null ||
  die "CRDs not established"
t=$(now_ms)
start_host_manager "$MANAGER" "$WORK" "$BASE"
declare -A AGENT # node -> daemon pod
agents_ready() {
  local node pod
  AGENT=()
  while read -r node pod; do [ -n "$node" ] && AGENT[$node]=$pod; done < <(daemon_pods "$DAEMON_IMAGE")
  [ "${#AGENT[@]}" = 3 ]
}
wait_for 150 "a Ready agent on each of the 3 nodes" agents_ready
AGENTS_MS=$(($(now_ms) - t))
# img-gone20 is larger: its job (parallelism 1, through the 1 MiB/s proxy: 20 s a node, 60 s for
# three) must outlast `up --nodes 2`, which on a loaded machine outlasted the pulls of an 8 MiB
# image.
for name in all par zone names pod gone20; do
  curl -sfI -H "$ACCEPT" "http://$REG/v2/$REPO/img-$name/manifests/1" >/dev/null && continue
  mib=2
  [ "$name" = gone20 ] && mib=20
  make_image "$WORK/img-$name" "$mib" >"$WORK/img-$name.log" 2>&1 || die "building image img-$name"
  skopeo copy --quiet --dest-tls-verify=false "oci:$WORK/img-$name:1" "docker://$REG/$REPO/img-$name:1" ||
    die "pushing $REPO/img-$name:1"
done
remove_test_images_everywhere
"$ROOT/test/e2e/daemon/throttle_proxy.py" --listen "$PROXY" --upstream "http://$REG" \
  --rate $((1 << 20)) --log "$WORK/proxy.log" >"$WORK/proxy.out" 2>&1 &
PIDS+=($!)
wait_for 10 "the throttling proxy on $PROXY" grep -q ready "$WORK/proxy.out"
step_done "nodes ${NODE_NAMES[*]}; agents ${AGENT[*]} Ready $(secs "$AGENTS_MS")s after the manager started"

# --- helpers for jobs ------------------------------------------------------------------------------
make_job() { # NAME IMAGE SPEC-LINES...: an ImagePullJob with the extra spec lines
  local name=$1 image=$2
  shift 2
  {
    printf 'apiVersion: apps.kruise.io/v1alpha1\nkind: ImagePullJob\nmetadata: {name: %s, namespace: %s}\nspec:\n' "$name" "$NS"
    printf '  image: %s\n  pullPolicy: {backoffLimit: 1, timeoutSeconds: 60}\n' "$image"
    printf '  completionPolicy: {type: Always, activeDeadlineSeconds: 180}\n'
    for line in "$@"; do printf '  %s\n' "$line"; done
  } | k create -f - >"$WORK/job-$name.out" 2>&1 || die "creating job $name: $(cat "$WORK/job-$name.out")"
}
job_json() { k -n "$NS" get imagepulljobs.apps.kruise.io "$1" -o json >"$WORK/job-$1.json" 2>/dev/null; }
job_completed() { job_json "$1" && jq -e '(.status.completionTime // "") != ""' "$WORK/job-$1.json" >/dev/null; }
job_status() { jq -c '.status | {desired, succeeded, failed, failedNodes}' "$WORK/job-$1.json"; }
expect_status() { # JOB DESIRED SUCCEEDED
  local s
  s=$(jq -r '"\(.status.desired) \(.status.succeeded) \(.status.failed) \(.status.failedNodes // [] | length)"' "$WORK/job-$1.json")
  [ "$s" = "$2 $3 0 0" ] || die "job $1: $(job_status "$1"), want desired $2, succeeded $3, none failed"
}
run_job() { # NAME IMAGE WANT-DESIRED SPEC-LINES...: creates the job, waits for completion
  local name=$1 image=$2 want=$3
  shift 3
  make_job "$name" "$image" "$@"
  wait_for 120 "job $name to complete" job_completed "$name"
  expect_status "$name" "$want" "$want"
}

# --- 2. all nodes -------------------------------------------------------------------------------
step 2 "an ImagePullJob over all nodes"
IMG=$REG/$REPO/img-all:1
run_job all "$IMG" 3
[ "$(nodes_with "$IMG")" = "${NODE_NAMES[*]}" ] || die "img-all is on '$(nodes_with "$IMG")'"
step_done "succeeded=3; $IMG in the containerd of ${NODE_NAMES[*]}"

# --- 3. parallelism 1 ----------------------------------------------------------------------------
step 3 "parallelism 1: one node Pulling at a time"
IMG=$PROXY/$REPO/img-par:1
timeout 300 "$KUBECTL" get nodeimages.apps.kruise.io -w -o json 2>/dev/null |
  jq -c --unbuffered --arg i "${IMG%:*}" '{n: .metadata.name,
    p: ([.status.imageStatuses[$i].tags[]? | select(.tag == "1") | .phase][0] // "")}' \
    >"$WORK/par.watch" &
PIDS+=($!)
wait_for 20 "the NodeImage watch" test -s "$WORK/par.watch"
run_job par "$IMG" 3 "parallelism: 1"
kill "${PIDS[-1]}" 2>/dev/null
MAX_PULLING=$(jq -rs 'reduce .[] as $e ({m: 0, s: {}}; .s[$e.n] = $e.p
  | .m = ([.m, ([.s[] | select(. == "Pulling")] | length)] | max)) | .m' "$WORK/par.watch")
SEEN_PULLING=$(jq -rs '[.[] | select(.p == "Pulling") | .n] | unique | length' "$WORK/par.watch")
[ "$MAX_PULLING" = 1 ] || die "parallelism 1 but $MAX_PULLING nodes were Pulling at once"
[ "$SEEN_PULLING" = 3 ] || die "only $SEEN_PULLING nodes were seen Pulling (watch too late?)"
[ "$(nodes_with "$IMG")" = "${NODE_NAMES[*]}" ] || die "img-par is on '$(nodes_with "$IMG")'"
step_done "succeeded=3; each node seen Pulling, at most $MAX_PULLING at once ($(wc -l <"$WORK/par.watch") NodeImage events)"

# --- 4. selectors ----------------------------------------------------------------------------------
step 4 "selector by zone, selector.names, podSelector"
IMG=$REG/$REPO/img-zone:1
run_job zone "$IMG" 1 "selector: {matchLabels: {topology.kubernetes.io/zone: zone-b}}"
[ "$(nodes_with "$IMG")" = kl-node-2 ] || die "zone-b job: img-zone is on '$(nodes_with "$IMG")'"
IMG=$REG/$REPO/img-names:1
run_job names "$IMG" 2 "selector: {names: [localhost, kl-node-3]}"
[ "$(nodes_with "$IMG")" = "localhost kl-node-3" ] || die "names job: img-names is on '$(nodes_with "$IMG")'"
cat <<EOF | k create -f - >/dev/null || die "creating pod selected"
apiVersion: v1
kind: Pod
metadata: {name: selected, namespace: $NS, labels: {kruise-e2e: selected}}
spec:
  nodeName: kl-node-3
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers: [{name: app, image: $KUBE_LOCAL_BUSYBOX_IMAGE, command: [sleep, "3600"]}]
EOF
pod_running() { # NAME
  [ "$(k -n "$NS" get pod "$1" -o jsonpath='{.status.phase}' 2>/dev/null)" = Running ]
}
wait_for 60 "pod selected to run on kl-node-3" pod_running selected
IMG=$REG/$REPO/img-pod:1
run_job pod "$IMG" 1 "podSelector: {matchLabels: {kruise-e2e: selected}}"
[ "$(nodes_with "$IMG")" = kl-node-3 ] || die "podSelector job: img-pod is on '$(nodes_with "$IMG")'"
step_done "zone-b -> kl-node-2 only; names -> localhost, kl-node-3 only; podSelector -> kl-node-3 only"

# --- 5. CRR on an extra node ---------------------------------------------------------------------
step 5 "a ContainerRecreateRequest on a pod of kl-node-2"
cat <<EOF | k create -f - >/dev/null || die "creating pod crr-target"
apiVersion: v1
kind: Pod
metadata: {name: crr-target, namespace: $NS}
spec:
  nodeName: kl-node-2
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers: [{name: app, image: $KUBE_LOCAL_BUSYBOX_IMAGE, command: [sleep, "3600"]}]
EOF
wait_for 60 "pod crr-target to run on kl-node-2" pod_running crr-target
OLD_ID=$(k -n "$NS" get pod crr-target -o jsonpath='{.status.containerStatuses[0].containerID}')
cat <<EOF | k create -f - >/dev/null || die "creating CRR restart-app"
apiVersion: apps.kruise.io/v1alpha1
kind: ContainerRecreateRequest
metadata: {name: restart-app, namespace: $NS}
spec:
  podName: crr-target
  containers: [{name: app}]
  strategy: {terminationGracePeriodSeconds: 1}
EOF
crr_completed() {
  k -n "$NS" get containerrecreaterequests.apps.kruise.io restart-app -o json >"$WORK/crr.json" 2>/dev/null &&
    [ "$(jq -r '.status.phase // empty' "$WORK/crr.json")" = Completed ]
}
wait_for 60 "CRR restart-app to complete" crr_completed
[ "$(jq -r '.metadata.labels["crr.apps.kruise.io/node-name"]' "$WORK/crr.json")" = kl-node-2 ] ||
  die "CRR node-name label: $(jq -c .metadata.labels "$WORK/crr.json")"
restarted() {
  k -n "$NS" get pod crr-target -o json >"$WORK/pod.json" 2>/dev/null &&
    jq -e --arg id "$OLD_ID" '.status.containerStatuses[0] | .containerID != $id and .restartCount == 1
      and .state.running != null' "$WORK/pod.json" >/dev/null
}
wait_for 30 "the kubelet of kl-node-2 to report app restarted" restarted
for node in "${NODE_NAMES[@]}"; do
  n=$(k -n kruise-system logs "${AGENT[$node]}" 2>/dev/null | grep -c "ContainerRecreateRequest $NS/restart-app completed")
  want=0
  [ "$node" = kl-node-2 ] && want=1
  [ "$n" = "$want" ] || die "the agent on $node logged restart-app completed $n time(s), want $want"
done
step_done "completed by kl-node-2's agent (${AGENT[kl-node-2]}) only; restartCount 0 -> 1"

# --- 6. a node deleted during a job -------------------------------------------------------------
step 6 "a node deleted during a job (up --nodes 2)"
IMG=$PROXY/$REPO/img-gone20:1
make_job del "$IMG" "parallelism: 1"
t=$(now_ms)
ni_pulling() { # -> a node whose NodeImage reports the tag Pulling
  PULLING_NODE=$(k get nodeimages.apps.kruise.io -o json | jq -r --arg i "${IMG%:*}" '[.items[]
    | select(any(.status.imageStatuses[$i].tags[]?; .tag == "1" and .phase == "Pulling"))
    | .metadata.name][0] // empty')
  [ -n "$PULLING_NODE" ]
}
wait_for 60 "a node Pulling img-gone20" ni_pulling
"$KL/up" --nodes 2 --quiet >"$WORK/up2.log" 2>&1 || die "up --nodes 2: $(tail -3 "$WORK/up2.log")"
DELETED_MS=$(($(now_ms) - t))
! job_completed del || die "job del completed before kl-node-3 was deleted: the test needs a slower pull"
node_gone() { ! k get node kl-node-3 >/dev/null 2>&1; }
wait_for 30 "Node kl-node-3 to be gone" node_gone
wait_for 120 "job del to complete" job_completed del
ni_gone() { ! k get nodeimages.apps.kruise.io kl-node-3 >/dev/null 2>&1; }
wait_for 60 "NodeImage kl-node-3 to be deleted with its Node" ni_gone
expect_status del 2 2
reload_env
[ "$(nodes_with "$IMG")" = "localhost kl-node-2" ] || die "img-gone20 is on '$(nodes_with "$IMG")'"
step_done "node kl-node-3 deleted while $PULLING_NODE pulled ($(secs "$DELETED_MS")s into the job); job completed $(job_status del); NodeImage kl-node-3 deleted"

say "all passed in $((SECONDS - T0))s"
for r in "${RESULTS[@]}"; do echo "  $r"; done
