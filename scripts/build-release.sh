#!/usr/bin/env bash
# The release build: the three binaries of the kube-dns pod (skydns, kube2sky,
# exec-healthz), release profile, dependencies exactly as in Cargo.lock. The
# Dockerfile runs this script; integration-tests/tests/deploy_manifests/
# checks the cargo command below against the workspace's [[bin]] targets.
#
# Usage: scripts/build-release.sh [--out DIR]
#   --out DIR  also copy the three binaries into DIR (created if missing).
# The binaries are left in ${CARGO_TARGET_DIR:-target}/release/.
set -euo pipefail
cd "$(dirname "$0")/.."

out=""
case "$#:${1:-}" in
  0:) ;;
  2:--out) out=$2 ;;
  *) echo "usage: $0 [--out DIR]" >&2; exit 2 ;;
esac

cargo build --locked --release --bin skydns --bin kube2sky --bin exec-healthz

if [ -n "$out" ]; then
  mkdir -p "$out"
  for bin in skydns kube2sky exec-healthz; do
    install -m 0755 "${CARGO_TARGET_DIR:-target}/release/$bin" "$out/$bin"
  done
fi
