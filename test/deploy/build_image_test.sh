#!/usr/bin/env bash
# Tests scripts/build-image with /usr/bin/curl (dynamically linked) and busybox (static): the OCI
# layout is valid, the config has the entrypoint/user/labels, the rootfs holds the loader and every
# library ldd lists, the program runs from the unpacked rootfs as uid 65532, and two builds give
# the same manifest digest. Exit 1 on any failure.
set -uo pipefail
HERE=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
BUILD=$HERE/../../scripts/build-image
WORK=$(mktemp -d "${TMPDIR:-/tmp}/build-image-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
failures=0
pass() { echo "ok   $*"; }
fail() {
  echo "FAIL $*"
  failures=$((failures + 1))
}
for tool in umoci skopeo /usr/bin/curl; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool missing (scripts/install-deps)"; exit 1; }
done
export SOURCE_DATE_EPOCH=1700000000

if "$BUILD" curl /usr/bin/curl --out "$WORK/a" --tag t1 >"$WORK/log" 2>&1; then
  pass "build curl: $(tail -1 "$WORK/log")"
else
  fail "build curl: $(cat "$WORK/log")"
  exit 1
fi
"$BUILD" curl /usr/bin/curl --out "$WORK/b" --tag t1 >/dev/null 2>&1
da=$(skopeo inspect --format '{{.Digest}}' "oci:$WORK/a:t1" 2>&1)
db=$(skopeo inspect --format '{{.Digest}}' "oci:$WORK/b:t1" 2>&1)
if [[ "$da" == sha256:* ]] && [ "$da" = "$db" ]; then pass "reproducible digest $da"; else fail "digests differ: $da vs $db"; fi

cfg=$(skopeo inspect --config "oci:$WORK/a:t1" 2>&1)
grep -q '"User": "65532:65532"' <<<"$cfg" && pass "default user 65532" || fail "user: $cfg"
grep -q '"/usr/local/bin/curl"' <<<"$cfg" && pass "entrypoint" || fail "entrypoint: $cfg"
grep -q '"org.opencontainers.image.title": "curl"' <<<"$cfg" && pass "title label" || fail "label: $cfg"
grep -q '"created": "2023-11-14T22:13:20Z"' <<<"$cfg" && pass "created from SOURCE_DATE_EPOCH" || fail "created: $cfg"
layers=$(skopeo inspect --format '{{len .Layers}}' "oci:$WORK/a:t1")
[ "$layers" = 1 ] && pass "one layer" || fail "layers: $layers"

umoci unpack --image "$WORK/a:t1" "$WORK/bundle" >/dev/null 2>&1 || fail "umoci unpack"
R=$WORK/bundle/rootfs
missing=0
while read -r lib; do
  [ -f "$R$lib" ] || { fail "library missing in image: $lib"; missing=1; }
done < <(ldd /usr/bin/curl | awk '/=>/ { if ($3 ~ /^\//) print $3; next } $1 ~ /^\// { print $1 }')
[ "$missing" = 0 ] && pass "every ldd library and the loader are in the image"
grep -q '^nonroot:x:65532:65532:' "$R/etc/passwd" && pass "/etc/passwd" || fail "/etc/passwd"
[ "$(stat -c %a "$R/tmp")" = 1777 ] && pass "/tmp is 1777" || fail "/tmp mode"
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  cmp -s /etc/ssl/certs/ca-certificates.crt "$R/etc/ssl/certs/ca-certificates.crt" && pass "CA bundle" || fail "CA bundle"
fi
extra=$(find "$R" -type f | grep -v -e '^'"$R"'/etc/' -e '^'"$R"'/usr/local/bin/curl$' -e '\.so' | head -3)
[ -z "$extra" ] && pass "nothing else in the image" || fail "unexpected files: $extra"
out=$(chroot --userspec=65532:65532 "$R" /usr/local/bin/curl --version 2>&1 | head -1)
[[ "$out" == curl\ * ]] && pass "runs in its rootfs as 65532: ${out:0:40}" || fail "run: $out"

if [ -x /usr/bin/busybox ]; then
  if "$BUILD" busybox /usr/bin/busybox --out "$WORK/bb" >"$WORK/log" 2>&1 && grep -q "(0 shared libraries" "$WORK/log"; then
    pass "static binary: $(tail -1 "$WORK/log")"
  else
    fail "static binary: $(cat "$WORK/log")"
  fi
fi
"$BUILD" curl /usr/bin/curl --rootfs "$WORK/rootfs" >/dev/null 2>&1 && [ -x "$WORK/rootfs/usr/local/bin/curl" ] &&
  pass "--rootfs" || fail "--rootfs"
if "$BUILD" Bad /usr/bin/curl --out "$WORK/x" >/dev/null 2>&1; then fail "accepted an invalid name"; else pass "rejects an invalid name"; fi
printf 'not a program\n' >"$WORK/data" && chmod 0644 "$WORK/data"
if "$BUILD" x "$WORK/data" --out "$WORK/x" >/dev/null 2>&1; then fail "accepted a non-executable"; else pass "rejects a non-executable"; fi
printf '#!/bin/sh\n' >"$WORK/script" && chmod 0755 "$WORK/script"
if "$BUILD" x "$WORK/script" --out "$WORK/x" >/dev/null 2>&1; then fail "accepted a script"; else pass "rejects a non-ELF file"; fi

[ "$failures" = 0 ] && { echo "build_image_test: all passed"; exit 0; }
echo "build_image_test: $failures failure(s)"
exit 1
