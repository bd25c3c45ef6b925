# Fits per-call cost formulas of the loopback SIMT mover to bench_overlap's t_comm_us (sum of a plan's calls, no
# GEMM). Each case's prediction is the sum over its calls (units) of the formula; the fit minimizes the mean squared
# relative error of t_comm_us over the chosen cases (Nelder-Mead on log-parameters, pure Python).
import math, sys, statistics as st
from load import load

def pieces(call_str):
    out = []
    if call_str in ('-', ''): return out
    for p in call_str.strip(',').split(','):
        out.append((p[0], int(p[1:])))
    return out

def prep(cases):
    for c in cases:
        c['sig'] = c['mode'] in ('tile-signal', 'green-context')
        c['extra_kernel'] = 1 if (c['sig'] and c['op'] == 'allgather') else 0
    return cases

W = 8; EB = 2
def call_terms(c, call):
    # bytes rank 0 moves in this call: reduce pieces (W reads + 1 write per element), copy pieces (1 + 1)
    R = call['red'] + (call['red'] / W)  # red holds the W reads; add the write
    C = call['cp'] * 2
    return R, C

# ----- formulas: each returns the predicted us of one call -----
def f_brief(p, c, call, ps):      # a + b*sig + e*AGsig + bytes / min(ctas*r, H)
    a, b, e, r, H = p
    R, C = call_terms(c, call)
    return a + b * c['sig'] + e * c['extra_kernel'] + (R + C) / min(c['ctas'] * r, H) / 1e3

def f_two_rates(p, c, call, ps):  # a + b*sig + e*AGsig + max(R/(ctas r_red) + C/(ctas r_cp), (R+C)/H)
    a, b, e, rr, rc, H = p
    R, C = call_terms(c, call)
    t = max(R / (c['ctas'] * rr) + C / (c['ctas'] * rc), (R + C) / H)
    return a + b * c['sig'] + e * c['extra_kernel'] + t / 1e3

