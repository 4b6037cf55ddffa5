#!/usr/bin/env bash
# Hostile scenario files against the simulator's loader: time to reject and
# peak RSS (GNU time) of the validate-scenario example for a 100,000-deep
# flow nesting, a 100,000-deep block nesting, a 50 MB file (about 1M pods),
# 1,001 pods, a 1 MB `node:` value and a 775 KB file whose aliases repeat
# 20,000 processes on 256 GPUs; then a valid 256-GPU, 1,000-pod node
# (bench/busy-scenario.sh) as the baseline. Prints the median of RUNS runs.
#
#   bench/scenario-limits.sh                 # release build
#   PROFILE=debug RUNS=3 bench/scenario-limits.sh
set -euo pipefail

PROFILE=${PROFILE:-release}
RUNS=${RUNS:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d -t gpuscale-scenario-limits-XXXXXX)
trap 'rm -rf "$work"' EXIT
flag=; [ "$PROFILE" = release ] && flag=--release
[ "${BUILD:-1}" = 0 ] || cargo build -q $flag -p gpuscale-nvml-sim --example validate-scenario
bin=$root/target/$PROFILE/examples/validate-scenario

python3 - "$work" <<'PY'
import sys
w = sys.argv[1]
n = 100_000
open(f"{w}/deep-flow.yaml", "w").write("node: " + "[" * n + "]" * n + "\n")
open(f"{w}/deep-block.yaml", "w").write("node:\n" + "- " * n + "x\n")
open(f"{w}/node-1mb.yaml", "w").write("node: " + "n" * (1 << 20) + "\n")
pod = "  - {{ namespace: ns, name: p{0}, uid: u{0} }}\n"
open(f"{w}/pods-1001.yaml", "w").write("pods:\n" + "".join(pod.format(i) for i in range(1001)))
with open(f"{w}/aliases.yaml", "w") as f:
    f.write("gpus:\n")
    for g in range(256):
        f.write(f"  - model: NVIDIA H100 80GB HBM3\n    uuid: GPU-00000000-0000-4000-8000-{g:012}\n"
                f"    pci_bus_id: \"00000000:{g:02x}:00.0\"\n    memory_mib: 81559\n")
        if g == 0:
            f.write("    processes: &p\n" + "".join(f"      - {{ pid: {p}, memory_mib: 1 }}\n" for p in range(20000)))
        else:
            f.write("    processes: *p\n")
with open(f"{w}/pods-50mb.yaml", "w") as f:
    f.write("pods:\n")
    i = 0
    while f.tell() < 50 << 20:
        f.write(pod.format(i))
        i += 1
PY
GPUS=256 PODS=1000 "$root/bench/busy-scenario.sh" > "$work/valid-256-gpus-1000-pods.yaml"

printf '%-30s %10s %10s  %s\n' file bytes "median s" "median peak RSS (KiB); first line of the answer"
for f in deep-flow deep-block pods-50mb pods-1001 node-1mb aliases valid-256-gpus-1000-pods; do
  file=$work/$f.yaml
  for ((r = 0; r < RUNS; r++)); do
    /usr/bin/time -f '%e %M' -o "$work/time" "$bin" "$file" >"$work/out" 2>&1 || true
    tail -n 1 "$work/time"
  done | sort -n | awk -v n="$RUNS" 'NR == int((n + 1) / 2) {print $1}' > "$work/s"
  for ((r = 0; r < RUNS; r++)); do
    /usr/bin/time -f '%M' -o "$work/time" "$bin" "$file" >/dev/null 2>&1 || true
    tail -n 1 "$work/time"
  done | sort -n | awk -v n="$RUNS" 'NR == int((n + 1) / 2) {print $1}' > "$work/kb"
  printf '%-30s %10s %10s  %s %s\n' "$f" "$(stat -c %s "$file")" "$(cat "$work/s")" "$(cat "$work/kb")" "$(head -c 120 "$work/out" | head -1 | sed "s|$work/||")"
done
