#!/usr/bin/env python3
"""The OVL_BENCH_GEMM_TIMELINE counters of a bench_gemm JSON as a table (means over repetitions; times in us):
    python3 scripts/gemm_timeline_table.py bench_gemm.json [IMPL]
IMPL (default ovl-nosk; also ovl-split) is our kernel's whole-tile impl whose stamps the table reads.
"""
import statistics
import sys

from gemm_runs import gemm_runs

runs = gemm_runs(sys.argv[1])
ours = sys.argv[2] if len(sys.argv) > 2 else "ovl-nosk"


def mean(cases, key):
    values = [c[key] for c in cases if key in c]
    return statistics.mean(values) if values else float("nan")


columns = ["shape", "B", "SMs", "cuBLAS us (bench)", "cuBLAS bracket", f"{ours} us (bench)", "ovl bracket", "gap",
           "CTA start", "first tile", "tile period", "rounds", "after last tile", "bracket - rounds x period"]
print("| " + " | ".join(columns) + " |")
print("|" + "---|" * len(columns))
for row in sorted({k[:3] for k in runs}):
    c, o = runs[row + ("cublas",)], runs[row + (ours,)]
    if not c or not o:
        continue
    rounds, period = o[0]["tl_rounds"], mean(o, "tl_tile_us")
    cells = [row[0], row[1], str(row[2]), f"{mean(c, 'us'):.1f}", f"{mean(c, 'tl_total_us'):.1f}",
             f"{mean(o, 'us'):.1f}", f"{mean(o, 'tl_total_us'):.1f}", f"{mean(o, 'tl_gap_us'):.2f}",
             f"{mean(o, 'tl_start_us'):.2f}", f"{mean(o, 'tl_first_us'):.2f}", f"{period:.2f}", f"{rounds:.0f}",
             f"{mean(o, 'tl_last_us'):.2f}", f"{mean(o, 'tl_total_us') - rounds * period:.1f}"]
    print("| " + " | ".join(cells) + " |")
