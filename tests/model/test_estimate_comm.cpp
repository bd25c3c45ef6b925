// Collective time: closed-form cases, bus bandwidth conventions, monotonicity, loopback and several nodes.
#include <gtest/gtest.h>

#include <utility>

#include "expect_error.hpp"
#include "ovl/error.hpp"
#include "ovl/model/estimate.hpp"
#include "ovl/model/link_profile.hpp"

namespace ovl {
namespace {

const Hardware kH200 = builtin_hardware("h200");
// The H200 profile with the push rate these closed forms are written for (56 GB/s per CTA), whatever the default.
Hardware push56() {
  Hardware h = kH200;
  h.fit.tma_push_per_cta_GBps = 56;
  return h;
}
constexpr int64_t kMiB = int64_t(1) << 20;

TEST(EstimateComm, BusFactor) {
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kReduceScatter, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kAllGather, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::kAllReduce, 1), 0.0);
}

TEST(EstimateComm, NcclRingAllReduceClosedForm) {
  // 128 MiB AllReduce, 8 GPUs, 24 CTAs: rate = min(450 x 0.80, 24 x 20) = 360 GB/s; each GPU sends
  // 2 x 7/8 x 128 MiB = 234.9 MB -> 652.4 us; + 14 steps x 0.7 us + 8 us launch = 670.3 us.
  // (HBM: (2 + 1.75) x 134 MB / 4200 GB/s = 120 us, not binding.) busbw = algbw x 1.75 = 350 GB/s.
  const CommEstimate e = estimate_collective(Collective::kAllReduce, 128 * kMiB, 8, CommAlgo::kNcclRing, 24, kH200);
  const double expect = 8.0 + 14 * 0.7 + 1.75 * 128 * kMiB / 360e3;
  EXPECT_NEAR(e.us, expect, 1e-6);
  EXPECT_NEAR(e.algbw_GBps, 128.0 * kMiB / expect / 1e3, 1e-9);
  EXPECT_NEAR(e.busbw_GBps, e.algbw_GBps * 1.75, 1e-9);
  EXPECT_NEAR(e.busbw_GBps, 350.4, 0.5);
  // With 8 CTAs the channels cap it: 8 x 20 = 160 GB/s.
  const CommEstimate few = estimate_collective(Collective::kAllReduce, 128 * kMiB, 8, CommAlgo::kNcclRing, 8, kH200);
  EXPECT_NEAR(few.us, 8.0 + 14 * 0.7 + 1.75 * 128 * kMiB / 160e3, 1e-6);
}

TEST(EstimateComm, NvlsHalvesAllReduceBytes) {
  const double ring = estimate_collective(Collective::kAllReduce, 1024 * kMiB, 8, CommAlgo::kNcclRing, 32, kH200).us;
  const double nvls = estimate_collective(Collective::kAllReduce, 1024 * kMiB, 8, CommAlgo::kNcclNvls, 32, kH200).us;
  EXPECT_NEAR(nvls / ring, 0.5, 0.01);
  // ReduceScatter moves the same bytes either way.
  const double rs_ring =
      estimate_collective(Collective::kReduceScatter, 1024 * kMiB, 8, CommAlgo::kNcclRing, 32, kH200).us;
  const double rs_nvls =
      estimate_collective(Collective::kReduceScatter, 1024 * kMiB, 8, CommAlgo::kNcclNvls, 32, kH200).us;
  EXPECT_NEAR(rs_nvls / rs_ring, 1.0, 0.02);
}

