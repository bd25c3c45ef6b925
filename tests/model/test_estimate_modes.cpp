// Per-mode estimates: closed-form pipelines (contention weights zeroed where a closed form needs it), the grids of
// our persistent GEMM on shared SMs, the AllGather order flip, and bounds over many problems and splits.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "expect_error.hpp"
#include "ovl/error.hpp"
#include "ovl/model/estimate.hpp"

namespace ovl {
namespace {

const Hardware kH200 = builtin_hardware("h200");

Hardware no_contention() {
  Hardware h = kH200;
  h.fit.hbm_contention = 0;
  h.fit.shared_sm_penalty = 0;
  return h;
}

// FP8 inputs: sequential and decomposed run our kernel, not cuBLAS (unsignaled_gemm_impl, as the executor does), so
// their GEMM follows gemm_efficiency and not cublas_efficiency; bf16 keeps cuBLAS's.
TEST(EstimateModes, Fp8SequentialAndDecomposedArePricedAsOurKernel) {
  Hardware slow_cublas = kH200;
  slow_cublas.fit.cublas_efficiency *= 0.5;
  Problem fp8 = make_problem(Op::kGemmReduceScatter, 8192, 8192, 4096, 8);
  fp8.dtype = DType::kE4M3;
  const Problem bf16 = make_problem(Op::kGemmReduceScatter, 8192, 8192, 4096, 8);
  EXPECT_EQ(unsignaled_gemm_impl(DType::kE4M3), GemmImpl::kOvl);
  EXPECT_EQ(unsignaled_gemm_impl(DType::kBF16), GemmImpl::kCublas);
  for (Mode mode : {Mode::kSequential, Mode::kDecomposed}) {
    SCOPED_TRACE(to_string(mode));
    const Plan p8 = default_plan(mode, fp8, kH200, 16), p16 = default_plan(mode, bf16, kH200, 16);
    EXPECT_DOUBLE_EQ(estimate(fp8, p8, kH200).gemm_alone_us, estimate(fp8, p8, slow_cublas).gemm_alone_us);
    EXPECT_GT(estimate(bf16, p16, slow_cublas).gemm_alone_us, 1.5 * estimate(bf16, p16, kH200).gemm_alone_us);
  }
}

TEST(EstimateModes, SequentialIsTheSum) {
  // cuBLAS 8192^3 on 132 SMs (1.53 + 2048/132 x (100.88 + 1.48) = 1589.7 us with the calibrated H200
  // profile; measured 1603 us) then a 128 MiB ring AllReduce with 24 CTAs (670.3 us).
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 8);
  const Plan plan = default_plan(Mode::kSequential, p, kH200, 0);
  const ModeEstimate e = estimate(p, plan, kH200);
  const double gemm = estimate_gemm({8192, 8192, 8192}, GemmImpl::kCublas, 132, TileShape{}, kH200).us;
  const double comm = estimate_collective(Collective::kAllReduce, p.comm_bytes(), 8, CommAlgo::kNcclRing, 24, kH200).us;
  EXPECT_NEAR(e.total_us, gemm + comm, 1e-9);
  EXPECT_NEAR(e.total_us, 1589.7 + 670.3, 0.5);
  EXPECT_DOUBLE_EQ(e.exposed_comm_us, comm);
}

TEST(EstimateModes, NcclSymmetricRunsOnThePolicysCtas) {
  // comm_algo nccl-symmetric: sequential is the GEMM plus NCCL's symmetric kernels on comm_ctas CTAs; under CTA
  // policy zero an AllGather takes no SM (the copy engines), an AllReduce still runs on its CTAs.
  const Hardware hw = no_contention();
  const Problem ar = make_problem(Op::kGemmAllReduce, 8192, 8192, 4096, 8);
  const Problem ag = make_problem(Op::kAllGatherGemm, 8192, 8192, 4096, 8);
  for (const Problem& p : {ar, ag}) {
    const Collective c = collective_of(p.op);
    for (CtaPolicy policy : {CtaPolicy::kEfficiency, CtaPolicy::kZero}) {
      Plan plan = default_plan(Mode::kSequential, p, hw, 16);
      plan.comm_algo = CommAlgo::kNcclSymmetric;
      plan.cta_policy = policy;
      const int ctas = collective_ctas(plan, c);
      EXPECT_EQ(ctas, policy == CtaPolicy::kZero && c == Collective::kAllGather ? 0 : 16) << to_string(policy);
      const ModeEstimate e = estimate(p, plan, hw);
      const double comm = estimate_collective(c, p.comm_bytes(), 8, CommAlgo::kNcclSymmetric, ctas, hw).us;
      EXPECT_NEAR(e.comm_alone_us, comm, 1e-9) << to_string(p.op) << " " << to_string(policy);
      EXPECT_NEAR(e.total_us, e.gemm_us + comm, 1e-9);
    }
  }
  // Decomposed GEMM+AR on 8 CTAs: the symmetric kernels reach the link on 8 CTAs, the ring (20 GB/s a channel) not.
  Plan ring = default_plan(Mode::kDecomposed, ar, hw, 8);
  Plan sym = ring;
  sym.comm_algo = CommAlgo::kNcclSymmetric;
  EXPECT_LT(estimate(ar, sym, hw).total_us, estimate(ar, ring, hw).total_us);
  // Tile-signal GEMM+AR leaving the collective its 16 CTAs: priced as NCCL calls per group, at the symmetric rate.
  Plan ts = default_plan(Mode::kTileSignal, ar, hw, 16);
  ts.gemm_sms = hw.spec.sm_count - 16;
  ts.tile_groups = band_groups(ts.tiles_m(ar), ts.tiles_n(ar), 4);
  Plan ts_sym = ts;
  ts_sym.comm_algo = CommAlgo::kNcclSymmetric;
  EXPECT_EQ(comm_ctas_beside_gemm(ts_sym, ar, hw), 16);
  EXPECT_LT(estimate(ar, ts_sym, hw).total_us, estimate(ar, ts, hw).total_us);
}

TEST(EstimateModes, TileSignalPipelineClosedForm) {
  // 2048 x 6912 x 8192 AllReduce on 8 GPUs, the GEMM on 132 - 24 = 108 SMs (the grid that leaves the collective its
  // 24 CTAs): 16 x 27 = 432 tiles = 4 waves of 108. Four groups of 4 bands = 108 tiles = one wave each: group g is
  // ready at the end of wave g + 1. Each group's NCCL call, with its counter kernel (signaled_group_us), is shorter
  // than a wave, so nothing queues and only the last group's is exposed: total = GEMM + one group's.
  const Hardware hw = no_contention();
  const Problem p = make_problem(Op::kGemmAllReduce, 2048, 6912, 8192, 8);
  Plan plan = default_plan(Mode::kTileSignal, p, hw, 24);
  plan.gemm_sms = hw.spec.sm_count - plan.comm_ctas;
  ASSERT_EQ(plan.gemm_sms, 108);
  plan.tile_groups = band_groups(16, 27, 4);
  ASSERT_EQ(plan.tile_groups, std::vector<int>(4, 108));
  ASSERT_EQ(signaled_gemm_grid(plan, p, hw), 108);
  ASSERT_EQ(comm_ctas_beside_gemm(plan, p, hw), 24);
  const ModeEstimate e = estimate(p, plan, hw);
  const GemmEstimate gemm =
      estimate_gemm({2048, 6912, 8192}, GemmImpl::kOvl, 108, TileShape{}, TileOrder::kRowBand, hw);
  ASSERT_EQ(gemm.waves, 4);
  const double group =
      estimate_collective(Collective::kAllReduce, p.comm_bytes() / 4, 8, CommAlgo::kNcclRing, 24, hw).us +
      signaled_group_us(hw);
  ASSERT_GT(signaled_group_us(hw), 0);
  ASSERT_LT(group, gemm.wave_us);
  EXPECT_NEAR(e.total_us, gemm.us + group, 1e-6);
  EXPECT_NEAR(e.gemm_us, gemm.us, 1e-9);
  EXPECT_NEAR(e.comm_us, 4 * group, 1e-6);
  EXPECT_NEAR(e.exposed_comm_us, group, 1e-6);

  // The default grid (gemm_sms = 132: 131 CTAs, which hold their SMs to the end) leaves the collective one SM beside
  // the GEMM: the GEMM is a little faster, and the first groups' calls crawl on one CTA until its last wave (3 waves
  // of 131 and 39 tiles). Then the 92 CTAs without a tile have exited and the collective runs on its 24 CTAs, but
  // more than one call's worth of it is still left after the GEMM (less than two: with the collective on one CTA to
  // the GEMM's end, it was more).
  plan.gemm_sms = hw.spec.sm_count;
  ASSERT_EQ(signaled_gemm_grid(plan, p, hw), 131);
  ASSERT_EQ(comm_ctas_beside_gemm(plan, p, hw), 1);
  const ModeEstimate starved = estimate(p, plan, hw);
  EXPECT_NEAR(starved.gemm_us,
              estimate_gemm({2048, 6912, 8192}, GemmImpl::kOvl, 131, TileShape{}, TileOrder::kRowBand, hw).us, 1e-9);
  EXPECT_GT(starved.exposed_comm_us, group);
  EXPECT_LT(starved.exposed_comm_us, 2 * group);
  EXPECT_GT(starved.total_us, e.total_us);
}

TEST(EstimateModes, CopyEngineLeavesTheGemmEverySmAndSumsAtTheEnd) {
  // comm_algo ce: the GEMM runs on all 132 SMs; each group's copies take no SM (f = 7/8 of its bytes at the copy
  // engines' rate, ModelParams::copy_engine_GBps, 0: the link's); the owner's sum (1 + 1/8 bytes per buffer byte on
  // comm_ctas CTAs) follows the GEMM's last group. With one group the copies and the sum are all exposed.
  const Hardware hw = no_contention();
  const Problem p = make_problem(Op::kGemmReduceScatter, 2048, 6912, 8192, 8);
  Plan plan = default_plan(Mode::kTileSignal, p, hw, 8);
  plan.comm_algo = CommAlgo::kCopyEngine;
  plan.tile_groups = band_groups(plan.tiles_m(p), plan.tiles_n(p), 1);
  ASSERT_EQ(signaled_gemm_grid(plan, p, hw), 132);
  const ModeEstimate one = estimate(p, plan, hw);
  const GemmEstimate gemm =
      estimate_gemm({2048, 6912, 8192}, GemmImpl::kOvl, 132, TileShape{}, TileOrder::kRowBand, hw);
  EXPECT_NEAR(one.gemm_us, gemm.us, 1e-9);
  const double bytes = double(p.comm_bytes());
  const double copies =
      hw.fit.link_latency_us + bytes * std::max(2 * 0.875 / hw.spec.hbm_GBps, 0.875 / hw.spec.link_GBps) / 1e3;
  const double sum = hw.fit.launch_us + bytes * 1.125 / std::min(hw.spec.hbm_GBps, 8 * hw.fit.per_cta_copy_GBps) / 1e3;
  EXPECT_NEAR(one.total_us, gemm.us + copies + sum, 1e-6);
  // More groups hide the copies behind the GEMM, never the sum.
  plan.tile_groups = band_groups(plan.tiles_m(p), plan.tiles_n(p), 8);
  const ModeEstimate eight = estimate(p, plan, hw);
  EXPECT_LT(eight.total_us, one.total_us);
  EXPECT_GT(eight.total_us, gemm.us + sum - 1e-6);
  // A slower copy engine costs more; AllReduce adds the gather of the sums after the sum.
  Hardware slow = hw;
  slow.fit.copy_engine_GBps = hw.spec.link_GBps / 4;
  EXPECT_GT(estimate(p, plan, slow).total_us, eight.total_us);
  const Problem ar = make_problem(Op::kGemmAllReduce, 2048, 6912, 8192, 8);
  Plan plan_ar = plan;
  EXPECT_GT(estimate(ar, plan_ar, hw).total_us, eight.total_us);
  // A grid of 132 - 8 leaves the sum its 8 CTAs: each group is summed beside the GEMM, so only the last group's
  // copies and sum follow the (slower) GEMM.
  ASSERT_FALSE(ce_sums_per_group(plan, hw.spec.sm_count));
  plan.gemm_sms = hw.spec.sm_count - plan.comm_ctas;
  ASSERT_TRUE(ce_sums_per_group(plan, hw.spec.sm_count));
  const ModeEstimate per_group = estimate(p, plan, hw);
  const GemmEstimate gemm124 =
      estimate_gemm({2048, 6912, 8192}, GemmImpl::kOvl, 124, TileShape{}, TileOrder::kRowBand, hw);
  EXPECT_NEAR(per_group.gemm_us, gemm124.us, 1e-9);
  EXPECT_GT(per_group.total_us, gemm124.us);
  EXPECT_LT(per_group.total_us, gemm124.us + copies + sum);
}

TEST(EstimateModes, SharedSmsLeaveTheTmaKernelItsSms) {
  // The tma mode on shared SMs (not partitioned): the executor caps our persistent GEMM's grid at sm_count -
  // comm_ctas, so the TMA kernel's 24 CTAs and the GEMM's 108 are all resident and neither waits for the other's
  // SMs. A 132-tile GEMM (1536 x 2816) then takes two waves of 108, whatever shared_sm_penalty says (it weighs only
  // cuBLAS's SM conflicts, in the decomposed mode).
  Hardware hw = kH200;
  hw.fit.hbm_contention = 0;
  const Problem p = make_problem(Op::kGemmAllReduce, 1536, 2816, 4096, 8);
  Plan plan = default_plan(Mode::kTma, p, hw, 24);
  plan.partitioned = false;
  plan.gemm_sms = 132;
  ASSERT_EQ(signaled_gemm_grid(plan, p, hw), 108);
  ASSERT_EQ(comm_ctas_beside_gemm(plan, p, hw), 24);
  const GemmEstimate on_108 =
      estimate_gemm({1536, 2816, 4096}, GemmImpl::kOvl, 108, TileShape{}, TileOrder::kRowBand, hw);
  EXPECT_EQ(on_108.waves, 2);
  EXPECT_NEAR(estimate(p, plan, hw).gemm_us, on_108.us, 1e-6);
  hw.fit.shared_sm_penalty = 0;
  EXPECT_NEAR(estimate(p, plan, hw).gemm_us, on_108.us, 1e-6);
}

TEST(EstimateModes, GreenContextHasNoSmConflict) {
  const Hardware hw = no_contention();
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 8);
  const Plan plan = default_plan(Mode::kGreenContext, p, hw, 16);
  const ModeEstimate e = estimate(p, plan, hw);
  EXPECT_DOUBLE_EQ(e.gemm_us, e.gemm_alone_us);
  // HBM contention can only slow it down.
  const ModeEstimate c = estimate(p, plan, kH200);
  EXPECT_GE(c.gemm_us, e.gemm_us);
  EXPECT_GE(c.total_us, e.total_us);
}

