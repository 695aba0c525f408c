#!/usr/bin/env bash
# Benchmark: skydns FORWARDING names outside its domain while the first of its
# two upstream nameservers is dead, against Unbound as the anchor, in the same
# run on the same machine.
#
# Upstreams: a DEAD one (forward.py dead: UDP and TCP bound, never answering,
# so every query sent there costs the whole timeout) listed first, then a live
# Knot serving example.test. (NAMES A records n0..n999, TTL 300).
# Servers, each on its own free loopback port, all asked n*.example.test A:
#   skydns before         -ns-fail-threshold=0: no upstream health tracking
#                         (the 1.2 behaviour: every query tries the dead
#                         upstream first and waits -rtimeout=2s)
#   skydns after          the defaults: health tracking (the dead upstream is
#                         marked down after -ns-fail-threshold failures and
#                         probed in the background), no response cache
#   skydns after+rcache   the defaults and the modern manifests' cache
#                         (-rcache=10000 -rcache-ttl=300 -rcache-prefetch=10
#                         -rcache-stale=1h): a cache, like Unbound's
#   unbound               forward-zone "." to the same two upstreams (dead
#                         first), cache on, serve-expired, iterator only
#   coredns               CoreDNS 1.15 (scripts/kube-tools.sh builds it):
#                         forward . to the same two upstreams, policy
#                         sequential (dead first), its health checks
#                         (max_fails 2, health_check 0.5s: its defaults)
#   coredns+cache         the same with cache 300 { serve_stale 1h;
#                         prefetch 10 }: the skydns after+rcache settings
# All skydns runs: release build, real etcd, -domain=cluster.local.
# -nameservers=<dead>,<knot> -ns-rotate=false -rtimeout=2s.
#
# Measured (forward.py measure): the first 10 queries of each fresh server,
# one at a time (they discover the dead upstream), and a warm-up pass over the
# names; QPS from dnsperf (DURATION s, CLIENTS clients, 500 outstanding, ROUNDS
# rounds in alternating order, best round counts); p50/p99 latency from an
# open-loop client at RATE queries/s for DURATION s, LATENCY_ROUNDS rounds in
# alternating order, the median round counts (no answer in 5 s = lost, an
# answer other than NOERROR with an A = failed; both count as 5000 ms in the
# percentiles). Ratios are skydns/Unbound: QPS higher is better, p99
# lower is better. At RATE=1000, "before" would need ~2000 forwards pending
# (2 s each); skydns answers SERVFAIL past 1000 pending, which shows as failed.
# The goal: skydns (after+rcache) p99 <= Unbound's p99, both caching. Results also go to
# integration-tests/bench/results/forward.json.
#
# A binary without -ns-fail-threshold (before the health tracking) runs
# "before" without that flag (the same behaviour) and skips the "after" rows.
#
#   integration-tests/bench/forward.sh               # ~6 minutes
#   SKYDNS=/path/to/skydns integration-tests/bench/forward.sh   # no cargo build
#   DURATION=10 CLIENTS=4 ROUNDS=2 RATE=1000 LATENCY_ROUNDS=3 NAMES=1000 UNBOUND_THREADS=nproc (defaults)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
DURATION=${DURATION:-10}
CLIENTS=${CLIENTS:-4}
ROUNDS=${ROUNDS:-2}
RATE=${RATE:-1000}
LATENCY_ROUNDS=${LATENCY_ROUNDS:-3}
NAMES=${NAMES:-1000}
UNBOUND_THREADS=${UNBOUND_THREADS:-$(nproc)}

need=()
command -v dnsperf >/dev/null || need+=(dnsperf)
command -v python3 >/dev/null || need+=(python3)
[ -x /usr/sbin/knotd ] || need+=(knot)
[ -x /usr/sbin/unbound ] || need+=(unbound)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
fi
scripts/install-deps.sh
coredns="$(scripts/kube-tools.sh)/coredns"
if [ -z "${SKYDNS:-}" ]; then
  cargo build --release -p skydns
  SKYDNS="${CARGO_TARGET_DIR:-$root/target}/release/skydns"
fi

# shellcheck source=integration-tests/bench/lib.sh
source integration-tests/bench/lib.sh
bench_start forward
dead_port=$(free_port); knot_port=$(free_port); unbound_port=$(free_port)

# The dead upstream.
python3 integration-tests/bench/forward.py dead "$dead_port" &
pids+=($!)

# The live upstream: Knot, authoritative for example.test.
python3 - "$NAMES" >"$work/example.test.zone" <<'PY'
import sys
print("$ORIGIN example.test.\n$TTL 300")
print("@ IN SOA ns hostmaster 1 28800 7200 604800 300\n@ IN NS ns\nns IN A 127.0.0.1")
for i in range(int(sys.argv[1])):
    print("n%d IN A 10.%d.%d.%d" % (i, i >> 16 & 255, i >> 8 & 255, i & 255))
PY
mkdir -p "$work/knot"
cat > "$work/knot.conf" <<CONF
server:
    rundir: "$work/knot"
    listen: 127.0.0.1@${knot_port}
database:
    storage: "$work/knot"
zone:
  - domain: example.test
    storage: "$work"
    file: "example.test.zone"
log:
  - target: stderr
    any: error
CONF
/usr/sbin/knotd -c "$work/knot.conf" >"$work/knot.log" 2>&1 &
pids+=($!)

