#!/usr/bin/env python3
# The stream-K cost model of model/src/gemm_model.cpp (k-block units: a partial written 2.4, read back 3.0) against
# every measured forced plan (ovl / ovl-nosk, one process each): gemm-h200-streamk/sk-sweep.json,
# gemm-h200-tail/sk-tail.json, this folder's sk8192.json. "pred" counts the sparse last round of whole tiles as a full
# round; `contx` counts a contiguous plan's pieces exactly (the kernel's cut). The second part refits with a factor
# f(u) = 1 - a (1 - u) on a round with a fraction u of the SMs busy; the third lists, per bar shape and SM count, the
# best contiguous plan over c CTAs. CPU only: python3 cost_check.py
import math
W,R=2.4,3.0
def cont(tiles,kb,sms,n,c,W=W,R=R,F=0.0):
    whole=tiles-n; L=n*kb/c
    p=math.ceil(L/kb)+1 if (L%kb) else int(L//kb)
    s=math.ceil(kb/L)+1 if (kb%L) else int(kb//L)
    if s==1: p=int(L//kb); 
    phase=(L+W*p+R*s+F)/kb if s>1 else L/kb
    return math.ceil(whole/sms)+phase
def split(tiles,kb,sms,n,sp,W=W,R=R):
    whole=tiles-n; pieces=n*sp
    return math.ceil(whole/sms)+math.ceil(pieces/sms)*(math.ceil(kb/sp)+W)/kb+sp*R/kb
cases=[("2048x8192x4096",512,64,124,"c",16,64,1.119),("2048x8192x4096",512,64,124,"c",16,124,1.016),
("2048x8192x4096",512,64,124,"c",140,123,1.038),("2048x8192x4096",512,64,124,"s",16,2,1.044),("2048x8192x4096",512,64,124,"s",16,4,1.079),
("2048x8192x4096",512,64,124,"s",16,8,1.052),("2048x8192x4096",512,64,124,"s",140,2,0.963),
("4096x8192x8192",1024,128,124,"s",32,3,1.079),("4096x8192x8192",1024,128,124,"s",32,2,1.045),("4096x8192x8192",1024,128,124,"s",156,2,1.021),
("4096x8192x8192",1024,128,124,"c",32,124,1.000),("4096x8192x8192",1024,128,124,"c",156,124,1.014),
("8192x4096x1024",1024,16,124,"s",32,2,0.976),("8192x4096x1024",1024,16,124,"s",32,3,0.985),("8192x4096x1024",1024,16,124,"c",32,64,0.980),
("8192x4096x1024",1024,16,124,"c",32,124,0.915),("8192x4096x1024",1024,16,124,"c",156,124,0.962),("8192x4096x1024",1024,16,124,"c",280,124,0.939),
("8192x8192x2048",2048,32,124,"c",64,124,0.930),("8192x8192x2048",2048,32,124,"c",64,64,0.989),("8192x8192x2048",2048,32,124,"c",188,124,0.979),("8192x8192x2048",2048,32,124,"c",312,124,0.954),
("8192x8192x8192",2048,128,124,"c",64,124,1.008),("8192x8192x8192",2048,128,124,"c",64,112,1.012),("8192x8192x8192",2048,128,124,"c",64,96,1.023),("8192x8192x8192",2048,128,124,"s",64,3,0.999),
("8192x8192x8192",2048,128,116,"c",76,116,1.012),("8192x8192x8192",2048,128,116,"c",76,96,1.005)]
for (sh,t,kb,sms,kind,n,x,meas) in cases:
    base=math.ceil(t/sms)
    plan=cont(t,kb,sms,n,x) if kind=="c" else split(t,kb,sms,n,x)
    print(f"{sh:16s} kb={kb:3d} {kind} {n:3d}/{x:3d} meas {meas:.3f} pred {base/plan:.3f}")

def contx(tiles,kb,sms,n,c,W,R):
    I=n*kb; starts=[b*I//c for b in range(c+1)]
    pcta=[];tp=collections.Counter()
    for b in range(c):
        s,e=starts[b],starts[b+1]
        if e<=s: pcta.append(0);continue
        t0,t1=s//kb,(e-1)//kb
        pcta.append(t1-t0+1)
        for t in range(t0,t1+1): tp[t]+=1
    smax=max(tp.values())
    phase=max((starts[b+1]-starts[b])+(W*pcta[b] if smax>1 else 0) for b in range(c))+(R*smax if smax>1 else 0)
    return phase/kb
import collections
def f(u,a): return 1-a*(1-u)
for a in (0,0.1,0.2,0.3):
  for W2,R2 in ((2.4,3.0),(4,5)):
    err=[]
    for (sh,t,kb,sms,kind,n,x,meas) in cases:
        whole=math.floor(t/sms)  # full rounds
        base=whole+f(n/sms,a)
        if kind=="c":
            if n>sms: continue
            plan=whole+contx(t,kb,sms,n,x,W2,R2)*f(x/sms,a)
        else:
            if n>sms: continue
            pieces=n*x
            plan=whole+math.ceil(pieces/sms)*(math.ceil(kb/x)+W2)/kb*f(min(pieces,sms)/sms,a)+x*R2/kb
        err.append((sh,kind,n,x,meas,base/plan))
    mae=sum(abs(p-m) for *_,m,p in err)/len(err)
    print(a,W2,R2,"MAE",round(mae,4))
    if a==0.2 and W2==2.4:
        for e in err: print("   ",e[0],e[1],e[2],e[3],e[4],round(e[5],3))
print("---- rule check")
shapes=[(8192,8192,8192),(4096,8192,8192),(8192,8192,2048),(2048,8192,4096),(8192,4096,1024),(16384,8192,1024)]
for (m,n_,k) in shapes:
    tiles=(m//128)*(n_//256); kb=k//64
    for sms in (132,128,124,116,100,64,32):
        n=tiles%sms
        if n==0: continue
        base=tiles//sms+1
        best=None
        for c in range(max(1,n),sms+1):
            ph=contx(tiles,kb,sms,n,c,2.4,3.0)
            tot=tiles//sms+ph
            g=base/tot
            if best is None or g>best[0]: best=(g,c)
        print(f"{m}x{n_}x{k} sms {sms}: leftover {n}, best contiguous c={best[1]} pred {best[0]:.3f}")
