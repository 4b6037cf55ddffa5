#!/usr/bin/env bash
# Hostile clients against gpuscale-exporter on the simulated node: scrape p99
# (wrk, 1 connection) with 200 slowloris connections open, RSS before, during
# and 10 s after a 10,000-connection flood, and the authorized scrape median
# while 8 clients send fresh wrong passwords (bcrypt cost 10). Then the same
# 10,000-connection flood against gpuscale-adapter's API port (--dev, its
# defaults otherwise): RSS before, during and 10 s after, and /healthz.
#
#   bench/hostile.sh                     # release build
#   PROFILE=debug DURATION=10s bench/hostile.sh
set -euo pipefail

DURATION=${DURATION:-20s}
PROFILE=${PROFILE:-release}
source "$(dirname "$0")/lib.sh"

build -q -p gpuscale-exporter -p gpuscale-nvml-sim -p gpuscale-adapter --bins --lib
bin=$out/gpuscale-exporter
py=$root/target/pyenv/bin/python3
port=19400

start() {
  "$bin" --simulate --listen 127.0.0.1:$port --simulator-lib "$out/libgpuscale_nvml_sim.so" "$@" 2>"$work/log" &
  pid=$!
  pids+=("$pid")
  until curl -sf -o /dev/null "http://127.0.0.1:$port/healthz" "${auth[@]}" 2>/dev/null \
     || curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/healthz" | grep -q 401; do sleep 0.2; done
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }
rss() { awk '/VmRSS/ {printf "%.1f MiB", $2/1024}' "/proc/$pid/status"; }
p99() { wrk -t1 -c1 -d"$DURATION" --latency "$@" "http://127.0.0.1:$port/metrics" | awk '/ 99%/ {print $2}'; }

# Slowloris: one header byte per second on each of 200 connections.
auth=()
start --read-header-timeout 10s
echo "scrape p99, quiet: $(p99)"
"$py" - "$port" <<'PY' &
import socket, sys, time
conns = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(200)]
for b in b"GET /metrics HTTP/1.1\r\nHost: x\r\n" * 10:
    for c in conns:
        try: c.send(bytes([b]))
        except OSError: pass
    time.sleep(1)
PY
loris=$!
sleep 2
echo "scrape p99, 200 slowloris connections: $(p99)"
kill $loris 2>/dev/null || true

# Flood: 10,000 idle connections, non-blocking connects (those beyond the
# listen backlog stay in SYN retry, as a real flood's would), held 10 s.
flood() {
  (ulimit -n 20000; "$py" - "$1" <<'PY') &
import socket, sys, time
conns = []
for _ in range(10000):
    s = socket.socket()
    s.setblocking(False)
    try: s.connect(("127.0.0.1", int(sys.argv[1])))
    except BlockingIOError: pass
    except OSError: s.close(); continue
    conns.append(s)
time.sleep(2)
up = sum(1 for s in conns if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0)
print(f"flood: {len(conns)} sockets, {up} connected", flush=True)
time.sleep(8)
PY
  flood_pid=$!
}
echo "RSS before flood: $(rss)"
flood $port
sleep 8
echo "RSS during flood: $(rss)"
wait $flood_pid
sleep 10
echo "RSS 10 s after flood: $(rss)"
stop

# Wrong-password flood.
# glibc's crypt (libxcrypt) makes bcrypt hashes; rounds=1024 is cost 10.
hash=$(python3 -W ignore -c 'import crypt; print(crypt.crypt("s3cret", crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1024)))')
printf 'basic_auth_users:\n  prometheus: %s\n' "$hash" >"$work/web.yml"
auth=(-u prometheus:s3cret)
start --web-config-file "$work/web.yml"
median() { for _ in $(seq 21); do curl -s -o /dev/null -w '%{time_total}\n' -u prometheus:s3cret "http://127.0.0.1:$port/metrics"; done | sort -n | sed -n 11p; }
echo "authorized scrape median, quiet: $(median) s"
for t in $(seq 8); do
  (while :; do curl -s -o /dev/null -u "prometheus:guess-$t-$RANDOM$RANDOM" "http://127.0.0.1:$port/metrics"; done) &
done
sleep 1
echo "authorized scrape median, 8 clients flooding wrong passwords: $(median) s"
kill $(jobs -p) 2>/dev/null || true

# The adapter's API port under the same flood (TLS handshake timeout 10 s,
# --max-connections 1024; Prometheus unreachable: no query is needed).
api=16443
mport=19102
"$out/gpuscale-adapter" --dev --listen 127.0.0.1:$api --metrics-listen 127.0.0.1:$mport \
  --prometheus-url http://127.0.0.1:1 2>"$work/adapter.log" &
pid=$!
pids+=("$pid")
until curl -sf -o /dev/null "http://127.0.0.1:$mport/healthz"; do sleep 0.2; done
echo "adapter RSS before flood: $(rss)"
flood $api
sleep 8
echo "adapter RSS during flood: $(rss), /healthz: $(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$mport/healthz")"
wait $flood_pid
sleep 10
echo "adapter RSS 10 s after flood: $(rss), /healthz: $(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$mport/healthz")"
stop
