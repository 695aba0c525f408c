#!/usr/bin/env bash
# Builds the three images of deploy/images.txt from the repository's
# Dockerfile and pushes them to a registry you name, so that the manifests
# rendered with the same prefix can pull them:
#
#   deploy/build-images.sh registry.example.com/dns
#   IMAGE_PREFIX=registry.example.com/dns DNS_SERVER_IP=10.96.0.10 deploy/render.sh kubernetes
#
# Usage: deploy/build-images.sh [--no-push] [--dry-run] [--tool docker|podman] PREFIX
#   PREFIX     registry host[:port]/path; localhost/kube-dns-rs/skydns:0.1.0 of
#              deploy/images.txt is tagged and pushed as PREFIX/skydns:0.1.0
#   --no-push  build and tag only (for a registry you push to yourself, or
#              a local cluster that reads the builder's images)
#   --dry-run  print the commands instead of running them
#   --tool     the builder: docker (the default when installed) or podman
# The build needs network access: it pulls rust:<rust-version>-alpine,
# gcr.io/distroless/static-debian12 and busybox:1.36.1-musl. Log in to the
# registry first (docker login / podman login). The etcd and autoscaler
# images (registry.k8s.io/etcd, registry.k8s.io/cpa/...) are not rebuilt:
# the manifests pull them from there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
list="$here/images.txt"

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
push=1 dry=0 tool="" prefix=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --no-push) push=0; shift ;;
    --dry-run) dry=1; shift ;;
    --tool) tool=${2:-}; shift 2 || { usage >&2; exit 2; } ;;
    -*) echo "build-images.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) [ -z "$prefix" ] || { usage >&2; exit 2; }; prefix=$1; shift ;;
  esac
done
[ -n "$prefix" ] || { usage >&2; exit 2; }
# The same check as deploy/render.sh's IMAGE_PREFIX.
[[ $prefix =~ ^[a-z0-9]([-a-z0-9._]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([-a-z0-9._]*[a-z0-9])?)*$ ]] \
  || { echo "build-images.sh: not a registry path (host[:port]/path, lower case, no trailing /): $prefix" >&2; exit 2; }
if [ -z "$tool" ]; then
  if command -v docker >/dev/null; then tool=docker; else tool=podman; fi
fi
case "$tool" in
  docker|podman) ;;
  *) echo "build-images.sh: --tool must be docker or podman: $tool" >&2; exit 2 ;;
esac
if [ "$dry" -eq 0 ]; then
  command -v "$tool" >/dev/null || { echo "build-images.sh: $tool is not installed" >&2; exit 1; }
fi

run() {
  if [ "$dry" -eq 1 ]; then echo "$*"; else (cd "$root" && "$@"); fi
}

n=0
while read -r image stage _binary _base _user _ports; do
  case "$image" in ''|'#'*) continue ;; esac
  n=$((n + 1))
  target="$prefix/${image#localhost/kube-dns-rs/}"
  run "$tool" build --target "$stage" -t "$target" .
  if [ "$push" -eq 1 ]; then run "$tool" push "$target"; fi
done < "$list"
[ "$n" -gt 0 ] || { echo "build-images.sh: no images in $list" >&2; exit 1; }
