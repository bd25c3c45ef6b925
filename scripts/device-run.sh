#!/usr/bin/env bash
# One call on the GPU machine does it all: build with the machine's own nvcc and cmake, `ovl info --json`,
# the GPU tests, and the benchmarks named on the command line; JSON and logs go to $OUT (or --out DIR), and a
# short table is printed last.
#
#   scripts/device-run.sh [--out DIR] [--targets 'T1 T2'] [--tests REGEX|none] [--sanitize REGEX] \
#                         [--mpi NP[:FILTER]] [--cmd 'shell command'] [--bench-args 'ARGS'] [BENCH[:FILTER]]...
# FILTER is everything after the first ':' (filters may hold ':', as in 'world:8'); --bench-args go to every
# benchmark (e.g. '--benchmark_min_time=0.05s').
# --targets builds only those targets (and what they need) instead of everything; --sanitize runs
# compute-sanitizer memcheck, racecheck and synccheck on the test executables matching REGEX (OVL_SANITIZE_FILTER
# narrows them to a gtest filter; OVL_SANITIZE_TOOLS picks tools; OVL_SANITIZE_TIMEOUT bounds each run, 240 s).
# Those runs see OVL_UNDER_SANITIZER=1: tests that check kernels overlapping skip that check there (the sanitizer
# serializes kernels).
# racecheck also reports hazards inside cuBLAS's own kernels (nvjet_*) in tests that call cuBLAS: read the kernel
# names in run.log before taking its exit status as ours. API errors are not reported (--report-api-errors no):
# ncclCommInitAll probes kernel images with cudaFuncGetAttributes and handles the cudaErrorNoKernelImageForDevice it
# gets (12 such reports in a memcheck run of three world-1 tests), and every CUDA call of ovl is checked anyway.
# --mpi runs test_world as NP processes of mpirun on this machine's GPUs (they share a GPU when there are fewer),
# gtest FILTER (default *.Mpi*), its whole output in run.log (Open MPI as root: OMPI_ALLOW_RUN_AS_ROOT).
# OVL_BENCH_TIMEOUT bounds each benchmark executable (900 s), so a kernel that hangs cannot take the whole call; and
# no benchmark runs past the call's deadline, OVL_CALL_S (570 s) after the start, less a margin: the GPU machine kills a
# call at 600 s, and a benchmark killed then loses its JSON (Google Benchmark writes it at exit). `call_left` (the
# seconds a step may still take) is there for --cmd steps too.
#   e.g. scripts/device-run.sh --tests 'Gemm' bench_gemm:'gemm/.*/8192x8192x8192/.*'
#
# The machine has no package manager: nlohmann/json travels in .deps/include (carry .deps) when it is missing.
# At most 8 files come back from $OUT, so logs are concatenated into run.log.
# From the end of the build on, nvidia-smi samples the SM clock and the power every 250 ms (when it is there); the
# summary gives each section's median clock and power, since the power limit lowers the clock under heavy kernels and
# an A/B of two kernels should compare their clocks too.
set -uo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; fi
cd "$(dirname "$0")/.."
out=${OUT:-out}
tests=""
targets=""
sanitize=""
mpi=""
cmds=()
bench_args=""
benches=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --tests) tests=$2; shift 2 ;;
    --targets) targets=$2; shift 2 ;;
    --sanitize) sanitize=$2; shift 2 ;;
    --mpi) mpi=$2; shift 2 ;;
    --cmd) cmds+=("$2"); shift 2 ;;
    --bench-args) bench_args=$2; shift 2 ;;
    *) benches+=("$1"); shift ;;
  esac
done
mkdir -p "$out"
log=$out/run.log
: >"$log"
summary=()
note() { echo "$*" | tee -a "$log"; }

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
build=build-device
start=$(date +%s)
deadline=$(( start + ${OVL_CALL_S:-570} ))
call_left() { local s=$(( deadline - $(date +%s) - 20 )); (( s < 10 )) && s=10; echo "$s"; }
note "== configure + build ($(nvcc --version | tail -1), $(cmake --version | head -1))"
extra=()
[[ -f .deps/include/nlohmann/json.hpp ]] && extra+=(-DOVL_NLOHMANN_INCLUDE_DIR=$PWD/.deps/include)
# The Python module where nanobind is installed (its pytest suite: ctest -L python).
if python3 -c 'import nanobind, os, sysconfig; assert os.path.exists(sysconfig.get_paths()["include"] + "/Python.h")' \
    2>/dev/null; then
  extra+=(-DOVL_BUILD_PYTHON=ON -DPython_EXECUTABLE="$(command -v python3)")
