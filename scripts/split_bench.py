#!/usr/bin/env python3
"""Splits Google Benchmark JSON into a calibration set and a held-out set by a regular expression on the names.

    scripts/split_bench.py --held-out 'REGEX' --fit fit.json --test heldout.json IN.json...

Cases whose name matches REGEX go to the held-out file, the rest to the fit file; the context of the first input is
kept in both, with a "split" entry that records the expression and the side, so each file says which it is.
"""
import argparse
import json
import re

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
