// Tests of the overlap operators on FP8 inputs (ovl::Context; docs/overlap.md, "FP8"): A e4m3 and B e4m3 or e5m2 with
// per-tensor scales (TensorRef::scale), C bf16 or fp16. Every op x every mode and mover that runs FP8 (sequential and
// decomposed: our GEMM on every SM; tile-signal, copy engine, green-context, tma: the signaled GEMM), in a world of 1
// (a one-rank NCCL communicator) and loopback 2, 4 and 8, both loopback shares, M off the 128-row tile
// (M = 1000: 125 rows per rank in a world of 8), N off the 256-column tile (776), K a multiple of 16 but not of the
// 128-element k-block (528: a zero-filled tail), against a float64 reference of the dequantized inputs.
//
// Reference and tolerance, per element (S: a_scale b_scale sum_k |A[i][k] B[j][k]|, the scaled sum of |products|):
// - AllGather+GEMM: ref = a_scale b_scale sum_k G[i][k] B[j][k] over the gathered A (G: rank 0's rows, then the
//   peers' rows as their FP8 codes); |out - ref| <= 2^-8 |ref| + 2^-9 S, the FP8 GEMM's own bound
//   (tests/gpu/test_gemm_fp8.cu: 2^-8 |ref| covers the output's rounding, 2^-9 for bf16, finer for fp16, and the fp32
//   scale multiply; 2^-9 S the tensor cores' FP8 accumulation over K / 32 k-steps, K <= 1024).
// - GEMM+AllReduce / GEMM+ReduceScatter: ref = p0 + sum over peers r of P_r, with p0 rank 0's exact scaled product
//   and P_r the peers' partial products as the context made them (read back in C's type: exact inputs of the sum).
//   |out - ref| <= 2^-8 |p0| + 2^-9 S0 + W 2^-8 T, T = |p0| + sum_r |P_r|: rank 0's partial product carries the GEMM's
//   bound into the sum; the sum then rounds to C's type once (SIMT, tma-pull, ce: fp32 sums) or after each of its W - 1
//   adds (tma-push, NCCL: adds in C's type), each rounding at most 2^-9 of a partial sum, and every partial sum is at
//   most T (plus rank 0's error): W 2^-9 T, doubled for that slack.
// Besides, ||out - ref|| / ||ref|| <= 1e-2 over the whole output (a correct run: ~2e-3). What it catches: rank 0's
// scales (0.05 .. 0.2 each) keep its partial product within an order of a peer's (|P_r| ~ sqrt(K / 9) ~ 8: values
// in [-1, 1)), so a missing or doubled partial moves an element by ~8 against a bound of about 1 (W = 2) to 3
// (W = 8), and the norm by ~1 / sqrt(W) >= 0.35; an AllGather row block gathered wrong moves a row by ~|ref|; an
// unwritten element stays NaN (C is poisoned first). With kWholeWorld every rank's output is checked too (gathered
// A: byte for byte).
//
// Also: the planner's candidates and can_run agree (FP8 refuses no plan its bf16 twin runs: every mode runs FP8), the
// plan chosen without one is correct, a real World over every visible GPU runs every mode equal to its sequential
// result (NCCL gathers FP8 A as bytes), and the refusals name the value (CPU-side: tests/base/test_tensor_checks.cpp).

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <functional>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "expect_error.hpp"
#include "gpu/gpu_test.hpp"
#include "ovl/core/ovl.hpp"
#include "ovl/core/testing.hpp"
#include "ovl/error.hpp"
#include "ovl/sim/planner.hpp"

