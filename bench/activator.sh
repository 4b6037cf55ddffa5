#!/usr/bin/env bash
# Figures of gpuscale-activator (release build) against the tests' in-memory
# Kubernetes API: the wake signal's latency (request held → scale patch
# accepted) over WAKES wakes; the cost in the path when warm: wrk -t1 at 32
# connections and at 1 against the same backend (nginx's own `return 200`,
# one worker, when nginx is installed) directly, through a bare hyper
# reverse proxy (activator/examples/bare_proxy.rs), through nginx as a
# reverse proxy (one worker, upstream keep-alive) and through the
# activator, alternated, median of ROUNDS (3), with the activator's ratios
# to each and each proxy's CPU time per request; RSS idle and with HELD
# requests held. ACTIVATOR_BASE_BIN: an earlier activator build, run as
# one more target (a change compared in the same run).
# Needs: wrk; nginx (Debian nginx-light) for the nginx rows.
# The driver runs in the debug profile (it is not measured).
#
#   bench/activator.sh                          # 20 wakes, 9,000 held, 10 s wrk runs
# (9,000: at a 20,000-descriptor limit the activator serves 9,872
# connections, --max-connections lowered to leave room for upstreams)
#   WAKES=5 HELD=500 WRK_SECONDS=2 bench/activator.sh   # smoke run
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
ulimit -n 30000 2>/dev/null || true
[ "${BUILD:-1}" = 0 ] || {
  cargo build --release -p gpuscale-activator --bin gpuscale-activator --example bare_proxy
  cargo build -p gpuscale-e2e --example activator_bench
}
ACTIVATOR_BIN="$root/target/release/gpuscale-activator" \
  BARE_PROXY_BIN="$root/target/release/examples/bare_proxy" \
  "$root/target/debug/examples/activator_bench"
