#!/usr/bin/env python3
"""ovl / cuBLAS table of a bench_gemm JSON: per row the mean TFLOP/s of each impl over its repetitions, the tail plan
`ovl` ran (stream-K tiles x splits, or half tiles; the epilogue when it is not kTmaStore), ovl / cublas with
the range over repetitions paired by index, and ovl / ovl-nosk; then per SM count and over the 116/124/128-SM
partitions the geomean, min and rows >= 1.0.
    python3 scripts/gemm_ratio_table.py bench_gemm.json [IMPL]
IMPL (default ovl) is the impl whose ratios are taken, e.g. ovl-cluster2 or ovl-nosk; the columns keep every impl.
"""
import collections
import math
import statistics
import sys

from gemm_runs import gemm_runs

main = sys.argv[2] if len(sys.argv) > 2 else "ovl"
cases = gemm_runs(sys.argv[1])
runs = {k: [b["tflops"] for b in v] for k, v in cases.items()}
mhz = {k: [b["sm_mhz"] for b in v] for k, v in cases.items() if all("sm_mhz" in b for b in v)}
# bench_gemm's `epilogue` counter (GemmEpilogue's value; older JSON has only `split_epilogue`).
EPILOGUES = {2: ", registers epilogue", 3: ", split epilogue", 4: ", deferred epilogue"}
plan = {}
for (shape, layout, sms, impl), v in cases.items():
    if impl == "ovl":
        sk, half = int(v[0].get("sk_tiles", 0)), int(v[0].get("half_tiles", 0))
        epilogue = int(v[0].get("epilogue", 3 if v[0].get("split_epilogue", 0) else 1))
        plan[(shape, layout, sms)] = ((f"stream-K {sk} x {int(v[0].get('sk_splits', 0))}" if sk
                                       else f"halves {half}" if half else "whole") + EPILOGUES.get(epilogue, ""))

impls = sorted({k[3] for k in runs})
clocks = bool(mhz)  # bench_gemm's sm_mhz counter (NVML): then a column of each impl's mean SM clock follows
print("| shape | B | SMs | ovl's tail plan | " + " | ".join(impls) + f" | {main}/cublas (range) | {main}/ovl-nosk |" +
      ("".join(f" {i} MHz |" for i in impls) if clocks else ""))
print("|---|---|---|---|" + "---|" * len(impls) + "---|---|" + ("---|" * len(impls) if clocks else ""))
ratios = collections.defaultdict(list)
for row in sorted({k[:3] for k in runs}):
    mean = {i: statistics.mean(runs[row + (i,)]) for i in impls if runs.get(row + (i,))}
    if main not in mean or "cublas" not in mean:
        continue
    oc = mean[main] / mean["cublas"]
    paired = [o / c for o, c in zip(runs[row + (main,)], runs[row + ("cublas",)])]
    on = mean[main] / mean["ovl-nosk"] if "ovl-nosk" in mean else float("nan")
    ratios[row[2]].append(oc)
    cells = " | ".join(f"{mean[i]:.0f}" if i in mean else "" for i in impls)
    print(f"| {row[0]} | {row[1]} | {row[2]} | {plan.get(row, '')} | " + cells +
          f" | {oc:.3f} ({min(paired):.3f}-{max(paired):.3f}) | {on:.3f} |" +
          ("".join(f" {statistics.mean(mhz[row + (i,)]):.0f} |" if mhz.get(row + (i,)) else " |" for i in impls)
           if clocks else ""))
geomean = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
for sms in sorted(ratios):
    r = ratios[sms]
    print(f"sms {sms}: {main}/cublas geomean {geomean(r):.3f}, min {min(r):.3f}, rows >= 1.0: {sum(x >= 1 for x in r)}/{len(r)}")
part = [x for s in (116, 124, 128) for x in ratios.get(s, [])]
if part:
    print(f"116/124/128: {main}/cublas geomean {geomean(part):.3f}, min {min(part):.3f}, rows >= 1.0: {sum(x >= 1 for x in part)}/{len(part)}")
