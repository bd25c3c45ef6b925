// bench_gemm: the signaling Hopper GEMM against cuBLAS, on the whole GPU and on green-context partitions.
//
// Cases: gemm/<impl>/<M>x<N>x<K>/<layout>/sms:<n>
//   impl    ovl (signals on: one group per tile row, release add per tile; the tail plan ovl::choose_tail_plan
//           picks: stream-K or half tiles; ovl::choose_split_epilogue picks kTmaStoreSplit when a CTA's share of the
//           GEMM is short, else kTmaStoreDeferred), ovl-tmastore (ovl with the kTmaStore epilogue always),
//           ovl-deferred (ovl with the kTmaStoreDeferred epilogue always), ovl-nosignal (ovl without signals),
//           ovl-nosk (ovl with whole tiles only, kTmaStore), ovl-split (ovl-nosk with the kTmaStoreSplit
//           epilogue: half-tile staging, 4 stages), ovl-sw8 (ovl with swizzle bands of 8 tile rows, whatever K),
//           ovl-nopdl (ovl launched without programmatic dependent launch: GemmArguments::programmatic_launch), cublas;
//           ovl-fp16 and cublas-fp16 are ovl and cublas with fp16 inputs and output (the same random bits as the bf16
//           cases, read as fp16: finite, magnitudes below 2), bf16 everywhere else; ovl-fp8 and cublaslt-fp8: e4m3 x
//           e4m3 inputs (random values in [-2, 2]), per-tensor scales (device pointers, 0.5 and 0.25: the same for
//           both), bf16 output, fp32 accumulation on the tensor cores without promotion (cuBLASLt with
//           CUBLASLT_MATMUL_DESC_FAST_ACCUM = 1, our kernel's accumulation), nt layout only (FP8 wgmma reads B
//           K-major), on 132, 128, 124 and 116 SMs; ovl-fp8 is `ovl` (tune_gemm's plan, signals on), ovl-fp8-nosignal
//           the same without signals
//   layout  nn (B is K x N row-major) or nt (B is N x K row-major)
//   sms     132 = the whole device (no partition); fewer: ovl and cuBLAS both run on a stream of a green context
//           holding that many SMs (cuBLAS also gets cublasSetSmCountTarget)
// Counters: tflops (2 M N K per GEMM over the CUDA-event time), us (per GEMM), and, where NVML can be opened, sm_mhz
// and power_w (means over the timed loop, sampled every 2 ms: the benches run at the power limit). Each iteration
// enqueues enough GEMMs back to back for about a millisecond, so launch gaps and event overhead stay out of the
// numbers. Our impls also record what they ran: swizzle, sk_tiles / sk_splits / sk_ctas (the stream-K plan),
// half_tiles, pdl (programmatic dependent launch), and from gemm_launch_plan epilogue (GemmEpilogue's value; older
// JSON has split_epilogue, 1 for kTmaStoreSplit, instead), grid, stages and b_single_box.
// Regime knobs (for comparing with how the overlap operator runs its GEMM): OVL_BENCH_GEMM_REPS=<n> GEMMs per
// iteration instead (1: one GEMM between two host synchronizations), OVL_BENCH_GEMM_SETS=<n> input sets instead
// of enough to keep the inputs out of L2 (1: the same inputs every time), OVL_BENCH_GEMM_GAP_US=<us> an idle host
// sleep after each timed iteration (the GPU cools between GEMMs). The counters reps, sets and gap_us say what ran.
// OVL_BENCH_GEMM_TIMELINE=1 adds, after the timed loop, 5 GEMMs each bracketed by two one-thread kernels that read
// %globaltimer (amid back-to-back GEMMs, so the GPU stays in the sustained regime): tl_total_us, the median time
// between the two stamps, and tl_gap_us, between two stamp kernels with nothing between them (the launch gap the
// brackets add); for ovl-nosk and ovl-split (whole tiles) also from their per-CTA start stamps and per-tile stamps
// (written when a tile's stores are performed): tl_start_us, the median over CTAs of the CTA's start after the opening
// stamp; tl_tile_us, the median time between a CTA's consecutive tiles; tl_first_us, the median over CTAs of the first
// tile's stamp after the opening stamp; tl_last_us, the closing stamp after the last tile's; tl_rounds, the most tiles
// a CTA ran. So tl_total_us - tl_rounds x tl_tile_us is what the kernel spends beyond its steady tiles (start, tail,
// launch), which cuBLAS's tl_total_us bounds from the other side.
// OVL_BENCH_GEMM_PROBE="<ctas>,<cluster>" (`ovl`, whole-device cases) asks where a kernel finds SMs beside our GEMM,
// as a collective's kernel must: after the timed loop, 5 trials of our GEMM on sms - <ctas> CTAs (tune_gemm's plan for
// that grid) with, on another stream, a 20 us one-thread delay kernel (so the GEMM's CTAs are resident), then a probe
// of <ctas> CTAs of 640 threads (NCCL's block size: none fits on an SM beside a GEMM CTA) launched in thread-block
// clusters of <cluster> CTAs (spread, NCCL's policy), each stamping %globaltimer when it starts and spinning 10 us.
// Counters (medians over the trials): probe_ctas, probe_cluster, probe_gemm_us (the GEMM between its two stamps),
// probe_wait_us (the probe's last CTA's start after the delay kernel's end) and probe_waited (that wait over the
// GEMM's time left then: 0 = the probe ran at once, 1 = it waited for the GEMM's end). NCCL launches its kernels in
// clusters of 4 on Hopper unless told otherwise (docs/overlap.md, "NCCL's thread-block clusters").
// OVL_BENCH_GEMM_BESIDE=ce|d2d runs traffic on other streams through the timed loop, to measure what it costs the
// GEMM: ce copies device -> pinned host and pinned host -> device (32 MiB each, on two streams of the primary context:
// the copy engines, no SM), d2d device -> device copies of the same size on one stream (a same-device copy runs on
// SMs). A host thread of its own keeps up to 4 copies queued per stream (it looks every 20 us), from before the warm-up
// to the end of the timed loop, so the copies run through the whole loop and the timing thread does nothing more than
// without them (host work between the iterations leaves the GPU idle gaps, which change its clock: see
// OVL_BENCH_GEMM_GAP_US).
// Whole-device cases only. Counters: beside (1 ce, 2 d2d) and beside_GBps, the bytes of the copies that ended
// inside the timed loop over its time (summed over the streams; the first copy may have started before it). The
// GEMM's us against the same case without it is its slowdown (scripts/results.py beside); the copy-engine transport
// (comm_algo ce) leaves the GEMM every SM on the premise that this slowdown is small.
// OVL_BENCH_GEMM_SHAPES="MxNxK[,MxNxK...]" registers these shapes too, beside the fixed list (e.g. 8192x7936x2048:
// 1984 = 16 x 124 of our 128 x 256 tiles, whole rounds on 124 SMs); a malformed entry stops the program, named.
// Example: bench_gemm --benchmark_filter='gemm/.*/8192x8192x8192/.*' --benchmark_out=gemm.json
//          --benchmark_out_format=json

