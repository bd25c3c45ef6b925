#!/usr/bin/env bash
# Run on the GPU machine after scripts/device-run.sh built build-device (--cmd "bash scripts/ncu-gemm-124.sh").
# One launch each of our GEMM and cuBLAS on 8192x8192x2048 nn in a 124-SM green-context partition, profiled with
# throughput, warp-state, scheduler, memory and source (SASS stall) sections; the report goes to $OUT/ncu-124.txt.
set -u
out=${OUT:-out}/ncu-124.txt
: >"$out"
for impl in ovl cublas; do
  echo "== $impl 8192x8192x2048/nn/sms:124" >>"$out"
  OVL_BENCH_GEMM_REPS=1 timeout -k 10 200 ncu --clock-control none -k regex:'nvjet|gemm_sm90' --launch-skip 1 \
    --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis --section LaunchStats --section SourceCounters \
    build-device/bench/bench_gemm --benchmark_filter="gemm/$impl/8192x8192x2048/nn/sms:124/" \
    --benchmark_min_time=1x >>"$out" 2>&1
  echo "rc $?" >>"$out"
done
grep -E "^== |Duration|SM Frequency|Compute \(SM\) Throughput|Issued Ipc|No Eligible|Stall|L2 Hit|Grid Size" "$out" | head -60
