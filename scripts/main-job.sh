#!/usr/bin/env bash
# The main job: build the `ovl` command and ask the planner how to run GEMM+AllReduce 8192x8192x8192 in bf16
# on 8 H200s (built-in profile: no GPU needed). On a machine with a GPU it first prints `ovl info`.
# Extra arguments replace the default problem, e.g. scripts/main-job.sh --op gemm-reducescatter --m 4096 ...
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; fi
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build=${OVL_BUILD_DIR:-build-main}
cuda=OFF
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && command -v nvcc >/dev/null; then cuda=ON; fi
cmake -S . -B "$build" -G Ninja -DOVL_ENABLE_CUDA=$cuda -DOVL_BUILD_TESTS=OFF -DOVL_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" --target ovl >/dev/null
[[ $cuda == ON ]] && "$build/apps/ovl" info
if [[ $# -eq 0 ]]; then
  set -- --op gemm-allreduce --m 8192 --n 8192 --k 8192 --world 8 --gpu h200 --dtype bf16
fi
exec "$build/apps/ovl" plan "$@"
