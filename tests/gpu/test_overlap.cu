// Tests of the overlap modes behind ovl::Context (core/include/ovl/core/context.hpp).
//
// Every mode x op must equal the sequential result (cuBLAS, then the collective) and a float64 CPU reference, in a
// real world of 1 and in loopback emulation of 2, 4 and 8 ranks. Tolerance: inputs bf16, GEMMs accumulate in fp32
// and round the partial product to bf16 (relative error <= 2^-9 per element), the collective sums the W partials in
// fp32 and rounds once more; the relative error norm ||out - ref|| / ||ref|| of a correct run is ~2e-3, while a
// missing group, a wrong row offset or an unreduced rank gives >= 0.1 (one of W partials missing). 1e-2 separates
// them. Outputs are poisoned with NaN first, so an unwritten element fails.
//
// Loopback shares: with LoopbackShare::kRank0 (the default) the collective plays rank 0's share and only rank 0's
// output (the caller's C) is complete: it is what is checked (for GEMM+AR it includes the other owners' pieces,
// copied from the peers' precomputed reductions). With kWholeWorld every rank's output is complete and every
// rank's is checked against the float64 reference (peers: testing::loopback_peer_outputs, poisoned before each run).
//
// TMA movers (mode tma, comm_algo tma-pull / tma-push; and sequential with those algorithms): an odd shape
// (M = 1000, N = 776: partial tiles, partial bulk-copy chunks, slices that wrap the 4-stage ring) in loopback 2, 4,
// 8, both shares, GEMM+AR and GEMM+RS; tma-pull must be bitwise identical over 3 runs (fixed summation order). With
// more groups than the movers' shared-memory pieces table holds, the movers read the range table in global memory:
// one tile per group, 144 groups in loopback 8.
//
// Paced loopback (ContextOptions::link_profile): with a slow link (50 GB/s, so pacing dominates), each mover (SIMT as
// NCCL's stand-in, tma-push, tma-pull) in sequential, and the tma and tile-signal modes, must still equal the float64
// reference on random data; the collective alone (testing::run_part) must take within [0.8, 1.5] x its link bytes /
// 50 GB/s (times the TMA movers' busiest CTA's share, tma_mover_link_load) plus its steps' latency (20 us a step):
// a correctness-and-sanity check of the pacing, not a speed claim (the lower bound says pacing holds; the upper one
// that little else binds at that rate: the movers' HBM rates are ~100x higher). The tma mode's collective, 32 tile
// groups in one launch, pays the latency once, not per group (which would add 31 x 40 us to AllReduce's ~1000 us and
// break the upper bound). AllGather+GEMM (K = 2048: 12 MiB over the link) checks the result with the gathered A
// poisoned before each call (the tma mode's paced releases, each a link latency after its group's rows), and times
// the sequential collectives only (the tma mode's groups are each one owner's rows: uneven over the link). With a
// transport's measured busbw in the profile (LinkProfile::nccl_busbw, tma_push_busbw), its collective alone takes its
// link bytes at the table's rate for the call, within [0.8, 1.25]: NCCL's stand-in with no steps' latency, the TMA
// push mover with them.
//
// Copy engine (comm_algo ce, tile-signal): in plans_for (so every check_all_modes world and share, and the real
// World test), and on the odd shape of the TMA movers with 1, 2, 3 and 8 groups in a world of 1 and loopback 2, 4
// and 8 (both shares; kWholeWorld checks every rank's output). Its stream memory waits cannot time out: the fault
// tests below check that Context::synchronize's watchdog turns a missing signal into an ovl::Error.
//
// NCCL's symmetric kernels (comm_algo nccl-symmetric): in a world of 1 (a one-rank communicator split off the
// context's own, or off a loopback World of 1's: NCCL registers the windows locally and runs its one-rank copy) on the
// odd shape, every mode and CTA policy that takes it, against sequential (NCCL ring) and the float64 reference; and in
// the real-World tests below (every visible GPU) beside the other plans, and back to back.
//
// Failure paths: a GEMM that never signals (skipped) or signals fewer tiles than the comm side expects must make
// the comm side time out with an ovl::Error from Context::synchronize, never hang (short timeout: 300 ms), and the
// next call on the same Context must be correct. More bad inputs and faults: tests/gpu/test_context_faults.cu.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "gpu/gpu_test.hpp"
#include "ovl/core/ovl.hpp"
#include "ovl/core/testing.hpp"
#include "ovl/error.hpp"
#include "ovl/kernels/collectives.hpp"
#include "ovl/model/estimate.hpp"

