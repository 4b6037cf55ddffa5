#!/usr/bin/env bash
# The adapter's memory against its poll cache's byte budget: KEYS distinct
# selectors of about SELECTOR_BYTES each (`workload notin (…)`, 100 values,
# the most a set may hold) from one caller, once per budget in BUDGETS,
# against a real Prometheus. For each budget it prints the adapter's RSS
# before, at its peak and 5 s after the flood, the cache's own byte count
# (gpuscale_adapter_cached_bytes), the keys held and the answers' codes.
# Then the request limits: one 60 KB selector and one 10,000-value notin,
# with the RSS around them. Needs: prometheus (Debian package), curl, python3.
#
#   bench/adapter-bytebudget.sh                      # 1000 keys of ~5 KB, budgets 64Mi and 8Mi
#   KEYS=4000 BUDGETS="16Mi" bench/adapter-bytebudget.sh
#   PROFILE=debug KEYS=200 bench/adapter-bytebudget.sh   # smoke run
#
# The adapter runs with --dev (no authentication), which stands for one
# authorized caller. BUILD=0 uses the binary already built.
set -euo pipefail

KEYS=${KEYS:-1000}
SELECTOR_BYTES=${SELECTOR_BYTES:-5000}
BUDGETS=${BUDGETS:-64Mi 8Mi}
CONNS=${CONNS:-8}
PROFILE=${PROFILE:-release}

source "$(dirname "$0")/lib.sh"

build -p gpuscale-adapter --bin gpuscale-adapter
bin="$out/gpuscale-adapter"

bench_config

# KEYS selectors, each a distinct 100-value notin padded to SELECTOR_BYTES.
python3 - "$KEYS" "$SELECTOR_BYTES" >"$work/flood.paths" <<'PY'
import sys, urllib.parse
keys, size = int(sys.argv[1]), int(sys.argv[2])
width = max(8, min(63, size // 100 - 1))
for k in range(keys):
    values = ",".join(f"k{k}v{i}".ljust(width, "x") for i in range(100))
    sel = urllib.parse.quote(f"workload notin ({values})", safe="")
    print(f'url = "/apis/external.metrics.k8s.io/v1beta1/namespaces/team-a/bench_queue_depth?labelSelector={sel}"')
    print('output = "/dev/null"')
PY

rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
self_metric() {
  curl -fsS "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 ~ "^"m"({|$)" {s+=$2} END {print s+0}'
}
# ask API_PORT OUT SELECTOR: over HTTP/1.1 (HTTP/2 refuses headers over
# 16 KiB with 431 before the adapter sees them).
ask() {
  curl --http1.1 -sk -o "$2" -w '%{http_code}' \
    "https://127.0.0.1:$1/apis/external.metrics.k8s.io/v1beta1/namespaces/team-a/bench_queue_depth?labelSelector=$3"
}

# run BUDGET: one flood against a fresh Prometheus and adapter.
run() {
  local budget=$1 prom_port api_port metrics_port dir="$work/$1"
  adapter_ports
  mkdir -p "$dir"
  start_prometheus "$prom_port" "$dir"
  local prom=$prom_pid
  "$bin" --dev --listen "127.0.0.1:$api_port" --metrics-listen "127.0.0.1:$metrics_port" \
    --config "$work/bench.yaml" --prometheus-url "http://127.0.0.1:$prom_port" \
    --max-cached-bytes "$budget" --log-format json >"$dir/adapter.log" 2>&1 &
  local adapter=$!
  pids+=("$adapter")
  wait_ready "$prom_port" "$metrics_port"
  # A first key, so the baseline includes a warm client and cache.
  ask "$api_port" /dev/null 'workload%3Dwarm' >/dev/null
  sleep 1
  local before peak after
  before=$(rss_kib "$adapter")
  echo "$before" >"$dir/peak"
  (while kill -0 "$adapter" 2>/dev/null; do
     r=$(rss_kib "$adapter" 2>/dev/null || echo 0)
     [ "${r:-0}" -gt "$(cat "$dir/peak")" ] && echo "$r" >"$dir/peak"
     sleep 0.2
   done) &
  local sampler=$!
  pids+=("$sampler")
  sed "s|^url = \"|url = \"https://127.0.0.1:$api_port|" "$work/flood.paths" >"$dir/flood.cfg"
  curl -sk --no-progress-meter --parallel --parallel-max "$CONNS" -K "$dir/flood.cfg" -w '%{http_code}\n' >"$dir/codes" || true
  sleep 5
  after=$(rss_kib "$adapter")
  peak=$(cat "$dir/peak")
  local codes bytes keys max
  codes=$(sort "$dir/codes" | uniq -c | awk '{printf "%s%s:%s", sep, $2, $1; sep=","}')
  bytes=$(curl -fsS "http://127.0.0.1:$metrics_port/metrics" | awk '/^gpuscale_adapter_cached_bytes\{pool="poll"\}/ {print $2}')
  keys=$(self_metric "$metrics_port" gpuscale_adapter_cached_queries)
  max=$(self_metric "$metrics_port" gpuscale_adapter_max_cached_bytes)
  printf 'budget=%-5s max_cached_bytes=%.1fMiB cached_bytes=%.1fMiB keys=%s codes=%s rss_before=%.1fMiB rss_peak=%.1fMiB rss_5s_after=%.1fMiB growth_after=%.1fMiB\n' \
    "$budget" "$(echo "$max / 1048576" | bc -l)" "$(echo "${bytes:-0} / 1048576" | bc -l)" "$keys" "$codes" \
    "$(echo "$before / 1024" | bc -l)" "$(echo "$peak / 1024" | bc -l)" "$(echo "$after / 1024" | bc -l)" \
    "$(echo "($after - $before) / 1024" | bc -l)"
  if [ "$budget" = "$(echo "$BUDGETS" | awk '{print $1}')" ]; then limits "$adapter" "$api_port" "$dir"; fi
  kill "$sampler" "$adapter" "$prom" 2>/dev/null || true
  wait "$adapter" "$prom" 2>/dev/null || true
}

# limits PID API_PORT DIR: a 60 KB selector and a 10,000-value notin.
limits() {
  local before code1 code2 after
  before=$(rss_kib "$1")
  code1=$(ask "$2" "$3/long.json" "workload%3D$(head -c 61440 /dev/zero | tr '\0' a)")
  code2=$(ask "$2" "$3/many.json" "workload%20notin%20($(python3 -c 'print(",".join(format(i, "x") for i in range(10000)))'))")
  after=$(rss_kib "$1")
  printf 'limits: 60KB selector -> %s %s\n' "$code1" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("message"))' "$3/long.json" 2>/dev/null || echo "(no Status body)")"
  printf 'limits: 10000-value notin -> %s %s\n' "$code2" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("message"))' "$3/many.json" 2>/dev/null || echo "(no Status body)")"
  printf 'limits: rss before %.1fMiB after %.1fMiB\n' "$(echo "$before / 1024" | bc -l)" "$(echo "$after / 1024" | bc -l)"
}

echo "== $KEYS selectors of ~$SELECTOR_BYTES bytes, $CONNS connections, profile $PROFILE"
uptime
for b in $BUDGETS; do run "$b"; done
