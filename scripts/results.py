#!/usr/bin/env python3
"""ovl's table-and-plot tool over Google Benchmark JSON (bench_gemm, bench_collectives, bench_overlap) and
`ovl validate --json` output.

usage: scripts/results.py COMMAND [ARGS...]        scripts/results.py COMMAND --help for one command's usage

  table       compact table of any benchmark JSON: name, time, the counters ovl reports
  gemm        ovl / cuBLAS per row of a bench_gemm JSON, per SM count and over the 116/124/128-SM partitions
  coll        bus bandwidth per op, size, implementation and CTA count of a bench_collectives JSON
  overlap     per problem the sequential baseline and each mode's best case of a bench_overlap JSON
  split       split benchmark JSON into fit and held-out sets by a regular expression on the names
  validation  markdown table of `ovl validate --json` results (model and simulator error, ranking)
  headline    per set of rows the model and simulator error of `ovl validate --json` results, the rankings, and
              bench_autoplan's candidates ranked by `ovl simulate` (scripts/validate-paced.sh, validate-multigpu.sh)
  smi         per-section SM clock and power from nvidia-smi samples (scripts/device-run.sh's summary)
  ab-merge    merge the per-process benchmark files of an A/B into one file (scripts/gemm-ab.sh)
  ab          B / A per row of two bench_gemm impls, or per bench_overlap case of two sides (scripts/gemm-ab.sh)
  beside      the GEMM's time beside copy traffic (bench_gemm with OVL_BENCH_GEMM_BESIDE) against alone
  autoplan    the automatic plan against sequential and the best measured plan (bench_autoplan JSON)
  performance the tables and SVG plots of docs/performance.md, from results/<gpu>/
  links       check the relative links and images of README.md, results/README.md and docs/*.md
  in-doc      check that the last table another command prints stands row for row in a document
  link-profile  a link profile (model/profiles/*.json) fitted from a real world's bench_collectives JSON
"""
import argparse
import collections
import contextlib
import datetime
import glob
import gzip
import io
import itertools
import json
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile


def gemm_runs(path):
    """bench_gemm rows grouped by (shape, layout, SMs, impl), each a list of the entries in repetition order. A path
    ending in .gz is read through gzip."""
    runs = collections.defaultdict(list)
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        benchmarks = json.load(f)["benchmarks"]
    for b in benchmarks:
        if b.get("run_type") != "iteration":
            continue
        m = re.match(r"gemm/([^/]+)/(\d+x\d+x\d+)/(\w+)/sms:(\d+)", b["name"])
        if m:
            runs[(m.group(2), m.group(3), int(m.group(4)), m.group(1))].append(b)
    return runs


def cmd_table(argv):
    """Prints a compact table of a Google Benchmark JSON file: name, time (us) and the counters ovl reports.
        scripts/results.py table FILE.json... [--counters a,b,...] [--filter REGEX]
    --counters names the counters to print instead (e.g. t_comm_us,t_gemm_us of bench_overlap); --filter keeps the
    cases whose name it matches (re.search)."""
    ap = argparse.ArgumentParser(prog="results.py table")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--counters", default="tflops,algbw_GBps,busbw_GBps,GBps,speedup,efficiency,wrong")
    ap.add_argument("--filter", default="")
    args = ap.parse_args(argv)
    KEYS = tuple(k for k in args.counters.split(",") if k)
    keep = re.compile(args.filter)

    for path in args.files:
        with open(path) as f:
            data = json.load(f)
        ctx = data.get("context", {})
        print(f"# {path}: {ctx.get('gpu', '?')} sm={ctx.get('sm_count', '?')} date={ctx.get('date', '?')}")
        for b in data.get("benchmarks", []):
            if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
                continue
            if not keep.search(b["name"]):
                continue
            if b.get("error_occurred"):
                print(f"{b['name']:<60} ERROR {b.get('error_message', '')}")
                continue
            scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b.get("time_unit", "ns")]
            cols = [f"{k}={b[k]:.4g}" for k in KEYS if k in b]
            print(f"{b['name']:<60} {b['real_time'] * scale:10.2f} us  " + " ".join(cols))


def cmd_gemm(argv):
    """ovl / cuBLAS table of a bench_gemm JSON: per row the mean TFLOP/s of each impl over its repetitions, the tail plan
    `ovl` ran (stream-K tiles x splits, or half tiles; the epilogue when it is not kTmaStore), ovl / cublas with
    the range over repetitions paired by index, and ovl / ovl-nosk; then per SM count and over the 116/124/128-SM
    partitions the geomean, min and rows >= 1.0.
        scripts/results.py gemm bench_gemm.json [IMPL]
    IMPL (default ovl) is the impl whose ratios are taken, e.g. ovl-split or ovl-nosk; the columns keep every impl."""
    sys.argv = ['results.py gemm'] + argv
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


def cmd_coll(argv):
    """Bus bandwidth (GB/s) per op and size of a bench_collectives JSON, one column per implementation and CTA count.

      scripts/results.py coll bench_collectives.json [--ctas 1,2,4,8,16,32] [--markdown]

    Rows: op x bytes; columns: nccl at ctas:0 (NCCL's own CTA choice, real worlds only) and at each CTA count,
    nccl-symmetric (real worlds) at each CTA count and at ctas:0 ("zero": CTA policy zero, the AllGather on the copy
    engines), then tma-push, tma-pull and simt at each CTA count. A case with wrong > 0 is marked '!'."""
    sys.argv = ['results.py coll'] + argv
    parser = argparse.ArgumentParser()
    parser.add_argument("json")
    parser.add_argument("--ctas", default="1,2,4,8,16,32")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    ctas = [int(c) for c in args.ctas.split(",")]
    doc = json.load(open(args.json))
    cell = {}
    world = None
    for b in doc.get("benchmarks", []):
        if b.get("error_occurred") or not b["name"].startswith("coll/"):
            continue
        parts = b["name"].split("/")
        impl, op, size = parts[1], parts[2], int(parts[3])
        world = parts[4]
        c = int(parts[5].split(":")[1])
        cell[(op, size, impl, c)] = f"{b['busbw_GBps']:.0f}" + ("!" if b.get("wrong", 0) else "")
    columns = [("nccl", 0)] + [(i, c) for i in ("nccl", "nccl-symmetric") for c in ctas] + [("nccl-symmetric", 0)]
    columns += [(i, c) for i in ("tma-push", "tma-pull", "simt") for c in ctas]
    # nccl-symmetric's columns only where cases fill them (real worlds).
    columns = [(i, c) for i, c in columns if i != "nccl-symmetric" or any(k[2:] == (i, c) for k in cell)]
    header = ["op", "MiB"] + [f"{i}:{c}" if c else f"{i}:{'zero' if i == 'nccl-symmetric' else 'auto'}"
                              for i, c in columns]
    rows = []
    for op in ("allreduce", "reducescatter", "allgather", "reduce", "broadcast"):  # the last two: NCCL's, root 0
        for size in sorted({k[1] for k in cell if k[0] == op}):
            rows.append([op, str(size >> 20)] + [cell.get((op, size, i, c), "-") for i, c in columns])
    print(f"busbw GB/s, {world}, columns impl:ctas")
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for r in rows:
            print("| " + " | ".join(r) + " |")
    else:
        widths = [max(len(x) for x in col) for col in zip(header, *rows)]
        for r in [header] + rows:
            print("  ".join(x.rjust(w) for x, w in zip(r, widths)))


