// One device allocation owned by its holder, for the benchmarks and the soak (no benchmark library needed).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "ovl/cuda_check.hpp"

namespace ovl::bench {

struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(std::size_t bytes) { OVL_CUDA_CHECK(cudaMalloc(&ptr, bytes)); }
  ~DeviceBuffer() { (void)cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

}  // namespace ovl::bench
