#!/usr/bin/env bash
# kruise-daemon rolled out as an Advanced DaemonSet and upgraded in place while it pulls (GitHub
# issue 16, the design card's own use): deploy/daemonset/advanced-kube-local (the kube-local agent
# as apps.kruise.io/v1beta1 DaemonSet, rollingUpdateType InPlaceIfPossible) on every node of
# ../shared/kube-local, its controller in one kruise-manager on the host.
#
#   1. the agent image pushed under two tags with different digests (scripts/build-image with two
#      SOURCE_DATE_EPOCHs); deploy/overlays/kube-local without the DaemonSet and the manager
#      Deployment, the manager, then the Advanced DaemonSet on the first image: one Ready agent
#      per node, each with the InPlaceUpdateReady readiness gate;
#   2. a NodeImage tag on the first node pulled through a throttling proxy (1 MiB/s), so it is
#      still Pulling when the agent is upgraded; the DaemonSet's image set to the second tag: every
#      agent pod keeps its UID and restarts its container once (restartCount + 1, the old one
#      terminated) on the new image, InPlaceUpdateReady back True; the first node's new agent
#      started before the tag completed; the tag ends Succeeded with an imageID and no tag of any
#      NodeImage stays Pulling.
#
# Everything it creates is deleted again, also on failure (the DaemonSet, RBAC, namespace, manager,
# webhook configurations, certificate Secret, NodeImages, the pulled test image); CRDs and the
# kruise namespaces are left. Works with any node count.
# Usage: daemonset_agent_e2e.sh KRUISE_MANAGER_BINARY KRUISE_DAEMON_BINARY
# Environment: KRUISE_KUBE_LOCAL_ENV, KRUISE_E2E_KEEP_WORK=1 (keep the work dir),
# KRUISE_E2E_DAEMONSET_PORT_BASE (default 16540, shared with daemonset_e2e.sh, which uses
# base..base+2; here base+4..base+7: manager webhook, health, metrics, the throttling proxy).
set -uo pipefail

HERE=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
T0=$SECONDS
# shellcheck source=../lib.sh
. "$ROOT/test/e2e/lib.sh"
binaries_from_args "${1:-}" "${2:-}"
kube_local_preflight jq curl umoci skopeo ctr python3

BASE=$((${KRUISE_E2E_DAEMONSET_PORT_BASE:-16540} + 4))
PROXY=127.0.0.1:$((BASE + 3))
NS=kruise-e2e-daemonset-agent
KNS=kruise-system
REPO=kruise-e2e-daemonset-agent # test image slow:1, random, built when missing
REG=$KUBE_LOCAL_REGISTRY
NODE=$KUBE_LOCAL_NODE_NAME
CTR=($KUBE_LOCAL_CTR)
IMG=$PROXY/$REPO/slow
WORK=$(mktemp -d "${TMPDIR:-/tmp}/daemonset-agent-e2e.XXXXXX")
PIDS=()

require_free_ports KRUISE_E2E_DAEMONSET_PORT_BASE $(seq "$BASE" $((BASE + 3)))

