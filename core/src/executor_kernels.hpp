// Small kernels the executors need that are not part of kernels/ (core-private): random fill for loopback peers,
// counter reset, the device-side counter wait, %globaltimer stamps, and the loopback collective.
//
// The loopback collective exists here rather than in kernels/collectives because the executors need it
// group-major: every played rank's share of group g is moved as soon as group g is ready (kernels::CollectiveKernel
// plays the ranks in the outer loop, so in loopback only rank 0's share would overlap with the GEMM).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ovl/model/problem.hpp"

namespace ovl::detail {

inline constexpr int kMaxLoopbackRanks = 8;

// Written by the first device-side wait that times out; lives in device memory, read by Context::synchronize().
struct WaitError {
  std::uint32_t code;      // 0: none; 1: timeout
  std::uint32_t where;     // 1: counter wait kernel (tile-signal), 2: persistent collective (tma)
  std::uint32_t group;     // tile group waited for
  std::uint32_t observed;  // counter value seen last
  std::uint32_t expected;  // value waited for
  std::uint32_t cta;       // CTA that timed out
};

void launch_fill_random(void* data, std::int64_t elements, DType dtype, std::uint64_t seed, float scale,
                        cudaStream_t stream);
void launch_reset_counters(unsigned int* counters, int count, cudaStream_t stream);
// One warp: waits until *counter >= expected (ld.acquire.sys), or records a timeout in `error`; stamps
// %globaltimer into *stamp (optional) when it stops waiting. Returns at once when `error` already holds one.
void launch_wait_counter(const unsigned int* counter, unsigned int expected, int group, std::uint64_t timeout_ns,
                         WaitError* error, unsigned long long* stamp, cudaStream_t stream);
void launch_stamp(unsigned long long* slot, cudaStream_t stream);

enum class LoopbackOp { kReduceScatter, kAllReduce, kAllGather };

// One contiguous piece, in elements: list (group g, owner r) is ranges[g * world + r].
struct LoopbackRange {
  std::int64_t src_offset;
  std::int64_t dst_offset;
  std::int64_t count;  // a multiple of 8 (16-byte vectors)
};

// The whole world's collective on one GPU (all `world` ranks played), group by group:
//   kReduceScatter  dst_r[range(g, r).dst] = sum over p of src_p[range(g, r).src]         (fp32, p = 0..W-1)
//   kAllReduce      the same sum, stored to every dst_p                                   (one-shot, all ranks)
//   kAllGather      dst_p[range(g, r).dst] = src_r[range(g, r).src] for every p
// With `expected` set, group g waits until counters[g] >= expected[g] (the GEMM's release adds) first.
struct LoopbackArguments {
  LoopbackOp op = LoopbackOp::kAllReduce;
  DType dtype = DType::kBF16;
  int world = 1;
  const void* src[kMaxLoopbackRanks] = {};
  void* dst[kMaxLoopbackRanks] = {};
  const LoopbackRange* ranges = nullptr;   // device, num_groups * world entries
  int first_group = 0, num_groups = 1;     // groups [first_group, first_group + num_groups) of the table
  const unsigned int* counters = nullptr;  // device, indexed by group; null: no gate
  const unsigned int* expected = nullptr;  // device, indexed by group
  int ctas = 16;
  int threads = 512;
  std::uint64_t timeout_ns = 10'000'000'000ull;
  WaitError* error = nullptr;            // required
  unsigned long long* stamps = nullptr;  // optional: [group][cta][start, end]
};
void launch_loopback_collective(const LoopbackArguments& args, cudaStream_t stream);

}  // namespace ovl::detail
