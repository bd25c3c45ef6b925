// simulate(): agreement with the closed-form model where both are exact, work conservation, every mode x op x
// world over a grid of shapes, determinism of the trace and its Chrome-trace form.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "expect_error.hpp"
#include "ovl/error.hpp"
#include "ovl/model/estimate.hpp"
#include "ovl/model/link_profile.hpp"
#include "ovl/sim/simulate.hpp"

namespace ovl::sim {
namespace {

const ResourceUsage& usage(const SimResult& r, ResourceKind kind) {
  for (const ResourceUsage& u : r.resources)
    if (u.kind == kind) return u;
  throw std::runtime_error("no resource of that kind");
}

// Where both are exact: one GEMM alone then one collective alone (sequential: no overlap, hence no contention),
// full waves and bandwidth-bound messages. The simulator and the model use the same Hardware fields, but they
// price latency terms, the HBM side of the GEMM and per-step handshakes in their own ways, so they agree to within
// 10% rather than exactly. Checked for the whole operator and for each part.
TEST(SimulateVsModel, SequentialAgreesWithinTenPercent) {
  const Hardware hw = builtin_hardware("h200");
  for (Op op : {Op::kGemmAllReduce, Op::kGemmReduceScatter, Op::kAllGatherGemm}) {
    for (int world : {2, 8}) {
      const Problem p = make_problem(op, 8192, 8192, 8192, world);
      const Plan plan = default_plan(Mode::kSequential, p, hw, 0);
      const SimResult r = simulate(p, plan, hw);
      const ModeEstimate e = estimate(p, plan, hw);
      SCOPED_TRACE(p.name());
      EXPECT_NEAR(r.total_us, e.total_us, 0.10 * e.total_us);
      const GemmEstimate g = estimate_gemm({p.m, p.n, p.k, p.dtype}, GemmImpl::kCublas, plan.gemm_sms, plan.tile, hw);
      const CommEstimate c =
          estimate_collective(collective_of(op), p.comm_bytes(), world, plan.comm_algo, plan.comm_ctas, hw, p.nodes());
      const double sim_gemm = op == Op::kAllGatherGemm ? r.total_us - r.comm_us : r.gemm_us;
      EXPECT_NEAR(sim_gemm, g.us, 0.10 * g.us);
      EXPECT_NEAR(r.comm_us, c.us, 0.10 * c.us);
    }
  }
}

// The same for NCCL's symmetric kernels (comm_algo nccl-symmetric on 16 CTAs) and, under CTA policy zero, the
// AllGather on the copy engines (no CTA).
TEST(SimulateVsModel, NcclSymmetricSequentialAgreesWithinTenPercent) {
  const Hardware hw = builtin_hardware("h200");
  for (Op op : {Op::kGemmAllReduce, Op::kGemmReduceScatter, Op::kAllGatherGemm}) {
    for (CtaPolicy policy : {CtaPolicy::kEfficiency, CtaPolicy::kZero}) {
      const Problem p = make_problem(op, 8192, 8192, 8192, 8);
      Plan plan = default_plan(Mode::kSequential, p, hw, 16);
      plan.comm_algo = CommAlgo::kNcclSymmetric;
      plan.cta_policy = policy;
      SCOPED_TRACE(p.name() + " " + plan.summary());
      const SimResult r = simulate(p, plan, hw);
      EXPECT_NEAR(r.total_us, estimate(p, plan, hw).total_us, 0.10 * r.total_us);
      const CommEstimate c = estimate_collective(collective_of(op), p.comm_bytes(), 8, plan.comm_algo,
                                                 collective_ctas(plan, collective_of(op)), hw);
      EXPECT_NEAR(r.comm_us, c.us, 0.10 * c.us);
    }
  }
}

TEST(SimulateVsModel, LoopbackRankZeroNcclCallsAgree) {
  // On the rank-0 loopback profile an NCCL-algorithm call is the SIMT kernel (loopback_rank0_nccl_bytes): a
  // sequential collective in the simulator costs what the model's estimate_collective says (one HBM step, a plain
  // launch), and the overlapped modes' operators agree within 10%, the tile-signal grid that starves its collective
  // (gemm_sms 132) included.
  Hardware hw = loopback_hardware(builtin_hardware("h200"), 8, LoopbackShare::kRank0);
  hw.fit.loopback_piece_us =
      0.5;  // and each call's pieces cost as much in both (loopback_rank0_calls, call_adjustments)
  for (Op op : {Op::kGemmAllReduce, Op::kGemmReduceScatter}) {
    const Problem p = make_problem(op, 8192, 8192, 2048, 8);
    const Plan seq = default_plan(Mode::kSequential, p, hw, 16);
    const CommEstimate c =
        estimate_collective(collective_of(op), p.comm_bytes(), 8, seq.comm_algo, seq.comm_ctas, hw, p.nodes());
    EXPECT_NEAR(simulate(p, seq, hw).comm_us, c.us, 1e-3 * c.us) << p.name();
    // On 132 CTAs HBM binds (the step's HBM bytes), not the CTAs.
    const Plan wide = default_plan(Mode::kSequential, p, hw, 132);
    const CommEstimate w =
        estimate_collective(collective_of(op), p.comm_bytes(), 8, wide.comm_algo, wide.comm_ctas, hw, p.nodes());
    EXPECT_NEAR(w.us,
                hw.fit.tma_launch_us +
                    loopback_rank0_nccl_bytes(collective_of(op), 8) * p.comm_bytes() / (hw.spec.hbm_GBps * 1e3),
                1e-6);
    EXPECT_NEAR(simulate(p, wide, hw).comm_us, w.us, 1e-3 * w.us) << p.name() << " on 132 CTAs";
    // Across nodes (2 of 4 GPUs) the simulator runs NCCL's hierarchical ring, as the model.
    Problem nodes = p;
    nodes.gpus_per_node = 4;
    const CommEstimate cn =
        estimate_collective(collective_of(op), nodes.comm_bytes(), 8, seq.comm_algo, seq.comm_ctas, hw, 2);
    EXPECT_NEAR(simulate(nodes, default_plan(Mode::kSequential, nodes, hw, 16), hw).comm_us, cn.us, 0.10 * cn.us);
    for (Mode mode : {Mode::kDecomposed, Mode::kTileSignal, Mode::kGreenContext}) {
      for (bool reserve : {false, true}) {
        Plan plan = default_plan(mode, p, hw, 16);
        if (reserve && mode != Mode::kTileSignal) continue;
        if (reserve) plan.gemm_sms = hw.spec.sm_count - plan.comm_ctas;
        SCOPED_TRACE(plan.summary());
        const double model = estimate(p, plan, hw).total_us;
        EXPECT_NEAR(simulate(p, plan, hw).total_us, model, 0.10 * model);
      }
    }
  }
  // A tile-major output reorders every group's rows before its call (a kernel launch and all the group's bytes),
  // whatever rank 0's share of the ReduceScatter: what it adds to the row-major plan agrees within 2%.
  {
    const Problem rs = make_problem(Op::kGemmReduceScatter, 8192, 8192, 2048, 8);
    Plan rm = default_plan(Mode::kTileSignal, rs, hw, 16);
    rm.gemm_sms = hw.spec.sm_count - rm.comm_ctas;
    Plan tm = rm;
    tm.output = OutputLayout::kTileMajor;
    const double d_model = estimate(rs, tm, hw).total_us - estimate(rs, rm, hw).total_us;
    const double d_sim = simulate(rs, tm, hw).total_us - simulate(rs, rm, hw).total_us;
    EXPECT_GT(d_sim, 0.0);
    EXPECT_NEAR(d_model, d_sim, 0.02 * d_sim) << "the tile-major reorder";
  }
  // The piece cost is in both predictors: 64 AllReduce calls of 8 pieces, 4 us more each, lengthen the operator.
  Hardware free = hw;
  free.fit.loopback_piece_us = 0;
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 2048, 8);
  Plan plan = default_plan(Mode::kTileSignal, p, hw, 16);
  plan.gemm_sms = hw.spec.sm_count - plan.comm_ctas;
  EXPECT_GT(estimate(p, plan, hw).total_us, estimate(p, plan, free).total_us + 100);
  EXPECT_GT(simulate(p, plan, hw).total_us, simulate(p, plan, free).total_us + 100);
}

// A paced loopback's TMA mover paces each CTA's own link bytes, so a call's busiest CTA, not an even share, sets its
// time, in the model and the simulator alike (tma_mover_link_load). GEMM+AR 8192 x 8192 in a world of 8 on the
// nvlink4-node8 profile, tma-push on 16 CTAs (23 GB/s each): 1.75 x its bytes cross the link, HBM and the CTAs' own
// moves are faster.
TEST(SimulateVsModel, PacedTmaCallsTakeTheirBusiestCta) {
  Hardware hw =
      loopback_hardware(builtin_hardware("h100"), 8, LoopbackShare::kRank0, builtin_link_profile("nvlink4-node8"));
  // The paced link rate binds everywhere below: the mover's own rates beside the GEMM as after it.
  hw.fit.beside_gemm_rate_factor = 1.0;
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 1024, 8);
  const double s = double(p.comm_bytes());
  // Sequential: one call over every row, 5130 units, runs of 320 or 321; the busiest paces 1.0725 x an even share.
  Plan seq = default_plan(Mode::kSequential, p, hw, 16);
  seq.comm_algo = CommAlgo::kTmaPush;
  seq.comm_ctas = 16;
  const double load = tma_mover_link_load(p, 0, p.m, CommAlgo::kTmaPush, 16);
  EXPECT_NEAR(load, 1.0725, 1e-4);
  const double call = hw.fit.tma_launch_us + 2 * 0.7 + 1.75 * s * load / (16 * 23e3);
  EXPECT_NEAR(estimate(p, seq, hw).comm_us, call, 1e-9 * call);
  EXPECT_NEAR(simulate(p, seq, hw).comm_us, call, 1e-3 * call);
  // Mode tma, one group per 128-row band: each of the 64 groups pays the mover's per-group work, and its busiest CTA
  // paces 9/7 of an even share of its 2 MiB x 1.75; the 2 steps' latency comes once, after the last group (not part
  // of comm_us, the groups' busy time; the total below).
  Plan tma = default_plan(Mode::kTma, p, hw, 16);
  tma.tile_order = TileOrder::kRowBand;
  ASSERT_EQ(tma.tile_groups.size(), 64u);
  const double group = hw.fit.tma_group_us + 1.75 * (s / 64) * (9.0 / 7) / (16 * 23e3);
  const ModeEstimate est = estimate(p, tma, hw);
  const SimResult sim = simulate(p, tma, hw);
  EXPECT_NEAR(est.comm_us, 64 * group, 1e-9 * 64 * group);
  EXPECT_NEAR(sim.comm_us, 64 * group, 1e-3 * 64 * group);
  // The collective outlasts the GEMM here, so 1 us more per link step lengthens the operator by the 2 steps once,
  // not once per group.
  ASSERT_GT(64 * group, est.gemm_us);
  Hardware later = hw;
  later.fit.link_latency_us += 1;
  EXPECT_NEAR(estimate(p, tma, later).total_us - est.total_us, 2.0, 1e-6);
  EXPECT_NEAR(simulate(p, tma, later).total_us - sim.total_us, 2.0, 0.05);
  // GEMM+RS: rank 0's play sums only its own rows, [0, 1024): the first 8 groups move 8 x their share each (factor 8,
  // 7/8 of it over the link; the busiest CTA 15/14 of an even share), the other 56 pay their work only.
  const Problem rs = make_problem(Op::kGemmReduceScatter, 8192, 8192, 1024, 8);
  const double fixed = hw.fit.tma_group_us;
  const double rs_comm = 64 * fixed + 8 * 0.875 * (8 * s / 64) * (15.0 / 14) / (16 * 23e3);
  EXPECT_NEAR(estimate(rs, tma, hw).comm_us, rs_comm, 1e-9 * rs_comm);
  EXPECT_NEAR(simulate(rs, tma, hw).comm_us, rs_comm, 1e-3 * rs_comm);
}