#include <benchmark/benchmark.h>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "ovl/core/gemm.hpp"
#include "ovl/cuda_check.hpp"
#include "ovl/device_buffer.hpp"
#include "ovl/kernels/gemm.hpp"
#include "ovl/model/estimate.hpp"

namespace {

using ovl::BLayout;
using ovl::DeviceBuffer;
using ovl::DType;
using ovl::kernels::GemmArguments;

template <typename Fn>
Fn driver_entry(const char* name) {
  void* ptr = nullptr;
  cudaDriverEntryPointQueryResult status{};
  OVL_CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &ptr, 12050, cudaEnableDefault, &status));
  OVL_CHECK(status == cudaDriverEntryPointSuccess && ptr != nullptr, "driver entry point {} not found", name);
  return reinterpret_cast<Fn>(ptr);
}

// A green context of exactly `sms` SMs and a non-blocking stream in it. On the H200 an 8-SM split gives only 15
// groups plus a remainder of 12 (groups stay inside a GPC), so: a multiple of 8 that fits takes the first sms / 8
// groups; otherwise the partition is the remainder of a split into (total - sms) / 8 groups of 8 (124 = 132 - 8);
// otherwise one group of at least `sms` SMs. Whatever is chosen must hold exactly `sms` SMs.
struct GreenPartition {
  CUgreenCtx green{};
  CUcontext context{};
  CUstream stream{};
  int sms = 0;
};

GreenPartition make_partition(int sms) {
  static auto get_resource = driver_entry<PFN_cuDeviceGetDevResource_v12040>("cuDeviceGetDevResource");
  static auto split = driver_entry<PFN_cuDevSmResourceSplitByCount_v12040>("cuDevSmResourceSplitByCount");
  static auto generate = driver_entry<PFN_cuDevResourceGenerateDesc_v12040>("cuDevResourceGenerateDesc");
  static auto create = driver_entry<PFN_cuGreenCtxCreate_v12040>("cuGreenCtxCreate");
  static auto to_context = driver_entry<PFN_cuCtxFromGreenCtx_v12040>("cuCtxFromGreenCtx");
  static auto create_stream = driver_entry<PFN_cuGreenCtxStreamCreate_v12050>("cuGreenCtxStreamCreate");
  int device = 0;
  OVL_CUDA_CHECK(cudaGetDevice(&device));
  CUdevResource all{};
  OVL_CU_CHECK(get_resource(CUdevice(device), &all, CU_DEV_RESOURCE_TYPE_SM));
  const int total = int(all.sm.smCount);
  std::vector<CUdevResource> groups(total / 8 + 1);
  CUdevResource rest{};
  std::vector<CUdevResource> chosen;
  unsigned int count = unsigned(groups.size());
  OVL_CU_CHECK(split(groups.data(), &count, &all, &rest, 0, 8));
  if (sms % 8 == 0 && unsigned(sms / 8) <= count) {
    chosen.assign(groups.begin(), groups.begin() + sms / 8);
  } else if ((total - sms) % 8 == 0 && total > sms) {
    count = unsigned(total - sms) / 8;
    OVL_CU_CHECK(split(groups.data(), &count, &all, &rest, 0, 8));
    chosen.push_back(rest);
  } else {
    count = 1;
    OVL_CU_CHECK(split(groups.data(), &count, &all, &rest, 0, unsigned(sms)));
    chosen.push_back(groups[0]);
  }
  unsigned int got = 0;
  for (const CUdevResource& r : chosen) got += r.sm.smCount;
  OVL_CHECK(got == unsigned(sms), "green-context partition of {} SMs: the splits of {} SMs gave {}", sms, total, got);
  CUdevResourceDesc desc{};
  OVL_CU_CHECK(generate(&desc, chosen.data(), unsigned(chosen.size())));
  GreenPartition p;
  p.sms = sms;
  OVL_CU_CHECK(create(&p.green, desc, CUdevice(device), CU_GREEN_CTX_DEFAULT_STREAM));
  OVL_CU_CHECK(to_context(&p.context, p.green));
  OVL_CU_CHECK(create_stream(&p.stream, p.green, CU_STREAM_NON_BLOCKING, 0));
  return p;
}

// Partitions live for the whole run (one per SM count).
const GreenPartition& partition(int sms) {
  static std::map<int, GreenPartition> cache;
  auto it = cache.find(sms);
  if (it == cache.end()) it = cache.emplace(sms, make_partition(sms)).first;
  return it->second;
}

void set_current_context(CUcontext ctx) {
  static auto set_current = driver_entry<PFN_cuCtxSetCurrent_v4000>("cuCtxSetCurrent");
  OVL_CU_CHECK(set_current(ctx));
}
CUcontext current_context() {
  static auto get_current = driver_entry<PFN_cuCtxGetCurrent_v4000>("cuCtxGetCurrent");
  CUcontext ctx{};
  OVL_CU_CHECK(get_current(&ctx));
  return ctx;
}

__global__ void stamp_kernel(unsigned long long* out) {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  *out = t;
}

// OVL_BENCH_GEMM_PROBE's kernel: thread 0 of each CTA stamps its start into starts[blockIdx.x], then spins spin_ns.
__global__ void probe_kernel(unsigned long long* starts, unsigned long long spin_ns) {
  if (threadIdx.x != 0) return;
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  starts[blockIdx.x] = t0;
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < spin_ns);
}

void launch_probe(unsigned long long* starts, int ctas, int threads, int cluster, unsigned long long spin_ns,
                  cudaStream_t stream) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(unsigned(ctas));
  config.blockDim = dim3(unsigned(threads));
  config.stream = stream;
  cudaLaunchAttribute attrs[2]{};
  if (cluster > 1) {
    attrs[0].id = cudaLaunchAttributeClusterDimension;
    attrs[0].val.clusterDim.x = unsigned(cluster);
    attrs[0].val.clusterDim.y = attrs[0].val.clusterDim.z = 1;
    attrs[1].id = cudaLaunchAttributeClusterSchedulingPolicyPreference;
    attrs[1].val.clusterSchedulingPolicyPreference = cudaClusterSchedulingPolicySpread;
    config.attrs = attrs;
    config.numAttrs = 2;
  }
  OVL_CUDA_CHECK(cudaLaunchKernelEx(&config, probe_kernel, starts, spin_ns));
}