TEST(EstimateModes, AllGatherWaitsForTheFirstWavesRows) {
  // AllGather-GEMM 8192^3 on 8 GPUs, tma mode, 16 CTAs (push), GEMM on 116 SMs: 2048 tiles in 64 groups of one
  // band (32 tiles, 2 MiB of A each), 18 waves. Each group's gather: the mover's tma_group_us (3.4) + 7/8 x 2 MiB /
  // 450 GB/s = 7.48 us (the link binds; the CTAs would take 2 x 2 MiB / 1600 GB/s = 2.62 us), after the TMA kernel's
  // 4 us launch; its rows arrive the link's 0.7 us later (streamed: only the latency of the group waited for shows).
  // The first wave (tiles 0-115) needs groups 0-3, nominally starting after the GEMM's own launch (1.53 us): the GEMM
  // starts 4 - 1.53 + 4 x 7.48 + 0.7 us late, and nothing later waits (a wave takes ~100 us, 4 groups' gathers 30 us).
  const Hardware hw = no_contention();
  const Problem p = make_problem(Op::kAllGatherGemm, 8192, 8192, 8192, 8);
  const Plan plan = default_plan(Mode::kTma, p, hw, 16);
  ASSERT_EQ(plan.gemm_sms, 116);
  ASSERT_EQ(plan.tile_groups.size(), 64u);
  const ModeEstimate e = estimate(p, plan, hw);
  const double gather = hw.fit.tma_group_us + 7.0 / 8 * (2 << 20) / 450e3;
  const double late = hw.fit.tma_launch_us - hw.fit.launch_us + 4 * gather + 0.7;
  EXPECT_NEAR(e.total_us, e.gemm_alone_us + late, 1e-6);
  EXPECT_NEAR(e.exposed_comm_us, late, 1e-6);
}

