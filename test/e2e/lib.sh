# Helpers shared by the kube-local end-to-end scripts (test/e2e/*/..._e2e.sh, test/deploy/validate.sh).
# T0 is the start say counts seconds from: set it, or it is when lib.sh is sourced. Results
# collected with `result` are in the array RESULTS.
# shellcheck shell=bash
T0=${T0:-$SECONDS}

# A line with the wall-clock time and the seconds since T0.
say() { echo "[$(date -u +%H:%M:%S) +$((SECONDS - T0))s] $*"; }
die() {
  say "FAIL $*"
  exit 1
}
# A missing test bed: a skip, or a failure where CI requires the e2e tests (KRUISE_E2E_REQUIRED=1).
skip_or_fail() {
  if [ "${KRUISE_E2E_REQUIRED:-0}" = 1 ]; then
    echo "FAIL (KRUISE_E2E_REQUIRED=1): $*"
    exit 1
  fi
  echo "SKIP: $*"
  exit 0
}
now_ms() { date +%s%3N; }
# Milliseconds as seconds with one decimal.
secs() { awk -v ms="$1" 'BEGIN { printf "%.1f", ms / 1000 }'; }
RESULTS=()
result() {
  RESULTS+=("$*")
  say "ok   $*"
}
# step N TEXT / step_done RESULT: a numbered step and its timed result line.
step() { say "=== step $1: $2"; STEP_T=$(now_ms); STEP=$1; }
step_done() { result "step $STEP ($(secs $(($(now_ms) - STEP_T)))s): $*"; }
# require_free_ports SETTING PORT...: dies (removing $WORK) when something listens on a port;
# SETTING names the variable that moves the ports.
require_free_ports() {
  local setting=$1 port
  shift
  for port in "$@"; do
    ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || {
      [ -n "${WORK:-}" ] && rm -rf "$WORK"
      die "port $port is in use ($setting)"
    }
  done
}
# wait_for SECONDS WHAT COMMAND...: polls COMMAND every 0.2 s until it succeeds; dies after SECONDS
# with WHAT as the reason.
wait_for() {
  local secs=$1 what=$2
  shift 2
  local deadline=$(($(now_ms) + secs * 1000))
  until "$@"; do
    [ "$(now_ms)" -lt "$deadline" ] || die "timed out after ${secs}s waiting for $what"
    sleep 0.2
  done
}

# The bound for waits until a deleted pod's object is gone. kube-local's kubelet (1.20) removes the
# object once the pod's sandbox is removed, and now and then it leaves that sandbox to its
# once-a-minute container garbage collection (containerd's log shows the removal 56 s after the
# others): 2 of 48 deletions of a just-started pod took 48 and 68 s (the rest 7-9 s).
POD_GONE_TIMEOUT=150

# kube_local_preflight TOOL...: loads kube-local's env file (KRUISE_KUBE_LOCAL_ENV, else
# ${KUBE_LOCAL_STATE:-/tmp/kube-local}/env) and checks what every kube-local e2e needs: a full
# cluster (with a node), kubectl, the TOOLs, an answering API server, a Ready node. Defines
# KUBECTL and k() (kubectl with a 60 s bound) and drops proxy variables (everything is loopback).
# Skips (or fails under KRUISE_E2E_REQUIRED=1) when something is missing.
kube_local_preflight() {
  local env_file=${KRUISE_KUBE_LOCAL_ENV:-${KUBE_LOCAL_STATE:-/tmp/kube-local}/env} tool
  [ -f "$env_file" ] || skip_or_fail "no kube-local env file at $env_file (start ../shared/kube-local/up)"
  # shellcheck disable=SC1090
  . "$env_file"
  [ "${KUBE_LOCAL_MODE:-full}" = full ] && [ -n "${KUBE_LOCAL_REGISTRY:-}" ] ||
    skip_or_fail "kube-local runs without a node (--control-plane-only)"
  KUBECTL=${KUBE_LOCAL_KUBECTL:-$(command -v kubectl)}
  [ -x "$KUBECTL" ] || skip_or_fail "no kubectl"
  for tool in "$@"; do
    command -v "$tool" >/dev/null || skip_or_fail "$tool is required"
  done
  k() { timeout 60 "$KUBECTL" "$@"; }
  k get --raw /readyz >/dev/null 2>&1 || skip_or_fail "kube-local's API server does not answer"
  [ "$(k get node "$KUBE_LOCAL_NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ] ||
    skip_or_fail "node $KUBE_LOCAL_NODE_NAME is not Ready"
  unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
}

