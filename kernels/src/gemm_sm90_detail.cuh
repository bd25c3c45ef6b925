// Device helpers of the Hopper GEMM (kernels/src/gemm_sm90.cu): PTX wrappers for mbarriers, TMA, wgmma and the
// release add. Private to kernels/src; needs sm_90a for wgmma and setmaxnreg.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "ovl/kernels/device_error.hpp"
#include "ovl/kernels/tma_ptx.cuh"

namespace ovl::kernels::detail {

// ---- shared-memory addresses and mbarriers ---------------------------------------------------------------------

__device__ __forceinline__ uint32_t smem_addr(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

// Arrive once and add `bytes` to the transaction count the current phase waits for (the producer, before its TMA).
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}

// Waits until the phase with the given parity has completed. A fresh barrier counts its (virtual) previous phase,
// parity 1, as completed: that is what lets the producer start on empty slots without a first arrival.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

// ---- TMA ---------------------------------------------------------------------------------------------------------

// 2-D tiled bulk copy global -> shared; completes the box's bytes of transaction on `bar`. Out-of-bounds elements
// read as 0.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], "
      "[%2];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1)
      : "memory");
}

// 3-D tiled bulk copy global -> shared (the MN-major B stage as one box of 64-column chunks; see the host's
// make_chunked_tensor_map); completes the box's bytes of transaction on `bar`. Out-of-bounds elements read as 0.
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
      "[%2];\n" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// 2-D tiled bulk copy shared -> global, in the calling thread's current bulk group. Elements outside the tensor
// are not written.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(smem_addr(src)), "r"(c0), "r"(c1)
               : "memory");
}

__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// The calling thread's bulk groups have read their shared-memory sources (the source may be overwritten).
__device__ __forceinline__ void bulk_wait_read_all() {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
// The calling thread's bulk groups are complete: their global writes are performed.
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

// This thread's ordinary shared-memory stores become visible to the async proxy (a later TMA store reads them).
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Four 8 x 8 matrices of 16-bit elements to shared memory: matrix i's row r is 16 bytes at the address lane
// 8 i + r gives; register i of lane l holds matrix i's elements (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1).
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}

__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// ---- programmatic dependent launch ----------------------------------------------------------------

// Waits until the grids this one depends on programmatically (the previous kernel on the stream, when this grid was
// launched with cudaLaunchAttributeProgrammaticStreamSerialization) have completed and their memory operations are
// visible. Returns at once when there are none.
__device__ __forceinline__ void grid_dependency_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

// Lets the grids that depend on this one programmatically launch once every CTA of this grid has issued it (or
// exited). They still wait for this grid's completion (grid_dependency_wait) before touching memory.
__device__ __forceinline__ void launch_dependent_grids() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

// ---- register reallocation -----------------------------------------------------------------------

template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// ---- wgmma -------------------------------------------------------------------------------------------------------

// Shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"): start address, leading and stride byte
// offsets (all >> 4), base offset 0 (every swizzle atom is 1024-byte aligned), layout type 1 = 128-byte swizzle.
__device__ __forceinline__ uint64_t make_smem_desc(uint32_t addr, uint32_t leading_bytes, uint32_t stride_bytes) {
  uint64_t desc = 0;
  desc |= static_cast<uint64_t>((addr & 0x3FFFF) >> 4);
  desc |= static_cast<uint64_t>((leading_bytes & 0x3FFFF) >> 4) << 16;
  desc |= static_cast<uint64_t>((stride_bytes & 0x3FFFF) >> 4) << 32;
  desc |= 1ull << 62;
  return desc;
}