TEST(EstimateModes, DecomposedClosedForm) {
  // 4 chunks of 2048 x 8192 x 8192 on cuBLAS (512 tiles / 132 SMs = 3.88 waves of 90.6 us, + 4 us) and a
  // 32 MiB AllReduce each (16 CTAs: 320 GB/s -> 183.5 us + 17.8 us). cuBLAS's grid holds every SM: call 0, launched
  // as chunk 0 ends, gets SMs when chunk 1's last round (116 tiles) leaves 16, after 396 of its 512 tiles
  // (w = 4 + 396/512 of its body); call 1 follows call 0 on its SMs; call 2 waits in chunk 3 as call 0 did, and call
  // 3 follows it: total = 3 chunks + w + 2 calls.
  const Hardware hw = no_contention();
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 8);
  const Plan plan = default_plan(Mode::kDecomposed, p, hw, 16);
  ASSERT_EQ(plan.chunks, 4);
  const ModeEstimate e = estimate(p, plan, hw);
  const double chunk = estimate_gemm({2048, 8192, 8192}, GemmImpl::kCublas, 132, TileShape{}, hw).us;
  const double call =
      estimate_collective(Collective::kAllReduce, p.comm_bytes() / 4, 8, CommAlgo::kNcclRing, 16, hw).us;
  ASSERT_EQ(cublas_tiles_before_comm(512, 132, 16, 132), 396);
  const double w = hw.fit.launch_us + (chunk - hw.fit.launch_us) * 396.0 / 512.0;
  EXPECT_LT(call, chunk);
  EXPECT_GT(w + call, chunk);  // so call 1 is still waiting behind call 0 when chunk 1 ends
  EXPECT_NEAR(e.total_us, 3 * chunk + w + 2 * call, 1e-6);
  // AllGather-GEMM flips it: the first chunk's gather is exposed, then the chunks' GEMMs. A chunk is one owner's
  // rows, which a real world moves as an ncclBroadcast: W / (W - 1) the link bytes of an AllGather of them.
  const Problem ag = make_problem(Op::kAllGatherGemm, 8192, 8192, 8192, 8);
  const ModeEstimate a = estimate(ag, default_plan(Mode::kDecomposed, ag, hw, 16), hw);
  const double gather =
      estimate_collective(Collective::kAllGather, ag.comm_bytes() / 4 * 8.0 / 7, 8, CommAlgo::kNcclRing, 16, hw).us;
  EXPECT_NEAR(a.total_us, gather + 4 * chunk, 1e-6);
}

