#include "ovl/core/sm_partition.hpp"

#include <cstdio>
#include <map>
#include <mutex>
#include <tuple>
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

// A green context and the SMs it holds.
struct GreenCtx {
  CUgreenCtx ctx = nullptr;
  int sms = 0;
};

GreenCtx make_green_ctx(const DriverApi& api, CUdevice dev, std::vector<CUdevResource> resources) {
  CUdevResourceDesc desc{};
  OVL_CU_CHECK(api.cuDevResourceGenerateDesc(&desc, resources.data(), unsigned(resources.size())));
  GreenCtx g;
  OVL_CU_CHECK(api.cuGreenCtxCreate(&g.ctx, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
  CUdevResource actual{};
  OVL_CU_CHECK(api.cuGreenCtxGetDevResource(g.ctx, &actual, CU_DEV_RESOURCE_TYPE_SM));
  g.sms = int(actual.sm.smCount);
  return g;
}

// The green contexts of each partition, made once per process and never destroyed: cuGreenCtxDestroy gave back
// neither the device memory nor the host memory a green context took (8 MiB and 3.3 MiB per partition on an H100,
// CUDA 13.0, driver 580: ContextLifetimeTest), so a process that made Contexts one after another grew without bound.
// Partitions of one kind (split for comm_sms, or confined to sms) share them and own only their streams: each
// SmPartition's work stays on its own streams, so two Contexts never queue behind each other's kernels. One lock
// covers making the contexts and the streams on them (the driver does not synchronize calls on one green context).
struct PartitionKey {
  int device;
  int comm_sms;  // split: the communication SMs; confine: 0
  int sms;       // confine: the SMs; split: 0
  bool operator<(const PartitionKey& o) const {
    return std::tie(device, comm_sms, sms) < std::tie(o.device, o.comm_sms, o.sms);
  }
};
struct SharedGreenCtxs {
  GreenCtx gemm, comm;  // comm.ctx is null for a confined partition
};
std::mutex& green_mutex() {
  static std::mutex m;
  return m;
}
std::map<PartitionKey, SharedGreenCtxs>& green_ctxs() {
  static auto* m = new std::map<PartitionKey, SharedGreenCtxs>();  // kept past exit: the driver may be gone by then
  return *m;
}

cudaStream_t make_stream(const DriverApi& api, CUgreenCtx ctx, int priority) {
  CUstream stream = nullptr;
  OVL_CU_CHECK(api.cuGreenCtxStreamCreate(&stream, ctx, CU_STREAM_NON_BLOCKING, priority));
  return stream;
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
  const std::lock_guard lock(green_mutex());
  const PartitionKey key{device, comm_sms, 0};
  auto it = green_ctxs().find(key);
  if (it == green_ctxs().end()) {
    Split parts = split_device(api, resource);
    const size_t comm_groups = size_t(comm_sms / granularity);
    OVL_CHECK(
        comm_groups < parts.groups.size() || (comm_groups == parts.groups.size() && parts.remainder.sm.smCount > 0),
        "comm_sms = {} needs {} groups of {} SMs; this device splits into {}", comm_sms, comm_groups, granularity,
        parts.groups.size());
    std::vector<CUdevResource> comm(parts.groups.begin(), parts.groups.begin() + comm_groups);
    std::vector<CUdevResource> gemm(parts.groups.begin() + comm_groups, parts.groups.end());
    if (parts.remainder.sm.smCount > 0) gemm.push_back(parts.remainder);
    SharedGreenCtxs made;
    made.gemm = make_green_ctx(api, dev, gemm);
    made.comm = make_green_ctx(api, dev, comm);
    it = green_ctxs().emplace(key, made).first;
  }
  std::unique_ptr<SmPartition> p(new SmPartition());
  p->device_ = device;
  p->gemm_sms_ = it->second.gemm.sms;
  p->comm_sms_ = it->second.comm.sms;
  p->gemm_stream_ = make_stream(api, it->second.gemm.ctx, 0);
  p->comm_stream_ = make_stream(api, it->second.comm.ctx, highest_priority());
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
  const std::lock_guard lock(green_mutex());
  const PartitionKey key{device, 0, sms};
  auto it = green_ctxs().find(key);
  if (it == green_ctxs().end()) {
    const size_t groups = size_t((sms - (with_remainder ? remainder : 0)) / granularity);
    std::vector<CUdevResource> use(parts.groups.begin(), parts.groups.begin() + groups);
    if (with_remainder) use.push_back(parts.remainder);
    SharedGreenCtxs made;
    made.gemm = make_green_ctx(api, dev, use);
    it = green_ctxs().emplace(key, made).first;
  }
  std::unique_ptr<SmPartition> p(new SmPartition());
  p->device_ = device;
  p->gemm_sms_ = it->second.gemm.sms;
  p->gemm_stream_ = make_stream(api, it->second.gemm.ctx, 0);
  return p;
}

SmPartition::~SmPartition() {
  for (cudaStream_t s : {gemm_stream_, comm_stream_}) {
    if (s != nullptr && cudaStreamDestroy(s) != cudaSuccess) std::fprintf(stderr, "ovl: cudaStreamDestroy failed\n");
  }
}

}  // namespace ovl
