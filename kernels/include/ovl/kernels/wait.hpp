// Stream-side counter kernels: wait until a counter reaches a value, add to counters, reset counters, and a
// %globaltimer stamp.
//
// A waiter spins with ld.acquire.sys (so a counter released by another GPU or by the host is seen), gives up after
// timeout_ns of %globaltimer and then writes the DeviceError the host turns into an ovl::Error; it never hangs a
// stream. Adds are red.release.sys. Reset is a plain store by a later kernel on the consumer's stream (stream order
// makes it safe; the host never memsets a counter in the hot path).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ovl/kernels/device_error.hpp"

namespace ovl::kernels {

// One thread waits until *counter >= expected (tile group `group`'s counter; a timeout is recorded in `error` as
// WaitKind::kCounterWait; it returns at once when `error` already holds one), then stamps %globaltimer into *stamp
// (optional). The next kernel on the stream starts after it ends, so it sees what the counter's release published.
void launch_wait_counter(const std::uint32_t* counter, std::uint32_t expected, int group, std::uint64_t timeout_ns,
                         DeviceError* error, unsigned long long* stamp, cudaStream_t stream);
// counters[i] += value (release, system scope) for i in [0, count). grid 1, block up to 256.
void launch_add_counters(std::uint32_t* counters, int count, std::uint32_t value, cudaStream_t stream);
// Like launch_add_counters, but each thread first sleeps delay_ns (%globaltimer): a stand-in for a GEMM that
// finishes its groups later than the consumer started (tests of the polling collectives).
void launch_add_counters_after(std::uint32_t* counters, int count, std::uint32_t value, std::uint64_t delay_ns,
                               cudaStream_t stream);
// counters[i] = 0 for i in [0, count).
void launch_reset_counters(std::uint32_t* counters, int count, cudaStream_t stream);
// *slot = %globaltimer (ns) when the kernel runs: a timeline stamp in stream order.
void launch_stamp(unsigned long long* slot, cudaStream_t stream);
// Loads these kernels into the current context now (see preload_collective_kernels in collectives.hpp: with lazy
// loading, a first launch waits for running kernels, so a producer loaded late never releases a spinning waiter).
void preload_wait_kernels();

}  // namespace ovl::kernels