TEST(EstimateComm, TmaClosedForm) {
  // Push-reduce ReduceScatter of 64 MiB among 8, 16 CTAs: CTA work 3 - 1/8 = 2.875 bytes per buffer byte (own
  // chunk copied, 7 chunks bulk-reduced into their owners) at 56 GB/s per push CTA: 2.875 x 67.1 MB / 896 GB/s =
  // 215.3 us; link 7/8 x 67.1 MB / 450 GB/s = 130.5 us; HBM 2.875 x 67.1 MB / 4200 GB/s = 45.9 us -> the CTAs
  // bind. + 1 step x 0.7 us + 4 us launch.
  const double s = 64.0 * kMiB;
  const Hardware h = push56();
  const CommEstimate push = estimate_collective(Collective::kReduceScatter, 64 * kMiB, 8, CommAlgo::kTmaPush, 16, h);
  EXPECT_NEAR(push.us, 4.0 + 0.7 + 2.875 * s / 896e3, 1e-6);
  // With 8 CTAs: 2.875 x 67.1 MB / 448 GB/s = 430.7 us.
  const CommEstimate push8 = estimate_collective(Collective::kReduceScatter, 64 * kMiB, 8, CommAlgo::kTmaPush, 8, h);
  EXPECT_NEAR(push8.us, 4.0 + 0.7 + 2.875 * s / 448e3, 1e-6);
  // With 64 CTAs (3584 GB/s, 53.8 us) the link binds.
  const CommEstimate push64 = estimate_collective(Collective::kReduceScatter, 64 * kMiB, 8, CommAlgo::kTmaPush, 64, h);
  EXPECT_NEAR(push64.us, 4.0 + 0.7 + 7.0 / 8 * s / 450e3, 1e-6);
  // Pull-reduce reads W chunks per output chunk but writes one: (1 + 1/8) bytes per buffer byte on the CTAs, at
  // the pull kernel's 15 GB/s per CTA: with 8 CTAs 1.125 x 67.1 MB / 120 GB/s = 629.1 us; it waits 2 latencies
  // (flag, then read). With 64 CTAs (960 GB/s, 78.6 us) the link binds.
  const CommEstimate pull8 =
      estimate_collective(Collective::kReduceScatter, 64 * kMiB, 8, CommAlgo::kTmaPull, 8, kH200);
  EXPECT_NEAR(pull8.us, 4.0 + 2 * 0.7 + 1.125 * s / 120e3, 1e-6);
  const CommEstimate pull64 =
      estimate_collective(Collective::kReduceScatter, 64 * kMiB, 8, CommAlgo::kTmaPull, 64, kH200);
  EXPECT_NEAR(pull64.us, 4.0 + 2 * 0.7 + 7.0 / 8 * s / 450e3, 1e-6);
  // The SIMT kernel runs the pull protocol at its own per-CTA rate (32 GB/s): 1.125 x 67.1 MB / 256 GB/s.
  const CommEstimate simt8 = estimate_collective(Collective::kReduceScatter, 64 * kMiB, 8, CommAlgo::kSimt, 8, kH200);
  EXPECT_NEAR(simt8.us, 4.0 + 2 * 0.7 + 1.125 * s / (8 * kH200.fit.simt_per_cta_GBps * 1e3), 1e-6);
  // More CTAs help until the link caps: 1, 2, 4 ... 64 CTAs never slower, and 32 = 64.
  double prev = 1e300;
  for (int c = 1; c <= 64; c *= 2) {
    const double t = estimate_collective(Collective::kAllReduce, 256 * kMiB, 8, CommAlgo::kTmaPush, c, h).us;
    EXPECT_LE(t, prev);
    prev = t;
  }
  EXPECT_DOUBLE_EQ(estimate_collective(Collective::kAllReduce, 256 * kMiB, 8, CommAlgo::kTmaPush, 32, h).us,
                   estimate_collective(Collective::kAllReduce, 256 * kMiB, 8, CommAlgo::kTmaPush, 64, h).us);
}

