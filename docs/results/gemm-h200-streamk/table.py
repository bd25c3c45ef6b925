import json,re,collections,statistics,math,sys
d=json.load(open(sys.argv[1]))
t=collections.defaultdict(list); sk={}
for b in d['benchmarks']:
    if b.get('run_type')!='iteration': continue
    m=re.match(r'gemm/([^/]+)/(\d+x\d+x\d+)/(\w+)/sms:(\d+)',b['name'])
    key=(m.group(2),m.group(3),int(m.group(4)))
    t[key+(m.group(1),)].append(b['tflops'])
    if m.group(1)=='ovl': sk[key]=(int(b.get('sk_tiles',0)),int(b.get('sk_splits',0)))
impls=sorted(set(k[3] for k in t))
base=sys.argv[2] if len(sys.argv)>2 else 'ovl'
print('| shape | B | SMs | stream-K (tiles, splits) | ' + ' | '.join(impls) + ' | ovl/cublas | ovl/ovl-nosk |')
print('|---|---|---|---|' + '---|'*len(impls) + '---|---|')
ratios=collections.defaultdict(list); sk_ratio=[]
for r in sorted(set(k[:3] for k in t), key=lambda r:(r[0],r[1],r[2])):
    v={i:statistics.mean(t[r+(i,)]) for i in impls if t.get(r+(i,))}
    oc=v['ovl']/v['cublas']; on=v['ovl']/v.get('ovl-nosk',v['ovl'])
    ratios[r[2]].append(oc)
    if sk[r][0]: sk_ratio.append(on)
    print(f"| {r[0]} | {r[1]} | {r[2]} | {sk[r] if sk[r][0] else 'off'} | " + ' | '.join(f"{v[i]:.0f}" for i in impls) + f" | {oc:.3f} | {on:.3f} |")
g=lambda xs: math.exp(sum(map(math.log,xs))/len(xs))
for s in sorted(ratios): print(f"sms {s}: ovl/cublas geomean {g(ratios[s]):.3f}, min {min(ratios[s]):.3f}, rows >= 1.0: {sum(x>=1 for x in ratios[s])}/{len(ratios[s])}")
part=[x for s in (116,124,128) for x in ratios.get(s,[])]
if part: print(f"116/124/128: geomean {g(part):.3f}, min {min(part):.3f}, rows >= 1.0: {sum(x>=1 for x in part)}/{len(part)}")
if sk_ratio: print(f"stream-K rows: ovl/ovl-nosk geomean {g(sk_ratio):.3f} ({min(sk_ratio):.3f}-{max(sk_ratio):.3f}) over {len(sk_ratio)} rows")