# make_image DIR MIB: an OCI layout at DIR holding image "1" with one layer of MIB MiB of random
# bytes (content no other image shares, so its pull is cold wherever it has not been pulled).
make_image() {
  local dir=$1 mib=$2
  umoci init --layout "$dir" && umoci new --image "$dir:1" &&
    umoci unpack --image "$dir:1" "$dir.bundle" >/dev/null &&
    head -c "${mib}M" /dev/urandom >"$dir.bundle/rootfs/random.bin" &&
    umoci repack --image "$dir:1" "$dir.bundle" && rm -rf "$dir.bundle"
}

# remove_repo_images REPO [DIGEST...]: deletes from containerd (the array CTR, a ctr command line)
# every image whose name contains /REPO/ or whose manifest digest is one of DIGEST, under all its
# names (tags, digests and the CRI's "sha256:<config>" ID record share the manifest digest), and
# waits for the garbage collection, so the next pull of them is cold.
remove_repo_images() {
  local repo=$1 refs
  shift
  mapfile -t refs < <("${CTR[@]}" images ls 2>/dev/null | awk -v repo="/$repo/" -v ours="$*" '
    BEGIN { n = split(ours, d, " "); for (i = 1; i <= n; i++) mine[d[i]] = 1 }
    NR > 1 { digest[$1] = $3; if (index($1, repo)) mine[$3] = 1 }
    END { for (r in digest) if (digest[r] in mine) print r }')
  [ "${#refs[@]}" = 0 ] || "${CTR[@]}" images rm --sync "${refs[@]}" >/dev/null 2>&1
}

# OCI manifest media types a registry may answer with (curl -H "$ACCEPT").
ACCEPT='Accept: application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json'
# push_image NAME BINARY TAG OUT [BUILD-IMAGE-ARG...]: builds NAME's image from BINARY with
# scripts/build-image into OUT and pushes it to kube-local's plain registry as kruise-cpp/NAME:TAG;
# sets PUSHED_IMAGE to its reference by digest, and SANITIZED_BUILD=1 for a sanitizer build.
push_image() {
  local name=$1 binary=$2 tag=$3 out=$4 digest
  shift 4
  ldd "$binary" 2>/dev/null | grep -Eq 'lib(t|a)san' && SANITIZED_BUILD=1
  "$ROOT/scripts/build-image" "$name" "$binary" "$@" --tag "$tag" --out "$out" \
    --push "$KUBE_LOCAL_REGISTRY" >"$out.log" 2>&1 || {
    cat "$out.log"
    die "scripts/build-image $name failed"
  }
  digest=$(curl -sfI -H "$ACCEPT" "http://$KUBE_LOCAL_REGISTRY/v2/kruise-cpp/$name/manifests/$tag" |
    tr -d '\r' | awk -F': ' 'tolower($1)=="docker-content-digest" {print $2}')
  [[ "$digest" == sha256:* ]] || die "no digest for the pushed $name image"
  PUSHED_IMAGE=$KUBE_LOCAL_REGISTRY/kruise-cpp/$name@$digest
}

# render_overlay OVERLAY DAEMON_IMAGE OUT OWN [MANAGER_IMAGE]: deploy/overlays/OVERLAY with the
# DaemonSet on DAEMON_IMAGE and on this instance's node run dir. Without MANAGER_IMAGE: everything
# but the manager Deployment (tests run managers on the host) to OUT, and the same minus CRDs and
# Namespaces (what a test deletes) to OWN. With it: only the Deployment, on MANAGER_IMAGE, to OUT
# and OWN. Sanitizer builds (push_image saw libtsan/libasan) run several times slower and larger:
# their pods get no resource limits and probes with 10 s timeouts.
render_overlay() {
  k kustomize "$ROOT/deploy/overlays/$1" >"$3" || die "kustomize failed"
  SANITIZED=${SANITIZED_BUILD:-} python3 - "$3" "$2" "$4" "${5:-}" <<'PYEOF' || die "rendering failed"
import os, re, sys, yaml
out, daemon_image, own_out, manager_image = sys.argv[1:5]
docs = [d for d in yaml.safe_load_all(open(out)) if d]
if manager_image:
    docs = [d for d in docs if d["kind"] == "Deployment"]
else:
    docs = [d for d in docs if d["kind"] != "Deployment"]
for d in docs:
    if d["kind"] not in ("DaemonSet", "Deployment"):
        continue
    pod = d["spec"]["template"]["spec"]
    for c in pod["containers"]:
        c["image"] = daemon_image if d["kind"] == "DaemonSet" else manager_image
        c["imagePullPolicy"] = "IfNotPresent"
        if os.environ.get("SANITIZED"):
            c.get("resources", {}).pop("limits", None)
            for probe in (c.get(k) for k in ("livenessProbe", "readinessProbe", "startupProbe")):
                if not probe:
                    continue
                probe["timeoutSeconds"] = max(probe.get("timeoutSeconds", 1), 10)
                probe["failureThreshold"] = max(probe.get("failureThreshold", 3), 6)
                if "exec" in probe:
                    probe["exec"]["command"] = [re.sub(r"^--timeout-seconds=\d+$", "--timeout-seconds=8", a)
                                                for a in probe["exec"]["command"]]
    # The overlay names the default instance's node run dir; use this instance's.
    for v in pod.get("volumes", []):
        if v.get("hostPath", {}).get("path") == "/run/kube-local-16400/node":
            v["hostPath"]["path"] = os.environ["KUBE_LOCAL_NODE_RUN_DIR"]
yaml.safe_dump_all(docs, open(out, "w"))
own = [d for d in docs if d["kind"] not in ("CustomResourceDefinition", "Namespace")]
yaml.safe_dump_all(own, open(own_out, "w"))
PYEOF
}

# deploy_manager_objects WORK NS [CRD...]: the kube-local overlay without the daemon DaemonSet and
# the manager Deployment (CRDs, namespaces, RBAC, Service, webhook configurations) applied, the
# CRDs of CloneSet, ImagePullJob and each CRD named (e.g. sidecarsets.apps.kruise.io) established,
# a fresh namespace NS (waiting, bounded, for one of an earlier run to be deleted).
# WORK/own-objects.yaml lists what delete_test_deployment removes. For tests of manager
# controllers that need no agent (test/e2e/cloneset, bench/cloneset).
deploy_manager_objects() {
  local work=$1 ns=$2 crd
  shift 2
  render_overlay kube-local unused "$work/rendered.yaml" "$work/own-objects.yaml"
  python3 - "$work/rendered.yaml" "$work/own-objects.yaml" <<'PYEOF' || die "filtering the overlay"
import sys, yaml
for path in sys.argv[1:]:
    docs = [d for d in yaml.safe_load_all(open(path)) if d and d["kind"] != "DaemonSet"]
    yaml.safe_dump_all(docs, open(path, "w"))
PYEOF
  k apply -f "$work/rendered.yaml" >"$work/apply.log" 2>&1 || die "kubectl apply: $(tail -3 "$work/apply.log")"
  for crd in clonesets.apps.kruise.io imagepulljobs.apps.kruise.io "$@"; do
    k wait --for condition=established --timeout=60s "crd/$crd" >/dev/null || die "CRD $crd not established"
  done
  ns_absent() { ! k get namespace "$1" >/dev/null 2>&1; }
  wait_for 180 "namespace $ns of an earlier run to be deleted" ns_absent "$ns"
  k create namespace "$ns" >/dev/null || die "creating namespace $ns"
}

# start_host_manager MANAGER WORK PORT: one kruise-manager on the host with the admin kubeconfig,
# its webhooks registered by URL on 127.0.0.1:PORT, /readyz on PORT+1, metrics on PORT+2, log in
# WORK/manager.log; no leader election (the only replica). Sets MANAGER_PID; waits for /readyz.
# HOST_MANAGER_GATES (optional, e.g. PodUnavailableBudgetUpdateGate=true) adds feature gates.
start_host_manager() {
  local manager=$1 work=$2 port=$3
  env POD_NAMESPACE=kruise-system WEBHOOK_HOST=127.0.0.1 WEBHOOK_PORT="$port" \
    WEBHOOK_CERT_DIR="$work/certs" "$manager" --kubeconfig "$KUBECONFIG" \
    --webhook-bind-address=127.0.0.1 --health-probe-addr="127.0.0.1:$((port + 1))" \
    --metrics-addr="127.0.0.1:$((port + 2))" \
    --feature-gates=ImagePullJobGate=true${HOST_MANAGER_GATES:+,$HOST_MANAGER_GATES} \
    --nodeimage-creation-delay=0s >"$work/manager.log" 2>&1 &
  MANAGER_PID=$!
  HOST_MANAGER_HEALTH=127.0.0.1:$((port + 1))
  wait_for 60 "kruise-manager /readyz" host_manager_ready
}
host_manager_ready() {
  [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$HOST_MANAGER_HEALTH/readyz")" = 200 ]
}

# daemon_pods IMAGE: "node pod" lines of the Ready, not deleted kruise-daemon pods on IMAGE.
daemon_pods() {
  k -n kruise-system get pods -l control-plane=daemon -o json | jq -r --arg img "$1" \
    '.items[] | select(.metadata.deletionTimestamp == null) | select(.spec.containers[0].image == $img)
       | select(any(.status.conditions[]?; .type == "Ready" and .status == "True"))
       | "\(.spec.nodeName) \(.metadata.name)"'
}

# delete_test_deployment WORK NS: what start_host_manager and render_overlay's OWN file made, and
# the test namespace NS (finalizers of its jobs and CRRs stripped: no manager removes them now),
# the certificate Secret and every NodeImage; waits (bounded) until no daemon pod is left, as the
# next DaemonSet pod (another test's) needs the agent's node run dir to itself.
delete_test_deployment() {
  local work=$1 ns=$2 kind name
  [ -n "${MANAGER_PID:-}" ] && kill "$MANAGER_PID" 2>/dev/null && wait "$MANAGER_PID" 2>/dev/null
  MANAGER_PID=
  k delete mutatingwebhookconfiguration kruise-mutating-webhook-configuration --ignore-not-found >/dev/null 2>&1
  k delete validatingwebhookconfiguration kruise-validating-webhook-configuration --ignore-not-found >/dev/null 2>&1
  for kind in imagepulljobs.apps.kruise.io containerrecreaterequests.apps.kruise.io; do
    for name in $(k -n "$ns" get "$kind" -o name 2>/dev/null); do
      k -n "$ns" patch "$name" --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1
    done
  done
  k -n "$ns" delete pods --all --grace-period=0 --force >/dev/null 2>&1
  k delete namespace "$ns" --ignore-not-found --wait=false >/dev/null 2>&1
  [ -f "$work/own-objects.yaml" ] &&
    k delete -f "$work/own-objects.yaml" --ignore-not-found --wait=false >/dev/null 2>&1
  k -n kruise-system delete secret kruise-webhook-certs --ignore-not-found >/dev/null 2>&1
  k delete nodeimages.apps.kruise.io --all --wait=false >/dev/null 2>&1
  local deadline=$((SECONDS + 60))
  until daemon_pods_stopped || [ "$SECONDS" -ge "$deadline" ]; do sleep 0.5; done
}
# No kruise-daemon pod left. The kubelet here sometimes keeps a stopped pod for a minute more
# (KillContainer: NotFound in its log), and a pod of a node that was removed keeps its last status
# until the pod garbage collector's next pass: once none on an existing node reports a running
# container, the pod objects are force-deleted.
daemon_pods_stopped() {
  local pods nodes running
  pods=$(k -n kruise-system get pods -l control-plane=daemon -o json 2>/dev/null) || return 1
  [ "$(jq '.items | length' <<<"$pods")" = 0 ] && return 0
  nodes=$(k get nodes -o json 2>/dev/null | jq -c '[.items[].metadata.name]') || return 1
  running=$(jq --argjson nodes "$nodes" '[.items[] | select(.spec.nodeName as $n | $nodes | index($n))
    | .status.containerStatuses[]? | select(.state.running)] | length' <<<"$pods")
  [ "$running" = 0 ] || return 1
  k -n kruise-system delete pods -l control-plane=daemon --grace-period=0 --force >/dev/null 2>&1
  [ -z "$(k -n kruise-system get pods -l control-plane=daemon -o name 2>/dev/null)" ]
}

# binaries_from_args MANAGER DAEMON: the two binaries a script was given, both executable; sets
# MANAGER and DAEMON to their absolute paths, or dies with the usage.
binaries_from_args() {
  [ -n "${1:-}" ] && [ -x "$1" ] && [ -n "${2:-}" ] && [ -x "$2" ] ||
    die "usage: $0 KRUISE_MANAGER_BINARY KRUISE_DAEMON_BINARY (got '${1:-}' '${2:-}')"
  MANAGER=$(readlink -f "$1")
  DAEMON=$(readlink -f "$2")
}

# --- tests of manager controllers (test/e2e/{cloneset,statefulset,sidecarset,pub,workloadspread}) ---
# Their shape: manager_e2e_init; `trap 'manager_e2e_exit ...' EXIT` (or a cleanup function that
# ends in manager_e2e_report and manager_e2e_cleanup); step 1 deploy_manager_objects and
# start_host_manager; YAML through apply_stdin; pods watched with watch_app_pods; a leader's
# failover with start_leader_replicas and kill_leader.

# manager_e2e_init NAME DEFAULT_PORT_BASE PORTS MANAGER_BINARY: the start of test/e2e/NAME. Sets
# MANAGER to the binary's absolute path (dies with the usage when it is not executable), runs
# kube_local_preflight for jq, curl and python3, sets BASE from KRUISE_E2E_<NAME>_PORT_BASE (else
# DEFAULT_PORT_BASE) and dies unless BASE..BASE+PORTS-1 are free, NS=kruise-e2e-NAME, REG
# (kube-local's registry), WORK a fresh directory, PIDS=() (background processes
# manager_e2e_cleanup ends).
manager_e2e_init() {
  local name=$1 default_base=$2 ports=$3 setting
  setting=KRUISE_E2E_${name^^}_PORT_BASE
  [ -n "${4:-}" ] && [ -x "$4" ] || die "usage: $0 KRUISE_MANAGER_BINARY (got '${4:-}')"
  MANAGER=$(readlink -f "$4")
  kube_local_preflight jq curl python3
  BASE=${!setting:-$default_base}
  NS=kruise-e2e-$name
  REG=$KUBE_LOCAL_REGISTRY
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/$name-e2e.XXXXXX")
  PIDS=()
  # shellcheck disable=SC2046 # one port a word
  require_free_ports "$setting" $(seq "$BASE" $((BASE + ports - 1)))
}

# indent: the lines of stdin shifted right, under a `say` heading.
indent() { sed 's/^/    /'; }
# show_status KIND LINES: a heading and the first LINES lines of the status of each KIND in NS.
show_status() {
  say "$1:"
  k -n "$NS" get "$1" -o yaml 2>/dev/null | grep -A"$2" '^  status:' | indent
}

# manager_e2e_report EVENTS [COMMAND...]: what a failed run shows: the pods of NS, COMMAND's output
# (the test's own objects and their status, e.g. `show_status clonesets 30`), the last EVENTS
# events of NS, the manager log's tail.
manager_e2e_report() {
  local events=$1
  shift
  say "pods:"
  k -n "$NS" get pods -o wide --show-labels 2>/dev/null | indent
  [ "$#" = 0 ] || "$@"
  say "events (last $events):"
  k -n "$NS" get events --sort-by=.lastTimestamp 2>/dev/null | tail -"$events" | indent
  # A pod left Terminating: its finalizers, containers and what the kubelets logged about it.
  local uid summary
  while read -r uid summary; do
    say "terminating pod (uid $uid):"
    indent <<<"$summary"
    grep -h "$uid" "${KUBE_LOCAL_LOGS:-/nonexistent}"/kubelet*.log 2>/dev/null | tail -n 8 | cut -c1-300 | indent
  done < <(k -n "$NS" get pods -o json 2>/dev/null | jq -r '.items[] | select(.metadata.deletionTimestamp != null)
    | "\(.metadata.uid) \({name: .metadata.name, deletionTimestamp: .metadata.deletionTimestamp,
      finalizers: .metadata.finalizers, containers: [.status.containerStatuses[]? | {name, state}]} | tojson)"')
  say "manager log (tail):"
  tail -n 30 "$WORK/manager.log" 2>/dev/null | indent
}

