#include "ovl/core/device_info.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include "ovl/core/driver_api.hpp"
#include "ovl/core/sm_partition.hpp"
#include "ovl/error.hpp"

namespace ovl {

std::string version_string(int v) { return fmt::format("{}.{}", v / 1000, v % 1000 / 10); }
std::string nccl_version_string(int code) {
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
  return fmt::format("{}.{}.{}", code / 10000, code / 100 % 100, code % 100);
}

SystemInfo query_system() {
  SystemInfo info;
  cudaRuntimeGetVersion(&info.runtime_version);
  ncclGetVersion(&info.nccl_version);
  if (!driver_available()) {
    info.status = "no CUDA driver found (no NVIDIA GPU on this machine, or the driver is not installed)";
    return info;
  }
  driver_api().cuDriverGetVersion(&info.driver_version);
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    info.status = err == cudaSuccess ? std::string("no CUDA GPU found")
                                     : fmt::format("no usable CUDA GPU: {}", cudaGetErrorString(err));
    (void)cudaGetLastError();
    return info;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    GpuInfo gpu;
    gpu.index = d;
    gpu.name = prop.name;
    char bus[32] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), d) == cudaSuccess) gpu.pci_bus_id = bus;
    gpu.cc_major = prop.major;
    gpu.cc_minor = prop.minor;
    gpu.sm_count = prop.multiProcessorCount;
    gpu.l2_bytes = prop.l2CacheSize;
    gpu.memory_bytes = static_cast<long long>(prop.totalGlobalMem);
    gpu.smem_per_block_optin = static_cast<int>(prop.sharedMemPerBlockOptin);
    int khz = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, d) == cudaSuccess) gpu.clock_mhz = khz / 1000;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, d) == cudaSuccess) gpu.memory_clock_mhz = khz / 1000;
    cudaDeviceGetAttribute(&gpu.memory_bus_bits, cudaDevAttrGlobalMemoryBusWidth, d);
    (void)cudaGetLastError();
    try {
      const SmResource sm = query_sm_resource(d);
      gpu.green_sm_count = sm.sm_count;
      gpu.green_min_partition = sm.min_partition;
      gpu.green_alignment = sm.alignment;
    } catch (const Error&) {
      // Older driver: leave -1, the report says "unavailable".
    }
    info.gpus.push_back(gpu);
  }
  const int n = static_cast<int>(info.gpus.size());
  info.peer_access.assign(n, std::vector<int>(n, 0));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      int can = i == j ? 1 : 0;
      if (i != j && cudaDeviceCanAccessPeer(&can, info.gpus[i].index, info.gpus[j].index) != cudaSuccess) {
        (void)cudaGetLastError();
        can = 0;
      }
      info.peer_access[i][j] = can;
    }
  }
  info.ok = n > 0;
  if (!info.ok) info.status = "no CUDA GPU could be queried";
  return info;
}

}  // namespace ovl
