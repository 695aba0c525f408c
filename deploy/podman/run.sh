#!/usr/bin/env bash
# Runs the kube-dns pod in podman, from the manifests a cluster applies:
# builds the images (deploy/podman/images.sh, no registry), renders
# deploy/legacy or deploy/kubernetes with deploy/render.sh, adapts the
# workload for podman (podman-manifest; the changes are listed in
# docs/install.md), runs it with `podman kube play`, waits until it answers
# DNS, prints commands to try, and removes everything on Ctrl-C.
#
#   deploy/podman/run.sh             the modern Deployment (etcd v3 API)
#   deploy/podman/run.sh --legacy    the 1.2 pod: the ReplicationController's
#                                    template as a Pod (etcd v2 keys API)
# Options:
#   --kubeconfig FILE  kube2sky watches the cluster FILE names; its server
#                      must be reachable from podman's bridge network (not
#                      127.0.0.1). Default: the API test server, started on
#                      this machine with integration-tests/seed/demo.yaml:
#                      the pod reaches it through the bridge with a random
#                      bearer token, kubectl on 127.0.0.1 without one (its
#                      insecure port, as kube-apiserver's in 1.2).
#   --name NAME        the Pod (legacy) or Deployment name (podman calls the
#                      Deployment's pod NAME-pod-0); default: the manifest's.
# Environment: DNS_DOMAIN (cluster.local); SKIP_BUILD=1 with BIN_DIR=DIR to
# use built binaries (default: a release build into target/release);
# SKIP_IMAGES=1 to use images built before; CONTAINERS_CONF (default:
# deploy/podman/containers.conf, the settings these VMs need).
# Needs root (podman's bridge network, where the host reaches the pod's IP).
# When ready it prints one line for scripts:
#   ==> ready pod=NAME ip=ADDRESS api=URL   (api=none with --kubeconfig)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

