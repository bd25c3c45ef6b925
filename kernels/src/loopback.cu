// The SIMT mover of the loopback collective, its launcher and checks, and the random fill (see
// ovl/kernels/loopback.hpp).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <array>
#include <cstdint>
#include <utility>

#include "loopback_device.cuh"
#include "loopback_tma.hpp"
#include "ovl/cuda_check.hpp"
#include "ovl/kernels/loopback.hpp"

namespace ovl::kernels {
namespace {

using dev::Vec;

std::uint64_t __device__ __forceinline__ splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// grid-stride, 256 threads: uniform values in [-scale, scale), rounded to T.
template <typename T>
__global__ void fill_random_kernel(T* data, std::int64_t n, std::uint64_t seed, float scale) {
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::uint64_t h = splitmix(seed * 0x100000001b3ull + std::uint64_t(i));
    const float u = float(h >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    data[i] = T((2.f * u - 1.f) * scale);
  }
}

// The SIMT mover of the loopback collective.
// grid: args.ctas CTAs (persistent over the groups), block: args.threads (multiple of 32, <= 512), no shared memory
// beyond one int; any sm_70+ GPU. W (the world) is a template argument so that a thread issues the W 16-byte loads
// of kIlp vectors (8 / W of them, one from W = 8 on) before the first add (one memory latency per kIlp vectors, not
// per load). CTA c owns slice c (an equal share of 16-byte vectors)
// of every (group, owner) piece of the played share, so no CTA ever waits on another CTA. Per group: step 0: thread
// 0 acquires the group counter (system scope; the GEMM adds with release after its tile stores), then a barrier;
// step 1: every thread sums its vectors over the ranks' sources in rank order 0..W-1 (fp32) or copies them, and
// stores the result to the piece's destinations (dev::plan_piece). Sources are read with ld.global.cg (L2), so no
// stale L1 line of a GEMM tile is ever used. T: bf16 or fp16; or std::uint8_t, FP8 moved as bytes, which only copies
// (launch_loopback_collective allows FP8 for AllGather only).
// Paced (a.pace_ns_per_byte > 0): a group starts at max(its gate, the previous group's end) (dev::pace_group_start);
// the slice is moved in chunks of kPaceChunkPasses passes of the block, and after each chunk every thread spins
// until t0 + (link bytes of the group's chunks so far) x pace_ns_per_byte. Link bytes per 16-byte vector: a
// reduction reads W-1 peers' sources; a copy from a peer (r > 0) 1; rank 0's own copy 0. After the last group thread 0
// waits the call's link latency from then (dev::pace_finish).
constexpr int kPaceChunkPasses = 4;  // a paced chunk: 4 passes of the block over the slice (32 KiB at 512 threads)

template <typename T, int W>
__global__ void __launch_bounds__(512) loopback_kernel(const __grid_constant__ LoopbackArguments a) {
  // Vectors a thread has in flight at a time: kIlp x W loads, 8 up to W = 8. With one vector per pass whatever W, a
  // paced chunk's 4 passes each paid a memory latency, and in a world of 2 the stand-in for NCCL on 8 CTAs took
  // 1.3-1.6x the real NCCL's time (an NCCL channel carries 18.1 GB/s; `git show
  // 37f616b:results/h100/bench_overlap-paced2.json`, docs/performance.md).
  constexpr int kIlp = W >= 8 ? 1 : 8 / W;
  __shared__ int ok;
  __shared__ unsigned long long pace_t0;
  const bool paced = a.pace_ns_per_byte > 0;
  unsigned long long pace_end = 0;  // thread 0: the previous group's paced end
  for (int gi = 0; gi < a.num_groups; ++gi) {
    const int g = a.first_group + gi;
    if (threadIdx.x == 0) {
      ok = int(dev::gate(a, g));
      dev::stamp(a, g, 0);
      if (ok && paced) pace_t0 = dev::pace_group_start(pace_end);
    }
    __syncthreads();
    if (!ok) return;
    double link_bytes = 0;  // the group's paced bytes so far (the same in every thread)
#pragma unroll 1
    for (int r = 0; r < W; ++r) {
      const LoopbackRange rg = a.ranges[std::int64_t(g) * W + r];
      dev::Piece pc;
      if (!dev::plan_piece<T>(a, r, rg, pc)) continue;
      const std::int64_t nv = rg.count * std::int64_t(sizeof(T)) / 16;
      const std::int64_t v0 = nv * blockIdx.x / gridDim.x, v1 = nv * (blockIdx.x + 1) / gridDim.x;
      auto src = [&](int p) { return reinterpret_cast<const uint4*>(static_cast<const T*>(a.src[p]) + rg.src_offset); };
      auto dst = [&](int p) { return reinterpret_cast<uint4*>(static_cast<T*>(a.dst[p]) + rg.dst_offset); };
      const uint4* copy_src = reinterpret_cast<const uint4*>(pc.copy_src);
      // Unpaced: one chunk, the whole slice.
      const std::int64_t chunk = paced ? std::int64_t(blockDim.x) * kPaceChunkPasses : v1 - v0;
      const double link_per_vector = 16.0 * link_bytes_per_byte(pc.reduce, r, W);
      for (std::int64_t c0 = v0; c0 < v1; c0 += chunk) {
        const std::int64_t c1 = c0 + chunk < v1 ? c0 + chunk : v1;
        // kIlp vectors per thread at a time, v, v + blockDim, ...: all their loads before the first add.
        for (std::int64_t v = c0 + threadIdx.x; v < c1; v += std::int64_t(blockDim.x) * kIlp) {
          uint4 out[kIlp];
          bool here[kIlp];
#pragma unroll
          for (int x = 0; x < kIlp; ++x) {
            here[x] = x == 0 || v + std::int64_t(x) * blockDim.x < c1;  // x = 0: the loop's own condition
            out[x] = make_uint4(0, 0, 0, 0);
          }
          if (!pc.reduce) {
#pragma unroll
            for (int x = 0; x < kIlp; ++x)
              if (here[x]) out[x] = __ldcg(copy_src + v + std::int64_t(x) * blockDim.x);
          } else if constexpr (sizeof(T) == 2) {
            uint4 in[kIlp][W];
#pragma unroll
            for (int x = 0; x < kIlp; ++x)
#pragma unroll
              for (int p = 0; p < W; ++p)
                if (here[x]) in[x][p] = __ldcg(src(p) + v + std::int64_t(x) * blockDim.x);
#pragma unroll
            for (int x = 0; x < kIlp; ++x) {
              float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
              for (int p = 0; p < W; ++p)
                if (here[x]) Vec<T>::add(acc, in[x][p]);
              out[x] = Vec<T>::pack(acc);
            }
          }
#pragma unroll
          for (int x = 0; x < kIlp; ++x)
            if (here[x])
              for (int d = pc.dst_first; d < pc.dst_first + pc.dst_count; ++d)
                dst(d)[v + std::int64_t(x) * blockDim.x] = out[x];
        }
        if (paced && link_per_vector > 0) {
          link_bytes += double(c1 - c0) * link_per_vector;
          dev::pace_until(pace_t0 + static_cast<unsigned long long>(link_bytes * a.pace_ns_per_byte));
        }
      }
    }
    __syncthreads();
    if (threadIdx.x == 0 && paced)
      pace_end = pace_t0 + static_cast<unsigned long long>(link_bytes * a.pace_ns_per_byte);
    if (threadIdx.x == 0) dev::stamp(a, g, 1);
  }
  if (threadIdx.x == 0 && paced) dev::pace_finish(a);  // after the last group (its __syncthreads)
}

// loopback_kernel<T, W> for W = 1..kMaxLoopbackRanks, at [W - 1]: what a launch picks and what preloading loads.
template <typename T, int... W>
constexpr auto loopback_kernels(std::integer_sequence<int, W...>) {
  return std::array{&loopback_kernel<T, W + 1>...};
}
template <typename T>
constexpr auto kLoopbackKernels = loopback_kernels<T>(std::make_integer_sequence<int, kMaxLoopbackRanks>{});

template <typename T>
void launch_loopback_typed(const LoopbackArguments& a, cudaStream_t stream) {
  kLoopbackKernels<T>[size_t(a.world - 1)]<<<a.ctas, a.threads, 0, stream>>>(a);
}

template <typename T>
void preload_loopback() {
  for (const auto kernel : kLoopbackKernels<T>) preload_kernels(kernel);
}

}  // namespace

void launch_fill_random(void* data, std::int64_t elements, DType dtype, std::uint64_t seed, float scale,
                        cudaStream_t stream) {
  const int ctas = int(std::min<std::int64_t>((elements + 255) / 256, 4096));
  if (dtype == DType::kBF16) {
    fill_random_kernel<<<ctas, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(data), elements, seed, scale);
  } else if (dtype == DType::kFP16) {
    fill_random_kernel<<<ctas, 256, 0, stream>>>(static_cast<__half*>(data), elements, seed, scale);
  } else if (dtype == DType::kE4M3) {
    fill_random_kernel<<<ctas, 256, 0, stream>>>(static_cast<__nv_fp8_e4m3*>(data), elements, seed, scale);
  } else if (dtype == DType::kE5M2) {
    fill_random_kernel<<<ctas, 256, 0, stream>>>(static_cast<__nv_fp8_e5m2*>(data), elements, seed, scale);
  } else {
    fill_random_kernel<<<ctas, 256, 0, stream>>>(static_cast<float*>(data), elements, seed, scale);
  }
  OVL_CUDA_CHECK_LAST();
}

