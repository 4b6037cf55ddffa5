#!/usr/bin/env bash
# Series per node, per GPU, per MIG instance and per pod, on the built-in
# simulated node (8 GPUs, MIG, NVLink, 4 pods) and on a busy node (110 pods
# time-slicing 8 GPUs, bench/busy-scenario.sh), with and without per-link
# NVLink series, and with --profile fleet. Needs curl and python3.
#   bench/cardinality.sh
set -euo pipefail
PROFILE=${PROFILE:-debug}
source "$(dirname "$0")/lib.sh"

build -q -p gpuscale-exporter -p gpuscale-nvml-sim --bins --lib
bin="$out/gpuscale-exporter"
sim="$out/libgpuscale_nvml_sim.so"
GPUS=8 PODS=110 "$root/bench/busy-scenario.sh" > "$work/busy.yaml"
port=$(free_port)

count() {
  local label=$1; shift
  "$bin" --simulator-lib "$sim" --listen "127.0.0.1:$port" --collect-interval 500ms "$@" > "$work/log" 2>&1 &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$port/metrics" 2>/dev/null | grep -q '^gpuscale_exporter_pods [1-9]' && break
    sleep 0.2
  done
  sleep 1
  curl -s "http://127.0.0.1:$port/metrics" > "$work/metrics"
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
  python3 - "$label" "$work/metrics" <<'PY'
import re, sys
label, path = sys.argv[1], sys.argv[2]
gpus, migs, pods = set(), set(), set()
kinds = {"node": 0, "gpu": 0, "mig": 0, "pod": 0, "nvlink_link": 0}
total = 0
for line in open(path):
    if line.startswith("#") or not line.strip():
        continue
    total += 1
    labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', line.split(" ")[0] if "{" not in line else line[line.index("{"):line.rindex("}")]))
    name = line.split("{")[0].split(" ")[0]
    if name.startswith(("gpu_pod_", "gpu_process_")):
        # Per pod (allocation, usage) and per GPU process.
        kinds["pod"] += 1
        if labels.get("pod"):
            pods.add((labels.get("namespace"), labels["pod"]))
    elif labels.get("mig_uuid"):
        kinds["mig"] += 1; migs.add(labels["mig_uuid"])
    elif labels.get("uuid"):
        kinds["nvlink_link" if "link" in labels else "gpu"] += 1; gpus.add(labels["uuid"])
    else:
        kinds["node"] += 1
per = lambda n, d: f"{n / d:.1f}" if d else "-"
print(f"| {label} | {total} | {len(gpus)} | {per(kinds['gpu'], len(gpus))} | {per(kinds['nvlink_link'], len(gpus))} | {per(kinds['mig'], len(migs))} | {per(kinds['pod'], len(pods))} | {kinds['node']} |")
PY
}
echo "| node | series | GPUs | per GPU | per GPU, per-link NVLink | per MIG instance | per pod (allocation, usage, processes) | node-level |"
echo "|---|---|---|---|---|---|---|---|"
count "built-in (8 GPUs, MIG, 4 pods)" --simulate
count "built-in, --nvlink-per-link" --simulate --nvlink-per-link
count "built-in, --profile fleet" --simulate --profile fleet
count "busy (8 GPUs, 110 pods)" --simulate "$work/busy.yaml"
count "busy, --disable-collectors processes" --simulate "$work/busy.yaml" --disable-collectors processes
count "busy, --profile fleet" --simulate "$work/busy.yaml" --profile fleet
