// The TMA movers of the loopback collective (the tma mode's; see executor_kernels.hpp for what is moved).
//
// grid: args.ctas CTAs, persistent over the groups; block: ONE warp (32 threads); dynamic shared memory
// kTmaSmemBytes: a 128-byte header of kTmaStages mbarriers, then a ring of kTmaStages stages of kTmaStageBytes.
// arch: sm_90 (cp.async.bulk, cp.reduce.async.bulk, mbarrier expect_tx).
//
// CTA c owns slice c (an equal share of 16-byte vectors) of every (group, owner) piece of the played share. Its
// work is a sequence of chunks, group-major: group g, then owner r = 0..W-1, then the piece's phases, then the
// slice in chunks of at most `cap` bytes (the tail of a slice is a smaller chunk, still a multiple of 16 bytes).
// A chunk occupies one ring stage; its sources go to `nsrc` slots of `cap` bytes in the stage:
//   kReduce (tma-pull)  W slots (src_0..src_{W-1}), cap = stage / W; the warp sums them in fp32 in rank order
//                       into slot 0 (bf16/f16), fence.proxy.async.shared::cta, __syncwarp, bulk store(s)
//   kInit (tma-push)    1 slot (src_0), cap = stage; bulk store(s): the destination holds source 0
//   kAdds (tma-push)    W-1 slots (src_1..src_{W-1}), cap = stage / (W-1); one cp.reduce.async.bulk .add per
//                       source and destination. Before its first load, the ring is drained and lane 0 waits for
//                       all bulk groups (wait_group 0), so the kInit stores of the same slice are complete.
//   kCopy               1 slot, cap = stage; bulk store(s) straight from the slot
// Lane 0 issues everything (loads, stores, commits, waits); the warp only adds. Issue runs up to kTmaStages chunks
// ahead of consumption, across groups when the next group's counter is already there (a non-blocking poll); it
// blocks on a counter (ld.acquire.sys, timeout -> WaitError, where = 2) only when nothing is in flight, after which
// lane 0 executes fence.proxy.async.global before the group's first bulk load. A stage is refilled only after the
// bulk group that stored from it has read it (cp.async.bulk.wait_group.read N, N = groups committed since). One
// bulk group is committed per consumed chunk. Before exit: cp.async.bulk.wait_group 0.
// Stamps (optional): per group and CTA, start = when its counter was acquired, end = when its last chunk's stores
// were issued (start = end for a group with nothing in this CTA's slice).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "executor_device.hpp"
#include "executor_kernels.hpp"
#include "ovl/cuda_check.hpp"