else
  note "no nanobind or Python headers: the Python module is not built"
  targets=${targets//_ovl/}
fi
if ! cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release "${extra[@]}" >>"$log" 2>&1 ||
   ! cmake --build $build -j "$(nproc)" ${targets:+--target $targets} >>"$log" 2>&1; then
  note "BUILD FAILED"; tail -n 60 "$log"; exit 1
fi
summary+=("build: ok in $(( $(date +%s) - start )) s")

if [[ -x $build/apps/ovl ]]; then
  $build/apps/ovl info --json >"$out/ovl_info.json" 2>>"$log"
  $build/apps/ovl info | tee -a "$log"
fi

# Sections (their start times, for the clock summary) and the nvidia-smi sampler.
sections=$(mktemp)
smi=$(mktemp)
section() {  # one line per section (a multi-line --cmd is folded), so `results.py smi` can read it back
  local label
  label=$(echo "$*" | tr '\n' ' ' | tr -s ' ')
  echo "$(date +%s.%N) $label" >>"$sections"
  note "== $label"
}
smi_pid=""
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits -lms 250 >"$smi" 2>/dev/null &
  smi_pid=$!
fi

if [[ "$tests" != none ]]; then
  section "GPU tests ${tests:+(-R $tests)}"
  args=(-L gpu --output-on-failure --timeout "${OVL_TEST_TIMEOUT:-120}")
  [[ -n "$tests" ]] && args+=(-R "$tests")
  ctest --test-dir $build "${args[@]}" >"$out/ctest.log" 2>&1
  rc=$?
  cat "$out/ctest.log" >>"$log"
  summary+=("gpu tests: $(grep -E 'tests passed|tests failed' "$out/ctest.log" | tail -1) (rc $rc)")
  grep -E '\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Exception' "$out/ctest.log" | head -20 | sed 's/^/  /' >>"$out/failed.txt"
fi

if [[ -n "$sanitize" ]]; then
  for tool in ${OVL_SANITIZE_TOOLS:-memcheck racecheck synccheck}; do
    for exe in $build/tests/test_*; do
      [[ -x $exe ]] || continue
      name=$(basename "$exe")
      [[ $name =~ $sanitize ]] || continue
      section "compute-sanitizer --tool $tool $name"
      OVL_UNDER_SANITIZER=1 timeout -k 30 "${OVL_SANITIZE_TIMEOUT:-240}" compute-sanitizer --tool $tool \
        --report-api-errors no --error-exitcode 9 "$exe" \
        --gtest_filter="${OVL_SANITIZE_FILTER:-*}" >>"$log" 2>&1
      rc=$?
      summary+=("sanitizer $tool $name: rc $rc$([[ $rc == 124 ]] && echo ' (timed out)')")
    done
  done
fi

if [[ -n "$mpi" ]]; then
  np=${mpi%%:*}
  filter='*.Mpi*'
  [[ $mpi == *:* ]] && filter=${mpi#*:}
  section "mpirun -np $np test_world --gtest_filter=$filter"
  if ! command -v mpirun >/dev/null 2>&1; then
    summary+=("mpi: no mpirun on this machine")
  else
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout -k 10 "${OVL_TEST_TIMEOUT:-300}" \
      mpirun -np "$np" $build/tests/test_world --gtest_filter="$filter" --gtest_color=no >"$out/mpi.log" 2>&1
    rc=$?
    cat "$out/mpi.log" >>"$log"
    summary+=("mpi np $np: rc $rc, $(grep -c '^\[       OK \]' "$out/mpi.log") OK, $(grep -c '^\[  FAILED  \] [A-Z]' "$out/mpi.log") FAILED lines, $(grep -c '^\[  SKIPPED \] [A-Z]' "$out/mpi.log") SKIPPED lines (all ranks)")
    grep -E '^\[  FAILED  \] [A-Z]|Failure' "$out/mpi.log" | head -20 | sed 's/^/  /' >>"$out/failed.txt"
  fi
fi

for c in "${cmds[@]}"; do
  section "$c"
  (eval "$c") >>"$log" 2>&1
  summary+=("cmd rc $?: ${c:0:60}")
done

for spec in "${benches[@]}"; do
  bench=${spec%%:*}
  filter=""
  [[ $spec == *:* ]] && filter=${spec#*:}
  exe=$build/bench/$bench
  [[ -x $exe ]] || { summary+=("$bench: not built"); continue; }
  section "$bench ${filter:+--benchmark_filter=$filter} $bench_args"
  t0=$(date +%s)
  # shellcheck disable=SC2086
  limit=$(call_left)
  (( limit > ${OVL_BENCH_TIMEOUT:-900} )) && limit=${OVL_BENCH_TIMEOUT:-900}
  timeout -k 15 "$limit" $exe ${filter:+--benchmark_filter="$filter"} --benchmark_out="$out/$bench.json" --benchmark_out_format=json \
       --benchmark_counters_tabular=true $bench_args >>"$log" 2>&1
  summary+=("$bench: rc $? in $(( $(date +%s) - t0 )) s, $(grep -c '"name"' "$out/$bench.json" 2>/dev/null) cases")
done

echo "$(date +%s.%N) end" >>"$sections"
if [[ -n $smi_pid ]]; then
  kill "$smi_pid" 2>/dev/null
  wait "$smi_pid" 2>/dev/null
  while IFS= read -r line; do summary+=("$line"); done < <(python3 scripts/results.py smi "$sections" "$smi" | tee -a "$log")
fi
rm -f "$sections" "$smi"

[[ -s "$out/failed.txt" ]] || rm -f "$out/failed.txt"  # one file fewer of the 8 that come back
echo
echo "== summary ($(( $(date +%s) - start )) s)"
printf '%s\n' "${summary[@]}"
[[ -s "$out/failed.txt" ]] && { echo "failures:"; cat "$out/failed.txt"; }
for spec in "${benches[@]}"; do
  bench=${spec%%:*}
  [[ -f "$out/$bench.json" ]] && python3 scripts/results.py table "$out/$bench.json" 2>/dev/null | tail -n 40
done
exit 0
