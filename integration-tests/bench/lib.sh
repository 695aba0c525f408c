# Shared set-up of the benchmark scripts that run skydns against a real
# etcd (dnsperf.sh, hostile.sh); sourced, not run. After `bench_start NAME`:
# $work is a temporary directory removed at exit, every pid added to
# `pids` is killed at exit, $etcd_url is a real etcd (v3) holding
# deploy/local/sample-records.txt, and free_port prints a free loopback port.

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

bench_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}

# bench_start NAME [ETCD_FLAG...]: the work directory, the cleanup trap, and
# etcd (member NAME, with the flags given) on free ports with the sample
# records.
bench_start() {
  local name=$1
  work=$(mktemp -d)
  pids=()
  trap bench_cleanup EXIT INT TERM
  local etcd_port peer_port
  etcd_port=$(free_port); peer_port=$(free_port)
  etcd_url="http://127.0.0.1:${etcd_port}"
  # Go's GC settings as the pod's etcd (deploy/kubernetes).
  GOGC=200 GOMEMLIMIT=400MiB ETCD_UNSUPPORTED_ARCH=$(uname -m) etcd --name "$name" --data-dir "$work/etcd" "${@:2}" \
    --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
    --listen-peer-urls "http://127.0.0.1:${peer_port}" --initial-advertise-peer-urls "http://127.0.0.1:${peer_port}" \
    --initial-cluster "${name}=http://127.0.0.1:${peer_port}" >"$work/etcd.log" 2>&1 &
  pids+=($!)
  export ETCDCTL_API=3
  for _ in $(seq 1 100); do etcdctl --endpoints="$etcd_url" get / >/dev/null 2>&1 && break; sleep 0.1; done
  while read -r key value; do
    [ -n "$key" ] && etcdctl --endpoints="$etcd_url" put "$key" "$value" >/dev/null
  done < deploy/local/sample-records.txt
}
