#!/usr/bin/env bash
# Load test of gpuscale-exporter's /metrics on the simulated node: latency at
# 8 connections, throughput at 64, resident memory, and the cost of
# collection (CPU while idle at a 1 s interval). Needs wrk (Debian package).
#
#   bench/load.sh                         # built-in 8-GPU scenario
#   SCENARIO=path.yaml DURATION=30s bench/load.sh
#
# The load generator shares the machine with the exporter, as in CI. Latency
# at 8 connections is measured with one wrk thread (the server's worker on
# one core, the load generator on the other), then again with two;
# throughput at 64 connections with two wrk threads, so the generator can
# saturate the server. The exporter and the bare baseline run with the same
# number of worker threads (WORKERS, the exporter's default 1).
# BUILD=0 uses the binaries already built instead of running cargo first.
set -euo pipefail

DURATION=${DURATION:-20s}
IDLE_SECONDS=${IDLE_SECONDS:-30}
SCENARIO=${SCENARIO:-}
PROFILE=${PROFILE:-release}
EXTRA_ARGS=${EXTRA_ARGS:-}
WORKERS=${WORKERS:-1}

source "$(dirname "$0")/lib.sh"

build -q -p gpuscale-exporter -p gpuscale-nvml-sim
port=$(free_port)

# shellcheck disable=SC2086
"$out/gpuscale-exporter" --simulate $SCENARIO --simulator-lib "$out/libgpuscale_nvml_sim.so" \
  --listen "127.0.0.1:$port" --collect-interval 1s --log-level warn --worker-threads "$WORKERS" $EXTRA_ARGS >"$work/exporter.log" 2>&1 &
pid=$!
pids+=("$pid")
wait_for "http://127.0.0.1:$port/readyz"
url="http://127.0.0.1:$port/metrics"
sleep 3 # let the pod mapper's first refresh and watch land before measuring the body
bytes=$(curl -fsS "$url" | wc -c)
series=$(curl -fsS "$url" | grep -vc '^#')
echo "exposition: $bytes bytes, $series series"

ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }

# Collection cost: CPU used while nobody scrapes, at a 1 s interval.
c0=$(cpu); sleep "$IDLE_SECONDS"; c1=$(cpu)
awk -v d="$((c1 - c0))" -v t="$ticks" -v s="$IDLE_SECONDS" \
  'BEGIN { printf "collection cost: %.2f%% of one core (1 s interval, %d s idle)\n", 100 * d / t / s, s }'
echo "rss idle: $(( $(rss_kib) / 1024 )) MiB"

echo "--- 8 connections, wrk -t1, $DURATION"
wrk -t1 -c8 -d"$DURATION" --latency "$url" | tee "$work/wrk8.txt" | grep -E "Latency|50%|90%|99%|Requests/sec"
echo "--- 8 connections, wrk -t2, $DURATION"
wrk -t2 -c8 -d"$DURATION" --latency "$url" | grep -E "50%|99%|Requests/sec"
echo "--- 64 connections, $DURATION"
wrk -t2 -c64 -d"$DURATION" --latency "$url" | tee "$work/wrk64.txt" | grep -E "Latency|50%|99%|Requests/sec"
echo "--- 64 connections, gzip, $DURATION"
wrk -t2 -c64 -d"$DURATION" -H 'Accept-Encoding: gzip' "$url" | grep -E "Requests/sec"
echo "rss after load: $(( $(rss_kib) / 1024 )) MiB (VmHWM $(awk '/^VmHWM/ {print int($2/1024)}' "/proc/$pid/status") MiB)"

# Baseline: a bare hyper server with a fixed body of the same size, same runtime shape.
if [ "${BASELINE:-1}" = 1 ]; then
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  build -q -p gpuscale-exporter --example plain_server
  "$out/examples/plain_server" "127.0.0.1:$port" "$bytes" "$WORKERS" &
  pid=$!
  pids+=("$pid")
  sleep 0.5
  echo "--- baseline: bare hyper server, fixed $bytes-byte body, $WORKERS worker(s), 8 connections, wrk -t1"
  wrk -t1 -c8 -d"$DURATION" --latency "$url" | grep -E "50%|99%|Requests/sec"
  echo "--- baseline: 8 connections, wrk -t2"
  wrk -t2 -c8 -d"$DURATION" --latency "$url" | grep -E "50%|99%|Requests/sec"
  echo "--- baseline: 64 connections"
  wrk -t2 -c64 -d"$DURATION" --latency "$url" | grep -E "50%|99%|Requests/sec"
fi
