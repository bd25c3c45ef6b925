#!/usr/bin/env bash
# Run on the GPU machine after scripts/device-run.sh built build-device (--cmd "bash scripts/ncu-gemm-sass.sh").
# Warp-stall samples per SASS instruction of our GEMM on one case (CASE, default 8192x8192x2048/nn/sms:124): the whole
# source page as CSV ($OUT/ncu-sass.csv.gz) and the 40 instructions with the most samples ($OUT/ncu-sass-top.txt).
set -u
out=${OUT:-out}
OVL_BENCH_GEMM_REPS=1 timeout -k 10 200 ncu --clock-control none -k regex:gemm_sm90 --launch-skip 1 --launch-count 1 \
  --section SourceCounters --section WarpStateStats --page source --print-source sass --csv \
  build-device/bench/bench_gemm --benchmark_filter="gemm/ovl/${CASE:-8192x8192x2048/nn/sms:124}/" \
  --benchmark_min_time=1x \
  >"$out/ncu-sass.csv" 2>/tmp/ncu-sass.err
echo "ncu rc $?"
tail -n 5 /tmp/ncu-sass.err
python3 - "$out/ncu-sass.csv" >"$out/ncu-sass-top.txt" <<'PY'
import csv, sys
lines = open(sys.argv[1], errors="replace").read().splitlines()
start = next(i for i, l in enumerate(lines) if l.startswith('"') and "Source" in l)
rows = list(csv.reader(lines[start:]))
head = rows[0]
print("columns:", head)
key = next((i for i, h in enumerate(head) if "Warp Stall Sampling (All" in h), None)
src = head.index("Source") if "Source" in head else 1
def num(x):
    try: return float(x.replace(",", ""))
    except ValueError: return 0.0
body = [r for r in rows[1:] if len(r) == len(head)]
total = sum(num(r[key]) for r in body)
print("instructions", len(body), "samples", total)
for r in sorted(body, key=lambda r: -num(r[key]))[:40]:
    print(f"{num(r[key]) / total * 100:5.1f}%  " + r[src][:110] + "  | " + " ".join(f"{head[i]}={r[i]}" for i in range(len(head)) if i not in (key, src) and num(r[i]) > 0)[:300])
PY
gzip -f "$out/ncu-sass.csv"
head -c 6000 "$out/ncu-sass-top.txt"
