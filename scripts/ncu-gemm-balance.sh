#!/usr/bin/env bash
# Run on the GPU machine after scripts/device-run.sh built build-device (--cmd "bash scripts/ncu-gemm-balance.sh").
# How evenly one launch keeps the partition's SMs busy: per case, the launch's time, the busiest SM's active cycles
# (sm__cycles_active.max) and the mean over the partition's SMs (sm__cycles_active.sum / SMs; the SMs outside a green
# context stay idle, so .avg and .min are not used). balance = mean / max: 16.5 rounds of whole tiles run as 17 give
# about 0.97; a kernel that spreads its last tiles over all SMs (stream-K) gives about 1.
# SHAPES: cases as <M>x<N>x<K>/<nn|nt> (default 8192x8192x2048/nn), SMS (default 124 128), IMPLS (default
# "ovl-nosk cublas"). Extra shapes need OVL_BENCH_GEMM_SHAPES in the environment (bench_gemm registers them).
# The report goes to $OUT/ncu-balance.txt; `ncu-gemm-balance.sh --summary FILE` prints the table from a report.
set -u
summary() {
  python3 - "$1" "$(dirname "$0")" <<'PY'
import re, sys
sys.path.insert(0, sys.argv[2])
from ncu_report import read
rows = read(sys.argv[1])
print(f"{'case':44s} {'time us':>8s} {'max Mcyc':>9s} {'mean Mcyc':>9s} {'balance':>7s} {'SM MHz':>7s}")
for label, d in rows:
    sms = int(re.search(r"sms:(\d+)", label).group(1))
    g = lambda k: d.get(k, float("nan"))
    mean = g("sm__cycles_active.sum") / sms
    print(f"{label:44s} {g('gpu__time_duration.sum'):8.1f} {g('sm__cycles_active.max')/1e6:9.3f} {mean/1e6:9.3f} "
          f"{mean / g('sm__cycles_active.max'):7.3f} {g('sm__cycles_elapsed.avg.per_second')/1e6:7.0f}")
PY
}
if [[ ${1:-} == --summary ]]; then summary "$2"; exit 0; fi
out=${OUT:-out}/ncu-balance.txt
: >"$out"
m=gpu__time_duration.sum,sm__cycles_active.max,sm__cycles_active.sum,sm__cycles_elapsed.avg.per_second
for shape in ${SHAPES:-8192x8192x2048/nn}; do
  for sms in ${SMS:-124 128}; do
    for impl in ${IMPLS:-ovl-nosk cublas}; do
      echo "== $impl $shape/sms:$sms" >>"$out"
      OVL_BENCH_GEMM_REPS=1 timeout -k 10 120 ncu --clock-control none -k regex:'gemm_sm90|nvjet|gemm' \
        --launch-skip 1 --launch-count 1 --metrics "$m" build-device/bench/bench_gemm \
        --benchmark_filter="gemm/$impl/$shape/sms:$sms/" --benchmark_min_time=1x >>"$out" 2>&1
      echo "rc $?" >>"$out"
    done
  done
done
summary "$out"
