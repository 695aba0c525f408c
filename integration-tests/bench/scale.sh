#!/usr/bin/env bash
# The scale benchmark: the whole pipeline (release build) at cluster sizes,
# beside Knot DNS on the same names; prints a markdown table, writes
# OUT/scale.json and the chart OUT/scale.png. See scale.py for what each
# figure measures and scale_cluster.py for the sizes.
#
#   integration-tests/bench/scale.sh [--sizes S,L,XL] [--samples 100] [--seconds 8] [--out DIR]
#
# Sizes: XS (1k services, a quick check), S (10k services + 10k pods),
# L (10k services × 2 ports + 150k pods + 1k headless × 20 endpoints),
# XL (50k services + 150k pods). L and XL take several minutes each.
set -euo pipefail
cd "$(dirname "$0")/../.."
sizes=S,L,XL samples=100 seconds=8 out=target/bench
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) sizes=$2; shift 2 ;;
    --samples) samples=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scale.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
for s in ${sizes//,/ }; do
  case "$s" in XS|S|L|XL) ;; *) echo "scale.sh: --sizes: unknown size $s (XS, S, L, XL)" >&2; exit 2 ;; esac
done

need=()
command -v dnsperf >/dev/null || need+=(dnsperf)
[ -x /usr/sbin/knotd ] || need+=(knot)
/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || need+=(python3-matplotlib)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
fi
scripts/install-deps.sh
cargo build --release --locked -p skydns -p kube2sky -p kube-api-test-server --bins
python3 integration-tests/bench/scale.py "$(pwd)/target/release" "$sizes" "$samples" "$seconds" "$out"
/usr/bin/python3 integration-tests/bench/scale_chart.py "$out/scale.json" "$out/scale.png"
echo "chart: $out/scale.png"
