# Aggregates the per-call TSV (percall.cpp) into one record per case.
import csv, collections
def load(path):
    cases = collections.OrderedDict()
    for r in csv.DictReader(open(path), delimiter='\t'):
        n = r['name']
        c = cases.get(n)
        if c is None:
            c = cases[n] = dict(name=n, mode=r['mode'], op=r['op'], m=int(r['m']), n=int(r['n']), k=int(r['k']),
                                ctas=int(r['ctas']), units=int(r['units']), t_comm=float(r['t_comm_us']),
                                calls=[], cal=0.0, bi=0.0)
        call = dict(rd=float(r['read_bytes']), wr=float(r['write_bytes']), red=float(r['reduce_read']),
                    cp=float(r['copy_bytes']), pieces=r['pieces'], mb=float(r['model_bytes']), cal=float(r['cal_us']), bi=float(r['bi_us']))
        c['calls'].append(call); c['cal'] += call['cal']; c['bi'] += call['bi']
    for c in cases.values():
        c['shape'] = f"{c['m']}x{c['n']}x{c['k']}"
        c['per_call'] = c['t_comm'] / c['units']
        c['bytes'] = sum(x['rd'] + x['wr'] for x in c['calls'])
        c['active'] = sum(1 for x in c['calls'] if x['rd'] + x['wr'] > 0)
    return list(cases.values())
