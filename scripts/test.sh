#!/usr/bin/env bash
# Builds everything and runs the tests. On a machine without a GPU the GPU tests are reported as skipped.
#   1. full build (CUDA when nvcc is present): libraries, `ovl`, tests, benchmarks; ctest
#   2. install into a prefix and build examples/consumer against it through find_package(ovl)
#   3. (OVL_TEST_NO_CUDA=1, default in CI) a build with -DOVL_ENABLE_CUDA=OFF: model/sim/cli and their tests
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

echo "== consumer of the installed package (examples/consumer), without Eigen (only ovl::tools uses it, privately)"
cmake -S examples/consumer -B "$build/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_DISABLE_FIND_PACKAGE_Eigen3=ON >/dev/null
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

echo "== tests"
ctest --test-dir "$build" -j "$jobs" --output-on-failure
