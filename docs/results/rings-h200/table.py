#!/usr/bin/env python3
"""Prints README.md's tables from bench_collectives.json (run from this folder): the bare TMA ring's GB/s per CTA
(bytes read + written: copy 2 x, reduce-add 3 x the buffer) per ring shape and CTA count, and the 1 GiB TMA copy."""
import collections
import json

ring = collections.defaultdict(dict)
copies = []
for b in json.load(open("bench_collectives.json"))["benchmarks"]:
    p = b["name"].replace("/manual_time", "").split("/")
    if p[0] == "ring":
        ring[(p[1], p[3].split(":")[1])][int(p[4].split(":")[1])] = b
    elif p[0] == "copy":
        copies.append(("/".join(p), b))
ctas = (1, 8, 16, 24, 32, 48, 64, 132)
print("| op | ring (stages x KiB) | " + " | ".join(f"{c} CTA" for c in ctas) + " | wrong |")
print("|---|---|" + "---:|" * len(ctas) + "---:|")
for (op, shape), r in ring.items():
    print(f"| {op} | {shape} | " + " | ".join(f"{r[c]['GBps_per_cta']:.0f}" for c in ctas)
          + f" | {max(r[c]['wrong'] for c in ctas):.0f} |")
print("\n| copy (4 x 32 KiB ring, 4 KB-aligned slices) | GB/s | GB/s per CTA | % of cudaMemcpy |")
print("|---|---:|---:|---:|")
memcpy = next(b["GBps"] for n, b in copies if "memcpy" in n)
for n, b in copies:
    per = f"{b['GBps_per_cta']:.1f}" if "GBps_per_cta" in b else "-"
    print(f"| {n} | {b['GBps']:.0f} | {per} | {100 * b['GBps'] / memcpy:.0f}% |")
