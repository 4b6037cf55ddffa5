#!/usr/bin/env bash
# Load test of the custom metrics API's per-pod path: HPAS scale targets
# (10 namespaces) of PODS pods each ask `pods/*` with their pod selector over
# HTTPS keep-alive connections; pod lists and values come from memory. The
# external API is measured in the same run as the baseline. Prints wrk's
# latency distributions, the pod-list refresh cost from the adapter's log and
# its resident memory. Needs: prometheus (Debian package), wrk, curl, python3.
#
#   bench/adapter-custom-load.sh                    # 100 HPAs × 10 pods, 8 connections, 30 s
#   HPAS=500 PODS=20 CONNS=16 DURATION=60s bench/adapter-custom-load.sh
#   DELAY_MS=1 bench/adapter-custom-load.sh         # paced: each connection waits
#                                                   # 1 ms between requests
#
# The adapter runs with --dev (no authentication: wrk cannot present client
# certificates) and --kubeconfig pointing at a small Kubernetes API stand-in
# that answers pod lists.
# BUILD=0 uses the binaries already built instead of running cargo first.
set -euo pipefail

HPAS=${HPAS:-100}
PODS=${PODS:-10}
CONNS=${CONNS:-8}
THREADS=${THREADS:-1}
DURATION=${DURATION:-30s}
PROFILE=${PROFILE:-release}
POLL=${POLL:-5s}
DELAY_MS=${DELAY_MS:-0}

source "$(dirname "$0")/lib.sh"

build -p gpuscale-adapter --bin gpuscale-adapter
bin="$out/gpuscale-adapter"

adapter_ports
target_port=$(free_port)
kube_port=$(free_port)

# Workload w<j> in namespace ns-<j % 10> has pods w<j>-0 … w<j>-(PODS-1),
# each with one bench_queue series; the stand-in API lists them by app=w<j>.
cat >"$work/cluster.py" <<PY
import http.server, json, sys, urllib.parse
HPAS, PODS = $HPAS, $PODS
mode, port = sys.argv[1], int(sys.argv[2])
expo = "".join(
    f'bench_queue{{namespace="ns-{j % 10}",pod="w{j}-{k}"}} {k + 1}\n'
    for j in range(HPAS) for k in range(PODS)
).encode()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        if mode == "target":
            body = expo
        else:
            sel = urllib.parse.parse_qs(u.query).get("labelSelector", [""])[0]
            app = sel.partition("app=")[2]
            ns = u.path.split("/")[4]
            items = [{"metadata": {"name": f"{app}-{k}", "namespace": ns, "labels": {"app": app}}, "status": {"phase": "Running"}}
                     for k in range(PODS)] if app.startswith("w") else []
            body = json.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json" if mode == "kube" else "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
PY
python3 "$work/cluster.py" target "$target_port" & pids+=($!)
python3 "$work/cluster.py" kube "$kube_port" & pids+=($!)

cat >"$work/prometheus.yml" <<YAML
global:
  scrape_interval: 2s
scrape_configs:
  - job_name: bench
    honor_labels: true
    static_configs: [{targets: ['127.0.0.1:$target_port']}]
YAML
start_prometheus "$prom_port"

cat >"$work/kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters: [{name: bench, cluster: {server: "http://127.0.0.1:$kube_port"}}]
users: [{name: bench, user: {}}]
contexts: [{name: bench, context: {cluster: bench, user: bench}}]
current-context: bench
YAML
cat >"$work/bench.yaml" <<'YAML'
metrics:
  - name: bench_queue_depth
    query: sum(bench_queue{${matchers}}) or vector(1)
    objects:
      pods: sum by (namespace, pod) (bench_queue{${matchers}})
YAML

RUST_LOG=info,gpuscale_adapter::pods=debug "$bin" --dev --listen "127.0.0.1:$api_port" \
  --metrics-listen "127.0.0.1:$metrics_port" --kubeconfig "$work/kubeconfig" \
  --config "$work/bench.yaml" --prometheus-url "http://127.0.0.1:$prom_port" \
  --poll-interval "$POLL" --log-format json >"$work/adapter.log" 2>&1 &
adapter=$!
pids+=($adapter)

for _ in $(seq 1 150); do
  n=$(curl -fsS "http://127.0.0.1:$prom_port/api/v1/query?query=count(bench_queue)" 2>/dev/null |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else 0)' 2>/dev/null || echo 0)
  [ "$n" = "$((HPAS * PODS))" ] && curl -fsS "http://127.0.0.1:$metrics_port/healthz" >/dev/null 2>&1 && break
  sleep 0.2
done

lua() { # $1: custom | external
  cat <<LUA
local hpas, i = $HPAS, 0
init = function(args) i = math.random(0, hpas - 1) end
request = function()
  i = (i + 1) % hpas
  if "$1" == "custom" then
    return wrk.format("GET", string.format(
      "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns-%d/pods/*/bench_queue_depth?labelSelector=app%%3Dw%d", i % 10, i))
  end
  return wrk.format("GET", string.format(
    "/apis/external.metrics.k8s.io/v1beta1/namespaces/ns-%d/bench_queue_depth?labelSelector=pod%%3Dw%d-0", i % 10, i))
end
if $DELAY_MS > 0 then
  delay = function() return $DELAY_MS end
end
LUA
}
lua custom >"$work/custom.lua"
lua external >"$work/external.lua"
url="https://127.0.0.1:$api_port"
code=$(curl -ksS -o "$work/one.json" -w '%{http_code}' "$url/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns-1/pods/*/bench_queue_depth?labelSelector=app%3Dw1")
echo "one pods/* answer: HTTP $code, $(grep -o '"describedObject"' "$work/one.json" | wc -l) items"

for api in custom external; do
  echo "== warm-up ($api): every key once through a miss, then from memory"
  wrk -t1 -c"$CONNS" -d5s -s "$work/$api.lua" "$url" >/dev/null
  echo "== measured ($api): $HPAS HPAs × $PODS pods, $CONNS keep-alive TLS connections, $THREADS threads, $DURATION, ${DELAY_MS} ms between requests, poll every $POLL"
  uptime
  wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -s "$work/$api.lua" "$url"
done

echo "== pod-list refresh rounds (all $HPAS selectors re-listed each poll interval)"
grep 'pod lists refreshed' "$work/adapter.log" | tail -5 || true
echo "== adapter memory"
grep -E '^(VmRSS|VmHWM)' "/proc/$adapter/status"
echo "== request counts by api and code"
curl -fsS "http://127.0.0.1:$metrics_port/metrics" | grep -E '^gpuscale_adapter_requests_total'
