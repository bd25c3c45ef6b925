// bench_overlap: every overlap mode against the sequential baseline, in loopback emulation of 8 ranks on one GPU.
//
// Cases: overlap/<mode>/<op>/<M>x<N>x<K>/world:<W>/comm_sms:<c>
//   mode        sequential (comm_sms:0 = its collective on every SM: the strongest baseline), decomposed,
//               tile-signal, green-context, tma (green-context partition), tma-shared (no partition)
//   c           SMs (CTAs) of the communication: 8, 16, 24, 32
// Counters (all measured in the same process, each part alone, 2 warm-up runs then the mean of 10):
//   us            time of the overlapped operator
//   speedup       t_sequential / us
//   t_gemm_us, t_comm_us   the GEMM alone and the collective alone, as this plan runs them (same SMs, CTAs)
//   efficiency    (t_gemm + t_comm - us) / min(t_gemm, t_comm): 1 = the shorter part fully hidden, 0 = no overlap
//   gemm_slowdown the GEMM's span inside the overlapped run (measured timeline) / t_gemm
//   wrong         elements of the result off the sequential result by more than 2% (+ 2% of the typical size),
//                 checked once per case outside the timed loop
// The iteration time Google Benchmark reports is the same operator, timed with CUDA events (UseManualTime).

// fmt 9 under nvcc in C++20 (see kernels/src/gemm_sm90.cu). Must precede every include of fmt.
#if defined(__CUDACC__)
#ifndef FMT_USE_CONSTEXPR
#define FMT_USE_CONSTEXPR 1
#endif
#ifndef FMT_CONSTEVAL
#define FMT_CONSTEVAL
#endif
#endif

#include <cuda_bf16.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ovl/core/ovl.hpp"

namespace {

using namespace ovl;

struct Shape {
  int64_t m, n, k;
};

constexpr int kWorld = 8;
constexpr int kReps = 10;

__global__ void fill_kernel(__nv_bfloat16* p, int64_t n, uint64_t seed) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + uint64_t(i);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    p[i] = __float2bfloat16(float(x >> 40) * (2.0f / 16777216.0f) - 1.0f);
  }
}

__global__ void count_wrong_kernel(const __nv_bfloat16* x, const __nv_bfloat16* y, int64_t n, float atol,
                                   unsigned long long* wrong) {
  unsigned long long local = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float a = __bfloat162float(x[i]), b = __bfloat162float(y[i]);
    if (!(fabsf(a - b) <= 0.02f * fabsf(b) + atol)) ++local;
  }
  if (local) atomicAdd(wrong, local);
}

struct Buffer {
  void* ptr = nullptr;
  explicit Buffer(size_t bytes) { OVL_CUDA_CHECK(cudaMalloc(&ptr, bytes)); }
  ~Buffer() { cudaFree(ptr); }
};

cudaStream_t bench_stream() {
  static cudaStream_t s = [] {
    cudaStream_t st;
    OVL_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    return st;
  }();
  return s;
}

Context& context() {
  static std::unique_ptr<Context> ctx = [] {
    ContextOptions o;
    o.loopback_world = kWorld;
    return std::make_unique<Context>(o);
  }();
  return *ctx;
}

struct Inputs {
  std::unique_ptr<Buffer> a, b, c, c_seq;
  TensorRef ta, tb, tc, tc_seq;
  Problem problem;
  Plan baseline;
  double t_seq_us = 0;
};

void run(Context& ctx, Op op, const Inputs& in, const TensorRef& c, const Plan& plan, cudaStream_t s) {
  if (op == Op::kGemmAllReduce)
    ctx.gemm_all_reduce(in.ta, in.tb, c, plan, s);
  else
    ctx.gemm_reduce_scatter(in.ta, in.tb, c, plan, s);
}

// Mean time in microseconds of `reps` back-to-back runs of fn (after 2 warm-up runs).
template <typename Fn>
double time_us(Fn fn, int reps = kReps) {
  cudaStream_t s = bench_stream();
  for (int i = 0; i < 2; ++i) fn();
  cudaEvent_t e0, e1;
  OVL_CUDA_CHECK(cudaEventCreate(&e0));
  OVL_CUDA_CHECK(cudaEventCreate(&e1));
  OVL_CUDA_CHECK(cudaEventRecord(e0, s));
  for (int i = 0; i < reps; ++i) fn();
  OVL_CUDA_CHECK(cudaEventRecord(e1, s));
  context().synchronize(s);
  float ms = 0;
  OVL_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return double(ms) * 1e3 / reps;
}

