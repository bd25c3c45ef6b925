#!/usr/bin/env python3
"""Prints the tables of README.md from bench_overlap.json and bench_collectives.json (run from this folder).

Overlap: per problem, the SIMT and TMA sequential baselines, the GEMM alone, the best overlapped case, and the tma
mode per comm SM count: speedup over the TMA baseline, efficiency, the collective alone and the bytes it moves per
CTA. Bytes moved by rank 0's share with the push mover (S = M x N x 2 bytes, the partial product, W = 8):
  ReduceScatter  S / W zeroed + W sources x S / W x (read + destination read and write)  = S (3 + 1/W)
  AllReduce      the same for rank 0's pieces, + a read and a write of the W - 1 other pieces = S (5 - 1/W)
"""
import collections
import json

W = 8


def name_parts(name):
    p = name.replace("/iterations:5/manual_time", "").split("/")
    mode, op, shape, comm = p[1], p[2], p[3], int(p[5].split(":")[1])
    algo = p[6].split(":")[1] if len(p) > 6 else None
    return mode, op, shape, comm, algo


def moved_bytes(op, shape):
    m, n, _ = (int(x) for x in shape.split("x"))
    s = m * n * 2
    return s * (3 + 1 / W) if op == "gemm-reducescatter" else s * (5 - 1 / W)


def overlap_table(path):
    rows = collections.defaultdict(dict)
    for b in json.load(open(path))["benchmarks"]:
        mode, op, shape, comm, algo = name_parts(b["name"])
        rows[(op, shape)][(mode, comm, algo)] = b
    print("| op | shape | seq SIMT / TMA us | GEMM alone (124 SMs) | best overlapped | speedup vs SIMT seq | "
          "tma speedup vs TMA seq 8/16/24/32 | tma efficiency 8/16/24/32 | tma comm alone us 8/32 | "
          "moved GB/s per CTA 8/16/24/32 | GEMM slowdown (tma) |")
    print("|---|---|---|---:|---|---:|---|---|---|---|---|")
    for (op, shape), r in rows.items():
        seq = next(v for k, v in r.items() if k[0] == "sequential" and k[2] is None)["us"]
        seq_tma = next(v for k, v in r.items() if k[0] == "sequential" and k[2] is not None)["us"]
        over = {k: v for k, v in r.items() if k[0] != "sequential"}
        (bm, bc, _), best = min(over.items(), key=lambda kv: kv[1]["us"])
        tma = [r[("tma", c, None)] for c in (8, 16, 24, 32)]
        moved = moved_bytes(op, shape)
        print(f"| {op} | {shape} | {seq:.0f} / {seq_tma:.0f} | {tma[0]['t_gemm_us']:.0f} | {bm} {bc}: "
              f"{best['us']:.0f} | {seq / best['us']:.2f}x | "
              + " / ".join(f"{seq_tma / t['us']:.2f}" for t in tma) + " | "
              + " / ".join(f"{t['efficiency']:.2f}" for t in tma) + " | "
              + f"{tma[0]['t_comm_us']:.0f} / {tma[3]['t_comm_us']:.0f} | "
              + " / ".join(f"{moved / (t['t_comm_us'] * 1e3) / c:.0f}" for t, c in zip(tma, (8, 16, 24, 32))) + " | "
              + " / ".join(f"{t['gemm_slowdown']:.2f}" for t in tma) + " |")
    wrong = [b["name"] for b in json.load(open(path))["benchmarks"] if b.get("wrong", 0) != 0]
    print(f"\ncases with wrong > 0: {len(wrong)}" + ("".join(f"\n  {n}" for n in wrong)))


def collectives_table(path):
    tab = {}
    copies = []
    for b in json.load(open(path))["benchmarks"]:
        n = b["name"].replace("/manual_time", "")
        p = n.split("/")
        if p[0] == "coll":
            tab[(p[1], p[2], int(p[3]), int(p[5].split(":")[1]))] = b
        elif p[0] == "copy":
            copies.append((n, b))
    ctas = (1, 2, 4, 8, 16, 32, 64)
    print("| impl | op | bytes | " + " | ".join(f"{c} CTA" for c in ctas) + " | wrong |")
    print("|---|---|---:|" + "---:|" * len(ctas) + "---:|")
    for impl in ("tma-push", "tma-pull", "simt"):
        for op in ("allreduce", "reducescatter", "allgather"):
            for size in (1 << 26, 1 << 28, 1 << 30):
                cells = [tab.get((impl, op, size, c)) for c in ctas]
                if not any(cells):
                    continue
                wrong = max(c["wrong"] for c in cells if c)
                print(f"| {impl} | {op} | {size >> 20} MiB | "
                      + " | ".join(f"{c['moved_GBps_per_cta']:.0f} / {c['busbw_GBps']:.0f}" if c else "-"
                                   for c in cells) + f" | {wrong:.0f} |")
    print("\n| copy | GB/s | GB/s per CTA |")
    print("|---|---:|---:|")
    for n, b in copies:
        if "/1073741824" in n:
            per = f"{b['GBps_per_cta']:.1f}" if "GBps_per_cta" in b else "-"
            print(f"| {n} | {b['GBps']:.0f} | {per} |")


if __name__ == "__main__":
    overlap_table("bench_overlap.json")
    print()
    collectives_table("bench_collectives.json")