flavour=kubernetes
kubeconfig=""
name=""
while [ $# -gt 0 ]; do
  case "$1" in
    --legacy) flavour=legacy; shift ;;
    --kubeconfig) kubeconfig=$2; shift 2 ;;
    --kubeconfig=*) kubeconfig=${1#*=}; shift ;;
    --name) name=$2; shift 2 ;;
    --name=*) name=${1#*=}; shift ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
DNS_DOMAIN=${DNS_DOMAIN:-cluster.local}
BIN_DIR=${BIN_DIR:-$root/target/release}
export CONTAINERS_CONF=${CONTAINERS_CONF:-$root/deploy/podman/containers.conf}
fail() { echo "run.sh: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || fail "needs root: the pod runs on podman's bridge network (--network podman), which rootless podman cannot give"
[ -z "$kubeconfig" ] || [ -r "$kubeconfig" ] || fail "--kubeconfig $kubeconfig: not a readable file"
scripts/install-deps.sh
if [ "${SKIP_BUILD:-}" != 1 ]; then
  echo "==> building (scripts/build-release.sh; cargo build --release -p kube-api-test-server -p integration-tests --bins)"
  scripts/build-release.sh
  cargo build --locked --release -p kube-api-test-server -p integration-tests --bins
fi
for bin in skydns kube2sky exec-healthz kube-api-test-server podman-manifest; do
  [ -x "$BIN_DIR/$bin" ] || fail "missing $BIN_DIR/$bin (build it, or unset SKIP_BUILD)"
done
[ "${SKIP_IMAGES:-}" = 1 ] || deploy/podman/images.sh "$BIN_DIR"
etcd_image=$(deploy/podman/images.sh --etcd-image-name)

work=$(mktemp -d)
api_pid=""
played=""
cleanup() {
  trap - EXIT INT TERM
  echo "==> stopping"
  if [ -n "$played" ]; then
    podman kube down "$work/pod.yaml" >/dev/null 2>&1 \
      || echo "run.sh: podman kube down failed; see: podman pod ps" >&2
  fi
  [ -z "$api_pid" ] || kill "$api_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
  echo "==> stopped"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

gateway=$(podman network inspect podman --format '{{range .Subnets}}{{.Gateway}} {{end}}' | awk '{ print $1 }')
[ -n "$gateway" ] || fail "podman's default network 'podman' has no gateway"
mkdir -m 0755 "$work/k"
api=""
if [ -n "$kubeconfig" ]; then
  install -m 0644 "$kubeconfig" "$work/k/kubeconfig"
else
  # The pod reaches the host through the bridge's gateway, so the API test
  # server listens beyond loopback, and the token keeps it to the pod.
  # kubectl sends no token over plain HTTP: it gets the loopback-only
  # insecure port.
  token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  "$BIN_DIR/kube-api-test-server" --listen 0.0.0.0:0 --token "$token" \
    --insecure-listen 127.0.0.1:0 --seed "$root/integration-tests/seed/demo.yaml" \
    >"$work/api.out" 2>"$work/api.log" &
  api_pid=$!
  for _ in $(seq 100); do
    grep -q '^insecure port on ' "$work/api.out" 2>/dev/null && break
    kill -0 "$api_pid" 2>/dev/null || { cat "$work/api.log" >&2; fail "the API test server exited"; }
    sleep 0.1
  done
  port=$(sed -n 's/^listening on http:\/\/.*:\([0-9]*\)$/\1/p' "$work/api.out")
  api=$(sed -n 's/^insecure port on //p' "$work/api.out")
  [ -n "$port" ] && [ -n "$api" ] || fail "the API test server printed no address"
  write_kubeconfig() {  # SERVER [TOKEN]
    printf 'apiVersion: v1\nkind: Config\nclusters:\n- name: api\n  cluster:\n    server: %s\n' "$1"
    printf 'users:\n- name: demo\n  user: {%s}\n' "${2:+token: $2}"
    printf 'contexts:\n- name: api\n  context: {cluster: api, user: demo}\ncurrent-context: api\n'
  }
  write_kubeconfig "http://$gateway:$port" "$token" > "$work/k/kubeconfig"
  chmod 0644 "$work/k/kubeconfig"
  write_kubeconfig "$api" > "$work/kubeconfig.host"
fi

name_args=()
[ -z "$name" ] || name_args=(--name "$name")
IMAGE_PREFIX=localhost/kube-dns-rs DNS_SERVER_IP=10.0.0.10 DNS_DOMAIN=$DNS_DOMAIN deploy/render.sh "$flavour" \
  | "$BIN_DIR/podman-manifest" --kubeconfig-dir "$work/k" --etcd-image "$etcd_image" "${name_args[@]}" \
  > "$work/pod.yaml"

echo "==> podman kube play --network podman ($flavour)"
played=$flavour  # from here on, cleanup runs `podman kube down`, even after a failed play
podman kube play --network podman "$work/pod.yaml" > "$work/play.out" 2> "$work/play.err" \
  || { cat "$work/play.out" "$work/play.err" >&2; fail "podman kube play failed"; }
pod_id=$(awk '/^Pod:/ { getline; print; exit }' "$work/play.out")
played=$(podman pod inspect "$pod_id" --format '{{.Name}}')
infra=$(podman pod inspect "$played" --format '{{.InfraContainerID}}')
ip=$(podman inspect "$infra" --format '{{.NetworkSettings.Networks.podman.IPAddress}}')

name_to_check="kubernetes.default.svc.$DNS_DOMAIN"
echo "==> waiting for $name_to_check at $ip:53 and /healthz"
# exec-healthz answers 200 before its first nslookup (as 1.2's did), and that
# nslookup may run before kube2sky has written the name: wait for a run to
# have happened (its metrics) and /healthz to be 200 after it.
ok=""
for _ in $(seq 600); do
  if [ -n "$(dig +short +time=1 +tries=1 "@$ip" "$name_to_check" A 2>/dev/null | grep -E '^[0-9.]+$')" ] \
     && curl -s "http://$ip:8080/metrics" | grep -q '^exechealthz_runs_total [1-9]' \
     && [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$ip:8080/healthz")" = 200 ]; then
    ok=1
    break
  fi
  sleep 0.2
done
if [ -z "$ok" ]; then
  for c in etcd kube2sky skydns healthz; do
    echo "--- $played-$c" >&2
    podman logs --tail 20 "$played-$c" >&2 || true
  done
  fail "the pod did not answer $name_to_check within 2 minutes"
fi

if [ "$flavour" = legacy ]; then
  inspect="podman exec $played-etcd etcdctl ls /skydns/local/cluster/svc/kube-system/kube-dns"
  probed=kube2sky
else
  inspect="podman exec $played-etcd etcdctl get /skydns --prefix --keys-only"
  probed=skydns
fi
cat <<EOF
==> ready pod=$played ip=$ip api=${api:-none}
Try:
  dig @$ip $name_to_check
  dig +tcp @$ip $name_to_check
  $inspect
  curl http://$ip:8080/healthz
  podman healthcheck run $played-$probed   # the liveness probe, as the kubelet runs it
EOF
if [ -n "$api" ]; then
  echo "  kubectl --kubeconfig $work/kubeconfig.host create service clusterip demo --tcp=80"
  echo "  dig @$ip demo.default.svc.$DNS_DOMAIN"
fi
echo "==> Ctrl-C stops and removes the pod"
while true; do sleep 1; done
