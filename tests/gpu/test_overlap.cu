// Tests of the overlap modes behind ovl::Context (core/include/ovl/core/context.hpp).
//
// Every mode x op must equal the sequential result (cuBLAS, then the collective) and a float64 CPU reference, in a
// real world of 1 and in loopback emulation of 2, 4 and 8 ranks. Tolerance: inputs bf16, GEMMs accumulate in fp32
// and round the partial product to bf16 (relative error <= 2^-9 per element), the collective sums the W partials in
// fp32 and rounds once more; the relative error norm ||out - ref|| / ||ref|| of a correct run is ~2e-3, while a
// missing group, a wrong row offset or an unreduced rank gives >= 0.1 (one of W partials missing). 1e-2 separates
// them. Outputs are poisoned with NaN first, so an unwritten element fails.
//
// Failure paths: a GEMM that never signals (skipped) or signals fewer tiles than the comm side expects must make
// the comm side time out with an ovl::Error from Context::synchronize, never hang (short timeout: 300 ms).

// fmt 9 under nvcc in C++20 (see kernels/src/gemm_sm90.cu). Must precede every include of fmt.
#if defined(__CUDACC__)
#ifndef FMT_USE_CONSTEXPR
#define FMT_USE_CONSTEXPR 1
#endif
#ifndef FMT_CONSTEVAL
#define FMT_CONSTEVAL
#endif
#endif

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gpu/gpu_test.hpp"
#include "ovl/core/ovl.hpp"
#include "ovl/error.hpp"

namespace ovl {
namespace {

#define CUDA_OK(call) ASSERT_EQ(cudaSuccess, (call)) << #call

constexpr double kTolerance = 1e-2;

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}
double from_bf16(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct DeviceMatrix {
  void* ptr = nullptr;
  int64_t rows = 0, cols = 0;
  std::vector<uint16_t> host;
  DeviceMatrix(int64_t r, int64_t c, uint64_t seed) : rows(r), cols(c), host(size_t(r * c)) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    for (auto& v : host) v = to_bf16(dist(rng));
    if (cudaMalloc(&ptr, host.size() * 2 + 64) != cudaSuccess) throw std::runtime_error("cudaMalloc");
    cudaMemcpy(ptr, host.data(), host.size() * 2, cudaMemcpyHostToDevice);
  }
  ~DeviceMatrix() { cudaFree(ptr); }
  // bf16 NaN, in stream order with the run that follows (the test streams do not sync with the legacy stream).
  void poison(cudaStream_t stream) { cudaMemsetAsync(ptr, 0xFF, size_t(rows * cols) * 2, stream); }
  std::vector<uint16_t> read() const {
    std::vector<uint16_t> out(static_cast<size_t>(rows * cols));
    cudaMemcpy(out.data(), ptr, out.size() * 2, cudaMemcpyDeviceToHost);
    return out;
  }
  TensorRef ref(BLayout layout = BLayout::kNxK) const { return TensorRef{ptr, rows, cols, DType::kBF16, layout}; }
};

std::vector<uint16_t> read_device(const void* p, int64_t elems) {
  std::vector<uint16_t> out(static_cast<size_t>(elems));
  cudaMemcpy(out.data(), p, out.size() * 2, cudaMemcpyDeviceToHost);
  return out;
}

// ||x - ref|| / ||ref||; NaN counts as a failure (returns +inf).
double rel_error(const std::vector<uint16_t>& x, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double v = from_bf16(x[i]);
    if (!std::isfinite(v)) return INFINITY;
    num += (v - ref[i]) * (v - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}
double rel_error(const std::vector<uint16_t>& x, const std::vector<uint16_t>& y) {
  std::vector<double> ref(y.size());
  for (size_t i = 0; i < y.size(); ++i) ref[i] = from_bf16(y[i]);
  return rel_error(x, ref);
}

// rows [r0, r1) of A (rows x K) times B (N x K, "nt") in float64.
std::vector<double> cpu_gemm(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, int64_t r0, int64_t r1,
                             int64_t n, int64_t k) {
  std::vector<double> out(size_t((r1 - r0) * n), 0.0);
  std::vector<double> brow(static_cast<size_t>(k));
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t x = 0; x < k; ++x) brow[size_t(x)] = from_bf16(b[size_t(j * k + x)]);
    for (int64_t i = r0; i < r1; ++i) {
      double acc = 0;
      for (int64_t x = 0; x < k; ++x) acc += from_bf16(a[size_t(i * k + x)]) * brow[size_t(x)];
      out[size_t((i - r0) * n + j)] = acc;
    }
  }
  return out;
}

