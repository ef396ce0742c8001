#!/usr/bin/env bash
# PodUnavailableBudget end to end on ../shared/kube-local (GitHub issue 17): the real API server
# calls our pod webhook (/validate-pod, failurePolicy Ignore) on deletes and evictions, our
# controller keeps the budget's status. One kruise-manager runs on the host (webhooks by URL, as
# test/e2e/manager explains); pods are hostNetwork, as kube-local has no pod network.
#
#   1. deploy/overlays/kube-local without the DaemonSet and the manager Deployment; the manager;
#   2. a Deployment of 4 pods (Ready 6 s after they start) and a PUB maxUnavailable 1 over them:
#      status.unavailableAllowed 1; `kubectl delete --dry-run=server` of a pod passes and changes
#      nothing (pod, budget);
#   3. one pod deleted: allowed, the budget spent; a second at once: denied with
#      the PUB's readable 403; its eviction (the eviction subresource) denied too while spent;
#   4. kube-system: a pod there under a PUB of minAvailable 1 is deleted all the same;
#   5. the budget recovers (unavailableAllowed 1, disruptedPods empty) once the replacement is Ready;
#   6. a second PUB whose selector overlaps the first is refused;
#   7. the OpenKruise 0.10 release blog's PUB (targetRef a CloneSet of 5, maxUnavailable 60%):
#      status totalReplicas 5, desiredAvailable 2, unavailableAllowed 3;
#   8. an in-place image update of that CloneSet (InPlaceIfPossible, its own maxUnavailable 100%,
#      the manager run with PodUnavailableBudgetUpdateGate): a watch over the whole update never
#      sees more than 3 pods down at once (not Ready, or InPlaceUpdateReady False), the update
#      completes with every pod kept (same UID, new image), the CloneSet reports the budget's
#      denials (PodUnavailableBudgetDenied), and the budget recovers;
#   9. deletion protection (label policy.kruise.io/delete-protection, the manager's
#      /validate-deletion-protection): a namespace labelled Cascading with a running pod cannot be
#      deleted (readable 403), it can once the pod is gone; a Deployment and a CloneSet labelled
#      Always cannot be deleted until the label is removed; a Deployment labelled Cascading not
#      while it has replicas, once scaled to 0 it can;
#  10. the budget spent again, the manager stopped: a pod delete still passes (failurePolicy
#      Ignore).
#
# The manager runs with PodUnavailableBudgetUpdateGate=true (lib.sh's HOST_MANAGER_GATES).
# Everything it creates is deleted again, also on failure (namespace, the kube-system pod and PUB,
# manager, its Lease, webhook configurations, RBAC, certificate Secret); CRDs and the kruise
# namespaces are left. Usage: pub_e2e.sh KRUISE_MANAGER_BINARY
# Environment: KRUISE_KUBE_LOCAL_ENV, KRUISE_E2E_KEEP_WORK=1 (keep the work dir),
# KRUISE_E2E_PUB_PORT_BASE (default 16520; base..base+2: webhook, health, metrics).
set -uo pipefail

HERE=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
T0=$SECONDS
# shellcheck source=../lib.sh
. "$ROOT/test/e2e/lib.sh"
manager_e2e_init pub 16520 3 "${1:-}"
SYS_NAME=kruise-e2e-pub-system # the pod and PUB in kube-system
DP_NS=kruise-e2e-pub-protected  # step 9's namespace, labelled delete-protection=Cascading
DP_LABEL=policy.kruise.io/delete-protection

