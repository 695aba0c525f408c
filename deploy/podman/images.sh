#!/usr/bin/env bash
# Builds the kube-dns pod's images for podman from binaries on this machine,
# without any registry:
#   - the three images of deploy/images.txt (the list the Dockerfile's stages
#     follow: same paths, user, ports and entrypoint), from BIN_DIR;
#   - a stand-in for the upstream etcd image, from Debian's etcd-server and
#     etcd-client (/usr/local/bin/etcd and etcdctl, as in registry.k8s.io/etcd).
#
# Usage: deploy/podman/images.sh BIN_DIR
#   BIN_DIR  holds skydns, kube2sky and exec-healthz (target/release after
#            scripts/build-release.sh, or target/debug; debug symbols are
#            stripped from the copies).
# Prints one line per image built: "built NAME IMAGE-ID". The image a tag
# named before is removed when no container uses it.
#        deploy/podman/images.sh --etcd-image-name
# prints the name of the etcd stand-in (it carries Debian's etcd version).
#
# Each image is `FROM scratch` over a root filesystem assembled here: the
# binary at /BINARY, the shared libraries `ldd` lists (these binaries link
# glibc dynamically; the Dockerfile's are static musl), /etc/passwd and
# /etc/group with nobody (65534), the CA certificates, /tmp. Added for podman
# only: busybox (/bin/sh and its applets) and /usr/bin/curl from
# deploy/podman/curl, because podman runs an httpGet probe *inside* the
# container as `/bin/sh -c "curl -f URL"` where the kubelet probes from
# outside. Needs podman, busybox-static, etcd-server, etcd-client.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
list="$here/../images.txt"

etcd_image_name() {
  command -v etcd >/dev/null || { echo "images.sh: etcd is not installed (etcd-server)" >&2; exit 1; }
  echo "localhost/kube-dns-rs-podman/etcd:$(etcd --version | awk '/^etcd Version:/ { print $3 }')"
}
[ $# -eq 1 ] || { sed -n '2,18p' "$0" >&2; exit 2; }
if [ "$1" = --etcd-image-name ]; then etcd_image_name; exit 0; fi
bin_dir=$1
for tool in podman busybox etcd etcdctl ldd; do
  command -v "$tool" >/dev/null || { echo "images.sh: $tool is not installed" >&2; exit 1; }
done
ca=/etc/ssl/certs/ca-certificates.crt
[ -f "$ca" ] || { echo "images.sh: $ca is missing (package ca-certificates)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# copy_exe SRC DEST_IN_ROOTFS ROOTFS: the executable (stripped) and the
# shared libraries it loads, at their paths on this machine.
copy_exe() {
  local src=$1 dest=$2 rootfs=$3 lib
  [ -x "$src" ] || { echo "images.sh: $src is missing or not executable" >&2; exit 1; }
  mkdir -p "$rootfs$(dirname "$dest")"
  if command -v strip >/dev/null; then
    strip -o "$rootfs$dest" "$src"
  else
    cp "$src" "$rootfs$dest"
  fi
  chmod 0755 "$rootfs$dest"
  # "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" and the loader
  # "/lib64/ld-linux-x86-64.so.2 (0x...)"; static binaries list none.
  for lib in $(ldd "$src" 2>/dev/null | grep -o '/[^ ]*' || true); do
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
  done
}

# base_files ROOTFS: what distroless/static gives.
base_files() {
  local rootfs=$1
  mkdir -p "$rootfs/etc/ssl/certs" "$rootfs/tmp"
  chmod 1777 "$rootfs/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' \
    > "$rootfs/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\n' > "$rootfs/etc/group"
  cp "$ca" "$rootfs/etc/ssl/certs/ca-certificates.crt"
}

# busybox_files ROOTFS: busybox with every applet in /bin, and the curl shim.
busybox_files() {
  local rootfs=$1 applet
  mkdir -p "$rootfs/bin" "$rootfs/usr/bin"
  cp "$(command -v busybox)" "$rootfs/bin/busybox"
  for applet in $("$rootfs/bin/busybox" --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$rootfs/bin/$applet"
  done
  install -m 0755 "$here/curl" "$rootfs/usr/bin/curl"
}

# build NAME ROOTFS CONTAINERFILE-LINES...
build() {
  local name=$1 rootfs=$2 old new
  shift 2
  { echo "FROM scratch"; echo "COPY rootfs/ /"; printf '%s\n' "$@"; } > "$rootfs/../Containerfile"
  old=$(podman image inspect --format '{{.Id}}' "$name" 2>/dev/null || true)
  podman build --quiet --tag "$name" --file "$rootfs/../Containerfile" "$rootfs/.." >/dev/null
  new=$(podman image inspect --format '{{.Id}}' "$name")
  if [ -n "$old" ] && [ "$old" != "$new" ]; then
    podman rmi "$old" >/dev/null 2>&1 || true  # still used by a container: kept
  fi
  echo "built $name ${new:0:12}"
}

n=0
while read -r image stage binary base user ports; do
  case "$image" in ''|'#'*) continue ;; esac
  n=$((n + 1))
  dir="$work/$stage"
  rootfs="$dir/rootfs"
  mkdir -p "$rootfs"
  copy_exe "$bin_dir/$binary" "/$binary" "$rootfs"
  base_files "$rootfs"
  case "$base" in
    static|busybox) busybox_files "$rootfs" ;;  # static: for the probes only
    *) echo "images.sh: $list: unknown base '$base' for $image" >&2; exit 1 ;;
  esac
  expose=()
  for p in ${ports//,/ }; do expose+=("EXPOSE $p"); done
  build "$image" "$rootfs" "USER $user" "${expose[@]}" "ENTRYPOINT [\"/$binary\"]"
done < "$list"
[ "$n" -gt 0 ] || { echo "images.sh: no images in $list" >&2; exit 1; }

# The etcd stand-in; deploy/podman/render names it in place of the upstream one.
rootfs="$work/etcd/rootfs"
mkdir -p "$rootfs"
copy_exe "$(command -v etcd)" /usr/local/bin/etcd "$rootfs"
copy_exe "$(command -v etcdctl)" /usr/local/bin/etcdctl "$rootfs"
base_files "$rootfs"
build "$(etcd_image_name)" "$rootfs" \
  "EXPOSE 2379/tcp" "EXPOSE 2380/tcp" "EXPOSE 4001/tcp"