def cmd_overlap(argv):
    """Tables of a bench_overlap JSON.

    scripts/results.py overlap bench_overlap.json [--markdown]
        Per problem: the sequential baseline and each mode's best case (its speedup = t_seq / t). The time is the
        case's `us` counter (bench_overlap's mean of back-to-back runs); speedup is the `speedup` counter (t_seq_us / us,
        the baseline measured in the same process). Then the median over problems of the best mode's speedup, and per op
        and mode the speedups by time over the one sequential plan without /algo: (t_seq / us of the mode's fastest
        case) and how often that case is its problem's fastest; per NCCL mode and comm SMs the overlap efficiency
        (median, and the plans at most 0.05: nothing overlapped), and tile-signal's time over the same plan on a
        green-context partition.
    scripts/results.py overlap bench_overlap.json --orders [--markdown]
        Row-band against swizzle order for the same plan (the /groups:<g> and /groups:<g>/order:swizzle cases): per
        pair the operator time (`us`), the GEMM alone (`t_gemm_us`) and the ratio row-band / swizzle (> 1: swizzle
        faster); last the geometric means per mode.
    scripts/results.py overlap bench_overlap.json --split [--markdown]
        The collective's calls beside the GEMM and after it (counters calls_beside / call_us_beside, calls_after /
        call_us_after: the calls of one traced run that started before the GEMM's end and after it). Per case: the
        calls on each side, their mean duration, the collective alone per call (t_comm_us / calls), after / beside (with
        equal groups: a call's rate beside the GEMM over its rate after it, what beside_gemm_rate_factor stands for)
        and alone / beside; last the medians per mode and op. Sequential (one call, alone) is left out; AllGather's
        calls all run before the GEMM's end, so it has only the second ratio.
    scripts/results.py overlap A.json --compare B.json [--markdown]
        Case by case over the names both files hold (e.g. a paced loopback run, OVL_LINK_PROFILE=h200x2
        OVL_BENCH_LOOPBACK_WORLD=2, against results/h200x2/bench_overlap.json): each file's time (`us`), A / B, and
        each file's speedup; then per problem each file's best mode and speedup among the cases both ran; last the medians (A / B of the times,
        the best speedups), how many problems pick the same best mode, A / B per mode, the collective alone
        (t_comm_us) A / B per mode and comm SMs, and per mode and comm SMs the operator's A / B and each side's overlap
        efficiency (medians)."""
    sys.argv = ['results.py overlap'] + argv
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
            config = "/".join(p for p in parts[5:]
                              if p.startswith(("comm_sms", "groups", "algo", "cta_policy", "order")))
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
        # By time against one baseline (the sequential plan without /algo:, NCCL's or its stand-in), per op and mode
        # (the sequential ones under their algorithm): its fastest case's t_seq / us, and on how many problems that case
        # is the fastest of every case.
        def mode_key(c):  # a mode, or the sequential plan with its case's suffix
            return c[0] if c[0] != "sequential" else c[0] + " " + c[1]

        by_time = {}
        for (op, shape, world), cs in problems.items():
            seq = [c for c in cs if c[0] == "sequential" and "algo" not in c[1]]
            if not seq:
                continue
            fastest = min(c[2] for c in cs)
            mine = {}
            for c in cs:
                mine[mode_key(c)] = min(mine.get(mode_key(c), c[2]), c[2])
            for key, t in mine.items():
                by_time.setdefault((op, key), []).append((seq[0][2] / t, t == fastest))
        for (op, key), v in sorted(by_time.items()):
            if key.startswith("sequential") and "algo" not in key:
                continue
            x = [a for a, _ in v]
            print(f"{op} {key}: by time over the sequential {min(x):.3f}-{max(x):.3f}x, the fastest case of its "
                  f"problem on {sum(f for _, f in v)} of {len(v)}")
        # The tma mode's efficiency ((t_gemm + t_comm - us) / min(t_gemm, t_comm)) where the collective alone takes at
        # least 20% of the GEMM's time, default plans (no /groups) and all; each mode's default plans' speedups; the
        # most wrong elements of one case.
        tma = [(name, b) for name, b in cases(doc) if name.split("/")[1] == "tma" and "efficiency" in b
               and b.get("t_comm_us", 0) >= 0.2 * b.get("t_gemm_us", 0)]
        for label, sel in (("default plans", [b for n, b in tma if "/groups:" not in n]), ("all plans", [b for _, b in tma])):
            e = [b["efficiency"] for b in sel]
            if e:
                print(f"tma efficiency, collective >= 20% of the GEMM, {label}: median {statistics.median(e):.2f} "
                      f"({min(e):.2f}-{max(e):.2f}), at least 0.8 in {sum(x >= 0.8 for x in e)} of {len(e)}")
        for m in ["decomposed", "tile-signal", "green-context", "tma"]:
            sp = [b["speedup"] for n, b in cases(doc) if n.split("/")[1] == m and "/groups:" not in n
                  and "/algo:" not in n and "speedup" in b]
            if sp:
                print(f"{m} default plans: speedup {min(sp):.2f}-{max(sp):.2f} over {len(sp)} cases")
        # The overlap efficiency per mode and comm SMs (every plan of the NCCL modes): where the collective overlapped
        # nothing (at most 0.05); and tile-signal's time over the same plan on a green-context partition.
        eff = collections.defaultdict(list)
        for n, b in cases(doc):
            c = re.search(r"/comm_sms:(\d+)", n)
            if n.split("/")[1] in ("decomposed", "tile-signal", "green-context") and "efficiency" in b and c:
                eff[(n.split("/")[1], int(c.group(1)))].append(b["efficiency"])
        for (m, c), e in sorted(eff.items()):
            print(f"{m} comm_sms {c}: efficiency median {statistics.median(e):.2f} ({min(e):.2f}-{max(e):.2f}), at "
                  f"most 0.05 in {sum(x <= 0.05 for x in e)} of {len(e)}")
        by_name = dict(cases(doc))
        ts_gc = collections.defaultdict(list)
        for n, b in by_name.items():
            gc = n.replace("/tile-signal/", "/green-context/", 1)
            c = re.search(r"/comm_sms:(\d+)", n)
            if n.split("/")[1] == "tile-signal" and gc in by_name and c:
                ts_gc[int(c.group(1))].append(b["us"] / by_name[gc]["us"])
        for c, r in sorted(ts_gc.items()):
            print(f"tile-signal / green-context, same plan, comm_sms {c}: median {statistics.median(r):.2f} "
                  f"({min(r):.2f}-{max(r):.2f}) over {len(r)}")
        wrong = [b.get("wrong", 0.0) for _, b in cases(doc)]
        if wrong:
            print(f"wrong: at most {max(wrong):.0f} elements in one case, {sum(w > 0 for w in wrong)} cases with any")


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


    def best_per_problem(doc, only=None):
        """Per problem the fastest overlapped case (by speedup), among the names in `only` when given."""
        best = {}
        for name, b in cases(doc):
            parts = name.split("/")
            if parts[1] == "sequential" or (only is not None and name not in only):
                continue
            key = (parts[2], parts[3], parts[4])
            if key not in best or b.get("speedup", 0.0) > best[key][1]:
                best[key] = (parts[1] + " " + "/".join(parts[5:]), b.get("speedup", 0.0))
        return best

    def compare(doc, other, markdown):
        a, b = dict(cases(doc)), dict(cases(other))
        common = [n for n in a if n in b]
        rows, ratios = [], []
        for n in common:
            r = a[n]["us"] / b[n]["us"]
            ratios.append(r)
            rows.append([n.replace("overlap/", ""), f"{a[n]['us']:.0f}", f"{b[n]['us']:.0f}", f"{r:.3f}",
                         f"{a[n].get('speedup', 0.0):.3f}", f"{b[n].get('speedup', 0.0):.3f}"])
        print_table(["case", "A us", "B us", "A / B", "A speedup", "B speedup"], rows, markdown)
        # The best of each problem among the cases both ran, so both pick from the same plans.
        both = set(common)
        ba, bb = best_per_problem(doc, both), best_per_problem(other, both)
        keys = sorted(k for k in ba if k in bb)
        print()
        print_table(["op", "shape", "world", "A best", "A speedup", "B best", "B speedup"],
                    [[*k, ba[k][0], f"{ba[k][1]:.3f}", bb[k][0], f"{bb[k][1]:.3f}"] for k in keys], markdown)
        if ratios:
            same = sum(ba[k][0].split()[0] == bb[k][0].split()[0] for k in keys)
            print(f"\n{len(common)} common cases: A / B median {statistics.median(ratios):.3f} "
                  f"(min {min(ratios):.3f}, max {max(ratios):.3f}); {len(keys)} problems: best speedup median "
                  f"A {statistics.median([ba[k][1] for k in keys]):.3f}, B {statistics.median([bb[k][1] for k in keys]):.3f}; "
                  f"same best mode in {same}")
            within = lambda rs: sum(abs(r - 1) <= 0.15 for r in rs)
            print(f"within 15%: {within(ratios)} of {len(ratios)} cases")
            by_mode = collections.defaultdict(list)
            for n, r in zip(common, ratios):
                by_mode[n.split("/")[1]].append(r)
            for mode, rs in by_mode.items():
                print(f"  {mode}: A / B median {statistics.median(rs):.3f} (min {min(rs):.3f}, max {max(rs):.3f}), "
                      f"within 15% {within(rs)} of {len(rs)}")
            # The collective alone (t_comm_us), per mode and comm SMs: where the emulation's transport is off.
            alone = collections.defaultdict(list)
            for n in common:
                ta, tb, c = a[n].get("t_comm_us", 0.0), b[n].get("t_comm_us", 0.0), re.search(r"/comm_sms:(\d+)", n)
                if ta > 0 and tb > 0 and c:
                    alone[(n.split("/")[1], int(c.group(1)))].append(ta / tb)
            for (mode, c), rs in sorted(alone.items()):
                print(f"  collective alone (t_comm_us), {mode} comm_sms {c}: A / B median {statistics.median(rs):.3f} "
                      f"(min {min(rs):.3f}, max {max(rs):.3f}) over {len(rs)}")
            # The operator per mode and comm SMs: A / B of the times and each side's overlap efficiency (medians).
            per = collections.defaultdict(list)
            for n, r in zip(common, ratios):
                c = re.search(r"/comm_sms:(\d+)", n)
                if c and "efficiency" in a[n] and "efficiency" in b[n]:
                    per[(n.split("/")[1], int(c.group(1)))].append((r, a[n]["efficiency"], b[n]["efficiency"]))
            for (mode, c), v in sorted(per.items()):
                rs = [x[0] for x in v]
                print(f"  {mode} comm_sms {c}: A / B median {statistics.median(rs):.3f}, within 15% {within(rs)} of "
                      f"{len(v)}; efficiency median A {statistics.median([x[1] for x in v]):.2f}, "
                      f"B {statistics.median([x[2] for x in v]):.2f}")
        else:
            print("no case name in common")

    def main(argv):
        if not argv or argv[0].startswith("-"):
            print(__doc__.strip(), file=sys.stderr)
            return 2
        doc = json.load(open(argv[0]))
        if "--compare" in argv:
            compare(doc, json.load(open(argv[argv.index("--compare") + 1])), "--markdown" in argv)
            return 0
        table = orders if "--orders" in argv else split if "--split" in argv else best_modes
        table(doc, "--markdown" in argv)
        return 0


    return main(sys.argv[1:])


