#!/usr/bin/env python3
"""Tables of a bench_overlap JSON.

  python3 scripts/overlap_table.py bench_overlap.json [--markdown]
      Per problem: the sequential baseline and each mode's best case (its speedup = t_seq / t). The time is the
      case's `us` counter (bench_overlap's mean of back-to-back runs); speedup is the `speedup` counter (t_seq_us / us,
      the baseline measured in the same process). Last: the median over problems of the best mode's speedup.
  python3 scripts/overlap_table.py bench_overlap.json --orders [--markdown]
      Row-band against swizzle order for the same plan (the /groups:<g> and /groups:<g>/order:swizzle cases): per
      pair the operator time (`us`), the GEMM alone (`t_gemm_us`) and the ratio row-band / swizzle (> 1: swizzle
      faster); last the geometric means per mode.
  python3 scripts/overlap_table.py bench_overlap.json --split [--markdown]
      The collective's calls beside the GEMM and after it (counters calls_beside / call_us_beside, calls_after /
      call_us_after: the calls of one traced run that started before the GEMM's end and after it). Per case: the
      calls on each side, their mean duration, the collective alone per call (t_comm_us / calls), after / beside (with
      equal groups: a call's rate beside the GEMM over its rate after it, what beside_gemm_rate_factor stands for)
      and alone / beside; last the medians per mode and op. Sequential (one call, alone) is left out; AllGather's
      calls all run before the GEMM's end, so it has only the second ratio."""
import json
import math
import statistics
import sys


def print_table(header, rows, markdown):
    sep = " | " if markdown else "  "
    if markdown:
        print("| " + sep.join(header) + " |")
        print("|" + "---|" * len(header))
        for r in rows:
            print("| " + sep.join(r) + " |")
    else:
        widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
        for r in [header] + rows:
            print(sep.join(str(x).ljust(w) for x, w in zip(r, widths)))


def cases(doc):
    """(name without the Google Benchmark suffixes, case) of every case that ran."""
    for b in doc.get("benchmarks", []):
        if b.get("error_occurred") or "us" not in b:
            continue
        yield b["name"].split("/iterations:")[0].replace("/manual_time", ""), b


def best_modes(doc, markdown):
    problems = {}
    for name, b in cases(doc):
        parts = name.split("/")
        mode, op, shape, world = parts[1], parts[2], parts[3], parts[4]
        config = "/".join(p for p in parts[5:] if p.startswith(("comm_sms", "groups", "algo", "order")))
        problems.setdefault((op, shape, world), []).append((mode, config, b["us"], b.get("t_seq_us", 0.0),
                                                             b.get("speedup", 0.0), b.get("wrong", 0.0)))
    modes = ["decomposed", "tile-signal", "green-context", "tma"]
    header = ["op", "shape", "world", "seq us"] + [f"{m} (best)" for m in modes] + ["best", "wrong"]
    rows = []
    best_speedups = []
    for (op, shape, world), cs in sorted(problems.items()):
        seq = [c for c in cs if c[0] == "sequential" and "algo" not in c[1]]
        t_seq = seq[0][2] if seq else (cs[0][3] if cs else 0.0)
        row = [op, shape, world, f"{t_seq:.0f}"]
        best = None
        for m in modes:
            mc = [c for c in cs if c[0] == m]
            if not mc:
                row.append("-")
                continue
            c = max(mc, key=lambda c: c[4])
            row.append(f"{c[4]:.3f} {c[1]}")
            if best is None or c[4] > best[4]:
                best = c
        row.append(f"{best[4]:.3f} {best[0]}" if best else "-")
        row.append(f"{sum(c[5] for c in cs):.0f}")
        if best:
            best_speedups.append(best[4])
        rows.append(row)
    print_table(header, rows, markdown)
    if best_speedups:
        print(f"\nmedian over {len(best_speedups)} problems of the best mode's speedup: "
              f"{statistics.median(best_speedups):.3f} (min {min(best_speedups):.3f}, max {max(best_speedups):.3f})")


def orders(doc, markdown):
    pairs = {}
    for name, b in cases(doc):
        swz = name.endswith("/order:swizzle")
        base = name[: -len("/order:swizzle")] if swz else name
        if "/groups:" in base:
            pairs.setdefault(base, {})["swizzle" if swz else "row-band"] = b
    header = ["case", "row-band us", "swizzle us", "op ratio", "GEMM row-band us", "GEMM swizzle us", "GEMM ratio"]
    rows, per_mode = [], {}
    for base in sorted(pairs):
        if len(pairs[base]) != 2:
            continue
        r, s = pairs[base]["row-band"], pairs[base]["swizzle"]
        op, gemm = r["us"] / s["us"], r["t_gemm_us"] / s["t_gemm_us"]
        per_mode.setdefault(base.split("/")[1], []).append((op, gemm))
        rows.append([base.replace("overlap/", ""), f"{r['us']:.0f}", f"{s['us']:.0f}", f"{op:.3f}",
                     f"{r['t_gemm_us']:.0f}", f"{s['t_gemm_us']:.0f}", f"{gemm:.3f}"])
    print_table(header, rows, markdown)
    print()
    geomean = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))
    for mode, v in sorted(per_mode.items()):
        ops = [x[0] for x in v]
        print(f"{mode}: {len(v)} pairs, operator row-band/swizzle geomean {geomean(ops):.4f} "
              f"(swizzle faster in {sum(x > 1 for x in ops)}), GEMM alone {geomean([x[1] for x in v]):.4f}")


def split(doc, markdown):
    rows, by = [], {}
    for name, b in cases(doc):
        parts = name.split("/")
        if parts[1] == "sequential" or "calls_beside" not in b or b["calls_beside"] < 1 or b["call_us_beside"] <= 0:
            continue
        nb, na = int(b["calls_beside"]), int(b["calls_after"])
        alone = b["t_comm_us"] / (nb + na)
        r_after = b["call_us_after"] / b["call_us_beside"] if na else None
        r_alone = alone / b["call_us_beside"]
        by.setdefault((parts[1], parts[2]), []).append((r_after, r_alone))
        fmt = lambda v: "-" if v is None else f"{v:.3f}"
        rows.append(["/".join(parts[1:]), f"{nb} / {na}", f"{b['call_us_beside']:.1f}",
                     f"{b['call_us_after']:.1f}" if na else "-", f"{alone:.1f}", fmt(r_after), fmt(r_alone)])
    print_table(["case", "calls beside / after", "us beside", "us after", "us alone", "after / beside",
                 "alone / beside"], rows, markdown)
    print("\nmedians per mode and op: after / beside (cases), alone / beside (cases)")
    med = lambda v: f"{statistics.median(v):.3f} ({len(v)})" if v else "- (0)"
    for key in sorted(by) + [("all", "")]:
        sel = [x for k, v in by.items() if key[0] == "all" or k == key for x in v]
        print(f"  {key[0]:14s} {key[1]:20s} {med([a for a, _ in sel if a is not None]):>12s}  "
              f"{med([b for _, b in sel]):>12s}")


def main(argv):
    if not argv or argv[0].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    doc = json.load(open(argv[0]))
    table = orders if "--orders" in argv else split if "--split" in argv else best_modes
    table(doc, "--markdown" in argv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
