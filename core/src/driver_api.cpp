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

}  // namespace ovl