// A paced loopback's NCCL stand-in paces a GEMM+RS or AG+GEMM unit short of the whole buffer as the real world's
// ncclReduce / ncclBroadcast per owner loads the link: W / (W - 1) times its ReduceScatter or AllGather link bytes
// (CallAdjust::link_load), in the model and the simulator alike, at the per-CTA rule (the profile's nccl_busbw holds
// no Reduce or Broadcast: CallAdjust::call_bytes 0). World 2 on the h200x2 profile (345.8 GB/s), GEMM+RS 8192 x 8192
// bf16 in 2 decomposed chunks on 24 CTAs: chunk 0 holds rank 0's 4096 rows, whose 64 MiB of peer bytes count twice,
// so the call takes at least 2 x 64 MiB / 345.8 GB/s = 388 us; paced as a ReduceScatter the stand-in's own HBM rate
// would bind first, near 250 us. The whole buffer, a ReduceScatter, is priced by the table.
TEST(SimulateVsModel, PacedNcclUnitsOwnerByOwnerPaceTheRealLinkBytes) {
  const Hardware w2 =
      loopback_hardware(builtin_hardware("h100"), 2, LoopbackShare::kRank0, builtin_link_profile("h200x2"));
  const Problem rs = make_problem(Op::kGemmReduceScatter, 8192, 8192, 1024, 2);
  Plan dec = default_plan(Mode::kDecomposed, rs, w2, 24);
  dec.comm_ctas = 24;
  dec.chunks = 2;
  const std::vector<CallAdjust> adj = call_adjustments(rs, dec, w2);
  ASSERT_EQ(adj.size(), 2u);
  for (const CallAdjust& a : adj) EXPECT_DOUBLE_EQ(a.link_load, 2.0);
  for (const CallAdjust& a : adj) EXPECT_EQ(a.call_bytes, 0.0);
  const double link_us = 2 * double(4096 * 8192 * 2) / (345.8 * 1e3);
  const ModeEstimate est = estimate(rs, dec, w2);
  const SimResult sim = simulate(rs, dec, w2);
  EXPECT_GE(est.comm_us, link_us);
  EXPECT_LE(est.comm_us, 1.1 * link_us);
  EXPECT_NEAR(sim.comm_us, est.comm_us, 0.03 * est.comm_us);
  // The whole buffer is one ReduceScatter; AllReduce units are AllReduces; a TMA mover is paced by its own load.
  for (const CallAdjust& a : call_adjustments(rs, default_plan(Mode::kSequential, rs, w2, 24), w2)) {
    EXPECT_DOUBLE_EQ(a.link_load, 1.0);
    EXPECT_DOUBLE_EQ(a.call_bytes, double(rs.comm_bytes()));
  }
  const Problem ar = make_problem(Op::kGemmAllReduce, 8192, 8192, 1024, 2);
  for (const CallAdjust& a : call_adjustments(ar, dec, w2)) {
    EXPECT_DOUBLE_EQ(a.link_load, 1.0);
    EXPECT_DOUBLE_EQ(a.call_bytes, double(ar.comm_bytes()) / 2);
  }
  // An AllReduce chunk at the table's rate, the model and the simulator alike: 64 MiB on 24 CTAs, 272.4 GB/s.
  const ModeEstimate ar_est = estimate(ar, dec, w2);
  EXPECT_GE(ar_est.comm_us, 2 * double(4096 * 8192 * 2) / (272.4 * 1e3));
  EXPECT_NEAR(simulate(ar, dec, w2).comm_us, ar_est.comm_us, 0.03 * ar_est.comm_us);
  // World 8 (nvlink4-node8): tile-signal AG+GEMM and GEMM+RS groups at 8/7; unpaced, 1. The two predictors agree
  // within 2% (under 1%); a simulator that left out the groups' link_load would be 3-10% faster.
  const Hardware h100 = builtin_hardware("h100");
  const Hardware w8 = loopback_hardware(h100, 8, LoopbackShare::kRank0, builtin_link_profile("nvlink4-node8"));
  for (Op op : {Op::kGemmReduceScatter, Op::kAllGatherGemm}) {
    const Problem p = make_problem(op, 8192, 8192, 2048, 8);
    Plan ts = default_plan(Mode::kTileSignal, p, w8, 16);
    ts.tile_groups = band_groups(ts.tiles_m(p), ts.tiles_n(p), 4);
    for (const CallAdjust& a : call_adjustments(p, ts, w8)) EXPECT_DOUBLE_EQ(a.link_load, 8.0 / 7);
    for (const CallAdjust& a : call_adjustments(p, ts, loopback_hardware(h100, 8, LoopbackShare::kRank0)))
      EXPECT_DOUBLE_EQ(a.link_load, 1.0);
    SCOPED_TRACE(to_string(op));
    EXPECT_NEAR(simulate(p, ts, w8).total_us, estimate(p, ts, w8).total_us, 0.02 * estimate(p, ts, w8).total_us);
  }
}

