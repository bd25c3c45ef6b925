#!/usr/bin/env bash
# Run on the GPU machine after scripts/device-run.sh built build-device (--cmd "bash scripts/ncu-gemm-l2.sh").
# L2 traffic of one launch of our GEMM (swizzle bands of 4, 8, 16 and 64 tile rows) and of cuBLAS on 8192x8192x2048
# nn in a 124-SM green-context partition: time, DRAM bytes, L2 sectors by source and operation, bytes the crossbar
# delivered to the SMs. The report goes to $OUT/ncu-l2.txt; a one-line-per-run summary is printed.
# NCU_SHAPE picks another shape (8192x8192x2048/nn by default); NCU_IMPLS="impl ..." profiles those bench_gemm impls
# (their own swizzle) instead of the band sweep. `ncu-gemm-l2.sh --summary FILE` only prints the
# summary of a report (no GPU needed).
set -u
summary() {
  python3 - "$1" "$(dirname "$0")" <<'PY'
import re, sys
sys.path.insert(0, sys.argv[2])
from ncu_report import read
rows = read(sys.argv[1])
for label, d in rows:
    g = lambda k: d.get(k, float("nan"))
    print(f"{label:38s} {g('gpu__time_duration.sum'):7.1f} us  L2 sectors {g('lts__t_sectors.sum')/1e6:6.1f}M "
          f"(tex read {g('lts__t_sectors_srcunit_tex_op_read.sum')/1e6:5.1f}M, write {g('lts__t_sectors_srcunit_tex_op_write.sum')/1e6:4.1f}M, "
          f"fabric {g('lts__t_sectors_srcunit_ltcfabric.sum')/1e6:5.1f}M)  DRAM read {g('dram__bytes_read.sum')/1e6:5.0f} MB  "
          f"to SMs {g('l1tex__m_xbar2l1tex_read_bytes.sum')/1e9:5.2f} GB")
PY
}
if [[ ${1:-} == --summary ]]; then summary "$2"; exit 0; fi
out=${OUT:-out}/ncu-l2.txt
: >"$out"
shape=${NCU_SHAPE:-8192x8192x2048/nn}
# Metrics that ran on the H200 before, then the others if this ncu lists them (one unknown name fails the run).
m=gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sectors.sum,lts__t_sectors_srcunit_tex.sum
m=$m,lts__t_requests_srcunit_tex.sum,l1tex__m_xbar2l1tex_read_bytes.sum,sm__cycles_active.avg
known=$(ncu --query-metrics --chip gh100 2>/dev/null | awk '{print $1}')
for x in dram__bytes_write.sum lts__t_sectors_srcunit_tex_op_read.sum lts__t_sectors_srcunit_tex_op_write.sum \
         lts__t_sectors_srcunit_ltcfabric.sum lts__t_sectors_srcunit_tex_lookup_hit.sum; do
  if grep -qx "${x%.*}" <<<"$known"; then m=$m,$x; else echo "not listed by ncu --query-metrics: $x" >>"$out"; fi
done
run() {  # label impl [env...]
  local label=$1 impl=$2
  shift 2
  echo "== $label $shape/sms:124" >>"$out"
  env "$@" OVL_BENCH_GEMM_REPS=1 timeout -k 10 120 ncu --clock-control none -k regex:'gemm_sm90|nvjet|gemm' \
    --launch-skip 1 --launch-count 1 --metrics "$m" build-device/bench/bench_gemm \
    --benchmark_filter="gemm/$impl/$shape/sms:124/" --benchmark_min_time=1x >>"$out" 2>&1
  echo "rc $?" >>"$out"
}
if [[ -n ${NCU_IMPLS:-} ]]; then
  for impl in $NCU_IMPLS; do run "$impl" "$impl"; done
else
  for s in 4 8 16 64; do run "ovl swizzle $s" ovl-nosk OVL_BENCH_GEMM_SWIZZLE=$s; done
  run cublas cublas
fi
summary "$out"
