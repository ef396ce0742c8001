# Part 6 of daemon_e2e.sh (sourced): kruise-daemon started before its container runtime.
#
# The daemon runs as a local process (health on 127.0.0.1:$LOCAL_PORT, kube-local's admin
# kubeconfig, NODE_NAME=$LOCAL_NODE, a node name no one else uses) with --host-run-dir pointing at
# an empty directory. It must stay up with /healthz 503 naming the socket it tried; then a private
# containerd (own root, state and socket, kube-local's registry hosts config) starts there, and the
# daemon must find it by itself, turn healthy and ready, and pull a NodeImage tag through it.

PRIVATE_CTRD=$WORK/ctrd
mkdir -p "$PRIVATE_CTRD"/{root,state,run,runc,opt,cni}
cat >"$PRIVATE_CTRD/config.toml" <<EOF
version = 2
root = "$PRIVATE_CTRD/root"
state = "$PRIVATE_CTRD/state"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$PRIVATE_CTRD/run/containerd.sock"
[ttrpc]
  address = "$PRIVATE_CTRD/run/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$PRIVATE_CTRD/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$KUBE_LOCAL_PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$PRIVATE_CTRD/cni"
    conf_dir = "$PRIVATE_CTRD/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "$PRIVATE_CTRD/runc"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$KUBE_LOCAL_STATE/containerd/certs.d"
EOF

health_code() { curl -s -o "$WORK/health.body" -w '%{http_code}' "http://127.0.0.1:$LOCAL_PORT/$1"; }
! curl -s -o /dev/null "http://127.0.0.1:$LOCAL_PORT/healthz" ||
  die "127.0.0.1:$LOCAL_PORT is already in use (KRUISE_E2E_DAEMON_LOCAL_PORT)"

NODE_NAME=$LOCAL_NODE "$BINARY" --addr "127.0.0.1:$LOCAL_PORT" --host-run-dir "$PRIVATE_CTRD/run" \
  --socket-file containerd.sock --kubeconfig "$KUBECONFIG" >"$WORK/local-daemon.log" 2>&1 &
LOCAL_DAEMON=$!
PIDS+=("$LOCAL_DAEMON")
T_LOCAL=$(now_ms)
retried_twice() {
  kill -0 "$LOCAL_DAEMON" 2>/dev/null || die "the daemon exited without a runtime: $(tail -5 "$WORK/local-daemon.log")"
  [ "$(grep -c 'no CRI runtime yet' "$WORK/local-daemon.log")" -ge 2 ]
}
wait_for 30 "the daemon to retry runtime discovery twice" retried_twice
code=$(health_code healthz)
[ "$code" = 503 ] || die "/healthz without a runtime: HTTP $code, want 503"
grep -q "containerd.sock" "$WORK/health.body" ||
  die "/healthz does not name the socket it tried: $(head -c 300 "$WORK/health.body")"
code=$(health_code readyz)
[ "$code" = 503 ] || die "/readyz without a runtime: HTTP $code, want 503"
result "late containerd: daemon up without a runtime for $(secs $(($(now_ms) - T_LOCAL)))s, /healthz and /readyz 503, $(grep -c 'no CRI runtime yet' "$WORK/local-daemon.log") discovery retries"

(cd / && NOTIFY_SOCKET='' exec containerd --config "$PRIVATE_CTRD/config.toml") \
  >"$WORK/containerd.log" 2>&1 &
PIDS+=($!)
T_CTRD=$(now_ms)
ctrd_up() { ctr --address "$PRIVATE_CTRD/run/containerd.sock" version >/dev/null 2>&1; }
wait_for 60 "the private containerd" ctrd_up
daemon_healthy() { [ "$(health_code healthz)" = 200 ] && [ "$(health_code readyz)" = 200 ]; }
wait_for 60 "the daemon to find the late containerd" daemon_healthy
RECOVER_MS=$(($(now_ms) - T_CTRD))
kill -0 "$LOCAL_DAEMON" || die "the daemon process was replaced"

# It works, not just answers: pull a tag through the late runtime.
cat <<EOF | k apply -f - >/dev/null || die "creating NodeImage $LOCAL_NODE"
apiVersion: apps.kruise.io/v1beta1
kind: NodeImage
metadata:
  name: $LOCAL_NODE
spec:
  images:
    $REG/busybox:
      tags:
      - {tag: "1.35", version: 1, createdAt: "$(date -u +%Y-%m-%dT%H:%M:%SZ)"}
EOF
local_pulled() {
  [ "$(k get nodeimages.apps.kruise.io "$LOCAL_NODE" -o json |
    jq -r --arg i "$REG/busybox" '(.status.imageStatuses[$i].tags // [])[0].phase // empty')" = Succeeded ]
}
wait_for 60 "the late-runtime daemon to pull $REG/busybox:1.35" local_pulled
# (grep on a here-string: grep -q at the end of a pipe can SIGPIPE the writer, failing pipefail.)
grep -qx "$REG/busybox:1.35" <<<"$(ctr --address "$PRIVATE_CTRD/run/containerd.sock" -n k8s.io images ls -q)" ||
  die "the image is not in the private containerd"
result "late containerd: healthy and ready $(secs "$RECOVER_MS")s after containerd started, same process, pulled $REG/busybox:1.35 through it"
k delete nodeimages.apps.kruise.io "$LOCAL_NODE" --ignore-not-found >/dev/null
