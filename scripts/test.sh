#!/usr/bin/env bash
# The project's test command: installs what the tests need, then runs every
# test of the workspace (unit, component, and end-to-end against a real etcd,
# dig, nslookup, dnsmasq, kubectl and a real kube-apiserver) on the debug
# profile. The end-to-end suites run twice: on the etcd v2 keys API and on
# the v3 API (E2E_ETCD_API).
# Last, a short libFuzzer run of skydns's fuzz targets.
set -euo pipefail
cd "$(dirname "$0")/.."

# A clone's tests build once: incremental state would only hold disk
# (2.5 GB). CARGO_INCREMENTAL=1 keeps it for repeated runs.
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
scripts/disk-check.sh
scripts/install-deps.sh
# The real control plane (kube-apiserver, kube-controller-manager, etcd 3.6)
# that the on_the_real_apiserver tests, kube2sky_real_apiserver and the
# apiserver_* suites' tests on both servers run: built once per pin
# (tools/kube/go.mod) into ~/.cache/kube-dns-rs/kube.
scripts/kube-tools.sh >/dev/null
cargo fmt --all -- --check
cargo clippy --locked --workspace --all-targets -- -D warnings
# The binaries the smoke test of deploy/local/run.sh runs.
cargo build --locked --workspace --bins
# Every test; the end-to-end suites run with the pipeline on the etcd v2
# keys API (the default, as the 1.2 pod)...
cargo test --locked --workspace
# ...and once more on the v3 API.
E2E_ETCD_API=v3 cargo test --locked -p integration-tests \
  --test skydns_e2e --test skydns_forward --test skydns_tls --test skydns_dnssec --test local_pipeline \
  --test skydns_discover --test skydns_systemd --test skydns_lifecycle \
  --test kube2sky_e2e \
  --test kube2sky_leader --test kube2sky_failover --test kube2sky_conformance \
  --test kube2sky_spec_keys --test kube2sky_config_map --test kube2sky_real_apiserver --test skydns_upstreams \
  --test skydns_autopath --test skydns_query_log
# kube2sky's own end-to-end suites (tests/writer), on v3 where a test does
# not name its API.
E2E_ETCD_API=v3 cargo test --locked -p kube2sky --test writer
# A short coverage-guided run of the fuzz targets under libFuzzer (the long
# runs and their figures: docs/testing.md, "Fuzzing").
fuzz/run.sh --runs 20000
