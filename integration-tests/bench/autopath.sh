#!/usr/bin/env bash
# Benchmark: lookups per second of a pod's search-path mix, skydns with
# -autopath against Knot DNS (and skydns without it) on the same names,
# measured with dnsperf in the same run, reported as a ratio of lookups/s.
#
# A "lookup" is what glibc sends for one name from a pod of `default`
# (search default.svc.cluster.local svc.cluster.local cluster.local,
# ndots:5, A and AAAA), in the search-path mix of scale.py: a service of
# another namespace (db.other: 4 queries without autopath), one of its own
# namespace (kubernetes: 2) and an external name (api.example.com: 8, here
# with the name itself asked). Knot, which has no autopath, is
# authoritative for cluster.local and example.com and answers every step;
# skydns gets the same steps without -autopath, and with -autopath the
# queries glibc then sends (2 each), from the pod's address (dnsperf -a
# 127.0.0.9, which has a pod record in etcd). skydns forwards example.com
# to Knot, with its response cache on (-rcache). lookups/s = queries/s
# divided by the queries one round of the three lookups takes, times 3.
# (A name that exists nowhere costs 8 queries either way: its first
# step's NXDOMAIN is sent as it is; docs/skydns.md, "Autopath".) Each server
# gets DURATION seconds (default 10) with CLIENTS dnsperf clients
# (default 4); the order alternates over ROUNDS rounds (default 2) and
# the best round of each counts. skydns is the release build.
# CoreDNS 1.15 (scripts/kube-tools.sh builds it) runs beside them with
# `kubernetes cluster.local { pods verified }`, `autopath @kubernetes`,
# `forward . <Knot>` and `cache 30`, reading a real kube-apiserver
# (kube-control-plane) that holds the same names: Services
# default/kubernetes, kube-system/kube-dns and other/db, and the asking pod
# default/client with IP 127.0.0.9 (its status written as a kubelet would).
# It gets the autopath queries, as skydns -autopath does.
#
#   integration-tests/bench/autopath.sh   # goal: autopath/knot >= 2.0 lookups/s
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
DURATION=${DURATION:-10}
CLIENTS=${CLIENTS:-4}
ROUNDS=${ROUNDS:-2}
POD=127.0.0.9

need=()
command -v dnsperf >/dev/null || need+=(dnsperf)
[ -x /usr/sbin/knotd ] || need+=(knot)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
fi
scripts/install-deps.sh
coredns="$(scripts/kube-tools.sh)/coredns"
cargo build --release -p skydns -p test-support --bin skydns --bin kube-control-plane

# shellcheck source=integration-tests/bench/lib.sh
source integration-tests/bench/lib.sh
bench_start autopath
export ETCDCTL_API=3
put() { etcdctl --endpoints="$etcd_url" put "$1" "$2" >/dev/null; }
put /skydns/local/cluster/pod/default/127-0-0-9/7f000009 '{"host":"127.0.0.9"}'
put /skydns/local/cluster/svc/other/db/a1b2c3d4 '{"host":"10.0.0.50"}'

on_port=$(free_port); off_port=$(free_port); knot_port=$(free_port); coredns_port=$(free_port)
start_skydns() { # port flags...
  local port=$1; shift
  RUST_LOG=warn "$root/target/release/skydns" -machines="$etcd_url" -etcd3 -addr="127.0.0.1:$port" \
    -domain=cluster.local. -ns-rotate=false -nameservers="127.0.0.1:$knot_port" -rcache=10000 \
    "$@" >"$work/skydns-$port.log" 2>&1 &
  pids+=($!)
}
start_skydns "$on_port" -autopath
start_skydns "$off_port"

cat > "$work/cluster.local.zone" <<ZONE
\$ORIGIN cluster.local.
\$TTL 30
@ 3600 IN SOA ns.dns.cluster.local. hostmaster.skydns.local. 1 28800 7200 604800 60
@ IN NS ns.dns
ns.dns IN A 127.0.0.1
kubernetes.default.svc IN A 10.0.0.1
kube-dns.kube-system.svc IN A 10.0.0.10
db.other.svc IN A 10.0.0.50
127-0-0-9.default.pod IN A 127.0.0.9
ZONE
cat > "$work/example.com.zone" <<ZONE
\$ORIGIN example.com.
\$TTL 300
@ 3600 IN SOA ns.example.com. hostmaster.example.com. 1 28800 7200 604800 60
@ IN NS ns
ns IN A 127.0.0.1
api IN A 192.0.2.7
ZONE
mkdir -p "$work/knot"
cat > "$work/knot.conf" <<CONF
server:
    rundir: "$work/knot"
    listen: 127.0.0.1@${knot_port}
database:
    storage: "$work/knot"
zone:
  - domain: cluster.local
    storage: "$work"
    file: "cluster.local.zone"
  - domain: example.com
    storage: "$work"
    file: "example.com.zone"
log:
  - target: stderr
    any: error
CONF
/usr/sbin/knotd -c "$work/knot.conf" >"$work/knot.log" 2>&1 &
pids+=($!)