cleanup() {
  local rc=$?
  set +e
  local t0=$SECONDS
  if [ "$rc" != 0 ]; then
    say "agent pods:"
    k -n "$KNS" get pods -l control-plane=daemon -o wide 2>&1 | sed 's/^/    /'
    say "daemonset status:"
    k -n "$KNS" get daemonsets.apps.kruise.io kruise-daemon -o json 2>/dev/null | jq -c .status | sed 's/^/    /'
    say "NodeImage $NODE status:"
    k get nodeimages.apps.kruise.io "$NODE" -o json 2>/dev/null | jq -c .status | sed 's/^/    /'
    say "events (last 15):"
    k -n "$KNS" get events --sort-by=.lastTimestamp 2>/dev/null | tail -n 15 | sed 's/^/    /'
    say "manager log (tail):"
    tail -n 20 "$WORK/manager.log" 2>/dev/null | sed 's/^/    /'
    [ -n "${AGENT:-}" ] && { say "agent $AGENT log (tail):"; k -n "$KNS" logs "$AGENT" --tail=20 2>&1 | sed 's/^/    /'; }
  fi
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  # The Advanced DaemonSet first, while its manager still runs (the garbage collector removes its
  # pods either way); then what delete_test_deployment knows.
  [ -f "$WORK/ads-objects.yaml" ] &&
    k delete -f "$WORK/ads-objects.yaml" --ignore-not-found --wait=false >/dev/null 2>&1
  delete_test_deployment "$WORK" "$NS"
  k -n kruise-system delete lease kruise-manager --ignore-not-found >/dev/null 2>&1
  remove_repo_images "$REPO"
  say "cleanup: test objects deleted ($((SECONDS - t0))s)"
  if [ -n "${KRUISE_E2E_KEEP_WORK:-}" ]; then say "kept $WORK"; else rm -rf "$WORK"; fi
  exit "$rc"
}
trap cleanup EXIT

