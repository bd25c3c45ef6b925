#!/usr/bin/env bash
# What ran on the H200 for docs/results/overlap-h200: build only the overlap targets (their dependencies: ovl_core,
# ovl_kernels, ovl_sim, ovl_model), the overlap GPU tests, then bench_overlap on FILTER. Logs and JSON go to $OUT.
#   OUT=dir FILTER='overlap/.*/8192x8192x4096/.*' docs/results/overlap-h200/run.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
out=${OUT:-out}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
extra=()
[[ -f .deps/include/nlohmann/json.hpp ]] && extra+=(-DOVL_NLOHMANN_INCLUDE_DIR=$PWD/.deps/include)
start=$(date +%s)
if ! cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release "${extra[@]}" >"$out/run.log" 2>&1 ||
   ! timeout "${BUILD_TIMEOUT:-200}" cmake --build build-device -j "$(nproc)" --target test_overlap bench_overlap \
       >>"$out/run.log" 2>&1; then
  echo "BUILD FAILED"; grep -E "error|FAILED" "$out/run.log" | head -30; exit 1
fi
echo "build: ok in $(( $(date +%s) - start )) s"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
t0=$(date +%s)
OVL_WAIT_TIMEOUT_MS=${TEST_WAIT_MS:-3000} timeout "${TEST_TIMEOUT:-90}" build-device/tests/test_overlap \
  --gtest_output=json:"$out/test_overlap.json" >"$out/test_overlap.log" 2>&1
echo "tests: rc $? in $(( $(date +%s) - t0 )) s"
grep -E "^\[ +(OK|FAILED|SKIPPED) +\]|^\[==========\]|^\[  PASSED|Failure|error:|Expected|Which is|vs |auto plan" \
  "$out/test_overlap.log" | head -60
t0=$(date +%s)
timeout "${BENCH_TIMEOUT:-100}" build-device/bench/bench_overlap --benchmark_filter="${FILTER:-overlap/.*/8192x8192x4096/.*}" \
  --benchmark_out="$out/bench_overlap.json" --benchmark_out_format=json --benchmark_counters_tabular=true \
  >"$out/bench_overlap.log" 2>&1
echo "bench: rc $? in $(( $(date +%s) - t0 )) s"
python3 - "$out/bench_overlap.json" <<'PY' || tail -40 "$out/bench_overlap.log"
import json, sys
d = json.load(open(sys.argv[1]))
for b in d["benchmarks"]:
    n = b["name"].replace("/iterations:5/manual_time", "")
    if b.get("error_occurred"):
        print(f"{n:<70} ERROR {b.get('error_message', '')[:150]}"); continue
    g = lambda k: b.get(k, float("nan"))
    print(f"{n:<70} us={g('us'):8.1f} seq={g('t_seq_us'):8.1f} gemm={g('t_gemm_us'):8.1f} comm={g('t_comm_us'):8.1f} "
          f"speedup={g('speedup'):.3f} eff={g('efficiency'):.2f} slow={g('gemm_slowdown'):.2f} wrong={g('wrong'):.0f}")
PY
echo "total: $(( $(date +%s) - start )) s"
