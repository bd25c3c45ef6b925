// Probe: does a kernel launched in thread-block clusters start on the SMs a persistent kernel leaves free?
//
//   nvcc -std=c++17 -arch=sm_90a -o /tmp/cluster_probe scripts/probes/cluster_beside_persistent.cu
//   /tmp/cluster_probe
//
// Why: on 2 H200s, tile-signal with NCCL did not overlap when our GEMM held all but 8-16 SMs, and overlapped
// partly with 24-32 free SMs (docs/results/multigpu-h200x2/). NCCL launches its kernels in clusters of 4 CTAs on
// sm_90 by default (ncclConfig_t::cgaClusterSize, NCCL_CGA_CLUSTER_SIZE), and a cluster needs all its SMs free in
// one GPC. The hold kernel here stands in for the GEMM: 132 - c CTAs, one per SM (its shared memory forces that),
// spinning for 20 ms. c CTAs of a small kernel are then launched on a high-priority stream with clusters of k; the
// table says whether its first and all of its CTAs started while the hold kernel still ran, and if not, how long
// after it ended the last one started.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <thread>

#define CHECK(x)                                                                                   \
  do {                                                                                             \
    cudaError_t e = (x);                                                                           \
    if (e != cudaSuccess) {                                                                        \
      std::printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e));                \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One CTA per SM (its dynamic shared memory), each spinning until `until_ns`; block 0 records when it ends.
__global__ void hold(unsigned long long spin_ns, unsigned long long* t_end) {
  extern __shared__ unsigned char smem[];
  const unsigned long long start = now_ns();
  if (threadIdx.x == 0) smem[0] = 1;
  while (now_ns() - start < spin_ns) {
  }
  if (threadIdx.x == 0) atomicMax(t_end, now_ns());
}

// The small kernel: the earliest and the latest start of its CTAs (t[1], t[2]).
__global__ void probe(unsigned long long* t) {
  if (threadIdx.x == 0) {
    const unsigned long long n = now_ns();
    atomicMin(t + 1, n);
    atomicMax(t + 2, n);
  }
}

int main() {
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  const int hold_smem = int(prop.sharedMemPerBlockOptin) - 1024;  // one CTA per SM
  CHECK(cudaFuncSetAttribute(hold, cudaFuncAttributeMaxDynamicSharedMemorySize, hold_smem));
  CHECK(cudaFuncSetAttribute(probe, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  int lo = 0, hi = 0;
  CHECK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  cudaStream_t s_hold, s_probe;
  CHECK(cudaStreamCreateWithPriority(&s_hold, cudaStreamNonBlocking, lo));
  CHECK(cudaStreamCreateWithPriority(&s_probe, cudaStreamNonBlocking, hi));
  unsigned long long* t = nullptr;  // [0] hold end, [1] first probe CTA's start, [2] last probe CTA's start
  CHECK(cudaMallocManaged(&t, 3 * sizeof(unsigned long long)));
  std::printf("%s, %d SMs; hold: SMs - free_sms CTAs of %d KB shared memory, 20 ms\n", prop.name, sms,
              hold_smem / 1024);
  std::printf("free_sms  cluster  first_cta_beside_hold  all_ctas_beside_hold  last_start_after_hold_end_us\n");
  for (int free_sms : {4, 8, 16, 24, 32, 48}) {
    for (int cluster : {1, 2, 4}) {
      if (free_sms % cluster != 0) continue;
      t[0] = 0;
      t[1] = ~0ull;
      t[2] = 0;
      CHECK(cudaDeviceSynchronize());
      hold<<<sms - free_sms, 128, hold_smem, s_hold>>>(20'000'000ull, t);
      CHECK(cudaGetLastError());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the hold kernel is resident
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = dim3(unsigned(free_sms));
      cfg.blockDim = dim3(512);
      cfg.stream = s_probe;
      cudaLaunchAttribute attr{};
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = unsigned(cluster);
      attr.val.clusterDim.y = 1;
      attr.val.clusterDim.z = 1;
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      CHECK(cudaLaunchKernelEx(&cfg, probe, t));
      CHECK(cudaDeviceSynchronize());
      const bool first = t[1] < t[0], all = t[2] < t[0];
      const double after_us = all ? 0.0 : double(t[2] - t[0]) * 1e-3;
      std::printf("%8d  %7d  %21s  %20s  %28.1f\n", free_sms, cluster, first ? "yes" : "no", all ? "yes" : "no",
                  after_us);
    }
  }
  return 0;
}
