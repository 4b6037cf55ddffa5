"""The DCGM section of validate.py: where a DCGM host engine is reachable,
the exporter reads it (--dcgm-hostengine) and each profiling field it
serves for a GPU without GPM is compared with `dcgmi dmon` against the
same host engine. Skipped, with a line saying so, where none is reachable.

Standard library only.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess

# dcgmi dmon field id -> (exporter family, description)
FIELDS = [
    (1001, "gpu_graphics_active_ratio", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
    (1002, "gpu_sm_active_ratio", "DCGM_FI_PROF_SM_ACTIVE"),
    (1003, "gpu_sm_occupancy_ratio", "DCGM_FI_PROF_SM_OCCUPANCY"),
    (1004, "gpu_tensor_active_ratio", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"),
    (1005, "gpu_dram_active_ratio", "DCGM_FI_PROF_DRAM_ACTIVE"),
]
# Both sides average over their own sample window: equal within this much
# under a steady load.
TOL_ABS = 0.05
DEFAULT = "127.0.0.1:5555"


def add_args(p):
    p.add_argument("--dcgm-hostengine", default=os.environ.get("GPUSCALE_DCGM_HOSTENGINE"),
                   help=f"DCGM host engine HOST:PORT to validate the DCGM reader against (default: $GPUSCALE_DCGM_HOSTENGINE, else {DEFAULT} if it answers; simulator mode: only when given)")
    p.add_argument("--dcgm-lib", default=os.environ.get("GPUSCALE_DCGM_LIB", "libdcgm.so.4"),
                   help="DCGM library the exporter loads (default libdcgm.so.4)")
    p.add_argument("--dcgmi", default="dcgmi", help="dcgmi to compare with (default: dcgmi)")


def reachable(addr: str) -> bool:
    host, _, port = addr.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port or 5555)), timeout=2):
            return True
    except (OSError, ValueError):
        return False


def prepare(run, Row) -> None:
    """Decides whether the section runs; adds the exporter's DCGM flags if so."""
    a = run.args
    addr = a.dcgm_hostengine or (None if a.simulate else DEFAULT)
    why = None
    if addr is None:
        why = "simulator mode without --dcgm-hostengine"
    elif not reachable(addr):
        why = f"no DCGM host engine answers at {addr} (start nv-hostengine or pass --dcgm-hostengine)"
    elif shutil.which(a.dcgmi) is None:
        why = f"{a.dcgmi} not found (pass --dcgmi)"
    if why:
        run.facts["dcgm"] = None
        run.notes.append(f"DCGM section skipped: {why}")
        run.rows.append(Row("dcgm", "—", "DCGM section", "skipped", "—", "—", None, why))
        return
    run.facts["dcgm"] = addr
    a.exporter_arg += ["--dcgm-hostengine", addr, "--dcgm-lib", a.dcgm_lib]


def dmon(run) -> dict:
    """One `dcgmi dmon` sample: {gpu index: {field id: value or None}}."""
    a = run.args
    ids = ",".join(str(f) for f, _, _ in FIELDS)
    cmd = [a.dcgmi, "dmon", "--host", run.facts["dcgm"], "-e", ids, "-c", "1", "-d", "1000"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {out.returncode}: {out.stderr.strip()}")
    rows = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 + len(FIELDS) and parts[0] == "GPU":
            vals = {}
            for (f, _, _), v in zip(FIELDS, parts[2:]):
                try:
                    vals[f] = float(v)
                except ValueError:
                    vals[f] = None  # N/A: a blank value
            rows[parts[1]] = vals
    return rows


def compare(run, Row, fmt_num) -> None:
    """Under load: exporter collection, dcgmi dmon, next collection; the
    dmon value must lie within the two collections' range ± TOL_ABS."""
    if not run.facts.get("dcgm"):
        return
    m1 = run.wait_collection()
    try:
        smi = dmon(run)
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as e:
        run.rows.append(Row("dcgm", "—", "dcgmi dmon", "error", "—", "—", False, str(e)))
        return
    m2 = run.wait_collection()
    up = m2.get("gpuscale_exporter_dcgm_up")
    run.rows.append(Row("dcgm", "—", "gpuscale_exporter_dcgm_up", fmt_num(up), "1", "exact", up == 1.0))
    for info in m2.find("gpu_activity_source_info"):
        idx, uuid, source = info.labels.get("gpu"), info.labels.get("uuid"), info.labels.get("source")
        gpu = f"{idx} {uuid[:12]}…"
        if source != "dcgm":
            run.rows.append(Row("dcgm", gpu, "activity source", source, "dcgm", "GPUs without GPM", None,
                                "GPM GPU: not read from DCGM" if source == "gpm" else "no DCGM values"))
            continue
        for f, family, name in FIELDS:
            d = smi.get(idx, {}).get(f)
            e = [m.get(family, uuid=uuid) for m in (m1, m2)]
            e = [v for v in e if v is not None]
            if d is None and not e:
                run.rows.append(Row("dcgm", gpu, name, "absent", "N/A", "", None, "n/a"))
                continue
            if d is None or not e:
                run.rows.append(Row("dcgm", gpu, name, fmt_num(e[-1]) if e else "absent",
                                    fmt_num(d) if d is not None else "N/A", f"±{TOL_ABS}", False, "served by one side only"))
                continue
            ok = min(e) - TOL_ABS <= d <= max(e) + TOL_ABS
            shown = " / ".join(fmt_num(v, 3) for v in e)
            run.rows.append(Row("dcgm", gpu, name, shown, fmt_num(d, 3), f"±{TOL_ABS}", ok))