namespace ovl::detail {
namespace {

static_assert(kTmaStages >= 2 && kTmaStages <= 8, "wait_group.read takes N in 0..7");
static_assert(kTmaStageBytes % (16 * 8) == 0, "a stage must split into 16-byte slots for up to 8 sources");
static_assert(kTmaHeaderBytes >= 8 * kTmaStages && kTmaHeaderBytes % 16 == 0, "header holds the mbarriers");

// ---- PTX (sm_90). Written here because kernels/src/collectives_ptx.cuh is private to ovl_kernels. ----
__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(std::uint64_t* bar, std::uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
// Makes the mbarrier inits visible to the async proxy (the bulk copies' complete_tx).
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
__device__ __forceinline__ void mbar_arrive_expect_tx(std::uint64_t* bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(std::uint64_t* bar, std::uint32_t parity) {
  std::uint32_t done = 0;
  while (!done) {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done)
                 : "r"(smem_u32(bar)), "r"(parity)
                 : "memory");
  }
}
__device__ __forceinline__ void bulk_load(void* smem_dst, const void* gmem_src, std::uint32_t bytes,
                                          std::uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_u32(smem_dst)),
               "l"(gmem_src), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}
__device__ __forceinline__ void bulk_store(void* gmem_dst, const void* smem_src, std::uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gmem_dst), "r"(smem_u32(smem_src)),
               "r"(bytes)
               : "memory");
}
template <typename T>
__device__ __forceinline__ void bulk_reduce_add(void* gmem_dst, const void* smem_src, std::uint32_t bytes);
template <>
__device__ __forceinline__ void bulk_reduce_add<__nv_bfloat16>(void* gmem_dst, const void* smem_src,
                                                               std::uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.bf16 [%0], [%1], %2;" ::"l"(gmem_dst),
               "r"(smem_u32(smem_src)), "r"(bytes)
               : "memory");
}
template <>
__device__ __forceinline__ void bulk_reduce_add<__half>(void* gmem_dst, const void* smem_src, std::uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.f16 [%0], [%1], %2;" ::"l"(gmem_dst),
               "r"(smem_u32(smem_src)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Every committed bulk group complete: its global writes performed.
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
// At most n of the most recent bulk groups may still be reading their shared-memory source.
__device__ __forceinline__ void bulk_wait_read(std::uint32_t n) {
  switch (n) {
    case 0:
      asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
      break;
    case 1:
      asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
      break;
    case 2:
      asm volatile("cp.async.bulk.wait_group.read 2;" ::: "memory");
      break;
    case 3:
      asm volatile("cp.async.bulk.wait_group.read 3;" ::: "memory");
      break;
    case 4:
      asm volatile("cp.async.bulk.wait_group.read 4;" ::: "memory");
      break;
    case 5:
      asm volatile("cp.async.bulk.wait_group.read 5;" ::: "memory");
      break;
    case 6:
      asm volatile("cp.async.bulk.wait_group.read 6;" ::: "memory");
      break;
    default:
      asm volatile("cp.async.bulk.wait_group.read 7;" ::: "memory");
      break;
  }
}
// After acquiring a counter, before bulk-loading the data it published.
__device__ __forceinline__ void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }
// After generic-proxy accesses of shared memory that the async proxy accesses next.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

enum Kind : int { kReduce = 0, kInit = 1, kAdds = 2, kCopy = 3 };

struct Chunk {
  int group;
  int kind;
  dev::Piece piece;
  std::int64_t src_offset, dst_offset;  // the range's, in elements
  std::int64_t pos;                     // bytes from the range's start
  std::uint32_t bytes, cap;             // this chunk; the slot size of its kind
  bool first_of_phase, last_in_group;
};

// Walks this CTA's chunks in order (see the file comment). Group entry is explicit (enter()), so the issuer can
// gate each group before walking it; `any` is false when the current group has nothing (left) for this CTA.
template <typename T>
struct Cursor {
  const LoopbackArguments* a;
  int cta, ctas;
  bool push;
  int group = -1, r = 0, phase = 0, kind = kReduce;
  dev::Piece piece{};
  std::int64_t src_offset = 0, dst_offset = 0, begin = 0, pos = 0, end = 0;
  bool any = false;

  __device__ int phases(const dev::Piece& pc) const { return pc.reduce && push && a->world > 1 ? 2 : 1; }
  __device__ int kind_of(const dev::Piece& pc, int ph) const {
    if (!pc.reduce) return kCopy;
    if (!push) return kReduce;
    return ph == 0 ? kInit : kAdds;
  }
  __device__ std::uint32_t cap_of(int k) const {
    const int slots = k == kReduce ? a->world : k == kAdds ? a->world - 1 : 1;
    return (kTmaStageBytes / std::uint32_t(slots)) & ~15u;
  }
  // The first (owner, phase) at or after (rr, ph) of the current group with a non-empty slice for this CTA.
  __device__ void seek(int rr, int ph) {
    for (; rr < a->world; ++rr, ph = 0) {
      const LoopbackRange rg = a->ranges[std::int64_t(group) * a->world + rr];
      dev::Piece pc;
      if (!dev::plan_piece<T>(*a, rr, rg, pc)) continue;
      const std::int64_t nv = rg.count * std::int64_t(sizeof(T)) / 16;
      const std::int64_t b0 = nv * cta / ctas * 16, b1 = nv * (cta + 1) / ctas * 16;
      if (b1 <= b0 || ph >= phases(pc)) continue;
      r = rr;
      phase = ph;
      kind = kind_of(pc, ph);
      piece = pc;
      src_offset = rg.src_offset;
      dst_offset = rg.dst_offset;
      begin = pos = b0;
      end = b1;
      any = true;
      return;
    }
    any = false;
  }
  __device__ void enter(int g) {
    group = g;
    seek(0, 0);
  }
  // The next chunk (requires any); advances.
  __device__ Chunk take() {
    Chunk c;
    c.group = group;
    c.kind = kind;
    c.piece = piece;
    c.src_offset = src_offset;
    c.dst_offset = dst_offset;
    c.pos = pos;
    c.cap = cap_of(kind);
    c.bytes = std::uint32_t(end - pos < std::int64_t(c.cap) ? end - pos : std::int64_t(c.cap));
    c.first_of_phase = pos == begin;
    pos += c.bytes;
    if (pos >= end) {
      if (phase + 1 < phases(piece)) {
        ++phase;
        kind = kind_of(piece, phase);
        pos = begin;
      } else {
        seek(r + 1, 0);
      }
    }
    c.last_in_group = !any;
    return c;
  }
};

// Lane 0: 1 = group g may be moved (counter acquired, proxy fenced), 0 = not yet (non-blocking poll only),
// -1 = timed out or an error was recorded elsewhere (blocking only).
__device__ int gate(const LoopbackArguments& a, int g, bool blocking) {
  if (a.expected == nullptr) return 1;
  const unsigned expected = a.expected[g];
  if (!blocking) {
    if (dev::ld_acquire_sys(a.counters + g) < expected) return 0;
  } else if (!dev::wait_at_least(a.counters + g, expected, a.timeout_ns, a.error, 2u, unsigned(g), blockIdx.x)) {
    return -1;
  }
  fence_proxy_async_global();
  return 1;
}

template <typename T>
__device__ __forceinline__ const unsigned char* src_bytes(const LoopbackArguments& a, const Chunk& c, int p) {
  return reinterpret_cast<const unsigned char*>(static_cast<const T*>(a.src[p]) + c.src_offset) + c.pos;
}
template <typename T>
__device__ __forceinline__ unsigned char* dst_bytes(const LoopbackArguments& a, const Chunk& c, int d) {
  return reinterpret_cast<unsigned char*>(static_cast<T*>(a.dst[d]) + c.dst_offset) + c.pos;
}

template <typename T>
__global__ void __launch_bounds__(32, 1) tma_mover_kernel(const __grid_constant__ LoopbackArguments a) {
  extern __shared__ __align__(128) unsigned char smem[];
  std::uint64_t* bars = reinterpret_cast<std::uint64_t*>(smem);
  unsigned char* ring = smem + kTmaHeaderBytes;
  const unsigned lane = threadIdx.x;
  const int w = a.world;
  constexpr unsigned kFull = 0xffffffffu;
  constexpr std::uint32_t S = kTmaStages;

  if (lane == 0) {
    for (std::uint32_t s = 0; s < S; ++s) mbar_init(bars + s, 1);
    mbar_init_fence();
  }
  __syncwarp();

  const bool push = a.mover == LoopbackMover::kTmaPush;
  Cursor<T> issue{&a, int(blockIdx.x), int(gridDim.x), push};
  Cursor<T> consume = issue;
  std::uint32_t head = 0, tail = 0;  // chunks issued / consumed (one bulk group committed per consumed chunk)
  int gated = -1;                    // groups [0, gated] of this launch have been acquired
  bool issuing = true, failed = false;
  auto stamp = [&](int g, int which) {
    if (lane == 0 && a.stamps != nullptr)
      a.stamps[(std::int64_t(g) * gridDim.x + blockIdx.x) * 2 + which] = dev::global_timer();
  };

  for (;;) {
    // Issue while a stage is free.
    while (issuing && head - tail < S) {
      if (!issue.any) {  // the current group is done here: acquire the next one
        if (gated + 1 >= a.num_groups) {
          issuing = false;
          break;
        }
        const int g = a.first_group + gated + 1;
        int st = 0;
        if (lane == 0) st = gate(a, g, head == tail);  // block only when nothing is in flight
        st = __shfl_sync(kFull, st, 0);
        if (st == 0) break;  // not ready yet: consume what is in flight first
        if (st < 0) {
          failed = true;
          issuing = false;
          break;
        }
        ++gated;
        issue.enter(g);
        stamp(g, 0);
        if (!issue.any) stamp(g, 1);  // nothing of group g in this CTA's slices
        continue;
      }
      Cursor<T> next = issue;
      const Chunk c = next.take();
      if (c.kind == kAdds && c.first_of_phase) {
        // The adds go onto the kInit copy of the same slice: every earlier bulk store must be complete.
        if (head != tail) break;
        if (lane == 0) bulk_wait_all();
      }
      if (lane == 0) {
        const std::uint32_t s = head % S;
        // Refill the stage only after the bulk group that stored from it (chunk head - S) has read it.
        if (head >= S) bulk_wait_read(tail - 1 - (head - S));
        unsigned char* stage = ring + s * kTmaStageBytes;
        const int first = c.kind == kAdds ? 1 : 0;
        const int nsrc = c.kind == kReduce ? w : c.kind == kAdds ? w - 1 : 1;
        mbar_arrive_expect_tx(bars + s, std::uint32_t(nsrc) * c.bytes);
        if (c.kind == kCopy) {
          bulk_load(stage, static_cast<const unsigned char*>(c.piece.copy_src) + c.pos, c.bytes, bars + s);
        } else {
          for (int k = 0; k < nsrc; ++k)
            bulk_load(stage + std::uint32_t(k) * c.cap, src_bytes<T>(a, c, first + k), c.bytes, bars + s);
        }
      }
      issue = next;
      ++head;
    }
    if (head == tail) {
      if (!issuing) break;
      continue;  // the next gate blocks (nothing in flight) or the next chunk is an adds phase start
    }

    // Consume the oldest chunk.
    while (!consume.any) consume.enter(consume.group < 0 ? a.first_group : consume.group + 1);
    const Chunk c = consume.take();
    const std::uint32_t s = tail % S;
    unsigned char* stage = ring + s * kTmaStageBytes;
    mbar_wait(bars + s, (tail / S) & 1u);
    const int d0 = c.piece.dst_first, d1 = c.piece.dst_first + c.piece.dst_count;
    if (c.kind == kReduce) {
      const int nvec = int(c.bytes / 16);
      uint4* out = reinterpret_cast<uint4*>(stage);
      for (int v0 = int(lane); v0 < nvec; v0 += 4 * 32) {
        float acc[4][8];
#pragma unroll
        for (int u = 0; u < 4; ++u)
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[u][i] = 0.f;
        for (int p = 0; p < w; ++p) {  // rank order: deterministic, the SIMT mover's order
          const uint4* in = reinterpret_cast<const uint4*>(stage + std::uint32_t(p) * c.cap);
#pragma unroll
          for (int u = 0; u < 4; ++u)
            if (v0 + u * 32 < nvec) dev::Vec<T>::add(acc[u], in[v0 + u * 32]);
        }
#pragma unroll
        for (int u = 0; u < 4; ++u)
          if (v0 + u * 32 < nvec) out[v0 + u * 32] = dev::Vec<T>::pack(acc[u]);
      }
      fence_proxy_async_shared();  // this lane's generic smem accesses before the async proxy's store reads
      __syncwarp();
    }
    if (lane == 0) {
      if (c.kind == kAdds) {
        for (int k = 0; k < w - 1; ++k)
          for (int d = d0; d < d1; ++d)
            bulk_reduce_add<T>(dst_bytes<T>(a, c, d), stage + std::uint32_t(k) * c.cap, c.bytes);
      } else {
        for (int d = d0; d < d1; ++d) bulk_store(dst_bytes<T>(a, c, d), stage, c.bytes);
      }
      bulk_commit();
    }
    // Every lane has waited on this stage's phase before lane 0 may re-arm it (chunk tail + S): with lanes that lag
    // two phases behind, the parity wait would be ambiguous.
    __syncwarp();
    ++tail;
    if (c.last_in_group) stamp(c.group, 1);
  }
  if (lane == 0) bulk_wait_all();  // writes performed before the kernel ends (the stream's next op reads them)
  (void)failed;
}

template <typename T>
void launch_typed(const LoopbackArguments& a, cudaStream_t stream) {
  OVL_CUDA_CHECK(
      cudaFuncSetAttribute(tma_mover_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kTmaSmemBytes)));
  tma_mover_kernel<T><<<a.ctas, 32, kTmaSmemBytes, stream>>>(a);
}

}  // namespace

void launch_tma_mover(const LoopbackArguments& a, cudaStream_t stream) {
  OVL_CHECK(a.mover == LoopbackMover::kTmaPull || a.mover == LoopbackMover::kTmaPush,
            "launch_tma_mover: mover {} is not a TMA mover", int(a.mover));
  if (a.num_groups <= 0) return;
  if (a.dtype == DType::kBF16) {
    launch_typed<__nv_bfloat16>(a, stream);
  } else {
    launch_typed<__half>(a, stream);
  }
  OVL_CUDA_CHECK_LAST();
}

}  // namespace ovl::detail
