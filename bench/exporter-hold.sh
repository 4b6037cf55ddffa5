#!/usr/bin/env bash
# Clients that hold gpuscale-exporter by time: (1) fresh-connection scrape
# latency, quiet and while 520 clients pipeline 40 GET /metrics each and
# never read (every one of the 512 default connection slots held; they open
# a new connection whenever one of theirs has been open past the write
# timeout, and never close their own); (2) first-login latency (a user whose
# credentials are not cached, bcrypt cost 10) quiet and while 200
# connections from 127.0.0.2 send wrong passwords. Default flags otherwise.
#
#   bench/exporter-hold.sh                    # release build
#   PROFILE=debug SCRAPES=10 bench/exporter-hold.sh
set -euo pipefail

PROFILE=${PROFILE:-release}
SCRAPES=${SCRAPES:-20}
source "$(dirname "$0")/lib.sh"

build -q -p gpuscale-exporter -p gpuscale-nvml-sim --bins --lib
bin=$out/gpuscale-exporter
port=$(free_port)

start() {
  "$bin" --simulate --listen 127.0.0.1:$port --simulator-lib "$out/libgpuscale_nvml_sim.so" "$@" 2>"$work/log" &
  pid=$!
  pids+=("$pid")
  until curl -s -o /dev/null "http://127.0.0.1:$port/healthz"; do sleep 0.2; done
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; }

# times N CURL-ARGS…: N fresh-connection requests one after another; prints
# the median and the largest in seconds, and how many did not get a 200
# within 15 s.
times() {
  local n=$1; shift
  for _ in $(seq "$n"); do
    curl -s -o /dev/null -m 15 -w '%{http_code} %{time_total}\n' "$@" || true
  done | sort -k2 -n | awk '{ t[NR] = $2; if ($1 != 200) bad++ } END {
    printf "median %.3f s, max %.3f s, %d of %d failed", t[int((NR + 1) / 2)], t[NR], bad, NR }'
}

start
echo "scrape, quiet: $(times "$SCRAPES" "http://127.0.0.1:$port/metrics")"
(ulimit -n 20000; python3 - "$port" <<'PY') &
import socket, sys, time
port = int(sys.argv[1])
req = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 40
held = []  # never closed here, never read
for _ in range(520):
    s = socket.socket()
    s.setblocking(False)
    try:
        s.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    held.append(s)
pending = list(held)
while True:
    for s in list(pending):
        try:
            s.send(req)
            pending.remove(s)
        except OSError:
            pass
    time.sleep(0.2)
PY
readers=$!
pids+=("$readers")
sleep 2
echo "scrape, 520 slow readers on 512 slots: $(times "$SCRAPES" "http://127.0.0.1:$port/metrics")"
kill "$readers" 2>/dev/null || true
stop

# First logins: ten users, bcrypt cost 10 (glibc's crypt, rounds=1024).
{
  echo "basic_auth_users:"
  for i in $(seq 0 9); do
    echo "  u$i: $(python3 -W ignore -c "import crypt; print(crypt.crypt('pw-u$i', crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1024)))")"
  done
} >"$work/web.yml"
start --web-config-file "$work/web.yml"
logins() { for i in "$@"; do curl -s -o /dev/null -m 30 -w '%{http_code} %{time_total}\n' -u "u$i:pw-u$i" "http://127.0.0.1:$port/metrics"; done | sort -k2 -n | awk '{ t[NR] = $2; if ($1 != 200) bad++ } END { printf "median %.3f s of %d (%d failed)", t[int((NR + 1) / 2)], NR, bad }'; }
echo "first login, quiet: $(logins 0 1 2 3 4)"
python3 - "$port" <<'PY' &
import base64, socket, sys, threading, time
port = int(sys.argv[1])
def run(t):
    i, s = 0, None
    while True:
        i += 1
        auth = base64.b64encode(f"u0:guess-{t}-{i}".encode()).decode()
        try:
            if s is None:
                s = socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.2", 0))
            s.sendall(f"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {auth}\r\n\r\n".encode())
            head = s.recv(65536).decode(errors="replace").lower()
            if not head or "connection: close" in head:
                s.close(); s = None
        except OSError:
            s = None
for t in range(200):
    threading.Thread(target=run, args=(t,), daemon=True).start()
time.sleep(3600)
PY
flood=$!
pids+=("$flood")
sleep 2
echo "first login, 200 connections of wrong passwords from 127.0.0.2: $(logins 5 6 7 8 9)"
kill "$flood" 2>/dev/null || true
stop
