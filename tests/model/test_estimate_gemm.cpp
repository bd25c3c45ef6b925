// GEMM time on n SMs: closed-form cases with the H200 profile calibrated on the 2026-12-02 bench_gemm run
// (scripts/validate-h200.sh), the clock curve, cuBLAS on partitions, and properties.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "expect_error.hpp"
#include "ovl/error.hpp"
#include "ovl/model/estimate.hpp"

namespace ovl {
namespace {

const Hardware kH200 = builtin_hardware("h200");

TEST(EstimateGemm, ClosedFormFullDevice) {
  // 8192^3 bf16 on 132 SMs, 128x256 tiles: 64 x 32 = 2048 tiles; 2048 / 132 = 15.5 -> 16 waves, the last
  // (2048 - 15 x 132) / 132 = 68 / 132 full. Busy SMs on average 2048 / 16 = 128: clock factor
  // (max(128, 74) / 132)^0.49 = 0.98503. One tile: 2 x 128 x 256 x 8192 FLOP / (989.4/132 TFLOP/s x 0.702)
  // = 102.03 us x 0.98503 = 100.51 us, + 2.91 us epilogue = 103.42 us (the H200 run measured 103.4 us per wave).
  // Total = 1.53 us launch + 16 x 103.42 = 1656.2 us (measured 1654 us on the H200).
  const GemmEstimate e = estimate_gemm({8192, 8192, 8192}, GemmImpl::kOvl, 132, TileShape{}, kH200);
  EXPECT_EQ(e.tiles, 2048);
  EXPECT_EQ(e.waves, 16);
  EXPECT_NEAR(e.tail_fraction, 68.0 / 132.0, 1e-12);
  const double clock = std::pow(128.0 / 132.0, 0.49);
  EXPECT_NEAR(matrix_clock_factor(kH200, 128), clock, 1e-12);
  const double tile_us = 2.0 * 128 * 256 * 8192 / (989.4 / 132 * 1e6 * 0.702) * clock + 2.91;
  EXPECT_NEAR(e.us, 1.53 + 16 * tile_us, 1e-6);
  EXPECT_NEAR(e.us, 1656.2, 0.1);
  EXPECT_FALSE(e.memory_bound);
  EXPECT_NEAR(e.wave_us, tile_us, 1e-9);
}

TEST(EstimateGemm, ClockFactor) {
  // Below the knee (74 busy SMs) the clock is at its maximum: factor (74 / 132)^0.49 = 0.7530; above it
  // (busy / 132)^0.49; 1 with every SM busy; a profile with clock_exponent 0 has a constant clock.
  EXPECT_NEAR(matrix_clock_factor(kH200, 132), 1.0, 1e-12);
  EXPECT_NEAR(matrix_clock_factor(kH200, 8), std::pow(74.0 / 132.0, 0.49), 1e-12);
  EXPECT_NEAR(matrix_clock_factor(kH200, 74), 0.7530, 1e-4);
  EXPECT_NEAR(matrix_clock_factor(kH200, 100), std::pow(100.0 / 132.0, 0.49), 1e-12);
  Hardware flat = kH200;
  flat.fit.clock_exponent = 0;
  EXPECT_DOUBLE_EQ(matrix_clock_factor(flat, 8), 1.0);
}

TEST(EstimateGemm, ClosedFormHalfDevice) {
  // The same GEMM on 66 SMs: 2048 / 66 = 31.03 -> 32 waves, busy 64 SMs (below the knee): each wave costs the
  // 132-SM wave with the clock factor (74/132)^0.49 in place of (128/132)^0.49 on its matrix part.
  const GemmEstimate half = estimate_gemm({8192, 8192, 8192}, GemmImpl::kOvl, 66, TileShape{}, kH200);
  EXPECT_EQ(half.waves, 32);
  const double tile_us = 2.0 * 128 * 256 * 8192 / (989.4 / 132 * 1e6 * 0.702) * std::pow(74.0 / 132.0, 0.49) + 2.91;
  EXPECT_NEAR(half.us, 1.53 + 32 * tile_us, 1e-6);
  // With a constant clock it is exactly twice the 132-SM time (16 waves).
  Hardware flat = kH200;
  flat.fit.clock_exponent = 0;
  const GemmEstimate f132 = estimate_gemm({8192, 8192, 8192}, GemmImpl::kOvl, 132, TileShape{}, flat);
  const GemmEstimate f66 = estimate_gemm({8192, 8192, 8192}, GemmImpl::kOvl, 66, TileShape{}, flat);
  EXPECT_NEAR(f66.us - 1.53, 2.0 * (f132.us - 1.53), 1e-6);
}

TEST(EstimateGemm, CublasOnPartitions) {
  // An H200 run: cuBLAS 8192^3 nn took 1603 us on 132 SMs, 1648 us on
  // 124 (1.028x, not the 1.14x of an early measurement) and 1699 us on 116 (1.060x): less than proportional
  // (132/124 = 1.065) because the clock rises as SMs are removed; no partition penalty (calibrated 0).
  // The model: (tiles / n) x (F (n / 132)^0.49 / 0.710 + 1.48) + 1.53.
  const double f = 2.0 * 128 * 256 * 8192 / (989.4 / 132 * 1e6 * 0.710);
  auto model = [&](double n) { return 1.53 + 2048.0 / n * (f * std::pow(n / 132.0, 0.49) + 1.48); };
  const double full = estimate_gemm({8192, 8192, 8192}, GemmImpl::kCublas, 132, TileShape{}, kH200).us;
  const double on124 = estimate_gemm({8192, 8192, 8192}, GemmImpl::kCublas, 124, TileShape{}, kH200).us;
  const double on116 = estimate_gemm({8192, 8192, 8192}, GemmImpl::kCublas, 116, TileShape{}, kH200).us;
  EXPECT_NEAR(full, model(132), 1e-6);
  EXPECT_NEAR(on124, model(124), 1e-6);
  EXPECT_NEAR(full, 1603.3, 1603.3 * 0.03);  // measured, within the run's ~3% noise
  EXPECT_NEAR(on124, 1648.0, 1648.0 * 0.03);
  EXPECT_NEAR(on116, 1698.6, 1698.6 * 0.03);
  // A penalty, where a profile sets one, multiplies the matrix part on a partition (ramping over one granule).
  Hardware penalized = kH200;
  penalized.fit.cublas_partition_penalty = 0.06;
  const double p124 = estimate_gemm({8192, 8192, 8192}, GemmImpl::kCublas, 124, TileShape{}, penalized).us;
  EXPECT_NEAR(p124, 1.53 + 2048.0 / 124 * (f * std::pow(124 / 132.0, 0.49) * 1.06 + 1.48), 1e-6);
  EXPECT_NEAR(estimate_gemm({8192, 8192, 8192}, GemmImpl::kCublas, 132, TileShape{}, penalized).us, full, 1e-9);
}

TEST(EstimateGemm, CublasSplitsKOnFewerTilesThanSms) {
  // H100 (constant clock, cuBLAS 0.795, epilogue 0.5 us, launch 4 us). 512 x 4096 x 4096: 4 x 16 = 64 tiles of
  // 128x256, 64 k-blocks each, on 132 SMs. 132 / 64 = 2 pieces per tile fit the SMs once: one round of pieces of
  // 32 k-blocks + 2.4 (the partial's write), then the read of 2 partials (3 each): (34.4 + 6) / 64 = 0.63125 of a
  // wave, where one wave of whole tiles was priced before (1.0) and the simulator's pool had run 64 / 132 = 0.485.
  // The AllGather+GEMM chunks of 512 rows (bench_autoplan-paced8, 8192x3968x4096 in 16 chunks) measured 0.68.
  const Hardware hw = builtin_hardware("h100");
  const double tile_us = 2.0 * 128 * 256 * 4096 / (989.4 / 132 * 1e6 * 0.795) + 0.5;
  const GemmEstimate split = estimate_gemm({512, 4096, 4096}, GemmImpl::kCublas, 132, TileShape{}, hw);
  EXPECT_EQ(split.tiles, 64);
  EXPECT_NEAR(split.waves_used, (32 + 2.4 + 2 * 3.0) / 64, 1e-12);
  EXPECT_NEAR(split.us, 4 + 0.63125 * tile_us, 1e-6);
  // 100 tiles (one piece each fits, not two): one wave of whole tiles.
  const GemmEstimate whole = estimate_gemm({640, 5120, 4096}, GemmImpl::kCublas, 132, TileShape{}, hw);
  EXPECT_EQ(whole.tiles, 100);
  EXPECT_NEAR(whole.us, 4 + tile_us, 1e-6);
  // From one wave on, the balanced tail: 264 tiles are 2 waves.
  const GemmEstimate two = estimate_gemm({1024, 8448, 4096}, GemmImpl::kCublas, 132, TileShape{}, hw);
  EXPECT_EQ(two.tiles, 264);
  EXPECT_NEAR(two.us, 4 + 2 * tile_us, 1e-6);
  // The shortest split: 8 tiles of K = 16384 (256 k-blocks) may take up to 16 pieces (not 132 / 8); 8 take
  // (32 + 2.4 + 8 x 3) / 256 = 0.228 of a wave, 16 (16 + 2.4 + 16 x 3) / 256 = 0.259, as the partials' reads grow.
  // Split-K only where it beats one wave: 4 tiles of K = 256 (4 k-blocks) in 2 would take (2 + 2.4 + 2 x 3) / 4 =
  // 2.6 waves, so they run as one.
  const GemmEstimate deep = estimate_gemm({256, 1024, 16384}, GemmImpl::kCublas, 132, TileShape{}, hw);
  EXPECT_EQ(deep.tiles, 8);
  EXPECT_NEAR(deep.waves_used, (32 + 2.4 + 8 * 3.0) / 256, 1e-12);
  const GemmEstimate shallow = estimate_gemm({512, 256, 256}, GemmImpl::kCublas, 132, TileShape{}, hw);
  EXPECT_EQ(shallow.tiles, 4);
  EXPECT_DOUBLE_EQ(shallow.waves_used, 1.0);
}

TEST(EstimateGemm, WaveQuantization) {
  // 132 tiles (12 x 11 of 128x256, a 1536 x 2816 output): one wave on 132 SMs, two on 124 (8 tiles left over).
  const GemmShape s{1536, 2816, 4096};
  const GemmEstimate on132 = estimate_gemm(s, GemmImpl::kOvl, 132, TileShape{}, kH200);
  const GemmEstimate on124 = estimate_gemm(s, GemmImpl::kOvl, 124, TileShape{}, kH200);
  EXPECT_EQ(on132.tiles, 132);
  EXPECT_EQ(on132.waves, 1);
  EXPECT_EQ(on124.waves, 2);
  EXPECT_NEAR(on124.tail_fraction, 8.0 / 124.0, 1e-12);
  // Both waves run with 66 SMs busy on average (132 / 2), under the knee: each wave is faster than the one wave
  // on 132 SMs by the clock, (74/132)^0.49 on the matrix part; so the time is less than twice.
  EXPECT_LT(on124.us - 1.53, 2.0 * (on132.us - 1.53));
  EXPECT_GT(on124.us - 1.53, 1.5 * (on132.us - 1.53));
}

TEST(EstimateGemm, MemoryFloor) {
  // 16384 x 16384 x 128 with efficiency 0.8 and a cheap epilogue (0.5 us): 8192 tiles of ~1.43 + 0.5 us, 63 waves
  // -> ~120 us of matrix work, but the 512 MiB output alone takes 537 MB / 4.2 TB/s = 128 us to write: memory
  // bound. (With the H200's calibrated 0.702 and 2.91 us epilogue the tiles' own time dominates: the measured
  // epilogue is where the store cost shows.)
  Hardware cheap = kH200;
  cheap.fit.gemm_efficiency = 0.8;
  cheap.fit.tile_epilogue_us = 0.5;
  const GemmEstimate e = estimate_gemm({16384, 16384, 128}, GemmImpl::kOvl, 132, TileShape{}, cheap);
  EXPECT_TRUE(e.memory_bound);
  EXPECT_GE(e.hbm_bytes, 16384.0 * 16384 * 2);
  EXPECT_NEAR(e.us, 1.53 + e.hbm_bytes / (4200 * 1e3), 1e-6);
  // On 8 SMs the per-SM load rate (8 x 100 GB/s), not the HBM, caps it.
  const GemmEstimate few = estimate_gemm({16384, 16384, 128}, GemmImpl::kOvl, 8, TileShape{}, cheap);
  EXPECT_GE(few.us, few.hbm_bytes / (800 * 1e3));
}

TEST(EstimateGemm, OperatorRegimeScalesTheComputeTime) {
  // The power state (ModelParams::operator_gemm_factor): inside an operator the compute time (matrix work and
  // epilogues) is the factor times the sustained one; the launch and the HBM floor are not scaled. 8192^3 on 132
  // SMs (ClosedFormFullDevice: 1.53 + 16 x 103.42 = 1656.2 us sustained) with factor 0.9:
  // 1.53 + 0.9 x 16 x 103.42 = 1490.7 us. A GEMM estimated alone stays in the sustained regime (1656.2 us).
  Hardware hw = kH200;
  hw.fit.operator_gemm_factor = 0.9;
  const GemmShape s{8192, 8192, 8192};
  const double tile_us = 2.0 * 128 * 256 * 8192 / (989.4 / 132 * 1e6 * 0.702) * std::pow(128.0 / 132.0, 0.49) + 2.91;
  const GemmEstimate op =
      estimate_gemm(s, GemmImpl::kOvl, 132, TileShape{}, TileOrder::kSwizzle, hw, GemmRegime::kOperator);
  EXPECT_NEAR(op.us, 1.53 + 0.9 * 16 * tile_us, 1e-6);
  EXPECT_NEAR(op.us, 1490.7, 0.1);
  EXPECT_NEAR(op.wave_us, 0.9 * tile_us, 1e-9);
  EXPECT_EQ(estimate_gemm(s, GemmImpl::kOvl, 132, TileShape{}, hw).us,
            estimate_gemm(s, GemmImpl::kOvl, 132, TileShape{}, kH200).us);
  // cuBLAS alike: 1.53 + 0.9 x (sustained - 1.53), to rounding (1e-9 us).
  const double cublas = estimate_gemm(s, GemmImpl::kCublas, 124, TileShape{}, kH200).us;
  EXPECT_NEAR(estimate_gemm(s, GemmImpl::kCublas, 124, TileShape{}, TileOrder::kSwizzle, hw, GemmRegime::kOperator).us,
              1.53 + 0.9 * (cublas - 1.53), 1e-9);
  EXPECT_DOUBLE_EQ(gemm_regime_factor(hw, GemmRegime::kOperator), 0.9);
  EXPECT_DOUBLE_EQ(gemm_regime_factor(hw, GemmRegime::kSustained), 1.0);
  // At the HBM floor (MemoryFloor's case) a faster clock changes nothing: 1.53 + bytes / 4.2 TB/s either way.
  Hardware cheap = hw;
  cheap.fit.gemm_efficiency = 0.8;
  cheap.fit.tile_epilogue_us = 0.5;
  const GemmEstimate floor = estimate_gemm({16384, 16384, 128}, GemmImpl::kOvl, 132, TileShape{}, TileOrder::kSwizzle,
                                           cheap, GemmRegime::kOperator);
  EXPECT_TRUE(floor.memory_bound);
  EXPECT_NEAR(floor.us, 1.53 + floor.hbm_bytes / (4200 * 1e3), 1e-6);
}

TEST(EstimateGemm, TileOrderChangesL2Reuse) {
  // 8192^3: B (128 MiB) does not fit the L2, so row-band order re-reads all of B for every ~4 bands in flight,
  // while swizzled blocks of ~12 x 11 tiles read about half as much.
  const GemmShape s{8192, 8192, 8192};
  const double band = estimate_gemm(s, GemmImpl::kOvl, 132, TileShape{}, TileOrder::kRowBand, kH200).hbm_bytes;
  const double swz = estimate_gemm(s, GemmImpl::kOvl, 132, TileShape{}, TileOrder::kSwizzle, kH200).hbm_bytes;
  EXPECT_GT(band, 1.5 * swz);
  // A problem whose operands fit the L2 reads each once: A + B + C.
  const GemmShape small{2048, 2048, 2048};
  const double fits = estimate_gemm(small, GemmImpl::kOvl, 132, TileShape{}, TileOrder::kRowBand, kH200).hbm_bytes;
  EXPECT_DOUBLE_EQ(fits, 3.0 * 2048 * 2048 * 2);
}

TEST(EstimateGemm, L2MissCostSlowsTheWalkThatMisses) {
  // 8192x8192x2048 on 132 SMs, H100 (L2 share 25 MiB): B (32 MiB) overflows it, so the row-band walk re-reads B for
  // every ~4 bands in flight: 688 MB from HBM, of which 554 MB operands (C 134 MB), 17.2% of what the 2048 tiles load
  // through the L2 (2048 x (128 + 256) x 2048 x 2 bytes = 3.22 GB); the swizzled walk reads 306 MB, 5.3%. With
  // gemm_l2_miss_cost c our GEMM's matrix time is 1 + c x that fraction times the all-hit time; cuBLAS's is not.
  Hardware hw = builtin_hardware("h100");
  const GemmShape s{8192, 8192, 2048};
  const double loads = 2048.0 * (128 + 256) * 2048 * 2, c_bytes = 8192.0 * 8192 * 2;
  for (double cost : {0.0, 1.0, 2.5}) {
    hw.fit.gemm_l2_miss_cost = cost;
    for (TileOrder order : {TileOrder::kRowBand, TileOrder::kSwizzle}) {
      const GemmEstimate e = estimate_gemm(s, GemmImpl::kOvl, 132, TileShape{}, order, hw);
      EXPECT_NEAR(e.l2_miss_factor, 1 + cost * (e.hbm_bytes - c_bytes) / loads, 1e-12);
      EXPECT_EQ(estimate_gemm(s, GemmImpl::kCublas, 132, TileShape{}, order, hw).l2_miss_factor, 1.0);
    }
  }
  hw.fit.gemm_l2_miss_cost = 1.0;
  const GemmEstimate band = estimate_gemm(s, GemmImpl::kOvl, 132, TileShape{}, TileOrder::kRowBand, hw);
  const GemmEstimate swz = estimate_gemm(s, GemmImpl::kOvl, 132, TileShape{}, TileOrder::kSwizzle, hw);
  EXPECT_NEAR(band.l2_miss_factor, 1.172, 0.001);
  EXPECT_NEAR(swz.l2_miss_factor, 1.053, 0.001);
  // The wave time (matrix work at the miss factor, + the epilogue) follows; the HBM floor (235 us) does not bind.
  const double matrix_us = 2.0 * 128 * 256 * 2048 / (989.4 / 132 * 1e6 * hw.fit.gemm_efficiency);
  EXPECT_NEAR(band.wave_us, matrix_us * band.l2_miss_factor + hw.fit.tile_epilogue_us, 1e-9);
  EXPECT_NEAR(swz.wave_us, matrix_us * swz.l2_miss_factor + hw.fit.tile_epilogue_us, 1e-9);
  EXPECT_FALSE(band.memory_bound);
}

TEST(EstimateGemm, MoreSmsNeverSlower) {
  // Our GEMM: waves W = ceil(tiles / n) never grows with n, and neither does the memory floor. The clock factor
  // rises with the busy SMs tiles / W, but W x (tiles / W)^e = W^(1 - e) tiles^e never rises as W falls (e <= 1);
  // so time never rises. (The speedup from n to n + 8 is at most one quantization step.)
  // cuBLAS: (tiles / n) x n^e = tiles x n^(e - 1) falls with n, and the penalty (when set) only rises as SMs are
  // removed.
  const GemmShape shapes[] = {{8192, 8192, 8192},  {4096, 14336, 4096}, {1024, 8192, 28672},
                              {16384, 16384, 128}, {256, 4096, 4096},   {8192, 1024, 65536}};
  for (const auto& s : shapes) {
    for (GemmImpl impl : {GemmImpl::kOvl, GemmImpl::kCublas}) {
      for (TileOrder order : {TileOrder::kRowBand, TileOrder::kSwizzle}) {
        double prev = 1e300;
        for (int n = 8; n <= 132; n += (n == 128 ? 4 : 8)) {
          const GemmEstimate e = estimate_gemm(s, impl, n, TileShape{}, order, kH200);
          EXPECT_LE(e.us, prev * (1 + 1e-12))
              << s.m << "x" << s.n << "x" << s.k << " " << to_string(impl) << " n=" << n;
          prev = e.us;
          if (impl == GemmImpl::kOvl) {
            // Never worse than perfect scaling from the n - 8 SMs' waves by more than one wave.
            const GemmEstimate smaller = estimate_gemm(s, impl, std::max(1, n - 8), TileShape{}, order, kH200);
            EXPECT_GE(e.waves, (smaller.waves * std::max(1, n - 8)) / n);
          }
        }
      }
    }
  }
}

TEST(EstimateGemm, DtypeAndErrors) {
  GemmShape s{4096, 4096, 4096, DType::kFP32};
  const GemmEstimate f32 = estimate_gemm(s, GemmImpl::kOvl, 132, TileShape{}, kH200);
  s.dtype = DType::kBF16;
  const GemmEstimate bf16 = estimate_gemm(s, GemmImpl::kOvl, 132, TileShape{}, kH200);
  // TF32 runs at half the bf16 rate: the matrix part doubles (the epilogue does not).
  EXPECT_GT(f32.us - 1.53 - bf16.waves * 2.91, 1.99 * (bf16.us - 1.53 - bf16.waves * 2.91));
  // FP8 runs at twice the bf16 rate: the matrix part halves (the epilogue does not).
  s.dtype = DType::kE4M3;
  const GemmEstimate fp8 = estimate_gemm(s, GemmImpl::kOvl, 132, TileShape{}, kH200);
  EXPECT_LT(fp8.us, 0.75 * bf16.us);
  EXPECT_GT(fp8.us, 0.45 * bf16.us);
  EXPECT_LT(fp8.hbm_bytes, bf16.hbm_bytes);  // half the operand bytes, the same bf16 C
  s.dtype = DType::kBF16;
  EXPECT_THROW(estimate_gemm(s, GemmImpl::kOvl, 0, TileShape{}, kH200), Error);
  EXPECT_THROW(estimate_gemm(s, GemmImpl::kOvl, 133, TileShape{}, kH200), Error);
  EXPECT_THROW(estimate_gemm({0, 8, 8}, GemmImpl::kOvl, 8, TileShape{}, kH200), Error);
}

// The stream-K split plan: none where the rounds are whole, K is too short for the partials to pay, or the input is
// degenerate; the remainder (plus whole rounds) in 2..16 pieces where the last round is sparse; every tile when there
// are fewer tiles than SMs.
TEST(EstimateGemm, StreamKPlans) {
  EXPECT_EQ(choose_stream_k(512, 64, 128).tiles, 0);  // 2048 x 8192 x 4096 in 128 x 256 tiles: 4 whole rounds of 128
  EXPECT_EQ(choose_stream_k(512, 16, 124).tiles, 0);  // K = 1024
  EXPECT_EQ(choose_stream_k(512, 1, 124).tiles, 0);
  EXPECT_EQ(choose_stream_k(0, 64, 124).tiles, 0);
  EXPECT_EQ(choose_stream_k(512, 64, 0).tiles, 0);
  for (int sms : {100, 116, 124}) {
    const TailPlan c = choose_stream_k(512, 64, sms);  // 4.1 to 5.1 rounds
    EXPECT_GT(c.tiles, 0) << sms;
    EXPECT_EQ((512 - c.tiles) % sms, 0) << sms << ": the whole tiles fill whole rounds";
    EXPECT_GE(c.splits, 2) << sms;
    EXPECT_LE(c.splits, 16) << sms;
  }
  const TailPlan few = choose_stream_k(64, 128, 132);  // 512 x 4096 x 8192: 64 tiles on 132 SMs
  EXPECT_EQ(few.tiles, 64);
  EXPECT_EQ(few.splits, 2);  // 128 pieces: one round
}

// Our GEMM with a split stream-K plan: faster than whole tiles where the last round is sparse, by less than the
// idle SMs alone suggest (the clock: more SMs busy in the tail clock lower); the same estimate without a plan; a
// plan that does not fit the tiles is refused.
TEST(EstimateGemm, StreamKPlan) {
  const GemmShape s{2048, 8192, 4096};  // 512 tiles: 4 rounds of 124 + 16
  const GemmEstimate whole = estimate_gemm(s, GemmImpl::kOvl, 124, TileShape{}, TileOrder::kSwizzle, kH200);
  const GemmEstimate none =
      estimate_gemm(s, GemmImpl::kOvl, 124, TileShape{}, TileOrder::kSwizzle, kH200, GemmRegime::kSustained, {});
  EXPECT_DOUBLE_EQ(none.us, whole.us);
  const GemmEstimate split = estimate_gemm(s, GemmImpl::kOvl, 124, TileShape{}, TileOrder::kSwizzle, kH200,
                                           GemmRegime::kSustained, TailPlan{16, 4});
  const double gain = 1.0 - split.us / whole.us;
  EXPECT_GT(gain, 0.01);
  EXPECT_LT(gain, 0.105);  // the k-block cost model alone (no clock) says 10.5%
  // More pieces than SMs take at once (128 on 124): two rounds of pieces, slower than one; an extra round of tiles
  // in pieces: slower too.
  const GemmEstimate two_rounds = estimate_gemm(s, GemmImpl::kOvl, 124, TileShape{}, TileOrder::kSwizzle, kH200,
                                                GemmRegime::kSustained, TailPlan{16, 8});
  const GemmEstimate crowded = estimate_gemm(s, GemmImpl::kOvl, 124, TileShape{}, TileOrder::kSwizzle, kH200,
                                             GemmRegime::kSustained, TailPlan{140, 2});
  EXPECT_LT(split.us, crowded.us);
  EXPECT_GT(two_rounds.us, split.us);
  EXPECT_THROW(estimate_gemm(s, GemmImpl::kOvl, 124, TileShape{}, TileOrder::kSwizzle, kH200, GemmRegime::kSustained,
                             TailPlan{513, 2}),
               Error);
  // cuBLAS ignores the plan.
  EXPECT_DOUBLE_EQ(estimate_gemm(s, GemmImpl::kCublas, 124, TileShape{}, TileOrder::kSwizzle, kH200,
                                 GemmRegime::kSustained, TailPlan{16, 4})
                       .us,
                   estimate_gemm(s, GemmImpl::kCublas, 124, TileShape{}, kH200).us);
}

// The tail plan: half tiles where the last round fills at most half the grid and the halves save enough (8192 x 4096
// x 1024 at 124 SMs: 8 rounds + 32 tiles); the stream-K plan where it is better (long K, 2048 x 8192 x 4096 at 124:
// pieces of 16 k-blocks beat halves of a whole tile's k-blocks); nothing where the last round is more than half full,
// or its halves save too little (34 rounds, 4 tiles in the last).
TEST(EstimateGemm, TailPlanChoice) {
  const TailPlan halves = choose_tail_plan(1024, 16, 124);
  EXPECT_EQ(halves.half_tiles, 32);
  EXPECT_EQ(halves.tiles, 0);
  const TailPlan long_k = choose_tail_plan(512, 64, 124);
  const TailPlan stream_k = choose_stream_k(512, 64, 124);
  EXPECT_EQ(long_k.half_tiles, 0);
  EXPECT_EQ(long_k.tiles, stream_k.tiles);
  EXPECT_EQ(long_k.splits, stream_k.splits);
  const TailPlan more_than_half = choose_tail_plan(2048, 32, 124);  // 16 rounds + 64 tiles
  EXPECT_EQ(more_than_half.half_tiles, 0);
  EXPECT_EQ(more_than_half.tiles, 0);
  EXPECT_EQ(choose_tail_plan(4096, 16, 124).half_tiles, 0);  // 33 rounds + 4: saves 1.2%
  EXPECT_EQ(choose_tail_plan(1024, 16, 128).half_tiles, 0);  // whole rounds
  EXPECT_EQ(choose_tail_plan(0, 16, 124).half_tiles, 0);
  EXPECT_EQ(choose_tail_plan(1024, 16, 0).half_tiles, 0);
  // The estimate with the halves: faster than whole tiles; a plan with more half tiles than tiles is refused.
  const GemmShape s{8192, 4096, 1024};
  const GemmEstimate whole = estimate_gemm(s, GemmImpl::kOvl, 124, TileShape{}, TileOrder::kSwizzle, kH200);
  const GemmEstimate half = estimate_gemm(s, GemmImpl::kOvl, 124, TileShape{}, TileOrder::kSwizzle, kH200,
                                          GemmRegime::kSustained, halves);
  EXPECT_LT(half.us, whole.us);
  EXPECT_GT(half.us, whole.us * (1.0 - (1.0 - kHalfTileTime) / 9.0) * 0.99);  // at most the rounds' saving
  EXPECT_THROW(estimate_gemm(s, GemmImpl::kOvl, 124, TileShape{}, TileOrder::kSwizzle, kH200, GemmRegime::kSustained,
                             TailPlan{0, 0, 1025}),
               Error);
}

// The measured rule (docs/performance.md): bands of 16 tile rows from K = 2048 on, 8 below.
TEST(ChooseSwizzle, TallBandsFromK2048) {
  EXPECT_EQ(choose_swizzle(16), 8);   // K = 1024
  EXPECT_EQ(choose_swizzle(31), 8);   // K = 1984
  EXPECT_EQ(choose_swizzle(32), 16);  // K = 2048
  EXPECT_EQ(choose_swizzle(128), 16);
  EXPECT_EQ(choose_swizzle(1), 8);
  EXPECT_THROW(choose_swizzle(0), Error);
  EXPECT_THROW(choose_swizzle(-3), Error);
}

// The measured rule (docs/kernels.md): the split epilogue when a CTA's share is
// at most 192 k-blocks and B is K-major.
TEST(ChooseSplitEpilogue, WhenACtasShareIsShort) {
  // 8192x4096x1024: 64 x 16 tiles of 16 k-blocks, 8-9 rounds at 116-132 SMs (128-144 k-blocks per CTA).
  for (int sms : {116, 124, 128, 132}) EXPECT_TRUE(choose_split_epilogue(1024, 16, sms, false)) << sms;
  // MN-major B (nn) never: the deferred epilogue ran 0.5-2.4% faster there (measured on the H200).
  for (int sms : {116, 124, 128, 132}) EXPECT_FALSE(choose_split_epilogue(1024, 16, sms, true)) << sms;
  EXPECT_FALSE(choose_split_epilogue(1, 1, 1, true));
  EXPECT_FALSE(choose_split_epilogue(1024, 16, 64, false));   // 16 rounds: 256
  EXPECT_FALSE(choose_split_epilogue(4096, 16, 124, false));  // 16384x8192x1024: 34 rounds
  EXPECT_FALSE(choose_split_epilogue(512, 64, 128, false));   // 2048x8192x4096: 4 rounds of 64
  EXPECT_FALSE(choose_split_epilogue(2048, 32, 128, false));  // 8192x8192x2048
  EXPECT_TRUE(choose_split_epilogue(12, 192, 132, false));    // one round of 192: the threshold itself
  EXPECT_FALSE(choose_split_epilogue(12, 193, 132, false));
  EXPECT_TRUE(choose_split_epilogue(1, 1, 1, false));
  EXPECT_TRUE(choose_split_epilogue(2 * 132, 96, 132, false));  // 2 rounds of 96
  EXPECT_FALSE(choose_split_epilogue(2 * 132 + 1, 96, 132, false));
  // Huge inputs answer no, without overflow.
  const int64_t huge = std::numeric_limits<int64_t>::max();
  EXPECT_FALSE(choose_split_epilogue(huge, 16, 1, false));
  EXPECT_FALSE(choose_split_epilogue(1, huge, 132, false));
  EXPECT_FALSE(choose_split_epilogue(huge, huge, 1, false));
  EXPECT_FALSE(choose_split_epilogue(huge, 1, std::numeric_limits<int>::max(), false));  // ~4.3e9 rounds
  test::expect_error_naming([] { choose_split_epilogue(0, 16, 124, false); }, "tiles = 0");
  test::expect_error_naming([] { choose_split_epilogue(1024, 0, 124, false); }, "k_blocks = 0");
  test::expect_error_naming([] { choose_split_epilogue(1024, 16, -1, false); }, "sms = -1");
}

}  // namespace
}  // namespace ovl