// `desc` with its start address moved on by `bytes` (a multiple of 16). Adds to the low word only: the 14-bit address
// field holds (address & 0x3FFFF) >> 4 and every address of a CTA's shared memory plus the offsets used here stays
// below 256 KB, so nothing carries into the leading-offset field.
__device__ __forceinline__ uint64_t smem_desc_advance(uint64_t desc, uint32_t bytes) {
  return (desc & 0xFFFFFFFF00000000ull) | static_cast<uint32_t>(static_cast<uint32_t>(desc) + (bytes >> 4));
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// The accumulator registers must stay in place across the asynchronous wgmma: this keeps the compiler from
// moving them between the issue and the wait.
__device__ __forceinline__ void fence_accumulators(float (&d)[128]) {
#pragma unroll
  for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D(64 x 256, fp32) += A(64 x 16, K-major, shared) * B(16 x 256, shared): B K-major (kTransB = 0) or MN-major
// (kTransB = 1). scale_d = 0 overwrites D instead of accumulating (first k-step of a tile). FP8 (TYPES
// "k32.f32.e4m3.<b>", TRANS ""): A(64 x 32) * B(32 x 256), both K-major (FP8 wgmma has no transpose operands).
#define OVL_GEMM_WGMMA_M64N256(TYPES, TRANS)                                                                         \
  asm volatile(                                                                                                      \
      "{\n"                                                                                                          \
      ".reg .pred p;\n"                                                                                              \
      "setp.ne.b32 p, %130, 0;\n"                                                                                    \
      "wgmma.mma_async.sync.aligned.m64n256" TYPES                                                                   \
      "\n"                                                                                                           \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,\n"                                     \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,\n"                            \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,\n"                            \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,\n"                            \
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,\n"                            \
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,\n"                            \
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,\n"                \
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127},\n"           \
      "%128, %129, p, 1, 1" TRANS ";\n"                                                                             \
      "}\n"                                                                                                          \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),  \
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),       \
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),      \
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),      \
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),      \
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),      \
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),      \
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),      \
        "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]),      \
        "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]),      \
        "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]),      \
        "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]),      \
        "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), \
        "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),            \
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]),            \
        "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]),            \
        "+f"(d[126]), "+f"(d[127])                                                                                   \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransB));

template <int kTransB>
__device__ __forceinline__ void wgmma_m64n256k16_bf16(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  OVL_GEMM_WGMMA_M64N256("k16.f32.bf16.bf16", ", 0, %131")
}
template <int kTransB>
__device__ __forceinline__ void wgmma_m64n256k16_f16(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  OVL_GEMM_WGMMA_M64N256("k16.f32.f16.f16", ", 0, %131")
}

// D(64 x 128, fp32) += A(64 x 16) * B(16 x 128): the left or right half of a tile (GemmArguments::half_tiles), in
// the first 64 of the 128 accumulator registers (the m64nNk16 fragment: register 4j + 2i + c, j < 16). FP8 as above
// (k32, no transpose operands); its D fragment is the same.
#define OVL_GEMM_WGMMA_M64N128(TYPES, TRANS)                                                                         \
  asm volatile(                                                                                                      \
      "{\n"                                                                                                          \
      ".reg .pred p;\n"                                                                                              \
      "setp.ne.b32 p, %66, 0;\n"                                                                                     \
      "wgmma.mma_async.sync.aligned.m64n128" TYPES                                                                   \
      "\n"                                                                                                           \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,\n"                                     \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,\n"                            \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,\n"                            \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63},\n"                           \
      "%64, %65, p, 1, 1" TRANS ";\n"                                                                               \
      "}\n"                                                                                                          \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),              \
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),        \
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),      \
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),      \
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),      \
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),      \
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),      \
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])       \
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransB));

template <int kTransB>
__device__ __forceinline__ void wgmma_m64n128k16_bf16(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  OVL_GEMM_WGMMA_M64N128("k16.f32.bf16.bf16", ", 0, %67")
}
template <int kTransB>
__device__ __forceinline__ void wgmma_m64n128k16_f16(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  OVL_GEMM_WGMMA_M64N128("k16.f32.f16.f16", ", 0, %67")
}
// FP8: A e4m3 times B e4m3 (kBE5M2 false) or e5m2, one k32 step on the whole tile (m64n256) or, kHalf, half of it
// (m64n128). FP8 wgmma reads both operands K-major and takes no transpose operands.
template <bool kHalf, bool kBE5M2>
__device__ __forceinline__ void wgmma_k32_e4m3(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  constexpr int kTransB = 0;  // an operand of the macros that the FP8 forms leave unused
  if constexpr (kHalf && kBE5M2) {
    OVL_GEMM_WGMMA_M64N128("k32.f32.e4m3.e5m2", "")
  } else if constexpr (kHalf) {
    OVL_GEMM_WGMMA_M64N128("k32.f32.e4m3.e4m3", "")
  } else if constexpr (kBE5M2) {
    OVL_GEMM_WGMMA_M64N256("k32.f32.e4m3.e5m2", "")
  } else {
    OVL_GEMM_WGMMA_M64N256("k32.f32.e4m3.e4m3", "")
  }
}
#undef OVL_GEMM_WGMMA_M64N256
#undef OVL_GEMM_WGMMA_M64N128

// ---- signals -----------------------------------------------------------------------------------------------------