// A paced NCCL stand-in launched on comm_ctas CTAs paces each at the rate for that count (LinkProfile::
// paced_cta_GBps), whatever fewer of them run beside the GEMM: on tile-signal's default grid only one does, and the
// model prices it at the launched count's per-CTA share of NCCL's measured busbw (21.1 GB/s at 1 CTA, 331.6 / 24 = 13.8
// at 24 for 1 GiB), as the stand-in and the simulator run it. World 2, h200x2, GEMM+AR 8192 x 8192 x 8192 on 24 comm
// CTAs, a group per 128-row band (2 MiB calls): the one CTA beside the long GEMM moves what it moves at the launched
// count's rate, and the model and the simulator agree within 1% (0.6%; priced at one CTA's own rate, the model was 2.4%
// fast).
TEST(SimulateVsModel, PacedNcclBesideTheGemmAtTheLaunchedCtasRate) {
  const Hardware w2 =
      loopback_hardware(builtin_hardware("h100"), 2, LoopbackShare::kRank0, builtin_link_profile("h200x2"));
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 2);
  Plan ts = default_plan(Mode::kTileSignal, p, w2, 24);
  ts.gemm_sms = w2.spec.sm_count;
  ASSERT_EQ(comm_ctas_beside_gemm(ts, p, w2), 1);
  ASSERT_EQ(collective_ctas(ts, Collective::kAllReduce), 24);
  const double est = estimate(p, ts, w2).total_us;
  EXPECT_NEAR(simulate(p, ts, w2).total_us, est, 0.01 * est);
}

