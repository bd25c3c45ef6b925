// The Hopper GEMM that signals finished tiles (see ovl/kernels/gemm.hpp for the contract).

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "gemm_sm90_detail.cuh"
#include "ovl/cuda_check.hpp"
#include "ovl/error.hpp"
#include "ovl/kernels/gemm.hpp"
#include "ovl/tile_order.hpp"

namespace ovl::kernels {
namespace {

// One CTA computes a 128 x 256 tile, K in k-blocks of one 128-byte swizzle row: 64 bf16/fp16 elements (kTileK), 128
// FP8 ones (kTileKFp8). A k-block's tiles take the same bytes either way, and four wgmma k-steps (k16; FP8: k32).
constexpr int kTileM = 128;
constexpr int kTileN = 256;
constexpr int kTileK = 64;
constexpr int kTileKFp8 = 128;
// Elements of A (and B) of type TA per k-block: 128 bytes of a row. (A template variable: a local constexpr in the
// kernel changed the order of the bf16 kernels' instructions.)
template <typename TA>
constexpr int kBlockK = sizeof(TA) == 1 ? kTileKFp8 : kTileK;
constexpr int kThreads = 384;  // warpgroup 0: producer; warpgroups 1, 2: consumers (64 rows each)
constexpr int kConsumerWarps = 8;
constexpr int kProducerRegs = 40;
constexpr int kConsumerRegs = 232;                 // 128 x 40 + 256 x 232 = 64512 <= 65536 registers per SM
constexpr int kStageBytesA = kTileM * kTileK * 2;  // 16 KB
constexpr int kStageBytesB = kTileN * kTileK * 2;  // 32 KB
constexpr int kChunkBytesB = kTileK * 64 * 2;      // MN-major B: one 64-column chunk, 8 KB
// Staged epilogue (kTmaStore): the bf16/fp16 tile in shared memory as four 128-row x 64-column chunks (128-byte
// rows, 128-byte swizzle), each stored by one TMA box.
constexpr int kStagingChunkBytes = kTileM * 64 * 2;  // 16 KB
constexpr int kStagingBytes = 4 * kStagingChunkBytes;
// The ring has 3 stages with the whole-tile staging (4 x 48 KB + 64 KB is over 227 KB); 4 with the split epilogue
// (kTmaStoreSplit), whose staging holds half a tile (two chunks, 32 KB).
constexpr int stages_of(bool split) { return split ? 4 : 3; }
constexpr int staging_bytes_of(bool split) { return split ? kStagingBytes / 2 : kStagingBytes; }
constexpr int smem_bytes_of(bool split) {
  const int stages = stages_of(split);
  const int barriers = 2 * stages + 2;  // full[], empty[], stored, staging_free
  return stages * (kStageBytesA + kStageBytesB) + staging_bytes_of(split) + barriers * 8 + 1024;  // + slack
}
static_assert(smem_bytes_of(false) <= 227 * 1024 && smem_bytes_of(true) <= 227 * 1024);
constexpr int kMaxDevices = 64;

enum : int { kOrderRowBand = 0, kOrderSwizzle = 1, kOrderExplicit = 2 };

struct KernelParams {
  int m, n, k;
  int tiles_m, tiles_n, tiles, k_blocks;
  int tile_order, swizzle;
  const int* explicit_order;
  void* d;
  int tile_major;
  int signal;  // group counters or timestamps present: the per-tile barrier and publish step run
  unsigned int* group_counters;
  // AllGather before the GEMM (GemmArguments::wait_counters): nullptr, or the counters the load thread waits on.
  const unsigned int* wait_counters;
  unsigned int wait_value;
  unsigned long long wait_timeout_ns;
  DeviceError* wait_error;
  int num_groups;
  const int* group_of_position;  // workspace map when num_groups > kGemmMaxInlineGroups, else nullptr
  unsigned long long* tile_timestamps;
  unsigned long long* cta_timestamps;  // one per CTA: when it started (before grid_dependency_wait), or nullptr
  // Stream-K: the tiles at positions [sk_first, tiles) are cut into pieces; sk_first == tiles when
  // off. Split schedule (sk_splits >= 2): sk_splits equal k ranges per tile. Contiguous (sk_splits == 0): their
  // sk_iters k-block iterations shared over CTAs [0, sk_ctas).
  int sk_first, sk_splits, sk_ctas, sk_max_pieces;
  long long sk_iters;
  unsigned long long* sk_counters;  // one per stream-K tile: its pieces finished so far (detail::count_arrival)
  float* sk_slots;            // per stream-K tile, sk_max_pieces fp32 partial tiles in the consumers' thread layout
  // Half tiles: the tiles at positions [half_first, tiles) run as two 128 x 128 units each (left, right), after the
  // whole tiles; half_first == tiles when off (never together with stream-K). half_counters holds one counter per
  // half-split tile (detail::second_of_two_arrivals), used with signals: the second half to be stored signals.
  int half_first;
  unsigned long long* half_counters;
  unsigned int epoch;  // this launch's number for the arrival counters (never 0)
  // MN-major B, whole tiles: tmap_b_half is the chunked 3-D map and a stage's B is one box (else four).
  int b_chunked;
  int group_end[kGemmMaxInlineGroups];  // exclusive prefix sums of tile_groups (inline case)
  // FP8 only: the per-tensor scales, D = a_scale[0] * b_scale[0] * (A x B) (after the fields above, so that the
  // bf16/fp16 kernels read their parameters at the offsets they always did).
  const float* a_scale;
  const float* b_scale;
};

// ---- the tile scheduler ---------------------------------------------------------------------------------------------
// Which units of work a CTA runs, in which order: every role of the CTA walks the same list (work_begin, work_next),
// so that the producer's loads, the consumers' k-loops and the store thread's stores meet unit for unit. Tile order,
// tile groups, half tiles and the stream-K pieces (and their fixup, stream_k_piece) live here.

__device__ __forceinline__ int tile_at(const KernelParams& p, int position) {
  if (p.tile_order == kOrderRowBand) return position;
  if (p.tile_order == kOrderExplicit) return __ldg(p.explicit_order + position);
  return swizzled_tile(position, p.swizzle, p.tiles_m, p.tiles_n);
}

__device__ __forceinline__ int group_at(const KernelParams& p, int position) {
  if (p.group_of_position != nullptr) return __ldg(p.group_of_position + position);
  int lo = 0, hi = p.num_groups - 1;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (position < p.group_end[mid]) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

// The stream-K CTA whose iterations [sk_start(b), sk_start(b + 1)) hold iteration `it`, sk_start(b) = b * iters /
// ctas: the largest b with b * iters / ctas <= it. Host and device share it (the host sizes the workspace with it).
__host__ __device__ __forceinline__ int stream_k_cta_of(long long it, int ctas, long long iters) {
  return int(((it + 1) * ctas + iters - 1) / iters) - 1;
}

// One unit of a CTA's work: k-blocks [kb_begin, kb_end) of the tile at `position`. piece < 0: the whole tile; else
// piece `piece` (in k order) of the tile's `pieces`. half < 0: all 256 columns; 0 or 1: columns [128 half, +128).
struct Work {
  int position, kb_begin, kb_end, piece, pieces, half;
};

// A CTA's list of work, which every role of the CTA walks alike: the units u = blockIdx.x, blockIdx.x + gridDim.x,
// ...; unit u < min(sk_first, half_first) is the whole tile at position u. Half tiles: unit half_first + v is half
// v % 2 of the tile at position half_first + v / 2 (the two halves of a tile on neighbouring CTAs). Split schedule:
// unit sk_first + v is piece v / n of the stream-K tile v % n (n stream-K tiles; piece i: k-blocks [i kb / s,
// (i + 1) kb / s)). Contiguous schedule: after its whole tiles, CTA b (below sk_ctas) takes the stream-K iterations
// [sk_start(b), sk_start(b + 1)), cut where a tile ends; iteration i is k-block i % k_blocks of the stream-K tile
// i / k_blocks.
struct WorkCursor {
  int position;
  long long it, it_end;
};

__device__ __forceinline__ WorkCursor work_begin(const KernelParams& p) {
  WorkCursor c{int(blockIdx.x), 0, 0};
  if (int(blockIdx.x) < p.sk_ctas) {
    c.it = (long long)blockIdx.x * p.sk_iters / p.sk_ctas;
    c.it_end = (long long)(blockIdx.x + 1) * p.sk_iters / p.sk_ctas;
  }
  return c;
}

__device__ __forceinline__ bool work_next(const KernelParams& p, WorkCursor& c, Work& w) {
  if (c.position < p.sk_first && c.position < p.half_first) {
    w = Work{c.position, 0, p.k_blocks, -1, 1, -1};
    c.position += gridDim.x;
    return true;
  }
  if (p.half_first < p.tiles) {
    const int v = c.position - p.half_first;
    if (v >= 2 * (p.tiles - p.half_first)) return false;
    w = Work{p.half_first + v / 2, 0, p.k_blocks, -1, 1, v % 2};
    c.position += gridDim.x;
    return true;
  }
  if (p.sk_splits > 0) {
    const int n = p.tiles - p.sk_first;
    const int v = c.position - p.sk_first;
    if (v >= n * p.sk_splits) return false;
    const int piece = v / n;
    w = Work{p.sk_first + v % n, piece * p.k_blocks / p.sk_splits, (piece + 1) * p.k_blocks / p.sk_splits, piece,
             p.sk_splits, -1};
    c.position += gridDim.x;
    return true;
  }
  if (c.it >= c.it_end) return false;
  const int local = int(c.it / p.k_blocks);
  const long long tile_begin = (long long)local * p.k_blocks;
  w.position = p.sk_first + local;
  w.kb_begin = int(c.it - tile_begin);
  w.kb_end = int(min((long long)p.k_blocks, c.it_end - tile_begin));
  const int first = stream_k_cta_of(tile_begin, p.sk_ctas, p.sk_iters);
  w.pieces = stream_k_cta_of(tile_begin + p.k_blocks - 1, p.sk_ctas, p.sk_iters) - first + 1;
  w.piece = w.pieces == 1 ? -1 : int(blockIdx.x) - first;
  w.half = -1;
  c.it = tile_begin + w.kb_end;
  return true;
}

// A stream-K piece, on the 256 consumer threads: store this thread's accumulators into the piece's slot, count the
// piece, and if it is the tile's last, replace the accumulators by the sum of all the tile's partials, in piece
// order (the same bits whichever piece is last). Returns whether it was the last (then the tile is stored).
// `last` is a shared flag the store thread reads too (after the `stored` barrier).
__device__ __forceinline__ bool stream_k_piece(const KernelParams& p, const Work& w, float (&acc)[128],
                                               volatile int* last) {
  constexpr int kTileFloat4s = kTileM * kTileN / 4;
  const int ct = int(threadIdx.x) - 128;  // 0 .. 255
  const int local = w.position - p.sk_first;
  float4* slots = reinterpret_cast<float4*>(p.sk_slots) + size_t(local) * p.sk_max_pieces * kTileFloat4s;
  float4* mine = slots + size_t(w.piece) * kTileFloat4s;
  // Slot layout: float4 c of consumer thread ct at c * 256 + ct, so a warp's store covers 512 contiguous bytes.
#pragma unroll
  for (int c = 0; c < 32; ++c) {
    __stcg(mine + c * 256 + ct, make_float4(acc[4 * c], acc[4 * c + 1], acc[4 * c + 2], acc[4 * c + 3]));
  }
  detail::named_barrier_sync(1, 256);
  if (ct == 0) {
    *last = detail::count_arrival(p.sk_counters + local, p.epoch) == unsigned(w.pieces - 1);
    if (*last) detail::clear_arrivals(p.sk_counters + local);
  }
  detail::named_barrier_sync(1, 256);
  if (!*last) return false;
#pragma unroll
  for (int c = 0; c < 32; ++c) {
    const float4 v = __ldcg(slots + c * 256 + ct);
    acc[4 * c] = v.x;
    acc[4 * c + 1] = v.y;
    acc[4 * c + 2] = v.z;
    acc[4 * c + 3] = v.w;
  }
  for (int i = 1; i < w.pieces; ++i) {
    const float4* src = slots + size_t(i) * kTileFloat4s;
#pragma unroll
    for (int c = 0; c < 32; ++c) {
      const float4 v = __ldcg(src + c * 256 + ct);
      acc[4 * c] += v.x;
      acc[4 * c + 1] += v.y;
      acc[4 * c + 2] += v.z;
      acc[4 * c + 3] += v.w;
    }
  }
  return true;
}

// ---- helpers of the mainloop (wgmma_step) and the epilogue (pack2) --------------------------------------------------

template <typename T>
__device__ __forceinline__ uint32_t pack2(float x, float y) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(x, y);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}


// One k-step (k16; FP8: k32) on the whole tile (64 x 256 per consumer warpgroup) or, kHalf, on half a tile (64 x
// 128, accumulators 0 .. 63). TA, TB: the elements of A and B (bf16 x bf16, fp16 x fp16, e4m3 x e4m3, e4m3 x e5m2).
template <typename TA, typename TB, int kTransB, bool kHalf>
__device__ __forceinline__ void wgmma_step(float (&acc)[128], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  constexpr bool kBF16 = std::is_same_v<TA, __nv_bfloat16>;
  if constexpr (sizeof(TA) == 1) {
    static_assert(kTransB == 0, "FP8 wgmma reads both operands K-major");
    detail::wgmma_k32_e4m3<kHalf, std::is_same_v<TB, __nv_fp8_e5m2>>(acc, desc_a, desc_b, scale_d);
  } else if constexpr (kHalf) {
    kBF16 ? detail::wgmma_m64n128k16_bf16<kTransB>(acc, desc_a, desc_b, scale_d)
          : detail::wgmma_m64n128k16_f16<kTransB>(acc, desc_a, desc_b, scale_d);
  } else {
    kBF16 ? detail::wgmma_m64n256k16_bf16<kTransB>(acc, desc_a, desc_b, scale_d)
          : detail::wgmma_m64n256k16_f16<kTransB>(acc, desc_a, desc_b, scale_d);
  }
}

// ---- the mainloop ---------------------------------------------------------------------------------------------------
// The ring of kStages slots in shared memory, each one k-block of A (128 x kBlockK, 16 KB) and of B (256 x kBlockK,
// 32 KB), 128-byte swizzle (the layout wgmma's descriptors name); its full / empty barriers; the producer thread's
// TMA loads into it and the consumers' wgmmas out of it. Each thread that walks the ring (the producer thread, every
// consumer thread) keeps its own place in it: `stage` and the parity `phase` of that slot's barriers.
// Memory ordering: a slot's TMA writes are acquired through its full barrier (complete_tx) before wgmma reads it;
// wgmma's reads of a slot finish (wgmma.wait_group) before the slot's empty arrival, which the producer acquires
// before overwriting it.
//
// FP8 (TA = __nv_fp8_e4m3, TB = e4m3 or e5m2): k-blocks of 128 elements (the same 128-byte rows, so the same tiles,
// swizzle, descriptors and their 32-byte k-step advance), k32 wgmma, K-major B only (kTransB = 0), and the
// accumulators multiplied by a_scale[0] * b_scale[0] after the k-loop (before a stream-K piece is written, so the
// pieces sum scaled partials).
template <typename TA, typename TB, int kTransB, int kStages>
struct Mainloop {
  uint8_t* smem_a;  // kStages A slots
  uint8_t* smem_b;  // kStages B slots
  uint64_t* full;   // kStages barriers
  uint64_t* empty;  // kStages barriers
  const CUtensorMap* tmap_a;
  const CUtensorMap* tmap_b;
  const CUtensorMap* tmap_b_half;
  int stage = 0;
  uint32_t phase = 0;

