#!/usr/bin/env bash
# Validates deploy/: renders every kustomization with kubectl's built-in kustomize (kubectl 1.20,
# the oldest we support), runs the structural checks of check_manifests.py on the output, and, when
# a kube-local API server answers, proves the manifests against it:
#   1. CRDs: server-side dry run, then applied for real (cluster-scoped, harmless) until Established;
#   2. the two namespaces are created if missing (server-side dry runs of namespaced objects need
#      them; they are left in place);
#   3. every kustomization: `kubectl apply --dry-run=server`;
#   4. deploy/samples (v1alpha1 and v1beta1 objects shaped like OpenKruise's docs) are accepted, and
#      the schema defaults (ImagePullJob) are applied;
#   5. test/deploy/invalid/*.yaml are each rejected by the API server itself (client validation off);
#   6. a ContainerRecreateRequest written through v1beta1 (not the storage version) keeps its
#      v1beta1 status fields, i.e. `conversion: None` is lossless (in a temporary namespace);
#   7. printer columns as the server prints them (a Table) for the WorkloadSpread, PUB and ASTS
#      samples: plain-path columns show the object's values, no spec column is always blank;
#   8. a SidecarSet written through v1alpha1 with spec.namespace reads back unchanged through
#      v1beta1 (the storage version) and v1alpha1, and one written through v1beta1 keeps
#      spec.customVersion when read through v1alpha1 (cluster-scoped, deleted afterwards).
#
# Exit 0 when everything passed, or (with a SKIP message) when kubectl or the cluster is absent and
# KRUISE_E2E_REQUIRED is not 1; non-zero on any failure.
# Environment: KRUISE_KUBE_LOCAL_ENV (default ${KUBE_LOCAL_STATE:-/tmp/kube-local}/env), KUBECTL.
set -uo pipefail

HERE=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
DEPLOY=$ROOT/deploy
# shellcheck source=../e2e/lib.sh
. "$ROOT/test/e2e/lib.sh"  # skip_or_fail
PY=/usr/bin/python3

failures=0
pass() { echo "ok   $*"; }
fail() {
  echo "FAIL $*"
  failures=$((failures + 1))
}
finish() {
  if [ "$failures" -gt 0 ]; then
    echo "validate.sh: $failures failure(s)"
    exit 1
  fi
  echo "validate.sh: all passed"
  exit 0
}

ENV_FILE=${KRUISE_KUBE_LOCAL_ENV:-${KUBE_LOCAL_STATE:-/tmp/kube-local}/env}
if [ -f "$ENV_FILE" ]; then
  # shellcheck disable=SC1090
  . "$ENV_FILE"
