#!/usr/bin/env python3
"""Generates the Grafana dashboards in this directory (stdlib only).

    python3 dashboards/generate.py            # write the JSON files
    python3 dashboards/generate.py --check    # exit 1 if they are out of date

The JSON files are what users import and what the end-to-end test
(tests/tests/alerts.rs) evaluates against a real Prometheus; this script is
their source. Edit here, regenerate, commit both.

Query conventions (the e2e test relies on them):
- every selector matches variables with `=~"$var"`; the `All` value is `.*`,
  which also matches a missing label (a raw scrape has no `cluster` label);
- a stat that should read 0 rather than "No data" ends in ` or vector(0)`
  (the test strips that suffix and still requires data);
- `$__rate_interval` for rates, `$__range` / `$__interval` / `$__interval_ms`
  for totals over the dashboard range.
"""
import json
import os
import sys

DIR = os.path.dirname(os.path.abspath(__file__))
DS = {"type": "prometheus", "uid": "${datasource}"}

C = 'cluster=~"$cluster"'
N = 'node=~"$node"'
NS = 'namespace=~"$namespace"'
WL = 'workload=~"$workload"'
G = 'gpu=~"$gpu"'
M = 'model=~"$model"'
P = 'node_pool=~"$node_pool"'
POD = 'pod=~"$pod"'
# device series filter (Node & GPU dashboard)
DEV = f'{C}, {N}, {G}'
# allocation filter
ALLOC = f'{C}, {N}, {NS}, {WL}'


class Dash:
    def __init__(self, uid, title, description, variables, tags=()):
        self.uid, self.title, self.description = uid, title, description
        self.variables = variables
        self.tags = ["gpuscale", "gpu"] + list(tags)
        self.panels = []
        self.x = 0
        self.y = 0
        self.rowh = 0
        self.next_id = 1

    def _place(self, w, h):
        if self.x + w > 24:
            self.x = 0
            self.y += self.rowh
            self.rowh = 0
        pos = {"h": h, "w": w, "x": self.x, "y": self.y}
        self.x += w
        self.rowh = max(self.rowh, h)
        return pos

    def row(self, title):
        if self.x:
            self.y += self.rowh
        self.x, self.rowh = 0, 0
        self.panels.append({
            "id": self._id(), "type": "row", "title": title, "collapsed": False,
            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}, "panels": [],
        })
        self.y += 1

    def _id(self):
        i = self.next_id
        self.next_id += 1
        return i

    def panel(self, kind, title, description, targets, unit=None, w=8, h=8,
              decimals=None, minv=None, maxv=None, thresholds=None, options=None,
              overrides=None, transformations=None, custom=None):
        defaults = {}
        if unit:
            defaults["unit"] = unit
        if decimals is not None:
            defaults["decimals"] = decimals
        if minv is not None:
            defaults["min"] = minv
        if maxv is not None:
            defaults["max"] = maxv
        defaults["thresholds"] = thresholds or {
            "mode": "absolute", "steps": [{"color": "green", "value": None}]}
        defaults["color"] = {"mode": "thresholds" if kind == "stat" else "palette-classic"}
        if kind == "timeseries":
            defaults["custom"] = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10,
                                  "showPoints": "never", "spanNulls": False}
            if custom:
                defaults["custom"].update(custom)
        p = {
            "id": self._id(), "type": kind, "title": title, "description": description,
            "datasource": DS, "gridPos": self._place(w, h),
            "fieldConfig": {"defaults": defaults, "overrides": overrides or []},
            "targets": [],
        }
        for i, t in enumerate(targets):
            if isinstance(t, str):
                t = {"expr": t}
            tgt = {"datasource": DS, "refId": chr(ord("A") + i), "expr": t["expr"],
                   "legendFormat": t.get("legend", "__auto"), "editorMode": "code"}
            if kind == "timeseries":
                tgt["range"], tgt["instant"] = True, False
            else:
                tgt["range"], tgt["instant"] = False, True
            if kind == "table":
                tgt["format"] = "table"
            p["targets"].append(tgt)
        if kind == "stat":
            p["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                            "colorMode": "value", "graphMode": "none", "textMode": "auto",
                            "justifyMode": "auto", "orientation": "auto"}
        elif kind == "timeseries":
            p["options"] = {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                            "tooltip": {"mode": "multi", "sort": "desc"}}
        elif kind == "table":
            p["options"] = {"showHeader": True, "cellHeight": "sm", "footer": {"show": False}}
            p["transformations"] = transformations if transformations is not None else [
                {"id": "organize", "options": {"excludeByName": {"Time": True, "__name__": True, "job": True, "instance": True}}}]
        if options:
            p["options"].update(options)
        self.panels.append(p)

    def stat(self, title, description, expr, unit=None, w=4, h=4, **kw):
        self.panel("stat", title, description, [expr], unit=unit, w=w, h=h, **kw)

    def ts(self, title, description, targets, unit=None, w=12, h=8, **kw):
        self.panel("timeseries", title, description, targets, unit=unit, w=w, h=h, **kw)

    def table(self, title, description, targets, w=24, h=8, **kw):
        self.panel("table", title, description, targets, w=w, h=h, **kw)

    def json(self):
        return {
            "uid": self.uid, "title": self.title, "description": self.description,
            "tags": self.tags, "editable": True, "graphTooltip": 1,
            "schemaVersion": 39, "version": 1, "timezone": "browser",
            "time": {"from": "now-6h", "to": "now"}, "refresh": "30s",
            "fiscalYearStartMonth": 0, "liveNow": False, "weekStart": "",
            "annotations": {"list": [{
                "builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
                "name": "Annotations & Alerts", "type": "dashboard"}]},
            "links": [{"title": "gpuscale", "type": "dashboards", "tags": ["gpuscale"],
                       "asDropdown": True, "includeVars": True, "keepTime": True}],
            "templating": {"list": self.variables},
            "panels": self.panels,
        }


def ds_var():
    return {"name": "datasource", "label": "Data source", "type": "datasource",
            "query": "prometheus", "current": {}, "hide": 0, "includeAll": False,
            "multi": False, "options": [], "refresh": 1, "regex": "", "skipUrlSync": False}


def qvar(name, label, query):
    return {"name": name, "label": label, "type": "query", "datasource": DS,
            "definition": query,
            "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery", "qryType": 1},
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
            "hide": 0, "includeAll": True, "allValue": ".*", "multi": True, "options": [],
            "refresh": 2, "regex": "", "skipUrlSync": False, "sort": 1}


def common_vars():
    return [
        ds_var(),
        qvar("cluster", "Cluster", "label_values(gpu_info, cluster)"),
        qvar("model", "GPU model", f'label_values(gpu_info{{{C}}}, model)'),
        qvar("node_pool", "Node pool", f'label_values(gpu_node_info{{{C}}}, node_pool)'),
        # gpu_info carries the model, gpu_node_info the pool: each narrows
        # the list on its own (All, `.*`, also matches the label's absence),
        # and a node whose exporter could not read its pool stays listed.
        qvar("node", "Node", f'label_values({{__name__=~"gpu_info|gpu_node_info", {C}, {M}, {P}}}, node)'),
        qvar("namespace", "Namespace", f'label_values(gpu_pod_allocation{{{C}, {N}}}, namespace)'),
        qvar("workload", "Workload", f'label_values(gpu_pod_allocation{{{C}, {N}, {NS}}}, workload)'),
    ]


PCT = "percentunit"
RED_AT = lambda v: {"mode": "absolute", "steps": [{"color": "green", "value": None}, {"color": "red", "value": v}]}
ORANGE_AT = lambda v: {"mode": "absolute", "steps": [{"color": "green", "value": None}, {"color": "orange", "value": v}]}
HOURS = "* $__interval_ms / 3600000"


def hours(expr):
    """Integral over the dashboard range of a per-hour gauge: hours (or dollars)."""
    return f"sum_over_time(({expr})[$__range:$__interval]) {HOURS}"


