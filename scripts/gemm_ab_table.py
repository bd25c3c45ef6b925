#!/usr/bin/env python3
"""An A/B of two bench_gemm impls per row (shape, layout, SMs): B / A in TFLOP/s from the means over repetitions, the
range of the per-repetition ratios, and both impls' mean SM clock; then the geomean and the rows where B is faster,
over all rows and per SM count.
    python3 scripts/gemm_ab_table.py bench_gemm.json A B      e.g. ovl-tmastore ovl-deferred
"""
import collections
import math
import statistics
import sys

from gemm_runs import gemm_runs

runs = gemm_runs(sys.argv[1])
a_name, b_name = sys.argv[2], sys.argv[3]


def mean(cases, key):
    values = [c[key] for c in cases if key in c]
    return statistics.mean(values) if values else float("nan")


print(f"| shape | B | SMs | {a_name} | {b_name} | {b_name} / {a_name} (range) | {a_name} MHz | {b_name} MHz |")
print("|---|---|---|---|---|---|---|---|")
ratios = collections.defaultdict(list)
for row in sorted({k[:3] for k in runs}):
    a, b = runs.get(row + (a_name,)), runs.get(row + (b_name,))
    if not a or not b:
        continue
    ratio = mean(b, "tflops") / mean(a, "tflops")
    paired = [y["tflops"] / x["tflops"] for x, y in zip(a, b)]
    ratios[row[2]].append(ratio)
    ratios["all"].append(ratio)
    print(f"| {row[0]} | {row[1]} | {row[2]} | {mean(a, 'tflops'):.0f} | {mean(b, 'tflops'):.0f} | {ratio:.3f} "
          f"({min(paired):.3f}-{max(paired):.3f}) | {mean(a, 'sm_mhz'):.0f} | {mean(b, 'sm_mhz'):.0f} |")
for key, values in sorted(ratios.items(), key=lambda kv: str(kv[0])):
    geomean = math.exp(statistics.mean(math.log(r) for r in values))
    faster = sum(r > 1 for r in values)
    print(f"sms {key}: {b_name}/{a_name} geomean {geomean:.4f}, min {min(values):.3f}, max {max(values):.3f}, "
          f"{b_name} faster on {faster}/{len(values)}")
