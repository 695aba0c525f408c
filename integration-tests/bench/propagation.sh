#!/usr/bin/env bash
# Benchmark: skydns's share of propagation, and its hot path under churn, at
# cluster sizes. A real etcd v3 holding N service records; a record PUT ->
# skydns answers it (p50/p99/max of SAMPLES); dnsperf QPS still, with 200
# writes/s outside the zone and 200 changes/s in it; skydns RSS. See propagation.py.
#
#   integration-tests/bench/propagation.sh [SIZES] [SAMPLES]
#   (default SIZES 10000,100000; SAMPLES 100; release build)
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/install-deps.sh
cargo build --release --locked -p skydns --bin skydns
exec python3 integration-tests/bench/propagation.py "$(pwd)/target/release" "${1:-10000,100000}" "${2:-100}"