// The visiting order of the swizzle order (position -> tile id), as the kernel computes it.
std::vector<int> swizzle_order(int tiles_m, int tiles_n, int rows) {
  std::vector<int> order;
  for (int band = 0; band * rows < tiles_m; ++band) {
    const int h = std::min(rows, tiles_m - band * rows);
    for (int c = 0; c < tiles_n; ++c) {
      for (int r = 0; r < h; ++r) order.push_back((band * rows + r) * tiles_n + c);
    }
  }
  return order;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Random values in [-range, range] (never 0) of type T (bf16 inputs: range 1; e4m3: range 2).
template <typename T>
__global__ void fill_random(T* out, size_t count, uint32_t seed, float range) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ (seed * 0x9E3779B9u) ^ uint32_t(i >> 32);
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    const float v = ((float(h & 0xFFFF) / 65535.f) * 2.f - 1.f) * range;
    out[i] = T(v == 0.f ? 0.5f : v);
  }
}

// Input sets for one shape: several when one set would sit in L2, so repeated GEMMs read device memory.
struct Buffers {
  int m = 0, n = 0, k = 0;
  bool fp8 = false;
  // FP8: a_scale at scales[0], b_scale at scales[kBScale], 256 bytes apart. cuBLASLt 13.1 refused a scale 4 bytes
  // after the other (CUBLAS_STATUS_NOT_SUPPORTED from cublasLtMatmul for every algorithm the heuristic offered) and
  // ran with scales of their own allocations; ovl's GEMM takes a scale at any address.
  static constexpr int kBScale = 64;
  DeviceBuffer scales;  // floats
  std::vector<DeviceBuffer> a, b;
  DeviceBuffer d;
  DeviceBuffer counters;   // unsigned ints
  DeviceBuffer workspace;  // grown to the largest gemm_workspace_bytes asked for
  const float* a_scale() const { return scales.as<const float>(); }
  const float* b_scale() const { return scales.as<const float>() + kBScale; }
  void* workspace_for(size_t bytes) {
    if (bytes > workspace.bytes()) workspace = DeviceBuffer(bytes);
    return workspace.get();
  }
};

Buffers& buffers(int m, int n, int k, bool fp8) {
  static std::unique_ptr<Buffers> current;
  if (current && current->m == m && current->n == n && current->k == k && current->fp8 == fp8) return *current;
  current.reset();
  current = std::make_unique<Buffers>();
  Buffers& b = *current;
  b.m = m;
  b.n = n;
  b.k = k;
  b.fp8 = fp8;
  int l2 = 0;
  OVL_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  const size_t element = fp8 ? 1 : 2;
  const size_t a_bytes = size_t(m) * k * element, b_bytes = size_t(k) * n * element;
  const int sets = ovl::bench::env_int(
      "OVL_BENCH_GEMM_SETS", 1, 8,
      int(std::clamp<size_t>((3 * size_t(l2) + a_bytes + b_bytes - 1) / (a_bytes + b_bytes), 1, 8)));
  for (int s = 0; s < sets; ++s) {
    b.a.emplace_back(a_bytes);
    b.b.emplace_back(b_bytes);
    for (int which = 0; which < 2; ++which) {
      void* p = which == 0 ? b.a.back().get() : b.b.back().get();
      const size_t count = (which == 0 ? a_bytes : b_bytes) / element;
      const uint32_t seed = 2 * s + 1 + which;
      if (fp8) {
        fill_random<<<1024, 256>>>(static_cast<__nv_fp8_e4m3*>(p), count, seed, 2.f);
      } else {
        fill_random<<<1024, 256>>>(static_cast<__nv_bfloat16*>(p), count, seed, 1.f);
      }
      OVL_CUDA_CHECK_LAST();
    }
  }
  b.d = DeviceBuffer(size_t(m) * n * 2);
  if (fp8) {
    float scales[Buffers::kBScale + 1] = {};
    scales[0] = 0.5f;
    scales[Buffers::kBScale] = 0.25f;
    b.scales = DeviceBuffer(sizeof(scales));
    OVL_CUDA_CHECK(cudaMemcpy(b.scales.get(), scales, sizeof(scales), cudaMemcpyHostToDevice));
  }
  b.counters = DeviceBuffer(4096 * sizeof(unsigned int));
  OVL_CUDA_CHECK(cudaMemset(b.counters.get(), 0, 4096 * sizeof(unsigned int)));
  OVL_CUDA_CHECK(cudaDeviceSynchronize());
  return b;
}

// kOvl, kOvlNoSignal: as ovl::tune_gemm sets them (ovl::choose_tail_plan's tail, choose_swizzle's bands,
// choose_split_epilogue's kTmaStoreSplit, else kTmaStoreDeferred);
// kOvlNoStreamK: kOvl with whole tiles only and the kTmaStore epilogue;
// kOvlSplit: kOvlNoStreamK with the kTmaStoreSplit epilogue;
// kOvlSwizzle8: kOvl with swizzle bands of 8 tile rows (the default before ovl::choose_swizzle); kOvlTmaStore: kOvl
// with the kTmaStore epilogue (the default before ovl::choose_split_epilogue); kOvlDeferred: kOvl with the
// kTmaStoreDeferred epilogue (also where kOvl splits); kOvlNoPdl: kOvl with programmatic_launch off.
enum class Impl {
  kOvl,
  kOvlNoSignal,
  kOvlNoStreamK,
  kOvlSplit,
  kOvlSwizzle8,
  kOvlTmaStore,
  kOvlDeferred,
  kOvlNoPdl,
  kCublas,
  kCublasLt  // FP8 only: cublasLtMatmul with per-tensor scales
};

struct Case {
  Impl impl;
  int m, n, k;
  BLayout layout;
  int sms;
  DType dtype = DType::kBF16;
};

// OVL_BENCH_GEMM_BESIDE's traffic (the file comment says what), in the primary context: whole-device cases only.
class BesideTraffic {
 public:
  static constexpr size_t kChunk = size_t(32) << 20;
  static constexpr size_t kQueued = 4;