  __device__ __forceinline__ void init_barriers() const {
    for (int s = 0; s < kStages; ++s) {
      detail::mbarrier_init(&full[s], 1);
      detail::mbarrier_init(&empty[s], kConsumerWarps);
    }
  }

  __device__ __forceinline__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }

  // Producer thread: the TMA loads of unit w's k-blocks, A (128 x 64) and B (256 x 64 K-major; MN-major 64 x 256 as
  // four 64 x 64 chunks: one 3-D box when N % 64 == 0, else four 2-D boxes). Per k-block, step 0: wait until the
  // slot is empty, step 1: arm the slot's full barrier with the byte count, step 2: issue the copies.
  __device__ __forceinline__ void load(const KernelParams& p, const Work& w) {
    const int tile = tile_at(p, w.position);
    const int m0 = (tile / p.tiles_n) * kTileM;
    // A half tile loads A as usual and the 128 B columns (rows, K-major) of its half into the first half of the B
    // slot (K-major: a 128-row box; MN-major: two 2-D 64-column boxes).
    const int n0 = (tile % p.tiles_n) * kTileN + (w.half > 0 ? kTileN / 2 : 0);
    const int b_bytes = w.half < 0 ? kStageBytesB : kStageBytesB / 2;
    for (int kb = w.kb_begin; kb < w.kb_end; ++kb) {
      detail::mbarrier_wait(&empty[stage], phase ^ 1);
      detail::mbarrier_arrive_expect_tx(&full[stage], kStageBytesA + b_bytes);
      const int k0 = kb * kBlockK<TA>;
      detail::tma_load_2d(smem_a + stage * kStageBytesA, tmap_a, &full[stage], k0, m0);
      if constexpr (kTransB == 0) {
        detail::tma_load_2d(smem_b + stage * kStageBytesB, w.half < 0 ? tmap_b : tmap_b_half, &full[stage], k0, n0);
      } else if (p.b_chunked && w.half < 0) {
        detail::tma_load_3d(smem_b + stage * kStageBytesB, tmap_b_half, &full[stage], 0, k0, n0 / 64);
      } else {
        for (int c = 0; c < b_bytes / kChunkBytesB; ++c) {
          detail::tma_load_2d(smem_b + stage * kStageBytesB + c * kChunkBytesB, tmap_b, &full[stage], n0 + 64 * c, k0);
        }
      }
      advance();
    }
  }