TEST(EstimateComm, NcclSymmetricClosedForm) {
  // NCCL's symmetric kernels, AllReduce of 128 MiB among 8 on 4 CTAs: 4 x 47.2 = 188.8 GB/s of link bytes (below the
  // link's 450 x 0.80 = 360), 2 x 7/8 x 134.2 MB = 234.9 MB -> 1244 us; 2 barriers x 0.7 us + 8 us launch. HBM 2 x
  // 134.2 MB / 4200 GB/s = 64 us, not binding. From 8 CTAs (377.6 GB/s) the link binds.
  const double s = 128.0 * kMiB;
  const CommAlgo sym = CommAlgo::kNcclSymmetric;
  EXPECT_NEAR(estimate_collective(Collective::kAllReduce, 128 * kMiB, 8, sym, 4, kH200).us,
              8.0 + 2 * 0.7 + 1.75 * s / (4 * 47.2e3), 1e-6);
  EXPECT_NEAR(estimate_collective(Collective::kAllReduce, 128 * kMiB, 8, sym, 8, kH200).us,
              8.0 + 2 * 0.7 + 1.75 * s / 360e3, 1e-6);
  // ReduceScatter and AllGather: one pass (7/8 of the buffer over the link), one barrier.
  for (Collective c : {Collective::kReduceScatter, Collective::kAllGather}) {
    EXPECT_NEAR(estimate_collective(c, 128 * kMiB, 8, sym, 16, kH200).us, 8.0 + 0.7 + 0.875 * s / 360e3, 1e-6)
        << to_string(c);
  }
  // Fewer steps than the ring (14 for AllReduce among 8) on the link's rate: faster at any size.
  EXPECT_LT(estimate_collective(Collective::kAllReduce, kMiB, 8, sym, 24, kH200).us,
            estimate_collective(Collective::kAllReduce, kMiB, 8, CommAlgo::kNcclRing, 24, kH200).us);
  // On no CTA (CTA policy zero), an AllGather on the copy engines: 7/8 of the buffer at copy_engine_GBps (0: the
  // link's 450 GB/s), between two flags, after NCCL's launch; HBM 2 x 7/8 + 2/8 bytes per buffer byte (not binding).
  EXPECT_NEAR(estimate_collective(Collective::kAllGather, 128 * kMiB, 8, sym, 0, kH200).us,
              8.0 + 2 * 0.7 + 0.875 * s / 450e3, 1e-6);
  Hardware slow = kH200;
  slow.fit.copy_engine_GBps = 100;
  EXPECT_NEAR(estimate_collective(Collective::kAllGather, 128 * kMiB, 8, sym, 0, slow).us,
              8.0 + 2 * 0.7 + 0.875 * s / 100e3, 1e-6);
  // Only an AllGather goes to the copy engines; other algorithms need a CTA; several nodes are refused.
  test::expect_error_naming([&] { estimate_collective(Collective::kAllReduce, kMiB, 8, sym, 0, kH200); }, "AllGather");
  test::expect_error_naming(
      [&] { estimate_collective(Collective::kAllGather, kMiB, 8, CommAlgo::kNcclRing, 0, kH200); }, "ctas = 0");
  test::expect_error_naming([&] { estimate_collective(Collective::kAllGather, kMiB, 16, sym, 8, kH200, 2); },
                            "one node");
  // A world of one: NCCL's one-rank copy.
  EXPECT_DOUBLE_EQ(estimate_collective(Collective::kAllReduce, 64 * kMiB, 1, sym, 24, kH200).us,
                   estimate_collective(Collective::kAllReduce, 64 * kMiB, 1, CommAlgo::kNcclRing, 24, kH200).us);
}

TEST(EstimateComm, WorldOneIsALocalCopy) {
  // NCCL with one rank: 8 us + 2 x 64 MiB / 4200 GB/s (read + write at HBM speed); busbw 0.
  const CommEstimate e = estimate_collective(Collective::kAllReduce, 64 * kMiB, 1, CommAlgo::kNcclRing, 24, kH200);
  EXPECT_NEAR(e.us, 8.0 + 2.0 * 64 * kMiB / 4200e3, 1e-6);
  EXPECT_DOUBLE_EQ(e.busbw_GBps, 0.0);
  // A copy by 16 CTAs: 16 x 100 GB/s (read + written) = 1600 GB/s < HBM: 4 us + 2 x 1 GiB / 1600 GB/s.
  const CommEstimate c16 = estimate_copy(1024 * kMiB, 16, kH200);
  EXPECT_NEAR(c16.us, 4.0 + 2.0 * 1024 * kMiB / 1600e3, 1e-6);
  EXPECT_NEAR(c16.busbw_GBps, 2 * c16.algbw_GBps, 1e-9);
  // From 42 CTAs on, HBM (4200 GB/s) caps it.
  EXPECT_DOUBLE_EQ(estimate_copy(1024 * kMiB, 64, kH200).us, estimate_copy(1024 * kMiB, 132, kH200).us);
}

