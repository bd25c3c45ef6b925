import sys, statistics as st
from load import load
cases = load(sys.argv[1])
groups = {}
for c in cases: groups.setdefault((c['mode'], c['op']), []).append(c)
print(f"{'mode':14s}{'op':15s}{'n':>3s}{'calls':>7s}{'meas/call':>10s}{'cal/call':>9s}{'cal err':>9s}{'|cal|':>7s}{'bi/call':>8s}{'bi err':>8s}{'|bi|':>7s}")
for (mo, op), cs in sorted(groups.items()):
    ec = [c['cal'] / c['t_comm'] - 1 for c in cs]; eb = [c['bi'] / c['t_comm'] - 1 for c in cs]
    print(f"{mo:14s}{op:15s}{len(cs):3d}{st.median([c['units'] for c in cs]):7.0f}{st.median([c['per_call'] for c in cs]):10.1f}"
          f"{st.median([c['cal']/c['units'] for c in cs]):9.1f}{100*st.mean(ec):+8.0f}%{100*st.mean(map(abs,ec)):6.0f}%"
          f"{st.median([c['bi']/c['units'] for c in cs]):8.1f}{100*st.mean(eb):+7.0f}%{100*st.mean(map(abs,eb)):6.0f}%")