fi
KUBECTL=${KUBECTL:-${KUBE_LOCAL_KUBECTL:-}}
if [ -z "$KUBECTL" ] || [ ! -x "$KUBECTL" ]; then
  KUBECTL=$(command -v kubectl || ls /var/cache/kube-local/bin/*/kubectl 2>/dev/null | head -1)
fi
[ -n "$KUBECTL" ] && [ -x "$KUBECTL" ] || skip_or_fail "no kubectl (kube-local not built yet)"
[ -x "$PY" ] && "$PY" -c 'import yaml' 2>/dev/null || skip_or_fail "$PY with python3-yaml is required"
k() { timeout 60 "$KUBECTL" "$@"; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/deploy-validate.XXXXXX")
TEST_NS=""
TEST_SIDECARSETS=()
cleanup() {
  if [ -n "$TEST_NS" ]; then k delete namespace "$TEST_NS" --wait=false >/dev/null 2>&1; fi
  for s in "${TEST_SIDECARSETS[@]}"; do k delete sidecarset "$s" --wait=false >/dev/null 2>&1; done
  rm -rf "$WORK"
}
trap cleanup EXIT

# --- offline: render and check ------------------------------------------------------------------
mapfile -t KUSTOMIZATIONS < <(cd "$DEPLOY" && find . -name kustomization.yaml -printf '%h\n' |
  sed 's|^\./||' | sort)
mkdir -p "$WORK/render"
for dir in "${KUSTOMIZATIONS[@]}"; do
  out="$WORK/render/${dir//\//__}.yaml"
  if k kustomize "$DEPLOY/$dir" >"$out" 2>"$WORK/err" && [ -s "$out" ]; then
    pass "render $dir ($(grep -c '^kind:' "$out") objects)"
  else
    fail "render $dir: $(head -c 400 "$WORK/err")"
  fi
done
if "$PY" "$HERE/check_manifests.py" "$WORK/render" >"$WORK/checks" 2>&1; then
  pass "$(tail -1 "$WORK/checks")"
else
  fail "structural checks:"
  sed 's/^/     /' "$WORK/checks"
fi

# --- against a real API server ------------------------------------------------------------------
if [ -z "${KUBECONFIG:-}" ] || ! k get --raw=/healthz >/dev/null 2>&1; then
  if [ "$failures" -gt 0 ]; then finish; fi
  skip_or_fail "offline checks passed; no kube-local API server (env file $ENV_FILE) for the server-side checks"
fi

CRDS=(nodeimages.apps.kruise.io imagepulljobs.apps.kruise.io containerrecreaterequests.apps.kruise.io
  clonesets.apps.kruise.io sidecarsets.apps.kruise.io statefulsets.apps.kruise.io
  daemonsets.apps.kruise.io podunavailablebudgets.policy.kruise.io workloadspreads.apps.kruise.io)
# CRDs served in two versions (v1alpha1 and v1beta1) with one schema.
TWO_VERSION_CRDS=(nodeimages.apps.kruise.io imagepulljobs.apps.kruise.io containerrecreaterequests.apps.kruise.io
  sidecarsets.apps.kruise.io statefulsets.apps.kruise.io daemonsets.apps.kruise.io)
if k apply --dry-run=server -k "$DEPLOY/crds" >"$WORK/out" 2>&1; then
  pass "CRDs: server-side dry run"
else
  fail "CRDs: server-side dry run: $(cat "$WORK/out")"
fi
if k apply -k "$DEPLOY/crds" >"$WORK/out" 2>&1 &&
  k wait --for condition=established --timeout=60s "${CRDS[@]/#/crd/}" >>"$WORK/out" 2>&1; then
  pass "CRDs: applied and Established"
else
  fail "CRDs: apply: $(cat "$WORK/out")"
  finish
fi
for crd in "${TWO_VERSION_CRDS[@]}"; do
  # The API server's view: both versions carry the same schema (what makes conversion None lossless).
  a=$(k get crd "$crd" -o jsonpath='{.spec.versions[0].schema}')
  b=$(k get crd "$crd" -o jsonpath='{.spec.versions[1].schema}')
  if [ -n "$a" ] && [ "$a" = "$b" ]; then pass "$crd: versions share one schema"; else fail "$crd: schemas differ"; fi
done

if k apply -k "$DEPLOY/namespaces" >"$WORK/out" 2>&1; then
  pass "namespaces present"
else
  fail "namespaces: $(cat "$WORK/out")"
fi
minor=$(k version -o json 2>/dev/null | "$PY" -c 'import json,sys; print(int("".join(c for c in json.load(sys.stdin)["serverVersion"]["minor"] if c.isdigit())))' 2>/dev/null || echo 0)
for dir in "${KUSTOMIZATIONS[@]}"; do
  [ "$dir" = samples ] && continue
  if [ "$dir" = manager/overlays/match-label-keys ] && [ "$minor" -lt 27 ]; then
    # Documented: this overlay is for Kubernetes >= 1.27; older kubectl must refuse the field.
    if ! k apply --dry-run=server -k "$DEPLOY/$dir" >"$WORK/out" 2>&1 &&
      grep -q 'unknown field "matchLabelKeys"' "$WORK/out"; then
      pass "server-side dry run: $dir refused on 1.$minor as documented"
    else
      fail "$dir: expected kubectl 1.$minor to refuse matchLabelKeys: $(tail -c 600 "$WORK/out")"
    fi
    continue
  fi
  if k apply --dry-run=server -k "$DEPLOY/$dir" >"$WORK/out" 2>&1; then
    pass "server-side dry run: $dir"
  else
    fail "server-side dry run: $dir: $(head -c 1500 "$WORK/out")"
  fi
done

if k apply --dry-run=server -n default -k "$DEPLOY/samples" >"$WORK/out" 2>&1; then
  pass "samples accepted ($(grep -c 'server dry run' "$WORK/out") objects)"
else
  fail "samples: $(cat "$WORK/out")"
fi
defaults=$(k create --dry-run=server -n default -f "$DEPLOY/samples/imagepulljob-podselector.yaml" \
  -o jsonpath='{.spec.completionPolicy.type} {.spec.pullPolicy.timeoutSeconds} {.spec.pullPolicy.backoffLimit} {.spec.parallelism} {.spec.imagePullPolicy}' 2>&1)
if [ "$defaults" = "Always 600 3 1 IfNotPresent" ]; then
  pass "ImagePullJob schema defaults applied"
else
  fail "ImagePullJob defaults: got '$defaults'"
fi

for f in "$HERE"/invalid/*.yaml; do
  if k apply --dry-run=server --validate=false -n default -f "$f" >"$WORK/out" 2>&1; then
    fail "accepted an invalid object: $(basename "$f")"
  elif grep -q "is invalid" "$WORK/out"; then
    pass "rejected $(basename "$f")"
  else
    fail "$(basename "$f") failed for another reason: $(cat "$WORK/out")"
  fi
done

# Lossless round trip through the non-storage version (CRR: v1alpha1 stored, v1beta1 served).
TEST_NS=deploy-validate-$$
if k create namespace "$TEST_NS" >/dev/null 2>&1 &&
  k apply -n "$TEST_NS" -f - >/dev/null 2>"$WORK/err" <<'EOF'
apiVersion: apps.kruise.io/v1beta1
kind: ContainerRecreateRequest
metadata:
  name: round-trip
spec:
  podName: web-0
  containers:
  - name: app
EOF
then
  path=/apis/apps.kruise.io/v1beta1/namespaces/$TEST_NS/containerrecreaterequests/round-trip
  k get --raw "$path" |
    "$PY" -c 'import json,sys; o=json.load(sys.stdin); o["status"]={"phase":"Recreating","containerStatusSnapshot":[{"name":"app","ready":True,"restartCount":2}]}; print(json.dumps(o))' \
      >"$WORK/crr.json"
  k replace --raw "$path/status" -f "$WORK/crr.json" >/dev/null 2>"$WORK/err"
  got=$(k get --raw "$path" | "$PY" -c 'import json,sys; s=json.load(sys.stdin).get("status",{}); print(s.get("phase"), s.get("containerStatusSnapshot"))')
  if [ "$got" = "Recreating [{'name': 'app', 'ready': True, 'restartCount': 2}]" ]; then
    pass "CRR v1beta1 status survives storage in v1alpha1"
  else
    fail "CRR round trip: got '$got' $(cat "$WORK/err")"
  fi
else
  fail "CRR round trip setup: $(cat "$WORK/err")"
fi

# Printer columns as the API server prints them (a server-side Table) for the samples of the
# kinds whose columns read spec fields: every column with a plain path (.a.b, no filter or
# wildcard) shows the object's value there, and none of the others is blank on every row. A JSONPath
# filter over a scalar (OpenKruise's WorkloadSpread "Adaptive") passes CRD validation and then
# prints nothing, which only a real server shows.
for res_file in workloadspreads.apps.kruise.io:workloadspread-v1alpha1 \
  podunavailablebudgets.policy.kruise.io:podunavailablebudget-v1alpha1 \
  statefulsets.apps.kruise.io:statefulset-v1beta1; do
  res=${res_file%%:*}
  if ! k -n "$TEST_NS" create -f "$DEPLOY/samples/${res_file#*:}.yaml" >/dev/null 2>"$WORK/err"; then
    fail "printer columns: creating the ${res_file#*:} sample: $(cat "$WORK/err")"
    continue
  fi
  k get crd "$res" -o json >"$WORK/crd.json"
  version=$("$PY" -c 'import json,sys; print([v["name"] for v in json.load(sys.stdin)["spec"]["versions"] if v["storage"]][0])' <"$WORK/crd.json")
  if ! curl -sf --cacert "$KUBE_LOCAL_CA" -H "Authorization: Bearer $KUBE_LOCAL_TOKEN" \
    -H 'Accept: application/json;as=Table;v=v1;g=meta.k8s.io' \
    "$KUBE_LOCAL_APISERVER/apis/${res#*.}/$version/namespaces/$TEST_NS/${res%%.*}?includeObject=Object" \
    >"$WORK/table.json"; then
    fail "printer columns: no Table for $res"
    continue
  fi
  if "$PY" - "$WORK/table.json" "$WORK/crd.json" >"$WORK/out" 2>&1 <<'PYEOF'; then
import json, re, sys
table, crd = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
version = [v for v in crd["spec"]["versions"] if v["storage"]][0]
paths = {c["name"].lower(): c["jsonPath"] for c in version.get("additionalPrinterColumns", [])}
cols = [c["name"].lower() for c in table["columnDefinitions"]]
rows, bad = table.get("rows", []), []
if not rows:
    bad.append("no rows")
for i, name in enumerate(cols):
    path = paths.get(name)
    if path is None or name == "age":
        continue
    cells = [row["cells"][i] for row in rows]
    if re.fullmatch(r"(\.[A-Za-z0-9_]+)+", path):
        for row, cell in zip(rows, cells):
            value = row["object"]
            for key in path[1:].split("."):
                value = value.get(key) if isinstance(value, dict) else None
            if value is not None and cell != value:
                bad.append(f"{row['object']['metadata']['name']}: {name} ({path}) prints {cell!r}, the object has {value!r}")
    elif path.startswith((".spec", ".metadata")) and all(c in (None, "") for c in cells):
        bad.append(f"{name} ({path}) is blank on every row")
print("\n".join(bad) if bad else f"{len(rows)} rows, {len(cols)} columns")
sys.exit(1 if bad else 0)
PYEOF
    pass "printer columns of $res as the server prints them: $(cat "$WORK/out")"
  else
    fail "printer columns of $res: $(cat "$WORK/out")"
  fi
done

# SidecarSet: v1alpha1's spec.namespace and v1beta1's spec.customVersion survive either version
# (OpenKruise's conversion webhook would rewrite both). Created for real without webhooks (the
# manager is not deployed here); the pod selector matches nothing.
ss=deploy-validate-ss-$$
TEST_SIDECARSETS=("$ss-a" "$ss-b")
if k create -f - >/dev/null 2>"$WORK/err" <<EOF
apiVersion: apps.kruise.io/v1alpha1
kind: SidecarSet
metadata:
  name: $ss-a
spec:
  selector:
    matchLabels:
      deploy-validate: "$$"
  namespace: default
  containers:
  - name: sidecar
    image: busybox:1.35
---
apiVersion: apps.kruise.io/v1beta1
kind: SidecarSet
metadata:
  name: $ss-b
spec:
  selector:
    matchLabels:
      deploy-validate: "$$"
  customVersion: v7
  injectionStrategy:
    revision:
      customVersion: v6
  containers:
  - name: sidecar
    image: busybox:1.35
EOF
then
  # read_ss VERSION NAME PYTHON-EXPR-OVER-spec
  read_ss() {
    k get --raw "/apis/apps.kruise.io/$1/sidecarsets/$2" |
      "$PY" -c "import json,sys; s=json.load(sys.stdin)['spec']; print($3)"
  }
  got="$(read_ss v1beta1 "$ss-a" "s.get('namespace'), s.get('namespaceSelector')")"
  got="$got | $(read_ss v1alpha1 "$ss-a" "s.get('namespace')")"
  got="$got | $(read_ss v1alpha1 "$ss-b" "s.get('customVersion'), s['injectionStrategy']['revision']")"
  if [ "$got" = "default None | default | v7 {'customVersion': 'v6', 'policy': 'Always'}" ]; then
    pass "SidecarSet: either version's fields survive the other (and revision.policy defaults)"
  else
    fail "SidecarSet round trip: got '$got'"
  fi
else
  fail "SidecarSet round trip setup: $(cat "$WORK/err")"
fi

finish
