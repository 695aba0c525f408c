#!/usr/bin/env bash
# Says, before a test run starts, whether the disk has room for it, so a
# run that would fill the disk says so at once and not as a failed link
# half an hour later. What a cold run (a fresh clone on a fresh machine)
# writes, and where: docs/testing.md, "Disk".
#
#   scripts/disk-check.sh    # exit 1, naming the figures, when short
#
# Environment: TEST_DISK_NEED_GB (default 12), the room a cold run needs,
# checked on the disk holding the target directory (CARGO_TARGET_DIR, else
# target/) and on the one holding ~/.cache; 0 skips the check.
set -euo pipefail
cd "$(dirname "$0")/.."
need=${TEST_DISK_NEED_GB:-12}
[[ $need =~ ^[0-9]+$ ]] ||
  { echo "disk-check: TEST_DISK_NEED_GB=$need is not a whole number of GB" >&2; exit 1; }
[ "$need" -eq 0 ] && exit 0
target=${CARGO_TARGET_DIR:-target}
cache=${XDG_CACHE_HOME:-$HOME/.cache}
mkdir -p "$target" "$cache"
# Free GB and mount point of the disk holding a directory.
room() { df -k --output=avail,target "$1" | awk 'NR == 2 { printf "%d %s\n", $1 / 1048576, $2 }'; }
read -r free_target mount_target < <(room "$target")
read -r free_cache mount_cache < <(room "$cache")
if [ "$mount_target" = "$mount_cache" ]; then
  checks=("$free_target $mount_target target/,~/.cache")
else
  # Apart, each gets the whole figure: the split varies with what is
  # cached already.
  checks=("$free_target $mount_target target/" "$free_cache $mount_cache ~/.cache")
fi
for check in "${checks[@]}"; do
  read -r free mount what <<<"$check"
  if [ -z "$free" ] || [ "$free" -lt "$need" ]; then
    echo "disk-check: ${free:-unknown} GB free on $mount (holding $what), and a cold test run writes about $need GB: free space there (cargo clean; old builds under ~/.cache/kube-dns-rs/kube), or point CARGO_TARGET_DIR at a larger disk. TEST_DISK_NEED_GB=0 skips this check." >&2
    exit 1
  fi
  echo "disk-check: $free GB free on $mount for $what (a cold run writes about $need GB)" >&2
done