# manager_e2e_cleanup RC [COMMAND...]: the end of an EXIT trap: ends PIDS and WATCH_PID, shows the
# tails of start_leader_replicas' logs when RC is not 0, runs COMMAND (what the test made beyond
# NS), delete_test_deployment, deletes the Lease of leader-elected managers and WORK (kept, and
# named, with KRUISE_E2E_KEEP_WORK=1), exits with RC.
manager_e2e_cleanup() {
  local rc=$1 pid r
  shift
  for pid in "${PIDS[@]}" ${WATCH_PID:-}; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  for r in a b; do
    [ -f "$WORK/manager-$r.log" ] && [ "$rc" != 0 ] && { say "manager $r log (tail):"; tail -n 15 "$WORK/manager-$r.log" | indent; }
  done
  [ "$#" = 0 ] || "$@"
  delete_test_deployment "$WORK" "$NS"
  k -n kruise-system delete lease kruise-manager --ignore-not-found >/dev/null 2>&1
  if [ -n "${KRUISE_E2E_KEEP_WORK:-}" ]; then say "kept $WORK"; else rm -rf "$WORK"; fi
  exit "$rc"
}

# trap 'manager_e2e_exit EVENTS DELETE [SHOW...]' EXIT: the whole EXIT trap of a test whose
# cleanup is no more than these two: manager_e2e_report EVENTS SHOW... when the test failed, then
# manager_e2e_cleanup with the command DELETE ("-": none).
manager_e2e_exit() {
  local rc=$? events=$1 delete=$2
  shift 2
  set +e
  [ "$rc" = 0 ] || manager_e2e_report "$events" "$@"
  if [ "$delete" = - ]; then manager_e2e_cleanup "$rc"; else manager_e2e_cleanup "$rc" "$delete"; fi
}

