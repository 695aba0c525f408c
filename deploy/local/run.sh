#!/usr/bin/env bash
# Runs the whole kube-dns pod on this machine, as the four containers would:
#   etcd (Debian etcd-server)  <- kube2sky <- Kubernetes API
#   skydns (reads etcd, serves DNS on 127.0.0.1:$DNS_PORT)
#   exec-healthz (runs nslookup against skydns, serves :$HEALTHZ_PORT/healthz)
# The Kubernetes API is the project's API test server seeded with
# default/kubernetes, kube-system/kube-dns and a few demo objects
# (integration-tests/seed/demo.yaml), unless a real cluster is given:
#   deploy/local/run.sh --kubeconfig ~/.kube/config
#   deploy/local/run.sh --kube-master-url http://127.0.0.1:8080
# or a real kube-apiserver and kube-controller-manager (the tests' control
# plane, built once by scripts/kube-tools.sh with Go) seeded the same way:
#   deploy/local/run.sh --real-apiserver
# The records go through the etcd v2 keys API, as in the 1.2 pod (etcd runs
# with --enable-v2=true; `etcdctl ls /skydns` shows them); --etcd-api=v3 runs
# kube2sky and skydns on the v3 API instead (`etcdctl get /skydns --prefix`).
# It installs the packages it needs if missing (scripts/install-deps.sh
# --local: etcd, dig, nslookup, curl, protoc) and builds first, waits until
# /readiness and /healthz are green, prints commands to try, streams the logs
# and stops everything on Ctrl-C.
#
# Environment: DNS_PORT (1053), ETCD_PORT (12379), API_PORT (18080),
# HEALTHZ_PORT (8080), READINESS_PORT (8081), DNS_DOMAIN (cluster.local),
# SKIP_BUILD=1 with BIN_DIR=target/debug to use already built binaries.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

DNS_PORT=${DNS_PORT:-1053}
ETCD_PORT=${ETCD_PORT:-12379}
ETCD_PEER_PORT=${ETCD_PEER_PORT:-$((ETCD_PORT + 1))}
API_PORT=${API_PORT:-18080}
HEALTHZ_PORT=${HEALTHZ_PORT:-8080}
READINESS_PORT=${READINESS_PORT:-8081}
DNS_DOMAIN=${DNS_DOMAIN:-cluster.local}
BIN_DIR=${BIN_DIR:-$root/target/debug}
kubeconfig=""
master_url=""
real=""
etcd_api=v2
# Everything about the arguments is settled here, before anything is
# installed, built or started: --help prints the header comment above.
while [ $# -gt 0 ]; do
  case "$1" in
    --etcd-api|--kubeconfig|--kube-master-url)
      [ $# -ge 2 ] || { echo "$1 needs a value (see --help)" >&2; exit 2; } ;;
  esac
  case "$1" in
    --etcd-api) etcd_api=$2; shift 2 ;;
    --etcd-api=*) etcd_api=${1#*=}; shift ;;
    --kubeconfig) kubeconfig=$2; shift 2 ;;
    --kubeconfig=*) kubeconfig=${1#*=}; shift ;;
    --kube-master-url) master_url=$2; shift 2 ;;
    --kube-master-url=*) master_url=${1#*=}; shift ;;
    --real-apiserver) real=1; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$etcd_api" in
  v2) skydns_api=() ;;
  v3) skydns_api=(-etcd3) ;;
  *) echo "--etcd-api must be v2 or v3, not '$etcd_api'" >&2; exit 2 ;;
esac
etcd_url="http://127.0.0.1:${ETCD_PORT}"

# Only what this script runs (etcd, dig, nslookup, curl) and protoc for the
# build, not the whole test suite's packages.
scripts/install-deps.sh --local
bins=(skydns kube2sky exec-healthz kube-api-test-server)
packages=(-p skydns -p kube2sky -p healthz -p kube-api-test-server)
if [ -n "$real" ]; then
  [ -z "$kubeconfig$master_url" ] || { echo "--real-apiserver starts its own API server: drop --kubeconfig/--kube-master-url" >&2; exit 2; }
  echo "==> the real control plane (scripts/kube-tools.sh: built once per pin, minutes the first time)"
  scripts/kube-tools.sh >/dev/null
  bins+=(kube-control-plane)
  packages+=(-p test-support)