# CoreDNS's cluster: a real API server holding the same names and the pod.
"$root/target/release/kube-control-plane" --kubeconfig "$work/kubeconfig" >"$work/control-plane.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 1200); do grep -qx ready "$work/control-plane.log" && break; sleep 0.1; done
grep -qx ready "$work/control-plane.log" || { echo "the control plane did not start:" >&2; tail -20 "$work/control-plane.log" >&2; exit 1; }
kc() { kubectl --kubeconfig "$work/kubeconfig" "$@" >/dev/null; }
kc create namespace other
kc -n other create service clusterip db --tcp=5432 --clusterip=10.0.0.50
kc -n kube-system create service clusterip kube-dns --tcp=53 --clusterip=10.0.0.10
kc -n default run client --image=registry.k8s.io/pause:3.10 --restart=Never \
  --overrides='{"spec":{"nodeName":"bench-node"}}'
kc -n default patch pod client --subresource=status --type=merge \
  -p '{"status":{"phase":"Running","podIP":"127.0.0.9","podIPs":[{"ip":"127.0.0.9"}]}}'
cat > "$work/Corefile" <<CONF
.:${coredns_port} {
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $work/kubeconfig
        pods verified
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    autopath @kubernetes
    forward . 127.0.0.1:${knot_port}
    cache 30
}
CONF
"$coredns" -conf "$work/Corefile" >"$work/coredns.log" 2>&1 &
pids+=($!)

declare -A port_of=([autopath]=$on_port [knot]=$knot_port [skydns]=$off_port [coredns]=$coredns_port)
for who in knot skydns autopath coredns; do
  port=${port_of[$who]}
  for _ in $(seq 1 100); do
    dig @127.0.0.1 -p "$port" +time=1 +tries=1 +short kubernetes.default.svc.cluster.local | grep -q 10.0.0.1 && break
    sleep 0.1
  done
  dig @127.0.0.1 -p "$port" +short kubernetes.default.svc.cluster.local | grep -q 10.0.0.1 \
    || { echo "$who on $port not answering" >&2; exit 1; }
done
# The walk works before it is measured: a CNAME to the external name.
for port in "$on_port" "$coredns_port"; do
  for _ in $(seq 1 100); do
    dig @127.0.0.1 -p "$port" -b "$POD" +time=1 +tries=1 db.other.default.svc.cluster.local A \
      | grep -q 'CNAME.*db\.other\.svc\.cluster\.local\.' && break
    sleep 0.1
  done
  dig @127.0.0.1 -p "$port" -b "$POD" api.example.com.default.svc.cluster.local A \
    | grep -q 'CNAME.*api\.example\.com\.' || { echo "autopath on $port does not answer with a CNAME" >&2; exit 1; }
done

# glibc's steps for each lookup, A and AAAA each (both for every step).
steps() { # name: every name glibc asks for it, in order
  case "$1" in
    kubernetes) echo kubernetes.default.svc.cluster.local ;;
    db.other) printf '%s\n' db.other.default.svc.cluster.local db.other.svc.cluster.local ;;
    *) printf '%s\n' "$1.default.svc.cluster.local" "$1.svc.cluster.local" "$1.cluster.local" "$1" ;;
  esac
}
lookups="api.example.com db.other kubernetes"
: > "$work/every-step"
for name in $lookups; do
  for step in $(steps "$name"); do printf '%s A\n%s AAAA\n' "$step" "$step" >> "$work/every-step"; done
done
# With autopath, the first step answers each.
for name in $lookups; do
  step=$(steps "$name" | head -1)
  printf '%s A\n%s AAAA\n' "$step" "$step"
done > "$work/autopath-steps"
declare -A file_of=([autopath]="$work/autopath-steps" [knot]="$work/every-step" [skydns]="$work/every-step"
  [coredns]="$work/autopath-steps")

run() { # who → QPS
  dnsperf -s 127.0.0.1 -a "$POD" -p "${port_of[$1]}" -d "${file_of[$1]}" -l "$DURATION" -c "$CLIENTS" -q 500 2>/dev/null \
    | awk '/Queries per second/ {print $4}'
}
declare -A best=([autopath]=0 [knot]=0 [skydns]=0 [coredns]=0)
servers="autopath knot skydns coredns"
for round in $(seq 1 "$ROUNDS"); do
  order=$servers
  [ $((round % 2)) -eq 1 ] || order=$(echo "$servers" | tr ' ' '\n' | tac | tr '\n' ' ')
  for who in $order; do
    q=$(run "$who")
    echo "round $round: $who ${q} qps"
    best[$who]=$(python3 -c "print(max(${best[$who]}, $q))")
  done
done
python3 - "${best[autopath]}" "${best[knot]}" "${best[skydns]}" "${best[coredns]}" \
  "$(wc -l < "$work/autopath-steps")" "$(wc -l < "$work/every-step")" <<'PY'
import sys
on, knot, off, coredns = map(float, sys.argv[1:5])
on_q, every_q = int(sys.argv[5]), int(sys.argv[6])
per = lambda qps, queries: qps * 3 / queries
l_on, l_knot, l_off = per(on, on_q), per(knot, every_q), per(off, every_q)
l_coredns = per(coredns, on_q)
print(f"queries per round of 3 lookups: {on_q} with autopath, {every_q} without")
print(f"skydns -autopath {on:.0f} qps = {l_on:.0f} lookups/s")
print(f"knot             {knot:.0f} qps = {l_knot:.0f} lookups/s")
print(f"skydns           {off:.0f} qps = {l_off:.0f} lookups/s")
print(f"CoreDNS autopath {coredns:.0f} qps = {l_coredns:.0f} lookups/s")
print(f"autopath/knot = {l_on / l_knot:.2f} lookups/s (goal >= 2.0); autopath/skydns = {l_on / l_off:.2f}; "
      f"autopath/CoreDNS autopath = {l_on / l_coredns:.2f}")
PY
