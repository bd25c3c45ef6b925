# Same constants for decomposed (few large calls) and signaled (many small calls)? Fit each family alone, apply to
# the other; AR and RS only (AG signaled has its own extra kernel / floor term, which decomposed cannot inform).
import statistics as st
from load import load
from fit import *
split = attach(load('split_calls.tsv'))
dec = [c for c in split if c['mode'] in ('decomposed',) and c['op'] != 'allgather']
sig = [c for c in split if c['mode'] in ('tile-signal', 'green-context') and c['op'] != 'allgather']
seq = [c for c in split if c['mode'] == 'sequential']
mae = lambda m, p, cs: 100 * st.mean(abs(predict(m, p, c) / c['t_comm'] - 1) for c in cs)
for model in ('brief', 'iters_piece'):
    names = MODELS[model][1]
    fx = {k: 0.0 for k in ('b_sig_us', 'e_AGsig_us') if k in names}
    pd, _ = fit(model, dec + seq, fixed=fx)
    ps, _ = fit(model, sig + seq, fixed=fx)
    print(model)
    print('  fit on decomposed AR+RS (+sequential):', ', '.join(f"{n}={v:.3g}" for n, v in zip(names, pd) if n not in fx))
    print('  fit on signaled AR+RS (+sequential):  ', ', '.join(f"{n}={v:.3g}" for n, v in zip(names, ps) if n not in fx))
    print(f"  decomposed AR+RS: own fit {mae(model, pd, dec):.1f}%  signaled's constants {mae(model, ps, dec):.1f}%")
    print(f"  signaled AR+RS:   own fit {mae(model, ps, sig):.1f}%  decomposed's constants {mae(model, pd, sig):.1f}%")
