#!/usr/bin/env bash
# Runs the DNS pipeline on this machine: a real etcd (Debian etcd-server)
# loaded with the records kube2sky 1.2 writes for a small cluster
# (deploy/local/sample-records.txt), and skydns serving cluster.local. on a
# loopback port. Prints commands to try, streams the logs, and stops
# everything it started on Ctrl-C.
#
# Environment: DNS_PORT (default 1053), ETCD_PORT (default 12379).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

DNS_PORT=${DNS_PORT:-1053}
ETCD_PORT=${ETCD_PORT:-12379}
ETCD_PEER_PORT=${ETCD_PEER_PORT:-$((ETCD_PORT + 1))}
etcd_url="http://127.0.0.1:${ETCD_PORT}"

scripts/install-deps.sh
echo "==> building (cargo build -p skydns)"
cargo build -p skydns

work=$(mktemp -d)
pids=()
cleanup() {
  trap - EXIT INT TERM
  echo
  echo "==> stopping"
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in "$ETCD_PORT" "$ETCD_PEER_PORT" "$DNS_PORT"; do
  if port_busy "$p"; then echo "port $p is in use; set ETCD_PORT / DNS_PORT to free ports" >&2; exit 1; fi
done

echo "==> starting etcd on ${etcd_url} (data in ${work})"
ETCD_UNSUPPORTED_ARCH=$(uname -m) etcd --name local --data-dir "$work/etcd" \
  --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
  --listen-peer-urls "http://127.0.0.1:${ETCD_PEER_PORT}" \
  --initial-advertise-peer-urls "http://127.0.0.1:${ETCD_PEER_PORT}" \
  --initial-cluster "local=http://127.0.0.1:${ETCD_PEER_PORT}" >"$work/etcd.log" 2>&1 &
pids+=($!)
export ETCDCTL_API=3
for _ in $(seq 1 100); do
  etcdctl --endpoints="$etcd_url" get / --command-timeout=1s >/dev/null 2>&1 && break
  sleep 0.1
done
etcdctl --endpoints="$etcd_url" get / --command-timeout=1s >/dev/null

echo "==> loading sample records"
while read -r key value; do
  [ -n "$key" ] && etcdctl --endpoints="$etcd_url" put "$key" "$value" >/dev/null
done < deploy/local/sample-records.txt

echo "==> starting skydns on 127.0.0.1:${DNS_PORT}"
"$root/target/debug/skydns" -machines="$etcd_url" -addr="127.0.0.1:${DNS_PORT}" \
  -ns-rotate=false -domain=cluster.local. >"$work/skydns.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
  dig @127.0.0.1 -p "$DNS_PORT" +time=1 +tries=1 +short kubernetes.default.svc.cluster.local A 2>/dev/null | grep -q . && break
  sleep 0.1
done

cat <<MSG

==> ready. Try:
  dig @127.0.0.1 -p ${DNS_PORT} kubernetes.default.svc.cluster.local
  dig @127.0.0.1 -p ${DNS_PORT} _https._tcp.kubernetes.default.svc.cluster.local SRV
  dig @127.0.0.1 -p ${DNS_PORT} 1-2-3-4.default.pod.cluster.local
  dig @127.0.0.1 -p ${DNS_PORT} nosuch.default.svc.cluster.local
  ETCDCTL_API=3 etcdctl --endpoints=${etcd_url} get /skydns --prefix
  ETCDCTL_API=3 etcdctl --endpoints=${etcd_url} put /skydns/local/cluster/svc/default/demo/1 '{"host":"10.0.0.42","ttl":30}'
  dig @127.0.0.1 -p ${DNS_PORT} demo.default.svc.cluster.local
Logs follow (${work}/*.log); Ctrl-C stops everything.

MSG
tail -n +1 -F "$work/skydns.log" &
pids+=($!)
wait
