#!/usr/bin/env bash
# Resident memory of gpuscale-exporter at rest on the built-in simulated
# node: VmRSS after SCRAPES scrapes, split into anonymous memory and
# file-backed pages (the binary, the simulator library, libc), and the
# largest mappings, for RUNS fresh starts; then the median of the runs.
#
#   bench/exporter-rss.sh                          # release, default profile
#   EXTRA_ARGS="--profile fleet" bench/exporter-rss.sh
#   BUILD=0 RUNS=5 bench/exporter-rss.sh
#   BUILD=0 EXPORTER=path/to/other/gpuscale-exporter bench/exporter-rss.sh
#   NODE=sim bench/exporter-rss.sh   # the image's exporter (no simulator
#                                    # linked) against gpuscale-sim's node
#   SCENARIO=pre-hopper bench/exporter-rss.sh                   # DCGM reader on
#   SCENARIO=pre-hopper EXTRA_ARGS=--dcgm-hostengine= bench/exporter-rss.sh  # off
#
# The exporter gives back its start-up memory 30 s after it starts
# (docs/performance.md, "Resident memory"), so SETTLE waits past that.
#
# Under --simulate the exporter also hosts the simulated kubelet and API
# server, and maps the simulator library where a node maps NVML. NODE=sim
# measures the exporter as the image builds it (--no-default-features)
# against a gpuscale-sim node in its own process, as on a real node.
set -euo pipefail

PROFILE=${PROFILE:-release}
RUNS=${RUNS:-3}
SCRAPES=${SCRAPES:-10}
SETTLE=${SETTLE:-35}
EXTRA_ARGS=${EXTRA_ARGS:-}
# --simulate's scenario (a file or a built-in name); empty = the built-in node.
SCENARIO=${SCENARIO:-}

source "$(dirname "$0")/lib.sh"

NODE=${NODE:-simulate}
if [ "$NODE" = sim ]; then
  build -q -p gpuscale-sim -p gpuscale-nvml-sim
  build -q -p gpuscale-exporter --no-default-features
  "$out/gpuscale-sim" --kubeconfig-out "$work/kubeconfig" --dir "$work/node" >"$work/sim.log" 2>&1 &
  pids+=("$!")
  until [ -S "$work/node/sim-node-1/kubelet.sock" ]; do sleep 0.1; done
  node_args="--nvml-lib $out/libgpuscale_nvml_sim.so --node-name sim-node-1 --kubeconfig $work/kubeconfig
    --pod-resources-socket $work/node/sim-node-1/kubelet.sock --proc-root $work/node/sim-node-1/proc"
else
  build -q -p gpuscale-exporter -p gpuscale-nvml-sim -p gpuscale-dcgm-sim
  node_args="--simulate $SCENARIO --simulator-lib $out/libgpuscale_nvml_sim.so"
fi
exporter=${EXPORTER:-$out/gpuscale-exporter}

kib() { awk -v k="$1:" '$1 == k {print $2}' "$2"; }

for run in $(seq 1 "$RUNS"); do
  port=$(free_port)
  # shellcheck disable=SC2086
  "$exporter" $node_args \
    --listen "127.0.0.1:$port" --log-level warn $EXTRA_ARGS >"$work/exporter.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_for "http://127.0.0.1:$port/readyz"
  sleep "$SETTLE" # start-up, the pod mapper's first refresh and watch, collections
  for _ in $(seq 1 "$SCRAPES"); do curl -fsS "http://127.0.0.1:$port/metrics" >/dev/null; done
  sleep 1
  cp "/proc/$pid/smaps_rollup" "$work/rollup"
  cp "/proc/$pid/smaps" "$work/smaps"
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
  threads=$(awk '/^Threads/ {print $2}' "/proc/$pid/status")
  # CPU since start (utime + stime, clock ticks) and the process's age in ticks.
  ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  age=$(( $(awk '{print int($1 * 100)}' /proc/uptime) - $(awk '{print $22}' "/proc/$pid/stat") ))
  printf 'run %d: rss=%d KiB anon=%d KiB file=%d KiB threads=%d cpu=%d permille\n' "$run" "$rss" \
    "$(kib Anonymous "$work/rollup")" "$(( $(kib Rss "$work/rollup") - $(kib Anonymous "$work/rollup") ))" "$threads" \
    "$(( ticks * 1000 / (age > 0 ? age : 1) ))" |
    tee -a "$work/runs"
  # Resident KiB per mapping name ([heap], [anon], [stack], a file's name).
  awk '/^[0-9a-f]+-[0-9a-f]+ / { name = (NF >= 6) ? $6 : "[anon]"; sub(".*/", "", name) }
       /^Rss:/ { rss[name] += $2 }
       END { for (n in rss) if (rss[n] >= 64) printf "  %6d KiB  %s\n", rss[n], n }' "$work/smaps" | sort -rn
  kill "$pid"
  wait "$pid" 2>/dev/null || true
done

median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
field() { sed -n "s/.*$1=\([0-9]*\).*/\1/p" "$work/runs" | median; }
printf 'median of %d: rss=%.1f MiB anon=%.1f MiB file=%.1f MiB cpu=%.1f %% of a core\n' "$RUNS" \
  "$(echo "$(field rss) / 1024" | bc -l)" "$(echo "$(field anon) / 1024" | bc -l)" "$(echo "$(field file) / 1024" | bc -l)" \
  "$(echo "$(field cpu) / 10" | bc -l)"
