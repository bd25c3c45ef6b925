// Shared pieces of the GPU benchmarks: CUDA-event manual timing and the JSON context that says where a run was made.
//
// Usage in a benchmark:
//   for (auto _ : state) { ovl::bench::CudaEventTimer timer(state, stream); launch(stream); }
// and end the file with OVL_BENCHMARK_MAIN().
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

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

// OVL_BENCH_WORLD: "loopback" (the default: virtual ranks on one GPU), "threads" (a real World of every visible GPU,
// one host thread per rank) or "mpi" (a real World of every process of mpirun, a process per GPU; bench_collectives
// only, in a build with MPI). Anything else throws ovl::Error naming the value.
enum class WorldKind { kLoopback, kThreads, kMpi };
inline WorldKind world_kind() {
  static const WorldKind kind = [] {
    const char* text = std::getenv("OVL_BENCH_WORLD");
    const std::string v = text == nullptr ? "" : text;
    if (v.empty() || v == "loopback") return WorldKind::kLoopback;
    if (v == "threads") return WorldKind::kThreads;
    OVL_CHECK(v == "mpi", "OVL_BENCH_WORLD = \"{}\" is not loopback, threads or mpi", v);
    return WorldKind::kMpi;
  }();
  return kind;
}
inline const char* to_string(WorldKind kind) {
  return kind == WorldKind::kLoopback ? "loopback" : kind == WorldKind::kThreads ? "threads" : "mpi";
}
// A real World (threads or MPI).
inline bool real_world() { return world_kind() != WorldKind::kLoopback; }

// The visible GPUs, at most `max`; 0 when none answers.
inline int visible_gpus(int max) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count < max ? count : max;
}
// 0, 1, ..., the visible GPUs (at most `max`): the devices of a threads World over every GPU.
inline std::vector<int> visible_gpu_ids(int max) {
  std::vector<int> ids(static_cast<std::size_t>(visible_gpus(max)));
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = int(i);
  return ids;
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

// Samples the SM clock (MHz) and the board power (W) of a CUDA device through NVML every `period` while it lives, in
// a thread of its own, and adds their means as counters sm_mhz and power_w (plus clock_samples). The GPU benches run
// at the power limit, where the clock falls under heavy kernels: two kernels' times are comparable only with their
// clocks beside them. NVML is opened with dlopen (libnvidia-ml.so.1, part of the driver), so nothing links against
// it; where it is missing, or the device's handle cannot be had, the sampler does nothing and adds no counters.
class ClockSampler {
 public:
  explicit ClockSampler(int cuda_device, std::chrono::microseconds period = std::chrono::microseconds(2000)) {
    if (!nvml().ok) return;
    char bus_id[32] = {};
    if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, cuda_device) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    if (nvml().handle_by_bus_id(bus_id, &device_) != 0) return;
    thread_ = std::thread([this, period] {
      while (!stop_.load(std::memory_order_relaxed)) {
        unsigned mhz = 0, milliwatts = 0;
        if (nvml().clock(device_, /*NVML_CLOCK_SM*/ 1, &mhz) == 0 && nvml().power(device_, &milliwatts) == 0) {
          mhz_sum_ += mhz;
          watt_sum_ += milliwatts * 1e-3;
          ++samples_;
        }
        std::this_thread::sleep_for(period);
      }
    });
  }
  ~ClockSampler() { stop(); }
  ClockSampler(const ClockSampler&) = delete;
  ClockSampler& operator=(const ClockSampler&) = delete;

  // Ends the sampling (idempotent). Call it right after the timed loop so the counters cover only that loop.
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // Adds sm_mhz, power_w and clock_samples to the case's counters when there was at least one sample.
  void add_counters(benchmark::State& state) {
    stop();
    if (samples_ == 0) return;
    state.counters["sm_mhz"] = mhz_sum_ / samples_;
    state.counters["power_w"] = watt_sum_ / samples_;
    state.counters["clock_samples"] = double(samples_);
  }

 private:
  using Device = void*;  // nvmlDevice_t
  struct Nvml {
    bool ok = false;
    int (*handle_by_bus_id)(const char*, Device*) = nullptr;  // nvmlDeviceGetHandleByPciBusId_v2
    int (*clock)(Device, int, unsigned*) = nullptr;           // nvmlDeviceGetClockInfo
    int (*power)(Device, unsigned*) = nullptr;                // nvmlDeviceGetPowerUsage (milliwatts)
  };
  static const Nvml& nvml() {
    static const Nvml lib = [] {
      Nvml n;
      void* so = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
      if (so == nullptr) return n;
      auto init = reinterpret_cast<int (*)()>(dlsym(so, "nvmlInit_v2"));
      n.handle_by_bus_id =
          reinterpret_cast<decltype(n.handle_by_bus_id)>(dlsym(so, "nvmlDeviceGetHandleByPciBusId_v2"));
      n.clock = reinterpret_cast<decltype(n.clock)>(dlsym(so, "nvmlDeviceGetClockInfo"));
      n.power = reinterpret_cast<decltype(n.power)>(dlsym(so, "nvmlDeviceGetPowerUsage"));
      n.ok = init != nullptr && n.handle_by_bus_id != nullptr && n.clock != nullptr && n.power != nullptr &&
             init() == 0;
      return n;
    }();
    return lib;
  }

  Device device_ = nullptr;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  double mhz_sum_ = 0, watt_sum_ = 0;
  long samples_ = 0;
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
  // The CTAs per thread-block cluster NCCL launches the kernels of ovl's communicators with: 1 (nccl_config in
  // core/src/world_internal.hpp) unless NCCL_CGA_CLUSTER_SIZE overrides it (runs before this key: NCCL's default, 4
  // on Hopper).
  const char* cluster = std::getenv("NCCL_CGA_CLUSTER_SIZE");
  benchmark::AddCustomContext("nccl_cga_cluster_size", cluster != nullptr && *cluster != '\0' ? cluster : "1");
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