namespace ovl {
namespace {

#define CUDA_OK(call) ASSERT_EQ(cudaSuccess, (call)) << #call

using test::cpu_gemm;
using test::expect_error_naming_all;
using test::DeviceMatrix;
using test::from_bf16;
using test::read_device;
using test::rel_error;
using test::run_op;

constexpr double kTolerance = 1e-2;

// The plans every test runs: each mode with its defaults, plus tile-signal with tile-major output and tma without a
// partition. 16 communication SMs (two green-context groups).
std::vector<Plan> plans_for(const Context& ctx, const Problem& p) {
  const Hardware& hw = ctx.hardware();
  std::vector<Plan> v;
  v.push_back(default_plan(Mode::kSequential, p, hw, 16));
  // Not overlapping, with ovl's TMA collective on every SM after the GEMM (a planner candidate; a real world of more
  // than one rank runs its tma-push in TmaExecutor and refuses tma-pull).
  for (CommAlgo algo : {CommAlgo::kTmaPush, CommAlgo::kTmaPull}) {
    Plan seq_tma = default_plan(Mode::kSequential, p, hw, hw.spec.sm_count);
    seq_tma.comm_algo = algo;
    seq_tma.comm_ctas = seq_tma.comm_sms = hw.spec.sm_count;
    v.push_back(seq_tma);
  }
  v.push_back(default_plan(Mode::kDecomposed, p, hw, 16));
  Plan reserve = default_plan(Mode::kDecomposed, p, hw, 16);  // cuBLAS targeting the SMs the collective leaves
  reserve.gemm_sms = hw.spec.sm_count - 16;
  v.push_back(reserve);
  Plan ts = default_plan(Mode::kTileSignal, p, hw, 16);
  ts.gemm_sms = hw.spec.sm_count - 16;
  v.push_back(ts);
  Plan ce = default_plan(Mode::kTileSignal, p, hw, 16);  // copy engine: the GEMM on every SM, 16 CTAs for the sum
  ce.comm_algo = CommAlgo::kCopyEngine;
  v.push_back(ce);
  if (p.op == Op::kAllGatherGemm) {
    // The GEMM waits for each group's gather: one group per band (8), and 2 groups of 4 bands; green-context; tma
    // (tma-push on a partition, a group per band; tma-pull on shared SMs in 2 groups: the GEMM waits for the
    // releases of every gather CTA).
    Plan ts2 = ts;
    ts2.tile_groups = band_groups(ts.tiles_m(p), ts.tiles_n(p), 2);
    v.push_back(ts2);
    v.push_back(default_plan(Mode::kGreenContext, p, hw, 16));
    Plan tma = default_plan(Mode::kTma, p, hw, 16);
    v.push_back(tma);
    tma.partitioned = false;
    tma.gemm_sms = hw.spec.sm_count - 16;
    tma.comm_algo = CommAlgo::kTmaPull;
    tma.tile_groups = band_groups(tma.tiles_m(p), tma.tiles_n(p), 2);
    v.push_back(tma);
    return v;
  }
  Plan ts_tile = ts;
  ts_tile.output = OutputLayout::kTileMajor;
  v.push_back(ts_tile);
  v.push_back(default_plan(Mode::kGreenContext, p, hw, 16));
  Plan tma = default_plan(Mode::kTma, p, hw, 16);  // tma-push
  v.push_back(tma);
  Plan tma_pull = tma;
  tma_pull.comm_algo = CommAlgo::kTmaPull;
  v.push_back(tma_pull);
  Plan tma_shared = tma;
  tma_shared.partitioned = false;
  tma_shared.gemm_sms = hw.spec.sm_count - 16;
  tma_shared.comm_algo = CommAlgo::kTmaPull;
  v.push_back(tma_shared);
  return v;
}

// The float64 references of a run (rank 0's inputs plus the peers' inputs the context made): `rank0` is rank 0's
// output; `all` is every row of the reduced result (GEMM+AR/RS) or the gathered A (AG+GEMM, exact values) from
// which each rank's output is cut.
struct References {
  std::vector<double> rank0, all;
  std::vector<uint16_t> gathered_a;  // AG+GEMM
};

References make_references(Context& ctx, const Problem& p, Op op, const DeviceMatrix& a, const DeviceMatrix& b) {
  const int w = ctx.world_size();
  const int64_t m = p.m, n = p.n, k = p.k;
  References r;
  if (op == Op::kAllGatherGemm) {
    r.gathered_a = a.host;
    if (ctx.loopback()) {
      for (const void* peer : testing::loopback_peer_inputs(ctx, p)) {
        const auto rows = read_device(peer, (m / w) * k);
        r.gathered_a.insert(r.gathered_a.end(), rows.begin(), rows.end());
      }
    }
    r.rank0 = cpu_gemm(r.gathered_a, b.host, 0, m, n, k);
    return r;
  }
  r.all = cpu_gemm(a.host, b.host, 0, m, n, k);
  if (ctx.loopback()) {
    for (const void* peer : testing::loopback_peer_inputs(ctx, p)) {
      const auto part = read_device(peer, m * n);
      for (size_t i = 0; i < r.all.size(); ++i) r.all[i] += from_bf16(part[i]);
    }
  }
  const int64_t rows = op == Op::kGemmReduceScatter ? m / w : m;
  r.rank0.assign(r.all.begin(), r.all.begin() + rows * n);
  return r;
}

// kWholeWorld: poisons (before) or checks (after) ranks 1..W-1's outputs.
void poison_peers(Context& ctx, const Problem& p, cudaStream_t stream) {
  if (!ctx.loopback() || ctx.loopback_share() != LoopbackShare::kWholeWorld) return;
  const int64_t w = ctx.world_size();
  const int64_t elems = p.op == Op::kAllGatherGemm       ? p.m * p.k
                        : p.op == Op::kGemmReduceScatter ? p.m / w * p.n
                                                         : p.m * p.n;
  for (void* out : testing::loopback_peer_outputs(ctx, p)) cudaMemsetAsync(out, 0xFF, size_t(elems) * 2, stream);
}
void check_peers(Context& ctx, const Problem& p, const References& ref) {
  if (!ctx.loopback() || ctx.loopback_share() != LoopbackShare::kWholeWorld) return;
  const int64_t w = ctx.world_size(), mb = p.m / w;
  const std::vector<void*> outs = testing::loopback_peer_outputs(ctx, p);
  ASSERT_EQ(outs.size(), size_t(w - 1));
  for (int64_t r = 1; r < w; ++r) {
    const void* out = outs[size_t(r - 1)];
    switch (p.op) {
      case Op::kAllGatherGemm:
        EXPECT_EQ(read_device(out, p.m * p.k), ref.gathered_a) << "rank " << r << "'s gathered A";
        break;
      case Op::kGemmAllReduce:
        EXPECT_LT(rel_error(read_device(out, p.m * p.n), ref.all), kTolerance) << "rank " << r << "'s output";
        break;
      case Op::kGemmReduceScatter: {
        const std::vector<double> rows(ref.all.begin() + r * mb * p.n, ref.all.begin() + (r + 1) * mb * p.n);
        EXPECT_LT(rel_error(read_device(out, mb * p.n), rows), kTolerance) << "rank " << r << "'s rows";
        break;
      }
    }
  }
}

// World 0 = a real world of 1 (NCCL); W > 1 = loopback of W ranks playing `share`.
void check_all_modes(int world, Op op, LoopbackShare share = LoopbackShare::kRank0) {
  ContextOptions options;
  if (world > 0) options.world = World::loopback(world);
  options.loopback_share = share;
  // AG+GEMM: the gathered A is NaN before every call, so a GEMM that reads rows before their gather fails the check
  // (without it, each run would find the previous run's identical rows there).
  Context ctx(options);
  if (op == Op::kAllGatherGemm) testing::set_fault(ctx, testing::Fault::kPoisonGather);
  const int w = ctx.world_size();
  const int64_t m = 1024, n = 768, k = 256;  // 8 row bands of 3 tiles; M / 8 = 128 rows per rank
  const bool ag = op == Op::kAllGatherGemm;
  DeviceMatrix a(ag ? m / w : m, k, 11), b(n, k, 12);
  DeviceMatrix c(op == Op::kGemmReduceScatter ? m / w : m, n, 0), c_seq(c.rows, n, 0);
  const Problem p = ctx.problem_for(op, a.ref(), b.ref(), c.ref());
  test::Stream stream;
  const References ref = make_references(ctx, p, op, a, b);

  c_seq.poison(stream);
  poison_peers(ctx, p, stream);
  run_op(ctx, op, a.ref(), b.ref(), c_seq.ref(), default_plan(Mode::kSequential, p, ctx.hardware(), 16), stream);
  ctx.synchronize(stream);
  const auto seq = c_seq.read();
  EXPECT_LT(rel_error(seq, ref.rank0), kTolerance) << "sequential vs float64, " << p.name();
  check_peers(ctx, p, ref);

  for (const Plan& plan : plans_for(ctx, p)) {
    SCOPED_TRACE(p.name() + " plan: " + plan.summary());
    c.poison(stream);
    poison_peers(ctx, p, stream);
    run_op(ctx, op, a.ref(), b.ref(), c.ref(), plan, stream);
    ctx.synchronize(stream);
    const auto out = c.read();
    EXPECT_LT(rel_error(out, seq), kTolerance) << "vs sequential";
    EXPECT_LT(rel_error(out, ref.rank0), kTolerance) << "vs float64";
    check_peers(ctx, p, ref);
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
  EXPECT_LT(rel_error(c.read(), seq), kTolerance) << "auto plan: " << ctx.plan_choice(p)->plan.summary();
}

// Every plan of plans(p, hardware) on an m x n x k problem in a loopback world of `world` ranks playing `share`,
// against sequential with the SIMT mover and the float64 reference; tma-pull plans run 3 times and must be bitwise
// identical (fixed summation order).
template <typename Plans>
void check_against_sequential(int world, Op op, LoopbackShare share, int64_t m, int64_t n, int64_t k, Plans plans) {
  ContextOptions options;
  if (world > 0) options.world = World::loopback(world);
  options.loopback_share = share;
  Context ctx(options);
  if (op == Op::kAllGatherGemm) testing::set_fault(ctx, testing::Fault::kPoisonGather);  // as in check_all_modes
  const int w = ctx.world_size();
  DeviceMatrix a(op == Op::kAllGatherGemm ? m / w : m, k, 21), b(n, k, 22);  // AG+GEMM: this rank's rows of A
  DeviceMatrix c(op == Op::kGemmReduceScatter ? m / w : m, n, 0), c_seq(c.rows, n, 0);
  const Problem p = ctx.problem_for(op, a.ref(), b.ref(), c.ref());
  const Hardware& hw = ctx.hardware();
  test::Stream stream;
  const References ref = make_references(ctx, p, op, a, b);

  c_seq.poison(stream);
  run_op(ctx, op, a.ref(), b.ref(), c_seq.ref(), default_plan(Mode::kSequential, p, hw, 16), stream);
  ctx.synchronize(stream);
  const auto seq = c_seq.read();
  ASSERT_LT(rel_error(seq, ref.rank0), kTolerance) << "sequential (SIMT mover) vs float64, " << p.name();

  for (const Plan& plan : plans(p, hw)) {
    SCOPED_TRACE(fmt::format("{} share {}: plan {}", p.name(), to_string(share), plan.summary()));
    ASSERT_EQ(ctx.can_run(p, plan), "");
    std::vector<uint16_t> first;
    const int runs = plan.comm_algo == CommAlgo::kTmaPull ? 3 : 1;
    for (int run = 0; run < runs; ++run) {
      c.poison(stream);
      poison_peers(ctx, p, stream);
      run_op(ctx, op, a.ref(), b.ref(), c.ref(), plan, stream);
      ctx.synchronize(stream);
      const auto out = c.read();
      EXPECT_LT(rel_error(out, seq), kTolerance) << "vs sequential, run " << run;
      EXPECT_LT(rel_error(out, ref.rank0), kTolerance) << "vs float64, run " << run;
      check_peers(ctx, p, ref);
      if (run == 0) {
        first = out;
      } else {
        EXPECT_TRUE(out == first) << "tma-pull is not bitwise identical across runs (run " << run << ")";
      }
    }
  }
}

// The TMA movers on an odd shape (see the file comment): M = 1000, N = 776 (8 bands, the last of 104 rows; 4 tile
// columns, the last of 8); tma with tma-pull and tma-push (partitioned, 8 comm SMs: large slices that wrap the ring;
// unpartitioned, 16 CTAs), and sequential with each TMA algorithm (the tma mode's like-for-like baseline).
void check_tma_movers(int world, Op op, LoopbackShare share) {
  check_against_sequential(world, op, share, 1000, 776, 256, [](const Problem& p, const Hardware& hw) {
    std::vector<Plan> plans;
    for (CommAlgo algo : {CommAlgo::kTmaPull, CommAlgo::kTmaPush}) {
      Plan part = default_plan(Mode::kTma, p, hw, 8);
      part.comm_algo = algo;
      plans.push_back(part);
      Plan shared = default_plan(Mode::kTma, p, hw, 16);
      shared.comm_algo = algo;
      shared.partitioned = false;
      shared.gemm_sms = hw.spec.sm_count - 16;
      plans.push_back(shared);
      Plan seq_tma = default_plan(Mode::kSequential, p, hw, 16);
      seq_tma.comm_algo = algo;
      plans.push_back(seq_tma);
    }
    return plans;
  });
}

// The TMA movers without their shared-memory pieces table: 144 x 1 tiles, one row band (= one tile) per group, so
// 144 groups x 8 owners x 32 bytes = 36 KiB, more than the 34 KiB the default ring (1 KiB + 4 x 48 KiB) leaves under
// the H200's 227 KiB. With a smaller OVL_TMA_RING the table would fit and the test would not test this path.
void check_tma_movers_global_ranges(Op op) {
  const kernels::TmaRingShape ring = kernels::tma_ring_shape();
  const std::size_t ring_end = 1024 + std::size_t(ring.stages) * ring.stage_bytes;  // the movers' header and ring
  if (ring_end + 144 * 8 * 32 <= kernels::kMaxSharedBytesPerBlock)
    GTEST_SKIP() << "OVL_TMA_RING = " << ring.stages << " x " << ring.stage_bytes
                 << " leaves room for the pieces table: the global-memory path would not run";
  check_against_sequential(8, op, LoopbackShare::kRank0, 18432, 256, 32, [](const Problem& p, const Hardware& hw) {
    std::vector<Plan> plans;
    for (CommAlgo algo : {CommAlgo::kTmaPull, CommAlgo::kTmaPush}) {
      Plan plan = default_plan(Mode::kTma, p, hw, 16);
      plan.comm_algo = algo;
      plan.tile_groups.assign(size_t(plan.tile_count(p)), 1);
      EXPECT_EQ(plan.tile_groups.size(), 144u);
      plans.push_back(plan);
    }
    return plans;
  });
}

// Swizzle order in the signaling modes: the GEMM visits swizzle bands of kSwizzleRows tile rows column by column,
// and groups of whole swizzle bands are whole blocks of rows. M = 2048 (16 tile rows: two swizzle bands, so two
// groups), N = 776 (4 tile columns, the last of 8), K = 256; tile-signal, green-context and tma (push and pull) with
// two groups, against sequential and float64.
void check_swizzled_groups(int world, Op op, LoopbackShare share) {
  check_against_sequential(world, op, share, 2048, 776, 256, [op](const Problem& p, const Hardware& hw) {
    std::vector<Plan> plans;
    for (Mode mode : {Mode::kTileSignal, Mode::kGreenContext, Mode::kTma}) {
      Plan plan = default_plan(mode, p, hw, 16);
      if (mode == Mode::kTileSignal) plan.gemm_sms = hw.spec.sm_count - 16;
      plan.tile_order = TileOrder::kSwizzle;
      plan.tile_groups = swizzle_band_groups(plan.tiles_m(p), plan.tiles_n(p), 2);  // 16 tile rows: two bands
      plans.push_back(plan);
      if (mode == Mode::kTma) {
        plan.comm_algo = CommAlgo::kTmaPull;
        plans.push_back(plan);
      }
    }
    return plans;
  });
}


// comm_algo ce (mode tile-signal, copy-engine copies gated by stream memory waits): M = 1000 (not a multiple of the
// 128-row tile: the last band has 104 rows; 125 rows per rank in a world of 8), N = 776 (the last tile column of 8),
// K = 256; 1, 2, 3 and 8 groups of whole bands, comm_ctas 8 (the sum; in loopback AG+GEMM also the SMs its
// same-device copies need beside the GEMM), the GEMM on every SM (the sum after it) and on SMs - 8 (GEMM+AR /
// GEMM+RS: a sum per group beside it); against sequential and the float64 reference, every rank's output with
// kWholeWorld.
void check_copy_engine(int world, Op op, LoopbackShare share) {
  check_against_sequential(world, op, share, 1000, 776, 256, [](const Problem& p, const Hardware& hw) {
    std::vector<Plan> plans;
    for (int groups : {1, 2, 3, 8}) {
      Plan plan = default_plan(Mode::kTileSignal, p, hw, 8);
      plan.comm_algo = CommAlgo::kCopyEngine;
      plan.tile_groups = band_groups(plan.tiles_m(p), plan.tiles_n(p), groups);
      plans.push_back(plan);
      if (groups == 1 || groups == 3) continue;
      plan.gemm_sms = hw.spec.sm_count - plan.comm_ctas;  // ce_sums_per_group
      plans.push_back(plan);
    }
    return plans;
  });
}

// comm_algo nccl-symmetric plans on 16 CTAs: sequential under CTA policies default, efficiency and zero; GEMM+AR also
// decomposed (4 chunks), tile-signal (4 groups, the GEMM on SMs - 16; and with a tile-major output) and green-context
// (a group per band); GEMM+RS and AG+GEMM in whole-buffer units only (Plan::validate): decomposed in one chunk,
// tile-signal in one group.
std::vector<Plan> nccl_symmetric_plans(const Problem& p, const Hardware& hw) {
  std::vector<Plan> plans;
  auto symmetric = [&](Mode mode, CtaPolicy policy = CtaPolicy::kEfficiency) {
    Plan plan = default_plan(mode, p, hw, 16);
    plan.comm_algo = CommAlgo::kNcclSymmetric;
    plan.cta_policy = policy;
    return plan;
  };
  for (CtaPolicy policy : {CtaPolicy::kDefault, CtaPolicy::kEfficiency, CtaPolicy::kZero})
    plans.push_back(symmetric(Mode::kSequential, policy));
  Plan decomposed = symmetric(Mode::kDecomposed);
  Plan ts = symmetric(Mode::kTileSignal);
  ts.gemm_sms = hw.spec.sm_count - 16;
  if (p.op == Op::kGemmAllReduce) {
    ts.tile_groups = band_groups(ts.tiles_m(p), ts.tiles_n(p), 4);
    plans.push_back(decomposed);
    plans.push_back(ts);
    Plan tile_major = ts;
    tile_major.output = OutputLayout::kTileMajor;
    plans.push_back(tile_major);
    plans.push_back(symmetric(Mode::kGreenContext));
    return plans;
  }
  decomposed.chunks = 1;
  plans.push_back(decomposed);
  ts.tile_groups = band_groups(ts.tiles_m(p), ts.tiles_n(p), 1);
  plans.push_back(ts);
  return plans;
}

// World 0: the context's own one-rank communicator; 1: a loopback World of 1's.
void check_nccl_symmetric(int world, Op op) {
  check_against_sequential(world, op, LoopbackShare::kRank0, 1000, 776, 256, nccl_symmetric_plans);
}

// Intervals of a timeline on one lane.
int intervals_on(const Timeline& t, const std::string& lane) {
  return int(std::count_if(t.intervals.begin(), t.intervals.end(), [&](const Interval& i) { return i.lane == lane; }));
}

class OverlapTest : public test::HopperTest {};

TEST_F(OverlapTest, AllModesGemmAllReduceWorld1) { check_all_modes(0, Op::kGemmAllReduce); }

// Loopback kRank0 GEMM+AR: A and B refilled in place (same pointers) before each call. Rank 0's output holds rows the
// emulated peers reduce from rank 0's partial product, so each call must see them made from its own inputs: every
// plan, three fillings each, against the float64 reference of that filling. (The soak's case: 1008 x 768 x 64 in a
// world of 3, M off the tile; the peers' pieces were once made for a shape's first inputs only, 0.47 off after.)
TEST_F(OverlapTest, LoopbackRank0AllReduceFollowsInputsChangedInPlace) {
  ContextOptions options;
  options.world = World::loopback(3);
  Context ctx(options);
  const int64_t m = 1008, n = 768, k = 64;
  DeviceMatrix a(m, k, 61), b(n, k, 62), c(m, n, 0);
  const Problem p = ctx.problem_for(Op::kGemmAllReduce, a.ref(), b.ref(), c.ref());
  test::Stream stream;
  uint64_t seed = 100;
  for (Plan plan : plans_for(ctx, p)) {
    if (!ctx.can_run(p, plan).empty()) continue;
    for (int filling = 0; filling < 3; ++filling) {
      a.host = test::random_bf16(size_t(m * k), ++seed);
      b.host = test::random_bf16(size_t(n * k), ++seed);
      ASSERT_EQ(cudaMemcpy(a.ptr, a.host.data(), a.host.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(b.ptr, b.host.data(), b.host.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
      const References ref = make_references(ctx, p, Op::kGemmAllReduce, a, b);
      c.poison(stream);
      run_op(ctx, Op::kGemmAllReduce, a.ref(), b.ref(), c.ref(), plan, stream);
      ctx.synchronize(stream);
      EXPECT_LT(rel_error(c.read(), ref.rank0), kTolerance) << plan.summary() << ", filling " << filling;
    }
  }
}
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
// Every rank played: every rank's output checked.
constexpr LoopbackShare kWhole = LoopbackShare::kWholeWorld;
TEST_F(OverlapTest, AllModesGemmAllReduceLoopback2WholeWorld) { check_all_modes(2, Op::kGemmAllReduce, kWhole); }
TEST_F(OverlapTest, AllModesGemmReduceScatterLoopback2WholeWorld) {
  check_all_modes(2, Op::kGemmReduceScatter, kWhole);
}
TEST_F(OverlapTest, AllModesAllGatherGemmLoopback2WholeWorld) { check_all_modes(2, Op::kAllGatherGemm, kWhole); }
TEST_F(OverlapTest, AllModesGemmAllReduceLoopback8WholeWorld) { check_all_modes(8, Op::kGemmAllReduce, kWhole); }
TEST_F(OverlapTest, AllModesGemmReduceScatterLoopback8WholeWorld) {
  check_all_modes(8, Op::kGemmReduceScatter, kWhole);
}
TEST_F(OverlapTest, AllModesAllGatherGemmLoopback8WholeWorld) { check_all_modes(8, Op::kAllGatherGemm, kWhole); }

// The TMA movers, odd shape, loopback 2 / 4 / 8 x share x op.
constexpr LoopbackShare kRank0 = LoopbackShare::kRank0;
TEST_F(OverlapTest, TmaMoversGemmAllReduceLoopback2Rank0) { check_tma_movers(2, Op::kGemmAllReduce, kRank0); }
TEST_F(OverlapTest, TmaMoversGemmAllReduceLoopback4Rank0) { check_tma_movers(4, Op::kGemmAllReduce, kRank0); }
TEST_F(OverlapTest, TmaMoversGemmAllReduceLoopback8Rank0) { check_tma_movers(8, Op::kGemmAllReduce, kRank0); }
TEST_F(OverlapTest, TmaMoversGemmReduceScatterLoopback2Rank0) { check_tma_movers(2, Op::kGemmReduceScatter, kRank0); }
TEST_F(OverlapTest, TmaMoversGemmReduceScatterLoopback4Rank0) { check_tma_movers(4, Op::kGemmReduceScatter, kRank0); }
TEST_F(OverlapTest, TmaMoversGemmReduceScatterLoopback8Rank0) { check_tma_movers(8, Op::kGemmReduceScatter, kRank0); }
TEST_F(OverlapTest, TmaMoversGemmAllReduceLoopback2WholeWorld) { check_tma_movers(2, Op::kGemmAllReduce, kWhole); }
TEST_F(OverlapTest, TmaMoversGemmAllReduceLoopback4WholeWorld) { check_tma_movers(4, Op::kGemmAllReduce, kWhole); }
TEST_F(OverlapTest, TmaMoversGemmAllReduceLoopback8WholeWorld) { check_tma_movers(8, Op::kGemmAllReduce, kWhole); }
TEST_F(OverlapTest, TmaMoversGemmReduceScatterLoopback2WholeWorld) {
  check_tma_movers(2, Op::kGemmReduceScatter, kWhole);
}
TEST_F(OverlapTest, TmaMoversGemmReduceScatterLoopback4WholeWorld) {
  check_tma_movers(4, Op::kGemmReduceScatter, kWhole);
}
TEST_F(OverlapTest, TmaMoversGemmReduceScatterLoopback8WholeWorld) {
  check_tma_movers(8, Op::kGemmReduceScatter, kWhole);
}
TEST_F(OverlapTest, CopyEngineGemmAllReduceWorld1) { check_copy_engine(0, Op::kGemmAllReduce, kRank0); }
TEST_F(OverlapTest, CopyEngineGemmReduceScatterWorld1) { check_copy_engine(0, Op::kGemmReduceScatter, kRank0); }
TEST_F(OverlapTest, CopyEngineAllGatherGemmWorld1) { check_copy_engine(0, Op::kAllGatherGemm, kRank0); }
TEST_F(OverlapTest, CopyEngineGemmAllReduceLoopback2Rank0) { check_copy_engine(2, Op::kGemmAllReduce, kRank0); }
TEST_F(OverlapTest, CopyEngineGemmReduceScatterLoopback4Rank0) { check_copy_engine(4, Op::kGemmReduceScatter, kRank0); }
TEST_F(OverlapTest, CopyEngineAllGatherGemmLoopback8Rank0) { check_copy_engine(8, Op::kAllGatherGemm, kRank0); }
TEST_F(OverlapTest, CopyEngineGemmAllReduceLoopback2WholeWorld) { check_copy_engine(2, Op::kGemmAllReduce, kWhole); }
TEST_F(OverlapTest, CopyEngineGemmAllReduceLoopback4WholeWorld) { check_copy_engine(4, Op::kGemmAllReduce, kWhole); }
TEST_F(OverlapTest, CopyEngineGemmAllReduceLoopback8WholeWorld) { check_copy_engine(8, Op::kGemmAllReduce, kWhole); }
TEST_F(OverlapTest, CopyEngineGemmReduceScatterLoopback2WholeWorld) {
  check_copy_engine(2, Op::kGemmReduceScatter, kWhole);
}
TEST_F(OverlapTest, CopyEngineGemmReduceScatterLoopback4WholeWorld) {
  check_copy_engine(4, Op::kGemmReduceScatter, kWhole);
}
TEST_F(OverlapTest, CopyEngineGemmReduceScatterLoopback8WholeWorld) {
  check_copy_engine(8, Op::kGemmReduceScatter, kWhole);
}
TEST_F(OverlapTest, CopyEngineAllGatherGemmLoopback2WholeWorld) { check_copy_engine(2, Op::kAllGatherGemm, kWhole); }
TEST_F(OverlapTest, CopyEngineAllGatherGemmLoopback4WholeWorld) { check_copy_engine(4, Op::kAllGatherGemm, kWhole); }
TEST_F(OverlapTest, CopyEngineAllGatherGemmLoopback8WholeWorld) { check_copy_engine(8, Op::kAllGatherGemm, kWhole); }

TEST_F(OverlapTest, NcclSymmetricGemmAllReduceWorld1) { check_nccl_symmetric(0, Op::kGemmAllReduce); }
TEST_F(OverlapTest, NcclSymmetricGemmReduceScatterWorld1) { check_nccl_symmetric(0, Op::kGemmReduceScatter); }
TEST_F(OverlapTest, NcclSymmetricAllGatherGemmWorld1) { check_nccl_symmetric(0, Op::kAllGatherGemm); }
TEST_F(OverlapTest, NcclSymmetricGemmAllReduceLoopbackWorld1) { check_nccl_symmetric(1, Op::kGemmAllReduce); }
TEST_F(OverlapTest, NcclSymmetricAllGatherGemmLoopbackWorld1) { check_nccl_symmetric(1, Op::kAllGatherGemm); }

// nccl-symmetric refuses what NCCL's symmetric kernels do not run, naming why: a loopback world of several ranks (no
// NCCL), a GEMM+RS cut into chunks (one ncclReduce per owner each), mode tma.
TEST_F(OverlapTest, NcclSymmetricRefusalsNameWhy) {
  ContextOptions options;
  options.world = World::loopback(2);
  Context loopback(options);
  Context one;
  DeviceMatrix a(1024, 256, 1), b(768, 256, 2), c(512, 768, 0), c1(1024, 768, 0);
  const Problem p2 = loopback.problem_for(Op::kGemmReduceScatter, a.ref(), b.ref(), c.ref());
  const Problem p1 = one.problem_for(Op::kGemmReduceScatter, a.ref(), b.ref(), c1.ref());
  Plan seq = default_plan(Mode::kSequential, p2, loopback.hardware(), 16);
  seq.comm_algo = CommAlgo::kNcclSymmetric;
  EXPECT_NE(loopback.can_run(p2, seq).find("loopback world of 2"), std::string::npos) << loopback.can_run(p2, seq);
  EXPECT_EQ(one.can_run(p1, seq), "");
  Plan chunks = default_plan(Mode::kDecomposed, p1, one.hardware(), 16);
  chunks.comm_algo = CommAlgo::kNcclSymmetric;
  chunks.chunks = 4;
  const std::string why = one.can_run(p1, chunks);
  EXPECT_NE(why.find("mode decomposed"), std::string::npos) << why;
  EXPECT_NE(why.find("ncclReduce"), std::string::npos) << why;
  Plan tma = default_plan(Mode::kTma, p1, one.hardware(), 16);
  tma.comm_algo = CommAlgo::kNcclSymmetric;
  EXPECT_NE(one.can_run(p1, tma).find("mode tma"), std::string::npos) << one.can_run(p1, tma);
  test::Stream stream;
  expect_error_naming_all([&] { one.gemm_reduce_scatter(a.ref(), b.ref(), c1.ref(), chunks, stream); },
                          {"nccl-symmetric", "decomposed"});
}

// ce refuses what it cannot run, naming why: a paced loopback (its copies run on SMs there), tile-major output.
TEST_F(OverlapTest, CopyEngineRefusalsNameWhy) {
  ContextOptions options;
  options.world = World::loopback(2);
  options.link_profile = builtin_link_profile("nvlink4-node8");
  Context paced(options);
  DeviceMatrix a(1024, 256, 1), b(768, 256, 2), c(512, 768, 0);
  const Problem p = paced.problem_for(Op::kGemmReduceScatter, a.ref(), b.ref(), c.ref());
  Plan ce = default_plan(Mode::kTileSignal, p, paced.hardware(), 8);
  ce.comm_algo = CommAlgo::kCopyEngine;
  EXPECT_NE(paced.can_run(p, ce).find("paced loopback"), std::string::npos) << paced.can_run(p, ce);
  ce.output = OutputLayout::kTileMajor;
  EXPECT_NE(paced.can_run(p, ce).find("tile-major"), std::string::npos) << paced.can_run(p, ce);
}

TEST_F(OverlapTest, TmaMoversGlobalRangesGemmAllReduceLoopback8) { check_tma_movers_global_ranges(Op::kGemmAllReduce); }
TEST_F(OverlapTest, TmaMoversGlobalRangesGemmReduceScatterLoopback8) {
  check_tma_movers_global_ranges(Op::kGemmReduceScatter);
}

// The collective alone of `plan` (testing::Part::kComm): one warm-up, then the mean of 3, in microseconds.
#define EXPECT_CUDA(call) EXPECT_EQ(cudaSuccess, (call)) << #call
double comm_alone_us(Context& ctx, Op op, DeviceMatrix& a, DeviceMatrix& b, DeviceMatrix& c, const Plan& plan,
                     cudaStream_t stream) {
  cudaEvent_t t0, t1;
  EXPECT_CUDA(cudaEventCreate(&t0));
  EXPECT_CUDA(cudaEventCreate(&t1));
  testing::run_part(ctx, testing::Part::kComm, op, a.ref(), b.ref(), c.ref(), plan, stream);
  EXPECT_CUDA(cudaEventRecord(t0, stream));
  for (int i = 0; i < 3; ++i) testing::run_part(ctx, testing::Part::kComm, op, a.ref(), b.ref(), c.ref(), plan, stream);
  EXPECT_CUDA(cudaEventRecord(t1, stream));
  ctx.synchronize(stream);
  float ms = 0;
  EXPECT_CUDA(cudaEventElapsedTime(&ms, t0, t1));
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  return ms * 1e3 / 3;
}

// See the file comment. W = 4, 4096 x 4096 x 256: a 32 MiB buffer, so RS carries 3/4 x 32 MiB over the link (~500 us
// at 50 GB/s) and AR twice that; AG 4096 x 4096 x 2048: 3/4 x 16 MiB of A.
void check_paced(Op op) {
  LinkProfile slow = builtin_link_profile("h200x2");
  slow.name = "slow-test-link";
  slow.source = "test: 50 GB/s, every transport's per-CTA rate above its share";
  slow.link_GBps = 50;
  slow.nccl_per_cta_GBps = slow.tma_push_per_cta_GBps = slow.tma_pull_per_cta_GBps = slow.simt_per_cta_GBps = 1000;
  slow.nccl_ctas = 16;
  slow.latency_us = 20;
  // Every transport at the link's rate (their measured busbw: PacedLoopbackCallsRunAtTheMeasuredBusbw).
  slow.nccl_busbw.reset();
  slow.tma_push_busbw.reset();
  slow.tma_pull_busbw.reset();
  ContextOptions options;
  options.world = World::loopback(4);
  options.link_profile = slow;
  Context ctx(options);
  ASSERT_TRUE(ctx.link_profile().has_value());
  ASSERT_TRUE(ctx.planning_hardware().emulation.paced && ctx.planning_hardware().link.has_value());
  const bool ag = op == Op::kAllGatherGemm;
  if (ag) testing::set_fault(ctx, testing::Fault::kPoisonGather);
  const int w = ctx.world_size();
  const int64_t m = 4096, n = 4096, k = ag ? 2048 : 256;
  DeviceMatrix a(ag ? m / w : m, k, 31), b(n, k, 32);
  DeviceMatrix c(op == Op::kGemmReduceScatter ? m / w : m, n, 0);
  const Problem p = ctx.problem_for(op, a.ref(), b.ref(), c.ref());
  const Hardware& hw = ctx.planning_hardware();
  test::Stream stream;
  const References ref = make_references(ctx, p, op, a, b);
  const Collective coll = collective_of(op);
  const double link_bytes = (coll == Collective::kAllReduce ? 2.0 : 1.0) * (w - 1) / w * double(p.comm_bytes());

  std::vector<Plan> plans;
  for (CommAlgo algo : {CommAlgo::kNcclRing, CommAlgo::kTmaPush, CommAlgo::kTmaPull}) {
    Plan seq = default_plan(Mode::kSequential, p, hw, 0);
    EXPECT_EQ(seq.comm_ctas, 16) << "the paced baseline runs on the profile's NCCL CTA count";
    seq.comm_algo = algo;
    plans.push_back(seq);
  }
  plans.push_back(default_plan(Mode::kTma, p, hw, 16));
  ASSERT_EQ(plans.back().tile_groups.size(), 32u);
  Plan ts = default_plan(Mode::kTileSignal, p, hw, 16);
  ts.gemm_sms = hw.spec.sm_count - 16;
  ts.tile_groups = band_groups(ts.tiles_m(p), ts.tiles_n(p), 4);
  plans.push_back(ts);

  for (const Plan& plan : plans) {
    SCOPED_TRACE(fmt::format("{} paced: plan {}", p.name(), plan.summary()));
    ASSERT_EQ(ctx.can_run(p, plan), "");
    c.poison(stream);
    run_op(ctx, op, a.ref(), b.ref(), c.ref(), plan, stream);
    ctx.synchronize(stream);
    EXPECT_LT(rel_error(c.read(), ref.rank0), kTolerance) << "vs float64";
    if (plan.mode != Mode::kSequential && (plan.mode != Mode::kTma || ag)) continue;
    const double us = comm_alone_us(ctx, op, a, b, c, plan, stream);
    // A TMA mover's call ends when its busiest CTA does (tma_mover_link_load); the tma mode's groups are alike (128
    // rows each; in GEMM+RS only rank 0's first 8 carry bytes).
    const int64_t rows = plan.mode == Mode::kTma ? 128 : m;
    const double load =
        is_tma_mover(plan.comm_algo) ? tma_mover_link_load(p, 0, rows, plan.comm_algo, plan.comm_ctas) : 1.0;
    const double expected =
        load * link_bytes / (slow.link_GBps * 1e3) + link_steps(coll, plan.comm_algo, w) * slow.latency_us;
    EXPECT_GE(us, 0.8 * expected) << us << " us, expected " << expected << " us";
    EXPECT_LE(us, 1.5 * expected) << us << " us, expected " << expected << " us";
  }
}

// A link profile's measured busbw (LinkProfile::nccl_busbw, tma_push_busbw) paces the stand-in for NCCL and the TMA
// push mover to the table's rate for the call's size and CTAs. W = 4, GEMM+AR 4096 x 4096 x 256 (a 32 MiB buffer:
// 2 x 3/4 x 32 MiB on the link); each table's AllReduce row 20 GB/s at 1 MiB and 40 at 1024, so 30 at 32 MiB
// (linear in log2 size), the same at every CTA count. NCCL's call waits no step latency on top (latency_us 500, which
// its 6 ring steps would add, 3000 us, were it kept, and the per-CTA rule alone would take 174 us: 16 x 18.1 GB/s);
// the TMA mover keeps its steps' latency (its groups arrive a latency after they are sent).
TEST_F(OverlapTest, PacedLoopbackCallsRunAtTheMeasuredBusbw) {
  LinkProfile table = builtin_link_profile("h200x2");
  table.name = "measured-test-link";
  table.source = "test: NCCL's and TMA push's busbw 20-40 GB/s by size";
  table.latency_us = 500;
  table.nccl_ctas = 16;
  const BusbwTable grid{{1, 1024}, {1, 64}, {{20, 40}, {20, 40}}, {{20, 40}, {20, 40}}, {{20, 40}, {20, 40}}};
  table.nccl_busbw = grid;
  table.tma_push_busbw = grid;
  table.tma_pull_busbw.reset();
  ContextOptions options;
  options.world = World::loopback(4);
  options.link_profile = table;
  Context ctx(options);
  const Op op = Op::kGemmAllReduce;
  DeviceMatrix a(4096, 256, 41), b(4096, 256, 42), c(4096, 4096, 0);
  const Problem p = ctx.problem_for(op, a.ref(), b.ref(), c.ref());
  const Plan seq = default_plan(Mode::kSequential, p, ctx.planning_hardware(), 0);
  ASSERT_EQ(seq.comm_ctas, 16);
  Plan push = seq;
  push.comm_algo = CommAlgo::kTmaPush;
  test::Stream stream;
  const References ref = make_references(ctx, p, op, a, b);
  const double link_bytes = 2 * 0.75 * double(p.comm_bytes());
  for (const Plan& plan : {seq, push}) {
    SCOPED_TRACE(plan.summary());
    c.poison(stream);
    run_op(ctx, op, a.ref(), b.ref(), c.ref(), plan, stream);
    ctx.synchronize(stream);
    EXPECT_LT(rel_error(c.read(), ref.rank0), kTolerance) << "vs float64";
    const double us = comm_alone_us(ctx, op, a, b, c, plan, stream);
    const bool nccl = plan.comm_algo == CommAlgo::kNcclRing;
    // NCCL: 1678 us; TMA push: its busiest CTA's bytes (tma_mover_link_load) at that rate, plus its steps' latency.
    const double load = nccl ? 1.0 : tma_mover_link_load(p, 0, p.m, plan.comm_algo, plan.comm_ctas);
    const double expected = load * link_bytes / 30e3 +
                            (nccl ? 0.0 : link_steps(Collective::kAllReduce, plan.comm_algo, 4) * table.latency_us);
    EXPECT_GE(us, 0.8 * expected) << us << " us, expected " << expected << " us";
    EXPECT_LE(us, 1.25 * expected) << us << " us, expected " << expected << " us";
  }
}

TEST_F(OverlapTest, PacedLoopbackGemmReduceScatter) { check_paced(Op::kGemmReduceScatter); }
TEST_F(OverlapTest, PacedLoopbackGemmAllReduce) { check_paced(Op::kGemmAllReduce); }
TEST_F(OverlapTest, PacedLoopbackAllGatherGemm) { check_paced(Op::kAllGatherGemm); }

TEST_F(OverlapTest, LinkProfileOfARealWorldPricesItsPlans) {
  ContextOptions options;
  options.link_profile = builtin_link_profile("h200x2");
  {
    Context ctx(options);  // a real world of one: planned over the measured link, nothing paced
    EXPECT_NE(ctx.planning_hardware().name.find("over h200x2"), std::string::npos) << ctx.planning_hardware().name;
    EXPECT_FALSE(ctx.planning_hardware().emulation.paced);
  }
  options.world = World::loopback(2);
  options.loopback_share = LoopbackShare::kWholeWorld;
  test::expect_error_naming([&] { Context ctx(options); }, "rank 0");
}

TEST_F(OverlapTest, SwizzledGroupsGemmAllReduceLoopback2) { check_swizzled_groups(2, Op::kGemmAllReduce, kRank0); }
TEST_F(OverlapTest, SwizzledGroupsGemmReduceScatterLoopback4WholeWorld) {
  check_swizzled_groups(4, Op::kGemmReduceScatter, kWhole);
}
TEST_F(OverlapTest, SwizzledGroupsAllGatherGemmLoopback2) { check_swizzled_groups(2, Op::kAllGatherGemm, kRank0); }
TEST_F(OverlapTest, SwizzledGroupsGemmReduceScatterWorld1) { check_swizzled_groups(0, Op::kGemmReduceScatter, kRank0); }

// Context::can_run refuses a group that ends inside a swizzle band, whatever the mode's algorithm (Plan::validate
// checks it only for NCCL; tests/model/test_plan.cpp).
TEST_F(OverlapTest, GroupInsideASwizzleBandIsRefused) {
  ContextOptions options;
  options.world = World::loopback(2);
  Context ctx(options);
  DeviceMatrix a(2048, 256, 1), b(776, 256, 2), c(2048, 776, 0);
  const Problem p = ctx.problem_for(Op::kGemmAllReduce, a.ref(), b.ref(), c.ref());
  for (Mode mode : {Mode::kGreenContext, Mode::kTma}) {
    Plan mid = default_plan(mode, p, ctx.hardware(), 16);
    mid.tile_order = TileOrder::kSwizzle;
    mid.tile_groups = band_groups(mid.tiles_m(p), mid.tiles_n(p), 4);  // groups of 4 tile rows
    EXPECT_NE(ctx.can_run(p, mid).find("inside a swizzle band"), std::string::npos) << ctx.can_run(p, mid);
  }
}

// Runs fn on a Context per rank of a threads World over every visible GPU (at most 8), each on its own host thread.
void for_every_gpu(const WorldOptions& world_options, const std::function<void(Context&)>& fn,
                   testing::Fault fault = testing::Fault::kNone) {
  std::vector<World> worlds = World::threads(test::every_gpu(8), world_options);
  run_per_rank(worlds, [&](World& world) {
    ContextOptions options;
    options.world = world;
    Context ctx(options);
    testing::set_fault(ctx, fault);
    fn(ctx);
  });
}

// A real World (threads backend: one Context per rank, each on its own host thread) over every visible GPU (at most
// 8): every mode equals the sequential result on every rank (tma: tma-push over the peer-mapped buffers; tma-pull is
// refused by can_run in a world of more than one rank), for GEMM+AR, GEMM+RS and AG+GEMM (whose tile-signal and
// green-context GEMMs wait for NCCL's per-group gather; the gathered A is poisoned before each call, so a GEMM that
// reads rows before their gather fails). On a one-GPU machine this is a world of 1, which still runs
// the ContextOptions::world path and NCCL. The World has a communicator bounded to 16 CTAs, the plans' comm_ctas, so
// the NCCL modes run NCCL on it (the sequential baseline, comm_ctas 16 too, likewise).
TEST_F(OverlapTest, RealWorldEveryModeEqualsSequential) {
  WorldOptions world_options;
  world_options.nccl_cta_bounds = {0, 16};
  for_every_gpu(world_options, [&](Context& ctx) {
    const int w = ctx.world_size();
    const int64_t m = 1024, n = 768, k = 256;
    DeviceMatrix a_all(m, k, 100 + uint64_t(ctx.rank())), b(n, k, 200 + uint64_t(ctx.rank()));
    DeviceMatrix a_rows(m / w, k, 300 + uint64_t(ctx.rank()));  // AG+GEMM: this rank's rows of A
    for (Op op : {Op::kGemmAllReduce, Op::kGemmReduceScatter, Op::kAllGatherGemm}) {
      const int64_t rows = op == Op::kGemmReduceScatter ? m / w : m;
      DeviceMatrix c(rows, n, 0), c_seq(rows, n, 0);
      const DeviceMatrix& a = op == Op::kAllGatherGemm ? a_rows : a_all;
      test::Stream stream;
      const Problem p = ctx.problem_for(op, a.ref(), b.ref(), c.ref());
      run_op(ctx, op, a.ref(), b.ref(), c_seq.ref(), default_plan(Mode::kSequential, p, ctx.hardware(), 16), stream);
      ctx.synchronize(stream);
      const auto seq = c_seq.read();
      std::vector<Plan> plans = plans_for(ctx, p);
      for (const Plan& plan : nccl_symmetric_plans(p, ctx.hardware())) {
        EXPECT_EQ(ctx.can_run(p, plan), "") << plan.summary();  // NCCL's symmetric kernels run in every real world
        plans.push_back(plan);
      }
      for (const Plan& plan : plans) {
        if (!ctx.can_run(p, plan).empty()) continue;  // tma-pull in a real world of more than one rank
        SCOPED_TRACE(fmt::format("rank {} of {}: {} plan: {}", ctx.rank(), w, p.name(), plan.summary()));
        c.poison(stream);
        run_op(ctx, op, a.ref(), b.ref(), c.ref(), plan, stream);
        ctx.synchronize(stream);
        EXPECT_LT(rel_error(c.read(), seq), kTolerance);
      }
    }
  }, testing::Fault::kPoisonGather);  // AG+GEMM: the gathered A is NaN before each call (a read before its gather shows)
}

// Mode tma, comm_algo ce and comm_algo nccl-symmetric (GEMM+AR: tile-signal in 4 groups; GEMM+RS: sequential) in a
// real World over every visible GPU, four calls back to back with no host sync between them and two different B inputs
// (alternating), 4 tile groups: every call's result equals its sequential result on every rank. Catches a call whose
// collective, counter reset, flags or result copy races the previous call's on a peer. Then (more than one rank) two
// calls whose C is Context::symmetric_output (poisoned before each, but the executor zeroes it again: the comparison
// with the reference on random data is what catches a range left unwritten).
TEST_F(OverlapTest, RealWorldTmaBackToBackCalls) {
  for_every_gpu({}, [&](Context& ctx) {
    const int w = ctx.world_size();
    const int64_t m = 2048, n = 1024, k = 512;
    const uint64_t r = uint64_t(ctx.rank());
    DeviceMatrix a(m, k, 300 + r), b0(n, k, 400 + r), b1(n, k, 500 + r);
    test::Stream stream;
    for (Op op : {Op::kGemmAllReduce, Op::kGemmReduceScatter}) {
      const int64_t rows = op == Op::kGemmReduceScatter ? m / w : m;
      std::vector<std::unique_ptr<DeviceMatrix>> out, seq;
      for (int i = 0; i < 4; ++i) {
        out.push_back(std::make_unique<DeviceMatrix>(rows, n, 600 + i));
        seq.push_back(std::make_unique<DeviceMatrix>(rows, n, 700 + i));
      }
      const Problem p = ctx.problem_for(op, a.ref(), b0.ref(), out[0]->ref());
      const Plan seq_plan = default_plan(Mode::kSequential, p, ctx.hardware(), 16);
      Plan tma = default_plan(Mode::kTma, p, ctx.hardware(), 16);
      tma.tile_groups = band_groups(tma.tiles_m(p), tma.tiles_n(p), 4);
      Plan ce = default_plan(Mode::kTileSignal, p, ctx.hardware(), 16);  // the copy engine's flags and barrier
      ce.comm_algo = CommAlgo::kCopyEngine;
      ce.tile_groups = tma.tile_groups;
      // NCCL's symmetric kernels on their windows, each result copied into C.
      Plan nccl_sym = op == Op::kGemmAllReduce ? ce : seq_plan;
      nccl_sym.comm_algo = CommAlgo::kNcclSymmetric;
      if (op == Op::kGemmAllReduce) nccl_sym.gemm_sms = ctx.hardware().spec.sm_count - 16;
      for (int i = 0; i < 4; ++i)
        run_op(ctx, op, a.ref(), (i % 2 ? b1 : b0).ref(), seq[size_t(i)]->ref(), seq_plan, stream);
      ctx.synchronize(stream);
      for (const Plan& plan : {ce, tma, nccl_sym}) {
        ASSERT_EQ(ctx.can_run(p, plan), "");
        for (int i = 0; i < 4; ++i) out[size_t(i)]->poison(stream);
        for (int i = 0; i < 4; ++i)
          run_op(ctx, op, a.ref(), (i % 2 ? b1 : b0).ref(), out[size_t(i)]->ref(), plan, stream);
        ctx.synchronize(stream);
        for (int i = 0; i < 4; ++i) {
          SCOPED_TRACE(fmt::format("rank {} of {}: {} call {}, {}", ctx.rank(), w, p.name(), i, plan.summary()));
          EXPECT_LT(rel_error(out[size_t(i)]->read(), seq[size_t(i)]->read()), kTolerance);
        }
      }
      if (w == 1) continue;  // no symmetric output in a world of 1
      // C = the context's symmetric output (no copy into C): two calls, B alternating, each checked.
      TensorRef sym = out[0]->ref();
      sym.ptr = ctx.symmetric_output(p);
      for (int i = 0; i < 2; ++i) {
        ASSERT_EQ(cudaSuccess, cudaMemsetAsync(sym.ptr, 0xFF, size_t(rows * n * 2), stream));
        run_op(ctx, op, a.ref(), (i % 2 ? b1 : b0).ref(), sym, tma, stream);
        ctx.synchronize(stream);
        SCOPED_TRACE(fmt::format("rank {} of {}: {} symmetric output, call {}", ctx.rank(), w, p.name(), i));
        EXPECT_LT(rel_error(read_device(sym.ptr, rows * n), seq[size_t(i)]->read()), kTolerance);
      }
    }
  });
}

TEST_F(OverlapTest, BadInputsNameTheValue) {
  ContextOptions options;
  options.world = World::loopback(4);
  Context ctx(options);
  DeviceMatrix a(1024, 256, 1), b(768, 256, 2), c(256, 768, 0), c_ar(1024, 768, 0);
  cudaStream_t stream = nullptr;
  // A symmetric output exists only in a real world of more than one rank.
  expect_error_naming_all([&] { ctx.symmetric_output(ctx.problem_for(Op::kGemmReduceScatter, a.ref(), b.ref(), c.ref())); },
               {"symmetric_output", "loopback"});
  // Misaligned pointer.
  TensorRef bad_a = a.ref();
  bad_a.ptr = static_cast<char*>(a.ptr) + 2;
  expect_error_naming_all([&] { ctx.gemm_reduce_scatter(bad_a, b.ref(), c.ref(), std::nullopt, stream); },
               {"A pointer", "16-byte aligned"});
  // M not divisible by the world (RS).
  DeviceMatrix a_odd(1002, 256, 3), c_odd(250, 768, 0);
  expect_error_naming_all([&] { ctx.gemm_reduce_scatter(a_odd.ref(), b.ref(), c_odd.ref(), std::nullopt, stream); },
               {"M = 1002", "world = 4"});
  // C rows not M / W.
  expect_error_naming_all([&] { ctx.gemm_reduce_scatter(a.ref(), b.ref(), c_ar.ref(), std::nullopt, stream); },
               {"C has 1024 rows"});
  // Unsupported dtype.
  TensorRef f32 = a.ref();
  f32.dtype = DType::kFP32;
  expect_error_naming_all([&] { ctx.gemm_all_reduce(f32, b.ref(), c_ar.ref(), std::nullopt, stream); }, {"dtype fp32"});
  // Mixed types (FP8's refusals: test_overlap_fp8.cu).
  TensorRef fp16_b = b.ref();
  fp16_b.dtype = DType::kFP16;
  expect_error_naming_all([&] { ctx.gemm_all_reduce(a.ref(), fp16_b, c_ar.ref(), std::nullopt, stream); },
                          {"B dtype fp16 differs from A's dtype bf16"});
  // Shapes that do not agree.
  expect_error_naming_all([&] { ctx.gemm_all_reduce(a.ref(), c.ref(), c_ar.ref(), std::nullopt, stream); }, {"K = 768"});
  // Plans: SM counts over the device, off the granularity.
  const Problem p = ctx.problem_for(Op::kGemmReduceScatter, a.ref(), b.ref(), c.ref());
  Plan too_many = default_plan(Mode::kTileSignal, p, ctx.hardware(), 16);
  too_many.gemm_sms = 1000;
  expect_error_naming_all([&] { ctx.gemm_reduce_scatter(a.ref(), b.ref(), c.ref(), too_many, stream); }, {"gemm_sms", "1000"});
  Plan off_grain = default_plan(Mode::kGreenContext, p, ctx.hardware(), 16);
  off_grain.comm_sms = 12;
  off_grain.comm_ctas = 12;
  expect_error_naming_all([&] { ctx.gemm_reduce_scatter(a.ref(), b.ref(), c.ref(), off_grain, stream); },
                          {"comm_sms", "12"});
  const Problem pag = ctx.problem_for(Op::kAllGatherGemm, TensorRef{a.ptr, 256, 256}, b.ref(), c_ar.ref());
  Plan tile_major_ag = default_plan(Mode::kTileSignal, pag, ctx.hardware(), 16);
  tile_major_ag.output = OutputLayout::kTileMajor;
  expect_error_naming_all(
      [&] {
        ctx.all_gather_gemm(TensorRef{a.ptr, 256, 256}, b.ref(), c_ar.ref(), tile_major_ag, stream);
      },
      {"tile-major", "allgather-gemm"});
  Plan no_sms_ag = default_plan(Mode::kTileSignal, pag, ctx.hardware(), 16);
  no_sms_ag.comm_ctas = ctx.hardware().spec.sm_count;
  expect_error_naming_all(
      [&] {
        ctx.all_gather_gemm(TensorRef{a.ptr, 256, 256}, b.ref(), c_ar.ref(), no_sms_ag, stream);
      },
      {"comm_ctas", std::to_string(ctx.hardware().spec.sm_count)});
  // Host pointer.
  std::vector<uint16_t> host(1024 * 256);
  TensorRef host_a{host.data(), 1024, 256};
  expect_error_naming_all([&] { ctx.gemm_all_reduce(host_a, b.ref(), c_ar.ref(), std::nullopt, stream); }, {"A pointer"});
}

// A GEMM that never signals, or fewer tiles than the comm side waits for: the comm side times out with an error.
// AG+GEMM (op): the last group's gather is never released (tma: the GEMM waits for one release more than the gather's
// CTAs make), so the GEMM's wait for it times out. Then the fault is
// cleared and the same plan runs again on the same Context: its result must equal the sequential mode's on the same
// inputs (computed before the fault), so a timeout leaves no stale counter, error word or half-written buffer behind.
void expect_timeout(testing::Fault fault, Mode mode, CommAlgo tma_algo = CommAlgo::kTmaPush,
                    LoopbackShare share = LoopbackShare::kRank0, Op op = Op::kGemmReduceScatter) {
  ContextOptions options;
  options.world = World::loopback(2);
  options.loopback_share = share;
  options.wait_timeout_ms = 300;
  Context ctx(options);
  const bool ag = op == Op::kAllGatherGemm;
  const int64_t c_rows = op == Op::kGemmReduceScatter ? 512 : 1024;  // RS: this rank's M / 2 rows; AR, AG: M
  DeviceMatrix a(ag ? 512 : 1024, 256, 1), b(768, 256, 2), c(c_rows, 768, 0), c_seq(c_rows, 768, 0);
  test::Stream stream;
  const Problem p = ctx.problem_for(op, a.ref(), b.ref(), c.ref());
  run_op(ctx, op, a.ref(), b.ref(), c_seq.ref(), default_plan(Mode::kSequential, p, ctx.hardware(), 16), stream);
  ctx.synchronize(stream);
  Plan plan = default_plan(mode, p, ctx.hardware(), 16);
  if (mode == Mode::kTileSignal) plan.gemm_sms = ctx.hardware().spec.sm_count - 16;
  if (mode == Mode::kTma || tma_algo == CommAlgo::kCopyEngine) plan.comm_algo = tma_algo;
  if (tma_algo == CommAlgo::kCopyEngine) plan.gemm_sms = ctx.hardware().spec.sm_count;
  testing::set_fault(ctx, fault);
  run_op(ctx, op, a.ref(), b.ref(), c.ref(), plan, stream);
  expect_error_naming_all([&] { ctx.synchronize(stream); }, {"timed out after 300 ms", "tile group"});
  // The context stays usable: the error was consumed, and the next call of the same plan is correct.
  EXPECT_NO_THROW(ctx.synchronize(stream));
  testing::set_fault(ctx, testing::Fault::kNone);
  c.poison(stream);
  run_op(ctx, op, a.ref(), b.ref(), c.ref(), plan, stream);
  EXPECT_NO_THROW(ctx.synchronize(stream));
  EXPECT_LT(rel_error(c.read(), c_seq.read()), kTolerance) << "the call after the fault";
}

TEST_F(OverlapTest, SkippedGemmTimesOutTileSignal) { expect_timeout(testing::Fault::kSkipGemm, Mode::kTileSignal); }
TEST_F(OverlapTest, SkippedGemmTimesOutGreenContext) { expect_timeout(testing::Fault::kSkipGemm, Mode::kGreenContext); }
TEST_F(OverlapTest, SkippedGemmTimesOutTma) { expect_timeout(testing::Fault::kSkipGemm, Mode::kTma); }
TEST_F(OverlapTest, MissingTileTimesOutTileSignal) { expect_timeout(testing::Fault::kCounterTooHigh, Mode::kTileSignal); }
TEST_F(OverlapTest, MissingTileTimesOutTma) { expect_timeout(testing::Fault::kCounterTooHigh, Mode::kTma); }
TEST_F(OverlapTest, SkippedGemmTimesOutTmaPull) { expect_timeout(testing::Fault::kSkipGemm, Mode::kTma, CommAlgo::kTmaPull); }
TEST_F(OverlapTest, MissingTileTimesOutTmaPull) {
  expect_timeout(testing::Fault::kCounterTooHigh, Mode::kTma, CommAlgo::kTmaPull);
}
TEST_F(OverlapTest, MissingGatherTimesOutTileSignal) {
  expect_timeout(testing::Fault::kCounterTooHigh, Mode::kTileSignal, CommAlgo::kTmaPush, kRank0, Op::kAllGatherGemm);
}
TEST_F(OverlapTest, MissingGatherTimesOutGreenContext) {
  expect_timeout(testing::Fault::kCounterTooHigh, Mode::kGreenContext, CommAlgo::kTmaPush, kRank0, Op::kAllGatherGemm);
}
TEST_F(OverlapTest, MissingGatherTimesOutTma) {
  expect_timeout(testing::Fault::kCounterTooHigh, Mode::kTma, CommAlgo::kTmaPush, kRank0, Op::kAllGatherGemm);
}
TEST_F(OverlapTest, MissingGatherTimesOutTmaPullWholeWorld) {
  expect_timeout(testing::Fault::kCounterTooHigh, Mode::kTma, CommAlgo::kTmaPull, LoopbackShare::kWholeWorld,
                 Op::kAllGatherGemm);
}
// ce: stream memory waits cannot time out; the host watchdog in synchronize() releases them and reports.
TEST_F(OverlapTest, SkippedGemmTimesOutCopyEngine) {
  expect_timeout(testing::Fault::kSkipGemm, Mode::kTileSignal, CommAlgo::kCopyEngine);
}
TEST_F(OverlapTest, SkippedGemmTimesOutCopyEngineWholeWorld) {
  expect_timeout(testing::Fault::kSkipGemm, Mode::kTileSignal, CommAlgo::kCopyEngine, LoopbackShare::kWholeWorld);
}
TEST_F(OverlapTest, MissingTileTimesOutCopyEngineAllReduce) {
  expect_timeout(testing::Fault::kCounterTooHigh, Mode::kTileSignal, CommAlgo::kCopyEngine, kRank0, Op::kGemmAllReduce);
}
TEST_F(OverlapTest, MissingGatherTimesOutCopyEngine) {
  expect_timeout(testing::Fault::kCounterTooHigh, Mode::kTileSignal, CommAlgo::kCopyEngine, kRank0, Op::kAllGatherGemm);
}
TEST_F(OverlapTest, SkippedGemmTimesOutTmaPushWholeWorld) {
  expect_timeout(testing::Fault::kSkipGemm, Mode::kTma, CommAlgo::kTmaPush, LoopbackShare::kWholeWorld);
}

// Decomposed AG+GEMM runs exactly the plan's `chunks`, also when a chunk spans several owners' blocks (2 and 4
// chunks in a world of 8) or splits one (16): the result equals the float64 reference on random data and the
// measured timeline has one GEMM and one gather span per chunk. (It used to run `world` chunks instead.)
TEST_F(OverlapTest, DecomposedAllGatherRunsThePlansChunks) {
  ContextOptions options;
  options.world = World::loopback(8);
  options.trace = true;
  Context ctx(options);
  const int64_t rows = 64, k = 256, n = 512, m = 8 * rows;
  DeviceMatrix a(rows, k, 31), b(n, k, 32), c(m, n, 0);
  test::Stream stream;
  const Problem p = ctx.problem_for(Op::kAllGatherGemm, a.ref(), b.ref(), c.ref());
  const References ref = make_references(ctx, p, Op::kAllGatherGemm, a, b);
  for (int chunks : {1, 2, 4, 8, 16}) {
    SCOPED_TRACE(fmt::format("chunks = {}", chunks));
    Plan plan = default_plan(Mode::kDecomposed, p, ctx.hardware(), 16);
    plan.chunks = chunks;
    ASSERT_EQ(ctx.can_run(p, plan), "");
    c.poison(stream);
    ctx.all_gather_gemm(a.ref(), b.ref(), c.ref(), plan, stream);
    ctx.synchronize(stream);
    EXPECT_LT(rel_error(c.read(), ref.rank0), kTolerance) << "vs float64";
    const Timeline t = ctx.last_timeline();
    EXPECT_EQ(intervals_on(t, "gemm"), chunks);
    EXPECT_EQ(intervals_on(t, "comm"), chunks);
  }
}

TEST_F(OverlapTest, MeasuredTimelineHasGemmAndCommLanes) {
  ContextOptions options;
  options.world = World::loopback(8);
  options.trace = true;
  Context ctx(options);
  DeviceMatrix a(2048, 256, 1), b(1024, 256, 2), c(2048, 1024, 0);
  test::Stream stream;
  const Problem p = ctx.problem_for(Op::kGemmAllReduce, a.ref(), b.ref(), c.ref());
  for (Mode mode : all_modes()) {
    SCOPED_TRACE(std::string(to_string(mode)));
    ctx.gemm_all_reduce(a.ref(), b.ref(), c.ref(), default_plan(mode, p, ctx.hardware(), 16), stream);
    ctx.synchronize(stream);
    const Timeline t = ctx.last_timeline();
    EXPECT_EQ(t.source, "measured");
    for (const Interval& i : t.intervals) {
      EXPECT_LE(i.start_ns, i.end_ns);
      EXPECT_GE(i.start_ns, 0);
    }
    EXPECT_GT(intervals_on(t, "gemm"), 0);
    EXPECT_GT(intervals_on(t, "comm"), 0);
    EXPECT_GT(t.makespan_ns(), 0);
    const std::string path =
        (std::filesystem::temp_directory_path() / fmt::format("ovl_overlap_{}.json", to_string(mode))).string();
    t.write_chrome_trace(path);
    EXPECT_TRUE(std::filesystem::exists(path));
  }
}

}  // namespace
}  // namespace ovl
