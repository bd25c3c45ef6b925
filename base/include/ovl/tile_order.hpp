// The GEMM's tile visiting order, written once for the kernel (kernels/src/gemm_sm90.cu) and the simulator
// (ovl::sim::tile_visit_order): host and device code.
#pragma once

#include "ovl/host_device.hpp"

namespace ovl {

// The tile id (row-major over tiles_m x tiles_n tiles) at `position` of the swizzle order (TileOrder::kSwizzle): bands
// of `swizzle` tile rows, the last one shorter when tiles_m is not a multiple, each band visited column by column
// (a wave of CTAs then reads few B panels).
OVL_HOST_DEVICE constexpr int swizzled_tile(int position, int swizzle, int tiles_m, int tiles_n) {
  const int band_tiles = swizzle * tiles_n;
  const int band = position / band_tiles;
  const int inside = position - band * band_tiles;
  const int left = tiles_m - band * swizzle;
  const int rows = left < swizzle ? left : swizzle;
  return (band * swizzle + inside % rows) * tiles_n + inside / rows;
}

}  // namespace ovl