namespace ovl {
namespace {

using test::DeviceMatrix;
using test::expect_error_naming;
using test::fp8_value;
using test::half_value;
using test::random_fp8;
using test::run_op;

constexpr double kNormTolerance = 1e-2;

std::vector<uint8_t> read_bytes(const void* p, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  cudaMemcpy(out.data(), p, bytes, cudaMemcpyDeviceToHost);
  return out;
}

// A per-tensor scale, random in [0.05, 0.2].
float random_scale(uint32_t seed) {
  std::mt19937 rng(seed * 7919u);
  return std::uniform_real_distribution<float>(0.05f, 0.2f)(rng);
}

// A row-major FP8 matrix (random moderate codes, random_fp8) on the device, its host codes and its scale (a device
// float, random_scale).
struct Fp8Matrix {
  int64_t rows, cols;
  DType dtype;
  std::vector<uint8_t> host;
  float scale;
  test::DeviceArray<uint8_t> data;
  test::DeviceArray<float> scale_dev;
  Fp8Matrix(int64_t r, int64_t c, DType type, uint32_t seed)
      : rows(r),
        cols(c),
        dtype(type),
        host(random_fp8(size_t(r * c), type, seed, false)),
        scale(random_scale(seed)),
        data(host.size()),
        scale_dev(1) {
    cudaMemcpy(data.get(), host.data(), host.size(), cudaMemcpyHostToDevice);
    cudaMemcpy(scale_dev.get(), &scale, sizeof(float), cudaMemcpyHostToDevice);
    if (test::finish_setup() != cudaSuccess) throw std::runtime_error("upload");
  }
  TensorRef ref() const { return TensorRef{data.get(), rows, cols, dtype, BLayout::kNxK, scale_dev.get()}; }
};

// C (rows x N, bf16 or fp16): a DeviceMatrix of 2-byte elements seen as `dtype`.
TensorRef out_ref(const DeviceMatrix& c, DType dtype) {
  TensorRef t = c.ref();
  t.dtype = dtype;
  return t;
}

// The float64 product a_scale b_scale A B (A rows x K codes, B N x K codes) and S, the scaled sums of |products|.
struct Product {
  std::vector<double> d, s;
};
Product fp8_product(const std::vector<uint8_t>& a, DType a_type, const std::vector<uint8_t>& b, DType b_type,
                    int64_t rows, int64_t n, int64_t k, double scale) {
  std::vector<double> av(a.size()), bv(b.size());
  for (size_t i = 0; i < a.size(); ++i) av[i] = fp8_value(a[i], a_type);
  for (size_t i = 0; i < b.size(); ++i) bv[i] = fp8_value(b[i], b_type);
  Product p{std::vector<double>(size_t(rows * n)), std::vector<double>(size_t(rows * n))};
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0, abs_sum = 0;
      const double* ar = &av[size_t(i * k)];
      const double* br = &bv[size_t(j * k)];
      for (int64_t x = 0; x < k; ++x) {
        sum += ar[x] * br[x];
        abs_sum += std::fabs(ar[x] * br[x]);
      }
      p.d[size_t(i * n + j)] = sum * scale;
      p.s[size_t(i * n + j)] = abs_sum * scale;
    }
  }
  return p;
}

// The whole result (GEMM+AR / RS: all M rows of the sum; AG: C) and each element's bound (the file comment); AG also
// the gathered A's codes.
struct Reference {
  std::vector<double> ref, bound;
  std::vector<uint8_t> gathered;
};

Reference make_reference(Context& ctx, const Problem& p, const Fp8Matrix& a, const Fp8Matrix& b) {
  const int w = ctx.world_size();
  const double scale = double(a.scale) * double(b.scale);
  Reference r;
  if (p.op == Op::kAllGatherGemm) {
    r.gathered = a.host;
    if (ctx.loopback()) {
      for (const void* peer : testing::loopback_peer_inputs(ctx, p)) {
        const std::vector<uint8_t> rows = read_bytes(peer, size_t(p.m / w * p.k));
        r.gathered.insert(r.gathered.end(), rows.begin(), rows.end());
      }
    }
    const Product g = fp8_product(r.gathered, a.dtype, b.host, b.dtype, p.m, p.n, p.k, scale);
    r.ref = g.d;
    r.bound.resize(g.d.size());
    for (size_t i = 0; i < g.d.size(); ++i) r.bound[i] = std::ldexp(std::fabs(g.d[i]), -8) + std::ldexp(g.s[i], -9);
    return r;
  }
  const Product p0 = fp8_product(a.host, a.dtype, b.host, b.dtype, p.m, p.n, p.k, scale);
  r.ref = p0.d;
  std::vector<double> magnitude(p0.d.size());
  for (size_t i = 0; i < p0.d.size(); ++i) magnitude[i] = std::fabs(p0.d[i]);
  if (ctx.loopback()) {
    for (const void* peer : testing::loopback_peer_inputs(ctx, p)) {
      const std::vector<uint16_t> part = test::read_device(peer, p.m * p.n);
      for (size_t i = 0; i < part.size(); ++i) {
        const double v = half_value(part[i], p.output_dtype());
        r.ref[i] += v;
        magnitude[i] += std::fabs(v);
      }
    }
  }
  r.bound.resize(p0.d.size());
  for (size_t i = 0; i < p0.d.size(); ++i) {
    r.bound[i] = std::ldexp(std::fabs(p0.d[i]), -8) + std::ldexp(p0.s[i], -9) + w * std::ldexp(magnitude[i], -8);
  }
  return r;
}

