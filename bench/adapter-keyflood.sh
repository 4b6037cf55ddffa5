#!/usr/bin/env bash
# A flood of distinct selectors from one caller against gpuscale-adapter's
# poll cache, run twice in one go: first without bounds (a cap no flood
# reaches, no query budget: how the adapter behaved before the bounds), then
# with the configured bounds (--max-cached-queries, --prometheus-query-budget).
# For each run it prints the adapter's RSS before, at its peak during and
# 10 s after the flood, the queries per second Prometheus answered during
# the flood and while only polling afterwards, the refusals (503) and the
# poll interval in use; last, the bounded run's figures as ratios to the
# unbounded one. Needs: prometheus (Debian package), curl (7.66 or later).
#
#   bench/adapter-keyflood.sh                       # 20000 selectors, each asked twice
#   SELECTORS=50000 ROUNDS=1 bench/adapter-keyflood.sh
#   MAX_KEYS=5000 BUDGET=200 bench/adapter-keyflood.sh
#   PROFILE=debug SELECTORS=4000 bench/adapter-keyflood.sh  # smoke run
#
# The adapter runs with --dev (no authentication), which stands for one
# authorized caller. BUILD=0 uses the binary already built instead of
# running cargo first.
set -euo pipefail

SELECTORS=${SELECTORS:-20000}
ROUNDS=${ROUNDS:-2}
CONNS=${CONNS:-8}
POLL=${POLL:-5s}
MAX_KEYS=${MAX_KEYS:-10000}
BUDGET=${BUDGET:-500}
STEADY=${STEADY:-10}
PROFILE=${PROFILE:-release}

source "$(dirname "$0")/lib.sh"

build -p gpuscale-adapter --bin gpuscale-adapter
bin="$out/gpuscale-adapter"

bench_config

# SELECTORS distinct selectors in one namespace, walked in order ROUNDS
# times (as a caller retrying its refused keys would), CONNS at a time over
# reused TLS connections.
for _ in $(seq 1 "$ROUNDS"); do
  for i in $(seq 0 $((SELECTORS - 1))); do
    printf 'url = "/apis/external.metrics.k8s.io/v1beta1/namespaces/team-a/bench_queue_depth?labelSelector=workload%%3Dw%d"\noutput = "/dev/null"\n' "$i"
  done
done >"$work/flood.paths"

rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
# Instant queries Prometheus has answered.
prom_queries() {
  curl -fsS "http://127.0.0.1:$1/metrics" |
    awk '/^prometheus_http_requests_total\{.*handler="\/api\/v1\/query"/ {s+=$2} END {print s+0}'
}
self_metric() {
  curl -fsS "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 ~ "^"m"({|$)" {s+=$2} END {print s+0}'
}
now() { date +%s.%N; }
rate() { awk -v a="$1" -v b="$2" -v t0="$3" -v t1="$4" 'BEGIN {printf "%.0f", (b - a) / (t1 - t0)}'; }

# run NAME ADAPTER_FLAGS...: one flood against a fresh Prometheus and adapter.
run() {
  local name=$1
  shift
  local prom_port api_port metrics_port dir="$work/$name"
  adapter_ports
  mkdir -p "$dir"
  start_prometheus "$prom_port" "$dir"
  local prom=$prom_pid
  "$bin" --dev --listen "127.0.0.1:$api_port" --metrics-listen "127.0.0.1:$metrics_port" \
    --config "$work/bench.yaml" --prometheus-url "http://127.0.0.1:$prom_port" \
    --poll-interval "$POLL" --log-format json "$@" >"$dir/adapter.log" 2>&1 &
  local adapter=$!
  pids+=("$adapter")
  wait_ready "$prom_port" "$metrics_port"
  sleep 1
  local before q0 t0 q1 t1 q2 t2 q3 t3 after peak
  before=$(rss_kib "$adapter")
  echo "$before" >"$dir/peak"
  (while kill -0 "$adapter" 2>/dev/null; do
     r=$(rss_kib "$adapter" 2>/dev/null || echo 0)
     [ "${r:-0}" -gt "$(cat "$dir/peak")" ] && echo "$r" >"$dir/peak"
     sleep 0.5
   done) &
  local sampler=$!
  pids+=("$sampler")
  q0=$(prom_queries "$prom_port")
  t0=$(now)
  sed "s|^url = \"|url = \"https://127.0.0.1:$api_port|" "$work/flood.paths" >"$dir/flood.cfg"
  curl -sk --no-progress-meter --parallel --parallel-max "$CONNS" -K "$dir/flood.cfg" -w '%{http_code}\n' >"$dir/codes" || true
  q1=$(prom_queries "$prom_port")
  t1=$(now)
  sleep 10
  after=$(rss_kib "$adapter")
  q2=$(prom_queries "$prom_port")
  t2=$(now)
  sleep "$STEADY"
  q3=$(prom_queries "$prom_port")
  t3=$(now)
  kill "$sampler" 2>/dev/null || true
  peak=$(cat "$dir/peak")
  local requests refused keys interval secs codes results
  results=$(curl -fsS "http://127.0.0.1:$metrics_port/metrics" |
    awk -F'result="' '/^gpuscale_adapter_prometheus_queries_total/ {split($2, a, "\""); split($0, v, " "); n[a[1]] += v[2]}
      END {for (r in n) {printf "%s%s:%d", sep, r, n[r]; sep=","}}')
  requests=$(wc -l <"$dir/codes")
  codes=$(sort "$dir/codes" | uniq -c | awk '{printf "%s%s:%s", sep, $2, $1; sep=","}')
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", b - a}')
  refused=$(self_metric "$metrics_port" gpuscale_adapter_cache_refusals_total)
  keys=$(self_metric "$metrics_port" gpuscale_adapter_cached_queries)
  interval=$(self_metric "$metrics_port" gpuscale_adapter_poll_interval_seconds)
  local flood_qps poll_qps
  flood_qps=$(rate "$q0" "$q1" "$t0" "$t1")
  poll_qps=$(rate "$q2" "$q3" "$t2" "$t3")
  printf '%-10s rss_before=%dMiB rss_peak=%dMiB rss_10s_after=%dMiB prom_qps_flood=%s prom_qps_polling=%s requests=%s codes=%s flood=%ss refused=%s cached_keys=%s poll_interval=%ss query_results=%s\n' \
    "$name" $((before / 1024)) $((peak / 1024)) $((after / 1024)) "$flood_qps" "$poll_qps" \
    "$requests" "$codes" "$secs" "$refused" "$keys" "$interval" "$results" | tee -a "$work/results"
  echo "$name $before $peak $after $flood_qps $poll_qps" >>"$work/raw"
  kill "$adapter" "$prom" 2>/dev/null || true
  wait "$adapter" "$prom" 2>/dev/null || true
}

echo "== $SELECTORS distinct selectors asked $ROUNDS times, $CONNS connections, poll every $POLL, profile $PROFILE"
uptime
run unbounded --max-cached-queries 10000000 --prometheus-query-budget 0
run bounded --max-cached-queries "$MAX_KEYS" --prometheus-query-budget "$BUDGET"
echo "== bounded / unbounded (same run)"
awk '{r[$1]=$0} END {
  split(r["unbounded"], u); split(r["bounded"], b)
  printf "rss_peak %.2f  rss_10s_after %.2f  prom_qps_flood %.2f  prom_qps_polling %.2f\n",
    b[3]/u[3], b[4]/u[4], (u[5] > 0 ? b[5]/u[5] : 0), (u[6] > 0 ? b[6]/u[6] : 0)
}' "$work/raw"