  // Releases ring slot s: one arrival per consumer warp.
  __device__ __forceinline__ void release(int s, int lane) const {
    if (lane == 0) detail::mbarrier_arrive(&empty[s]);
  }

  // Consumers (warpgroup `consumer` owns 64 rows of the tile and their 64 x 256 fp32 accumulators in registers): unit
  // w's k-loop. Per k-block: wait full, 4 x wgmma m64n256k16 (a half tile: m64n128k16 on the first 64 accumulators),
  // keep one wgmma group in flight and release the previous slot. kDefers (an epilogue that defers its staging):
  // under_first_kblock() runs while the unit's first k-block is on the tensor cores.
  template <bool kDefers, typename F>
  __device__ __forceinline__ void mma(const KernelParams& p, const Work& w, float (&acc)[128], int consumer,
                                      int lane, F&& under_first_kblock) {
    int previous_stage = 0;
    // The k-loop, once per unit shape (a branch inside it would make ptxas serialize the wgmmas).
    const auto k_loop = [&](auto half_tile) {
      // Waits for k-block kb's slot and issues its wgmmas (one group).
      const auto issue = [&](int kb) {
        detail::mbarrier_wait(&full[stage], phase);
        const uint32_t a_base = detail::smem_addr(smem_a + stage * kStageBytesA + consumer * 64 * 128);
        const uint32_t b_base = detail::smem_addr(smem_b + stage * kStageBytesB);
        detail::wgmma_fence();
        // K-major, 128-byte swizzle: 8-row groups 1024 bytes apart; a k-step (k16; FP8: k32) is 32 bytes along the
        // row.
        // MN-major B: 64-column chunks kChunkBytesB apart (leading), 8-k-row groups 1024 bytes apart (stride);
        // a k16 step is 16 rows of 128 bytes. Built once per k-block, moved on per step (an add, not a rebuild).
        const uint64_t desc_a0 = detail::make_smem_desc(a_base, 16, 1024);
        const uint64_t desc_b0 = detail::make_smem_desc(b_base, kTransB ? kChunkBytesB : 16, 1024);
#pragma unroll
        for (int kk = 0; kk < kTileK / 16; ++kk) {
          const uint64_t desc_a = detail::smem_desc_advance(desc_a0, kk * 32);
          const uint64_t desc_b = detail::smem_desc_advance(desc_b0, kTransB ? kk * 2048 : kk * 32);
          const int scale_d = (kb > w.kb_begin || kk > 0) ? 1 : 0;
          wgmma_step<TA, TB, kTransB, decltype(half_tile)::value>(acc, desc_a, desc_b, scale_d);
        }
        detail::wgmma_commit();
      };
      // Keeps one group in flight: waits for k-block kb - 1's and releases its slot.
      const auto retire = [&](int kb) {
        detail::wgmma_wait<1>();
        if (kb > w.kb_begin) release(previous_stage, lane);
        previous_stage = stage;
        advance();
      };
      int kb = w.kb_begin;
      if constexpr (kDefers) {
        issue(kb);
        under_first_kblock();
        retire(kb);
        ++kb;
      }
      for (; kb < w.kb_end; ++kb) {
        issue(kb);
        retire(kb);
      }
    };
    if (w.half < 0) {
      k_loop(std::false_type{});
    } else {
      k_loop(std::true_type{});
    }
    detail::wgmma_wait<0>();
    detail::fence_accumulators(acc);
    release(previous_stage, lane);
    if constexpr (sizeof(TA) == 1) {
      // The scales are read per unit (two cached loads) rather than held in a register across the k-loop: the
      // consumers are at their register limit.
      const float scale = __ldg(p.a_scale) * __ldg(p.b_scale);
#pragma unroll
      for (int i = 0; i < 128; ++i) acc[i] *= scale;
    }
  }
};

// ---- the epilogue ---------------------------------------------------------------------------------------------------
// The consumers convert a unit's accumulators to T and stage them in shared memory; the store-and-signal thread
// (thread 32) TMA-stores the staging to D, stamps the tile and releases its group counter. The staging is four
// 128-row x 64-column chunks of the tile (128-byte rows, 128-byte swizzle), each stored by one TMA box; kSplit: two
// chunks (32 KB), which leaves room for a 4th ring stage. Two barriers pass it between the roles, one phase per
// unit (kSplit: two): `stored` (all 256 consumer threads staged the unit; a stream-K piece that is not its tile's
// last stages nothing and still arrives) and `staging_free` (the TMA stores read the staging; at once for a unit
// that stored nothing). Each role counts the phases it passed in `ph`.
//   kTmaStore: at the unit's end the consumers wait until the previous unit's staging was read (`staging_free`),
//     convert and write the 64 x 256 block into the staging chunks with stmatrix (16 x4 per thread, no shuffles; the
//     128-byte swizzle keeps the 8 rows of each 8 x 8 matrix in distinct banks), fence.proxy.async.shared::cta,
//     arrive on `stored`, and go on to the next unit while the store thread's TMA stores drain (TMA clips the boxes
//     at M x N; tile-major output is the 2-D tensor [tiles * 128, 256], so edge tiles get their zeros). A half tile
//     stages chunks 0 and 1, which the store thread stores at the half's columns.
//   Split (kSplit, GemmEpilogue::kTmaStoreSplit; on the H200 0.996x kTmaStore over all rows, ~1% faster on short
//     GEMMs, which ovl::choose_split_epilogue gives it): at the unit's end the consumers stage columns 0 .. 127 (a
//     half tile: its 128 columns) and keep columns 128 .. 255 converted in 32 registers; during the next unit's
//     first k-block (its wgmmas in flight) or after the last unit, they wait until the store thread has read the
//     first phase and stage those (nothing for a half tile or a piece that stores nothing). The store thread stores
//     each phase's two chunks, and stamps and signals after the second.
//   Deferred (kDefer, GemmEpilogue::kTmaStoreDeferred; not with kSplit): the staging is kTmaStore's (64 KB, 3
//     stages) and each unit takes one phase, as there; but at the unit's end the consumers only convert the
//     accumulators into 64 packed registers (pk) and go on; the unit's 16 stmatrix x4, the proxy fence and its
//     `stored` arrival come during the next unit's first k-block (after waiting for the previous unit's
//     `staging_free`) or after the last unit. The store thread is kTmaStore's.
// Memory ordering: each consumer thread's stmatrix stores are ordered before the TMA store by its
// fence.proxy.async.shared::cta and its `stored` arrival (release.cta), acquired by the store thread; the store
// thread's wait_group.read 0 precedes its `staging_free` arrival, which the consumers acquire before writing the
// staging again. Signal: the store thread's wait_group 0 (the TMA stores' writes are performed), then
// red.release.sys.global.add.u32 on the group counter (a release pattern, cumulative, so it covers the tile's
// stores): a reader that acquires the counter at system scope (ld.acquire.sys, or a fence after a relaxed read) sees
// the tile.
template <typename T, bool kSplit, bool kDefer>
struct Epilogue {
  static_assert(!kDefer || !kSplit, "the deferred epilogue is not a split one");
  // The consumers' staging of a unit waits for the next unit's first k-block (Mainloop::mma).
  static constexpr bool kDefers = kSplit || kDefer;

  uint8_t* staging;
  uint64_t* stored;
  uint64_t* handback;  // `staging_free`
  const CUtensorMap* tmap_d;
  // The phases of `stored` / `staging_free` this thread passed so far (one per unit; kSplit: two).
  uint32_t ph = 0;
  // Consumers: this lane's staging address (bind_consumer).
  uint32_t row_base = 0;
  int r8 = 0, lane_half = 0;
  // Staging that waits for the CTA's next unit, where it runs under that unit's first k-block on the tensor cores
  // (or after the last unit): one `stored` phase, owed while `deferred`:
  // - kSplit: the unit's columns 128 .. 255 (pk: their packed pairs, matrices j = 16, 18, ..., 30 at pk[2 (j - 16)]);
  // - kDefer: the whole unit (pk: matrices j = 0, 2, ..., 30 at pk[2 j]; a half tile's first 16).
  // A phase with nothing to stage (a half tile's right half under kSplit, a stream-K piece that stores nothing)
  // still arrives. `deferred_store`: the phase stages; `deferred_half`: kDefer, the unit was a half tile.
  // (A variant that also deferred kSplit's left half, under the next unit's second k-block, measured 1% slower;
  // docs/performance.md, "Tried and not kept". With pk[64], ptxas is at its register limit: that variant's
  // bookkeeping, an int count of owed phases in place of `deferred`, made it serialize kDefer's wgmmas for MN-major B
  // (ptxas -v: C7511), 10% slower. Check ptxas -v for C7511 after changing anything here.)
  uint32_t pk[kDefer ? 64 : 32];
  bool deferred = false, deferred_store = false, deferred_half = false;