// `out` (elements [first, first + count) of the reference, in `dtype`) against the reference: no element out of its
// bound, and the norm within kNormTolerance.
void expect_close(const std::vector<uint16_t>& out, DType dtype, const Reference& r, size_t first,
                  const std::string& what) {
  size_t bad = 0;
  std::string examples;
  double num = 0, den = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double v = half_value(out[i], dtype), want = r.ref[first + i];
    if (!(std::fabs(v - want) <= r.bound[first + i]) && ++bad <= 3) {
      examples += "[" + std::to_string(first + i) + "] = " + std::to_string(v) + ", reference " +
                  std::to_string(want) + " (bound " + std::to_string(r.bound[first + i]) + "); ";
    }
    num += (v - want) * (v - want);
    den += want * want;
  }
  EXPECT_EQ(bad, 0u) << what << ": elements out of tolerance: " << examples;
  const double rel = std::isfinite(num) ? std::sqrt(num / std::max(den, 1e-300)) : INFINITY;
  EXPECT_LE(rel, kNormTolerance) << what << ": ||out - ref|| / ||ref||";
}

// kWholeWorld: ranks 1..W-1's outputs poisoned before a run (`poison`) and checked after it.
void peers_outputs(Context& ctx, const Problem& p, const Reference* r, cudaStream_t stream) {
  if (!ctx.loopback() || ctx.loopback_share() != LoopbackShare::kWholeWorld) return;
  const int64_t w = ctx.world_size(), mb = p.m / w;
  const std::vector<void*> outs = testing::loopback_peer_outputs(ctx, p);
  ASSERT_EQ(outs.size(), size_t(w - 1));
  for (int64_t rank = 1; rank < w; ++rank) {
    void* out = outs[size_t(rank - 1)];
    const std::string what = "rank " + std::to_string(rank);
    switch (p.op) {
      case Op::kAllGatherGemm:  // FP8 codes: 0xFF is NaN in e4m3 and e5m2
        if (r == nullptr) cudaMemsetAsync(out, 0xFF, size_t(p.m * p.k), stream);
        if (r != nullptr) EXPECT_EQ(read_bytes(out, size_t(p.m * p.k)), r->gathered) << what << "'s gathered A";
        break;
      case Op::kGemmAllReduce:
        if (r == nullptr) cudaMemsetAsync(out, 0xFF, size_t(p.m * p.n * 2), stream);
        if (r != nullptr) expect_close(test::read_device(out, p.m * p.n), p.output_dtype(), *r, 0, what + "'s output");
        break;
      case Op::kGemmReduceScatter:
        if (r == nullptr) cudaMemsetAsync(out, 0xFF, size_t(mb * p.n * 2), stream);
        if (r != nullptr)
          expect_close(test::read_device(out, mb * p.n), p.output_dtype(), *r, size_t(rank * mb * p.n),
                       what + "'s rows");
        break;
    }
  }
}

