#!/usr/bin/env bash
# The project's test command: installs what the tests need, then runs every
# test of the workspace (unit, component, and end-to-end against a real etcd,
# dig, nslookup, dnsmasq and kubectl) on the debug profile.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
cargo fmt --all -- --check
cargo clippy --locked --workspace --all-targets -- -D warnings
# The binaries the smoke test of deploy/local/run.sh runs.
cargo build --locked --workspace --bins
cargo test --locked --workspace
