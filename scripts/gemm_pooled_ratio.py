#!/usr/bin/env python3
"""B / A in TFLOP/s per row (shape, layout, SMs), pooled over the processes of several bench_gemm A/B files: each
process of B (a row's `ab_round`, and `env_value` where gemm-env-ab.sh wrote one) gives one ratio of its mean to A's
mean over the repetitions of the same process, or, where A did not run in that process (the other side of a
two-build or two-value A/B), over A's processes of the same round. The table shows the number of ratios, their mean,
its standard error and the mean +- 2 standard errors.
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
    # (row, round, env_value) -> TFLOP/s of each repetition, per side
    sides = {"a": collections.defaultdict(list), "b": collections.defaultdict(list)}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type") != "iteration" or "tflops" not in b:
            continue
        m = re.match(r"gemm/([^/]+)/(\d+x\d+x\d+)/(\w+)/sms:(\d+)", b["name"])
        if not m or m.group(1) not in (a_name, b_name):
            continue
        row = (m.group(2), m.group(3), int(m.group(4)))
        sides["a" if m.group(1) == a_name else "b"][(row, b.get("ab_round"), b.get("env_value"))].append(b["tflops"])
    for (row, round_, value), b_tflops in sides["b"].items():
        a_tflops = sides["a"].get((row, round_, value))
        if a_tflops is None:
            a_tflops = [t for (r, rd, _), ts in sides["a"].items() if r == row and rd == round_ for t in ts]
        if a_tflops:
            ratios[row].append(statistics.mean(b_tflops) / statistics.mean(a_tflops))


def main():
    if len(sys.argv) < 3 or any(":" not in arg for arg in sys.argv[2:]):
        sys.exit(__doc__)
    a_name = sys.argv[1]
    ratios = collections.defaultdict(list)
    paths = [arg.rsplit(":", 1)[0] for arg in sys.argv[2:]]
    if len(set(paths)) != len(paths):
        sys.exit("gemm_pooled_ratio: a file is named twice; its processes would count twice")
    for arg in sys.argv[2:]:
        path, b_name = arg.rsplit(":", 1)
        per_process_ratios(path, a_name, b_name, ratios)
    print(f"| shape | B | SMs | ratios | B / {a_name} | standard error | mean +- 2 SE |")
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