# ---------------------------------------------------------------- Fleet
def fleet():
    d = Dash("gpuscale-fleet", "gpuscale / Fleet",
             "GPUs total, allocated and busy; idle allocated GPUs; cost and waste by namespace.",
             common_vars(), tags=["fleet"])
    d.row("Capacity now")
    d.stat("GPUs", "Physical GPUs the exporters report, lost ones included (gpuscale_exporter_gpus).",
           f'sum(max by (cluster, node) (gpuscale_exporter_gpus{{{C}, {N}}}))')
    d.stat("GPUs allocated", "GPUs held (whole or by at least one MIG instance) by a running pod.",
           f'count(count by (cluster, node, uuid) (gpu_pod_allocation{{{C}, {N}}})) or vector(0)')
    d.stat("GPUs busy", "GPUs (or GPUs with a MIG instance) more than 5% busy right now.",
           f'count(count by (cluster, node, uuid) ((gpu_utilization_ratio{{{C}, {N}}} or gpu_mig_sm_active_ratio{{{C}, {N}}}) > 0.05)) or vector(0)')
    d.stat("Allocated but idle", "GPU equivalents held by pods whose GPU is under 5% busy now (see the GPUAllocatedButIdle alert).",
           f'sum(gpuscale:gpu_allocation:share{{{ALLOC}}} and gpuscale:gpu_allocation_utilization:ratio{{{ALLOC}}} < 0.05) or vector(0)',
           decimals=1, thresholds=ORANGE_AT(0.5))
    d.stat("Allocated cost / h", "Price per hour of the allocated GPU share (gpu_price_usd_per_hour).",
           f'sum(gpuscale:gpu_allocation_cost_usd_per_hour{{{ALLOC}}}) or vector(0)', unit="currencyUSD")
    d.stat("Waste / h", "Price per hour of allocations in a waste class (idle replica, low compute, oversized).",
           f'sum(gpuscale:gpu_allocation_waste_cost_usd_per_hour{{{ALLOC}}}) or vector(0)', unit="currencyUSD",
           thresholds=ORANGE_AT(1))
    d.stat("Fleet cost / h", "Price per hour of every GPU seen in the last 6 hours, allocated or not: a lost GPU still costs.",
           f'sum(max by (cluster, node, uuid) (last_over_time(gpu_price_usd_per_hour{{{C}, {N}}}[6h]))) or vector(0)', unit="currencyUSD")
    d.stat("Average utilization", "Mean utilization over the GPUs shown; a GPU in MIG mode counts with its instances' mean SM activity.",
           f'avg(max by (cluster, node, gpu, uuid) (gpu_utilization_ratio{{{C}, {N}}}) or on (cluster, node, uuid) avg by (cluster, node, gpu, uuid) (max by (cluster, node, gpu, uuid, mig_uuid) (gpu_mig_sm_active_ratio{{{C}, {N}}})))', unit=PCT, decimals=0)
    d.stat("Lost GPUs", "GPUs NVML reports as fallen off the bus.",
           f'count(count by (cluster, node, uuid, gpu) (gpuscale_exporter_gpu_state{{{C}, {N}, state="lost"}} == 1)) or vector(0)', thresholds=RED_AT(1))
    d.stat("Firing GPU alerts", "gpuscale alerts firing now.",
           f'count(ALERTS{{alertstate="firing", alertname=~"GPU.*", {C}}}) or vector(0)', thresholds=RED_AT(1))
    d.stat("Exporters up", "gpuscale-exporter targets that answer, each counted once however many jobs scrape it.",
           f'count(count by (cluster, instance) (up{{job=~".*gpuscale-exporter.*", {C}}} == 1)) or vector(0)')
    d.stat("Pod mapping up", "Exporters that map GPUs to pods (kubelet pod-resources reachable).",
           f'sum(max by (cluster, node) (gpuscale_exporter_pod_mapping_up{{{C}, {N}}}))')
    d.row("Over time")
    d.ts("GPUs: total, allocated, busy", "Allocated = held by a pod; busy = more than 5% utilization.", [
        {"expr": f'sum(max by (cluster, node) (gpuscale_exporter_gpus{{{C}, {N}}}))', "legend": "total"},
        {"expr": f'count(count by (cluster, node, uuid) (gpu_pod_allocation{{{C}, {N}}}))', "legend": "allocated"},
        {"expr": f'count(count by (cluster, node, uuid) ((gpu_utilization_ratio{{{C}, {N}}} or gpu_mig_sm_active_ratio{{{C}, {N}}}) > 0.05))', "legend": "busy"},
        {"expr": f'sum(gpuscale:gpu_allocation:share{{{ALLOC}}} and gpuscale:gpu_allocation_utilization:ratio{{{ALLOC}}} < 0.05)', "legend": "allocated but idle"},
    ], unit="none")
    d.ts("Utilization by node: least busy 10", "Mean GPU utilization of the 10 least busy nodes (at 1,000 nodes a line per node is unreadable; the table below has every node).", [
        {"expr": f'bottomk(10, avg by (cluster, node) (max by (cluster, node, uuid) (gpu_utilization_ratio{{{C}, {N}}})))', "legend": "{{node}}"},
    ], unit=PCT, maxv=1, minv=0)
    d.row("Cost and waste by namespace")
    d.ts("Cost per hour by namespace", "Allocated GPU share × price, per namespace.", [
        {"expr": f'sum by (namespace) (namespace:gpu_cost_usd_per_hour:sum{{{C}, {NS}}})', "legend": "{{namespace}}"},
    ], unit="currencyUSD", custom={"stacking": {"mode": "normal", "group": "A"}, "fillOpacity": 40})
    d.ts("Waste per hour by class", "Price per hour of allocations in each waste class.", [
        {"expr": f'sum by (waste_class) (namespace:gpu_waste_cost_usd_per_hour:sum{{{C}, {NS}}})', "legend": "{{waste_class}}"},
    ], unit="currencyUSD", custom={"stacking": {"mode": "normal", "group": "A"}, "fillOpacity": 40})
    d.table("Namespaces over the time range",
            "GPU-hours allocated, utilization-weighted GPU-hours (busy GPU-hours) and cost over the dashboard's time range.", [
        {"expr": "sum by (namespace) (" + hours(f'namespace:gpu_allocated:sum{{{C}, {NS}}}') + ")", "legend": "GPU-hours"},
        {"expr": "sum by (namespace) (" + hours(f'namespace:gpu_utilized:sum{{{C}, {NS}}}') + ")", "legend": "busy GPU-hours"},
        {"expr": "sum by (namespace) (" + hours(f'namespace:gpu_cost_usd_per_hour:sum{{{C}, {NS}}}') + ")", "legend": "cost"},
        {"expr": "sum by (namespace) (" + hours(f'namespace:gpu_waste_cost_usd_per_hour:sum{{{C}, {NS}}}') + ")", "legend": "waste"},
    ], w=12, transformations=[
        {"id": "merge", "options": {}},
        {"id": "organize", "options": {"excludeByName": {"Time": True},
                                       "renameByName": {"Value #A": "GPU-hours", "Value #B": "busy GPU-hours",
                                                        "Value #C": "cost (USD)", "Value #D": "waste (USD)"}}}])
    d.table("Waste by namespace and class", "GPU equivalents in each waste class now.", [
        {"expr": f'sum by (namespace, waste_class) (namespace:gpu_waste:sum{{{C}, {NS}}})'},
    ], w=12)
    d.table("Allocated but idle", "Allocations under 5% busy on average over the last hour: who holds idle GPUs (one row per allocation, however many jobs scrape it).", [
        {"expr": f'max by (cluster, node, gpu, uuid, mig_uuid, namespace, pod, container, workload_kind, workload) (gpuscale:gpu_allocation_utilization:avg1h{{{ALLOC}}}) < 0.05'},
    ])
    d.table("GPUs by node", "Per node: GPUs, allocated GPU equivalents, mean utilization.", [
        {"expr": f'max by (node) (gpuscale_exporter_gpus{{{C}, {N}}})'},
        {"expr": f'sum by (node) (gpuscale:gpu_allocation:share{{{C}, {N}}})'},
        {"expr": f'avg by (node) (max by (cluster, node, uuid) (gpu_utilization_ratio{{{C}, {N}}}))'},
    ], transformations=[
        {"id": "merge", "options": {}},
        {"id": "organize", "options": {"excludeByName": {"Time": True},
                                       "renameByName": {"Value #A": "GPUs", "Value #B": "allocated", "Value #C": "utilization"}}}])
    pool = f'max by (cluster, node, node_pool) (gpu_node_info{{{C}, {N}, {P}}})'
    d.table("GPUs by node pool", "Per node pool (the $node_pool variable, from each exporter's Node object): nodes, GPUs, allocated GPU equivalents. A node whose exporter could not read its Node (gpuscale_exporter_node_info_up 0) is in no pool.", [
        {"expr": f'count by (node_pool) ({pool})'},
        {"expr": f'sum by (node_pool) (max by (cluster, node) (gpuscale_exporter_gpus{{{C}, {N}}}) * on (cluster, node) group_left (node_pool) {pool})'},
        {"expr": f'sum by (node_pool) (sum by (cluster, node) (gpuscale:gpu_allocation:share{{{C}, {N}}}) * on (cluster, node) group_left (node_pool) {pool})'},
    ], transformations=[
        {"id": "merge", "options": {}},
        {"id": "organize", "options": {"excludeByName": {"Time": True},
                                       "renameByName": {"Value #A": "nodes", "Value #B": "GPUs", "Value #C": "allocated"}}}])
    reclaimable_nodes(d)
    cost_per_work_ranking(d)
    return d


