#!/usr/bin/env python3
"""Signalling cost per row of a bench_gemm JSON: 1 - ovl / ovl-nosignal in TFLOP/s (positive: signals cost time),
from the means over repetitions, with the spread of the per-repetition ratios (paired by repetition index, which
random interleaving makes adjacent in time only on average) and the standard error of the mean difference; then the
mean over rows and per SM count.
    python3 scripts/gemm_signal_cost.py bench_gemm.json
"""
import collections
import math
import statistics
import sys

from gemm_runs import gemm_runs

runs = {k: [b["tflops"] for b in v] for k, v in gemm_runs(sys.argv[1]).items()}

rows = sorted({k[:3] for k in runs if k[3] == "ovl" and k[:3] + ("ovl-nosignal",) in runs})
print("| shape | B | SMs | ovl | ovl-nosignal | cost | per-repetition range | standard error |")
print("|---|---|---|---|---|---|---|---|")
costs = collections.defaultdict(list)
for r in rows:
    s, n = runs[r + ("ovl",)], runs[r + ("ovl-nosignal",)]
    cost = 1 - statistics.mean(s) / statistics.mean(n)
    paired = [1 - a / b for a, b in zip(s, n)]
    se = math.sqrt(statistics.variance(s) / len(s) + statistics.variance(n) / len(n)) / statistics.mean(n)
    costs[r[2]].append(cost)
    costs["all"].append(cost)
    print(f"| {r[0]} | {r[1]} | {r[2]} | {statistics.mean(s):.1f} | {statistics.mean(n):.1f} | {100 * cost:+.2f}% | "
          f"{100 * min(paired):+.2f} .. {100 * max(paired):+.2f}% | {100 * se:.2f}% |")
for k, v in sorted(costs.items(), key=lambda kv: str(kv[0])):
    print(f"sms {k}: mean cost {100 * statistics.mean(v):+.2f}%, max {100 * max(v):+.2f}%, rows over 2%: "
          f"{sum(c > 0.02 for c in v)}/{len(v)}")
