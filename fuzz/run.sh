#!/usr/bin/env bash
# Coverage-guided fuzzing of skydns with libFuzzer (LLVM's, from Debian's
# libfuzzer-NN-dev, NN = the LLVM of rustc): builds the targets with
# SanitizerCoverage instrumentation, writes the seed corpus, and runs
#   packet      any bytes as a DNS request through the whole packet path
#   etcd_value  any bytes as an etcd value through parser, snapshot, answers
# checking the properties of fuzz/src/lib.rs on every input.
#
# usage: fuzz/run.sh [--runs N] [--time SECONDS] [target...]
#   default: 1,000,000 runs of each target. Crashes are written to
#   target/fuzz/artifacts/<target>/; the corpus grows in target/fuzz/corpus/.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=1000000
time_limit=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --time) time_limit=$2; runs=-1; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    packet|etcd_value) targets+=("$1"); shift ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(packet etcd_value)

llvm=$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
lib=/usr/lib/llvm-$llvm/lib/libFuzzer.a
if [ ! -f "$lib" ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  # rustc's LLVM if packaged, else the newest libFuzzer (its interface to
  # the instrumentation is stable across LLVM versions).
  if ! apt-cache show "libfuzzer-$llvm-dev" >/dev/null 2>&1; then
    llvm=$(apt-cache search --names-only '^libfuzzer-[0-9]+-dev$' | sed 's/^libfuzzer-\([0-9]*\)-dev.*/\1/' | sort -n | tail -n 1)
    [ -n "$llvm" ] || { echo "no libfuzzer-NN-dev package found" >&2; exit 1; }
  fi
  lib=/usr/lib/llvm-$llvm/lib/libFuzzer.a
  echo "==> installing libfuzzer-$llvm-dev"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "libfuzzer-$llvm-dev"
fi

host=$(rustc -vV | sed -n 's/^host: //p')
out=target/fuzz
# As cargo-fuzz: instrument every crate of the target (not build scripts or
# proc macros, which --target keeps apart), keep debug assertions and
# overflow checks on, and link LLVM's libFuzzer (which brings main()).
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares -Cdebug-assertions -Coverflow-checks \
-Clink-arg=$lib -Clink-arg=-lstdc++"
echo "==> building fuzz targets (release, instrumented) in $out"
cargo build --locked --release -p skydns-fuzz --features libfuzzer --target "$host" \
  --target-dir "$out" $(printf -- '--example %s ' "${targets[@]}")
unset RUSTFLAGS
cargo run --locked -q -p skydns-fuzz --example write_seeds -- "$out/seeds/packet"

for t in "${targets[@]}"; do
  corpus=$out/corpus/$t
  mkdir -p "$corpus" "$out/artifacts/$t"
  seeds=()
  [ "$t" = packet ] && seeds=("$out/seeds/packet")
  echo "==> fuzzing $t (runs: $runs, time: ${time_limit}s)"
  log=$out/$t.log
  if ! "$out/$host/release/examples/$t" "$corpus" "${seeds[@]}" \
    -runs="$runs" -max_total_time="$time_limit" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$out/artifacts/$t/" -print_final_stats=1 >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz target $t failed; the input is in $out/artifacts/$t/" >&2
    exit 1
  fi
  grep -E '^(Done|stat::)' "$log" || tail -n 5 "$log"
done