def reclaimable_nodes(d):
    """Fleet: GPU nodes that could go, what they cost meanwhile, what keeps them (docs/node-economics.md)."""
    pool = f'max by (cluster, node, node_pool) (gpu_node_info{{{C}, {N}, {P}}})'
    rec = f'max by (cluster, node, reason) (gpuscale:node_reclaimable:bool{{{C}, {N}}})'
    cost = f'max by (cluster, node, reason) (gpuscale:node_reclaimable_cost_usd_per_hour{{{C}, {N}}})'
    week = lambda e: f'sum by (node_pool) (sum_over_time(({e} * on (cluster, node) group_left (node_pool) {pool})[7d:5m])) * 300 / 3600'
    d.row("Reclaimable GPU nodes")
    d.stat("Reclaimable GPU nodes", "Nodes with no GPU allocated, or every allocated GPU idle, for 15 minutes, their facts known (gpuscale:node_reclaimable:bool).",
           f'count({rec}) or vector(0)', thresholds=ORANGE_AT(1))
    d.stat("Reclaimable cost / h", "The price per hour of the reclaimable nodes (gpu_node_price_usd_per_hour).",
           f'sum({cost}) or vector(0)', unit="currencyUSD", thresholds=ORANGE_AT(1))
    d.stat("Node facts known", "Exporters that read their node's facts (Node, its pods and budgets; gpuscale_exporter_node_facts_up 1). A node whose facts are unknown is never reclaimable.",
           f'count(max by (cluster, node) (gpuscale_exporter_node_facts_up{{{C}, {N}}}) == 1) or vector(0)')
    d.stat("GPU nodes on Spot", "Nodes whose capacity type label says Spot (gpu_node_capacity_info).",
           f'count(max by (cluster, node) (gpu_node_capacity_info{{{C}, {N}, capacity_type="spot"}})) or vector(0)')
    d.stat("Blockers", "Pods and node annotations that would keep GPU nodes if their GPU work left (gpu_node_blockers).",
           f'sum(max by (cluster, node) (gpu_node_blockers{{{C}, {N}}})) or vector(0)')
    d.stat("Spot price of the fleet / h", "What the GPU nodes shown would cost on Spot, from the price table (gpu_node_spot_price_usd_per_hour).",
           f'sum(max by (cluster, node) (gpu_node_spot_price_usd_per_hour{{{C}, {N}}})) or vector(0)', unit="currencyUSD")
    d.ts("GPUs by state (node facts)", "GPUs answering NVML, held by a pod, and active in the last collection, from the exporters' node facts.", [
        {"expr": f'sum by (state) (max by (cluster, node, state) (gpu_node_gpus{{{C}, {N}}}))', "legend": "{{state}}"},
    ], unit="none")
    d.ts("Reclaimable GPU nodes by reason", "unallocated: no GPU held for 15 minutes; idle: GPUs held, none active.", [
        {"expr": f'count by (reason) ({rec})', "legend": "{{reason}}"},
    ], unit="none")
    d.table("Reclaimable node-hours and cost per week by node pool",
            "Over the last 7 days (5-minute steps): hours that nodes of each pool were reclaimable, and what those hours cost.", [
        {"expr": week(rec)},
        {"expr": week(cost)},
    ], w=12, transformations=[
        {"id": "merge", "options": {}},
        {"id": "organize", "options": {"excludeByName": {"Time": True},
                                       "renameByName": {"Value #A": "node-hours", "Value #B": "cost (USD)"}}}])
    d.table("Top blockers by kind", "How many pods (or node annotations) of each blocker kind keep GPU nodes now (docs/node-economics.md).", [
        {"expr": f'sort_desc(count by (kind) (max by (cluster, node, namespace, pod, kind, detail) (gpu_node_blocker{{{C}, {N}}})))'},
    ], w=12)
    d.table("What keeps each GPU node", "Per node: the blocker's kind, the pod and the budget or volume at fault (at most --node-blockers-max per node).", [
        {"expr": f'max by (node, namespace, pod, kind, detail) (gpu_node_blocker{{{C}, {N}}})'},
    ], w=12)
    d.table("GPU node prices", "Per node: its instance and capacity type, its own price per hour and where it came from, and its instance type's Spot price.", [
        {"expr": f'max by (node, instance_type, capacity_type) (gpu_node_capacity_info{{{C}, {N}}})'},
        {"expr": f'max by (node, source) (gpu_node_price_usd_per_hour{{{C}, {N}}})'},
        {"expr": f'max by (node) (gpu_node_spot_price_usd_per_hour{{{C}, {N}}})'},
    ], w=12, transformations=[
        {"id": "merge", "options": {}},
        {"id": "organize", "options": {"excludeByName": {"Time": True, "Value #A": True},
                                       "renameByName": {"Value #B": "USD per hour", "Value #C": "Spot USD per hour"}}}])


def cost_per_work_ranking(d):
    """Fleet: workloads ranked by what their GPUs cost per million tokens."""
    WLS = f'{C}, {NS}, {WL}'
    d.row("Cost per unit of work")
    d.table("Workloads by cost per million tokens",
            "GPU cost per hour over prompt + generated tokens per hour (vLLM, TGI, Triton TensorRT-LLM counters), most expensive first; "
            "cost per 1,000 requests beside it. Only workloads that served tokens in the last 5 minutes. See docs/right-sizing.md.", [
        {"expr": f'sort_desc(namespace_workload:gpu_cost_usd_per_million_tokens:ratio{{{WLS}}})'},
        {"expr": f'namespace_workload:gpu_cost_usd_per_1k_requests:ratio{{{WLS}}}'},
        {"expr": f'namespace_workload:gpu_cost_usd_per_hour:sum{{{WLS}}} and namespace_workload:gpu_cost_usd_per_million_tokens:ratio{{{WLS}}}'},
    ], transformations=[
        {"id": "merge", "options": {}},
        {"id": "organize", "options": {"excludeByName": {"Time": True},
                                       "renameByName": {"Value #A": "USD per million tokens", "Value #B": "USD per 1,000 requests",
                                                        "Value #C": "USD per hour"}}},
        {"id": "sortBy", "options": {"sort": [{"field": "USD per million tokens", "desc": True}]}}])


# ---------------------------------------------------------------- Right-sizing
def rightsizing():
    d = Dash("gpuscale-rightsizing", "gpuscale / Right-sizing",
             "What limits each workload (idle, memory capacity, memory bandwidth, compute, host/input), how much of its GPU it uses, "
             "and what it costs per million tokens. gpuscale-advisor turns the same facts into MIG, GPU type, co-location and "
             "scale-to-zero recommendations (docs/right-sizing.md).",
             common_vars(), tags=["rightsizing"])
    A = ALLOC
    WLS = f'{C}, {NS}, {WL}'
    LW = "{{namespace}}/{{workload}}"
    d.row("Bottleneck")
    d.stat("GPUs idle", "GPU equivalents whose utilization averaged under 5 % over the last hour.",
           f'sum(namespace_workload:gpu_bottleneck:sum{{{WLS}, bottleneck="idle"}}) or vector(0)', decimals=1, thresholds=ORANGE_AT(0.5), w=6)
    d.panel("stat", "GPUs by bottleneck now", "GPU equivalents in each bottleneck class present now: memory_bandwidth (DRAM active ≥ 50 %, tensor < 50 %: keep the bandwidth), "
            "compute, host_input (utilization ≥ 50 %, SM active < 50 %), memory_capacity, balanced, unknown_no_gpm (pre-Hopper: not guessed).", [
        {"expr": f'sum by (bottleneck) (namespace_workload:gpu_bottleneck:sum{{{WLS}}})', "legend": "{{bottleneck}}"}], w=18, h=4, decimals=1)
    d.ts("GPUs by bottleneck", "GPU equivalents per bottleneck class over the last hour (first match: idle, memory_capacity, memory_bandwidth, compute, host_input, balanced, unknown_no_gpm).", [
        {"expr": f'sum by (bottleneck) (namespace_workload:gpu_bottleneck:sum{{{WLS}}})', "legend": "{{bottleneck}}"}],
        unit="none", custom={"stacking": {"mode": "normal", "group": "A"}, "fillOpacity": 40})
    d.table("Workloads and their bottleneck", "GPU equivalents of each workload per bottleneck class now.", [
        {"expr": f'namespace_workload:gpu_bottleneck:sum{{{WLS}}} > 0'}], w=12)
    d.row("Activity and memory fit")
    d.ts("SM active (GPM, 1h average)", "Fraction of SMs busy, busiest allocation per workload. NVIDIA: ≥ 0.8 needed for effective use, < 0.5 likely ineffective.", [
        {"expr": f'max by (namespace, workload) (gpuscale:gpu_allocation_sm_active:avg1h{{{A}}})', "legend": LW}], unit=PCT, minv=0, maxv=1, w=8)
    d.ts("Tensor active (GPM, 1h average)", "Tensor pipe activity, busiest allocation per workload: ≥ 50 % is compute-bound.", [
        {"expr": f'max by (namespace, workload) (gpuscale:gpu_allocation_tensor_active:avg1h{{{A}}})', "legend": LW}], unit=PCT, minv=0, maxv=1, w=8)
    d.ts("DRAM active (GPM, 1h average)", "Memory bandwidth in use, busiest allocation per workload (~0.8 is the achievable peak): ≥ 50 % is bandwidth-bound.", [
        {"expr": f'max by (namespace, workload) (gpuscale:gpu_allocation_dram_active:avg1h{{{A}}})', "legend": LW}], unit=PCT, minv=0, maxv=1, w=8)
    d.ts("Peak memory of its GPU or slice (1h)", "Peak memory used over the device's or MIG instance's memory: ≥ 90 % is capacity-bound; low with low activity is a MIG or co-location candidate.", [
        {"expr": f'max by (namespace, workload) (gpuscale:gpu_allocation_memory_used:max1h{{{A}}})', "legend": LW}], unit=PCT, minv=0, maxv=1)
    d.table("Peak VRAM per workload over the range", "Highest memory any pod of the workload used on one GPU or MIG instance over the dashboard range: what a smaller GPU or slice must hold (plus headroom).", [
        {"expr": f'max by (namespace, workload) (max_over_time(gpu_pod_memory_used_bytes{{{A}}}[$__range]))'}], w=12,
        overrides=[{"matcher": {"id": "byName", "options": "Value"}, "properties": [{"id": "unit", "value": "bytes"}]}])
    d.row("Cost per unit of work")
    d.ts("Cost per million tokens", "GPU cost per hour over prompt + generated tokens per hour.", [
        {"expr": f'namespace_workload:gpu_cost_usd_per_million_tokens:ratio{{{WLS}}}', "legend": LW}], unit="currencyUSD", w=8)
    d.ts("Cost per 1,000 requests", "GPU cost per hour over successful requests per hour, per 1,000.", [
        {"expr": f'namespace_workload:gpu_cost_usd_per_1k_requests:ratio{{{WLS}}}', "legend": LW}], unit="currencyUSD", w=8)
    d.ts("Tokens per second", "Prompt and generated tokens per second by workload and framework.", [
        {"expr": f'sum by (namespace, workload, token) (namespace_workload:serving_tokens:rate5m{{{WLS}}})', "legend": LW + " {{token}}"}], unit="none", w=8)
    d.table("Idle GPU-hours over the range", "GPU-hours each workload held while its GPU was under 5 % busy: scale-to-zero candidates (check with gpuscale-replay).", [
        {"expr": "sum by (namespace, workload) (" + hours(f'gpuscale:gpu_allocation:share{{{A}}} * (gpuscale:gpu_allocation_utilization:ratio{{{A}}} < bool 0.05)') + ")"}], w=12)
    d.table("Cost over the range", "GPU cost of each workload over the dashboard range.", [
        {"expr": "sum by (namespace, workload) (" + hours(f'namespace_workload:gpu_cost_usd_per_hour:sum{{{WLS}}}') + ")"}], w=12,
        overrides=[{"matcher": {"id": "byName", "options": "Value"}, "properties": [{"id": "unit", "value": "currencyUSD"}]}])
    return d

