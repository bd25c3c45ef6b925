#!/usr/bin/env python3
"""Median table of a bench_gemm JSON (repetitions > 1): TFLOP/s per impl, ovl/cuBLAS, signal cost, summaries.

usage: table.py bench_gemm.json
"""
import json
import math
import re
import sys


def geomean(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


def main(path):
    data = json.load(open(path))
    ctx = data["context"]
    med, reps = {}, {}
    for b in data["benchmarks"]:
        m = re.match(r"gemm/([^/]+)/(\d+x\d+x\d+)/(nn|nt)/sms:(\d+)", b["name"])
        if not m:
            continue
        impl, shape, layout, sms = m.groups()
        key = (shape, layout, int(sms))
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") == "median":
            med[key + (impl,)] = b["tflops"]
        elif b.get("run_type") == "iteration":
            reps.setdefault(b["run_name"], []).append(b["tflops"])
    impls = [i for i in ("ovl", "ovl-nosignal", "ovl-registers", "cublas") if any(k[3] == i for k in med)]
    print(f"date {ctx.get('date')}, host {ctx.get('host_name')}; TFLOP/s, median of the repetitions\n")
    print("| shape | B | sms | " + " | ".join(impls) + " | ovl/cublas | registers/cublas | signal cost % |")
    print("|---|---|---:|" + "---:|" * (len(impls) + 3))
    keys = sorted({k[:3] for k in med}, key=lambda k: (k[0], k[1], -k[2]))
    ratio, ratio_reg, cost = {}, {}, []
    for k in keys:
        row = [med.get(k + (i,)) for i in impls]
        c = med.get(k + ("cublas",))
        o = med.get(k + ("ovl",))
        r = med.get(k + ("ovl-registers",))
        n = med.get(k + ("ovl-nosignal",))
        ratio[k] = o / c if o and c else None
        ratio_reg[k] = r / c if r and c else None
        sc = 100 * (n - o) / n if n and o else None
        if sc is not None:
            cost.append(sc)
        cells = [f"{x:.1f}" if x else "-" for x in row]
        fmt = lambda x, p=3: f"{x:.{p}f}" if x is not None else "-"
        print(f"| {k[0]} | {k[1]} | {k[2]} | " + " | ".join(cells) +
              f" | {fmt(ratio[k])} | {fmt(ratio_reg[k])} | {fmt(sc, 2)} |")
    print()
    def summary(name, sel):
        xs = [ratio[k] for k in keys if sel(k) and ratio[k]]
        if xs:
            print(f"- ovl/cublas, {name}: geomean {geomean(xs):.3f}, min {min(xs):.3f}, max {max(xs):.3f} ({len(xs)} rows)")
    summary("all rows", lambda k: True)
    summary("132 SMs", lambda k: k[2] == 132)
    summary("116/124/128-SM partitions", lambda k: k[2] in (116, 124, 128))
    xs = [ratio_reg[k] for k in keys if ratio_reg[k]]
    if xs:
        print(f"- ovl-registers/cublas, all rows: geomean {geomean(xs):.3f}")
    if cost:
        s = sorted(cost)
        print(f"- signal cost (nosignal - ovl) / nosignal: mean {sum(s) / len(s):.2f}%, median {s[len(s) // 2]:.2f}%, "
              f"range {s[0]:.2f} .. {s[-1]:.2f}% ({len(s)} rows)")
    sp = sorted((max(v) - min(v)) / max(v) for v in reps.values() if len(v) >= 2)
    if sp:
        n = max(len(v) for v in reps.values())
        print(f"- spread (max - min) / max of a case's {n} repetitions: median {100 * sp[len(sp) // 2]:.1f}%, "
              f"90th percentile {100 * sp[int(0.9 * len(sp))]:.1f}%")

if __name__ == "__main__":
    main(sys.argv[1])
