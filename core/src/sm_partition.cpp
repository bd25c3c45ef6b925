#include "ovl/core/sm_partition.hpp"

#include <cstdio>
#include <vector>

#include "ovl/core/driver_api.hpp"
#include "ovl/cuda_check.hpp"
#include "ovl/error.hpp"

namespace ovl {
namespace {

CUdevice cu_device(const DriverApi& api, int device) {
  OVL_CUDA_CHECK(cudaFree(nullptr));  // initializes the runtime and, with it, the driver (cuInit)
  CUdevice dev = 0;
  OVL_CU_CHECK(api.cuDeviceGet(&dev, device));
  return dev;
}

CUdevResource device_sm_resource(const DriverApi& api, CUdevice dev) {
  CUdevResource resource{};
  OVL_CU_CHECK(api.cuDeviceGetDevResource(dev, &resource, CU_DEV_RESOURCE_TYPE_SM));
  return resource;
}

// One split of the device into groups of `granularity` SMs plus the remainder.
struct Split {
  std::vector<CUdevResource> groups;
  CUdevResource remainder{};
};

Split split_device(const DriverApi& api, const CUdevResource& device_resource) {
  const unsigned granularity = device_resource.sm.minSmPartitionSize;
  unsigned count = device_resource.sm.smCount / granularity;
  Split split;
  split.groups.resize(count);
  OVL_CU_CHECK(api.cuDevSmResourceSplitByCount(split.groups.data(), &count, &device_resource, &split.remainder, 0,
                                               granularity));
  split.groups.resize(count);
  return split;
}

struct GreenStream {
  CUgreenCtx ctx = nullptr;
  cudaStream_t stream = nullptr;
  int sms = 0;
};

GreenStream make_green_stream(const DriverApi& api, CUdevice dev, std::vector<CUdevResource> resources, int priority) {
  CUdevResourceDesc desc{};
  OVL_CU_CHECK(api.cuDevResourceGenerateDesc(&desc, resources.data(), unsigned(resources.size())));
  GreenStream gs;
  OVL_CU_CHECK(api.cuGreenCtxCreate(&gs.ctx, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
  CUstream stream = nullptr;
  const CUresult made = api.cuGreenCtxStreamCreate(&stream, gs.ctx, CU_STREAM_NON_BLOCKING, priority);
  if (made != CUDA_SUCCESS) {
    api.cuGreenCtxDestroy(gs.ctx);
    OVL_CU_CHECK(made);
  }
  gs.stream = stream;
  CUdevResource actual{};
  OVL_CU_CHECK(api.cuGreenCtxGetDevResource(gs.ctx, &actual, CU_DEV_RESOURCE_TYPE_SM));
  gs.sms = int(actual.sm.smCount);
  return gs;
}

int highest_priority() {
  int least = 0, greatest = 0;
  OVL_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  return greatest;
}

}  // namespace

SmResource query_sm_resource(int device) {
  const DriverApi& api = require_green_contexts();
  const CUdevResource resource = device_sm_resource(api, cu_device(api, device));
  return SmResource{int(resource.sm.smCount), int(resource.sm.minSmPartitionSize),
                    int(resource.sm.smCoscheduledAlignment)};
}

std::unique_ptr<SmPartition> SmPartition::split(int device, int comm_sms) {
  const DriverApi& api = require_green_contexts();
  const CUdevice dev = cu_device(api, device);
  const CUdevResource resource = device_sm_resource(api, dev);
  const int granularity = int(resource.sm.minSmPartitionSize);
  const int total = int(resource.sm.smCount);
  OVL_CHECK(comm_sms > 0 && comm_sms % granularity == 0, "comm_sms = {} must be a positive multiple of {}", comm_sms,
            granularity);
  OVL_CHECK(comm_sms <= total - granularity, "comm_sms = {} leaves fewer than {} of the {} SMs for the GEMM", comm_sms,
            granularity, total);
  Split parts = split_device(api, resource);
  const size_t comm_groups = size_t(comm_sms / granularity);
  OVL_CHECK(comm_groups < parts.groups.size() || (comm_groups == parts.groups.size() && parts.remainder.sm.smCount > 0),
            "comm_sms = {} needs {} groups of {} SMs; this device splits into {}", comm_sms, comm_groups, granularity,
            parts.groups.size());
  std::vector<CUdevResource> comm(parts.groups.begin(), parts.groups.begin() + comm_groups);
  std::vector<CUdevResource> gemm(parts.groups.begin() + comm_groups, parts.groups.end());
  if (parts.remainder.sm.smCount > 0) gemm.push_back(parts.remainder);

  std::unique_ptr<SmPartition> p(new SmPartition());
  p->device_ = device;
  const GreenStream g = make_green_stream(api, dev, gemm, 0);
  p->gemm_ctx_ = g.ctx;
  p->gemm_stream_ = g.stream;
  p->gemm_sms_ = g.sms;
  const GreenStream c = make_green_stream(api, dev, comm, highest_priority());
  p->comm_ctx_ = c.ctx;
  p->comm_stream_ = c.stream;
  p->comm_sms_ = c.sms;
  return p;
}

std::unique_ptr<SmPartition> SmPartition::confine(int device, int sms) {
  const DriverApi& api = require_green_contexts();
  const CUdevice dev = cu_device(api, device);
  const CUdevResource resource = device_sm_resource(api, dev);
  Split parts = split_device(api, resource);
  const int granularity = int(resource.sm.minSmPartitionSize);
  // The split yields equal groups plus a remainder (on the H200: 15 groups of 8 and 12 SMs, since groups stay
  // inside a GPC), so a partition is some groups, with or without the remainder.
  const int remainder = int(parts.remainder.sm.smCount);
  const int group_count = int(parts.groups.size());
  const auto fits = [&](int rest) { return rest >= 0 && rest % granularity == 0 && rest / granularity <= group_count; };
  const bool without_remainder = sms > 0 && fits(sms);
  const bool with_remainder = !without_remainder && remainder > 0 && sms > 0 && fits(sms - remainder);
  OVL_CHECK(without_remainder || with_remainder,
            "sms = {} cannot be a green-context partition of this device ({} groups of {} SMs plus {}): use a "
            "multiple of {}, optionally plus {}",
            sms, group_count, granularity, remainder, granularity, remainder);
  const size_t groups = size_t((sms - (with_remainder ? remainder : 0)) / granularity);
  std::vector<CUdevResource> use(parts.groups.begin(), parts.groups.begin() + groups);
  if (with_remainder) use.push_back(parts.remainder);

  std::unique_ptr<SmPartition> p(new SmPartition());
  p->device_ = device;
  const GreenStream g = make_green_stream(api, dev, use, 0);
  p->gemm_ctx_ = g.ctx;
  p->gemm_stream_ = g.stream;
  p->gemm_sms_ = g.sms;
  return p;
}

SmPartition::~SmPartition() {
  const DriverApi& api = driver_api();
  for (cudaStream_t s : {gemm_stream_, comm_stream_}) {
    if (s != nullptr && cudaStreamDestroy(s) != cudaSuccess) std::fprintf(stderr, "ovl: cudaStreamDestroy failed\n");
  }
  for (CUgreenCtx ctx : {gemm_ctx_, comm_ctx_}) {
    if (ctx != nullptr && api.cuGreenCtxDestroy != nullptr && api.cuGreenCtxDestroy(ctx) != CUDA_SUCCESS) {
      std::fprintf(stderr, "ovl: cuGreenCtxDestroy failed\n");
    }
  }
}

}  // namespace ovl
