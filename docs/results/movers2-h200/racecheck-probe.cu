// Does compute-sanitizer racecheck follow mbarrier ordering between a TMA producer thread and consumer warps?
//
// Two kernels move the same data (iters x 4 KiB, bulk-loaded into a 2-stage shared ring by thread 0 and summed by
// warp 1) and check the sums on the host:
//   canonical  the TMA pipeline pattern of the collectives' pull phase (and of CUTLASS): full[s] (expect_tx, the
//              load's complete_tx) orders the load before warp 1's reads; empty[s] (warp 1's lane 0 arrives after a
//              __syncwarp, thread 0 waits) orders the reads before the next load into the stage. No block barrier.
//   control    the same, plus a __syncthreads() per iteration that every thread of both warps reaches after the
//              stage's reads, so a tool that follows only block barriers sees the refill ordered too.
// If racecheck reports hazards on `canonical` and none on `control`, it does not follow the mbarrier hand-back.
//
// Build and run (on the H200):
//   nvcc -std=c++17 -O2 -arch=sm_90a -Ikernels/include docs/results/movers2-h200/racecheck-probe.cu -o probe
//   ./probe && compute-sanitizer --tool racecheck ./probe canonical && compute-sanitizer --tool racecheck ./probe control
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "ovl/kernels/tma_ptx.cuh"

namespace ptx = ovl::kernels::ptx;

constexpr int kStageWords = 1024;  // 4 KiB of uint32
constexpr int kStages = 2;

template <bool kControl>
__global__ void probe(const std::uint32_t* src, std::uint32_t* out, int iters) {
  __shared__ __align__(128) std::uint32_t stage[kStages][kStageWords];
  __shared__ std::uint64_t full[kStages], empty[kStages];
  const unsigned tid = threadIdx.x, lane = tid % 32;
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      ptx::mbar_init(full + s, 1);
      ptx::mbar_init(empty + s, 1);
    }
    ptx::mbar_init_fence();
  }
  __syncthreads();
  std::uint32_t acc = 0;
  for (int it = 0; it < iters; ++it) {
    const int s = it % kStages;
    if (tid == 0) {  // producer
      if (it >= kStages) ptx::mbar_wait(empty + s, std::uint32_t(it / kStages - 1) & 1u);
      ptx::mbar_arrive_expect_tx(full + s, kStageWords * 4);
      ptx::bulk_load(stage[s], src + std::size_t(it) * kStageWords, kStageWords * 4, full + s);
    }
    if (tid >= 32) {  // consumers
      ptx::mbar_wait(full + s, std::uint32_t(it / kStages) & 1u);
      for (int v = int(lane); v < kStageWords; v += 32) acc += stage[s][v];
      __syncwarp();
      if (lane == 0) ptx::mbar_arrive(empty + s);
    }
    if constexpr (kControl) __syncthreads();
    if (!kControl && tid < 32 && tid != 0) break;  // canonical: warp 0's other lanes have nothing to do
  }
  if (tid >= 32) out[lane] = acc;
}

int main(int argc, char** argv) {
  const char* which = argc > 1 ? argv[1] : "both";
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
  for (const char* name : {"canonical", "control"}) {
    if (std::strcmp(which, "both") != 0 && std::strcmp(which, name) != 0) continue;
    cudaMemset(out, 0, 32 * 4);
    if (name[1] == 'a') {
      probe<false><<<1, 64>>>(src, out, iters);
    } else {
      probe<true><<<1, 64>>>(src, out, iters);
    }
    std::vector<std::uint32_t> got(32);
    const cudaError_t e = cudaMemcpy(got.data(), out, 32 * 4, cudaMemcpyDeviceToHost);
    const bool ok = e == cudaSuccess && got == expect;
    std::printf("%s: %s\n", name, ok ? "sums match" : e != cudaSuccess ? cudaGetErrorString(e) : "WRONG SUMS");
    bad += !ok;
  }
  return bad;
}