// The plans every test runs: each mode with its defaults, plus tile-signal with tile-major output and tma without a
// partition. 16 communication SMs (two green-context groups).
std::vector<Plan> plans_for(const Context& ctx, const Problem& p) {
  const Hardware& hw = ctx.hardware();
  std::vector<Plan> v;
  v.push_back(default_plan(Mode::kSequential, p, hw, 16));
  v.push_back(default_plan(Mode::kDecomposed, p, hw, 16));
  if (p.op == Op::kAllGatherGemm) return v;
  Plan ts = default_plan(Mode::kTileSignal, p, hw, 16);
  ts.gemm_sms = hw.sm_count - 16;
  v.push_back(ts);
  Plan ts_tile = ts;
  ts_tile.output = OutputLayout::kTileMajor;
  v.push_back(ts_tile);
  v.push_back(default_plan(Mode::kGreenContext, p, hw, 16));
  Plan tma = default_plan(Mode::kTma, p, hw, 16);
  v.push_back(tma);
  Plan tma_shared = tma;
  tma_shared.partitioned = false;
  tma_shared.gemm_sms = hw.sm_count - 16;
  tma_shared.comm_algo = CommAlgo::kTmaPull;
  v.push_back(tma_shared);
  return v;
}

void run_op(Context& ctx, Op op, const TensorRef& a, const TensorRef& b, const TensorRef& c,
            const std::optional<Plan>& plan, cudaStream_t stream) {
  switch (op) {
    case Op::kGemmAllReduce:
      ctx.gemm_all_reduce(a, b, c, plan, stream);
      break;
    case Op::kGemmReduceScatter:
      ctx.gemm_reduce_scatter(a, b, c, plan, stream);
      break;
    case Op::kAllGatherGemm:
      ctx.all_gather_gemm(a, b, c, plan, stream);
      break;
  }
}

// World 0 = a real world of 1 (NCCL); W > 1 = loopback of W ranks.
void check_all_modes(int world, Op op) {
  ContextOptions options;
  options.loopback_world = world;
  Context ctx(options);
  const int w = ctx.world_size();
  const int64_t m = 1024, n = 768, k = 256;  // 8 row bands of 3 tiles; M / 8 = 128 rows per rank
  const bool ag = op == Op::kAllGatherGemm;
  DeviceMatrix a(ag ? m / w : m, k, 11), b(n, k, 12);
  DeviceMatrix c(op == Op::kGemmReduceScatter ? m / w : m, n, 0), c_seq(c.rows, n, 0);
  const Problem p = ctx.problem_for(op, a.ref(), b.ref(), c.ref());
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // float64 reference from rank 0's inputs and the other ranks' inputs the context made.
  std::vector<double> ref;
  if (ag) {
    std::vector<uint16_t> full = a.host;
    if (ctx.loopback()) {
      for (const void* peer : ctx.loopback_peer_inputs(p)) {
        const auto rows = read_device(peer, (m / w) * k);
        full.insert(full.end(), rows.begin(), rows.end());
      }
    }
    ref = cpu_gemm(full, b.host, 0, m, n, k);
  } else {
    const int64_t rows = op == Op::kGemmReduceScatter ? m / w : m;
    ref = cpu_gemm(a.host, b.host, 0, rows, n, k);
    if (ctx.loopback()) {
      for (const void* peer : ctx.loopback_peer_inputs(p)) {
        const auto part = read_device(peer, rows * n);
        for (size_t i = 0; i < ref.size(); ++i) ref[i] += from_bf16(part[i]);
      }
    }
  }

  c_seq.poison(stream);
  run_op(ctx, op, a.ref(), b.ref(), c_seq.ref(), default_plan(Mode::kSequential, p, ctx.hardware(), 16), stream);
  ctx.synchronize(stream);
  const auto seq = c_seq.read();
  EXPECT_LT(rel_error(seq, ref), kTolerance) << "sequential vs float64, " << p.name();

  for (const Plan& plan : plans_for(ctx, p)) {
    SCOPED_TRACE(p.name() + " plan: " + plan.summary());
    c.poison(stream);
    run_op(ctx, op, a.ref(), b.ref(), c.ref(), plan, stream);
    ctx.synchronize(stream);
    const auto out = c.read();
    EXPECT_LT(rel_error(out, seq), kTolerance) << "vs sequential";
    EXPECT_LT(rel_error(out, ref), kTolerance) << "vs float64";
    // Twice: the counters must be reset by the executor, not by the test.
    c.poison(stream);
    run_op(ctx, op, a.ref(), b.ref(), c.ref(), plan, stream);
    ctx.synchronize(stream);
    EXPECT_LT(rel_error(c.read(), seq), kTolerance) << "second run";
  }

  // Auto: the planner's choice for this shape (cached), whatever mode it is.
  c.poison(stream);
  run_op(ctx, op, a.ref(), b.ref(), c.ref(), std::nullopt, stream);
  ctx.synchronize(stream);
  EXPECT_LT(rel_error(c.read(), seq), kTolerance) << "auto plan: " << ctx.auto_plan(p).summary();
  CUDA_OK(cudaStreamDestroy(stream));
}

