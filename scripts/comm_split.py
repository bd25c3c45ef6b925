#!/usr/bin/env python3
"""The collective's calls beside the GEMM and after it, from bench_overlap's timeline counters.

    scripts/comm_split.py BENCH_OVERLAP_JSON [--markdown]

bench_overlap records, per case, the collective's calls of one traced run (a group, a chunk, or the whole call)
split by whether they started before the GEMM's end: calls_beside / call_us_beside and calls_after / call_us_after.
With equal groups (one per row band, or g groups of whole bands), call_us_after / call_us_beside is the rate of a
call beside the GEMM over its rate after it: what the model's beside_gemm_rate_factor stands for; and
(t_comm_us / calls) / call_us_beside is its rate beside the GEMM over its rate alone (the collective of the same plan
run alone: t_comm_us). AllGather's calls all run before the GEMM's end, so only the second ratio exists for it. This
prints both per case and their medians per mode and op.
"""
import argparse
import json
import re
import statistics
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench_json")
    ap.add_argument("--markdown", action="store_true", help="a markdown table instead of plain text")
    args = ap.parse_args()
    doc = json.load(open(args.bench_json))
    rows = []
    for b in doc.get("benchmarks", []):
        if b.get("run_type") == "aggregate" or "calls_beside" not in b:
            continue
        m = re.match(r"overlap/([^/]+)/([^/]+)/([^/]+)/world:(\d+)/comm_sms:(\d+)(/groups:(\d+))?(/order:(\w+))?",
                     b["name"])
        if not m or m.group(1) == "sequential":  # sequential's one call runs alone, before or after the GEMM
            continue
        nb, na = int(b["calls_beside"]), int(b["calls_after"])
        if nb == 0 or b["call_us_beside"] <= 0:
            continue
        alone = b["t_comm_us"] / (nb + na)
        rows.append(
            dict(mode=m.group(1), op=m.group(2), shape=m.group(3), comm=int(m.group(5)),
                 groups=(m.group(7) or "band") + ("/" + m.group(9) if m.group(9) else ""),
                 nb=nb, na=na, beside=b["call_us_beside"], after=b["call_us_after"] if na else None, alone=alone,
                 r_after=b["call_us_after"] / b["call_us_beside"] if na else None, r_alone=alone / b["call_us_beside"]))
    if not rows:
        sys.exit("no case with calls beside the GEMM (is it a bench_overlap run with the timeline counters?)")
    head = ["mode", "op", "shape", "comm_sms", "groups", "calls beside / after", "us beside", "us after",
            "us alone", "after / beside", "alone / beside"]
    fmt = lambda v, f: "-" if v is None else format(v, f)
    if args.markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * 5 + "---:|" * 6)
    else:
        print("  ".join(head))
    for r in rows:
        cells = [r["mode"], r["op"], r["shape"], str(r["comm"]), r["groups"], f"{r['nb']} / {r['na']}",
                 fmt(r["beside"], ".1f"), fmt(r["after"], ".1f"), fmt(r["alone"], ".1f"), fmt(r["r_after"], ".3f"),
                 fmt(r["r_alone"], ".3f")]
        print(("| " + " | ".join(cells) + " |") if args.markdown else "  ".join(cells))
    print()
    print("medians per mode and op: after / beside (cases), alone / beside (cases)")
    keys = sorted({(r["mode"], r["op"]) for r in rows})
    for key in keys + [("all", "")]:
        sel = [r for r in rows if key[0] == "all" or (r["mode"], r["op"]) == key]
        ra = [r["r_after"] for r in sel if r["r_after"] is not None]
        rl = [r["r_alone"] for r in sel]
        med = lambda v: f"{statistics.median(v):.3f} ({len(v)})" if v else "- (0)"
        print(f"  {key[0]:14s} {key[1]:20s} {med(ra):>12s}  {med(rl):>12s}")

if __name__ == "__main__":
    main()
