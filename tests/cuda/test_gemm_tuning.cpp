// ovl::tune_gemm, which needs no GPU: what it sets for the benchmark shapes (the plans bench_gemm's `ovl` runs,
// results/h200/bench_gemm.json; the rules in docs/kernels.md), that what it sets is always accepted by gemm_can_implement, that
// it leaves the caller's other fields alone, and that a bad shape or SM count is refused by name.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "ovl/core/gemm.hpp"

namespace ovl {
namespace {

using kernels::GemmArguments;
using kernels::GemmEpilogue;

// Never dereferenced: gemm_can_implement only looks at the values.
GemmArguments arguments(int m, int n, int k, int sms) {
  GemmArguments args;
  args.m = m;
  args.n = n;
  args.k = k;
  args.sm_count = sms;
  args.a = reinterpret_cast<const void*>(uintptr_t{0x10000});
  args.b = reinterpret_cast<const void*>(uintptr_t{0x20000});
  args.d = reinterpret_cast<void*>(uintptr_t{0x30000});
  return args;
}

// FP8 k-blocks hold 128 elements in the bytes of bf16's 64: an FP8 GEMM gets the plan of the bf16 GEMM with half its K,
// which has as many k-blocks (and passes gemm_can_implement with its scales).
TEST(TuneGemm, Fp8PlansCountFp8KBlocks) {
  for (const int sms : {132, 124, 116}) {
    GemmArguments fp8 = arguments(8192, 4096, 2048, sms);
    fp8.dtype = DType::kE4M3;
    fp8.a_scale = reinterpret_cast<const float*>(uintptr_t{0x40000});
    fp8.b_scale = reinterpret_cast<const float*>(uintptr_t{0x40004});
    tune_gemm(fp8);
    GemmArguments bf16 = arguments(8192, 4096, 1024, sms);
    tune_gemm(bf16);
    EXPECT_EQ(fp8.swizzle, bf16.swizzle) << sms;
    EXPECT_EQ(fp8.half_tiles, bf16.half_tiles) << sms;
    EXPECT_EQ(fp8.stream_k_tiles, bf16.stream_k_tiles) << sms;
    EXPECT_EQ(fp8.stream_k_splits, bf16.stream_k_splits) << sms;
    EXPECT_EQ(fp8.epilogue, bf16.epilogue) << sms;
    EXPECT_EQ("", kernels::gemm_can_implement(fp8)) << sms;
  }
  // One DType for the model and the kernel: the GEMM refuses fp32 by name.
  GemmArguments fp32 = arguments(1024, 1024, 512, 64);
  fp32.dtype = DType::kFP32;
  EXPECT_NE(kernels::gemm_can_implement(fp32).find("dtype = fp32"), std::string::npos)
      << kernels::gemm_can_implement(fp32);
}

TEST(TuneGemm, BenchmarkShapesGetTheMeasuredPlans) {
  GemmArguments a = arguments(8192, 4096, 1024, 124);  // 1024 tiles: 32 in the last round, 16 k-blocks
  tune_gemm(a);
  EXPECT_EQ(a.tile_order, TileOrder::kSwizzle);
  EXPECT_EQ(a.swizzle, 8);
  EXPECT_EQ(a.half_tiles, 32);
  EXPECT_EQ(a.stream_k_tiles, 0);
  EXPECT_EQ(a.epilogue, GemmEpilogue::kTmaStoreSplit);
  GemmArguments a_nn = arguments(8192, 4096, 1024, 124);  // the same with MN-major B: deferred ran faster there
  a_nn.b_layout = BLayout::kKxN;
  tune_gemm(a_nn);
  EXPECT_EQ(a_nn.half_tiles, 32);
  EXPECT_EQ(a_nn.epilogue, GemmEpilogue::kTmaStoreDeferred);

  GemmArguments b = arguments(8192, 8192, 2048, 124);  // 17 rounds, the last half full: whole tiles
  tune_gemm(b);
  EXPECT_EQ(b.swizzle, 16);
  EXPECT_EQ(b.half_tiles, 0);
  EXPECT_EQ(b.stream_k_tiles, 0);
  EXPECT_EQ(b.epilogue, GemmEpilogue::kTmaStoreDeferred);

  GemmArguments c = arguments(2048, 8192, 4096, 124);  // 512 tiles: 16 in the last round, 64 k-blocks
  tune_gemm(c);
  EXPECT_EQ(c.swizzle, 16);
  EXPECT_EQ(c.stream_k_tiles, 16);
  EXPECT_EQ(c.stream_k_splits, 4);
  EXPECT_EQ(c.half_tiles, 0);
  EXPECT_EQ(c.epilogue, GemmEpilogue::kTmaStoreDeferred);

  GemmArguments d = arguments(16384, 8192, 1024, 128);  // 32 whole rounds of 16 k-blocks: too long to split
  tune_gemm(d);
  EXPECT_EQ(d.epilogue, GemmEpilogue::kTmaStoreDeferred);
  EXPECT_EQ(d.half_tiles + d.stream_k_tiles, 0);
}

TEST(TuneGemm, WhatItSetsIsAlwaysAccepted) {
  const std::vector<std::vector<int>> shapes = {{1, 8, 8},       {128, 256, 64},   {130, 264, 72},    {1000, 520, 136},
                                                {2048, 8192, 4096}, {8192, 4096, 1024}, {4096, 4096, 64}, {33, 40, 24},
                                                {16384, 8192, 1024}, {8192, 8192, 8192}};
  for (const auto& s : shapes) {
    for (int sms = 1; sms <= 132; sms += sms < 16 ? 1 : 7) {
      GemmArguments a = arguments(s[0], s[1], s[2], sms);
      tune_gemm(a);
      const std::string what = std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]) +
                               " on " + std::to_string(sms) + " SMs";
      const std::string why = kernels::gemm_can_implement(a);
      EXPECT_EQ("", why) << what;
      if (!why.empty()) continue;
      // What gemm_run would launch runs on at most the SMs it was given.
      const int grid = kernels::gemm_launch_plan(a).grid;
      EXPECT_GE(grid, 1) << what;
      EXPECT_LE(grid, sms) << what;
    }
  }
}