# The anchor: Unbound forwarding everything to the same two upstreams.
cat > "$work/unbound.conf" <<CONF
server:
    interface: 127.0.0.1
    port: ${unbound_port}
    do-ip6: no
    num-threads: ${UNBOUND_THREADS}
    username: ""
    chroot: ""
    directory: "$work"
    pidfile: "$work/unbound.pid"
    use-syslog: no
    logfile: ""
    verbosity: 0
    module-config: "iterator"
    do-not-query-localhost: no
    serve-expired: yes
    # test. is one of Unbound's default (NXDOMAIN) local zones (RFC 6761).
    local-zone: "test." nodefault
    access-control: 127.0.0.0/8 allow
remote-control:
    control-enable: no
forward-zone:
    name: "."
    forward-addr: 127.0.0.1@${dead_port}
    forward-addr: 127.0.0.1@${knot_port}
CONF
unbound-checkconf "$work/unbound.conf" >/dev/null
/usr/sbin/unbound -d -c "$work/unbound.conf" >"$work/unbound.log" 2>&1 &
pids+=($!)

# skydns in each configuration. Without -ns-fail-threshold the binary has no
# health tracking: "before" runs without the flag and "after" is skipped.
servers=(); skipped=()
start_skydns() { # label config-text extra-flags...
  local label=$1 config=$2 port; shift 2
  port=$(free_port)
  RUST_LOG=warn "$SKYDNS" -machines="$etcd_url" -etcd3 -addr="127.0.0.1:$port" \
    -domain=cluster.local. -nameservers="127.0.0.1:${dead_port},127.0.0.1:${knot_port}" \
    -ns-rotate=false -rtimeout=2s "$@" >"$work/skydns-${label// /_}.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do
    dig @127.0.0.1 -p "$port" +time=1 +tries=1 +short kubernetes.default.svc.cluster.local | grep -q 10.0.0.1 && break
    sleep 0.1
  done
  dig @127.0.0.1 -p "$port" +short kubernetes.default.svc.cluster.local | grep -q 10.0.0.1 ||
    { echo "skydns ($label) not answering; its log:" >&2; cat "$work/skydns-${label// /_}.log" >&2; exit 1; }
  servers+=("$label=$port=$config")
}
if "$SKYDNS" --help 2>&1 | grep -q -- 'ns-fail-threshold'; then
  start_skydns "skydns before" "-ns-fail-threshold=0: no health tracking" -ns-fail-threshold=0
  start_skydns "skydns after" "defaults: health tracking, no cache"
  start_skydns "skydns after+rcache" "defaults: health tracking, the modern manifests' cache" \
    -rcache=10000 -rcache-ttl=300 -rcache-prefetch=10 -rcache-stale=1h
else
  echo "note: $SKYDNS has no -ns-fail-threshold: 'before' runs without it, 'after' is skipped" >&2
  start_skydns "skydns before" "no health tracking (binary without the flag)"
  skipped+=("skydns after=binary has no -ns-fail-threshold" "skydns after+rcache=binary has no -ns-fail-threshold")
fi

# Ready: Knot answers a name itself, Unbound answers its own id.server.
for _ in $(seq 1 100); do
  dig @127.0.0.1 -p "$knot_port" +time=1 +tries=1 +short n1.example.test | grep -q 10.0.0.1 && break
  sleep 0.1
done
dig @127.0.0.1 -p "$knot_port" +short n1.example.test | grep -q 10.0.0.1 || { echo "knot not answering" >&2; cat "$work/knot.log" >&2; exit 1; }
for _ in $(seq 1 100); do
  dig @127.0.0.1 -p "$unbound_port" +time=1 +tries=1 +short CH TXT version.server | grep -q . && break
  sleep 0.1
done
dig @127.0.0.1 -p "$unbound_port" +short CH TXT version.server | grep -q . || { echo "unbound not answering" >&2; cat "$work/unbound.log" >&2; exit 1; }
servers+=("unbound=$unbound_port=forward . (dead first), cache, ${UNBOUND_THREADS} threads")

# CoreDNS, with and without its cache.
start_coredns() { # label config-text cache-block
  local label=$1 config=$2 cache=$3 port
  port=$(free_port)
  # chaos answers version.bind: readiness without a forwarded query.
  cat > "$work/${label}.Corefile" <<CONF
.:${port} {
    chaos
    forward . 127.0.0.1:${dead_port} 127.0.0.1:${knot_port} {
        policy sequential
    }
${cache}
}
CONF
  "$coredns" -conf "$work/${label}.Corefile" >"$work/${label}.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do
    dig @127.0.0.1 -p "$port" +time=1 +tries=1 +short CH TXT version.bind | grep -q . && break
    sleep 0.1
  done
  dig @127.0.0.1 -p "$port" +short CH TXT version.bind | grep -q . ||
    { echo "CoreDNS ($label) not answering; its log:" >&2; cat "$work/${label}.log" >&2; exit 1; }
  servers+=("$label=$port=$config")
}
start_coredns coredns "forward, sequential, health checks (its defaults), no cache" ""
start_coredns coredns+cache "forward as above, cache 300 with serve_stale 1h, prefetch 10" \
  "    cache 300 {
        serve_stale 1h
        prefetch 10
    }"

echo "==> forwarding with a dead first upstream, $(date -u +%F), $(nproc) cores; dead 127.0.0.1:$dead_port, knot 127.0.0.1:$knot_port"
python3 integration-tests/bench/forward.py measure --servers "${servers[@]}" \
  ${skipped[@]+--skipped "${skipped[@]}"} --names "$NAMES" --seconds "$DURATION" \
  --clients "$CLIENTS" --rounds "$ROUNDS" --rate "$RATE" --latency-rounds "$LATENCY_ROUNDS" --work "$work" --json integration-tests/bench/results/forward.json