TEST(EstimateComm, NeverFasterWithMoreBytes) {
  const Hardware lb = loopback_hardware(kH200, 4);
  for (const Hardware* hw : {&kH200, &lb}) {
    for (Collective c : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather}) {
      for (CommAlgo a : {CommAlgo::kNcclRing, CommAlgo::kNcclNvls, CommAlgo::kTmaPush, CommAlgo::kTmaPull,
                         CommAlgo::kNcclSymmetric}) {
        for (int world : {1, 2, 4, 8, 16, 32}) {
          const int nodes = world > 8 ? world / 8 : 1;
          if (nodes > 1 && (!is_nccl(a) || a == CommAlgo::kNcclSymmetric)) continue;
          for (int ctas : {1, 8, 24, 64}) {
            double prev = 0;
            for (int64_t bytes = 0; bytes <= (int64_t(4) << 30); bytes = bytes ? bytes * 2 : 1) {
              const double t = estimate_collective(c, bytes, world, a, ctas, *hw, nodes).us;
              EXPECT_GE(t, prev) << to_string(c) << " " << to_string(a) << " world " << world << " bytes " << bytes;
              prev = t;
            }
          }
        }
      }
    }
  }
}

TEST(EstimateComm, SeveralNodes) {
  // 2 nodes of 8: intra-node reduce-scatter and all-gather over NVLink, and an AllReduce of S/8 per GPU between
  // the nodes over 50 GB/s x 0.8 NICs: the network's share 2 x 1/2 x S/8 / 40 GB/s dominates.
  const int64_t s = 1024 * kMiB;
  const double one = estimate_collective(Collective::kAllReduce, s, 8, CommAlgo::kNcclRing, 32, kH200).us;
  const double two = estimate_collective(Collective::kAllReduce, s, 16, CommAlgo::kNcclRing, 32, kH200, 2).us;
  EXPECT_GT(two, one);
  EXPECT_GE(two, double(s) / 8 / 40e3);
  EXPECT_THROW(estimate_collective(Collective::kAllReduce, s, 16, CommAlgo::kTmaPush, 32, kH200, 2), Error);
  EXPECT_THROW(estimate_collective(Collective::kAllReduce, s, 12, CommAlgo::kNcclRing, 32, kH200, 5), Error);
}

TEST(EstimateComm, Loopback) {
  // 4 virtual ranks on one H200 (loopback_hardware): each rank's HBM share is 1050 GB/s, its "link" 525 GB/s, and
  // each rank's share of a CTA 56 / 4 = 14 GB/s (the benchmark's CTAs drive all four ranks).
  // Push-reduce ReduceScatter of 64 MiB (CTA work and HBM 3 - 1/4 = 2.75 bytes per buffer byte) with 128 CTAs
  // (1792 GB/s per rank): HBM 2.75 x S / 1050 GB/s binds (the four ranks together move 11 S through the device's
  // 4200 GB/s: the same time). With 32 CTAs (448 GB/s per rank) the CTAs bind.
  const Hardware lb = loopback_hardware(push56(), 4);
  EXPECT_DOUBLE_EQ(lb.fit.tma_push_per_cta_GBps, 14.0);
  const double s = 64.0 * kMiB;
  const CommEstimate e = estimate_collective(Collective::kReduceScatter, 64 * kMiB, 4, CommAlgo::kTmaPush, 128, lb);
  EXPECT_NEAR(e.us, lb.fit.tma_launch_us + lb.fit.link_latency_us + 2.75 * s / 1050e3, 1e-6);
  EXPECT_NEAR(2.75 * s / 1050e3, 4 * 2.75 * s / 4200e3, 1e-9);
  const CommEstimate e32 = estimate_collective(Collective::kReduceScatter, 64 * kMiB, 4, CommAlgo::kTmaPush, 32, lb);
  EXPECT_NEAR(e32.us, lb.fit.tma_launch_us + lb.fit.link_latency_us + 2.75 * s / 448e3, 1e-6);
}

