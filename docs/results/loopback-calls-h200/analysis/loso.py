# Leave one shape out: fit 'iters_piece' on the other shapes (comm-split-h200), predict the held-out shape's cases.
import statistics as st
from load import load
from fit import *
split = attach(load('split_calls.tsv'))
shapes = sorted({c['shape'] for c in split})
errs = {}
for s in shapes:
    tr = [c for c in split if c['shape'] != s]
    te = [c for c in split if c['shape'] == s and c['mode'] != 'sequential']
    p, _ = fit('iters_piece', tr)
    for c in te: errs.setdefault((c['mode'], c['op']), []).append(abs(predict('iters_piece', p, c) / c['t_comm'] - 1))
    print(s, ', '.join(f"{v:.3g}" for v in p), f"held-out |err| {100*st.mean(abs(predict('iters_piece', p, c)/c['t_comm']-1) for c in te):.1f}%", flush=True)
for k, v in sorted(errs.items()): print(f"  {k[0]:14s}{k[1]:14s} held-out |err| {100*st.mean(v):.1f}%")
print(f"  all: {100*st.mean(x for v in errs.values() for x in v):.1f}%")
