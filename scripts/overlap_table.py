#!/usr/bin/env python3
"""Per problem of a bench_overlap JSON: the sequential baseline and each mode's best case (its speedup = t_seq / t).

  python3 scripts/overlap_table.py bench_overlap.json [--markdown]

The time is the case's `us` counter (bench_overlap's mean of back-to-back runs); speedup is the `speedup` counter
(t_seq_us / us, the baseline measured in the same process). Prints one row per (op, shape) and, last, the median
over problems of the best mode's speedup."""
import json
import statistics
import sys


def main(argv):
    if not argv or argv[0].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    markdown = "--markdown" in argv
    doc = json.load(open(argv[0]))
    problems = {}
    for b in doc.get("benchmarks", []):
        if b.get("error_occurred") or "us" not in b:
            continue
        parts = b["name"].split("/")
        mode, op, shape, world = parts[1], parts[2], parts[3], parts[4]
        config = "/".join(p for p in parts[5:] if p.startswith(("comm_sms", "groups", "algo")))
        problems.setdefault((op, shape, world), []).append((mode, config, b["us"], b.get("t_seq_us", 0.0),
                                                             b.get("speedup", 0.0), b.get("wrong", 0.0)))
    modes = ["decomposed", "tile-signal", "green-context", "tma"]
    sep = " | " if markdown else "  "
    header = ["op", "shape", "world", "seq us"] + [f"{m} (best)" for m in modes] + ["best", "wrong"]
    rows = []
    best_speedups = []
    for (op, shape, world), cases in sorted(problems.items()):
        seq = [c for c in cases if c[0] == "sequential" and "algo" not in c[1]]
        t_seq = seq[0][2] if seq else (cases[0][3] if cases else 0.0)
        row = [op, shape, world, f"{t_seq:.0f}"]
        best = None
        for m in modes:
            mc = [c for c in cases if c[0] == m]
            if not mc:
                row.append("-")
                continue
            c = max(mc, key=lambda c: c[4])
            row.append(f"{c[4]:.3f} {c[1]}")
            if best is None or c[4] > best[4]:
                best = c
        row.append(f"{best[4]:.3f} {best[0]}" if best else "-")
        row.append(f"{sum(c[5] for c in cases):.0f}")
        if best:
            best_speedups.append(best[4])
        rows.append(row)
    if markdown:
        print("| " + sep.join(header) + " |")
        print("|" + "---|" * len(header))
        for r in rows:
            print("| " + sep.join(r) + " |")
    else:
        widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
        for r in [header] + rows:
            print(sep.join(str(x).ljust(w) for x, w in zip(r, widths)))
    if best_speedups:
        print(f"\nmedian over {len(best_speedups)} problems of the best mode's speedup: "
              f"{statistics.median(best_speedups):.3f} (min {min(best_speedups):.3f}, max {max(best_speedups):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
