# kruise-cpp test bed: builds OCI image layouts locally (no Docker, no downloads) and pushes them.
# Sourced by `up` after lib.sh. Entry points: tb_build_images, tb_push_images.
# shellcheck shell=bash

# Writes a reproducible tar of directory $1 to $2 (fixed owner, mtime and member order).
tb_tar() {
  tar -C "$1" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 --format=gnu -cf "$2" .
}

# Moves file $1 into the layout's blob store; prints "<hex digest> <size>".
tb_store_blob() {
  local hex size
  hex=$(sha256sum "$1" | cut -d' ' -f1)
  size=$(stat -c %s "$1")
  mv "$1" "$TB_LAYOUT/blobs/sha256/$hex"
  echo "$hex $size"
}

# Starts a new OCI layout for image $1:$2 under the staging dir.
tb_layout_begin() {
  TB_LAYOUT=$TB_STAGE/$1_$2
  TB_LAYER_DESCS=()
  TB_DIFF_IDS=()
  TB_LAYER_DIGESTS=()
  rm -rf "$TB_LAYOUT"
  mkdir -p "$TB_LAYOUT/blobs/sha256"
}

# Adds uncompressed tar $1 as a gzip layer of the current layout.
tb_layout_add_layer() {
  local diff hex size
  diff=$(sha256sum "$1" | cut -d' ' -f1)
  gzip -n -1 -c "$1" >"$TB_LAYOUT/layer.tmp"
  read -r hex size < <(tb_store_blob "$TB_LAYOUT/layer.tmp")
  TB_LAYER_DESCS+=("{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"sha256:$hex\",\"size\":$size}")
  TB_DIFF_IDS+=("\"sha256:$diff\"")
  TB_LAYER_DIGESTS+=("sha256:$hex")
}

tb_join() { # <sep> <items...>
  local sep=$1 out="" x
  shift
  for x in "$@"; do out+="${out:+$sep}$x"; done
  printf '%s' "$out"
}

# Finishes the current layout: config, manifest, index (tag $2 of image $1), runtime config JSON $3.
tb_layout_end() {
  local name=$1 tag=$2 runtime_cfg=$3 cfg_hex cfg_size m_hex m_size
  printf '{"architecture":"amd64","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":[%s]}}' \
    "$runtime_cfg" "$(tb_join , "${TB_DIFF_IDS[@]}")" >"$TB_LAYOUT/config.tmp"
  read -r cfg_hex cfg_size < <(tb_store_blob "$TB_LAYOUT/config.tmp")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[%s]}' \
    "$cfg_hex" "$cfg_size" "$(tb_join , "${TB_LAYER_DESCS[@]}")" >"$TB_LAYOUT/manifest.tmp"
  read -r m_hex m_size < <(tb_store_blob "$TB_LAYOUT/manifest.tmp")
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"%s"}}]}' \
    "$m_hex" "$m_size" "$tag" >"$TB_LAYOUT/index.json"
  printf '{"imageLayoutVersion":"1.0.0"}' >"$TB_LAYOUT/oci-layout"
  # One line per image: name:tag manifest-digest config-digest layer-digests...
  echo "$name:$tag sha256:$m_hex sha256:$cfg_hex ${TB_LAYER_DIGESTS[*]}" >>"$TB_STAGE/images.txt"
}

# A root filesystem made of Debian's static busybox with its applet links; $2 is a marker written to
# /etc/kruise-testbed (a different marker gives a layer with a different digest).
tb_busybox_rootfs() {
  local r=$1 marker=$2 applet
  mkdir -p "$r"/{bin,sbin,usr/bin,usr/sbin,etc,root,tmp,proc,sys,dev,var/tmp}
  chmod 1777 "$r/tmp" "$r/var/tmp"
  install -m 0755 /bin/busybox "$r/bin/busybox"
  for applet in $("$r/bin/busybox" --list-full); do
    [[ $applet == bin/busybox || -e $r/$applet ]] && continue
    mkdir -p "$r/$(dirname "$applet")"
    ln -s /bin/busybox "$r/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$r/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$r/etc/group"
  echo "$marker" >"$r/etc/kruise-testbed"
}

# Writes $2 MiB of deterministic incompressible bytes (AES-CTR keystream, key derived from $3) to $1.
tb_random_file() {
  local out=$1 mib=$2 seed=$3 key iv
  key=$(printf '%s' "key-$seed" | sha256sum | cut -c1-32)
  iv=$(printf '%s' "iv-$seed" | sha256sum | cut -c1-32)
  head -c $((mib * 1024 * 1024)) /dev/zero | openssl enc -aes-128-ctr -nosalt -K "$key" -iv "$iv" >"$out"
  [[ $(stat -c %s "$out") == $((mib * 1024 * 1024)) ]] || tb_die "generating $out failed"
}

TB_PATH_ENV='"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]'

