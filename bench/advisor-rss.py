#!/usr/bin/env python3
"""A fake Prometheus for the advisor's peak-RSS figure (docs/performance.md, "Advisor"):
answers the allocation-sharing query with N synthetic series (1.5M: a 214 MB
answer) and every other query with an empty vector. Usage:
  bench/advisor-rss.py PORT N &
  /usr/bin/time -v gpuscale-advisor --prometheus http://127.0.0.1:PORT --end 1000000
What the advisor keeps of that answer, built alone for comparison:
  /usr/bin/time -v target/release/examples/kept N
"""
import sys, http.server, urllib.parse
N = int(sys.argv[2])
parts = [b'{"status":"success","data":{"resultType":"vector","result":[']
for i in range(N):
    parts.append(b'%s{"metric":{"cluster":"cluster-a","node":"node-%07d","uuid":"GPU-%08x-aaaa-bbbb-cccc-%012x","mig_uuid":""},"value":[1000000,"1"]}' % (b',' if i else b'', i, i, i))
parts.append(b']}}')
BIG = b''.join(parts)
EMPTY = b'{"status":"success","data":{"resultType":"vector","result":[]}}'
sys.stderr.write("answer %d bytes\n" % len(BIG)); sys.stderr.flush()
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get('content-length', 0))
        q = urllib.parse.parse_qs(self.rfile.read(n).decode()).get('query', [''])[0]
        body = BIG if q == 'count by (cluster, node, uuid, mig_uuid) (gpu_pod_allocation)' else EMPTY
        self.send_response(200); self.send_header('content-type','application/json')
        self.send_header('content-length', str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()
