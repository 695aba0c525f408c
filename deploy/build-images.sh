#!/usr/bin/env bash
# Builds the three images of deploy/images.txt for linux/amd64 and
# linux/arm64 and pushes them to a registry you name, so that manifests
# rendered with the same prefix can pull them:
#
#   deploy/build-images.sh registry.example.com/dns
#   IMAGE_PREFIX=registry.example.com/dns DNS_SERVER_IP=10.96.0.10 deploy/render.sh kubernetes
#
# Usage: deploy/build-images.sh [--platform LIST] [--no-push | --oci DIR]
#                               [--dry-run] [--tool docker|podman] PREFIX
#   PREFIX      registry host[:port]/path; localhost/kube-dns-rs/skydns:0.1.0
#               of deploy/images.txt is pushed as PREFIX/skydns:0.1.0, one
#               multi-arch index per image
#   --platform  comma-separated, of linux/amd64 and linux/arm64 (default both)
#   --no-push   build only (docker: --load, one platform; podman: a local
#               manifest list)
#   --oci DIR   write each image as an OCI archive DIR/NAME.tar instead of
#               pushing
#   --dry-run   print the commands instead of running them
#   --tool      the builder: docker (buildx; the default when installed) or
#               podman
# First the binaries: scripts/build-release.sh --target cross-compiles them
# for each platform (static musl, cargo-zigbuild) into
# target/images/<arch>/. Then the images, from the Dockerfile's
# BINARIES=prebuilt stages: the runtime stages only copy files, so no
# emulation is needed. The build pulls gcr.io/distroless/static-debian12 and
# busybox:1.36.1-musl. Log in to the registry first (docker login / podman
# login). The etcd and autoscaler images (registry.k8s.io/etcd,
# registry.k8s.io/cpa/...) are not rebuilt: the manifests pull them from
# there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
list="$here/images.txt"

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
fail() { echo "build-images.sh: $*" >&2; exit 2; }
push=1 dry=0 tool="" prefix="" platforms=linux/amd64,linux/arm64 oci=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --no-push) push=0; shift ;;
    --dry-run) dry=1; shift ;;
    --tool) [ $# -ge 2 ] || { usage >&2; exit 2; }; tool=$2; shift 2 ;;
    --platform) [ $# -ge 2 ] || { usage >&2; exit 2; }; platforms=$2; shift 2 ;;
    --oci) [ $# -ge 2 ] || { usage >&2; exit 2; }; oci=$2; push=0; shift 2 ;;
    -*) fail "unknown option $1 (see --help)" ;;
    *) [ -z "$prefix" ] || { usage >&2; exit 2; }; prefix=$1; shift ;;
  esac
done
[ -n "$prefix" ] || { usage >&2; exit 2; }
# The same check as deploy/render.sh's IMAGE_PREFIX.
[[ $prefix =~ ^[a-z0-9]([-a-z0-9._]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([-a-z0-9._]*[a-z0-9])?)*$ ]] \
  || fail "not a registry path (host[:port]/path, lower case, no trailing /): $prefix"
if [ -z "$tool" ]; then
  if command -v docker >/dev/null; then tool=docker; else tool=podman; fi
fi
case "$tool" in
  docker|podman) ;;
  *) fail "--tool must be docker or podman: $tool" ;;
esac
# The Rust target of each platform's static binaries.
declare -A triple=([linux/amd64]=x86_64-unknown-linux-musl [linux/arm64]=aarch64-unknown-linux-musl)
IFS=, read -r -a wanted <<<"$platforms"
[ ${#wanted[@]} -gt 0 ] || fail "--platform is empty"
for p in "${wanted[@]}"; do
  [ -n "${triple[$p]:-}" ] || fail "--platform $p: only linux/amd64 and linux/arm64 are built"
done
if [ "$push" -eq 0 ] && [ -z "$oci" ] && [ "$tool" = docker ] && [ ${#wanted[@]} -gt 1 ]; then
  fail "--no-push with docker loads one platform into the engine: add --platform linux/amd64 (or use --oci DIR)"
fi
if [ "$dry" -eq 0 ]; then
  command -v "$tool" >/dev/null || { echo "build-images.sh: $tool is not installed" >&2; exit 1; }
fi

run() {
  if [ "$dry" -eq 1 ]; then echo "$*"; else (cd "$root" && "$@"); fi
}

for p in "${wanted[@]}"; do
  run scripts/build-release.sh --target "${triple[$p]}" --out "target/images/${p#linux/}"
done
[ -z "$oci" ] || run mkdir -p "$oci"

n=0
while read -r image stage _binary _base _user _ports; do
  case "$image" in ''|'#'*) continue ;; esac
  n=$((n + 1))
  short=${image#localhost/kube-dns-rs/}
  target="$prefix/$short"
  common=(--platform "$platforms" --build-arg BINARIES=prebuilt --target "$stage")
  if [ "$tool" = docker ]; then
    if [ -n "$oci" ]; then
      run docker buildx build "${common[@]}" -t "$target" --output "type=oci,dest=$oci/${short%%:*}.tar" .
    elif [ "$push" -eq 1 ]; then
      run docker buildx build "${common[@]}" -t "$target" --push .
    else
      run docker buildx build "${common[@]}" -t "$target" --load .
    fi
  else
    run podman build "${common[@]}" --manifest "$target" .
    if [ -n "$oci" ]; then
      run podman manifest push --all "$target" "oci-archive:$oci/${short%%:*}.tar"
    elif [ "$push" -eq 1 ]; then
      run podman manifest push --all "$target" "docker://$target"
    fi
  fi
done < "$list"
[ "$n" -gt 0 ] || { echo "build-images.sh: no images in $list" >&2; exit 1; }