def iteration_us(c, ps, tr, tc):   # the kernel's grid-stride iterations over the call's pieces, x time per iteration
    it = 0.0
    for kind, count in ps:
        nv = count // 8
        n = -(-(-(-nv // c['ctas'])) // 512)
        it += n * (tr if kind == 'R' else tc)
    return it

def f_iters(p, c, call, ps):      # a + b*sig + e*AGsig + max(sum_pieces iterations * t_kind, (R+C)/H)
    a, b, e, tr, tc, H = p
    R, C = call_terms(c, call)
    it = iteration_us(c, ps, tr, tc)
    return a + b * c['sig'] + e * c['extra_kernel'] + max(it, (R + C) / H / 1e3)

MODELS = {
    'brief':     (f_brief,     ['a_us', 'b_sig_us', 'e_AGsig_us', 'r_cta_GBps', 'H_GBps'],  [5, 1, 5, 35, 3000]),
    'two_rates': (f_two_rates, ['a_us', 'b_sig_us', 'e_AGsig_us', 'r_red_GBps', 'r_copy_GBps', 'H_GBps'], [5, 1, 5, 45, 30, 3000]),
    'iters':     (f_iters,     ['a_us', 'b_sig_us', 'e_AGsig_us', 't_red_iter_us', 't_copy_iter_us', 'H_GBps'], [5, 1, 5, 1.5, 0.5, 3000]),
}

def predict(model, p, c):
    f = MODELS[model][0]
    return sum(f(p, c, call, call['ps']) for call in c['calls'])

def nelder_mead(fun, x0, iters=4000, step=0.3):
    n = len(x0)
    pts = [list(x0)] + [[x0[j] + (step if j == i else 0) for j in range(n)] for i in range(n)]
    vals = [fun(x) for x in pts]
    for _ in range(iters):
        order = sorted(range(n + 1), key=lambda i: vals[i]); pts = [pts[i] for i in order]; vals = [vals[i] for i in order]
        cen = [sum(pts[i][j] for i in range(n)) / n for j in range(n)]
        xr = [cen[j] + (cen[j] - pts[-1][j]) for j in range(n)]; fr = fun(xr)
        if fr < vals[0]:
            xe = [cen[j] + 2 * (cen[j] - pts[-1][j]) for j in range(n)]; fe = fun(xe)
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            xc = [cen[j] + 0.5 * (pts[-1][j] - cen[j]) for j in range(n)]; fc = fun(xc)
            if fc < vals[-1]: pts[-1], vals[-1] = xc, fc
            else:
                for i in range(1, n + 1):
                    pts[i] = [pts[0][j] + 0.5 * (pts[i][j] - pts[0][j]) for j in range(n)]; vals[i] = fun(pts[i])
        if max(vals) - min(vals) < 1e-12: break
    i = min(range(n + 1), key=lambda i: vals[i])
    return pts[i], vals[i]

def fit(model, cases, fixed=None):
    names, x0 = MODELS[model][1], MODELS[model][2]
    fixed = fixed or {}
    free = [i for i in range(len(names)) if names[i] not in fixed]
    def full(lx):
        p = []; k = 0
        for i, nme in enumerate(names):
            if nme in fixed: p.append(fixed[nme])
            else: p.append(math.exp(lx[k])); k += 1
        return p
    def obj(lx):
        p = full(lx)
        return sum(((predict(model, p, c) - c['t_comm']) / c['t_comm']) ** 2 for c in cases) / len(cases)
    lx = [math.log(x0[i]) for i in free]
    for _ in range(3):  # restarts
        lx, v = nelder_mead(obj, lx)
    return full(lx), math.sqrt(v)

def attach(cases):
    for c in cases:
        for call in c['calls']: call['ps'] = pieces(call['pieces'])
    return prep(cases)

def table(model, p, cases, label):
    g = {}
    for c in cases: g.setdefault((c['mode'], c['op']), []).append(c)
    rows = []
    for k in sorted(g):
        e = [predict(model, p, c) / c['t_comm'] - 1 for c in g[k]]
        ec = [c['cal'] / c['t_comm'] - 1 for c in g[k]]
        rows.append((k, len(e), st.mean(map(abs, e)), st.mean(e), max(map(abs, e)), st.mean(map(abs, ec))))
    return rows

def f_iters_pn(p, c, call, ps):   # iterations blended with the HBM time by a p-norm: (it^q + (bytes/H)^q)^(1/q)
    a, b, e, tr, tc, H, q = p
    R, C = call_terms(c, call)
    it = iteration_us(c, ps, tr, tc)
    h = (R + C) / H / 1e3
    return a + b * c['sig'] + e * c['extra_kernel'] + ((it ** q + h ** q) ** (1 / q) if it + h > 0 else 0.0)
MODELS['iters_pnorm'] = (f_iters_pn, ['a_us', 'b_sig_us', 'e_AGsig_us', 't_red_iter_us', 't_copy_iter_us', 'H_GBps', 'q'], [4, 1, 4, 1.7, 0.5, 3000, 4])

def f_iters_piece(p, c, call, ps):   # 'iters' plus a cost per piece with work (range load, setup, loop drain)
    a, b, e, pc, tr, tc, H = p
    R, C = call_terms(c, call)
    it = iteration_us(c, ps, tr, tc)
    return a + b * c['sig'] + e * c['extra_kernel'] + pc * len(ps) + max(it, (R + C) / H / 1e3)
MODELS['iters_piece'] = (f_iters_piece, ['a_us', 'b_sig_us', 'e_AGsig_us', 'piece_us', 't_red_iter_us', 't_copy_iter_us', 'H_GBps'], [4, 1, 4, 0.3, 1.7, 0.5, 3000])

def f_iters_piece_floor(p, c, call, ps):   # 'iters_piece' without e; AG signaled calls: max(floor F, that)
    a, b, F, pc, tr, tc, H = p
    R, C = call_terms(c, call)
    it = iteration_us(c, ps, tr, tc)
    t = a + b * c['sig'] + pc * len(ps) + max(it, (R + C) / H / 1e3)
    return max(F, t) if c['extra_kernel'] else t
MODELS['iters_piece_floor'] = (f_iters_piece_floor, ['a_us', 'b_sig_us', 'F_AGsig_us', 'piece_us', 't_red_iter_us', 't_copy_iter_us', 'H_GBps'], [4, 1, 12, 0.3, 1.7, 0.5, 3000])