class OverlapTest : public test::HopperTest {};

TEST_F(OverlapTest, AllModesGemmAllReduceWorld1) { check_all_modes(0, Op::kGemmAllReduce); }
TEST_F(OverlapTest, AllModesGemmReduceScatterWorld1) { check_all_modes(0, Op::kGemmReduceScatter); }
TEST_F(OverlapTest, AllModesAllGatherGemmWorld1) { check_all_modes(0, Op::kAllGatherGemm); }
TEST_F(OverlapTest, AllModesGemmAllReduceLoopback2) { check_all_modes(2, Op::kGemmAllReduce); }
TEST_F(OverlapTest, AllModesGemmReduceScatterLoopback2) { check_all_modes(2, Op::kGemmReduceScatter); }
TEST_F(OverlapTest, AllModesAllGatherGemmLoopback2) { check_all_modes(2, Op::kAllGatherGemm); }
TEST_F(OverlapTest, AllModesGemmAllReduceLoopback4) { check_all_modes(4, Op::kGemmAllReduce); }
TEST_F(OverlapTest, AllModesGemmReduceScatterLoopback4) { check_all_modes(4, Op::kGemmReduceScatter); }
TEST_F(OverlapTest, AllModesAllGatherGemmLoopback4) { check_all_modes(4, Op::kAllGatherGemm); }
TEST_F(OverlapTest, AllModesGemmAllReduceLoopback8) { check_all_modes(8, Op::kGemmAllReduce); }
TEST_F(OverlapTest, AllModesGemmReduceScatterLoopback8) { check_all_modes(8, Op::kGemmReduceScatter); }
TEST_F(OverlapTest, AllModesAllGatherGemmLoopback8) { check_all_modes(8, Op::kAllGatherGemm); }

