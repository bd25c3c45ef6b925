// Reorder of a tile-major GEMM output into row-major rows (the GEMM's OutputLayout::kTileMajor).
//
// Tile t = tile_row * tiles_n + tile_col occupies elements [t * tile_m * tile_n, (t + 1) * tile_m * tile_n) of the
// source, row-major inside the tile (row length tile_n); edge tiles keep their full slot. The reorder copies the
// whole tile rows [tile_row_begin, tile_row_end) into the row-major M x N destination (row length n), so a tile
// group made of whole bands becomes a contiguous band of rows that NCCL can send.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ovl::kernels {

struct ReorderArguments {
  const void* src = nullptr;       // tile-major, 16-byte aligned
  void* dst = nullptr;             // row-major M x N (element [r][c] at dst + (r * n + c)), 16-byte aligned
  std::int64_t m = 0, n = 0;       // n a multiple of 8 (16-byte vectors of 2-byte elements)
  int tile_m = 128, tile_n = 256;  // tile_n a multiple of 8
  int tile_row_begin = 0, tile_row_end = 0;
  int element_bytes = 2;  // bf16 / fp16
  int ctas = 0;           // 0: enough CTAs for one vector per thread, capped at 1024
};

// "" when the arguments can run, else a message naming the bad value.
const char* reorder_can_implement(const ReorderArguments& args);
// Enqueues the reorder on `stream`; throws ovl::Error on bad arguments or a launch error.
void reorder_tile_major_to_row_major(const ReorderArguments& args, cudaStream_t stream);

}  // namespace ovl::kernels
