// Fixtures for GPU tests: they skip (GTEST_SKIP, reason printed) when the machine cannot run them, so a CPU-only
// CI machine reports them as skipped, never as passed.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

namespace ovl::test {

inline int gpu_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: clear the sticky error
    return 0;
  }
  return count;
}

inline int compute_capability(int device = 0) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return major * 10 + minor;
}

// 0, 1, ..., the visible GPUs (at most `max`): the devices of a threads World over every GPU.
inline std::vector<int> every_gpu(int max = 8) {
  std::vector<int> devices;
  for (int i = 0; i < gpu_count() && i < max; ++i) devices.push_back(i);
  return devices;
}

// Host-side set-up (cudaMemcpy from pageable memory, cudaMemset) runs on the legacy default stream, and a pageable
// copy may return before its DMA has landed; a stream created with cudaStreamNonBlocking waits for neither. Call
// this between the set-up and the first launch on such a stream. Returns the synchronization's status.
inline cudaError_t finish_setup() { return cudaDeviceSynchronize(); }

// Any CUDA GPU.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "no CUDA GPU found";
  }
};

// A Hopper GPU (sm_90): wgmma and TMA kernels.
class HopperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_count() == 0) GTEST_SKIP() << "no CUDA GPU found";
    if (compute_capability(0) != 90) GTEST_SKIP() << "needs compute capability 9.0, found " << compute_capability(0);
  }
};

// At least kGpus distinct GPUs with peer access between all of them.
template <int kGpus>
class MultiGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const int count = gpu_count();
    if (count < kGpus) GTEST_SKIP() << "needs " << kGpus << " GPUs, found " << count;
  }
};

}  // namespace ovl::test
