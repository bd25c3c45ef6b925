#!/usr/bin/env python3
"""B / A in TFLOP/s per row (shape, layout, SMs), pooled over the processes of several bench_gemm A/B files: each
process of B (a row's `ab_round`, and `env_value` where gemm-env-ab.sh wrote one) gives one ratio of its mean to A's
mean over the repetitions of the same process, or, where A did not run in that process (the other side of a
two-build or two-value A/B), over A's processes of the same round. The table shows the number of ratios, their mean,
its standard error and the mean +- 2 standard errors.
    python3 scripts/gemm_pooled_ratio.py A FILE:B[=A2][!SKIP] [FILE:B[=A2][!SKIP] ...]
e.g. cublas run1/ab.json:ovl run2/env-ab.json:ovl-e0 run3/ab.json:ovl-base=cublas-base (B=A2: that file's reference
is A2, as for the base side of a two-build A/B, whose rows gemm-ab-build.sh renames <impl>-base). !SKIP leaves out
that file's rows whose "<shape>/<layout>/sms:<n>" matches the regular expression SKIP (rows where B ran another plan
than the kernel being pooled). Rows without a ratio from at least two processes are left out.
"""
import collections
import math
import re
import statistics
import sys

from gemm_runs import gemm_runs


def per_process_ratios(path, a_name, b_name, ratios, skip=None):
    # per side: (row, round, env_value) -> TFLOP/s of each repetition
    sides = {a_name: collections.defaultdict(list), b_name: collections.defaultdict(list)}
    for (shape, layout, sms, impl), entries in gemm_runs(path).items():
        if impl not in sides:
            continue
        for e in entries:
            if "tflops" in e:
                sides[impl][((shape, layout, sms), e.get("ab_round"), e.get("env_value"))].append(e["tflops"])
    a_side = sides[a_name]
    for (row, round_, value), b_tflops in sides[b_name].items():
        if skip and re.search(skip, f"{row[0]}/{row[1]}/sms:{row[2]}"):
            continue
        a_tflops = a_side.get((row, round_, value))
        if a_tflops is None:
            a_tflops = [t for (r, rd, _), ts in a_side.items() if r == row and rd == round_ for t in ts]
        if a_tflops:
            ratios[row].append(statistics.mean(b_tflops) / statistics.mean(a_tflops))


def main():
    if len(sys.argv) < 3 or any(":" not in arg for arg in sys.argv[2:]):
        sys.exit(__doc__)
    a_name = sys.argv[1]
    ratios = collections.defaultdict(list)
    paths = [arg.partition("!")[0].rsplit(":", 1)[0] for arg in sys.argv[2:]]
    if len(set(paths)) != len(paths):
        sys.exit("gemm_pooled_ratio: a file is named twice; its processes would count twice")
    for arg in sys.argv[2:]:
        arg, _, skip = arg.partition("!")
        path, b_name = arg.rsplit(":", 1)
        b_name, _, a_file = b_name.partition("=")
        per_process_ratios(path, a_file or a_name, b_name, ratios, skip or None)
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
