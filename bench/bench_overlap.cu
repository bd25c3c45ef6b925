// bench_overlap: every overlap mode against the sequential baseline, in loopback emulation of 8 ranks on one GPU.
//
// Cases (filter with --benchmark_filter, e.g. 'overlap/tma/', '/reducescatter/', '/8192x8192x4096/', 'comm_sms:16'):
//   overlap/<mode>/<op>/<M>x<N>x<K>/world:8/comm_sms:<c>
//     mode decomposed, tile-signal, green-context, tma; c = 8, 16, 24, 32. The plan is exactly
//     default_plan(mode, problem, hw, c), what `ovl validate` / `ovl calibrate` reconstruct from the name: tma is
//     partitioned with default_plan's comm_algo (tma-push: the TMA push mover); the other modes use the SIMT
//     mover (it stands in for NCCL in loopback).
//   overlap/sequential/<op>/<M>x<N>x<K>/world:8/comm_sms:<S>            (S = the device's SM count)
//     default_plan(sequential, problem, hw, S): cuBLAS on the whole device, then the collective with the SIMT mover
//     on S CTAs (the whole device: the strongest baseline). The baseline of decomposed, tile-signal, green-context.
//   overlap/sequential/<op>/<M>x<N>x<K>/world:8/comm_sms:<S>/algo:<a>   (a = the tma mode's comm_algo)
//     the same with comm_algo a, i.e. the tma mode's TMA mover on S CTAs: the tma cases' baseline (like with
//     like). Seven name parts: the model's bench-name parser skips it on purpose (its plan is not
//     default_plan(sequential, ...), which has an NCCL algorithm).
// Loopback share: rank 0's share (LoopbackShare::kRank0, the default: one real GPU's collective traffic); set
// OVL_BENCH_SHARE=whole-world to play every rank's traffic (W times as much on one HBM). In the JSON context.
// Counters (all measured in the same process, each part alone: 1 warm-up run, then the mean of kReps back-to-back
// runs, a short burst after the host's setup; OVL_BENCH_SUSTAIN_MS=<ms> instead runs ~ms of back-to-back warm-up and
// times back-to-back runs filling ~ms, the sustained regime of bench_gemm. On the H200 a GEMM that starts on an idle
// GPU runs 9.5-13.5% faster than in a sustained stream of GEMMs, and a GEMM between memory-bound collectives faster too
// (power limit): docs/results/gemm-h200-staged/, docs/results/movers2-h200/):
//   us            time of the overlapped operator
//   t_seq_us      the sequential baseline with the same mover (see above); speedup = t_seq_us / us
//   t_gemm_us, t_comm_us   the GEMM alone and the collective alone, as this plan runs them (same SMs, CTAs)
//   efficiency    (t_gemm + t_comm - us) / min(t_gemm, t_comm): 1 = the shorter part fully hidden, 0 = no overlap
//   gemm_slowdown the GEMM's span inside the overlapped run (measured timeline) / t_gemm
//   sustain_ms    OVL_BENCH_SUSTAIN_MS of the run (0: burst timing), so a calibration can tell the two regimes apart
//   wrong         elements of rank 0's result off the SIMT sequential result by more than 2% (+ 2% of the typical
//                 size), checked once per case outside the timed loop
// Setup (inputs, peers, baselines) is made on first use per shape, so a filtered run pays only for its shapes.
// The iteration time Google Benchmark reports is the same operator, timed with CUDA events (UseManualTime).

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
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
constexpr int kReps = 5;
constexpr int kIterations = 5;

// OVL_BENCH_SHARE: "rank0" (default) or "whole-world".
LoopbackShare bench_share() {
  const char* text = std::getenv("OVL_BENCH_SHARE");
  if (text == nullptr || *text == '\0' || std::string(text) == "rank0") return LoopbackShare::kRank0;
  OVL_CHECK(std::string(text) == "whole-world", "OVL_BENCH_SHARE = \"{}\" is not rank0 or whole-world", text);
  return LoopbackShare::kWholeWorld;
}

// The device's SM count (the sequential cases' comm_sms); 132 when no GPU answers (the cases then fail).
int device_sms() {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    return 132;
  }
  return prop.multiProcessorCount;
}

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
    o.loopback_share = bench_share();
    return std::make_unique<Context>(o);
  }();
  return *ctx;
}

