#!/usr/bin/env bash
# Builds everything and runs the tests. On a machine without a GPU the GPU tests are reported as skipped.
#   1. full build (CUDA when nvcc is present): libraries, `ovl`, tests, benchmarks; ctest
#   2. install into a prefix and build examples/consumer against it through find_package(ovl)
#   3. (OVL_TEST_NO_CUDA=1, default in CI) a build with -DOVL_ENABLE_CUDA=OFF: model/sim/cli and their tests
#   4. (OVL_TEST_SANITIZE=1, set in CI) that CUDA-off tree again under AddressSanitizer and UndefinedBehaviorSanitizer
#      (-fsanitize=address,undefined -fno-sanitize-recover=all: any report fails its test), and its tests
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=${OVL_JOBS:-$(nproc)}
build=${OVL_BUILD_DIR:-build}
prefix=$PWD/$build/install

echo "== build ($build)"
cmake -S . -B "$build" -G Ninja -DCMAKE_INSTALL_PREFIX="$prefix" >/dev/null
cmake --build "$build" -j "$jobs"
cmake --install "$build" >/dev/null
echo "== ovl info (one line and exit 0 without a GPU or driver)"
"$build/apps/ovl" info

echo "== consumer of the installed package (examples/consumer)"
cmake -S examples/consumer -B "$build/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$build/consumer" -j "$jobs" >/dev/null
"$build/consumer/ovl_consumer"

if [[ "${OVL_TEST_NO_CUDA:-0}" == 1 ]]; then
  echo "== build without CUDA ($build-nocuda)"
  cmake -S . -B "$build-nocuda" -G Ninja -DOVL_ENABLE_CUDA=OFF -DOVL_BUILD_BENCH=OFF >/dev/null
  cmake --build "$build-nocuda" -j "$jobs"
  ctest --test-dir "$build-nocuda" -j "$jobs" --output-on-failure >"$build-nocuda/ctest.log" 2>&1 ||
    { cat "$build-nocuda/ctest.log"; exit 1; }
  grep -E "tests passed|tests failed" "$build-nocuda/ctest.log"
fi

if [[ "${OVL_TEST_SANITIZE:-0}" == 1 ]]; then
  echo "== build without CUDA under ASan + UBSan ($build-asan)"
  start=$SECONDS
  # -O1 -g1: line numbers in the reports at 40% of RelWithDebInfo's compile time (2 cores: ~2 min build and tests).
  cmake -S . -B "$build-asan" -G Ninja -DOVL_ENABLE_CUDA=OFF -DOVL_BUILD_BENCH=OFF -DOVL_INSTALL=OFF \
    -DOVL_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=None "-DCMAKE_CXX_FLAGS=-O1 -g1" >/dev/null
  cmake --build "$build-asan" -j "$jobs"
  # detect_leaks: a leak fails the test too; halt_on_error with -fno-sanitize-recover stops at the first report.
  ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$build-asan" -j "$jobs" --output-on-failure >"$build-asan/ctest.log" 2>&1 ||
    { cat "$build-asan/ctest.log"; exit 1; }
  grep -E "tests passed|tests failed" "$build-asan/ctest.log"
  echo "sanitizer build and tests: $((SECONDS - start)) s"
fi

echo "== tests"
ctest --test-dir "$build" -j "$jobs" --output-on-failure
