// Driver-API entry points, loaded at run time through cudaGetDriverEntryPointByVersion.
//
// ovl never links libcuda: the same binary starts (and `ovl info` reports "no driver") on a machine that has
// no NVIDIA driver, and the CPU-only CI machine runs every test binary. Each entry point is looked up once.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

namespace ovl {

struct DriverApi {
  PFN_cuDriverGetVersion_v2020 cuDriverGetVersion = nullptr;
  PFN_cuDeviceGet_v2000 cuDeviceGet = nullptr;
  PFN_cuDeviceGetDevResource_v12040 cuDeviceGetDevResource = nullptr;
  PFN_cuDevSmResourceSplitByCount_v12040 cuDevSmResourceSplitByCount = nullptr;
  PFN_cuDevResourceGenerateDesc_v12040 cuDevResourceGenerateDesc = nullptr;
  PFN_cuGreenCtxCreate_v12040 cuGreenCtxCreate = nullptr;
  PFN_cuGreenCtxDestroy_v12040 cuGreenCtxDestroy = nullptr;
  PFN_cuGreenCtxGetDevResource_v12040 cuGreenCtxGetDevResource = nullptr;
  PFN_cuGreenCtxStreamCreate_v12050 cuGreenCtxStreamCreate = nullptr;
  // Virtual memory, for symmetric buffers shared across processes (the MPI World).
  PFN_cuMemGetAllocationGranularity_v10020 cuMemGetAllocationGranularity = nullptr;
  PFN_cuMemCreate_v10020 cuMemCreate = nullptr;
  PFN_cuMemRelease_v10020 cuMemRelease = nullptr;
  PFN_cuMemExportToShareableHandle_v10020 cuMemExportToShareableHandle = nullptr;
  PFN_cuMemImportFromShareableHandle_v10020 cuMemImportFromShareableHandle = nullptr;
  PFN_cuMemAddressReserve_v10020 cuMemAddressReserve = nullptr;
  PFN_cuMemAddressFree_v10020 cuMemAddressFree = nullptr;
  PFN_cuMemMap_v10020 cuMemMap = nullptr;
  PFN_cuMemUnmap_v10020 cuMemUnmap = nullptr;
  PFN_cuMemSetAccess_v10020 cuMemSetAccess = nullptr;
  // The allocation holding a device address (Context checks a tensor fits in its buffer); null: not checked.
  PFN_cuMemGetAddressRange_v3020 cuMemGetAddressRange = nullptr;
  // Stream memory operations (comm_algo ce: a stream waits for a counter and writes a flag without a kernel).
  PFN_cuStreamWaitValue32_v11070 cuStreamWaitValue32 = nullptr;
  PFN_cuStreamWriteValue32_v11070 cuStreamWriteValue32 = nullptr;

  // True when every entry point above was found (a driver with green contexts: 12.4 or newer).
  bool virtual_memory() const {
    return cuMemGetAllocationGranularity && cuMemCreate && cuMemRelease && cuMemExportToShareableHandle &&
           cuMemImportFromShareableHandle && cuMemAddressReserve && cuMemAddressFree && cuMemMap && cuMemUnmap &&
           cuMemSetAccess;
  }
  bool stream_memory_ops() const { return cuStreamWaitValue32 && cuStreamWriteValue32; }
  bool green_contexts() const {
    return cuDeviceGetDevResource && cuDevSmResourceSplitByCount && cuDevResourceGenerateDesc && cuGreenCtxCreate &&
           cuGreenCtxDestroy && cuGreenCtxGetDevResource && cuGreenCtxStreamCreate;
  }
};

// The process-wide table; entry points the driver lacks are null. Never throws: with no driver at all every
// pointer is null and driver_available() is false.
const DriverApi& driver_api();
bool driver_available();

// The table, or an ovl::Error saying what is missing ("no CUDA driver", "driver too old for green contexts").
const DriverApi& require_green_contexts();
// The table, or an ovl::Error when the driver lacks the virtual-memory (cuMem) entry points.
const DriverApi& require_virtual_memory();
// The table, or an ovl::Error when the driver lacks the stream memory operations (cuStreamWaitValue32 /
// cuStreamWriteValue32 of CUDA 11.7+) that comm_algo ce gates its copies with.
const DriverApi& require_stream_memory_ops();

}  // namespace ovl
