#!/usr/bin/env bash
# Benchmark: skydns against Knot DNS on the same names, measured with dnsperf
# in the same run on the same machine, reported as a QPS ratio.
#
# Both servers answer the demo records of docs/architecture.md, "What it writes" (Knot from
# an equivalent zone file, skydns from a real etcd). Each server gets the
# same query mix for DURATION seconds (default 10) with CLIENTS dnsperf
# clients (default 4); the order alternates over ROUNDS rounds (default 2)
# and the best round of each counts; beside it, the median over rounds of
# each round's own ratio (the machine's speed drifts between rounds, less
# within one). skydns is the release build.
# The ceiling (ceiling.c, built here with cc) answers the same queries
# without any lookup, in the same rounds: skydns/ceiling is how far skydns
# is from what the machine and dnsperf allow (CEILING_THREADS threads,
# default 1).
# BASELINE=<path of another skydns binary> (e.g. a release build of an
# earlier commit) runs that binary too, in the same rounds, so a change is
# compared before and after in one run.
# QUERY_LOG=<skydns flags> (e.g. "-log-queries=denial") runs this skydns
# once more with those flags, its log written to a file, in the same rounds:
# what the query log costs when it is on.
#
#   integration-tests/bench/dnsperf.sh        # prints QPS of each and the ratio
#   BASELINE=/tmp/skydns-before integration-tests/bench/dnsperf.sh
#   QUERY_LOG=-log-queries=denial integration-tests/bench/dnsperf.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
DURATION=${DURATION:-10}
CLIENTS=${CLIENTS:-4}
ROUNDS=${ROUNDS:-2}
CEILING_THREADS=${CEILING_THREADS:-1}

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
sky_port=$(free_port); knot_port=$(free_port); base_port=$(free_port); ceil_port=$(free_port)
qlog_port=$(free_port)
cc -O2 -pthread -o "$work/ceiling" integration-tests/bench/ceiling.c
"$work/ceiling" "$ceil_port" "$CEILING_THREADS" &
pids+=($!)

start_skydns() { # binary port [flags...]
  local binary=$1 port=$2
  shift 2
  # The query log writes at INFO (target skydns::query); the rest stays at warn.
  RUST_LOG=warn,skydns::query=info "$binary" -machines="$etcd_url" -etcd3 -addr="127.0.0.1:$port" \
    -domain=cluster.local. -ns-rotate=false -no-rec "$@" >"$work/skydns-$port.log" 2>&1 &
  pids+=($!)
}
start_skydns "$root/target/release/skydns" "$sky_port"
servers="sky knot ceil"
if [ -n "${BASELINE:-}" ]; then
  start_skydns "$BASELINE" "$base_port"
  servers="$servers base"
fi
if [ -n "${QUERY_LOG:-}" ]; then
  # shellcheck disable=SC2086 # the flags are words
  start_skydns "$root/target/release/skydns" "$qlog_port" $QUERY_LOG
  servers="$servers qlog"
fi

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

declare -A port_of=([sky]=$sky_port [knot]=$knot_port [base]=$base_port [ceil]=$ceil_port [qlog]=$qlog_port)
dig @127.0.0.1 -p "$ceil_port" +time=2 +tries=5 kubernetes.default.svc.cluster.local | grep -q "status: NOERROR" \
  || { echo "the ceiling responder on $ceil_port is not answering" >&2; exit 1; }
for who in ${servers/ceil/}; do
  port=${port_of[$who]}
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
declare -A best=([sky]=0 [knot]=0 [base]=0 [ceil]=0 [qlog]=0)
for round in $(seq 1 "$ROUNDS"); do
  # The order alternates: odd rounds as listed, even rounds reversed.
  order=$servers
  [ $((round % 2)) -eq 1 ] || order=$(echo "$servers" | tr ' ' '\n' | tac | tr '\n' ' ')
  for who in $order; do
    q=$(run "${port_of[$who]}")
    echo "round $round: $who ${q} qps"
    echo "$round $who $q" >>"$work/rounds"
    best[$who]=$(python3 -c "print(max(${best[$who]}, $q))")
  done
done
qlog_lines=0
[ -z "${QUERY_LOG:-}" ] || qlog_lines=$(grep -c 'skydns::query' "$work/skydns-$qlog_port.log" || true)
python3 - "${best[sky]}" "${best[knot]}" "${best[base]}" "${best[ceil]}" "${best[qlog]}" "$qlog_lines" "${QUERY_LOG:-}" "$work/rounds" <<'PY'
import statistics, sys
sky, knot, base, ceil, qlog, lines = map(float, sys.argv[1:7])
flags = sys.argv[7]
rounds = {}
for line in open(sys.argv[8]):
    r, who, q = line.split()
    rounds.setdefault(r, {})[who] = float(q)
def paired(a, b):
    """The median over rounds of a/b: servers measured side by side in a
    round share the machine's mood, which drifts between rounds."""
    return statistics.median(x[a] / x[b] for x in rounds.values())
print(f"skydns {sky:.0f} qps, knot {knot:.0f} qps, ratio skydns/knot = {sky/knot:.2f}")
print(f"ceiling (no lookup) {ceil:.0f} qps: skydns/ceiling = {sky/ceil:.2f} (goal >= 0.95), knot/ceiling = {knot/ceil:.2f}")
print(f"median of the rounds' own ratios: skydns/ceiling = {paired('sky', 'ceil'):.2f}, knot/ceiling = {paired('knot', 'ceil'):.2f}")
if base:
    print(f"baseline {base:.0f} qps, ratio baseline/knot = {base/knot:.2f}; skydns/baseline = {sky/base:.2f}")
    print(f"median of the rounds' own ratios: skydns/baseline = {paired('sky', 'base'):.2f}, baseline/ceiling = {paired('base', 'ceil'):.2f}")
if qlog:
    print(f"with {flags}: {qlog:.0f} qps, ratio /knot = {qlog/knot:.2f}; with/without = {qlog/sky:.2f} ({lines:.0f} lines written)")
PY
