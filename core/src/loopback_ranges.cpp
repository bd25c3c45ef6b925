#include "loopback_ranges.hpp"

#include <algorithm>

#include "ovl/error.hpp"

namespace ovl::detail {

PlanUnits plan_units(const Problem& p, const Plan& plan) {
  PlanUnits u;
  if (plan.mode == Mode::kSequential) {
    u.row_begin = {0};
    u.row_end = {p.m};
  } else if (plan.mode == Mode::kDecomposed) {
    for (int c = 0; c < plan.chunks; ++c) {
      u.row_begin.push_back(p.m * c / plan.chunks);
      u.row_end.push_back(p.m * (c + 1) / plan.chunks);
    }
  } else {
    const int64_t tn = plan.tiles_n(p);
    int64_t tile = 0;
    for (size_t g = 0; g < plan.tile_groups.size(); ++g) {
      const int64_t tr0 = tile / tn, tr1 = (tile + plan.tile_groups[g]) / tn;
      tile += plan.tile_groups[g];
      u.tile_rows_begin.push_back(int(tr0));
      u.tile_rows_end.push_back(int(tr1));
      u.row_begin.push_back(std::min<int64_t>(tr0 * plan.tile.m, p.m));
      u.row_end.push_back(std::min<int64_t>(tr1 * plan.tile.m, p.m));
      u.expected.push_back(unsigned(plan.tile_groups[g]));
    }
  }
  return u;
}

std::vector<LoopbackRange> loopback_range_table(const Problem& p, const PlanUnits& units, int world) {
  const int w = world;
  const int64_t mb = p.m / w;  // rows of one owner's block (RS output, AG input)
  const size_t count = units.row_begin.size();
  std::vector<LoopbackRange> table(count * size_t(w), LoopbackRange{0, 0, 0});
  for (size_t u = 0; u < count; ++u) {
    const int64_t r0 = units.row_begin[u], r1 = units.row_end[u];
    for (int r = 0; r < w; ++r) {
      LoopbackRange& e = table[u * size_t(w) + size_t(r)];
      if (p.op == Op::kGemmAllReduce) {
        // Owner r reduces the r-th of W equal (16-byte multiple) pieces of the unit's rows.
        const int64_t elems = (r1 - r0) * p.n;
        const int64_t piece = ((elems + w - 1) / w + 7) / 8 * 8;
        const int64_t b0 = std::min(elems, piece * r), b1 = std::min(elems, piece * (r + 1));
        e = {r0 * p.n + b0, r0 * p.n + b0, b1 - b0};
      } else {
        const int64_t a0 = std::max(r0, mb * r), a1 = std::min(r1, mb * (r + 1));
        if (a1 <= a0) continue;
        if (p.op == Op::kGemmReduceScatter) {
          e = {a0 * p.n, (a0 - mb * r) * p.n, (a1 - a0) * p.n};
        } else {
          e = {(a0 - mb * r) * p.k, a0 * p.k, (a1 - a0) * p.k};
        }
      }
    }
  }
  // The movers work in 16-byte vectors (uint4 / bulk copies): every offset and count a multiple of 8 elements.
  for (size_t i = 0; i < table.size(); ++i) {
    const LoopbackRange& e = table[i];
    OVL_CHECK(e.src_offset % 8 == 0 && e.dst_offset % 8 == 0 && e.count % 8 == 0,
              "{}: loopback range (unit {}, owner {}) = {{src {}, dst {}, count {}}} is not in 16-byte vectors",
              p.name(), i / size_t(w), i % size_t(w), e.src_offset, e.dst_offset, e.count);
  }
  return table;
}

LoopbackBufferElements loopback_buffer_elements(const Problem& p, int world) {
  const int64_t mb = p.m / world;
  switch (p.op) {
    case Op::kGemmReduceScatter:
      return {p.m * p.n, mb * p.n};
    case Op::kGemmAllReduce:
      return {p.m * p.n, p.m * p.n};
    case Op::kAllGatherGemm:
      return {mb * p.k, p.m * p.k};
  }
  return {};
}

}  // namespace ovl::detail
