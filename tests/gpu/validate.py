#!/usr/bin/env python3
"""Validate gpuscale-exporter against nvidia-smi on a real GPU (or the simulator).

Runs the exporter against NVML (the system library, or the NVML simulator
with --simulate), compares what it serves with `nvidia-smi --query-gpu=...`,
drives a steady load and checks that the load moves utilization, power,
SM clock, the energy counter and the GPM activities and that the load's
process shows up with its memory; records the exporter's collection cost
and RSS; writes a markdown report. Exit status: 0 all checks passed,
1 a check failed, 2 the run could not be set up.

Standard library only (the GPU machine has no network).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import dcgm_check  # noqa: E402 (next to this file)
MIB = 1024.0 * 1024.0

# --- tolerances (stated in the report) ---------------------------------------
TOL_TEMP_C = 1.0
TOL_POWER_REL = 0.05
TOL_UTIL_PP = 10.0
TOL_CLOCK_LOAD_REL = 0.05  # clocks are compared exactly at idle
# load-phase expectations (load GPU, steady-window median vs idle median)
MOVE_UTIL_PP = 30.0
MOVE_POWER_REL = 0.20
MOVE_SM_CLOCK_OF_MAX = 0.75
MOVE_SM_ACTIVE = 0.30
MOVE_TENSOR_ACTIVE = 0.10
MOVE_DRAM_ACTIVE = 0.02
ENERGY_VS_POWER_REL = 0.20

# nvidia-smi field -> how to compare it with the exporter.
# kind: str (exact text), mib (exact whole MiB), abs (absolute tolerance),
# rel (relative tolerance), pp (percentage points), clock (exact idle, rel under load),
# pstate, info (shown, not checked)
GPU_FIELDS = [
    # field, kind, tolerance, required, description
    ("index", "str", None, True, "NVML index"),
    ("name", "str", None, True, "model"),
    ("uuid", "str", None, True, "UUID"),
    ("pci.bus_id", "str", None, True, "PCI bus id"),
    ("driver_version", "str", None, True, "driver version"),
    ("serial", "str", None, False, "board serial"),
    ("vbios_version", "str", None, False, "VBIOS version"),
    ("memory.total", "mib", 0.0, True, "memory total"),
    ("memory.reserved", "mib", 0.0, False, "memory reserved"),
    ("memory.used", "mib", 0.0, True, "memory used"),
    ("memory.free", "mib", 0.0, False, "memory free"),
    ("temperature.gpu", "abs", TOL_TEMP_C, True, "GPU temperature"),
    ("temperature.memory", "abs", TOL_TEMP_C, False, "memory temperature"),
    ("fan.speed", "pp", 1.0, False, "fan speed"),
    ("power.draw", "rel", TOL_POWER_REL, True, "power draw"),
    ("enforced.power.limit", "rel", TOL_POWER_REL, False, "enforced power limit"),
    ("power.limit", "info", None, True, "software power limit (info)"),
    ("power.draw.average", "info", None, False, "average power draw (info)"),
    ("power.draw.instant", "info", None, False, "instantaneous power draw (info)"),
    ("clocks.sm", "clock", 0.0, True, "SM clock"),
    ("clocks.mem", "clock", 0.0, True, "memory clock"),
    ("clocks.gr", "clock", 0.0, False, "graphics clock"),
    ("utilization.gpu", "pp", TOL_UTIL_PP, True, "GPU utilization"),
    ("utilization.memory", "pp", TOL_UTIL_PP, False, "memory utilization"),
    ("pstate", "pstate", None, True, "performance state"),
]


class SetupError(Exception):
    """The run cannot proceed (exit 2)."""


# --- Prometheus text ---------------------------------------------------------

LABEL_RE = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass
class Sample:
    name: str
    labels: dict
    value: float


class Metrics:
    def __init__(self, text: str, at: float):
        self.at = at
        self.samples: list[Sample] = []
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            head, _, val = line.rpartition(" ")
            try:
                value = float(val)
            except ValueError:
                continue
            if "{" in head:
                name, _, rest = head.partition("{")
                labels = {
                    k: v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
                    for k, v in LABEL_RE.findall(rest)
                }
            else:
                name, labels = head, {}
            self.samples.append(Sample(name, labels, value))

    def find(self, name: str, **labels) -> list[Sample]:
        return [
            s
            for s in self.samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
        ]

    def get(self, name: str, **labels):
        found = self.find(name, **labels)
        return found[0].value if len(found) == 1 else None


# --- small helpers -----------------------------------------------------------


def parse_interval(s: str) -> float:
    m = re.fullmatch(r"\s*([0-9.]+)\s*(ms|s)\s*", s)
    if not m:
        raise argparse.ArgumentTypeError(f"{s!r}: write e.g. 1s or 250ms")
    v = float(m.group(1)) / (1000.0 if m.group(2) == "ms" else 1.0)
    if not 0.1 <= v <= 60:
        raise argparse.ArgumentTypeError(f"{s!r}: between 100ms and 60s")
    return v


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fmt_num(v, digits: int = 2) -> str:
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    if abs(v - round(v)) < 1e-9 and abs(v) < 1e15:
        return str(int(round(v)))
    return f"{v:.{digits}f}"


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def is_na(v: str) -> bool:
    return v.startswith("[") or v in ("N/A", "")


def proc_cpu_seconds(pid: int):
    """CPU time of all the process's threads: /proc/PID/task/*/schedstat (ns,
    precise) when the kernel has it, else utime+stime from /proc/PID/stat (ticks)."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        for t in tasks:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    # fields after the comm start at proc(5)'s field 3: utime is 14, stime 15
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def proc_status_kib(pid: int, key: str):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