TEST(EstimateModes, CollectiveBesideCublasWaitsForItsGridToLeaveSms) {
  // cuBLAS's persistent grid holds its SMs until a CTA runs out of tiles. A collective of c CTAs launched as a chunk
  // of T tiles starts on n SMs of a 132-SM device gets its SMs: at once where the grid leaves c; else when the
  // last round (T mod n tiles) leaves c, after the whole rounds; else at the chunk's end.
  EXPECT_EQ(cublas_tiles_before_comm(512, 132, 0, 132), 0);     // no CTA (the copy engines)
  EXPECT_EQ(cublas_tiles_before_comm(512, 116, 16, 132), 0);    // 116 + 16 SMs fit
  EXPECT_EQ(cublas_tiles_before_comm(64, 132, 24, 132), 0);     // a grid of 64 tiles leaves 68 SMs
  EXPECT_EQ(cublas_tiles_before_comm(512, 132, 16, 132), 396);  // last round of 116 tiles leaves 16
  EXPECT_EQ(cublas_tiles_before_comm(512, 132, 24, 132), 512);  // ... not 24
  EXPECT_EQ(cublas_tiles_before_comm(528, 132, 8, 132), 528);   // 4 whole rounds: no SM free before the end
  EXPECT_EQ(cublas_tiles_before_comm(128, 132, 24, 132), 128);  // one round of 128 leaves 4
  test::expect_error_naming([] { cublas_tiles_before_comm(0, 132, 8, 132); }, "tiles = 0");
}

