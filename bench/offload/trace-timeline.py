#!/usr/bin/env python3
"""Draws one optimizer step of a dsc-run Chrome trace as a text timeline.

usage: trace-timeline.py TRACE.json [--step K] [--width N]

Each lane of the trace (compute, transfers) is a row of N columns over the
K-th run of the "optimizer" program (default: the last); a column shows
what took most of its time: A the AdamW update, N the gradient norm,
d a device->host transfer, u host->device, r an NVMe read (swap-in),
w an NVMe write (swap-out), c another compute instruction, '.' nothing.
Below the rows: the totals per kind, so the figure's claims can be checked
against the numbers (docs/offload.md draws its figure with it).
"""

import json
import sys
from collections import defaultdict


def kind(event):
    cat = event.get("cat", "")
    args = event.get("args", {})
    if cat == "Transfer":
        pair = (args.get("from"), args.get("to"))
        return {("device", "host"): "d", ("host", "device"): "u",
                ("nvme", "host"): "r", ("host", "nvme"): "w"}.get(pair, "t")
    if cat in ("AdamW", "AdamWShard"):
        return "A"
    if cat.startswith("GlobalNorm"):
        return "N"
    return "c"


def main(argv):
    if not argv:
        sys.exit(__doc__)
    path, step, width = argv[0], -1, 100
    i = 1
    while i < len(argv):
        if argv[i] == "--step":
            step, i = int(argv[i + 1]), i + 2
        elif argv[i] == "--width":
            width, i = int(argv[i + 1]), i + 2
        else:
            sys.exit(__doc__)
    trace = json.load(open(path))
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    lanes = {e["tid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    timed = sorted((e for e in events if e.get("ph") == "X"),
                   key=lambda e: e["ts"])
    # Runs of the optimizer program: a new run starts at its index 0.
    runs, current = [], None
    for e in timed:
        args = e.get("args", {})
        if args.get("program") != "optimizer":
            continue
        if args.get("index") == 0:
            current = []
            runs.append(current)
        if current is not None:
            current.append(e)
    if not runs:
        sys.exit(f"{path}: no optimizer program in the trace")
    run = runs[step]
    start = min(e["ts"] for e in run)
    end = max(e["ts"] + e["dur"] for e in run)
    span = max(end - start, 1e-9)
    cell = span / width
    print(f"optimizer step {step % len(runs) + 1} of {len(runs)}: "
          f"{span / 1000:.2f} ms, one column = {cell:.1f} us")
    for tid in sorted({e["tid"] for e in run}):
        busy = [defaultdict(float) for _ in range(width)]
        for e in run:
            if e["tid"] != tid:
                continue
            t0, t1 = e["ts"] - start, e["ts"] - start + e["dur"]
            for c in range(int(t0 // cell), min(width, int(t1 // cell) + 1)):
                lo, hi = max(t0, c * cell), min(t1, (c + 1) * cell)
                if hi > lo:
                    busy[c][kind(e)] += hi - lo
        row = "".join(max(b, key=b.get) if b else "." for b in busy)
        print(f"{lanes.get(tid, tid):>14} |{row}|")
    totals = defaultdict(lambda: [0.0, 0, 0])
    for e in run:
        k = kind(e)
        totals[k][0] += e["dur"]
        totals[k][1] += 1
        totals[k][2] += e.get("args", {}).get("bytes", 0)
    names = {"A": "AdamW", "N": "norm", "d": "device->host",
             "u": "host->device", "r": "nvme->host", "w": "host->nvme",
             "c": "other compute", "t": "other transfer"}
    for k, (us, count, nbytes) in sorted(totals.items(),
                                         key=lambda kv: -kv[1][0]):
        rate = f", {nbytes / us / 1e3:.2f} GB/s" if nbytes and us else ""
        size = f", {nbytes / 2**20:.2f} MiB" if nbytes else ""
        print(f"  {k} {names[k]:>14}: {us / 1000:8.3f} ms in {count} "
              f"instructions{size}{rate}")


if __name__ == "__main__":
    main(sys.argv[1:])
