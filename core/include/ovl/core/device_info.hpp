// What `ovl info` reports: the driver, runtime and NCCL versions, and each visible GPU with its green-context
// granularity and the peer-access matrix. Never throws for a missing driver or GPU: it says so in `status`.
#pragma once

#include <string>
#include <vector>

namespace ovl {

struct GpuInfo {
  int index = 0;
  std::string name;
  std::string pci_bus_id;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int green_sm_count = -1;       // from cuDeviceGetDevResource; -1 when the driver has no green contexts
  int green_min_partition = -1;  // minSmPartitionSize
  int green_alignment = -1;      // smCoscheduledAlignment
  long long l2_bytes = 0;
  long long memory_bytes = 0;
  int smem_per_block_optin = 0;
  int clock_mhz = 0;
  int memory_clock_mhz = 0;
  int memory_bus_bits = 0;
};

struct SystemInfo {
  bool ok = false;     // a driver and at least one GPU were found
  std::string status;  // one line when !ok: "no CUDA driver found", "no CUDA GPU found", ...
  int driver_version = 0;   // e.g. 13000
  int runtime_version = 0;  // the cudart ovl was built with
  int nccl_version = 0;     // e.g. 22803
  std::vector<GpuInfo> gpus;
  std::vector<std::vector<int>> peer_access;  // [i][j] = 1 when GPU i can access GPU j's memory
};

SystemInfo query_system();
std::string version_string(int cuda_version);  // 13000 -> "13.0"
std::string nccl_version_string(int code);     // 22803 -> "2.28.3"

}  // namespace ovl