// The plans each op runs on FP8: every mode, and in sequential the TMA movers too (an AllGather's FP8 copies through
// them); tile-signal with the copy engine, and (GEMM first) with tile-major output; tma pushed and pulled, partitioned
// and on shared SMs; AG+GEMM's tile-signal with 2 groups. 16 communication SMs.
std::vector<Plan> fp8_plans(const Context& ctx, const Problem& p) {
  const Hardware& hw = ctx.hardware();
  std::vector<Plan> v;
  v.push_back(default_plan(Mode::kSequential, p, hw, 16));
  for (CommAlgo algo : {CommAlgo::kTmaPush, CommAlgo::kTmaPull}) {
    Plan seq = default_plan(Mode::kSequential, p, hw, 16);
    seq.comm_algo = algo;
    v.push_back(seq);
  }
  v.push_back(default_plan(Mode::kDecomposed, p, hw, 16));
  Plan ts = default_plan(Mode::kTileSignal, p, hw, 16);
  ts.gemm_sms = hw.spec.sm_count - 16;
  v.push_back(ts);
  Plan ce = default_plan(Mode::kTileSignal, p, hw, 16);
  ce.comm_algo = CommAlgo::kCopyEngine;
  ce.tile_groups = band_groups(ce.tiles_m(p), ce.tiles_n(p), 2);
  v.push_back(ce);
  v.push_back(default_plan(Mode::kGreenContext, p, hw, 16));
  if (p.op == Op::kAllGatherGemm) {
    Plan ts2 = ts;
    ts2.tile_groups = band_groups(ts.tiles_m(p), ts.tiles_n(p), 2);
    v.push_back(ts2);
  } else {
    Plan ts_tile = ts;
    ts_tile.output = OutputLayout::kTileMajor;
    v.push_back(ts_tile);
  }
  Plan tma = default_plan(Mode::kTma, p, hw, 16);
  for (CommAlgo algo : {CommAlgo::kTmaPush, CommAlgo::kTmaPull}) {
    tma.comm_algo = algo;
    v.push_back(tma);
    Plan shared = tma;
    shared.partitioned = false;
    shared.gemm_sms = hw.spec.sm_count - 16;
    v.push_back(shared);
  }
  return v;
}

struct Types {
  DType b, out;
};

// World 1 = a real world of 1 (NCCL); W > 1 = loopback of W ranks playing `share`. M = 1000, N = 776, K = 528.
void check_fp8(int world, Op op, LoopbackShare share, Types types) {
  ContextOptions options;
  options.world = World::loopback(world);
  options.loopback_share = share;
  Context ctx(options);
  // AG+GEMM: the gathered A is NaN before every call, so a GEMM that reads rows before their gather fails.
  if (op == Op::kAllGatherGemm) testing::set_fault(ctx, testing::Fault::kPoisonGather);
  const int w = ctx.world_size();
  const int64_t m = 1000, n = 776, k = 528;
  const bool ag = op == Op::kAllGatherGemm;
  const Fp8Matrix a(ag ? m / w : m, k, DType::kE4M3, 11 + uint32_t(world)), b(n, k, types.b, 12 + uint32_t(world));
  const int64_t rows = op == Op::kGemmReduceScatter ? m / w : m;
  DeviceMatrix c(rows, n, 0);
  const TensorRef c_ref = out_ref(c, types.out);
  const Problem p = ctx.problem_for(op, a.ref(), b.ref(), c_ref);
  ASSERT_EQ(p.dtype, DType::kE4M3);
  ASSERT_EQ(p.output_dtype(), types.out);
  test::Stream stream;
  const Reference r = make_reference(ctx, p, a, b);
  const std::vector<Plan> plans = fp8_plans(ctx, p);
  for (const Plan& plan : plans) {
    SCOPED_TRACE(fmt::format("{} b {} share {}: plan {}", p.name(), to_string(types.b), to_string(share),
                             plan.summary()));
    ASSERT_EQ(ctx.can_run(p, plan), "");
    c.poison(stream);
    peers_outputs(ctx, p, nullptr, stream);
    run_op(ctx, op, a.ref(), b.ref(), c_ref, plan, stream);
    ctx.synchronize(stream);
    expect_close(c.read(), types.out, r, 0, "C");
    peers_outputs(ctx, p, &r, stream);
  }
  // Without a plan: the one plan_for chooses (measured tuning over the planner's candidates, which can_run filtered).
  c.poison(stream);
  run_op(ctx, op, a.ref(), b.ref(), c_ref, std::nullopt, stream);
  ctx.synchronize(stream);
  ASSERT_NE(ctx.plan_choice(p), nullptr);
  expect_close(c.read(), types.out, r, 0, "C of the chosen plan " + ctx.plan_choice(p)->plan.summary());
}