TEST(EstimateComm, LoopbackRankZeroPushCountsTheEmulationsBytes) {
  // Rank 0's share with the push mover (loopback_hardware(..., kRank0)): rank 0's pieces zeroed and all W = 8
  // sources added into them. ReduceScatter: 1/8 + 8 x 1/8 x 3 = 3.125 bytes per buffer byte (a real rank: 2.875);
  // AllReduce adds the copy-in of the 7 other pieces, 2 x 7/8: 4.875 (a real rank: 3.875). 64 MiB, 16 CTAs at 56
  // GB/s (896 GB/s) bind: the "link" is HBM (4200 GB/s) and so is the HBM share, both far faster.
  const double s = 64.0 * kMiB;
  const Hardware lb = loopback_hardware(push56(), 8, LoopbackShare::kRank0);
  ASSERT_TRUE(lb.emulation.loopback_rank0);
  const CommEstimate rs = estimate_collective(Collective::kReduceScatter, 64 * kMiB, 8, CommAlgo::kTmaPush, 16, lb);
  EXPECT_NEAR(rs.us, lb.fit.tma_launch_us + lb.fit.link_latency_us + 3.125 * s / 896e3, 1e-6);
  const CommEstimate ar = estimate_collective(Collective::kAllReduce, 64 * kMiB, 8, CommAlgo::kTmaPush, 16, lb);
  EXPECT_NEAR(ar.us, lb.fit.tma_launch_us + 2 * lb.fit.link_latency_us + 4.875 * s / 896e3, 1e-6);
  // tma-pull already counts what the emulation moves: AR (1 + 1/8) + 2 x 7/8 = 2.875 CTA bytes per 1.75 link bytes.
  EXPECT_NEAR(cta_bytes_per_link_byte(Collective::kAllReduce, CommAlgo::kTmaPull, 8, true), 2.875 / 1.75, 1e-12);
  EXPECT_FALSE(loopback_hardware(push56(), 8, LoopbackShare::kWholeWorld).emulation.loopback_rank0);
  // What the simulator scales its caps by: CTA bytes per link byte, 4.875 / (2 x 7/8) for the rank-0 AllReduce.
  EXPECT_NEAR(cta_bytes_per_link_byte(Collective::kAllReduce, CommAlgo::kTmaPush, 8, true), 4.875 / 1.75, 1e-12);
}

