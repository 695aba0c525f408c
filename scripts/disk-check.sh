#!/usr/bin/env bash
# Says, before a test run starts, whether the disk has room for it, so a
# run that would fill the disk says so at once and not as a failed link an
# hour later. A cold run (a fresh clone on a fresh machine) writes, in GB:
#   target/ (debug tests, the arm64 cross build)   ~6
#   ~/.cache/kube-dns-rs (control plane, CoreDNS)  ~0.4, and Go's
#     module cache for them                        ~3
#   Cargo's registry, zig, apt packages            ~1.5
# Figures measured 2026-11-30 (docs/testing.md, "Disk").
#
#   scripts/disk-check.sh          # exit 1 with the figures when short
# Environment: TEST_DISK_NEED_GB (default 12) is what a cold run asks.
set -euo pipefail
cd "$(dirname "$0")/.."
need=${TEST_DISK_NEED_GB:-12}
target=${CARGO_TARGET_DIR:-target}
mkdir -p "$target"
free_kb=$(df -Pk "$target" | awk 'NR == 2 { print $4 }')
free_gb=$((free_kb / 1024 / 1024))
if [ "$free_gb" -lt "$need" ]; then
  echo "disk-check: $free_gb GB free on $(df -P "$target" | awk 'NR == 2 { print $6 }') (holding $target), and a cold test run writes about $need GB: free space there (cargo clean, ~/.cache/go-build), or point CARGO_TARGET_DIR at a larger disk. TEST_DISK_NEED_GB=0 skips this check." >&2
  exit 1
fi
echo "disk-check: $free_gb GB free for $target (a cold run writes about $need GB)" >&2
