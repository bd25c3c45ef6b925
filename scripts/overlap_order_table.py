#!/usr/bin/env python3
"""Row-band against swizzle order for the same overlap plan (bench_overlap's /groups:<g> and /groups:<g>/order:swizzle
cases): per pair the operator time (`us`), the GEMM alone (`t_gemm_us`) and the ratio row-band / swizzle (> 1: swizzle
faster); last the geometric means per mode.

  python3 scripts/overlap_order_table.py bench_overlap.json [--markdown]"""
import json
import math
import sys


def main(argv):
    if not argv or argv[0].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    md = "--markdown" in argv
    rows = {}
    for b in json.load(open(argv[0]))["benchmarks"]:
        if b.get("error_occurred") or "us" not in b:
            continue
        name = b["name"].split("/iterations:")[0].replace("/manual_time", "")
        swz = name.endswith("/order:swizzle")
        base = name[: -len("/order:swizzle")] if swz else name
        if "/groups:" not in base:
            continue
        rows.setdefault(base, {})["swizzle" if swz else "row-band"] = b
    head = ["case", "row-band us", "swizzle us", "op ratio", "GEMM row-band us", "GEMM swizzle us", "GEMM ratio"]
    sep = " | " if md else "  "
    out = [("| " if md else "") + sep.join(head) + (" |" if md else "")]
    if md:
        out.append("|" + "---|" * len(head))
    per_mode = {}
    for base in sorted(rows):
        pair = rows[base]
        if len(pair) != 2:
            continue
        r, s = pair["row-band"], pair["swizzle"]
        op, gemm = r["us"] / s["us"], r["t_gemm_us"] / s["t_gemm_us"]
        mode = base.split("/")[1]
        per_mode.setdefault(mode, []).append((op, gemm))
        cells = [base.replace("overlap/", ""), f"{r['us']:.0f}", f"{s['us']:.0f}", f"{op:.3f}",
                 f"{r['t_gemm_us']:.0f}", f"{s['t_gemm_us']:.0f}", f"{gemm:.3f}"]
        out.append(("| " if md else "") + sep.join(cells) + (" |" if md else ""))
    print("\n".join(out))
    print()
    for mode, v in sorted(per_mode.items()):
        g = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))
        ops = [x[0] for x in v]
        print(f"{mode}: {len(v)} pairs, operator row-band/swizzle geomean {g(ops):.4f} "
              f"(swizzle faster in {sum(x > 1 for x in ops)}), GEMM alone {g([x[1] for x in v]):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
