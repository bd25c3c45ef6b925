#!/usr/bin/env bash
# Run on the GPU machine after scripts/device-run.sh built build-device (--cmd "bash scripts/ncu-cublas-kernels.sh").
# Which cuBLAS kernel (name, grid, cluster) runs 8192x8192x2048 nn on partitions of 116, 124 and 128 SMs and on the
# whole GPU.
set -u
for sms in 116 124 128 132; do
  echo "== cublas 8192x8192x2048/nn/sms:$sms"
  OVL_BENCH_GEMM_REPS=1 timeout -k 10 120 ncu -k regex:'nvjet|gemm|Kernel' --launch-count 1 --section LaunchStats \
    build-device/bench/bench_gemm --benchmark_filter="gemm/cublas/8192x8192x2048/nn/sms:$sms/" \
    --benchmark_min_time=1x 2>&1 | grep -E "nvjet|Grid Size|Block Size|Cluster Size|Waves|Registers Per|Dynamic Shared|==PROF== Profiling|Error" | head -12
done