class OverlapFp8Test : public test::HopperTest {};

// One case of check_fp8: the world, the op, the share and the types of B and C.
struct Fp8Case {
  int world;
  Op op;
  LoopbackShare share;
  Types types;
};

void PrintTo(const Fp8Case& c, std::ostream* os) {
  *os << to_string(c.op) << " world " << c.world << " share " << to_string(c.share) << " B " << to_string(c.types.b)
      << " C " << to_string(c.types.out);
}

class OverlapFp8Cases : public OverlapFp8Test, public ::testing::WithParamInterface<Fp8Case> {};

TEST_P(OverlapFp8Cases, EveryModeMatchesFloat64) {
  const Fp8Case& c = GetParam();
  check_fp8(c.world, c.op, c.share, c.types);
}

constexpr LoopbackShare kRank0 = LoopbackShare::kRank0;
constexpr LoopbackShare kWhole = LoopbackShare::kWholeWorld;
constexpr Op kAR = Op::kGemmAllReduce, kRS = Op::kGemmReduceScatter, kAG = Op::kAllGatherGemm;
constexpr Types kE4m3Bf16{DType::kE4M3, DType::kBF16}, kE5m2Bf16{DType::kE5M2, DType::kBF16};
constexpr Types kE4m3Fp16{DType::kE4M3, DType::kFP16}, kE5m2Fp16{DType::kE5M2, DType::kFP16};

// Every op in worlds 1, 2 and 4 (both shares), GEMM+RS in 8; B e4m3 and e5m2, C bf16 and fp16 spread over them.
INSTANTIATE_TEST_SUITE_P(
    Worlds, OverlapFp8Cases,
    ::testing::Values(Fp8Case{1, kAR, kRank0, kE4m3Bf16}, Fp8Case{1, kRS, kRank0, kE5m2Fp16},
                      Fp8Case{1, kAG, kRank0, kE5m2Bf16}, Fp8Case{2, kAR, kRank0, kE5m2Bf16},
                      Fp8Case{2, kRS, kRank0, kE4m3Bf16}, Fp8Case{2, kAG, kRank0, kE4m3Fp16},
                      Fp8Case{2, kAR, kWhole, kE4m3Fp16}, Fp8Case{2, kRS, kWhole, kE5m2Bf16},
                      Fp8Case{2, kAG, kWhole, kE4m3Bf16}, Fp8Case{4, kAR, kRank0, kE4m3Fp16},
                      Fp8Case{4, kRS, kRank0, kE5m2Bf16}, Fp8Case{4, kAG, kRank0, kE5m2Fp16},
                      Fp8Case{4, kAR, kWhole, kE5m2Bf16}, Fp8Case{4, kRS, kWhole, kE4m3Fp16},
                      Fp8Case{4, kAG, kWhole, kE5m2Bf16}, Fp8Case{8, kRS, kWhole, kE5m2Fp16}),
    [](const ::testing::TestParamInfo<Fp8Case>& info) {
      const Fp8Case& c = info.param;
      const char* op = c.op == kAR ? "GemmAllReduce" : c.op == kRS ? "GemmReduceScatter" : "AllGatherGemm";
      const auto type = [](DType d) {
        std::string t(to_string(d));
        t[0] = char(std::toupper(t[0]));
        return t;
      };
      return fmt::format("{}World{}{}B{}C{}", op, c.world, c.share == kWhole ? "WholeWorld" : "",
                         type(c.types.b), type(c.types.out));
    });