// Tile-signal's default grid (gemm_sms = sm_count: 131 persistent CTAs) leaves its collective one SM beside the
// GEMM; in the GEMM's last wave the CTAs without a tile have exited and the collective gets their SMs, up to its
// comm_ctas, in the model (estimate_signaled's last-wave phase) as in the simulator (comm_ctas_now). On a GEMM of 3.3
// waves (2048 x 6912 x 8192: 432 tiles) the two agree within 3% on GEMM+AR and GEMM+RS, row-major and tile-major
// (whose reorder kernel takes those SMs too, CommQueue::set_reorder_rate); the model without the last wave was 15-20%
// slower.
TEST(SimulateVsModel, StarvedCollectiveGetsTheLastWave) {
  const Hardware hw = builtin_hardware("h200");
  for (Op op : {Op::kGemmAllReduce, Op::kGemmReduceScatter}) {
    for (int comm : {16, 32}) {
      for (OutputLayout out : {OutputLayout::kRowMajor, OutputLayout::kTileMajor}) {
        const Problem p = make_problem(op, 2048, 6912, 8192, 8);
        Plan plan = default_plan(Mode::kTileSignal, p, hw, comm);
        plan.gemm_sms = hw.spec.sm_count;
        plan.output = out;
        plan.tile_groups = band_groups(plan.tiles_m(p), plan.tiles_n(p), 4);
        ASSERT_EQ(comm_ctas_beside_gemm(plan, p, hw), 1);
        SCOPED_TRACE(plan.summary());
        const double model = estimate(p, plan, hw).total_us;
        const double sim = simulate(p, plan, hw).total_us;
        EXPECT_NEAR(model, sim, 0.03 * sim);
      }
    }
  }
  // A reorder that starts beside the grid on one SM gets the freed SMs as the last wave starts and all comm_ctas
  // after the GEMM, in the simulator too (its cap followed comm_ctas_now only at its start: 1253 us against the
  // model's 906).
  const Problem rs = make_problem(Op::kGemmReduceScatter, 8192, 8192, 2048, 8);
  Plan plan = default_plan(Mode::kTileSignal, rs, hw, 24);
  plan.gemm_sms = hw.spec.sm_count;
  plan.output = OutputLayout::kTileMajor;
  plan.tile_groups = band_groups(plan.tiles_m(rs), plan.tiles_n(rs), 4);
  const double model = estimate(rs, plan, hw).total_us;
  EXPECT_NEAR(simulate(rs, plan, hw).total_us, model, 0.03 * model);
}

TEST(SimulateVsModel, WorldOfOneAgrees) {
  // A world of one rank: NCCL's call is a device copy at HBM speed whatever the CTAs, our TMA kernels copy at
  // per_cta_copy_GBps per CTA (bytes read and written). The simulator and the model agree within 10%, with one CTA
  // (where the CTA cap decides for our kernels) and on tile-signal's default grid (one SM beside the GEMM).
  const Hardware hw = builtin_hardware("h200");
  for (Op op : {Op::kGemmAllReduce, Op::kGemmReduceScatter}) {
    const Problem p = make_problem(op, 4096, 8192, 4096, 1);
    for (int comm : {1, 16}) {
      for (CommAlgo algo : {CommAlgo::kNcclRing, CommAlgo::kTmaPush}) {
        Plan seq = default_plan(Mode::kSequential, p, hw, comm);
        seq.comm_algo = algo;
        SCOPED_TRACE(seq.summary());
        const double model = estimate(p, seq, hw).total_us;
        EXPECT_NEAR(simulate(p, seq, hw).total_us, model, 0.10 * model);
      }
    }
    for (Mode mode : {Mode::kTileSignal, Mode::kTma}) {
      const Plan plan = default_plan(mode, p, hw, 16);
      SCOPED_TRACE(plan.summary());
      const double model = estimate(p, plan, hw).total_us;
      EXPECT_NEAR(simulate(p, plan, hw).total_us, model, 0.10 * model);
    }
  }
}

TEST(SimulateVsModel, OneGroupTileSignalIsGemmThenCollective) {
  // One group: the collective starts when the last tile is stored, so nothing overlaps; the total is our GEMM
  // plus the collective (10%, as above).
  const Hardware hw = builtin_hardware("h200");
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 8);
  Plan plan = default_plan(Mode::kTileSignal, p, hw, 24);
  plan.tile_groups = {static_cast<int>(plan.tile_count(p))};
  const SimResult r = simulate(p, plan, hw);
  const GemmEstimate g =
      estimate_gemm({p.m, p.n, p.k, p.dtype}, GemmImpl::kOvl, plan.gemm_sms, plan.tile, plan.tile_order, hw);
  const CommEstimate c =
      estimate_collective(Collective::kAllReduce, p.comm_bytes(), 8, plan.comm_algo, plan.comm_ctas, hw);
  EXPECT_NEAR(r.gemm_us, g.us, 0.10 * g.us);
  EXPECT_NEAR(r.total_us, g.us + c.us, 0.10 * (g.us + c.us));
  EXPECT_NEAR(r.total_us, estimate(p, plan, hw).total_us, 0.10 * r.total_us);
  EXPECT_EQ(r.groups, 1);
}

TEST(SimulateVsModel, NcclGroupGapAddsPerGroupAsInTheModel) {
  // green-context, a group per row band (64), 8192x8192x1024 on 8 GPUs, GEMM+AR and AG+GEMM: the NCCL calls are the
  // critical path (AG+GEMM: a gather call per group that the GEMM's tiles wait for), so nccl_group_us = 5 adds
  // between half of and all of groups x 5 us, in the simulator as in the model (within 10% of each other); the tma
  // mode does not pay it. (The simulator once ran one gather for the whole AG+GEMM, with no per-group cost.)
  for (Op op : {Op::kGemmAllReduce, Op::kAllGatherGemm}) {
    const Hardware hw = builtin_hardware("h200");
    const Problem p = make_problem(op, 8192, 8192, 1024, 8);
    SCOPED_TRACE(p.name());
    const Plan gc = default_plan(Mode::kGreenContext, p, hw, 16);
    const double groups = double(gc.tile_groups.size());
    ASSERT_EQ(groups, 64);
    const SimResult sim = simulate(p, gc, hw);
    EXPECT_EQ(sim.groups, 64);
    const double base = sim.total_us, base_model = estimate(p, gc, hw).total_us;
    Hardware more_hw = hw;
    more_hw.fit.nccl_group_us = 5;
    const double more = simulate(p, gc, more_hw).total_us, more_model = estimate(p, gc, more_hw).total_us;
    EXPECT_GT(more - base, 0.5 * groups * 5);
    EXPECT_LE(more - base, groups * 5 + 1.0);
    EXPECT_GT(more_model - base_model, 0.5 * groups * 5);
    EXPECT_NEAR(more, more_model, 0.10 * more_model);
    const Plan tma = default_plan(Mode::kTma, p, hw, 16);  // no NCCL call, so no NCCL group overhead
    EXPECT_DOUBLE_EQ(simulate(p, tma, more_hw).total_us, simulate(p, tma, hw).total_us);
  }
}