def node_gpu():
    v = common_vars()
    # Raw device panels: loading All of 1,000 nodes is ~8,000 series a
    # panel. Start on one node (Grafana picks the first value).
    next(x for x in v if x["name"] == "node")["current"] = {}
    v.append(qvar("gpu", "GPU", f'label_values(gpu_info{{{C}, {N}}}, gpu)'))
    d = Dash("gpuscale-node-gpu", "gpuscale / Node & GPU",
             "Every device metric of gpuscale-exporter per node and GPU: utilization, memory, power, thermal, clocks, throttle reasons, interconnect, XID/ECC, MIG, processes, exporter health.",
             v, tags=["node"])
    L = "{{node}} gpu {{gpu}}"
    d.row("Inventory and health")
    d.table("GPUs", "gpu_info: model, driver, CUDA, PCI bus, serial, VBIOS, architecture, MIG mode, temperature thresholds, maximum clocks.", [
        {"expr": f'max without (job, instance) (gpu_info{{{DEV}}})'}], w=16)
    d.table("GPU state", "gpuscale_exporter_gpu_state: ok, lost (fallen off the bus) or error; a GPU that answers with no state series is ok (the fleet profile sends only the other states).", [
        {"expr": f'max by (cluster, node, gpu, uuid, state) (gpuscale_exporter_gpu_state{{{DEV}}}) == 1 or label_replace(max by (cluster, node, gpu, uuid) (gpu_info{{{DEV}}}), "state", "ok", "", "")'}], w=8)
    d.table("PCIe links below their maximum", "GPUs whose PCIe link trained narrower (A: width) or slower (B: generation) than its maximum, with the maximum (GPUPCIeLinkDegraded; the generation drops at idle on many boards). Empty when every link is at its best; the full profile only.", [
        {"expr": f'max without (job, instance) (gpu_pcie_link_width{{{DEV}}}) < max without (job, instance) (gpu_pcie_link_max_width{{{DEV}}})'},
        {"expr": f'max without (job, instance) (gpu_pcie_link_generation{{{DEV}}}) < max without (job, instance) (gpu_pcie_link_max_generation{{{DEV}}})'}], w=8)
    d.table("NVLink down, ECC off, fabric", "NVLink links down (GPUNVLinkDown), ECC off now or after the next reset (GPUECCDisabled), NVLink fabric state on NVSwitch systems (GPUFabricNotReady). Empty rows for links and ECC mean healthy.", [
        {"expr": f'max without (job, instance) (gpu_nvlink_links{{{DEV}, state="inactive"}}) > 0'},
        {"expr": f'max without (job, instance) (gpu_ecc_enabled{{{DEV}}}) == 0'},
        {"expr": f'max without (job, instance) (gpu_fabric_state{{{DEV}}}) == 1'}], w=16)
    d.row("Utilization")
    d.ts("GPU utilization", "Share of time a kernel ran (NVML utilization; a duty cycle, not a measure of how full the SMs are).", [
        {"expr": f'max without (job, instance) (gpu_utilization_ratio{{{DEV}}})', "legend": L}], unit=PCT, minv=0, maxv=1, w=8)
    d.ts("Memory controller utilization", "Share of time device memory was read or written.", [
        {"expr": f'max without (job, instance) (gpu_memory_utilization_ratio{{{DEV}}})', "legend": L}], unit=PCT, minv=0, maxv=1, w=8)
    d.ts("SM active / occupancy (GPM)", "Hopper+: fraction of SMs busy and warp occupancy.", [
        {"expr": f'max without (job, instance) (gpu_sm_active_ratio{{{DEV}}})', "legend": L + " active"},
        {"expr": f'max without (job, instance) (gpu_sm_occupancy_ratio{{{DEV}}})', "legend": L + " occupancy"}], unit=PCT, minv=0, maxv=1, w=8)
    d.ts("Tensor / DRAM / graphics active (GPM)", "Hopper+: tensor pipe activity, DRAM bandwidth utilization and graphics engine activity.", [
        {"expr": f'max without (job, instance) (gpu_tensor_active_ratio{{{DEV}}})', "legend": L + " tensor"},
        {"expr": f'max without (job, instance) (gpu_dram_active_ratio{{{DEV}}})', "legend": L + " dram"},
        {"expr": f'max without (job, instance) (gpu_graphics_active_ratio{{{DEV}}})', "legend": L + " graphics"}], unit=PCT, minv=0, maxv=1, w=8)
    d.ts("Encoder / decoder", "NVENC / NVDEC utilization.", [
        {"expr": f'max without (job, instance) (gpu_encoder_utilization_ratio{{{DEV}}})', "legend": L + " enc"},
        {"expr": f'max without (job, instance) (gpu_decoder_utilization_ratio{{{DEV}}})', "legend": L + " dec"}], unit=PCT, minv=0, maxv=1, w=8)
    d.ts("Performance state", "P-state: 0 = fastest.", [
        {"expr": f'max without (job, instance) (gpu_performance_state{{{DEV}}})', "legend": L}], unit="none", w=8, decimals=0)
    d.row("Memory")
    d.ts("Memory used", "Device memory in use.", [
        {"expr": f'max without (job, instance) (gpu_memory_used_bytes{{{DEV}}})', "legend": L}], unit="bytes", w=8)
    d.ts("Memory used / total", "Fraction of device memory in use.", [
        {"expr": f'max without (job, instance) (gpu_memory_used_bytes{{{DEV}}}) / max without (job, instance) (gpu_memory_total_bytes{{{DEV}}})', "legend": L}], unit=PCT, minv=0, maxv=1, w=8)
    d.table("Memory", "Total, free and driver-reserved device memory.", [
        {"expr": f'max without (job, instance) (gpu_memory_total_bytes{{{DEV}}})'},
        {"expr": f'max without (job, instance) (gpu_memory_free_bytes{{{DEV}}})'},
        {"expr": f'max without (job, instance) (gpu_memory_reserved_bytes{{{DEV}}})'}], w=8, transformations=[
        {"id": "merge", "options": {}},
        {"id": "organize", "options": {"excludeByName": {"Time": True, "job": True, "instance": True},
                                       "renameByName": {"Value #A": "total", "Value #B": "free", "Value #C": "reserved"}}}],
        overrides=[{"matcher": {"id": "byRegexp", "options": "total|free|reserved"},
                    "properties": [{"id": "unit", "value": "bytes"}]}])
    d.row("Power and thermal")
    d.ts("Power", "Power draw against the enforced power limit and the board's default limit (an enforced limit below the default was lowered).", [
        {"expr": f'max without (job, instance) (gpu_power_usage_watts{{{DEV}}})', "legend": L},
        {"expr": f'max without (job, instance) (gpu_power_limit_watts{{{DEV}}})', "legend": L + " limit"},
        {"expr": f'max without (job, instance) (gpu_power_limit_default_watts{{{DEV}}})', "legend": L + " default limit"}], unit="watt", w=8)
    d.ts("Energy (average power)", "Rate of the energy counter: average power over the rate window.", [
        {"expr": f'max without (job, instance) (rate(gpu_energy_consumed_joules_total{{{DEV}}}[$__rate_interval]))', "legend": L}], unit="watt", w=8)
    d.ts("Temperature", "GPU and memory temperature against the slowdown threshold.", [
        {"expr": f'max without (job, instance) (gpu_temperature_celsius{{{DEV}}})', "legend": L},
        {"expr": f'max without (job, instance) (gpu_memory_temperature_celsius{{{DEV}}})', "legend": L + " memory"},
        {"expr": f'max without (job, instance) (gpu_temperature_threshold_celsius{{{DEV}, threshold="slowdown"}})', "legend": L + " slowdown"}],
        unit="celsius", w=8)
    d.table("Temperature thresholds", "Slowdown and memory max operating temperatures, which the alerts compare with (all four thresholds are gpu_info labels).", [
        {"expr": f'max without (job, instance) (gpu_temperature_threshold_celsius{{{DEV}}})'}], w=8)
    d.ts("Fan speed", "Fan speed as a fraction of the maximum (absent on passively cooled boards).", [
        {"expr": f'max without (job, instance) (gpu_fan_speed_ratio{{{DEV}}})', "legend": L}], unit=PCT, minv=0, maxv=1, w=8)
    d.ts("Clocks", "SM and memory clocks against their maximum.", [
        {"expr": f'max without (job, instance) (gpu_clock_hertz{{{DEV}, clock=~"sm|memory"}})', "legend": L + " {{clock}}"},
        {"expr": f'max without (job, instance) (gpu_clock_max_hertz{{{DEV}, clock="sm"}})', "legend": L + " sm max"}], unit="hertz", w=8)
    d.row("Throttling")
    d.ts("Clock event reasons", "Reasons holding clocks down right now (1 = active). gpu_idle is normal when idle.", [
        {"expr": f'max without (job, instance) (gpu_clock_event_active{{{DEV}}}) == 1', "legend": L + " {{reason}}"}], unit="none", w=12,
        custom={"drawStyle": "points", "pointSize": 4, "showPoints": "always"})
    d.ts("Time throttled", "Share of time clocks were held below the requested clocks, by policy (NVML violation counters).", [
        {"expr": f'max without (job, instance) (rate(gpu_clock_event_seconds_total{{{DEV}}}[$__rate_interval])) > 0', "legend": L + " {{policy}}"}], unit=PCT, w=12)
    d.row("Interconnect")
    d.ts("PCIe throughput", "Bytes per second to (tx) and from (rx) the GPU over PCIe.", [
        {"expr": f'max without (job, instance) (gpu_pcie_transmit_bytes_per_second{{{DEV}}})', "legend": L + " tx"},
        {"expr": f'max without (job, instance) (gpu_pcie_receive_bytes_per_second{{{DEV}}})', "legend": L + " rx"}], unit="Bps", w=8)
    d.ts("PCIe replays", "PCIe replay rate: link errors corrected by retransmission.", [
        {"expr": f'max without (job, instance) (rate(gpu_pcie_replays_total{{{DEV}}}[$__rate_interval]))', "legend": L}], unit="ops", w=8)
    d.ts("NVLink throughput", "Bytes per second over all NVLink links of the GPU.", [
        {"expr": f'sum by (node, gpu) (max without (job, instance) (rate(gpu_nvlink_transmit_bytes_total{{{DEV}}}[$__rate_interval])))', "legend": L + " tx"},
        {"expr": f'sum by (node, gpu) (max without (job, instance) (rate(gpu_nvlink_receive_bytes_total{{{DEV}}}[$__rate_interval])))', "legend": L + " rx"}], unit="Bps", w=8)
    d.table("NVLink errors", "NVLink error counters per link and type (non-zero only).", [
        {"expr": f'max without (job, instance) (gpu_nvlink_errors_total{{{DEV}}}) > 0'}], w=12)
    d.row("Errors: XID, ECC, row remapping, page retirement")
    d.table("XIDs", "XID errors since the exporter started: count and time since last seen. Hardware XIDs (48, 62, 64, 74, 79, 92, 94, 95, 119, 120) raise GPUCriticalXid.", [
        {"expr": f'max without (job, instance) (gpu_xid_errors_total{{{DEV}}})'},
        {"expr": f'time() - max without (job, instance) (gpu_xid_last_seen_timestamp_seconds{{{DEV}}})'}], w=12, transformations=[
        {"id": "merge", "options": {}},
        {"id": "organize", "options": {"excludeByName": {"Time": True, "job": True, "instance": True},
                                       "renameByName": {"Value #A": "count", "Value #B": "last seen (ago)"}}}],
        overrides=[{"matcher": {"id": "byName", "options": "last seen (ago)"}, "properties": [{"id": "unit", "value": "s"}]}])
    d.ts("ECC errors", "ECC error counters (volatile: since driver load; aggregate: lifetime).", [
        {"expr": f'max without (job, instance) (gpu_ecc_errors_total{{{DEV}}})', "legend": L + " {{type}} {{scope}}"}], unit="none", w=12)
    d.table("Row remapping and page retirement", "Remapped rows by cause, remap pending/failure (Ampere+), retired pages by cause and pending retirement (older GPUs).", [
        {"expr": f'max without (job, instance) (gpu_remapped_rows{{{DEV}}})'},
        {"expr": f'max without (job, instance) (gpu_remapped_rows_pending{{{DEV}}})'},
        {"expr": f'max without (job, instance) (gpu_remapped_rows_failure{{{DEV}}})'},
        {"expr": f'max without (job, instance) (gpu_retired_pages{{{DEV}}})'},
        {"expr": f'max without (job, instance) (gpu_retired_pages_pending{{{DEV}}})'}], w=24, transformations=[])
    d.row("MIG")
    d.table("MIG instances", "gpu_mig_info: profile, GPU and compute instance of each MIG device.", [
        {"expr": f'max without (job, instance) (gpu_mig_info{{{DEV}}})'}], w=12)
    d.ts("MIG memory used", "Memory used per MIG instance against its size.", [
        {"expr": f'max without (job, instance) (gpu_mig_memory_used_bytes{{{DEV}}})', "legend": L + " {{mig_uuid}}"},
        {"expr": f'max without (job, instance) (gpu_mig_memory_total_bytes{{{DEV}}})', "legend": L + " {{mig_uuid}} total"}], unit="bytes", w=12)
    d.ts("MIG SM active / occupancy (GPM)", "Per MIG instance.", [
        {"expr": f'max without (job, instance) (gpu_mig_sm_active_ratio{{{DEV}}})', "legend": L + " {{mig_uuid}} active"},
        {"expr": f'max without (job, instance) (gpu_mig_sm_occupancy_ratio{{{DEV}}})', "legend": L + " {{mig_uuid}} occupancy"}], unit=PCT, minv=0, maxv=1)
    d.ts("MIG tensor / DRAM active (GPM)", "Per MIG instance.", [
        {"expr": f'max without (job, instance) (gpu_mig_tensor_active_ratio{{{DEV}}})', "legend": L + " {{mig_uuid}} tensor"},
        {"expr": f'max without (job, instance) (gpu_mig_dram_active_ratio{{{DEV}}})', "legend": L + " {{mig_uuid}} dram"}], unit=PCT, minv=0, maxv=1)
    d.row("Processes")
    d.table("GPU processes", "Memory, SM and memory utilization per GPU process, with the pod it belongs to.", [
        {"expr": f'max without (job, instance) (gpu_process_memory_used_bytes{{{DEV}}})'},
        {"expr": f'max without (job, instance) (gpu_process_sm_utilization_ratio{{{DEV}}})'},
        {"expr": f'max without (job, instance) (gpu_process_memory_utilization_ratio{{{DEV}}})'}], transformations=[
        {"id": "merge", "options": {}},
        {"id": "organize", "options": {"excludeByName": {"Time": True, "job": True, "instance": True},
                                       "renameByName": {"Value #A": "memory", "Value #B": "SM util", "Value #C": "memory util"}}}],
        overrides=[{"matcher": {"id": "byName", "options": "memory"}, "properties": [{"id": "unit", "value": "bytes"}]},
                   {"matcher": {"id": "byRegexp", "options": ".*util"}, "properties": [{"id": "unit", "value": PCT}]}])
    d.table("Processes without a pod", "GPU processes that belong to no pod, with why (pod_unknown: a zombie of a deleted pod, GPUZombieProcess) and the memory each holds.", [
        {"expr": f'max by (node, gpu, uuid, mig_uuid, pid, reason) (gpu_process_unattributed{{{DEV}}})'},
        {"expr": f'max by (node, gpu, uuid, mig_uuid, pid) (gpu_process_memory_used_bytes{{{DEV}}}) and on (node, uuid, pid) gpu_process_unattributed{{{DEV}}}'}],
        transformations=[
        {"id": "merge", "options": {}},
        {"id": "organize", "options": {"excludeByName": {"Time": True, "Value #A": True}, "renameByName": {"Value #B": "memory"}}}],
        overrides=[{"matcher": {"id": "byName", "options": "memory"}, "properties": [{"id": "unit", "value": "bytes"}]}])
    d.row("Exporter")
    d.stat("NVML up", "1 while NVML is initialised.", f'min(gpuscale_exporter_nvml_up{{{C}, {N}}})', thresholds={
        "mode": "absolute", "steps": [{"color": "red", "value": None}, {"color": "green", "value": 1}]})
    d.stat("GPUs reported", "Devices NVML reports on the selected nodes.", f'sum(max by (cluster, node) (gpuscale_exporter_gpus{{{C}, {N}}}))')
    d.stat("GPUs expected", "GPUs the exporters' state files remember (one per PCI bus id seen); more than reported = a GPU is missing (GPUMissing).",
           f'sum(max by (cluster, node) (gpuscale_exporter_gpus_expected{{{C}, {N}}}))')
    d.stat("State file OK", "1 while every exporter's state file (--state-file) was read or rebuilt and its last write succeeded.",
           f'min(gpuscale_exporter_state_file_ok{{{C}, {N}}})', thresholds={
               "mode": "absolute", "steps": [{"color": "red", "value": None}, {"color": "green", "value": 1}]})
    d.stat("Last collection", "Seconds since the last successful collection (oldest exporter).",
           f'max(time() - gpuscale_exporter_last_collection_timestamp_seconds{{{C}, {N}}})', unit="s", thresholds=ORANGE_AT(30))
    d.stat("Collections / s", "Collection cycles per second.", f'sum(max by (cluster, node) (rate(gpuscale_exporter_collections_total{{{C}, {N}}}[$__rate_interval])))', unit="ops")
    d.stat("Collection time", "Duration of the last whole collection cycle (slowest exporter).", f'max(gpuscale_exporter_collection_duration_seconds{{{C}, {N}}})', unit="s")
    d.stat("Failing collectors", "Collectors whose last run failed.", f'sum(max by (cluster, node, collector) (1 - gpuscale_exporter_collector_success{{{C}, {N}}}))', thresholds=ORANGE_AT(1))
    d.ts("Collector duration", "Duration of each collector's last run.", [
        {"expr": f'max by (collector) (gpuscale_exporter_collector_duration_seconds{{{C}, {N}}})', "legend": "{{collector}}"}], unit="s")
    d.ts("NVML errors", "Failing NVML calls per second by function and error.", [
        {"expr": f'sum by (function, error) (max by (cluster, node, function, error) (rate(gpuscale_exporter_nvml_errors_total{{{C}, {N}}}[$__rate_interval])))', "legend": "{{function}} {{error}}"}], unit="ops")
    # process_* is every exporter's name: the exporter pod's identity label keeps other jobs out.
    X = f'{C}, {N}, exporter_pod!=""'
    d.ts("Exporter memory", "Resident and virtual memory of each exporter process.", [
        {"expr": f'max without (job, instance) (process_resident_memory_bytes{{{X}}})', "legend": "{{node}} resident"},
        {"expr": f'max without (job, instance) (process_virtual_memory_bytes{{{X}}})', "legend": "{{node}} virtual"}], unit="bytes")
    d.ts("Exporter CPU and threads", "CPU seconds per second of each exporter process, and its threads.", [
        {"expr": f'max without (job, instance) (rate(process_cpu_seconds_total{{{X}}}[$__rate_interval]))', "legend": "{{node}} CPU"},
        {"expr": f'max without (job, instance) (process_threads{{{X}}})', "legend": "{{node}} threads"}], unit="none")
    d.ts("Exporter file descriptors", "Open file descriptors of each exporter process and its limit.", [
        {"expr": f'max without (job, instance) (process_open_fds{{{X}}})', "legend": "{{node}} open"},
        {"expr": f'max without (job, instance) (process_max_fds{{{X}}})', "legend": "{{node}} limit"}], unit="none")
    d.stat("Exporter uptime", "Time since the most recently started exporter process started.",
           f'min(time() - process_start_time_seconds{{{X}}})', unit="s", w=12, h=8)
    d.table("Exporter versions", "gpuscale_exporter_build_info per exporter.", [
        {"expr": f'max without (job, instance) (gpuscale_exporter_build_info{{{C}, {N}}})'}])
    d.stat("DCGM up", "With --dcgm-hostengine: 1 while every exporter's DCGM reader reads from its node's host engine (gpuscale_exporter_dcgm_up; its reason label says why not).",
           f'min(gpuscale_exporter_dcgm_up{{{C}, {N}}})', thresholds={
               "mode": "absolute", "steps": [{"color": "red", "value": None}, {"color": "green", "value": 1}]})
    d.stat("GPUs without activity", "GPUs whose SM, tensor and DRAM activity comes from neither GPM nor DCGM (gpu_activity_source_info source none): the bottleneck rules class them from NVML proxies.",
           f'count(max without (job, instance) (gpu_activity_source_info{{{C}, {N}, source="none"}})) or vector(0)', thresholds=ORANGE_AT(1))
    d.table("DCGM fields left out", "Profiling fields a host engine does not watch, by field and reason (multi_pass, not_supported, refused), and on how many GPUs.", [
        {"expr": f'max without (job, instance) (gpuscale_exporter_dcgm_fields_left_out{{{C}, {N}}})'}], w=16)
    d.row("Pod mapping")
    d.stat("Pod mapping up", "Exporters whose last kubelet pod-resources refresh succeeded.",
           f'min(gpuscale_exporter_pod_mapping_up{{{C}, {N}}})', thresholds={
               "mode": "absolute", "steps": [{"color": "red", "value": None}, {"color": "green", "value": 1}]})
    d.stat("Pod metadata stale", "Exporters working from stale pod metadata (Kubernetes API watch failing).",
           f'sum(gpuscale_exporter_pod_metadata_stale{{{C}, {N}}})', thresholds=ORANGE_AT(1))
    d.stat("Pods on the nodes", "Non-terminal pods on the selected nodes, from the exporters' pod watch.",
           f'sum(max by (cluster, node) (gpuscale_exporter_pods{{{C}, {N}}}))')
    d.stat("Pod refresh time", "Duration of the last kubelet pod-resources refresh (slowest exporter).",
           f'max(gpuscale_exporter_pod_refresh_duration_seconds{{{C}, {N}}})', unit="s")
    d.stat("Pod join time", "Duration of the last join of GPU data with the pod map (slowest exporter).",
           f'max(gpuscale_exporter_pod_join_duration_seconds{{{C}, {N}}})', unit="s")
    d.stat("Pod refresh errors", "Failed kubelet refreshes over the time range.",
           f'sum(increase(gpuscale_exporter_pod_refresh_errors_total{{{C}, {N}}}[$__range]))', decimals=0, thresholds=ORANGE_AT(1))
    d.stat("Unattributed processes", "GPU processes of the last collection that could not be joined to a pod.",
           f'sum(gpuscale_exporter_unattributed_processes{{{C}, {N}}})', thresholds=ORANGE_AT(1), w=8)
    d.ts("Unattributed processes by reason", "GPU processes without a pod, by reason (each pid counted once, per second).", [
        {"expr": f'sum by (reason) (gpuscale_exporter_unattributed_processes{{{C}, {N}}})', "legend": "{{reason}} now"},
        {"expr": f'sum by (reason) (rate(gpuscale_exporter_unattributed_pids_total{{{C}}}[$__rate_interval]))', "legend": "{{reason}} new/s"}],
        unit="none", w=24)
    d.stat("Exporters without DRA mapping", "Exporters whose ResourceSlice watch is down, or whose cluster serves no resource.k8s.io: DRA claims cannot be mapped to GPUs.",
           f'count(gpuscale_exporter_dra_mapping_up{{{C}, {N}}}) - sum(gpuscale_exporter_dra_mapping_up{{{C}, {N}}})', decimals=0, thresholds=ORANGE_AT(1), w=8)
    d.ts("Attributed devices by path", "GPUs and MIG instances attributed to pods through the device plugin or DRA ResourceClaims.", [
        {"expr": f'sum by (allocation) (max by (cluster, node, allocation) (gpuscale_exporter_pod_attributed_devices{{{C}, {N}}}))', "legend": "{{allocation}}"}],
        unit="none", w=8)
    d.stat("Exporters without their node pool", "Exporters whose last read of their Node object failed (gpuscale_exporter_node_info_up 0; the reason label says why, e.g. forbidden: no get on nodes): their node is in no node pool.",
           f'sum(1 - max by (cluster, node) (gpuscale_exporter_node_info_up{{{C}, {N}}}))', decimals=0, thresholds=ORANGE_AT(1), w=8)
    d.ts("DRA devices without a pod", "Devices held through DRA claims that got no pod labels, by reason.", [
        {"expr": f'sum by (reason) (gpuscale_exporter_dra_devices_unattributed{{{C}, {N}}})', "legend": "{{reason}}"}],
        unit="none", w=8)
    return d