// Every mode runs FP8: for every plan the planner prices, can_run gives an FP8 problem the verdict of its bf16 twin
// (the same shapes), so the planner's candidates for FP8 are those for bf16; and tuning_candidates offers the
// overlapped modes, not only sequential.
TEST_F(OverlapFp8Test, PlannerCandidatesAgreeWithCanRun) {
  ContextOptions options;
  options.world = World::loopback(4);
  Context ctx(options);
  for (Op op : {Op::kGemmAllReduce, Op::kGemmReduceScatter, Op::kAllGatherGemm}) {
    Problem fp8 = make_problem(op, 4096, 4096, 1024, 4);
    fp8.dtype = DType::kE4M3;
    const Problem bf16 = make_problem(op, 4096, 4096, 1024, 4);
    sim::PlannerOptions o;
    o.runnable_only = false;
    const std::vector<Plan> plans = sim::candidate_plans(fp8, ctx.planning_hardware(), o);
    ASSERT_FALSE(plans.empty());
    int runnable = 0;
    for (const Plan& plan : plans) {
      const std::string why = ctx.can_run(fp8, plan);
      EXPECT_EQ(why.empty(), ctx.can_run(bf16, plan).empty()) << plan.summary() << ": " << why;
      runnable += why.empty();
    }
    EXPECT_GT(runnable, 0) << to_string(op);
    bool overlapped = false;
    for (const Plan& plan : ctx.tuning_candidates(fp8)) {
      EXPECT_EQ(ctx.can_run(fp8, plan), "") << plan.summary();
      overlapped = overlapped || plan.mode != Mode::kSequential;
    }
    EXPECT_TRUE(overlapped) << to_string(op) << ": no overlapped tuning candidate";
  }
}

// A real World over every visible GPU (threads; a world of 1 on one GPU): every mode on FP8 equals the sequential
// result on every rank (relative error norm within 1e-2, as the bf16 test in test_overlap.cu: the inputs differ per
// rank, so there is no float64 reference here). NCCL gathers FP8 A as bytes (ncclUint8); tma-pull is refused in a
// world of more than one rank. The gathered A is poisoned before each call.
TEST_F(OverlapFp8Test, RealWorldEveryModeEqualsSequential) {
  WorldOptions world_options;
  world_options.nccl_cta_bounds = {0, 16};
  std::vector<World> worlds = World::threads(test::every_gpu(8), world_options);
  run_per_rank(worlds, [&](World& world) {
    ContextOptions options;
    options.world = world;
    Context ctx(options);
    testing::set_fault(ctx, testing::Fault::kPoisonGather);
    const int w = ctx.world_size();
    const uint32_t rank = uint32_t(ctx.rank());
    const int64_t m = 1024, n = 768, k = 256;
    const Fp8Matrix a_all(m, k, DType::kE4M3, 100 + rank), a_rows(m / w, k, DType::kE4M3, 200 + rank);
    const Fp8Matrix b(n, k, DType::kE5M2, 300 + rank);
    test::Stream stream;
    for (Op op : {Op::kGemmAllReduce, Op::kGemmReduceScatter, Op::kAllGatherGemm}) {
      const int64_t rows = op == Op::kGemmReduceScatter ? m / w : m;
      DeviceMatrix c(rows, n, 0), c_seq(rows, n, 0);
      const Fp8Matrix& a = op == Op::kAllGatherGemm ? a_rows : a_all;
      const Problem p = ctx.problem_for(op, a.ref(), b.ref(), c.ref());
      run_op(ctx, op, a.ref(), b.ref(), c_seq.ref(), default_plan(Mode::kSequential, p, ctx.hardware(), 16), stream);
      ctx.synchronize(stream);
      const std::vector<uint16_t> seq = c_seq.read();
      for (const Plan& plan : fp8_plans(ctx, p)) {
        if (!ctx.can_run(p, plan).empty()) continue;  // tma-pull in a real world of more than one rank
        SCOPED_TRACE(fmt::format("rank {} of {}: {} plan: {}", ctx.rank(), w, p.name(), plan.summary()));
        c.poison(stream);
        run_op(ctx, op, a.ref(), b.ref(), c.ref(), plan, stream);
        ctx.synchronize(stream);
        EXPECT_LT(test::rel_error(c.read(), seq), kNormTolerance);
      }
    }
  });
}

