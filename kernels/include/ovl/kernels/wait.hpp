// Stream-side counter kernels: wait until a counter reaches a value, add to a counter, reset counters.
//
// A waiter spins with ld.acquire.sys (so a counter released by another GPU or by the host is seen), gives up after
// timeout_ns of %globaltimer and then writes a CounterWaitError the host turns into an ovl::Error; it never
// hangs a stream. Adds are red.release.sys. Reset is a plain store by a later kernel on the consumer's stream
// (stream order makes it safe; the host never memsets a counter in the hot path).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ovl::kernels {

// Written by a timed-out wait (code != 0); device-visible (mapped host or device memory).
struct CounterWaitError {
  std::uint32_t code;      // 0: fine; 1: timeout
  std::uint32_t index;     // which counter (position in the array)
  std::uint32_t observed;  // last value seen
  std::uint32_t expected;  // value waited for
};

#if defined(__CUDACC__)
// Device side, for every wait that reports into a CounterWaitError (the wait kernel here, the GEMM's waits): the
// first timed-out wait records itself (code 1, its index and values), later ones leave the record as it is.
__device__ inline void record_counter_timeout(CounterWaitError* error, std::uint32_t index, std::uint32_t observed,
                                              std::uint32_t expected) {
  if (atomicCAS_system(&error->code, 0u, 1u) == 0u) {
    error->index = index;
    error->observed = observed;
    error->expected = expected;
    __threadfence_system();
  }
}
#endif

// One thread waits until counter[i] >= expected for every i in [0, count). grid 1, block 1.
void launch_wait_counters(const std::uint32_t* counters, int count, std::uint32_t expected, std::uint64_t timeout_ns,
                          CounterWaitError* error, cudaStream_t stream);
// counters[i] += value (release, system scope) for i in [0, count). grid 1, block up to 256.
void launch_add_counters(std::uint32_t* counters, int count, std::uint32_t value, cudaStream_t stream);
// Like launch_add_counters, but each thread first sleeps delay_ns (%globaltimer): a stand-in for a GEMM that
// finishes its groups later than the consumer started (tests of the polling collectives).
void launch_add_counters_after(std::uint32_t* counters, int count, std::uint32_t value, std::uint64_t delay_ns,
                               cudaStream_t stream);
// counters[i] = 0 for i in [0, count).
void launch_reset_counters(std::uint32_t* counters, int count, cudaStream_t stream);
// Loads these kernels into the current context now (see preload_collective_kernels in collectives.hpp: with lazy
// loading, a first launch waits for running kernels, so a producer loaded late never releases a spinning waiter).
void preload_wait_kernels();

}  // namespace ovl::kernels