def cmd_split(argv):
    """Splits Google Benchmark JSON into a calibration set and a held-out set by a regular expression on the names.

        scripts/results.py split --held-out 'REGEX' --fit fit.json --test heldout.json IN.json...

    Cases whose name matches REGEX go to the held-out file, the rest to the fit file; the context of the first input is
    kept in both, with a "split" entry that records the expression and the side, so each file says which it is."""
    sys.argv = ['results.py split'] + argv
    parser = argparse.ArgumentParser()
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--held-out", required=True)
    parser.add_argument("--fit", required=True)
    parser.add_argument("--test", required=True)
    args = parser.parse_args()

    held = re.compile(args.held_out)
    context, fit, test = None, [], []
    for path in args.inputs:
        with open(path) as f:
            doc = json.load(f)
        context = context or doc.get("context", {})
        for b in doc.get("benchmarks", []):
            (test if held.search(b["name"]) else fit).append(b)

    for path, cases, side in ((args.fit, fit, "fit"), (args.test, test, "held-out")):
        ctx = dict(context, split=f"{side}: names {'matching' if side == 'held-out' else 'not matching'} {args.held_out}")
        with open(path, "w") as f:
            json.dump({"context": ctx, "benchmarks": cases}, f, indent=1)
        print(f"{path}: {len(cases)} cases ({side})")


