#!/usr/bin/env bash
# Experiment (not part of the tree's build): the 2-CTA multicast patch of docs/results/gemm-h200-cluster2/ on its base
# fb26f69, with the consumers' remote arrivals at the default release.cta semantics and the producer's wait at
# acquire.cta (as CUTLASS's ClusterBarrier does) instead of release.cluster / acquire.cluster. GEMM cluster tests,
# then ovl vs ovl-cluster2 vs cuBLAS on the K <= 2048 rows at 124 and 128 SMs, then one ncu launch of each of ours.
set -u
cd "$(dirname "$0")"
out=${OUT:-out}
mkdir -p "$out"
cmake -S . -B build-c2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DOVL_NLOHMANN_INCLUDE_DIR="$PWD/../.deps/include" \
  >"$out/c2-build.log" 2>&1
if ! cmake --build build-c2 --target bench_gemm test_gemm -j "$(nproc)" >>"$out/c2-build.log" 2>&1; then
  tail -30 "$out/c2-build.log"; exit 1
fi
echo "build ok"
timeout -k 5 120 build-c2/tests/test_gemm --gtest_filter='GemmTest.Cluster2*:GemmTest.SmallShapes*' >"$out/c2-tests.log" 2>&1
echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED) |^\[       OK|FAILED  \]" "$out/c2-tests.log" | tail -12
timeout -k 5 200 build-c2/bench/bench_gemm \
  --benchmark_filter='gemm/(ovl|ovl-cluster2|cublas)/(8192x8192x2048|8192x4096x1024)/.*/sms:(124|128)/' \
  --benchmark_min_time=0.1s --benchmark_repetitions=2 --benchmark_enable_random_interleaving=true \
  --benchmark_out="$out/c2-bench.json" --benchmark_out_format=json >"$out/c2-bench.log" 2>&1
echo "bench rc $?"
python3 - "$out/c2-bench.json" <<'PY'
import collections, json, re, statistics, sys
runs = collections.defaultdict(list)
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    if b.get("run_type") != "iteration":
        continue
    m = re.match(r"gemm/([^/]+)/(\d+x\d+x\d+)/(\w+)/sms:(\d+)", b["name"])
    runs[(m.group(2), m.group(3), int(m.group(4)), m.group(1))].append(b["tflops"])
for row in sorted({k[:3] for k in runs}):
    v = {i: statistics.mean(runs[row + (i,)]) for i in ("ovl", "ovl-cluster2", "cublas") if runs[row + (i,)]}
    print(row, {k: round(x, 1) for k, x in v.items()},
          "c2/ovl %.3f c2/cublas %.3f" % (v["ovl-cluster2"] / v["ovl"], v["ovl-cluster2"] / v["cublas"]))
PY
# One profiled launch each (ncu, clocks not locked) of 8192x8192x2048 nn at 124 SMs, to compare with ncu-124.txt here
# (the release.cluster build): duration, SM throughput, warp cycles per issued instruction. C2_NCU=0 skips it.
if [[ "${C2_NCU:-1}" == 1 ]] && command -v ncu >/dev/null; then
  for impl in ovl ovl-cluster2; do
    echo "== $impl 8192x8192x2048/nn/sms:124" >>"$out/c2-ncu.txt"
    OVL_BENCH_GEMM_REPS=1 timeout -k 5 120 ncu --clock-control none -k regex:gemm_sm90 --launch-skip 1 \
      --launch-count 1 --section SpeedOfLight --section WarpStateStats --section LaunchStats \
      build-c2/bench/bench_gemm --benchmark_filter="gemm/$impl/8192x8192x2048/nn/sms:124/" \
      --benchmark_min_time=1x >>"$out/c2-ncu.txt" 2>&1
  done
  grep -E "^== |Duration|SM Frequency|Compute \(SM\) Throughput|Warp Cycles Per Issued|Cluster Size" "$out/c2-ncu.txt"
fi
