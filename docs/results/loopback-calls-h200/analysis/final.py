# Final tables: per (mode, op) mean |relative error| of t_comm_us (= mean per-call error, since a case's calls are
# summed) for the model (calibrated / built-in profile through loopback_hardware(..., 8, rank0)) and the fitted
# formulas; then example rows; then leave-one-shape-out for the chosen formula.
import statistics as st
from load import load
from fit import *
split = attach(load('split_calls.tsv')); cur = attach(load('current_calls.tsv'))
P = {'brief': [3.82, 0.996, 4.9, 35.8, 2880],
     'iters_piece': [4.29, 0.281, 4.57, 0.296, 1.76, 0.486, 2990],
     'iters_piece_floor': [3.54, 1.16, 12.4, 0.231, 1.74, 0.524, 2930]}
def rows(cs):
    g = {}
    for c in cs: g.setdefault((c['mode'], c['op']), []).append(c)
    return g
for lab, cs in (('comm-split-h200 (fit set)', split), ('current-h200 (replicate run, same cases)', cur)):
    print(f"--- {lab}: mean |rel err| of t_comm_us  [mean signed err]")
    print(f"{'mode':14s}{'op':14s}{'n':>3s} {'cal':>14s} {'builtin':>14s} {'brief-fit':>14s} {'iters_piece':>14s} {'+AG floor':>14s}")
    for k, g in sorted(rows(cs).items()):
        def e(f):
            v = [f(c) / c['t_comm'] - 1 for c in g]
            return f"{100*st.mean(map(abs, v)):5.1f} [{100*st.mean(v):+6.1f}]"
        print(f"{k[0]:14s}{k[1]:14s}{len(g):3d} {e(lambda c: c['cal'])} {e(lambda c: c['bi'])} {e(lambda c: predict('brief', P['brief'], c))} {e(lambda c: predict('iters_piece', P['iters_piece'], c))} {e(lambda c: predict('iters_piece_floor', P['iters_piece_floor'], c))}")
    ov = [c for c in cs if c['mode'] != 'sequential']
    for nm, f in (('cal', lambda c: c['cal']), ('builtin', lambda c: c['bi'])) + tuple((m, (lambda m: lambda c: predict(m, P[m], c))(m)) for m in P):
        print(f"   all 288 overlapped-mode cases, {nm}: {100*st.mean(abs(f(c)/c['t_comm']-1) for c in ov):.1f}%")
print("--- examples (comm-split-h200): per call; bytes = rank 0's read+write per call (mean over the plan's calls), buf = the model's buffer bytes per call")
pick = [('decomposed','allreduce','8192x8192x2048',8),('decomposed','allreduce','8192x8192x2048',32),('decomposed','reducescatter','8192x8192x2048',8),
        ('decomposed','allgather','8192x8192x2048',8),('decomposed','allgather','8192x8192x1024',8),('tile-signal','allreduce','8192x8192x2048',8),('tile-signal','allreduce','8192x8192x2048',16),
        ('tile-signal','allreduce','8192x8192x2048',24),('tile-signal','allreduce','8192x8192x2048',32),('tile-signal','reducescatter','8192x8192x2048',8),
        ('tile-signal','reducescatter','8192x8192x2048',32),('green-context','allgather','8192x8192x1024',32),('green-context','allgather','8192x8192x8192',8),('sequential','allreduce','8192x8192x2048',132)]
idx = {(c['mode'], c['op'], c['shape'], c['ctas']): c for c in split}
print(f"{'mode':14s}{'op':14s}{'shape':16s}{'ctas':>5s}{'calls':>6s}{'MiB':>7s}{'bufMiB':>7s}{'meas':>8s}{'cal':>8s}{'bi':>8s}{'fit':>8s}")
for k in pick:
    c = idx[k]
    print(f"{k[0]:14s}{k[1]:14s}{k[2]:16s}{k[3]:5d}{c['units']:6d}{c['bytes']/c['units']/2**20:7.2f}{sum(x['mb'] for x in c['calls'])/c['units']/2**20:7.2f}{c['per_call']:8.1f}{c['cal']/c['units']:8.1f}{c['bi']/c['units']:8.1f}{predict('iters_piece', P['iters_piece'], c)/c['units']:8.1f}")