show_budgets() {
  say "budgets:"
  k -n "$NS" get pub -o yaml 2>/dev/null | grep -A20 '^  status:' | indent
}
delete_system_objects() {
  k -n kube-system delete pub "$SYS_NAME" --ignore-not-found >/dev/null 2>&1
  k -n kube-system delete pod "$SYS_NAME" --ignore-not-found --grace-period=0 --force >/dev/null 2>&1
}
# Step 9's objects lose their protection label first, so that nothing holds their deletion.
unprotect_objects() {
  k label namespace "$DP_NS" "$DP_LABEL-" >/dev/null 2>&1
  k -n "$NS" label deployments.apps,clonesets.apps.kruise.io --all "$DP_LABEL-" >/dev/null 2>&1
  k delete namespace "$DP_NS" --ignore-not-found --wait=false >/dev/null 2>&1
}
delete_test_objects() { delete_system_objects; unprotect_objects; }
cleanup() {
  local rc=$?
  set +e
  [ "$rc" = 0 ] || manager_e2e_report 15 show_budgets
  manager_e2e_cleanup "$rc" delete_test_objects
}
trap cleanup EXIT

# --- helpers -------------------------------------------------------------------------------------
pub_json() { k -n "$NS" get pub "$1" -o json; }
# jq over the PUB NAME; succeeds when the expression is true.
pub_is() { [ "$(pub_json "$1" 2>/dev/null | jq -r "$2")" = true ]; }
# Live (not deleted) pods of the Deployment, "name ready" sorted.
live_pods() {
  k -n "$NS" get pods -l app=web -o json | jq -r '.items[] | select(.metadata.deletionTimestamp == null)
    | "\(.metadata.name) \(any(.status.conditions[]?; .type == "Ready" and .status == "True"))"' | sort
}
ready_pods() { [ "$(live_pods | awk '$2 == "true"' | wc -l)" = "$1" ] && [ "$(live_pods | wc -l)" = "$1" ]; }
recovered() {
  ready_pods 4 && pub_is web '.status.unavailableAllowed == 1 and .status.currentAvailable == 4
    and .status.desiredAvailable == 3 and .status.totalReplicas == 4
    and ((.status.disruptedPods // {}) | length) == 0
    and .status.observedGeneration == .metadata.generation'
}
# A Deployment of REPLICAS busybox pods, hostNetwork, Ready 6 s after start (the window in which a
# deleted pod's replacement is not yet available, so the budget stays spent).
deployment_yaml() {
  cat <<EOF
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 4
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      hostNetwork: true
      terminationGracePeriodSeconds: 2
      containers:
      - name: main
        image: $KUBE_LOCAL_BUSYBOX_IMAGE
        command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
        readinessProbe:
          exec:
            command: ["true"]
          initialDelaySeconds: 6
          periodSeconds: 1
EOF
}
pub_yaml() { # NAME SELECTOR-LABELS(json) BUDGET-FIELD
  cat <<EOF
apiVersion: policy.kruise.io/v1alpha1
kind: PodUnavailableBudget
metadata:
  name: $1
spec:
  selector:
    matchLabels: $2
  $3
EOF
}
# delete_pod POD [ARGS...]: kubectl delete (not waiting); the output in $WORK/delete.log.
delete_pod() {
  local pod=$1
  shift
  k -n "$NS" delete pod "$pod" --wait=false "$@" >"$WORK/delete.log" 2>&1
}

# --- 1 -------------------------------------------------------------------------------------------
step 1 "CRDs, webhooks and RBAC from deploy/overlays/kube-local; kruise-manager on the host"
deploy_manager_objects "$WORK" "$NS" podunavailablebudgets.policy.kruise.io
# Our CloneSet asks the budget before each in-place update (step 8) under OpenKruise's gate.
HOST_MANAGER_GATES=PodUnavailableBudgetUpdateGate=true start_host_manager "$MANAGER" "$WORK" "$BASE"
step_done "manager ready (PodUnavailableBudgetUpdateGate on)"

# --- 2 -------------------------------------------------------------------------------------------
step 2 "a Deployment of 4 pods under a PUB of maxUnavailable 1"
deployment_yaml >"$WORK/deployment.yaml"
k -n "$NS" apply -f "$WORK/deployment.yaml" >/dev/null || die "creating the Deployment"
pub_yaml web '{"app": "web"}' "maxUnavailable: 1" >"$WORK/pub.yaml"
k -n "$NS" apply -f "$WORK/pub.yaml" >"$WORK/apply.log" 2>&1 || die "creating the PUB: $(cat "$WORK/apply.log")"
wait_for 120 "4 Ready pods and unavailableAllowed 1" recovered
mapfile -t PODS < <(live_pods | cut -d' ' -f1)
delete_pod "${PODS[0]}" --dry-run=server || die "a server-side dry run of a delete was denied: $(cat "$WORK/delete.log")"
k -n "$NS" get pod "${PODS[0]}" -o jsonpath='{.metadata.deletionTimestamp}' >"$WORK/dts" ||
  die "${PODS[0]} is gone after a dry run"
[ ! -s "$WORK/dts" ] || die "${PODS[0]} is being deleted after a dry run"
# The webhook writes the budget before it answers: a dry run that spent it would show already.
pub_is web '.status.unavailableAllowed == 1 and ((.status.disruptedPods // {}) | length) == 0' ||
  die "a dry run changed the budget: $(pub_json web | jq -c .status)"
step_done "unavailableAllowed 1 over 4 Ready pods; a server-side dry-run delete passed and changed nothing"

# --- 3 -------------------------------------------------------------------------------------------
step 3 "one delete allowed, a second at once denied (also as an eviction)"
delete_pod "${PODS[0]}" || die "deleting ${PODS[0]} was refused: $(cat "$WORK/delete.log")"
if delete_pod "${PODS[1]}"; then
  die "a second delete within the budget of 1 was allowed"
fi
grep -q 'Error from server (Forbidden)' "$WORK/delete.log" &&
  grep -q "podunavailablebudget.policy.kruise.io \"web\" is forbidden" "$WORK/delete.log" ||
  die "denied without the PUB's reason: $(cat "$WORK/delete.log")"
denial=$(grep -o 'denied the request: .*' "$WORK/delete.log" | head -c 220)
# The webhook records the pod in disruptedPods; the controller drops it again as soon as it sees the
# pod terminating (then counted unavailable), as OpenKruise's does: either way the budget is spent.
pub_is web ".status.unavailableAllowed == 0 and ((.status.disruptedPods // {} | has(\"${PODS[0]}\"))
  or .status.currentAvailable == 3)" || die "the first delete is not accounted: $(pub_json web | jq -c .status)"
grep -q "DELETE of pod $NS/${PODS[0]} allowed by PodUnavailableBudget web" "$WORK/manager.log" ||
  die "the webhook did not judge the first delete"
cat >"$WORK/eviction.json" <<EOF
{"apiVersion": "policy/v1beta1", "kind": "Eviction", "metadata": {"name": "${PODS[1]}", "namespace": "$NS"}}
EOF
if k create --raw "/api/v1/namespaces/$NS/pods/${PODS[1]}/eviction" -f "$WORK/eviction.json" \
  >"$WORK/evict.log" 2>&1; then
  die "an eviction with the budget spent was allowed"
fi
grep -q 'Error from server (Forbidden)' "$WORK/evict.log" &&
  grep -q "podunavailablebudget.policy.kruise.io \"web\" is forbidden" "$WORK/evict.log" ||
  die "eviction denied without the PUB's reason: $(cat "$WORK/evict.log")"
[ -z "$(k -n "$NS" get pod "${PODS[1]}" -o jsonpath='{.metadata.deletionTimestamp}')" ] ||
  die "${PODS[1]} is being deleted although both requests were denied"
step_done "${PODS[0]} deleted, the budget spent; ${PODS[1]} kept (delete and eviction 403): $denial"

# --- 4 -------------------------------------------------------------------------------------------
step 4 "pods in kube-system are never judged"
cat >"$WORK/system.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $SYS_NAME
  namespace: kube-system
  labels:
    app: $SYS_NAME
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 0
  containers:
  - name: main
    image: $KUBE_LOCAL_BUSYBOX_IMAGE
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
EOF
k apply -f "$WORK/system.yaml" >/dev/null || die "creating the kube-system pod"
pub_yaml "$SYS_NAME" "{\"app\": \"$SYS_NAME\"}" "minAvailable: 1" | sed 's/^  name: .*/&\n  namespace: kube-system/' \
  >"$WORK/system-pub.yaml"
k apply -f "$WORK/system-pub.yaml" >"$WORK/apply.log" 2>&1 || die "creating the kube-system PUB: $(cat "$WORK/apply.log")"
system_pod_ready() {
  [ "$(k -n kube-system get pod "$SYS_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
wait_for 60 "the kube-system pod Ready" system_pod_ready
# The budget is spent (the one pod must stay): a judged delete would be denied.
system_pub_spent() {
  [ "$(k -n kube-system get pub "$SYS_NAME" -o json | jq -r '.status.desiredAvailable == 1
    and .status.currentAvailable == 1 and .status.unavailableAllowed == 0')" = true ]
}
wait_for 60 "the kube-system budget computed (unavailableAllowed 0)" system_pub_spent
k -n kube-system delete pod "$SYS_NAME" --wait=false >"$WORK/delete.log" 2>&1 ||
  die "a kube-system pod delete was denied: $(cat "$WORK/delete.log")"
k -n kube-system delete pub "$SYS_NAME" >/dev/null 2>&1
step_done "the kube-system pod was deleted although its budget (minAvailable 1) was spent"

# --- 5 -------------------------------------------------------------------------------------------
step 5 "the budget recovers once the replacement is Ready"
wait_for 120 "unavailableAllowed 1 again, disruptedPods empty" recovered
step_done "unavailableAllowed 1, disruptedPods empty"

# --- 6 -------------------------------------------------------------------------------------------
step 6 "a second PUB with an overlapping selector is refused"
# OpenKruise's loose overlap: the same keys with values in common (app In [web, api] meets
# app=web); a selector with a key the other lacks does not count as overlapping there nor here.
cat >"$WORK/pub2.yaml" <<EOF
apiVersion: policy.kruise.io/v1alpha1
kind: PodUnavailableBudget
metadata:
  name: web-2
spec:
  selector:
    matchExpressions:
    - {key: app, operator: In, values: [web, api]}
  maxUnavailable: 2
EOF
if k -n "$NS" apply -f "$WORK/pub2.yaml" >"$WORK/apply.log" 2>&1; then
  die "an overlapping PUB was admitted"
fi
grep -q 'overlap' "$WORK/apply.log" || die "refused without naming the overlap: $(cat "$WORK/apply.log")"
step_done "refused: $(grep -o 'denied the request: .*' "$WORK/apply.log" | head -c 200)"

# --- 7 -------------------------------------------------------------------------------------------
step 7 "the 0.10 release blog's PodUnavailableBudget over a CloneSet (maxUnavailable 60%)"
# The CloneSet's own maxUnavailable (100%) would take all 5 pods down at once: only the budget
# holds the update of step 8 back. Pods are Ready 6 s after each (re)start of their container.
cat >"$WORK/cloneset.yaml" <<EOF
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata:
  name: web-server
spec:
  replicas: 5
  selector:
    matchLabels:
      app: web-server
  updateStrategy:
    type: InPlaceIfPossible
    maxUnavailable: 100%
  template:
    metadata:
      labels:
        app: web-server
    spec:
      hostNetwork: true
      terminationGracePeriodSeconds: 2
      containers:
      - name: main
        image: $KUBE_LOCAL_BUSYBOX_IMAGE
        command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
        readinessProbe:
          exec:
            command: ["true"]
          initialDelaySeconds: 6
          periodSeconds: 1
EOF
k -n "$NS" apply -f "$WORK/cloneset.yaml" >"$WORK/apply.log" 2>&1 || die "creating the CloneSet: $(cat "$WORK/apply.log")"
# The blog's budget as written, but for its apiVersion (the blog says apps.kruise.io; the CRD is
# policy.kruise.io) and namespace.
cat >"$WORK/pub-cloneset.yaml" <<EOF
apiVersion: policy.kruise.io/v1alpha1
kind: PodUnavailableBudget
metadata:
  name: web-server-pub
spec:
  targetRef:
    apiVersion: apps.kruise.io/v1alpha1
    kind: CloneSet
    name: web-server
  # cloneset.replicas (5) * 60% = 3 pods may be unavailable at once
  maxUnavailable: 60%
EOF
k -n "$NS" apply -f "$WORK/pub-cloneset.yaml" >"$WORK/apply.log" 2>&1 ||
  die "creating the blog's PUB: $(cat "$WORK/apply.log")"
cs_pods() { # "name uid image ready" per live pod of the CloneSet, sorted
  k -n "$NS" get pods -l app=web-server -o json | jq -r '.items[] | select(.metadata.deletionTimestamp == null)
    | [.metadata.name, .metadata.uid, .spec.containers[0].image,
       (any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | @tsv' | sort
}
cs_budget_full() {
  [ "$(cs_pods | awk -F'\t' '$4 == "true"' | wc -l)" = 5 ] &&
    pub_is web-server-pub '.status.totalReplicas == 5 and .status.desiredAvailable == 2
      and .status.currentAvailable == 5 and .status.unavailableAllowed == 3
      and ((.status.unavailablePods // {}) | length) == 0
      and .status.observedGeneration == .metadata.generation'
}
wait_for 120 "5 Ready CloneSet pods and the blog's budget at unavailableAllowed 3" cs_budget_full
columns=$(k -n "$NS" get pub web-server-pub --no-headers | awk '{ print $2, $3, $4, $5 }')
[ "$columns" = "3 5 2 5" ] || die "kubectl get pub: ALLOWED CURRENT DESIRED TOTAL = $columns"
step_done "totalReplicas 5, desiredAvailable 2, unavailableAllowed 3 (kubectl get pub: $columns)"

# --- 8 -------------------------------------------------------------------------------------------
step 8 "an in-place image update of the CloneSet never takes more pods down than the budget"
cs_pods >"$WORK/cs-before.tsv"
"$KUBECTL" -n "$NS" get pods -l app=web-server -w --output-watch-events -o json >"$WORK/watch8.json" 2>/dev/null &
WATCH_PID=$!
watch_listed() { [ "$(grep -c '^{"type":"ADDED"' "$WORK/watch8.json" 2>/dev/null)" -ge 5 ]; }
wait_for 20 "the watch's first events" watch_listed
k -n "$NS" patch cloneset web-server --type json \
  -p "[{\"op\":\"replace\",\"path\":\"/spec/template/spec/containers/0/image\",\"value\":\"$KUBE_LOCAL_REGISTRY/busybox:v1\"}]" \
  >/dev/null || die "patching the CloneSet's image"
cs_updated() {
  [ "$(k -n "$NS" get cloneset web-server -o json | jq -r '.status.updatedReplicas == 5
    and .status.updatedReadyReplicas == 5 and .status.readyReplicas == 5
    and .status.currentRevision == .status.updateRevision
    and .status.observedGeneration == .metadata.generation')" = true ]
}
wait_for 240 "all 5 pods updated in place and Ready" cs_updated
kill "$WATCH_PID" 2>/dev/null
wait "$WATCH_PID" 2>/dev/null
WATCH_PID=
# A pod is down while it is not Ready or its in-place update holds InPlaceUpdateReady False (the
# engine sets it before the image patch and back once the container restarted).
read -r max_down updates < <(PYTHONPATH="$ROOT/test/e2e" python3 - "$WORK/watch8.json" <<'PY'
import sys
from watch_events import events
down, max_down, restarted = {}, 0, set()
for ev in events(sys.argv[1]):
    obj = ev.get("object", {})
    name = obj.get("metadata", {}).get("name")
    if ev.get("type") == "DELETED" or obj.get("metadata", {}).get("deletionTimestamp"):
        down.pop(name, None)
        continue
    conds = {c.get("type"): c.get("status") for c in obj.get("status", {}).get("conditions", [])}
    down[name] = conds.get("Ready") != "True" or conds.get("InPlaceUpdateReady") == "False"
    if conds.get("InPlaceUpdateReady") == "False":
        restarted.add(name)
    max_down = max(max_down, sum(down.values()))
print(max_down, len(restarted))
PY
)
[ "$max_down" -le 3 ] || die "$max_down pods were down at once (the budget allows 3)"
[ "$updates" = 5 ] || die "the watch saw $updates of 5 pods start an in-place update"
cs_pods >"$WORK/cs-after.tsv"
join -t $'\t' "$WORK/cs-before.tsv" "$WORK/cs-after.tsv" |
  awk -F'\t' -v img="$KUBE_LOCAL_REGISTRY/busybox:v1" '$2 == $5 && $6 == img' | wc -l >"$WORK/kept"
[ "$(cat "$WORK/kept")" = 5 ] || die "only $(cat "$WORK/kept") of 5 pods were updated in place: $(cut -f1,2,3 "$WORK/cs-after.tsv" | tr '\n' ' ')"
denials=$(k -n "$NS" get events -o json | jq '[.items[] | select(.reason == "PodUnavailableBudgetDenied"
  and .involvedObject.kind == "CloneSet" and .involvedObject.name == "web-server")] | length')
[ "$denials" -ge 1 ] || die "no PodUnavailableBudgetDenied event: the budget never held the update back"
cs_budget_recovered() {
  pub_is web-server-pub '.status.currentAvailable == 5 and .status.unavailableAllowed == 3'
}
wait_for 60 "the blog's budget back at unavailableAllowed 3" cs_budget_recovered
step_done "5 pods updated in place (UIDs kept); at most $max_down down at once (budget 3); $denials denial event(s)"

# --- 9 -------------------------------------------------------------------------------------------
step 9 "deletion protection: Cascading namespace, Always Deployment and CloneSet, Cascading Deployment"
# expect_denied WHAT KUBECTL-ARGS...: the command must fail with a 403 naming the label (kubectl's
# output in $WORK/dp.log).
expect_denied() {
  local what=$1
  shift
  if k "$@" >"$WORK/dp.log" 2>&1; then die "$what was allowed"; fi
  grep -q 'Error from server (Forbidden)' "$WORK/dp.log" && grep -q "$DP_LABEL=" "$WORK/dp.log" ||
    die "$what denied without the label's reason: $(cat "$WORK/dp.log")"
}
dp_ns_absent() { ! k get namespace "$DP_NS" >/dev/null 2>&1; }
wait_for 180 "namespace $DP_NS of an earlier run to be deleted" dp_ns_absent
cat >"$WORK/dp-ns.yaml" <<EOF
apiVersion: v1
kind: Namespace
metadata:
  name: $DP_NS
  labels:
    $DP_LABEL: Cascading
---
apiVersion: v1
kind: Pod
metadata:
  name: keep
  namespace: $DP_NS
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 0
  containers:
  - name: main
    image: $KUBE_LOCAL_BUSYBOX_IMAGE
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
EOF
k apply -f "$WORK/dp-ns.yaml" >"$WORK/dp.log" 2>&1 || die "creating $DP_NS and its pod: $(cat "$WORK/dp.log")"
dp_pod_running() { [ "$(k -n "$DP_NS" get pod keep -o jsonpath='{.status.phase}')" = Running ]; }
wait_for 60 "the pod in $DP_NS Running" dp_pod_running
expect_denied "deleting namespace $DP_NS with a running pod" delete namespace "$DP_NS" --wait=false
grep -q '1 active pod' "$WORK/dp.log" || die "the denial does not say why: $(cat "$WORK/dp.log")"
ns_denial=$(grep -o 'denied the request: .*' "$WORK/dp.log" | head -c 200)
[ -z "$(k get namespace "$DP_NS" -o jsonpath='{.metadata.deletionTimestamp}')" ] ||
  die "$DP_NS is being deleted although the delete was denied"
k -n "$DP_NS" delete pod keep --grace-period=0 --force >/dev/null 2>&1
dp_pods_gone() { [ -z "$(k -n "$DP_NS" get pods -o name 2>/dev/null)" ]; }
wait_for 60 "the pod in $DP_NS gone" dp_pods_gone
k delete namespace "$DP_NS" --wait=false >"$WORK/dp.log" 2>&1 ||
  die "deleting the Cascading namespace without pods was refused: $(cat "$WORK/dp.log")"
# Always: a Deployment and a CloneSet without replicas (the label alone holds them).
for kind in Deployment CloneSet; do
  api=apps/v1 res=deployments.apps name=protected-${kind,,}
  [ "$kind" = CloneSet ] && api=apps.kruise.io/v1alpha1 res=clonesets.apps.kruise.io
  cat >"$WORK/dp-$kind.yaml" <<EOF
apiVersion: $api
kind: $kind
metadata:
  name: $name
  labels:
    $DP_LABEL: Always
spec:
  replicas: 0
  selector:
    matchLabels:
      app: $name
  template:
    metadata:
      labels:
        app: $name
    spec:
      containers:
      - name: main
        image: $KUBE_LOCAL_BUSYBOX_IMAGE
EOF
  k -n "$NS" apply -f "$WORK/dp-$kind.yaml" >"$WORK/dp.log" 2>&1 || die "creating the $kind: $(cat "$WORK/dp.log")"
  expect_denied "deleting the $kind labelled Always" -n "$NS" delete "$res" "$name" --wait=false
  grep -q "$kind $NS/$name" "$WORK/dp.log" || die "the denial does not name the $kind: $(cat "$WORK/dp.log")"
  k -n "$NS" label "$res" "$name" "$DP_LABEL-" >/dev/null || die "removing the $kind's label"
  k -n "$NS" delete "$res" "$name" --wait=false >"$WORK/dp.log" 2>&1 ||
    die "deleting the $kind without its label was refused: $(cat "$WORK/dp.log")"
done
# Cascading: a Deployment with replicas cannot go; scaled to 0 it can.
sed -e "s|protected-deployment|cascading|; s|$DP_LABEL: Always|$DP_LABEL: Cascading|; s|replicas: 0|replicas: 2|" \
  "$WORK/dp-Deployment.yaml" >"$WORK/dp-cascading.yaml"
k -n "$NS" apply -f "$WORK/dp-cascading.yaml" >"$WORK/dp.log" 2>&1 ||
  die "creating the Cascading Deployment: $(cat "$WORK/dp.log")"
expect_denied "deleting the Cascading Deployment of 2 replicas" -n "$NS" delete deployment cascading --wait=false
grep -q 'spec.replicas is 2' "$WORK/dp.log" || die "the denial does not say why: $(cat "$WORK/dp.log")"
k -n "$NS" scale deployment cascading --replicas=0 >/dev/null || die "scaling the Cascading Deployment to 0"
k -n "$NS" delete deployment cascading --wait=false >"$WORK/dp.log" 2>&1 ||
  die "deleting the Cascading Deployment at 0 replicas was refused: $(cat "$WORK/dp.log")"
wait_for 60 "namespace $DP_NS deleted" dp_ns_absent
step_done "each delete denied until the pod, the label or the replicas were gone: $ns_denial"

# --- 10 ------------------------------------------------------------------------------------------
step 10 "with the manager stopped, a delete passes (failurePolicy Ignore)"
mapfile -t PODS < <(live_pods | cut -d' ' -f1)
delete_pod "${PODS[0]}" || die "deleting ${PODS[0]} was refused: $(cat "$WORK/delete.log")"
pub_is web '.status.unavailableAllowed == 0' || die "the budget is not spent: $(pub_json web | jq -c .status)"
kill "$MANAGER_PID" && wait "$MANAGER_PID" 2>/dev/null
MANAGER_PID=
t=$(now_ms)
delete_pod "${PODS[1]}" || die "with no manager the delete was refused: $(cat "$WORK/delete.log")"
step_done "${PODS[1]} deleted in $(secs $(($(now_ms) - t)))s with the budget spent and no manager"

say "all steps passed:"
for r in "${RESULTS[@]}"; do echo "  $r"; done
