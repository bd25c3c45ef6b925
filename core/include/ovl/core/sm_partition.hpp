// SmPartition: green contexts that give kernels disjoint sets of SMs, each with a stream.
//
// CUDA 13.0 splits a device's SMs only into equal groups (8 SMs on Hopper) plus a remainder, so a partition of
// k SMs is made from k/8 groups of one split; the other groups and the remainder form the second partition.
// Persistent kernels must size their grids from gemm_sms()/comm_sms() (the device still reports all SMs), and
// both sides must run on these streams: a kernel on an ordinary stream is not confined.
// The green contexts behind a partition are made once per process and kept (destroying one does not give its memory
// back); each SmPartition owns only its streams.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <memory>

namespace ovl {

struct SmResource {
  int sm_count = 0;       // SMs the device offers to green contexts
  int min_partition = 0;  // minSmPartitionSize
  int alignment = 0;      // smCoscheduledAlignment
};
// Throws ovl::Error when there is no driver or no green-context support.
SmResource query_sm_resource(int device);

class SmPartition {
 public:
  // Two disjoint partitions of `device`: comm_sms SMs (a positive multiple of the granularity) for communication
  // and all the others for the GEMM. The communication stream gets the highest stream priority.
  static std::unique_ptr<SmPartition> split(int device, int comm_sms);
  // One partition of `sms` SMs for a lone kernel (comm_stream() is null): a multiple of the granularity, or the
  // groups plus the split's remainder (the H200 splits into 15 groups of 8 and 12 SMs: 124 = 14 x 8 + 12).
  static std::unique_ptr<SmPartition> confine(int device, int sms);

  ~SmPartition();
  SmPartition(const SmPartition&) = delete;
  SmPartition& operator=(const SmPartition&) = delete;

  int device() const { return device_; }
  int gemm_sms() const { return gemm_sms_; }
  int comm_sms() const { return comm_sms_; }
  cudaStream_t gemm_stream() const { return gemm_stream_; }
  cudaStream_t comm_stream() const { return comm_stream_; }

 private:
  SmPartition() = default;
  int device_ = 0;
  int gemm_sms_ = 0;
  int comm_sms_ = 0;
  cudaStream_t gemm_stream_ = nullptr;
  cudaStream_t comm_stream_ = nullptr;
};

}  // namespace ovl
