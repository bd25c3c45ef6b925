#!/usr/bin/env python3
"""Prints a compact table of a Google Benchmark JSON file: name, time (us) and the counters ovl reports."""
import json
import sys

KEYS = ("tflops", "algbw_GBps", "busbw_GBps", "GBps", "speedup", "efficiency", "wrong")

for path in sys.argv[1:]:
    with open(path) as f:
        data = json.load(f)
    ctx = data.get("context", {})
    print(f"# {path}: {ctx.get('gpu', '?')} sm={ctx.get('sm_count', '?')} date={ctx.get('date', '?')}")
    for b in data.get("benchmarks", []):
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        if b.get("error_occurred"):
            print(f"{b['name']:<60} ERROR {b.get('error_message', '')}")
            continue
        scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b.get("time_unit", "ns")]
        cols = [f"{k}={b[k]:.4g}" for k in KEYS if k in b]
        print(f"{b['name']:<60} {b['real_time'] * scale:10.2f} us  " + " ".join(cols))
