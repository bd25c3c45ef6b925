#!/usr/bin/env python3
"""B / A in TFLOP/s per row (shape, layout, SMs), pooled over the processes of several bench_gemm A/B files: each
process (a row's `ab_round`, and `env_value` where gemm-env-ab.sh wrote one) gives one ratio of B's mean to A's mean
over its repetitions, and the table shows the number of processes, the mean ratio, its standard error and the
mean +- 2 standard errors.
    python3 scripts/gemm_pooled_ratio.py A FILE:B [FILE:B ...]    e.g. cublas run1/ab.json:ovl run2/env-ab.json:ovl-e0
Rows without a ratio from at least two processes are left out.
"""
import collections
import json
import math
import re
import statistics
import sys


def per_process_ratios(path, a_name, b_name, ratios):
    sides = collections.defaultdict(lambda: {"a": [], "b": []})
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type") != "iteration" or "tflops" not in b:
            continue
        m = re.match(r"gemm/([^/]+)/(\d+x\d+x\d+)/(\w+)/sms:(\d+)", b["name"])
        if not m or m.group(1) not in (a_name, b_name):
            continue
        row = (m.group(2), m.group(3), int(m.group(4)))
        process = (path, b.get("ab_round"), b.get("env_value"))
        sides[(row, process)]["a" if m.group(1) == a_name else "b"].append(b["tflops"])
    for (row, _), side in sides.items():
        if side["a"] and side["b"]:
            ratios[row].append(statistics.mean(side["b"]) / statistics.mean(side["a"]))


def main():
    if len(sys.argv) < 3 or any(":" not in arg for arg in sys.argv[2:]):
        sys.exit(__doc__)
    a_name = sys.argv[1]
    ratios = collections.defaultdict(list)
    for arg in sys.argv[2:]:
        path, b_name = arg.rsplit(":", 1)
        per_process_ratios(path, a_name, b_name, ratios)
    print(f"| shape | B | SMs | processes | B / {a_name} | standard error | mean +- 2 SE |")
    print("|---|---|---|---|---|---|---|")
    means = []
    for row in sorted(ratios):
        values = ratios[row]
        if len(values) < 2:
            continue
        mean = statistics.mean(values)
        se = statistics.stdev(values) / math.sqrt(len(values))
        means.append(mean)
        print(f"| {row[0]} | {row[1]} | {row[2]} | {len(values)} | {mean:.4f} | {se:.4f} | "
              f"{mean - 2 * se:.3f} .. {mean + 2 * se:.3f} |")
    if means:
        geomean = math.exp(statistics.mean(math.log(v) for v in means))
        print(f"rows {len(means)}: geomean {geomean:.4f}, min {min(means):.4f}, "
              f"{sum(v >= 1.0 for v in means)} of {len(means)} >= 1.0")


if __name__ == "__main__":
    main()