TEST(TuneGemm, LeavesTheCallersOtherFieldsAndUndoesExperiments) {
  GemmArguments a = arguments(1024, 1024, 512, 64);
  a.dtype = DType::kFP16;
  a.b_layout = BLayout::kKxN;
  a.output_layout = OutputLayout::kTileMajor;
  a.tile_groups = {16, 16};
  unsigned int counters[2] = {};
  a.group_counters = counters;
  a.tile_order = TileOrder::kRowBand;      // replaced by the swizzle
  a.epilogue = GemmEpilogue::kTmaStore;        // replaced (tune_gemm takes the split or the deferred one)
  a.stream_k_ctas = 3;                         // a contiguous stream-K leftover: cleared
  tune_gemm(a);
  EXPECT_EQ(a.dtype, DType::kFP16);
  EXPECT_EQ(a.b_layout, BLayout::kKxN);
  EXPECT_EQ(a.output_layout, OutputLayout::kTileMajor);
  EXPECT_EQ(a.tile_groups, (std::vector<int>{16, 16}));
  EXPECT_EQ(a.group_counters, counters);
  EXPECT_EQ(a.sm_count, 64);
  EXPECT_EQ(a.tile_order, TileOrder::kSwizzle);
  EXPECT_NE(a.epilogue, GemmEpilogue::kTmaStore);
  EXPECT_EQ(a.stream_k_ctas, 0);
  EXPECT_EQ("", kernels::gemm_can_implement(a));
}

TEST(TuneGemm, RefusesABadShapeOrSmCountByName) {
  const auto refuses = [](GemmArguments a, const std::string& needle) {
    test::expect_error_naming([&] { tune_gemm(a); }, needle);
  };
  refuses(arguments(0, 256, 64, 8), "0x256x64");
  refuses(arguments(128, -8, 64, 8), "128x-8x64");
  refuses(arguments(128, 256, 0, 8), "128x256x0");
  refuses(arguments(128, 256, 64, 0), "sm_count = 0");
  refuses(arguments(128, 256, 64, -4), "sm_count = -4");
}

}  // namespace
}  // namespace ovl
