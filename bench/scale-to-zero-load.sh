#!/usr/bin/env bash
# Figures of gpuscale's scale-to-zero controller on the real adapter, a real
# Prometheus (scraping every second) and the in-memory Kubernetes API of the
# tests: wake latency (first Prometheus sample above the activation
# threshold → scale patch accepted) over WAKES wakes, then the adapter's CPU
# and RSS and the requests the API server receives (writes and all) with no
# policy, with POLICIES (half parked), and with POLICIES busy (every queue
# depth changing each second), each over DURATION seconds at the adapter's
# default intervals. Needs: prometheus (Debian package).
#
#   bench/scale-to-zero-load.sh                    # 20 wakes, 500 policies, 60 s
#   WAKES=0 POLICIES=2000 bench/scale-to-zero-load.sh
#   POLL=2s WAKE_INTERVAL=2s bench/scale-to-zero-load.sh   # the wake phase's intervals
#   PROFILE=debug WAKES=5 POLICIES=50 DURATION=10 bench/scale-to-zero-load.sh   # smoke run
#   WAKES=0 STEADY=0 bench/scale-to-zero-load.sh   # only the busy policies
#   ADAPTER_ARGS="--scale-to-zero-concurrency=64" bench/scale-to-zero-load.sh   # flags for the adapter
#
# BUILD=0 runs the example already built instead of running cargo first
# (the example still makes sure the adapter binary of its profile is current).
set -euo pipefail

PROFILE=${PROFILE:-release}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

if [ "$PROFILE" = release ]; then
  [ "${BUILD:-1}" = 0 ] || cargo build --release -p gpuscale-e2e --example scale_to_zero_load
  out="$root/target/release"
else
  [ "${BUILD:-1}" = 0 ] || cargo build -p gpuscale-e2e --example scale_to_zero_load
  out="$root/target/debug"
fi
"$out/examples/scale_to_zero_load"
