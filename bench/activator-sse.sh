#!/usr/bin/env bash
# Memory of gpuscale-activator (release build) per open server-sent event
# stream: STREAMS streaming chat completions (a model route, so each body
# is peeked for its "model") through the activator to a model server that
# sends one chunk a second and never ends; the activator's RSS idle, with
# every stream open and after they closed, for each mode client/upstream:
# h1 (a client connection per stream) or h2 (250 streams per connection),
# and the route's upstreamProtocol http1 or h2c. With h1 clients the
# streams are as many as the activator serves within the descriptor limit
# (two descriptors each beside a reserve of 256; raise `ulimit -n` for
# 10,000).
# The driver runs in the debug profile (it is not measured).
#
#   bench/activator-sse.sh                         # 10,000 streams, three modes
#   STREAMS=500 MODES=h2/http1 bench/activator-sse.sh   # smoke run
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
ulimit -n 30000 2>/dev/null || ulimit -n "$(ulimit -Hn)"
[ "${BUILD:-1}" = 0 ] || {
  cargo build --release -p gpuscale-activator --bin gpuscale-activator --example sse_backend --example sse_client
  cargo build -p gpuscale-e2e --example activator_sse_bench
}
ACTIVATOR_BIN="$root/target/release/gpuscale-activator" \
  SSE_BACKEND_BIN="$root/target/release/examples/sse_backend" \
  SSE_CLIENT_BIN="$root/target/release/examples/sse_client" \
  "$root/target/debug/examples/activator_sse_bench"