  __device__ __forceinline__ void init_barriers() const {
    detail::mbarrier_init(stored, 256);
    detail::mbarrier_init(handback, 1);
  }

  // ---- the store-and-signal thread

  // Stores unit w once the consumers staged it, off the consumers' critical path (waiting for the stores and the
  // system-scope fence take microseconds): per phase, wait on `stored`, TMA-store the staged chunks, wait until the
  // stores have read shared memory, arrive on `staging_free`; then signal. `last`: the unit's stream-K flag
  // (sk_last), read after the unit's first `stored` phase.
  __device__ __forceinline__ void store(const KernelParams& p, const Work& w, const int* last) {
    detail::mbarrier_wait(stored, ph & 1);
    const int tile = tile_at(p, w.position);
    if (w.piece >= 0 && !*last) {          // a piece whose tile another CTA's last piece stores
      detail::mbarrier_arrive(handback);  // staging_free (the consumers did not write it)
      ++ph;
      if constexpr (kSplit) {  // its second phase, empty too
        detail::mbarrier_wait(stored, ph & 1);
        detail::mbarrier_arrive(handback);
        ++ph;
      }
      return;
    }
    const int m0 = (tile / p.tiles_n) * kTileM;
    const int column = w.half > 0 ? kTileN / 2 : 0;  // of the tile: a half stores its 2 chunks there
    const int tile_n0 = (tile % p.tiles_n) * kTileN;
    // Staging chunk c to the tile's columns [col, col + 64) (TMA clips at M x N; nothing past N).
    const auto store_chunk = [&](int c, int col) {
      if (p.tile_major) {
        detail::tma_store_2d(tmap_d, staging + c * kStagingChunkBytes, col, tile * kTileM);
      } else if (tile_n0 + col < p.n) {
        detail::tma_store_2d(tmap_d, staging + c * kStagingChunkBytes, tile_n0 + col, m0);
      }
    };
    if constexpr (kSplit) {
      // Columns [column, column + 128) are staged first; a whole tile's columns 128 .. 255 follow in the
      // consumers' next phase (an empty one for a half tile).
      for (int c = 0; c < 2; ++c) store_chunk(c, column + 64 * c);
      detail::bulk_commit();
      detail::bulk_wait_read_all();
      detail::mbarrier_arrive(handback);  // staging_free
      ++ph;
      detail::mbarrier_wait(stored, ph & 1);
      if (w.half < 0) {
        for (int c = 0; c < 2; ++c) store_chunk(c, kTileN / 2 + 64 * c);
        detail::bulk_commit();
        detail::bulk_wait_read_all();
      }
      detail::mbarrier_arrive(handback);
      ++ph;
    } else {
      const int chunks = w.half < 0 ? 4 : 2;
      for (int c = 0; c < chunks; ++c) store_chunk(c, column + 64 * c);
      detail::bulk_commit();
      detail::bulk_wait_read_all();
      detail::mbarrier_arrive(handback);  // staging_free
      ++ph;
    }
    signal(p, w, tile);
  }

  // When signalling, waits until unit w's stores are written, then writes the tile's timestamp and publishes it on
  // its group counter. Half tiles: after its stores are performed each half counts itself on the tile's half counter
  // (detail::second_of_two_arrivals: an exchange, acq_rel at GPU scope); the second stamps and signals the tile, then
  // clears the counter; the first does none of these.
  __device__ __forceinline__ void signal(const KernelParams& p, const Work& w, int tile) const {
    unsigned long long* half_word = nullptr;  // the second half's arrival word, cleared once the tile is signalled
    if (p.signal) {
      detail::bulk_wait_all();
      // The first of a tile's two halves to be stored leaves the stamp and the signal to the second, which
      // acquires the first's arrival (made after its stores were performed), so its release covers both. The
      // second clears the word after signalling, so that the signal's release does not wait for the clear.
      if (w.half >= 0) {
        unsigned long long* word = p.half_counters + (w.position - p.half_first);
        if (!detail::second_of_two_arrivals(word, p.epoch)) return;
        half_word = word;
      }
    }
    if (p.tile_timestamps != nullptr) p.tile_timestamps[tile] = ptx::global_timer_ns();
    if (p.group_counters != nullptr) detail::signal_tile(p.group_counters + group_at(p, w.position));
    if (half_word != nullptr) detail::clear_arrivals(half_word);
  }

  // ---- the consumers

  // Staging layout shared by the stmatrix stores below: lane l addresses row l % 8 of matrix l / 8 of each x4; kSplit
  // stages columns 0 .. 127 and 128 .. 255 of a tile in turn, both into chunks 0 and 1.
  __device__ __forceinline__ void bind_consumer(int consumer, int warp, int lane) {
    r8 = lane % 8;
    lane_half = lane / 16;  // matrices 2, 3: columns 8 (j + 1)
    row_base = detail::smem_addr(staging) + uint32_t(consumer * 64 + warp * 16 + 8 * ((lane / 8) % 2) + r8) * 128;
  }

  // Stages matrices j, j + 1 (columns 8j .. 8j + 15, j < 16, of the staged half or whole) from four packed words.
  __device__ __forceinline__ void stage_x4(int j, uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3) const {
    const uint32_t unit = uint32_t(((j % 8) + lane_half) ^ r8);
    detail::stmatrix_x4(row_base + uint32_t(j / 8) * kStagingChunkBytes + unit * 16, w0, w1, w2, w3);
  }

  // The owed phase, if any (kSplit, kDefer).
  __device__ __forceinline__ void stage_deferred() {
    if (!deferred) return;
    // The previous phase's TMA stores have read the staging (kSplit: the unit's first half; kDefer: the previous
    // unit's, if any).
    if (!kDefer || ph > 0) detail::mbarrier_wait(handback, (ph - 1) & 1);
    if (deferred_store) {
      if constexpr (kDefer) {
#pragma unroll
        for (int j = 0; j < 32; j += 2) {
          if (j >= 16 && deferred_half) break;
          stage_x4(j, pk[2 * j], pk[2 * j + 1], pk[2 * j + 2], pk[2 * j + 3]);
        }
      } else {  // kSplit: the right half, into chunks 0 and 1
#pragma unroll
        for (int j = 0; j < 16; j += 2) stage_x4(j, pk[2 * j], pk[2 * j + 1], pk[2 * j + 2], pk[2 * j + 3]);
      }
      detail::fence_proxy_async_shared();
    }
    detail::mbarrier_arrive(stored);
    ++ph;
    deferred = false;
  }