  BesideTraffic() {
    const char* v = std::getenv("OVL_BENCH_GEMM_BESIDE");
    const std::string kind = v == nullptr ? "" : v;
    OVL_CHECK(kind.empty() || kind == "ce" || kind == "d2d", "OVL_BENCH_GEMM_BESIDE = \"{}\" is not ce or d2d", kind);
    if (kind.empty()) return;
    kind_ = kind == "ce" ? 1 : 2;
    device_ = DeviceBuffer(2 * kChunk);
    if (kind_ == 1) OVL_CUDA_CHECK(cudaMallocHost(&host_, 2 * kChunk));
    lanes_.resize(kind_ == 1 ? 2 : 1);
    for (Lane& l : lanes_) OVL_CUDA_CHECK(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking));
    for (cudaEvent_t& e : window_) OVL_CUDA_CHECK(cudaEventCreate(&e));
  }
  ~BesideTraffic() {
    stop();
    for (Lane& l : lanes_) {
      (void)cudaStreamSynchronize(l.stream);
      for (cudaEvent_t e : l.copies) (void)cudaEventDestroy(e);
      (void)cudaStreamDestroy(l.stream);
    }
    for (cudaEvent_t e : window_)
      if (e != nullptr) (void)cudaEventDestroy(e);
    if (host_ != nullptr) (void)cudaFreeHost(host_);
  }
  BesideTraffic(const BesideTraffic&) = delete;
  BesideTraffic& operator=(const BesideTraffic&) = delete;

  bool on() const { return kind_ != 0; }
  // The feeding thread, from start() to stop().
  void start() {
    int device = 0;
    OVL_CUDA_CHECK(cudaGetDevice(&device));
    feeder_ = std::thread([this, device] {
      try {
        OVL_CUDA_CHECK(cudaSetDevice(device));
        while (!stopping_.load()) {
          feed();
          std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
      } catch (const std::exception& e) {
        error_ = e.what();
      }
    });
  }
  void stop() {
    stopping_.store(true);
    if (feeder_.joinable()) feeder_.join();
  }

  // The timed loop's start and end on the GEMM's stream: the copies that end between them count.
  void mark(int which, cudaStream_t stream) { OVL_CUDA_CHECK(cudaEventRecord(window_[which], stream)); }
  // Waits for the copies and sets the counters: beside_GBps = the bytes of the copies that ended inside the timed
  // loop over the loop's time, summed over the streams.
  void finish(benchmark::State& state) {
    stop();
    OVL_CHECK(error_.empty(), "OVL_BENCH_GEMM_BESIDE's feeding thread: {}", error_);
    OVL_CUDA_CHECK(cudaEventSynchronize(window_[1]));
    float window_ms = 0;
    OVL_CUDA_CHECK(cudaEventElapsedTime(&window_ms, window_[0], window_[1]));
    double bytes = 0;
    for (Lane& l : lanes_) {
      OVL_CUDA_CHECK(cudaStreamSynchronize(l.stream));
      for (cudaEvent_t e : l.copies) {
        float at = 0;
        OVL_CUDA_CHECK(cudaEventElapsedTime(&at, window_[0], e));
        if (at > 0 && at <= window_ms) bytes += double(kChunk);
      }
    }
    state.counters["beside"] = kind_;
    state.counters["beside_GBps"] = window_ms > 0 ? bytes / (double(window_ms) * 1e6) : 0.0;
  }

 private:
  // Tops every stream up to kQueued copies in flight (each copy's end is an event, kept for finish()).
  void feed() {
    for (size_t i = 0; i < lanes_.size(); ++i) {
      Lane& l = lanes_[i];
      while (l.front < l.copies.size() && cudaEventQuery(l.copies[l.front]) == cudaSuccess) ++l.front;
      while (l.copies.size() - l.front < kQueued) {
        char* dev = device_.as<char>();
        if (kind_ == 2) {
          OVL_CUDA_CHECK(cudaMemcpyAsync(dev + kChunk, dev, kChunk, cudaMemcpyDeviceToDevice, l.stream));
        } else if (i == 0) {
          OVL_CUDA_CHECK(cudaMemcpyAsync(host_, dev, kChunk, cudaMemcpyDeviceToHost, l.stream));
        } else {
          OVL_CUDA_CHECK(cudaMemcpyAsync(dev + kChunk, static_cast<char*>(host_) + kChunk, kChunk,
                                         cudaMemcpyHostToDevice, l.stream));
        }
        cudaEvent_t done = nullptr;
        OVL_CUDA_CHECK(cudaEventCreate(&done));
        OVL_CUDA_CHECK(cudaEventRecord(done, l.stream));
        l.copies.push_back(done);
      }
    }
  }

  struct Lane {
    cudaStream_t stream = nullptr;
    std::vector<cudaEvent_t> copies;  // one per copy, in order; [front, end) not yet seen done
    size_t front = 0;
  };
  int kind_ = 0;
  DeviceBuffer device_;
  void* host_ = nullptr;
  std::vector<Lane> lanes_;
  cudaEvent_t window_[2] = {};
  std::thread feeder_;
  std::atomic<bool> stopping_{false};
  std::string error_;  // what stopped the feeding thread, read after it joined
};

cublasHandle_t cublas_handle() {
  static cublasHandle_t handle = [] {
    cublasHandle_t h;
    OVL_CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS, "cublasCreate failed");
    return h;
  }();
  return handle;
}

