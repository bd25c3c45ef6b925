// Counter wait / add / reset kernels and the timeline stamp (see ovl/kernels/wait.hpp).

#include "ovl/cuda_check.hpp"
#include "ovl/kernels/tma_ptx.cuh"
#include "ovl/kernels/wait.hpp"

namespace ovl::kernels {
namespace {

// grid 1, block 1. Acquires the counter at system scope (ld.acquire.sys pairs with the producer's release add), so
// what the producer wrote before its add is visible to this kernel and, by stream order, to the next kernel on the
// stream, which starts after this one ends. A timeout or an earlier record lets the next kernel run on whatever the
// data holds; the host reports the record.
__global__ void wait_counter_kernel(const std::uint32_t* counter, std::uint32_t expected, std::uint32_t group,
                                    std::uint64_t timeout_ns, DeviceError* error, unsigned long long* stamp) {
  (void)wait_counter_at_least(counter, expected, timeout_ns, error, WaitKind::kCounterWait, group, 0u);
  __threadfence_system();
  if (stamp != nullptr) *stamp = ptx::global_timer_ns();
}

// grid 1, block 1: %globaltimer when the kernel runs, in stream order (no fence: a timestamp, not a signal).
__global__ void stamp_kernel(unsigned long long* slot) { *slot = ptx::global_timer_ns(); }

// grid 1, block min(count, 256): optional delay, then red.release.sys.add.
__global__ void add_counters_kernel(std::uint32_t* counters, int count, std::uint32_t value, std::uint64_t delay_ns) {
  if (delay_ns > 0) {
    const std::uint64_t start = ptx::global_timer_ns();
    while (ptx::global_timer_ns() - start < delay_ns) __nanosleep(1000);
  }
  for (int i = threadIdx.x; i < count; i += blockDim.x) ptx::red_release_sys_add(counters + i, value);
}

__global__ void reset_counters_kernel(std::uint32_t* counters, int count) {
  for (int i = threadIdx.x; i < count; i += blockDim.x) counters[i] = 0;
}

int block_for(int count) { return count < 1 ? 1 : (count < 256 ? count : 256); }

}  // namespace

void launch_wait_counter(const std::uint32_t* counter, std::uint32_t expected, int group, std::uint64_t timeout_ns,
                         DeviceError* error, unsigned long long* stamp, cudaStream_t stream) {
  OVL_CHECK(counter != nullptr && error != nullptr, "wait_counter: counter or error is null");
  OVL_CHECK(group >= 0, "wait_counter: group = {} < 0", group);
  wait_counter_kernel<<<1, 1, 0, stream>>>(counter, expected, std::uint32_t(group), timeout_ns, error, stamp);
  OVL_CUDA_CHECK_LAST();
}

void launch_stamp(unsigned long long* slot, cudaStream_t stream) {
  stamp_kernel<<<1, 1, 0, stream>>>(slot);
  OVL_CUDA_CHECK_LAST();
}

void launch_add_counters(std::uint32_t* counters, int count, std::uint32_t value, cudaStream_t stream) {
  launch_add_counters_after(counters, count, value, 0, stream);
}

void launch_add_counters_after(std::uint32_t* counters, int count, std::uint32_t value, std::uint64_t delay_ns,
                               cudaStream_t stream) {
  OVL_CHECK(counters != nullptr && count >= 0, "add_counters: counters null or count = {} < 0", count);
  add_counters_kernel<<<1, block_for(count), 0, stream>>>(counters, count, value, delay_ns);
  OVL_CUDA_CHECK_LAST();
}

void preload_wait_kernels() {
  preload_kernels(wait_counter_kernel, add_counters_kernel, reset_counters_kernel, stamp_kernel);
}

void launch_reset_counters(std::uint32_t* counters, int count, cudaStream_t stream) {
  OVL_CHECK(counters != nullptr && count >= 0, "reset_counters: counters null or count = {} < 0", count);
  reset_counters_kernel<<<1, block_for(count), 0, stream>>>(counters, count);
  OVL_CUDA_CHECK_LAST();
}

}  // namespace ovl::kernels
