#!/usr/bin/env python3
"""The OVL_BENCH_GEMM_TIMELINE counters of a bench_gemm JSON as a table (means over repetitions; times in us):
    python3 scripts/gemm_timeline_table.py bench_gemm.json
"""
import json,re,collections,statistics,sys
runs=collections.defaultdict(list)
for b in json.load(open(sys.argv[1]))['benchmarks']:
    if b.get('run_type')!='iteration': continue
    m=re.match(r"gemm/([^/]+)/(\d+x\d+x\d+)/(\w+)/sms:(\d+)",b['name'])
    runs[(m.group(2),m.group(3),int(m.group(4)),m.group(1))].append(b)
rows=sorted({k[:3] for k in runs})
mean=lambda L,k: statistics.mean(x[k] for x in L)
print("| shape | B | SMs | cuBLAS us (bench) | cuBLAS bracket | ovl-nosk us (bench) | ovl bracket | gap | CTA start | first tile | tile period | rounds | after last tile | bracket - rounds x period |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    c=runs[r+('cublas',)]; o=runs[r+('ovl-nosk',)]
    if not c or not o: continue
    rd=o[0]['tl_rounds']; tu=mean(o,'tl_tile_us')
    st=mean(o,'tl_start_us') if 'tl_start_us' in o[0] else float('nan')
    gp=mean(o,'tl_gap_us') if 'tl_gap_us' in o[0] else float('nan')
    print(f"| {r[0]} | {r[1]} | {r[2]} | {mean(c,'us'):.1f} | {mean(c,'tl_total_us'):.1f} | {mean(o,'us'):.1f} | {mean(o,'tl_total_us'):.1f} | {gp:.2f} | {st:.2f} | {mean(o,'tl_first_us'):.2f} | {tu:.2f} | {rd:.0f} | {mean(o,'tl_last_us'):.2f} | {mean(o,'tl_total_us')-rd*tu:.1f} |")