struct Inputs {
  std::unique_ptr<Buffer> a, b, c, c_seq;
  TensorRef ta, tb, tc, tc_seq;  // c_seq: rank 0's result of the SIMT baseline (the `wrong` reference)
  Problem problem;
  std::map<CommAlgo, double> t_seq_us;  // the baseline per mover (its plan's comm_algo), measured on first use
};

void run(Context& ctx, Op op, const Inputs& in, const TensorRef& c, const Plan& plan, cudaStream_t s) {
  if (op == Op::kGemmAllReduce)
    ctx.gemm_all_reduce(in.ta, in.tb, c, plan, s);
  else
    ctx.gemm_reduce_scatter(in.ta, in.tb, c, plan, s);
}

// Device time in microseconds of `reps` back-to-back runs of fn, per run.
template <typename Fn>
double block_us(Fn fn, int reps) {
  cudaStream_t s = bench_stream();
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

// OVL_BENCH_SUSTAIN_MS, read once (0: the default burst timing).
int sustain_ms() {
  static const int ms = bench::env_int("OVL_BENCH_SUSTAIN_MS", 0, 10000, 0);
  return ms;
}

// Mean time in microseconds of fn (see the file comment). Default: one warm-up run, then kReps timed runs right behind
// it on the stream. OVL_BENCH_SUSTAIN_MS: one warm-up run and a sync (it may include first-use setup: plan state,
// green contexts), one timed run that sizes the windows, warm-up runs for ~that much device time enqueued right
// before the timed runs, which fill it too (at least kReps).
template <typename Fn>
double time_us(Fn fn) {
  const int sustain_ms = ::sustain_ms();
  fn();
  if (sustain_ms == 0) return block_us(fn, kReps);
  context().synchronize(bench_stream());
  const double once = block_us(fn, 1);
  const int runs = std::clamp(int(sustain_ms * 1e3 / std::max(once, 1.0)), 0, 10000);
  for (int i = 0; i < runs; ++i) fn();  // no sync: the timed runs follow on the stream
  return block_us(fn, std::max(kReps, runs));
}

// The sequential baseline with the mover of `algo`: cuBLAS on the whole device, then the collective on every SM.
// With an NCCL algorithm this is exactly default_plan(sequential, p, hw, sm_count) (SIMT mover in loopback).
Plan sequential_plan(const Problem& p, const Context& ctx, CommAlgo algo) {
  Plan plan = default_plan(Mode::kSequential, p, ctx.hardware(), ctx.sm_count());
  plan.comm_algo = algo;
  return plan;
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
  run(ctx, op, *in, in->tc_seq, sequential_plan(in->problem, ctx, CommAlgo::kNcclRing), bench_stream());
  ctx.synchronize(bench_stream());
  return *cache.emplace(key, std::move(in)).first->second;
}

double baseline_us(Inputs& in, Op op, CommAlgo algo) {
  auto it = in.t_seq_us.find(algo);
  if (it != in.t_seq_us.end()) return it->second;
  Context& ctx = context();
  const Plan plan = sequential_plan(in.problem, ctx, algo);
  const double t = time_us([&] { run(ctx, op, in, in.tc, plan, bench_stream()); });
  return in.t_seq_us.emplace(algo, t).first->second;
}

// mode "sequential": sequential_plan(seq_algo); otherwise exactly default_plan(mode, p, hw, c).
void bench_case(benchmark::State& state, Mode mode, Op op, Shape sh, int c, CommAlgo seq_algo) {
  try {
    Context& ctx = context();
    Inputs& in = inputs(op, sh);
    const Problem& p = in.problem;
    const Plan plan =
        mode == Mode::kSequential ? sequential_plan(p, ctx, seq_algo) : default_plan(mode, p, ctx.hardware(), c);
    if (const std::string why = ctx.can_run(p, plan); !why.empty()) {
      state.SkipWithError(why.c_str());
      return;
    }
    // Like with like: the baseline moves data with this plan's mover (TMA algorithms: the TMA mover; else SIMT).
    const bool tma_mover = plan.comm_algo == CommAlgo::kTmaPull || plan.comm_algo == CommAlgo::kTmaPush;
    const CommAlgo base_algo = tma_mover ? plan.comm_algo : CommAlgo::kNcclRing;
    const double t_seq = baseline_us(in, op, base_algo);
    cudaStream_t s = bench_stream();
    auto whole = [&] { run(ctx, op, in, in.tc, plan, s); };
    auto part = [&](Context::Part pt) { ctx.run_part(pt, op, in.ta, in.tb, in.tc, plan, s); };
    const double t_gemm = time_us([&] { part(Context::Part::kGemm); });
    const double t_comm = time_us([&] { part(Context::Part::kComm); });
    const double t_all = time_us(whole);

    // Correctness, once: rank 0's result against the SIMT sequential result.
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
    state.counters["t_seq_us"] = t_seq;
    state.counters["t_gemm_us"] = t_gemm;
    state.counters["sustain_ms"] = sustain_ms();  // the timing regime of every time here (0: burst)
    state.counters["t_comm_us"] = t_comm;
    state.counters["speedup"] = t_seq / t_all;
    state.counters["efficiency"] = (t_gemm + t_comm - t_all) / std::min(t_gemm, t_comm);
    state.counters["gemm_slowdown"] = g1 > g0 ? double(g1 - g0) * 1e-3 / t_gemm : 0.0;
    state.counters["wrong"] = double(wrong);
    state.SetLabel(fmt::format("{} share={} baseline_algo={}", plan.summary(), to_string(ctx.loopback_share()),
                               to_string(base_algo)));
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// Registered from main, after Initialize: the sequential cases' names carry the device's SM count.
void register_cases() {
  const int sms = device_sms();
  // The issue's five shapes, then three more that differ in M, N or K (held-out problems for `ovl validate`).
  const std::vector<Shape> shapes = {{8192, 8192, 1024}, {8192, 8192, 2048}, {8192, 8192, 4096},
                                     {8192, 8192, 8192}, {4096, 8192, 8192}, {4096, 8192, 4096},
                                     {16384, 8192, 2048}, {8192, 4096, 8192}};
  auto add = [](const std::string& name, Mode mode, Op op, Shape sh, int c, CommAlgo seq_algo) {
    benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { bench_case(st, mode, op, sh, c, seq_algo); })
        ->UseManualTime()
        ->Iterations(kIterations)
        ->Unit(benchmark::kMicrosecond);
  };
  Hardware hw = builtin_hardware("h200");  // only for the tma mode's default comm_algo (independent of the GPU)
  hw.sm_count = sms;
  for (const Shape& sh : shapes) {
    for (Op op : {Op::kGemmAllReduce, Op::kGemmReduceScatter}) {
      const Problem p = make_problem(op, sh.m, sh.n, sh.k, kWorld);
      const CommAlgo tma_algo = default_plan(Mode::kTma, p, hw, 8).comm_algo;
      const std::string tail = fmt::format("{}/{}x{}x{}/world:{}", to_string(op), sh.m, sh.n, sh.k, kWorld);
      add(fmt::format("overlap/sequential/{}/comm_sms:{}", tail, sms), Mode::kSequential, op, sh, sms,
          CommAlgo::kNcclRing);
      add(fmt::format("overlap/sequential/{}/comm_sms:{}/algo:{}", tail, sms, to_string(tma_algo)), Mode::kSequential,
          op, sh, sms, tma_algo);
      for (Mode mode : {Mode::kDecomposed, Mode::kTileSignal, Mode::kGreenContext, Mode::kTma}) {
        for (int c : {8, 16, 24, 32}) {
          add(fmt::format("overlap/{}/{}/comm_sms:{}", to_string(mode), tail, c), mode, op, sh, c, CommAlgo::kNcclRing);
        }
      }
    }
  }
}

}  // namespace

// OVL_BENCHMARK_MAIN() plus the share in the JSON context and the registration (which needs the device).
int main(int argc, char** argv) {
  ::benchmark::Initialize(&argc, argv);
  if (::benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  ::ovl::bench::add_device_context();
  try {
    ::benchmark::AddCustomContext("loopback_share", std::string(::ovl::to_string(bench_share())));
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_overlap: {}\n", e.what());
    return 2;
  }
  register_cases();
  ::benchmark::RunSpecifiedBenchmarks();
  ::benchmark::Shutdown();
  return 0;
}
