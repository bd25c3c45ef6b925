// The stage ring of the TMA kernels (collectives_tma.cu's phases and local rings, loopback_tma.cu's movers): its
// barriers, issuing a unit's bulk loads, handing a stage back after its bulk writes have read it, a pull-reduce
// unit's slots (ovl/mover_rules.hpp) and their fp32 sum, and publishing bulk writes before a release. Private to
// kernels/src; device code: include from .cu only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ovl/kernels/tma_ptx.cuh"
#include "ovl/mover_rules.hpp"  // pull_slot_bytes

namespace ovl::kernels {

// A TMA kernel's dynamic shared memory: a kTmaHeaderBytes header (full[kTmaMaxStages], empty[kTmaMaxStages], then
// the kernel's own 32-bit words: TmaRing::words()), then the stages.
inline constexpr int kTmaMaxStages = 8;  // tma_ring_problem's bound
inline constexpr std::size_t kTmaHeaderBytes = 1024;
// The bytes left in the header for a kernel's own words, after the barriers.
inline constexpr std::size_t kTmaHeaderWordBytes = kTmaHeaderBytes - 2 * kTmaMaxStages * sizeof(std::uint64_t);

// The ring, in the header: full[s] completes when stage s's loads have landed (the issuer's arrive.expect_tx, the
// loads' complete_tx), empty[s] when the stage's use has been read by every reader (`readers` arrivals; each kernel
// says who its readers are). Units are numbered through the whole kernel: every unit issued is consumed and handed
// back once, so unit i uses stage i % S in phase i / S of both barriers and every role agrees on the phases whichever
// roles ran the units before. A kernel that orders its refills otherwise (the loopback tma-pull mover: a named
// barrier) never calls acquire() or release().
struct TmaRing {
  unsigned char* smem;  // the kernel's dynamic shared memory
  std::uint32_t num_stages, stage_bytes;
  std::uint32_t readers;  // empty[s]'s arrival count

  __device__ std::uint64_t* full() const { return reinterpret_cast<std::uint64_t*>(smem); }
  __device__ std::uint64_t* empty() const { return full() + kTmaMaxStages; }
  __device__ std::uint32_t* words() const { return reinterpret_cast<std::uint32_t*>(empty() + kTmaMaxStages); }
  // One thread, before the block's first barrier: the barriers (full: 1 arrival; empty: `readers`) and the init fence
  // for the async proxy.
  __device__ void init() const {
    for (std::uint32_t s = 0; s < num_stages; ++s) {
      ptx::mbar_init(full() + s, 1);
      ptx::mbar_init(empty() + s, readers);
    }
    ptx::mbar_init_fence();
  }

  __device__ unsigned char* stage(std::uint32_t i) const {
    return smem + kTmaHeaderBytes + (i % num_stages) * stage_bytes;
  }
  __device__ std::uint64_t* full_bar(std::uint32_t i) const { return full() + i % num_stages; }
  // Issuer: wait until unit i's stage is free (unit i - S handed back).
  __device__ void acquire(std::uint32_t i) const {
    if (i >= num_stages) ptx::mbar_wait(empty() + i % num_stages, (i / num_stages - 1) & 1u);
  }
  // Consumer: wait for unit i's loads; try_full only tests whether they have landed.
  __device__ bool try_full(std::uint32_t i) const { return ptx::mbar_try_wait(full_bar(i), (i / num_stages) & 1u); }
  __device__ void wait_full(std::uint32_t i) const { ptx::mbar_wait(full_bar(i), (i / num_stages) & 1u); }
  // A reader is done with unit i's stage: n of the stage's `readers` arrivals.
  __device__ void release(std::uint32_t i, std::uint32_t n) const { ptx::mbar_arrive(empty() + i % num_stages, n); }

  // Issuer: unit i's loads are `bytes` in all (arm its full barrier), then each load: `bytes` from `src` to
  // `offset` bytes into the unit's stage (a pull-reduce unit: slot r at r x slot bytes, from rank r).
  __device__ void arm(std::uint32_t i, std::uint32_t bytes) const { ptx::mbar_arrive_expect_tx(full_bar(i), bytes); }
  __device__ void load(std::uint32_t i, std::uint32_t offset, const void* src, std::uint32_t bytes) const {
    ptx::bulk_load(stage(i) + offset, src, bytes, full_bar(i));
  }
  // A unit of one load.
  __device__ void issue(std::uint32_t i, const void* src, std::uint32_t bytes) const {
    arm(i, bytes);
    load(i, 0, src, bytes);
  }
  // The thread that writes from the stages, right after committing unit i's bulk writes: unless i is the run's first
  // unit, wait until the previous unit's bulk group has read its stage (wait_group.read 1: one group of lag, never the
  // group just committed), then hand that stage back with n arrivals (n = 0: the kernel orders the refill itself).
  __device__ void retire_previous(std::uint32_t i, std::uint32_t first, std::uint32_t n) const {
    if (i == first) return;
    ptx::bulk_wait_read(1);
    if (n > 0) release(i - 1, n);
  }
};

// The thread that issued bulk writes, before a generic release publishes them to other threads or GPUs: every bulk
// write performed (wait_group 0, not .read), then fence.proxy.async.global (the async proxy's writes ordered before
// the generic proxy's release; a reader may load them through either proxy).
__device__ __forceinline__ void publish_bulk_writes() {
  ptx::bulk_wait_all();
  ptx::fence_proxy_async_global();
}

// The consumers' barrier: named barrier 1 over the consumer warps only (__syncthreads is barrier 0).
__device__ __forceinline__ void consumer_sync(unsigned threads) { ptx::named_barrier_sync(1, threads); }

// A pull-reduce consumer's vectors first_vec, first_vec + step, ... (< nvec; 16 bytes) of the `world` slots of
// `stage` (slot r at r x slot bytes, from rank r) summed in fp32 into slot 0, then fence.proxy.async.shared::cta
// (this thread's shared stores before the async proxy's bulk store reads them). The one order of every fp32 sum of
// the collectives (the SIMT movers', the tails', the real kernel's and the loopback's): from +0.0, ranks 0..W-1 in
// turn, so every algorithm that sums in fp32 gives the same bits (tma-push adds in the element type, with
// cp.reduce.async.bulk, in arrival order).
template <typename T>
__device__ __forceinline__ void sum_slots(unsigned char* stage, std::uint32_t slot, int world, int nvec, int first_vec,
                                          int step) {
  constexpr int kIlp = 4;  // vectors per thread at a time: independent shared loads in flight
  using Vec = ptx::Vec16<T>;
  uint4* out = reinterpret_cast<uint4*>(stage);
  for (int v0 = first_vec; v0 < nvec; v0 += kIlp * step) {
    float acc[kIlp][Vec::kElems];
#pragma unroll
    for (int x = 0; x < kIlp; ++x) Vec::set(acc[x], uint4{});  // +0.0 (all bits 0)
    for (int r = 0; r < world; ++r) {                          // rank order: deterministic
      const uint4* in = reinterpret_cast<const uint4*>(stage + std::uint32_t(r) * slot);
#pragma unroll
      for (int x = 0; x < kIlp; ++x)
        if (v0 + x * step < nvec) Vec::add(acc[x], in[v0 + x * step]);
    }
#pragma unroll
    for (int x = 0; x < kIlp; ++x)
      if (v0 + x * step < nvec) out[v0 + x * step] = Vec::pack(acc[x]);
  }
  ptx::fence_proxy_async_shared();
}

}  // namespace ovl::kernels
