#!/usr/bin/env python3
"""One node's series by what they describe, for bench/fleet-cost.sh.

    fleet-cost-series.py NAME EXPOSITION_FILE PLAIN_BYTES GZIP_BYTES

Prints one Markdown row: series per GPU (a GPU's own: a `uuid`/`UUID` label,
no MIG instance), per MIG instance, per pod (`gpu_pod_*`, `gpu_process_*`),
per node (the rest: the exporter's health, node facts), Prometheus's own
five per target (`up`, `scrape_*`), and all of them over the node's GPUs,
with the body's size plain and gzipped.
"""
import re
import sys

SCRAPE_SERIES = 5  # up, scrape_duration_seconds, scrape_samples_scraped, ...
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def classify(name, labels):
    if name.startswith(("gpu_pod_", "gpu_process_")):
        return "pod"
    if labels.get("mig_uuid") or labels.get("GPU_I_ID"):
        return "mig"
    if (labels.get("uuid") or labels.get("UUID")) and not name.startswith("gpuscale_"):
        return "gpu"
    return "node"


def main():
    name, path, plain, gz = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    kinds = {"gpu": 0, "mig": 0, "pod": 0, "node": 0}
    gpus, migs, pods = set(), set(), set()
    for line in open(path, encoding="utf-8"):
        if line.startswith("#") or not line.strip():
            continue
        series = line.rsplit(" ", 1)[0]
        metric = series.split("{", 1)[0]
        labels = dict(LABEL.findall(series[len(metric):]))
        kind = classify(metric, labels)
        kinds[kind] += 1
        if kind == "gpu":
            gpus.add(labels.get("uuid") or labels.get("UUID"))
        if kind == "mig":
            migs.add(labels.get("mig_uuid") or (labels.get("UUID"), labels.get("GPU_I_ID")))
        if kind == "pod" and labels.get("pod"):
            pods.add((labels.get("namespace"), labels["pod"]))
    n = len(gpus)
    total = sum(kinds.values()) + SCRAPE_SERIES
    per = lambda k, d: f"{kinds[k] / d:.1f} ({kinds[k]})" if d else f"– ({kinds[k]})"
    print(
        f"| {name} | {n} | {per('gpu', n)} | {per('mig', len(migs))} | {per('pod', len(pods))} | "
        f"{kinds['node']} | {SCRAPE_SERIES} | {total} | **{total / n:.1f}** | {plain / 1024:.1f} / {gz / 1024:.1f} KiB |"
    )


if __name__ == "__main__":
    main()
