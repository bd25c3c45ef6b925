// Device-side helpers shared by the loopback movers (loopback.cu, loopback_tma.cu): the group gate, the stamps,
// pacing (its link-byte rule: ovl/mover_rules.hpp), and what one (group, owner) piece of the loopback collective means
// for the played share; the timed counter wait is device_error.hpp's, the PTX wrappers (global timer, system-scope
// acquire, bulk copies, 16-byte fp32 sums) tma_ptx.cuh's. Device code: include from .cu only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "ovl/kernels/device_error.hpp"
#include "ovl/kernels/loopback.hpp"
#include "ovl/kernels/tma_ptx.cuh"
#include "ovl/mover_rules.hpp"  // link_bytes_per_byte

namespace ovl::kernels::dev {

using ptx::global_timer_ns;
template <typename T>
using Vec = ptx::Vec16<T>;  // 16 bytes of T summed in fp32

// Pacing (LoopbackArguments::pace_ns_per_byte): spin, holding the SM as a real sender does, until %globaltimer
// reaches `t` (ns).
__device__ __forceinline__ void pace_until(unsigned long long t) {
  while (global_timer_ns() < t) {
  }
}

// The start of a paced group: max(now, the previous group's end), the CTA's link being free again (a real sender
// streams the groups: a group's latency overlaps the next group's bytes). The call's link latency is paid once, at
// its end (pace_finish).
__device__ __forceinline__ unsigned long long pace_group_start(unsigned long long prev_end) {
  const unsigned long long now = global_timer_ns();
  return now > prev_end ? now : prev_end;
}

// The end of a paced launch, called by a thread once its CTA's last byte is moved and its pace waited for: that byte
// arrives pace_latency_ns (the call's link steps) later. (From now, not from the paced end: where the mover's own rate
// binds, the bytes end after their paced time.)
__device__ __forceinline__ void pace_finish(const LoopbackArguments& a) {
  pace_until(global_timer_ns() + a.pace_latency_ns);
}

// Thread 0 of a mover's CTA: true = group g may be moved (its counter acquired, then fence.proxy.async.global: the
// TMA mover's bulk loads come after the acquire; the SIMT mover's plain loads need no more); false = timed out or a
// timeout recorded elsewhere (WaitKind::kGroupCounter). No counters: always true.
__device__ __forceinline__ bool gate(const LoopbackArguments& a, int g) {
  if (a.expected == nullptr) return true;
  if (!wait_counter_at_least(a.counters + g, a.expected[g], a.timeout_ns, a.error, WaitKind::kGroupCounter, unsigned(g),
                             blockIdx.x))
    return false;
  ptx::fence_proxy_async_global();
  return true;
}

// This CTA's stamp of group g (LoopbackArguments::stamps, [group][cta][start, end]): which 0 = start, 1 = end.
__device__ __forceinline__ void stamp(const LoopbackArguments& a, int g, int which) {
  if (a.stamps != nullptr) a.stamps[(std::int64_t(g) * gridDim.x + blockIdx.x) * 2 + which] = global_timer_ns();
}

// What piece (group g, owner r) of the range table asks of the played share (see LoopbackArguments):
// reduce (sum src_0..src_{W-1} at range.src) or copy (from `copy_src`, already at the range's start), stored to
// dst_d at range.dst for d in [dst_first, dst_first + dst_count).
struct Piece {
  bool reduce;
  const void* copy_src;
  int dst_first, dst_count;
};

// False when the piece is empty or not part of the played share.
template <typename T>
__device__ __forceinline__ bool plan_piece(const LoopbackArguments& a, int r, const LoopbackRange& rg, Piece& pc) {
  if (rg.count <= 0) return false;
  const bool whole = a.play == LoopbackShare::kWholeWorld;
  pc.copy_src = nullptr;
  pc.dst_first = 0;
  pc.dst_count = 1;
  switch (a.op) {
    case Collective::kReduceScatter:
      if (!whole && r != 0) return false;
      pc.reduce = true;
      pc.dst_first = whole ? r : 0;
      return true;
    case Collective::kAllReduce:
      if (whole || r == 0) {
        pc.reduce = true;
        pc.dst_count = whole ? a.world : 1;
      } else {  // rank 0 pulls peer r's reduced piece (the all-gather half of a two-shot AllReduce)
        pc.reduce = false;
        pc.copy_src = static_cast<const T*>(a.dst[r]) + rg.src_offset;
      }
      return true;
    case Collective::kAllGather:
      pc.reduce = false;
      pc.copy_src = static_cast<const T*>(a.src[r]) + rg.src_offset;
      pc.dst_count = whole ? a.world : 1;
      return true;
  }
  return false;
}

}  // namespace ovl::kernels::dev