def cmd_validation(argv):
    """Markdown table of `ovl validate --json` results: one row per predictor (the model, the simulator) per input.

    usage: scripts/results.py validation OUT.md [--problems] [--label HEADER] [LABEL=]validate.json...

    --label HEADER adds a first column HEADER holding each input's LABEL; --problems adds the ranking's problem count.
    The table is written to OUT.md and printed."""
    sys.argv = ['results.py validation'] + argv
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--problems", action="store_true")
    parser.add_argument("--label")
    parser.add_argument("inputs", nargs="+")
    args = parser.parse_args()

    head = ([args.label] if args.label else []) + ["predictor", "cases", "MAPE %", "P90 %", "max %"]
    head += (["problems"] if args.problems else []) + ["top-1", "regret mean %", "regret max %"]
    align = ["---"] * (2 if args.label else 1) + ["---:"] * (len(head) - (2 if args.label else 1))
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    for item in args.inputs:
        label, _, path = item.rpartition("=")
        v = json.load(open(path))
        for pred, e, r in [("model", v["model_overlap"], v["ranking_model"]),
                           ("simulator", v["simulator"], v["ranking_simulator"])]:
            cells = ([label] if args.label else []) + [pred, str(e["cases"]), f"{e['mape']:.2f}", f"{e['p90_ape']:.2f}",
                                                       f"{e['max_ape']:.2f}"]
            cells += ([str(r["problems"])] if args.problems else []) + [f"{100 * r['top1']:.0f}%",
                                                                         f"{100 * r['regret_mean']:.2f}",
                                                                         f"{100 * r['regret_max']:.2f}"]
            lines.append("| " + " | ".join(cells) + " |")
    open(args.out, "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


def cmd_headline(argv):
    """The headline table of a held-out validation (scripts/validate-paced.sh, scripts/validate-multigpu.sh): per
    `ovl validate --json` input the model's and the simulator's error on each set of its rows, then its rankings.

    usage: scripts/results.py headline OUT.md [--sets LIST] [--more-sets LABEL=LIST]... [--prefix WORD] [--max-signed]
               [--rank BY,...] [--top1-percent] [--rank-without MODE]
               [--autoplan JSON --ovl OVL --autoplan-profile LABEL=ARGS...] LABEL=validate.json...

    LIST: sets, comma-separated, each coll (the collective cases), all (every overlap case) or dimensions joined by +,
    one overlap set per combination of their values in the order given: mode, overlapped (the modes but sequential),
    groups (plans without /groups:, then with), op. Sets without cases are left out. --sets applies to every input
    (default all,mode,op), --more-sets adds sets to the input LABEL. --prefix WORD names the overlap sets "WORD, all"
    and "WORD <set>". Columns: cases, model MAPE, simulator MAPE and P90; --max-signed adds the simulator's max and
    mean signed error. Rows without the predictor's time (the simulator's on collectives) are left out of its error.
    --rank: a line per predictor (simulator, model; default simulator) from the input's ranking, top-1 as "K of N"
    or, with --top1-percent, a percentage. --rank-without MODE: a last line, the first input's problems ranked by the
    simulator among the overlap cases of the other modes (equal simulated times: the first case). --autoplan: each
    bench_autoplan problem's measured candidates (each with its plan's JSON) ranked by `OVL simulate` with each
    --autoplan-profile's ARGS (e.g. "built-in=--gpu h100"; equal simulated times: the first candidate, in the
    planner's order, as a prediction alone would choose):
    a line per profile, and each problem's pick in a second table, in OUT.md only.
    The table is written to OUT.md and printed."""
    parser = argparse.ArgumentParser(prog="scripts/results.py headline")
    parser.add_argument("out")
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--sets", default="all,mode,op")
    parser.add_argument("--more-sets", action="append", default=[])
    parser.add_argument("--prefix", default="")
    parser.add_argument("--max-signed", action="store_true")
    parser.add_argument("--rank", default="simulator")
    parser.add_argument("--top1-percent", action="store_true")
    parser.add_argument("--rank-without")
    parser.add_argument("--autoplan")
    parser.add_argument("--ovl", default="build/apps/ovl")
    parser.add_argument("--autoplan-profile", action="append", default=[])
    args = parser.parse_args(argv)

    modes = ("sequential", "decomposed", "tile-signal", "green-context", "tma")
    mode = lambda r: r["name"].split("/")[1]
    dims = {"mode": (mode, modes), "overlapped": (mode, modes[1:]),
            "groups": (lambda r: "groups:g" if "/groups:" in r["name"] else "", ("", "groups:g")),
            "op": (lambda r: r["name"].split("/")[2], ("gemm-allreduce", "gemm-reducescatter", "allgather-gemm"))}

    def sets(rows, spec):
        """(name, rows) of each set of LIST `spec`, in order."""
        ov = [r for r in rows if r["kind"] == "overlap"]
        for token in filter(None, spec.split(",")):
            if token == "coll":
                yield "collectives", [r for r in rows if r["kind"] == "coll"]
            elif token == "all":
                yield f"{args.prefix}, all" if args.prefix else "all", ov
            else:
                keys = [dims[d] for d in token.split("+")]
                for values in itertools.product(*(v for _, v in keys)):
                    name = " ".join(v for v in values if v)
                    yield (f"{args.prefix} {name}" if args.prefix else name,
                           [r for r in ov if all(key(r) == v for (key, _), v in zip(keys, values))])

    def ape(rows, key):  # sorted absolute percentage errors of the rows that have the predictor's time
        return sorted(abs(r[key] - r["measured_us"]) / r["measured_us"] * 100 for r in rows if r.get(key))

    def row(cells):
        cells += [""] * (len(head) - len(cells))
        return "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"

    def rank_row(label, what, problems, top1, regret_mean, regret_max):
        top = f"{100 * top1 / problems:.0f}%" if args.top1_percent else f"{top1} of {problems}"
        return row([label, f"{what}: {problems} problems", "", f"top-1 {top}", f"regret mean {regret_mean:.1f}%",
                    f"max {regret_max:.1f}%"])

    def rank_rows(label, what, problems):
        """problems: per problem its candidates (prediction, measured us, name). The ranking line, and per problem the
        pick (the least prediction, the first of a tie) and the least measured time."""
        picks = [(min(cs, key=lambda c: c[0]), min(c[1] for c in cs)) for cs in problems]
        regrets = [(pick[1] - best) / best * 100 for pick, best in picks]
        return rank_row(label, what, len(picks), sum(r == 0 for r in regrets), sum(regrets) / len(regrets),
                        max(regrets)), picks

    head = ["profile", "set", "cases", "model MAPE %", "simulator MAPE %", "simulator P90 %"]
    head += ["simulator max %", "simulator signed %"] if args.max_signed else []
    lines = [row(list(head)), "|---|---|" + "---:|" * (len(head) - 2)]
    more = dict(item.rpartition("=")[::2] for item in args.more_sets)
    docs = []
    for item in args.inputs:
        label, _, path = item.rpartition("=")
        v = json.load(open(path))
        docs.append((label, v))
        for name, rows in sets(v["rows"], args.sets + "," + more.get(label, "")):
            if not rows:
                continue
            model, sim = ape(rows, "model_us"), ape(rows, "sim_us")
            cells = [label, name, str(len(model)), f"{sum(model) / len(model) if model else 0:.1f}"]
            if sim:
                signed = [(r["sim_us"] / r["measured_us"] - 1) * 100 for r in rows if r.get("sim_us")]
                cells += [f"{sum(sim) / len(sim):.1f}", f"{sim[max(1, math.ceil(0.9 * len(sim))) - 1]:.1f}"]
                cells += [f"{sim[-1]:.1f}", f"{sum(signed) / len(signed):+.1f}"] if args.max_signed else []
            else:
                cells += ["-"] * (len(head) - len(cells))
            lines.append(row(cells))
        for by in filter(None, args.rank.split(",")):
            rk = v[f"ranking_{by}"]
            lines.append(rank_row(label, f"ranking by the {by}", rk["problems"], round(rk["top1"] * rk["problems"]),
                                  100 * rk["regret_mean"], 100 * rk["regret_max"]))
    if args.rank_without:
        label, v = docs[0]
        problems = collections.defaultdict(list)
        for r in v["rows"]:
            if r["kind"] == "overlap" and mode(r) != args.rank_without and r.get("sim_us"):
                problems[r["problem"]].append((r["sim_us"], r["measured_us"], r["name"]))
        if problems:
            lines.append(rank_rows(label, f"ranking by the simulator without {args.rank_without}",
                                   list(problems.values()))[0])
    picks_table = []
    if args.autoplan:
        d = json.load(open(args.autoplan))
        picks_table = ["| profile | problem | candidates | pick (measured us) | best measured us | regret % | pick |",
                       "|---|---|---:|---:|---:|---:|---|"]
        for item in args.autoplan_profile:
            label, _, profile = item.partition("=")
            problems = []
            for pr in d["problems"]:
                op, m, n, k, dt, lay, w = re.match(r"([a-z-]+)/(\d+)x(\d+)x(\d+)/(\w+)/(\w+)/world:(\d+)",
                                                   pr["problem"]).groups()
                sim_args = ["--op", op, "--m", m, "--n", n, "--k", k, "--world", w, "--dtype", dt, "--layout", lay,
                            "--loopback", "rank0", "--link-profile", d["context"]["link_profile"],
                            *shlex.split(profile)]
                problems.append([])
                for c in pr["candidates"]:
                    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
                        json.dump(c["plan_json"], f)
                    sim = json.loads(subprocess.run([args.ovl, "simulate", "--plan", f.name, *sim_args, "--json"],
                                                    check=True, capture_output=True, text=True).stdout)
                    os.unlink(f.name)
                    problems[-1].append((sim["total_us"], c["measured_us"], c["plan"]))
            line, picks = rank_rows(label, "bench_autoplan", problems)
            lines.append(line)
            for pr, cs, (pick, best) in zip(d["problems"], problems, picks):
                picks_table.append(f"| {label} | {pr['problem']} | {len(cs)} | {pick[1]:.1f} | {best:.1f} | "
                                   f"{(pick[1] - best) / best * 100:.1f} | {pick[2]} |")
    open(args.out, "w").write("\n\n".join("\n".join(t) for t in (lines, picks_table) if t) + "\n")
    print("\n".join(lines))
    return 0


def cmd_smi(argv):
    """Per-section GPU clock and power from nvidia-smi samples (scripts/device-run.sh's summary).

    usage: scripts/results.py smi SECTIONS SAMPLES
    SECTIONS: lines "<epoch seconds> <label>", in order, the last one the end. SAMPLES: nvidia-smi
    --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits output (local-time timestamps).
    Prints one line per section with samples: median SM clock (min-max) and median power."""
    sys.argv = ['results.py smi'] + argv
    sections = []
    for line in open(sys.argv[1]):
        t, _, label = line.strip().partition(" ")
        if t:
            sections.append((float(t), label))
    samples = []
    for line in open(sys.argv[2]):
        parts = [p.strip() for p in line.split(",")]
        try:
            t = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            samples.append((t, float(parts[1]), float(parts[2])))
        except (ValueError, IndexError):
            continue  # a header, a unit or "[N/A]"
    for (t0, label), (t1, _) in zip(sections, sections[1:]):
        s = [x for x in samples if t0 <= x[0] < t1]
        if not s:
            continue
        clocks = [x[1] for x in s]
        power = statistics.median(x[2] for x in s)
        print(f"clock {label[:60]}: SM {statistics.median(clocks):.0f} MHz ({min(clocks):.0f}-{max(clocks):.0f}), "
              f"power {power:.0f} W, {len(s)} samples")


def cmd_ab_merge(argv):
    """Merges the benchmark JSON files of an A/B (DIR/<tag>-<round>.json, one per process) into one file whose rows
    carry their process: every row gets "ab_round" (and, with --tag-key KEY, its tag under KEY), and the impl of each row
    gets the suffix its tag maps to, so the sides stay apart (gemm/ovl-base/...).
        scripts/results.py ab-merge DIR OUT [--suffix TAG=SUFFIX ...] [--keep IMPL ...] [--tag-key KEY]
    TAG * maps every tag, and {tag} in a suffix is the tag itself; impls named by --keep keep their name (a reference,
    such as cublas, that pools over every process). Used by scripts/gemm-ab.sh."""
    sys.argv = ['results.py ab-merge'] + argv
    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("dir")
        parser.add_argument("out")
        parser.add_argument("--suffix", action="append", default=[])
        parser.add_argument("--keep", action="append", default=[])
        parser.add_argument("--tag-key")
        args = parser.parse_args()
        suffixes = dict(item.split("=", 1) for item in args.suffix)
        rows, context = [], {}
        for path in sorted(glob.glob(os.path.join(args.dir, "*.json"))):
            tag, round_ = os.path.basename(path)[:-len(".json")].rsplit("-", 1)
            try:
                data = json.load(open(path))
            except (OSError, ValueError) as error:  # a process that crashed or timed out: its rows are missing
                print(f"gemm_ab_merge: skipping {path}: {error}", file=sys.stderr)
                continue
            context = data["context"]
            suffix = suffixes.get(tag, suffixes.get("*", "")).replace("{tag}", tag)
            for row in data["benchmarks"]:
                parts = row["name"].split("/")
                if suffix and parts[1] not in args.keep:
                    impl = parts[1] + suffix
                    row["name"] = "/".join(parts[:1] + [impl] + parts[2:])
                    run = row["run_name"].split("/")
                    row["run_name"] = "/".join(run[:1] + [impl] + run[2:])
                row["ab_round"] = int(round_)
                if args.tag_key:
                    row[args.tag_key] = tag
                rows.append(row)
        json.dump({"context": context, "benchmarks": rows}, open(args.out, "w"), indent=1)


    return main()


def cmd_ab(argv):
    """An A/B of two bench_gemm impls per row (shape, layout, SMs): B / A in TFLOP/s from the means over repetitions, the
    range of the per-repetition ratios, and both impls' mean SM clock; then the geomean and the rows where B is faster,
    over all rows and per SM count.
        scripts/results.py ab bench_gemm.json A B      e.g. ovl-tmastore ovl-deferred
    A file of bench_overlap rows (scripts/gemm-ab.sh with AB_BENCH=bench_overlap) pairs each case's rows by their
    "ab_side" (A, B: e.g. base device): per case A's time / B's (the `us` counter's mean over the processes; above 1:
    B faster), then per mode and over all the geomean, the range and how many cases are within 3%.
        scripts/results.py ab ab.json base device"""
    sys.argv = ['results.py ab'] + argv
    if overlap_ab(*sys.argv[1:4]):
        return
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


def overlap_ab(path, a_name, b_name):
    """cmd_ab on bench_overlap rows tagged with "ab_side"; False when the file has none."""
    times = collections.defaultdict(list)
    rounds = collections.defaultdict(lambda: collections.defaultdict(list))  # (case, side) -> round -> us
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type") == "iteration" and b["name"].startswith("overlap/") and "ab_side" in b \
                and not b.get("error_occurred"):
            case = re.sub(r"/iterations:.*$", "", b["name"])
            times[(case, b["ab_side"])].append(b["us"])
            rounds[(case, b["ab_side"])][b.get("ab_round", 0)].append(b["us"])
    if not times:
        return False
    print(f"| case | {a_name} us | {b_name} us | {a_name} / {b_name} |")
    print("|---|---:|---:|---:|")
    ratios = collections.defaultdict(list)
    for case in sorted({k[0] for k in times}):
        a, b = times.get((case, a_name)), times.get((case, b_name))
        if not a or not b:
            continue
        ratio = statistics.mean(a) / statistics.mean(b)
        ratios[case.split("/")[1]].append(ratio)
        ratios["all"].append(ratio)
        print(f"| {case} | {statistics.mean(a):.1f} | {statistics.mean(b):.1f} | {ratio:.3f} |")
    for key, values in sorted(ratios.items()):
        geomean = math.exp(statistics.mean(math.log(r) for r in values))
        within = sum(abs(r - 1) <= 0.03 for r in values)
        print(f"{key}: {a_name}/{b_name} time geomean {geomean:.4f}, min {min(values):.3f}, max {max(values):.3f}, "
              f"within 3% on {within}/{len(values)}")
    # The noise between one side's processes: per case and side, the largest over the smallest of its processes' means.
    spread = collections.defaultdict(list)
    for (case, _), by_round in rounds.items():
        means = [statistics.mean(v) for v in by_round.values()]
        if len(means) > 1:
            spread[case.split("/")[1]].append(max(means) / min(means) - 1)
            spread["all"].append(max(means) / min(means) - 1)
    for key, v in sorted(spread.items()):
        v = sorted(v)
        print(f"{key}: one side's processes differ by a median {100 * statistics.median(v):.1f}% "
              f"(90th percentile {100 * v[int(0.9 * len(v))]:.1f}%, max {100 * v[-1]:.1f}%)")
    return True


# ---- performance: the tables and plots of docs/performance.md ----------------------------------------------------

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"]


def cmd_beside(argv):
    """The GEMM beside copy traffic: per bench_gemm row (impl, shape, layout, SMs) the mean time alone, then for each
    traffic kind the runs had (OVL_BENCH_GEMM_BESIDE: ce, the copy engines; d2d, same-device copies on SMs) the mean
    time beside it, that time / alone (the GEMM's slowdown) and the copies' rate beside the GEMM (beside_GBps); then the
    largest slowdown per kind. Rows without the `beside` counter are the GEMM alone. Several files are pooled. With
    NVML's sm_mhz counter, each column group ends with the mean SM clock (the GPU runs at its power limit, so a
    slowdown at another clock is not the traffic's alone).
        scripts/results.py beside bench_gemm-beside.json [MORE.json ...]"""
    sys.argv = ['results.py beside'] + argv
    KINDS = {1: "ce", 2: "d2d"}
    us = collections.defaultdict(list)
    rate = collections.defaultdict(list)
    mhz = collections.defaultdict(list)
    for path in sys.argv[1:]:
        for key, entries in gemm_runs(path).items():
            for b in entries:
                kind = KINDS.get(int(b.get("beside", 0)), "alone")
                us[key + (kind,)].append(b["us"])
                if "sm_mhz" in b:
                    mhz[key + (kind,)].append(b["sm_mhz"])
                if kind != "alone":
                    rate[key + (kind,)].append(b["beside_GBps"])
    kinds = [k for k in ("ce", "d2d") if any(key[-1] == k for key in us)]
    clock = lambda key: f" | {statistics.mean(mhz[key]):.0f}" if mhz.get(key) else " | "
    print("| impl | shape | B | SMs | alone us | MHz | " +
          " | ".join(f"beside {k} us | x alone | {k} GB/s | MHz" for k in kinds) + " |")
    print("|---|---|---|---|---:|---:|" + "---:|---:|---:|---:|" * len(kinds))
    worst = collections.defaultdict(float)
    for shape, layout, sms, impl in sorted({key[:4] for key in us}):
        row = (shape, layout, sms, impl)
        alone = us.get(row + ("alone",))
        if not alone:
            continue
        cells = []
        for k in kinds:
            beside = us.get(row + (k,))
            if not beside:
                cells.append(" |  |  | ")
                continue
            ratio = statistics.mean(beside) / statistics.mean(alone)
            worst[k] = max(worst[k], ratio)
            cells.append(f"{statistics.mean(beside):.1f} | {ratio:.3f} | {statistics.mean(rate[row + (k,)]):.1f}" +
                         clock(row + (k,)))
        print(f"| {impl} | {shape} | {layout} | {sms} | {statistics.mean(alone):.1f}" + clock(row + ("alone",)) +
              " | " + " | ".join(cells) + " |")
    for k in kinds:
        print(f"beside {k}: the GEMM's time at most {worst[k]:.3f}x of alone")


def svg_lines(path, title, xlabel, ylabel, series, xs=None, logx=False, ymin=None, ymax=None, hline=None):
    """A line plot: series is [(label, [(x, y), ...])]; xs the tick values (default: every x)."""
    W, H, L, R, T, B = 760, 440, 70, 190, 40, 50
    pts = [p for _, s in series for p in s]
    xs = xs or sorted({p[0] for p in pts})
    fx = (lambda x: math.log2(x)) if logx else (lambda x: x)
    x0, x1 = fx(min(xs)), fx(max(xs))
    lo = ymin if ymin is not None else min(p[1] for p in pts)
    hi = ymax if ymax is not None else max(p[1] for p in pts) * 1.05
    X = lambda x: L + (W - L - R) * ((fx(x) - x0) / ((x1 - x0) or 1))
    Y = lambda y: H - B - (H - T - B) * (y - lo) / ((hi - lo) or 1)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" '
           f'font-size="12">', f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{(L + W - R) / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>',
           f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="black"/>',
           f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">{xlabel}</text>',
           f'<text x="16" y="{(T + H - B) / 2}" transform="rotate(-90 16 {(T + H - B) / 2})" '
           f'text-anchor="middle">{ylabel}</text>']
    for x in xs:
        out.append(f'<text x="{X(x):.1f}" y="{H - B + 16}" text-anchor="middle">{x:g}</text>')
    for i in range(6):
        y = lo + (hi - lo) * i / 5
        out.append(f'<line x1="{L}" y1="{Y(y):.1f}" x2="{W - R}" y2="{Y(y):.1f}" stroke="#ddd"/>'
                   f'<text x="{L - 6}" y="{Y(y) + 4:.1f}" text-anchor="end">{y:.3g}</text>')
    if hline is not None:
        out.append(f'<line x1="{L}" y1="{Y(hline):.1f}" x2="{W - R}" y2="{Y(hline):.1f}" stroke="black" '
                   f'stroke-dasharray="5 4"/>')
    for i, (label, s) in enumerate(series):
        c = COLORS[i % len(COLORS)]
        s = sorted(s)
        out.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="' +
                   " ".join(f"{X(x):.1f},{Y(y):.1f}" for x, y in s) + '"/>')
        out += [f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="3" fill="{c}"/>' for x, y in s]
        out.append(f'<line x1="{W - R + 12}" y1="{T + 14 + i * 18}" x2="{W - R + 32}" y2="{T + 14 + i * 18}" '
                   f'stroke="{c}" stroke-width="2"/><text x="{W - R + 38}" y="{T + 18 + i * 18}">{label}</text>')
    out.append("</svg>")
    open(path, "w").write("\n".join(out) + "\n")


def svg_bars(path, title, ylabel, groups, labels, ymin=0.0, hline=None):
    """Grouped bars: groups is [(group name, [value or None per label])]."""
    W, H, L, R, T, B = 900, 460, 70, 170, 40, 110
    vals = [v for _, vs in groups for v in vs if v is not None]
    hi = max(vals) * 1.05
    lo = ymin
    Y = lambda y: H - B - (H - T - B) * (y - lo) / ((hi - lo) or 1)
    gw = (W - L - R) / len(groups)
    bw = gw * 0.8 / len(labels)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" '
           f'font-size="12">', f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{(L + W - R) / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>',
           f'<text x="16" y="{(T + H - B) / 2}" transform="rotate(-90 16 {(T + H - B) / 2})" '
           f'text-anchor="middle">{ylabel}</text>']
    for i in range(6):
        y = lo + (hi - lo) * i / 5
        out.append(f'<line x1="{L}" y1="{Y(y):.1f}" x2="{W - R}" y2="{Y(y):.1f}" stroke="#ddd"/>'
                   f'<text x="{L - 6}" y="{Y(y) + 4:.1f}" text-anchor="end">{y:.3g}</text>')
    for g, (name, vs) in enumerate(groups):
        gx = L + g * gw + gw * 0.1
        for i, v in enumerate(vs):
            if v is None:
                continue
            top = Y(max(v, lo))
            out.append(f'<rect x="{gx + i * bw:.1f}" y="{top:.1f}" width="{bw * 0.9:.1f}" '
                       f'height="{Y(lo) - top:.1f}" fill="{COLORS[i % len(COLORS)]}"/>')
        cx = L + g * gw + gw / 2
        out.append(f'<text x="{cx:.1f}" y="{H - B + 12}" text-anchor="end" '
                   f'transform="rotate(-40 {cx:.1f} {H - B + 12})">{name}</text>')
    out.append(f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="black"/>')
    if hline is not None:
        out.append(f'<line x1="{L}" y1="{Y(hline):.1f}" x2="{W - R}" y2="{Y(hline):.1f}" stroke="black" '
                   f'stroke-dasharray="5 4"/>')
    for i, label in enumerate(labels):
        out.append(f'<rect x="{W - R + 12}" y="{T + 6 + i * 18}" width="14" height="12" '
                   f'fill="{COLORS[i % len(COLORS)]}"/><text x="{W - R + 32}" y="{T + 17 + i * 18}">{label}</text>')
    out.append("</svg>")
    open(path, "w").write("\n".join(out) + "\n")


def svg_scatter(path, title, series):
    """Predicted against measured time, one colour per series [(label, [(measured, predicted), ...])], the diagonal
    and +-10% lines; log-log."""
    W, H, L, R, T, B = 620, 560, 70, 170, 40, 50
    pts = [p for _, s in series for p in s]
    lo, hi = math.log10(min(min(p) for p in pts) * 0.9), math.log10(max(max(p) for p in pts) * 1.1)
    side = min(W - L - R, H - T - B)
    X = lambda v: L + side * (math.log10(v) - lo) / (hi - lo)
    Y = lambda v: T + side - side * (math.log10(v) - lo) / (hi - lo)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" '
           f'font-size="12">', f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{L + side / 2}" y="22" text-anchor="middle" font-size="14">{title}</text>',
           f'<rect x="{L}" y="{T}" width="{side}" height="{side}" fill="none" stroke="black"/>',
           f'<text x="{L + side / 2}" y="{T + side + 36}" text-anchor="middle">measured us</text>',
           f'<text x="16" y="{T + side / 2}" transform="rotate(-90 16 {T + side / 2})" '
           f'text-anchor="middle">predicted us</text>']
    for e in range(math.ceil(lo), math.floor(hi) + 1):
        for m in (1, 2, 5):
            v = m * 10 ** e
            if lo <= math.log10(v) <= hi:
                out.append(f'<text x="{X(v):.1f}" y="{T + side + 16}" text-anchor="middle">{v:g}</text>'
                           f'<text x="{L - 6}" y="{Y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    a, b = 10 ** lo, 10 ** hi
    for f, dash in ((1.0, ""), (1.1, ' stroke-dasharray="4 3"'), (1 / 1.1, ' stroke-dasharray="4 3"')):
        out.append(f'<line x1="{X(a):.1f}" y1="{Y(max(a * f, a)):.1f}" x2="{X(min(b, b / f)):.1f}" '
                   f'y2="{Y(min(b * f, b)):.1f}" stroke="#888"{dash}/>')
    for i, (label, s) in enumerate(series):
        c = COLORS[i % len(COLORS)]
        out += [f'<circle cx="{X(m):.1f}" cy="{Y(p):.1f}" r="2.5" fill="{c}" fill-opacity="0.6"/>' for m, p in s]
        out.append(f'<circle cx="{L + side + 20}" cy="{T + 12 + i * 18}" r="4" fill="{c}"/>'
                   f'<text x="{L + side + 30}" y="{T + 16 + i * 18}">{label}</text>')
    out.append(f'<text x="{L + side + 12}" y="{T + 20 + len(series) * 18}">dashed: +-10%</text>')
    out.append("</svg>")
    open(path, "w").write("\n".join(out) + "\n")


def perf_predicted(path, svg, title):
    rows = [r for r in json.load(open(path))["rows"] if r.get("kind", "overlap") == "overlap" and r.get("sim_us")]
    modes = collections.defaultdict(list)
    for r in rows:
        modes[r["name"].split("/")[1]].append((r["measured_us"], r["sim_us"]))
    order = [m for m in ("sequential", "decomposed", "tile-signal", "green-context", "tma") if m in modes]
    svg_scatter(svg, title, [(m, modes[m]) for m in order])
    table = []
    for m in order:
        e = sorted(abs(p - x) / x * 100 for x, p in modes[m])
        table.append([m, str(len(e)), f"{statistics.mean(e):.1f}", f"{e[max(1, math.ceil(0.9 * len(e))) - 1]:.1f}"])
    return md(["mode", "cases", "simulator MAPE %", "P90 %"], table)


def md(header, rows):
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "|".join("---" if i == 0 else "---:"
                      for i in range(len(header))) + "|"] + ["| " + " | ".join(r) + " |" for r in rows])