Inputs& inputs(Op op, const Shape& sh) {
  static std::map<std::string, std::unique_ptr<Inputs>> cache;
  const std::string key = fmt::format("{}/{}x{}x{}", to_string(op), sh.m, sh.n, sh.k);
  auto it = cache.find(key);
  if (it != cache.end()) return *it->second;
  Context& ctx = context();
  auto in = std::make_unique<Inputs>();
  const int64_t c_rows = op == Op::kGemmReduceScatter ? sh.m / kWorld : sh.m;
  in->a = std::make_unique<Buffer>(size_t(sh.m * sh.k * 2));
  in->b = std::make_unique<Buffer>(size_t(sh.n * sh.k * 2));
  in->c = std::make_unique<Buffer>(size_t(c_rows * sh.n * 2));
  in->c_seq = std::make_unique<Buffer>(size_t(c_rows * sh.n * 2));
  fill_kernel<<<1024, 256, 0, bench_stream()>>>(static_cast<__nv_bfloat16*>(in->a->ptr), sh.m * sh.k, 1);
  fill_kernel<<<1024, 256, 0, bench_stream()>>>(static_cast<__nv_bfloat16*>(in->b->ptr), sh.n * sh.k, 2);
  OVL_CUDA_CHECK_LAST();
  in->ta = TensorRef{in->a->ptr, sh.m, sh.k, DType::kBF16};
  in->tb = TensorRef{in->b->ptr, sh.n, sh.k, DType::kBF16, BLayout::kNxK};
  in->tc = TensorRef{in->c->ptr, c_rows, sh.n, DType::kBF16};
  in->tc_seq = TensorRef{in->c_seq->ptr, c_rows, sh.n, DType::kBF16};
  in->problem = ctx.problem_for(op, in->ta, in->tb, in->tc);
  // The baseline: cuBLAS on the whole device, then the collective on every SM.
  in->baseline = default_plan(Mode::kSequential, in->problem, ctx.hardware(), 0);
  in->baseline.comm_ctas = ctx.sm_count();
  in->baseline.comm_sms = ctx.sm_count();
  Inputs& ref = *in;
  run(ctx, op, ref, ref.tc_seq, ref.baseline, bench_stream());
  ctx.synchronize(bench_stream());
  ref.t_seq_us = time_us([&] { run(ctx, op, ref, ref.tc_seq, ref.baseline, bench_stream()); });
  return *cache.emplace(key, std::move(in)).first->second;
}

Plan make_plan(const std::string& mode, const Problem& p, const Context& ctx, int c) {
  const Hardware& hw = ctx.hardware();
  const int sms = ctx.sm_count();
  const int64_t tm = (p.m + 127) / 128, tn = (p.n + 255) / 256;
  if (mode == "sequential") {
    Plan plan = default_plan(Mode::kSequential, p, hw, 0);
    plan.comm_ctas = plan.comm_sms = sms;
    return plan;
  }
  if (mode == "decomposed") return default_plan(Mode::kDecomposed, p, hw, c);
  if (mode == "tile-signal") {
    Plan plan = default_plan(Mode::kTileSignal, p, hw, c);
    plan.gemm_sms = sms - c;
    plan.tile_groups = band_groups(tm, tn, int(std::min<int64_t>(16, tm)));  // 16 NCCL-style calls
    return plan;
  }
  if (mode == "green-context") {
    Plan plan = default_plan(Mode::kGreenContext, p, hw, c);
    plan.tile_groups = band_groups(tm, tn, int(std::min<int64_t>(16, tm)));
    return plan;
  }
  Plan plan = default_plan(Mode::kTma, p, hw, c);  // one group per row band, polled by one persistent kernel
  plan.comm_algo = CommAlgo::kTmaPull;
  if (mode == "tma-shared") {
    plan.partitioned = false;
    plan.gemm_sms = sms - c;
  }
  return plan;
}

