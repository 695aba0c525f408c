#!/usr/bin/env bash
# Benchmark: the whole pipeline (API test server -> kube2sky -> etcd -> skydns)
# on the etcd v2 keys API against the same pipeline on the v3 API, in one run
# on one machine, reported as v2/v3 ratios.
#
# For each API: the API test server is seeded with SERVICES services (default
# 2000, one named port each); sync = kube2sky start -> `dig` answers the last
# service; propagation = POST of a new Service -> `dig` answers it, SAMPLES
# times (default 20), p50 and p90. Last, the floor of any v2 writer: etcd
# alone taking the record keys' PUTs from curl, 64 in flight, against the
# v3 sync.
#
# KUBE2SKY_ARGS: extra kube2sky flags, e.g. --full-sync-chunk=10000.
#
#   integration-tests/bench/pipeline.sh               # debug binaries (cargo build)
#   PROFILE=release integration-tests/bench/pipeline.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
SERVICES=${SERVICES:-2000}
SAMPLES=${SAMPLES:-20}
PROFILE=${PROFILE:-debug}

scripts/install-deps.sh
if [ "$PROFILE" = release ]; then
  cargo build --release --bins -p skydns -p kube2sky -p kube-api-test-server
else
  cargo build --bins -p skydns -p kube2sky -p kube-api-test-server
fi
bin="$root/target/$PROFILE"

work=$(mktemp -d)
pids=()
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }
trap 'stop_all; rm -rf "$work"' EXIT INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
service_json() { # name ip
  printf '{"apiVersion":"v1","kind":"Service","metadata":{"name":"%s","namespace":"default"},"spec":{"clusterIP":"%s","ports":[{"name":"http","protocol":"TCP","port":80}]}}' "$1" "$2"
}

seed="$work/seed.yaml"
{
  printf 'apiVersion: v1\nkind: Namespace\nmetadata: {name: default}\n'
  printf -- '---\n%s\n' "$(service_json kubernetes 10.0.0.1)"
  for ((i = 0; i < SERVICES; i++)); do
    printf -- '---\n%s\n' "$(service_json "s$i" "10.1.$((i / 250)).$((i % 250 + 1))")"
  done
} >"$seed"