# watch_app_pods NAME FILE: streams the watch events of the pods labelled app=NAME in NS into FILE,
# in the background (pid in WATCH_PID and PIDS, which manager_e2e_cleanup ends).
watch_app_pods() {
  "$KUBECTL" -n "$NS" get pods -l "app=$1" -w --output-watch-events -o json >"$2" 2>/dev/null &
  PIDS+=($!)
  WATCH_PID=$!
}
# watch_started FILE N: the watch writing FILE has listed N pods (N ADDED events).
watch_started() { [ "$(grep -c '^{"type":"ADDED"' "$1" 2>/dev/null)" -ge "$2" ]; }
# app_pod_table NAME [JQ]: "name uid restartCount image ready" per live pod labelled app=NAME in NS
# (the first container's restarts and image), a last column JQ of the pod when given; sorted.
app_pod_table() {
  k -n "$NS" get pods -l "app=$1" -o json | jq -r '.items[] | select(.metadata.deletionTimestamp == null)
    | [.metadata.name, .metadata.uid, (.status.containerStatuses[0].restartCount // 0),
       .spec.containers[0].image,
       (any(.status.conditions[]?; .type == "Ready" and .status == "True"))'"${2:+, $2}"'] | @tsv' | sort
}
# workload_ready KIND NAME N: N live (not deleted) pods labelled app=NAME in NS, all Ready, and the
# status of KIND NAME says so (replicas and readyReplicas N, observedGeneration its generation).
workload_ready() {
  local n=$3
  k -n "$NS" get pods -l "app=$2" -o json 2>/dev/null | jq -e --argjson n "$n" '[.items[]
    | select(.metadata.deletionTimestamp == null)] | length == $n
      and all(any(.status.conditions[]?; .type == "Ready" and .status == "True"))' >/dev/null &&
    k -n "$NS" get "$1" "$2" -o json 2>/dev/null | jq -e ".status.readyReplicas == $n and .status.replicas == $n
      and .status.observedGeneration == .metadata.generation" >/dev/null
}

