#include "ovl/core/driver_api.hpp"

#include <cuda_runtime_api.h>

#include "ovl/cuda_check.hpp"
#include "ovl/error.hpp"

namespace ovl {
namespace {

template <typename Fn>
void load(Fn& fn, const char* symbol, int cuda_version) {
  void* ptr = nullptr;
  cudaDriverEntryPointQueryResult status{};
  if (cudaGetDriverEntryPointByVersion(symbol, &ptr, cuda_version, cudaEnableDefault, &status) != cudaSuccess ||
      status != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();  // no driver, or the symbol is missing: leave the pointer null
    ptr = nullptr;
  }
  fn = reinterpret_cast<Fn>(ptr);
}

DriverApi load_driver_api() {
  DriverApi api;
  load(api.cuDriverGetVersion, "cuDriverGetVersion", 2020);
  load(api.cuDeviceGet, "cuDeviceGet", 2000);
  load(api.cuDeviceGetDevResource, "cuDeviceGetDevResource", 12040);
  load(api.cuDevSmResourceSplitByCount, "cuDevSmResourceSplitByCount", 12040);
  load(api.cuDevResourceGenerateDesc, "cuDevResourceGenerateDesc", 12040);
  load(api.cuGreenCtxCreate, "cuGreenCtxCreate", 12040);
  load(api.cuGreenCtxDestroy, "cuGreenCtxDestroy", 12040);
  load(api.cuGreenCtxGetDevResource, "cuGreenCtxGetDevResource", 12040);
  load(api.cuGreenCtxStreamCreate, "cuGreenCtxStreamCreate", 12050);
  load(api.cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity", 10020);
  load(api.cuMemCreate, "cuMemCreate", 10020);
  load(api.cuMemRelease, "cuMemRelease", 10020);
  load(api.cuMemExportToShareableHandle, "cuMemExportToShareableHandle", 10020);
  load(api.cuMemImportFromShareableHandle, "cuMemImportFromShareableHandle", 10020);
  load(api.cuMemAddressReserve, "cuMemAddressReserve", 10020);
  load(api.cuMemAddressFree, "cuMemAddressFree", 10020);
  load(api.cuMemMap, "cuMemMap", 10020);
  load(api.cuMemUnmap, "cuMemUnmap", 10020);
  load(api.cuMemSetAccess, "cuMemSetAccess", 10020);
  load(api.cuMemGetAddressRange, "cuMemGetAddressRange", 3020);
  load(api.cuStreamWaitValue32, "cuStreamWaitValue32", 11070);
  load(api.cuStreamWriteValue32, "cuStreamWriteValue32", 11070);
  return api;
}

}  // namespace

const DriverApi& driver_api() {
  static const DriverApi api = load_driver_api();
  return api;
}

bool driver_available() { return driver_api().cuDriverGetVersion != nullptr; }

const DriverApi& require_green_contexts() {
  const DriverApi& api = driver_api();
  OVL_CHECK(driver_available(), "no CUDA driver found: green contexts need an NVIDIA driver");
  int version = 0;
  api.cuDriverGetVersion(&version);
  OVL_CHECK(api.green_contexts(), "the CUDA driver ({}.{}) has no green-context API (needs 12.5 or newer)",
            version / 1000, version % 1000 / 10);
  return api;
}

const DriverApi& require_virtual_memory() {
  const DriverApi& api = driver_api();
  OVL_CHECK(driver_available(), "no CUDA driver found: symmetric buffers across processes need an NVIDIA driver");
  OVL_CHECK(api.virtual_memory(), "the CUDA driver has no virtual-memory (cuMem) API");
  return api;
}

const DriverApi& require_stream_memory_ops() {
  const DriverApi& api = driver_api();
  OVL_CHECK(driver_available(), "no CUDA driver found: comm_algo ce needs an NVIDIA driver (stream memory operations)");
  int version = 0;
  api.cuDriverGetVersion(&version);
  OVL_CHECK(api.stream_memory_ops(),
            "the CUDA driver ({}.{}) has no stream memory operations (cuStreamWaitValue32 / cuStreamWriteValue32 of "
            "CUDA 11.7 or newer): comm_algo ce cannot run",
            version / 1000, version % 1000 / 10);
  return api;
}

}  // namespace ovl