// A real World (threads backend: one Context per rank, each on its own host thread) over every visible GPU (at most
// 8): every NCCL mode equals the sequential result on every rank. On a one-GPU machine this is a world of 1, which
// still runs the ContextOptions::world path and NCCL.
TEST_F(OverlapTest, RealWorldEveryNcclModeEqualsSequential) {
  const int gpus = std::min(test::gpu_count(), 8);
  std::vector<int> devices(static_cast<size_t>(gpus));
  for (int i = 0; i < gpus; ++i) devices[size_t(i)] = i;
  std::vector<World> worlds = World::threads(devices);
  run_per_rank(worlds, [&](World& world) {
    ContextOptions options;
    options.world = world;
    Context ctx(options);
    const int w = ctx.world_size();
    const int64_t m = 1024, n = 768, k = 256;
    DeviceMatrix a(m, k, 100 + uint64_t(ctx.rank())), b(n, k, 200 + uint64_t(ctx.rank()));
    for (Op op : {Op::kGemmAllReduce, Op::kGemmReduceScatter}) {
      const int64_t rows = op == Op::kGemmReduceScatter ? m / w : m;
      DeviceMatrix c(rows, n, 0), c_seq(rows, n, 0);
      cudaStream_t stream;
      ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      const Problem p = ctx.problem_for(op, a.ref(), b.ref(), c.ref());
      run_op(ctx, op, a.ref(), b.ref(), c_seq.ref(), default_plan(Mode::kSequential, p, ctx.hardware(), 16), stream);
      ctx.synchronize(stream);
      const auto seq = c_seq.read();
      for (const Plan& plan : plans_for(ctx, p)) {
        if (!ctx.can_run(p, plan).empty()) continue;  // tma in a real world of more than one rank
        SCOPED_TRACE(fmt::format("rank {} of {}: {} plan: {}", ctx.rank(), w, p.name(), plan.summary()));
        c.poison(stream);
        run_op(ctx, op, a.ref(), b.ref(), c.ref(), plan, stream);
        ctx.synchronize(stream);
        EXPECT_LT(rel_error(c.read(), seq), kTolerance);
      }
      ASSERT_EQ(cudaSuccess, cudaStreamDestroy(stream));
    }
  });
}

// Expects `fn` to throw an ovl::Error whose message contains every piece of `pieces`.
template <typename Fn>
void expect_error(Fn fn, const std::vector<std::string>& pieces) {
  try {
    fn();
    ADD_FAILURE() << "no ovl::Error thrown; expected one mentioning " << pieces.front();
  } catch (const Error& e) {
    for (const auto& piece : pieces) EXPECT_NE(std::string(e.what()).find(piece), std::string::npos) << e.what();
  }
}

TEST_F(OverlapTest, BadInputsNameTheValue) {
  ContextOptions options;
  options.loopback_world = 4;
  Context ctx(options);
  DeviceMatrix a(1024, 256, 1), b(768, 256, 2), c(256, 768, 0), c_ar(1024, 768, 0);
  cudaStream_t stream = nullptr;
  // Misaligned pointer.
  TensorRef bad_a = a.ref();
  bad_a.ptr = static_cast<char*>(a.ptr) + 2;
  expect_error([&] { ctx.gemm_reduce_scatter(bad_a, b.ref(), c.ref(), std::nullopt, stream); },
               {"A pointer", "16-byte aligned"});
  // M not divisible by the world (RS).
  DeviceMatrix a_odd(1002, 256, 3), c_odd(250, 768, 0);
  expect_error([&] { ctx.gemm_reduce_scatter(a_odd.ref(), b.ref(), c_odd.ref(), std::nullopt, stream); },
               {"M = 1002", "world = 4"});
  // C rows not M / W.
  expect_error([&] { ctx.gemm_reduce_scatter(a.ref(), b.ref(), c_ar.ref(), std::nullopt, stream); },
               {"C has 1024 rows"});
  // Unsupported dtype.
  TensorRef f32 = a.ref();
  f32.dtype = DType::kFP32;
  expect_error([&] { ctx.gemm_all_reduce(f32, b.ref(), c_ar.ref(), std::nullopt, stream); }, {"dtype fp32"});
  // Shapes that do not agree.
  expect_error([&] { ctx.gemm_all_reduce(a.ref(), c.ref(), c_ar.ref(), std::nullopt, stream); }, {"K = 768"});
  // Plans: SM counts over the device, off the granularity.
  const Problem p = ctx.problem_for(Op::kGemmReduceScatter, a.ref(), b.ref(), c.ref());
  Plan too_many = default_plan(Mode::kTileSignal, p, ctx.hardware(), 16);
  too_many.gemm_sms = 1000;
  expect_error([&] { ctx.gemm_reduce_scatter(a.ref(), b.ref(), c.ref(), too_many, stream); }, {"gemm_sms", "1000"});
  Plan off_grain = default_plan(Mode::kGreenContext, p, ctx.hardware(), 16);
  off_grain.comm_sms = 12;
  off_grain.comm_ctas = 12;
  expect_error([&] { ctx.gemm_reduce_scatter(a.ref(), b.ref(), c.ref(), off_grain, stream); }, {"comm_sms", "12"});
  // A mode this executor does not run for the op.
  const Problem pag = ctx.problem_for(Op::kAllGatherGemm, TensorRef{a.ptr, 256, 256}, b.ref(), c_ar.ref());
  Plan tma_ag = default_plan(Mode::kTma, pag, ctx.hardware(), 16);
  expect_error(
      [&] {
        ctx.all_gather_gemm(TensorRef{a.ptr, 256, 256}, b.ref(), c_ar.ref(), tma_ag, stream);
      },
      {"tma", "allgather-gemm"});
  // Host pointer.
  std::vector<uint16_t> host(1024 * 256);
  TensorRef host_a{host.data(), 1024, 256};
  expect_error([&] { ctx.gemm_all_reduce(host_a, b.ref(), c_ar.ref(), std::nullopt, stream); }, {"A pointer"});
}

