#!/usr/bin/env bash
# The release build: the three binaries of the kube-dns pod (skydns, kube2sky,
# exec-healthz), release profile, dependencies exactly as in Cargo.lock. The
# Dockerfile runs this script; integration-tests/tests/deploy_manifests/
# checks the cargo command below against the workspace's [[bin]] targets.
#
# Usage: scripts/build-release.sh [--target TRIPLE] [--out DIR]
#   --target TRIPLE  build for that Rust target, e.g. aarch64-unknown-linux-musl
#                    (static, for the arm64 images) or x86_64-unknown-linux-musl:
#                    with cargo-zigbuild, zig as the C compiler and linker
#                    (needs `rustup target add TRIPLE` and
#                    `pip install ziglang cargo-zigbuild`; the script names
#                    what is missing). Without it: the host's target, plain cargo.
#   --out DIR        also copy the three binaries into DIR (created if missing).
# The binaries are left in ${CARGO_TARGET_DIR:-target}/[TRIPLE/]release/.
set -euo pipefail
cd "$(dirname "$0")/.."

out="" target=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || { echo "usage: $0 [--target TRIPLE] [--out DIR]" >&2; exit 2; }; out=$2; shift 2 ;;
    --target) [ $# -ge 2 ] || { echo "usage: $0 [--target TRIPLE] [--out DIR]" >&2; exit 2; }; target=$2; shift 2 ;;
    *) echo "usage: $0 [--target TRIPLE] [--out DIR]" >&2; exit 2 ;;
  esac
done

bins=(--bin skydns --bin kube2sky --bin exec-healthz)
dir="${CARGO_TARGET_DIR:-target}/release"
if [ -z "$target" ]; then
  cargo build --locked --release "${bins[@]}"
else
  fail() { echo "build-release.sh: $*" >&2; exit 1; }
  [[ $target =~ ^[a-z0-9_]+-[a-z0-9_]+-[a-z0-9_]+(-[a-z0-9_]+)?$ ]] || fail "--target is not a Rust target triple: $target"
  rustup target list --installed 2>/dev/null | grep -qx "$target" \
    || fail "the Rust standard library for $target is missing: rustup target add $target"
  command -v cargo-zigbuild >/dev/null \
    || fail "cargo-zigbuild is missing (it cross-compiles with zig): pip install ziglang==0.17.1 cargo-zigbuild==0.24.1"
  cargo zigbuild --locked --release --target "$target" "${bins[@]}"
  dir="${CARGO_TARGET_DIR:-target}/$target/release"
fi

if [ -n "$out" ]; then
  mkdir -p "$out"
  for bin in skydns kube2sky exec-healthz; do
    install -m 0755 "$dir/$bin" "$out/$bin"
  done
fi