TEST(EstimateModes, CublasLosingSmsRunsWholeWavesOnTheRest) {
  // 2048 x 8192 in 128 x 256 tiles: 512 tiles, 3.88 balanced waves on 132 SMs; with 8 SMs held, 5 whole waves on 124
  // (0.289 slower), with 32 held 6 on 100 (0.547); 256 tiles: 1.94 waves, 3 on 124 (0.547). No SM held: none;
  // fewer tiles than SMs left: one wave either way.
  EXPECT_EQ(cublas_lost_sms_slowdown(512, 132, 0), 0.0);
  EXPECT_NEAR(cublas_lost_sms_slowdown(512, 132, 8), 5.0 / (512.0 / 132) - 1, 1e-12);
  EXPECT_NEAR(cublas_lost_sms_slowdown(512, 132, 32), 6.0 / (512.0 / 132) - 1, 1e-12);
  EXPECT_NEAR(cublas_lost_sms_slowdown(256, 132, 8), 3.0 / (256.0 / 132) - 1, 1e-12);
  EXPECT_EQ(cublas_lost_sms_slowdown(100, 132, 8), 0.0);
  EXPECT_THROW(cublas_lost_sms_slowdown(0, 132, 8), Error);

  // Decomposed with every chunk's call beside the next chunk (shared_sm_penalty 1, no HBM term): the GEMM is
  // slower by that fraction of the time the collective runs beside it, so between the unconflicted plan and the
  // whole chunks' slowdown.
  Hardware hw = no_contention();
  hw.fit.shared_sm_penalty = 1;
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 8);
  const Plan plan = default_plan(Mode::kDecomposed, p, hw, 16);
  const ModeEstimate conflicted = estimate(p, plan, hw);
  const ModeEstimate free = estimate(p, plan, no_contention());
  const double slowdown = cublas_lost_sms_slowdown(512, 132, 16);
  EXPECT_GT(conflicted.gemm_us, free.gemm_us * 1.01);
  EXPECT_LE(conflicted.gemm_us, free.gemm_us * (1 + slowdown) + 1e-6);
}