tb_build_images() {
  [[ -f $TB_IMAGES/.complete ]] && return 0
  # Several test beds may start at once (one per build dir): build the shared cache only once.
  exec 9>"$TB_CACHE/build.lock"
  flock -w 600 9 || tb_die "timed out waiting for $TB_CACHE/build.lock"
  if [[ -f $TB_IMAGES/.complete ]]; then
    exec 9>&-
    return 0
  fi
  command -v gcc >/dev/null || tb_die "gcc is needed to build the pause image"
  [[ -x /bin/busybox ]] || tb_die "/bin/busybox (busybox-static) is missing"
  local t0=$SECONDS w
  tb_log "building image layouts into $TB_IMAGES (once per machine)"
  TB_STAGE=$TB_IMAGES.tmp
  rm -rf "$TB_STAGE"
  mkdir -p "$TB_STAGE"
  w=$TB_STAGE/work
  mkdir -p "$w"

  # pause: a static C binary that exits 0 on SIGTERM (it is PID 1 of the sandbox).
  mkdir -p "$w/pause"
  gcc -Os -static -o "$w/pause/pause" "$TB_SCRIPT_DIR/pause.c" || tb_die "compiling pause.c failed"
  strip "$w/pause/pause"
  tb_tar "$w/pause" "$w/pause.tar"
  tb_layout_begin pause 3.9
  tb_layout_add_layer "$w/pause.tar"
  tb_layout_end pause 3.9 "{\"Entrypoint\":[\"/pause\"],$TB_PATH_ENV}"

  # busybox:1.35 from busybox-static.
  tb_busybox_rootfs "$w/busybox" busybox
  tb_tar "$w/busybox" "$w/busybox.tar"
  tb_layout_begin busybox 1.35
  tb_layout_add_layer "$w/busybox.tar"
  tb_layout_end busybox 1.35 "{\"Cmd\":[\"sh\"],$TB_PATH_ENV}"

  # sized:<n>m: a busybox base layer of its own (different marker, so no layer is shared with
  # busybox:1.35 and a removed sized image leaves no content behind) plus incompressible data layers.
  local spec name mib layers each i
  for spec in 10m:3:3 100m:4:25; do
    IFS=: read -r name layers each <<<"$spec"
    tb_busybox_rootfs "$w/sized-$name/base" "sized-$name"
    tb_tar "$w/sized-$name/base" "$w/sized-$name/base.tar"
    tb_layout_begin sized "$name"
    tb_layout_add_layer "$w/sized-$name/base.tar"
    for ((i = 1; i <= layers; i++)); do
      mkdir -p "$w/sized-$name/l$i/data"
      tb_random_file "$w/sized-$name/l$i/data/layer$i.bin" "$each" "sized-$name-$i"
      tb_tar "$w/sized-$name/l$i" "$w/sized-$name/l$i.tar"
      tb_layout_add_layer "$w/sized-$name/l$i.tar"
      rm -rf "$w/sized-$name/l$i" "$w/sized-$name/l$i.tar"
    done
    tb_layout_end sized "$name" "{\"Cmd\":[\"sh\"],$TB_PATH_ENV}"
    rm -rf "$w/sized-$name"
  done
  mib=$(du -sm "$TB_STAGE" | cut -f1)
  rm -rf "$w"
  touch "$TB_STAGE/.complete"
  rm -rf "$TB_IMAGES"
  mv "$TB_STAGE" "$TB_IMAGES"
  exec 9>&-
  tb_log "image layouts built in $((SECONDS - t0)) s ($mib MiB)"
}

# Lines "layout registry name:tag" describing what goes where.
tb_push_plan() {
  local img
  for img in pause_3.9 busybox_1.35 sized_10m sized_100m; do
    echo "$TB_IMAGES/$img $TB_REGISTRY ${img%%_*}:${img#*_}"
  done
  for img in pause_3.9 busybox_1.35; do
    echo "$TB_IMAGES/$img $TB_REGISTRY_TLS ${img%%_*}:${img#*_}"
  done
}

tb_push_images() {
  local t0=$SECONDS layout reg ref code n=0 pw
  local -a auth
  pw=$(tb_password)
  mkdir -p "$TB_DIR/skopeo-certs"
  cp "$TB_PKI/ca.crt" "$TB_DIR/skopeo-certs/ca.crt"
  while read -r layout reg ref; do
    if [[ $reg == "$TB_REGISTRY" ]]; then
      auth=()
      code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -I \
        -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
        "http://$reg/v2/${ref%%:*}/manifests/${ref#*:}") || true
      [[ $code == 200 ]] && continue
      auth=(--dest-tls-verify=false)
    else
      code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -I --cacert "$TB_PKI/ca.crt" \
        -u "$TB_REGISTRY_USER:$pw" -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
        "https://$reg/v2/${ref%%:*}/manifests/${ref#*:}") || true
      [[ $code == 200 ]] && continue
      auth=(--dest-cert-dir "$TB_DIR/skopeo-certs" --dest-creds "$TB_REGISTRY_USER:$pw")
    fi
    if ! skopeo --insecure-policy copy --quiet --preserve-digests "${auth[@]}" \
      "oci:$layout:${ref#*:}" "docker://$reg/$ref" >>"$TB_LOGS/skopeo.log" 2>&1; then
      tb_tail_log skopeo
      tb_die "pushing $reg/$ref failed"
    fi
    n=$((n + 1))
  done < <(tb_push_plan)
  cp "$TB_IMAGES/images.txt" "$TB_DIR/images.txt"
  tb_log "pushed $n image(s) in $((SECONDS - t0)) s"
}