void bench_case(benchmark::State& state, std::string mode, Op op, Shape sh, int c) {
  try {
    Context& ctx = context();
    Inputs& in = inputs(op, sh);
    const Problem& p = in.problem;
    const Plan plan = make_plan(mode, p, ctx, c);
    if (const std::string why = ctx.can_run(p, plan); !why.empty()) {
      state.SkipWithError(why.c_str());
      return;
    }
    cudaStream_t s = bench_stream();
    auto whole = [&] { run(ctx, op, in, in.tc, plan, s); };
    auto part = [&](Context::Part pt) { ctx.run_part(pt, op, in.ta, in.tb, in.tc, plan, s); };
    const double t_gemm = time_us([&] { part(Context::Part::kGemm); });
    const double t_comm = time_us([&] { part(Context::Part::kComm); });
    const double t_all = time_us(whole);

    // Correctness, once: against the sequential result.
    OVL_CUDA_CHECK(cudaMemsetAsync(in.c->ptr, 0xFF, size_t(in.tc.rows * in.tc.cols * 2), s));
    whole();
    unsigned long long* wrong_d = nullptr;
    OVL_CUDA_CHECK(cudaMallocAsync(&wrong_d, sizeof(unsigned long long), s));
    OVL_CUDA_CHECK(cudaMemsetAsync(wrong_d, 0, sizeof(unsigned long long), s));
    const float atol = 0.02f * std::sqrt(float(kWorld) * float(sh.k) / 9.f);
    count_wrong_kernel<<<1024, 256, 0, s>>>(static_cast<const __nv_bfloat16*>(in.c->ptr),
                                            static_cast<const __nv_bfloat16*>(in.c_seq->ptr), in.tc.rows * in.tc.cols,
                                            atol, wrong_d);
    OVL_CUDA_CHECK_LAST();
    unsigned long long wrong = 0;
    OVL_CUDA_CHECK(cudaMemcpyAsync(&wrong, wrong_d, sizeof(wrong), cudaMemcpyDeviceToHost, s));
    OVL_CUDA_CHECK(cudaFreeAsync(wrong_d, s));
    ctx.synchronize(s);

    // The GEMM's span inside the overlapped run, from the measured timeline.
    ctx.set_tracing(true);
    whole();
    ctx.synchronize(s);
    const Timeline t = ctx.last_timeline();
    ctx.set_tracing(false);
    int64_t g0 = INT64_MAX, g1 = 0;
    for (const Interval& i : t.intervals) {
      if (i.lane != "gemm") continue;
      g0 = std::min(g0, i.start_ns);
      g1 = std::max(g1, i.end_ns);
    }

    for (auto _ : state) {
      bench::CudaEventTimer timer(state, s);
      whole();
    }
    ctx.synchronize(s);
    state.counters["us"] = t_all;
    state.counters["t_seq_us"] = in.t_seq_us;
    state.counters["t_gemm_us"] = t_gemm;
    state.counters["t_comm_us"] = t_comm;
    state.counters["speedup"] = in.t_seq_us / t_all;
    state.counters["efficiency"] = (t_gemm + t_comm - t_all) / std::min(t_gemm, t_comm);
    state.counters["gemm_slowdown"] = g1 > g0 ? double(g1 - g0) * 1e-3 / t_gemm : 0.0;
    state.counters["wrong"] = double(wrong);
    state.SetLabel(plan.summary());
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

const bool registered = [] {
  const std::vector<Shape> shapes = {
      {8192, 8192, 1024}, {8192, 8192, 2048}, {8192, 8192, 4096}, {8192, 8192, 8192}, {4096, 8192, 8192}};
  for (const Shape& sh : shapes) {
    for (Op op : {Op::kGemmAllReduce, Op::kGemmReduceScatter}) {
      const std::string tail = fmt::format("{}/{}x{}x{}/world:{}", to_string(op), sh.m, sh.n, sh.k, kWorld);
      const std::string seq_name = fmt::format("overlap/sequential/{}/comm_sms:0", tail);
      benchmark::RegisterBenchmark(seq_name.c_str(),
                                   [op, sh](benchmark::State& st) { bench_case(st, "sequential", op, sh, 0); })
          ->UseManualTime()
          ->Iterations(5)
          ->Unit(benchmark::kMicrosecond);
      for (const char* mode : {"decomposed", "tile-signal", "green-context", "tma", "tma-shared"}) {
        for (int c : {8, 16, 24, 32}) {
          const std::string name = fmt::format("overlap/{}/{}/comm_sms:{}", mode, tail, c);
          const std::string mode_name = mode;
          benchmark::RegisterBenchmark(
              name.c_str(), [mode_name, op, sh, c](benchmark::State& st) { bench_case(st, mode_name, op, sh, c); })
              ->UseManualTime()
              ->Iterations(5)
              ->Unit(benchmark::kMicrosecond);
        }
      }
    }
  }
  return true;
}();

}  // namespace

OVL_BENCHMARK_MAIN()
