#!/usr/bin/env bash
# Nsight Compute profiles of bench_gemm cases: one launch per case (the second; the first warms up), clocks not
# locked. Run on a GPU machine after a build, e.g.
#   scripts/device-run.sh --tests none --targets bench_gemm --cmd 'bash scripts/profile.sh --what balance'
#
#   scripts/profile.sh [--what WHAT] [--shapes 'MxNxK/nn ...'] [--sms 'S ...'] [--impls 'IMPL ...']
#                      [--bench PATH] [--out FILE] [--env VAR=VALUE]...
#
# WHAT (default balance):
#   balance  time, the busiest SM's active cycles and the mean over the partition's SMs (sm__cycles_active.max and
#            .sum / SMs), balance = mean / max: 16.5 rounds of whole tiles run as 17 give about 0.97, stream-K about 1
#   l2       DRAM bytes, L2 sectors (by source and operation where ncu lists them), bytes delivered to the SMs
#   smem     shared-memory wavefronts and bank conflicts (MemoryWorkloadAnalysis_Tables)
#   stalls   SpeedOfLight, warp states, scheduler, memory workload, launch statistics and SASS source counters
#   sass     per-instruction SASS source counters as CSV (one case: the first shape, SM count and impl)
#   kernels  which kernel a case launches (name, grid, cluster, shared memory) and its duration: for cuBLAS's choice
# Defaults: --shapes 8192x8192x2048/nn, --sms '124 128', --impls 'ovl cublas', --bench build-device/bench/bench_gemm,
# --out $OUT/ncu-WHAT.txt ($OUT defaults to out). Shapes outside bench_gemm's set need OVL_BENCH_GEMM_SHAPES (--env).
# --env VAR=VALUE runs every case with that variable (a bench_gemm knob such as OVL_BENCH_GEMM_SWIZZLE=16).
set -u
what=balance shapes=8192x8192x2048/nn sms='124 128' impls='ovl cublas' bench=build-device/bench/bench_gemm out=
envs=()
usage() { sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while (($#)); do
  case $1 in
    --what) what=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    --sms) sms=$2; shift 2 ;;
    --impls) impls=$2; shift 2 ;;
    --bench) bench=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --env) envs+=("$2"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "profile.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
done
out=${out:-${OUT:-out}/ncu-$what.txt}
mkdir -p "$(dirname "$out")"
: >"$out"
command -v ncu >/dev/null || { echo "profile.sh: no ncu on PATH" >&2; exit 2; }
known() {  # the metrics of $@ that this ncu lists for the H100/H200 chip
  local listed; listed=$(ncu --query-metrics --chip gh100 2>/dev/null | awk '{print $1}')
  for x in "$@"; do grep -qx "${x%.*}" <<<"$listed" && printf '%s,' "$x"; done | sed 's/,$//'
}
case $what in
  balance) args=(--metrics gpu__time_duration.sum,sm__cycles_active.max,sm__cycles_active.sum,sm__cycles_elapsed.avg.per_second) ;;
  l2) args=(--metrics "$(known gpu__time_duration.sum dram__bytes_read.sum dram__bytes_write.sum lts__t_sectors.sum \
            lts__t_sectors_srcunit_tex.sum lts__t_sectors_srcunit_tex_op_read.sum lts__t_sectors_srcunit_tex_op_write.sum \
            lts__t_sectors_srcunit_ltcfabric.sum lts__t_requests_srcunit_tex.sum l1tex__m_xbar2l1tex_read_bytes.sum)") ;;
  smem) args=(--metrics "$(known gpu__time_duration.sum l1tex__data_pipe_lsu_wavefronts_mem_shared.sum \
              l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum smsp__inst_executed_op_shared_ld.sum \
              smsp__inst_executed_op_shared_st.sum)" --section MemoryWorkloadAnalysis_Tables) ;;
  stalls) args=(--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis
                --section LaunchStats --section SourceCounters) ;;
  sass) args=(--section SourceCounters --section WarpStateStats --page source --print-source sass --csv)
        shapes=${shapes%% *} sms=${sms%% *} impls=${impls%% *} ;;
  kernels) args=(--section LaunchStats --metrics gpu__time_duration.sum) ;;
  *) echo "profile.sh: unknown --what $what" >&2; exit 2 ;;
esac
for shape in $shapes; do
  for s in $sms; do
    for impl in $impls; do
      echo "== $impl $shape/sms:$s" >>"$out"
      env "${envs[@]}" OVL_BENCH_GEMM_REPS=1 timeout -k 10 200 ncu --clock-control none -k regex:'gemm_sm90|nvjet|gemm' \
        --launch-skip 1 --launch-count 1 "${args[@]}" "$bench" --benchmark_filter="gemm/$impl/$shape/sms:$s/" \
        --benchmark_min_time=1x >>"$out" 2>&1
      echo "rc $?" >>"$out"
    done
  done
done
if [[ $what == balance ]]; then  # the table: balance per case
  python3 - "$out" <<'PY'
import re, sys
rows, label, d = [], None, {}
for line in open(sys.argv[1]):
    if line.startswith("== "):
        if label: rows.append((label, d))
        label, d = line[3:].strip(), {}
    m = re.match(r"\s+([a-z_]+__[\w.]+)\s+(\S+)\s+([\d.,]+)\s*$", line)
    if m:
        scale = {"msecond": 1e3, "usecond": 1, "nsecond": 1e-3, "cycle": 1, "Mcycle": 1e6, "Kcycle": 1e3,
                 "cycle/second": 1, "cycle/nsecond": 1e9, "cycle/usecond": 1e6, "Ghz": 1e9, "Mhz": 1e6}
        d[m.group(1)] = float(m.group(3).replace(",", "")) * scale.get(m.group(2), 1)
if label: rows.append((label, d))
print(f"{'case':44s} {'time us':>8s} {'max Mcyc':>9s} {'mean Mcyc':>9s} {'balance':>7s}")
for label, d in rows:
    sms = int(re.search(r"sms:(\d+)", label).group(1))
    g = lambda k: d.get(k, float("nan"))
    mean = g("sm__cycles_active.sum") / sms
    print(f"{label:44s} {g('gpu__time_duration.sum'):8.1f} {g('sm__cycles_active.max') / 1e6:9.3f} "
          f"{mean / 1e6:9.3f} {mean / g('sm__cycles_active.max'):7.3f}")
PY
else
  grep -E '^==|gpu__time_duration|rc ' "$out" | head -n 80
fi
echo "report: $out"
