#include "loopback_ranges.hpp"

#include <algorithm>

#include "ovl/error.hpp"

namespace ovl::detail {

std::vector<kernels::LoopbackRange> loopback_range_table(const Problem& p, const std::vector<UnitRows>& units,
                                                         int world) {
  const int w = world;
  const size_t count = units.size();
  std::vector<kernels::LoopbackRange> table(count * size_t(w), kernels::LoopbackRange{0, 0, 0});
  for (size_t u = 0; u < count; ++u) {
    for (int r = 0; r < w; ++r) {
      const OwnerRows o = owner_rows(p, units[u].begin, units[u].end, r);
      if (o.rows() == 0) continue;
      kernels::LoopbackRange& e = table[u * size_t(w) + size_t(r)];
      switch (p.op) {
        case Op::kGemmAllReduce:
          e = {o.begin * p.n, o.begin * p.n, o.rows() * p.n};
          break;
        case Op::kGemmReduceScatter:
          e = {o.begin * p.n, o.block_row * p.n, o.rows() * p.n};
          break;
        case Op::kAllGatherGemm:
          e = {o.block_row * p.k, o.begin * p.k, o.rows() * p.k};
          break;
      }
    }
  }
  // The movers work in 16-byte vectors (uint4 / bulk copies): every offset and count a multiple of 8 elements (16
  // FP8 elements: an AllGather of FP8 A moves bytes).
  const int64_t vector = 16 / dtype_bytes(p.comm_dtype());
  for (size_t i = 0; i < table.size(); ++i) {
    const kernels::LoopbackRange& e = table[i];
    OVL_CHECK(e.src_offset % vector == 0 && e.dst_offset % vector == 0 && e.count % vector == 0,
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
