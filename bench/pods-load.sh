#!/usr/bin/env bash
# Pod mapping under load: the exporter on a simulated node with 110 pods (the
# kubelet's default maximum) time-slicing 8 GPUs, one GPU process per pod,
# the pods of odd-numbered GPUs holding them through DRA claims (half the
# pods; CLAIMS=0 puts every pod on the device plugin),
# served through the simulated kubelet socket, API server and /proc tree. The
# pod servers run in a second exporter process (the "node"), so the measured
# exporter holds only what it holds in production: the mapper.
# Prints the mapping cost (kubelet refresh, per-collection join), the
# exporter's resident memory, and wrk's scrape latency/throughput at 8 and 64
# connections, with pod mapping on and off (--no-pods) for comparison.
# Needs: wrk, curl.
#
#   bench/pods-load.sh                       # 110 pods, 8 GPUs, 15 s per wrk run
#   PODS=220 DURATION=30s bench/pods-load.sh
#   CLAIMS=0 bench/pods-load.sh              # device plugin only
# BUILD=0 uses the binaries already built instead of running cargo first.
set -euo pipefail

GPUS=${GPUS:-8}
PODS=${PODS:-110}
CLAIMS=${CLAIMS:-1}
DURATION=${DURATION:-15s}
THREADS=${THREADS:-2}
WORKERS=${WORKERS:-1}
INTERVAL=${INTERVAL:-1s}
PROFILE=${PROFILE:-release}

source "$(dirname "$0")/lib.sh"

build -p gpuscale-exporter -p gpuscale-nvml-sim --bins --lib
bin="$out/gpuscale-exporter"
sim="$out/libgpuscale_nvml_sim.so"

scenario="$work/busy.yaml"
GPUS=$GPUS PODS=$PODS CLAIMS=$CLAIMS "$root/bench/busy-scenario.sh" > "$scenario"

metric() { curl -s "http://$addr/metrics" | awk -v n="$1" '$1 == n || index($1, n "{") == 1 { print $2; exit }'; }
rss_kib() { awk '/^VmRSS/ { print $2 }' "/proc/$pid/status"; }
hwm_kib() { awk '/^VmHWM/ { print $2 }' "/proc/$pid/status"; }

# The node: an exporter whose simulated pod servers the measured one reads.
"$bin" --simulate "$scenario" --simulator-lib "$sim" --listen "127.0.0.1:$(free_port)" \
  --collect-interval 1h --log-format json > "$work/node.log" 2>&1 &
node_pid=$!
pids+=("$node_pid")
for _ in $(seq 1 100); do grep -qs '"socket"' "$work/node.log" && break; sleep 0.1; done
field() { grep '"socket"' "$work/node.log" | head -1 | sed -E "s/.*\"$1\":\"([^\"]*)\".*/\1/"; }
node_flags=(--pod-resources-socket "$(field socket)" --kube-api-url "$(field api)" --proc-root "$(field proc_root)")

run() {
  local label=$1; shift
  addr="127.0.0.1:$(free_port)"
  "$bin" --simulate "$scenario" --simulator-lib "$sim" --listen "$addr" \
    --collect-interval "$INTERVAL" --pod-label team --log-level warn --worker-threads "$WORKERS" "$@" > "$work/$label.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_for "http://$addr/readyz"
  if [ "$label" = pods ]; then
    for _ in $(seq 1 100); do
      [ "$(metric gpuscale_exporter_pods)" = "$PODS" ] && break
      sleep 0.1
    done
  fi
  sleep 3 # a few collections with the full map
  echo "== $label: $PODS pods on $GPUS GPUs =="
  echo "series: $(curl -s "http://$addr/metrics" | grep -vc '^#')  bytes: $(curl -s "http://$addr/metrics" | wc -c)"
  if [ "$label" = pods ]; then
    echo "pods mapped: $(metric gpuscale_exporter_pods)  allocations: $(curl -s "http://$addr/metrics" | grep -c '^gpu_pod_allocation{')  through claims: $(curl -s "http://$addr/metrics" | grep -c '^gpu_pod_allocation{.*allocation="dra"')"
    echo "kubelet refresh (List): $(metric gpuscale_exporter_pod_refresh_duration_seconds) s"
    echo "pod join per collection: $(metric gpuscale_exporter_pod_join_duration_seconds) s"
  fi
  echo "collection (collectors only): $(metric gpuscale_exporter_collection_duration_seconds) s"
  echo "RSS before load: $(rss_kib) KiB"
  for enc in identity gzip; do
    # Latency at 8 connections with one wrk thread and with THREADS; throughput at 64 with THREADS.
    for run in "8 1" "8 $THREADS" "64 $THREADS"; do
      read -r c t <<<"$run"
      echo "-- wrk -t$t, $c connections, Accept-Encoding: $enc"
      wrk -t"$t" -c"$c" -d"$DURATION" --latency -H "Accept-Encoding: $enc" "http://$addr/metrics" |
        grep -E '^ +(50|99)%|Requests/sec' | tr -s ' ' | paste -sd' '
    done
  done
  echo "RSS after load: $(rss_kib) KiB  peak (VmHWM): $(hwm_kib) KiB"
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
}

run pods "${node_flags[@]}"
run no-pods --no-pods
