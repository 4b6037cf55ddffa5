#!/usr/bin/env bash
# Load test of gpuscale-adapter's request path: HTTPS keep-alive connections
# asking for many distinct (namespace, selector) keys that the poll cache
# answers from memory. Prints wrk's latency distribution and the adapter's
# resident memory. Needs: prometheus (Debian package), wrk, curl.
#
#   bench/adapter-load.sh                 # 1000 keys, 8 connections, 30 s
#   KEYS=5000 CONNS=16 DURATION=60s bench/adapter-load.sh
#   POLL=30s bench/adapter-load.sh        # background re-reads every 30 s
#   DELAY_MS=1 bench/adapter-load.sh      # paced: each connection waits 1 ms
#                                         # between requests (no saturation)
#
# The adapter runs with --dev (self-signed TLS, no authentication: wrk cannot
# present client certificates); see docs/performance.md for what that leaves out.
# BUILD=0 uses the binaries already built instead of running cargo first.
set -euo pipefail

KEYS=${KEYS:-1000}
CONNS=${CONNS:-8}
THREADS=${THREADS:-2}
DURATION=${DURATION:-30s}
PROFILE=${PROFILE:-release}
DELAY_MS=${DELAY_MS:-0}
POLL=${POLL:-5s}

source "$(dirname "$0")/lib.sh"

build -p gpuscale-adapter --bin gpuscale-adapter
bin="$out/gpuscale-adapter"

adapter_ports
start_prometheus "$prom_port"
bench_config

"$bin" --dev --listen "127.0.0.1:$api_port" --metrics-listen "127.0.0.1:$metrics_port" \
  --config "$work/bench.yaml" --prometheus-url "http://127.0.0.1:$prom_port" \
  --poll-interval "$POLL" --log-format json >"$work/adapter.log" 2>&1 &
adapter=$!
pids+=($adapter)

wait_ready "$prom_port" "$metrics_port"

# KEYS distinct (namespace, selector) pairs: 10 namespaces × KEYS/10 workloads.
cat >"$work/keys.lua" <<LUA
local keys = $KEYS
local i = 0
init = function(args)
  i = math.random(0, keys - 1)
end
request = function()
  i = (i + 1) % keys
  local path = string.format(
    "/apis/external.metrics.k8s.io/v1beta1/namespaces/ns-%d/bench_queue_depth?labelSelector=workload%%3Dw%d",
    i % 10, i)
  return wrk.format("GET", path)
end
if $DELAY_MS > 0 then
  delay = function() return $DELAY_MS end
end
LUA

url="https://127.0.0.1:$api_port"
echo "== warm-up: every key once through a miss (single-flight), then from memory"
wrk -t1 -c"$CONNS" -d5s -s "$work/keys.lua" "$url" >/dev/null
cached=$(curl -fsS "http://127.0.0.1:$metrics_port/metrics" |
  awk '/^gpuscale_adapter_prometheus_queries_total/ {s+=$2} END {print s+0}')
echo "prometheus queries so far: $cached"

echo "== measured: $KEYS keys, $CONNS keep-alive TLS connections, $THREADS threads, $DURATION, ${DELAY_MS} ms between requests, poll every $POLL"
uptime
wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -s "$work/keys.lua" "$url"

echo "== adapter memory"
grep -E '^(VmRSS|VmHWM)' "/proc/$adapter/status"
echo "== adapter self-metrics (request latency histogram, code 200)"
curl -fsS "http://127.0.0.1:$metrics_port/metrics" |
  grep -E '^gpuscale_adapter_request_duration_seconds_(bucket|count).*code="200"' | head -20
