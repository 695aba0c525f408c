#!/usr/bin/env bash
# Benchmark: skydns against Knot DNS on the same names, measured with dnsperf
# in the same run on the same machine, reported as a QPS ratio.
#
# Both servers answer the demo records of kube2sky/README.md (Knot from
# an equivalent zone file, skydns from a real etcd). Each server gets the
# same query mix for DURATION seconds (default 10) with CLIENTS dnsperf
# clients (default 4); the order alternates over ROUNDS rounds (default 2)
# and the best round of each counts. skydns is the release build.
#
#   integration-tests/bench/dnsperf.sh        # prints QPS of each and the ratio
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
DURATION=${DURATION:-10}
CLIENTS=${CLIENTS:-4}
ROUNDS=${ROUNDS:-2}

need=()
command -v dnsperf >/dev/null || need+=(dnsperf)
[ -x /usr/sbin/knotd ] || need+=(knot)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
fi
scripts/install-deps.sh
cargo build --release -p skydns

# shellcheck source=integration-tests/bench/lib.sh
source integration-tests/bench/lib.sh
bench_start bench
sky_port=$(free_port); knot_port=$(free_port)

RUST_LOG=warn "$root/target/release/skydns" -machines="$etcd_url" -etcd3 -addr="127.0.0.1:${sky_port}" \
  -domain=cluster.local. -ns-rotate=false -no-rec >"$work/skydns.log" 2>&1 &
pids+=($!)

cat > "$work/cluster.local.zone" <<ZONE
\$ORIGIN cluster.local.
\$TTL 30
@ 3600 IN SOA ns.dns.cluster.local. hostmaster.skydns.local. 1 28800 7200 604800 60
@ IN NS ns.dns
ns.dns IN A 127.0.0.1
kubernetes.default.svc IN A 10.0.0.1
_https._tcp.kubernetes.default.svc IN SRV 10 100 443 kubernetes.default.svc
kube-dns.kube-system.svc IN A 10.0.0.10
_dns._udp.kube-dns.kube-system.svc IN SRV 10 100 53 kube-dns.kube-system.svc
1-2-3-4.default.pod IN A 1.2.3.4
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
log:
  - target: stderr
    any: error
CONF
/usr/sbin/knotd -c "$work/knot.conf" >"$work/knot.log" 2>&1 &
pids+=($!)

for port in "$sky_port" "$knot_port"; do
  for _ in $(seq 1 100); do
    dig @127.0.0.1 -p "$port" +time=1 +tries=1 +short kubernetes.default.svc.cluster.local | grep -q 10.0.0.1 && break
    sleep 0.1
  done
  dig @127.0.0.1 -p "$port" +short kubernetes.default.svc.cluster.local | grep -q 10.0.0.1 || { echo "server on $port not answering" >&2; exit 1; }
done

cat > "$work/queries" <<Q
kubernetes.default.svc.cluster.local A
_https._tcp.kubernetes.default.svc.cluster.local SRV
kube-dns.kube-system.svc.cluster.local A
_dns._udp.kube-dns.kube-system.svc.cluster.local SRV
1-2-3-4.default.pod.cluster.local A
kubernetes.default.svc.cluster.local AAAA
nosuch.default.svc.cluster.local A
Q

run() { # port → QPS
  dnsperf -s 127.0.0.1 -p "$1" -d "$work/queries" -l "$DURATION" -c "$CLIENTS" -q 500 2>/dev/null \
    | awk '/Queries per second/ {print $4}'
}
best_sky=0; best_knot=0
for round in $(seq 1 "$ROUNDS"); do
  if [ $((round % 2)) -eq 1 ]; then order="sky knot"; else order="knot sky"; fi
  for who in $order; do
    if [ "$who" = sky ]; then q=$(run "$sky_port"); else q=$(run "$knot_port"); fi
    echo "round $round: $who ${q} qps"
    if [ "$who" = sky ]; then best_sky=$(python3 -c "print(max($best_sky, $q))"); else best_knot=$(python3 -c "print(max($best_knot, $q))"); fi
  done
done
python3 - "$best_sky" "$best_knot" <<'PY'
import sys
sky, knot = map(float, sys.argv[1:])
print(f"skydns {sky:.0f} qps, knot {knot:.0f} qps, ratio skydns/knot = {sky/knot:.2f}")
PY
