#!/usr/bin/env bash
# What a GPU fleet costs Prometheus, and the adapter's cost against it.
#
# Method: one exporter on the built-in simulated node (8 H100s, MIG, pods)
# scraped as TARGETS targets, each with its own `sim` target label, so every
# target's series are distinct as many nodes' would be (the exporter answers
# each scrape from its encoded snapshot, so one process serves them all).
# Run for dcgm-exporter's default counters (etc/default-counters.csv: 20
# gauges, 5 counters per GPU, with its label names, written once per GPU and
# served as a file) and each profile (full, fleet), each against a fresh
# Prometheus scraping every INTERVAL seconds, read after SCRAPES scrapes:
# head series, series per GPU (every series of the node over its GPUs),
# Prometheus RSS (median of READINGS readings 1 s apart) and Go heap in use
# (the lowest of them: what a collection leaves) above an idle Prometheus
# read the same way, per GPU and
# extrapolated linearly to 1,000 and 10,000 GPUs; ROUNDS rounds of the three
# in turn, then their medians.
# Before that, one scrape of each exposition: its series by class (per GPU,
# per MIG instance, per pod, per node, Prometheus's own per target) and its
# size plain and gzipped (bench/fleet-cost-series.py).
# With VARIANTS=1 also the fleet profile with `honor_timestamps: false`, and
# its exposition served as a file as it is and with a 100-byte label more on
# every series (label length): head memory of each. Prometheus 2.42 always
# asks for gzip (no `enable_compression` before 2.49): the body sizes plain
# and gzipped are in the series table.
# Then the adapter with KEYS distinct keys (external metric, namespace,
# selector) reading the fleet-profile Prometheus: latency of the keys' first
# reads (p50, p99), its RSS, and the queries per second it sends while only
# polling them.
# Needs prometheus (Debian package), curl (7.66 or later), python3.
#
#   bench/fleet-cost.sh                                 # 125 targets = 1,000 GPUs, 10,000 keys
#   ROUNDS=5 bench/fleet-cost.sh                        # the docs/performance.md run (VARIANTS=1: the variants)
#   TARGETS=25 KEYS=1000 PROFILE=debug bench/fleet-cost.sh   # smoke run
set -euo pipefail

TARGETS=${TARGETS:-125}
SCRAPES=${SCRAPES:-12}
INTERVAL=${INTERVAL:-5}
KEYS=${KEYS:-10000}
CONNS=${CONNS:-8}
POLL=${POLL:-15s}
STEADY=${STEADY:-30}
PROFILE=${PROFILE:-release}
ROUNDS=${ROUNDS:-1}
VARIANTS=${VARIANTS:-0}
READINGS=${READINGS:-10}

source "$(dirname "$0")/lib.sh"

build -p gpuscale-exporter -p gpuscale-nvml-sim -p gpuscale-adapter --bins --lib
gpus=$((TARGETS * 8))

