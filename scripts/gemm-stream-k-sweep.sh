#!/usr/bin/env bash
# Run on the GPU machine after scripts/device-run.sh built build-device, e.g. scripts/device-run.sh --tests none
# --cmd "bash scripts/gemm-stream-k-sweep.sh"; writes $OUT/sk-sweep.json and prints a table.
# Forced stream-K plans on a few rows (one process per plan; ovl-nosk and cublas in the same process as references).
set -u
tmp=$(mktemp -d)
run() {  # shape plan
  OVL_BENCH_GEMM_SK=$2 timeout -k 10 120 build-device/bench/bench_gemm \
    --benchmark_filter="gemm/(ovl|ovl-nosk|cublas)/$1/nn/sms:124/" --benchmark_min_time=0.1s \
    --benchmark_repetitions=3 --benchmark_enable_random_interleaving=true \
    --benchmark_out="$tmp/$1-${2//,/_}.json" --benchmark_out_format=json >/dev/null 2>&1
  echo "$1 $2 rc $?"
}
# SK_PLANS="shape:tiles,splits,ctas ..." picks the plans; the default is the sweep of docs/results/gemm-h200-streamk/.
plans=${SK_PLANS:-"$(printf '2048x8192x4096:%s ' 16,4,0 16,2,0 16,8,0 140,2,0 16,0,64 16,0,124 140,0,123)$(printf '4096x8192x8192:%s ' 32,3,0 32,2,0 156,2,0 32,0,124 156,0,124)"}
for sp in $plans; do run "${sp%%:*}" "${sp#*:}"; done
python3 - "$tmp" "$OUT/sk-sweep.json" <<'PY'
import json, sys, glob, os
out = []
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    d = json.load(open(f))
    plan = os.path.basename(f)[:-5]
    for b in d["benchmarks"]:
        b["forced_plan"] = plan
        out.append(b)
json.dump({"context": d["context"], "benchmarks": out}, open(sys.argv[2], "w"), indent=1)
import collections, statistics, re
t = collections.defaultdict(list)
for b in out:
    if b.get("run_type") != "iteration": continue
    impl = b["name"].split("/")[1]
    t[(b["forced_plan"], impl)].append(b["tflops"])
for plan in sorted(set(k[0] for k in t)):
    o, n, c = (statistics.mean(t[(plan, i)]) for i in ("ovl", "ovl-nosk", "cublas"))
    print(f"{plan:32s} ovl {o:6.1f} nosk {n:6.1f} cublas {c:6.1f}  ovl/nosk {o/n:.3f} ovl/cublas {o/c:.3f}")
PY
