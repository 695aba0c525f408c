#!/usr/bin/env bash
# The floor of any etcd v3 writer at a cluster size: a fresh etcd alone
# taking KEYS record PUTs in transactions of OPS operations (default 1024,
# etcd's -max-txn-ops and kube2sky's --etcd-max-txn-ops in deploy/; 128 is
# both programs' default), 8 in flight (kube2sky's shape), with one watcher
# reading every event (as skydns does).
# Prints the time until the last PUT is seen and etcd's CPU seconds. The
# scale benchmark's XL size writes 300,007 keys in its initial sync: run
# `etcd_floor.sh 300007` beside it to see how much of that sync is etcd's.
#
#   integration-tests/bench/etcd_floor.sh [KEYS]     # default 300007
#   OPS=128 integration-tests/bench/etcd_floor.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
KEYS=${1:-300007}
OPS=${OPS:-1024}
cargo build --release -p integration-tests --example etcd_put_floor
source integration-tests/bench/lib.sh
bench_start floor "--max-txn-ops=$OPS"
etcd_pid=${pids[0]}
ticks() { awk '{print $14 + $15}' "/proc/$etcd_pid/stat"; }
before=$(ticks)
target/release/examples/etcd_put_floor "$etcd_url" "$KEYS" "$OPS" 8 watch
after=$(ticks)
echo "etcd CPU: $(python3 -c "print(($after - $before) / $(getconf CLK_TCK))") s"