void launch_loopback_collective(const LoopbackArguments& a, cudaStream_t stream) {
  OVL_CHECK(a.world >= 1 && a.world <= kMaxLoopbackRanks, "loopback collective: world = {} is not in 1..{}", a.world,
            kMaxLoopbackRanks);
  OVL_CHECK(a.ctas >= 1 && a.ctas <= 1024, "loopback collective: ctas = {} is not in 1..1024", a.ctas);
  OVL_CHECK(a.threads >= 32 && a.threads <= 512 && a.threads % 32 == 0,
            "loopback collective: threads = {} is not a multiple of 32 in 32..512", a.threads);
  OVL_CHECK(a.error != nullptr && a.ranges != nullptr, "loopback collective: error record and range table required");
  OVL_CHECK(a.dtype != DType::kFP32, "loopback collective: dtype fp32 is not supported (bf16 or fp16)");
  OVL_CHECK(!is_fp8(a.dtype) || a.op == Collective::kAllGather,
            "loopback collective: dtype {} with {}: FP8 is only moved (AllGather), never summed", to_string(a.dtype),
            to_string(a.op));
  // What the play touches: every source; dst_0; every dst_p when the whole world is played or when rank 0 copies
  // the peers' reduced pieces (kRank0 AllReduce). All 16-byte aligned (the TMA movers need it; so do uint4 ld/st).
  const bool all_dst = a.play == LoopbackShare::kWholeWorld || a.op == Collective::kAllReduce;
  for (int r = 0; r < a.world; ++r) {
    OVL_CHECK(a.src[r] != nullptr && reinterpret_cast<std::uintptr_t>(a.src[r]) % 16 == 0,
              "loopback collective: source of rank {} ({}) is null or not 16-byte aligned", r, a.src[r]);
    if (r == 0 || all_dst) {
      OVL_CHECK(a.dst[r] != nullptr && reinterpret_cast<std::uintptr_t>(a.dst[r]) % 16 == 0,
                "loopback collective: destination of rank {} ({}) is null or not 16-byte aligned", r, a.dst[r]);
    }
  }
  OVL_CHECK(a.released == nullptr || (a.op == Collective::kAllGather && a.mover != CommAlgo::kSimt),
            "loopback collective: released counters with {} and mover {}: only a TMA mover's AllGather releases groups",
            to_string(a.op), to_string(a.mover));
  if (a.num_groups <= 0) return;
  if (a.mover != CommAlgo::kSimt) {
    launch_tma_mover(a, stream);
    return;
  }
  if (is_fp8(a.dtype)) {
    launch_loopback_typed<std::uint8_t>(a, stream);
  } else if (a.dtype == DType::kBF16) {
    launch_loopback_typed<__nv_bfloat16>(a, stream);
  } else {
    launch_loopback_typed<__half>(a, stream);
  }
  OVL_CUDA_CHECK_LAST();
}

void preload_loopback_kernels() {
  preload_loopback<__nv_bfloat16>();
  preload_loopback<__half>();
  preload_loopback<std::uint8_t>();
  preload_tma_movers();
}

}  // namespace ovl::kernels