GemmArguments gemm_arguments(const Case& c, Buffers& buf, int set) {
  using ovl::kernels::GemmEpilogue;
  GemmArguments args;
  args.m = c.m;
  args.n = c.n;
  args.k = c.k;
  args.dtype = c.dtype;
  if (c.dtype == DType::kE4M3) {
    args.b_dtype = DType::kE4M3;
    args.out_dtype = DType::kBF16;
    args.a_scale = buf.a_scale();
    args.b_scale = buf.b_scale();
  }
  args.b_layout = c.layout;
  args.a = buf.a[set].get();
  args.b = buf.b[set].get();
  args.d = buf.d.get();
  args.sm_count = c.sms;
  // Every impl starts from what a user of the library gets from ovl::tune_gemm (swizzle bands, tail plan, epilogue);
  // each variant then changes what its name says.
  ovl::tune_gemm(args);
  static const int forced_swizzle = ovl::bench::env_int("OVL_BENCH_GEMM_SWIZZLE", 1, 1 << 16, 0);
  if (forced_swizzle > 0) args.swizzle = forced_swizzle;
  if (c.impl == Impl::kOvlSwizzle8) args.swizzle = 8;
  const bool tuned = c.impl == Impl::kOvl || c.impl == Impl::kOvlNoSignal || c.impl == Impl::kOvlSwizzle8 ||
                     c.impl == Impl::kOvlTmaStore || c.impl == Impl::kOvlDeferred || c.impl == Impl::kOvlNoPdl;
  if (!tuned) {  // whole tiles and the kTmaStore epilogue, unless the impl names another below
    args.stream_k_tiles = args.stream_k_splits = args.half_tiles = 0;
    args.epilogue = GemmEpilogue::kTmaStore;
  }
  if (c.impl == Impl::kOvlSplit) args.epilogue = GemmEpilogue::kTmaStoreSplit;
  if (c.impl == Impl::kOvlTmaStore) args.epilogue = GemmEpilogue::kTmaStore;
  if (c.impl == Impl::kOvlDeferred) args.epilogue = GemmEpilogue::kTmaStoreDeferred;
  if (c.impl == Impl::kOvlNoPdl) args.programmatic_launch = false;
  if (c.impl == Impl::kOvl) {
    // OVL_BENCH_GEMM_SK="tiles,splits,ctas" forces a stream-K plan on `ovl` (for trying plans by hand; "0,0,0":
    // whole tiles; "auto": tune_gemm's plan, as when unset, so that an A/B can name it).
    static const char* forced = std::getenv("OVL_BENCH_GEMM_SK");
    if (forced != nullptr && std::string_view(forced) != "auto") {
      OVL_CHECK(std::sscanf(forced, "%d,%d,%d", &args.stream_k_tiles, &args.stream_k_splits, &args.stream_k_ctas) == 3,
                "OVL_BENCH_GEMM_SK = '{}' is not tiles,splits,ctas", forced);
      args.half_tiles = 0;
    }
    // OVL_BENCH_GEMM_HALF=<tiles> runs the last <tiles> tiles as half tiles instead (stream-K off; 0: neither).
    static const int half = ovl::bench::env_int("OVL_BENCH_GEMM_HALF", 0, 1 << 30, -1);
    if (half >= 0) {
      args.half_tiles = half;
      args.stream_k_tiles = args.stream_k_splits = args.stream_k_ctas = 0;
    }
  }
  if (c.impl != Impl::kOvlNoSignal) {
    // Signals on (every ovl impl but ovl-nosignal; cuBLAS never gets here): one group per tile row, the counters a
    // row-band collective would wait on.
    const int tiles_n = (c.n + ovl::kernels::gemm_tile_shape().n - 1) / ovl::kernels::gemm_tile_shape().n;
    args.tile_groups.assign(ovl::kernels::gemm_tile_count(args) / tiles_n, tiles_n);
    args.group_counters = buf.counters.as<unsigned int>();
  }
  return args;
}

void run_cublas(const Case& c, Buffers& buf, int set) {
  // Row-major D = A B is column-major D^T = B^T A^T.
  const float alpha = 1.f, beta = 0.f;
  const bool kxn = c.layout == BLayout::kKxN;
  const cudaDataType t = c.dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
  const cublasStatus_t st = cublasGemmEx(cublas_handle(), kxn ? CUBLAS_OP_N : CUBLAS_OP_T, CUBLAS_OP_N, c.n, c.m, c.k,
                                         &alpha, buf.b[set].get(), t, kxn ? c.n : c.k, buf.a[set].get(), t, c.k, &beta,
                                         buf.d.get(), t, c.n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  OVL_CHECK(st == CUBLAS_STATUS_SUCCESS, "cublasGemmEx failed: {}", int(st));
}

// cuBLASLt's FP8 GEMM for one case (nt: row-major D = A B^T is column-major D^T = B A^T, B read transposed: the "TN"
// layout FP8 needs), with the scales as device pointers and the heuristic's first algorithm, chosen once per case
// (off the timed path) for its SM count (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET on a partition).
class CublasLtFp8 {
 public:
  CublasLtFp8(const Case& c, const Buffers& buf, int sms_target) {
    OVL_CHECK(cublasLtCreate(&handle_) == CUBLAS_STATUS_SUCCESS, "cublasLtCreate failed");
    check(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
    const cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
    set(CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t));
    set(CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof(n));
    const float* b_scale = buf.b_scale();  // cuBLAS's A is our B, its B our A
    const float* a_scale = buf.a_scale();
    set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &b_scale, sizeof(b_scale));
    set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a_scale, sizeof(a_scale));
    const int8_t fast = 1;
    set(CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast));
    const int32_t target = sms_target;
    set(CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &target, sizeof(target));
    check(cublasLtMatrixLayoutCreate(&a_, CUDA_R_8F_E4M3, c.k, c.n, c.k), "cublasLtMatrixLayoutCreate(A)");
    check(cublasLtMatrixLayoutCreate(&b_, CUDA_R_8F_E4M3, c.k, c.m, c.k), "cublasLtMatrixLayoutCreate(B)");
    check(cublasLtMatrixLayoutCreate(&d_, CUDA_R_16BF, c.n, c.m, c.n), "cublasLtMatrixLayoutCreate(D)");
    cublasLtMatmulPreference_t pref = nullptr;
    check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    const size_t ws = kWorkspaceBytes;
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
          "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES");
    cublasLtMatmulHeuristicResult_t results[kMaxAlgos] = {};
    int found = 0;
    const cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(handle_, desc_, a_, b_, d_, d_, pref, kMaxAlgos, results, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    OVL_CHECK(st == CUBLAS_STATUS_SUCCESS && found > 0, "cublasLtMatmulAlgoGetHeuristic found no FP8 algorithm ({})",
              int(st));
    for (int i = 0; i < found; ++i) algos_[algo_count_++] = results[i].algo;
    workspace_ = DeviceBuffer(kWorkspaceBytes);
  }
  ~CublasLtFp8() {
    cublasLtMatrixLayoutDestroy(a_);
    cublasLtMatrixLayoutDestroy(b_);
    cublasLtMatrixLayoutDestroy(d_);
    cublasLtMatmulDescDestroy(desc_);
    cublasLtDestroy(handle_);
  }
  CublasLtFp8(const CublasLtFp8&) = delete;
  CublasLtFp8& operator=(const CublasLtFp8&) = delete;
  // The heuristic's first algorithm that runs: the first call walks the list past any that cublasLtMatmul refuses
  // (CUBLAS_STATUS_NOT_SUPPORTED), and later calls keep the one that ran.
  void run(const Buffers& buf, int set, cudaStream_t stream) {
    const float alpha = 1.f, beta = 0.f;
    cublasStatus_t st = CUBLAS_STATUS_NOT_SUPPORTED;
    for (; chosen_ < algo_count_; ++chosen_) {
      st = cublasLtMatmul(handle_, desc_, &alpha, buf.b[set].get(), a_, buf.a[set].get(), b_, &beta, buf.d.get(), d_,
                          buf.d.get(), d_, &algos_[chosen_], workspace_.get(), kWorkspaceBytes, stream);
      if (st != CUBLAS_STATUS_NOT_SUPPORTED) break;
    }
    OVL_CHECK(st == CUBLAS_STATUS_SUCCESS, "cublasLtMatmul (FP8) failed: {} ({} algorithms from the heuristic)",
              int(st), algo_count_);
  }

 private:
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;
  static constexpr int kMaxAlgos = 8;
  static void check(cublasStatus_t st, const char* what) {
    OVL_CHECK(st == CUBLAS_STATUS_SUCCESS, "{} failed: {}", what, int(st));
  }
  void set(cublasLtMatmulDescAttributes_t attr, const void* value, size_t bytes) {
    check(cublasLtMatmulDescSetAttribute(desc_, attr, value, bytes), "cublasLtMatmulDescSetAttribute");
  }
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;
  cublasLtMatmulAlgo_t algos_[kMaxAlgos] = {};
  int algo_count_ = 0;
  int chosen_ = 0;
  DeviceBuffer workspace_;
};