TEST(EstimateModes, OperatorGemmFactorScalesEveryModesGemm) {
  // Every mode times its GEMM in the operator regime (ModelParams::operator_gemm_factor, here 0.85), so the
  // comparison between modes stays on one footing. Without contention:
  //   sequential: cuBLAS 8192^3 on 132 SMs: 1.53 + 0.85 x (1589.7 - 1.53) = 1351.5 us, + the same 670.3 us ring;
  //   decomposed: 4 chunks of 1.53 + 0.85 x (chunk - 1.53) (gemm_alone_us);
  //   tile-signal / green-context / tma: our GEMM's launch + 0.85 x its body (gemm_alone_us).
  // Tolerance 1e-6 us (rounding).
  const Hardware base = no_contention();
  Hardware hw = base;
  hw.fit.operator_gemm_factor = 0.85;
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 8);
  const ModeEstimate seq = estimate(p, default_plan(Mode::kSequential, p, hw, 0), hw);
  const ModeEstimate seq1 = estimate(p, default_plan(Mode::kSequential, p, base, 0), base);
  EXPECT_NEAR(seq.gemm_alone_us, 1.53 + 0.85 * (seq1.gemm_alone_us - 1.53), 1e-6);
  EXPECT_NEAR(seq.gemm_alone_us, 1351.5, 0.5);
  EXPECT_NEAR(seq.total_us, seq.gemm_alone_us + seq1.comm_alone_us, 1e-6);
  const ModeEstimate dec = estimate(p, default_plan(Mode::kDecomposed, p, hw, 16), hw);
  const double chunk = estimate_gemm({2048, 8192, 8192}, GemmImpl::kCublas, 132, TileShape{}, base).us;
  EXPECT_NEAR(dec.gemm_alone_us, 4 * (1.53 + 0.85 * (chunk - 1.53)), 1e-6);
  for (Mode mode : {Mode::kTileSignal, Mode::kGreenContext, Mode::kTma}) {
    const Plan plan = default_plan(mode, p, hw, 24);
    const double gemm =
        estimate_gemm({8192, 8192, 8192}, GemmImpl::kOvl, plan.gemm_sms, plan.tile, plan.tile_order, base).us;
    const ModeEstimate e = estimate(p, plan, hw);
    EXPECT_NEAR(e.gemm_alone_us, 1.53 + 0.85 * (gemm - 1.53), 1e-6) << to_string(mode);
    EXPECT_LT(e.total_us, estimate(p, plan, base).total_us) << to_string(mode);
  }
}

