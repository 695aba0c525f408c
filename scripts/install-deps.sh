#!/usr/bin/env bash
# Installs the system packages the build and the tests need, if missing:
# protoc (etcd-client's build), a real etcd and etcdctl, dig/nslookup, dnsmasq,
# BIND's dnssec-keygen and delv (the -dnssec tests), promtool, podman,
# qemu-user-static, and the arm64 cross build's rustup target and zig.
#   scripts/install-deps.sh           everything the test suite needs (scripts/test.sh)
#   scripts/install-deps.sh --local   only what deploy/local/run.sh needs: protoc
#                                     for the build, etcd and etcdctl, dig and
#                                     nslookup, curl
set -euo pipefail

local_only=""
case "${1:-}" in
  "") ;;
  --local) local_only=1 ;;
  -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
  *) echo "unknown argument: $1 (--local, or none for everything)" >&2; exit 2 ;;
esac

need=()
# deploy/local/run.sh: the build, etcd, its readiness checks and exec-healthz's
# nslookup.
command -v protoc   >/dev/null || need+=(protobuf-compiler)
# etcd-client's protos import google/protobuf/*.proto, which protoc's
# recommended package ships (not installed with --no-install-recommends).
[ -f /usr/include/google/protobuf/descriptor.proto ] || need+=(libprotobuf-dev)
command -v etcd     >/dev/null || need+=(etcd-server)
command -v etcdctl  >/dev/null || need+=(etcd-client)
command -v dig      >/dev/null || need+=(dnsutils)
command -v nslookup >/dev/null || need+=(dnsutils)
command -v curl     >/dev/null || need+=(curl)

with_recommends=()
if [ -z "$local_only" ]; then
  # The -dnssec tests: test keys from dnssec-keygen, answers validated by delv.
  command -v dnssec-keygen >/dev/null || need+=(bind9-utils)
  command -v delv     >/dev/null || need+=(bind9-dnsutils)
  command -v dnsmasq  >/dev/null || need+=(dnsmasq-base)
  command -v openssl  >/dev/null || need+=(openssl)
  command -v dnsperf  >/dev/null || need+=(dnsperf)
  # skydns_autopath's glibc test makes a pod's network namespace with ip.
  command -v ip       >/dev/null || need+=(iproute2)
  # The rules in deploy/monitoring/: promtool checks and unit-tests them.
  command -v promtool >/dev/null || need+=(prometheus)
  # skydns's socket-activation test starts it the way systemd does.
  command -v systemd-socket-activate >/dev/null || need+=(systemd)
  # The arm64 binaries' test runs them under user-mode emulation.
  command -v qemu-aarch64-static >/dev/null || need+=(qemu-user-static)

  # The podman test (integration-tests/tests/podman_pod) and deploy/podman/:
  # podman with its recommended packages (netavark and aardvark-dns for the
  # bridge network, catatonit for the pod's infra container), runc (see
  # deploy/podman/containers.conf), busybox-static (the images' /bin/sh).
  command -v podman  >/dev/null || with_recommends+=(podman)
  command -v runc    >/dev/null || with_recommends+=(runc)
  [ -x /bin/busybox ]           || with_recommends+=(busybox-static)
fi

if [ ${#need[@]} -gt 0 ] || [ ${#with_recommends[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "==> installing: ${need[*]} ${with_recommends[*]}"
  $sudo apt-get update -qq
  if [ ${#need[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
  fi
  if [ ${#with_recommends[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${with_recommends[@]}"
  fi
fi

# deploy/local/run.sh needs neither (kubectl only in the commands it
# suggests; --real-apiserver's scripts/kube-tools.sh says when Go is missing).
[ -z "$local_only" ] || exit 0

if ! command -v kubectl >/dev/null; then
  echo "warning: kubectl is not installed; the kubectl-driven tests will fail and say so." >&2
  echo "         install it from the Kubernetes package repository (package kubectl)." >&2
fi

# The arm64 images' static binaries (scripts/build-release.sh --target,
# integration-tests/tests/arm64_binaries.rs): Rust's standard library for
# the musl target, from rustup as the toolchain itself, and cargo-zigbuild
# with zig as the cross C compiler and linker, pinned, from PyPI.
cross_target=aarch64-unknown-linux-musl
if ! rustup target list --installed 2>/dev/null | grep -qx "$cross_target"; then
  echo "==> rustup target add $cross_target"
  rustup target add "$cross_target" || {
    echo "error: rustup could not add $cross_target (the arm64 binaries' build needs it); reach static.rust-lang.org, or run 'rustup target add $cross_target' where it can" >&2
    exit 1
  }
fi
if [ "$(cargo-zigbuild --version 2>/dev/null)" != "cargo-zigbuild 0.24.1" ]; then
  echo "==> pip install ziglang==0.17.1 cargo-zigbuild==0.24.1"
  python3 -m pip install --quiet ziglang==0.17.1 cargo-zigbuild==0.24.1 || {
    echo "error: pip could not install ziglang and cargo-zigbuild (the arm64 binaries' build needs them): python3 -m pip install ziglang==0.17.1 cargo-zigbuild==0.24.1" >&2
    exit 1
  }
fi

# The real control plane of the tests is built from Go modules by
# scripts/kube-tools.sh with the machine's Go, never a downloaded one.
if ! command -v go >/dev/null; then
  echo "warning: Go is not installed: the tests build kube-apiserver from tools/kube/go.mod with Go >= 1.26 and fail without it." >&2
  echo "         install Go 1.26 or newer and put it on PATH (e.g. /usr/local/go/bin); Debian 12's golang-go is too old." >&2
fi
