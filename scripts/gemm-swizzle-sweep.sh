#!/usr/bin/env bash
# Run on the GPU machine after scripts/device-run.sh built build-device (--cmd "bash scripts/gemm-swizzle-sweep.sh").
# Our GEMM with swizzle bands of 4..64 tile rows (OVL_BENCH_GEMM_SWIZZLE) beside cuBLAS, one process per width;
# writes $OUT/swizzle-sweep.json (each row tagged with its width) and prints ovl/cuBLAS per width.
set -u
tmp=$(mktemp -d)
for sw in 4 8 16 32 64; do
  OVL_BENCH_GEMM_SWIZZLE=$sw timeout -k 10 150 build-device/bench/bench_gemm \
    --benchmark_filter='gemm/(ovl|cublas)/(8192x8192x2048|8192x4096x1024|8192x8192x8192|16384x8192x1024)/.*/sms:(124|128|132)/' \
    --benchmark_min_time=0.1s --benchmark_repetitions=2 --benchmark_enable_random_interleaving=true \
    --benchmark_out="$tmp/sw$sw.json" --benchmark_out_format=json >/dev/null 2>&1
  echo "swizzle $sw rc $?"
done
python3 - "$tmp" "${OUT:-out}/swizzle-sweep.json" <<'PY'
import json, sys, glob, os, re, collections, statistics, math
out = []
for f in sorted(glob.glob(sys.argv[1] + "/sw*.json")):
    d = json.load(open(f))
    sw = int(os.path.basename(f)[2:-5])
    for b in d["benchmarks"]:
        b["swizzle_run"] = sw
        out.append(b)
json.dump({"context": d["context"], "benchmarks": out}, open(sys.argv[2], "w"), indent=1)
t = collections.defaultdict(list)
for b in out:
    if b.get("run_type") != "iteration": continue
    m = re.match(r"gemm/([^/]+)/(\d+x\d+x\d+)/(\w+)/sms:(\d+)", b["name"])
    t[(b["swizzle_run"], m.group(2), m.group(3), int(m.group(4)), m.group(1))].append(b["tflops"])
rows = sorted(set(k[1:4] for k in t))
for sw in sorted(set(k[0] for k in t)):
    r = [statistics.mean(t[(sw,) + row + ("ovl",)]) / statistics.mean(t[(sw,) + row + ("cublas",)]) for row in rows]
    print(f"swizzle {sw:3d}: ovl/cublas geomean {math.exp(sum(map(math.log, r)) / len(r)):.3f} min {min(r):.3f}")
for row in rows:
    print(row, " ".join(f"{sw}:{statistics.mean(t[(sw,) + row + ('ovl',)]):.0f}" for sw in sorted(set(k[0] for k in t))),
          "cublas", f"{statistics.mean([x for sw in set(k[0] for k in t) for x in t[(sw,) + row + ('cublas',)]]):.0f}")
PY