# `... | apply_stdin`: YAML on stdin applied in NS, or die with kubectl's last lines. At the end
# of a pipeline its die ends the test only under `shopt -s lastpipe` (else it ends a subshell).
apply_stdin() {
  k -n "$NS" apply -f - >"$WORK/apply.log" 2>&1 || die "kubectl apply: $(tail -3 "$WORK/apply.log")"
}

# start_leader_replicas: stops start_host_manager's manager (SIGTERM) and starts two replicas of
# MANAGER, a and b, with leader election (Lease kruise-system/kruise-manager, 4 s, renew deadline
# 3 s, retry 1 s): webhook, health, metrics on BASE..BASE+2 (a) and BASE+3..BASE+5 (b), logs in
# WORK/manager-{a,b}.log. Their pids in MPID[a|b] and PIDS; waits for both /readyz and a Lease
# holder, named in LEADER.
start_leader_replicas() {
  local r off
  [ -n "${MANAGER_PID:-}" ] && kill "$MANAGER_PID" 2>/dev/null && wait "$MANAGER_PID" 2>/dev/null
  MANAGER_PID=
  declare -gA MPID
  for r in a b; do
    off=0
    [ "$r" = b ] && off=3
    env POD_NAMESPACE=kruise-system WEBHOOK_HOST=127.0.0.1 WEBHOOK_PORT=$((BASE + off)) \
      WEBHOOK_CERT_DIR="$WORK/certs-$r" "$MANAGER" --kubeconfig "$KUBECONFIG" \
      --enable-leader-election --leader-election-namespace=kruise-system \
      --leader-election-lease-duration=4s --leader-election-renew-deadline=3s \
      --leader-election-retry-period=1s --webhook-bind-address=127.0.0.1 \
      --health-probe-addr="127.0.0.1:$((BASE + off + 1))" --metrics-addr="127.0.0.1:$((BASE + off + 2))" \
      >"$WORK/manager-$r.log" 2>&1 &
    MPID[$r]=$!
    PIDS+=($!)
  done
  HOST_MANAGER_HEALTH=127.0.0.1:$((BASE + 1))
  wait_for 60 "replica a /readyz" host_manager_ready
  HOST_MANAGER_HEALTH=127.0.0.1:$((BASE + 4))
  wait_for 60 "replica b /readyz" host_manager_ready
  wait_for 60 "a Lease holder among the two managers" replicas_have_leader
}
# replicas_have_leader: LEADER is the replica (a/b) whose log says it acquired the Lease now held.
replicas_have_leader() {
  local holder r
  LEADER=
  holder=$(k -n kruise-system get lease kruise-manager -o jsonpath='{.spec.holderIdentity}' 2>/dev/null)
  [ -n "$holder" ] || return 1
  for r in a b; do
    grep -qF "$holder acquired lease" "$WORK/manager-$r.log" 2>/dev/null && LEADER=$r && return 0
  done
  return 1
}
# kill_leader WHAT: kill -9 of the leading replica (OLD, said with WHAT), then waits for the other
# to take the Lease (LEADER); TAKEOVER_MS is how long that took.
kill_leader() {
  local t_kill
  OLD=$LEADER
  kill -9 "${MPID[$OLD]}"
  t_kill=$(now_ms)
  say "killed leader $OLD $1"
  wait_for 60 "the other replica to take the Lease" replica_took_over
  TAKEOVER_MS=$(($(now_ms) - t_kill))
}
replica_took_over() { replicas_have_leader && [ "$LEADER" != "$OLD" ]; }