# --- the run -----------------------------------------------------------------


@dataclass
class Row:
    section: str
    gpu: str
    field: str
    exporter: str
    smi: str
    tolerance: str
    ok: bool | None  # None = not checked (info / n/a)
    note: str = ""

    @property
    def verdict(self) -> str:
        if self.ok is None:
            return "info" if self.note != "n/a" else "n/a"
        return "pass" if self.ok else "**FAIL**"


@dataclass
class Run:
    args: argparse.Namespace
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    facts: dict = field(default_factory=dict)
    durations: dict = field(default_factory=dict)  # collections_total -> duration
    scrapes: int = 0
    exporter: subprocess.Popen | None = None
    load: subprocess.Popen | None = None
    load_lines: list[str] = field(default_factory=list)
    env: dict = field(default_factory=dict)
    port: int = 0
    started: float = field(default_factory=time.monotonic)
    smi_fields: list[str] = field(default_factory=list)
    epoch: float = 0.0

    # -- exporter --
    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def deadline_check(self):
        if time.monotonic() - self.started > self.args.max_seconds:
            raise SetupError(f"the run took longer than --max-seconds {self.args.max_seconds}")

    def scrape(self) -> Metrics:
        self.deadline_check()
        if self.exporter is not None and self.exporter.poll() is not None:
            raise SetupError(
                f"the exporter exited with status {self.exporter.returncode}; log:\n{self.log_tail()}"
            )
        with urllib.request.urlopen(self.url("/metrics"), timeout=10) as r:
            text = r.read().decode("utf-8", "replace")
        self.scrapes += 1
        m = Metrics(text, time.time())
        total = m.get("gpuscale_exporter_collections_total")
        dur = m.get("gpuscale_exporter_collection_duration_seconds")
        if total is not None and dur is not None:
            self.durations[int(total)] = dur
        return m

    def log_tail(self, n: int = 40) -> str:
        try:
            lines = Path(self.args.log).read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-n:])

    def start_exporter(self):
        a = self.args
        cmd = [
            a.exporter,
            "--listen",
            f"127.0.0.1:{self.port}",
            "--collect-interval",
            f"{int(a.interval * 1000)}ms",
            "--no-pods",
        ]
        if a.simulate:
            cmd += ["--simulate", a.simulate]
            if a.simulator_lib:
                cmd += ["--simulator-lib", a.simulator_lib]
        elif a.nvml_lib:
            cmd += ["--nvml-lib", a.nvml_lib]
        cmd += a.exporter_arg
        log = open(a.log, "w")  # noqa: SIM115 (lives as long as the child)
        try:
            self.exporter = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
            )
        except OSError as e:
            raise SetupError(f"cannot start the exporter {a.exporter}: {e}") from e
        self.facts["exporter_cmd"] = " ".join(shlex.quote(c) for c in cmd)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.exporter.poll() is not None:
                raise SetupError(
                    f"the exporter exited with status {self.exporter.returncode}; log:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(self.url("/readyz"), timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        raise SetupError(f"the exporter did not become ready within 60 s; log:\n{self.log_tail()}")

    def wait_collection(self, after: int | None = None) -> Metrics:
        """Scrapes until a collection newer than `after` (or the current one) is served."""
        m = self.scrape()
        cur = m.get("gpuscale_exporter_collections_total")
        base = after if after is not None else cur
        deadline = time.monotonic() + 5 * self.args.interval + 10
        poll = max(0.02, self.args.interval / 10)
        while cur is None or base is None or cur <= base:
            if time.monotonic() > deadline:
                raise SetupError("the exporter stopped collecting (collections_total did not move)")
            time.sleep(poll)
            m = self.scrape()
            cur = m.get("gpuscale_exporter_collections_total")
            if base is None:
                base = cur
        return m

    # -- nvidia-smi --
    def smi(self, query: str, fields: list[str]) -> tuple[int, str, str]:
        cmd = [self.args.nvidia_smi, f"--{query}={','.join(fields)}", "--format=csv,noheader,nounits"]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, env=self.env, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise SetupError(f"cannot run {self.args.nvidia_smi}: {e}") from e
        return p.returncode, p.stdout, p.stderr

    def probe_smi_fields(self):
        """Keeps the fields this nvidia-smi knows; the required ones must all be known."""
        wanted = [f for f, *_ in GPU_FIELDS]
        rc, _, err = self.smi("query-gpu", wanted)
        if rc == 0:
            self.smi_fields = wanted
            return
        known = []
        for f, _kind, _tol, required, _desc in GPU_FIELDS:
            rc, _, err1 = self.smi("query-gpu", [f])
            if rc == 0:
                known.append(f)
            elif required:
                raise SetupError(f"nvidia-smi cannot query the field {f}: {err1.strip() or err.strip()}")
            else:
                self.notes.append(f"nvidia-smi does not know the field `{f}`: not compared.")
        self.smi_fields = known

    def smi_gpus(self) -> dict:
        rc, out, err = self.smi("query-gpu", self.smi_fields)
        if rc != 0:
            raise SetupError(f"nvidia-smi --query-gpu failed ({rc}): {err.strip()}")
        rows = {}
        for line in out.splitlines():
            if not line.strip():
                continue
            vals = [v.strip() for v in line.split(",")]
            if len(vals) != len(self.smi_fields):
                raise SetupError(f"nvidia-smi printed {len(vals)} values for {len(self.smi_fields)} fields: {line!r}")
            row = dict(zip(self.smi_fields, vals))
            rows[row["uuid"]] = row
        return rows

    def smi_apps(self):
        rc, out, err = self.smi("query-compute-apps", ["pid", "gpu_uuid", "used_memory"])
        if rc != 0:
            self.notes.append(f"nvidia-smi --query-compute-apps failed ({rc}): {err.strip()}")
            return None
        apps = []
        for line in out.splitlines():
            vals = [v.strip() for v in line.split(",")]
            if len(vals) == 3 and vals[0].isdigit():
                apps.append({"pid": vals[0], "uuid": vals[1], "mib": vals[2]})
        return apps

    # -- comparisons --
    def exporter_value(self, m: Metrics, uuid: str, f: str):
        """The exporter's value for nvidia-smi field `f`, in nvidia-smi's units; None = not served."""
        info = m.find("gpu_info", uuid=uuid)
        lab = info[0].labels if len(info) == 1 else None

        def g(name, scale=1.0, **extra):
            v = m.get(name, uuid=uuid, **extra)
            return None if v is None else v * scale

        labels = {
            "index": "gpu",
            "name": "model",
            "uuid": "uuid",
            "pci.bus_id": "pci_bus_id",
            "driver_version": "driver_version",
            "serial": "serial",
            "vbios_version": "vbios_version",
        }
        if f in labels:
            return (lab.get(labels[f]) or None) if lab else None
        series = {
            "memory.total": ("gpu_memory_total_bytes", 1 / MIB, {}),
            "memory.reserved": ("gpu_memory_reserved_bytes", 1 / MIB, {}),
            "memory.used": ("gpu_memory_used_bytes", 1 / MIB, {}),
            "memory.free": ("gpu_memory_free_bytes", 1 / MIB, {}),
            "temperature.gpu": ("gpu_temperature_celsius", 1.0, {}),
            "temperature.memory": ("gpu_memory_temperature_celsius", 1.0, {}),
            "fan.speed": ("gpu_fan_speed_ratio", 100.0, {}),
            "power.draw": ("gpu_power_usage_watts", 1.0, {}),
            "power.draw.average": ("gpu_power_usage_watts", 1.0, {}),
            "power.draw.instant": ("gpu_power_usage_watts", 1.0, {}),
            "enforced.power.limit": ("gpu_power_limit_watts", 1.0, {}),
            "power.limit": ("gpu_power_limit_watts", 1.0, {}),
            "clocks.sm": ("gpu_clock_hertz", 1e-6, {"clock": "sm"}),
            "clocks.mem": ("gpu_clock_hertz", 1e-6, {"clock": "memory"}),
            "clocks.gr": ("gpu_clock_hertz", 1e-6, {"clock": "graphics"}),
            "utilization.gpu": ("gpu_utilization_ratio", 100.0, {}),
            "utilization.memory": ("gpu_memory_utilization_ratio", 100.0, {}),
        }
        if f in series:
            name, scale, extra = series[f]
            return g(name, scale, **extra)
        if f == "pstate":
            v = g("gpu_performance_state")
            return None if v is None else f"P{int(v)}"
        return None

    def compare_snapshot(self, phase: str):
        """Exporter collection, nvidia-smi, next exporter collection: the nvidia-smi
        reading must lie within [min, max] of the two collections, widened by the tolerance."""
        m1 = self.wait_collection()
        smi = self.smi_gpus()
        apps = self.smi_apps()
        m2 = self.wait_collection()
        self.facts.setdefault("smi_rows", {})[phase] = smi
        exporter_uuids = {s.labels.get("uuid") for s in m2.find("gpu_info")}
        for uuid, row in smi.items():
            gpu = f"{row.get('index', '?')} {uuid[:12]}…"
            if uuid not in exporter_uuids:
                self.rows.append(Row(phase, gpu, "uuid", "missing", uuid, "exact", False, "GPU not served"))
                continue
            for f, kind, tol, _req, _desc in GPU_FIELDS:
                if f not in row:
                    continue
                self.rows.append(self.compare_field(phase, gpu, m1, m2, uuid, f, kind, tol, row[f]))
        for uuid in sorted(exporter_uuids - set(smi)):
            self.rows.append(Row(phase, uuid, "uuid", uuid, "missing", "exact", False, "nvidia-smi does not list it"))
        if apps is not None:
            self.compare_apps(phase, m1, m2, apps)
        return m2

    def compare_field(self, phase, gpu, m1, m2, uuid, f, kind, tol, smi_val) -> Row:
        e1 = self.exporter_value(m1, uuid, f)
        e2 = self.exporter_value(m2, uuid, f)
        if is_na(smi_val) and e1 is None and e2 is None:
            return Row(phase, gpu, f, "absent", smi_val, "", None, "n/a")
        if kind == "info":
            ev = fmt_num(e2)
            return Row(phase, gpu, f, ev, smi_val, "not checked", None, "")
        if kind in ("str", "pstate"):
            vals = {e for e in (e1, e2) if e is not None}
            shown = " / ".join(sorted(vals)) if vals else "absent"
            ok = any(str(e).lower() == smi_val.lower() for e in vals)
            return Row(phase, gpu, f, shown, smi_val, "exact", ok)
        if e1 is None or e2 is None or is_na(smi_val):
            shown = "absent" if e1 is None and e2 is None else fmt_num(e2 if e2 is not None else e1)
            return Row(phase, gpu, f, shown, smi_val, "", False, "served by one side only")
        try:
            s = float(smi_val)
        except ValueError:
            return Row(phase, gpu, f, fmt_num(e2), smi_val, "", False, "nvidia-smi value is not a number")
        lo, hi = min(e1, e2), max(e1, e2)
        shown = fmt_num(lo) if abs(hi - lo) < 1e-9 else f"{fmt_num(lo)}…{fmt_num(hi)}"
        if kind == "mib":
            # nvidia-smi prints whole MiB
            ok = lo - 1.0 < s < hi + 1.0
            tol_s = "exact (whole MiB)"
        elif kind == "abs":
            ok = lo - tol <= s <= hi + tol
            tol_s = f"±{fmt_num(tol)}"
        elif kind == "rel":
            ok = lo * (1 - tol) - 0.01 <= s <= hi * (1 + tol) + 0.01
            tol_s = f"±{fmt_num(tol * 100)} %"
        elif kind == "pp":
            ok = lo - tol <= s <= hi + tol
            tol_s = f"±{fmt_num(tol)} pp"
        elif kind == "clock":
            t = 0.0 if phase == "idle" else TOL_CLOCK_LOAD_REL
            ok = lo * (1 - t) - 0.5 <= s <= hi * (1 + t) + 0.5
            tol_s = "exact" if t == 0 else f"±{fmt_num(t * 100)} %"
        else:
            return Row(phase, gpu, f, shown, smi_val, "?", False, f"unknown kind {kind}")
        return Row(phase, gpu, f, shown, smi_val, tol_s, ok)

    def compare_apps(self, phase, m1, m2, apps):
        for a in apps:
            vals = [
                s.value / MIB
                for m in (m1, m2)
                for s in m.find("gpu_process_memory_used_bytes", pid=a["pid"], uuid=a["uuid"])
            ]
            label = f"process {a['pid']} memory"
            if not vals:
                self.rows.append(Row(phase, a["uuid"][:16] + "…", label, "absent", a["mib"], "exact (whole MiB)", False))
                continue
            if is_na(a["mib"]):
                self.rows.append(Row(phase, a["uuid"][:16] + "…", label, fmt_num(vals[-1]), a["mib"], "", None, "n/a"))
                continue
            s = float(a["mib"])
            ok = min(vals) - 1.0 < s < max(vals) + 1.0
            self.rows.append(
                Row(phase, a["uuid"][:16] + "…", label, fmt_num(vals[-1]), a["mib"], "exact (whole MiB)", ok)
            )

    # -- load --
    def start_load(self, load_uuid: str):
        a = self.args
        env = dict(self.env)
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        env["CUDA_VISIBLE_DEVICES"] = load_uuid
        env["PYTHONUNBUFFERED"] = "1"
        cmd = a.load_cmd
        if cmd is None:
            if a.simulate:
                cmd = "true"
            else:
                script = os.path.relpath(HERE / "load.py")
                if script.startswith(".."):
                    script = str(HERE / "load.py")
                cmd = f"{shlex.quote(sys.executable)} {shlex.quote(script)} --seconds {a.load_seconds:g}"
        # the report names the interpreter by its base name (no machine paths)
        self.facts["load_cmd"] = cmd.replace(shlex.quote(sys.executable), os.path.basename(sys.executable), 1)
        try:
            self.load = subprocess.Popen(
                shlex.split(cmd),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=env,
                start_new_session=True,
            )
        except OSError as e:
            raise SetupError(f"cannot start the load {cmd!r}: {e}") from e
        ready = threading.Event()

        def reader():
            assert self.load is not None and self.load.stdout is not None
            for line in self.load.stdout:
                line = line.rstrip("\n")
                self.load_lines.append(line)
                if line.startswith("ready"):
                    ready.set()
            ready.set()

        threading.Thread(target=reader, daemon=True).start()
        if a.load_ready_timeout > 0:
            if not ready.wait(a.load_ready_timeout):
                raise SetupError(f"the load printed no `ready` line within {a.load_ready_timeout} s")
            if not any(l.startswith("ready") for l in self.load_lines):
                raise SetupError("the load exited before it was ready:\n" + "\n".join(self.load_lines[-20:]))

    def load_pid(self):
        if self.args.expect_pid is not None:
            return str(self.args.expect_pid)
        for line in self.load_lines:
            if line.startswith("pid="):
                return line[4:].strip()
        return str(self.load.pid) if self.load else None

    def stop_load(self):
        if self.load is None:
            return
        if self.load.poll() is None:
            try:
                os.killpg(self.load.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.load.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.load.pid, signal.SIGKILL)
                self.load.wait(5)

    def stop_exporter(self):
        if self.exporter is None or self.exporter.poll() is not None:
            return self.exporter.returncode if self.exporter else None
        self.exporter.send_signal(signal.SIGTERM)
        try:
            return self.exporter.wait(15)
        except subprocess.TimeoutExpired:
            self.exporter.kill()
            self.exporter.wait(5)
            return None


def gpu_sample(m: Metrics, uuid: str, pid) -> dict:
    d = {
        "t": m.at,
        "util": m.get("gpu_utilization_ratio", uuid=uuid),
        "power": m.get("gpu_power_usage_watts", uuid=uuid),
        "sm_clock": m.get("gpu_clock_hertz", uuid=uuid, clock="sm"),
        "sm_clock_max": m.get("gpu_clock_max_hertz", uuid=uuid, clock="sm"),
        "energy": m.get("gpu_energy_consumed_joules_total", uuid=uuid),
        "sm_active": m.get("gpu_sm_active_ratio", uuid=uuid),
        "tensor_active": m.get("gpu_tensor_active_ratio", uuid=uuid),
        "dram_active": m.get("gpu_dram_active_ratio", uuid=uuid),
        "collections": m.get("gpuscale_exporter_collections_total"),
    }
    if pid is not None:
        d["proc_mem"] = m.get("gpu_process_memory_used_bytes", uuid=uuid, pid=pid)
        d["proc_sm"] = m.get("gpu_process_sm_utilization_ratio", uuid=uuid, pid=pid)
    return d


def sample_window(run: Run, seconds: float, uuid: str, pid) -> list[dict]:
    """One scrape per collection interval (so the CPU cost includes ~1 scrape per cycle)."""
    out = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(run.args.interval)
        out.append(gpu_sample(run.scrape(), uuid, pid))
    return out


def check_moves(run: Run, idle: list[dict], load: list[dict]):
    def med(rows, k):
        return median([r.get(k) for r in rows])

    def row(field_, idle_v, load_v, expect, ok, note=""):
        run.rows.append(Row("moves", run.facts["load_gpu"], field_, fmt_num(load_v, 3), fmt_num(idle_v, 3), expect, ok, note))

    iu, lu = med(idle, "util"), med(load, "util")
    if iu is None or lu is None:
        row("utilization moves", iu, lu, "served", False, "gpu_utilization_ratio missing")
    else:
        row("utilization moves", iu, lu, f"load ≥ idle + {MOVE_UTIL_PP / 100:.2f}", lu >= iu + MOVE_UTIL_PP / 100)
    ip, lp = med(idle, "power"), med(load, "power")
    if ip is None or lp is None:
        row("power moves", ip, lp, "served", False, "gpu_power_usage_watts missing")
    else:
        row("power moves", ip, lp, f"load ≥ idle × {1 + MOVE_POWER_REL:.2f}", lp >= ip * (1 + MOVE_POWER_REL))
    ic, lc = med(idle, "sm_clock"), med(load, "sm_clock")
    mx = med(load, "sm_clock_max")
    if ic is None or lc is None:
        row("SM clock moves", ic, lc, "served", False, "gpu_clock_hertz{clock=sm} missing")
    else:
        ok = lc > ic or (mx is not None and lc >= MOVE_SM_CLOCK_OF_MAX * mx)
        row("SM clock moves (Hz)", ic, lc, f"load > idle, or ≥ {MOVE_SM_CLOCK_OF_MAX} × max (clocks held high)", ok)
    # energy counter: monotonic over the window, and its rate matches the sampled power
    es = [(r["t"], r["energy"]) for r in load if r.get("energy") is not None]
    if len(es) < 2:
        row("energy counter", None, None, "served", False, "gpu_energy_consumed_joules_total missing")
    else:
        mono = all(b[1] >= a[1] for a, b in zip(es, es[1:]))
        dt_s = es[-1][0] - es[0][0]
        rate = (es[-1][1] - es[0][1]) / dt_s if dt_s > 0 else 0.0
        run.facts["energy_rate_w"] = rate
        run.facts["energy_delta_j"] = es[-1][1] - es[0][1]
        row(
            "energy counter increases (J)",
            es[0][1],
            es[-1][1],
            "monotonic, rising",
            mono and es[-1][1] > es[0][1],
            "last vs first sample of the steady window",
        )
        pw = [r["power"] for r in load if r.get("power") is not None]
        mean_p = statistics.fmean(pw) if pw else None
        ok = mean_p is not None and mean_p > 0 and abs(rate - mean_p) <= ENERGY_VS_POWER_REL * mean_p
        run.rows.append(
            Row(
                "moves",
                run.facts["load_gpu"],
                "energy rate vs mean power (W)",
                fmt_num(rate),
                fmt_num(mean_p),
                f"±{ENERGY_VS_POWER_REL * 100:.0f} %",
                ok,
                "exporter: Δenergy/Δt; other column: mean of gpu_power_usage_watts",
            )
        )
    for key, fam, need in (
        ("sm_active", "gpu_sm_active_ratio", MOVE_SM_ACTIVE),
        ("tensor_active", "gpu_tensor_active_ratio", MOVE_TENSOR_ACTIVE),
        ("dram_active", "gpu_dram_active_ratio", MOVE_DRAM_ACTIVE),
    ):
        iv, lv = med(idle, key), med(load, key)
        if iv is None or lv is None:
            row(f"GPM {key} moves", iv, lv, "served", False, f"{fam} missing (GPM unsupported or not sampled)")
        else:
            row(f"GPM {key} moves", iv, lv, f"load ≥ idle + {need:.2f}", lv >= iv + need)


def check_process(run: Run, load: list[dict], uuid: str, pid):
    mems = [r.get("proc_mem") for r in load if r.get("proc_mem") is not None]
    sms = [r.get("proc_sm") for r in load if r.get("proc_sm") is not None]
    run.facts["proc_mem_mib"] = max(mems) / MIB if mems else None
    run.facts["proc_sm"] = median(sms)
    ok = bool(mems) and max(mems) > 0
    note = ""
    if not ok:
        last = run.scrape()
        seen = sorted({s.labels.get("pid", "?") for s in last.find("gpu_process_memory_used_bytes", uuid=uuid)})
        note = f"pids the exporter serves on this GPU: {', '.join(seen) or 'none'} (a PID namespace would hide the load's pid)"
    run.rows.append(
        Row(
            "moves",
            run.facts["load_gpu"],
            f"load process {pid} memory (MiB)",
            fmt_num(max(mems) / MIB) if mems else "absent",
            "> 0",
            "present with memory",
            ok,
            note,
        )
    )


def write_report(run: Run, status: int, error: str | None):
    a = run.args
    f = run.facts
    lines = []
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines.append("# gpuscale-exporter GPU validation report\n")
    lines.append(f"- Date: {now}")
    lines.append(f"- Mode: {'simulator (' + a.simulate + ')' if a.simulate else 'system NVML' + (' (' + a.nvml_lib + ')' if a.nvml_lib else '')}")
    lines.append(f"- GPU(s): {', '.join(f.get('models', [])) or 'unknown'}")
    lines.append(f"- Driver: {f.get('driver', 'unknown')}, CUDA {f.get('cuda', 'unknown')}")
    lines.append(f"- Exporter: {f.get('version', 'unknown')}")
    lines.append(f"- nvidia-smi: `{a.nvidia_smi}`")
    lines.append(f"- Collect interval: {a.interval:g} s; load: `{f.get('load_cmd', '—')}` on GPU {f.get('load_gpu', '—')}")
    failed = [r for r in run.rows if r.ok is False]
    verdict = "PASS" if status == 0 else ("FAIL" if status == 1 else "ERROR")
    lines.append(f"- Result: **{verdict}** ({len(failed)} failed of {sum(1 for r in run.rows if r.ok is not None)} checks)")
    if error:
        lines.append("\n## Error\n\n```\n" + error.strip() + "\n```")
    lines.append("\n## Tolerances\n")
    lines.append(
        f"memory exact (whole MiB); temperature ±{TOL_TEMP_C:g} °C; power ±{TOL_POWER_REL * 100:g} %; "
        f"clocks exact at idle, ±{TOL_CLOCK_LOAD_REL * 100:g} % under load; utilization ±{TOL_UTIL_PP:g} pp; "
        "text fields exact. Each nvidia-smi reading is taken between two exporter collections and "
        "must lie within the range of the two, widened by the tolerance."
    )
    for phase, title, head, intro in (
        ("idle", "Idle: exporter vs nvidia-smi", "exporter | nvidia-smi | tolerance", ""),
        ("load", "Under load: exporter vs nvidia-smi", "exporter | nvidia-smi | tolerance", ""),
        (
            "moves",
            "Load phase: what must move",
            "load | idle / reference | expectation",
            "Medians over the idle window and over the steady load window (after the settle time).\n",
        ),
        ("dcgm", "DCGM profiling under load: exporter vs dcgmi dmon", "exporter | dcgmi dmon | tolerance",
         "GPUs without GPM whose activity the exporter reads from the DCGM host engine (--dcgm-hostengine).\n"),
        ("run", "Run", "value | expected | expectation", ""),
    ):
        rows = [r for r in run.rows if r.section == phase]
        if not rows:
            continue
        lines.append(f"\n## {title}\n")
        if intro:
            lines.append(intro)
        lines.append(f"| GPU | field | {head} | result | note |")
        lines.append("|---|---|---|---|---|---|---|")
        for r in rows:
            lines.append(f"| {r.gpu} | {r.field} | {r.exporter} | {r.smi} | {r.tolerance} | {r.verdict} | {r.note} |")
    lines.append("\n## Process and load\n")
    lines.append(f"- Load pid: {f.get('load_pid', '—')}; max memory served: {fmt_num(f.get('proc_mem_mib'))} MiB; median SM utilization: {fmt_num(f.get('proc_sm'), 3)}")
    done = [l for l in run.load_lines if l.startswith("done") or l.startswith("ready")]
    if done:
        lines.append(f"- Load output: {'; '.join(done)}")
    lines.append(f"- Energy over the steady window: {fmt_num(f.get('energy_delta_j'))} J, {fmt_num(f.get('energy_rate_w'))} W")
    lines.append("\n## Collection cost and memory\n")
    lines.append("| measure | value |")
    lines.append("|---|---|")
    for k, label in (
        ("cycles", "collection cycles observed"),
        ("dur_mean_ms", "collection duration, mean (ms)"),
        ("dur_p50_ms", "collection duration, median (ms)"),
        ("dur_max_ms", "collection duration, max (ms)"),
        ("cpu_ms_per_cycle", "exporter CPU per cycle, first half of the steady load window (ms; all threads)"),
        ("scrapes_per_cycle", "scrapes per cycle in that window (served by the same process)"),
        ("cpu_ms_per_cycle_run", "exporter CPU per cycle over the whole run (ms; includes the comparison phases' frequent scrapes)"),
        ("rss_mib", "RSS at the end (VmRSS, MiB)"),
        ("hwm_mib", "peak RSS (VmHWM, MiB)"),
        ("exit_code", "exporter exit code after SIGTERM"),
    ):
        lines.append(f"| {label} | {fmt_num(f.get(k))} |")
    if run.notes:
        lines.append("\n## Notes\n")
        lines.extend(f"- {n}" for n in run.notes)
    lines.append("\n## Exporter command\n\n```\n" + f.get("exporter_cmd", "—") + "\n```\n")
    Path(a.report).write_text("\n".join(lines) + "\n")
    if a.json:
        Path(a.json).write_text(
            json.dumps(
                {"status": status, "error": error, "facts": {k: v for k, v in f.items() if k != "smi_rows"}, "rows": [r.__dict__ for r in run.rows]},
                indent=2,
                default=str,
            )
        )


def execute(run: Run):
    a = run.args
    dcgm_check.prepare(run, Row)
    run.start_exporter()
    run.probe_smi_fields()
    first = run.wait_collection()
    run.facts["cpu0"] = proc_cpu_seconds(run.exporter.pid)
    run.facts["c0"] = first.get("gpuscale_exporter_collections_total")
    infos = first.find("gpu_info")
    if not infos:
        raise SetupError("the exporter serves no gpu_info: no GPU found")
    run.facts["models"] = sorted({s.labels.get("model", "?") for s in infos})
    run.facts["driver"] = infos[0].labels.get("driver_version", "?")
    run.facts["cuda"] = infos[0].labels.get("cuda_version", "?")
    bi = first.find("gpuscale_exporter_build_info")
    if bi:
        run.facts["version"] = f"{bi[0].labels.get('version', '?')} ({bi[0].labels.get('revision', '?')})"
    by_index = {s.labels.get("gpu"): s.labels.get("uuid") for s in infos}
    load_uuid = by_index.get(str(a.load_gpu))
    if load_uuid is None:
        raise SetupError(f"--load-gpu {a.load_gpu}: the exporter serves GPUs {sorted(by_index)}")
    run.facts["load_gpu"] = f"{a.load_gpu} {load_uuid[:12]}…"

    # Idle: settle, sample, compare.
    time.sleep(a.idle_seconds)
    idle = sample_window(run, max(a.interval * 3, a.idle_seconds), load_uuid, None)
    run.compare_snapshot("idle")
    idle += [gpu_sample(run.scrape(), load_uuid, None)]

    if a.simulate:
        load_at = run.epoch + a.sim_load_at
        lag = time.time() - load_at
        if lag > 0:
            raise SetupError(
                f"the idle phase ended {lag:.1f} s after the scenario's load starts "
                f"(--sim-load-at {a.sim_load_at}): raise --sim-load-at or shorten --idle-seconds"
            )
        time.sleep(-lag + 0.05)

    # Load: start, settle, sample the steady window, compare in its middle.
    run.start_load(load_uuid)
    pid = run.load_pid()
    run.facts["load_pid"] = pid
    time.sleep(a.settle_seconds)
    steady = max(a.load_seconds - a.settle_seconds - 2 * a.interval, 3 * a.interval)
    m0 = run.scrape()
    c0, cpu0 = m0.get("gpuscale_exporter_collections_total"), proc_cpu_seconds(run.exporter.pid)
    s0 = run.scrapes
    load = sample_window(run, steady / 2, load_uuid, pid)
    c1 = load[-1]["collections"] if load else None
    cpu1 = proc_cpu_seconds(run.exporter.pid)
    s1 = run.scrapes
    run.compare_snapshot("load")
    dcgm_check.compare(run, Row, fmt_num)
    load += sample_window(run, steady / 2, load_uuid, pid)
    if None not in (c0, c1, cpu0, cpu1) and c1 > c0:
        run.facts["cpu_ms_per_cycle"] = (cpu1 - cpu0) * 1000 / (c1 - c0)
        run.facts["scrapes_per_cycle"] = (s1 - s0) / (c1 - c0)
    cpu_end = proc_cpu_seconds(run.exporter.pid)
    c_end = run.scrape().get("gpuscale_exporter_collections_total")
    if None not in (run.facts.get("cpu0"), cpu_end, c_end, run.facts.get("c0")) and c_end > run.facts["c0"]:
        run.facts["cpu_ms_per_cycle_run"] = (cpu_end - run.facts["cpu0"]) * 1000 / (c_end - run.facts["c0"])
    check_moves(run, idle, load)
    check_process(run, load, load_uuid, pid)

    # Cost and memory, then a clean stop.
    durs = list(run.durations.values())
    if durs:
        run.facts["cycles"] = len(durs)
        run.facts["dur_mean_ms"] = statistics.fmean(durs) * 1000
        run.facts["dur_p50_ms"] = statistics.median(durs) * 1000
        run.facts["dur_max_ms"] = max(durs) * 1000
    rss, hwm = proc_status_kib(run.exporter.pid, "VmRSS"), proc_status_kib(run.exporter.pid, "VmHWM")
    run.facts["rss_mib"] = rss / 1024 if rss is not None else None
    run.facts["hwm_mib"] = hwm / 1024 if hwm is not None else None
    if run.load is not None:
        try:
            rc = run.load.wait(max(a.load_seconds, 1) + 30)
        except subprocess.TimeoutExpired:
            rc = None
            run.notes.append("the load was still running at the end and was stopped")
        run.rows.append(Row("run", run.facts["load_gpu"], "load command exit status", str(rc), "0", "0", rc == 0))
    code = run.stop_exporter()
    run.facts["exit_code"] = code
    run.rows.append(Row("run", "—", "exporter exits 0 on SIGTERM", str(code), "0", "0", code == 0))


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--exporter", required=True, help="gpuscale-exporter binary")
    p.add_argument("--nvml-lib", help="NVML library to load (default: the system libnvidia-ml.so.1)")
    p.add_argument("--simulate", metavar="SCENARIO", help="simulator mode: run on this scenario file")
    p.add_argument("--simulator-lib", help="libgpuscale_nvml_sim.so (simulator mode)")
    p.add_argument("--sim-load-at", type=float, default=10.0, help="scenario time (s) at which the scenario's load starts (simulator mode)")
    p.add_argument("--nvidia-smi", default="nvidia-smi", help="nvidia-smi (or nvidia-smi-sim) to compare with")
    p.add_argument("--load-cmd", help="load command; prints `pid=N` and `ready` (default: load.py; simulator: `true`)")
    p.add_argument("--load-gpu", type=int, default=0, help="NVML index of the GPU to load (default 0)")
    p.add_argument("--expect-pid", type=int, help="pid the load shows up as (simulator mode: the scenario's process)")
    p.add_argument("--load-seconds", type=float, default=30.0, help="load duration (default 30)")
    p.add_argument("--settle-seconds", type=float, default=5.0, help="wait after the load is ready before sampling (default 5)")
    p.add_argument("--idle-seconds", type=float, default=3.0, help="idle settle time before the idle snapshot (default 3)")
    p.add_argument("--load-ready-timeout", type=float, help="seconds to wait for the load's `ready` line (0 = do not wait; default 120, simulator 0)")
    p.add_argument("--interval", type=parse_interval, default=1.0, help="exporter collect interval (default 1s)")
    p.add_argument("--report", default="gpu-validation-report.md", help="markdown report to write")
    p.add_argument("--json", help="also write the results as JSON")
    p.add_argument("--log", help="exporter log file (default: REPORT.exporter.log)")
    p.add_argument("--max-seconds", type=float, default=280.0, help="abort the run after this long (default 280)")
    p.add_argument("--exporter-arg", action="append", default=[], help="extra exporter flag (repeatable)")
    dcgm_check.add_args(p)
    a = p.parse_args(argv)
    if a.simulate and a.nvml_lib:
        p.error("--simulate and --nvml-lib exclude each other")
    if a.load_ready_timeout is None:
        a.load_ready_timeout = 0.0 if a.simulate else 120.0
    if a.log is None:
        a.log = str(Path(a.report).with_suffix("")) + ".exporter.log"
    if a.load_seconds <= a.settle_seconds:
        p.error("--load-seconds must be longer than --settle-seconds")
    return a


def main(argv=None) -> int:
    a = parse_args(argv)
    run = Run(a)
    run.env = dict(os.environ)
    run.port = free_port()
    if a.simulate:
        run.epoch = time.time()
        run.env["GPUSCALE_SIM_EPOCH"] = f"{run.epoch:.6f}"
        run.env["GPUSCALE_SIM_SCENARIO"] = str(Path(a.simulate).resolve())
    status, error = 0, None
    try:
        execute(run)
        status = 1 if any(r.ok is False for r in run.rows) else 0
    except SetupError as e:
        status, error = 2, str(e)
    except KeyboardInterrupt:
        status, error = 2, "interrupted"
    finally:
        run.stop_load()
        if run.exporter is not None and run.exporter.poll() is None:
            run.stop_exporter()
    write_report(run, status, error)
    failed = [r for r in run.rows if r.ok is False]
    for r in failed:
        print(f"FAIL [{r.section}] {r.gpu} {r.field}: exporter {r.exporter}, nvidia-smi {r.smi} ({r.tolerance}) {r.note}", file=sys.stderr)
    if error:
        print(f"ERROR: {error}", file=sys.stderr)
    print(f"{'PASS' if status == 0 else 'FAIL' if status == 1 else 'ERROR'}: report in {a.report}")
    return status


if __name__ == "__main__":
    sys.exit(main())
