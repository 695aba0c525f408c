#!/usr/bin/env bash
# Installs the system packages the build and the tests need, if missing:
# protoc (etcd-client's build), a real etcd and etcdctl, dig/nslookup, dnsmasq.
set -euo pipefail

need=()
command -v protoc   >/dev/null || need+=(protobuf-compiler)
# etcd-client's protos import google/protobuf/*.proto, which protoc's
# recommended package ships (not installed with --no-install-recommends).
[ -f /usr/include/google/protobuf/descriptor.proto ] || need+=(libprotobuf-dev)
command -v etcd     >/dev/null || need+=(etcd-server)
command -v etcdctl  >/dev/null || need+=(etcd-client)
command -v dig      >/dev/null || need+=(dnsutils)
command -v nslookup >/dev/null || need+=(dnsutils)
command -v dnsmasq  >/dev/null || need+=(dnsmasq-base)
command -v curl     >/dev/null || need+=(curl)
command -v openssl  >/dev/null || need+=(openssl)

if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "==> installing: ${need[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

if ! command -v kubectl >/dev/null; then
  echo "warning: kubectl is not installed; the kubectl-driven tests will fail and say so." >&2
  echo "         install it from the Kubernetes package repository (package kubectl)." >&2
fi