TEST(SimulateVsModel, OperatorGemmFactorScalesTheGemmAsInTheModel) {
  // ModelParams::operator_gemm_factor 0.8: the simulator's GEMM compute (the SM pool's rate and the epilogues) takes
  // 0.8 of its time, as the model's does; the launch is not scaled. Sequential 8192^3 (compute-bound, so the HBM
  // side does not bind): sim GEMM(0.8) - launch = 0.8 x (sim GEMM(1) - launch), to the engine's nanosecond
  // rounding of each event (16 waves with their epilogues: within 20 ns; measured 6 ns). Every mode's total falls
  // with a factor below 1 and rises with one above.
  const Hardware base = builtin_hardware("h200");
  Hardware hw = base;
  hw.fit.operator_gemm_factor = 0.8;
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 8);
  const Plan seq = default_plan(Mode::kSequential, p, base, 0);
  const SimResult fast = simulate(p, seq, hw), slow = simulate(p, seq, base);
  EXPECT_NEAR(fast.gemm_us - base.fit.launch_us, 0.8 * (slow.gemm_us - base.fit.launch_us), 0.02);
  EXPECT_NEAR(fast.comm_us, slow.comm_us, 0.02);
  // The model's GEMM in the same regime, as SequentialAgreesWithinTenPercent compares them.
  const double model_gemm = estimate(p, seq, hw).gemm_alone_us;
  EXPECT_NEAR(fast.gemm_us, model_gemm, 0.10 * model_gemm);
  for (Mode mode : {Mode::kDecomposed, Mode::kTileSignal, Mode::kGreenContext, Mode::kTma}) {
    const Plan plan = default_plan(mode, p, base, 16);
    EXPECT_LT(simulate(p, plan, hw).total_us, simulate(p, plan, base).total_us) << to_string(mode);
    Hardware slower = base;
    slower.fit.operator_gemm_factor = 1.25;  // a GEMM slower inside the operator: the GEMM-bound operator slower too
    EXPECT_GT(simulate(p, plan, slower).total_us, simulate(p, plan, base).total_us) << to_string(mode);
  }
}

TEST(SimulateVsModel, DecomposedCallWaitsForTheNextChunksGrid) {
  // The model's closed form (test_estimate_modes' DecomposedClosedForm): 4 chunks of 2048 x 8192 x 8192 on cuBLAS's
  // 132 SMs, 16 CTAs per AllReduce call. A call launched at its chunk's end waits for the next chunk's last round
  // (396 of its 512 tiles) before it gets SMs, in the simulator as in the model: they agree within 3%, and both are
  // later than if the calls started at once (4 chunks + the last call).
  Hardware hw = builtin_hardware("h200");
  hw.fit.hbm_contention = 0;
  hw.fit.shared_sm_penalty = 0;
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 8);
  const Plan plan = default_plan(Mode::kDecomposed, p, hw, 16);
  const double model = estimate(p, plan, hw).total_us;
  const double sim = simulate(p, plan, hw).total_us;
  EXPECT_NEAR(sim, model, 0.03 * model);
  const double chunk = estimate_gemm({2048, 8192, 8192}, GemmImpl::kCublas, 132, TileShape{}, hw).us;
  const double call =
      estimate_collective(Collective::kAllReduce, p.comm_bytes() / 4, 8, CommAlgo::kNcclRing, 16, hw).us;
  EXPECT_GT(sim, 4 * chunk + call + 0.1 * chunk);
}

TEST(SimulateVsModel, CublasChunksOfFewTilesAsInTheModel) {
  // AllGather+GEMM 8192 x 3968 x 4096 in 16 decomposed chunks of 512 rows: 64 tiles each, fewer than half the 132
  // SMs, so cuBLAS splits K in 2 (test_estimate_gemm's CublasSplitsKOnFewerTilesThanSms): each chunk takes 0.63 of a
  // wave in the simulator as in the model (the pool had run its 64 tiles on every SM, 0.48 of a wave, 22% apart on
  // the H100's profile), clocked for the SMs it keeps busy (on the H200's profile, whose clock depends on them, the
  // simulator had clocked every chunk for the whole problem's min(grid, 1024) = 132 SMs: 2.9% apart). Without
  // contention, and with the gathers shorter than the chunks, the operator is the first gather then 16 chunks.
  for (const char* gpu : {"h100", "h200"}) {
    SCOPED_TRACE(gpu);
    Hardware hw = builtin_hardware(gpu);
    hw.fit.hbm_contention = 0;
    hw.fit.shared_sm_penalty = 0;
    const Problem p = make_problem(Op::kAllGatherGemm, 8192, 3968, 4096, 8);
    Plan plan = default_plan(Mode::kDecomposed, p, hw, 24);
    plan.chunks = 16;
    const GemmEstimate chunk = estimate_gemm({512, 3968, 4096}, GemmImpl::kCublas, plan.gemm_sms, plan.tile, hw);
    ASSERT_EQ(chunk.tiles, 64);
    const double model = estimate(p, plan, hw).total_us;
    const double sim = simulate(p, plan, hw).total_us;
    EXPECT_NEAR(sim, model, 0.02 * model);
    EXPECT_GT(sim, 16 * chunk.us);
  }
}

TEST(SimulateVsModel, EdgeTilesCostWholeTiles) {
  // 5000 x 8000 x 4096 in 128 x 256 tiles: 40 x 32 tiles, the last row of tiles 8 rows deep and the last column 64
  // wide. wgmma pads them: each costs a whole tile's matrix work, in the simulator as in the model (with the edges
  // clipped the simulator ran this GEMM 5% faster than the model).
  const Hardware hw = builtin_hardware("h200");
  const Problem p = make_problem(Op::kGemmAllReduce, 5000, 8000, 4096, 8);
  const Plan plan = default_plan(Mode::kSequential, p, hw, 16);
  const SimResult r = simulate(p, plan, hw);
  EXPECT_NEAR(r.required_flops, 40.0 * 32 * 2 * 128 * 256 * 4096, 1.0);
  EXPECT_NEAR(usage(r, ResourceKind::kSmPool).work_done, r.required_flops, 1e-9 * r.required_flops);
  EXPECT_NEAR(r.gemm_us, estimate(p, plan, hw).gemm_us, 0.02 * r.gemm_us);
}

