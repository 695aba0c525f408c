#!/usr/bin/env bash
# Benchmark: kube2sky under faults (etcd killed, stopped, wiped; the API
# server down, restored to an older resourceVersion, 410 storms; kube2sky
# killed during its sync; SIGTERM during a 40k-service sync), each case
# reporting keys missing, keys stale and seconds to converge after the fault
# ends. Goal: 0 / 0 / <= 2 s. See reliability.py for the cases.
#
#   integration-tests/bench/reliability.sh [SERVICES]    # default 10000, release binaries
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/install-deps.sh
cargo build --release --locked --bins -p kube2sky -p kube-api-test-server
exec python3 integration-tests/bench/reliability.py "$(pwd)/target/release" "${1:-10000}"
