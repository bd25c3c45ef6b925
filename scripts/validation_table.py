#!/usr/bin/env python3
"""Markdown table of `ovl validate --json` results: one row per predictor (the model, the simulator) per input.

usage: validation_table.py OUT.md [--problems] [--label HEADER] [LABEL=]validate.json...

--label HEADER adds a first column HEADER holding each input's LABEL; --problems adds the ranking's problem count.
The table is written to OUT.md and printed.
"""
import argparse
import json

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
