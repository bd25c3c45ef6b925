#!/usr/bin/env bash
# A/B measurements of the GEMM with the noise of one process averaged out: several bench_gemm processes per side,
# in alternating order, repetitions randomly interleaved inside each process. Run on a GPU machine after
# scripts/device-run.sh built build-device, e.g.
#   scripts/device-run.sh --tests none --targets bench_gemm --cmd 'bash scripts/gemm-ab.sh build exp-base FILTER'
# AB_BENCH=bench_overlap runs the overlap benchmark's cases instead (build mode only; the sides are told apart by the
# rows' "ab_side" and compared case by case on the `us` counter: results.py ab FILE base device).
#
#   scripts/gemm-ab.sh build BASE_DIR FILTER   A = the tree in BASE_DIR (built here in build-base), B = this tree.
#       BASE_DIR is made from a base commit by
#         git archive REV CMakeLists.txt cmake base model sim kernels core apps tests bench examples | tar -x -C exp-base
#       (carried to the GPU machine; exp-* is git-ignored). A's rows are renamed <impl>-base. BASE_DIR "-": this
#       tree alone, repeated (the partition bar's statistics), compared with cuBLAS.
#   scripts/gemm-ab.sh env VAR 'V0 V1 ...' FILTER   one build under each value of an environment variable that
#       gemm_run or bench_gemm reads (an experiment's knob); rows are renamed <impl>-e<value>, cuBLAS's keep their
#       name and pool over every process.
# AB_ROUNDS rounds (3), AB_REPS repetitions per process (2). Writes $OUT/ab.json (rows tagged "ab_round", and
# "env_value" for env) and prints scripts/results.py ab's tables.
set -u
usage() { sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
[[ ${1:-} == -h || ${1:-} == --help || $# -lt 3 ]] && { usage; [[ $# -ge 1 && $1 == -* ]]; exit $?; }
out=${OUT:-out}
bench=${AB_BENCH:-bench_gemm}
[[ $bench == bench_gemm || $bench == bench_overlap ]] || { echo "gemm-ab.sh: AB_BENCH=$bench is not bench_gemm or bench_overlap"; exit 2; }
tmp=$(mktemp -d)
run() {  # binary file [env...]
  local bin=$1 file=$2; shift 2
  env "$@" timeout -k 10 300 "$bin" --benchmark_filter="$filter" --benchmark_min_time=0.2s \
    --benchmark_repetitions="${AB_REPS:-2}" --benchmark_enable_random_interleaving=true \
    --benchmark_out="$file" --benchmark_out_format=json >/dev/null 2>&1
}
case $1 in
  build)
    base=$2 filter=$3
    extra=()
    [[ -f .deps/include/nlohmann/json.hpp ]] && extra+=(-DOVL_NLOHMANN_INCLUDE_DIR=$PWD/.deps/include)
    [[ $base == - && $bench == bench_overlap ]] && { echo "gemm-ab.sh: BASE_DIR - compares with cuBLAS: bench_gemm only"; exit 2; }
    if [[ $base == - ]]; then sides=(device) reference=cublas; else
      sides=(base device) reference=ovl-base
      if ! cmake -S "$base" -B build-base -G Ninja -DCMAKE_BUILD_TYPE=Release "${extra[@]}" >"$out/ab-build.log" 2>&1 ||
         ! cmake --build build-base -j "$(nproc)" --target "$bench" >>"$out/ab-build.log" 2>&1; then
        echo "base build failed"; tail -n 30 "$out/ab-build.log"; exit 1
      fi
    fi
    for r in $(seq 1 "${AB_ROUNDS:-3}"); do
      order=("${sides[@]}")
      (( r % 2 == 0 )) && order=($(printf '%s\n' "${sides[@]}" | tac))  # alternate which side runs first
      for side in "${order[@]}"; do run "build-$side/bench/$bench" "$tmp/$side-$r.json"; echo "round $r $side rc $?"; done
    done
    if [[ $bench == bench_overlap ]]; then
      python3 scripts/results.py ab-merge "$tmp" "$out/ab.json" --tag-key ab_side
      python3 scripts/results.py ab "$out/ab.json" base device | tail -n 14
    else
      python3 scripts/results.py ab-merge "$tmp" "$out/ab.json" --suffix base=-base
      python3 scripts/results.py ab "$out/ab.json" "$reference" ovl | tail -n 45
    fi ;;
  env)
    [[ $bench == bench_gemm ]] || { echo "gemm-ab.sh env: bench_gemm only"; exit 2; }
    var=$2 filter=$4
    read -r -a values <<<"$3"
    n=${#values[@]}
    for v in "${values[@]}"; do [[ $v == */* || -z $v ]] && { echo "gemm-ab.sh: value '$v' cannot name a file"; exit 1; }; done
    [[ $(printf '%s\n' "${values[@]}" | sort -u | wc -l) == "$n" ]] || { echo "gemm-ab.sh: a value is repeated"; exit 1; }
    for r in $(seq 1 "${AB_ROUNDS:-3}"); do
      for i in $(seq 0 $((n - 1))); do
        v=${values[$(((i + r) % n))]}
        run build-device/bench/bench_gemm "$tmp/$v-$r.json" "$var=$v"; echo "round $r $var=$v rc $?"
      done
    done
    python3 scripts/results.py ab-merge "$tmp" "$out/ab.json" --suffix '*=-e{tag}' --keep cublas --keep cublas-fp16 \
      --tag-key env_value
    impls=$(python3 -c "
import json, sys
names = {b['name'].split('/')[1] for b in json.load(open(sys.argv[1]))['benchmarks']}
print(' '.join(sorted({n.rsplit('-e', 1)[0] for n in names if '-e' in n})))" "$out/ab.json")
    for impl in $impls; do
      for v in "${values[@]:1}"; do
        echo "== $impl: $var=$v against $var=${values[0]}"
        python3 scripts/results.py ab "$out/ab.json" "$impl-e${values[0]}" "$impl-e$v" | tail -n 6
      done
      for v in "${values[@]}"; do
        echo "== $impl: $var=$v against cuBLAS"
        python3 scripts/results.py ab "$out/ab.json" cublas "$impl-e$v" | tail -n 6
      done
    done ;;
  *) usage >&2; exit 2 ;;
esac
