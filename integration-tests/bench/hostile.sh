#!/usr/bin/env bash
# Hostile-input benchmark of skydns: floods of hostile or broken clients against
# the release build, on a real etcd (v3), with an upstream that never answers.
# Prints one Markdown row per phase (RSS before/peak/after, peak fds, in-domain
# probes sent/lost, probe p99) and whether the goals are met; see hostile.py.
#
#   integration-tests/bench/hostile.sh          # full run, ~3 minutes
#   integration-tests/bench/hostile.sh --quick  # every phase shortened
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

need=()
command -v dnsperf >/dev/null || need+=(dnsperf)
command -v python3 >/dev/null || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}"
fi
scripts/install-deps.sh
cargo build --release -p skydns

# shellcheck source=integration-tests/bench/lib.sh
source integration-tests/bench/lib.sh
bench_start hostile
sky_port=$(free_port); hole_port=$(free_port)
# 3,500 A records under one name: a ~56 KB TCP answer for the non-reading clients.
python3 - "$etcd_url" <<'PY'
import base64, json, sys, urllib.request
url = sys.argv[1] + "/v3/kv/put"
b64 = lambda s: base64.b64encode(s.encode()).decode()
for i in range(3500):
    key = f"/skydns/local/cluster/svc/default/many/{i}"
    body = json.dumps({"key": b64(key), "value": b64(json.dumps({"host": f"10.2.{i >> 8}.{i & 255}"}))})
    urllib.request.urlopen(urllib.request.Request(url, body.encode(), {"Content-Type": "application/json"})).read()
PY

# The upstream: a UDP socket that never answers.
python3 -c "import socket,time; s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind(('127.0.0.1',$hole_port)); time.sleep(1e6)" &
pids+=($!)

RUST_LOG=warn "$root/target/release/skydns" -machines="$etcd_url" -etcd3 -addr="127.0.0.1:${sky_port}" \
  -domain=cluster.local. -nameservers="127.0.0.1:${hole_port}" >"$work/skydns.log" 2>&1 &
sky_pid=$!
pids+=($sky_pid)
for _ in $(seq 1 100); do
  dig @127.0.0.1 -p "$sky_port" +short +time=1 +tries=1 many.default.svc.cluster.local A | grep -q . && break
  sleep 0.1
done

echo "==> hostile-input phases against skydns (pid $sky_pid), $(date -u +%F)" >&2
status=0
python3 integration-tests/bench/hostile.py --port "$sky_port" --pid "$sky_pid" --work "$work" "$@" || status=$?
echo "skydns log lines: $(wc -l <"$work/skydns.log")" >&2
exit $status