// OVL_BENCH_GEMM_TIMELINE (see the top of the file). `ovl`: our arguments (whole tiles), else cuBLAS.
template <typename RunGemm>
void timeline(benchmark::State& state, const Case& c, const GemmArguments* ovl, void* workspace,
              const RunGemm& run_gemm, cudaStream_t stream) {
  constexpr int kTrials = 5;
  const ovl::kernels::GemmTileShape t = ovl::kernels::gemm_tile_shape();
  const int tiles_m = (c.m + t.m - 1) / t.m, tiles_n = (c.n + t.n - 1) / t.n, tiles = tiles_m * tiles_n;
  const size_t per_trial = size_t(tiles) + c.sms;
  // marks: 4 per trial (the brackets, then two stamps back to back); stamps: tiles + sm count per trial.
  const DeviceBuffer marks_buffer(4 * kTrials * sizeof(unsigned long long));
  const DeviceBuffer stamps_buffer(kTrials * per_trial * sizeof(unsigned long long));
  auto* marks = marks_buffer.as<unsigned long long>();
  auto* stamps = stamps_buffer.as<unsigned long long>();
  for (int trial = 0; trial < kTrials; ++trial) {
    for (int w = 0; w < 3; ++w) run_gemm(0);
    stamp_kernel<<<1, 1, 0, stream>>>(marks + 4 * trial + 2);
    stamp_kernel<<<1, 1, 0, stream>>>(marks + 4 * trial + 3);
    for (int w = 0; w < 2; ++w) run_gemm(0);
    stamp_kernel<<<1, 1, 0, stream>>>(marks + 4 * trial);
    if (ovl != nullptr) {
      GemmArguments a = *ovl;
      a.tile_timestamps = stamps + trial * per_trial;
      a.cta_timestamps = a.tile_timestamps + tiles;
      ovl::kernels::gemm_run(a, workspace, stream);
    } else {
      run_gemm(0);
    }
    stamp_kernel<<<1, 1, 0, stream>>>(marks + 4 * trial + 1);
    OVL_CUDA_CHECK_LAST();
    for (int w = 0; w < 3; ++w) run_gemm(0);
  }
  OVL_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<unsigned long long> m(4 * kTrials), s(kTrials * per_trial);
  OVL_CUDA_CHECK(cudaMemcpy(m.data(), marks, m.size() * 8, cudaMemcpyDeviceToHost));
  OVL_CUDA_CHECK(cudaMemcpy(s.data(), stamps, s.size() * 8, cudaMemcpyDeviceToHost));
  std::vector<double> total, gap, start, tile, first, last;
  int rounds = 0;
  const std::vector<int> order = swizzle_order(tiles_m, tiles_n, ovl != nullptr ? ovl->swizzle : 1);
  const int grid = std::min(c.sms, tiles);
  for (int trial = 0; trial < kTrials; ++trial) {
    const double pre = double(m[4 * trial]), post = double(m[4 * trial + 1]);
    total.push_back((post - pre) * 1e-3);
    gap.push_back((double(m[4 * trial + 3]) - double(m[4 * trial + 2])) * 1e-3);
    if (ovl == nullptr) continue;
    const unsigned long long* st = s.data() + trial * per_trial;
    for (int b = 0; b < grid; ++b) start.push_back((double(st[tiles + b]) - pre) * 1e-3);
    double latest = 0;
    for (int b = 0; b < grid; ++b) {
      int n = 0;
      double previous = 0;
      for (int pos = b; pos < tiles; pos += grid, ++n) {
        const double x = double(st[order[pos]]);
        if (n == 0) first.push_back((x - pre) * 1e-3);
        if (n > 0) tile.push_back((x - previous) * 1e-3);
        previous = x;
        latest = std::max(latest, x);
      }
      rounds = std::max(rounds, n);
    }
    last.push_back((post - latest) * 1e-3);
  }
  state.counters["tl_total_us"] = median(total);
  state.counters["tl_gap_us"] = median(gap);
  if (ovl != nullptr) {
    state.counters["tl_start_us"] = median(start);
    state.counters["tl_tile_us"] = median(tile);
    state.counters["tl_first_us"] = median(first);
    state.counters["tl_last_us"] = median(last);
    state.counters["tl_rounds"] = rounds;
  }
}

