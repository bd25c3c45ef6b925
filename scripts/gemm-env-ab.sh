#!/usr/bin/env bash
# Run on the GPU machine after scripts/device-run.sh built build-device:
#   bash scripts/gemm-env-ab.sh VAR 'V0 V1 ...' FILTER
# An A/B/... of one build under the values of one environment variable that gemm_run reads (an experiment's knob):
# AB_ROUNDS rounds (3), each one bench_gemm process per value, in an order rotated by the round, AB_REPS repetitions
# (2) randomly interleaved inside each process, on the cases FILTER matches. Our rows are renamed <impl>-e<value>
# (gemm/ovl-e1/...); cuBLAS's rows (cublas, cublas-fp16) keep their name and pool over all processes. Writes
# $OUT/env-ab.json (every row tagged "ab_round" and "env_value") and prints each value's table against the first value
# and against cuBLAS.
set -u
var=${1:?usage: $0 VAR VALUES FILTER}
read -r -a values <<<"${2:?usage: $0 VAR VALUES FILTER}"
filter=${3:?usage: $0 VAR VALUES FILTER}
out=${OUT:-out}
n=${#values[@]}
for v in "${values[@]}"; do
  [[ $v == */* || -z $v ]] && { echo "gemm-env-ab.sh: value '$v' cannot name a file"; exit 1; }
done
if [[ $(printf '%s\n' "${values[@]}" | sort -u | wc -l) != "$n" ]]; then
  echo "gemm-env-ab.sh: a value is repeated"; exit 1
fi
tmp=$(mktemp -d)
for r in $(seq 1 "${AB_ROUNDS:-3}"); do
  for i in $(seq 0 $((n - 1))); do
    v=${values[$(((i + r) % n))]}
    env "$var=$v" timeout -k 10 300 build-device/bench/bench_gemm --benchmark_filter="$filter" \
      --benchmark_min_time=0.2s --benchmark_repetitions="${AB_REPS:-2}" --benchmark_enable_random_interleaving=true \
      --benchmark_out="$tmp/$v-$r.json" --benchmark_out_format=json >/dev/null 2>&1
    echo "round $r $var=$v rc $?"
  done
done
python3 scripts/gemm_ab_merge.py "$tmp" "$out/env-ab.json" --suffix '*=-e{tag}' --keep cublas --keep cublas-fp16 \
  --tag-key env_value
impls=$(python3 -c "
import json, sys
names = {b['name'].split('/')[1] for b in json.load(open(sys.argv[1]))['benchmarks']}
print(' '.join(sorted({n.rsplit('-e', 1)[0] for n in names if '-e' in n})))" "$out/env-ab.json")
for impl in $impls; do
  for v in "${values[@]:1}"; do
    echo "== $impl: $var=$v against $var=${values[0]}"
    python3 scripts/gemm_ab_table.py "$out/env-ab.json" "$impl-e${values[0]}" "$impl-e$v" | tail -n 6
  done
  for v in "${values[@]}"; do
    echo "== $impl: $var=$v against cuBLAS"
    python3 scripts/gemm_ab_table.py "$out/env-ab.json" cublas "$impl-e$v" | tail -n 6
  done
done
