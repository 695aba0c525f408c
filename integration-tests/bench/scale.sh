#!/usr/bin/env bash
# The scale benchmark: the whole pipeline (release build) at cluster sizes,
# beside Knot DNS on the same names; prints a markdown table, writes
# OUT/scale.json and the charts OUT/scale.png and OUT/scale-propagation.png
# (where propagation time goes, step by step). See scale.py for what each
# figure measures and scale_cluster.py for the sizes.
#
#   integration-tests/bench/scale.sh [--sizes S,L,XL] [--samples 100] [--seconds 8] [--out DIR]
#                                    [--api test|real]
#
# --api real: kube2sky reads a real kube-apiserver 1.36 (scripts/kube-tools.sh
# builds it once) whose etcd is seeded with the cluster, instead of the API
# test server; it adds kube-apiserver's CPU over the sync and its peak RSS,
# and CoreDNS 1.15 (kubeadm's Corefile, same API server) beside skydns: its
# start, propagation, QPS, RSS, and the API server's cost of 3 and 10
# replicas (coredns_peer.py).
#
# Sizes: XS (1k services, a quick check), S (10k services + 10k pods),
# L (10k services × 2 ports + 150k pods + 1k headless × 20 endpoints),
# XL (50k services + 150k pods). L and XL take several minutes each.
set -euo pipefail
cd "$(dirname "$0")/../.."
sizes=S,L,XL samples=100 seconds=8 out=target/bench api=test
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) sizes=$2; shift 2 ;;
    --samples) samples=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --api) api=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
case "$api" in test|real) ;; *) echo "scale.sh: --api must be test or real, not $api" >&2; exit 2 ;; esac
scripts/install-deps.sh
packages=(-p skydns -p kube2sky -p kube-api-test-server)
if [ "$api" = real ]; then
  KUBE_TOOLS_DIR=$(scripts/kube-tools.sh)
  export KUBE_TOOLS_DIR
  packages+=(-p test-support)
fi
cargo build --release --locked "${packages[@]}" --bins
API=$api python3 integration-tests/bench/scale.py "$(pwd)/target/release" "$sizes" "$samples" "$seconds" "$out"
if [ -n "${SYNC_ONLY:-}" ]; then
  echo "SYNC_ONLY: no table, no charts; the figures are in $out/scale.json"
  exit 0
fi
/usr/bin/python3 integration-tests/bench/scale_chart.py "$out/scale.json" "$out/scale.png"
echo "charts: $out/scale.png $out/scale-propagation.png"
