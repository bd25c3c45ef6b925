#!/usr/bin/env bash
# Builds the collective targets, runs their tests and the benchmark on the GPU machine; logs and JSON go to $OUT.
#   run.sh build          build test_collectives, test_world, bench_collectives (CMake; a direct nvcc build of only
#                         these files if the full CMake build is broken by an unrelated half-written file)
#   run.sh test           GPU tests (+ the MPI test under mpirun -np 1)
#   run.sh bench FILTER   bench_collectives --benchmark_filter=FILTER -> $OUT/bench_collectives.json
#   run.sh sanitize       compute-sanitizer memcheck, racecheck, synccheck on a small test_collectives filter
#   run.sh final FILTER   sanitize, then bench (the committed run)
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/ovl-out}
mkdir -p "$OUT"
BIN=build-coll-bin

build() {
  local t0=$SECONDS
  if [ -x $BIN/bench_collectives ] && [ "${OVL_REBUILD:-0}" != 1 ]; then echo "build: reusing $BIN"; return 0; fi
  if [ "${OVL_DIRECT:-0}" != 1 ] && cmake -S . -B build -G Ninja -DOVL_NLOHMANN_INCLUDE_DIR=$PWD/.deps/include >"$OUT/cmake.log" 2>&1 &&
     timeout 300 cmake --build build --target test_collectives test_world bench_collectives -j16 >>"$OUT/cmake.log" 2>&1; then
    mkdir -p $BIN && cp build/tests/test_collectives build/tests/test_world build/bench/bench_collectives $BIN/
    echo "build: cmake ok ($((SECONDS - t0)) s)"
    return 0
  fi
  echo "build: building only the collective files directly (OVL_DIRECT=${OVL_DIRECT:-0}; cmake: $((SECONDS - t0)) s)"
  [ -f "$OUT/cmake.log" ] && tail -3 "$OUT/cmake.log"
  local M=build-manual; mkdir -p $M $BIN
  local MPIC MPIL; MPIC=$(mpicxx --showme:compile 2>/dev/null); MPIL=$(mpicxx --showme:link 2>/dev/null)
  local DEFS="-DNDEBUG -DFMT_HEADER_ONLY"; [ -n "$MPIC" ] && DEFS="$DEFS -DOVL_HAVE_MPI=1"
  local INC="-Ibase/include -Ikernels/include -Ikernels/src -Icore/include -Imodel/include -Imodel/src -I.deps/include -Itests/gpu -Ibench -I/usr/local/cuda/include"
  local NV="nvcc -std=c++20 -O3 $DEFS -gencode arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -lineinfo $INC $MPIC"
  local CX="g++ -std=c++20 -O3 -fPIC $DEFS $INC $MPIC"
  for f in kernels/src/collectives_tma.cu kernels/src/wait.cu tests/gpu/test_collectives.cu tests/gpu/test_world.cu bench/bench_collectives.cu; do
    $NV -c $f -o $M/$(basename $f).o >"$M/$(basename $f).log" 2>&1 &
  done
  for f in core/src/collectives.cpp core/src/world.cpp core/src/world_buffer.cpp core/src/world_driver.cpp model/src/problem.cpp; do
    $CX -c $f -o $M/$(basename $f).o >"$M/$(basename $f).log" 2>&1 &
  done
  wait
  cat $M/*.log > "$OUT/manual_build.log"
  local LIB="$M/collectives_tma.cu.o $M/wait.cu.o $M/collectives.cpp.o $M/world.cpp.o $M/world_buffer.cpp.o $M/world_driver.cpp.o $M/problem.cpp.o"
  local L="-L/usr/local/cuda/lib64 -lcudart -lnccl $MPIL -lpthread"
  g++ -o $BIN/test_collectives $M/test_collectives.cu.o $LIB -lgtest -lgtest_main $L &&
  g++ -o $BIN/test_world $M/test_world.cu.o $LIB -lgtest -lgtest_main $L &&
  g++ -o $BIN/bench_collectives $M/bench_collectives.cu.o $LIB -lbenchmark $L || { cat "$OUT/manual_build.log" | tail -30; return 1; }
  echo "build: direct ok ($((SECONDS - t0)) s)"
}

tests() {
  timeout 120 $BIN/test_world >"$OUT/test_world.log" 2>&1; echo "test_world rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[       OK|FAILED  \]" "$OUT/test_world.log" | head -20
  if command -v mpirun >/dev/null; then
    timeout 120 mpirun --allow-run-as-root --oversubscribe -np 1 $BIN/test_world --gtest_filter='*Mpi*' >"$OUT/test_world_mpirun.log" 2>&1
    echo "test_world (mpirun -np 1) rc=$?"; grep -E "OK \]|FAILED|SKIPPED \]" "$OUT/test_world_mpirun.log" | head -5
  fi
  timeout 400 $BIN/test_collectives ${1:+--gtest_filter=$1} >"$OUT/test_collectives.log" 2>&1; echo "test_collectives rc=$?"
  grep -E "^\[       OK|FAILED|SKIPPED \]|PASSED" "$OUT/test_collectives.log" | head -30
  grep -B2 -A3 "Failure" "$OUT/test_collectives.log" | head -40
  return 0
}

bench() {
  timeout ${BENCH_TIMEOUT:-420} $BIN/bench_collectives --benchmark_filter="$1" --benchmark_min_time=0.05s --benchmark_out="$OUT/bench_collectives.json" \
    --benchmark_out_format=json >"$OUT/bench_collectives.log" 2>&1; echo "bench rc=$?"
  python3 docs/results/collectives-h200/table.py "$OUT/bench_collectives.json" | tee "$OUT/table.md"
}

sanitize() {
  local F='CollectivesTest.SanitizerSized:CollectivesTest.MissingPeerTimesOut'
  local CS=compute-sanitizer; command -v $CS >/dev/null || CS=/usr/local/cuda/bin/compute-sanitizer
  for tool in memcheck racecheck synccheck; do
    timeout ${SAN_TIMEOUT:-150} $CS --tool $tool --error-exitcode 9 $BIN/test_collectives --gtest_filter="$F" >"$OUT/sanitize_$tool.log" 2>&1
    echo "compute-sanitizer $tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|FAILED|PASSED" "$OUT/sanitize_$tool.log" | head -4
  done
  return 0
}

case "${1:-all}" in
  build) build ;;
  test) build && tests "${2:-}" ;;
  bench) build && bench "$2" ;;
  sanitize) build && sanitize ;;
  all) build && tests && bench "${2:-copy/}" ;;
  final) build && sanitize && bench "$2" ;;
esac