# ---------------------------------------------------------------- Workloads
def workloads():
    v = common_vars()
    v.append(qvar("pod", "Pod", f'label_values(gpu_pod_allocation{{{C}, {N}, {NS}, {WL}}}, pod)'))
    d = Dash("gpuscale-workloads", "gpuscale / Workloads",
             "GPU utilization, memory, power and cost per namespace, workload and pod.", v, tags=["workloads"])
    A = f'{ALLOC}, {POD}'
    WLS = f'{C}, {NS}, {WL}'
    LP = "{{namespace}}/{{pod}} gpu {{gpu}} {{mig_uuid}}"
    d.row("Summary")
    d.stat("GPUs allocated", "GPU equivalents held (MIG instances count their share).", f'sum(gpuscale:gpu_allocation:share{{{A}}}) or vector(0)', decimals=2)
    d.stat("Busy GPU equivalents", "Allocated share × utilization.", f'sum(gpuscale:gpu_allocation:share{{{A}}} * gpuscale:gpu_allocation_utilization:ratio{{{A}}}) or vector(0)', decimals=2)
    d.stat("Cost / h", "Allocated share × GPU price.", f'sum(gpuscale:gpu_allocation_cost_usd_per_hour{{{A}}}) or vector(0)', unit="currencyUSD")
    d.stat("Waste / h", "Cost per hour of allocations in a waste class.", f'sum(gpuscale:gpu_allocation_waste_cost_usd_per_hour{{{A}}}) or vector(0)', unit="currencyUSD", thresholds=ORANGE_AT(1))
    d.stat("Pods", "Pods holding a GPU or MIG instance.", f'count(count by (cluster, namespace, pod) (gpu_pod_allocation{{{A}}})) or vector(0)')
    d.stat("Idle allocations", "Allocations under 5% busy now.", f'count(max without (job, instance) (gpuscale:gpu_allocation_utilization:ratio{{{A}}}) < 0.05) or vector(0)', thresholds=ORANGE_AT(1))
    d.row("Per pod")
    d.ts("Utilization", "Utilization of the GPU or MIG instance each pod holds (GPU utilization; GPM SM activity for MIG).", [
        {"expr": f'max without (job, instance) (gpuscale:gpu_allocation_utilization:ratio{{{A}}})', "legend": LP}], unit=PCT, minv=0, maxv=1)
    d.ts("SM utilization of the pod's processes", "Sum of the pod's processes' SM utilization per GPU (meaningful on shared GPUs).", [
        {"expr": f'max without (job, instance) (gpu_pod_sm_utilization_ratio{{{A}}})', "legend": "{{namespace}}/{{pod}} gpu {{gpu}}"}], unit=PCT, minv=0)
    d.ts("Memory used by the pod's processes", "GPU memory of the pod's processes per GPU.", [
        {"expr": f'max without (job, instance) (gpu_pod_memory_used_bytes{{{A}}})', "legend": "{{namespace}}/{{pod}} gpu {{gpu}}"}], unit="bytes")
    d.ts("Memory used / size", "How full the GPU or MIG instance each pod holds is (GPUPodMemoryNearlyFull fires above 95%).", [
        {"expr": f'max without (job, instance) (gpuscale:gpu_allocation_memory_used:ratio{{{A}}})', "legend": LP}], unit=PCT, minv=0, maxv=1)
    d.ts("Power (by GPU share)", "GPU power draw attributed to each pod by its share of the GPU.", [
        {"expr": f'sum by (namespace, pod) (gpuscale:gpu_allocation:share{{{A}}} * on (cluster, node, uuid) group_left () max by (cluster, node, uuid) (gpu_power_usage_watts{{{C}, {N}}}))',
         "legend": "{{namespace}}/{{pod}}"}], unit="watt")
    d.ts("Tensor activity (exclusive GPUs, GPM)", "Tensor pipe activity of GPUs held by exactly one pod (Hopper+).", [
        {"expr": f'max without (job, instance) (gpu_tensor_active_ratio{{{A}, pod!=""}})', "legend": "{{namespace}}/{{pod}} gpu {{gpu}}"},
        {"expr": f'max without (job, instance) (gpu_mig_tensor_active_ratio{{{A}, pod!=""}})', "legend": "{{namespace}}/{{pod}} {{mig_uuid}}"}], unit=PCT, minv=0, maxv=1)
    d.row("Per workload: cost")
    d.ts("Cost per hour by workload", "Allocated share × price per workload.", [
        {"expr": f'namespace_workload:gpu_cost_usd_per_hour:sum{{{WLS}}}', "legend": "{{namespace}}/{{workload}}"}], unit="currencyUSD",
        custom={"stacking": {"mode": "normal", "group": "A"}, "fillOpacity": 40})
    d.ts("Allocated vs busy GPUs by workload", "GPU equivalents held and utilization-weighted.", [
        {"expr": f'namespace_workload:gpu_allocated:sum{{{WLS}}}', "legend": "{{namespace}}/{{workload}} allocated"},
        {"expr": f'namespace_workload:gpu_utilized:sum{{{WLS}}}', "legend": "{{namespace}}/{{workload}} busy"}], unit="none")
    d.table("Workloads over the time range", "GPU-hours, busy GPU-hours and cost per workload over the dashboard's range; last hour from the hourly recording rules.", [
        {"expr": hours(f'namespace_workload:gpu_allocated:sum{{{WLS}}}')},
        {"expr": hours(f'namespace_workload:gpu_utilized:sum{{{WLS}}}')},
        {"expr": hours(f'namespace_workload:gpu_cost_usd_per_hour:sum{{{WLS}}}')},
        {"expr": f'namespace_workload:gpu_cost_usd:1h{{{WLS}}}'}], transformations=[
        {"id": "merge", "options": {}},
        {"id": "organize", "options": {"excludeByName": {"Time": True},
                                       "renameByName": {"Value #A": "GPU-hours", "Value #B": "busy GPU-hours",
                                                        "Value #C": "cost (USD)", "Value #D": "cost last hour (USD)"}}}])
    d.table("Pods: waste class", "Allocations in a waste class, with their average utilization and peak memory over the last hour.", [
        {"expr": f'sum without (job, instance) (gpuscale:gpu_allocation_waste:share{{{A}}})'},
        {"expr": f'max without (job, instance) (gpuscale:gpu_allocation_utilization:avg1h{{{A}}}) and ignoring (waste_class) sum without (job, instance) (gpuscale:gpu_allocation_waste:share{{{A}}})'},
        {"expr": f'max without (job, instance) (gpuscale:gpu_allocation_memory_used:max1h{{{A}}}) and ignoring (waste_class) sum without (job, instance) (gpuscale:gpu_allocation_waste:share{{{A}}})'}], transformations=[
        {"id": "merge", "options": {}},
        {"id": "organize", "options": {"excludeByName": {"Time": True, "job": True, "instance": True},
                                       "renameByName": {"Value #A": "GPU share", "Value #B": "utilization 1h", "Value #C": "peak memory 1h"}}}])
    d.table("Pod processes", "GPU processes of the selected pods.", [
        {"expr": f'max without (job, instance) (gpu_process_memory_used_bytes{{{A}, pod!=""}})'}])
    d.table("Pod identity", "gpu_pod_info: one row per GPU pod with its workload, kind and allowlisted labels; gpuscale-adapter's presets join inference servers' series on it by (namespace, pod).", [
        {"expr": f'max without (job, instance) (gpu_pod_info{{{A}}})'}], transformations=[
        {"id": "organize", "options": {"excludeByName": {"Time": True, "Value": True, "__name__": True, "job": True, "instance": True}}}])
    return d


