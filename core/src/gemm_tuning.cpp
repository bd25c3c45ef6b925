#include "ovl/core/gemm.hpp"

#include "ovl/error.hpp"
#include "ovl/model/estimate.hpp"

namespace ovl {

void tune_gemm(kernels::GemmArguments& args) {
  OVL_CHECK(args.m > 0 && args.n > 0 && args.k > 0, "tune_gemm: GEMM shape {}x{}x{} must be positive", args.m,
            args.n, args.k);
  OVL_CHECK(args.sm_count > 0, "tune_gemm: sm_count = {} must be positive", args.sm_count);
  const kernels::GemmTileShape tile = kernels::gemm_tile_shape(args.dtype);  // FP8: k-blocks of 128 elements
  const int tiles = kernels::gemm_tile_count(args);
  const int k_blocks = (args.k + tile.k - 1) / tile.k;
  args.tile_order = TileOrder::kSwizzle;
  args.swizzle = choose_swizzle(k_blocks);
  const TailPlan tail = choose_tail_plan(tiles, k_blocks, args.sm_count);
  args.stream_k_tiles = tail.tiles;
  args.stream_k_splits = tail.splits;
  args.stream_k_ctas = 0;
  args.half_tiles = tail.half_tiles;
  args.epilogue = tuned_gemm_epilogue(args);
}

kernels::GemmEpilogue tuned_gemm_epilogue(const kernels::GemmArguments& args) {
  const int block_k = kernels::gemm_tile_shape(args.dtype).k;
  const int k_blocks = (args.k + block_k - 1) / block_k;
  const bool b_mn_major = args.b_layout == BLayout::kKxN;
  return choose_split_epilogue(kernels::gemm_tile_count(args), k_blocks, args.sm_count, b_mn_major)
             ? kernels::GemmEpilogue::kTmaStoreSplit
             : kernels::GemmEpilogue::kTmaStoreDeferred;
}

}  // namespace ovl
