#!/usr/bin/env bash
# Run on the GPU machine after scripts/device-run.sh built build-device (--cmd "bash scripts/ncu-cublas-kernels.sh").
# Which cuBLAS kernel (name, grid, cluster, shared memory) and for how long (gpu__time_duration, one launch, clocks
# not locked) runs each case. SHAPES: cases as <M>x<N>x<K>/<nn|nt> (default 8192x8192x2048/nn); SMS: partitions
# (default "116 124 128 132"; 132 is the whole GPU).
set -u
for shape in ${SHAPES:-8192x8192x2048/nn}; do
  for sms in ${SMS:-116 124 128 132}; do
    echo "== cublas $shape/sms:$sms"
    OVL_BENCH_GEMM_REPS=1 timeout -k 10 120 ncu --clock-control none -k regex:'nvjet|gemm|Kernel' --launch-skip 1 \
      --launch-count 1 --section LaunchStats --metrics gpu__time_duration.sum \
      build-device/bench/bench_gemm --benchmark_filter="gemm/cublas/$shape/sms:$sms/" --benchmark_min_time=1x 2>&1 |
      grep -E "nvjet|Grid Size|Cluster Size|Dynamic Shared|gpu__time_duration|==PROF== Profiling|Error" | head -12
  done
done
