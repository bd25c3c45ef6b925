#!/usr/bin/env python3
"""Summarizes bench_collectives JSON: copy GB/s per CTA (TMA vs SIMT), CTAs to 90% of the device copy bandwidth,
and collective bus bandwidth per implementation and CTA count. Markdown on stdout."""
import json
import re
import sys
from collections import defaultdict

data = json.load(open(sys.argv[1]))
rows = [b for b in data["benchmarks"] if b.get("run_type", "iteration") == "iteration" and not b.get("error_occurred")]
errors = [b for b in data["benchmarks"] if b.get("error_occurred")]

copy = defaultdict(dict)  # bytes -> (impl, ctas) -> GBps
memcpy = {}
coll = defaultdict(dict)  # (impl, op, bytes, world) -> ctas -> (busbw, algbw, wrong)
for b in rows:
    name = re.sub(r"/(min_time:[^/]+|manual_time)", "", b["name"])
    m = re.match(r"copy/(tma|simt)/(\d+)/ctas:(\d+)$", name)
    if m:
        copy[int(m[2])][(m[1], int(m[3]))] = (b["GBps"], b.get("wrong", 0))
        continue
    m = re.match(r"copy/memcpy/(\d+)$", name)
    if m:
        memcpy[int(m[1])] = b["GBps"]
        continue
    m = re.match(r"coll/([\w-]+)/(\w+)/(\d+)/world:(\d+)/ctas:(\d+)$", name)
    if m:
        coll[(m[1], m[2], int(m[3]), int(m[4]))][int(m[5])] = (b["busbw_GBps"], b.get("moved_GBps_per_cta", 0), b.get("wrong", 0))

ctx = data.get("context", {})
print(f"GPU: {ctx.get('gpu', '?')}, {ctx.get('sm_count', '?')} SMs, driver {ctx.get('driver_version', '?')}, "
      f"CUDA runtime {ctx.get('cuda_runtime_version', '?')}, NCCL {ctx.get('nccl_version', '?')}, date {ctx.get('date', '?')}\n")
for nbytes in sorted(copy):
    ref = memcpy.get(nbytes)
    print(f"### Local copy, {nbytes >> 20} MiB (GB/s = bytes read + written; cudaMemcpy D2D: "
          f"{ref:.0f} GB/s)\n" if ref else f"### Local copy, {nbytes >> 20} MiB\n")
    print("| CTAs | TMA GB/s | TMA GB/s per CTA | SIMT GB/s | SIMT GB/s per CTA |")
    print("|---:|---:|---:|---:|---:|")
    ctas = sorted({c for (_, c) in copy[nbytes]})
    for c in ctas:
        t = copy[nbytes].get(("tma", c), (float("nan"), 0))[0]
        s = copy[nbytes].get(("simt", c), (float("nan"), 0))[0]
        print(f"| {c} | {t:.0f} | {t / c:.1f} | {s:.0f} | {s / c:.1f} |")
    if ref:
        for impl in ("tma", "simt"):
            hit = [c for c in ctas if copy[nbytes].get((impl, c), (0, 0))[0] >= 0.9 * ref]
            print(f"\n{impl}: reaches 90% of cudaMemcpy ({0.9 * ref:.0f} GB/s) at "
                  f"{str(hit[0]) + ' CTAs' if hit else 'no measured CTA count'}", end="")
        print("\n")
    wrong = sum(v[1] for v in copy[nbytes].values())
    if wrong:
        print(f"copy wrong bytes: {wrong}\n")

groups = defaultdict(list)
for key in coll:
    groups[(key[1], key[3])].append(key)
for (op, world), keys in sorted(groups.items()):
    ctas = sorted({c for k in keys for c in coll[k]})
    print(f"### {op}, loopback world {world}: busbw GB/s / moved GB/s per CTA (busbw: nccl-tests formula; moved: "
          f"bytes read + written by the kernel per CTA; all ranks share one GPU's HBM)\n")
    print("| impl | bytes | " + " | ".join(f"{c} CTA" for c in ctas) + " | wrong |")
    print("|---|---:|" + "---:|" * len(ctas) + "---:|")
    for k in sorted(keys, key=lambda k: (k[0], k[2])):
        cells = [f"{coll[k][c][0]:.0f} / {coll[k][c][1]:.0f}" if c in coll[k] else "" for c in ctas]
        wrong = int(sum(v[2] for v in coll[k].values()))
        print(f"| {k[0]} | {k[2] >> 20} MiB | " + " | ".join(cells) + f" | {wrong} |")
    print()
if errors:
    print(f"{len(errors)} cases skipped or failed, e.g. {errors[0]['name']}: {errors[0].get('error_message', '')[:200]}")
