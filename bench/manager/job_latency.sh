#!/usr/bin/env bash
# ImagePullJob latency on kube-local (GitHub issue 13, part 3): job created -> status.succeeded,
# against a bare CRI PullImage of the same image on the same containerd, with the breakdown
# (job -> NodeImage tag, tag -> PullImage, pull, status write, NodeImage -> job status).
# See bench/manager/README.md ("ImagePullJob latency").
#
#   bench/manager/job_latency.sh [BUILD_DIR]      (default: build)
#
# Deploys deploy/overlays/kube-local without the manager Deployment (CRDs, RBAC, webhooks, the
# daemon DaemonSet on an image of BUILD_DIR's kruise-daemon), runs BUILD_DIR's kruise-manager as a
# host process (admin kubeconfig, webhooks by URL), then bench/manager/job_latency.py. Deletes
# what it made afterwards (the registry keeps the repository kruise-bench/jobs: tags only).
# On a several-node kube-local (`up --nodes 3`) every job goes to all nodes: fan-out time, the
# breakdown per node and NodeImage writes per node and job.
# Environment: JOBS (30), INTERVAL (2 s), PARALLELISM (the node count), KRUISE_BENCH_PORT_BASE (16450: webhook, health,
# metrics), KEEP_LOGS=1 (keep the work dir).
set -uo pipefail
ROOT=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
BUILD=$(readlink -f "${1:-$ROOT/build}")
T0=$SECONDS
# shellcheck source=../../test/e2e/lib.sh
. "$ROOT/test/e2e/lib.sh"
KRUISE_E2E_REQUIRED=1 kube_local_preflight jq curl umoci skopeo python3
# Benchmarks are not in the default build: build (or bring up to date) what this one runs.
ninja -C "$BUILD" kruise-manager kruise-daemon bare-cri-pull >&2 || die "build failed"

BASE=${KRUISE_BENCH_PORT_BASE:-16450}
KNS=kruise-system
NS=kruise-bench-jobs
WORK=$(mktemp -d "${TMPDIR:-/tmp}/job-latency.XXXXXX")
cleanup() {
  local rc=$?
  set +e
  delete_test_deployment "$WORK" "$NS"
  remove_repo_names kruise-bench/jobs
  if [ "${KEEP_LOGS:-0}" = 1 ]; then say "logs kept in $WORK"; else rm -rf "$WORK"; fi
  exit "$rc"
}
# Only the names of our tags: their manifest is busybox:1.35's, which must stay.
remove_repo_names() {
  local refs
  mapfile -t refs < <("${CTR[@]}" images ls -q 2>/dev/null | grep -E "/$1[:@]")
  [ "${#refs[@]}" = 0 ] || "${CTR[@]}" images rm "${refs[@]}" >/dev/null 2>&1
}
trap cleanup EXIT
# shellcheck disable=SC2206 # a command line, split on purpose
CTR=($KUBE_LOCAL_CTR)

say "deploying the daemon DaemonSet and starting kruise-manager"
push_image kruise-daemon "$BUILD/daemon/kruise-daemon" job-latency "$WORK/image" --user 0:0
render_overlay kube-local "$PUSHED_IMAGE" "$WORK/rendered.yaml" "$WORK/own-objects.yaml"
k apply -f "$WORK/rendered.yaml" >"$WORK/apply.log" 2>&1 || die "kubectl apply: $(tail -3 "$WORK/apply.log")"
k create namespace "$NS" >/dev/null || die "creating namespace $NS"
k wait --for condition=established --timeout=60s crd/nodeimages.apps.kruise.io \
  crd/imagepulljobs.apps.kruise.io >/dev/null || die "CRDs not established"
start_host_manager "$BUILD/manager/app/kruise-manager" "$WORK" "$BASE"
timeout 150 "$KUBECTL" -n "$KNS" rollout status ds/kruise-daemon --timeout=140s >/dev/null ||
  die "DaemonSet kruise-daemon did not roll out"
# One Ready agent on every node (kube-local's `up --nodes N`; the jobs go to all of them).
NODES=${KUBE_LOCAL_NODES:-1}
agents() {
  AGENTS=$(daemon_pods "$PUSHED_IMAGE" | awk '{ printf "%s%s=%s", sep, $1, $2; sep = "," }')
  [ "$(tr ',' '\n' <<<"$AGENTS" | grep -c =)" = "$NODES" ]
}
wait_for 120 "a Ready daemon pod on each of the $NODES node(s)" agents

say "measuring: ${JOBS:-30} jobs over $NODES node(s), one every ${INTERVAL:-2} s, bare pulls interleaved"
python3 "$ROOT/bench/manager/job_latency.py" --registry "$KUBE_LOCAL_REGISTRY" \
  --namespace "$NS" --nodes "$AGENTS" --jobs "${JOBS:-30}" --interval "${INTERVAL:-2}" \
  ${PARALLELISM:+--parallelism "$PARALLELISM"} --kubectl "$KUBECTL" \
  --bare-pull "$BUILD/bench/manager/bare-cri-pull" --cri-socket "$KUBE_LOCAL_CRI_SOCKET"