TEST(Simulate, WorkIsConserved) {
  // FLOPs on the SM pool = 2 M N K; bytes sent on NVLink = the ring's per-rank volume:
  // AllReduce 2 (W-1)/W x bytes, ReduceScatter and AllGather (W-1)/W x bytes; NCCL's ReduceScatter or AllGather in
  // units that are not the whole buffer (a Reduce or Broadcast per owner, call_adjustments): bytes.
  const Hardware hw = builtin_hardware("h200");
  for (Op op : {Op::kGemmAllReduce, Op::kGemmReduceScatter, Op::kAllGatherGemm}) {
    for (Mode mode : all_modes()) {
      const Problem p = make_problem(op, 4096, 4096, 2048, 4);
      const Plan plan = default_plan(mode, p, hw, 16);
      const SimResult r = simulate(p, plan, hw);
      SCOPED_TRACE(plan.summary() + " " + p.name());
      EXPECT_NEAR(usage(r, ResourceKind::kSmPool).work_done, p.gemm_flops(), 1e-9 * p.gemm_flops());
      EXPECT_NEAR(r.required_flops, p.gemm_flops(), 1e-9 * p.gemm_flops());
      const double tx = usage(r, ResourceKind::kLinkTx).work_done;
      EXPECT_NEAR(tx, r.required_link_bytes, 1e-9 * r.required_link_bytes);
      const double bytes = static_cast<double>(p.comm_bytes());
      const bool per_owner =
          plan.comm_algo == CommAlgo::kNcclRing && op != Op::kGemmAllReduce && mode != Mode::kSequential;
      const double factor = op == Op::kGemmAllReduce ? 2.0 * 3 / 4 : per_owner ? 1.0 : 3.0 / 4;
      if (plan.comm_algo == CommAlgo::kNcclRing || mode == Mode::kTma) {
        EXPECT_NEAR(tx, factor * bytes, 1e-9 * bytes);
      }
      EXPECT_NEAR(usage(r, ResourceKind::kLinkRx).work_done, tx, 1e-9 * bytes);  // ring: what goes out comes in
    }
  }
}

TEST(Simulate, MultiNodeUsesTheNetworkLink) {
  // 16 GPUs on 2 nodes: the hierarchical AllReduce sends 2 (n-1)/n x bytes / g over the network per GPU
  // (g = 8 per node, n = 2 nodes): 2 x 1/2 x bytes / 8.
  const Hardware hw = builtin_hardware("h200");
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 16);
  const SimResult r = simulate(p, default_plan(Mode::kSequential, p, hw, 0), hw);
  const double bytes = static_cast<double>(p.comm_bytes());
  EXPECT_NEAR(usage(r, ResourceKind::kNet).work_done, bytes / 8, 1e-9 * bytes);
  EXPECT_NEAR(r.required_net_bytes, bytes / 8, 1e-9 * bytes);
  const SimResult one_node =
      simulate(make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 8), default_plan(Mode::kSequential, p, hw, 0), hw);
  EXPECT_GT(r.comm_us, one_node.comm_us);  // 50 GB/s per GPU of network is slower than NVLink
}

TEST(Simulate, EveryModeOpAndWorldOverAGrid) {
  const Hardware hw = builtin_hardware("h200");
  struct Shape {
    int64_t m, n, k;
  };
  const Shape shapes[] = {{8192, 8192, 8192}, {4096, 12288, 1536}, {1920, 1024, 4096}, {128, 256, 64}};
  int simulated = 0, rejected = 0;
  for (Op op : {Op::kGemmAllReduce, Op::kGemmReduceScatter, Op::kAllGatherGemm}) {
    for (int world : {1, 2, 4, 8, 16, 64}) {
      for (const Shape& s : shapes) {
        const Problem p = make_problem(op, s.m, s.n, s.k, world);
        try {
          p.validate();
        } catch (const Error&) {
          ++rejected;  // e.g. 128 rows do not split over 64 ranks for ReduceScatter
          continue;
        }
        for (Mode mode : all_modes()) {
          const Plan plan = default_plan(mode, p, hw, 16);
          try {
            plan.validate(p, hw);
          } catch (const Error&) {
            ++rejected;  // TMA collectives stay within one node
            continue;
          }
          SCOPED_TRACE(plan.summary() + " " + p.name());
          const SimResult r = simulate(p, plan, hw);
          ++simulated;
          EXPECT_TRUE(std::isfinite(r.total_us));
          EXPECT_GT(r.total_us, 0);
          EXPECT_GE(r.total_us + 1e-9, r.gemm_us);
          EXPECT_GE(r.total_us + 1e-9, r.comm_us);
          EXPECT_EQ(r.tiles, plan.tile_count(p));
          EXPECT_GE(r.waves, 1);
          // Every tile costs a whole tile's matrix work (wgmma pads edge tiles): 2MNK or more.
          EXPECT_NEAR(usage(r, ResourceKind::kSmPool).work_done, r.required_flops, 1e-9 * r.required_flops);
          EXPECT_GE(r.required_flops, p.gemm_flops() * (1 - 1e-12));
          // Overlap never makes the operator slower than the GEMM part plus the whole collective plus a
          // per-group overhead budget (launches, latencies, reorders).
          EXPECT_LE(r.total_us, 50.0 * (r.gemm_us + r.comm_us) + 1.0);
        }
      }
    }
  }
  EXPECT_GT(simulated, 200);
  RecordProperty("simulated", simulated);
  RecordProperty("rejected", rejected);
}

TEST(Simulate, OverlapHidesCommunication) {
  // A GEMM-bound problem: the tma mode (partitioned, 8 groups) must beat sequential, and its exposed
  // communication must be below the whole collective's time.
  const Hardware hw = builtin_hardware("h200");
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 8);
  const SimResult seq = simulate(p, default_plan(Mode::kSequential, p, hw, 0), hw);
  Plan tma = default_plan(Mode::kTma, p, hw, 16);
  tma.tile_groups = band_groups(tma.tiles_m(p), tma.tiles_n(p), 8);
  const SimResult r = simulate(p, tma, hw);
  EXPECT_LT(r.total_us, seq.total_us);
  EXPECT_LT(r.exposed_comm_us, seq.comm_us);
}

TEST(Simulate, SharedSmCommKernelSlowsTheGemm) {
  // Tile-signal on shared SMs: while an NCCL call runs its CTAs take SMs, so the GEMM part is longer than the
  // same GEMM with the collective after it (one group: nothing runs alongside).
  const Hardware hw = builtin_hardware("h200");
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 8);
  Plan many = default_plan(Mode::kTileSignal, p, hw, 32);
  Plan one = many;
  one.tile_groups = {static_cast<int>(one.tile_count(p))};
  EXPECT_GT(simulate(p, many, hw).gemm_us, simulate(p, one, hw).gemm_us);
}