  // Unit w's accumulators, at the end of its k-loop; `store`: false for a stream-K piece that is not its tile's last,
  // which stores nothing and still passes both barriers, so that every role counts the same units.
  // Accumulator fragment of m64nNk16: register 4j + 2i + c holds row 16 * warp + lane / 4 + 8i, column
  // 8j + 2 (lane % 4) + c of this warpgroup's 64 x 256 block.
  // Registers 4j + 2i, +1 of every lane form the 8 x 8 matrix (rows 8i.., columns 8j..) stmatrix takes, so
  // one x4 stores columns 8j .. 8j + 15 of the warp's 16 rows: matrices (j, 0), (j, 1), (j + 1, 0), (j + 1, 1).
  // Lane l gives the address of row l % 8 of matrix l / 8: tile row R = 64 consumer + 16 warp + 8 (l / 8 % 2) +
  // l % 8, 16-byte unit u = column / 8 of the row's 64-column chunk, stored at unit u ^ (R % 8) (128B swizzle).
  __device__ __forceinline__ void stage(const Work& w, const float (&acc)[128], bool store) {
    if constexpr (kDefer) {
      // Only the conversion holds the tensor cores up: the stmatrix stores wait for the next unit's first
      // k-block (stage_deferred).
      deferred = true;
      deferred_store = store;
      deferred_half = w.half >= 0;
      if (store) {
#pragma unroll
        for (int j = 0; j < 32; j += 2) {
          if (j >= 16 && w.half >= 0) break;
#pragma unroll
          for (int x = 0; x < 4; ++x) pk[2 * j + x] = pack2<T>(acc[4 * j + 2 * x], acc[4 * j + 2 * x + 1]);
        }
      }
      return;
    }
    if (ph > 0) detail::mbarrier_wait(handback, (ph - 1) & 1);  // the previous phase's staging was read
    if (store) {
#pragma unroll
      for (int j = 0; j < 32; j += 2) {
        // A half tile: columns 0 .. 127 of its accumulators, chunks 0 and 1. kSplit: the same for every unit
        // now; a whole tile's columns 128 .. 255 wait in pk for the second phase.
        if (j >= 16 && (kSplit || w.half >= 0)) break;
        stage_x4(j, pack2<T>(acc[4 * j], acc[4 * j + 1]), pack2<T>(acc[4 * j + 2], acc[4 * j + 3]),
                 pack2<T>(acc[4 * j + 4], acc[4 * j + 5]), pack2<T>(acc[4 * j + 6], acc[4 * j + 7]));
      }
      detail::fence_proxy_async_shared();
    }
    detail::mbarrier_arrive(stored);
    ++ph;
    if constexpr (kSplit) {
      deferred = true;
      deferred_store = store && w.half < 0;
      if (deferred_store) {
#pragma unroll
        for (int j = 16; j < 32; j += 2) {
#pragma unroll
          for (int x = 0; x < 4; ++x) pk[2 * (j - 16) + x] = pack2<T>(acc[4 * j + 2 * x], acc[4 * j + 2 * x + 1]);
        }
      }
    }
  }
};

// ---- the kernel -----------------------------------------------------------------------------------------------------

// Persistent warp-specialized GEMM, D = A x B with fp32 accumulation: the tile scheduler's units, each through the
// Mainloop and the Epilogue above.
//
// Grid: at most sm_count CTAs, fewer when there are fewer units of work (at most one per SM: __launch_bounds__(384,
// 1) and 209 KB (kTmaStore, kTmaStoreDeferred) / 225 KB (split) of shared memory). CTA b visits
// the positions b, b + gridDim.x, ... below sk_first of the tile order and computes tile tile_at(position); with
// stream-K it then computes its pieces of the last tiles (WorkCursor). Each role below walks this same list of
// units.
// Block: 384 threads = 3 warpgroups.
//   warpgroup 0, producer (setmaxnreg.dec to 40): thread 0 issues the TMA loads into the ring (Mainloop::load),
//     thread 32 is the store-and-signal thread (Epilogue::store). The other producer warps exit.
//   warpgroups 1 and 2, consumers (setmaxnreg.inc to 232): each owns 64 rows of the tile and a 64 x 256 fp32
//     accumulator in registers; per unit the k-loop (Mainloop::mma), then the staging (Epilogue::stage).
//   Stream-K pieces: after the mainloop the consumers write their fp32 accumulators to the piece's
//     workspace slot, and one thread counts the piece (detail::count_arrival); the piece that completes the count
//     clears the counter, sums the tile's partials in piece order and goes on as above; the others skip the staging,
//     arrive on `stored`, and the store thread only hands the staging back. Memory ordering: each consumer thread's
//     st.global.cg of its partial, then a named barrier over the 256 consumers, then one thread's
//     atom.acq_rel.gpu.cas on the tile's counter; the thread that sees the last count has acquired every piece's
//     release, and a second named barrier orders the other consumers' ld.global.cg of the partials after it.
// Shared memory (dynamic, 1024-byte aligned): S x 16 KB A stages, S x 32 KB B stages, the 64 KB staging tile (kSplit:
//   32 KB), then S full, S empty, 1 stored and 1 staging_free mbarriers. S = stages_of(kSplit). Static: the two
//   stream-K flags sk_last[2].
// Architecture: sm_90a (TMA, wgmma, setmaxnreg, stmatrix).
// FP8 (TA = __nv_fp8_e4m3, TB = e4m3 or e5m2; T, the output, bf16 or fp16): the same kernel (see Mainloop).
template <typename T, int kTransB, bool kSplit = false, bool kDefer = false, typename TA = T, typename TB = T>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_sm90_kernel(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                     const __grid_constant__ CUtensorMap tmap_b_half, const __grid_constant__ CUtensorMap tmap_d,
                     const __grid_constant__ KernelParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
  // FP8 is sizeof(TA) == 1, spelled out rather than held in local constants: those changed the bf16 kernels' PTX.
  static_assert(sizeof(TA) == 2 || kTransB == 0, "FP8: K-major B");
  constexpr int kStages = stages_of(kSplit);
  extern __shared__ uint8_t smem_raw[];
  const uint32_t pad = (1024u - (detail::smem_addr(smem_raw) & 1023u)) & 1023u;
  uint8_t* smem_a = smem_raw + pad;
  uint8_t* smem_b = smem_a + kStages * kStageBytesA;
  uint8_t* staging = smem_b + kStages * kStageBytesB;
  uint64_t* full = reinterpret_cast<uint64_t*>(staging + staging_bytes_of(kSplit));
  uint64_t* empty = full + kStages;
  Mainloop<TA, TB, kTransB, kStages> mainloop{smem_a, smem_b, full, empty, &tmap_a, &tmap_b, &tmap_b_half};
  using Epi = Epilogue<T, kSplit, kDefer>;
  Epi epilogue{staging, empty + kStages, empty + kStages + 1, &tmap_d};
  // Stream-K: whether unit t's piece was its tile's last, written by a consumer before its `stored` arrival for unit
  // t and read by the store thread after that phase; two entries, so unit t + 1 never overwrites unit t's. Unit t + 2
  // writes entry t & 1 again only after its consumers passed unit t's `staging_free` phase (the epilogue's wait, or
  // kDefer's in stage_deferred), which the store thread arrives on after reading the entry.
  __shared__ int sk_last[2];

  const int warpgroup = threadIdx.x / 128;
  // Launched with programmatic dependent launch, the CTA may start while the previous kernel on the stream is still
  // running: the set-up below touches only shared memory and the kernel parameters, and grid_dependency_wait comes
  // before any global-memory access (a no-op otherwise).
  const unsigned long long cta_start = threadIdx.x == 0 && p.cta_timestamps != nullptr ? ptx::global_timer_ns() : 0;
  if (threadIdx.x == 0) {
    mainloop.init_barriers();
    epilogue.init_barriers();
    // Make the initialized barriers visible to the async proxy (TMA complete_tx) as well.
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    detail::prefetch_tensor_map(&tmap_a);
    detail::prefetch_tensor_map(&tmap_b);
    if ((kTransB == 0 && p.half_first < p.tiles) || p.b_chunked) {
      detail::prefetch_tensor_map(&tmap_b_half);
    }
    detail::prefetch_tensor_map(&tmap_d);
  }
  __syncthreads();
  detail::grid_dependency_wait();
  if (threadIdx.x == 0 && p.cta_timestamps != nullptr) p.cta_timestamps[blockIdx.x] = cta_start;

  if (warpgroup == 0) {
    detail::setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) {
      WorkCursor cursor = work_begin(p);
      Work w;
      int waited = -1;  // the group this thread last waited for (its units' groups come in runs)
      while (work_next(p, cursor, w)) {
        if (p.wait_counters != nullptr) {
          const int g = group_at(p, w.position);
          if (g != waited) {
            detail::wait_for_rows(p.wait_counters + g, p.wait_value, p.wait_timeout_ns, p.wait_error, g);
            waited = g;
          }
        }
        mainloop.load(p, w);
      }
      // This CTA loads nothing more: the next kernel on the stream may launch (with programmatic dependent launch)
      // once every CTA got here, so its CTAs take the SMs as ours exit instead of after a launch gap.
      detail::launch_dependent_grids();
    } else if (threadIdx.x == 32) {
      // Store-and-signal thread: stores and publishes each unit once the consumers staged it.
      WorkCursor cursor = work_begin(p);
      Work w;
      for (uint32_t t = 0; work_next(p, cursor, w); ++t) epilogue.store(p, w, &sk_last[t & 1]);
      detail::bulk_wait_all();  // every write performed before the CTA exits
    }
  } else {
    detail::setmaxnreg_inc<kConsumerRegs>();
    const int consumer = warpgroup - 1;
    const int warp = (threadIdx.x % 128) / 32;
    const int lane = threadIdx.x % 32;
    float acc[128];
    epilogue.bind_consumer(consumer, warp, lane);
    WorkCursor cursor = work_begin(p);
    Work w;
    for (uint32_t t = 0; work_next(p, cursor, w); ++t) {
      mainloop.template mma<Epi::kDefers>(p, w, acc, consumer, lane, [&] { epilogue.stage_deferred(); });
      // A stream-K piece that is not its tile's last stores nothing (and still stages its empty phase).
      const bool store = w.piece < 0 || stream_k_piece(p, w, acc, &sk_last[t & 1]);
      epilogue.stage(w, acc, store);
    }
    if constexpr (Epi::kDefers) epilogue.stage_deferred();  // the last unit's deferred phase
  }
#endif
}