TEST(EstimateComm, LoopbackRankZeroNcclCallIsTheSimtKernel) {
  // Rank 0's share of an NCCL-algorithm call in loopback is one SIMT kernel (no ring): ReduceScatter reduces rank 0's
  // piece, 8 reads and a write of 1/8 of the buffer (1.125 bytes per buffer byte); AllReduce also copies the 7 other
  // reduced pieces in (+ 1.75: 2.875); AllGather copies all 8 owners' pieces (2). No steps, a plain launch, the SIMT
  // per-CTA rate: 64 MiB on 16 CTAs at 32 GB/s (512 GB/s) binds; on 132 CTAs (4224 GB/s) HBM (4200 GB/s) does.
  EXPECT_DOUBLE_EQ(loopback_rank0_nccl_bytes(Collective::kReduceScatter, 8), 1.125);
  EXPECT_DOUBLE_EQ(loopback_rank0_nccl_bytes(Collective::kAllReduce, 8), 2.875);
  EXPECT_DOUBLE_EQ(loopback_rank0_nccl_bytes(Collective::kAllGather, 8), 2.0);
  const Hardware h200 = builtin_hardware("h200");
  const Hardware lb = loopback_hardware(h200, 8, LoopbackShare::kRank0);
  EXPECT_DOUBLE_EQ(lb.fit.nccl_per_cta_GBps, h200.fit.simt_per_cta_GBps);
  EXPECT_DOUBLE_EQ(lb.fit.nccl_launch_us, h200.fit.tma_launch_us);
  const double s = 64.0 * kMiB;
  for (const auto& [c, bytes] : {std::pair{Collective::kReduceScatter, 1.125}, std::pair{Collective::kAllReduce, 2.875},
                                 std::pair{Collective::kAllGather, 2.0}}) {
    const CommEstimate e16 = estimate_collective(c, 64 * kMiB, 8, CommAlgo::kNcclRing, 16, lb);
    EXPECT_NEAR(e16.us, h200.fit.tma_launch_us + bytes * s / (16 * 32e3), 1e-6) << to_string(c);
    const CommEstimate e132 = estimate_collective(c, 64 * kMiB, 8, CommAlgo::kNcclRing, 132, lb);
    EXPECT_NEAR(e132.us, h200.fit.tma_launch_us + bytes * s / 4200e3, 1e-6) << to_string(c);
  }
  // A real rank's call is still the ring: NCCL's launch, 14 steps of link latency, 1.75 link bytes per buffer byte at
  // min(16 x 20, 450 x 0.8) = 320 GB/s (HBM's 3.75 bytes at 4200 GB/s are faster).
  const CommEstimate real = estimate_collective(Collective::kAllReduce, 64 * kMiB, 8, CommAlgo::kNcclRing, 16, h200);
  EXPECT_NEAR(real.us, h200.fit.nccl_launch_us + 14 * h200.fit.link_latency_us + 1.75 * s / 320e3, 1e-6);
  // A loopback profile's call that spans nodes (2 of 4 GPUs) is not the SIMT kernel either: NCCL's hierarchical ring,
  // whose network half alone (2 x 1/2 x 1/4 of the buffer at 16 x 20 = 320 GB/s) is longer than the SIMT price.
  const CommEstimate nodes = estimate_collective(Collective::kAllReduce, 64 * kMiB, 8, CommAlgo::kNcclRing, 16, lb, 2);
  EXPECT_GT(nodes.us, 0.25 * s / 320e3);
  EXPECT_GT(nodes.us, estimate_collective(Collective::kAllReduce, 64 * kMiB, 8, CommAlgo::kNcclRing, 16, lb).us);
}

