#!/usr/bin/env bash
# Renders the kube-dns manifests: replaces $DNS_DOMAIN, $DNS_SERVER_IP and
# $DNS_REPLICAS in deploy/<flavour>/*.yaml.in and prints the result as one
# multi-document YAML stream on stdout, ready for `kubectl apply -f -`.
#
#   DNS_SERVER_IP=10.96.0.10 deploy/render.sh kubernetes | kubectl apply -f -
#   DNS_SERVER_IP=10.0.0.10 DNS_DOMAIN=cluster.local DNS_REPLICAS=1 deploy/render.sh legacy
#   IMAGE_PREFIX=registry.example.com/dns DNS_SERVER_IP=10.96.0.10 deploy/render.sh kubernetes
#
# flavour: `kubernetes` (apps/v1 Deployment, RBAC, non-root), `legacy`
# (the Kubernetes 1.2 kube-dns-v11 ReplicationController and Service) or
# `shared-etcd` (a three-member etcd cluster, two kube2sky replicas with
# leader election, at least DNS_REPLICAS skydns pods).
# Environment:
#   DNS_SERVER_IP  required: the Service's cluster IP; must equal the kubelets'
#                  --cluster-dns (clusterDNS) and lie in the service CIDR.
#   DNS_DOMAIN     cluster domain without the trailing dot (default cluster.local);
#                  must equal the kubelets' --cluster-domain (clusterDomain).
#   DNS_REPLICAS   legacy: pod replicas; kubernetes, shared-etcd: the fewest
#                  DNS pods kube-dns-autoscaler keeps (default 1).
#   IMAGE_PREFIX   where our three images are pulled from (default kube-dns-rs):
#                  kube-dns-rs/skydns:0.1.0 becomes $IMAGE_PREFIX/skydns:0.1.0,
#                  as deploy/build-images.sh tags and pushes them. The etcd
#                  and autoscaler images (registry.k8s.io) are left as they are.
# The substitution is plain text, each placeholder replaced everywhere it
# occurs; values are checked first so they need no escaping.
# integration-tests/tests/deploy_manifests/ checks that this script's output
# equals the manifests the test parses.
set -euo pipefail
export LC_ALL=C  # glob order and sed on bytes, as the test expects
here=$(cd "$(dirname "$0")" && pwd)

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2; }
[ $# -eq 1 ] || usage
case "$1" in
  -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
  kubernetes|legacy|shared-etcd) flavour=$1 ;;
  *) usage ;;
esac

DNS_DOMAIN=${DNS_DOMAIN:-cluster.local}
DNS_REPLICAS=${DNS_REPLICAS:-1}
DNS_SERVER_IP=${DNS_SERVER_IP:-}
IMAGE_PREFIX=${IMAGE_PREFIX:-kube-dns-rs}

fail() { echo "render.sh: $*" >&2; exit 1; }
[ -n "$DNS_SERVER_IP" ] || fail "DNS_SERVER_IP is required (the kubelets' --cluster-dns address)"
[[ $DNS_SERVER_IP =~ ^[0-9A-Fa-f.:]+$ ]] || fail "DNS_SERVER_IP is not an IP address: $DNS_SERVER_IP"
[[ $DNS_DOMAIN =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] \
  || fail "DNS_DOMAIN must be a lower-case domain without the trailing dot: $DNS_DOMAIN"
[[ $DNS_REPLICAS =~ ^[0-9]+$ ]] || fail "DNS_REPLICAS is not a number: $DNS_REPLICAS"
# A registry host (with an optional :port) and path, as docker and podman name images.
[[ $IMAGE_PREFIX =~ ^[a-z0-9]([-a-z0-9._]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([-a-z0-9._]*[a-z0-9])?)*$ ]] \
  || fail "IMAGE_PREFIX is not a registry path (host[:port]/path, lower case, no trailing /): $IMAGE_PREFIX"

first=1
for f in "$here/$flavour"/*.yaml.in; do
  [ "$first" -eq 1 ] || echo "---"
  first=0
  sed -e "s/\$DNS_DOMAIN/$DNS_DOMAIN/g" \
      -e "s/\$DNS_SERVER_IP/$DNS_SERVER_IP/g" \
      -e "s/\$DNS_REPLICAS/$DNS_REPLICAS/g" \
      -e "s#^\( *image: \)kube-dns-rs/#\1$IMAGE_PREFIX/#" "$f"
done