// Publishes a finished tile: everything this thread has observed (the other consumer threads' stores, ordered
// before it by a barrier; the tile's TMA stores, performed by its bulk wait) becomes visible at system scope before the
// counter moves. Peer-mapped counters work. A .release operation is a release pattern by itself in the PTX memory
// model (the same as fence.acq_rel followed by a relaxed write), so no fence precedes it: an explicit one compiled to
// a second MEMBAR.ALL.SYS in the SASS (docs/kernels.md, signals).
__device__ __forceinline__ void signal_tile(unsigned int* counter) {
  asm volatile("red.release.sys.global.add.u32 [%0], 1;\n" ::"l"(counter) : "memory");
}

// A tile's arrival counter (a finished stream-K piece; half tiles use second_of_two_arrivals below), in a 64-bit word:
// the high half is the launch's epoch (a per-launch number, never 0), the low half its arrivals so far. Counts the
// calling thread's arrival after its earlier writes (ordered before it by a barrier or a bulk wait) are visible at GPU
// scope, and returns the arrivals of this launch before it. A word another launch left, or never written (zero), counts
// as none, so the workspace needs no zeroing; acquire as well: the last arrival reads what the others wrote after it.
__device__ __forceinline__ unsigned int count_arrival(unsigned long long* word, unsigned int epoch) {
  // The read only seeds the compare-and-swap; the CAS (acq_rel) is the release of this thread's earlier writes and
  // the acquire of the other arrivals' (no explicit fence: see signal_tile).
  unsigned long long seen;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];\n" : "=l"(seen) : "l"(word) : "memory");
  for (;;) {
    const unsigned int before = static_cast<unsigned int>(seen >> 32) == epoch ? static_cast<unsigned int>(seen) : 0u;
    const unsigned long long next = (static_cast<unsigned long long>(epoch) << 32) | (before + 1u);
    unsigned long long old;
    asm volatile("atom.acq_rel.gpu.global.cas.b64 %0, [%1], %2, %3;\n"
                 : "=l"(old)
                 : "l"(word), "l"(seen), "l"(next)
                 : "memory");
    if (old == seen) return before;
    seen = old;
  }
}

// count_arrival for exactly two arrivals (the halves of a tile), in one exchange instead of a read and a
// compare-and-swap that the other half may make retry: each arrival swaps in (epoch, 1), and the one that finds this
// launch's (epoch, 1) already there is the second. Same orderings as count_arrival (acq_rel at GPU scope); the second
// clears the word (clear_arrivals) as the last arrival.
__device__ __forceinline__ bool second_of_two_arrivals(unsigned long long* word, unsigned int epoch) {
  const unsigned long long one = (static_cast<unsigned long long>(epoch) << 32) | 1u;
  unsigned long long old;
  asm volatile("atom.acq_rel.gpu.global.exch.b64 %0, [%1], %2;\n" : "=l"(old) : "l"(word), "l"(one) : "memory");
  return old == one;
}

// The last arrival of a launch clears the word (no other arrival of this launch touches it after), so that a replay
// of the same launch (a CUDA graph, same epoch) starts from zero.
__device__ __forceinline__ void clear_arrivals(unsigned long long* word) {
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;\n" ::"l"(word), "l"(0ull) : "memory");
}

// bar.sync on a named barrier: the `threads` threads (a multiple of 32) that use `id` wait for each other; orders
// their memory operations like __syncthreads.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---- waits (AllGather before the GEMM) -----------------------------------------------------------------------------

// The slow path of wait_for_rows: the one timed wait (wait_counter_at_least) until *counter >= value, giving up after
// timeout_ns (recording the first timeout in *error) or at once when a timeout is already recorded there. The load
// thread sleeps 128 ns between polls, so that its spin takes few issue slots from its SM's MMA warps.
__device__ __noinline__ void wait_for_rows_slow(const unsigned int* counter, unsigned int value,
                                                unsigned long long timeout_ns, DeviceError* error, int group) {
  (void)wait_counter_at_least(counter, value, timeout_ns, error, WaitKind::kGatheredRows,
                              static_cast<std::uint32_t>(group), blockIdx.x, 128u);
}

// The load thread, before its first load of a tile of group `group`: waits until *counter >= value (acquire,
// system scope), i.e. until the writer of the group's rows of A released them. Then a proxy fence, since those rows
// were written through the generic proxy (a kernel's stores, a copy, a peer's) and the TMA reads them through the
// async proxy.
__device__ __forceinline__ void wait_for_rows(const unsigned int* counter, unsigned int value,
                                              unsigned long long timeout_ns, DeviceError* error, int group) {
  if (ptx::ld_acquire_sys(counter) < value) wait_for_rows_slow(counter, value, timeout_ns, error, group);
  ptx::fence_proxy_async_global();
}

}  // namespace ovl::kernels::detail
