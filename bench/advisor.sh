#!/usr/bin/env bash
# Run time of gpuscale-advisor over a week of history for WORKLOADS
# workloads (default 1000) against a real Prometheus: the built-in
# scenario's shapes (advisor/tests/synth) repeated, 5-minute samples,
# backfilled with promtool, then the advisor (release) timed over the
# week. Prints the backfill size and time, the advisor's wall time, its
# query count and the saving it reports. Needs: prometheus (Debian package).
#
#   bench/advisor.sh                          # 1000 workloads
#   WORKLOADS=7 bench/advisor.sh              # the built-in scenario alone
#   PROFILE=debug WORKLOADS=14 bench/advisor.sh   # smoke run
#   KEEP=$HOME/advisor-week bench/advisor.sh       # backfill once, keep it:
#                                 # a later run with the same KEEP reuses it
set -euo pipefail

PROFILE=${PROFILE:-release}
WORKLOADS=${WORKLOADS:-1000}
source "$(dirname "$0")/lib.sh"

build -p gpuscale-advisor --bin gpuscale-advisor --example synth
data=${KEEP:-$work}
mkdir -p "$data"
if [ -f "$data/end" ]; then
  end=$(cat "$data/end")
  echo "history: reused from $data (end $end)"
else
  end=$(( $(date +%s) / 300 * 300 - 300 ))
  t0=$(date +%s.%N)
  "$out/examples/synth" "$WORKLOADS" "$end" >"$work/history.om"
  t1=$(date +%s.%N)
  promtool tsdb create-blocks-from openmetrics --quiet "$work/history.om" "$data/data" >/dev/null
  t2=$(date +%s.%N)
  lines=$(wc -l <"$work/history.om")
  size=$(du -m "$work/history.om" | cut -f1)
  rm -f "$work/history.om"
  echo "$end" >"$data/end"
  echo "history: $WORKLOADS workloads, $lines samples (${size} MiB OpenMetrics); generated in $(echo "$t1 - $t0" | bc) s, backfilled in $(echo "$t2 - $t1" | bc) s"
fi

port=$(free_port)
start_prometheus "$port" "$data"
for _ in $(seq 1 600); do
  curl -fsS "http://127.0.0.1:$port/-/ready" >/dev/null 2>&1 && break
  sleep 0.5
done

run() {
  local s e
  s=$(date +%s.%N)
  "$out/gpuscale-advisor" --prometheus "http://127.0.0.1:$port" --end "$end" --query-timeout 10m \
    --output json >"$work/report.json"
  e=$(date +%s.%N)
  echo "$e - $s" | bc
}
first=$(run)
second=$(run)
python3 - "$work/report.json" "$first" "$second" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"advisor ({len(r['workloads'])} workloads, range {r['range']} step {r['step']}, {r['queries']} queries): "
      f"{float(sys.argv[2]):.1f} s first run, {float(sys.argv[3]):.1f} s second run")
recs = sum(len(w['recommendations']) for w in r['workloads'])
print(f"recommendations: {recs}; co-location groups: {len(r['colocation'])}; "
      f"saving per month: placement ${r['placement_saving_usd_per_month']:.0f}, "
      f"scale to zero ${r['scale_to_zero_saving_usd_per_month']:.0f}, "
      f"too-small moves +${r['too_small_cost_increase_usd_per_month']:.0f}")
PY
