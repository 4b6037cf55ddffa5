#!/usr/bin/env bash
# Load test of gpuscale-adapter's KEDA external scaler: GetMetrics/IsActive
# latency from the poll cache with CLIENTS gRPC connections over KEYS
# distinct (namespace, selector) keys, then the adapter's resident memory
# with STREAMS StreamIsActive streams open. Needs: prometheus (Debian
# package), curl, wrk. The push latency (sample → `true`) is measured by the
# end-to-end test `a_new_series_wakes_the_push_stream_and_a_stopped_prometheus_is_never_idle`.
#
#   bench/keda-load.sh                          # 1000 keys, 8 clients, 20 s, 1000 streams
#   KEYS=5000 CLIENTS=16 DURATION=60 bench/keda-load.sh
#   DELAY_MS=1 bench/keda-load.sh               # paced: each client waits 1 ms
#                                               # after each GetMetrics+IsActive pair
#
# The adapter runs with --dev (plaintext gRPC): TLS costs one handshake per
# connection, and KEDA keeps its connections open.
# BUILD=0 uses the binaries already built instead of running cargo first.
set -euo pipefail

KEYS=${KEYS:-1000}
CLIENTS=${CLIENTS:-8}
# (not SECONDS: bash sets it to the seconds since the shell started)
SECONDS_=${DURATION:-20}
STREAMS=${STREAMS:-1000}
DELAY_MS=${DELAY_MS:-0}
POLL=${POLL:-5s}
PROFILE=${PROFILE:-release}

source "$(dirname "$0")/lib.sh"

build -p gpuscale-adapter --bin gpuscale-adapter --example keda_load
bin="$out/gpuscale-adapter"
load="$out/examples/keda_load"

adapter_ports
keda_port=$(free_port)
start_prometheus "$prom_port"
bench_config

"$bin" --dev --listen "127.0.0.1:$api_port" --metrics-listen "127.0.0.1:$metrics_port" \
  --keda-listen "127.0.0.1:$keda_port" \
  --config "$work/bench.yaml" --prometheus-url "http://127.0.0.1:$prom_port" \
  --poll-interval "$POLL" --log-format json >"$work/adapter.log" 2>&1 &
adapter=$!
pids+=($adapter)

wait_ready "$prom_port" "$metrics_port"

rss() { awk -v k="$1" '$1 == k":" { printf "%.1f MiB", $2 / 1024 }' "/proc/$adapter/status"; }

"$load" latency "127.0.0.1:$keda_port" "$KEYS" "$CLIENTS" "$SECONDS_" "$DELAY_MS"
echo "adapter RSS after the latency run: $(rss VmRSS) (peak $(rss VmHWM))"

# Baseline in the same run: the external metrics API (HTTPS, wrk) over the
# same keys from as many connections, same pause.
cat >"$work/keys.lua" <<LUA
local keys, i = $KEYS, 0
init = function(args) i = math.random(0, keys - 1) end
request = function()
  i = (i + 1) % keys
  return wrk.format("GET", string.format(
    "/apis/external.metrics.k8s.io/v1beta1/namespaces/bench-%d/bench_queue_depth?labelSelector=workload%%3Dw%d",
    i % 10, math.floor(i / 10)))
end
if $DELAY_MS > 0 then
  delay = function() return $DELAY_MS end
end
LUA
echo "baseline: external metrics API over HTTPS, wrk -t1 -c$CLIENTS, ${SECONDS_}s"
wrk -t1 -c"$CLIENTS" -d"${SECONDS_}s" --latency -s "$work/keys.lua" "https://127.0.0.1:$api_port" |
  grep -E "50%|99%|Requests/sec"

"$load" streams "127.0.0.1:$keda_port" "$STREAMS" 15 &
pids+=($!)
for _ in $(seq 1 300); do
  curl -fsS "http://127.0.0.1:$metrics_port/metrics" | grep -q "^gpuscale_adapter_keda_streams $STREAMS\$" && break
  sleep 0.2
done
sleep 6 # a poll round with every stream woken
echo "streams: $(curl -fsS "http://127.0.0.1:$metrics_port/metrics" | grep '^gpuscale_adapter_keda_streams ')"
echo "adapter RSS with $STREAMS streams open: $(rss VmRSS) (peak $(rss VmHWM))"