ads_json() { k -n "$KNS" get daemonsets.apps.kruise.io kruise-daemon -o json; }
# "node name uid restarts image ready in-place-ready containerID startedAt" per live agent pod.
agent_table() {
  k -n "$KNS" get pods -l control-plane=daemon -o json | jq -r '.items[]
    | select(.metadata.deletionTimestamp == null)
    | [.spec.nodeName // "-", .metadata.name, .metadata.uid,
       (.status.containerStatuses[0].restartCount // 0), .spec.containers[0].image,
       (any(.status.conditions[]?; .type == "Ready" and .status == "True")),
       ([.status.conditions[]? | select(.type == "InPlaceUpdateReady") | .status][0] // "-"),
       (.status.containerStatuses[0].containerID // "-"),
       (.status.containerStatuses[0].state.running.startedAt // "-")] | @tsv' | sort
}
# all_agents IMAGE: one Ready agent per node on IMAGE, InPlaceUpdateReady True, and the
# DaemonSet's status of its generation counting them all Ready and updated.
all_agents() {
  local n
  n=$(k get nodes -o name | wc -l)
  [ "$(agent_table | awk -F'\t' -v img="$1" '$5 == img && $6 == "true" && $7 == "True"' | wc -l)" = "$n" ] &&
    [ "$(agent_table | wc -l)" = "$n" ] &&
    [ "$(ads_json 2>/dev/null | jq -r --argjson n "$n" '.status.observedGeneration == .metadata.generation
      and .status.desiredNumberScheduled == $n and .status.numberReady == $n
      and .status.updatedNumberScheduled == $n and .status.numberAvailable == $n')" = true ]
}

# --- 1 -------------------------------------------------------------------------------------------
step 1 "the agent as an Advanced DaemonSet (in-place updates), its manager on the host"
k delete namespace "$NS" --ignore-not-found --wait=true --timeout=90s >/dev/null 2>&1
# Two images of one binary with different digests: build-image takes its timestamps from
# SOURCE_DATE_EPOCH.
SOURCE_DATE_EPOCH=1000000000 push_image kruise-daemon "$DAEMON" ads-agent-e2e-a "$WORK/image-a" --user 0:0
IMG_A=$PUSHED_IMAGE
SOURCE_DATE_EPOCH=1000000001 push_image kruise-daemon "$DAEMON" ads-agent-e2e-b "$WORK/image-b" --user 0:0
IMG_B=$PUSHED_IMAGE
[ "${IMG_A#*@}" != "${IMG_B#*@}" ] || die "the two agent images have one digest"
deploy_manager_objects "$WORK" "$NS"
k wait --for condition=established --timeout=60s crd/daemonsets.apps.kruise.io \
  crd/nodeimages.apps.kruise.io >/dev/null || die "CRDs not established"
start_host_manager "$MANAGER" "$WORK" "$BASE"
# render_overlay reads deploy/overlays/<name>; the variant lives in deploy/daemonset.
render_overlay ../daemonset/advanced-kube-local "$IMG_A" "$WORK/ads.yaml" "$WORK/ads-objects.yaml"
[ "$(python3 -c 'import sys, yaml
print(sum(1 for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "DaemonSet"
          and d["apiVersion"] == "apps.kruise.io/v1beta1"
          and d["spec"]["updateStrategy"]["rollingUpdate"]["rollingUpdateType"] == "InPlaceIfPossible"))' \
  "$WORK/ads.yaml")" = 1 ] || die "deploy/daemonset/advanced-kube-local has no in-place Advanced DaemonSet"
t=$(now_ms)
k apply -f "$WORK/ads.yaml" >"$WORK/apply-ads.log" 2>&1 || die "kubectl apply: $(tail -3 "$WORK/apply-ads.log")"
wait_for 150 "a Ready agent on $IMG_A on every node" all_agents "$IMG_A"
AGENTS_MS=$(($(now_ms) - t))
gates=$(k -n "$KNS" get pods -l control-plane=daemon -o json | jq '[.items[]
  | select(any(.spec.readinessGates[]?; .conditionType == "InPlaceUpdateReady"))] | length')
[ "$gates" = "$(agent_table | wc -l)" ] || die "$gates agent pods carry the InPlaceUpdateReady gate"
step_done "$(agent_table | wc -l) agent(s) Ready $(secs "$AGENTS_MS")s after the apply, each with the InPlaceUpdateReady gate"

# --- 2 -------------------------------------------------------------------------------------------
step 2 "the agent upgraded in place while its node pulls a NodeImage tag"
if ! curl -sfI -H "$ACCEPT" "http://$REG/v2/$REPO/slow/manifests/1" >/dev/null; then
  make_image "$WORK/slow" 24 >"$WORK/slow.log" 2>&1 || die "building the test image"
  skopeo copy --quiet --dest-tls-verify=false "oci:$WORK/slow:1" "docker://$REG/$REPO/slow:1" ||
    die "pushing $REPO/slow:1"
fi
remove_repo_images "$REPO"
"$ROOT/test/e2e/daemon/throttle_proxy.py" --listen "$PROXY" --upstream "http://$REG" \
  --rate $((1 << 20)) --log "$WORK/proxy.log" >"$WORK/proxy.out" 2>&1 &
PIDS+=($!)
wait_for 10 "the throttling proxy on $PROXY" grep -q ready "$WORK/proxy.out"
ni_exists() { k get nodeimages.apps.kruise.io "$NODE" >/dev/null 2>&1; }
wait_for 60 "NodeImage $NODE (the manager creates it)" ni_exists
"$KUBECTL" get nodeimages.apps.kruise.io --field-selector "metadata.name=$NODE" -o json --watch \
  >"$WORK/ni-watch.json" 2>/dev/null &
PIDS+=($!)
NI_WATCH=$!
k patch nodeimages.apps.kruise.io "$NODE" --type merge -p "{\"spec\":{\"images\":{\"$IMG\":{\"tags\":[{\"tag\":\"1\",\"version\":1,\"createdAt\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\",\"imagePullPolicy\":\"Always\",\"pullPolicy\":{\"ttlSecondsAfterFinished\":600,\"timeoutSeconds\":300,\"backoffLimit\":3}}]}}}}" \
  >/dev/null || die "adding $IMG:1 to NodeImage $NODE"
t=$(now_ms)
ni_json() { k get nodeimages.apps.kruise.io "$NODE" -o json >"$WORK/ni.json" 2>/dev/null; }
tag_field() { # FIELD of the tag
  jq -r --arg i "$IMG" --arg f "$1" '(.status.imageStatuses[$i].tags // [])[] | select(.tag == "1") | .[$f] // empty' "$WORK/ni.json"
}
pulling() { ni_json && [ "$(tag_field phase)" = Pulling ] && [ "$(tag_field progress)" -gt 0 ] 2>/dev/null; }
wait_for 60 "$IMG:1 to be Pulling with progress" pulling
AT=$(tag_field progress)
agent_table >"$WORK/before.tsv"
AGENT=$(awk -F'\t' -v n="$NODE" '$1 == n { print $2 }' "$WORK/before.tsv")
[ -n "$AGENT" ] || die "no agent on $NODE"
k -n "$KNS" patch daemonsets.apps.kruise.io kruise-daemon --type json -p "[{\"op\":\"replace\",
  \"path\":\"/spec/template/spec/containers/0/image\",\"value\":\"$IMG_B\"}]" >"$WORK/patch.log" 2>&1 ||
  die "patching the agent's image: $(cat "$WORK/patch.log")"
t_up=$(now_ms)
wait_for 240 "every agent updated in place to $IMG_B" all_agents "$IMG_B"
UPGRADE_MS=$(($(now_ms) - t_up))
agent_table >"$WORK/after.tsv"
# node name uid restarts image ready gate cid started | the same after
join -t $'\t' "$WORK/before.tsv" "$WORK/after.tsv" >"$WORK/joined.tsv"
[ "$(wc -l <"$WORK/joined.tsv")" = "$(wc -l <"$WORK/before.tsv")" ] || die "agents moved: $(cut -f1,2 "$WORK/after.tsv" | tr '\n' ' ')"
awk -F'\t' '$3 != $11 || $4 + 1 != $12 || $8 == $16 { print; bad = 1 } END { exit bad }' \
  "$WORK/joined.tsv" >"$WORK/bad.txt" || die "agents not updated in place (same UID, one restart): $(cat "$WORK/bad.txt")"
k -n "$KNS" get pod "$AGENT" -o json >"$WORK/agent.json" || die "reading $AGENT"
last=$(jq -r '.status.containerStatuses[0].lastState.terminated | "\(.reason // "-") exit \(.exitCode // "-")"' "$WORK/agent.json")
[ "$last" != "- exit -" ] || die "$AGENT's container has no terminated last state"
STARTED=$(jq -r '.status.containerStatuses[0].state.running.startedAt' "$WORK/agent.json")
done_ok() { ni_json && [ "$(tag_field phase)" = Succeeded ]; }
wait_for 180 "$IMG:1 to be Succeeded" done_ok
PULL_MS=$(($(now_ms) - t))
kill "$NI_WATCH" 2>/dev/null
COMPLETED=$(tag_field completionTime)
[[ "$(tag_field imageID)" == *sha256:* ]] || die "$IMG:1 Succeeded without an imageID"
# RFC 3339 UTC times of one format compare as strings.
[[ ! "$COMPLETED" < "$STARTED" ]] ||
  die "the pull completed at $COMPLETED, before the new agent started at $STARTED: the test needs a slower pull"
pulling_left=$(k get nodeimages.apps.kruise.io -o json | jq '[.items[] | (.status.imageStatuses // {})[]
  | .tags[]? | select(.phase == "Pulling")] | length')
[ "$pulling_left" = 0 ] || die "$pulling_left NodeImage tag(s) still Pulling"
[ "$(jq '.status.pulling // 0' "$WORK/ni.json")" = 0 ] || die "NodeImage $NODE counts pulling $(jq .status.pulling "$WORK/ni.json")"
grep -qxF "$IMG:1" <<<"$("${CTR[@]}" images ls -q 2>/dev/null)" || die "$IMG:1 is not in $NODE's containerd"
phases=$(jq -r --arg i "$IMG" '(.status.imageStatuses[$i].tags // [])[] | select(.tag == "1") | .phase' \
  "$WORK/ni-watch.json" | uniq | tr '\n' ' ')
step_done "agents upgraded in place in $(secs "$UPGRADE_MS")s (same UIDs, restartCount +1, $AGENT's old container: $last) while $IMG:1 pulled (at ${AT}%); $AGENT restarted at $STARTED, the tag completed at $COMPLETED, $(secs "$PULL_MS")s after it was added; phases seen: $phases; no tag Pulling"

say "all steps passed in $((SECONDS - T0))s:"
for r in "${RESULTS[@]}"; do echo "  $r"; done
