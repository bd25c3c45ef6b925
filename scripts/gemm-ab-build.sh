#!/usr/bin/env bash
# A/B of two builds of the GEMM, on the GPU machine after scripts/device-run.sh built build-device (B, this tree):
#   scripts/device-run.sh --tests none --targets bench_gemm --cmd 'bash scripts/gemm-ab-build.sh exp-base FILTER'
# with carry ["exp-base"] (git-ignored: exp-*), made here from the base commit by
#   rm -rf exp-base && mkdir exp-base && git archive REV CMakeLists.txt cmake base model sim kernels core apps tests \
#     bench examples | tar -x -C exp-base
# Builds A's bench_gemm in build-base, then runs the two binaries in turn, AB_ROUNDS times (3), one process each,
# on the cases FILTER matches, AB_REPS repetitions (2) randomly interleaved inside each process. A's rows are renamed
# <impl>-base (gemm/ovl-base/...), so `python3 scripts/gemm_ab_table.py $OUT/ab.json ovl-base ovl` compares them.
# Writes $OUT/ab.json (every row tagged "ab_round") and prints the table.
# BASE_DIR "-": no A build; this tree's bench_gemm alone runs AB_ROUNDS processes (repeated measurements of one
# build, as for the partition bar), and the table compares ovl with cublas.
set -u
base=${1:?usage: $0 BASE_DIR FILTER}
filter=${2:?usage: $0 BASE_DIR FILTER}
out=${OUT:-out}
extra=()
[[ -f .deps/include/nlohmann/json.hpp ]] && extra+=(-DOVL_NLOHMANN_INCLUDE_DIR=$PWD/.deps/include)
if [[ $base == - ]]; then
  sides=(device)
  reference=cublas
else
  sides=(base device)
  reference=ovl-base
  if ! cmake -S "$base" -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release "${extra[@]}" >"$out/ab-build.log" 2>&1 ||
     ! cmake --build build-base -j "$(nproc)" --target bench_gemm >>"$out/ab-build.log" 2>&1; then
    echo "base build failed"; tail -n 30 "$out/ab-build.log"; exit 1
  fi
fi
tmp=$(mktemp -d)
for r in $(seq 1 "${AB_ROUNDS:-3}"); do
  order=("${sides[@]}")
  (( r % 2 == 0 )) && order=($(printf '%s\n' "${sides[@]}" | tac))  # alternate which side runs first in a round
  for side in "${order[@]}"; do
    timeout -k 10 300 build-$side/bench/bench_gemm --benchmark_filter="$filter" --benchmark_min_time=0.2s \
      --benchmark_repetitions="${AB_REPS:-2}" --benchmark_enable_random_interleaving=true \
      --benchmark_out="$tmp/$side-$r.json" --benchmark_out_format=json >/dev/null 2>&1
    echo "round $r $side rc $?"
  done
done
python3 scripts/gemm_ab_merge.py "$tmp" "$out/ab.json" --suffix base=-base
python3 scripts/gemm_ab_table.py "$out/ab.json" "$reference" ovl | tail -n 45