// ---- host side ---------------------------------------------------------------------------------------------------

int ceil_div(int a, int b) { return (a + b - 1) / b; }

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult status{};
    OVL_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &status));
    OVL_CHECK(status == cudaDriverEntryPointSuccess && ptr != nullptr,
              "cuTensorMapEncodeTiled not found in the driver (query result {})", int(status));
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(ptr);
  }();
  return fn;
}

// A tiled tensor map of `rank` dimensions (dims and box innermost first, byte strides of dimensions 1 .. rank - 1),
// dense elements, 128-byte swizzle, 256-byte L2 promotion, zero fill out of bounds.
template <int kRank>
CUtensorMap encode_tensor_map(DType dtype, const void* base, const cuuint64_t (&dims)[kRank],
                              const cuuint64_t (&strides)[kRank - 1], const cuuint32_t (&box)[kRank]) {
  CUtensorMap map{};
  cuuint32_t element_strides[kRank];
  for (cuuint32_t& e : element_strides) e = 1;
  const CUtensorMapDataType type = dtype == DType::kBF16   ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                   : dtype == DType::kFP16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                                               : CU_TENSOR_MAP_DATA_TYPE_UINT8;  // FP8: bytes
  OVL_CU_CHECK(tensor_map_encoder()(
      &map, type, kRank,
      const_cast<void*>(base), dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  return map;
}

// Row-major 2-D tensor of `rows` x `cols` elements, box of box_rows x box_cols.
CUtensorMap make_tensor_map(DType dtype, const void* base, uint64_t rows, uint64_t cols, uint32_t box_rows,
                            uint32_t box_cols) {
  return encode_tensor_map<2>(dtype, base, {cols, rows}, {cols * dtype_bytes(dtype)}, {box_cols, box_rows});
}

// MN-major B (K x N row-major, N % 64 == 0) as the 3-D tensor [N / 64][K][64]: element (c, k, j) is B[k][64 c + j].
// One box {64, 64 (K), 4 (chunks)} lands as four 64 x 64 chunks of 8 KB one after another, the layout the four 2-D
// boxes of make_tensor_map(.., k, n, kTileK, 64) give, in one TMA instruction. Chunks past N read as zeros.
CUtensorMap make_chunked_tensor_map(DType dtype, const void* base, uint64_t k, uint64_t n) {
  return encode_tensor_map<3>(dtype, base, {64, k, n / 64}, {n * 2, 128},
                              {64, uint32_t(kTileK), uint32_t(kTileN / 64)});
}

// Compute capability check, once per device.
void check_device(int device) {
  static std::array<std::once_flag, kMaxDevices> once;
  static std::array<int, kMaxDevices> capability{};
  OVL_CHECK(device >= 0 && device < kMaxDevices, "device {} out of range (at most {} devices)", device, kMaxDevices);
  std::call_once(once[device], [device] {
    int major = 0, minor = 0;
    OVL_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    OVL_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    capability[device] = major * 10 + minor;
  });
  const int cc = capability[device];
  OVL_CHECK(cc == 90,
            "unsupported architecture: device {} has compute capability {}.{}; the GEMM is built for sm_90a (Hopper, "
            "9.0) only",
            device, cc / 10, cc % 10);
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

// The element types of B and D (FP8: b_dtype, out_dtype; else dtype).
DType b_type_of(const GemmArguments& args) { return is_fp8(args.dtype) ? args.b_dtype : args.dtype; }
DType d_type_of(const GemmArguments& args) { return is_fp8(args.dtype) ? args.out_dtype : args.dtype; }
// Elements of A (and B) per k-block: one 128-byte row.
int k_block_of(DType a_dtype) { return is_fp8(a_dtype) ? kTileKFp8 : kTileK; }
int k_blocks_of(const GemmArguments& args) { return ceil_div(args.k, k_block_of(args.dtype)); }

// "" when the FP8 fields of `args` are consistent with its dtype, else what is wrong.
std::string fp8_problem(const GemmArguments& args) {
  if (!is_fp8(args.dtype)) {
    if (args.dtype != DType::kBF16 && args.dtype != DType::kFP16) {
      return fmt::format("dtype = {} is not bf16, fp16 or e4m3", to_string(args.dtype));
    }
    if (args.a_scale != nullptr || args.b_scale != nullptr) {
      return fmt::format("a_scale / b_scale are set but dtype = {}: the scales are for FP8 inputs only",
                         to_string(args.dtype));
    }
    return "";
  }
  if (args.dtype != DType::kE4M3) {
    return fmt::format("dtype = {}: FP8 A must be e4m3 (the pairs are e4m3 x e4m3 and e4m3 x e5m2)",
                       to_string(args.dtype));
  }
  if (!is_fp8(args.b_dtype)) {
    return fmt::format("b_dtype = {} is not e4m3 or e5m2 (dtype is e4m3)", to_string(args.b_dtype));
  }
  if (args.out_dtype != DType::kBF16 && args.out_dtype != DType::kFP16) {
    return fmt::format("out_dtype = {} is not bf16 or fp16 (the FP8 GEMM's output)", to_string(args.out_dtype));
  }
  if (args.b_layout != BLayout::kNxK) {
    return "b_layout = kKxN (B K x N, MN-major) is not supported with FP8 inputs: FP8 wgmma reads B K-major only; "
           "pass B as N x K row-major (BLayout::kNxK)";
  }
  if (args.k % 16 != 0) {
    return fmt::format("K = {} is not a multiple of 16 (FP8 rows of A and B must be multiples of 16 bytes for TMA)",
                       args.k);
  }
  if (args.a_scale == nullptr) return "a_scale is a null pointer (FP8 inputs need their per-tensor scales)";
  if (args.b_scale == nullptr) return "b_scale is a null pointer (FP8 inputs need their per-tensor scales)";
  if (reinterpret_cast<uintptr_t>(args.a_scale) % 4 != 0) {
    return fmt::format("a_scale = {} is not 4-byte aligned", static_cast<const void*>(args.a_scale));
  }
  if (reinterpret_cast<uintptr_t>(args.b_scale) % 4 != 0) {
    return fmt::format("b_scale = {} is not 4-byte aligned", static_cast<const void*>(args.b_scale));
  }
  return "";
}

// "" when the stream-K plan of `args` (stream_k_tiles != 0) can run, else what is wrong with it.
std::string stream_k_problem(const GemmArguments& args, int tiles, int k_blocks) {
  if (args.stream_k_tiles < 1 || args.stream_k_tiles > tiles) {
    return fmt::format("stream_k_tiles = {} is not in 1 .. {} (the tile count)", args.stream_k_tiles, tiles);
  }
  if (args.stream_k_splits != 0) {
    if (args.stream_k_splits < 2 || args.stream_k_splits > k_blocks) {
      return fmt::format("stream_k_splits = {} is not 0 (contiguous) or in 2 .. {} (the k-blocks)",
                         args.stream_k_splits, k_blocks);
    }
    if ((long long)args.stream_k_tiles * args.stream_k_splits > (1LL << 30)) {
      return fmt::format("stream_k_tiles x stream_k_splits = {} x {} pieces is more than 2^30", args.stream_k_tiles,
                         args.stream_k_splits);
    }
    if ((long long)args.stream_k_splits * k_blocks > (1LL << 30)) {
      return fmt::format("stream_k_splits x k-blocks = {} x {} is more than 2^30 (the piece bounds are ints)",
                         args.stream_k_splits, k_blocks);
    }
    return "";
  }
  if (args.stream_k_ctas < 1 || args.stream_k_ctas > args.sm_count) {
    return fmt::format("stream_k_ctas = {} is not in 1 .. {} (sm_count)", args.stream_k_ctas, args.sm_count);
  }
  const long long iters = (long long)args.stream_k_tiles * k_blocks;
  if (iters < 2LL * args.stream_k_ctas) {
    return fmt::format("stream_k_ctas = {} is more than half the {} k-block iterations of the {} stream-K tiles",
                       args.stream_k_ctas, iters, args.stream_k_tiles);
  }
  return "";
}

constexpr size_t kSlotBytes = size_t(kTileM) * kTileN * sizeof(float);  // one fp32 partial tile, 128 KB

// The most pieces any of `tiles` stream-K tiles is cut into when their iterations are shared over `ctas` CTAs.
int stream_k_max_pieces(int tiles, int k_blocks, int ctas) {
  const long long iters = (long long)tiles * k_blocks;
  int most = 1;
  for (int t = 0; t < tiles; ++t) {
    const long long begin = (long long)t * k_blocks;
    most = std::max(most, stream_k_cta_of(begin + k_blocks - 1, ctas, iters) - stream_k_cta_of(begin, ctas, iters) + 1);
  }
  return most;
}

// Where the workspace's parts are: the position -> group map (more than kGemmMaxInlineGroups groups), the stream-K
// counters and partials, or the half-tile counters; each part 256-byte aligned.
struct WorkspaceLayout {
  size_t group_map = 0, counters = 0, slots = 0, bytes = 0;
};

// A fresh number for each launch that counts arrivals (detail::count_arrival, detail::second_of_two_arrivals). Within a
// process no two launches share one until 2^31 launches later. The top bit is set and the sequence starts at a random
// point, so that ordinary data a workspace held before (the group map's small integers, a word of zeros) is not taken
// for this launch's arrivals: that would need the word's high 32 bits to equal the epoch exactly.
unsigned int next_epoch() {
  static std::atomic<unsigned int> counter{std::random_device{}()};
  return 0x80000000u | counter.fetch_add(1, std::memory_order_relaxed);
}

size_t align256(size_t x) { return (x + 255) / 256 * 256; }

WorkspaceLayout workspace_layout(const GemmArguments& args, const GemmStreamKPlan& sk) {
  WorkspaceLayout w;
  if (args.tile_groups.size() > size_t(kGemmMaxInlineGroups)) w.bytes = size_t(gemm_tile_count(args)) * sizeof(int);
  if (sk.tiles > 0) {
    w.counters = align256(w.bytes);
    w.slots = align256(w.counters + size_t(sk.tiles) * sizeof(unsigned long long));
    w.bytes = w.slots + size_t(sk.tiles) * sk.max_pieces * kSlotBytes;
  } else if (args.half_tiles > 0) {  // reserved with or without signals: the size must not hang on pointers
    w.counters = align256(w.bytes);
    w.bytes = w.counters + size_t(args.half_tiles) * sizeof(unsigned long long);
  }
  return w;
}

}  // namespace


GemmTileShape gemm_tile_shape(DType dtype) { return {kTileM, kTileN, k_block_of(dtype)}; }

int gemm_tile_count(const GemmArguments& args) {
  if (args.m <= 0 || args.n <= 0) return 0;
  return ceil_div(args.m, kTileM) * ceil_div(args.n, kTileN);
}

std::string gemm_can_implement(const GemmArguments& args) {
  if (args.m <= 0) return fmt::format("M = {} must be positive", args.m);
  if (args.n <= 0) return fmt::format("N = {} must be positive", args.n);
  if (args.k <= 0) return fmt::format("K = {} must be positive", args.k);
  if (args.k % 8 != 0) return fmt::format("K = {} is not a multiple of 8 (TMA needs 16-byte rows)", args.k);
  if (args.n % 8 != 0) return fmt::format("N = {} is not a multiple of 8 (TMA needs 16-byte rows)", args.n);
  if (const std::string why = fp8_problem(args); !why.empty()) return why;
  if (args.epilogue != GemmEpilogue::kAuto && args.epilogue != GemmEpilogue::kTmaStore &&
      args.epilogue != GemmEpilogue::kTmaStoreSplit && args.epilogue != GemmEpilogue::kTmaStoreDeferred) {
    return fmt::format("epilogue = {} is not kAuto, kTmaStore, kTmaStoreSplit or kTmaStoreDeferred", int(args.epilogue));
  }
  if (args.a == nullptr) return "a is a null pointer";
  if (args.b == nullptr) return "b is a null pointer";
  if (args.d == nullptr) return "d is a null pointer";
  if (!aligned16(args.a)) return fmt::format("a = {} is not 16-byte aligned", args.a);
  if (!aligned16(args.b)) return fmt::format("b = {} is not 16-byte aligned", args.b);
  if (!aligned16(args.d)) return fmt::format("d = {} is not 16-byte aligned", args.d);
  if (args.sm_count <= 0) return fmt::format("sm_count = {} must be positive", args.sm_count);
  if (args.tile_order == TileOrder::kSwizzle && args.swizzle <= 0) {
    return fmt::format("swizzle = {} must be positive", args.swizzle);
  }
  if (args.tile_order == TileOrder::kExplicit && args.explicit_order == nullptr) {
    return "explicit_order is a null pointer (tile_order is kExplicit)";
  }
  const int tiles = gemm_tile_count(args);
  if (args.stream_k_tiles != 0) {
    if (const std::string why = stream_k_problem(args, tiles, k_blocks_of(args)); !why.empty()) return why;
  }
  if (args.half_tiles != 0) {
    if (args.half_tiles < 1 || args.half_tiles > tiles) {
      return fmt::format("half_tiles = {} is not in 1 .. {} (the tile count)", args.half_tiles, tiles);
    }
    if (args.stream_k_tiles != 0) {
      return fmt::format("half_tiles = {} and stream_k_tiles = {}: at most one of them may be set", args.half_tiles,
                         args.stream_k_tiles);
    }
  }
  if (!args.tile_groups.empty()) {
    long long sum = 0;
    for (size_t g = 0; g < args.tile_groups.size(); ++g) {
      if (args.tile_groups[g] <= 0) return fmt::format("tile_groups[{}] = {} must be positive", g, args.tile_groups[g]);
      sum += args.tile_groups[g];
    }
    if (sum != tiles) {
      return fmt::format("tile_groups sum to {}, but the GEMM has {} tiles ({} x {} of {} x {})", sum, tiles,
                         ceil_div(args.m, kTileM), ceil_div(args.n, kTileN), kTileM, kTileN);
    }
    if (args.group_counters == nullptr && args.wait_counters == nullptr) {
      return "group_counters and wait_counters are both null pointers (tile_groups is not empty)";
    }
  } else if (args.group_counters != nullptr) {
    return "group_counters is set but tile_groups is empty";
  } else if (args.wait_counters != nullptr) {
    return "wait_counters is set but tile_groups is empty (the waits follow the tile groups)";
  }
  if (args.wait_counters != nullptr) {
    if (args.wait_error == nullptr) return "wait_counters is set but wait_error is a null pointer";
    if (args.wait_timeout_ns == 0) return "wait_timeout_ns = 0: a wait would give up at once";
    if (args.wait_value == 0) return "wait_value = 0: every wait would pass at once";
  }
  return "";
}

GemmStreamKPlan gemm_stream_k_plan(const GemmArguments& args) {
  if (args.stream_k_tiles == 0 || args.m <= 0 || args.n <= 0 || args.k <= 0 || args.sm_count <= 0) return {};
  const int tiles = gemm_tile_count(args);
  const int k_blocks = k_blocks_of(args);
  if (!stream_k_problem(args, tiles, k_blocks).empty()) return {};  // gemm_can_implement names it
  if (args.stream_k_splits > 0) return {args.stream_k_tiles, args.stream_k_splits, 0, args.stream_k_splits};
  return {args.stream_k_tiles, 0, args.stream_k_ctas,
          stream_k_max_pieces(args.stream_k_tiles, k_blocks, args.stream_k_ctas)};
}

size_t gemm_workspace_bytes(const GemmArguments& args) {
  return workspace_layout(args, gemm_stream_k_plan(args)).bytes;
}

size_t gemm_output_bytes(const GemmArguments& args) {
  const size_t elements = args.output_layout == OutputLayout::kTileMajor
                              ? size_t(gemm_tile_count(args)) * kTileM * kTileN
                              : size_t(std::max(args.m, 0)) * size_t(std::max(args.n, 0));
  return elements * 2;
}

// Calls f with the kernel instantiation for the element types and B layout (the other parameters fixed by the caller).
// FP8: K-major B only (gemm_can_implement refuses the other).
template <bool kSplit, bool kDefer, typename F>
void with_kernel(const GemmArguments& args, bool b_mn_major, F&& f) {
  const DType dtype = args.dtype;
  if (is_fp8(dtype)) {
    using E4M3 = __nv_fp8_e4m3;
    using E5M2 = __nv_fp8_e5m2;
    const bool b_e5m2 = args.b_dtype == DType::kE5M2;
    if (args.out_dtype == DType::kBF16) {
      b_e5m2 ? f(gemm_sm90_kernel<__nv_bfloat16, 0, kSplit, kDefer, E4M3, E5M2>)
             : f(gemm_sm90_kernel<__nv_bfloat16, 0, kSplit, kDefer, E4M3, E4M3>);
    } else {
      b_e5m2 ? f(gemm_sm90_kernel<__half, 0, kSplit, kDefer, E4M3, E5M2>)
             : f(gemm_sm90_kernel<__half, 0, kSplit, kDefer, E4M3, E4M3>);
    }
    return;
  }
  if (dtype == DType::kBF16) {
    b_mn_major ? f(gemm_sm90_kernel<__nv_bfloat16, 1, kSplit, kDefer>)
               : f(gemm_sm90_kernel<__nv_bfloat16, 0, kSplit, kDefer>);
  } else {
    b_mn_major ? f(gemm_sm90_kernel<__half, 1, kSplit, kDefer>) : f(gemm_sm90_kernel<__half, 0, kSplit, kDefer>);
  }
}

// gemm_launch_plan for arguments gemm_can_implement has accepted.
GemmLaunchPlan launch_plan_of(const GemmArguments& args) {
  GemmLaunchPlan plan;
  plan.epilogue = args.epilogue == GemmEpilogue::kAuto ? GemmEpilogue::kTmaStore : args.epilogue;
  plan.stream_k = gemm_stream_k_plan(args);
  const int tiles = gemm_tile_count(args);
  const GemmStreamKPlan& sk = plan.stream_k;
  const int sk_first = tiles - sk.tiles, half_first = tiles - args.half_tiles;
  // Whole tiles (and split pieces) fill at most sm_count CTAs; the contiguous schedule needs its `ctas` (at most
  // sm_count).
  plan.grid = args.half_tiles > 0 ? std::min(args.sm_count, half_first + 2 * args.half_tiles)
              : sk.splits > 0       ? std::min(args.sm_count, sk_first + sk.tiles * sk.splits)
                                    : std::max(std::min(args.sm_count, sk_first), sk.ctas);
  plan.threads = kThreads;
  const bool split = plan.epilogue == GemmEpilogue::kTmaStoreSplit;
  plan.stages = stages_of(split);
  plan.smem_bytes = smem_bytes_of(split);
  plan.b_single_box = args.b_layout == BLayout::kKxN && args.n % 64 == 0 && half_first > 0;
  return plan;
}

GemmLaunchPlan gemm_launch_plan(const GemmArguments& args) {
  if (const std::string why = gemm_can_implement(args); !why.empty()) OVL_FAIL("gemm_launch_plan: {}", why);
  return launch_plan_of(args);
}

void gemm_run(const GemmArguments& args, void* workspace, cudaStream_t stream) {
  if (const std::string why = gemm_can_implement(args); !why.empty()) OVL_FAIL("gemm_run: {}", why);
  const GemmLaunchPlan plan = launch_plan_of(args);
  const GemmStreamKPlan sk = plan.stream_k;
  const WorkspaceLayout layout = workspace_layout(args, sk);
  if (layout.bytes > 0) {
    OVL_CHECK(workspace != nullptr,
              "gemm_run: the GEMM needs a workspace of {} bytes ({} tile groups, stream-K over {} tiles, {} half "
              "tiles), got a null pointer",
              layout.bytes, args.tile_groups.size(), sk.tiles, args.half_tiles);
    OVL_CHECK(aligned16(workspace), "gemm_run: workspace = {} is not 16-byte aligned", workspace);
  }
  uint8_t* ws = static_cast<uint8_t*>(workspace);

  int device = 0;
  OVL_CUDA_CHECK(cudaGetDevice(&device));
  check_device(device);

  KernelParams p{};
  p.m = args.m;
  p.n = args.n;
  p.k = args.k;
  p.tiles_m = ceil_div(args.m, kTileM);
  p.tiles_n = ceil_div(args.n, kTileN);
  p.tiles = p.tiles_m * p.tiles_n;
  p.k_blocks = k_blocks_of(args);
  p.a_scale = args.a_scale;
  p.b_scale = args.b_scale;
  p.tile_order = args.tile_order == TileOrder::kRowBand   ? kOrderRowBand
                 : args.tile_order == TileOrder::kSwizzle ? kOrderSwizzle
                                                              : kOrderExplicit;
  p.swizzle = args.swizzle;
  p.explicit_order = args.explicit_order;
  p.d = args.d;
  p.tile_major = args.output_layout == OutputLayout::kTileMajor;
  p.group_counters = args.group_counters;
  p.wait_counters = args.wait_counters;
  p.wait_value = args.wait_value;
  p.wait_timeout_ns = args.wait_timeout_ns;
  p.wait_error = args.wait_error;
  p.tile_timestamps = args.tile_timestamps;
  p.cta_timestamps = args.cta_timestamps;
  p.signal = args.group_counters != nullptr || args.tile_timestamps != nullptr;
  p.num_groups = int(args.tile_groups.size());
  p.sk_first = p.tiles - sk.tiles;
  p.sk_splits = sk.splits;
  p.sk_ctas = sk.ctas;
  p.sk_max_pieces = sk.max_pieces;
  p.sk_iters = (long long)sk.tiles * p.k_blocks;
  if (sk.tiles > 0) {
    p.sk_counters = reinterpret_cast<unsigned long long*>(ws + layout.counters);
    p.sk_slots = reinterpret_cast<float*>(ws + layout.slots);
  }
  p.half_first = p.tiles - args.half_tiles;
  if (args.half_tiles > 0) p.half_counters = reinterpret_cast<unsigned long long*>(ws + layout.counters);
  // The arrival counters need no zeroing: a launch counts only arrivals tagged with its own epoch.
  p.epoch = next_epoch();
  if (p.num_groups > kGemmMaxInlineGroups) {
    // The map's upload copies from host memory, which a stream capture would record as a copy from a dead vector.
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    OVL_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
    OVL_CHECK(capture == cudaStreamCaptureStatusNone,
              "gemm_run: {} tile groups (more than {}) upload a position -> group map from host memory, which a "
              "CUDA graph capture cannot hold; capture GEMMs with at most {} groups",
              p.num_groups, kGemmMaxInlineGroups, kGemmMaxInlineGroups);
    std::vector<int> map(p.tiles);
    int position = 0;
    for (int g = 0; g < p.num_groups; ++g) {
      for (int t = 0; t < args.tile_groups[g]; ++t) map[position++] = g;
    }
    // Pageable source: the call returns once the data is staged, so `map` may die right after.
    OVL_CUDA_CHECK(
        cudaMemcpyAsync(ws + layout.group_map, map.data(), map.size() * sizeof(int), cudaMemcpyHostToDevice, stream));
    p.group_of_position = reinterpret_cast<const int*>(ws + layout.group_map);
  } else {
    int end = 0;
    for (int g = 0; g < p.num_groups; ++g) p.group_end[g] = end += args.tile_groups[g];
  }

  // A k-block is 128 bytes of a row: kTileK bf16/fp16 or kTileKFp8 FP8 elements (MN-major B is bf16/fp16 only).
  const int block_k = k_block_of(args.dtype);
  const DType b_type = b_type_of(args), d_type = d_type_of(args);
  const CUtensorMap tmap_a = make_tensor_map(args.dtype, args.a, args.m, args.k, kTileM, block_k);
  const bool b_mn_major = args.b_layout == BLayout::kKxN;
  const CUtensorMap tmap_b = b_mn_major ? make_tensor_map(b_type, args.b, args.k, args.n, kTileK, 64)
                                        : make_tensor_map(b_type, args.b, args.n, args.k, kTileN, block_k);
  // The second B map. K-major B: half tiles load 128 rows of B through it (MN-major B loads two of its four 64-column
  // 2-D boxes through tmap_b). MN-major B with N % 64 == 0: whole tiles load a stage as one chunked 3-D box through it, +0.7% over four 2-D boxes on 24 nn rows
  // (measured on the H200; docs/kernels.md).
  p.b_chunked = plan.b_single_box;
  const CUtensorMap tmap_b_half = args.half_tiles > 0 && !b_mn_major
                                      ? make_tensor_map(b_type, args.b, args.n, args.k, kTileN / 2, block_k)
                                  : p.b_chunked ? make_chunked_tensor_map(b_type, args.b, args.k, args.n)
                                                : CUtensorMap{};

  // The epilogue stores through TMA: D as [M, N], or tile-major as [tiles * 128, 256], in 128 x 64 boxes.
  const CUtensorMap tmap_d = p.tile_major
                                 ? make_tensor_map(d_type, args.d, uint64_t(p.tiles) * kTileM, kTileN, kTileM, 64)
                                 : make_tensor_map(d_type, args.d, args.m, args.n, kTileM, 64);

  cudaLaunchAttribute attributes[1] = {};
  int count = 0;
  if (args.programmatic_launch) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(plan.grid);
  config.blockDim = dim3(plan.threads);
  config.dynamicSmemBytes = size_t(plan.smem_bytes);
  config.stream = stream;
  config.attrs = attributes;
  config.numAttrs = unsigned(count);
  const auto launch = [&](auto kernel) {
    opt_in_dynamic_shared_memory(kernel, plan.smem_bytes);
    OVL_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, tmap_a, tmap_b, tmap_b_half, tmap_d, p));
  };
  const bool split = plan.epilogue == GemmEpilogue::kTmaStoreSplit;
  if (split) {
    with_kernel<true, false>(args, b_mn_major, launch);
  } else if (plan.epilogue == GemmEpilogue::kTmaStoreDeferred) {
    with_kernel<false, true>(args, b_mn_major, launch);
  } else {
    with_kernel<false, false>(args, b_mn_major, launch);
  }
  OVL_CUDA_CHECK_LAST();
}

}  // namespace ovl::kernels