# ---------------------------------------------------------------- Autoscaling
def autoscaling():
    v = common_vars()
    v.append(qvar("metric", "Adapter metric", f'label_values(gpuscale_adapter_metric_value{{{C}}}, metric)'))
    d = Dash("gpuscale-autoscaling", "gpuscale / Autoscaling",
             "gpuscale-adapter: metric values against HPA targets, replicas, request and Prometheus query health; scale-to-zero parks and wakes.",
             v, tags=["autoscaling"])
    M = f'{C}, metric=~"$metric"'
    d.row("Metrics and targets")
    d.ts("Metric value vs HPA target", "Value the adapter serves for each metric, namespace and selector (one series per cached key), against the target of the HPAs using it (kube-state-metrics).", [
        {"expr": f'gpuscale_adapter_metric_value{{{M}, request_namespace=~"$namespace"}}', "legend": "{{metric}} {{request_namespace}} {{selector}}"},
        {"expr": f'kube_horizontalpodautoscaler_spec_target_metric{{{C}, {NS}, metric_name=~"$metric"}}',
         "legend": "{{namespace}}/{{horizontalpodautoscaler}} target ({{metric_target_type}})"}], unit="none", w=12)
    d.ts("Replicas", "Current and desired replicas of the HPAs, with their bounds (kube-state-metrics).", [
        {"expr": f'kube_horizontalpodautoscaler_status_current_replicas{{{C}, {NS}}}', "legend": "{{namespace}}/{{horizontalpodautoscaler}} current"},
        {"expr": f'kube_horizontalpodautoscaler_status_desired_replicas{{{C}, {NS}}}', "legend": "{{namespace}}/{{horizontalpodautoscaler}} desired"},
        {"expr": f'kube_horizontalpodautoscaler_spec_max_replicas{{{C}, {NS}}}', "legend": "{{namespace}}/{{horizontalpodautoscaler}} max"}],
        unit="none", w=12, decimals=0)
    d.ts("Metric age", "Age of the value the adapter serves (GPUScaleAdapterMetricStale fires above 120 s).", [
        {"expr": f'gpuscale_adapter_metric_age_seconds{{{M}}}', "legend": "{{metric}}"}], unit="s", w=12)
    d.ts("Poll cache", "Keys the adapter polls against --max-cached-queries (new keys get 503 at the cap, GPUScaleAdapterPollCacheFull), and keys refused per second.", [
        {"expr": f'gpuscale_adapter_cached_queries{{{C}}}', "legend": "{{instance}} keys"},
        {"expr": f'gpuscale_adapter_max_cached_queries{{{C}}}', "legend": "{{instance}} max"},
        {"expr": f'sum by (instance) (rate(gpuscale_adapter_cache_refusals_total{{{C}}}[$__rate_interval]))', "legend": "{{instance}} refused/s"}],
        unit="none", w=12)
    d.ts("Poll interval in use", "--poll-interval, stretched to keys / --prometheus-query-budget when longer; above a metric's freshness its values go stale.", [
        {"expr": f'gpuscale_adapter_poll_interval_seconds{{{C}}}', "legend": "{{instance}}"}], unit="s", w=12)
    d.ts("Prometheus reads by result", "Adapter reads per second by result (ok, error, empty, nan, timeout).", [
        {"expr": f'sum by (metric, result) (rate(gpuscale_adapter_prometheus_queries_total{{{M}}}[$__rate_interval]))', "legend": "{{metric}} {{result}}"}],
        unit="reqps", w=12)
    d.ts("Prometheus read latency p90", "90th percentile of the adapter's Prometheus query duration.", [
        {"expr": f'histogram_quantile(0.9, sum by (le, metric) (rate(gpuscale_adapter_prometheus_query_duration_seconds_bucket{{{M}}}[$__rate_interval]))) >= 0', "legend": "{{metric}}"}],
        unit="s", w=12)
    d.row("API requests (HPA → adapter)")
    d.ts("Requests by code", "external.metrics.k8s.io requests per second by metric and HTTP code.", [
        {"expr": f'sum by (metric, code) (rate(gpuscale_adapter_requests_total{{{M}}}[$__rate_interval]))', "legend": "{{metric}} {{code}}"}],
        unit="reqps", w=12)
    d.ts("Request latency p99", "99th percentile of the adapter's request duration.", [
        {"expr": f'histogram_quantile(0.99, sum by (le, metric) (rate(gpuscale_adapter_request_duration_seconds_bucket{{{M}}}[$__rate_interval]))) >= 0', "legend": "{{metric}}"}],
        unit="s", w=12)
    d.stat("Adapters up", "Adapter replicas that are up and ready.", f'sum(gpuscale_adapter_up{{{C}}})', w=6,
           thresholds={"mode": "absolute", "steps": [{"color": "red", "value": None}, {"color": "green", "value": 1}]})
    d.stat("Error ratio", "Share of requests answered 5xx over the rate window (0 without traffic).",
           f'(sum(rate(gpuscale_adapter_requests_total{{{C}, code=~"5.."}}[$__rate_interval])) or vector(0)) / (sum(rate(gpuscale_adapter_requests_total{{{C}}}[$__rate_interval])) > 0) or vector(0)',
           unit=PCT, w=6, thresholds=ORANGE_AT(0.05))
    d.table("Adapter versions", "gpuscale_adapter_build_info.", [{"expr": f'gpuscale_adapter_build_info{{{C}}}'}], w=12, h=4)
    d.row("Scale to zero")
    d.stat("Lease holder", "Scale-to-zero controller replicas holding the leader Lease (should be 1).",
           f'sum(gpuscale_scale_to_zero_leader{{{C}}})', w=6,
           thresholds={"mode": "absolute", "steps": [{"color": "red", "value": None}, {"color": "green", "value": 1}, {"color": "orange", "value": 2}]})
    d.stat("Targets parked", "Targets a scale-to-zero policy holds at 0 replicas now.",
           f'sum(gpuscale_scale_to_zero_parked{{{C}, {NS}}})', w=6, decimals=0)
    d.stat("Waking", "Policies whose target was woken and has no Ready pod yet (GPUScaleToZeroStuckWaking after 20 min).",
           f'sum(gpuscale_scale_to_zero_policies{{{C}, phase="Waking"}})', w=6, decimals=0,
           thresholds=ORANGE_AT(1))
    d.stat("Policies in error", "Policies not acted on (Ready=False: target missing or not scalable, unknown metric, query not allowed, invalid spec).",
           f'sum(gpuscale_scale_to_zero_policies{{{C}, phase="Error"}})', w=6, decimals=0,
           thresholds=ORANGE_AT(1))
    d.ts("Parks and wakes", "Workloads parked (scaled to 0) and woken (0 → N) per hour.", [
        {"expr": f'sum by (namespace, target) (increase(gpuscale_scale_to_zero_parks_total{{{C}, {NS}}}[1h]))', "legend": "{{namespace}}/{{target}} parks"},
        {"expr": f'sum by (namespace, target) (increase(gpuscale_scale_to_zero_wakes_total{{{C}, {NS}}}[1h]))', "legend": "{{namespace}}/{{target}} wakes"}],
        unit="none", w=12)
    d.ts("Refusals by reason", "Parks or wakes refused per hour, by reason (HPAOwnsZero, MinUpDuration, PodsNotReady, ReadUnknown, ActivationUnknown).", [
        {"expr": f'sum by (reason) (increase(gpuscale_scale_to_zero_refusals_total{{{C}}}[1h]))', "legend": "{{reason}}"}],
        unit="none", w=12)
    d.ts("Policies by phase", "Policies the leader acts on, by phase (Active, Parked, Waking, Error).", [
        {"expr": f'sum by (phase) (gpuscale_scale_to_zero_policies{{{C}}})', "legend": "{{phase}}"}],
        unit="none", w=8, decimals=0)
    d.ts("Wake latency", "Activation read → scale patch accepted, median and p99 over the last hour of wakes.", [
        {"expr": f'histogram_quantile(0.5, sum by (le) (increase(gpuscale_scale_to_zero_wake_latency_seconds_bucket{{{C}}}[1h]))) >= 0', "legend": "p50"},
        {"expr": f'histogram_quantile(0.99, sum by (le) (increase(gpuscale_scale_to_zero_wake_latency_seconds_bucket{{{C}}}[1h]))) >= 0', "legend": "p99"}],
        unit="s", w=8)
    d.ts("Waking for", "How long each woken target has had no Ready pod (GPUScaleToZeroStuckWaking above 20 min).", [
        {"expr": f'time() - max by (namespace, target) (gpuscale_scale_to_zero_waking_since_seconds{{{C}, {NS}}})', "legend": "{{namespace}}/{{target}}"}],
        unit="s", w=8)
    return d


def main():
    check = "--check" in sys.argv[1:]
    stale = []
    for d in (fleet(), node_gpu(), workloads(), autoscaling(), rightsizing()):
        name = d.uid.replace("gpuscale-", "") + ".json"
        path = os.path.join(DIR, name)
        text = json.dumps(d.json(), indent=2, ensure_ascii=False) + "\n"
        if check:
            try:
                with open(path, encoding="utf-8") as f:
                    if f.read() != text:
                        stale.append(name)
            except FileNotFoundError:
                stale.append(name)
            continue
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        n = sum(1 for p in d.panels if p["type"] != "row")
        print(f"{name}: {n} panels, {sum(len(p.get('targets', [])) for p in d.panels)} queries")
    if stale:
        sys.exit(f"out of date with dashboards/generate.py: {', '.join(stale)} (run python3 dashboards/generate.py)")


if __name__ == "__main__":
    main()
