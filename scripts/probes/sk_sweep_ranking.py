#!/usr/bin/env python3
"""The model's stream-K gains against the forced-plan sweep (docs/results/gemm-h200-streamk/sk-sweep.json).

usage: scripts/probes/sk_sweep_ranking.py [OVL] [PROFILE]   (defaults: build/apps/ovl, the calibrated H200 profile)
Splits the sweep by forced plan, runs `ovl validate --json` on each part, and prints per plan the measured and the
modelled gain of `ovl` (the plan) over `ovl-nosk` (whole tiles) in the same process. Contiguous plans are not
modelled (validate skips them).
"""
import collections
import json
import os
import subprocess
import sys
import tempfile

ovl = sys.argv[1] if len(sys.argv) > 1 else "build/apps/ovl"
profile = sys.argv[2] if len(sys.argv) > 2 else "docs/results/validation-h200/profile.json"
sweep = json.load(open("docs/results/gemm-h200-streamk/sk-sweep.json"))
plans = collections.defaultdict(list)
for b in sweep["benchmarks"]:
    plans[b["forced_plan"]].append(b)
print("| plan (shape-tiles_splits_ctas) | measured gain | model gain |")
print("|---|---:|---:|")
with tempfile.TemporaryDirectory() as tmp:
    for plan, rows in sorted(plans.items()):
        path = os.path.join(tmp, "part.json")
        json.dump({"context": sweep["context"], "benchmarks": rows}, open(path, "w"))
        out = subprocess.run([ovl, "validate", "--measured", path, "--profile", profile, "--json"],
                             capture_output=True, text=True, check=True).stdout
        by_impl = {r["name"].split("/")[1]: r for r in json.loads(out)["rows"]}
        if "ovl" not in by_impl:
            print(f"| {plan} | (contiguous: not modelled) | |")
            continue
        o, n = by_impl["ovl"], by_impl["ovl-nosk"]
        print(f"| {plan} | {n['measured_us'] / o['measured_us']:.3f} | {n['model_us'] / o['model_us']:.3f} |")
