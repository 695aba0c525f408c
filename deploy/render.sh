#!/usr/bin/env bash
# Renders one flavour's manifests with kustomize (kubectl's built-in
# `kubectl kustomize`) from a throwaway overlay that names your registry and
# settings, and prints them as one multi-document YAML stream on stdout. For
# GitOps, write that overlay yourself instead (deploy/example/).
#
#   IMAGE_PREFIX=registry.example.com/dns DNS_SERVER_IP=10.96.0.10 deploy/render.sh kubernetes > kube-dns-rs.yaml
#   IMAGE_PREFIX=registry.example.com/dns DNS_SERVER_IP=10.0.0.10 DNS_REPLICAS=2 deploy/render.sh legacy
#
# flavour: `kubernetes` (apps/v1 Deployment, RBAC, non-root), `legacy`
# (the Kubernetes 1.2 kube-dns-v11 ReplicationController and Service) or
# `shared-etcd` (a three-member etcd cluster, two kube2sky replicas with
# leader election, the skydns pods).
# Environment:
#   IMAGE_PREFIX   required: the registry path our three images are pulled
#                  from, as deploy/build-images.sh pushed them:
#                  localhost/kube-dns-rs/skydns:0.1.0 of the manifests becomes
#                  $IMAGE_PREFIX/skydns:0.1.0. There is no default: no
#                  registry of this project exists to default to. The etcd
#                  and autoscaler images (registry.k8s.io) stay as they are.
#   DNS_SERVER_IP  required: the Service's cluster IP; must equal the kubelets'
#                  --cluster-dns (clusterDNS) and lie in the service CIDR.
#   DNS_DOMAIN     cluster domain without the trailing dot (default cluster.local);
#                  must equal the kubelets' --cluster-domain (clusterDomain).
#   DNS_REPLICAS   legacy: the pod replicas (default 1); kubernetes,
#                  shared-etcd: the fewest DNS pods kube-dns-autoscaler keeps
#                  (default 2, at most the autoscaler's max).
# Needs kubectl 1.27 or newer (kustomize v5). Values are checked first and a
# bad one is named; nothing is printed then.
set -euo pipefail
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)

help() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
[ $# -eq 1 ] || { help >&2; exit 2; }
case "$1" in
  -h|--help) help; exit 0 ;;
  kubernetes|legacy|shared-etcd) flavour=$1 ;;
  *) help >&2; exit 2 ;;
esac

DNS_DOMAIN=${DNS_DOMAIN:-cluster.local}
DNS_REPLICAS=${DNS_REPLICAS:-}
DNS_SERVER_IP=${DNS_SERVER_IP:-}
IMAGE_PREFIX=${IMAGE_PREFIX:-}

fail() { echo "render.sh: $*" >&2; exit 1; }
[ -n "$IMAGE_PREFIX" ] || fail "IMAGE_PREFIX is required: the registry path you pushed the images to (deploy/build-images.sh PREFIX), e.g. IMAGE_PREFIX=registry.example.com/dns"
# A registry host (with an optional :port) and path, as docker and podman name images.
[[ $IMAGE_PREFIX =~ ^[a-z0-9]([-a-z0-9._]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([-a-z0-9._]*[a-z0-9])?)*$ ]] \
  || fail "IMAGE_PREFIX is not a registry path (host[:port]/path, lower case, no trailing /): $IMAGE_PREFIX"
[ -n "$DNS_SERVER_IP" ] || fail "DNS_SERVER_IP is required (the kubelets' --cluster-dns address)"
[[ $DNS_SERVER_IP =~ ^[0-9A-Fa-f.:]+$ ]] || fail "DNS_SERVER_IP is not an IP address: $DNS_SERVER_IP"
[[ $DNS_DOMAIN =~ ^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$ ]] \
  || fail "DNS_DOMAIN must be a lower-case domain without the trailing dot: $DNS_DOMAIN"
[ -z "$DNS_REPLICAS" ] || [[ $DNS_REPLICAS =~ ^[1-9][0-9]*$ ]] \
  || fail "DNS_REPLICAS is not a number of replicas (1 or more): $DNS_REPLICAS"
command -v kubectl >/dev/null \
  || fail "kubectl is missing: it renders the manifests (kubectl kustomize); install it from the Kubernetes apt repository"

overlay=$(mktemp -d)
trap 'rm -rf "$overlay"' EXIT
{
  echo "apiVersion: kustomize.config.k8s.io/v1beta1"
  echo "kind: Kustomization"
  echo "resources:"
  echo "- $(realpath --relative-to="$overlay" "$here/$flavour")"
  echo "images:"
  for image in skydns kube2sky exechealthz; do
    echo "- name: localhost/kube-dns-rs/$image"
    echo "  newName: $IMAGE_PREFIX/$image"
  done
  echo "configMapGenerator:"
  echo "- name: kube-dns-rs-settings"
  echo "  namespace: kube-system"
  echo "  behavior: merge"
  echo "  literals:"
  echo "  - domain=$DNS_DOMAIN"
  echo "  options:"
  echo "    disableNameSuffixHash: true"
  echo "patches:"
  echo "- target: {kind: Service, name: kube-dns}"
  echo "  patch: '[{\"op\": \"replace\", \"path\": \"/spec/clusterIP\", \"value\": \"$DNS_SERVER_IP\"}]'"
  if [ -n "$DNS_REPLICAS" ] && [ "$flavour" = legacy ]; then
    echo "replicas:"
    echo "- name: kube-dns-v11"
    echo "  count: $DNS_REPLICAS"
  elif [ -n "$DNS_REPLICAS" ]; then
    # The autoscaler's parameters with min replaced.
    linear=$(sed -n "s/^  linear: '\(.*\)'$/\1/p" "$here/$flavour/kube-dns.yaml")
    max=$(sed -n 's/.*"max":\([0-9]*\).*/\1/p' <<<"$linear")
    [ -n "$linear" ] && [ -n "$max" ] || fail "no autoscaler parameters with a max in deploy/$flavour/kube-dns.yaml"
    [ "$DNS_REPLICAS" -le "$max" ] \
      || fail "DNS_REPLICAS $DNS_REPLICAS is above the autoscaler's max of $max (deploy/$flavour/kube-dns.yaml)"
    linear=$(sed "s/\"min\":[0-9]*/\"min\":$DNS_REPLICAS/" <<<"$linear")
    echo "- target: {kind: ConfigMap, name: kube-dns-autoscaler}"
    echo "  patch: |-"
    echo "    - op: replace"
    echo "      path: /data/linear"
    echo "      value: '$linear'"
  fi
} > "$overlay/kustomization.yaml"
kubectl kustomize "$overlay"
