#!/usr/bin/env bash
# Run on the GPU machine after scripts/device-run.sh built build-device (--cmd "bash scripts/ncu-gemm-smem.sh").
# Shared-memory and tensor-pipe load of our GEMM and cuBLAS (IMPLS, default: ovl cublas) on one case (CASE,
# default 8192x8192x2048/nt/sms:124), one profiled launch each (the second), clocks not locked. Metrics that this
# ncu does not know are left out; the report goes to $OUT/ncu-smem.txt. BENCH names the bench_gemm binary (default
# build-device's; build-base/bench/bench_gemm profiles gemm-ab-build.sh's base build).
set -u
out=${OUT:-out}/ncu-smem.txt
case_=${CASE:-8192x8192x2048/nt/sms:124}
impls=${IMPLS:-ovl cublas}
: >"$out"
known=$(mktemp)
ncu --query-metrics --chip gh100 >"$known" 2>&1
want="sm__cycles_elapsed.avg gpu__time_duration.sum sm__throughput.avg.pct_of_peak_sustained_elapsed
l1tex__data_bank_reads.sum l1tex__data_bank_writes.sum
l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed l1tex__data_bank_writes.avg.pct_of_peak_sustained_elapsed
l1tex__data_pipe_lsu_wavefronts_mem_shared.sum l1tex__throughput.avg.pct_of_peak_sustained_elapsed
sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed
sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed
sm__inst_executed_pipe_tensor_op_gmma.sum smsp__inst_executed.sum lts__t_sectors_srcunit_tex_op_read.sum
dram__bytes_read.sum"
metrics=""
for m in $want; do
  base=${m%%.*}
  if grep -qw "$base" "$known"; then metrics="$metrics${metrics:+,}$m"; fi
done
echo "metrics: $metrics" >>"$out"
for impl in $impls; do
  echo "== $impl $case_" >>"$out"
  OVL_BENCH_GEMM_REPS=1 timeout -k 10 200 ncu --clock-control none -k regex:'nvjet|gemm_sm90' --launch-skip 1 \
    --launch-count 1 --metrics "$metrics" --section MemoryWorkloadAnalysis_Tables \
    "${BENCH:-build-device/bench/bench_gemm}" --benchmark_filter="gemm/$impl/$case_/" --benchmark_min_time=1x \
    >>"$out" 2>&1
  echo "rc $?" >>"$out"
done
grep -E "^== |^rc |metrics:|sm__|l1tex__|gpu__|smsp__|lts__|dram__|Shared" "$out" | head -120
