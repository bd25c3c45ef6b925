// GEMM time on n SMs: closed-form cases, the cuBLAS calibration points of shared/DEVICE.md, and properties.
#include <gtest/gtest.h>

#include "ovl/error.hpp"
#include "ovl/model/estimate.hpp"

namespace ovl {
namespace {

const Hardware kH200 = builtin_hardware("h200");

TEST(EstimateGemm, ClosedFormFullDevice) {
  // 8192^3 bf16 on 132 SMs, 128x256 tiles: 64 x 32 = 2048 tiles; 2048 / 132 = 15.5 -> 16 waves, the last
  // (2048 - 15 x 132) / 132 = 68 / 132 full. One tile: 2 x 128 x 256 x 8192 FLOP / (989.4/132 TFLOP/s x 0.80)
  // = 89.53 us, + 0.5 us epilogue = 90.03 us. Total = 4 us launch + 16 x 90.03 = 1444.5 us.
  const GemmEstimate e = estimate_gemm({8192, 8192, 8192}, GemmImpl::kOvl, 132, TileShape{}, kH200);
  EXPECT_EQ(e.tiles, 2048);
  EXPECT_EQ(e.waves, 16);
  EXPECT_NEAR(e.tail_fraction, 68.0 / 132.0, 1e-12);
  const double tile_us = 2.0 * 128 * 256 * 8192 / (989.4 / 132 * 1e6 * 0.80) + 0.5;
  EXPECT_NEAR(e.us, 4.0 + 16 * tile_us, 1e-6);
  EXPECT_NEAR(e.us, 1444.5, 0.1);
  EXPECT_FALSE(e.memory_bound);
  EXPECT_NEAR(e.wave_us, tile_us, 1e-9);
}

TEST(EstimateGemm, ClosedFormHalfDevice) {
  // The same GEMM on 66 SMs: 2048 / 66 = 31.03 -> 32 waves, exactly twice the 16 waves' time on 132 SMs.
  const GemmEstimate full = estimate_gemm({8192, 8192, 8192}, GemmImpl::kOvl, 132, TileShape{}, kH200);
  const GemmEstimate half = estimate_gemm({8192, 8192, 8192}, GemmImpl::kOvl, 66, TileShape{}, kH200);
  EXPECT_EQ(half.waves, 32);
  EXPECT_NEAR(half.us - 4.0, 2.0 * (full.us - 4.0), 1e-6);
}

TEST(EstimateGemm, CublasMatchesDeviceMd) {
  // shared/DEVICE.md: cuBLAS 8192^3 bf16 ~780 TFLOP/s on the whole H200 (1409.6 us) ...
  const double flops = 2.0 * 8192.0 * 8192.0 * 8192.0;
  const GemmEstimate full = estimate_gemm({8192, 8192, 8192}, GemmImpl::kCublas, 132, TileShape{}, kH200);
  EXPECT_NEAR(flops / full.us / 1e6, 780.0, 780.0 * 0.01);
  // ... and on green-context partitions 1.14x its full-device time on 124 SMs, 1.19x on 116 (not 132/124 = 1.06).
  // The model: (132 / n) x (1 + 0.06 penalty) = 1.128 and 1.206, within 2% of each measurement.
  const double r124 = estimate_gemm({8192, 8192, 8192}, GemmImpl::kCublas, 124, TileShape{}, kH200).us / full.us;
  const double r116 = estimate_gemm({8192, 8192, 8192}, GemmImpl::kCublas, 116, TileShape{}, kH200).us / full.us;
  EXPECT_NEAR(r124, 1.14, 1.14 * 0.02);
  EXPECT_NEAR(r116, 1.19, 1.19 * 0.02);
  // Without the penalty, cuBLAS would scale proportionally: 132 / 124.
  Hardware no_penalty = kH200;
  no_penalty.cublas_partition_penalty = 0;
  const double p124 = estimate_gemm({8192, 8192, 8192}, GemmImpl::kCublas, 124, TileShape{}, no_penalty).us /
                      estimate_gemm({8192, 8192, 8192}, GemmImpl::kCublas, 132, TileShape{}, no_penalty).us;
  EXPECT_NEAR(p124, 132.0 / 124.0, 0.005);
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
  EXPECT_NEAR(on124.us - 4.0, 2.0 * (on132.us - 4.0), 1e-6);
}

TEST(EstimateGemm, MemoryFloor) {
  // 16384 x 16384 x 128: 8192 tiles of 1.43 + 0.5 us, 62 waves -> ~120 us of matrix work, but the 512 MiB
  // output alone takes 537 MB / 4.2 TB/s = 128 us to write: memory bound.
  const GemmEstimate e = estimate_gemm({16384, 16384, 128}, GemmImpl::kOvl, 132, TileShape{}, kH200);
  EXPECT_TRUE(e.memory_bound);
  EXPECT_GE(e.hbm_bytes, 16384.0 * 16384 * 2);
  EXPECT_NEAR(e.us, 4.0 + e.hbm_bytes / (4200 * 1e3), 1e-6);
  // On 8 SMs the per-SM load rate (8 x 100 GB/s), not the HBM, caps it.
  const GemmEstimate few = estimate_gemm({16384, 16384, 128}, GemmImpl::kOvl, 8, TileShape{}, kH200);
  EXPECT_GE(few.us, few.hbm_bytes / (800 * 1e3));
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

TEST(EstimateGemm, MoreSmsNeverSlower) {
  // Our GEMM: waves = ceil(tiles / n) never grows with n, and neither does the memory floor; so time never rises.
  // (The speedup from n to n + 8 is at most one quantization step: the waves fall by at most what 8 SMs give.)
  // cuBLAS: (tiles / n) x (1 + penalty) with the penalty only rising as SMs are removed.
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
  EXPECT_GT(f32.us, 1.8 * (bf16.us - 4.0));  // TF32 runs at half the bf16 rate
  EXPECT_THROW(estimate_gemm(s, GemmImpl::kOvl, 0, TileShape{}, kH200), Error);
  EXPECT_THROW(estimate_gemm(s, GemmImpl::kOvl, 133, TileShape{}, kH200), Error);
  EXPECT_THROW(estimate_gemm({0, 8, 8}, GemmImpl::kOvl, 8, TileShape{}, kH200), Error);
}

}  // namespace
}  // namespace ovl