self() { curl -fsS "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m {print $2}'; }
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

# dcgm-exporter's default counters for the 8 GPUs of the built-in node.
python3 - "$work/dcgm" <<'PY'
import os, sys
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
gauges = ["SM_CLOCK", "MEM_CLOCK", "MEMORY_TEMP", "GPU_TEMP", "POWER_USAGE", "GPU_UTIL",
          "MEM_COPY_UTIL", "ENC_UTIL", "DEC_UTIL", "XID_ERRORS", "FB_FREE", "FB_USED",
          "FB_RESERVED", "VGPU_LICENSE_STATUS", "ROW_REMAP_FAILURE"]
prof = ["GR_ENGINE_ACTIVE", "PIPE_TENSOR_ACTIVE", "DRAM_ACTIVE", "PCIE_TX_BYTES", "PCIE_RX_BYTES"]
counters = ["TOTAL_ENERGY_CONSUMPTION", "PCIE_REPLAY_COUNTER", "NVLINK_BANDWIDTH_TOTAL",
            "UNCORRECTABLE_REMAPPED_ROWS", "CORRECTABLE_REMAPPED_ROWS"]
out = []
names = [("DCGM_FI_DEV_" + g, "gauge") for g in gauges] + [("DCGM_FI_PROF_" + p, "gauge") for p in prof] \
    + [("DCGM_FI_DEV_" + c, "counter") for c in counters]
for name, kind in names:
    out.append(f"# HELP {name} {name}.\n# TYPE {name} {kind}\n")
    for g in range(8):
        labels = (f'gpu="{g}",UUID="GPU-{g:08x}-0000-4000-8000-000000000000",pci_bus_id="00000000:{0x18 + g:02X}:00.0",'
                  f'device="nvidia{g}",modelName="NVIDIA H100 80GB HBM3",Hostname="node-0",'
                  f'DCGM_FI_DRIVER_VERSION="570.172.08",namespace="ml-train",pod="llama-train-0",container="trainer"')
        out.append(f"{name}{{{labels}}} {g + 1}\n")
open(os.path.join(d, "metrics"), "w").write("".join(out))
PY

# targets JOB ADDR [KEY]: prometheus.yml scraping ADDR as TARGETS targets,
# KEY a further line of the scrape config (`honor_timestamps: false`).
targets() {
  {
    printf 'global:\n  scrape_interval: %ss\n  scrape_timeout: %ss\nscrape_configs:\n  - job_name: %s\n' \
      "$INTERVAL" "$INTERVAL" "$1"
    if [ -n "${3:-}" ]; then printf '    %s\n' "$3"; fi
    printf '    static_configs:\n'
    for i in $(seq 0 $((TARGETS - 1))); do
      printf "      - targets: ['%s']\n        labels: {sim: '%d'}\n" "$2" "$i"
    done
  } >"$work/prometheus.yml"
}

HEADER="| exposition | head series | series per GPU | Prometheus RSS above idle | Go heap in use above idle | RSS per GPU | heap per GPU | RSS per series | 1,000 GPUs: series / RSS | 10,000 GPUs: series / RSS |
|---|---|---|---|---|---|---|---|---|---|"

# row NAME SERIES RSS HEAP: one table row, memory above the idle Prometheus.
row() {
  python3 - "$@" "$base_rss" "$base_heap" "$gpus" <<'PY'
import sys
name, series, rss, heap, base_rss, base_heap, gpus = sys.argv[1], *map(float, sys.argv[2:])
per_gpu = series / gpus
rss, heap = rss - base_rss, heap - base_heap
mib = lambda b: b / 2**20
b_rss = rss / series
print(f"| {name} | {series:,.0f} | {per_gpu:.1f} | {mib(rss):.0f} MiB | {mib(heap):.0f} MiB | {rss / gpus / 1024:.0f} KiB | "
      f"{heap / gpus / 1024:.0f} KiB | {b_rss:,.0f} B | {per_gpu * 1000:,.0f} / {mib(per_gpu * 1000 * b_rss):,.0f} MiB | "
      f"{per_gpu * 10000:,.0f} / {mib(per_gpu * 10000 * b_rss) / 1024:,.1f} GiB |")
PY
}

# measure NAME JOB ADDR [KEY]: a fresh Prometheus scraping ADDR; prints its
# figures, adds them to $work/rows and leaves it running (prom_pid, prom_port).
measure() {
  local name=$1 dir="$work/$2-$RANDOM"
  mkdir -p "$dir"
  targets "$2" "$3" "${4:-}"
  prom_port=$(free_port)
  start_prometheus "$prom_port" "$dir"
  wait_for "http://127.0.0.1:$prom_port/-/ready"
  sleep $((SCRAPES * INTERVAL + 2))
  local series rss heap
  series=$(self "$prom_port" prometheus_tsdb_head_series)
  # READINGS readings 1 s apart: RSS their median, the heap its lowest
  # (what is left after a collection; one reading swings with GC timing).
  read -r rss heap < <(for _ in $(seq 1 "$READINGS"); do
    echo "$(self "$prom_port" process_resident_memory_bytes) $(self "$prom_port" go_memstats_heap_inuse_bytes)"
    sleep 1
  done | sort -n | awk '{r[NR]=$1; if (NR == 1 || $2 < h) h=$2} END {print r[int((NR+1)/2)], h}')
  printf '%s\t%s\t%s\t%s\n' "$name" "$series" "$rss" "$heap" >>"$work/rows"
  row "$name" "$series" "$rss" "$heap" | tee -a "$work/results"
}

stop_prometheus() { kill "$prom_pid"; wait "$prom_pid" 2>/dev/null || true; }

# start_exporter PROFILE: the exporter on the built-in node (exp_port,
# exp_pid), once its pods are mapped and its GPM ratios sampled.
start_exporter() {
  exp_port=$(free_port)
  "$out/gpuscale-exporter" --simulate --simulator-lib "$out/libgpuscale_nvml_sim.so" \
    --listen "127.0.0.1:$exp_port" --profile "$1" >"$work/exporter-$1.log" 2>&1 &
  exp_pid=$!
  pids+=("$exp_pid")
  for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$exp_port/metrics" 2>/dev/null | grep -q '^gpuscale_exporter_pods [1-9]' && break
    sleep 0.2
  done
  sleep 2
}

# breakdown NAME URL: one scrape of URL, its series by class.
breakdown() {
  curl -fsS "$2" -o "$work/body"
  python3 "$root/bench/fleet-cost-series.py" "$1" "$work/body" "$(wc -c <"$work/body")" \
    "$(gzip -6 -c "$work/body" | wc -c)" | tee -a "$work/results"
}

# serve_file DIR: DIR/metrics over HTTP; its address in file_addr.
serve_file() {
  local port
  port=$(free_port)
  (cd "$1" && exec python3 -m http.server "$port" --bind 127.0.0.1) >/dev/null 2>&1 &
  pids+=("$!")
  wait_for "http://127.0.0.1:$port/metrics"
  file_addr="127.0.0.1:$port"
}

# An idle Prometheus (no targets) as the baseline memory.
printf 'global:\n  scrape_interval: 15s\nscrape_configs: []\n' >"$work/prometheus.yml"
base_port=$(free_port)
start_prometheus "$base_port" "$work"
wait_for "http://127.0.0.1:$base_port/-/ready"
sleep 5
read -r base_rss base_heap < <(for _ in $(seq 1 "$READINGS"); do
  echo "$(self "$base_port" process_resident_memory_bytes) $(self "$base_port" go_memstats_heap_inuse_bytes)"
  sleep 1
done | sort -n | awk '{r[NR]=$1; if (NR == 1 || $2 < h) h=$2} END {print r[int((NR+1)/2)], h}')
stop_prometheus

serve_file "$work/dcgm"
dcgm_addr=$file_addr
start_exporter full
full_addr="127.0.0.1:$exp_port"
start_exporter fleet
fleet_addr="127.0.0.1:$exp_port"

echo "== one node's series by class (the built-in node: 8 GPUs, one in MIG mode with 3 instances, 10 pods)"
echo "| exposition | GPUs | per GPU (series) | per MIG instance | per pod | per node | Prometheus's own, per target | all | **all, per GPU** | body plain / gzip -6 |"
echo "|---|---|---|---|---|---|---|---|---|---|"
breakdown "dcgm-exporter, default counters" "http://$dcgm_addr/metrics"
breakdown "gpuscale \`--profile full\`" "http://$full_addr/metrics"
breakdown "gpuscale \`--profile fleet\`" "http://$fleet_addr/metrics"

echo "== $TARGETS targets x 8 GPUs = $gpus GPUs, scrape every ${INTERVAL}s, read after $SCRAPES scrapes; Prometheus $(prometheus --version 2>&1 | head -1 | awk '{print $3}')"
if [ "$VARIANTS" = 1 ]; then
  # The fleet exposition as a file: as served, and with a 100-byte label
  # more on every series (label length).
  mkdir -p "$work/fleet-file" "$work/fleet-long"
  curl -fsS "http://$fleet_addr/metrics" -o "$work/fleet-file/metrics"
  pad=$(printf 'x%.0s' $(seq 1 100))
  sed -E "/^[^#]/ s/\{/{pad=\"$pad\",/" "$work/fleet-file/metrics" >"$work/fleet-long/metrics"
  serve_file "$work/fleet-file"
  fleet_file_addr=$file_addr
  serve_file "$work/fleet-long"
  fleet_long_addr=$file_addr
  echo "$HEADER"
  measure "fleet, honor_timestamps: true (the default)" fleet "$fleet_addr"; stop_prometheus
  measure "fleet, honor_timestamps: false" fleet "$fleet_addr" 'honor_timestamps: false'; stop_prometheus
  measure "fleet exposition served as a file" fleet "$fleet_file_addr"; stop_prometheus
  measure "the same file, a 100-byte label more on every series" fleet "$fleet_long_addr"; stop_prometheus
fi

echo "$HEADER"
for round in $(seq 1 "$ROUNDS"); do
  measure "dcgm-exporter, default counters" dcgm "$dcgm_addr"; stop_prometheus
  measure "gpuscale \`--profile full\`" full "$full_addr"; stop_prometheus
  # The last fleet Prometheus keeps scraping for the adapter below.
  measure "gpuscale \`--profile fleet\`" fleet "$fleet_addr"
  [ "$round" = "$ROUNDS" ] || stop_prometheus
done
if [ "$ROUNDS" -gt 1 ]; then
  echo "== medians of $ROUNDS rounds"
  echo "$HEADER"
  python3 - "$work/rows" <<'PY' >"$work/medians"
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, *v = line.rstrip("\n").split("\t")
    rows.setdefault(name, []).append([float(x) for x in v])
for name in ["dcgm-exporter, default counters", "gpuscale `--profile full`", "gpuscale `--profile fleet`"]:
    print(name, *(statistics.median(r[i] for r in rows[name]) for i in range(3)), sep="\t")
PY
  while IFS=$'\t' read -r name series rss heap; do
    row "$name, median" "$series" "$rss" "$heap" | tee -a "$work/results"
  done <"$work/medians"
fi

# The adapter against the fleet-profile Prometheus (still scraping): KEYS
# distinct selectors on the training pod's GPUs of every target, each with
# a data-bearing answer.
cat >"$work/adapter.yaml" <<'YAML'
metrics:
  - name: fleet_gpu_utilization
    query: avg(gpu_utilization_ratio{${matchers}})
YAML
api_port=$(free_port)
metrics_port=$(free_port)
"$out/gpuscale-adapter" --dev --listen "127.0.0.1:$api_port" --metrics-listen "127.0.0.1:$metrics_port" \
  --config "$work/adapter.yaml" --prometheus-url "http://127.0.0.1:$prom_port" \
  --poll-interval "$POLL" --max-cached-queries $((KEYS * 2)) --log-format json >"$work/adapter.log" 2>&1 &
adapter=$!
pids+=("$adapter")
wait_ready "$prom_port" "$metrics_port"
for i in $(seq 0 $((KEYS - 1))); do
  printf 'url = "https://127.0.0.1:%s/apis/external.metrics.k8s.io/v1beta1/namespaces/ml-train/fleet_gpu_utilization?labelSelector=workload%%3Dllama-train%%2Csim%%3D%d%%2Cgpu!%%3Dk%d"\noutput = "/dev/null"\n' \
    "$api_port" $((i % TARGETS)) $((i / TARGETS))
done >"$work/keys.cfg"
prom_queries() {
  curl -fsS "http://127.0.0.1:$prom_port/metrics" |
    awk '/^prometheus_http_requests_total\{.*handler="\/api\/v1\/query"/ {s+=$2} END {print s+0}'
}
t0=$(date +%s.%N)
curl -sk --no-progress-meter --parallel --parallel-max "$CONNS" -K "$work/keys.cfg" \
  -w '%{http_code} %{time_total}\n' >"$work/reads" || true
t1=$(date +%s.%N)
sleep 5
q0=$(prom_queries); s0=$(date +%s.%N)
sleep "$STEADY"
q1=$(prom_queries); s1=$(date +%s.%N)
rss=$(rss_kib "$adapter")
keys=$(self "$metrics_port" gpuscale_adapter_cached_queries)
python3 - "$work/reads" "$t0" "$t1" "$q0" "$q1" "$s0" "$s1" "$rss" "$keys" "$POLL" <<'PY' | tee -a "$work/results"
import sys, collections
reads = [l.split() for l in open(sys.argv[1]) if l.strip()]
t0, t1, q0, q1, s0, s1 = map(float, sys.argv[2:8])
rss, keys, poll = int(sys.argv[8]), sys.argv[9], sys.argv[10]
codes = collections.Counter(c for c, _ in reads)
lat = sorted(float(t) for _, t in reads)
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000
print(f"adapter: {len(reads)} first reads of distinct keys in {t1 - t0:.1f}s (codes {dict(codes)}), "
      f"p50 {q(0.5):.1f} ms, p99 {q(0.99):.1f} ms; {keys} cached keys; RSS {rss / 1024:.0f} MiB; "
      f"polling them every {poll}: {(q1 - q0) / (s1 - s0):.0f} queries/s to Prometheus")
PY
