#!/usr/bin/env bash
# Builds everything and runs the tests. On a machine without a GPU the GPU tests are reported as skipped.
#   1. full build (CUDA when nvcc is present): libraries, `ovl`, tests, benchmarks; ctest
#   2. install into a prefix and build examples/consumer against it through find_package(ovl)
#   3. (OVL_TEST_NO_CUDA=1, default in CI) a build with -DOVL_ENABLE_CUDA=OFF: model/sim/cli and their tests
#   4. (OVL_TEST_SANITIZE=1, set in CI) that CUDA-off tree again under AddressSanitizer and UndefinedBehaviorSanitizer
#      (-fsanitize=address,undefined -fno-sanitize-recover=all: any report fails its test), and its tests
# The Python module (python/) is built in the first build tree (-DOVL_BUILD_PYTHON=ON; with the Context where CUDA
# is on) and its pytest suite runs from ctest (label python): the CPU tests everywhere, the GPU tests where there is
# a Hopper GPU and torch or CuPy. OVL_TEST_WHEEL=1 also builds the pip package (`pip wheel .`, scikit-build-core) as
# a CPU-only wheel and runs the CPU tests on it: another compile of model/ and sim/ (about 4 minutes on 2 cores),
# so CI leaves it off.
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; fi
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=${OVL_JOBS:-$(nproc)}
build=${OVL_BUILD_DIR:-build}
prefix=$PWD/$build/install
python=${PYTHON:-python3}

# The module's build and test dependencies, from PyPI when missing (none when there is no Python at all).
python_flags=(-DOVL_BUILD_PYTHON=OFF)
if ! command -v "$python" >/dev/null; then
  echo "== no $python: the Python module is not built"
elif "$python" -c "import nanobind, pytest, scikit_build_core" 2>/dev/null ||
     "$python" -m pip install --quiet nanobind scikit-build-core pytest; then
  python_flags=(-DOVL_BUILD_PYTHON=ON -DPython_EXECUTABLE="$(command -v "$python")")
else
  echo "== pip could not install nanobind, scikit-build-core and pytest: the Python module is not built"
fi

echo "== build ($build)"
cmake -S . -B "$build" -G Ninja -DCMAKE_INSTALL_PREFIX="$prefix" "${python_flags[@]}" >/dev/null
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

if [[ "${OVL_TEST_WHEEL:-0}" == 1 && "${python_flags[0]}" == -DOVL_BUILD_PYTHON=ON ]]; then
  echo "== pip wheel (CPU-only) and its CPU tests"
  rm -rf "$build/wheel" && mkdir -p "$build/wheel/site"
  launcher=()
  if command -v ccache >/dev/null; then launcher=(-C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  "$python" -m pip wheel --quiet --no-build-isolation --no-deps -w "$build/wheel" \
    -C cmake.define.OVL_ENABLE_CUDA=OFF -C build-dir="$build/wheel/build" "${launcher[@]}" . >"$build/wheel/log" 2>&1 ||
    { cat "$build/wheel/log"; exit 1; }
  "$python" -m zipfile -e "$build"/wheel/ovl-*.whl "$build/wheel/site"
  PYTHONPATH="$PWD/$build/wheel/site" "$python" -m pytest -q -p no:cacheprovider python/tests/test_cpu.py
fi

echo "== tests"
ctest --test-dir "$build" -j "$jobs" --output-on-failure
