#!/usr/bin/env bash
# The mutation check (docs/testing.md, "Mutation testing"): cargo-mutants
# over the scope of .cargo/mutants.toml (each package's unit tests and its
# own integration tests), results in mutants.out/ (outcomes.json,
# missed.txt, caught.txt, ...).
#
#   scripts/mutants.sh                     # the whole scope: ~1,550 mutants, hours on 2 cores
#   scripts/mutants.sh FILE...             # only the mutants of these files (minutes): before you stop
#   scripts/mutants.sh --iterate           # only those not caught by the last run
#   scripts/mutants.sh --missed [FILE...]  # only those the last run missed, by name
#                                          # without line numbers: lines moved since do not
#                                          # bring its caught ones back, as --iterate does
#   scripts/mutants.sh --changed [REF]     # only mutants in lines changed since REF
#                                          # (default main), committed or not: before you stop
#   scripts/mutants.sh [FILE...] -- ARGS   # more cargo-mutants arguments (e.g. -- --list)
#
# Installs the pinned cargo-mutants when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=27.1.0
if ! cargo mutants --version 2>/dev/null | grep -q " $VERSION"; then
  cargo install --locked --version "$VERSION" cargo-mutants
fi
args=() files=() more=()
# Temporary files (the diff, the configuration's copy), removed at exit.
temporary=()
trap 'rm -rf "${temporary[@]}"' EXIT
# cargo-mutants copies the tree into the temporary directory (TMPDIR): a
# directory of this run's own, so that the clean-up at the end stops this
# run's processes only, never those of another run beside it.
work=$(mktemp -d)
temporary+=("$work")
started=$(mktemp)
temporary+=("$started")
while [ $# -gt 0 ]; do
  case "$1" in
    --iterate) args+=(--iterate); shift ;;
    --missed)
      shift
      [ -s mutants.out/missed.txt ] || { echo "--missed: no mutants.out/missed.txt" >&2; exit 2; }
      # One -F (a regex of the name) per missed mutant, its file:line:col
      # matched as file:any:any.
      while IFS= read -r name; do args+=(-F "$name"); done < <(python3 - mutants.out/missed.txt <<'PY'
import re, sys
for line in open(sys.argv[1]):
    found = re.match(r"^([^:]+):\d+:\d+: (.*)$", line.rstrip("\n"))
    if found:
        file, rest = (re.sub(r"([\\.+*?()|\[\]{}^$#&~-])", r"\\\1", part) for part in found.groups())
        print(f"^{file}:\\d+:\\d+: {rest}$")
PY
) ;;
    --changed)
      shift
      ref=main
      if [ $# -gt 0 ] && [ "${1#-}" = "$1" ] && ! [ -f "$1" ]; then ref=$1; shift; fi
      git rev-parse --verify --quiet "$ref^{commit}" >/dev/null \
        || { echo "--changed: no commit $ref" >&2; exit 2; }
      diff=$(mktemp)
      temporary+=("$diff")
      git diff "$ref" -- '*.rs' >"$diff"
      [ -s "$diff" ] || { echo "no Rust line changed since $ref: no mutant to test"; exit 0; }
      args+=(--in-diff "$diff") ;;
    --) shift; more=("$@"); break ;;
    -*) echo "unknown option $1 (see the top of $0)" >&2; exit 2 ;;
    *) [ -f "$1" ] || { echo "no such file: $1" >&2; exit 2; }
       files+=("$1"); shift ;;
  esac
done
if [ ${#files[@]} -gt 0 ]; then
  # cargo-mutants adds --file globs to the config's instead of putting them
  # in their place: the config is read from a copy whose examine_globs are
  # these files, and everything else as .cargo/mutants.toml says.
  config=$(mktemp)
  temporary+=("$config")
  {
    printf 'examine_globs = ['
    printf '"%s", ' "${files[@]}"
    printf ']\n'
    awk '/^examine_globs = \[/ { skip = 1 } !skip { print } skip && /^\]/ { skip = 0 }' .cargo/mutants.toml
  } >"$config"
  args+=(--config "$config")
fi
status=0
# Each mutant's tests may take 3 times the unmutated run's, unless
# --timeout is given after --.
case " ${more[*]} " in
  *" --timeout "* | *" --timeout="* | *" -t "*) ;;
  *) args+=(--timeout-multiplier 3) ;;
esac
# The test binaries (not the compiler) accept libtest's unstable
# --fail-fast of .cargo/mutants.toml: set through the target's runner.
runner="CARGO_TARGET_$(rustc -vV | sed -n 's/^host: //p' | tr 'a-z.-' 'A-Z__')_RUNNER"
env TMPDIR="$work" "$runner=env RUSTC_BOOTSTRAP=1" \
  cargo mutants "${args[@]}" "${more[@]}" || status=$?
# A mutant stopped at its timeout can leave behind processes its tests
# started (exec-healthz servers): they run from cargo-mutants' copies.
pkill -f "$work/" || true
# The figures per file of this run (none when it tested no mutant), as
# docs/testing.md gives them.
if [ mutants.out/outcomes.json -nt "$started" ]; then
  python3 - mutants.out/outcomes.json <<'PY'
import collections, json, sys
names = {"CaughtMutant": "caught", "Timeout": "timeout", "Unviable": "unviable", "MissedMutant": "missed"}
per_file = collections.defaultdict(collections.Counter)
for outcome in json.load(open(sys.argv[1]))["outcomes"]:
    mutant = outcome["scenario"]
    if isinstance(mutant, dict) and "Mutant" in mutant:
        per_file[mutant["Mutant"]["file"]][names.get(outcome["summary"], outcome["summary"])] += 1
columns = ["caught", "timeout", "unviable", "missed"]
print("| file | mutants | " + " | ".join(columns) + " |")
print("|---|---|" + "---|" * len(columns))
total = collections.Counter()
for file, counts in sorted(per_file.items()):
    total.update(counts)
    print(f"| `{file}` | {sum(counts.values())} | " + " | ".join(str(counts[c]) for c in columns) + " |")
print(f"| all | {sum(total.values())} | " + " | ".join(str(total[c]) for c in columns) + " |")
PY
fi
exit "$status"