TEST(Simulate, TraceIsDeterministicAndValidChromeJson) {
  const Hardware hw = builtin_hardware("h200");
  const Problem p = make_problem(Op::kGemmReduceScatter, 4096, 8192, 4096, 8);
  Plan plan = default_plan(Mode::kTileSignal, p, hw, 16);
  SimOptions opt;
  opt.trace_ranks = 2;
  const SimResult a = simulate(p, plan, hw, opt);
  const SimResult b = simulate(p, plan, hw, opt);
  const std::string ja = a.timeline.to_chrome_trace().dump();
  EXPECT_EQ(ja, b.timeline.to_chrome_trace().dump());
  EXPECT_EQ(a.total_us, b.total_us);

  const std::string path = ::testing::TempDir() + "ovl_sim_trace.json";
  a.timeline.write_chrome_trace(path);
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in);
  std::remove(path.c_str());
  ASSERT_TRUE(j.contains("traceEvents"));
  ASSERT_TRUE(j["traceEvents"].is_array());
  std::set<std::string> phases, names;
  std::set<int> pids;
  for (const auto& e : j["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph"));
    phases.insert(e["ph"].get<std::string>());
    if (e.contains("name")) names.insert(e["name"].get<std::string>());
    if (e.contains("pid")) pids.insert(e["pid"].get<int>());
    if (e["ph"] == "X") {
      EXPECT_GE(e["dur"].get<double>(), 0);
      EXPECT_GE(e["ts"].get<double>(), 0);
    }
  }
  EXPECT_TRUE(phases.count("X"));
  EXPECT_TRUE(phases.count("C"));
  EXPECT_TRUE(names.count("wave 0"));
  EXPECT_TRUE(names.count("reducescatter group 0"));
  EXPECT_TRUE(names.count("nvlink util"));
  EXPECT_TRUE(names.count("hbm util"));
  EXPECT_EQ(pids, (std::set<int>{0, 1}));

  std::set<std::string> lanes;
  for (const Interval& iv : a.timeline.intervals) lanes.insert(iv.lane);
  EXPECT_TRUE(lanes.count("gemm") && lanes.count("comm") && lanes.count("groups") && lanes.count("comm/steps"));
}

TEST(Simulate, BadInputsThrow) {
  const Hardware hw = builtin_hardware("h200");
  const Problem p = make_problem(Op::kGemmAllReduce, 4096, 4096, 4096, 8);
  Plan plan = default_plan(Mode::kTileSignal, p, hw, 16);
  plan.gemm_sms = 0;
  EXPECT_THROW(simulate(p, plan, hw), Error);
  plan = default_plan(Mode::kTileSignal, p, hw, 16);
  plan.tile_groups.back() += 1;  // no longer sums to the tile count
  EXPECT_THROW(simulate(p, plan, hw), Error);
  Problem bad = p;
  bad.m = 0;
  EXPECT_THROW(simulate(bad, default_plan(Mode::kSequential, p, hw, 0), hw), Error);
  SimOptions opt;
  opt.trace_ranks = 0;
  EXPECT_THROW(simulate(p, default_plan(Mode::kSequential, p, hw, 0), hw, opt), Error);
}

TEST(Simulate, SwizzleReadsFewerBytesThanRowBands) {
  // A wave of 132 tiles in row bands touches ~5 A panels and all 32 B panels; in 8-row swizzle blocks it touches
  // 8 A panels and ~17 B panels: less HBM traffic for the same FLOPs (tma allows swizzle with row-major output).
  const Hardware hw = builtin_hardware("h200");
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 8);
  Plan row = default_plan(Mode::kTma, p, hw, 16);
  Plan swz = row;
  swz.tile_order = TileOrder::kSwizzle;
  const double hbm_row = usage(simulate(p, row, hw), ResourceKind::kHbm).work_done;
  const double hbm_swz = usage(simulate(p, swz, hw), ResourceKind::kHbm).work_done;
  EXPECT_LT(hbm_swz, hbm_row);
  const std::vector<int64_t> order = tile_visit_order(p, swz);
  EXPECT_EQ(order[1], swz.tiles_n(p));  // row 1, column 0
}

// The swizzle order (ovl::swizzled_tile, which the kernel runs too): bands of kSwizzleRows tile rows, each column by
// column, the last band shorter; checked against the nested loops it replaces, for tile rows that fill no band, one,
// and one and a part, M off the 128-row tile.
TEST(Simulate, SwizzleOrderIsBandsVisitedColumnByColumn) {
  const Hardware hw = builtin_hardware("h200");
  for (int64_t tm : {1, 7, 8, 11, 17}) {
    for (int64_t tn : {1, 3}) {
      const Problem p = make_problem(Op::kGemmAllReduce, tm * 128 - 40, tn * 256, 512, 8);
      Plan plan = default_plan(Mode::kTma, p, hw, 16);
      plan.tile_order = TileOrder::kSwizzle;
      ASSERT_EQ(plan.tiles_m(p), tm);
      std::vector<int64_t> expected;
      for (int64_t r0 = 0; r0 < tm; r0 += kSwizzleRows)
        for (int64_t c = 0; c < tn; ++c)
          for (int64_t r = r0; r < std::min<int64_t>(tm, r0 + kSwizzleRows); ++r) expected.push_back(r * tn + c);
      EXPECT_EQ(tile_visit_order(p, plan), expected) << tm << " x " << tn << " tiles";
    }
  }
}

// A GEMM+AR problem on 8 GPUs with 16 comm CTAs: the sequential mode (its collective after the GEMM, alone) and the
// collective estimated alone take the same time on `hw` as on `base` (profiles that differ in overlap factors only).
void expect_sequential_and_alone_unchanged(const Problem& p, const Hardware& hw, const Hardware& base) {
  const Plan seq = default_plan(Mode::kSequential, p, base, 16);
  EXPECT_DOUBLE_EQ(simulate(p, seq, hw).total_us, simulate(p, seq, base).total_us);
  EXPECT_DOUBLE_EQ(estimate(p, seq, hw).total_us, estimate(p, seq, base).total_us);
  EXPECT_DOUBLE_EQ(estimate_collective(Collective::kAllReduce, p.comm_bytes(), 8, CommAlgo::kNcclRing, 16, hw).us,
                   estimate_collective(Collective::kAllReduce, p.comm_bytes(), 8, CommAlgo::kNcclRing, 16, base).us);
}