TEST(EstimateModes, BoundsHoldEverywhere) {
  // For every mode, op, shape, world and split: the overlapped time is at least the larger of the GEMM and the
  // collective alone, and at most the GEMM's (contended) time plus all the communication's time (plus the TMA
  // kernel's launch, which may precede its first group).
  const Problem problems[] = {
      make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 8),     make_problem(Op::kGemmReduceScatter, 8192, 8192, 8192, 8),
      make_problem(Op::kAllGatherGemm, 8192, 8192, 8192, 8),     make_problem(Op::kGemmAllReduce, 4096, 4096, 1024, 2),
      make_problem(Op::kGemmReduceScatter, 16384, 4096, 512, 4), make_problem(Op::kAllGatherGemm, 2048, 14336, 4096, 8),
      make_problem(Op::kGemmAllReduce, 512, 8192, 8192, 8),      make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 16)};
  int checked = 0;
  for (const auto& p : problems) {
    for (Mode mode : all_modes()) {
      for (int comm = 8; comm <= 64; comm += 8) {
        Plan plan = default_plan(mode, p, kH200, comm);
        if (p.nodes() > 1 && mode == Mode::kTma) continue;  // TMA works within one node
        const ModeEstimate e = estimate(p, plan, kH200);
        const double slack = 1e-6 * e.total_us;
        EXPECT_GE(e.total_us + slack, std::max(e.gemm_alone_us, e.comm_alone_us)) << p.name() << " " << plan.summary();
        EXPECT_LE(e.total_us, e.gemm_us + e.comm_us + kH200.fit.tma_launch_us + slack)
            << p.name() << " " << plan.summary();
        EXPECT_GE(e.gemm_us + slack, e.gemm_alone_us);
        EXPECT_NEAR(e.exposed_comm_us, e.total_us - e.gemm_us, slack);
        EXPECT_TRUE(std::isfinite(e.total_us));
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 250);
}

TEST(EstimateModes, MoreNcclGroupsCostMoreLaunches) {
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 8);
  double prev = 0;
  for (int groups : {1, 4, 16, 64}) {
    Plan plan = default_plan(Mode::kTileSignal, p, kH200, 24);
    plan.tile_groups = band_groups(64, 32, groups);
    const ModeEstimate e = estimate(p, plan, kH200);
    EXPECT_GT(e.comm_us, prev);
    prev = e.comm_us;
  }
}

TEST(EstimateModes, TheMoversPerGroupWorkAddsAtMostOncePerGroup) {
  // tma mode, GEMM+AR 8192x8192x1024 on 8 GPUs, 8 push CTAs: the collective (~2x the GEMM) is the critical path, so
  // the mover's per-group cost tma_group_us is paid by every group in turn. Raising it by d adds more than half of
  // groups x d and at most groups x d (each group pays it once, one after the other).
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 1024, 8);
  Hardware hw = no_contention();
  hw.fit.tma_group_us = 0;
  const Plan plan = default_plan(Mode::kTma, p, hw, 8);
  const double groups = double(plan.tile_groups.size());
  const double base = estimate(p, plan, hw).total_us;
  hw.fit.tma_group_us = 5;
  const double more = estimate(p, plan, hw).total_us;
  EXPECT_GT(more - base, 0.5 * groups * 5);
  EXPECT_LE(more - base, groups * 5 + 1e-6);
}

TEST(EstimateModes, TheNcclGroupGapAddsPerGroupToTheSignalingModesOnly) {
  // green-context, GEMM+AR 8192x8192x1024 on 8 GPUs, 16 SMs, a group per row band: the NCCL calls (~2x the GEMM) are
  // the critical path, so nccl_group_us is paid by every group in turn: raising it by d adds more than half of
  // groups x d and at most groups x d. Decomposed and tma do not pay it.
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 1024, 8);
  Hardware hw = no_contention();
  const Plan gc = default_plan(Mode::kGreenContext, p, hw, 16);
  const Plan dec = default_plan(Mode::kDecomposed, p, hw, 16);
  const Plan tma = default_plan(Mode::kTma, p, hw, 16);
  const double groups = double(gc.tile_groups.size());
  const double base = estimate(p, gc, hw).total_us, base_dec = estimate(p, dec, hw).total_us;
  const double base_tma = estimate(p, tma, hw).total_us;
  hw.fit.nccl_group_us = 5;
  const double more = estimate(p, gc, hw).total_us;
  EXPECT_GT(more - base, 0.5 * groups * 5);
  EXPECT_LE(more - base, groups * 5 + 1e-6);
  EXPECT_DOUBLE_EQ(estimate(p, dec, hw).total_us, base_dec);
  EXPECT_DOUBLE_EQ(estimate(p, tma, hw).total_us, base_tma);
}

TEST(EstimateModes, ValidatesThePlan) {
  const Problem p = make_problem(Op::kGemmAllReduce, 8192, 8192, 8192, 8);
  Plan plan = default_plan(Mode::kTma, p, kH200, 16);
  plan.comm_algo = CommAlgo::kNcclRing;
  EXPECT_THROW(estimate(p, plan, kH200), Error);
}

}  // namespace
}  // namespace ovl
