#!/usr/bin/env python3
# A panel-level LRU sketch of the L2 for 8192x8192x2048 at 124 SMs (128 x 256 tiles): DRAM MB read per tile order,
# for a few effective L2 sizes. Rounds of 124 tiles run in lockstep over 8 k slices. Crude: it ignores the two L2
# partitions and the hardware's merging of shared requests. python3 l2_sketch.py
import collections,sys
TM,TN,SMS=64,32,124
A_MB=0.5; B_MB=1.0   # per panel at K=2048: A row panel 128x2048x2, B col panel 256x2048x2
def order(sw, serp):
    out=[]
    for band in range((TM+sw-1)//sw):
        rows=min(sw,TM-band*sw)
        for inside in range(rows*TN):
            c=inside//rows
            if serp and band%2: c=TN-1-c
            out.append((band*sw+inside%rows, c))
    return out
def dram(o, cap_mb, kslices=8):
    # rounds of SMS tiles; within a round the k-loop streams k slices in lockstep: simulate at (panel, kslice) granularity
    lru=collections.OrderedDict(); size=0; miss=0
    unit={ 'A':A_MB/kslices, 'B':B_MB/kslices}
    for r0 in range(0,len(o),SMS):
        rnd=o[r0:r0+SMS]
        for ks in range(kslices):
            keys=set()
            for (i,j) in rnd: keys.add(('A',i,ks)); keys.add(('B',j,ks))
            for k in sorted(keys):
                if k in lru: lru.move_to_end(k)
                else:
                    miss+=unit[k[0]]; lru[k]=unit[k[0]]; size+=unit[k[0]]
                    while size>cap_mb: _,v=lru.popitem(last=False); size-=v
    return miss
for cap in (20,25,30,40):
    print("cap",cap, " ".join(f"sw{sw}{'s' if s else ''}:{dram(order(sw,s),cap):.0f}" for sw in (4,8,16,32,64) for s in (0,1)))