fi
if [ "${SKIP_BUILD:-}" != 1 ]; then
  echo "==> building (cargo build --bins ${packages[*]})"
  cargo build --bins "${packages[@]}"
fi
for bin in "${bins[@]}"; do
  [ -x "$BIN_DIR/$bin" ] || { echo "missing $BIN_DIR/$bin (build it, or unset SKIP_BUILD)" >&2; exit 1; }
done

work=$(mktemp -d)
pids=()
cleanup() {
  trap - EXIT INT TERM
  echo
  echo "==> stopping"
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[$i]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
ports=("$ETCD_PORT" "$ETCD_PEER_PORT" "$DNS_PORT" "$HEALTHZ_PORT" "$READINESS_PORT")
[ -z "$kubeconfig$master_url$real" ] && ports+=("$API_PORT")
for p in "${ports[@]}"; do
  if port_busy "$p"; then
    echo "port $p is in use; set DNS_PORT / ETCD_PORT / API_PORT / HEALTHZ_PORT / READINESS_PORT" >&2
    exit 1
  fi
done

wait_for() { # description, command... (tries=N: N × 0.2 s, 60 s by default)
  local what=$1 pid; shift
  for _ in $(seq 1 "${tries:-300}"); do
    "$@" >/dev/null 2>&1 && return 0
    # A process that died (e.g. its port was taken) fails the start now.
    for pid in "${pids[@]}"; do
      kill -0 "$pid" 2>/dev/null && continue
      echo "a process exited while waiting for $what; logs in $work" >&2
      tail -n 20 "$work"/*.log >&2 || true
      exit 1
    done
    sleep 0.2
  done
  echo "timed out waiting for $what; logs in $work" >&2
  tail -n 20 "$work"/*.log >&2 || true
  exit 1
}

echo "==> etcd on ${etcd_url} (records through the ${etcd_api} API)"
# Transactions of up to 1024 operations on v3 and Go's GC settings, as the
# pod's manifests.
GOGC=200 GOMEMLIMIT=400MiB ETCD_UNSUPPORTED_ARCH=$(uname -m) etcd --name local --data-dir "$work/etcd" --enable-v2=true \
  --max-txn-ops=1024 --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
  --listen-peer-urls "http://127.0.0.1:${ETCD_PEER_PORT}" \
  --initial-advertise-peer-urls "http://127.0.0.1:${ETCD_PEER_PORT}" \
  --initial-cluster "local=http://127.0.0.1:${ETCD_PEER_PORT}" >"$work/etcd.log" 2>&1 &
pids+=($!)
export ETCDCTL_API=3
wait_for etcd etcdctl --endpoints="$etcd_url" get / --command-timeout=1s

kube_args=()
kubectl_hint=""
if [ -n "$kubeconfig" ]; then
  kube_args+=(--kubecfg-file="$kubeconfig")
  [ -n "$master_url" ] && kube_args+=(--kube-master-url="$master_url")
  kubectl_hint="kubectl --kubeconfig=$kubeconfig"
elif [ -n "$real" ]; then
  echo "==> a real kube-apiserver and kube-controller-manager (seed: integration-tests/seed/demo.yaml)"
  "$BIN_DIR/kube-control-plane" --kubeconfig "$work/kubeconfig" --controllers \
    --seed integration-tests/seed/demo.yaml >"$work/apiserver.log" 2>&1 &
  pids+=($!)
  # The control plane's own limit is 120 s on a loaded machine.
  tries=900 wait_for "the real kube-apiserver" grep -qx ready "$work/apiserver.log"
  grep 'ready at' "$work/apiserver.log"
  kube_args+=(--kubecfg-file="$work/kubeconfig")
  kubectl_hint="kubectl --kubeconfig=$work/kubeconfig"
elif [ -n "$master_url" ]; then
  kube_args+=(--kube-master-url="$master_url")
  kubectl_hint="kubectl --server=$master_url"
else
  echo "==> Kubernetes API test server on http://127.0.0.1:${API_PORT} (seed: integration-tests/seed/demo.yaml)"
  "$BIN_DIR/kube-api-test-server" --listen "127.0.0.1:${API_PORT}" \
    --seed integration-tests/seed/demo.yaml >"$work/apiserver.log" 2>&1 &
  pids+=($!)
  wait_for "the API test server" curl -sf "http://127.0.0.1:${API_PORT}/version"
  kube_args+=(--kube-master-url="http://127.0.0.1:${API_PORT}")
  kubectl_hint="kubectl --server=http://127.0.0.1:${API_PORT}"
fi

echo "==> kube2sky (readiness on :${READINESS_PORT})"
"$BIN_DIR/kube2sky" --domain="$DNS_DOMAIN" --etcd-server="$etcd_url" --etcd-api="$etcd_api" \
  --etcd-max-txn-ops=1024 \
  --healthz-port="$READINESS_PORT" "${kube_args[@]}" >"$work/kube2sky.log" 2>&1 &
pids+=($!)

echo "==> skydns on 127.0.0.1:${DNS_PORT}"
"$BIN_DIR/skydns" -machines="$etcd_url" -addr="127.0.0.1:${DNS_PORT}" "${skydns_api[@]}" \
  -ns-rotate=false -domain="${DNS_DOMAIN}." >"$work/skydns.log" 2>&1 &
pids+=($!)

echo "==> exec-healthz on :${HEALTHZ_PORT}"
"$BIN_DIR/exec-healthz" -port="$HEALTHZ_PORT" -period=2s \
  -cmd="nslookup -port=${DNS_PORT} kubernetes.default.svc.${DNS_DOMAIN} 127.0.0.1 >/dev/null" \
  >"$work/healthz.log" 2>&1 &
pids+=($!)

wait_for "kube2sky /readiness" curl -sf "http://127.0.0.1:${READINESS_PORT}/readiness"
wait_for "skydns to answer" sh -c "dig @127.0.0.1 -p ${DNS_PORT} +short kubernetes.default.svc.${DNS_DOMAIN} | grep -q ."
# The first nslookup runs one period after start; wait for a real result.
wait_for "exec-healthz /healthz" sh -c "curl -sf http://127.0.0.1:${HEALTHZ_PORT}/metrics | grep -q '^exechealthz_runs_total [1-9]' && curl -sf http://127.0.0.1:${HEALTHZ_PORT}/healthz"

domain_path=$(echo "$DNS_DOMAIN" | awk -F. '{for (i = NF; i > 0; i--) printf "/%s", $i}')
if [ "$etcd_api" = v2 ]; then
  etcdctl_hint="  ETCDCTL_API=2 etcdctl --endpoints=${etcd_url} ls /skydns${domain_path}/svc/kube-system/kube-dns
  ETCDCTL_API=2 etcdctl --endpoints=${etcd_url} get /skydns${domain_path}/svc/kube-system/kube-dns/21172049
  ETCDCTL_API=2 etcdctl --endpoints=${etcd_url} ls --recursive /skydns   (keys under _tcp/_udp are hidden in v2)"
else
  etcdctl_hint="  ETCDCTL_API=3 etcdctl --endpoints=${etcd_url} get /skydns --prefix"
fi

cat <<MSG

==> ready: /readiness and /healthz are green. Try:
  dig @127.0.0.1 -p ${DNS_PORT} kubernetes.default.svc.${DNS_DOMAIN}
  dig @127.0.0.1 -p ${DNS_PORT} _dns._udp.kube-dns.kube-system.svc.${DNS_DOMAIN} SRV
  dig @127.0.0.1 -p ${DNS_PORT} web.default.svc.${DNS_DOMAIN}
  dig @127.0.0.1 -p ${DNS_PORT} -x 10.0.0.1
${etcdctl_hint}
  ${kubectl_hint} get services -A
  ${kubectl_hint} create -f deploy/local/demo-service.yaml --validate=false
  dig @127.0.0.1 -p ${DNS_PORT} demo.default.svc.${DNS_DOMAIN}
  ${kubectl_hint} delete service demo
  curl http://127.0.0.1:${HEALTHZ_PORT}/healthz ; curl http://127.0.0.1:${READINESS_PORT}/metrics
Logs follow (${work}/*.log); Ctrl-C stops everything.

MSG
tail -n +1 -F "$work/kube2sky.log" "$work/skydns.log" "$work/healthz.log" &
pids+=($!)
wait
