#!/usr/bin/env bash
# Run on the GPU machine after scripts/device-run.sh built build-device, e.g.
#   scripts/device-run.sh --tests none --targets bench_gemm --cmd 'bash scripts/gemm-env-sweep.sh NAME VAR FILTER V...'
# bench_gemm once per value V of the environment variable VAR (one process each: the knobs are read once), on the
# cases FILTER matches; a value may carry its own filter as V@FILTER. Writes $OUT/NAME.json (every row tagged with
# "sweep_value") and prints, per value, ovl's TFLOP/s over each other impl (geomean over the rows) and ovl per row.
# SWEEP_REPS repetitions (3), randomly interleaved inside each process.
#   stream-K plans: NAME=sk-sweep VAR=OVL_BENCH_GEMM_SK FILTER='gemm/(ovl|ovl-nosk|cublas)/2048x8192x4096/nn/sms:124/'
#                   values tiles,splits,ctas (e.g. 16,4,0; 32,3,0@gemm/(ovl|ovl-nosk|cublas)/4096x8192x8192/nn/sms:124/)
#   swizzle bands:  NAME=swizzle-sweep VAR=OVL_BENCH_GEMM_SWIZZLE FILTER='gemm/(ovl|cublas)/.../sms:(124|128|132)/'
#                   values 4 8 16 32 64
set -u
[[ $# -ge 4 ]] || { echo "usage: $0 NAME VAR FILTER VALUE[@FILTER]..." >&2; exit 2; }
name=$1 var=$2 filter=$3
shift 3
tmp=$(mktemp -d)
i=0
for item in "$@"; do
  value=${item%%@*}
  f=$filter
  [[ $item == *@* ]] && f=${item#*@}
  env "$var=$value" timeout -k 10 150 build-device/bench/bench_gemm --benchmark_filter="$f" \
    --benchmark_min_time=0.1s --benchmark_repetitions="${SWEEP_REPS:-3}" --benchmark_enable_random_interleaving=true \
    --benchmark_out="$tmp/$i.json" --benchmark_out_format=json >/dev/null 2>&1
  echo "$var=$value rc $?"
  echo "$value" >"$tmp/$i.value"
  i=$((i + 1))
done
python3 - "$tmp" "${OUT:-out}/$name.json" <<'PY'
import collections, glob, json, math, os, re, statistics, sys
out, context = [], {}
for f in sorted(glob.glob(sys.argv[1] + "/*.json"), key=lambda f: int(os.path.basename(f)[:-5])):
    d = json.load(open(f))
    context = d["context"]
    value = open(f[:-5] + ".value").read().strip()
    for b in d["benchmarks"]:
        b["sweep_value"] = value
        out.append(b)
json.dump({"context": context, "benchmarks": out}, open(sys.argv[2], "w"), indent=1)
t = collections.defaultdict(list)
for b in out:
    m = re.match(r"gemm/([^/]+)/(\d+x\d+x\d+/\w+/sms:\d+)", b["name"])
    if b.get("run_type") == "iteration" and m:
        t[(b["sweep_value"], m.group(2), m.group(1))].append(b["tflops"])
values = list(dict.fromkeys(b["sweep_value"] for b in out))
for v in values:
    rows = sorted({k[1] for k in t if k[0] == v})
    impls = sorted({k[2] for k in t if k[0] == v and k[2] != "ovl"})
    mean = lambda row, impl: statistics.mean(t[(v, row, impl)])
    ratios = []
    for impl in impls:
        r = [mean(row, "ovl") / mean(row, impl) for row in rows if t.get((v, row, impl)) and t.get((v, row, "ovl"))]
        if r: ratios.append(f"ovl/{impl} {math.exp(sum(map(math.log, r)) / len(r)):.3f} (min {min(r):.3f})")
    print(f"{v}: " + ", ".join(ratios))
    for row in rows:
        print(f"    {row:36s} " + " ".join(f"{impl} {mean(row, impl):.0f}" for impl in ["ovl"] + impls if t.get((v, row, impl))))
PY