def geomean(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


def perf_gemm(path, svg):
    runs = gemm_runs(path)
    tf = {k: statistics.mean(b["tflops"] for b in v) for k, v in runs.items()}
    sms_list = (116, 124, 128, 132)
    rows, series = [], collections.defaultdict(list)
    keys = sorted({(s, l) for (s, l, _, _) in tf}, key=lambda k: ([int(x) for x in k[0].split("x")], k[1]))
    for i, (shape, lay) in enumerate(keys):
        cells = [shape, lay]
        for sms in sms_list:
            o, c = tf.get((shape, lay, sms, "ovl")), tf.get((shape, lay, sms, "cublas"))
            cells.append(f"{o:.0f} / {c:.0f} = **{o / c:.3f}**" if o and c else "-")
            if o and c:
                series[sms].append((i + 1, o / c))
        rows.append(cells)
    summary = []
    for sms in sms_list:
        r = [y for _, y in series[sms]]
        summary.append(f"{sms} SMs: geomean {geomean(r):.3f}, min {min(r):.3f}, {sum(x >= 1 for x in r)} of {len(r)} "
                       f"rows >= 1.0")
    part = [y for s in (116, 124, 128) for _, y in series[s]]
    summary.append(f"116/124/128 SMs together: geomean {geomean(part):.3f}, min {min(part):.3f}, "
                   f"{sum(x >= 1 for x in part)} of {len(part)} rows >= 1.0")
    svg_lines(svg, "ovl / cuBLAS (TFLOP/s ratio) per shape, by SM partition", "row (see the table, in order)",
              "ovl / cuBLAS", [(f"{s} SMs", series[s]) for s in sms_list], xs=list(range(1, len(keys) + 1)),
              hline=1.0)
    return md(["shape (MxNxK)", "B", *[f"{s} SMs: ovl / cuBLAS TFLOP/s" for s in sms_list]], rows), summary


def coll_cells(path):
    cell = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("error_occurred") or not b["name"].startswith("coll/") or b.get("run_type") != "iteration":
            continue
        p = b["name"].split("/")
        cell[(p[1], p[2], int(p[3]), int(p[5].split(":")[1]))] = b
    return cell


def perf_coll(path, svg, size, metric, title, impls, ctas, ops=("allreduce", "reducescatter")):
    cell = coll_cells(path)
    rows, series = [], []
    for op in ops:
        for impl in impls:
            pts = [(c, cell[(impl, op, size, c)][metric]) for c in ctas if c and (impl, op, size, c) in cell]
            if not pts:
                continue
            series.append((f"{impl} {op}", pts))
            rows.append([op, impl] + [f"{cell[(impl, op, size, c)][metric]:.0f}" if (impl, op, size, c) in cell
                                      else "-" for c in ctas])
    svg_lines(svg, title, "CTAs", metric.replace("_GBps", " GB/s"), series, xs=[c for c in ctas if c], logx=True,
              ymin=0)
    return md(["op", "implementation", *[f"{c} CTAs" if c else "NCCL's choice" for c in ctas]], rows)


def perf_overlap(path, svg, title):
    best = collections.defaultdict(dict)
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type") != "iteration" or b.get("error_occurred") or b.get("wrong", 0) > 1:
            continue
        p = b["name"].split("/")
        mode, problem = p[1], f"{p[2].replace('gemm-', '').replace('-gemm', '')} {p[3]}"
        if mode == "sequential":  # the baseline itself (its speedup counter is 1 within the noise)
            continue
        if b["speedup"] > best[problem].get(mode, 0):
            best[problem][mode] = b["speedup"]
    modes = [m for m in ("decomposed", "tile-signal", "green-context", "tma") if any(m in v for v in best.values())]
    problems = sorted(best, key=lambda k: (k.split()[0], [int(x) for x in k.split()[1].split("x")]))
    svg_bars(svg, title, "best speedup over sequential", [(p, [best[p].get(m) for m in modes]) for p in problems],
             modes, ymin=0.0, hline=1.0)
    rows = [[p] + [f"{best[p][m]:.3f}" if m in best[p] else "-" for m in modes] for p in problems]
    winners = [max(best[p].values()) for p in problems]
    return md(["problem", *modes], rows), (f"best overlapped mode per problem: median {statistics.median(winners):.3f}x, "
                                           f"max {max(winners):.3f}x, above 1.0 in {sum(w > 1 for w in winners)} "
                                           f"of {len(winners)}")


def autoplan_table(path):
    """Markdown table and summary lines of a bench_autoplan JSON."""
    doc = json.load(open(path))
    rows = []
    for r in doc["problems"]:
        seq = r["sequential_us"]
        rows.append([r["problem"].replace("/bf16/nt", ""), f"{seq:.1f}", f"{r['auto_predicted_us']:.1f}",
                     f"{r['auto_measured_us']:.1f}", f"{r['best_measured_us']:.1f}", f"{r['tuning_ms']:.0f}",
                     f"{seq / r['auto_predicted_us']:.3f}", f"{seq / r['auto_measured_us']:.3f}",
                     f"{seq / r['best_measured_us']:.3f}", r["best_plan"].split(" tile=")[0]])
    table = md(["problem", "sequential us", "auto (predicted) us", "auto (measured) us", "best measured us",
                "tuning ms", "x predicted", "x measured", "x best", "best measured plan"], rows)
    s = doc["summary"]
    lines = [f"auto (predicted): at least {s['min_speedup_auto_predicted']:.3f}x of sequential, top-1 "
             f"{100 * s['top1_auto_predicted']:.0f}%, mean regret {100 * s['mean_regret_auto_predicted']:.1f}%, "
             f"max {100 * s['max_regret_auto_predicted']:.1f}%",
             f"auto (measured): at least {s['min_speedup_auto_measured']:.3f}x of sequential, regret at most "
             f"{100 * s['max_regret_auto_measured']:.1f}%",
             f"over sequential on the median problem: auto (measured) "
             f"{statistics.median(r['sequential_us'] / r['auto_measured_us'] for r in doc['problems']):.3f}x, auto "
             f"(predicted) {statistics.median(r['sequential_us'] / r['auto_predicted_us'] for r in doc['problems']):.3f}x",
             f"predicted sequential time: mean error {100 * s['mean_sequential_error']:.1f}%"]
    if "max_repeat_spread" in s:
        lines.append(f"every plan timed twice: the two timings of one plan differ by at most "
                     f"{100 * s['max_repeat_spread']:.1f}%, and find the same plan fastest on "
                     f"{100 * s['repeat_top1']:.0f}% of the problems")
    # A choice this evaluation cannot tell from the best: the range of its two timings reaches the best plan's.
    def tied(r, key):
        c = {x["plan"]: x for x in r.get("candidates", [])}
        pick, best = c.get(r[key]), c.get(r["best_plan"])
        if not pick or not best or "first_us" not in pick:
            return None
        return min(pick["first_us"], pick["second_us"]) <= max(best["first_us"], best["second_us"])
    ties = {key: [tied(r, key) for r in doc["problems"]] for key in ("predicted_plan", "measured_plan")}
    if all(t is not None for v in ties.values() for t in v):
        n = len(doc["problems"])
        lines.append(f"a choice the two timings cannot tell from the best measured plan (its range of two times reaches "
                     f"the best's): predicted {sum(ties['predicted_plan'])} of {n}, measured "
                     f"{sum(ties['measured_plan'])} of {n}")
    # The planner's ties: the candidates predicted within 0.1% of the plan prediction chose (predicted_plan_us);
    # strict top-1 among them is decided by the measurement's noise. Candidates without a prediction (0: those added
    # only to be timed) are never in a tie.
    rows_tied, spreads = [], []
    for r in doc["problems"]:
        if r.get("predicted_plan_us", 0) <= 0 or not r.get("candidates"):
            continue
        tie = [x for x in r["candidates"] if 0 < x.get("predicted_us", 0) <= r["predicted_plan_us"] * 1.001]
        rows_tied.append(r["best_plan"] in {x["plan"] for x in tie})
        if len(tie) > 1:
            spreads.append(max(x["measured_us"] for x in tie) / min(x["measured_us"] for x in tie) - 1)
    if rows_tied:
        apart = (f", measured {100 * min(spreads):.1f}-{100 * max(spreads):.1f}% apart" if spreads else "")
        lines.append(f"the measured best among the candidates predicted within 0.1% of the chosen plan: "
                     f"{sum(rows_tied)} of {len(rows_tied)} problems ({len(spreads)} with more than one such "
                     f"candidate{apart})")
    return table, lines


def cmd_autoplan(argv):
    """The automatic plan per held-out problem: sequential, auto (predicted), auto (measured), the best measured plan
    and the tuning time, then the aims' summary.
    usage: scripts/results.py autoplan FILE.json"""
    if len(argv) != 1:
        print(cmd_autoplan.__doc__)
        return 2
    table, lines = autoplan_table(argv[0])
    print(table + "\n\n" + "\n".join(f"- {x}" for x in lines))
    return 0


def cmd_performance(argv):
    """Writes the SVG plots of docs/performance.md into docs/performance/ and prints its tables (markdown), all from
    the committed result files under results/.
    usage: scripts/results.py performance [--results DIR] [--out DIR]"""
    parser = argparse.ArgumentParser(prog="scripts/results.py performance", description=cmd_performance.__doc__)
    parser.add_argument("--results", default="results")
    parser.add_argument("--out", default="docs/performance")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    r1, r2 = f"{args.results}/h200", f"{args.results}/h200x2"
    table, summary = perf_gemm(f"{r1}/bench_gemm.json", f"{args.out}/gemm-vs-cublas.svg")
    print("## GEMM (results/h200/bench_gemm.json)\n" + table + "\n\n" + "\n".join(f"- {s}" for s in summary))
    print("\n## Collectives, one H200, loopback world 8, 256 MiB (results/h200/bench_collectives.json)")
    print(perf_coll(f"{r1}/bench_collectives.json", f"{args.out}/collectives-h200-loopback.svg", 268435456,
                    "moved_GBps_per_cta", "One H200, loopback world 8, 256 MiB: moved GB/s per CTA",
                    ("tma-push", "tma-pull", "simt"), [1, 2, 4, 8, 16, 32, 64]))
    print("\n## Collectives, 2 H200, 256 MiB (results/h200x2/bench_collectives.json)")
    print(perf_coll(f"{r2}/bench_collectives.json", f"{args.out}/collectives-h200x2.svg", 268435456, "busbw_GBps",
                    "2 H200 (NVLink), 256 MiB bf16: bus bandwidth", ("nccl", "tma-push", "tma-pull", "simt"),
                    [0, 1, 2, 4, 8, 16, 32]))
    print("\n## Overlap, one H200, loopback world 8 (results/h200/bench_overlap.json)")
    t, s = perf_overlap(f"{r1}/bench_overlap.json", f"{args.out}/overlap-h200-loopback.svg",
                        "One H200, loopback world 8: best speedup per mode")
    print(t + "\n\n- " + s)
    print("\n## Overlap, 2 H200 (results/h200x2/bench_overlap.json)")
    t, s = perf_overlap(f"{r2}/bench_overlap.json", f"{args.out}/overlap-h200x2.svg",
                        "2 H200 (NVLink): best speedup per mode over cuBLAS + NCCL")
    print(t + "\n\n- " + s)
    print("\n## Predicted against measured, held-out overlap cases, calibrated profile")
    print(perf_predicted(f"{r1}/validation/overlap/validate.json", f"{args.out}/predicted-h200-loopback.svg",
                         "One H200, loopback world 8: simulator vs measured") + "\n")
    print(perf_predicted(f"{r2}/validation/validate.json", f"{args.out}/predicted-h200x2.svg",
                         "2 H200: simulator vs measured"))
    return 0


def cmd_links(argv):
    """Checks every relative link and image in README.md, results/README.md and docs/*.md: the file exists inside the
    repository and a #fragment names a heading of the target (GitHub's anchor rule). External links are listed.
    usage: scripts/results.py links [ROOT]        (default: the repository holding this script)"""
    root = os.path.abspath(argv[0] if argv else os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    files = [os.path.join(root, "README.md"), os.path.join(root, "results", "README.md")]
    files += sorted(glob.glob(os.path.join(root, "docs", "*.md")))

    def anchors(path):
        found = set()
        for line in open(path):
            m = re.match(r"#+\s+(.*)", line)
            if m:
                found.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
        return found

    checked = broken = 0
    for f in files:
        text = re.sub(r"```.*?```", "", open(f).read(), flags=re.S)
        for m in re.finditer(r"!?\[[^\]]*\]\(([^)\s]+)\)", text):
            url = m.group(1)
            if re.match(r"[a-z]+://", url):
                print(f"external {os.path.relpath(f, root)}: {url}")
                continue
            checked += 1
            path, _, frag = url.partition("#")
            target = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
            why = ("outside the repository" if not target.startswith(root + os.sep) else
                   "missing" if not os.path.exists(target) else
                   "no such heading" if frag and target.endswith(".md") and frag not in anchors(target) else None)
            if why:
                broken += 1
                print(f"{why}: {os.path.relpath(f, root)}: {url}")
    print(f"{checked} relative links checked, {broken} broken")
    return 1 if broken else 0


def cmd_in_doc(argv):
    """Fails unless the last markdown table COMMAND prints stands in DOC, every data row verbatim: a table of
    docs/performance.md made from a committed result file stays the one that file gives.
    usage: scripts/results.py in-doc DOC COMMAND ARGS...
    e.g.   scripts/results.py in-doc docs/performance.md autoplan results/h100/bench_autoplan-paced8.json"""
    if len(argv) < 2 or argv[1] not in COMMANDS:
        print(cmd_in_doc.__doc__)
        return 2
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = COMMANDS[argv[1]](argv[2:]) or 0
    if rc != 0:
        print(out.getvalue())
        return rc
    tables, current = [], []
    for line in out.getvalue().splitlines():
        if line.startswith("|"):
            current.append(line.rstrip())
        elif current:
            tables.append(current)
            current = []
    if current:
        tables.append(current)
    if not tables or len(tables[-1]) < 3:
        print(f"in-doc: {' '.join(argv[1:])} printed no markdown table")
        return 1
    rows = tables[-1][2:]  # below the header and its separator
    doc = {line.rstrip() for line in open(argv[0])}
    missing = [r for r in rows if r not in doc]
    for r in missing:
        print(f"not in {argv[0]}: {r}")
    print(f"{len(rows) - len(missing)} of {len(rows)} rows in {argv[0]}")
    return 1 if missing else 0


def cmd_link_profile(argv):
    """A link profile (LinkProfile JSON, model/profiles/) fitted from a real world's bench_collectives JSON.

      scripts/results.py link-profile results/h200x2/bench_collectives.json [--name h200x2] [--nccl-ctas 24]

    At the largest size measured: link_GBps = the best busbw of any implementation and CTA count; each transport's
    per-CTA rate = the median over AllReduce, ReduceScatter and AllGather at 1-8 CTAs (below the link's cap) of
    busbw / CTAs (busbw is the bytes each link direction carries, so it is the rate the paced movers count);
    latency_us = the smallest size's NCCL AllReduce on NCCL's own CTAs (ctas:0): its time less its link bytes
    (2(W-1)/W of the buffer) at link_GBps, over its 2(W-1) ring steps (so it includes NCCL's launch). nccl_ctas
    is NCCL's own CTA choice on that run (bench_collectives does not record it; 24 on the 2-H200 run, see
    docs/performance.md). nccl_busbw = NCCL's busbw at every size and CTA count measured, per collective, its own
    choice (ctas:0) as the row of nccl_ctas CTAs (which the paced loopback then prices NCCL's calls by);
    tma_push_busbw and tma_pull_busbw the same for the TMA movers (which it then paces them by)."""
    sys.argv = ['results.py link-profile'] + argv
    parser = argparse.ArgumentParser()
    parser.add_argument("json")
    parser.add_argument("--name", default="h200x2")
    parser.add_argument("--nccl-ctas", type=int, default=24)
    args = parser.parse_args()
    doc = json.load(open(args.json))
    rows = []
    for b in doc.get("benchmarks", []):
        if b.get("error_occurred") or not b["name"].startswith("coll/") or b.get("wrong", 0):
            continue
        parts = b["name"].split("/")
        if parts[2] not in ("allreduce", "reducescatter", "allgather"):  # NCCL's rooted reduce / broadcast
            continue
        world = int(parts[4].split(":")[1])
        rows.append(dict(impl=parts[1], op=parts[2], size=int(parts[3]), world=world,
                         ctas=int(parts[5].split(":")[1]), busbw=b["busbw_GBps"], us=b["real_time"] *
                         {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b.get("time_unit", "ns")]))
    if not rows:
        print("no coll/ cases in", args.json)
        return 1
    world = rows[0]["world"]
    big = max(r["size"] for r in rows)
    small = min(r["size"] for r in rows)
    at_big = [r for r in rows if r["size"] == big]
    link = max(r["busbw"] for r in at_big)

    def per_cta(impl):
        xs = [r["busbw"] / r["ctas"] for r in at_big if r["impl"] == impl and 1 <= r["ctas"] <= 8]
        return round(statistics.median(xs), 1) if xs else None

    lat = [r["us"] for r in rows if r["impl"] == "nccl" and r["op"] == "allreduce" and r["size"] == small and
           r["ctas"] == 0]
    steps = 2 * (world - 1)
    link_us = small * 2 * (world - 1) / world / (link * 1e3)
    latency = round(max(0.0, min(lat) - link_us) / steps, 2) if lat else None
    # NCCL's busbw by (op, CTAs, size); its own choice (ctas:0) as the row of --nccl-ctas, unless a bounded row has
    # that count.
    nccl_rows = [r for r in rows if r["impl"] == "nccl"]
    own = None if any(r["ctas"] == args.nccl_ctas for r in nccl_rows) else args.nccl_ctas

    def busbw_table(impl, impl_rows, own_ctas=None):
        """impl's busbw by (CTAs, size) per collective; ctas:0 as the row of own_ctas. None without cases (a loopback
        file: the per-CTA rule); an error (exit 1) when a size is missing at some CTA count."""
        grid = {(r["op"], r["ctas"] or own_ctas, r["size"]): r["busbw"] for r in impl_rows if r["ctas"] or own_ctas}
        if not grid:
            return None
        sizes = sorted({s for _, _, s in grid})
        ctas = sorted({c for _, c, _ in grid})
        table = collections.OrderedDict(sizes_MiB=[s / (1 << 20) for s in sizes], ctas=ctas)
        for op in ("allreduce", "reducescatter", "allgather"):
            missing = [(c, s) for c in ctas for s in sizes if (op, c, s) not in grid]
            if missing:
                raise SystemExit(f"{impl} {op}: no case at (ctas, size) {missing[:3]}: the table needs every size at "
                                 "every CTA count")
            table[op] = [[round(grid[(op, c, s)], 1) for s in sizes] for c in ctas]
        return table

    tables = collections.OrderedDict()
    tables["nccl_busbw"] = busbw_table("nccl", nccl_rows, own)
    for impl in ("tma-push", "tma-pull"):
        tables[impl.replace("-", "_") + "_busbw"] = busbw_table(impl, [r for r in rows if r["impl"] == impl])
    out = collections.OrderedDict(
        name=args.name,
        source=(f"fitted by scripts/results.py link-profile from {os.path.relpath(args.json)} (world {world}, "
                f"{big >> 20} MiB): link = best busbw, per-CTA = median busbw / CTAs at 1-8 CTAs over AR, RS, AG, "
                f"latency = NCCL AllReduce of {small >> 10} KiB on its own CTAs less its link time, over {steps} steps, "
                f"nccl_ctas = NCCL's own choice on that run"),
        link_GBps=round(link, 1), nccl_ctas=args.nccl_ctas, nccl_per_cta_GBps=per_cta("nccl"),
        tma_push_per_cta_GBps=per_cta("tma-push"), tma_pull_per_cta_GBps=per_cta("tma-pull"),
        simt_per_cta_GBps=per_cta("simt"), latency_us=latency)
    for key, table in tables.items():
        if table:
            out[key] = table
    print(json.dumps(out, indent=2))
    return 0


COMMANDS = {"table": cmd_table, "gemm": cmd_gemm, "coll": cmd_coll, "overlap": cmd_overlap, "split": cmd_split,
            "validation": cmd_validation, "headline": cmd_headline, "smi": cmd_smi, "ab-merge": cmd_ab_merge,
            "ab": cmd_ab, "beside": cmd_beside, "autoplan": cmd_autoplan, "performance": cmd_performance,
            "links": cmd_links, "link-profile": cmd_link_profile, "in-doc": cmd_in_doc}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help") or sys.argv[1] not in COMMANDS:
        print(__doc__)
        sys.exit(0 if len(sys.argv) >= 2 and sys.argv[1] in ("-h", "--help") else 2)
    command = COMMANDS[sys.argv[1]]
    if len(sys.argv) > 2 and sys.argv[2] in ("-h", "--help") and command is not cmd_performance:
        print(command.__doc__)
        sys.exit(0)
    sys.exit(command(sys.argv[2:]) or 0)