TEST(SimulateVsModel, OverlapRateFactorsSlowOnlyTheOverlappedCollectives) {
  // ModelParams::overlap_nccl_rate_factor / overlap_tma_rate_factor 0.25: the collective of every overlapped mode runs
  // at a quarter of its per-CTA rate, in the simulator as in the model, so their totals rise on a comm-heavy problem
  // (GEMM+AR 8192x8192x1024 on 8 GPUs, 16 comm CTAs: the collective is the longer part); sequential's collective
  // (after the GEMM, alone) and a collective estimated alone do not change, nor does the model's comm_alone_us.
  const Hardware base = builtin_hardware("h200");
  Hardware hw = base;
  hw.fit.overlap_nccl_rate_factor = 0.25;
  hw.fit.overlap_tma_rate_factor = 0.25;
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 1024, 8);
  expect_sequential_and_alone_unchanged(p, hw, base);
  for (Mode mode : {Mode::kDecomposed, Mode::kTileSignal, Mode::kGreenContext, Mode::kTma}) {
    const Plan plan = default_plan(mode, p, base, 16);
    SCOPED_TRACE(plan.summary());
    EXPECT_GT(simulate(p, plan, hw).total_us, 1.5 * simulate(p, plan, base).total_us);
    EXPECT_GT(estimate(p, plan, hw).total_us, 1.5 * estimate(p, plan, base).total_us);
    EXPECT_DOUBLE_EQ(estimate(p, plan, hw).comm_alone_us, estimate(p, plan, base).comm_alone_us);
  }
}

TEST(SimulateVsModel, BesideGemmFactorSlowsOnlyTheCollectiveBesideTheGemm) {
  // ModelParams::beside_gemm_rate_factor 0.25: an overlapped mode's collective moves at a quarter of its per-CTA rate
  // until the operator's GEMM is over, and at its full rate after it. So on GEMM+AR 8192x8192x2048 on 8 GPUs with 16
  // comm CTAs (the collective, about 4x the GEMM, runs mostly after it):
  // - sequential (the collective after the GEMM, alone) and a collective estimated alone do not change;
  // - tile-signal with one group of every tile (its collective starts when the GEMM is over) does not change;
  // - the default plans of the overlapped modes (a group per row band, or chunks; tile-signal's GEMM on 132 - 16
  //   SMs, so that its collective has its CTAs beside the GEMM: on the default grid it gets one SM there) take
  //   longer, in both predictors, by at most 3/4 of the GEMM's time (the collective progress lost while the GEMM
  //   runs) and, since their collectives run beside most of the GEMM, by more than 1/4 of it (0.46-0.55 of it at
  //   the time of writing);
  // - a collective that runs partly after the GEMM loses less than one at a quarter of the rate throughout
  //   (overlap_nccl_rate_factor 0.25).
  const Hardware base = builtin_hardware("h200");
  Hardware hw = base;
  hw.fit.beside_gemm_rate_factor = 0.25;
  Hardware throughout = base;
  throughout.fit.overlap_nccl_rate_factor = 0.25;
  throughout.fit.overlap_tma_rate_factor = 0.25;
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 2048, 8);
  expect_sequential_and_alone_unchanged(p, hw, base);
  Plan one = default_plan(Mode::kTileSignal, p, base, 16);
  one.tile_groups = {static_cast<int>(one.tile_count(p))};
  EXPECT_DOUBLE_EQ(simulate(p, one, hw).total_us, simulate(p, one, base).total_us);
  EXPECT_DOUBLE_EQ(estimate(p, one, hw).total_us, estimate(p, one, base).total_us);
  for (Mode mode : {Mode::kDecomposed, Mode::kTileSignal, Mode::kGreenContext, Mode::kTma}) {
    Plan plan = default_plan(mode, p, base, 16);
    if (mode == Mode::kTileSignal) plan.gemm_sms = base.spec.sm_count - plan.comm_ctas;
    SCOPED_TRACE(plan.summary());
    const SimResult sim = simulate(p, plan, hw), sim_base = simulate(p, plan, base);
    const ModeEstimate model = estimate(p, plan, hw), model_base = estimate(p, plan, base);
    EXPECT_GT(sim.total_us - sim_base.total_us, 0.25 * sim_base.gemm_us);
    EXPECT_LT(sim.total_us - sim_base.total_us, 0.75 * sim_base.gemm_us);
    EXPECT_GT(model.total_us - model_base.total_us, 0.25 * model_base.gemm_us);
    EXPECT_LT(model.total_us - model_base.total_us, 0.75 * model_base.gemm_us);
    EXPECT_LT(sim.total_us, simulate(p, plan, throughout).total_us);
    EXPECT_LT(model.total_us, estimate(p, plan, throughout).total_us);
  }
}

TEST(SimulateVsModel, BesideGemmFactorAgreesWhenACallStraddlesTheGemmsEnd) {
  // Few groups or chunks: a call that starts before the GEMM's end moves its bytes beside the GEMM's end only until
  // then, and the rest at the after-GEMM rate, in the model as in the simulator (which lifts the running step's
  // cap). GEMM+AR 8192x8192x2048 on 8 GPUs, 16 comm CTAs, beside_gemm_rate_factor 0.4: the two agree within 5%.
  Hardware hw = builtin_hardware("h200");
  hw.fit.beside_gemm_rate_factor = 0.4;
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 2048, 8);
  std::vector<Plan> plans;
  for (Mode mode : {Mode::kTileSignal, Mode::kGreenContext, Mode::kTma}) {
    for (int groups : {2, 4}) {
      Plan plan = default_plan(mode, p, hw, 16);
      plan.tile_groups = band_groups(plan.tiles_m(p), plan.tiles_n(p), groups);
      plans.push_back(plan);
    }
  }
  Plan chunks = default_plan(Mode::kDecomposed, p, hw, 16);
  chunks.chunks = 2;
  plans.push_back(chunks);
  for (const Plan& plan : plans) {
    SCOPED_TRACE(plan.summary());
    const double sim = simulate(p, plan, hw).total_us, model = estimate(p, plan, hw).total_us;
    EXPECT_NEAR(model / sim, 1.0, 0.05);
  }
}

// A profile that validates but whose rates are absurd for the problem: an error, never an overflowed clock.
TEST(Simulate, ARateTooSmallForTheProblemIsAnError) {
  Hardware hw = builtin_hardware("h200");
  hw.spec.matrix_tflops_per_sm = 1e-12;
  const Problem p = make_problem(Op::kGemmReduceScatter, 8192, 8192, 8192, 8);
  test::expect_error_naming([&] { (void)simulate(p, default_plan(Mode::kSequential, p, hw, 0), hw); },
                            "a rate of the hardware profile is too small");
}

}  // namespace
}  // namespace ovl::sim
