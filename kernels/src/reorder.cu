// Tile-major -> row-major reorder (see ovl/kernels/reorder.hpp).
#include <algorithm>
#include <cstdint>

#include "ovl/cuda_check.hpp"
#include "ovl/kernels/reorder.hpp"

namespace ovl::kernels {
namespace {

// grid: any (grid-stride loop), block: 256 threads, no shared memory, any architecture.
// Thread i moves 16-byte vector i of the destination band: row r, columns [c, c + 8). A vector never straddles
// two tiles because tile_n and n are multiples of 8 elements. Plain loads and stores: ordering with the producer
// (the GEMM) and the consumer (the collective) comes from stream order.
__global__ void reorder_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, std::int64_t row_begin,
                               std::int64_t rows, std::int64_t n, int tile_m, int tile_n, std::int64_t tiles_n) {
  const std::int64_t vec_per_row = n / 8;
  const std::int64_t total = rows * vec_per_row;
  const std::int64_t tile_vecs = std::int64_t(tile_m) * tile_n / 8;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = row_begin + i / vec_per_row;
    const std::int64_t c = (i % vec_per_row) * 8;
    const std::int64_t tile = (r / tile_m) * tiles_n + c / tile_n;
    const std::int64_t in_tile = (r % tile_m) * (tile_n / 8) + (c % tile_n) / 8;
    dst[r * vec_per_row + c / 8] = __ldcs(src + tile * tile_vecs + in_tile);
  }
}

}  // namespace

const char* reorder_can_implement(const ReorderArguments& a) {
  if (a.src == nullptr || a.dst == nullptr) return "src or dst is a null pointer";
  if (reinterpret_cast<std::uintptr_t>(a.src) % 16 != 0 || reinterpret_cast<std::uintptr_t>(a.dst) % 16 != 0)
    return "src or dst is not 16-byte aligned";
  if (a.element_bytes != 2) return "element_bytes must be 2 (bf16 / fp16)";
  if (a.m <= 0 || a.n <= 0 || a.n % 8 != 0) return "m must be positive and n a positive multiple of 8";
  if (a.tile_m <= 0 || a.tile_n <= 0 || a.tile_n % 8 != 0) return "tile_m must be positive and tile_n a multiple of 8";
  const std::int64_t tiles_m = (a.m + a.tile_m - 1) / a.tile_m;
  if (a.tile_row_begin < 0 || a.tile_row_end < a.tile_row_begin || a.tile_row_end > tiles_m)
    return "tile rows [tile_row_begin, tile_row_end) are not within the tile rows of M";
  return "";
}

void reorder_tile_major_to_row_major(const ReorderArguments& a, cudaStream_t stream) {
  const char* why = reorder_can_implement(a);
  OVL_CHECK(why[0] == '\0', "reorder (m = {}, n = {}, tile rows [{}, {})): {}", a.m, a.n, a.tile_row_begin,
            a.tile_row_end, why);
  const std::int64_t row_begin = std::int64_t(a.tile_row_begin) * a.tile_m;
  const std::int64_t row_end = std::min<std::int64_t>(std::int64_t(a.tile_row_end) * a.tile_m, a.m);
  const std::int64_t rows = row_end - row_begin;
  if (rows <= 0) return;
  const std::int64_t vecs = rows * (a.n / 8);
  constexpr int kThreads = 256;
  const int ctas = a.ctas > 0 ? a.ctas : int(std::min<std::int64_t>((vecs + kThreads - 1) / kThreads, 1024));
  const std::int64_t tiles_n = (a.n + a.tile_n - 1) / a.tile_n;
  reorder_kernel<<<ctas, kThreads, 0, stream>>>(static_cast<const uint4*>(a.src), static_cast<uint4*>(a.dst), row_begin,
                                                rows, a.n, a.tile_m, a.tile_n, tiles_n);
  OVL_CUDA_CHECK_LAST();
}

}  // namespace ovl::kernels
