#!/usr/bin/env bash
# The multi-GPU runs on a machine of 2-8 GPUs (results/h200x2/), through scripts/device-run.sh: build, the
# GPU tests that use every visible GPU (threads Worlds: collectives, overlap modes, the tma mode back to back), then
# the benchmarks named, each on a real World of every visible GPU in one process (OVL_BENCH_WORLD=threads):
#
#   scripts/device-multigpu.sh [collectives] [overlap | overlap-nccl | overlap-ag | overlap-swizzle |
#                               overlap-symmetric] [paced] [cluster4] [autoplan] [python] [mpi]
#
#   collectives   bench_collectives: NCCL (its own CTA choice and 1-32 CTAs) and NCCL's symmetric kernels (1-32 CTAs;
#                 AllGather also on the copy engines, CTA policy zero) versus tma-push, tma-pull and simt on 1-32 CTAs,
#                 AllReduce / ReduceScatter / AllGather, 1 MiB to 1 GiB, and NCCL's Reduce / Broadcast to root 0 at
#                 its CTA bounds (the calls of units moved owner by owner) -> bench_collectives.json
#   overlap       bench_overlap, GEMM+AR and GEMM+RS: every mode, comm_sms 8-32, default groups and 2 / 4 / 8 groups
#                 in row-band order (the set of results/h200x2/bench_overlap.json) -> bench_overlap.json; when the
#                 real-world tma tests (RealWorldTmaBackToBackCalls, RealWorldEveryModeEqualsSequential) did not pass,
#                 the tma cases are left out (a broken tma path would spend each case's collective timeouts) and the
#                 log says so
#   overlap-nccl  the same without the tma mode
#   overlap-ag    bench_overlap, AG+GEMM: every mode (tma: its streaming gather, tma-push, left out as above when the
#                 real-world tma tests did not pass)
#   overlap-swizzle  bench_overlap, GEMM+AR and GEMM+RS, the signaling modes at comm_sms 16 and 32 with 2 / 4 / 8
#                 groups in row-band and in swizzle order (pairs for scripts/results.py overlap --orders)
#   overlap-symmetric  bench_overlap, comm_algo nccl-symmetric: sequential (every op; AG+GEMM also CTA policy zero),
#                 decomposed, tile-signal and green-context GEMM+AR (the /algo:nccl-symmetric cases), each against
#                 cuBLAS + NCCL
#                 Each overlap set is one bench_overlap run; name one per call. Every step ends by the call's deadline
#                 (device-run.sh: OVL_CALL_S, 570 s after the start), so a set cut short loses its own JSON only.
#   paced         after an overlap set in the same call: the same cases in paced loopback of the machine's world on
#                 its GPU 0 (OVL_BENCH_LOOPBACK_WORLD = the GPU count, link profile h200x2 on 2 GPUs, else
#                 nvlink4-node8) -> bench_overlap-paced.json, and the emulation against the real world case by case
#                 (scripts/results.py overlap bench_overlap-paced.json --compare bench_overlap.json)
#   cluster4      NCCL's thread-block clusters against ovl's setting: ovl makes its communicators with cgaClusterSize
#                 1 (core/src/world_internal.hpp; NCCL's default on Hopper is 4, whose clusters wait for SMs a GEMM
#                 holds). NCCL's AllReduce / ReduceScatter alone (16 and 256 MiB, its own CTAs and 8-32) with 1 and
#                 with NCCL_CGA_CLUSTER_SIZE=4 -> bench_collectives-cluster1.json, -cluster4.json; then bench_overlap's
#                 NCCL modes at comm_sms 8 and 16 (default and 4 groups) and sequential, GEMM+AR and GEMM+RS on the
#                 shapes of the overlap sets, with NCCL_CGA_CLUSTER_SIZE=4 -> bench_overlap-cluster4.json and with
#                 1 -> bench_overlap-cluster1.json, compared case by case (scripts/results.py overlap --compare)
#   autoplan      bench_autoplan on the real World: the 14 held-out problems, the automatic plan (predicted and
#                 measured tuning) against sequential and the best measured candidate, every timing the slowest
#                 rank's -> bench_autoplan.json
#   python        the Python suite (ctest -L python: ovl.distributed on 2 real ranks, test_distributed.py), then
#                 examples/python/tp_mlp.py under torchrun on every visible GPU, eager and CUDA Graph replay
#   mpi           bench_collectives with a process per GPU (mpirun -np <GPUs>, OVL_BENCH_WORLD=mpi), 16 MiB-1 GiB,
#                 -> bench_collectives-mpi.json; and test_world's MPI tests under the same mpirun
# NVLink multicast stays off (device-run.sh exports NCCL_NVLS_ENABLE=0 and the others). JSON and logs go to $OUT.
# Carry .deps (nlohmann/json for the machine's build) in every call. A step's rc in the summary is its benchmark's or
# test's own (a timeout is 124).
set -uo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0; fi
cd "$(dirname "$0")/.."
export OVL_BENCH_WORLD=threads
benches=()
cmds=()
targets='ovl bench_collectives bench_overlap test_collectives test_world test_overlap'
for what in "$@"; do
  case "$what" in
    collectives) benches+=("bench_collectives") ;;
    overlap | overlap-nccl | overlap-ag | overlap-swizzle | overlap-symmetric)
      # bench_overlap's first eight shapes (those of results/h200x2/bench_overlap.json), so that a set stays within its
      # timeout; OVL_MULTIGPU_SHAPES (a regular expression of MxNxK) picks others.
      shape=${OVL_MULTIGPU_SHAPES:-'(8192x8192x(1024|2048|4096|8192)|4096x8192x(4096|8192)|16384x8192x2048|8192x4096x8192)'}
      tail="/$shape/[^/]+/comm_sms:[0-9]+(/groups:[0-9]+)?/iterations"
      all="overlap/[^/]+/gemm-(allreduce|reducescatter)$tail"
      nccl_modes="overlap/(sequential|decomposed|tile-signal|green-context)/gemm-(allreduce|reducescatter)$tail"
      swz="/gemm-(allreduce|reducescatter)/$shape/[^/]+/comm_sms:(16|32)/groups:[0-9]+(/order:swizzle)?/iterations"
      case "$what" in
        overlap) f=$all; without_tma=$nccl_modes ;;
        overlap-nccl) f=$nccl_modes; without_tma=$nccl_modes ;;
        overlap-ag)
          f="overlap/[^/]+/allgather-gemm$tail"
          without_tma="overlap/(sequential|decomposed|tile-signal|green-context)/allgather-gemm$tail" ;;
        overlap-swizzle)
          f="overlap/(tile-signal|green-context|tma)$swz"
          without_tma="overlap/(tile-signal|green-context)$swz" ;;
        overlap-symmetric) f="/$shape/[^/]+/comm_sms:[0-9]+/algo:nccl-symmetric(/cta_policy:[a-z]+)?/iterations"
          without_tma=$f ;;
      esac
      cmds+=(--cmd "f='$f';
        if [[ '$f' != '$without_tma' ]] && ! { grep -qE 'RealWorldTmaBackToBackCalls .*Passed' \"\$OUT/ctest.log\" &&
            grep -qE 'RealWorldEveryModeEqualsSequential .*Passed' \"\$OUT/ctest.log\"; }; then
          echo 'the real-world tma tests did not pass: tma cases left out'; f='$without_tma'; fi;
        echo \"\$f\" > /tmp/ovl_overlap_filter;
        timeout -k 15 \$(call_left) build-device/bench/bench_overlap --benchmark_filter=\"\$f\" \
          --benchmark_out=\"\$OUT/bench_overlap.json\" --benchmark_out_format=json --benchmark_counters_tabular=true;
        rc=\$?; python3 scripts/results.py overlap \"\$OUT/bench_overlap.json\"; exit \$rc") ;;
    paced)
      # The loopback emulation of this world on one GPU, on the cases of the overlap set before it (the paced loopback
      # refuses nccl-symmetric and ce by name).
      [[ -n ${f:-} ]] || { echo "paced: name an overlap set before it (its cases are the ones emulated)" >&2; exit 2; }
      # The filter the overlap step ran (without tma when its tests failed), else the one it was given.
      cmds+=(--cmd "np=\$(nvidia-smi -L 2>/dev/null | grep -c '^GPU '); [[ \$np -ge 2 ]] || { echo \"paced: \$np GPUs\"; exit 1; }
        prof=nvlink4-node8; [[ \$np == 2 ]] && prof=h200x2; pf=\$(cat /tmp/ovl_overlap_filter 2>/dev/null || echo '$f');
        CUDA_VISIBLE_DEVICES=0 OVL_BENCH_LOOPBACK_WORLD=\$np OVL_LINK_PROFILE=\$prof env -u OVL_BENCH_WORLD \
          timeout -k 15 \$(call_left) build-device/bench/bench_overlap --benchmark_filter=\"\$pf\" \
          --benchmark_out=\"\$OUT/bench_overlap-paced.json\" --benchmark_out_format=json > /dev/null; rc=\$?;
        python3 scripts/results.py overlap \"\$OUT/bench_overlap-paced.json\" --compare \"\$OUT/bench_overlap.json\" |
          tail -12; exit \$rc") ;;
    cluster4)
      shape=${OVL_MULTIGPU_SHAPES:-'(8192x8192x(1024|2048|4096|8192)|4096x8192x(4096|8192)|16384x8192x2048|8192x4096x8192)'}
      cf="overlap/(sequential|decomposed|tile-signal|green-context)/gemm-(allreduce|reducescatter)/$shape/[^/]+/comm_sms:(8|16|132)(/groups:4)?/iterations"
      ccf='^coll/nccl/(allreduce|reducescatter)/(16777216|268435456)/world:[0-9]+/ctas:(0|8|16|32)/'
      cmds+=(--cmd "rc=0; for c in 1 4; do
          NCCL_CGA_CLUSTER_SIZE=\$c timeout -k 15 \$(call_left) build-device/bench/bench_collectives \
            --benchmark_filter='$ccf' --benchmark_out=\"\$OUT/bench_collectives-cluster\$c.json\" \
            --benchmark_out_format=json > /dev/null || rc=\$?; done;
        for c in 4 1; do
          NCCL_CGA_CLUSTER_SIZE=\$c timeout -k 15 \$(call_left) build-device/bench/bench_overlap \
            --benchmark_filter='$cf' --benchmark_out=\"\$OUT/bench_overlap-cluster\$c.json\" \
            --benchmark_out_format=json > /dev/null || rc=\$?; done;
        for c in 1 4; do python3 scripts/results.py coll \"\$OUT/bench_collectives-cluster\$c.json\" | tail -8; done;
        python3 scripts/results.py overlap \"\$OUT/bench_overlap-cluster1.json\" \
          --compare \"\$OUT/bench_overlap-cluster4.json\" | tail -12; exit \$rc") ;;
    autoplan)
      targets+=" bench_autoplan"
      # Its candidates include tma plans, which it cannot leave out: it runs only when the real-world tma tests passed.
      cmds+=(--cmd "if grep -qE 'RealWorldTmaBackToBackCalls .*Passed' \"\$OUT/ctest.log\" &&
            grep -qE 'RealWorldEveryModeEqualsSequential .*Passed' \"\$OUT/ctest.log\"; then
          timeout -k 15 \$(call_left) build-device/bench/bench_autoplan --out \"\$OUT/bench_autoplan.json\"; rc=\$?;
          python3 scripts/results.py autoplan \"\$OUT/bench_autoplan.json\"; exit \$rc;
        else echo 'the real-world tma tests did not pass: bench_autoplan not run'; exit 1; fi") ;;
    python)
      targets+=" _ovl"
      cmds+=(--cmd "ctest --test-dir build-device -L python --output-on-failure --timeout 240; rc=\$?;
        np=\$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ');
        PYTHONPATH=build-device/python timeout -k 10 \$(call_left) python3 -m torch.distributed.run \
          --nproc_per_node=\$np examples/python/tp_mlp.py --graph || rc=\$?; exit \$rc") ;;
    mpi)
      cmds+=(--cmd "command -v mpirun >/dev/null || { echo 'no mpirun on this machine'; exit 1; }
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; np=\$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ');
        timeout -k 10 120 mpirun -np \$np build-device/tests/test_world --gtest_filter='*.Mpi*'; rc=\$?;
        OVL_BENCH_WORLD=mpi timeout -k 15 \$(call_left) mpirun -np \$np build-device/bench/bench_collectives \
          --benchmark_filter='^coll/[^/]+/[^/]+/(16777216|67108864|268435456|1073741824)/' \
          --benchmark_out=\"\$OUT/bench_collectives-mpi.json\" --benchmark_out_format=json || rc=\$?;
        python3 scripts/results.py coll \"\$OUT/bench_collectives-mpi.json\"; exit \$rc") ;;
    *) echo "unknown run '$what' (collectives, overlap, overlap-nccl, overlap-ag, overlap-swizzle, overlap-symmetric, paced, cluster4, autoplan, python, mpi)" >&2
       exit 2 ;;
  esac
done
export OUT=${OUT:-out}
# OVL_DEVICE_RUN: another runner of the same arguments (the tests give one that checks every --cmd parses as bash).
exec "${OVL_DEVICE_RUN:-scripts/device-run.sh}" --targets "$targets" \
  --tests 'ThreadsWorld|RealWorld' --bench-args '--benchmark_min_time=0.02s' \
  --cmd 'nvidia-smi topo -m; nvidia-smi -L' "${cmds[@]}" "${benches[@]}"
