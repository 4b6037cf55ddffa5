#!/usr/bin/env bash
# Figures of gpuscale-activator (release build) against the tests' in-memory
# Kubernetes API and model backend: the wake signal's latency (request held
# → scale patch accepted) over WAKES wakes; the cost in the path when warm
# (wrk against the same backend directly and through the activator,
# alternated, median of 3); RSS idle and with HELD requests held.
# Needs: wrk. The driver runs in the debug profile (it is not measured).
#
#   bench/activator.sh                          # 20 wakes, 10,000 held, 10 s wrk runs
#   WAKES=5 HELD=500 WRK_SECONDS=2 bench/activator.sh   # smoke run
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
ulimit -n 30000 2>/dev/null || true
[ "${BUILD:-1}" = 0 ] || {
  cargo build --release -p gpuscale-activator
  cargo build -p gpuscale-e2e --example activator_bench
}
ACTIVATOR_BIN="$root/target/release/gpuscale-activator" "$root/target/debug/examples/activator_bench"