// OVL_BENCH_GEMM_PROBE (see the top of the file): `probe` is our GEMM's arguments for sms - ctas CTAs.
void cluster_probe(benchmark::State& state, const GemmArguments& probe, void* workspace, int ctas, int cluster,
                   cudaStream_t stream) {
  constexpr int kTrials = 5;
  constexpr unsigned long long kDelayNs = 20000, kSpinNs = 10000;
  // Per trial: the GEMM's two stamps, the delay kernel's start, then each probe CTA's start.
  const size_t per_trial = 3 + size_t(ctas);
  const DeviceBuffer stamps_buffer(kTrials * per_trial * sizeof(unsigned long long));
  auto* stamps = stamps_buffer.as<unsigned long long>();
  cudaStream_t side = nullptr;
  cudaEvent_t opened = nullptr;
  OVL_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  OVL_CUDA_CHECK(cudaEventCreateWithFlags(&opened, cudaEventDisableTiming));
  for (int trial = 0; trial < kTrials; ++trial) {
    unsigned long long* st = stamps + trial * per_trial;
    for (int w = 0; w < 2; ++w) ovl::kernels::gemm_run(probe, workspace, stream);
    stamp_kernel<<<1, 1, 0, stream>>>(st);
    OVL_CUDA_CHECK(cudaEventRecord(opened, stream));
    ovl::kernels::gemm_run(probe, workspace, stream);
    stamp_kernel<<<1, 1, 0, stream>>>(st + 1);
    OVL_CUDA_CHECK(cudaStreamWaitEvent(side, opened, 0));
    launch_probe(st + 2, 1, 32, 1, kDelayNs, side);
    launch_probe(st + 3, ctas, 640, cluster, kSpinNs, side);
    OVL_CUDA_CHECK_LAST();
    OVL_CUDA_CHECK(cudaStreamSynchronize(side));
    OVL_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  std::vector<unsigned long long> s(kTrials * per_trial);
  OVL_CUDA_CHECK(cudaMemcpy(s.data(), stamps, s.size() * 8, cudaMemcpyDeviceToHost));
  OVL_CUDA_CHECK(cudaEventDestroy(opened));
  OVL_CUDA_CHECK(cudaStreamDestroy(side));
  std::vector<double> gemm, wait, waited;
  for (int trial = 0; trial < kTrials; ++trial) {
    const unsigned long long* st = s.data() + trial * per_trial;
    const double open = double(st[0]), close = double(st[1]), ready = double(st[2] + kDelayNs);
    const double last = double(*std::max_element(st + 3, st + 3 + ctas));
    gemm.push_back((close - open) * 1e-3);
    wait.push_back((last - ready) * 1e-3);
    waited.push_back(close > ready ? (last - ready) / (close - ready) : 0.0);
  }
  state.counters["probe_ctas"] = ctas;
  state.counters["probe_cluster"] = cluster;
  state.counters["probe_gemm_us"] = median(gemm);
  state.counters["probe_wait_us"] = median(wait);
  state.counters["probe_waited"] = median(waited);
}

void bench_gemm(benchmark::State& state, Case c) {
  try {
    int device_sms = 0, major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) != cudaSuccess) {
      (void)cudaGetLastError();
      state.SkipWithError("no CUDA GPU");
      return;
    }
    if (major * 10 + minor != 90) {
      state.SkipWithError("needs a Hopper GPU (compute capability 9.0)");
      return;
    }
    OVL_CUDA_CHECK(cudaDeviceGetAttribute(&device_sms, cudaDevAttrMultiProcessorCount, 0));
    if (c.sms > device_sms) {
      state.SkipWithError("more SMs asked than the device has");
      return;
    }
    Buffers& buf = buffers(c.m, c.n, c.k, c.dtype == DType::kE4M3);
    const int sets = int(buf.a.size());
    // About 1 ms of GEMMs per iteration at ~700 TFLOP/s.
    const double flops = 2.0 * c.m * c.n * c.k;
    const int reps =
        ovl::bench::env_int("OVL_BENCH_GEMM_REPS", 1, 1 << 20, std::max(1, int(std::ceil(1e-3 / (flops / 700e12)))));

    const bool partitioned = c.sms < device_sms;
    BesideTraffic beside;
    if (beside.on() && partitioned) {
      state.SkipWithError(("OVL_BENCH_GEMM_BESIDE runs beside whole-device cases only (sms:" +
                           std::to_string(device_sms) + ")").c_str());
      return;
    }
    cudaStream_t stream = nullptr;
    CUcontext saved = current_context();
    if (partitioned) {
      const GreenPartition& p = partition(c.sms);
      set_current_context(p.context);
      stream = reinterpret_cast<cudaStream_t>(p.stream);
    } else {
      OVL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    }
    if (c.impl == Impl::kCublas) {
      OVL_CHECK(cublasSetStream(cublas_handle(), stream) == CUBLAS_STATUS_SUCCESS, "cublasSetStream failed");
      OVL_CHECK(cublasSetSmCountTarget(cublas_handle(), partitioned ? c.sms : 0) == CUBLAS_STATUS_SUCCESS,
                "cublasSetSmCountTarget failed");
    }
    // Our GEMM's arguments for each input set and its workspace, made once per case, off the timed path.
    std::vector<GemmArguments> args;
    void* workspace = nullptr;
    std::unique_ptr<CublasLtFp8> lt;
    if (c.impl == Impl::kCublasLt) {
      lt = std::make_unique<CublasLtFp8>(c, buf, partitioned ? c.sms : 0);
    } else if (c.impl != Impl::kCublas) {
      for (int s = 0; s < sets; ++s) args.push_back(gemm_arguments(c, buf, s));
      workspace = buf.workspace_for(ovl::kernels::gemm_workspace_bytes(args[0]));
    }
    const auto run_gemm = [&](int set) {
      if (c.impl == Impl::kCublas) {
        run_cublas(c, buf, set);
      } else if (c.impl == Impl::kCublasLt) {
        lt->run(buf, set, stream);
      } else {
        ovl::kernels::gemm_run(args[set], workspace, stream);
      }
    };
    if (beside.on()) beside.start();
    for (int w = 0; w < 2; ++w) run_gemm(w % sets);
    OVL_CUDA_CHECK(cudaStreamSynchronize(stream));

    int set = 0;
    if (beside.on()) beside.mark(0, stream);
    const int gap_us = ovl::bench::env_int("OVL_BENCH_GEMM_GAP_US", 0, 1000000, 0);
    ovl::bench::ClockSampler clocks(0);
    for (auto _ : state) {
      {
        ovl::bench::CudaEventTimer timer(state, stream);
        for (int r = 0; r < reps; ++r) {
          run_gemm(set);
          set = (set + 1) % sets;
        }
      }
      if (gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(gap_us));  // the GPU idles, untimed
    }
    if (beside.on()) beside.mark(1, stream);
    OVL_CUDA_CHECK(cudaStreamSynchronize(stream));
    clocks.add_counters(state);
    if (beside.on()) beside.finish(state);
    if (ovl::bench::env_int("OVL_BENCH_GEMM_TIMELINE", 0, 1, 0) == 1 &&
        (c.impl == Impl::kCublas || c.impl == Impl::kOvlNoStreamK || c.impl == Impl::kOvlSplit)) {
      timeline(state, c, args.empty() ? nullptr : &args[0], workspace, run_gemm, stream);
    }
    if (const char* p = std::getenv("OVL_BENCH_GEMM_PROBE"); p != nullptr && c.impl == Impl::kOvl && !partitioned) {
      int ctas = 0, cluster = 0;
      OVL_CHECK(std::sscanf(p, "%d,%d", &ctas, &cluster) == 2 && ctas >= 1 && ctas < c.sms && cluster >= 1 &&
                    cluster <= 8 && ctas % cluster == 0,
                "OVL_BENCH_GEMM_PROBE = '{}' is not ctas,cluster with 1 <= ctas < {} and a cluster of 1-8 CTAs "
                "dividing ctas",
                p, c.sms);
      Case beside = c;
      beside.sms = c.sms - ctas;
      const GemmArguments probe = gemm_arguments(beside, buf, 0);
      cluster_probe(state, probe, buf.workspace_for(ovl::kernels::gemm_workspace_bytes(probe)), ctas, cluster, stream);
    }
    if (c.impl == Impl::kCublas) {
      cublasSetSmCountTarget(cublas_handle(), 0);
      cublasSetStream(cublas_handle(), nullptr);
    }
    if (partitioned) {
      set_current_context(saved);
    } else {
      OVL_CUDA_CHECK(cudaStreamDestroy(stream));
    }
    state.counters["tflops"] = benchmark::Counter(flops * reps * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["us"] =
        benchmark::Counter(1e-6 * reps, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
    state.counters["sets"] = sets;
    state.counters["reps"] = reps;
    state.counters["gap_us"] = gap_us;
    if (!args.empty()) {
      // What gemm_run launched (gemm_launch_plan): the epilogue as GemmEpilogue's value (1 kTmaStore,
      // 3 kTmaStoreSplit, 4 kTmaStoreDeferred), the grid, the ring stages, whether MN-major B loads one box per stage.
      const ovl::kernels::GemmLaunchPlan plan = ovl::kernels::gemm_launch_plan(args[0]);
      state.counters["swizzle"] = args[0].swizzle;
      state.counters["sk_tiles"] = plan.stream_k.tiles;
      state.counters["sk_splits"] = plan.stream_k.splits;
      state.counters["sk_ctas"] = plan.stream_k.ctas;
      state.counters["half_tiles"] = args[0].half_tiles;
      state.counters["epilogue"] = static_cast<int>(plan.epilogue);
      state.counters["grid"] = plan.grid;
      state.counters["stages"] = plan.stages;
      state.counters["b_single_box"] = plan.b_single_box ? 1 : 0;
      state.counters["pdl"] = args[0].programmatic_launch ? 1 : 0;
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// Registration touches no device, so listing (--benchmark_list_tests) works anywhere.
const bool registered = [] {
  std::vector<std::array<int, 3>> shapes = {{8192, 8192, 8192}, {4096, 8192, 8192}, {8192, 8192, 2048},
                                            {2048, 8192, 4096}, {8192, 4096, 1024}, {16384, 8192, 1024}};
  if (const char* extra = std::getenv("OVL_BENCH_GEMM_SHAPES")) {
    std::stringstream list(extra);
    for (std::string item; std::getline(list, item, ',');) {
      std::array<int, 3> s{};
      char rest = 0;
      if (std::sscanf(item.c_str(), "%dx%dx%d%c", &s[0], &s[1], &s[2], &rest) != 3 || s[0] < 1 || s[1] < 1 ||
          s[2] < 1) {
        std::fprintf(stderr, "OVL_BENCH_GEMM_SHAPES: '%s' is not MxNxK with positive M, N, K\n", item.c_str());
        std::exit(2);
      }
      shapes.push_back(s);
    }
  }
  const int sm_counts[] = {132, 128, 124, 116, 100, 64, 32};
  const std::pair<Impl, const char*> impls[] = {{Impl::kOvl, "ovl"},
                                                {Impl::kOvlNoSignal, "ovl-nosignal"},
                                                {Impl::kOvlNoStreamK, "ovl-nosk"},
                                                {Impl::kOvlSplit, "ovl-split"},
                                                {Impl::kOvlSwizzle8, "ovl-sw8"},
                                                {Impl::kOvlTmaStore, "ovl-tmastore"},
                                                {Impl::kOvlDeferred, "ovl-deferred"},
                                                {Impl::kOvlNoPdl, "ovl-nopdl"},
                                                {Impl::kCublas, "cublas"}};
  const auto case_name = [](const char* impl, const std::array<int, 3>& s, BLayout layout, int sms) {
    return std::string("gemm/") + impl + "/" + std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" +
           std::to_string(s[2]) + "/" + (layout == BLayout::kKxN ? "nn" : "nt") + "/sms:" + std::to_string(sms);
  };
  for (const auto& s : shapes) {
    for (BLayout layout : {BLayout::kKxN, BLayout::kNxK}) {
      for (int sms : sm_counts) {
        for (const auto& [impl, impl_name] : impls) {
          const std::string name = case_name(impl_name, s, layout, sms);
          benchmark::RegisterBenchmark(name.c_str(), bench_gemm, Case{impl, s[0], s[1], s[2], layout, sms})
              ->UseManualTime()
              ->Unit(benchmark::kMicrosecond);
        }
        for (Impl impl : {Impl::kOvl, Impl::kCublas}) {
          const std::string name = case_name(impl == Impl::kOvl ? "ovl-fp16" : "cublas-fp16", s, layout, sms);
          benchmark::RegisterBenchmark(name.c_str(), bench_gemm,
                                       Case{impl, s[0], s[1], s[2], layout, sms, DType::kFP16})
              ->UseManualTime()
              ->Unit(benchmark::kMicrosecond);
        }
      }
    }
    // FP8: nt only (B K-major), the whole device and the partitions the overlap operators leave the GEMM.
    for (int sms : {132, 128, 124, 116}) {
      for (const auto& [impl, impl_name] : {std::pair{Impl::kOvl, "ovl-fp8"}, std::pair{Impl::kOvlNoSignal, "ovl-fp8-nosignal"},
                                            std::pair{Impl::kCublasLt, "cublaslt-fp8"}}) {
        const std::string name = case_name(impl_name, s, BLayout::kNxK, sms);
        benchmark::RegisterBenchmark(name.c_str(), bench_gemm,
                                     Case{impl, s[0], s[1], s[2], BLayout::kNxK, sms, DType::kE4M3})
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  return true;
}();

}  // namespace

OVL_BENCHMARK_MAIN()