wait_dig() { # port name [timeout_s]: waits until dig answers name
  local deadline=$(( $(date +%s) + ${3:-300} ))
  until [ -n "$(dig @127.0.0.1 -p "$1" +short +time=1 +tries=1 "$2" 2>/dev/null)" ]; do
    [ "$(date +%s)" -lt "$deadline" ] || { echo "timed out waiting for $2" >&2; tail -5 "$work"/*.log >&2; exit 1; }
    sleep 0.005
  done
}

start_etcd() { # sets etcd_url: a fresh etcd (v2 and v3 APIs) on free ports
  local client_port peer_port
  client_port=$(free_port); peer_port=$(free_port)
  etcd_url="http://127.0.0.1:${client_port}"
  rm -rf "$work/etcd"
  # Go's GC settings and transaction size as the pod's etcd (deploy/kubernetes).
  GOGC=200 GOMEMLIMIT=400MiB ETCD_UNSUPPORTED_ARCH=$(uname -m) etcd --name bench --data-dir "$work/etcd" --enable-v2=true \
    --max-txn-ops=1024 --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
    --listen-peer-urls "http://127.0.0.1:${peer_port}" --initial-advertise-peer-urls "http://127.0.0.1:${peer_port}" \
    --initial-cluster "bench=http://127.0.0.1:${peer_port}" >"$work/etcd.log" 2>&1 &
  pids+=($!)
  until curl -sf "$etcd_url/version" >/dev/null; do sleep 0.05; done
}

run() { # api
  local api=$1 api_port dns_port k2s_port etcd_url
  api_port=$(free_port); dns_port=$(free_port); k2s_port=$(free_port)
  local api_url="http://127.0.0.1:${api_port}"
  start_etcd
  "$bin/kube-api-test-server" --listen "127.0.0.1:${api_port}" --seed "$seed" \
    --service-cidr 10.0.0.0/12 >"$work/api.log" 2>&1 &
  pids+=($!)
  until curl -sf "$api_url/version" >/dev/null; do sleep 0.05; done
  local sky_api=() ; [ "$api" = v3 ] && sky_api=(-etcd3)
  RUST_LOG=warn "$bin/skydns" -machines="$etcd_url" "${sky_api[@]}" -addr="127.0.0.1:${dns_port}" \
    -domain=cluster.local. -no-rec >"$work/skydns.log" 2>&1 &
  pids+=($!)

  local start; start=$(now_ms)
  RUST_LOG=warn "$bin/kube2sky" --etcd-server="$etcd_url" --etcd-api="$api" \
    --kube-master-url="$api_url" --healthz-port="$k2s_port" --etcd-max-txn-ops=1024 ${KUBE2SKY_ARGS:-} >"$work/kube2sky.log" 2>&1 &
  pids+=($!)
  wait_dig "$dns_port" "s$((SERVICES - 1)).default.svc.cluster.local"
  local sync_ms=$(( $(now_ms) - start ))

  local samples=()
  for ((k = 0; k < SAMPLES; k++)); do
    start=$(now_ms)
    curl -sf -X POST -H 'Content-Type: application/json' "$api_url/api/v1/namespaces/default/services" \
      -d "$(service_json "p$k" "10.2.0.$((k + 1))")" >/dev/null
    wait_dig "$dns_port" "p$k.default.svc.cluster.local" 30
    samples+=($(( $(now_ms) - start )))
  done
  stop_all
  local sorted; sorted=$(printf '%s\n' "${samples[@]}" | sort -n)
  local p50 p90
  p50=$(echo "$sorted" | sed -n "$(( (SAMPLES + 1) / 2 ))p")
  p90=$(echo "$sorted" | sed -n "$(( (SAMPLES * 9 + 9) / 10 ))p")
  echo "$api $sync_ms $p50 $p90"
}

floor() { # the time etcd alone takes for the v2 PUTs of the record keys
  local keys=$((SERVICES * 3)) etcd_url # A, SRV and PTR per service
  start_etcd
  for ((i = 0; i < keys; i++)); do echo "url = \"$etcd_url/v2/keys/floor/s$i/c88f1059\""; done >"$work/urls"
  local start; start=$(now_ms)
  curl -sf --no-progress-meter -Z --parallel-max 64 -X PUT -K "$work/urls" \
    -d 'value={"host":"10.1.2.3","priority":10,"weight":10,"ttl":30,"targetstrip":0}' >/dev/null
  echo $(( $(now_ms) - start ))
  stop_all
}

v2=$(run v2)
v3=$(run v3)
f2=$(floor)
read -r _ s2 p2 q2 <<<"$v2"
read -r _ s3 p3 q3 <<<"$v3"
ratio() { python3 -c "print(f'{$1 / max($2, 1):.2f}')"; }
echo
echo "pipeline, $SERVICES services, $SAMPLES propagation samples, $PROFILE build, $(date -u +%Y-%m-%d)"
echo "| etcd API | initial sync | propagation p50 | propagation p90 |"
echo "|---|---|---|---|"
echo "| v2 | ${s2} ms | ${p2} ms | ${q2} ms |"
echo "| v3 | ${s3} ms | ${p3} ms | ${q3} ms |"
echo "| v2/v3 | $(ratio "$s2" "$s3") | $(ratio "$p2" "$p3") | $(ratio "$q2" "$q3") |"
echo
echo "etcd alone, $((SERVICES * 3)) v2 PUTs (the A, SRV and PTR keys), 64 in flight (curl): ${f2} ms = $(ratio "$f2" "$s3") x the v3 sync"
echo "v2 sync / that floor: $(ratio "$s2" "$f2") (goal <= 1.5)"
