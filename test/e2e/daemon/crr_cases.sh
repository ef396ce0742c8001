# Part 5 of daemon_e2e.sh (sourced): ContainerRecreateRequests executed by the DaemonSet's daemon.
#
# The manager (whose webhook labels CRRs and fills statusContext) is not deployed, so the CRRs
# carry what it would add: labels crr.apps.kruise.io/node-name, pod-uid and active=true, and per
# container statusContext {containerID, restartCount} from the pod's status and its preStop.
#
#  a) pod "single": container app (busybox sh that exits on SIGTERM), preStop exec appending to a
#     marker file in an emptyDir → after the CRR: restartCount + 1, a new container ID, CRR
#     Completed with the container Succeeded, the marker line readable with kubectl exec;
#  b) pod "pair": containers first and second, CRR with orderedRecreate and minStartedSeconds 3 →
#     both restarted once, the preStop markers in spec order, and second restarted only after
#     first had been running again (start times at least 2 s apart).

k create namespace "$NS" >/dev/null || die "creating namespace $NS"
BB=$KUBE_LOCAL_BUSYBOX_IMAGE
# PID 1 ignores SIGTERM without a handler (notes: containerd item 4), hence the trap.
APP_CMD="trap 'exit 0' TERM; sleep 3600 & wait"
container_yaml() { # NAME
  cat <<EOF
  - name: $1
    image: $BB
    command: ["sh", "-c", "$APP_CMD"]
    volumeMounts: [{name: marker, mountPath: /marker}]
    lifecycle:
      preStop:
        exec:
          command: ["sh", "-c", "echo $1 \$(date +%s) >> /marker/prestop"]
EOF
}
make_pod() { # NAME CONTAINER...
  local name=$1
  shift
  {
    cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $name, namespace: $NS}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 5
  volumes: [{name: marker, emptyDir: {}}]
  containers:
EOF
    for c in "$@"; do container_yaml "$c"; done
  } | k apply -f - >/dev/null || die "creating pod $name"
}
make_pod single app
make_pod pair first second
pod_ready() { # POD
  [ "$(k -n "$NS" get pod "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
wait_for 90 "pod single to be Ready" pod_ready single
wait_for 30 "pod pair to be Ready" pod_ready pair

pod_json() { k -n "$NS" get pod "$1" -o json >"$WORK/pod-$1.json" || die "reading pod $1"; }
cstat() { # POD CONTAINER FIELD (jq path below the containerStatus)
  jq -r --arg c "$2" ".status.containerStatuses[] | select(.name == \$c) | $3 // empty" "$WORK/pod-$1.json"
}
# Writes a CRR for POD's CONTAINERS (with their preStop and statusContext) and creates it.
make_crr() { # CRR POD ORDERED MIN_STARTED CONTAINER...
  local crr=$1 pod=$2 ordered=$3 min_started=$4
  shift 4
  pod_json "$pod"
  local uid containers=""
  uid=$(jq -r .metadata.uid "$WORK/pod-$pod.json")
  for c in "$@"; do
    containers+="  - name: $c
    preStop:
      exec:
        command: [\"sh\", \"-c\", \"echo $c \$(date +%s) >> /marker/prestop\"]
    statusContext:
      containerID: $(cstat "$pod" "$c" .containerID)
      restartCount: $(cstat "$pod" "$c" .restartCount)
"
  done
  cat >"$WORK/crr-$crr.yaml" <<EOF
apiVersion: apps.kruise.io/v1alpha1
kind: ContainerRecreateRequest
metadata:
  name: $crr
  namespace: $NS
  labels:
    crr.apps.kruise.io/node-name: "$NODE"
    crr.apps.kruise.io/pod-uid: "$uid"
    crr.apps.kruise.io/active: "true"
spec:
  podName: $pod
  containers:
$containers  strategy:
    failurePolicy: Fail
    orderedRecreate: $ordered
    terminationGracePeriodSeconds: 5
    minStartedSeconds: $min_started
  activeDeadlineSeconds: 120
EOF
  k apply -f "$WORK/crr-$crr.yaml" >/dev/null || die "creating CRR $crr"
}
crr_completed() { # CRR
  k -n "$NS" get containerrecreaterequests.apps.kruise.io "$1" -o json >"$WORK/crr-$1.json" 2>/dev/null &&
    [ "$(jq -r '.status.phase // empty' "$WORK/crr-$1.json")" = Completed ]
}
check_crr_succeeded() { # CRR CONTAINER...
  local crr=$1 c phase
  shift
  for c in "$@"; do
    phase=$(jq -r --arg c "$c" '.status.containerRecreateStates[]? | select(.name == $c) | .phase' \
      "$WORK/crr-$crr.json")
    [ "$phase" = Succeeded ] ||
      die "CRR $crr container $c ended '$phase': $(jq -c .status "$WORK/crr-$crr.json")"
  done
}
restarted() { # POD CONTAINER OLD_ID OLD_COUNT
  pod_json "$1"
  local id count running
  id=$(cstat "$1" "$2" .containerID)
  count=$(cstat "$1" "$2" .restartCount)
  running=$(cstat "$1" "$2" .state.running.startedAt)
  [ "$id" != "$3" ] && [ "$count" = $(($4 + 1)) ] && [ -n "$running" ]
}

# a) one container, preStop marker.
pod_json single
old_id=$(cstat single app .containerID)
old_count=$(cstat single app .restartCount)
t=$(now_ms)
make_crr crr-single single false 1 app
wait_for 60 "CRR crr-single to complete" crr_completed crr-single
CRR_SINGLE_MS=$(($(now_ms) - t))
check_crr_succeeded crr-single app
wait_for 30 "the kubelet to report app restarted" restarted single app "$old_id" "$old_count"
marker=$(k -n "$NS" exec single -c app -- cat /marker/prestop) || die "reading the preStop marker"
[ "$(grep -c '^app ' <<<"$marker")" = 1 ] || die "preStop marker of app: '$marker'"
result "CRR: single container restarted by the kubelet (restartCount $old_count -> $(cstat single app .restartCount), new container ID), CRR Completed/Succeeded in $(secs "$CRR_SINGLE_MS")s, preStop marker '$marker'"

# b) two containers, orderedRecreate.
pod_json pair
first_id=$(cstat pair first .containerID)
first_count=$(cstat pair first .restartCount)
second_id=$(cstat pair second .containerID)
second_count=$(cstat pair second .restartCount)
t=$(now_ms)
make_crr crr-pair pair true 3 first second
wait_for 90 "CRR crr-pair to complete" crr_completed crr-pair
CRR_PAIR_MS=$(($(now_ms) - t))
check_crr_succeeded crr-pair first second
wait_for 30 "the kubelet to report first restarted" restarted pair first "$first_id" "$first_count"
wait_for 30 "the kubelet to report second restarted" restarted pair second "$second_id" "$second_count"
marker=$(k -n "$NS" exec pair -c first -- cat /marker/prestop) || die "reading the preStop markers"
[ "$(cut -d' ' -f1 <<<"$marker" | tr '\n' ' ')" = "first second " ] ||
  die "preStop markers not in spec order: '$marker'"
s1=$(date -d "$(cstat pair first .state.running.startedAt)" +%s)
s2=$(date -d "$(cstat pair second .state.running.startedAt)" +%s)
[ $((s2 - s1)) -ge 2 ] || die "orderedRecreate: second restarted ${s2}-${s1}s after first, want >= 2 s"
result "CRR: orderedRecreate restarted first then second ($((s2 - s1))s apart, preStop markers in order), CRR Completed/Succeeded in $(secs "$CRR_PAIR_MS")s"