// Bad FP8 calls name the value: the tensors' types and scales, where a scale lives, B's layout, K, and a problem the
// GEMM cannot run (A e5m2) or the planner's FP8 problem with B K x N. The checks that need no device are
// tests/base/test_tensor_checks.cpp's.
TEST_F(OverlapFp8Test, RefusalsNameTheValue) {
  ContextOptions options;
  options.world = World::loopback(2);
  Context ctx(options);
  const Fp8Matrix a(1024, 256, DType::kE4M3, 1), b(768, 256, DType::kE5M2, 2);
  DeviceMatrix c(1024, 768, 0), b_bf16(768, 256, 3);
  cudaStream_t stream = nullptr;
  const auto all_reduce = [&](const TensorRef& ta, const TensorRef& tb, const TensorRef& tc) {
    return [&ctx, ta, tb, tc, stream] { ctx.gemm_all_reduce(ta, tb, tc, std::nullopt, stream); };
  };
  expect_error_naming(all_reduce(a.ref(), b_bf16.ref(), c.ref()), "B dtype bf16 with e4m3 A");
  TensorRef no_scale = b.ref();
  no_scale.scale = nullptr;
  expect_error_naming(all_reduce(a.ref(), no_scale, c.ref()), "B (dtype e5m2) has no scale");
  // A scale in host memory, and one on the wrong side of the call (C).
  const float host_scale = 1.f;
  TensorRef host = a.ref();
  host.scale = &host_scale;
  expect_error_naming(all_reduce(host, b.ref(), c.ref()), "A scale");
  TensorRef c_scaled = c.ref();
  c_scaled.scale = a.ref().scale;
  expect_error_naming(all_reduce(a.ref(), b.ref(), c_scaled), "C has a scale");
  // C in FP8; A in e5m2; B stored K x N.
  TensorRef c_fp8 = c.ref();
  c_fp8.dtype = DType::kE4M3;
  expect_error_naming(all_reduce(a.ref(), b.ref(), c_fp8), "C dtype e4m3");
  TensorRef a_e5m2 = a.ref();
  a_e5m2.dtype = DType::kE5M2;
  expect_error_naming(all_reduce(a_e5m2, b.ref(), c.ref()), "A dtype e5m2: FP8 A must be e4m3");
  const Fp8Matrix b_kxn(256, 768, DType::kE4M3, 4);
  TensorRef kxn = b_kxn.ref();
  kxn.b_layout = BLayout::kKxN;
  expect_error_naming(all_reduce(a.ref(), kxn, c.ref()), "K-major");
  // K = 264: a multiple of 8, not of 16 (FP8 rows must be 16-byte multiples).
  const Fp8Matrix a_k(1024, 264, DType::kE4M3, 5), b_k(768, 264, DType::kE4M3, 6);
  expect_error_naming(all_reduce(a_k.ref(), b_k.ref(), c.ref()), "\"k\" = 264 must be a multiple of 16");
  // Problems given to can_run directly: Problem::validate refuses what the GEMM does not run (for the planner too).
  Problem p = ctx.problem_for(Op::kGemmAllReduce, a.ref(), b.ref(), c.ref());
  const Plan seq = default_plan(Mode::kSequential, p, ctx.hardware(), 16);
  EXPECT_EQ(ctx.can_run(p, seq), "");
  p.dtype = DType::kE5M2;
  EXPECT_NE(ctx.can_run(p, seq).find("\"dtype\" = e5m2: FP8 A must be e4m3"), std::string::npos) << ctx.can_run(p, seq);
  p.dtype = DType::kE4M3;
  p.b_layout = BLayout::kKxN;
  EXPECT_NE(ctx.can_run(p, seq).find("K-major"), std::string::npos) << ctx.can_run(p, seq);
}

}  // namespace
}  // namespace ovl
