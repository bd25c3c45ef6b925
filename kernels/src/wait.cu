// Counter wait / add / reset kernels (see ovl/kernels/wait.hpp).

#include "ovl/kernels/tma_ptx.cuh"
#include "ovl/cuda_check.hpp"
#include "ovl/kernels/wait.hpp"

namespace ovl::kernels {
namespace {

// grid 1, block 1. Acquire (system scope) loads; on timeout records the first failing counter and returns.
__global__ void wait_counters_kernel(const std::uint32_t* counters, int count, std::uint32_t expected,
                                     std::uint64_t timeout_ns, CounterWaitError* error) {
  const std::uint64_t start = ptx::global_timer_ns();
  for (int i = 0; i < count; ++i) {
    for (;;) {
      const std::uint32_t seen = ptx::ld_acquire_sys(counters + i);
      if (seen >= expected) break;
      if (ptx::global_timer_ns() - start > timeout_ns) {
        record_counter_timeout(error, std::uint32_t(i), seen, expected);
        return;
      }
    }
  }
}

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

void launch_wait_counters(const std::uint32_t* counters, int count, std::uint32_t expected, std::uint64_t timeout_ns,
                          CounterWaitError* error, cudaStream_t stream) {
  OVL_CHECK(counters != nullptr && error != nullptr, "wait_counters: counters or error is null");
  OVL_CHECK(count >= 0, "wait_counters: count = {} < 0", count);
  wait_counters_kernel<<<1, 1, 0, stream>>>(counters, count, expected, timeout_ns, error);
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

void preload_wait_kernels() { preload_kernels(wait_counters_kernel, add_counters_kernel, reset_counters_kernel); }

void launch_reset_counters(std::uint32_t* counters, int count, cudaStream_t stream) {
  OVL_CHECK(counters != nullptr && count >= 0, "reset_counters: counters null or count = {} < 0", count);
  reset_counters_kernel<<<1, block_for(count), 0, stream>>>(counters, count);
  OVL_CUDA_CHECK_LAST();
}

}  // namespace ovl::kernels
