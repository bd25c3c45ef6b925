#!/usr/bin/env python3
"""Bus bandwidth (GB/s) per op and size of a bench_collectives JSON, one column per implementation and CTA count.

  python3 scripts/coll_table.py bench_collectives.json [--ctas 1,2,4,8,16,32] [--markdown]

Rows: op x bytes; columns: nccl at ctas:0 (NCCL's own CTA choice, real worlds only) and at each CTA count, then
tma-push, tma-pull and simt at each CTA count. A case with wrong > 0 is marked '!'."""
import argparse
import json

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
columns = [("nccl", 0)] + [(i, c) for i in ("nccl", "tma-push", "tma-pull", "simt") for c in ctas]
header = ["op", "MiB"] + [f"{i}:{c}" if c else f"{i}:auto" for i, c in columns]
rows = []
for op in ("allreduce", "reducescatter", "allgather"):
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
