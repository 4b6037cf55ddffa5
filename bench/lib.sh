# Shared set-up of the load scripts; source it after setting PROFILE.
# Sets root (the repository), work (a temp dir removed on exit), pids
# (background processes killed on exit: add each one started) and out
# (target/release or target/debug); gives free_port, wait_for URL and
# build ARGS… (cargo build in PROFILE, skipped with BUILD=0, to run
# binaries already built), and for the adapter's scripts adapter_ports,
# bench_config, start_prometheus and wait_ready.

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d -t "gpuscale-$(basename "$0" .sh)-XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_for URL: until URL answers with a success (10 s at most).
wait_for() {
  for _ in $(seq 1 100); do
    curl -fsS "$1" >/dev/null 2>&1 && return
    sleep 0.1
  done
}

if [ "$PROFILE" = release ]; then out="$root/target/release"; else out="$root/target/debug"; fi

build() {
  [ "${BUILD:-1}" = 0 ] && return
  if [ "$PROFILE" = release ]; then
    (cd "$root" && cargo build --release "$@")
  else
    (cd "$root" && cargo build "$@")
  fi
}

# The adapter scripts' stand-ins: free ports for Prometheus, the adapter's
# API and its metrics listener.
adapter_ports() {
  prom_port=$(free_port)
  api_port=$(free_port)
  metrics_port=$(free_port)
}

# One metric whose query always has a value (1: active), so every key is a
# cached 200; written to $work/bench.yaml.
bench_config() {
  cat >"$work/bench.yaml" <<'YAML'
metrics:
  - name: bench_queue_depth
    query: sum(bench_queue{${matchers}}) or vector(1)
YAML
}

# start_prometheus PORT [DIR]: Prometheus on PORT with $work/prometheus.yml
# (one without scrape targets is written when absent), data and log in DIR
# ($work by default); its pid is prom_pid and joins pids.
start_prometheus() {
  local dir=${2:-$work}
  [ -f "$work/prometheus.yml" ] ||
    printf 'global:\n  scrape_interval: 15s\nscrape_configs: []\n' >"$work/prometheus.yml"
  prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$dir/data" \
    --web.listen-address="127.0.0.1:$1" >"$dir/prometheus.log" 2>&1 &
  prom_pid=$!
  pids+=("$prom_pid")
}

# wait_ready PROM_PORT METRICS_PORT: until Prometheus is ready and the
# adapter's /healthz answers (30 s at most).
wait_ready() {
  for _ in $(seq 1 150); do
    curl -fsS "http://127.0.0.1:$1/-/ready" >/dev/null 2>&1 &&
      curl -fsS "http://127.0.0.1:$2/healthz" >/dev/null 2>&1 && return
    sleep 0.2
  done
}