TEST(EstimateComm, LoopbackRankZeroCallsWorkWhereRankZerosRowsAre) {
  // Rank 0 of 8 owns rows [0, 1024) of the 8192-row output. Decomposed in 4 chunks of 2048 rows: ReduceScatter's
  // work is all in chunk 0 (factor 8 x 1024 / 2048 = 4, one piece), AllReduce's in every chunk (factor 1, 8 pieces:
  // its own reduce and 7 copies), AllGather copies the 2 owners' blocks each chunk spans. Tile-signal's default plan
  // (one group per 128-row band): ReduceScatter works in the first 8 groups only (factor 8).
  const Hardware hw = builtin_hardware("h200");
  const auto factors = [](const std::vector<LoopbackCall>& calls) {
    std::vector<double> out;
    for (const LoopbackCall& c : calls) out.push_back(c.factor);
    return out;
  };
  const auto pieces = [](const std::vector<LoopbackCall>& calls) {
    std::vector<int> out;
    for (const LoopbackCall& c : calls) out.push_back(c.pieces);
    return out;
  };
  const Problem rs = make_problem(Op::kGemmReduceScatter, 8192, 8192, 2048, 8);
  Plan chunks = default_plan(Mode::kDecomposed, rs, hw, 16);
  chunks.chunks = 4;
  EXPECT_EQ(factors(loopback_rank0_calls(rs, chunks)), (std::vector<double>{4, 0, 0, 0}));
  EXPECT_EQ(pieces(loopback_rank0_calls(rs, chunks)), (std::vector<int>{1, 0, 0, 0}));
  const Problem ar = make_problem(Op::kGemmAllReduce, 8192, 8192, 2048, 8);
  EXPECT_EQ(factors(loopback_rank0_calls(ar, chunks)), (std::vector<double>{1, 1, 1, 1}));
  EXPECT_EQ(pieces(loopback_rank0_calls(ar, chunks)), (std::vector<int>{8, 8, 8, 8}));
  const Problem ag = make_problem(Op::kAllGatherGemm, 8192, 8192, 2048, 8);
  EXPECT_EQ(pieces(loopback_rank0_calls(ag, chunks)), (std::vector<int>{2, 2, 2, 2}));
  const Plan bands = default_plan(Mode::kTileSignal, rs, hw, 16);
  ASSERT_EQ(bands.tile_groups.size(), 64u);
  const std::vector<LoopbackCall> calls = loopback_rank0_calls(rs, bands);
  ASSERT_EQ(calls.size(), 64u);
  for (size_t g = 0; g < 64; ++g) {
    EXPECT_DOUBLE_EQ(calls[g].factor, g < 8 ? 8.0 : 0.0) << "group " << g;
    EXPECT_EQ(calls[g].pieces, g < 8 ? 1 : 0) << "group " << g;
  }
  // What the predictors apply: these on the rank-0 loopback profile with an NCCL algorithm (pieces x
  // loopback_piece_us), the factor alone with a TMA mover (it plays rank 0's pieces too, in a kernel with no per-piece
  // term), nothing on a real GPU's profile.
  Hardware lb = loopback_hardware(hw, 8, LoopbackShare::kRank0);
  lb.fit.loopback_piece_us = 0.5;
  const std::vector<CallAdjust> adj = call_adjustments(rs, chunks, lb);
  ASSERT_EQ(adj.size(), 4u);
  EXPECT_DOUBLE_EQ(adj[0].factor, 4.0);
  EXPECT_DOUBLE_EQ(adj[0].extra_us, 0.5);
  EXPECT_DOUBLE_EQ(adj[1].factor, 0.0);
  EXPECT_DOUBLE_EQ(adj[1].extra_us, 0.0);
  Plan tma = chunks;
  tma.comm_algo = CommAlgo::kTmaPush;
  const std::vector<CallAdjust> moved = call_adjustments(rs, tma, lb);
  ASSERT_EQ(moved.size(), 4u);
  EXPECT_DOUBLE_EQ(moved[0].factor, 4.0);
  EXPECT_DOUBLE_EQ(moved[1].factor, 0.0);
  for (const CallAdjust& a : moved) EXPECT_DOUBLE_EQ(a.extra_us, 0.0);
  // A real GPU's profile: a TMA mover's calls as they are; NCCL's ReduceScatter chunks (none the whole buffer) as the
  // executor runs them, an ncclReduce per owner of the chunk's rows, whose ring carries the chunk's bytes on every
  // link: W / (W - 1) those of a ReduceScatter of them. A GEMM+AR's chunks are AllReduces of their rows.
  for (const CallAdjust& a : call_adjustments(rs, tma, hw)) EXPECT_DOUBLE_EQ(a.factor, 1.0);
  for (const CallAdjust& a : call_adjustments(rs, chunks, hw)) EXPECT_DOUBLE_EQ(a.factor, 8.0 / 7);
  for (const CallAdjust& a : call_adjustments(ar, chunks, hw)) EXPECT_DOUBLE_EQ(a.factor, 1.0);
  for (const CallAdjust& a : call_adjustments(rs, default_plan(Mode::kSequential, rs, hw, 16), hw))
    EXPECT_DOUBLE_EQ(a.factor, 1.0);  // the whole buffer: one ncclReduceScatter
  for (const Plan& p : {chunks, tma})
    for (const CallAdjust& a : call_adjustments(rs, p, hw)) EXPECT_DOUBLE_EQ(a.extra_us, 0.0);
}

