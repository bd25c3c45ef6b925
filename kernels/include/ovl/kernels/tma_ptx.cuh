// PTX wrappers (sm_90) for kernels that move data with TMA: bulk copies (non-tensor), bulk reduces, mbarriers,
// proxy fences, system-scope flags, the global timer and 16-byte fp32 accumulation. Device code only: include from
// .cu files (the collectives and wait kernels here, core's loopback movers).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace ovl::kernels::ptx {

__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ std::uint64_t global_timer_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// ---- system-scope flags ----
__device__ __forceinline__ std::uint32_t ld_acquire_sys(const std::uint32_t* p) {
  std::uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_sys(std::uint32_t* p, std::uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ std::uint64_t ld_acquire_sys(const std::uint64_t* p) {
  std::uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_sys(std::uint64_t* p, std::uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void red_release_sys_add(std::uint32_t* p, std::uint32_t v) {
  asm volatile("red.release.sys.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// ---- proxy fences ----
// After acquiring a flag, before the async proxy (TMA) reads data that the flag published.
__device__ __forceinline__ void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }
// After generic-proxy writes (or reads) of shared memory that the async proxy accesses next.
__device__ __forceinline__ void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// Named barrier `id` over `threads` threads (a multiple of 32), the non-.aligned form: callers reach it after lanes
// of a warp spun on mbarriers apart, so it must not assume a converged warp.
__device__ __forceinline__ void named_barrier_sync(unsigned id, unsigned threads) {
  asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// ---- mbarrier ----
__device__ __forceinline__ void mbar_init(std::uint64_t* bar, std::uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
__device__ __forceinline__ void mbar_arrive_expect_tx(std::uint64_t* bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ bool mbar_try_wait(std::uint64_t* bar, std::uint32_t parity) {
  std::uint32_t done;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
      : "=r"(done)
      : "r"(smem_addr(bar)), "r"(parity)
      : "memory");
  return done != 0;
}
// One arrival (release, CTA scope), no transaction bytes: a consumer handing a stage back.
__device__ __forceinline__ void mbar_arrive(std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}
// `count` arrivals at once (sm_90).
__device__ __forceinline__ void mbar_arrive(std::uint64_t* bar, std::uint32_t count) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_wait(std::uint64_t* bar, std::uint32_t parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}

// ---- bulk copies ----
// global -> shared, completes on `bar` (the caller has done arrive.expect_tx for these bytes).
__device__ __forceinline__ void bulk_load(void* smem_dst, const void* gmem_src, std::uint32_t bytes, std::uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_addr(smem_dst)),
      "l"(gmem_src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}
// shared -> global, completes by bulk group.
__device__ __forceinline__ void bulk_store(void* gmem_dst, const void* smem_src, std::uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gmem_dst), "r"(smem_addr(smem_src)),
               "r"(bytes)
               : "memory");
}
// shared -> global element-wise add (relaxed per element), completes by bulk group.
template <typename T>
__device__ __forceinline__ void bulk_reduce_add(void* gmem_dst, const void* smem_src, std::uint32_t bytes);
template <>
__device__ __forceinline__ void bulk_reduce_add<__nv_bfloat16>(void* gmem_dst, const void* smem_src, std::uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.bf16 [%0], [%1], %2;" ::"l"(gmem_dst),
               "r"(smem_addr(smem_src)), "r"(bytes)
               : "memory");
}
template <>
__device__ __forceinline__ void bulk_reduce_add<__half>(void* gmem_dst, const void* smem_src, std::uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.noftz.f16 [%0], [%1], %2;" ::"l"(gmem_dst),
               "r"(smem_addr(smem_src)), "r"(bytes)
               : "memory");
}
template <>
__device__ __forceinline__ void bulk_reduce_add<float>(void* gmem_dst, const void* smem_src, std::uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"(gmem_dst),
               "r"(smem_addr(smem_src)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// All committed groups complete: their global writes are performed (publishable).
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
// At most n of the most recent groups may still be reading their shared-memory source (n is clamped to 0..7).
__device__ __forceinline__ void bulk_wait_read(int n) {
  switch (n < 0 ? 0 : n) {
    case 0: asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.bulk.wait_group.read 2;" ::: "memory"); break;
    case 3: asm volatile("cp.async.bulk.wait_group.read 3;" ::: "memory"); break;
    case 4: asm volatile("cp.async.bulk.wait_group.read 4;" ::: "memory"); break;
    case 5: asm volatile("cp.async.bulk.wait_group.read 5;" ::: "memory"); break;
    case 6: asm volatile("cp.async.bulk.wait_group.read 6;" ::: "memory"); break;
    default: asm volatile("cp.async.bulk.wait_group.read 7;" ::: "memory"); break;
  }
}

// ---- element-wise system-scope reduce for the sub-16-byte tails of push-reduce ----
__device__ __forceinline__ void red_add_sys(__nv_bfloat16* p, __nv_bfloat16 v) {
  asm volatile("red.relaxed.sys.global.add.noftz.bf16 [%0], %1;" ::"l"(p), "h"(__bfloat16_as_ushort(v)) : "memory");
}
__device__ __forceinline__ void red_add_sys(__half* p, __half v) {
  asm volatile("red.relaxed.sys.global.add.noftz.f16 [%0], %1;" ::"l"(p), "h"(__half_as_ushort(v)) : "memory");
}
__device__ __forceinline__ void red_add_sys(float* p, float v) {
  asm volatile("red.relaxed.sys.global.add.f32 [%0], %1;" ::"l"(p), "f"(v) : "memory");
}

// ---- conversions to and from fp32 accumulation ----
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(float v) { return v; }
template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ float from_f32<float>(float v) { return v; }

// 16 bytes = 8 bf16/f16 or 4 f32, unpacked into fp32 and packed back. The vector is taken by value: one 16-byte load
// of it, then register unpacking (by reference the compiler split a shared-memory operand into eight 2-byte loads).
template <typename T>
struct Vec16 {
  static constexpr int kElems = 16 / sizeof(T);
  __device__ __forceinline__ static void add(float (&acc)[kElems], const uint4 v) {
    const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
    for (int i = 0; i < kElems; ++i) acc[i] += to_f32(e[i]);
  }
  __device__ __forceinline__ static void set(float (&acc)[kElems], const uint4 v) {
    const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
    for (int i = 0; i < kElems; ++i) acc[i] = to_f32(e[i]);
  }
  __device__ __forceinline__ static uint4 pack(const float (&acc)[kElems]) {
    uint4 out;
    if constexpr (sizeof(T) == 2) {  // bf16 / f16: one paired conversion (cvt.rn.*x2.f32) per two elements
      std::uint32_t* w = reinterpret_cast<std::uint32_t*>(&out);
#pragma unroll
      for (int i = 0; i < 4; ++i) w[i] = pack_pair(acc[2 * i], acc[2 * i + 1]);
    } else {
      T* e = reinterpret_cast<T*>(&out);
#pragma unroll
      for (int i = 0; i < kElems; ++i) e[i] = from_f32<T>(acc[i]);
    }
    return out;
  }

 private:
  // Two values rounded to T, the first in the low half (memory order).
  __device__ __forceinline__ static std::uint32_t pack_pair(float lo, float hi) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
      return *reinterpret_cast<const std::uint32_t*>(&v);
    } else {
      const __half2 v = __floats2half2_rn(lo, hi);
      return *reinterpret_cast<const std::uint32_t*>(&v);
    }
  }
};

}  // namespace ovl::kernels::ptx