// A GEMM that never signals, or fewer tiles than the comm side waits for: the comm side times out with an error.
void expect_timeout(Fault fault, Mode mode) {
  ContextOptions options;
  options.loopback_world = 2;
  options.wait_timeout_ms = 300;
  options.fault = fault;
  Context ctx(options);
  DeviceMatrix a(1024, 256, 1), b(768, 256, 2), c(512, 768, 0);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const Problem p = ctx.problem_for(Op::kGemmReduceScatter, a.ref(), b.ref(), c.ref());
  Plan plan = default_plan(mode, p, ctx.hardware(), 16);
  if (mode == Mode::kTileSignal) plan.gemm_sms = ctx.hardware().sm_count - 16;
  ctx.gemm_reduce_scatter(a.ref(), b.ref(), c.ref(), plan, stream);
  expect_error([&] { ctx.synchronize(stream); }, {"timed out", "tile group"});
  // The context stays usable: the error was consumed.
  EXPECT_NO_THROW(ctx.synchronize(stream));
  CUDA_OK(cudaStreamDestroy(stream));
}

TEST_F(OverlapTest, SkippedGemmTimesOutTileSignal) { expect_timeout(Fault::kSkipGemm, Mode::kTileSignal); }
TEST_F(OverlapTest, SkippedGemmTimesOutGreenContext) { expect_timeout(Fault::kSkipGemm, Mode::kGreenContext); }
TEST_F(OverlapTest, SkippedGemmTimesOutTma) { expect_timeout(Fault::kSkipGemm, Mode::kTma); }
TEST_F(OverlapTest, MissingTileTimesOutTileSignal) { expect_timeout(Fault::kCounterTooHigh, Mode::kTileSignal); }
TEST_F(OverlapTest, MissingTileTimesOutTma) { expect_timeout(Fault::kCounterTooHigh, Mode::kTma); }

TEST_F(OverlapTest, MeasuredTimelineHasGemmAndCommLanes) {
  ContextOptions options;
  options.loopback_world = 8;
  options.trace = true;
  Context ctx(options);
  DeviceMatrix a(2048, 256, 1), b(1024, 256, 2), c(2048, 1024, 0);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const Problem p = ctx.problem_for(Op::kGemmAllReduce, a.ref(), b.ref(), c.ref());
  for (Mode mode : all_modes()) {
    SCOPED_TRACE(std::string(to_string(mode)));
    ctx.gemm_all_reduce(a.ref(), b.ref(), c.ref(), default_plan(mode, p, ctx.hardware(), 16), stream);
    ctx.synchronize(stream);
    const Timeline t = ctx.last_timeline();
    EXPECT_EQ(t.source, "measured");
    int gemm = 0, comm = 0;
    for (const Interval& i : t.intervals) {
      gemm += i.lane == "gemm";
      comm += i.lane == "comm";
      EXPECT_LE(i.start_ns, i.end_ns);
      EXPECT_GE(i.start_ns, 0);
    }
    EXPECT_GT(gemm, 0);
    EXPECT_GT(comm, 0);
    EXPECT_GT(t.makespan_ns(), 0);
    const std::string path =
        (std::filesystem::temp_directory_path() / fmt::format("ovl_overlap_{}.json", to_string(mode))).string();
    t.write_chrome_trace(path);
    EXPECT_TRUE(std::filesystem::exists(path));
  }
  CUDA_OK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace ovl