TEST(EstimateComm, TmaMoverLinkLoadIsItsBusiestRun) {
  // Rank 0's share of a GEMM+AR group of 128 rows x 8192 columns in a world of 8: 8 pieces of 16 rows (256 KiB), each
  // 6 chunks (5 of 48 KiB, one of 16 KiB). tma-push: rank 0's sum is 6 chunks x 8 sources (units 0-47, source 0
  // rank 0's own, no link bytes), then each peer's sum is copied in (units 48-89, all link bytes): 3.5 MiB of link
  // bytes in 90 units. On 8 CTAs CTA 7 takes units 78-89, the 512 KiB of peers 6 and 7 (8/7 of an even 448); on 16
  // CTAs, runs of 5 or 6 units, CTA 6 takes units 33-38, sources 1-6 of chunk 4, 288 KiB of an even 224 (9/7).
  const Problem ar = make_problem(Op::kGemmAllReduce, 8192, 8192, 1024, 8);
  EXPECT_NEAR(tma_mover_link_load(ar, 0, 128, CommAlgo::kTmaPush, 8), 8.0 / 7, 1e-12);
  EXPECT_NEAR(tma_mover_link_load(ar, 0, 128, CommAlgo::kTmaPush, 16), 9.0 / 7, 1e-12);
  // tma-pull sums rank 0's piece in 43 units of 6 KiB slots (7 peers' each); CTA 9 (units 47-52) carries the last
  // two chunks of peer 1's piece and the first four of peer 2's, 256 KiB: 8/7.
  EXPECT_NEAR(tma_mover_link_load(ar, 0, 128, CommAlgo::kTmaPull, 16), 8.0 / 7, 1e-12);
  // ReduceScatter: only rank 0's sum of its 2 MiB, 43 chunks x 8 sources (344 units, runs of 21 or 22 on 16 CTAs); a
  // run of 22 with two of source 0's units carries 20 x 48 KiB of the 14 MiB of link bytes: 15/14.
  const Problem rs = make_problem(Op::kGemmReduceScatter, 8192, 8192, 1024, 8);
  EXPECT_NEAR(tma_mover_link_load(rs, 0, 128, CommAlgo::kTmaPush, 16), 15.0 / 14, 1e-12);
  // Nothing to deal unevenly: a world of one, a call without rows, ReduceScatter rows outside rank 0's block.
  EXPECT_DOUBLE_EQ(
      tma_mover_link_load(make_problem(Op::kGemmAllReduce, 8192, 8192, 1024, 1), 0, 128, CommAlgo::kTmaPush, 16), 1.0);
  EXPECT_DOUBLE_EQ(tma_mover_link_load(ar, 128, 128, CommAlgo::kTmaPush, 16), 1.0);
  EXPECT_DOUBLE_EQ(tma_mover_link_load(rs, 1024, 1152, CommAlgo::kTmaPush, 16), 1.0);
  test::expect_error_naming([&] { tma_mover_link_load(ar, 0, 128, CommAlgo::kNcclRing, 16); }, "nccl");
  test::expect_error_naming([&] { tma_mover_link_load(ar, 0, 128, CommAlgo::kTmaPush, 0); }, "ctas = 0");
  // What the predictors apply (call_adjustments): each call's load where a paced loopback's TMA mover moves it (the
  // tma mode's 64 band groups alike), 1 unpaced.
  const Hardware h100 = builtin_hardware("h100");
  const Hardware paced = loopback_hardware(h100, 8, LoopbackShare::kRank0, builtin_link_profile("nvlink4-node8"));
  Plan tma = default_plan(Mode::kTma, ar, paced, 16);
  tma.tile_order = TileOrder::kRowBand;
  const std::vector<CallAdjust> adj = call_adjustments(ar, tma, paced);
  ASSERT_EQ(adj.size(), 64u);
  for (const CallAdjust& a : adj) EXPECT_NEAR(a.link_load, 9.0 / 7, 1e-12);
  for (const Hardware& h : {h100, loopback_hardware(h100, 8, LoopbackShare::kRank0)})
    for (const CallAdjust& a : call_adjustments(ar, tma, h)) EXPECT_DOUBLE_EQ(a.link_load, 1.0);
}

}  // namespace
}  // namespace ovl
