// The loopback collective: every rank of a world emulated on one GPU (rank p's input and output are buffers on
// this device), group by group, with two movers: a SIMT one (loopback.cu; it stands in for NCCL in the NCCL modes
// in loopback) and a TMA one (loopback_tma.cu; cp.async.bulk / cp.reduce.async.bulk through a shared-memory ring,
// the tma mode's). Also the random fill of the emulated ranks' inputs.
//
// It is group-major: the played share of group g is moved as soon as group g is ready (CollectiveKernel plays the
// ranks in the outer loop, so in loopback only rank 0's share would overlap with the GEMM).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ovl/kernels/collectives.hpp"
#include "ovl/kernels/device_error.hpp"
#include "ovl/types.hpp"

namespace ovl::kernels {

inline constexpr int kMaxLoopbackRanks = 8;

// Uniform values in [-scale, scale) from a counter-based hash of (seed, index), rounded to `dtype`.
void launch_fill_random(void* data, std::int64_t elements, DType dtype, std::uint64_t seed, float scale,
                        cudaStream_t stream);
// One contiguous piece, in elements of LoopbackArguments::dtype: list (group g, owner r) is ranges[g * world + r].
struct LoopbackRange {
  std::int64_t src_offset;
  std::int64_t dst_offset;
  std::int64_t count;  // whole 16-byte vectors (8 bf16 / fp16 elements, 16 FP8)
};

// The collective on one GPU, group by group; src_p / dst_p are rank p's input / output. kWholeWorld (every rank):
//   kReduceScatter  dst_r[range(g, r).dst] = sum over p of src_p[range(g, r).src]         (fp32, p = 0..W-1)
//   kAllReduce      the same sum, stored to every dst_p                                   (one-shot, all ranks)
//   kAllGather      dst_p[range(g, r).dst] = src_r[range(g, r).src] for every p
// kRank0 (rank 0's share, pull style; only dst_0 is written):
//   kReduceScatter  owner 0 only: dst_0[range(g, 0).dst] = sum over p of src_p[range(g, 0).src]
//   kAllReduce      r = 0: dst_0[range(g, 0).dst] = the sum; r > 0: dst_0[range(g, r).dst] = dst_r[range(g, r).src]
//                   (peer r's reduced piece: dst_r must hold the reduced result, precomputed by the caller)
//   kAllGather      dst_0[range(g, r).dst] = src_r[range(g, r).src] for every r (r = 0: a local copy)
// With `expected` set, group g waits until counters[g] >= expected[g] (the GEMM's release adds) first; every group
// is waited for, also one without work for the played share (its per-CTA stamps are then start = end).
struct LoopbackArguments {
  Collective op = Collective::kAllReduce;
  DType dtype = DType::kBF16;  // bf16 or fp16; FP8 (e4m3, e5m2) for AllGather only: moved as bytes, never summed
  LoopbackShare play = LoopbackShare::kWholeWorld;
  // Which kernel moves the data (CommAlgo, the movers of the real-world collectives too): kSimt (16-byte
  // ld/st, 512 threads per CTA), kTmaPull (bulk loads of the W sources into a shared ring, fp32 sum in rank order
  // by `pull_warps` warps, bulk store: deterministic), kTmaPush (a producer and a consumer thread per CTA: the
  // destinations zeroed first, then one cp.reduce.async.bulk .add per source: bf16/f16 adds in arrival order, not
  // deterministic). Copies are a bulk load + bulk store in both TMA movers (loopback_tma.cu).
  CommAlgo mover = CommAlgo::kSimt;
  int world = 1;
  const void* src[kMaxLoopbackRanks] = {};
  void* dst[kMaxLoopbackRanks] = {};
  const LoopbackRange* ranges = nullptr;   // device, num_groups * world entries
  int first_group = 0, num_groups = 1;     // groups [first_group, first_group + num_groups) of the table
  const unsigned int* counters = nullptr;  // device, indexed by group; null: no gate
  const unsigned int* expected = nullptr;  // device, indexed by group
  int ctas = 16;
  int threads = 512;   // SIMT mover only
  int pull_warps = 4;  // tma-pull's summing warps (the TMA movers' ring: OVL_TMA_RING, else kDefaultTmaRing)
  std::uint64_t timeout_ns = 10'000'000'000ull;
  DeviceError* error = nullptr;          // required (WaitKind::kGroupCounter on a timeout)
  unsigned long long* stamps = nullptr;  // optional: [group][cta][start, end]
  // Pacing (a paced loopback, kRank0 only; docs/overlap.md, "Paced loopback"). Each CTA counts its link bytes (the
  // bytes a real rank 0 would move over NVLink: reads of the peers' sources, copies of the peers' pieces, the peers'
  // adds into rank 0's output in tma-push; not rank 0's own reads and writes) and, after moving b of them since
  // the group's start t0, spins on %globaltimer until t0 + b x pace_ns_per_byte. t0 = max(now after the group's
  // gate, the CTA's previous group's end); after its last group (its paced end, or its last byte where the mover's
  // own rate binds) the CTA spins pace_latency_ns more (the call's link steps: a real sender streams its groups,
  // and the last one arrives a latency after it is sent). 0: unpaced (checked once per chunk of work, so the unpaced
  // kernels are unchanged).
  double pace_ns_per_byte = 0;
  std::uint32_t pace_latency_ns = 0;
  // AllGather into a GEMM that waits per group (mode tma's AllGather+GEMM; TMA movers only): device, indexed by group.
  // Each CTA adds 1 (release, system scope) to released[g] once its writes of group g are performed, so released[g]
  // reaches `ctas` when group g's rows are in place; a CTA with no unit of group g adds its 1 when it passes the group.
  // Paced, a group's add comes pace_latency_ns after its writes (its rows arrive a link latency after they are sent,
  // while the CTA moves the next group). Not reset here: the caller zeroes the counters before the launch.
  unsigned int* released = nullptr;
};
// Checks the arguments (world, CTAs, pointers present and 16-byte aligned for what the play touches) and launches
// the mover `args.mover` names.
void launch_loopback_collective(const LoopbackArguments& args, cudaStream_t stream);
// Loads the SIMT and TMA movers (ovl::preload_kernels says why).
void preload_loopback_kernels();

}  // namespace ovl::kernels
