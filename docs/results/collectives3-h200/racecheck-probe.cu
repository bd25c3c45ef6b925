// Which hand-backs of a TMA ring stage does compute-sanitizer racecheck follow? (The first two kernels are the probe
// of docs/results/movers2-h200/, 15:34 UTC, unchanged; this file supersedes it.)
//
// Four kernels move the same data (iters x 4 KiB, bulk-loaded into a 2-stage shared ring by thread 0 and summed by
// warp 1) and check the sums on the host. full[s] (expect_tx, the load's complete_tx) orders each load before warp
// 1's reads; the hand-back that orders the reads before the next load into the stage differs:
//   canonical  warp 1's lane 0 arrives on empty[s] after a __syncwarp, thread 0 waits (CUTLASS's pattern for async
//              readers; the collectives' pull-reduce before this change).
//   control    canonical plus a __syncthreads() per iteration.
//   allarrive  every lane of warp 1 arrives on empty[s] (count 32) after its own reads.
//   named      warp 1 reaches named barrier 1 + s with bar.arrive after its reads; all of warp 0 waits on it with
//              bar.sync before the refill (lane 0 issues the loads).
// Result on the H200 (README.md here): hazards only for canonical, so racecheck follows an mbarrier arrival for the
// thread that arrives (and hardware barriers) but not an arrival passed on through __syncwarp.
//
// Build and run (on the H200):
//   nvcc -std=c++17 -O2 -arch=sm_90a -Ikernels/include docs/results/collectives3-h200/racecheck-probe.cu -o probe
//   for m in canonical control allarrive named; do compute-sanitizer --tool racecheck ./probe $m; done
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "ovl/kernels/tma_ptx.cuh"

namespace ptx = ovl::kernels::ptx;

constexpr int kStageWords = 1024;  // 4 KiB of uint32
constexpr int kStages = 2;

enum Mode { kCanonical, kControl, kAllArrive, kNamed };

// kAllArrive: every consumer lane arrives on empty[s] (count 32) after its own reads, no __syncwarp hand-off.
// kNamed: the whole of warp 0 runs the producer loop (lane 0 issues); the refill waits on named barrier 1 + s
// (bar.sync, 64 threads) that warp 1 reaches with bar.arrive after its reads: the hand-back is a hardware barrier.
template <Mode kMode>
__global__ void probe(const std::uint32_t* src, std::uint32_t* out, int iters) {
  __shared__ __align__(128) std::uint32_t stage[kStages][kStageWords];
  __shared__ std::uint64_t full[kStages], empty[kStages];
  const unsigned tid = threadIdx.x, lane = tid % 32;
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      ptx::mbar_init(full + s, 1);
      ptx::mbar_init(empty + s, kMode == kAllArrive ? 32 : 1);
    }
    ptx::mbar_init_fence();
  }
  __syncthreads();
  std::uint32_t acc = 0;
  for (int it = 0; it < iters; ++it) {
    const int s = it % kStages;
    if (kMode == kNamed ? tid < 32 : tid == 0) {  // producer
      if (it >= kStages) {
        if constexpr (kMode == kNamed) {
          asm volatile("bar.sync %0, 64;" ::"r"(1 + s) : "memory");
        } else {
          ptx::mbar_wait(empty + s, std::uint32_t(it / kStages - 1) & 1u);
        }
      }
      if (tid == 0) {
        ptx::mbar_arrive_expect_tx(full + s, kStageWords * 4);
        ptx::bulk_load(stage[s], src + std::size_t(it) * kStageWords, kStageWords * 4, full + s);
      }
      if constexpr (kMode == kNamed) __syncwarp();
    }
    if (tid >= 32) {  // consumers
      ptx::mbar_wait(full + s, std::uint32_t(it / kStages) & 1u);
      for (int v = int(lane); v < kStageWords; v += 32) acc += stage[s][v];
      if constexpr (kMode == kAllArrive) {
        ptx::mbar_arrive(empty + s);
      } else if constexpr (kMode == kNamed) {
        asm volatile("bar.arrive %0, 64;" ::"r"(1 + s) : "memory");
      } else {
        __syncwarp();
        if (lane == 0) ptx::mbar_arrive(empty + s);
      }
    }
    if constexpr (kMode == kControl) __syncthreads();
    if (kMode != kControl && kMode != kNamed && tid < 32 && tid != 0) break;  // warp 0's other lanes: nothing to do
  }
  if (tid >= 32) out[lane] = acc;
}

int main(int argc, char** argv) {
  const char* which = argc > 1 ? argv[1] : "all";
  const int iters = 64;
  std::vector<std::uint32_t> host(std::size_t(iters) * kStageWords);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = std::uint32_t(i * 2654435761u) >> 8;
  std::vector<std::uint32_t> expect(32, 0);
  for (int it = 0; it < iters; ++it)
    for (int v = 0; v < kStageWords; ++v) expect[v % 32] += host[std::size_t(it) * kStageWords + v];
  std::uint32_t *src = nullptr, *out = nullptr;
  if (cudaMalloc(&src, host.size() * 4) != cudaSuccess || cudaMalloc(&out, 32 * 4) != cudaSuccess) return 2;
  cudaMemcpy(src, host.data(), host.size() * 4, cudaMemcpyHostToDevice);
  int bad = 0;
  const char* names[] = {"canonical", "control", "allarrive", "named"};
  for (int m = 0; m < 4; ++m) {
    const char* name = names[m];
    if (std::strcmp(which, "all") != 0 && std::strcmp(which, name) != 0) continue;
    cudaMemset(out, 0, 32 * 4);
    switch (m) {
      case 0: probe<kCanonical><<<1, 64>>>(src, out, iters); break;
      case 1: probe<kControl><<<1, 64>>>(src, out, iters); break;
      case 2: probe<kAllArrive><<<1, 64>>>(src, out, iters); break;
      default: probe<kNamed><<<1, 64>>>(src, out, iters); break;
    }
    std::vector<std::uint32_t> got(32);
    const cudaError_t e = cudaMemcpy(got.data(), out, 32 * 4, cudaMemcpyDeviceToHost);
    const bool ok = e == cudaSuccess && got == expect;
    std::printf("%s: %s\n", name, ok ? "sums match" : e != cudaSuccess ? cudaGetErrorString(e) : "WRONG SUMS");
    bad += !ok;
  }
  return bad;
}
