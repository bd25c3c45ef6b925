// Shared pieces of the GPU benchmarks: CUDA-event manual timing and the JSON context that says where a run was made.
//
// Usage in a benchmark:
//   for (auto _ : state) { ovl::bench::CudaEventTimer timer(state, stream); launch(stream); }
// and end the file with OVL_BENCHMARK_MAIN().
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdlib>
#include <string>

#include "ovl/cuda_check.hpp"
#include "ovl/error.hpp"

namespace ovl::bench {

// The integer in environment variable `name`, or `fallback` when it is unset or empty; a value that is not an
// integer in [lo, hi] throws ovl::Error naming it (a benchmark case reports it as its error).
inline int env_int(const char* name, int lo, int hi, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == 0) return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  OVL_CHECK(*end == 0 && n >= lo && n <= hi, "{} = \"{}\" is not an integer in {}..{}", name, v, lo, hi);
  return int(n);
}

// Records a start event on construction and a stop event on destruction, waits for the stop and reports the
// elapsed device time as the iteration time (the benchmark must call UseManualTime()).
class CudaEventTimer {
 public:
  CudaEventTimer(benchmark::State& state, cudaStream_t stream) : state_(state), stream_(stream) {
    OVL_CUDA_CHECK(cudaEventCreate(&start_));
    OVL_CUDA_CHECK(cudaEventCreate(&stop_));
    OVL_CUDA_CHECK(cudaEventRecord(start_, stream_));
  }
  ~CudaEventTimer() {
    float ms = 0.f;
    if (cudaEventRecord(stop_, stream_) == cudaSuccess && cudaEventSynchronize(stop_) == cudaSuccess &&
        cudaEventElapsedTime(&ms, start_, stop_) == cudaSuccess) {
      state_.SetIterationTime(double(ms) * 1e-3);
    } else {
      state_.SkipWithError("CUDA event timing failed");
    }
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  CudaEventTimer(const CudaEventTimer&) = delete;
  CudaEventTimer& operator=(const CudaEventTimer&) = delete;

 private:
  benchmark::State& state_;
  cudaStream_t stream_;
  cudaEvent_t start_{}, stop_{};
};

// Adds gpu, sm_count, compute capability, driver, CUDA runtime and NCCL versions to the JSON context.
inline void add_device_context() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    benchmark::AddCustomContext("gpu", "none");
    return;
  }
  cudaDeviceProp prop{};
  OVL_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  int driver = 0, runtime = 0, nccl = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  ncclGetVersion(&nccl);
  auto version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  benchmark::AddCustomContext("gpu", prop.name);
  benchmark::AddCustomContext("gpu_count", std::to_string(count));
  benchmark::AddCustomContext("sm_count", std::to_string(prop.multiProcessorCount));
  benchmark::AddCustomContext("compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor));
  benchmark::AddCustomContext("driver_version", version(driver));
  benchmark::AddCustomContext("cuda_runtime_version", version(runtime));
  benchmark::AddCustomContext("nccl_version", std::to_string(nccl / 10000) + "." + std::to_string(nccl / 100 % 100) +
                                                  "." + std::to_string(nccl % 100));
}

}  // namespace ovl::bench

#define OVL_BENCHMARK_MAIN()                                    \
  int main(int argc, char** argv) {                             \
    ::benchmark::Initialize(&argc, argv);                       \
    if (::benchmark::ReportUnrecognizedArguments(argc, argv)) return 1; \
    ::ovl::bench::add_device_context();                         \
    ::benchmark::RunSpecifiedBenchmarks();                      \
    ::benchmark::Shutdown();                                    \
    return 0;                                                   \
  }
