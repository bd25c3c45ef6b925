#!/usr/bin/env python3
"""Merges the bench_gemm JSON files of an A/B (DIR/<tag>-<round>.json, one per process) into one file whose rows
carry their process: every row gets "ab_round" (and, with --tag-key KEY, its tag under KEY), and the impl of each row
gets the suffix its tag maps to, so the sides stay apart (gemm/ovl-base/...).
    python3 scripts/gemm_ab_merge.py DIR OUT [--suffix TAG=SUFFIX ...] [--keep IMPL ...] [--tag-key KEY]
TAG * maps every tag, and {tag} in a suffix is the tag itself; impls named by --keep keep their name (a reference,
such as cublas, that pools over every process). Used by gemm-ab-build.sh and gemm-env-ab.sh.
"""
import argparse
import glob
import json
import os
import sys


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


if __name__ == "__main__":
    main()
